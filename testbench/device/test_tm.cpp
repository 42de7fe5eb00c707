// Tag matching between two devices cabled back to back: a tag-matching
// XRQ on b with its command QP and an RC QP without a send queue, a plain
// RC QP on a. APPEND/REMOVE/NOP and their completions, EAGER messages
// matched into tagged buffers, unexpected and NO_TAG messages into XRQ
// receive WQEs, the phase counts that keep tags appended out of sync from
// matching, rendezvous (the device's READ and FIN), bad list operations.
#include <catch2/catch.hpp>

#include <cstring>

#include "datapath/tm.h"
#include "expect.h"
#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

constexpr unsigned kLogList = 4;  // 16 entries

struct TmPair {
    Wire w;
    Node a{w.a, 1};
    Node b{w.b, 2};
    uint32_t xrqn = 0;
    uint64_t xbuf = 0, xdbr = 0;
    uint16_t xposted = 0;
    QpHandle qa, qb, cmd;
    uint16_t next_free = 1;  // software's free entry after the one the device appends at

    TmPair() {
        Bench &bb = b.d.bench();
        xbuf = bb.host.alloc(32 * 64, 4096);
        xdbr = bb.host.alloc(64, 64);
        for (unsigned i = 0; i < 32; ++i) {
            uint8_t next[4] = {0, 0, 0, 0};
            hca::store_be16(next + 2, static_cast<uint16_t>((i + 1) % 32));
            bb.host.write(xbuf + i * 64, next, 4);
        }
        auto in = Driver::inbox(hca::kOpCreateXrq, 0, ifc::create_xrq_in::size_bytes + 8);
        const auto x = ifc::create_xrq_in::xrq_context;
        const auto wq = ifc::in(x, ifc::xrqc::wq);
        ifc::set(in.data(), ifc::in(x, ifc::xrqc::topology), hca::kXrqTagMatching);
        ifc::set(in.data(), ifc::in(x, ifc::xrqc::offload), hca::kXrqOffloadRndv);
        ifc::set(in.data(),
                 ifc::in(ifc::in(x, ifc::xrqc::tag_matching_topology_context),
                         ifc::tag_matching_topology_context::log_matching_list_sz),
                 kLogList);
        ifc::set(in.data(), ifc::in(x, ifc::xrqc::cqn), b.rcq.cqn);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_sz), 5);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_stride), 6);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::pd), b.pd);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::dbr_addr), xdbr);
        hca::store_be64(in.data() + ifc::create_xrq_in::size_bytes, xbuf);
        auto r = b.d.exec(in, 16);
        REQUIRE(r.status == 0);
        xrqn = static_cast<uint32_t>(r.get(ifc::create_xrq_out::xrqn));
        CmdResult res;
        b.d.qp_fill = [](std::vector<uint8_t> &q) {
            ifc::set(q.data(), ifc::in(ifc::create_qp_in::qpc, ifc::qpc::no_sq), 1);
            ifc::set(q.data(), ifc::in(ifc::create_qp_in::qpc, ifc::qpc::offload_type), 1);
        };
        qb = b.d.create_qp(hca::kQpRc, b.pd, b.scq.cqn, b.rcq.cqn, b.uar, 0, 0, &res, hca::kRqSrq, xrqn);
        REQUIRE(res.status == 0);
        cmd = b.d.create_qp(hca::kQpRc, b.pd, b.rcq.cqn, b.rcq.cqn, b.uar, 6, 0, &res, hca::kRqSrq, xrqn);
        REQUIRE(res.status == 0);
        qa = a.d.create_qp(hca::kQpRc, a.pd, a.scq.cqn, a.rcq.cqn, a.uar, 6, 6, &res);
        REQUIRE(res.status == 0);
        a.d.connect_qp(qa, qb.qpn, 2);
        b.d.connect_qp(qb, qa.qpn, 1);
        b.d.connect_qp(cmd, cmd.qpn, 2);  // loopback, as libmlx5 makes it
    }

    // A list operation on the command QP (libmlx5's mlx5_post_srq_ops()).
    void list_op(uint8_t op, uint16_t index, uint64_t tag = 0, uint64_t mask = 0, uint64_t addr = 0, uint32_t len = 0,
                 bool cqe = true, int sw_cnt = -1) {
        std::vector<uint8_t> body(sizeof(hca::TmSeg));
        body[0] = static_cast<uint8_t>(op << 4);
        body[1] = static_cast<uint8_t>((cqe ? hca::kTmFlagCqeReq : 0) | (sw_cnt >= 0 ? hca::kTmFlagSwCnt : 0));
        hca::store_be16(body.data() + 2, index);
        hca::store_be16(body.data() + 6, static_cast<uint16_t>(sw_cnt < 0 ? 0 : sw_cnt));
        hca::store_be64(body.data() + 16, tag);
        hca::store_be64(body.data() + 24, mask);
        if (op == hca::kTmOpAppend) {
            uint8_t d[16];
            hca::store_be32(d, len);
            hca::store_be32(d + 4, len ? b.mr.key : hca::kInvalidLkey);
            hca::store_be64(d + 8, addr);
            body.insert(body.end(), d, d + 16);
        }
        b.d.post_raw(cmd, hca::kWqeTagMatching, 0, body, false);
    }
    // APPEND at the device's append index; returns that entry.
    uint16_t append(uint64_t tag, uint64_t addr, uint32_t len, int sw_cnt = -1) {
        const uint16_t entry = static_cast<uint16_t>(next_free - 1);
        list_op(hca::kTmOpAppend, next_free++, tag, ~uint64_t{0}, addr, len, true, sw_cnt);
        return entry;
    }
    void post_xrq(uint64_t addr, uint32_t len) {
        uint8_t d[16];
        hca::store_be32(d, len);
        hca::store_be32(d + 4, b.mr.key);
        hca::store_be64(d + 8, addr);
        b.d.bench().host.write(xbuf + (xposted % 32) * 64 + 16, d, 16);
        ++xposted;
        uint8_t db[4];
        hca::store_be32(db, xposted);
        b.d.bench().host.write(xdbr, db, 4);
    }
    // a SENDs a TMH (opcode, tag) followed by n pattern bytes.
    void send_tm(uint8_t tmh_op, uint64_t tag, uint32_t n, uint8_t seed, std::vector<uint8_t> extra = {}) {
        std::vector<uint8_t> hdr(hca::kTmhLen);
        hdr[0] = tmh_op;
        hca::store_be32(hdr.data() + 4, 0xc0ffee);
        hca::store_be64(hdr.data() + 8, tag);
        hdr.insert(hdr.end(), extra.begin(), extra.end());
        std::memcpy(a.mem(a.mr.iova, hdr.size()), hdr.data(), hdr.size());
        a.fill(a.mr.iova + hdr.size(), n, seed);
        a.d.post_send(qa, {.opcode = hca::kWqeSend, .sges = {{a.mr.key, a.mr.iova, uint32_t(hdr.size() + n)}}});
    }
    CmdResult query() {
        auto in = Driver::inbox(hca::kOpQueryXrq, 0, ifc::query_xrq_in::size_bytes);
        ifc::set(in.data(), ifc::query_xrq_in::xrqn, xrqn);
        return b.d.exec(in, ifc::query_xrq_out::size_bytes);
    }
    uint64_t tmc(const CmdResult &r, ifc::Field f) {
        return r.get(ifc::in(ifc::in(ifc::query_xrq_out::xrq_context, ifc::xrqc::tag_matching_topology_context), f));
    }
};

