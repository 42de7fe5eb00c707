// libFuzzer target: object lifecycles through the command interface.  A
// small decoder turns the input into a command sequence — create EQs, CQs,
// PDs, XRCDs, Q counter sets, mkeys (PA, MTT, free/UMR), QPs of every type,
// SRQs, XRC SRQs, RMPs and DCTs, DEVX user contexts and UMEMs with CQs and
// QPs in them, commands carrying the uid of one context or another; walk QPs through their state transitions; query,
// modify, arm, attach to multicast groups and destroy in any order — with handles taken from the objects created so far
// (or made up), well-formed inboxes whose fields the input chooses, and a few bytes of each inbox overwritten. The
// HCA-level commands (TEARDOWN, DISABLE, INIT, MANAGE_PAGES, SET_*) come too, rarely.  After the input every object it
// left is destroyed, so the next input starts from the same device.
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "fuzz_input.h"
#include "fuzz_world.h"
#include "ifc/mlx5_ifc_extra.h"

using namespace hcatest;
using hcafuzz::Input;
namespace ifc = hca::ifc;

namespace {

struct Tracked {
    uint16_t destroy_op;
    ifc::Field id;
    uint32_t value;
};

struct World {
    Bench b;
    Driver d{b};
    uint32_t uar = 0;
    bool dirty = false;  // the input changed the HCA itself: reset the device
    // Objects the current input created, by kind; destroyed afterwards in
    // dependency order (QPs first).
    std::vector<uint32_t> eqs, pds, xrcds, qcounters, psvs, mkeys, cqs, qps, dcts, sqs, srqs, xsrqs, rmps, xrqs, uars,
        uctxs, umems;
    std::vector<std::pair<uint64_t, uint32_t>> memics;  // device memory: BAR0 address, bytes

    void setup() {
        hcafuzz::fresh_device(b, d);
        uar = d.alloc_uar();
        dirty = false;
    }
};

World &world() {
    static World *w = [] {
        auto *x = new World;
        x->setup();
        return x;
    }();
    return *w;
}

// A handle: usually one of the objects created so far, sometimes any number.
uint32_t pick(Input &in, const std::vector<uint32_t> &v, uint32_t mask = 0xffffff) {
    const uint8_t c = in.u8();
    if (v.empty() || c >= 230) {
        return c & 1 ? in.u32() & mask : c & 0x1f;
    }
    return v[c % v.size()];
}

CmdResult run(World &x, Input &in, std::vector<uint8_t> &box, size_t outlen = 16) {
    if (in.u8() >= 200) {
        hca::store_be16(box.data() + 2, static_cast<uint16_t>(pick(in, x.uctxs, 0xffff)));  // a user context's
    }
    hcafuzz::patch(in, box, 3);
    return x.d.exec(box, outlen, in.u8() % 31);
}

bool ok(const CmdResult &r) { return r.completed && !r.delivery && !r.status; }

// 4 KiB pages of guest memory for a buffer of n pages, owner bits as mlx5
// initializes them, their addresses at pas in the inbox.
void pages(World &x, std::vector<uint8_t> &box, size_t pas, size_t n, uint8_t fill) {
    for (size_t i = 0; i < n; ++i) {
        const uint64_t p = x.b.host.alloc(4096);
        for (unsigned e = 0; e < 64; ++e) {
            x.b.host.mem(p + e * 64 + 63, 1)[0] = fill;
        }
        if (pas + i * 8 + 8 <= box.size()) {
            hca::store_be64(box.data() + pas + i * 8, p);
        }
    }
}

void create_eq(World &x, Input &in) {
    const unsigned log = in.u8() % 9;
    const size_t n = ((size_t{1} << log) * 64 + 4095) / 4096;
    auto box = Driver::inbox(hca::kOpCreateEq, 0, ifc::create_eq_in::size_bytes + n * 8);
    const auto ctx = ifc::create_eq_in::eq_context_entry;
    ifc::set(box.data(), ifc::in(ctx, ifc::eqc::log_eq_size), log);
    ifc::set(box.data(), ifc::in(ctx, ifc::eqc::uar_page), in.u8() < 240 ? x.uar : in.u32());
    ifc::set(box.data(), ifc::in(ctx, ifc::eqc::intr), in.u8() % 6);
    for (unsigned w = 0; w < 4; ++w) {
        hca::store_be64(box.data() + ifc::create_eq_in::event_bitmask.at(w), w == 0 ? in.u64() : 0);
    }
    pages(x, box, ifc::create_eq_in::pas.byte(), n, 1);
    auto r = run(x, in, box, ifc::create_eq_out::size_bytes);
    if (ok(r)) {
        x.eqs.push_back(static_cast<uint32_t>(r.get(ifc::create_eq_out::eq_number)));
    }
}

void create_mkey(World &x, Input &in) {
    // PA, MTT, free UMR-enabled, KLM, MEMIC (device memory), KSM.
    const unsigned mode = in.pick(6);
    const unsigned oct = mode == 0 ? 0 : in.u8() % 9;
    auto box = Driver::inbox(hca::kOpCreateMkey, 0, ifc::create_mkey_in::size_bytes + (mode == 2 ? 0 : oct * 16));
    const auto e = ifc::create_mkey_in::memory_key_mkey_entry;
    const uint8_t access = in.u8();
    ifc::set(box.data(), ifc::in(e, ifc::mkc::access_mode_1_0), mode == 0 ? 0 : mode == 3 ? 2 : mode == 5 ? 3 : 1);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::access_mode_4_2), mode == 4);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::lr), 1);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::lw), access & 1);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::rr), (access >> 1) & 1);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::rw), (access >> 2) & 1);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::a), (access >> 3) & 1);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::umr_en), mode != 0);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::free_), mode == 2);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::length64), mode == 0);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::pd), pick(in, x.pds));
    ifc::set(box.data(), ifc::in(e, ifc::mkc::qpn), 0xffffff);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::mkey_7_0), in.u8());
    ifc::set(box.data(), ifc::in(e, ifc::mkc::start_addr),
             in.flag() ? (mode == 4 ? HCA_MODEL_MEMIC_BAR_OFFSET + in.u16() * 4 : 0x10000) : in.u64());
    ifc::set(box.data(), ifc::in(e, ifc::mkc::len), in.flag() ? oct * 8192 : in.u32());
    ifc::set(box.data(), ifc::in(e, ifc::mkc::log_page_size), in.flag() ? 12 : in.u8() & 0x3f);
    ifc::set(box.data(), ifc::in(e, ifc::mkc::translations_octword_size), oct);
    ifc::set(box.data(), ifc::create_mkey_in::translations_octword_actual_size, mode == 2 ? 0 : oct);
    if (mode == 2 && in.u8() < 64) {  // a signature key (bsf_en), its BSF size right or not
        ifc::set(box.data(), ifc::in(e, ifc::mkc::bsf_en), 1);
        ifc::set(box.data(), ifc::in(e, ifc::mkc::bsf_octword_size), in.flag() ? 4 : in.u8());
    }
    const bool indirect = mode == 3 || mode == 5;  // entries (byte count, key; address) naming keys
    for (unsigned i = 0; mode != 2 && i < oct * 2; ++i) {
        const uint32_t k = in.flag() ? hca::kNullMkey : pick(in, x.mkeys) << 8 | in.u8();
        const uint64_t v = !indirect    ? FakeHost::kMemBase + i * 4096
                           : i % 2 == 0 ? uint64_t{in.u16()} << 32 | k
                                        : uint64_t{in.u16()} * 64;
        hca::store_be64(box.data() + ifc::create_mkey_in::size_bytes + i * 8, in.flag() ? v : in.u64());
    }
    auto r = run(x, in, box);
    if (ok(r)) {
        x.mkeys.push_back(static_cast<uint32_t>(r.get(ifc::create_mkey_out::mkey_index)));
    }
}

