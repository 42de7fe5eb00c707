// DEVX: user contexts (CREATE/DESTROY_UCTX) and the uid every command of a
// process carries, UMEMs (CREATE/DESTROY_UMEM) and the CQs, QPs and memory
// keys built on them, the firmware's ownership checks between user
// contexts, and teardown.
#include <catch2/catch.hpp>

#include <cstring>

#include "expect.h"
#include "ifc/mlx5_ifc_extra.h"
#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

// A command the caller checks itself (res given) or that must succeed.
void expect_ok(const CmdResult &r, CmdResult *res) {
    if (res) {
        *res = r;
    } else {
        REQUIRE(r.status == 0);
    }
}

CmdResult exec_as(Driver &d, std::vector<uint8_t> in, uint16_t uid, size_t outlen = 16) {
    hca::store_be16(in.data() + 2, uid);
    return d.exec(in, outlen);
}

uint16_t create_uctx(Driver &d, uint32_t cap = 0, uint8_t *status = nullptr) {
    auto in = Driver::inbox(hca::kOpCreateUctx, 0, ifc::create_uctx_in::size_bytes);
    ifc::set(in.data(), ifc::in(ifc::create_uctx_in::uctx, ifc::uctx::cap), cap);
    auto r = d.exec(in, 16);
    if (status) {
        *status = r.status;
    } else {
        REQUIRE(r.status == 0);
    }
    return static_cast<uint16_t>(r.get(ifc::create_uctx_out::uid));
}

uint8_t destroy_uctx(Driver &d, uint16_t uid) {
    auto in = Driver::inbox(hca::kOpDestroyUctx, 0, ifc::destroy_uctx_in::size_bytes);
    ifc::set(in.data(), ifc::destroy_uctx_in::uid, uid);
    return d.exec(in, 16).status;
}

// A UMEM of fresh 4 KiB pages, as mlx5_ib registers a user buffer.
struct Umem {
    uint32_t id = 0;
    std::vector<uint64_t> pages;
    uint64_t addr(uint64_t off) const { return pages.at(off / 4096) + off % 4096; }
};

Umem create_umem(Driver &d, uint16_t uid, size_t npages, CmdResult *res = nullptr) {
    Umem u;
    auto in = Driver::inbox(hca::kOpCreateUmem, 0, ifc::create_umem_in::size_bytes + npages * 8);
    ifc::set(in.data(), ifc::in(ifc::create_umem_in::umem, ifc::umem::num_of_mtt), npages);
    for (size_t i = 0; i < npages; ++i) {
        u.pages.push_back(d.bench().host.alloc(4096, 4096));
        d.bench().host.alloc(4096);                                                                // not contiguous
        hca::store_be64(in.data() + ifc::create_umem_in::size_bytes + i * 8, u.pages.back() | 3);  // rd_en, wr_en
    }
    auto r = exec_as(d, in, uid);
    expect_ok(r, res);
    u.id = static_cast<uint32_t>(r.get(ifc::create_umem_out::umem_id));
    return u;
}

uint8_t destroy_umem(Driver &d, uint16_t uid, uint32_t id) {
    auto in = Driver::inbox(hca::kOpDestroyUmem, 0, ifc::destroy_umem_in::size_bytes);
    ifc::set(in.data(), ifc::destroy_umem_in::umem_id, id);
    return exec_as(d, in, uid).status;
}

uint32_t alloc_pd_as(Driver &d, uint16_t uid) {
    auto r = exec_as(d, Driver::inbox(hca::kOpAllocPd, 0, 16), uid);
    REQUIRE(r.status == 0);
    return static_cast<uint32_t>(r.get(ifc::alloc_pd_out::pd));
}

