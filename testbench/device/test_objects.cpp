// mlx5_ib objects: PDs, XRCDs, memory keys, CQs, SRQs (RMP, XRC, legacy),
// QPs and their transitions, multicast attachment, vport context, PCAP and
// NODE_DESC — good and bad input.
#include <catch2/catch.hpp>

#include <cstring>

#include "be.h"
#include "driver.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

struct Setup {
    Bench b;
    Driver d{b};
    uint32_t uar = 0;
    EqHandle eq;
    Setup() {
        d.bring_up();
        uar = d.alloc_uar();
        eq = d.create_eq(6, 1, {0, 0, 0, 0}, uar);
    }
};

}  // namespace

TEST_CASE("PD and XRCD allocation and release", "[obj]") {
    Setup s;
    const uint32_t pd = s.d.alloc_pd();
    const uint32_t pd2 = s.d.alloc_pd();
    CHECK(pd != pd2);
    auto dealloc = Driver::inbox(hca::kOpDeallocPd, 0, 16);
    ifc::set(dealloc.data(), ifc::dealloc_pd_in::pd, pd);
    CHECK(s.d.exec(dealloc, 16).status == 0);
    CHECK(s.d.exec(dealloc, 16).status == 0x05);
    const uint32_t x = s.d.alloc_xrcd();
    auto dx = Driver::inbox(hca::kOpDeallocXrcd, 0, 16);
    ifc::set(dx.data(), ifc::dealloc_xrcd_in::xrcd, x);
    CHECK(s.d.exec(dx, 16).status == 0);
    CHECK(s.d.exec(dx, 16).status == 0x05);
}

TEST_CASE("memory keys: PA and MTT translation, variant, bounds, access, PD", "[obj][mkey]") {
    Setup s;
    const uint32_t pd = s.d.alloc_pd();
    const uint32_t pa = s.d.create_pa_mkey(pd, 0x00);
    CHECK((pa >> 8) >= 2);  // index 0 and 1 are never handed out
    std::vector<hca::DmaChunk> out;
    CHECK(s.b.dev.mkeys.translate(pa, pd, 0x12345678, 100, hca::kAccLocalWrite, out) == hca::XlatError::None);
    REQUIRE(out.size() == 1);
    CHECK(out[0].addr == 0x12345678);
    CHECK(s.b.dev.mkeys.translate(pa ^ 1, pd, 0, 1, 0, out) == hca::XlatError::BadKey);  // variant
    CHECK(s.b.dev.mkeys.translate(pa, pd + 1, 0, 1, 0, out) == hca::XlatError::BadPd);
    CHECK(s.b.dev.mkeys.translate(pa, pd, 0, 1, hca::kAccRemoteWrite, out) == hca::XlatError::Access);

    // An MTT key starting in the middle of a page: every byte maps to its page.
    auto mr = s.d.create_mtt_mkey(pd, 0x7f0000001800, 3 * 4096);
    REQUIRE(mr.key);
    out.clear();
    CHECK(s.b.dev.mkeys.translate(mr.key, pd, mr.iova, mr.len, hca::kAccLocalWrite, out) == hca::XlatError::None);
    uint64_t total = 0;
    for (auto &c : out) {
        total += c.len;
    }
    CHECK(total == mr.len);
    CHECK(out.front().addr == mr.addr);
    CHECK(s.b.dev.mkeys.translate(mr.key, pd, mr.iova - 1, 2, 0, out) == hca::XlatError::Bounds);
    CHECK(s.b.dev.mkeys.translate(mr.key, pd, mr.iova + mr.len - 1, 2, 0, out) == hca::XlatError::Bounds);

    // Query returns the context; destroy twice fails the second time.
    auto q = Driver::inbox(hca::kOpQueryMkey, 0, 16);
    ifc::set(q.data(), ifc::query_mkey_in::mkey_index, mr.key >> 8);
    auto qr = s.d.exec(q, ifc::query_mkey_out::size_bytes);
    REQUIRE(qr.status == 0);
    const auto e = ifc::query_mkey_out::memory_key_mkey_entry;
    CHECK(qr.get(ifc::in(e, ifc::mkc::start_addr)) == mr.iova);
    CHECK(qr.get(ifc::in(e, ifc::mkc::pd)) == pd);
    auto d = Driver::inbox(hca::kOpDestroyMkey, 0, 16);
    ifc::set(d.data(), ifc::destroy_mkey_in::mkey_index, mr.key >> 8);
    CHECK(s.d.exec(d, 16).status == 0);
    CHECK(s.d.exec(d, 16).status == 0x05);
    CHECK(s.b.dev.mkeys.translate(mr.key, pd, mr.iova, 1, 0, out) == hca::XlatError::BadKey);

    // Bad input: unknown PD, access mode 4 (none), too few page entries.
    CmdResult r;
    s.d.create_mtt_mkey(pd + 77, 0x1000, 4096, 3, &r);
    CHECK(r.status == 0x03);
    auto mode4 = Driver::inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes);
    ifc::set(mode4.data(), ifc::in(ifc::create_mkey_in::memory_key_mkey_entry, ifc::mkc::access_mode_4_2), 1);
    ifc::set(mode4.data(), ifc::in(ifc::create_mkey_in::memory_key_mkey_entry, ifc::mkc::pd), pd);
    CHECK(s.d.exec(mode4, 16).status == 0x03);
    auto short_pas = Driver::inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes + 16);
    const auto me = ifc::create_mkey_in::memory_key_mkey_entry;
    ifc::set(short_pas.data(), ifc::in(me, ifc::mkc::access_mode_1_0), 1);
    ifc::set(short_pas.data(), ifc::in(me, ifc::mkc::pd), pd);
    ifc::set(short_pas.data(), ifc::in(me, ifc::mkc::len), 8 * 4096);
    ifc::set(short_pas.data(), ifc::in(me, ifc::mkc::log_page_size), 12);
    ifc::set(short_pas.data(), ifc::in(me, ifc::mkc::translations_octword_size), 4);
    ifc::set(short_pas.data(), ifc::create_mkey_in::translations_octword_actual_size, 4);
    CHECK(s.d.exec(short_pas, 16).status == 0x50);  // 4 octwords announced, 1 present
}