void create_cq(World &x, Input &in) {
    const unsigned log = in.u8() % 11;
    const size_t n = ((size_t{1} << log) * 64 + 4095) / 4096;
    auto box = Driver::inbox(hca::kOpCreateCq, 0, ifc::create_cq_in::size_bytes + n * 8);
    const auto ctx = ifc::create_cq_in::cq_context;
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::log_cq_size), log);
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::uar_page), in.u8() < 240 ? x.uar : in.u32());
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::c_eqn_or_apu_element), pick(in, x.eqs));
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::cq_period), in.u8() < 200 ? 0 : in.u16());
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::cq_max_count), in.u8() < 200 ? 0 : in.u16());
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::dbr_addr), in.u8() < 240 ? x.b.host.alloc(64, 64) : in.u64());
    if (in.u8() >= 192) {  // CQE compression, any format and layout
        ifc::set(box.data(), ifc::in(ctx, ifc::cqc::cqe_comp_en), 1);
        ifc::set(box.data(), ifc::in(ctx, ifc::cqc::mini_cqe_res_format), in.u8() % 4);
        ifc::set(box.data(), ifc::in(ctx, ifc::cqc::cqe_compression_layout), in.u8() >= 240);
    }
    pages(x, box, ifc::create_cq_in::size_bytes, n, 0xf0);
    auto r = run(x, in, box);
    if (ok(r)) {
        x.cqs.push_back(static_cast<uint32_t>(r.get(ifc::create_cq_out::cqn)));
    }
}

void modify_cq(World &x, Input &in) {
    const bool resize = in.flag();
    const unsigned log = in.u8() % 11;
    const size_t n = resize ? ((size_t{1} << log) * 64 + 4095) / 4096 : 0;
    auto box = Driver::inbox(hca::kOpModifyCq, resize, ifc::modify_cq_in::size_bytes + n * 8);
    ifc::set(box.data(), ifc::modify_cq_in::cqn, pick(in, x.cqs));
    ifc::set(box.data(), ifc::Field{ifc::modify_cq_in::modify_field_select_resize_field_select.off, 32},
             resize ? 7 : in.u8() & 3);
    const auto ctx = ifc::modify_cq_in::cq_context;
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::log_cq_size), log);
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::cq_period), in.u16());
    ifc::set(box.data(), ifc::in(ctx, ifc::cqc::cq_max_count), in.u16());
    pages(x, box, ifc::modify_cq_in::size_bytes, n, 0xf0);
    run(x, in, box);
}

void create_qp(World &x, Input &in) {
    static constexpr uint8_t kTypes[] = {hca::kQpRc, hca::kQpUc, hca::kQpUd, hca::kQpXrc,
                                         hca::kQpQp0, hca::kQpQp1, hca::kQpRegUmr, 0x5};
    const uint8_t st = in.pick(kTypes);
    const uint8_t rq_type = in.u8() % 4 == 0 ? in.u8() % 4 : (st == hca::kQpXrc ? 1 : 0);
    const uint32_t srqn = pick(in, rq_type == 1 ? (in.flag() ? x.srqs : in.flag() ? x.xrqs : x.rmps) : x.srqs);
    const uint32_t xrcd = pick(in, x.xrcds);
    const uint32_t pd = pick(in, x.pds);
    const uint32_t scq = pick(in, x.cqs);
    const uint32_t rcq = in.flag() ? scq : pick(in, x.cqs);
    const unsigned log_sq = in.u8() % 9;
    const unsigned log_rq = rq_type == 0 ? in.u8() % 9 : 0;
    x.d.qp_fill = [&](std::vector<uint8_t> &box) {
        ifc::set(box.data(), ifc::in(ifc::create_qp_in::qpc, ifc::qpc::xrcd), xrcd);
        hcafuzz::patch(in, box, 3);
    };
    CmdResult r;
    QpHandle qp = x.d.create_qp(st, pd, scq, rcq, in.u8() < 240 ? x.uar : in.u32(), log_sq, log_rq, &r, rq_type,
                                srqn);
    if (ok(r)) {
        x.qps.push_back(qp.qpn);
    }
}