// A CQ of 2^log 64-byte CQEs at offset 0 of umem, its doorbell record at
// dbr_off, created the way DEVX passes it on: no page list, the UMEMs named.
CqHandle create_devx_cq(Driver &d, uint16_t uid, const Umem &u, uint64_t dbr_off, unsigned log, uint32_t eqn,
                        uint32_t uar, CmdResult *res = nullptr) {
    CqHandle cq;
    cq.nent = 1u << log;
    cq.uar = uar;
    for (uint32_t e = 0; e < cq.nent; ++e) {
        d.bench().host.mem(u.addr(e * 64 + 63), 1)[0] = 0xf0;
    }
    for (size_t i = 0; i * 4096 < size_t{cq.nent} * 64; ++i) {
        cq.pages.push_back(u.pages[i]);
    }
    cq.dbr = dbr_off < u.pages.size() * 4096 ? u.addr(dbr_off) : 0;
    auto in = Driver::inbox(hca::kOpCreateCq, 0, ifc::create_cq_in::size_bytes);
    const auto ctx = ifc::create_cq_in::cq_context;
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::log_cq_size), log);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::uar_page), uar);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::c_eqn_or_apu_element), eqn);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::dbr_umem_valid), 1);
    ifc::set(in.data(), ifc::in(ctx, ifc::extra::cqc_dbr_umem_id), u.id);
    ifc::set(in.data(), ifc::in(ctx, ifc::cqc::dbr_addr), dbr_off);
    ifc::set(in.data(), ifc::create_cq_in::cq_umem_valid, 1);
    ifc::set(in.data(), ifc::extra::cq_umem_id, u.id);
    ifc::set(in.data(), ifc::extra::cq_umem_offset, 0);
    auto r = exec_as(d, in, uid);
    expect_ok(r, res);
    cq.cqn = static_cast<uint32_t>(r.get(ifc::create_cq_out::cqn));
    return cq;
}

// An RC QP with 2^6 receive WQEs of 64 bytes and 2^6 WQEBBs at wq_off of
// umem, its doorbell record at dbr_off.
QpHandle create_devx_qp(Driver &d, uint16_t uid, const Umem &u, uint64_t wq_off, uint64_t dbr_off, uint32_t pd,
                        uint32_t cqn, uint32_t uar, CmdResult *res = nullptr) {
    QpHandle qp;
    qp.st = hca::kQpRc;
    qp.uar = uar;
    qp.rq_wqes = 64;
    qp.rq_stride = 64;
    qp.sq_wqebbs = 64;
    for (uint64_t off = wq_off; off < wq_off + 8192; off += 4096) {
        qp.pages.push_back(u.pages.at(off / 4096));
    }
    qp.dbr = u.addr(dbr_off);
    auto in = Driver::inbox(hca::kOpCreateQp, 0, ifc::create_qp_in::size_bytes);
    const auto ctx = ifc::create_qp_in::qpc;
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::st), hca::kQpRc);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::pm_state), 3);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::pd), pd);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_sq_size), 6);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_rq_size), 6);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::log_rq_stride), 2);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::cqn_snd), cqn);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::cqn_rcv), cqn);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::uar_page), uar);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::dbr_umem_valid), 1);
    ifc::set(in.data(), ifc::in(ctx, ifc::extra::qpc_dbr_umem_id), u.id);
    ifc::set(in.data(), ifc::in(ctx, ifc::qpc::dbr_addr), dbr_off);
    ifc::set(in.data(), ifc::create_qp_in::wq_umem_valid, 1);
    ifc::set(in.data(), ifc::create_qp_in::wq_umem_id, u.id);
    ifc::set(in.data(), ifc::create_qp_in::wq_umem_offset, wq_off);
    auto r = exec_as(d, in, uid);
    expect_ok(r, res);
    qp.qpn = static_cast<uint32_t>(r.get(ifc::create_qp_out::qpn));
    return qp;
}

uint8_t cmd_on(Driver &d, uint16_t opcode, ifc::Field f, uint32_t n, uint16_t uid, size_t inlen = 16,
               size_t outlen = 16) {
    auto in = Driver::inbox(opcode, 0, inlen);
    ifc::set(in.data(), f, n);
    return exec_as(d, in, uid, outlen).status;
}

}  // namespace

