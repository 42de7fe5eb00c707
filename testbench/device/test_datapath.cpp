// The UD / QP0 / QP1 data path through the port's loopback: SQ doorbells,
// WQE parsing, gathering and scattering through keys, CQEs, CQ arming,
// multicast, Q_Key/P_Key checks, errors and flushing.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>

#include "be.h"
#include "driver.h"
#include "fw/iseg.h"
#include "iba/mad.h"
#include "ip_packet.h"
#include "ud_setup.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

using Setup = UdSetup;

uint8_t cqe_opcode(const Cqe &c) { return c[63] >> 4; }
uint32_t be32(const Cqe &c, size_t off) { return hca::load_be32(c.data() + off); }

// A send WQE body of an IPoIB offload QP as hw/mlx5/wr.c builds it: the
// datagram segment, the 16-byte pad, the Ethernet segment with the inline
// header (padded to 16 bytes), then the data segments.
std::vector<uint8_t> ipoib_wqe(uint16_t dlid, uint32_t dqpn, uint32_t qkey, uint8_t cs_flags, uint16_t mss,
                               const std::vector<uint8_t> &hdr, const std::vector<Driver::Sge> &sges) {
    std::vector<uint8_t> w(48 + 16);
    hca::store_be32(w.data(), qkey);
    hca::store_be32(w.data() + 8, 0x80000000u | dqpn);
    hca::store_be16(w.data() + 0x0e, dlid);
    w.resize(64 + ((14 + hdr.size() + 15) & ~size_t{15}));
    uint8_t *e = w.data() + 64;
    e[4] = cs_flags;
    hca::store_be16(e + 6, mss);
    hca::store_be16(e + 12, static_cast<uint16_t>(hdr.size()));
    if (!hdr.empty()) {
        std::memcpy(e + 14, hdr.data(), hdr.size());
    }
    for (const auto &g : sges) {
        const size_t at = w.size();
        w.resize(at + 16);
        hca::store_be32(w.data() + at, g.len);
        hca::store_be32(w.data() + at + 4, g.lkey);
        hca::store_be64(w.data() + at + 8, g.addr);
    }
    return w;
}

void set_offload_mode(Driver &d, uint8_t mode) {
    d.qp_fill = [mode](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(ifc::create_qp_in::qpc, ifc::qpc::ulp_stateless_offload_mode), mode);
    };
}

}  // namespace

TEST_CASE("UD send to the port's own LID: receive CQE, GRH area, data, requester CQE", "[dp][ud]") {
    Setup s;
    auto a = s.ud(0x1111);
    auto bq = s.ud(0x2222);
    const uint64_t rbuf = s.b.host.alloc(40 + 256, 64);
    s.d.post_recv(bq, s.lkey, rbuf, 40 + 256);
    const uint64_t sbuf = s.buffer(200, 7);
    s.d.post_ud_send(a, 5, bq.qpn, 0x2222, {{s.lkey, sbuf, 120}, {s.lkey, sbuf + 120, 80}});

    auto sc = s.d.next_cqe(s.scq);
    REQUIRE(sc);
    CHECK(cqe_opcode(*sc) == hca::kCqeReq);
    CHECK((be32(*sc, 0x38) & 0xffffff) == a.qpn);
    CHECK(be32(*sc, 0x38) >> 24 == hca::kWqeSend);
    CHECK(hca::load_be16(sc->data() + 0x3c) == 0);
    auto rc = s.d.next_cqe(s.rcq);
    REQUIRE(rc);
    CHECK(cqe_opcode(*rc) == hca::kCqeRespSend);
    CHECK(be32(*rc, 0x2c) == 40 + 200);                // byte_cnt includes the GRH area
    CHECK((be32(*rc, 0x18) & 0xffffff) == a.qpn);      // source QP
    CHECK((be32(*rc, 0x18) >> 28 & 3) == 0);           // no GRH
    CHECK(hca::load_be16(rc->data() + 0x16) == 5);     // SLID
    CHECK((be32(*rc, 0x38) & 0xffffff) == bq.qpn);
    for (size_t i = 0; i < 200; ++i) {
        REQUIRE(s.b.host.mem(rbuf + 40 + i, 1)[0] == static_cast<uint8_t>(7 + i));
    }
    CHECK(!s.d.next_cqe(s.rcq));
}

