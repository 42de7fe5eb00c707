#include "objects/mkey.h"

#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "device.h"
#include "ifc/mlx5_ifc_extra.h"

namespace hca {

using ifc::mkc;

const char *xlat_error_name(XlatError e) {
    switch (e) {
    case XlatError::None: return "ok";
    case XlatError::BadKey: return "no such key (index or variant)";
    case XlatError::Free: return "key is free (not enabled)";
    case XlatError::BadPd: return "key belongs to another PD";
    case XlatError::BoundQp: return "type 2 window bound to another QP";
    case XlatError::Bounds: return "range outside the memory region";
    case XlatError::Access: return "access right missing";
    case XlatError::NoTranslation: return "translation entry missing";
    case XlatError::Depth: return "indirect keys nested too deep";
    case XlatError::PageFault:
        return "page not present (page fault)";
    case XlatError::Signature:
        return "signature key where signatures are not carried";
    }
    return "?";
}

void MkeyTable::reset() {
    dev_.budget.give(mtt_entries_);
    mtt_entries_ = 0;
    sig_keys_ = 0;
    mkeys_.clear();
    ids_.reset();
}

const Mkey *MkeyTable::find(uint32_t key) const {
    auto it = mkeys_.find(key >> 8);
    return it == mkeys_.end() || it->second.variant != (key & 0xff) ? nullptr : &it->second;
}

Mkey *MkeyTable::find(uint32_t key) {
    auto it = mkeys_.find(key >> 8);
    return it == mkeys_.end() || it->second.variant != (key & 0xff) ? nullptr : &it->second;
}

SigState *MkeyTable::sig_of(uint32_t key) {
    if (sig_keys_ == 0) [[likely]] {  // every SGE asks: no key lookup without signature keys
        return nullptr;
    }
    Mkey *m = find(key);
    return m ? m->sig.get() : nullptr;
}

namespace {

// What a key's translation entries cost the device's budget (8-byte units
// of host memory, objects/xlt_table.h).
uint64_t cost(const Mkey &m) {
    return m.mtt.cost() + m.klm.cost();
}

// How many translation entries a key has (MTT, KLM or KSM), present or
// blank: what the trace and `info` say.
uint64_t entries(const Mkey &m) {
    return m.mtt.size() + m.klm.size();
}

const char *mode_name(MkeyMode mode) {
    switch (mode) {
    case MkeyMode::Pa: return "PA";
    case MkeyMode::Mtt: return "MTT";
    case MkeyMode::Klm: return "KLM";
    case MkeyMode::Ksm: return "KSM";
    case MkeyMode::Memic:
        return "MEMIC";
    }
    return "?";
}

}  // namespace

bool MkeyTable::invalidate(uint32_t key, uint32_t pd, uint32_t qpn) {
    auto it = mkeys_.find(key >> 8);
    if (it == mkeys_.end() || it->second.variant != (key & 0xff) || it->second.pd != pd) {
        HCA_TRACE(dev_, mkey_invalidate_refused, .key = key);
        return false;
    }
    if (it->second.qpn != kAnyQpn && it->second.qpn != qpn) {
        HCA_TRACE(dev_, mkey_invalidate_refused, .key = key, .bound_qpn = it->second.qpn, .qpn = qpn);
        return false;
    }
    it->second.free = true;
    HCA_TRACE(dev_, mkey_invalidate, .key = key);
    return true;
}

const char *umr_error_name(UmrError e) {
    switch (e) {
    case UmrError::None: return "ok";
    case UmrError::NoKey: return "no such key";
    case UmrError::NotUmrEnabled: return "key was not created with umr_en";
    case UmrError::Variant: return "key variant does not match and the KEY mask bit is clear";
    case UmrError::IsFree: return "key is free (CHECK_FREE)";
    case UmrError::NotFree: return "key is not free (CHECK_NOT_FREE)";
    case UmrError::BadPd: return "key belongs to another PD than the QP";
    case UmrError::OtherQp: return "window is bound to another QP (CHECK_QPN)";
    case UmrError::BadMask: return "unsupported mkey_mask bit or check mode";
    case UmrError::BadPageSize:
        return "log_page_size outside 12..30 (12..31 for KSM)";
    case UmrError::XltTooLong: return "translation entries beyond translations_octword_size";
    case UmrError::XltNoMtt:
        return "translation entries for a key that is neither MTT, KLM nor KSM";
    case UmrError::XltOffset: return "xlt_offset_47_16 without umr_extended_translation_offset";
    case UmrError::Budget: return "the device's translation-entry budget is spent";
    case UmrError::BindMr: return "window bind: the memory region is invalid, of another PD, too small or lacks "
                                  "local write";
    case UmrError::NoBsf:
        return "BSF or signature error mask bits for a key created without bsf_en";
    case UmrError::BadBsf:
        return "BSF the device does not take";
    }
    return "?";
}

UmrError MkeyTable::charge_xlt(Mkey &m, const UmrOp &op, XltLoad &load) {
    if (op.xlt.empty()) {
        return UmrError::None;
    }
    if (m.mode != MkeyMode::Mtt && m.mode != MkeyMode::Klm && m.mode != MkeyMode::Ksm) {
        return UmrError::XltNoMtt;
    }
    if (op.xlt_offset_high && !dev_.fw.caps().gen(ifc::cmd_hca_cap::umr_extended_translation_offset)) {
        return UmrError::XltOffset;
    }
    uint64_t extra = 0;
    if (m.mode == MkeyMode::Klm || m.mode == MkeyMode::Ksm) {
        // One KLM or KSM entry per octoword, in 64-byte units as well
        // (libmlx5's window bind sends one entry and three of padding).
        load.first = op.xlt_first / 2;
        if (load.first + op.xlt.size() / 2 > ((uint64_t{m.octwords} + 3) & ~uint64_t{3})) {
            return UmrError::XltTooLong;
        }
        load.klm.resize(op.xlt.size() / 2);
        for (size_t i = 0; i < load.klm.size(); ++i) {
            const uint64_t w = op.xlt[2 * i];
            load.klm[i] = {m.mode == MkeyMode::Klm ? static_cast<uint32_t>(w >> 32) : 0, static_cast<uint32_t>(w),
                           op.xlt[2 * i + 1]};
        }
        extra = m.klm.extra_cost(load.first, load.klm);
    } else {
        // Translation lists travel in 64-byte units (MLX5_UMR_MTT_ALIGNMENT):
        // a key sized for 4 entries receives 8, the last ones zero padding.
        load.first = op.xlt_first;
        if (load.first + op.xlt.size() > ((uint64_t{m.octwords} * 2 + 7) & ~uint64_t{7})) {
            return UmrError::XltTooLong;
        }
        load.mtt.resize(op.xlt.size());
        for (size_t i = 0; i < op.xlt.size(); ++i) {
            load.mtt[i] = op.xlt[i] & ~uint64_t{4};  // bits 1:0: kMttRead, kMttWrite
        }
        extra = m.mtt.extra_cost(load.first, load.mtt);
    }
    // What the table grows by is charged to the budget (the last check:
    // nothing fails after it).
    if (!dev_.budget.take(extra)) {
        return UmrError::Budget;
    }
    mtt_entries_ += extra;
    return UmrError::None;
}

bool MkeyTable::bind_ok(const Mkey &w, const UmrOp &op) const {
    auto f = [&op](ifc::Field fld) { return ifc::get(op.mkc, fld); };
    const bool freed = (op.mask & UmrOp::kMaskFree) ? f(mkc::free_) != 0 : w.free;
    if (freed || op.xlt.empty()) {
        return true;  // an unbind (invalidation), or the entries stay
    }
    const uint32_t pd = (op.mask & UmrOp::kMaskPd) ? static_cast<uint32_t>(f(mkc::pd)) : w.pd;
    const bool rw = (op.mask & UmrOp::kMaskRw) ? f(mkc::rw) != 0 : w.rw;
    const bool a = (op.mask & UmrOp::kMaskA) ? f(mkc::a) != 0 : w.a;
    const uint8_t need = kAccLocalRead | ((rw || a) ? kAccLocalWrite : 0);
    std::vector<DmaChunk> scratch;
    // A repeated block: its entries are checked over their first repetition.
    const bool repeat = op.xlt.size() >= 2 && static_cast<uint32_t>(op.xlt[0]) == kRepeatBlockOp;
    for (size_t i = repeat ? 2 : 0; i + 1 < op.xlt.size(); i += 2) {
        const auto bc = static_cast<uint32_t>(op.xlt[i] >> 32) & (repeat ? 0xffff : 0xffffffff);
        if (bc == 0) {
            continue;  // padding
        }
        const Mkey *mr = find(static_cast<uint32_t>(op.xlt[i]));
        scratch.clear();
        if (!mr || mr->mode == MkeyMode::Klm || translate_in(*mr, pd, op.xlt[i + 1], bc, need, scratch, 1) !=
                                                      XlatError::None) {
            HCA_TRACE(dev_, mkey_bind_refused, .window = op.key, .entry = i / 2,
                      .key = static_cast<uint32_t>(op.xlt[i]), .addr = op.xlt[i + 1], .len = bc);
            return false;
        }
    }
    return true;
}

// The UMR's mkey-mask fields and translation entries into the key, the
// free state last.
void MkeyTable::apply_umr(Mkey &m, const UmrOp &op, const XltLoad &load) {
    auto f = [&op](ifc::Field fld) { return ifc::get(op.mkc, fld); };
    if (op.mask & UmrOp::kMaskLen) {
        m.len = f(mkc::len);
        m.length64 = f(mkc::length64);
    }
    if (op.mask & UmrOp::kMaskPageSize) {
        m.log_page_size = static_cast<uint8_t>(f(mkc::log_page_size));
    }
    if (op.mask & UmrOp::kMaskStartAddr) {
        m.start = f(mkc::start_addr);
    }
    if (op.mask & UmrOp::kMaskPd) {
        m.pd = static_cast<uint32_t>(f(mkc::pd));
    }
    if (op.mask & UmrOp::kMaskEnRinval) {
        m.en_rinval = f(mkc::en_rinval);
    }
    if (op.mask & UmrOp::kMaskKey) {
        m.variant = static_cast<uint8_t>(f(mkc::mkey_7_0));
    }
    if (op.mask & UmrOp::kMaskQpn) {
        m.qpn = static_cast<uint32_t>(f(mkc::qpn));
    }
    if (op.mask & UmrOp::kMaskLr) {
        m.lr = f(mkc::lr);
    }
    if (op.mask & UmrOp::kMaskLw) {
        m.lw = f(mkc::lw);
    }
    if (op.mask & UmrOp::kMaskRr) {
        m.rr = f(mkc::rr);
    }
    if (op.mask & UmrOp::kMaskRw) {
        m.rw = f(mkc::rw);
    }
    if (op.mask & UmrOp::kMaskA) {
        m.a = f(mkc::a);
    }
    m.klm.store(load.first, load.klm);
    m.mtt.store(load.first, load.mtt);
    if (op.mask & UmrOp::kMaskFree) {
        m.free = f(mkc::free_);
    }
}

// A UMR's BSF (BSF_EN with bsf_en set in its mkey segment): parsed into
// out, its PSVs of the key's PD. A key created without bsf_en takes
// neither BSF nor signature error bits.
UmrError MkeyTable::load_bsf(const Mkey &m, const UmrOp &op, std::unique_ptr<SigState> &out) const {
    if (!(op.mask & (UmrOp::kMaskBsfEn | UmrOp::kMaskEnSigerr))) {
        return UmrError::None;
    }
    if (!m.bsf_en) {
        return UmrError::NoBsf;
    }
    if (!(op.mask & UmrOp::kMaskBsfEn) || !ifc::get(op.mkc, mkc::bsf_en)) {
        if (op.mask & UmrOp::kMaskBsfEn) {
            HCA_TRACE(dev_, wqe_bsf, .qpn = op.qpn, .key = op.key, .enable = false, .mem = "none", .wire = "none",
                      .check = 0, .copy = 0, .sbs = false);
        }
        return UmrError::None;
    }
    out = std::make_unique<SigState>();
    if (const char *why = parse_bsf(op.bsf, out->cfg)) {
        dev_.guest_error("UMR on key 0x{:x}: {}", op.key, why);
        return UmrError::BadBsf;
    }
    const SigConfig &c = out->cfg;
    HCA_TRACE(dev_, wqe_bsf, .qpn = op.qpn, .key = op.key, .enable = true, .mem = c.mem.describe(),
              .wire = c.wire.describe(), .check = c.check_mask, .copy = c.copy_mask, .sbs = c.sbs);
    for (const SigDomain *d : {&out->cfg.mem, &out->cfg.wire}) {
        const Psv *p = d->type == SigType::None ? nullptr : dev_.psvs.find(d->psv);
        if (d->type != SigType::None && (!p || p->pd != m.pd)) {
            dev_.guest_error("UMR on key 0x{:x}: BSF names PSV 0x{:x}, not a PSV of PD {}", op.key, d->psv, m.pd);
            return UmrError::BadBsf;
        }
    }
    return UmrError::None;
}

UmrError MkeyTable::umr(const UmrOp &op, const uint32_t *qp_pd) {
    auto it = mkeys_.find(op.key >> 8);
    if (it == mkeys_.end()) {
        return UmrError::NoKey;
    }
    Mkey &m = it->second;
    if (!m.umr_en) {
        return UmrError::NotUmrEnabled;
    }
    if ((op.mask & ~UmrOp::kMaskSupported) || (op.flags & UmrOp::kCheckMask) == UmrOp::kCheckMask) {
        return UmrError::BadMask;
    }
    if (!(op.mask & UmrOp::kMaskKey) && m.variant != (op.key & 0xff)) {
        return UmrError::Variant;
    }
    if ((op.flags & UmrOp::kCheckMask) == UmrOp::kCheckFree && m.free) {
        return UmrError::IsFree;
    }
    if ((op.flags & UmrOp::kCheckMask) == UmrOp::kCheckNotFree && !m.free) {
        return UmrError::NotFree;
    }
    if (qp_pd && m.pd != *qp_pd) {
        return UmrError::BadPd;
    }
    if ((op.flags & UmrOp::kCheckQpn) && m.qpn != kAnyQpn && m.qpn != op.qpn) {
        return UmrError::OtherQp;
    }
    auto f = [&op](ifc::Field fld) { return ifc::get(op.mkc, fld); };
    // A KSM entry may span up to 2^31 bytes (max_mkey_log_entity_size_fixed_buffer
    // unset: mlx5_ib's default), an MTT page up to 1 GiB.
    const uint64_t max_page = m.mode == MkeyMode::Ksm ? 31 : 30;
    if ((op.mask & UmrOp::kMaskPageSize) && (f(mkc::log_page_size) < 12 || f(mkc::log_page_size) > max_page)) {
        return UmrError::BadPageSize;
    }
    if (m.mode == MkeyMode::Klm && !bind_ok(m, op)) {
        return UmrError::BindMr;
    }
    std::unique_ptr<SigState> sig;
    if (const UmrError e = load_bsf(m, op, sig); e != UmrError::None) {
        return e;
    }
    XltLoad load;
    if (const UmrError e = charge_xlt(m, op, load); e != UmrError::None) {
        return e;
    }
    // Checks passed: apply.
    apply_umr(m, op, load);
    if (op.mask & UmrOp::kMaskBsfEn) {
        if (m.sig && !sig) {
            --sig_keys_;
        } else if (!m.sig && sig) {
            ++sig_keys_;
        }
        m.sig = std::move(sig);  // none when the UMR disables the BSF
    }
    if (op.mask & UmrOp::kMaskEnSigerr) {
        m.sigerr_expected = f(mkc::expected_sigerr_count);
    }
    HCA_TRACE(dev_, mkey_umr, .key = m.key(), .mask = op.mask, .flags = op.flags, .pd = m.pd, .start = m.start,
              .len = m.len, .length64 = m.length64, .page = m.log_page_size, .xlt = op.xlt.size(),
              .xlt_first = op.xlt_first, .access = access_letters(m.lr, m.lw, m.rr, m.rw, m.a), .free = m.free);
    return UmrError::None;
}

// Indirect keys hold at most 2^log_max_klm_list_size entries (KLM) or
// limits::kKsmOctwords (KSM: mlx5_ib's implicit ODP key has one entry per
// GiB of the address space, 2^17 with 4-level paging, 2^26 with 5-level);
// a free, UMR-enabled key is loaded later by UMRs.
bool MkeyTable::create_mode_ok(CmdCtx &c, const Mkey &m, uint32_t mode) const {
    if (mode == static_cast<uint32_t>(MkeyMode::Memic)) {
        if (m.length64 || m.start < DevMem::kBarOffset || !DevMem::inside(m.start - DevMem::kBarOffset, m.len)) {
            c.fail(Status::BadParam, "MEMIC key 0x{:x}+0x{:x} outside the device memory (BAR0 0x{:x}+0x{:x})", m.start,
                   m.len, DevMem::kBarOffset, DevMem::kBytes);
            return false;
        }
        return true;
    }
    if (mode > 3) {
        c.fail(Status::BadParam, "access mode {} is not supported", mode);
        return false;
    }
    if (mode == static_cast<uint32_t>(MkeyMode::Klm) &&
        m.octwords > (1u << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_klm_list_size))) {
        c.fail(Status::BadParam, "translations_octword_size {} exceeds log_max_klm_list_size", m.octwords);
        return false;
    }
    if (mode == static_cast<uint32_t>(MkeyMode::Ksm) && m.octwords > limits::kKsmOctwords) {
        c.fail(Status::BadParam, "translations_octword_size {} exceeds {}", m.octwords, limits::kKsmOctwords);
        return false;
    }
    if (mode == static_cast<uint32_t>(MkeyMode::Ksm) && (m.log_page_size < 12 || m.log_page_size > 31)) {
        c.fail(Status::BadParam, "KSM entity size 2^{} outside 2^12..2^31", m.log_page_size);
        return false;
    }
    return true;
}