TEST_CASE("user contexts: distinct uids, unknown uids refused, capabilities and teardown", "[devx]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint16_t u1 = create_uctx(d);
    const uint16_t u2 = create_uctx(d);
    CHECK(u1 != 0);
    CHECK(u2 != 0);
    CHECK(u1 != u2);
    CHECK(b.dev.uctxs.count() == 2);

    // Commands carry the uid of an existing context, the kernel's (0) or the shared one.
    CHECK(exec_as(d, Driver::inbox(hca::kOpAllocPd, 0, 16), u1).status == 0);
    CHECK(exec_as(d, Driver::inbox(hca::kOpAllocPd, 0, 16), hca::kSharedUid).status == 0);
    CHECK(exec_as(d, Driver::inbox(hca::kOpAllocPd, 0, 16), 0x1234).status == 0x03);

    // DEVX programs read a capability page with as long an outbox as they
    // need (rdma-core's tests: 16 + 2048 bytes), at least one layout.
    auto q = Driver::inbox(hca::kOpQueryHcaCap, 1, 16);
    auto cap = exec_as(d, q, u1, 16 + 2048);
    CHECK(cap.status == 0);
    CHECK(cap.get(ifc::in(ifc::query_hca_cap_out::capability, ifc::cmd_hca_cap::log_max_uctx)) == 10);
    CHECK(exec_as(d, q, u1, 16 + ifc::cmd_hca_cap::size_bytes).status == 0);
    CHECK(exec_as(d, q, u1, 16 + ifc::cmd_hca_cap::size_bytes - 8).status == 0x51);  // BAD_OUTPUT_LEN

    // No capability bits are offered (uctx_cap 0).
    uint8_t st = 0;
    create_uctx(d, 1, &st);
    CHECK(st == 0x03);

    CHECK(destroy_uctx(d, u2) == 0);
    CHECK(destroy_uctx(d, u2) == 0x05);
    CHECK(exec_as(d, Driver::inbox(hca::kOpAllocPd, 0, 16), u2).status == 0x03);

    // Teardown leaves no user context or UMEM behind.
    create_umem(d, u1, 2);
    CHECK(b.dev.umems.count() == 1);
    CHECK(d.exec(Driver::inbox(hca::kOpTeardownHca, 0, 16), 16).status == 0);
    CHECK(d.exec(Driver::inbox(hca::kOpDisableHca, 0, 16), 16).status == 0);
    CHECK(b.dev.uctxs.count() == 0);
    CHECK(b.dev.umems.count() == 0);
}

TEST_CASE("UMEMs: created for a user context, busy while a CQ or RMP uses them, bounded", "[devx]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    const EqHandle ceq = d.create_eq(6, 1, {0, 0, 0, 0}, uar);
    const uint16_t u = create_uctx(d);
    CmdResult r;

    // The kernel (uid 0) and the shared uid have no UMEMs; a UMEM has pages.
    create_umem(d, 0, 1, &r);
    CHECK(r.status == 0x03);
    create_umem(d, hca::kSharedUid, 1, &r);
    CHECK(r.status == 0x03);
    create_umem(d, u, 0, &r);
    CHECK(r.status == 0x03);
    auto in = Driver::inbox(hca::kOpCreateUmem, 0, ifc::create_umem_in::size_bytes + 8);
    ifc::set(in.data(), ifc::in(ifc::create_umem_in::umem, ifc::umem::num_of_mtt), 1000);
    CHECK(exec_as(d, in, u).status == 0x03);  // more entries than the inbox holds

    const Umem m = create_umem(d, u, 2);
    create_devx_cq(d, u, m, 8192, 6, ceq.eqn, uar, &r);
    CHECK(r.status == 0x03);  // the doorbell record is past the UMEM's end
    const CqHandle cq = create_devx_cq(d, u, m, 4096, 6, ceq.eqn, uar);
    CHECK(destroy_umem(d, u, m.id) == 0x06);  // RESOURCE_BUSY: the CQ writes into it
    CHECK(destroy_uctx(d, u) == 0x06);        // the context still has a UMEM
    CHECK(cmd_on(d, hca::kOpDestroyCq, ifc::destroy_cq_in::cqn, cq.cqn, u) == 0);
    CHECK(destroy_umem(d, u, m.id) == 0);
    CHECK(destroy_umem(d, u, m.id) == 0x05);

    // An RMP in a UMEM: its 4-byte doorbell record 4-byte aligned.
    const uint32_t pd = alloc_pd_as(d, u);
    const Umem w = create_umem(d, u, 2);
    auto rmp = [&](uint64_t dbr_off) {
        auto box = Driver::inbox(hca::kOpCreateRmp, 0, ifc::create_rmp_in::size_bytes);
        const auto wq = ifc::in(ifc::create_rmp_in::ctx, ifc::rmpc::wq);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::log_wq_sz), 6);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::log_wq_stride), 6);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::pd), pd);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::wq_umem_valid), 1);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::wq_umem_id), w.id);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::dbr_umem_valid), 1);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::dbr_umem_id), w.id);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::dbr_addr), dbr_off);
        return exec_as(d, box, u);
    };
    CHECK(rmp(4096 + 2).status == 0x03);
    const auto made = rmp(4096 + 4);
    REQUIRE(made.status == 0);
    CHECK(destroy_umem(d, u, w.id) == 0x06);
    CHECK(cmd_on(d, hca::kOpDestroyRmp, ifc::destroy_rmp_in::rmpn,
                 static_cast<uint32_t>(made.get(ifc::create_rmp_out::rmpn)), u) == 0);
    CHECK(destroy_umem(d, u, w.id) == 0);
    CHECK(cmd_on(d, hca::kOpDeallocPd, ifc::dealloc_pd_in::pd, pd, u) == 0);
    CHECK(destroy_uctx(d, u) == 0);
}