TEST_CASE("CQEs carry the free-running clock of their completion; error CQEs their syndromes", "[dp][ud]") {
    Setup s;
    auto a = s.ud(0x1111);
    auto bq = s.ud(0x2222);
    // Above 32 bits, so both halves of the timestamp are seen.
    s.b.host.clock = 0x1234'5678'9abcLL;
    const uint64_t rbuf = s.b.host.alloc(40 + 64, 64);
    s.d.post_recv(bq, s.lkey, rbuf, 40 + 64);
    const uint64_t sbuf = s.buffer(32, 1);
    s.d.post_ud_send(a, 5, bq.qpn, 0x2222, {{s.lkey, sbuf, 32}});
    auto sc = s.d.next_cqe(s.scq);
    auto rc = s.d.next_cqe(s.rcq);
    REQUIRE(sc);
    REQUIRE(rc);
    // internal_timer reads the same clock (iseg 0x1000/0x1004).
    CHECK(hca::load_be64(sc->data() + 0x30) == 0x1234'5678'9abcULL);
    CHECK(hca::load_be64(rc->data() + 0x30) == 0x1234'5678'9abcULL);
    uint8_t timer[8];
    s.b.dev.mmio_read(hca::InitSeg::kInternalTimerH, timer, 8);
    CHECK(hca::load_be64(timer) == 0x1234'5678'9abcULL);

    // A receive buffer too small: the error CQE keeps vendor_err_synd and
    // syndrome in bytes 0x36/0x37, where a timestamp's low bytes would be.
    s.d.post_recv(bq, s.lkey, rbuf, 40 + 8);
    s.d.post_ud_send(a, 5, bq.qpn, 0x2222, {{s.lkey, sbuf, 32}});
    REQUIRE(s.d.next_cqe(s.scq));
    auto err = s.d.next_cqe(s.rcq);
    REQUIRE(err);
    CHECK(cqe_opcode(*err) == hca::kCqeRespErr);
    CHECK((*err)[0x37] == hca::kSyndLocalLength);
    CHECK((*err)[0x36] == 0x68);
    CHECK(hca::load_be32(err->data() + 0x30) == 0);
}

TEST_CASE("UD with GRH, SEND_IMM, inline data, doorbell in two halves", "[dp][ud]") {
    Setup s;
    auto a = s.ud(0x10);
    auto bq = s.ud(0x20);
    const uint64_t rbuf = s.b.host.alloc(512, 64);
    s.d.post_recv(bq, s.lkey, rbuf, 512);
    std::vector<uint8_t> inl(37);
    std::iota(inl.begin(), inl.end(), 100);
    std::array<uint8_t, 16> dgid{0xfe, 0x80};
    s.d.post_ud_send(a, 5, bq.qpn, 0x20, {}, true, inl, true, dgid, true, 0xabcd1234, true);
    auto rc = s.d.next_cqe(s.rcq);
    REQUIRE(rc);
    CHECK(cqe_opcode(*rc) == hca::kCqeRespSendImm);
    CHECK(be32(*rc, 0x24) == 0xabcd1234);
    CHECK((be32(*rc, 0x18) >> 28 & 3) == 1);  // GRH present
    CHECK(be32(*rc, 0x2c) == 40 + 37);
    // The GRH was written into the first 40 bytes: IPVer 6, DGID as sent.
    CHECK(s.b.host.mem(rbuf, 1)[0] >> 4 == 6);
    CHECK(s.b.host.mem(rbuf + 24, 1)[0] == 0xfe);
    for (size_t i = 0; i < inl.size(); ++i) {
        REQUIRE(s.b.host.mem(rbuf + 40 + i, 1)[0] == inl[i]);
    }
}