uint8_t app(const Cqe &c) {
    return c[0x28];
}
uint8_t app_op(const Cqe &c) {
    return c[0x29];
}
uint16_t app_info(const Cqe &c) {
    return hca::load_be16(c.data() + 0x2a);
}
uint64_t cqe_tag(const Cqe &c) {
    return hca::load_be64(c.data() + 8);
}

}  // namespace

TEST_CASE("TM: APPEND and an EAGER message matched into the tagged buffer without its TMH", "[tm]") {
    TmPair p;
    const uint16_t e = p.append(5, p.b.mr.iova + 4096, 512);
    p.w.pump();
    auto c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeNoPacket);
    CHECK(app(*c) == hca::kCqeAppTagMatching);
    CHECK(app_op(*c) == hca::kTmAppend);
    CHECK(be32(*c, 0) == hca::kTmSuccess);
    CHECK(hca::load_be16(c->data() + 4) == 0);  // hw_phase_cnt
    CHECK(be32(*c, 0x20) == p.xrqn);

    p.send_tm(hca::kTmhEager, 5, 300, 9);
    p.w.pump();
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeRespSend);
    CHECK(app(*c) == hca::kCqeAppTagMatching);
    CHECK(app_op(*c) == hca::kTmConsumedMsg);
    CHECK(app_info(*c) == e);
    CHECK(cqe_tag(*c) == 5);
    CHECK(be32(*c, 4) == 0xc0ffee);  // the TMH's app_ctx
    CHECK(be32(*c, 0x2c) == 300);
    CHECK(p.b.same(p.b.mr.iova + 4096, 300, 9));
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    // The entry is consumed: removing it fails.
    p.list_op(hca::kTmOpRemove, e);
    p.w.pump();
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(app_op(*c) == hca::kTmRemove);
    CHECK(be32(*c, 0) == 0);
}