TEST_CASE("a DEVX CQ and QP in UMEMs carry RC traffic both ways", "[devx]") {
    Pair p;
    Driver &d = p.b.d;
    Bench &bb = d.bench();
    const uint16_t u = create_uctx(d);
    const uint32_t pd = alloc_pd_as(d, u);
    // One UMEM: the CQ in page 0, the QP's RQ and SQ in pages 1-2, the
    // doorbell records in page 3.
    const Umem m = create_umem(d, u, 4);
    CqHandle cq = create_devx_cq(d, u, m, 3 * 4096, 6, p.b.ceq.eqn, p.b.uar);
    QpHandle qp = create_devx_qp(d, u, m, 4096, 3 * 4096 + 64, pd, cq.cqn, p.b.uar);
    // mlx5_ib's keys are the kernel's (uid 0), over a user's PD.
    const MrHandle mr = d.create_mtt_mkey(pd, 0x7e0000000000, 8192, 0x1f);
    REQUIRE(mr.key != 0);
    CmdResult r;
    QpHandle qa = p.a.d.create_qp(hca::kQpRc, p.a.pd, p.a.scq.cqn, p.a.rcq.cqn, p.a.uar, 6, 6, &r);
    REQUIRE(r.status == 0);
    p.a.d.connect_qp(qa, qp.qpn, 2);
    d.connect_qp(qp, qa.qpn, 1);

    // A -> the DEVX QP: the receive WQE and its doorbell record are in the UMEM.
    d.post_recv(qp, mr.key, mr.iova, 256);
    p.a.fill(p.a.mr.iova, 200, 0x31);
    Driver::SendWr wr;
    wr.sges = {{p.a.mr.key, p.a.mr.iova, 200}};
    p.a.d.post_send(qa, wr);
    p.w.pump();
    auto c = d.next_cqe(cq);
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeRespSend);
    CHECK(be32(*c, 44) == 200);
    CHECK((be32(*c, 56) & 0xffffff) == qp.qpn);
    const auto *key = bb.dev.mkeys.find(mr.key);
    for (unsigned i = 0; i < 200; ++i) {
        REQUIRE(bb.host.mem(key->page(i / 4096) + i % 4096, 1)[0] == static_cast<uint8_t>(0x31 + i * 7));
    }

    // The DEVX QP -> A: its SQ and doorbell record are in the UMEM.
    p.a.d.post_recv(qa, p.a.mr.key, p.a.mr.iova + 4096, 256);
    Driver::SendWr back;
    back.opcode = hca::kWqeSendImm;
    back.imm = 0x03020100;
    back.sges = {{mr.key, mr.iova, 100}};
    d.post_send(qp, back);
    p.w.pump();
    auto sc = d.next_cqe(cq);
    REQUIRE(sc);
    CHECK(op(*sc) == hca::kCqeReq);
    auto rc = p.a.d.next_cqe(p.a.rcq);
    REQUIRE(rc);
    CHECK(op(*rc) == hca::kCqeRespSendImm);
    CHECK(be32(*rc, 44) == 100);
    CHECK(p.a.same(p.a.mr.iova + 4096, 100, 0x31));

    // A memory key over the UMEM: DEVX's CREATE_MKEY names it instead of a page list.
    auto in = Driver::inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(in.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 1);  // MTT
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lr), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::lw), 1);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::pd), pd);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::start_addr), 0x5000);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::len), 4096);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::log_page_size), 12);
    ifc::set(in.data(), ifc::create_mkey_in::mkey_umem_valid, 1);
    ifc::set(in.data(), ifc::extra::mkey_umem_id, m.id);
    ifc::set(in.data(), ifc::extra::mkey_umem_offset, 4096);
    auto mk = exec_as(d, in, u);
    REQUIRE(mk.status == 0);
    const auto *umkey = bb.dev.mkeys.find(static_cast<uint32_t>(mk.get(ifc::create_mkey_out::mkey_index)) << 8);
    REQUIRE(umkey);
    CHECK(umkey->page(0) == m.pages[1]);
    ifc::set(in.data(), ifc::in(e, ifc::mkc::start_addr), 0x5008);  // not where the UMEM offset sits in its page
    CHECK(exec_as(d, in, u).status == 0x03);
}

