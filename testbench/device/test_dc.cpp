// The dynamically connected transport between two devices cabled back to
// back: DCIs sending SEND, RDMA WRITE, READ and atomics to DCTs through
// their address segments, the DCT's responder contexts (connect, bound,
// eviction), access keys, a DCI moving between DCTs, DRAIN/DESTROY/QUERY_DCT
// and DCT_DRAINED, on-demand paging over DC (a DCI's gather, a DCT's SRQ
// receive; not a DCT's RDMA target).
#include <catch2/catch.hpp>

#include <cstring>

#include "expect.h"
#include "odp_helpers.h"
#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

constexpr uint64_t kKey = 0x0123456789abcdefull;

// An RMP of 2^log entries of 64 bytes (a next segment and one scatter
// entry), linked in a ring, with WQEs posted by post().
struct Rmp {
    Node &n;
    uint32_t rmpn = 0;
    uint64_t buf = 0, dbr = 0;
    unsigned entries = 0;
    uint16_t posted = 0;
    Rmp(Node &node, unsigned log) : n(node), entries(1u << log) {
        Bench &b = n.d.bench();
        buf = b.host.alloc(entries * 64, 4096);
        dbr = b.host.alloc(64, 64);
        for (unsigned i = 0; i < entries; ++i) {
            uint8_t next[4] = {0, 0, 0, 0};
            hca::store_be16(next + 2, static_cast<uint16_t>((i + 1) % entries));
            b.host.write(buf + i * 64, next, 4);
        }
        auto in = Driver::inbox(hca::kOpCreateRmp, 0, ifc::create_rmp_in::size_bytes + 8);
        const auto wq = ifc::in(ifc::create_rmp_in::ctx, ifc::rmpc::wq);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_sz), log);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::log_wq_stride), 6);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::pd), n.pd);
        ifc::set(in.data(), ifc::in(wq, ifc::wq::dbr_addr), dbr);
        hca::store_be64(in.data() + ifc::create_rmp_in::size_bytes, buf);
        auto r = n.d.exec(in, 16);
        REQUIRE(r.status == 0);
        rmpn = static_cast<uint32_t>(r.get(ifc::create_rmp_out::rmpn));
    }
    void post(uint64_t addr, uint32_t len) {
        uint8_t d[16];
        hca::store_be32(d, len);
        hca::store_be32(d + 4, n.mr.key);
        hca::store_be64(d + 8, addr);
        n.d.bench().host.write(buf + (posted % entries) * 64 + 16, d, 16);
        ++posted;
        uint8_t db[4];
        hca::store_be32(db, posted);
        n.d.bench().host.write(dbr, db, 4);
    }
};

CmdResult create_dct(Node &n, uint32_t rmpn, uint64_t key, bool atomics = true, uint32_t counter_set = 0) {
    auto in = Driver::inbox(hca::kOpCreateDct, 0, ifc::create_dct_in::size_bytes);
    const auto c = ifc::create_dct_in::dct_context_entry;
    ifc::set(in.data(), ifc::in(c, ifc::dctc::pd), n.pd);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::srqn_xrqn), rmpn);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::cqn), n.rcq.cqn);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::dc_access_key), key);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::rre), 1);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::rwe), 1);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::rae), atomics);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::atomic_mode), atomics ? 3 : 0);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::min_rnr_nak), 1);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::port), 1);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::mtu), 3);
    ifc::set(in.data(), ifc::in(c, ifc::dctc::counter_set_id), counter_set);
    return n.d.exec(in, ifc::create_dct_out::size_bytes);
}

uint8_t dct_cmd(Node &n, uint16_t opcode, uint32_t dctn) {
    auto in = Driver::inbox(opcode, 0, 16);
    ifc::set(in.data(), ifc::destroy_dct_in::dctn, dctn);
    return n.d.exec(in, 16).status;
}

QpHandle create_dci(Node &n) {
    CmdResult r;
    QpHandle q = n.d.create_qp(hca::kQpDci, n.pd, n.scq.cqn, 0, n.uar, 6, 0, &r, hca::kRqZero);
    REQUIRE(r.status == 0);
    n.d.connect_qp(q, 0, 0);  // a DCI's path comes with each WQE
    return q;
}

// A DCI WQE to the DCT dctn at dlid with access key key.
void post_dc(Node &n, QpHandle &q, uint16_t dlid, uint32_t dctn, uint64_t key, Driver::SendWr wr) {
    wr.dctn = dctn;
    wr.dlid = dlid;
    wr.dc_key = key;
    n.d.post_send(q, wr);
}