TEST_CASE("CQs: creation checks, query, busy while a QP uses them", "[obj][cq]") {
    Setup s;
    CmdResult r;
    auto cq = s.d.create_cq(4, s.eq.eqn, s.uar, &r);
    REQUIRE(r.status == 0);
    s.d.create_cq(4, 99, s.uar, &r);
    CHECK(r.status == 0x03);  // no such EQ
    s.d.create_cq(4, s.eq.eqn, 1000, &r);
    CHECK(r.status == 0x03);  // UAR not allocated
    auto big = Driver::inbox(hca::kOpCreateCq, 0, ifc::create_cq_in::size_bytes + 8);
    ifc::set(big.data(), ifc::in(ifc::create_cq_in::cq_context, ifc::cqc::log_cq_size), 23);
    ifc::set(big.data(), ifc::in(ifc::create_cq_in::cq_context, ifc::cqc::uar_page), s.uar);
    ifc::set(big.data(), ifc::in(ifc::create_cq_in::cq_context, ifc::cqc::c_eqn_or_apu_element), s.eq.eqn);
    CHECK(s.d.exec(big, 16).status == 0x03);  // beyond log_max_cq_sz

    auto q = Driver::inbox(hca::kOpQueryCq, 0, 16);
    ifc::set(q.data(), ifc::query_cq_in::cqn, cq.cqn);
    auto qr = s.d.exec(q, ifc::query_cq_out::size_bytes);
    REQUIRE(qr.status == 0);
    CHECK(qr.get(ifc::in(ifc::query_cq_out::cq_context, ifc::cqc::log_cq_size)) == 4);
    CHECK(qr.get(ifc::in(ifc::query_cq_out::cq_context, ifc::cqc::c_eqn_or_apu_element)) == s.eq.eqn);

    const uint32_t pd = s.d.alloc_pd();
    auto qp = s.d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, s.uar, 4, 4, &r);
    REQUIRE(r.status == 0);
    auto dcq = Driver::inbox(hca::kOpDestroyCq, 0, 16);
    ifc::set(dcq.data(), ifc::destroy_cq_in::cqn, cq.cqn);
    CHECK(s.d.exec(dcq, 16).status == 0x06);  // resource busy
    auto dqp = Driver::inbox(hca::kOpDestroyQp, 0, 16);
    ifc::set(dqp.data(), ifc::destroy_qp_in::qpn, qp.qpn);
    CHECK(s.d.exec(dqp, 16).status == 0);
    CHECK(s.d.exec(dcq, 16).status == 0);
    CHECK(s.d.exec(dcq, 16).status == 0x05);
}