// KLM entries (byte count, key, address) or KSM entries (key, address),
// 16 bytes each, as many as translations_octword_actual_size says (an
// entry not given translates nothing: the access fails).
bool MkeyTable::create_indirect(CmdCtx &c, Mkey &m) {
    const uint64_t actual = c.get(ifc::create_mkey_in::translations_octword_actual_size);
    const auto list = c.in_block(ifc::create_mkey_in::klm_pas_mtt);
    if (actual * 16 > list.size()) {
        c.fail(Status::BadInputLen, "translations_octword_actual_size {} exceeds the inbox", actual);
        return false;
    }
    if (actual > m.octwords) {
        c.fail(Status::BadParam, "{} entries given for translations_octword_size {}", actual, m.octwords);
        return false;
    }
    std::vector<Klm> entries(actual);
    for (uint64_t i = 0; i < actual; ++i) {
        KlmSeg e;  // mlx5_klm (KSM: no byte count)
        std::memcpy(&e, list.data() + i * sizeof(KlmSeg), sizeof(e));
        entries[i] = {m.mode == MkeyMode::Klm ? e.byte_count.get() : 0, e.key.get(), e.va.get()};
    }
    if (!charge(c, m.klm.extra_cost(0, entries), actual)) {
        return false;
    }
    m.klm.store(0, entries);
    return true;
}