struct DcPair {
    Wire w;
    Node a{w.a, 1};
    Node b{w.b, 2};
    Rmp rmp{b, 5};
    uint32_t dctn = 0;
    QpHandle dci;
    DcPair() {
        auto r = create_dct(b, rmp.rmpn, kKey);
        REQUIRE(r.status == 0);
        dctn = static_cast<uint32_t>(r.get(ifc::create_dct_out::dctn));
        dci = create_dci(a);
    }
};

}  // namespace

TEST_CASE("DC: a DCI's SEND, RDMA WRITE, READ and atomics reach a DCT; the CQEs name the DCT and the DCI", "[dc]") {
    DcPair p;
    const uint64_t src = p.a.mr.iova, dst = p.b.mr.iova;
    p.a.fill(src, 3000, 5);
    p.rmp.post(dst, 4096);
    post_dc(p.a, p.dci, 2, p.dctn, kKey, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, src, 3000}}});
    p.w.pump();
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(op(*rc) == hca::kCqeRespSend);
    CHECK(be32(*rc, 0x2c) == 3000);
    CHECK((be32(*rc, 0x38) & 0xffffff) == p.dctn);      // the DCT receives
    CHECK((be32(*rc, 0x18) & 0xffffff) == p.dci.qpn);   // from the DCI
    CHECK((be32(*rc, 0x20) & 0xffffff) == p.rmp.rmpn);  // through its SRQ
    CHECK(p.b.same(dst, 3000, 5));
    auto sc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(sc);
    CHECK(op(*sc) == hca::kCqeReq);

    p.a.fill(src + 8192, 5000, 9);
    post_dc(p.a, p.dci, 2, p.dctn, kKey,
            {.opcode = hca::kWqeRdmaWrite,
             .sges = {{p.a.mr.key, src + 8192, 5000}},
             .raddr = dst + 8192,
             .rkey = p.b.mr.key});
    p.b.fill(dst + 20000, 3000, 11);
    post_dc(p.a, p.dci, 2, p.dctn, kKey,
            {.opcode = hca::kWqeRdmaRead,
             .sges = {{p.a.mr.key, src + 20000, 3000}},
             .raddr = dst + 20000,
             .rkey = p.b.mr.key});
    const uint64_t forty = 40;
    std::memcpy(p.b.mem(dst + 32768, 8), &forty, 8);
    post_dc(p.a, p.dci, 2, p.dctn, kKey,
            {.opcode = hca::kWqeAtomicFa,
             .sges = {{p.a.mr.key, src + 32768, 8}},
             .raddr = dst + 32768,
             .rkey = p.b.mr.key,
             .swap_add = 2});
    p.w.pump();
    int done = 0;
    while (auto c = p.a.d.next_cqe(p.a.scq)) {
        CHECK(op(*c) == hca::kCqeReq);
        ++done;
    }
    CHECK(done == 3);
    CHECK(p.b.same(dst + 8192, 5000, 9));
    CHECK(p.a.same(src + 20000, 3000, 11));
    uint64_t before = 0, after = 0;
    std::memcpy(&before, p.a.mem(src + 32768, 8), 8);
    std::memcpy(&after, p.b.mem(dst + 32768, 8), 8);
    CHECK(before == 40);
    CHECK(after == 42);
    // One context for the one initiator, connected once per burst.
    const hca::Qp *dct = p.w.b.dev.qps.find(p.dctn);
    REQUIRE(dct);
    CHECK(dct->dc.contexts.size() == 1);
    CHECK(!p.w.a.dev.qps.find(p.dci.qpn)->dc.connected);  // nothing outstanding: disconnected
}