TEST_CASE("SRQs: RMP, XRC SRQ and legacy SRQ create/query/arm/destroy", "[obj][srq]") {
    Setup s;
    const uint32_t pd = s.d.alloc_pd();
    const uint32_t xrcd = s.d.alloc_xrcd();
    auto cq = s.d.create_cq(4, s.eq.eqn, s.uar);
    const uint64_t buf = s.b.host.alloc(4096);
    const uint64_t dbr = s.b.host.alloc(64, 64);

    // RMP: rmpc.wq with a linked-list WQ of 16 entries of 64 bytes.
    auto rmp = Driver::inbox(hca::kOpCreateRmp, 0, ifc::create_rmp_in::size_bytes + 8);
    const auto wq = ifc::in(ifc::create_rmp_in::ctx, ifc::rmpc::wq);
    ifc::set(rmp.data(), ifc::in(wq, ifc::wq::log_wq_sz), 4);
    ifc::set(rmp.data(), ifc::in(wq, ifc::wq::log_wq_stride), 6);
    ifc::set(rmp.data(), ifc::in(wq, ifc::wq::pd), pd);
    ifc::set(rmp.data(), ifc::in(wq, ifc::wq::dbr_addr), dbr);
    hca::store_be64(rmp.data() + ifc::create_rmp_in::size_bytes, buf);
    auto r = s.d.exec(rmp, 16);
    REQUIRE(r.status == 0);
    const uint32_t rmpn = static_cast<uint32_t>(r.get(ifc::create_rmp_out::rmpn));
    auto qr = Driver::inbox(hca::kOpQueryRmp, 0, 16);
    ifc::set(qr.data(), ifc::query_rmp_in::rmpn, rmpn);
    auto q = s.d.exec(qr, ifc::query_rmp_out::size_bytes);
    REQUIRE(q.status == 0);
    CHECK(q.get(ifc::in(ifc::in(ifc::query_rmp_out::rmp_context, ifc::rmpc::wq), ifc::wq::log_wq_sz)) == 4);
    auto mod = Driver::inbox(hca::kOpModifyRmp, 0, ifc::modify_rmp_in::size_bytes);
    ifc::set(mod.data(), ifc::modify_rmp_in::rmpn, rmpn);
    ifc::set(mod.data(), ifc::in(ifc::modify_rmp_in::bitmask, ifc::rmp_bitmask::lwm), 1);
    ifc::set(mod.data(), ifc::in(ifc::in(ifc::modify_rmp_in::ctx, ifc::rmpc::wq), ifc::wq::lwm), 4);
    CHECK(s.d.exec(mod, 16).status == 0);
    CHECK(s.b.dev.srqs.find(rmpn)->lwm == 4);
    ifc::set(mod.data(), ifc::in(ifc::in(ifc::modify_rmp_in::ctx, ifc::rmpc::wq), ifc::wq::lwm), 16);
    CHECK(s.d.exec(mod, 16).status == 0x03);  // limit must be below the size

    // XRC SRQ needs an existing XRCD and CQ.
    auto xs = Driver::inbox(hca::kOpCreateXrcSrq, 0, ifc::create_xrc_srq_in::size_bytes + 8);
    const auto xc = ifc::create_xrc_srq_in::xrc_srq_context_entry;
    ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::log_xrc_srq_size), 4);
    ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::log_rq_stride), 2);
    ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::xrcd), xrcd);
    ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::cqn), cq.cqn);
    ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::pd), pd);
    ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::db_record_addr_l), (dbr + 8) >> 2);
    hca::store_be64(xs.data() + ifc::create_xrc_srq_in::size_bytes, s.b.host.alloc(4096));
    r = s.d.exec(xs, 16);
    REQUIRE(r.status == 0);
    const uint32_t xsrqn = static_cast<uint32_t>(r.get(ifc::create_xrc_srq_out::xrc_srqn));
    CHECK(s.b.dev.srqs.find(xsrqn)->dbr == dbr + 8);
    ifc::set(xs.data(), ifc::in(xc, ifc::xrc_srqc::xrcd), xrcd + 50);
    CHECK(s.d.exec(xs, 16).status == 0x03);

    // A QP on the RMP holds it.
    CmdResult qpr;
    auto qp = s.d.create_qp(hca::kQpRc, pd, cq.cqn, cq.cqn, s.uar, 4, 0, &qpr, 1, rmpn);
    REQUIRE(qpr.status == 0);
    auto drmp = Driver::inbox(hca::kOpDestroyRmp, 0, 16);
    ifc::set(drmp.data(), ifc::destroy_rmp_in::rmpn, rmpn);
    CHECK(s.d.exec(drmp, 16).status == 0x06);
    auto dqp = Driver::inbox(hca::kOpDestroyQp, 0, 16);
    ifc::set(dqp.data(), ifc::destroy_qp_in::qpn, qp.qpn);
    CHECK(s.d.exec(dqp, 16).status == 0);
    CHECK(s.d.exec(drmp, 16).status == 0);
    auto dx = Driver::inbox(hca::kOpDestroyXrcSrq, 0, 16);
    ifc::set(dx.data(), ifc::destroy_xrc_srq_in::xrc_srqn, xsrqn);
    CHECK(s.d.exec(dx, 16).status == 0);
    // Destroying an RMP number as an XRC SRQ fails: the kinds are checked.
    CHECK(s.d.exec(dx, 16).status == 0x05);
}

