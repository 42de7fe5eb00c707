// UMR WQEs (opcode 0x25): the driver's fast path for memory keys. On the
// REG_UMR QP mlx5_ib loads translations into MR-cache keys, enables,
// revokes and re-permissions them (hw/mlx5/umr.c); on RC/UC/XRC QPs the same
// WQE carries IB_WR_REG_MR (fast registration) and IB_WR_LOCAL_INV
// (hw/mlx5/wr.c set_reg_wr(), set_linv_wr()); from user space libmlx5
// binds memory windows with it (one KLM entry naming the MR) and
// invalidates type 2 windows (IBV_WR_LOCAL_INV: free, CHECK_QPN).
//
// Layout after the control segment (whose imm holds the target key):
//   mlx5_wqe_umr_ctrl_seg (48 bytes) | mlx5_mkey_seg (64 bytes, mkc layout) |
//   translation entries inline (xlt_octowords x 16 bytes) or one data
//   segment pointing at them.
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "datapath/umr.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

namespace {

struct UmrCtrlSeg {
    uint8_t flags;
    uint8_t rsvd0[3];
    be16 xlt_octowords;
    be16 xlt_offset;
    be64 mkey_mask;
    be32 xlt_offset_47_16;
    uint8_t rsvd1[28];
};
static_assert(sizeof(UmrCtrlSeg) == 48);

constexpr size_t kMkeySeg = 64;

// Errors that complete the UMR with a local QP operation error; the key
// checks give a local protection error.
bool malformed(UmrError e) {
    return e == UmrError::BadMask || e == UmrError::BadPageSize || e == UmrError::XltOffset || e == UmrError::Budget ||
           e == UmrError::NoBsf || e == UmrError::BadBsf;
}
constexpr uint32_t kMaxXltOctowords = 0xffff;

// The UMR control segment's flags as the trace writes them.
std::string umr_flags(const UmrOp &op) {
    const uint32_t check = op.flags & UmrOp::kCheckMask;
    return fmt::format("{}{}{}", (op.flags & UmrOp::kInline) ? "inline" : "pointer",
                       check == UmrOp::kCheckFree      ? ",check_free"
                       : check == UmrOp::kCheckNotFree ? ",check_not_free"
                                                       : "",
                       (op.flags & UmrOp::kOffsetEn) ? ",offset" : "");
}

}  // namespace

void UmrEngine::trace(const Qp &qp, uint16_t index, const UmrOp &op, uint32_t octowords) {
    HCA_TRACE(dev_, wqe_umr, .qpn = qp.qpn, .index = index, .key = op.key, .flags = umr_flags(op), .mask = op.mask,
              .xlt_octowords = octowords, .xlt_offset = op.xlt_first / 2);
    auto f = [&](auto field) { return ifc::get(op.mkc, field); };
    HCA_TRACE(
        dev_, wqe_mkey, .qpn = qp.qpn, .free = f(ifc::mkc::free_),
        .access = access_letters(f(ifc::mkc::lr), f(ifc::mkc::lw), f(ifc::mkc::rr), f(ifc::mkc::rw), f(ifc::mkc::a)),
        .umr_en = f(ifc::mkc::umr_en), .mode = f(ifc::mkc::access_mode_1_0), .variant = f(ifc::mkc::mkey_7_0),
        .pd = f(ifc::mkc::pd), .start = f(ifc::mkc::start_addr), .len = f(ifc::mkc::len),
        .length64 = f(ifc::mkc::length64) != 0, .page = f(ifc::mkc::log_page_size),
        .xlt_oct_size = f(ifc::mkc::translations_octword_size));
}

// The translation entries a UMR WQE points at with one data segment (at
// seg), read through that segment's key like any gather entry; the UMR QP
// is privileged, so there the key's own PD is accepted.
bool UmrEngine::fetch_xlt(Qp &qp, uint16_t index, std::span<const uint8_t> seg, UmrOp &op, uint8_t &synd) {
    const size_t bytes = op.xlt.size() * 8;
    if (seg.size() < sizeof(DataSeg)) {
        dev_.guest_error("qpn=0x{:x} UMR WQE 0x{:x}: translation pointer segment missing", qp.qpn, index);
        synd = kSyndLocalQpOp;
        return false;
    }
    DataSeg d;
    std::memcpy(&d, seg.data(), sizeof(d));
    HCA_TRACE(dev_, wqe_data, .qpn = qp.qpn, .lkey = d.lkey.get(), .addr = d.addr.get(), .len = d.byte_count.get());
    if (d.byte_count.get() < bytes) {
        dev_.guest_error("qpn=0x{:x} UMR WQE 0x{:x}: pointer to {} bytes for {} translation octowords", qp.qpn,
                         index, d.byte_count.get(), bytes / 16);
        synd = kSyndLocalLength;
        return false;
    }
    const Mkey *lk = dev_.mkeys.find(d.lkey.get());
    const uint32_t pd = qp.st == kQpRegUmr && lk ? lk->pd : qp.pd;
    chunks_.clear();
    const XlatError e = dev_.mkeys.translate(d.lkey.get(), pd, d.addr.get(), bytes, kAccLocalRead, chunks_);
    if (e != XlatError::None) {
        HCA_TRACE(dev_, mkey_fail, .qpn = qp.qpn, .lkey = d.lkey.get(), .addr = d.addr.get(), .len = bytes,
                  .reason = xlat_error_name(e));
        dev_.guest_error("qpn=0x{:x} UMR WQE 0x{:x} translation list lkey=0x{:x}: {}", qp.qpn, index, d.lkey.get(),
                         xlat_error_name(e));
        synd = kSyndLocalProt;
        return false;
    }
    std::vector<uint8_t> raw(bytes);
    size_t pos = 0;
    for (const DmaChunk &ch : chunks_) {
        if (!dev_.mem_read(ch.addr, raw.data() + pos, ch.len)) {
            dev_.guest_error("qpn=0x{:x} UMR translation list at 0x{:x} is not guest memory", qp.qpn, ch.addr);
            synd = kSyndLocalProt;
            return false;
        }
        pos += ch.len;
    }
    for (size_t i = 0; i < op.xlt.size(); ++i) {
        op.xlt[i] = load_be64(raw.data() + i * 8);
    }
    return true;
}