TEST_CASE("Q_Key mismatch and missing receive WQE drop, a short buffer completes in error", "[dp][ud]") {
    Setup s;
    auto a = s.ud(1);
    auto bq = s.ud(2);
    const uint64_t sbuf = s.buffer(300, 1);
    s.d.post_ud_send(a, 5, bq.qpn, 2, {{s.lkey, sbuf, 64}});  // no receive posted
    CHECK(!s.d.next_cqe(s.rcq));
    const uint64_t rbuf = s.b.host.alloc(4096, 64);
    s.d.post_recv(bq, s.lkey, rbuf, 4096);
    s.d.post_ud_send(a, 5, bq.qpn, 3, {{s.lkey, sbuf, 64}});  // wrong Q_Key
    CHECK(!s.d.next_cqe(s.rcq));
    CHECK(s.b.dev.port1.counters().qkey_violations == 1);
    s.d.post_ud_send(a, 5, bq.qpn, 0x80000000, {{s.lkey, sbuf, 64}});  // "use my Q_Key" (1) != 2
    CHECK(!s.d.next_cqe(s.rcq));
    // The WQE is still there: a correct send lands in it.
    s.d.post_ud_send(a, 5, bq.qpn, 2, {{s.lkey, sbuf, 64}});
    REQUIRE(s.d.next_cqe(s.rcq));
    s.d.post_recv(bq, s.lkey, rbuf, 60);  // too small for 40 + 64
    s.d.post_ud_send(a, 5, bq.qpn, 2, {{s.lkey, sbuf, 64}});
    auto e = s.d.next_cqe(s.rcq);
    REQUIRE(e);
    CHECK(cqe_opcode(*e) == hca::kCqeRespErr);
    CHECK((*e)[0x37] == hca::kSyndLocalLength);
    CHECK((*e)[0x36] == 0x68);  // vendor_err_synd
}

TEST_CASE("multicast: every attached QP receives, the sender's own included", "[dp][mcast]") {
    Setup s;
    auto a = s.ud(0x0b1b);
    auto bq = s.ud(0x0b1b);
    std::array<uint8_t, 16> mgid{0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    for (uint32_t qpn : {a.qpn, bq.qpn}) {
        auto att = Driver::inbox(hca::kOpAttachToMcg, 0, ifc::attach_to_mcg_in::size_bytes);
        ifc::set(att.data(), ifc::attach_to_mcg_in::qpn, qpn);
        std::memcpy(att.data() + 16, mgid.data(), 16);
        REQUIRE(s.d.exec(att, 16).status == 0);
    }
    const uint64_t ra = s.b.host.alloc(512, 64), rb = s.b.host.alloc(512, 64);
    s.d.post_recv(a, s.lkey, ra, 512);
    s.d.post_recv(bq, s.lkey, rb, 512);
    const uint64_t sbuf = s.buffer(100, 3);
    s.d.post_ud_send(a, 0xc000, 0xffffff, 0x0b1b, {{s.lkey, sbuf, 100}}, true, {}, true, mgid);
    int got = 0;
    while (auto c = s.d.next_cqe(s.rcq)) {
        CHECK(cqe_opcode(*c) == hca::kCqeRespSend);
        CHECK((be32(*c, 0x18) & 0xffffff) == a.qpn);
        ++got;
    }
    CHECK(got == 2);
    CHECK(s.b.host.mem(rb + 24, 1)[0] == 0xff);  // DGID in the GRH area

    // A QP created with block_lb_mc (IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK):
    // its multicast sends are not looped back to this HCA's QPs.
    s.d.qp_fill = [](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(ifc::create_qp_in::qpc, ifc::qpc::block_lb_mc), 1);
    };
    auto blk = s.ud(0x0b1b);
    REQUIRE(s.b.dev.qps.find(blk.qpn)->block_lb_mc);
    while (s.d.next_cqe(s.scq)) {
    }
    s.d.post_recv(a, s.lkey, ra, 512);
    s.d.post_recv(bq, s.lkey, rb, 512);
    s.d.post_ud_send(blk, 0xc000, 0xffffff, 0x0b1b, {{s.lkey, sbuf, 100}}, true, {}, true, mgid);
    CHECK(!s.d.next_cqe(s.rcq));
    CHECK(s.d.next_cqe(s.scq));  // the send itself completes
}