TEST_CASE("DC: a wrong access key is dropped and counted; an armed DCT reports it once", "[dc]") {
    DcPair p;
    auto aeq = p.b.d.create_eq(4, 3, {uint64_t{1} << 0x1c | uint64_t{1} << 0x1d, 0, 0, 0}, p.b.uar);
    CHECK(dct_cmd(p.b, hca::kOpArmDctForKeyViolation, p.dctn) == 0);
    p.rmp.post(p.b.mr.iova, 64);
    post_dc(p.a, p.dci, 2, p.dctn, kKey ^ 1, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 64}}});
    p.w.pump();
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    auto ev = p.b.d.next_eqe(aeq);
    REQUIRE(ev);
    CHECK((*ev)[1] == 0x1d);
    CHECK(hca::load_be32(ev->data() + 0x20 + 24) == p.dctn);
    // Unanswered, the DCI gives up after its retries.
    for (int i = 0; i < 10; ++i) {
        p.w.advance(600'000'000);
    }
    auto sc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(sc);
    CHECK(op(*sc) == hca::kCqeReqErr);
    CHECK((*sc)[0x37] == hca::kSyndTransportRetryExc);
    CHECK(!p.b.d.next_eqe(aeq));  // reported once
    auto q = Driver::inbox(hca::kOpQueryDct, 0, 16);
    ifc::set(q.data(), ifc::query_dct_in::dctn, p.dctn);
    auto r = p.b.d.exec(q, ifc::query_dct_out::size_bytes);
    REQUIRE(r.status == 0);
    const auto c = ifc::query_dct_out::dct_context_entry;
    CHECK(r.get(ifc::in(c, ifc::dctc::dc_access_key_violation_count)) >= 8);
    CHECK(r.get(ifc::in(c, ifc::dctc::dc_access_key)) == kKey);
    CHECK(r.get(ifc::in(c, ifc::dctc::srqn_xrqn)) == p.rmp.rmpn);
}

TEST_CASE("DC: a DCI moving to another DCT waits for its messages to the first, then connects", "[dc]") {
    DcPair p;
    auto r = create_dct(p.b, p.rmp.rmpn, kKey + 1);
    REQUIRE(r.status == 0);
    const uint32_t dct2 = static_cast<uint32_t>(r.get(ifc::create_dct_out::dctn));
    p.a.d.run_on_doorbell = false;
    for (int i = 0; i < 4; ++i) {
        p.rmp.post(p.b.mr.iova + i * 256, 256);
        post_dc(p.a, p.dci, 2, i % 2 ? dct2 : p.dctn, i % 2 ? kKey + 1 : kKey,
                {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova + i * 256, 200}}});
    }
    p.w.pump();
    std::vector<uint32_t> to;
    while (auto c = p.b.d.next_cqe(p.b.rcq)) {
        CHECK(op(*c) == hca::kCqeRespSend);
        to.push_back(be32(*c, 0x38) & 0xffffff);
    }
    CHECK(to == std::vector<uint32_t>{p.dctn, dct2, p.dctn, dct2});
    int done = 0;
    while (auto c = p.a.d.next_cqe(p.a.scq)) {
        done += op(*c) == hca::kCqeReq;
    }
    CHECK(done == 4);
    CHECK(p.w.b.dev.qps.find(p.dctn)->dc.contexts.size() == 1);
    CHECK(p.w.b.dev.qps.find(dct2)->dc.contexts.size() == 1);
}

TEST_CASE("DC: DRAIN_DCT reports DCT_DRAINED; DESTROY_DCT frees the DCT; QP commands refuse a DCT", "[dc]") {
    DcPair p;
    auto aeq = p.b.d.create_eq(4, 3, {uint64_t{1} << 0x1c, 0, 0, 0}, p.b.uar);
    p.rmp.post(p.b.mr.iova, 64);
    post_dc(p.a, p.dci, 2, p.dctn, kKey, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 64}}});
    p.w.pump();
    REQUIRE(p.b.d.next_cqe(p.b.rcq));
    auto dq = Driver::inbox(hca::kOpDestroyQp, 0, 16);
    ifc::set(dq.data(), ifc::destroy_qp_in::qpn, p.dctn);
    CHECK(p.b.d.exec(dq, 16).status == 0x05);  // bad resource: a DCT is no QP
    CHECK(dct_cmd(p.b, hca::kOpDrainDct, p.dci.qpn + 0x1000) == 0x05);
    CHECK(dct_cmd(p.b, hca::kOpDrainDct, p.dctn) == 0);
    auto ev = p.b.d.next_eqe(aeq);
    REQUIRE(ev);
    CHECK((*ev)[1] == 0x1c);
    CHECK(hca::load_be32(ev->data() + 0x20 + 24) == p.dctn);
    CHECK(p.w.b.dev.qps.find(p.dctn)->dc.contexts.empty());
    // A drained DCT takes nothing.
    p.rmp.post(p.b.mr.iova, 64);
    post_dc(p.a, p.dci, 2, p.dctn, kKey, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 64}}});
    p.w.pump();
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    const size_t qps = p.w.b.dev.qps.count();
    CHECK(dct_cmd(p.b, hca::kOpDestroyDct, p.dctn) == 0);
    CHECK(p.w.b.dev.qps.count() == qps - 1);
    CHECK(dct_cmd(p.b, hca::kOpDestroyDct, p.dctn) == 0x05);
    CHECK(p.w.b.dev.srqs.find(p.rmp.rmpn)->refs == 0);
}