// A UMR that enables a signature key's BSF carries it inline after the
// translation entries; the control segment's xlt_offset is then the BSF's
// size in octowords (mlx5_wqe_umr_ctrl_seg's bsf_octowords).
static bool locate_bsf(Device &dev, const Qp &qp, uint16_t index, const UmrCtrlSeg &uc, std::span<const uint8_t> tail,
                       UmrOp &op) {
    const size_t at = size_t{uc.xlt_octowords.get()} * 16;
    const char *why = (uc.flags & UmrOp::kOffsetEn)          ? "with a translation offset"
                      : !(uc.flags & UmrOp::kInline)         ? "without inline translation entries"
                      : uc.xlt_offset.get() != kBsfOctwords  ? "of a size other than 4 octowords"
                      : tail.size() < at + kBsfOctwords * 16 ? "overrunning the WQE"
                                                             : nullptr;
    if (why) {
        dev.guest_error("qpn=0x{:x} UMR WQE 0x{:x}: a BSF {}", qp.qpn, index, why);
        return false;
    }
    op.bsf = tail.subspan(at, kBsfOctwords * 16);
    return true;
}

bool UmrEngine::execute(Qp &qp, const SqWqe &w, uint8_t &synd) {
    const std::span<const uint8_t> wqe = w.bytes;
    const size_t base = sizeof(CtrlSeg);
    synd = kSyndLocalQpOp;
    if (wqe.size() < base + sizeof(UmrCtrlSeg) + kMkeySeg) {
        dev_.guest_error("qpn=0x{:x} UMR WQE 0x{:x} of {} bytes has no UMR control and mkey segments", qp.qpn,
                         w.index, wqe.size());
        return false;
    }
    UmrCtrlSeg uc;
    std::memcpy(&uc, wqe.data() + base, sizeof(uc));
    UmrOp op;
    op.key = w.imm;
    op.qpn = qp.qpn;
    op.flags = uc.flags;
    op.mask = uc.mkey_mask.get();
    op.mkc = wqe.data() + base + sizeof(UmrCtrlSeg);
    const uint32_t octowords = uc.xlt_octowords.get();
    if (uc.flags & UmrOp::kOffsetEn) {
        op.xlt_first = (uint64_t{uc.xlt_offset_47_16.get()} << 16 | uc.xlt_offset.get()) * 2;
        op.xlt_offset_high = uc.xlt_offset_47_16.get() != 0;
    }
    trace(qp, w.index, op, octowords);
    if (octowords > kMaxXltOctowords) {
        return false;
    }
    const auto tail = wqe.subspan(base + sizeof(UmrCtrlSeg) + kMkeySeg);
    op.xlt.resize(size_t{octowords} * 2);
    if (octowords && (uc.flags & UmrOp::kInline)) {
        if (op.xlt.size() * 8 > tail.size()) {
            dev_.guest_error("qpn=0x{:x} UMR WQE 0x{:x}: {} inline translation bytes overrun the {}-byte WQE",
                             qp.qpn, w.index, op.xlt.size() * 8, wqe.size());
            return false;
        }
        for (size_t i = 0; i < op.xlt.size(); ++i) {
            op.xlt[i] = load_be64(tail.data() + i * 8);
        }
    } else if (octowords && !fetch_xlt(qp, w.index, tail, op, synd)) {
        return false;
    }
    if ((op.mask & UmrOp::kMaskBsfEn) && ifc::get(op.mkc, ifc::mkc::bsf_en) &&
        !locate_bsf(dev_, qp, w.index, uc, tail, op)) {
        return false;
    }
    const UmrError e = dev_.mkeys.umr(op, qp.st == kQpRegUmr ? nullptr : &qp.pd);
    if (e != UmrError::None) {
        HCA_TRACE(dev_, mkey_fail, .qpn = qp.qpn, .key = op.key, .op = "umr", .reason = umr_error_name(e));
        dev_.guest_error("qpn=0x{:x} UMR WQE 0x{:x} on key 0x{:x}: {}", qp.qpn, w.index, op.key, umr_error_name(e));
        synd = malformed(e) ? kSyndLocalQpOp : e == UmrError::BindMr ? kSyndMwBind : kSyndLocalProt;
        return false;
    }
    return true;
}

}  // namespace hca