TEST_CASE("IPoIB offload QP: checksums on send, LSO cut into datagrams, checksums verified on receive",
          "[dp][ipoib]") {
    Setup s;
    constexpr uint32_t kQkey = 0xb1b;
    constexpr uint8_t kL3L4 = hca::ipoib::kCsumL3 | hca::ipoib::kCsumL4;
    constexpr uint8_t kOk = hca::ipoib::kCqeL3Ok | hca::ipoib::kCqeL4Ok;
    // Mode 1 on UD only, and no other mode.
    CmdResult r;
    set_offload_mode(s.d, 1);
    s.d.create_qp(hca::kQpRc, s.pd, s.scq.cqn, s.rcq.cqn, s.uar, 4, 4, &r);
    CHECK(r.status == static_cast<uint8_t>(hca::Status::BadParam));
    set_offload_mode(s.d, 2);
    s.d.create_qp(hca::kQpUd, s.pd, s.scq.cqn, s.rcq.cqn, s.uar, 4, 4, &r);
    CHECK(r.status == static_cast<uint8_t>(hca::Status::BadParam));
    set_offload_mode(s.d, 1);
    auto a = s.ud(kQkey);
    set_offload_mode(s.d, 1);
    auto bq = s.ud(kQkey);
    auto plain = s.ud(kQkey);
    REQUIRE(s.b.dev.qps.find(a.qpn)->ipoib_offload);
    // ipoib's receive buffers: the GRH area, then up to the IB MTU.
    constexpr uint32_t kBuf = 40 + 2048;
    const uint64_t rbuf = s.b.host.alloc(8 * kBuf, 64);
    auto recv = [&](int n) {
        for (int i = 0; i < n; ++i) {
            s.d.post_recv(bq, s.lkey, rbuf + uint64_t(i) * kBuf, kBuf);
        }
    };
    auto put = [&](const std::vector<uint8_t> &bytes) {
        const uint64_t at = s.b.host.alloc(bytes.size(), 64);
        s.b.host.write(at, bytes.data(), bytes.size());
        return at;
    };
    auto received = [&](int i, size_t len) {
        const uint8_t *m = s.b.host.mem(rbuf + uint64_t(i) * kBuf + 40, len);
        return std::vector<uint8_t>(m, m + len);
    };

    SECTION("a SEND with checksums asked for: they are right on arrival, and the CQE says so") {
        for (bool v6 : {false, true}) {
            for (uint8_t proto : {hca::ipoib::kProtoTcp, hca::ipoib::kProtoUdp}) {
                CAPTURE(v6, proto);
                const auto pkt = ipoib_packet(v6, proto, 300);  // checksums zero
                recv(1);
                s.d.post_raw(a, hca::kWqeSend, 0, ipoib_wqe(5, bq.qpn, kQkey, kL3L4, 0, {},
                                                             {{s.lkey, put(pkt), static_cast<uint32_t>(pkt.size())}}));
                auto rc = s.d.next_cqe(s.rcq);
                REQUIRE(rc);
                CHECK(cqe_opcode(*rc) == hca::kCqeRespSend);
                CHECK(be32(*rc, 0x2c) == 40 + pkt.size());
                CHECK((*rc)[0x1c] == kOk);
                const auto got = received(0, pkt.size());
                if (!v6) {
                    CHECK(ref_ipv4_ok(got));
                }
                CHECK(ref_l4_ok(got, v6));
                REQUIRE(s.d.next_cqe(s.scq));
            }
        }
    }
    SECTION("a SEND without: the checksums stay wrong and the CQE does not vouch for them") {
        const auto pkt = ipoib_packet(false, hca::ipoib::kProtoTcp, 100);
        recv(1);
        s.d.post_raw(a, hca::kWqeSend, 0,
                     ipoib_wqe(5, bq.qpn, kQkey, 0, 0, {}, {{s.lkey, put(pkt), static_cast<uint32_t>(pkt.size())}}));
        auto rc = s.d.next_cqe(s.rcq);
        REQUIRE(rc);
        CHECK((*rc)[0x1c] == 0);
        CHECK(received(0, pkt.size()) == pkt);
    }
    SECTION("LSO: one WQE, one datagram per MSS, the stream intact, one requester CQE") {
        const size_t data = 5000;
        const uint16_t mss = 1988;
        const auto whole = ipoib_packet(false, hca::ipoib::kProtoTcp, data, 9);
        const size_t hlen = whole.size() - data;
        const std::vector<uint8_t> hdr(whole.begin(), whole.begin() + static_cast<long>(hlen));
        const std::vector<uint8_t> payload(whole.begin() + static_cast<long>(hlen), whole.end());
        const uint64_t at = put(payload);
        recv(3);
        // Two SGEs that split the data off the MSS boundaries.
        s.d.post_raw(a, hca::kWqeLso, 0, ipoib_wqe(5, bq.qpn, kQkey, kL3L4, mss, hdr,
                                                   {{s.lkey, at, 3000}, {s.lkey, at + 3000, 2000}}));
        std::vector<uint8_t> stream;
        for (int k = 0; k < 3; ++k) {
            auto rc = s.d.next_cqe(s.rcq);
            REQUIRE(rc);
            const size_t chunk = std::min<size_t>(mss, data - k * mss);
            CHECK(be32(*rc, 0x2c) == 40 + hlen + chunk);
            CHECK((*rc)[0x1c] == kOk);
            const auto seg = received(k, hlen + chunk);
            CHECK(hca::load_be32(seg.data() + 24 + 4) == 0xfffff000u + k * mss);
            CHECK(hca::load_be16(seg.data() + 4 + 2) == hlen - 4 + chunk);
            stream.insert(stream.end(), seg.begin() + static_cast<long>(hlen), seg.end());
        }
        CHECK(stream == payload);
        CHECK(!s.d.next_cqe(s.rcq));
        auto sc = s.d.next_cqe(s.scq);
        REQUIRE(sc);
        CHECK(cqe_opcode(*sc) == hca::kCqeReq);
        CHECK(be32(*sc, 0x38) >> 24 == hca::kWqeLso);
        CHECK(!s.d.next_cqe(s.scq));
    }
    SECTION("a bad LSO: an MSS of 0, a header that is not TCP/IP, an MSS past the MTU; LSO on a plain QP") {
        const auto whole = ipoib_packet(false, hca::ipoib::kProtoTcp, 100);
        const std::vector<uint8_t> hdr(whole.begin(), whole.end() - 100);
        const uint64_t at = put(whole);
        auto udp = ipoib_packet(false, hca::ipoib::kProtoUdp, 0);
        struct Bad {
            uint16_t mss;
            std::vector<uint8_t> hdr;
        };
        for (const Bad &bad : {Bad{0, hdr}, Bad{1000, udp}, Bad{4096, hdr}, Bad{1000, {}}}) {
            s.d.post_raw(a, hca::kWqeLso, 0, ipoib_wqe(5, bq.qpn, kQkey, kL3L4, bad.mss, bad.hdr, {{s.lkey, at, 100}}));
            auto sc = s.d.next_cqe(s.scq);
            REQUIRE(sc);
            CHECK(cqe_opcode(*sc) == hca::kCqeReqErr);
            CHECK((*sc)[0x37] == hca::kSyndLocalLength);
            REQUIRE(s.d.modify_qp(hca::kOpSqerr2RtsQp, a.qpn).status == 0);
        }
        s.d.post_raw(plain, hca::kWqeLso, 0, ipoib_wqe(5, bq.qpn, kQkey, kL3L4, 1000, hdr, {{s.lkey, at, 100}}));
        auto sc = s.d.next_cqe(s.scq);
        REQUIRE(sc);
        CHECK(cqe_opcode(*sc) == hca::kCqeReqErr);
        CHECK((*sc)[0x37] == hca::kSyndLocalQpOp);
        CHECK(!s.d.next_cqe(s.rcq));
    }
}

