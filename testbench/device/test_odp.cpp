// On-demand paging (datapath/odp.h): MTT pages without access bits fault;
// the requester stands still until PAGE_FAULT_RESUME, the responder
// answers RNR NAK; the EQEs carry what mlx5_ib's page-fault handler reads
// (odp.c mlx5_ib_eq_pf_process()).
#include <catch2/catch.hpp>

#include "be.h"
#include "odp_helpers.h"
#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

// The next send completion of n is an error with this syndrome.
void check_error(Node &n, uint8_t syndrome) {
    auto c = n.d.next_cqe(n.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReqErr);
    CHECK((*c)[0x37] == syndrome);
}

}  // namespace

TEST_CASE("ODP: pg and the transport page-fault scheme are advertised, SET_HCA_CAP enables SRQ receives", "[odp]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const auto &cur = b.dev.fw.caps().image(hca::kCapOdp, true);
    const auto rc = ifc::in(ifc::odp_cap::transport_page_fault_scheme_cap, ifc::odp_scheme_cap::rc_odp_caps);
    CHECK(b.dev.fw.caps().gen(ifc::cmd_hca_cap::pg) == 1);
    CHECK(ifc::get(cur.data(), ifc::in(rc, ifc::odp_per_transport_service_cap::send)) == 1);
    CHECK(ifc::get(cur.data(), ifc::in(rc, ifc::odp_per_transport_service_cap::read)) == 1);
    CHECK(ifc::get(cur.data(), ifc::odp_cap::mem_page_fault) == 0);
}

TEST_CASE("ODP requester: a SEND's gather faults, the SQ holds until PAGE_FAULT_RESUME", "[odp]") {
    Pair p;
    EqHandle eq = pf_eq(p.a);
    const uint64_t src = p.a.mr.iova + 8192;
    p.a.fill(src, 3000, 4);
    set_pages(p.a, src, 3000, false);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 4096);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + 4096, 4096);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, src, 3000}}});
    p.w.pump();
    auto e = p.a.d.next_eqe(eq);
    REQUIRE(e);
    CHECK((*e)[1] == kPageFault);
    CHECK((*e)[3] == 0);                               // MLX5_PFAULT_SUBTYPE_WQE
    CHECK(hca::load_be16(e->data() + 0x20 + 6) == 0);  // wqe_index
    CHECK(eqe32(*e, 0x18) == (1u << 24 | p.qa.qpn));   // REQ_SEND_OR_WRITE, the QP
    const uint32_t token = eqe32(*e, 0x0c);
    CHECK(token != 0);
    CHECK(!p.a.d.next_cqe(p.a.scq));
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->rc.req == hca::ReqState::PageFault);
    // A second SEND waits behind the first.
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {9, 9}});
    p.w.pump();
    CHECK(!p.b.d.next_cqe(p.b.rcq));

    SECTION("resolved: both messages go, in order") {
        set_pages(p.a, src, 3000, true);
        REQUIRE(resume(p.a, 1, p.qa.qpn, token) == 0);
        p.w.pump();
        auto r1 = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(r1);
        CHECK(be32(*r1, 0x2c) == 3000);
        CHECK(p.b.same(p.b.mr.iova, 3000, 4));
        auto r2 = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(r2);
        CHECK(be32(*r2, 0x2c) == 2);
        REQUIRE(p.a.d.next_cqe(p.a.scq));
        REQUIRE(p.a.d.next_cqe(p.a.scq));
        CHECK(p.w.a.dev.odp.outstanding() == 0);
    }
    SECTION("resumed with error: local protection error, the QP fails") {
        REQUIRE(resume(p.a, 1, p.qa.qpn, token, true) == 0);
        p.w.pump();
        check_error(p.a, hca::kSyndLocalProt);
        CHECK(p.w.a.dev.qps.find(p.qa.qpn)->state == hca::QpState::Err);
    }
    SECTION("a stale or wrong resume changes nothing") {
        CHECK(resume(p.a, 3, p.qa.qpn, token) == 0);  // wrong type
        CHECK(resume(p.a, 1, 0xabcdef, token) != 0);  // no such work queue
        p.w.pump();
        CHECK(!p.b.d.next_cqe(p.b.rcq));
        CHECK(p.w.a.dev.odp.outstanding() == 1);
    }
}

TEST_CASE("ODP without a page-fault EQ: a page that is not present is a protection error", "[odp]") {
    Pair p;
    set_pages(p.a, p.a.mr.iova, 100, false);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 4096);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 100}}});
    p.w.pump();
    check_error(p.a, hca::kSyndLocalProt);
}