void modify_qp(World &x, Input &in) {
    static constexpr uint16_t kOps[] = {0x502, 0x503, 0x504, 0x505, 0x506, 0x507, 0x50a, 0x50c, 0x50e};
    const uint16_t op = in.pick(kOps);
    const uint32_t qpn = pick(in, x.qps);
    const auto ctx = ifc::rst2init_qp_in::qpc;
    const auto pri = ifc::in(ctx, ifc::qpc::primary_address_path);
    x.d.modify_qp(op, qpn, [&](std::vector<uint8_t> &box) {
        if (box.size() < ifc::rst2init_qp_in::size_bytes) {
            return;
        }
        ifc::set(box.data(), ifc::in(pri, ifc::ads::vhca_port_num), in.u8() < 240 ? 1 : in.u8());
        ifc::set(box.data(), ifc::in(pri, ifc::ads::pkey_index), in.u8() < 240 ? 0 : in.u16());
        ifc::set(box.data(), ifc::in(pri, ifc::ads::rlid), in.u16());
        ifc::set(box.data(), ifc::in(pri, ifc::ads::grh), in.u8() > 230);
        ifc::set(box.data(), ifc::in(pri, ifc::ads::ack_timeout), in.u8());
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::q_key), in.u32());
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::mtu), in.u8() % 8);
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::log_msg_max), in.u8() % 32);
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::remote_qpn), pick(in, x.qps));
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::next_rcv_psn), in.u32());
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::next_send_psn), in.u32());
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::log_rra_max), in.u8() % 8);
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::log_sra_max), in.u8() % 8);
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::retry_count), in.u8());
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::rnr_retry), in.u8());
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::min_rnr_nak), in.u8());
        const uint8_t acc = in.u8();
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::rre), acc & 1);
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::rwe), (acc >> 1) & 1);
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::rae), (acc >> 2) & 1);
        ifc::set(box.data(), ifc::in(ctx, ifc::qpc::counter_set_id), pick(in, x.qcounters, 0xff));
        hcafuzz::patch(in, box, 3);
    }, in.u8() < 200 ? 0 : in.u32());
}

void create_srq(World &x, Input &in) {
    const unsigned kind = in.pick(4);  // SRQ, XRC SRQ, RMP, XRQ
    const unsigned log = in.u8() % 8;
    const size_t n = ((size_t{1} << log) * 64 + 4095) / 4096;
    const uint64_t dbr = in.u8() < 240 ? x.b.host.alloc(64, 64) : in.u64();
    std::vector<uint8_t> box;
    if (kind == 0) {
        box = Driver::inbox(hca::kOpCreateSrq, 0, ifc::create_srq_in::size_bytes + n * 8);
        const auto c = ifc::create_srq_in::srq_context_entry;
        ifc::set(box.data(), ifc::in(c, ifc::srqc::log_srq_size), log);
        ifc::set(box.data(), ifc::in(c, ifc::srqc::log_rq_stride), in.u8() % 6);
        ifc::set(box.data(), ifc::in(c, ifc::srqc::pd), pick(in, x.pds));
        ifc::set(box.data(), ifc::in(c, ifc::srqc::cqn), pick(in, x.cqs));
        ifc::set(box.data(), ifc::in(c, ifc::srqc::xrcd), pick(in, x.xrcds));
        ifc::set(box.data(), ifc::in(c, ifc::srqc::lwm), in.u8() < 200 ? 0 : in.u16());
        ifc::set(box.data(), ifc::in(c, ifc::srqc::dbr_addr), dbr);
        pages(x, box, ifc::create_srq_in::pas.byte(), n, 0);
    } else if (kind == 1) {
        box = Driver::inbox(hca::kOpCreateXrcSrq, 0, ifc::create_xrc_srq_in::size_bytes + n * 8);
        const auto c = ifc::create_xrc_srq_in::xrc_srq_context_entry;
        ifc::set(box.data(), ifc::in(c, ifc::xrc_srqc::log_xrc_srq_size), log);
        ifc::set(box.data(), ifc::in(c, ifc::xrc_srqc::log_rq_stride), in.u8() % 6);
        ifc::set(box.data(), ifc::in(c, ifc::xrc_srqc::xrcd), pick(in, x.xrcds));
        ifc::set(box.data(), ifc::in(c, ifc::xrc_srqc::cqn), pick(in, x.cqs));
        ifc::set(box.data(), ifc::in(c, ifc::xrc_srqc::pd), pick(in, x.pds));
        ifc::set(box.data(), ifc::in(c, ifc::xrc_srqc::db_record_addr_l), (dbr & 0xffffffff) >> 2);
        pages(x, box, ifc::create_xrc_srq_in::size_bytes, n, 0);
    } else if (kind == 3) {
        // A tag-matching (or plain) XRQ: topology, offload and list size
        // mostly right.
        box = Driver::inbox(hca::kOpCreateXrq, 0, ifc::create_xrq_in::size_bytes + n * 8);
        const auto c = ifc::create_xrq_in::xrq_context;
        const auto wq = ifc::in(c, ifc::xrqc::wq);
        ifc::set(box.data(), ifc::in(c, ifc::xrqc::topology), in.u8() < 230 ? in.pick(2) : in.u8() & 0xf);
        ifc::set(box.data(), ifc::in(c, ifc::xrqc::offload), in.u8() < 230 ? in.pick(2) : in.u8() & 0xf);
        ifc::set(box.data(),
                 ifc::in(ifc::in(c, ifc::xrqc::tag_matching_topology_context),
                         ifc::tag_matching_topology_context::log_matching_list_sz),
                 in.u8() & 0xf);
        ifc::set(box.data(), ifc::in(c, ifc::xrqc::cqn), pick(in, x.cqs));
        ifc::set(box.data(), ifc::in(wq, ifc::wq::log_wq_sz), log);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::log_wq_stride), 4 + in.u8() % 4);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::pd), pick(in, x.pds));
        ifc::set(box.data(), ifc::in(wq, ifc::wq::dbr_addr), dbr);
        pages(x, box, ifc::create_xrq_in::size_bytes, n, 0);
    } else {
        box = Driver::inbox(hca::kOpCreateRmp, 0, ifc::create_rmp_in::size_bytes + n * 8);
        const auto wq = ifc::in(ifc::create_rmp_in::ctx, ifc::rmpc::wq);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::log_wq_sz), log);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::log_wq_stride), 4 + in.u8() % 4);
        ifc::set(box.data(), ifc::in(wq, ifc::wq::pd), pick(in, x.pds));
        ifc::set(box.data(), ifc::in(wq, ifc::wq::dbr_addr), dbr);
        pages(x, box, ifc::create_rmp_in::size_bytes, n, 0);
    }
    auto r = run(x, in, box);
    if (ok(r)) {
        const uint32_t id = static_cast<uint32_t>(hca::load_be32(r.out.data() + 8) & 0xffffff);
        (kind == 0 ? x.srqs : kind == 1 ? x.xsrqs : kind == 3 ? x.xrqs : x.rmps).push_back(id);
    }
}