bool MkeyTable::charge(CmdCtx &c, uint64_t cost, uint64_t entries) {
    if (!dev_.budget.take(cost)) {
        c.fail(Status::ExceedLim, "{} translation entries exceed the device's budget ({} of {} in use)", entries,
               dev_.budget.used(), dev_.budget.max());
        return false;
    }
    mtt_entries_ += cost;
    return true;
}

// The page list of an MTT key: entries given at creation (all of them
// unless the key is free).
bool MkeyTable::create_mtt(CmdCtx &c, Mkey &m) {
    if (m.log_page_size < 12 || m.log_page_size > 12 + 18) {
        c.fail(Status::BadParam, "log_page_size {} outside 12..30", m.log_page_size);
        return false;
    }
    if (m.length64) {
        c.fail(Status::BadParam, "length64 with MTT translation");
        return false;
    }
    const uint64_t psize = uint64_t{1} << m.log_page_size;
    const uint64_t pages = m.len ? ((m.start & (psize - 1)) + m.len + psize - 1) >> m.log_page_size : 0;
    if (c.get(ifc::create_mkey_in::mkey_umem_valid)) {
        return create_mtt_umem(c, m, pages);
    }
    const uint64_t actual = c.get(ifc::create_mkey_in::translations_octword_actual_size);
    const auto pas = c.in_block(ifc::create_mkey_in::klm_pas_mtt);
    if (!m.free && pages > uint64_t{m.octwords} * 2) {
        c.fail(Status::BadParam, "translations_octword_size {} cannot map {} pages", m.octwords, pages);
        return false;
    }
    if (actual * 16 > pas.size()) {
        c.fail(Status::BadInputLen, "translations_octword_actual_size {} exceeds the inbox", actual);
        return false;
    }
    if (m.octwords > limits::kMkeyOctwords) {
        c.fail(Status::BadParam, "translations_octword_size {} exceeds {}", m.octwords, limits::kMkeyOctwords);
        return false;
    }
    const uint64_t have = std::min<uint64_t>(actual * 2, pages);
    if (!m.free && have < pages) {
        c.fail(Status::BadParam, "{} page entries given for {} pages", actual * 2, pages);
        return false;
    }
    // Only the entries given are stored: the MR cache creates thousands
    // of free keys with room for up to 2^17 entries that a UMR fills later.
    // pg_access: the entries' access bits count (a page without them
    // is not present); without it every page given is.
    const uint64_t present = c.get(ifc::create_mkey_in::pg_access) ? 0 : kMttAccess;
    std::vector<uint64_t> pages_given(have);
    for (uint64_t i = 0; i < have; ++i) {
        pages_given[i] = (load_be64(pas.data() + i * 8) & ~uint64_t{4}) | present;
    }
    if (!charge(c, m.mtt.extra_cost(0, pages_given), have)) {
        return false;
    }
    m.mtt.store(0, pages_given);
    return true;
}