TEST_CASE("DC: a DCT keeps at most kDcContextsPerDct contexts; the least recently used idle one makes room",
          "[dc][limits]") {
    DcPair p;
    const uint32_t n = hca::QpTable::kDcContextsPerDct + 2;
    std::vector<QpHandle> dcis;
    for (uint32_t i = 0; i < n; ++i) {
        CmdResult r;
        QpHandle q = p.a.d.create_qp(hca::kQpDci, p.a.pd, p.a.scq.cqn, 0, p.a.uar, 1, 0, &r, hca::kRqZero);
        REQUIRE(r.status == 0);
        p.a.d.connect_qp(q, 0, 0);
        dcis.push_back(q);
    }
    for (uint32_t i = 0; i < n; ++i) {
        post_dc(p.a, dcis[i], 2, p.dctn, kKey,
                {.opcode = hca::kWqeRdmaWrite,
                 .sges = {{p.a.mr.key, p.a.mr.iova, 8}},
                 .raddr = p.b.mr.iova + i * 8,
                 .rkey = p.b.mr.key,
                 .signaled = false});
        p.w.pump();
    }
    const hca::Qp *dct = p.w.b.dev.qps.find(p.dctn);
    CHECK(dct->dc.contexts.size() == hca::QpTable::kDcContextsPerDct);
    // Every WRITE landed; none of the DCIs failed.
    for (uint32_t i = 0; i < n; ++i) {
        CHECK(p.w.a.dev.qps.find(dcis[i].qpn)->state == hca::QpState::Rts);
    }
    CHECK(!p.a.d.next_cqe(p.a.scq));
    // The first two initiators were evicted, the last ones are kept.
    CHECK(!dct->dc.contexts.count(uint64_t{1} << 24 | dcis[0].qpn));
    CHECK(dct->dc.contexts.count(uint64_t{1} << 24 | dcis[n - 1].qpn));
}

TEST_CASE("DC: a DCI takes no requests, a DCT takes only DC requests", "[dc]") {
    DcPair p;
    // An RC QP on b aimed at a's DCI: its SEND is dropped, never answered.
    CmdResult r;
    QpHandle rc = p.b.d.create_qp(hca::kQpRc, p.b.pd, p.b.scq.cqn, p.b.rcq.cqn, p.b.uar, 6, 6, &r);
    REQUIRE(r.status == 0);
    p.b.d.connect_qp(rc, p.dci.qpn, 1, 3, 1, 1);
    const uint32_t epsn = p.w.a.dev.qps.find(p.dci.qpn)->rc.epsn;
    p.b.d.post_send(rc, {.opcode = hca::kWqeSend, .sges = {{p.b.mr.key, p.b.mr.iova, 64}}});
    p.w.pump();
    CHECK(p.w.a.dev.qps.find(p.dci.qpn)->rc.epsn == epsn);
    CHECK(p.w.b.dev.qps.find(rc.qpn)->rc.pending.size() == 1);  // no ACK came
    CHECK(!p.a.d.next_cqe(p.a.rcq));
    // An RC QP on a aimed at b's DCT: dropped too.
    QpHandle rc2 = p.a.d.create_qp(hca::kQpRc, p.a.pd, p.a.scq.cqn, p.a.rcq.cqn, p.a.uar, 6, 6, &r);
    REQUIRE(r.status == 0);
    p.a.d.connect_qp(rc2, p.dctn, 2, 3, 1, 1);
    p.rmp.post(p.b.mr.iova, 64);
    p.a.d.post_send(rc2, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 64}}});
    p.w.pump();
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    CHECK(p.w.b.dev.qps.find(p.dctn)->dropped >= 1);
    CHECK(p.w.b.dev.qps.find(p.dctn)->dc.contexts.empty());
}