TEST_CASE("ODP responder: an RDMA WRITE's target faults, RNR NAK, the retry lands", "[odp]") {
    Pair p;
    EqHandle eq = pf_eq(p.b);
    const uint64_t dst = p.b.mr.iova + 4096 + 100;
    p.a.fill(p.a.mr.iova, 5000, 8);
    set_pages(p.b, dst, 5000, false);
    p.a.d.post_send(
        p.qa,
        {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 5000}}, .raddr = dst, .rkey = p.b.mr.key});
    p.w.pump();
    auto e = p.b.d.next_eqe(eq);
    REQUIRE(e);
    CHECK((*e)[3] == 1);  // MLX5_PFAULT_SUBTYPE_RDMA
    CHECK(eqe32(*e, 0x04) == p.b.mr.key);
    CHECK(eqe32(*e, 0x0c) == 5000);
    CHECK(hca::load_be64(e->data() + 0x20 + 0x10) == dst);
    CHECK((eqe32(*e, 0x18) & 0xffffff) == p.qb.qpn);  // the token: the QP
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->rc.req == hca::ReqState::RnrWait);
    CHECK(!p.a.d.next_cqe(p.a.scq));
    // Retries before the resume fault again without a new EQE.
    p.w.advance(1'000'000);
    CHECK(!p.b.d.next_eqe(eq));
    set_pages(p.b, dst, 5000, true);
    REQUIRE(resume(p.b, 2, p.qb.qpn, p.qb.qpn) == 0);
    p.w.advance(1'000'000);
    auto c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    CHECK(p.b.same(dst, 5000, 8));

    SECTION("a fault resumed with error ends in a remote access error") {
        set_pages(p.b, dst, 100, false);
        p.a.d.post_send(
            p.qa,
            {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 100}}, .raddr = dst, .rkey = p.b.mr.key});
        p.w.pump();
        REQUIRE(p.b.d.next_eqe(eq));
        REQUIRE(resume(p.b, 2, p.qb.qpn, p.qb.qpn, true) == 0);
        p.w.advance(1'000'000);
        check_error(p.a, hca::kSyndRemoteAccess);
    }
}

TEST_CASE("ODP: a function reset forgets the faults of both sides", "[odp]") {
    Pair p;
    EqHandle eq = pf_eq(p.a);
    set_pages(p.a, p.a.mr.iova, 100, false);         // the source of a's SEND
    set_pages(p.a, p.a.mr.iova + 8192, 100, false);  // the target of b's RDMA WRITE
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 100}}});
    p.b.d.post_send(
        p.qb,
        {.opcode = hca::kWqeRdmaWrite, .inline_data = {1, 2, 3}, .raddr = p.a.mr.iova + 8192, .rkey = p.a.mr.key});
    p.w.pump();
    REQUIRE(p.a.d.next_eqe(eq));
    REQUIRE(p.a.d.next_eqe(eq));
    CHECK(p.w.a.dev.odp.outstanding() == 2);  // a requester (WQE) fault and a responder (RDMA) fault
    p.w.a.dev.reset();
    CHECK(p.w.a.dev.odp.outstanding() == 0);
}

TEST_CASE("ODP responder: a receive WQE's buffer faults, the WQE is kept for the retried SEND", "[odp]") {
    Pair p;
    EqHandle eq = pf_eq(p.b);
    set_pages(p.b, p.b.mr.iova, 4096, false);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 4096);
    p.a.fill(p.a.mr.iova, 2000, 3);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 2000}}});
    p.w.pump();
    auto e = p.b.d.next_eqe(eq);
    REQUIRE(e);
    CHECK((*e)[3] == 0);
    CHECK(hca::load_be16(e->data() + 0x20 + 6) == 0);  // receive WQE 0
    CHECK(eqe32(*e, 0x18) == (2u << 24 | p.qb.qpn));   // MLX5_WQE_PF_TYPE_RESP
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    set_pages(p.b, p.b.mr.iova, 4096, true);
    REQUIRE(resume(p.b, 2, p.qb.qpn, eqe32(*e, 0x0c)) == 0);
    p.w.advance(1'000'000);
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(op(*rc) == hca::kCqeRespSend);
    CHECK(hca::load_be16(rc->data() + 0x3c) == 0);  // wqe_counter: the same WQE
    CHECK(p.b.same(p.b.mr.iova, 2000, 3));
    REQUIRE(p.a.d.next_cqe(p.a.scq));
}