void create_dct(World &x, Input &in) {
    auto box = Driver::inbox(hca::kOpCreateDct, in.u8() < 240 ? 0 : in.u8(), ifc::create_dct_in::size_bytes);
    const auto c = ifc::create_dct_in::dct_context_entry;
    ifc::set(box.data(), ifc::in(c, ifc::dctc::pd), pick(in, x.pds));
    ifc::set(box.data(), ifc::in(c, ifc::dctc::srqn_xrqn), pick(in, in.flag() ? x.rmps : x.srqs));
    ifc::set(box.data(), ifc::in(c, ifc::dctc::cqn), pick(in, x.cqs));
    ifc::set(box.data(), ifc::in(c, ifc::dctc::dc_access_key), in.u64());
    const uint8_t acc = in.u8();
    ifc::set(box.data(), ifc::in(c, ifc::dctc::rre), acc & 1);
    ifc::set(box.data(), ifc::in(c, ifc::dctc::rwe), (acc >> 1) & 1);
    ifc::set(box.data(), ifc::in(c, ifc::dctc::rae), (acc >> 2) & 1);
    ifc::set(box.data(), ifc::in(c, ifc::dctc::atomic_mode), acc >> 4);
    ifc::set(box.data(), ifc::in(c, ifc::dctc::port), in.u8() < 240 ? 1 : in.u8());
    ifc::set(box.data(), ifc::in(c, ifc::dctc::mtu), in.u8() % 8);
    ifc::set(box.data(), ifc::in(c, ifc::dctc::min_rnr_nak), in.u8());
    ifc::set(box.data(), ifc::in(c, ifc::dctc::counter_set_id), pick(in, x.qcounters, 0xff));
    hcafuzz::patch(in, box, 3);
    auto r = run(x, in, box, ifc::create_dct_out::size_bytes);
    if (ok(r)) {
        x.dcts.push_back(static_cast<uint32_t>(r.get(ifc::create_dct_out::dctn)));
    }
}

// CREATE_SQ (objects/sq.cpp): mostly what mlx5_core's write-combining
// test gives, any field at times.
void create_sq(World &x, Input &in) {
    const size_t n = 1 + in.u8() % 4;
    auto box = Driver::inbox(hca::kOpCreateSq, 0, ifc::create_sq_in::size_bytes + n * 8);
    const auto c = ifc::create_sq_in::ctx;
    const auto w = ifc::in(c, ifc::sqc::wq);
    hca::store_be16(box.data() + 2, static_cast<uint16_t>(pick(in, x.uctxs, 0xffff)));
    ifc::set(box.data(), ifc::in(c, ifc::sqc::cqn), pick(in, x.cqs));
    ifc::set(box.data(), ifc::in(c, ifc::sqc::state), in.u8() < 230 ? 0 : in.u8() & 0xf);
    ifc::set(box.data(), ifc::in(c, ifc::sqc::flush_in_error_en), 1);
    ifc::set(box.data(), ifc::in(c, ifc::sqc::ts_format), in.u8() & 3);
    ifc::set(box.data(), ifc::in(w, ifc::wq::wq_type), in.u8() < 230 ? 1 : in.u8() & 0xf);
    ifc::set(box.data(), ifc::in(w, ifc::wq::pd), in.u8() < 128 ? 0 : pick(in, x.pds));
    ifc::set(box.data(), ifc::in(w, ifc::wq::uar_page), in.u8() < 240 ? x.uar : in.u32());
    ifc::set(box.data(), ifc::in(w, ifc::wq::dbr_addr), in.u8() < 200 ? (in.u8() % 64) * 64 : in.u64());
    ifc::set(box.data(), ifc::in(w, ifc::wq::log_wq_stride), in.u8() < 230 ? 6 : in.u8() & 0xf);
    ifc::set(box.data(), ifc::in(w, ifc::wq::log_wq_pg_sz), in.u8() < 230 ? 0 : in.u8() & 0x1f);
    ifc::set(box.data(), ifc::in(w, ifc::wq::log_wq_sz), in.u8() % 11);
    ifc::set(box.data(), ifc::in(w, ifc::wq::page_offset), in.u8() < 230 ? 0 : in.u8() & 0x1f);
    ifc::set(box.data(), ifc::in(w, ifc::wq::dbr_umem_valid), in.u8() > 230);
    ifc::set(box.data(), ifc::in(w, ifc::wq::dbr_umem_id), pick(in, x.umems));
    ifc::set(box.data(), ifc::in(w, ifc::wq::wq_umem_valid), in.u8() > 230);
    ifc::set(box.data(), ifc::in(w, ifc::wq::wq_umem_id), pick(in, x.umems));
    pages(x, box, ifc::create_sq_in::size_bytes, n, 0);
    hcafuzz::patch(in, box, 2);
    auto r = run(x, in, box, ifc::create_sq_out::size_bytes);
    if (ok(r)) {
        x.sqs.push_back(static_cast<uint32_t>(r.get(ifc::create_sq_out::sqn)));
    }
}