TEST_CASE("QP1 receives report the P_Key, QP0 packets use VL15", "[dp][qp1]") {
    Setup s;
    auto qp1 = s.ud(0x80010000, hca::kQpQp1);
    auto qp0 = s.ud(0, hca::kQpQp0);
    const uint64_t r1 = s.b.host.alloc(512, 64), r0 = s.b.host.alloc(512, 64);
    s.d.post_recv(qp1, s.lkey, r1, 512);
    s.d.post_recv(qp0, s.lkey, r0, 512);
    const uint64_t sbuf = s.buffer(256, 9);
    s.d.post_ud_send(qp1, 5, 1, 0x80010000, {{s.lkey, sbuf, 256}});
    s.d.post_ud_send(qp0, 5, 0, 0, {{s.lkey, sbuf, 256}});
    auto c1 = s.d.next_cqe(s.rcq);
    auto c0 = s.d.next_cqe(s.rcq);
    REQUIRE(c1);
    REQUIRE(c0);
    CHECK((be32(*c1, 0x38) & 0xffffff) == qp1.qpn);  // the HW QPN of QP1
    CHECK((be32(*c1, 0x18) & 0xffffff) == 1);        // source QP 1
    CHECK((be32(*c1, 0x24) & 0xffff) == 0xffff);     // the BTH P_Key
    CHECK((be32(*c0, 0x38) & 0xffffff) == qp0.qpn);
    CHECK((be32(*c0, 0x18) & 0xffffff) == 0);
}