// A DEVX key over a UMEM: its pages, from mkey_umem_offset on, are the
// key's MTT entries, so the key's pages must be the UMEM's and start_addr
// must sit where that offset does in its page.
bool MkeyTable::create_mtt_umem(CmdCtx &c, Mkey &m, uint64_t pages) {
    if (m.free || m.len == 0) {
        c.fail(Status::BadParam, "a key over a UMEM must be in use and map at least one byte");
        return false;
    }
    const uint64_t psize = uint64_t{1} << m.log_page_size;
    PageList slice;
    if (!dev_.umems.buffer(c, static_cast<uint32_t>(c.get(ifc::extra::mkey_umem_id)),
                           c.get(ifc::extra::mkey_umem_offset), m.len, "mkey", slice, m.pin)) {
        return false;
    }
    const uint64_t in_page = m.start & (psize - 1);
    if (slice.page_shift() != m.log_page_size || (slice.addr(0) & (psize - 1)) != in_page) {
        c.fail(Status::BadParam,
               "the key's pages (2^{}, start at 0x{:x} in its page) are not the UMEM's (2^{}, 0x{:x})", m.log_page_size,
               in_page, slice.page_shift(), slice.addr(0) & (psize - 1));
        return false;
    }
    std::vector<uint64_t> entries(pages);
    for (uint64_t i = 0; i < pages; ++i) {
        entries[i] = ((i ? slice.addr(i * psize - in_page) : slice.addr(0)) & ~(psize - 1)) | kMttAccess;
    }
    if (!charge(c, m.mtt.extra_cost(0, entries), pages)) {
        return false;
    }
    m.mtt.store(0, entries);
    return true;
}