// DEVX: user contexts, UMEMs over fresh pages, and CQs and QPs whose
// buffers and doorbell records are in a UMEM.
void devx_cmd(World &x, Input &in) {
    switch (in.pick(6)) {
        case 0: {
            auto box = Driver::inbox(hca::kOpCreateUctx, 0, ifc::create_uctx_in::size_bytes);
            ifc::set(box.data(), ifc::in(ifc::create_uctx_in::uctx, ifc::uctx::cap), in.u8() < 240 ? 0 : in.u32());
            auto r = run(x, in, box);
            if (ok(r)) {
                x.uctxs.push_back(static_cast<uint32_t>(r.get(ifc::create_uctx_out::uid)));
            }
            break;
        }
        case 1: {
            auto box = Driver::inbox(hca::kOpDestroyUctx, 0, ifc::destroy_uctx_in::size_bytes);
            const uint32_t uid = pick(in, x.uctxs, 0xffff);
            ifc::set(box.data(), ifc::destroy_uctx_in::uid, uid);
            if (ok(run(x, in, box))) {
                std::erase(x.uctxs, uid);
            }
            break;
        }
        case 2: {
            const size_t n = 1 + in.u8() % 6;
            auto box = Driver::inbox(hca::kOpCreateUmem, 0, ifc::create_umem_in::size_bytes + n * 8);
            const auto u = ifc::create_umem_in::umem;
            hca::store_be16(box.data() + 2, static_cast<uint16_t>(pick(in, x.uctxs, 0xffff)));
            ifc::set(box.data(), ifc::in(u, ifc::umem::num_of_mtt), in.u8() < 230 ? n : in.u64());
            ifc::set(box.data(), ifc::in(u, ifc::umem::log_page_size), in.u8() < 230 ? 0 : in.u8());
            ifc::set(box.data(), ifc::in(u, ifc::umem::page_offset), in.u8() < 200 ? 0 : in.u16());
            pages(x, box, ifc::create_umem_in::size_bytes, n, 0xf0);
            auto r = run(x, in, box);
            if (ok(r)) {
                x.umems.push_back(static_cast<uint32_t>(r.get(ifc::create_umem_out::umem_id)));
            }
            break;
        }
        case 3: {
            auto box = Driver::inbox(hca::kOpDestroyUmem, 0, ifc::destroy_umem_in::size_bytes);
            const uint32_t id = pick(in, x.umems);
            ifc::set(box.data(), ifc::destroy_umem_in::umem_id, id);
            if (ok(run(x, in, box))) {
                std::erase(x.umems, id);
            }
            break;
        }
        case 4: {
            auto box = Driver::inbox(hca::kOpCreateCq, 0, ifc::create_cq_in::size_bytes);
            const auto ctx = ifc::create_cq_in::cq_context;
            hca::store_be16(box.data() + 2, static_cast<uint16_t>(pick(in, x.uctxs, 0xffff)));
            ifc::set(box.data(), ifc::in(ctx, ifc::cqc::log_cq_size), in.u8() % 8);
            ifc::set(box.data(), ifc::in(ctx, ifc::cqc::uar_page), x.uar);
            ifc::set(box.data(), ifc::in(ctx, ifc::cqc::c_eqn_or_apu_element), pick(in, x.eqs));
            ifc::set(box.data(), ifc::in(ctx, ifc::cqc::dbr_umem_valid), in.u8() < 230);
            ifc::set(box.data(), ifc::in(ctx, ifc::extra::cqc_dbr_umem_id), pick(in, x.umems));
            ifc::set(box.data(), ifc::in(ctx, ifc::cqc::dbr_addr), in.u8() < 200 ? (in.u8() % 64) * 64 : in.u64());
            ifc::set(box.data(), ifc::create_cq_in::cq_umem_valid, in.u8() < 230);
            ifc::set(box.data(), ifc::extra::cq_umem_id, pick(in, x.umems));
            ifc::set(box.data(), ifc::extra::cq_umem_offset, in.u8() < 200 ? (in.u8() % 8) * 4096 : in.u64());
            auto r = run(x, in, box);
            if (ok(r)) {
                x.cqs.push_back(static_cast<uint32_t>(r.get(ifc::create_cq_out::cqn)));
            }
            break;
        }
        default: {
            auto box = Driver::inbox(hca::kOpCreateQp, 0, ifc::create_qp_in::size_bytes);
            const auto ctx = ifc::create_qp_in::qpc;
            hca::store_be16(box.data() + 2, static_cast<uint16_t>(pick(in, x.uctxs, 0xffff)));
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::st), in.u8() < 230 ? hca::kQpRc : in.u8() & 0xf);
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::pm_state), 3);
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::pd), pick(in, x.pds));
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::log_sq_size), in.u8() % 8);
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::log_rq_size), in.u8() % 8);
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::log_rq_stride), in.u8() % 4);
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::cqn_snd), pick(in, x.cqs));
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::cqn_rcv), pick(in, x.cqs));
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::uar_page), x.uar);
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::dbr_umem_valid), in.u8() < 230);
            ifc::set(box.data(), ifc::in(ctx, ifc::extra::qpc_dbr_umem_id), pick(in, x.umems));
            ifc::set(box.data(), ifc::in(ctx, ifc::qpc::dbr_addr), in.u8() < 200 ? (in.u8() % 64) * 64 : in.u64());
            ifc::set(box.data(), ifc::create_qp_in::wq_umem_valid, in.u8() < 230);
            ifc::set(box.data(), ifc::create_qp_in::wq_umem_id, pick(in, x.umems));
            ifc::set(box.data(), ifc::create_qp_in::wq_umem_offset, in.u8() < 200 ? (in.u8() % 8) * 4096 : in.u64());
            auto r = run(x, in, box);
            if (ok(r)) {
                x.qps.push_back(static_cast<uint32_t>(r.get(ifc::create_qp_out::qpn)));
            }
            break;
        }
    }
}