TEST_CASE("DC: the DCT's Q counter set counts connections (rx_dct_connect)", "[dc][counters]") {
    DcPair p;
    auto a = p.b.d.exec(Driver::inbox(hca::kOpAllocQCounter, 0, ifc::alloc_q_counter_in::size_bytes),
                        ifc::alloc_q_counter_out::size_bytes);
    REQUIRE(a.status == 0);
    const auto set = static_cast<uint32_t>(a.get(ifc::alloc_q_counter_out::counter_set_id));
    auto r = create_dct(p.b, p.rmp.rmpn, kKey, true, set);
    REQUIRE(r.status == 0);
    const auto dctn = static_cast<uint32_t>(r.get(ifc::create_dct_out::dctn));
    // Three bursts of one WRITE each: three connections (a DCI with nothing
    // outstanding disconnects); two WRITEs rung together: one more.
    const Driver::SendWr write{
        .opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 8}}, .raddr = p.b.mr.iova, .rkey = p.b.mr.key};
    for (int i = 0; i < 3; ++i) {
        post_dc(p.a, p.dci, 2, dctn, kKey, write);
        p.w.pump();
    }
    p.a.d.run_on_doorbell = false;
    for (int i = 0; i < 2; ++i) {
        post_dc(p.a, p.dci, 2, dctn, kKey, write);
    }
    p.w.pump();
    auto q = Driver::inbox(hca::kOpQueryQCounter, 0, ifc::query_q_counter_in::size_bytes);
    ifc::set(q.data(), ifc::query_q_counter_in::counter_set_id, set);
    auto out = p.b.d.exec(q, ifc::query_q_counter_out::size_bytes);
    REQUIRE(out.status == 0);
    CHECK(out.get(ifc::query_q_counter_out::rx_dct_connect) == 4);
    CHECK(out.get(ifc::query_q_counter_out::rx_write_requests) == 5);
}

TEST_CASE("DC ODP: a DCI's gather and a DCT's SRQ receive fault and resume; a DCT's RDMA target does not fault",
          "[dc][odp]") {
    DcPair p;
    EqHandle ea = pf_eq(p.a), eb = pf_eq(p.b);
    const uint64_t src = p.a.mr.iova + 8192, dst = p.b.mr.iova + 4096;
    p.a.fill(src, 3000, 6);
    set_pages(p.a, src, 3000, false);
    set_pages(p.b, dst, 4096, false);
    p.rmp.post(dst, 4096);
    post_dc(p.a, p.dci, 2, p.dctn, kKey, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, src, 3000}}});
    p.w.pump();
    // The DCI's gather: a requester fault naming the DCI.
    auto e = p.a.d.next_eqe(ea);
    REQUIRE(e);
    CHECK(eqe32(*e, 0x18) == (1u << 24 | p.dci.qpn));  // REQ_SEND_OR_WRITE
    set_pages(p.a, src, 3000, true);
    REQUIRE(resume(p.a, 1, p.dci.qpn, eqe32(*e, 0x0c)) == 0);
    p.w.pump();
    // The DCT's receive into its SRQ: an RMP fault naming the SRQ.
    e = p.b.d.next_eqe(eb);
    REQUIRE(e);
    CHECK(eqe32(*e, 0x18) == p.rmp.rmpn);  // MLX5_WQE_PF_TYPE_RMP (0), the SRQ
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    set_pages(p.b, dst, 4096, true);
    REQUIRE(resume(p.b, 0, p.rmp.rmpn, eqe32(*e, 0x0c)) == 0);
    p.w.advance(20'000'000);  // the DCI's RNR retry
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(op(*rc) == hca::kCqeRespSend);
    CHECK((be32(*rc, 0x38) & 0xffffff) == p.dctn);
    CHECK(p.b.same(dst, 3000, 6));
    auto sc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(sc);
    CHECK(op(*sc) == hca::kCqeReq);
    CHECK(p.w.a.dev.odp.outstanding() == 0);
    CHECK(p.w.b.dev.odp.outstanding() == 0);

    // An RDMA WRITE into a page that is not present at the DCT: no fault
    // (dc_odp_caps.write 0), a remote access error.
    set_pages(p.b, dst + 16384, 4096, false);
    post_dc(p.a, p.dci, 2, p.dctn, kKey,
            {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, src, 64}}, .raddr = dst + 16384, .rkey = p.b.mr.key});
    p.w.pump();
    CHECK(!p.b.d.next_eqe(eb));
    auto err = p.a.d.next_cqe(p.a.scq);
    REQUIRE(err);
    CHECK(op(*err) == hca::kCqeReqErr);
    CHECK((*err)[0x37] == hca::kSyndRemoteAccess);
}