TEST_CASE("QP transitions: required order, wrong states, query, error and reset", "[obj][qp]") {
    Setup s;
    const uint32_t pd = s.d.alloc_pd();
    auto cq = s.d.create_cq(5, s.eq.eqn, s.uar);
    CmdResult r;
    auto qp = s.d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, s.uar, 5, 5, &r);
    REQUIRE(r.status == 0);
    CHECK(qp.qpn >= 0x100);
    CHECK(s.d.modify_qp(0x504, qp.qpn).status == 0x10);  // RTR2RTS from RST
    CHECK(s.d.modify_qp(0x503, qp.qpn).status == 0x10);
    s.d.ud_to_rts(qp, 0x11111111);
    CHECK(s.d.modify_qp(0x502, qp.qpn).status == 0x10);  // RST2INIT from RTS
    auto q = Driver::inbox(hca::kOpQueryQp, 0, 16);
    ifc::set(q.data(), ifc::query_qp_in::qpn, qp.qpn);
    auto qr = s.d.exec(q, ifc::query_qp_out::size_bytes);
    REQUIRE(qr.status == 0);
    // 6.1's header has no trailing QPC-extension union: its driver asks for
    // 0x110 bytes (7.2's for 0x1d0), and both get the QP context.
    CHECK(ifc::query_qp_out::fixed_bytes == 0x110);
    CHECK(s.d.exec(q, 0x110).get(ifc::in(ifc::query_qp_out::qpc, ifc::qpc::state)) == 3);
    CHECK(s.d.exec(q, 0x10f).status == 0x51);  // shorter than the QP context: bad output length
    const auto ctx = ifc::query_qp_out::qpc;
    CHECK(qr.get(ifc::in(ctx, ifc::qpc::state)) == 3);
    CHECK(qr.get(ifc::in(ctx, ifc::qpc::q_key)) == 0x11111111);
    CHECK(qr.get(ifc::in(ctx, ifc::qpc::next_send_psn)) == 0x100);
    CHECK(qr.get(ifc::in(ctx, ifc::qpc::st)) == hca::kQpUd);
    // RTS2RTS changes the Q_Key only with its opt_param_mask bit.
    const auto mctx = ifc::rst2init_qp_in::qpc;
    CHECK(s.d.modify_qp(0x505, qp.qpn, [&](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(mctx, ifc::qpc::q_key), 0x22);
    }).status == 0);
    CHECK(s.b.dev.qps.find(qp.qpn)->qkey == 0x11111111);
    CHECK(s.d.modify_qp(0x505, qp.qpn, [&](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(mctx, ifc::qpc::q_key), 0x22);
    }, 1u << 5).status == 0);
    CHECK(s.b.dev.qps.find(qp.qpn)->qkey == 0x22);
    CHECK(s.d.modify_qp(0x507, qp.qpn).status == 0);
    CHECK(s.b.dev.qps.find(qp.qpn)->state == hca::QpState::Err);
    CHECK(s.d.modify_qp(0x50a, qp.qpn).status == 0);
    CHECK(s.b.dev.qps.find(qp.qpn)->state == hca::QpState::Rst);
    // A refused modify changes nothing.
    CHECK(s.d.modify_qp(0x502, qp.qpn, [&](std::vector<uint8_t> &in) {
        ifc::set(in.data(), ifc::in(mctx, ifc::qpc::q_key), 0x33);
        ifc::set(in.data(), ifc::in(ifc::in(mctx, ifc::qpc::primary_address_path), ifc::ads::vhca_port_num), 2);
    }).status == 0x03);
    CHECK(s.b.dev.qps.find(qp.qpn)->state == hca::QpState::Rst);
    CHECK(s.b.dev.qps.find(qp.qpn)->qkey == 0x22);
    CHECK(s.d.modify_qp(0x502, 0xabcdef).status == 0x05);  // no such QP

    // QP0/QP1: one each; bad references are refused.
    s.d.create_qp(hca::kQpQp1, pd, cq.cqn, cq.cqn, s.uar, 4, 4, &r);
    CHECK(r.status == 0);
    s.d.create_qp(hca::kQpQp1, pd, cq.cqn, cq.cqn, s.uar, 4, 4, &r);
    CHECK(r.status == 0x06);
    s.d.create_qp(hca::kQpUd, pd, 0x777, cq.cqn, s.uar, 4, 4, &r);
    CHECK(r.status == 0x03);
    s.d.create_qp(hca::kQpUd, pd + 9, cq.cqn, cq.cqn, s.uar, 4, 4, &r);
    CHECK(r.status == 0x03);
    s.d.create_qp(0x9, pd, cq.cqn, cq.cqn, s.uar, 4, 4, &r);  // raw packet
    CHECK(r.status == 0x03);
    s.d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, s.uar, 4, 4, &r, 2);
    CHECK(r.status == 0x03);  // rq_type 2 (cyclic RQ) is not supported
}