TEST_CASE("TM: unexpected and NO_TAG messages go whole into XRQ receive WQEs; tags appended out of phase never match",
          "[tm]") {
    TmPair p;
    p.append(7, p.b.mr.iova + 4096, 512);
    p.w.pump();
    REQUIRE(p.b.d.next_cqe(p.b.rcq));
    // Tag 8 is not listed: unexpected, and without a receive WQE an RNR.
    p.send_tm(hca::kTmhEager, 8, 40, 1);
    p.w.pump();
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    p.post_xrq(p.b.mr.iova + 8192, 1024);
    p.w.advance(50'000'000);
    auto c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(app_op(*c) == hca::kTmUnexpected);
    CHECK(hca::load_be16(c->data() + 0x3c) == 0);  // the XRQ WQE
    CHECK(cqe_tag(*c) == 0);                       // the TMH is in the WQE, not the CQE
    CHECK(be32(*c, 0x2c) == 56);
    CHECK(p.b.mem(p.b.mr.iova + 8192, 1)[0] == hca::kTmhEager);  // the TMH too
    CHECK(p.b.same(p.b.mr.iova + 8192 + 16, 40, 1));
    auto q = p.query();
    CHECK(p.tmc(q, ifc::tag_matching_topology_context::hw_phase_cnt) == 1);
    CHECK(p.tmc(q, ifc::tag_matching_topology_context::sw_phase_cnt) == 0);

    // Appended before software reports the unexpected message: listed but
    // not matched, and its completion says the device is one ahead.
    p.append(9, p.b.mr.iova + 12288, 512);
    p.w.pump();
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(hca::load_be16(c->data() + 4) == 1);
    p.post_xrq(p.b.mr.iova + 16384, 1024);
    p.send_tm(hca::kTmhEager, 9, 20, 2);
    p.w.pump();
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(app_op(*c) == hca::kTmUnexpected);
    // In sync again (a NOP reporting 2): a new tag 9 matches, the older one stays.
    p.list_op(hca::kTmOpNop, 0, 0, 0, 0, 0, true, 2);
    const uint16_t e = p.append(9, p.b.mr.iova + 20480, 512);
    p.w.pump();
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(app_op(*c) == hca::kTmNoop);
    REQUIRE(p.b.d.next_cqe(p.b.rcq));
    p.send_tm(hca::kTmhEager, 9, 20, 3);
    p.w.pump();
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(app_op(*c) == hca::kTmConsumedMsg);
    CHECK(app_info(*c) == e);
    CHECK(p.b.same(p.b.mr.iova + 20480, 20, 3));

    // NO_TAG never matches, even a listed tag.
    p.post_xrq(p.b.mr.iova + 24576, 1024);
    p.send_tm(hca::kTmhNoTag, 7, 10, 4);
    p.w.pump();
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(app_op(*c) == hca::kTmNoTag);
    CHECK(p.tmc(p.query(), ifc::tag_matching_topology_context::hw_phase_cnt) == 2);
}