// Destroy/query/arm/modify of an existing object (or a made-up number).
void object_cmd(World &x, Input &in) {
    struct Op {
        uint16_t opcode;
        ifc::Field id;
        std::vector<uint32_t> World::*list;
        size_t outlen;
        bool destroys;
    };
    static const Op kOps[] = {
        {hca::kOpDestroyEq, ifc::destroy_eq_in::eq_number, &World::eqs, 16, true},
        {hca::kOpQueryEq, ifc::query_eq_in::eq_number, &World::eqs, ifc::query_eq_out::size_bytes, false},
        {hca::kOpDeallocPd, ifc::dealloc_pd_in::pd, &World::pds, 16, true},
        {hca::kOpDeallocXrcd, ifc::dealloc_xrcd_in::xrcd, &World::xrcds, 16, true},
        {hca::kOpDeallocQCounter, ifc::dealloc_q_counter_in::counter_set_id, &World::qcounters, 16, true},
        {hca::kOpQueryQCounter, ifc::query_q_counter_in::counter_set_id, &World::qcounters,
         ifc::query_q_counter_out::size_bytes, false},
        {hca::kOpDestroyMkey, ifc::destroy_mkey_in::mkey_index, &World::mkeys, 16, true},
        {hca::kOpQueryMkey, ifc::query_mkey_in::mkey_index, &World::mkeys, ifc::query_mkey_out::size_bytes, false},
        {hca::kOpDestroyCq, ifc::destroy_cq_in::cqn, &World::cqs, 16, true},
        {hca::kOpQueryCq, ifc::query_cq_in::cqn, &World::cqs, ifc::query_cq_out::size_bytes, false},
        {hca::kOpDestroyQp, ifc::destroy_qp_in::qpn, &World::qps, 16, true},
        {hca::kOpQueryQp, ifc::query_qp_in::qpn, &World::qps, ifc::query_qp_out::size_bytes, false},
        {hca::kOpDestroySrq, ifc::destroy_srq_in::srqn, &World::srqs, 16, true},
        {hca::kOpQuerySrq, ifc::query_srq_in::srqn, &World::srqs, ifc::query_srq_out::size_bytes, false},
        {hca::kOpArmRq, ifc::arm_rq_in::srq_number, &World::srqs, 16, false},
        {hca::kOpDestroyXrcSrq, ifc::destroy_xrc_srq_in::xrc_srqn, &World::xsrqs, 16, true},
        {hca::kOpQueryXrcSrq, ifc::query_xrc_srq_in::xrc_srqn, &World::xsrqs, ifc::query_xrc_srq_out::size_bytes,
         false},
        {hca::kOpArmXrcSrq, ifc::arm_xrc_srq_in::xrc_srqn, &World::xsrqs, 16, false},
        {hca::kOpDestroyRmp, ifc::destroy_rmp_in::rmpn, &World::rmps, 16, true},
        {hca::kOpDestroyXrq, ifc::destroy_xrq_in::xrqn, &World::xrqs, 16, true},
        {hca::kOpQueryXrq, ifc::query_xrq_in::xrqn, &World::xrqs, ifc::query_xrq_out::size_bytes, false},
        {hca::kOpQueryRmp, ifc::query_rmp_in::rmpn, &World::rmps, ifc::query_rmp_out::size_bytes, false},
        {hca::kOpModifyRmp, ifc::modify_rmp_in::rmpn, &World::rmps, 16, false},
        {hca::kOpDestroyDct, ifc::destroy_dct_in::dctn, &World::dcts, 16, true},
        {hca::kOpDrainDct, ifc::drain_dct_in::dctn, &World::dcts, 16, false},
        {hca::kOpQueryDct, ifc::query_dct_in::dctn, &World::dcts, ifc::query_dct_out::size_bytes, false},
        {hca::kOpArmDctForKeyViolation, ifc::arm_dct_in::dct_number, &World::dcts, 16, false},
        {hca::kOpQueryQp, ifc::query_qp_in::qpn, &World::dcts, ifc::query_qp_out::size_bytes, false},
        {hca::kOpDestroySq, ifc::destroy_sq_in::sqn, &World::sqs, 16, true},
        {hca::kOpQuerySq, ifc::query_sq_in::sqn, &World::sqs, ifc::query_sq_out::size_bytes, false},
        {hca::kOpModifySq, ifc::modify_sq_in::sqn, &World::sqs, 16, false},
        {hca::kOpModifySq, ifc::modify_sq_in::sqn, &World::qps, 16, false},    // a QP's number
        {hca::kOpDestroyQp, ifc::destroy_qp_in::qpn, &World::sqs, 16, false},  // an SQ's number
        {hca::kOpAttachToMcg, ifc::attach_to_mcg_in::qpn, &World::qps, 16, false},
        {hca::kOpDetachFromMcg, ifc::detach_from_mcg_in::qpn, &World::qps, 16, false},
    };
    const Op &op = kOps[in.pick(static_cast<unsigned>(std::size(kOps)))];
    std::vector<uint32_t> &list = x.*op.list;
    const uint32_t id = pick(in, list);
    const size_t inlen = op.opcode == hca::kOpModifyRmp  ? ifc::modify_rmp_in::size_bytes
                         : op.opcode == hca::kOpModifySq ? ifc::modify_sq_in::size_bytes
                         : op.opcode == hca::kOpAttachToMcg || op.opcode == hca::kOpDetachFromMcg ? 0x20
                         : op.opcode == hca::kOpQueryQCounter ? ifc::query_q_counter_in::size_bytes
                                                              : 16;
    auto box = Driver::inbox(op.opcode, in.u8() < 230 ? 0 : in.u8(), inlen);
    ifc::set(box.data(), op.id, id);
    if (inlen == 0x20) {
        box[16] = 0xff;  // a multicast GID
        box[31] = in.u8() & 3;
    }
    if (op.opcode == hca::kOpModifySq) {
        const uint8_t st = in.u8();  // current and next state: RST 0, RDY 1, ERR 3, rarely others
        ifc::set(box.data(), ifc::modify_sq_in::sq_state, st < 230 ? st % 4 : st & 0xf);
        ifc::set(box.data(), ifc::in(ifc::modify_sq_in::ctx, ifc::sqc::state), in.u8() % 5);
    }
    if (op.opcode == hca::kOpArmRq || op.opcode == hca::kOpArmXrcSrq) {
        hca::store_be16(box.data() + 14, in.u8());
    }
    if (op.opcode == hca::kOpQueryQCounter) {
        const uint8_t f = in.u8();  // clear, and rarely another vport or an aggregate
        ifc::set(box.data(), ifc::query_q_counter_in::clear, f & 1);
        ifc::set(box.data(), ifc::query_q_counter_in::aggregate, f > 240);
        ifc::set(box.data(), ifc::query_q_counter_in::other_vport, f > 248);
    }
    auto r = run(x, in, box, op.outlen);
    if (ok(r) && op.destroys) {
        std::erase(list, id);
    }
}