TEST_CASE("multicast attach and detach", "[obj][mcg]") {
    Setup s;
    const uint32_t pd = s.d.alloc_pd();
    auto cq = s.d.create_cq(4, s.eq.eqn, s.uar);
    auto qp = s.d.create_qp(hca::kQpUd, pd, cq.cqn, cq.cqn, s.uar, 4, 4);
    auto att = Driver::inbox(hca::kOpAttachToMcg, 0, ifc::attach_to_mcg_in::size_bytes);
    ifc::set(att.data(), ifc::attach_to_mcg_in::qpn, qp.qpn);
    const uint8_t mgid[16] = {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    std::memcpy(att.data() + 16, mgid, 16);
    CHECK(s.d.exec(att, 16).status == 0);
    CHECK(s.b.dev.qps.mcgs().size() == 1);
    auto det = att;
    ifc::set(det.data(), ifc::cmd_in_hdr::opcode, hca::kOpDetachFromMcg);
    CHECK(s.d.exec(det, 16).status == 0);
    CHECK(s.d.exec(det, 16).status == 0x03);
    CHECK(s.b.dev.qps.mcgs().empty());
    att[16] = 0xfe;  // not a multicast GID
    CHECK(s.d.exec(att, 16).status == 0x03);
}

TEST_CASE("vport context, PCAP and NODE_DESC", "[obj][port]") {
    Setup s;
    auto v = Driver::inbox(hca::kOpQueryHcaVportContext, 0, 16);
    auto r = s.d.exec(v, ifc::query_hca_vport_context_out::size_bytes);
    REQUIRE(r.status == 0);
    const auto ctx = ifc::query_hca_vport_context_out::hca_vport_context;
    CHECK(r.get(ifc::in(ctx, ifc::hca_vport_context::grh_required)) == 0);
    CHECK(r.get(ifc::in(ctx, ifc::hca_vport_context::port_guid)) == s.b.dev.node_guid());
    ifc::set(v.data(), ifc::query_hca_vport_context_in::vport_number, 3);
    CHECK(s.d.exec(v, ifc::query_hca_vport_context_out::size_bytes).status == 0x03);

    auto pcap = Driver::inbox(hca::kOpAccessReg, 0, 16 + 20);
    ifc::set(pcap.data(), ifc::access_register_in::register_id, 0x5001);
    pcap[16 + 1] = 1;
    hca::store_be32(pcap.data() + 16 + 4, hca::Port::kBaseCapMask | (1u << 16));
    CHECK(s.d.exec(pcap, 16 + 20).status == 0);
    CHECK(s.b.dev.port1.cap_mask() & (1u << 16));  // IsCM from ib_cm
    auto nd = Driver::inbox(hca::kOpAccessReg, 0, 16 + 64);
    ifc::set(nd.data(), ifc::access_register_in::register_id, 0x6001);
    std::memcpy(nd.data() + 16, "node0 mlx5_0", 12);
    CHECK(s.d.exec(nd, 16 + 64).status == 0);
    CHECK(std::string(reinterpret_cast<const char *>(s.b.dev.port1.node_desc().data())) == "node0 mlx5_0");
}