TEST_CASE("TM: a matched rendezvous request: the device READs the payload, completes the tag, sends the FIN", "[tm]") {
    TmPair p;
    const uint16_t e = p.append(0x77, p.b.mr.iova + 16384, 8192);
    p.w.pump();
    REQUIRE(p.b.d.next_cqe(p.b.rcq));
    p.a.fill(p.a.mr.iova + 32768, 6000, 21);
    p.a.d.post_recv(p.qa, p.a.mr.key, p.a.mr.iova + 60000, 64);  // for the FIN
    std::vector<uint8_t> rvh(hca::kRvhLen + 32);
    hca::store_be64(rvh.data(), p.a.mr.iova + 32768);
    hca::store_be32(rvh.data() + 8, p.a.mr.key);
    hca::store_be32(rvh.data() + 12, 6000);
    p.send_tm(hca::kTmhRndv, 0x77, 0, 0, rvh);
    p.w.pump();
    auto c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeNoPacket);
    CHECK(app_op(*c) == hca::kTmConsumed);
    CHECK(app_info(*c) == e);
    CHECK(cqe_tag(*c) == 0x77);
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeRespSend);
    CHECK(app_op(*c) == hca::kTmExpected);
    CHECK(app_info(*c) == e);
    CHECK(cqe_tag(*c) == 0);  // only the match's CQE carries the TMH
    CHECK(be32(*c, 0x2c) == 6000);
    CHECK(p.b.same(p.b.mr.iova + 16384, 6000, 21));
    auto f = p.a.d.next_cqe(p.a.rcq);
    REQUIRE(f);
    CHECK(op(*f) == hca::kCqeRespSend);
    CHECK(be32(*f, 0x2c) == 32);
    CHECK(p.a.mem(p.a.mr.iova + 60000, 1)[0] == hca::kTmhFin);
    CHECK(hca::load_be64(p.a.mem(p.a.mr.iova + 60000 + 8, 8)) == 0x77);
    CHECK(hca::load_be64(p.a.mem(p.a.mr.iova + 60016, 8)) == p.a.mr.iova + 32768);
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    CHECK(p.w.b.dev.qps.find(p.qb.qpn)->rc.pending.empty());

    // A buffer smaller than the payload gets the request's headers.
    const uint16_t e2 = p.append(0x78, p.b.mr.iova + 40960, 1024);
    p.w.pump();
    REQUIRE(p.b.d.next_cqe(p.b.rcq));
    p.send_tm(hca::kTmhRndv, 0x78, 0, 0, rvh);
    p.w.pump();
    c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(app_op(*c) == hca::kTmConsumedMsgSwRndv);
    CHECK(app_info(*c) == e2);
    CHECK(be32(*c, 0x2c) == 64);
    CHECK(p.b.mem(p.b.mr.iova + 40960, 1)[0] == hca::kTmhRndv);
    CHECK(!p.b.d.next_cqe(p.b.rcq));
}

TEST_CASE("TM: bad list operations fail the command QP's WQE; QUERY_XRQ; a TM WQE elsewhere", "[tm]") {
    TmPair p;
    auto q = p.query();
    REQUIRE(q.status == 0);
    CHECK(q.get(ifc::in(ifc::query_xrq_out::xrq_context, ifc::xrqc::topology)) == hca::kXrqTagMatching);
    CHECK(p.tmc(q, ifc::tag_matching_topology_context::log_matching_list_sz) == kLogList);
    // APPEND naming a next entry beyond the list.
    p.list_op(hca::kTmOpAppend, 1u << kLogList, 1, ~uint64_t{0}, p.b.mr.iova, 64);
    p.w.pump();
    auto c = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReqErr);
    CHECK((*c)[0x37] == hca::kSyndLocalQpOp);
    CHECK(p.w.b.dev.qps.find(p.cmd.qpn)->state == hca::QpState::Err);
    // A TAG_MATCHING WQE on a QP without a tag-matching XRQ.
    p.a.d.post_raw(p.qa, hca::kWqeTagMatching, 0, std::vector<uint8_t>(32), false);
    p.w.pump();
    c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReqErr);
    // An XRQ with a list larger than the capability is refused.
    auto in = Driver::inbox(hca::kOpCreateXrq, 0, ifc::create_xrq_in::size_bytes + 8);
    const auto x = ifc::create_xrq_in::xrq_context;
    ifc::set(in.data(), ifc::in(x, ifc::xrqc::topology), hca::kXrqTagMatching);
    ifc::set(in.data(),
             ifc::in(ifc::in(x, ifc::xrqc::tag_matching_topology_context),
                     ifc::tag_matching_topology_context::log_matching_list_sz),
             15);
    CHECK(p.b.d.exec(in, 16).status == uint8_t(hca::Status::BadParam));
}