// Queries and settings of the HCA itself; those that change the HCA's
// state make the device be reset after this input.
void hca_cmd(World &x, Input &in) {
    struct Op {
        uint16_t opcode;
        uint16_t inlen;
        uint16_t outlen;
        bool changes_hca;
    };
    static constexpr Op kOps[] = {
        {hca::kOpQueryHcaCap, 16, ifc::query_hca_cap_out::size_bytes, false},
        {hca::kOpQueryAdapter, 16, ifc::query_adapter_out::size_bytes, false},
        {hca::kOpQueryHcaVportContext, 16, ifc::query_hca_vport_context_out::size_bytes, false},
        {hca::kOpAccessReg, 16 + 64, 16 + 64, false},
        {hca::kOpNop, 16, 16, false},
        {hca::kOpQueryPages, 16, 16, false},
        {hca::kOpQueryIssi, 16, ifc::query_issi_out::size_bytes, false},
        {hca::kOpSetDriverVersion, 16 + 64, 16, false},
        {hca::kOpAllocUar, 16, 16, false},
        {hca::kOpDeallocUar, 16, 16, false},
        {hca::kOpAllocPd, 16, 16, false},
        {hca::kOpAllocXrcd, 16, 16, false},
        {hca::kOpAllocQCounter, 16, 16, false},
        {hca::kOpAllocMemic, ifc::alloc_memic_in::size_bytes, ifc::alloc_memic_out::size_bytes, false},
        {hca::kOpDeallocMemic, ifc::dealloc_memic_in::size_bytes, 16, false},
        {hca::kOpPageFaultResume, ifc::page_fault_resume_in::size_bytes, 16, false},
        {hca::kOpQuerySpecialContexts, 16, ifc::query_special_contexts_out::size_bytes, false},
        {hca::kOpCreatePsv, ifc::create_psv_in::size_bytes, ifc::create_psv_out::size_bytes, false},
        {hca::kOpDestroyPsv, ifc::destroy_psv_in::size_bytes, 16, false},
        {hca::kOpManagePages, 16 + 64, 16 + 64, true},
        {hca::kOpSetHcaCap, ifc::set_hca_cap_in::size_bytes, 16, true},
        {hca::kOpSetIssi, 16, 16, true},
        {hca::kOpInitHca, 16, 16, true},
        {hca::kOpTeardownHca, 16, 16, true},
        {hca::kOpDisableHca, 16, 16, true},
        {hca::kOpEnableHca, 16, 16, true},
    };
    const unsigned n = static_cast<unsigned>(std::size(kOps));
    const uint8_t c = in.u8();
    const Op &op = kOps[c < 240 ? c % (n - 7) : c % n];
    auto box = Driver::inbox(op.opcode, in.u8() % 4, op.inlen);
    if (op.opcode == hca::kOpAccessReg) {
        static constexpr uint16_t kRegs[] = {0x5006, 0x5003, 0x5004, 0x5001, 0x7004, 0x500e, 0x9050, 0x5007};
        ifc::set(box.data(), ifc::access_register_in::register_id, in.pick(kRegs));
        box[16 + 1] = in.u8();  // local port
    } else if (op.opcode == hca::kOpDeallocUar) {
        ifc::set(box.data(), ifc::dealloc_uar_in::uar, pick(in, x.uars));
    } else if (op.opcode == hca::kOpAllocMemic) {
        // Mostly a range of the device memory as mlx5_ib names one, sometimes anything.
        const bool near = in.u8() < 220;
        ifc::set(box.data(), ifc::alloc_memic_in::range_start_addr,
                 near ? HCA_MODEL_MEMIC_BAR_OFFSET + (in.u8() % 40) * 4096 : in.u64());
        ifc::set(box.data(), ifc::alloc_memic_in::range_size, near ? 4096 * (1 + in.u8() % 4) : in.u32());
        ifc::set(box.data(), ifc::alloc_memic_in::memic_size, near ? 64 * (1 + in.u8() % 80) : in.u32());
        ifc::set(box.data(), ifc::alloc_memic_in::log_memic_addr_alignment, in.u8() % 8);
    } else if (op.opcode == hca::kOpDeallocMemic) {
        const auto m = !x.memics.empty() && in.u8() < 220 ? x.memics[in.u8() % x.memics.size()]
                                                          : std::pair<uint64_t, uint32_t>{in.u64(), in.u32()};
        ifc::set(box.data(), ifc::dealloc_memic_in::memic_start_addr, m.first);
        ifc::set(box.data(), ifc::dealloc_memic_in::memic_size, in.flag() ? m.second : in.u32());
    } else if (op.opcode == hca::kOpPageFaultResume) {
        // Work queues that exist or not; no fault is ever outstanding here.
        const auto info = ifc::page_fault_resume_in::page_fault_info;
        ifc::set(box.data(), ifc::in(info, ifc::trans_page_fault_info::page_fault_type), in.pick(8));
        ifc::set(box.data(), ifc::in(info, ifc::trans_page_fault_info::wq_number),
                 in.flag() ? pick(in, x.qps) : pick(in, x.srqs));
        ifc::set(box.data(), ifc::in(info, ifc::trans_page_fault_info::fault_token), in.u32());
        ifc::set(box.data(), ifc::in(info, ifc::trans_page_fault_info::error), in.flag());
    } else if (op.opcode == hca::kOpCreatePsv) {
        ifc::set(box.data(), ifc::create_psv_in::num_psv, in.flag() ? 1 + in.u8() % 2 : in.u8());
        ifc::set(box.data(), ifc::create_psv_in::pd, pick(in, x.pds));
    } else if (op.opcode == hca::kOpDestroyPsv) {
        ifc::set(box.data(), ifc::destroy_psv_in::psvn, pick(in, x.psvs));
    } else if (op.opcode == hca::kOpManagePages) {
        ifc::set(box.data(), ifc::manage_pages_in::input_num_entries, in.u8() % 9);
        for (unsigned i = 0; i < 8; ++i) {
            hca::store_be64(box.data() + 16 + i * 8, in.flag() ? x.b.host.alloc(4096) : in.u64());
        }
    }
    if (op.changes_hca) {
        x.dirty = true;
    }
    auto r = run(x, in, box, op.outlen);
    if (ok(r)) {
        const uint32_t id = hca::load_be32(r.out.data() + 8) & 0xffffff;
        if (op.opcode == hca::kOpAllocUar) {
            x.uars.push_back(id);
        } else if (op.opcode == hca::kOpDeallocUar) {
            std::erase(x.uars, static_cast<uint32_t>(ifc::get(box.data(), ifc::dealloc_uar_in::uar)));
        } else if (op.opcode == hca::kOpAllocPd) {
            x.pds.push_back(id);
        } else if (op.opcode == hca::kOpAllocXrcd) {
            x.xrcds.push_back(id);
        } else if (op.opcode == hca::kOpAllocMemic) {
            x.memics.emplace_back(r.get(ifc::alloc_memic_out::memic_start_addr),
                                  static_cast<uint32_t>(ifc::get(box.data(), ifc::alloc_memic_in::memic_size)));
        } else if (op.opcode == hca::kOpDeallocMemic) {
            std::erase(x.memics, std::pair<uint64_t, uint32_t>{
                                     ifc::get(box.data(), ifc::dealloc_memic_in::memic_start_addr),
                                     static_cast<uint32_t>(ifc::get(box.data(), ifc::dealloc_memic_in::memic_size))});
        } else if (op.opcode == hca::kOpAllocQCounter) {
            x.qcounters.push_back(id & 0xff);
        } else if (op.opcode == hca::kOpCreatePsv) {
            for (const ifc::Field f : {ifc::create_psv_out::psv0_index, ifc::create_psv_out::psv1_index,
                                       ifc::create_psv_out::psv2_index, ifc::create_psv_out::psv3_index}) {
                if (const uint32_t psv = static_cast<uint32_t>(r.get(f))) {
                    x.psvs.push_back(psv);
                }
            }
        } else if (op.opcode == hca::kOpDestroyPsv) {
            std::erase(x.psvs, static_cast<uint32_t>(ifc::get(box.data(), ifc::destroy_psv_in::psvn)));
        }
    }
}