TEST_CASE("a bad lkey: local protection error, UD QP to SQ error, later sends flushed, SQERR2RTS resumes",
          "[dp][err]") {
    Setup s;
    auto a = s.ud(1);
    auto bq = s.ud(2);
    const uint64_t rbuf = s.b.host.alloc(512, 64);
    s.d.post_recv(bq, s.lkey, rbuf, 512);
    s.d.post_recv(a, s.lkey, rbuf, 512);
    s.d.post_ud_send(a, 5, bq.qpn, 2, {{s.lkey ^ 0x100, s.buffer(8, 0), 8}});
    auto e = s.d.next_cqe(s.scq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndLocalProt);
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Sqer);
    CHECK(!s.d.next_cqe(s.rcq));  // the receive queue is not flushed
    s.d.post_ud_send(a, 5, bq.qpn, 2, {{s.lkey, s.buffer(8, 0), 8}});
    e = s.d.next_cqe(s.scq);
    REQUIRE(e);
    CHECK(cqe_opcode(*e) == hca::kCqeReqErr);
    CHECK((*e)[0x37] == hca::kSyndWrFlush);
    CHECK((*e)[0x36] == 0xf9);  // vendor_err_synd
    // A packet to the QP in SQ error is still received.
    s.d.post_ud_send(bq, 5, a.qpn, 1, {{s.lkey, s.buffer(8, 0), 8}});
    REQUIRE(s.d.next_cqe(s.scq));
    e = s.d.next_cqe(s.rcq);
    REQUIRE(e);
    CHECK(cqe_opcode(*e) == hca::kCqeRespSend);
    CHECK(s.d.modify_qp(hca::kOpSqerr2RtsQp, a.qpn).status == 0);
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Rts);
    s.d.post_ud_send(a, 5, bq.qpn, 2, {{s.lkey, s.buffer(8, 0), 8}});
    e = s.d.next_cqe(s.scq);
    REQUIRE(e);
    CHECK(cqe_opcode(*e) == hca::kCqeReq);
    e = s.d.next_cqe(s.rcq);
    REQUIRE(e);
    CHECK(cqe_opcode(*e) == hca::kCqeRespSend);
}

TEST_CASE("a QP moved to error: posted and later WQEs flushed, receives through the record poller",
          "[dp][err]") {
    Setup s;
    auto a = s.ud(1);
    auto bq = s.ud(2);
    const uint64_t rbuf = s.b.host.alloc(512, 64);
    s.d.post_recv(a, s.lkey, rbuf, 512);
    s.d.post_recv(a, s.lkey, rbuf, 512);
    s.d.post_ud_send(a, 5, bq.qpn, 2, {{s.lkey ^ 0x100, s.buffer(8, 0), 8}}, false);  // unsignaled, still reported
    auto e = s.d.next_cqe(s.scq);
    REQUIRE(e);
    CHECK(cqe_opcode(*e) == hca::kCqeReqErr);
    CHECK((*e)[0x37] == hca::kSyndLocalProt);
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Sqer);
    CHECK(s.d.modify_qp(hca::kOp2ErrQp, a.qpn).status == 0);
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Err);
    // Both posted receives flush; a WQE posted later flushes through the doorbell.
    int flushed = 0;
    while (auto c = s.d.next_cqe(s.rcq)) {
        CHECK(cqe_opcode(*c) == hca::kCqeRespErr);
        CHECK((*c)[0x37] == hca::kSyndWrFlush);
        CHECK((*c)[0x36] == 0xf9);  // vendor_err_synd
        ++flushed;
    }
    CHECK(flushed == 2);
    s.d.post_ud_send(a, 5, bq.qpn, 2, {{s.lkey, s.buffer(8, 0), 8}});
    e = s.d.next_cqe(s.scq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndWrFlush);
    CHECK((*e)[0x36] == 0xf9);  // vendor_err_synd
    // A receive posted while in error is flushed by the record poller (no RQ doorbell).
    s.d.post_recv(a, s.lkey, rbuf, 512);
    CHECK(!s.d.next_cqe(s.rcq));
    s.b.advance(5'000'000);
    e = s.d.next_cqe(s.rcq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndWrFlush);
    CHECK((*e)[0x36] == 0xf9);  // vendor_err_synd
    CHECK(hca::load_be16(e->data() + 0x3c) == 2);
    // Left in error with nothing posted, the poll backs off to 64 ms (no
    // timer every 2 ms forever), still sees a late receive, then is quick again.
    const auto ms_until_flushed = [&] {
        for (int ms = 1; ms <= 100; ++ms) {
            s.b.advance(1'000'000);
            if (auto c = s.d.next_cqe(s.rcq)) {
                CHECK((*c)[0x37] == hca::kSyndWrFlush);
                CHECK((*c)[0x36] == 0xf9);  // vendor_err_synd
                return ms;
            }
        }
        return 0;
    };
    s.b.advance(1'000'000'000);
    s.d.post_recv(a, s.lkey, rbuf, 512);
    const int late = ms_until_flushed();
    CHECK(late > 2);  // the poll had backed off
    CHECK(late <= 64);
    s.d.post_recv(a, s.lkey, rbuf, 512);
    const int soon = ms_until_flushed();
    CHECK(soon >= 1);
    CHECK(soon <= 2);  // a flush brings the 2 ms poll back
}