TEST_CASE("one user context can neither name nor touch another's objects", "[devx]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    const EqHandle ceq = d.create_eq(6, 1, {0, 0, 0, 0}, uar);
    const uint16_t u1 = create_uctx(d);
    const uint16_t u2 = create_uctx(d);
    const uint32_t pd1 = alloc_pd_as(d, u1);
    const uint32_t pd2 = alloc_pd_as(d, u2);
    const Umem m1 = create_umem(d, u1, 4);
    const Umem m2 = create_umem(d, u2, 4);
    const CqHandle cq1 = create_devx_cq(d, u1, m1, 3 * 4096, 6, ceq.eqn, uar);
    CmdResult r;

    // u2 builds on u1's CQ, PD or UMEM: refused.
    create_devx_qp(d, u2, m2, 4096, 3 * 4096, pd2, cq1.cqn, uar, &r);
    CHECK(r.status == 0x03);
    const CqHandle cq2 = create_devx_cq(d, u2, m2, 3 * 4096, 6, ceq.eqn, uar);
    create_devx_qp(d, u2, m2, 4096, 3 * 4096 + 64, pd1, cq2.cqn, uar, &r);
    CHECK(r.status == 0x03);
    create_devx_qp(d, u2, m1, 4096, 3 * 4096 + 64, pd2, cq2.cqn, uar, &r);
    CHECK(r.status == 0x03);
    create_devx_cq(d, u2, m1, 3 * 4096 + 128, 6, ceq.eqn, uar, &r);
    CHECK(r.status == 0x03);
    auto mk = Driver::inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(mk.data(), ifc::in(e, ifc::mkc::access_mode_1_0), 2);  // KLM, free, as mlx5dv_create_mkey
    ifc::set(mk.data(), ifc::in(e, ifc::mkc::free_), 1);
    ifc::set(mk.data(), ifc::in(e, ifc::mkc::umr_en), 1);
    ifc::set(mk.data(), ifc::in(e, ifc::mkc::translations_octword_size), 4);
    ifc::set(mk.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(mk.data(), ifc::in(e, ifc::mkc::pd), pd1);
    CHECK(exec_as(d, mk, u2).status == 0x03);
    CHECK(exec_as(d, mk, u1).status == 0);

    // u2 acts on u1's objects: refused; u1 and the kernel may.
    CHECK(cmd_on(d, hca::kOpQueryCq, ifc::query_cq_in::cqn, cq1.cqn, u2, 16, ifc::query_cq_out::size_bytes) == 0x03);
    CHECK(cmd_on(d, hca::kOpDestroyCq, ifc::destroy_cq_in::cqn, cq1.cqn, u2) == 0x03);
    CHECK(cmd_on(d, hca::kOpDeallocPd, ifc::dealloc_pd_in::pd, pd1, u2) == 0x03);
    CHECK(destroy_umem(d, u2, m1.id) == 0x03);
    CHECK(cmd_on(d, hca::kOpQueryCq, ifc::query_cq_in::cqn, cq1.cqn, 0, 16, ifc::query_cq_out::size_bytes) == 0);
    const QpHandle qp1 = create_devx_qp(d, u1, m1, 4096, 3 * 4096 + 64, pd1, cq1.cqn, uar);
    CHECK(cmd_on(d, hca::kOpDestroyQp, ifc::destroy_qp_in::qpn, qp1.qpn, u2) == 0x03);
    CHECK(cmd_on(d, hca::kOp2ErrQp, ifc::qp_2err_in::qpn, qp1.qpn, u2) == 0x03);
    CHECK(cmd_on(d, hca::kOp2ErrQp, ifc::qp_2err_in::qpn, qp1.qpn, u1) == 0);
    CHECK(cmd_on(d, hca::kOpDestroyQp, ifc::destroy_qp_in::qpn, qp1.qpn, u1) == 0);
    CHECK(cmd_on(d, hca::kOpDestroyCq, ifc::destroy_cq_in::cqn, cq1.cqn, u1) == 0);
    CHECK(cmd_on(d, hca::kOpDeallocPd, ifc::dealloc_pd_in::pd, pd1, u1) == 0);
}