void MkeyTable::cmd_create_mkey(CmdCtx &c) {
    const ifc::Block e = ifc::create_mkey_in::memory_key_mkey_entry;
    Mkey m;
    const uint32_t mode = static_cast<uint32_t>(c.get(ifc::in(e, mkc::access_mode_4_2)) << 2 |
                                                c.get(ifc::in(e, mkc::access_mode_1_0)));
    m.pd = static_cast<uint32_t>(c.get(ifc::in(e, mkc::pd)));
    m.variant = static_cast<uint8_t>(c.get(ifc::in(e, mkc::mkey_7_0)));
    m.qpn = static_cast<uint32_t>(c.get(ifc::in(e, mkc::qpn)));
    m.uid = static_cast<uint16_t>(c.get(ifc::create_mkey_in::uid));
    m.free = c.get(ifc::in(e, mkc::free_));
    m.umr_en = c.get(ifc::in(e, mkc::umr_en));
    m.lr = c.get(ifc::in(e, mkc::lr));
    m.lw = c.get(ifc::in(e, mkc::lw));
    m.rr = c.get(ifc::in(e, mkc::rr));
    m.rw = c.get(ifc::in(e, mkc::rw));
    m.a = c.get(ifc::in(e, mkc::a));
    m.length64 = c.get(ifc::in(e, mkc::length64));
    m.en_rinval = c.get(ifc::in(e, mkc::en_rinval));
    m.start = c.get(ifc::in(e, mkc::start_addr));
    m.len = c.get(ifc::in(e, mkc::len));
    m.log_page_size = static_cast<uint8_t>(c.get(ifc::in(e, mkc::log_page_size)));
    m.octwords = static_cast<uint32_t>(c.get(ifc::in(e, mkc::translations_octword_size)));
    m.bsf_en = c.get(ifc::in(e, mkc::bsf_en));
    if (m.bsf_en && (c.get(ifc::in(e, mkc::bsf_octword_size)) != kBsfOctwords || !m.umr_en)) {
        c.fail(Status::BadParam, "a signature key (bsf_en) takes a {}-octword BSF through UMRs (bsf_octword_size {}{})",
               kBsfOctwords, c.get(ifc::in(e, mkc::bsf_octword_size)), m.umr_en ? "" : ", umr_en clear");
        return;
    }

    if (!dev_.pds.pd_used_by(c, m.pd, "mkey")) {
        return;
    }
    if (!create_mode_ok(c, m, mode)) {
        return;
    }
    m.mode = static_cast<MkeyMode>(mode);
    if (m.mode == MkeyMode::Ksm) {
        m.klm = XltTable<Klm>(Klm{0, kNullMkey, 0});  // entries never loaded map nothing
    }
    if ((m.mode == MkeyMode::Klm || m.mode == MkeyMode::Ksm) && !create_indirect(c, m)) {
        return;
    }
    if (m.mode == MkeyMode::Mtt && !create_mtt(c, m)) {
        return;
    }
    auto index = ids_.alloc();
    if (!index || mkeys_.size() >= (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_mkey))) {
        if (index) {
            ids_.release(*index);
        }
        dev_.budget.give(cost(m));
        mtt_entries_ -= cost(m);
        c.fail(Status::NoRes, "all memory keys are in use");
        return;
    }
    m.index = *index;
    c.set(ifc::create_mkey_out::mkey_index, m.index);
    HCA_TRACE(dev_, obj_create_mkey, .key = m.key(), .mode = mode_name(m.mode), .pd = m.pd, .start = m.start,
              .len = m.len, .length64 = m.length64, .page = m.log_page_size, .entries = entries(m),
              .access = access_letters(m.lr, m.lw, m.rr, m.rw, m.a), .free = m.free);
    mkeys_.emplace(m.index, std::move(m));
}