TEST_CASE("CQ arming: one completion EQE per arm, immediate event over pending CQEs", "[dp][cq]") {
    Setup s;
    auto a = s.ud(1);
    auto bq = s.ud(1);
    const uint64_t rbuf = s.b.host.alloc(4096, 64);
    const uint64_t sbuf = s.buffer(16, 0);
    s.d.cq_arm(s.rcq);
    s.b.pump();
    for (int i = 0; i < 3; ++i) {
        s.d.post_recv(bq, s.lkey, rbuf, 4096);
        s.d.post_ud_send(a, 5, bq.qpn, 1, {{s.lkey, sbuf, 16}});
    }
    int comp = 0;
    while (auto e = s.d.next_eqe(s.ceq)) {
        CHECK((*e)[1] == hca::kEventComp);
        if ((hca::load_be32(e->data() + 0x38) & 0xffffff) == s.rcq.cqn) {
            ++comp;
        }
    }
    CHECK(comp == 1);  // disarmed after the first
    REQUIRE(s.d.next_cqe(s.rcq));  // consume one of three
    s.d.eq_doorbell(s.ceq, true);
    s.d.cq_arm(s.rcq);  // two CQEs still pending: event at once
    s.b.pump();
    auto e = s.d.next_eqe(s.ceq);
    REQUIRE(e);
    CHECK((hca::load_be32(e->data() + 0x38) & 0xffffff) == s.rcq.cqn);
}

TEST_CASE("WQEs wrap the send ring, bogus doorbells do no harm", "[dp][sq]") {
    Setup s;
    auto a = s.ud(1);
    auto bq = s.ud(1);
    const uint64_t rbuf = s.b.host.alloc(4096, 64);
    // 16 WQEBBs; each send with 3 SGEs uses 2 WQEBBs; 20 sends wrap the ring.
    for (int i = 0; i < 20; ++i) {
        s.d.post_recv(bq, s.lkey, rbuf, 4096);
        const uint64_t sb = s.buffer(30, static_cast<uint8_t>(i));
        s.d.post_ud_send(a, 5, bq.qpn, 1, {{s.lkey, sb, 10}, {s.lkey, sb + 10, 10}, {s.lkey, sb + 20, 10}});
        auto rc = s.d.next_cqe(s.rcq);
        REQUIRE(rc);
        REQUIRE(be32(*rc, 0x2c) == 70);
        REQUIRE(s.b.host.mem(rbuf + 40 + 29, 1)[0] == static_cast<uint8_t>(i + 29));
        REQUIRE(s.d.next_cqe(s.scq));
    }
    const uint64_t errors = s.b.dev.counters.guest_errors;
    uint8_t db[8] = {0, 0, 0, 0x0a, 0x12, 0x34, 0x56, 0x01};  // QP 0x123456 does not exist
    s.d.bar_write(uint64_t{s.uar} * 4096 + 0x800, db, 8);
    s.d.bar_write(uint64_t{s.uar} * 4096 + 0x910, db, 8);  // BlueFlame continuation without a head
    s.d.bar_write(uint64_t{s.uar + 1} * 4096 + 0x800, db, 8);  // unallocated UAR
    s.b.pump();
    CHECK(s.b.dev.counters.guest_errors >= errors + 3);
    // A doorbell whose producer runs far ahead moves the QP to error.
    s.b.host.write_be32(a.dbr + 4, a.sq_pi + 1000);
    uint8_t real[8];
    hca::store_be32(real, uint32_t{a.sq_pi} << 8 | 0x0a);
    hca::store_be32(real + 4, a.qpn << 8 | 4);
    s.d.bar_write(uint64_t{s.uar} * 4096 + 0x800, real, 8);
    s.b.pump();
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Err);
}