TEST_CASE("ODP requester: an RDMA READ response's scatter faults, the READ is asked again", "[odp]") {
    Pair p;
    EqHandle eq = pf_eq(p.a);
    const uint64_t local = p.a.mr.iova + 16384;
    p.b.fill(p.b.mr.iova, 6000, 6);
    set_pages(p.a, local + 4096, 100, false);  // the second page only: a fault mid-message
    p.a.d.post_send(
        p.qa,
        {.opcode = hca::kWqeRdmaRead, .sges = {{p.a.mr.key, local, 6000}}, .raddr = p.b.mr.iova, .rkey = p.b.mr.key});
    p.w.pump();
    auto e = p.a.d.next_eqe(eq);
    REQUIRE(e);
    CHECK(eqe32(*e, 0x18) == (3u << 24 | p.qa.qpn));  // REQ_READ_OR_ATOMIC
    CHECK(!p.a.d.next_cqe(p.a.scq));
    set_pages(p.a, local + 4096, 100, true);
    REQUIRE(resume(p.a, 3, p.qa.qpn, eqe32(*e, 0x0c)) == 0);
    p.w.pump();
    auto c = p.a.d.next_cqe(p.a.scq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    CHECK(p.a.same(local, 6000, 6));
}

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// Loads KSM entries of key from first on (mlx5_ib's update_xlt with
// MLX5_IB_UPD_XLT_INDIRECT), through the privileged UMR path.
void load_ksm(Node &n, uint32_t key, uint64_t first, const std::vector<std::pair<uint32_t, uint64_t>> &entries) {
    hca::UmrOp op;
    op.key = key;
    static const uint8_t kNoMkc[64] = {};
    op.mkc = kNoMkc;
    op.xlt_first = first * 2;
    for (const auto &[k, va] : entries) {
        op.xlt.push_back(k);
        op.xlt.push_back(va);
    }
    REQUIRE(n.d.bench().dev.mkeys.umr(op, nullptr) == hca::UmrError::None);
}

}  // namespace

TEST_CASE("ODP implicit: a KSM key over the address space, null entries fault, a child key resolves them",
          "[odp][ksm]") {
    Pair p;
    EqHandle eq = pf_eq(p.b);
    // The null mkey, as mlx5_ib reads it (mlx5r_cmd_query_special_mkeys()).
    auto in = Driver::inbox(hca::kOpQuerySpecialContexts, 0, ifc::query_special_contexts_in::size_bytes);
    const CmdResult q = p.b.d.exec(in, ifc::query_special_contexts_out::size_bytes);
    REQUIRE(q.status == 0);
    const auto null_key = static_cast<uint32_t>(q.get(ifc::query_special_contexts_out::null_mkey));
    CHECK(null_key == hca::kNullMkey);
    // The implicit MR: 16 entries of 1 GiB, all zapped to the null mkey.
    std::vector<Driver::IndirectEntry> zap(16, {0, null_key, 0});
    const uint32_t imr = p.b.d.create_indirect_mkey(p.b.pd, 3, 30, 16, zap);
    const uint64_t dst = 3 * kGiB + 0x100;
    p.a.fill(p.a.mr.iova, 300, 5);
    p.a.d.post_send(
        p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 300}}, .raddr = dst, .rkey = imr});
    p.w.pump();
    auto e = p.b.d.next_eqe(eq);
    REQUIRE(e);
    CHECK((*e)[3] == 1);  // MLX5_PFAULT_SUBTYPE_RDMA, on the implicit key
    CHECK(eqe32(*e, 0x04) == imr);
    CHECK(hca::load_be64(e->data() + 0x20 + 0x10) == dst);
    CHECK(!p.a.d.next_cqe(p.a.scq));

    SECTION("the driver makes a child for GiB 3, loads its entry and resumes: the WRITE lands") {
        const MrHandle child = p.b.d.create_mtt_mkey(p.b.pd, 3 * kGiB, 8192, 0x1f);
        load_ksm(p.b, imr, 3, {{child.key, 3 * kGiB}});
        REQUIRE(resume(p.b, 2, p.qb.qpn, p.qb.qpn) == 0);
        p.w.advance(1'000'000);
        auto c = p.a.d.next_cqe(p.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReq);
        const hca::Mkey *m = p.w.b.dev.mkeys.find(child.key);
        REQUIRE(m);
        const uint8_t *got = p.b.d.bench().host.mem(m->page(0) + 0x100, 300);
        bool same = true;
        for (size_t i = 0; i < 300; ++i) {
            same = same && got[i] == static_cast<uint8_t>(5 + i * 7);
        }
        CHECK(same);
        // A local SEND gathering through the implicit key from GiB 3 too.
        p.a.d.post_recv(p.qa, p.a.mr.key, p.a.mr.iova + 4096, 4096);
        p.b.d.post_send(p.qb, {.opcode = hca::kWqeSend, .sges = {{imr, dst, 300}}});
        p.w.pump();
        auto r = p.a.d.next_cqe(p.a.rcq);
        REQUIRE(r);
        CHECK(be32(*r, 0x2c) == 300);
        CHECK(p.a.same(p.a.mr.iova + 4096, 300, 5));
    }
    SECTION("an address past the KSM's entries is a remote access error, no fault") {
        REQUIRE(resume(p.b, 2, p.qb.qpn, p.qb.qpn, true) == 0);
        p.w.advance(1'000'000);
        check_error(p.a, hca::kSyndRemoteAccess);
        CHECK(!p.b.d.next_eqe(eq));
        std::vector<hca::DmaChunk> out;
        CHECK(p.w.b.dev.mkeys.translate(imr, p.b.pd, 20 * kGiB, 8, hca::kAccRemoteWrite, out) ==
              hca::XlatError::NoTranslation);
    }
}