void MkeyTable::cmd_destroy_mkey(CmdCtx &c) {
    const uint32_t index = static_cast<uint32_t>(c.get(ifc::destroy_mkey_in::mkey_index));
    auto it = mkeys_.find(index);
    if (it == mkeys_.end()) {
        c.fail(Status::BadRes, "mkey index 0x{:x} does not exist", index);
        return;
    }
    if (!c.may_touch(it->second.uid, "mkey index", index)) {
        return;
    }
    HCA_TRACE(dev_, obj_destroy_mkey, .key = it->second.key());
    dev_.budget.give(cost(it->second));
    mtt_entries_ -= cost(it->second);
    sig_keys_ -= it->second.sig != nullptr;
    mkeys_.erase(it);
    ids_.release(index);
}

void MkeyTable::cmd_query_mkey(CmdCtx &c) {
    const uint32_t index = static_cast<uint32_t>(c.get(ifc::query_mkey_in::mkey_index));
    auto it = mkeys_.find(index);
    if (it == mkeys_.end()) {
        c.fail(Status::BadRes, "mkey index 0x{:x} does not exist", index);
        return;
    }
    if (!c.may_touch(it->second.uid, "mkey index", index)) {
        return;
    }
    const Mkey &m = it->second;
    const ifc::Block e = ifc::query_mkey_out::memory_key_mkey_entry;
    c.set(ifc::in(e, mkc::free_), m.free);
    c.set(ifc::in(e, mkc::access_mode_1_0), static_cast<uint8_t>(m.mode) & 3);
    c.set(ifc::in(e, mkc::access_mode_4_2), static_cast<uint8_t>(m.mode) >> 2);
    c.set(ifc::in(e, mkc::umr_en), m.umr_en);
    c.set(ifc::in(e, mkc::lr), m.lr);
    c.set(ifc::in(e, mkc::lw), m.lw);
    c.set(ifc::in(e, mkc::rr), m.rr);
    c.set(ifc::in(e, mkc::rw), m.rw);
    c.set(ifc::in(e, mkc::a), m.a);
    c.set(ifc::in(e, mkc::qpn), m.qpn);
    c.set(ifc::in(e, mkc::mkey_7_0), m.variant);
    c.set(ifc::in(e, mkc::length64), m.length64);
    c.set(ifc::in(e, mkc::en_rinval), m.en_rinval);
    c.set(ifc::in(e, mkc::pd), m.pd);
    c.set(ifc::in(e, mkc::start_addr), m.start);
    c.set(ifc::in(e, mkc::len), m.len);
    c.set(ifc::in(e, mkc::translations_octword_size), m.octwords);
    c.set(ifc::in(e, mkc::log_page_size), m.log_page_size);
}

void MkeyTable::cmd_query_special_contexts(CmdCtx &c) {
    c.set(ifc::query_special_contexts_out::null_mkey, kNullMkey);
}

std::string MkeyTable::info() const {
    std::string s = fmt::format("memory keys: {}\n", mkeys_.size());
    size_t shown = 0;
    for (const auto &[index, m] : mkeys_) {
        if (++shown > 64) {
            s += "  ...\n";
            break;
        }
        fmt::format_to(std::back_inserter(s), "  key=0x{:08x} {} pd={} start=0x{:x} len=0x{:x}{} entries={}{}\n",
                       m.key(), mode_name(m.mode), m.pd, m.start, m.len, m.length64 ? "+" : "", entries(m),
                       m.free ? " free" : "");
    }
    return s;
}

}  // namespace hca