// An unsignalled NOP WQE written at a.sq_pi in the SQ buffer, the doorbell
// record updated; its 64 bytes in w.
TEST_CASE("CQ resize: RESIZE CQE at the producer counter, unpolled CQEs kept, completions go on", "[dp][cq]") {
    Setup s;
    auto a = s.ud(1);
    auto bq = s.ud(1);
    const uint64_t rbuf = s.b.host.alloc(4096, 64);
    auto send = [&](uint8_t tag) {
        s.d.post_recv(bq, s.lkey, rbuf, 4096);
        s.d.post_ud_send(a, 5, bq.qpn, 1, {}, true, {tag, 1, 2, 3});
    };
    // 3 unpolled receive CQEs, then grow the receive CQ from 64 to 256.
    for (uint8_t t = 0; t < 3; ++t) {
        send(t);
    }
    REQUIRE(s.d.resize_cq(s.rcq, 8) == 0);
    CHECK(s.b.dev.cqs.find(s.rcq.cqn)->nent() == 256);
    for (uint8_t t = 3; t < 6; ++t) {
        send(t);
    }
    int n = 0;
    while (auto c = s.d.next_cqe(s.rcq)) {
        CHECK(cqe_opcode(*c) == hca::kCqeRespSend);
        CHECK(be32(*c, 0x2c) == 44);
        ++n;
    }
    CHECK(n == 6);
    // Shrinking below the unpolled count is refused.
    for (uint8_t t = 0; t < 5; ++t) {
        send(t);
    }
    CHECK(s.d.resize_cq(s.rcq, 2) == static_cast<uint8_t>(hca::Status::BadParam));
    CHECK(s.d.resize_cq(s.rcq, 3) == 0);
    n = 0;
    while (s.d.next_cqe(s.rcq)) {
        ++n;
    }
    CHECK(n == 5);
}

TEST_CASE("CQ moderation: one event per max_count CQEs, or after the period", "[dp][cq]") {
    Setup s;
    auto a = s.ud(1);
    auto bq = s.ud(1);
    const uint64_t rbuf = s.b.host.alloc(4096, 64);
    REQUIRE(s.d.moderate_cq(s.rcq, 100, 4) == 0);
    auto events = [&] { return s.b.dev.cqs.find(s.rcq.cqn)->events; };
    s.d.cq_arm(s.rcq);
    for (int i = 0; i < 3; ++i) {
        s.d.post_recv(bq, s.lkey, rbuf, 4096);
        s.d.post_ud_send(a, 5, bq.qpn, 1, {}, false, {1});
    }
    CHECK(events() == 0);  // 3 of 4
    s.d.post_recv(bq, s.lkey, rbuf, 4096);
    s.d.post_ud_send(a, 5, bq.qpn, 1, {}, false, {1});
    CHECK(events() == 1);  // the 4th
    while (s.d.next_cqe(s.rcq)) {
    }
    s.d.cq_arm(s.rcq);
    s.d.post_recv(bq, s.lkey, rbuf, 4096);
    s.d.post_ud_send(a, 5, bq.qpn, 1, {}, false, {1});
    CHECK(events() == 1);
    s.b.advance(150'000);  // the 100 us period expires
    CHECK(events() == 2);
}
