// CQE compression (cqe_comp_en): the receives of one burst as a title CQE
// and mini CQE arrays, read back the way mlx5e decompresses them.
#include <catch2/catch.hpp>

#include "be.h"
#include "objects/cq.h"
#include "ud_setup.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

constexpr uint32_t kQkey = 0x11111111;

// A UD QP whose receives complete on a compressing CQ (or a plain one:
// mini_format -1), and a sender.
struct CompSetup : UdSetup {
    CqHandle ccq, sendcq;
    QpHandle rx, tx;
    int format;
    explicit CompSetup(int mini_format, unsigned cqe_sz = 0, unsigned log_rq = 7) : format(mini_format) {
        CmdResult r;
        ccq = d.create_cq(8, ceq.eqn, uar, &r, cqe_sz, mini_format);
        REQUIRE(r.status == 0);
        sendcq = d.create_cq(8, ceq.eqn, uar);
        rx = d.create_qp(hca::kQpUd, pd, sendcq.cqn, ccq.cqn, uar, 4, log_rq, &r);
        REQUIRE(r.status == 0);
        d.ud_to_rts(rx, kQkey);
        tx = d.create_qp(hca::kQpUd, pd, sendcq.cqn, rcq.cqn, uar, 8, 4, &r);
        REQUIRE(r.status == 0);
        d.ud_to_rts(tx, kQkey);
    }
    // n datagrams of len + i bytes, posted before the device runs once.
    void burst(unsigned n, uint32_t len) {
        d.run_on_doorbell = false;
        const uint64_t src = buffer(512, 1);
        for (unsigned i = 0; i < n; ++i) {
            d.post_recv(rx, lkey, b.host.alloc(1024, 64), 1024);
        }
        for (unsigned i = 0; i < n; ++i) {
            d.post_ud_send(tx, 5, rx.qpn, kQkey, {{lkey, src, len + i}});
        }
        b.pump();
        d.run_on_doorbell = true;
    }
    unsigned sends = 0;  // send CQEs polled (the send CQ does not compress)
    std::vector<Cqe> poll(unsigned *sessions) {
        while (d.next_cqe(sendcq)) {
            ++sends;
        }
        std::vector<Cqe> all;
        for (auto got = d.next_cqes(ccq, format, sessions); !got.empty(); got = d.next_cqes(ccq, format, sessions)) {
            all.insert(all.end(), got.begin(), got.end());
        }
        return all;
    }
};

// What a decompressed receive CQE must say: RESP_SEND of rx, byte count
// (the 40-byte GRH slot first) and WQE counter.
void check_recv(const Cqe &e, uint32_t qpn, uint32_t bytes, uint16_t wqe) {
    CHECK((e[63] >> 4) == hca::kCqeRespSend);
    CHECK(((e[63] >> 2) & 3) == 0);
    CHECK((hca::load_be32(e.data() + 0x38) & 0xffffff) == qpn);
    CHECK(hca::load_be32(e.data() + 0x2c) == bytes);
    CHECK(hca::load_be16(e.data() + 0x3c) == wqe);
}

}  // namespace

TEST_CASE("a burst of receives is one compressed session, in each mini CQE format", "[cq][comp]") {
    for (const int format : {hca::CqTable::kMiniHash, hca::CqTable::kMiniCsum, hca::CqTable::kMiniCsumStridx}) {
        for (const unsigned cqe_sz : {0u, 1u}) {
            CAPTURE(format, cqe_sz);
            CompSetup s(format, cqe_sz);
            s.burst(11, 20);
            unsigned sessions = 0;
            const auto cqes = s.poll(&sessions);
            REQUIRE(cqes.size() == 11);
            CHECK(sessions == 1);
            for (unsigned i = 0; i < cqes.size(); ++i) {
                check_recv(cqes[i], s.rx.qpn, 40 + 20 + i, static_cast<uint16_t>(i));
            }
            CHECK(s.ccq.ci == 11);
            CHECK(s.sends == 11);
        }
    }
}