// Puts the device back as the input found it: everything the input
// created is destroyed, QPs first; a failure other than "no such object"
// (the input destroyed it under a made-up number) resets the device.
void cleanup(World &x) {
    struct Kind {
        std::vector<uint32_t> World::*list;
        uint16_t opcode;
        ifc::Field id;
    };
    static const Kind kKinds[] = {
        {&World::qps, hca::kOpDestroyQp, ifc::destroy_qp_in::qpn},
        {&World::dcts, hca::kOpDestroyDct, ifc::destroy_dct_in::dctn},
        {&World::sqs, hca::kOpDestroySq, ifc::destroy_sq_in::sqn},
        {&World::srqs, hca::kOpDestroySrq, ifc::destroy_srq_in::srqn},
        {&World::xsrqs, hca::kOpDestroyXrcSrq, ifc::destroy_xrc_srq_in::xrc_srqn},
        {&World::rmps, hca::kOpDestroyRmp, ifc::destroy_rmp_in::rmpn},
        {&World::xrqs, hca::kOpDestroyXrq, ifc::destroy_xrq_in::xrqn},
        {&World::mkeys, hca::kOpDestroyMkey, ifc::destroy_mkey_in::mkey_index},
        {&World::psvs, hca::kOpDestroyPsv, ifc::destroy_psv_in::psvn},
        {&World::cqs, hca::kOpDestroyCq, ifc::destroy_cq_in::cqn},
        {&World::eqs, hca::kOpDestroyEq, ifc::destroy_eq_in::eq_number},
        {&World::pds, hca::kOpDeallocPd, ifc::dealloc_pd_in::pd},
        {&World::xrcds, hca::kOpDeallocXrcd, ifc::dealloc_xrcd_in::xrcd},
        {&World::qcounters, hca::kOpDeallocQCounter, ifc::dealloc_q_counter_in::counter_set_id},
        {&World::uars, hca::kOpDeallocUar, ifc::dealloc_uar_in::uar},
        {&World::umems, hca::kOpDestroyUmem, ifc::destroy_umem_in::umem_id},
        {&World::uctxs, hca::kOpDestroyUctx, ifc::destroy_uctx_in::uid},
    };
    for (const Kind &k : kKinds) {
        std::vector<uint32_t> &list = x.*k.list;
        for (uint32_t id : list) {
            if (!x.dirty) {
                auto box = Driver::inbox(k.opcode, 0, 16);
                ifc::set(box.data(), k.id, id);
                const auto r = x.d.exec(box, 16);
                x.dirty = !r.completed || r.delivery || (r.status && r.status != 0x05);
            }
        }
        list.clear();
    }
    for (const auto &[addr, bytes] : x.memics) {
        if (!x.dirty) {
            auto box = Driver::inbox(hca::kOpDeallocMemic, 0, ifc::dealloc_memic_in::size_bytes);
            ifc::set(box.data(), ifc::dealloc_memic_in::memic_start_addr, addr);
            ifc::set(box.data(), ifc::dealloc_memic_in::memic_size, bytes);
            const auto r = x.d.exec(box, 16);
            x.dirty = !r.completed || r.delivery || r.status;
        }
    }
    x.memics.clear();
    if (x.dirty || hcafuzz::host_used(x.b.host) > (40u << 20)) {
        x.setup();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    World &x = world();
    Input in(data, size);
    for (int steps = 0; !in.empty() && steps < 48; ++steps) {
        switch (in.pick(15)) {
            case 0:
                create_eq(x, in);
                break;
            case 1:
                create_mkey(x, in);
                break;
            case 2:
                create_cq(x, in);
                break;
            case 3: modify_cq(x, in); break;
        case 4: case 5: create_qp(x, in); break;
        case 6: case 7: modify_qp(x, in); break;
        case 8: create_srq(x, in); break;
        case 9: case 10: object_cmd(x, in); break;
        case 12:
            create_dct(x, in);
            break;
        case 13:
            devx_cmd(x, in);
            break;
        case 14:
            create_sq(x, in);
            break;
        default: hca_cmd(x, in); break;
        }
        x.b.pump();
    }
    cleanup(x);
    return 0;
}