TEST_CASE("the session's layout: title at its index, mini CQE arrays at +1 and +8k", "[cq][comp]") {
    CompSetup s(hca::CqTable::kMiniCsum);
    s.burst(17, 8);
    const auto at = [&](uint32_t i) {
        Cqe e;
        s.b.host.read(s.ccq.pages[0] + i * 64, e.data(), 64);
        return e;
    };
    const Cqe title = at(0);
    CHECK(((title[63] >> 2) & 3) == 3);                // MLX5_COMPRESSED
    CHECK((title[63] & 1) == 0);                       // first lap
    CHECK(hca::load_be32(title.data() + 0x2c) == 17);  // the session's CQEs
    // Array 0 (CQEs 0-7) at index 1, array 1 (8-15) at 8, array 2 (16) at 16.
    CHECK(hca::load_be32(at(1).data() + 4) == 48);
    CHECK(hca::load_be32(at(1).data() + 7 * 8 + 4) == 55);
    CHECK(hca::load_be32(at(8).data() + 4) == 56);
    CHECK(hca::load_be32(at(16).data() + 4) == 64);
    CHECK(hca::load_be32(at(16).data() + 8 + 4) == 0);  // nothing after the last
    // The indexes between are not written: still invalid.
    CHECK((at(2)[63] >> 4) == 0xf);
    CHECK((at(17)[63] >> 4) == 0xf);
    unsigned sessions = 0;
    CHECK(s.poll(&sessions).size() == 17);
}

TEST_CASE("one CQE per device run, or a CQE that does not match, is written plain", "[cq][comp]") {
    CompSetup s(hca::CqTable::kMiniHash);
    const uint64_t src = s.buffer(64, 3);
    for (unsigned i = 0; i < 3; ++i) {
        s.d.post_recv(s.rx, s.lkey, s.b.host.alloc(256, 64), 256);
        s.d.post_ud_send(s.tx, 5, s.rx.qpn, kQkey, {{s.lkey, src, 16}}, false);  // runs the device
    }
    unsigned sessions = 0;
    auto cqes = s.poll(&sessions);
    CHECK(cqes.size() == 3);
    CHECK(sessions == 0);
    // With immediate data the opcode differs: the session ends there.
    s.d.run_on_doorbell = false;
    for (unsigned i = 0; i < 4; ++i) {
        s.d.post_recv(s.rx, s.lkey, s.b.host.alloc(256, 64), 256);
        s.d.post_ud_send(s.tx, 5, s.rx.qpn, kQkey, {{s.lkey, src, 16}}, false, {}, false, {}, i == 2, 7);
    }
    s.b.pump();
    cqes = s.poll(&sessions);
    REQUIRE(cqes.size() == 4);
    CHECK(sessions == 1);  // SEND, SEND | SEND_IMM | SEND: one session of two, two single CQEs
    CHECK((cqes[2][63] >> 4) == hca::kCqeRespSendImm);
    CHECK(hca::load_be32(cqes[2].data() + 0x24) == 7);
}

TEST_CASE("a session ends with its run and asks for no bottom half of its own", "[cq][comp]") {
    // The same burst on a plain and a compressing CQ takes the same number
    // of device runs: the end of a run writes its sessions.
    unsigned runs[2] = {};
    for (const int format : {-1, static_cast<int>(hca::CqTable::kMiniCsum)}) {
        CompSetup s(format);
        s.d.run_on_doorbell = false;
        const uint64_t src = s.buffer(64, 3);
        for (unsigned i = 0; i < 6; ++i) {
            s.d.post_recv(s.rx, s.lkey, s.b.host.alloc(256, 64), 256);
            s.d.post_ud_send(s.tx, 5, s.rx.qpn, kQkey, {{s.lkey, src, 16}});
        }
        unsigned &n = runs[format < 0 ? 0 : 1];
        for (; s.b.host.scheduled && n < 100; ++n) {
            s.b.host.scheduled = false;
            s.b.dev.run();
        }
        unsigned sessions = 0;
        CHECK(s.poll(&sessions).size() == 6);
        CHECK(sessions == (format < 0 ? 0u : 1u));
    }
    CHECK(runs[0] >= 1);
    CHECK(runs[1] == runs[0]);
}

TEST_CASE("a session holds at most cqe_compression_max_num CQEs", "[cq][comp]") {
    CompSetup s(hca::CqTable::kMiniCsumStridx);
    s.burst(hca::CqTable::kMaxSession + 6, 4);
    unsigned sessions = 0;
    const auto cqes = s.poll(&sessions);
    REQUIRE(cqes.size() == hca::CqTable::kMaxSession + 6);
    CHECK(sessions == 2);
    CHECK(s.sends == hca::CqTable::kMaxSession + 6);
    for (unsigned i = 0; i < cqes.size(); ++i) {
        check_recv(cqes[i], s.rx.qpn, 44 + i, static_cast<uint16_t>(i));
    }
}

TEST_CASE("an armed CQ's event follows its CQEs in memory", "[cq][comp]") {
    CompSetup s(hca::CqTable::kMiniCsum);
    s.d.cq_arm(s.ccq);
    s.burst(5, 10);
    // The event came at the first CQE: it was written alone, before it; the
    // four after it are one session.
    const auto eqe = s.d.next_eqe(s.ceq);
    REQUIRE(eqe);
    CHECK((*eqe)[1] == hca::kEventComp);
    unsigned sessions = 0;
    const auto cqes = s.poll(&sessions);
    CHECK(cqes.size() == 5);
    CHECK(sessions == 1);
}

TEST_CASE("sessions wrap the ring; QUERY_CQ reports the compression", "[cq][comp]") {
    CompSetup s(hca::CqTable::kMiniCsum, 0, 8);
    unsigned sessions = 0;
    uint32_t total = 0;
    for (unsigned round = 0; round < 12; ++round) {
        s.burst(50, 1);
        const auto cqes = s.poll(&sessions);
        REQUIRE(cqes.size() == 50);
        for (unsigned i = 0; i < cqes.size(); ++i) {
            check_recv(cqes[i], s.rx.qpn, 41 + i, static_cast<uint16_t>(total + i));
        }
        total += 50;
    }
    CHECK(sessions >= 12);  // 600 CQEs through a ring of 256
    CHECK(s.sends == 600);
    CHECK(s.ccq.ci == 600);
    auto in = Driver::inbox(hca::kOpQueryCq, 0, 16);
    ifc::set(in.data(), ifc::query_cq_in::cqn, s.ccq.cqn);
    const auto q = s.d.exec(in, ifc::query_cq_out::size_bytes);
    REQUIRE(q.status == 0);
    CHECK(q.get(ifc::in(ifc::query_cq_out::cq_context, ifc::cqc::cqe_comp_en)) == 1);
    CHECK(q.get(ifc::in(ifc::query_cq_out::cq_context, ifc::cqc::mini_cqe_res_format)) == 1);
    CHECK(q.get(ifc::in(ifc::query_cq_out::cq_context, ifc::cqc::producer_counter)) == 600);
}

TEST_CASE("CREATE_CQ refuses a reserved mini CQE format and the enhanced layout", "[cq][comp]") {
    UdSetup s;
    CmdResult r;
    s.d.create_cq(4, s.ceq.eqn, s.uar, &r, 0, 2);
    CHECK(r.status == 0x03);
    s.d.create_cq(4, s.ceq.eqn, s.uar, &r, 0, hca::CqTable::kMiniCsum, 1);
    CHECK(r.status == 0x03);
    s.d.create_cq(4, s.ceq.eqn, s.uar, &r, 2, hca::CqTable::kMiniCsum);  // padded 128-byte CQEs
    CHECK(r.status == 0);
}

TEST_CASE("what a mini CQE does not carry must match the title", "[cq][comp]") {
    // CQEs posted to the CQ directly, each pair differing in the RSS hash or
    // in the checksum: the hash format carries the hash, the others the
    // checksum; a pair that differs in what its format does not carry is
    // written as two plain CQEs.
    for (const int format : {hca::CqTable::kMiniHash, hca::CqTable::kMiniCsum}) {
        for (const size_t at : {size_t{12}, size_t{20}}) {  // rss_hash_result, check_sum
            CAPTURE(format, at);
            CompSetup s(format);
            for (uint16_t i = 0; i < 2; ++i) {
                hca::Cqe64 c{};
                c.op_own = hca::kCqeRespSend << 4;
                c.sop_drop_qpn.set(s.rx.qpn);
                c.wqe_counter.set(i);
                c.byte_cnt.set(100 + i);
                reinterpret_cast<uint8_t *>(&c)[at] = static_cast<uint8_t>(i + 1);
                REQUIRE(s.b.dev.cqs.post(s.ccq.cqn, c, false));
            }
            s.b.dev.cqs.flush_sessions();
            unsigned sessions = 0;
            const auto cqes = s.poll(&sessions);
            REQUIRE(cqes.size() == 2);
            const bool carried = (format == hca::CqTable::kMiniHash) == (at == 12);
            CHECK(sessions == (carried ? 1u : 0u));
            for (unsigned i = 0; i < 2; ++i) {
                CHECK(cqes[i][at] == i + 1);  // each CQE keeps its own value either way
                CHECK(hca::load_be32(cqes[i].data() + 0x2c) == 100 + i);
            }
        }
    }
}
