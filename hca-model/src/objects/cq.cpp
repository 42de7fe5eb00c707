#include "objects/cq.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "device.h"
#include "ifc/mlx5_ifc_extra.h"

namespace hca {

using ifc::cqc;

void CqTable::reset() {
    cqs_.clear();
    open_.clear();
    ids_.reset();
}

Cq *CqTable::find(uint32_t cqn) {
    auto it = cqs_.find(cqn);
    return it == cqs_.end() ? nullptr : &it->second;
}

Cq *CqTable::find_for(CmdCtx &c, uint32_t cqn) {
    Cq *cq = find(cqn);
    if (!cq) {
        c.fail(Status::BadRes, "CQ 0x{:x} does not exist", cqn);
    } else if (!c.may_touch(cq->uid, "CQ", cqn)) {
        cq = nullptr;
    }
    return cq;
}

Cq *CqTable::find_used_by(CmdCtx &c, uint32_t cqn, const char *what) {
    Cq *cq = find(cqn);
    if (!cq) {
        c.fail(Status::BadParam, "{} CQ 0x{:x} does not exist", what, cqn);
    } else if (!c.may_use(cq->uid, "CQ", cqn, what)) {
        cq = nullptr;
    }
    return cq;
}

// cqe_comp_en: the mini CQE format and the layout must be ones the
// device offers (cqe_compression for 64-byte CQEs, cqe_compression_128 for
// 128-byte ones, mini_cqe_resp_stride_index for the stride index format;
// no enhanced layout).
bool CqTable::compression_ok(CmdCtx &c, Cq &cq) {
    const ifc::Block ctx = ifc::create_cq_in::cq_context;
    const Caps &caps = dev_.fw.caps();
    const auto format = static_cast<uint8_t>(c.get(ifc::in(ctx, cqc::mini_cqe_res_format)));
    const uint64_t layout = c.get(ifc::in(ctx, cqc::cqe_compression_layout));
    if (!caps.gen(cq.stride == 64 ? ifc::cmd_hca_cap::cqe_compression : ifc::cmd_hca_cap::cqe_compression_128)) {
        c.fail(Status::BadParam, "CQE compression of {}-byte CQEs is not offered", cq.stride);
        return false;
    }
    if (format != kMiniHash && format != kMiniCsum &&
        (format != kMiniCsumStridx || !caps.gen(ifc::cmd_hca_cap::mini_cqe_resp_stride_index))) {
        c.fail(Status::BadParam, "mini_cqe_res_format {} is not offered", format);
        return false;
    }
    if (layout != 0) {
        c.fail(Status::BadParam, "cqe_compression_layout {}: only the basic layout (0) is offered", layout);
        return false;
    }
    cq.comp = true;
    cq.mini_format = format;
    cq.session.minis.reserve(kMaxSession);
    return true;
}

void CqTable::cmd_create_cq(CmdCtx &c) {
    const ifc::Block ctx = ifc::create_cq_in::cq_context;
    Cq cq;
    cq.log_size = static_cast<uint8_t>(c.get(ifc::in(ctx, cqc::log_cq_size)));
    cq.uar = static_cast<uint32_t>(c.get(ifc::in(ctx, cqc::uar_page)));
    cq.eqn = static_cast<uint32_t>(c.get(ifc::in(ctx, cqc::c_eqn_or_apu_element)));
    const uint32_t cqe_sz = static_cast<uint32_t>(c.get(ifc::in(ctx, cqc::cqe_sz)));
    cq.log_page_size = static_cast<uint8_t>(c.get(ifc::in(ctx, cqc::log_page_size)));
    cq.page_offset = static_cast<uint32_t>(c.get(ifc::in(ctx, cqc::page_offset)));
    cq.dbr = c.get(ifc::in(ctx, cqc::dbr_addr));
    cq.oi = c.get(ifc::in(ctx, cqc::oi));
    cq.uid = static_cast<uint16_t>(c.get(ifc::create_cq_in::uid));
    const uint64_t max_log = dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_cq_sz);
    if (cq.log_size > max_log) {
        c.fail(Status::BadParam, "log_cq_size {} exceeds log_max_cq_sz {}", cq.log_size, max_log);
        return;
    }
    if (cqe_sz > 2) {
        c.fail(Status::BadParam, "cqe_sz {} is not 64 (0), 128 (1) or 128 padded (2) bytes", cqe_sz);
        return;
    }
    if (c.get(ifc::in(ctx, cqc::cc)) || c.get(ifc::in(ctx, cqc::apu_cq))) {
        c.fail(Status::BadParam, "collapsed / APU CQs are not supported");
        return;
    }
    cq.stride = cqe_sz ? 128 : 64;
    cq.pad128 = cqe_sz == 2;  // cqe_128_always (mlx5dv's CQE 128B padding)
    if (c.get(ifc::in(ctx, cqc::cqe_comp_en)) && !compression_ok(c, cq)) {
        return;
    }
    if (!dev_.uars.allocated(cq.uar)) {
        c.fail(Status::BadParam, "uar_page {} is not allocated", cq.uar);
        return;
    }
    if (!dev_.eqs.find(cq.eqn)) {
        c.fail(Status::BadParam, "c_eqn {} does not exist", cq.eqn);
        return;
    }
    if (cq.dbr & 7) {
        c.fail(Status::BadParam, "dbr_addr 0x{:x} is not 8-byte aligned", cq.dbr);
        return;
    }
    // A DEVX CQ has its doorbell record and its buffer in UMEMs.
    const UmemTable::QueueMemory mem{
        .dbr_umem = c.get(ifc::in(ctx, cqc::dbr_umem_valid)) != 0,
        .dbr_umem_id = static_cast<uint32_t>(c.get(ifc::in(ctx, ifc::extra::cqc_dbr_umem_id))),
        .buf_umem = c.get(ifc::create_cq_in::cq_umem_valid) != 0,
        .buf_umem_id = static_cast<uint32_t>(c.get(ifc::extra::cq_umem_id)),
        .buf_umem_offset = c.get(ifc::extra::cq_umem_offset),
        .pas = c.in_block(ifc::create_cq_in::pas),
        .log_page_size = cq.log_page_size,
        .page_offset = cq.page_offset};
    if (!dev_.umems.queue(c, "CQ", mem, uint64_t{cq.stride} << cq.log_size, cq.dbr, cq.buf, cq.pins)) {
        return;
    }
    if (cqs_.size() >= (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_cq))) {
        c.fail(Status::NoRes, "all CQs are in use");
        return;
    }
    auto cqn = ids_.alloc();
    if (!cqn) {
        c.fail(Status::NoRes, "no CQ number left");
        return;
    }
    cq.cqn = *cqn;
    c.set(ifc::create_cq_out::cqn, cq.cqn);
    HCA_TRACE(dev_, obj_create_cq, .cqn = cq.cqn, .nent = cq.nent(), .cqe_size = cq.stride, .eqn = cq.eqn,
              .uar = cq.uar, .dbr = cq.dbr, .pages = cq.buf.npages(), .uid = cq.uid,
              .compression = cq.comp ? mini_format_name(cq.mini_format) : "");
    cqs_.emplace(cq.cqn, std::move(cq));
}

void CqTable::cmd_destroy_cq(CmdCtx &c) {
    const uint32_t cqn = static_cast<uint32_t>(c.get(ifc::destroy_cq_in::cqn));
    if (!find_for(c, cqn)) {
        return;
    }
    auto it = cqs_.find(cqn);
    if (it->second.refs) {
        c.fail(Status::ResBusy, "CQ 0x{:x} is used by {} QPs/SRQs", cqn, it->second.refs);
        return;
    }
    HCA_TRACE(dev_, obj_destroy_cq, .cqn = cqn, .cqes = it->second.cqes, .events = it->second.events);
    if (it->second.mod_timer) {
        dev_.cancel_timer(it->second.mod_timer);
    }
    if (it->second.hold_timer) {
        // Held CQEs go with their CQ: nothing is written after the destroy.
        dev_.cancel_timer(it->second.hold_timer);
        HCA_TRACE(dev_, fault_cqe_delay_dropped, .cqn = cqn, .held = it->second.held.size());
    }
    // An open compression session goes with its CQ too (the driver
    // destroys a CQ it has stopped polling).
    cqs_.erase(it);
    ids_.release(cqn);
}

void CqTable::cmd_query_cq(CmdCtx &c) {
    const uint32_t cqn = static_cast<uint32_t>(c.get(ifc::query_cq_in::cqn));
    Cq *cq = find_for(c, cqn);
    if (!cq || !flush(*cq)) {
        return;
    }
    uint8_t ci[4] = {};
    dev_.dma_read(cq->dbr, ci, 4);
    const ifc::Block ctx = ifc::query_cq_out::cq_context;
    c.set(ifc::in(ctx, cqc::status), cq->status);
    c.set(ifc::in(ctx, cqc::cqe_sz), cq->pad128 ? 2 : cq->stride == 128);
    c.set(ifc::in(ctx, cqc::oi), cq->oi);
    c.set(ifc::in(ctx, cqc::cqe_comp_en), cq->comp);
    c.set(ifc::in(ctx, cqc::mini_cqe_res_format), cq->mini_format);
    c.set(ifc::in(ctx, cqc::st), cq->arm == Cq::Arm::None ? 0xa : 0x9);
    c.set(ifc::in(ctx, cqc::page_offset), cq->page_offset);
    c.set(ifc::in(ctx, cqc::log_cq_size), cq->log_size);
    c.set(ifc::in(ctx, cqc::uar_page), cq->uar);
    c.set(ifc::in(ctx, cqc::c_eqn_or_apu_element), cq->eqn);
    c.set(ifc::in(ctx, cqc::log_page_size), cq->log_page_size);
    c.set(ifc::in(ctx, cqc::cq_period), cq->period_us);
    c.set(ifc::in(ctx, cqc::cq_max_count), cq->max_count);
    c.set(ifc::in(ctx, cqc::consumer_counter), load_be32(ci) & 0xffffff);
    c.set(ifc::in(ctx, cqc::producer_counter), cq->pi & 0xffffff);
    c.set(ifc::in(ctx, cqc::dbr_addr), cq->dbr);
}

namespace {

// include/linux/mlx5/cq.h
constexpr uint16_t kOpModModerate = 0;
constexpr uint16_t kOpModResize = 1;
constexpr uint32_t kModifyPeriod = 1 << 0;
constexpr uint32_t kModifyCount = 1 << 1;
constexpr uint32_t kModifyOverrun = 1 << 2;
constexpr uint32_t kResizeLogSize = 1 << 0;
constexpr uint32_t kResizePageOffset = 1 << 1;
constexpr uint32_t kResizePageSize = 1 << 2;
constexpr ifc::Field kFieldSelect{ifc::modify_cq_in::modify_field_select_resize_field_select.off, 32};

}  // namespace

void CqTable::cmd_modify_cq(CmdCtx &c) {
    const uint32_t cqn = static_cast<uint32_t>(c.get(ifc::modify_cq_in::cqn));
    Cq *cq = find_for(c, cqn);
    if (!cq) {
        return;
    }
    const uint16_t op_mod = static_cast<uint16_t>(c.get(ifc::modify_cq_in::op_mod));
    const uint32_t select = static_cast<uint32_t>(c.get(kFieldSelect));
    const ifc::Block ctx = ifc::modify_cq_in::cq_context;
    if (op_mod == kOpModResize) {
        resize(c, *cq, select);
        return;
    }
    if (op_mod != kOpModModerate) {
        c.fail(Status::BadParam, "MODIFY_CQ op_mod {}", op_mod);
        return;
    }
    if (select & ~(kModifyPeriod | kModifyCount | kModifyOverrun)) {
        c.fail(Status::BadParam, "modify_field_select 0x{:x} has unknown bits", select);
        return;
    }
    if (select & kModifyPeriod) {
        cq->period_us = static_cast<uint16_t>(c.get(ifc::in(ctx, cqc::cq_period)));
    }
    if (select & kModifyCount) {
        cq->max_count = static_cast<uint16_t>(c.get(ifc::in(ctx, cqc::cq_max_count)));
    }
    if (select & kModifyOverrun) {
        cq->oi = c.get(ifc::in(ctx, cqc::oi));
    }
    HCA_TRACE(dev_, obj_modify_cq_moderation, .cqn = cqn, .period_us = cq->period_us, .count = cq->max_count,
              .oi = cq->oi);
}

// Resize (hw/cq.c mlx5_ib_resize_cq(), libmlx5 mlx5_resize_cq()): a RESIZE
// CQE closes the old buffer at the producer counter; the counter goes on
// in the new buffer, where the driver copies the CQEs it had not polled.
void CqTable::resize(CmdCtx &c, Cq &cq, uint32_t select) {
    const ifc::Block ctx = ifc::modify_cq_in::cq_context;
    if ((select & kResizeLogSize) == 0 || (select & ~(kResizeLogSize | kResizePageOffset | kResizePageSize))) {
        c.fail(Status::BadParam, "resize_field_select 0x{:x}: log_cq_size must be selected, no other bits", select);
        return;
    }
    const uint8_t log_size = static_cast<uint8_t>(c.get(ifc::in(ctx, cqc::log_cq_size)));
    const uint64_t max_log = dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_cq_sz);
    if (log_size > max_log) {
        c.fail(Status::BadParam, "log_cq_size {} exceeds log_max_cq_sz {}", log_size, max_log);
        return;
    }
    const uint8_t log_page_size = (select & kResizePageSize) ? static_cast<uint8_t>(c.get(ifc::in(ctx, cqc::log_page_size)))
                                                             : cq.log_page_size;
    const uint32_t page_offset = (select & kResizePageOffset) ? static_cast<uint32_t>(c.get(ifc::in(ctx, cqc::page_offset)))
                                                              : cq.page_offset;
    uint8_t ci_raw[4] = {};
    dev_.dma_read(cq.dbr, ci_raw, 4);
    const uint32_t outstanding = (cq.pi - load_be32(ci_raw)) & 0xffffff;
    if (outstanding + 1 > (1u << log_size)) {
        c.fail(Status::BadParam, "{} unpolled CQEs do not fit a CQ of {} entries", outstanding, 1u << log_size);
        return;
    }
    if (c.get(ifc::modify_cq_in::cq_umem_valid)) {
        c.fail(Status::BadParam, "resizing a CQ into a UMEM is not supported");
        return;
    }
    PageList buf;
    const auto pas = c.in_block(ifc::modify_cq_in::pas);
    const uint64_t offset_bytes = PageList::offset_bytes(page_offset, log_page_size);
    if (!load_queue_buffer(c, dev_.budget, buf, "new CQ", pas, pas.size() / 8, log_page_size, offset_bytes,
                           uint64_t{cq.stride} << log_size)) {
        return;
    }
    Cqe64 marker{};
    marker.op_own = static_cast<uint8_t>(kCqeResizeCq << 4);
    const uint32_t at = cq.pi;
    if (!flush(cq) || !write_cqe(cq, marker)) {
        c.fail(Status::IntErr, "the old CQ buffer cannot take the RESIZE CQE");
        return;
    }
    HCA_TRACE(dev_, obj_resize_cq, .cqn = cq.cqn, .from = cq.nent(), .to = 1u << log_size, .pi = at & 0xffffff,
              .unpolled = outstanding);
    cq.buf = std::move(buf);
    cq.log_size = log_size;
    cq.log_page_size = log_page_size;
    cq.page_offset = page_offset;
}

void CqTable::notify(Cq &cq) {
    // The CQEs the event announces are in memory before it.
    flush(cq);
    cq.arm = Cq::Arm::None;
    cq.mod_pending = 0;
    if (cq.mod_timer) {
        dev_.cancel_timer(cq.mod_timer);
        cq.mod_timer = 0;
    }
    ++cq.events;
    dev_.eqs.post(cq.eqn, kEventComp, 0, EqeData::completion(cq.cqn));
}

void CqTable::doorbell(uint32_t uar, const uint8_t *data) {
    CqArmDoorbell db;
    std::memcpy(&db, data, sizeof(db));  // Device::uar_doorbell checked its 8 bytes
    const uint32_t dw0 = db.sn_cmd_ci.get();
    const uint32_t cqn = db.cqn.get() & 0xffffff;
    Cq *cq = find(cqn);
    if (!cq) {
        dev_.guest_error("CQ arm doorbell uar={} for CQ 0x{:x} that does not exist", uar, cqn);
        return;
    }
    if (cq->uar != uar) {
        dev_.guest_error("CQ arm doorbell for cqn=0x{:x} through uar={}, but the CQ belongs to uar={}: ignored", cqn,
                         uar, cq->uar);
        return;
    }
    const uint32_t ci = dw0 & 0xffffff;
    const bool sol = (dw0 >> 24) & 1;
    if (((cq->pi - ci) & 0xffffff) > cq->nent()) {
        dev_.guest_error("CQ arm cqn=0x{:x}: consumer index 0x{:x} is beyond the producer 0x{:x}", cqn, ci,
                         cq->pi & 0xffffff);
    }
    cq->ci_seen = ci;
    cq->arm = sol ? Cq::Arm::Solicited : Cq::Arm::Next;
    HCA_TRACE(dev_, cqe_arm, .cqn = cqn, .ci = ci, .arm = sol ? "solicited" : "next", .sn = dw0 >> 28,
              .pending = (cq->pi - ci) & 0xffffff);
    // CQEs the driver has not polled yet: an event right away, or the
    // driver would sleep on them (hw/cq.c mlx5_ib_arm_cq()).
    if (((cq->pi - ci) & 0xffffff) != 0) {
        notify(*cq);
    }
}

bool CqTable::post(uint32_t cqn, Cqe64 &cqe, bool solicited) {
    Cq *cq = find(cqn);
    if (!cq) {
        dev_.guest_error("CQE for CQ 0x{:x} that does not exist: dropped", cqn);
        return false;
    }
    if (cq->status != kStatusOk) {
        return false;
    }
    // The completion's time on the free-running clock (internal_timer,
    // device_frequency_khz = 1 GHz): libmlx5 reads it raw
    // (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP) or converts it to wall-clock ns
    // through the kernel's clock-info page. Taken now, so a CQE that a
    // cqe-delay holds keeps the time its work completed. An error CQE has
    // its syndromes where the timestamp would be (mlx5_err_cqe).
    const uint8_t opcode = cqe.op_own >> 4;
    if (opcode != kCqeReqErr && opcode != kCqeRespErr) {
        const auto t = static_cast<uint64_t>(dev_.now());
        cqe.timestamp_h.set(static_cast<uint32_t>(t >> 32));
        cqe.timestamp_l.set(static_cast<uint32_t>(t));
    }
    // Held CQEs (cqe-delay) are produced already: they count.
    const uint32_t produced = cq->pi + static_cast<uint32_t>(cq->held.size());
    if (((produced - cq->ci_seen) & 0xffffff) >= cq->nent()) {
        // Looks full: read the consumer counter from the doorbell record.
        uint8_t ci[4];
        if (dev_.dma_read(cq->dbr, ci, 4)) {
            cq->ci_seen = load_be32(ci) & 0xffffff;
        }
        if (((produced - cq->ci_seen) & 0xffffff) >= cq->nent() && !cq->oi) {
            cq->status = kStatusOverflow;
            dev_.guest_error("CQ overrun cqn=0x{:x} pi=0x{:x} ci=0x{:x}: CQ in error", cqn, cq->pi & 0xffffff,
                             cq->ci_seen);
            dev_.eqs.post_event(kEventCqError, 0, EqeData::cq_error(cqn, kCqErrOverrun));
            return false;
        }
    }
    if (const Fault *f = dev_.faults.hit(FaultKind::LostCqe, {.cqn = cqn})) {
        dev_.faults.fired(*f, fmt::format("cqn=0x{:x} CQE opcode=0x{:x} not written", cqn, cqe.op_own >> 4));
        return true;
    }
    if (!cq->held.empty()) {
        cq->held.push_back({cqe, solicited});
        if (cq->held.size() >= kMaxHeld) {
            release(*cq, "the held CQEs reached the limit");
        }
        return true;
    }
    const int64_t qpn = load_be32(&cqe.sop_drop_qpn) & 0xffffff;
    if (const Fault *f = dev_.faults.hit(FaultKind::CqeDelay, {.qpn = qpn, .cqn = cqn})) {
        dev_.faults.fired(*f, fmt::format("cqn=0x{:x} CQE opcode=0x{:x} of qpn=0x{:x} and the CQEs after it held {} ms",
                                          cqn, cqe.op_own >> 4, qpn, f->ms));
        cq->held.push_back({cqe, solicited});
        cq->hold_timer = dev_.add_timer(f->ms * 1'000'000, [this, cqn] {
            if (Cq *q = find(cqn)) {
                q->hold_timer = 0;
                release(*q, "the delay is over");
            }
        });
        return true;
    }
    return deliver(*cq, cqe, solicited);
}

// Writes the CQEs a cqe-delay held, in order (a CQ in error takes none).
void CqTable::release(Cq &cq, const char *why) {
    if (cq.hold_timer) {
        dev_.cancel_timer(cq.hold_timer);
        cq.hold_timer = 0;
    }
    HCA_TRACE(dev_, fault_cqe_delay_released, .cqn = cq.cqn, .held = cq.held.size(), .reason = why);
    std::deque<Cq::Held> held = std::move(cq.held);
    cq.held.clear();
    for (Cq::Held &h : held) {
        if (cq.status != kStatusOk || !deliver(cq, h.cqe, h.solicited)) {
            break;
        }
    }
}

// Writes a CQE and raises the event its arm asks for.
bool CqTable::deliver(Cq &cq, Cqe64 &cqe, bool solicited) {
    if (!(cq.comp ? produce(cq, cqe) : write_cqe(cq, cqe))) {
        return false;
    }
    ++cq.cqes;
    if (cq.arm == Cq::Arm::Solicited && solicited) {
        notify(cq);
    } else if (cq.arm == Cq::Arm::Next) {
        if (cq.max_count <= 1 && cq.period_us == 0) {
            notify(cq);
        } else if (cq.max_count > 1 && ++cq.mod_pending >= cq.max_count) {
            notify(cq);
        } else if (cq.period_us && !cq.mod_timer) {
            cq.mod_timer = dev_.add_timer(int64_t{cq.period_us} * 1000, [this, cqn = cq.cqn] {
                Cq *q = find(cqn);
                if (q) {
                    q->mod_timer = 0;
                    if (q->arm != Cq::Arm::None) {
                        notify(*q);
                    }
                }
            });
        }
    }
    return true;
}

// Writes cqe at the producer counter (owner bit set here) and advances it.
bool CqTable::write_cqe(Cq &cq, Cqe64 &cqe) {
    if (!write_slot(cq, cq.pi, reinterpret_cast<const uint8_t *>(&cqe), true)) {
        return false;
    }
    ++cq.pi;
    return true;
}

bool CqTable::write_slot(Cq &cq, uint32_t index, const uint8_t *bytes, bool cqe) {
    const uint64_t off = uint64_t{index & (cq.nent() - 1)} * cq.stride + (cq.stride - 64);
    const uint64_t addr = cq.buf.addr(off);
    const uint8_t op_own = cqe ? static_cast<uint8_t>((bytes[63] & 0xfe) | ((index >> cq.log_size) & 1)) : bytes[63];
    static constexpr uint8_t kPad[64] = {};
    // Padding first (a padded CQE is always the whole 128 bytes), body
    // next, op_own last: the driver polls on the owner bit.
    if ((cq.pad128 && !dev_.dma_write(cq.buf.addr(off - 64), kPad, 64)) || !dev_.dma_write(addr, bytes, 63) ||
        !dev_.dma_write(addr + 63, &op_own, 1)) {
        cq.status = kStatusWriteFail;
        dev_.guest_error("CQ cqn=0x{:x} entry at 0x{:x} is not guest memory: CQ in error", cq.cqn, addr);
        dev_.eqs.post_event(kEventCqError, 0, EqeData::cq_error(cq.cqn, kCqErrAccess));
        return false;
    }
    return true;
}

namespace {

// The bytes a mini CQE may differ in from its session's title
// (mlx5_cqe64): the RSS hash, the checksum, the byte count, the
// timestamp, the WQE counter and the owner bit.
constexpr size_t kRssHashAt = 12;
constexpr size_t kCheckSumAt = 20;
constexpr size_t kByteCntAt = offsetof(Cqe64, byte_cnt);
constexpr size_t kTimestampAt = offsetof(Cqe64, timestamp_h);
constexpr size_t kWqeCounterAt = offsetof(Cqe64, wqe_counter);
constexpr uint8_t kFormatCompressed = 3 << 2;  // op_own 3:2, MLX5_COMPRESSED
constexpr uint32_t kMinisPerSlot = 8;          // MLX5_MINI_CQE_ARRAY_SIZE

// A CQE that may open a session: a responder's success CQE without data
// scattered to the CQE (op_own 3:2 is 0). Requester and error CQEs are
// written alone, as a device that did not compress them would.
bool compressible(const Cqe64 &cqe) {
    const uint8_t opcode = cqe.op_own >> 4;
    return (opcode == kCqeRespWrImm || opcode == kCqeRespSend || opcode == kCqeRespSendImm ||
            opcode == kCqeRespSendInv) &&
           (cqe.op_own & 0x0c) == 0;
}

bool same_range(const uint8_t *a, const uint8_t *b, size_t from, size_t to) {
    return std::memcmp(a + from, b + from, to - from) == 0;
}

}  // namespace

const char *CqTable::mini_format_name(uint8_t format) {
    switch (format) {
        case kMiniHash:
            return "hash";
        case kMiniCsum:
            return "csum";
        case kMiniCsumStridx:
            return "csum_stridx";
        default:
            return "reserved";
    }
}

// A CQE joins the open session when it follows the last one on the same
// QP's queue (the WQE counter one on) and differs from the title only in
// what its mini CQE carries (the byte count, the checksum or hash of the
// format), its timestamp (the session has the title's) and its owner bit.
bool CqTable::joins(const Cq &cq, const Cqe64 &cqe) const {
    const Cq::Session &s = cq.session;
    if (s.n == 0 || s.n >= kMaxSession || cqe.wqe_counter.get() != static_cast<uint16_t>(s.last_wqe + 1)) {
        return false;
    }
    const auto *a = reinterpret_cast<const uint8_t *>(&s.title);
    const auto *b = reinterpret_cast<const uint8_t *>(&cqe);
    const bool hash = cq.mini_format == kMiniHash;
    // The hash format carries the hash, not the checksum; the others the
    // checksum, not the hash: what a mini CQE does not carry must match.
    return same_range(a, b, 0, kRssHashAt) && (hash || same_range(a, b, kRssHashAt, kRssHashAt + 4)) &&
           same_range(a, b, kRssHashAt + 4, kCheckSumAt) && (!hash || same_range(a, b, kCheckSumAt, kCheckSumAt + 2)) &&
           same_range(a, b, kCheckSumAt + 2, kByteCntAt) && same_range(a, b, kTimestampAt + 8, kWqeCounterAt) &&
           a[62] == b[62] && (a[63] & 0xfe) == (b[63] & 0xfe);
}

// mlx5_mini_cqe8: the format's 4 bytes, then the byte count. The stride
// index of kMiniCsumStridx carries the WQE counter (the device has no
// striding receive queues).
void CqTable::add_mini(Cq &cq, const Cqe64 &cqe) {
    const auto *b = reinterpret_cast<const uint8_t *>(&cqe);
    std::array<uint8_t, 8> m{};
    if (cq.mini_format == kMiniHash) {
        std::memcpy(m.data(), b + kRssHashAt, 4);
    } else {
        std::memcpy(m.data(), b + kCheckSumAt, 2);
        if (cq.mini_format == kMiniCsumStridx) {
            std::memcpy(m.data() + 2, b + kWqeCounterAt, 2);
        }
    }
    std::memcpy(m.data() + 4, b + kByteCntAt, 4);
    cq.session.minis.push_back(m);
    cq.session.last_wqe = cqe.wqe_counter.get();
    ++cq.session.n;
}

// A CQE of a compressing CQ takes its index now; its bytes are written
// when the session ends. (Out of line: a CQ without compression never
// comes here.)
bool CqTable::produce(Cq &cq, Cqe64 &cqe) {
    if (joins(cq, cqe)) {
        add_mini(cq, cqe);
        ++cq.pi;
        return true;
    }
    if (!flush(cq)) {
        return false;
    }
    if (!compressible(cqe)) {
        return write_cqe(cq, cqe);
    }
    Cq::Session &s = cq.session;
    s.at = cq.pi;
    s.title = cqe;
    s.minis.clear();
    add_mini(cq, cqe);
    ++cq.pi;
    if (std::find(open_.begin(), open_.end(), cq.cqn) == open_.end()) {
        open_.push_back(cq.cqn);
    }
    dev_.schedule_unless_running();  // one made outside a run: the next run writes it
    return true;
}

// Ends the CQ's session. One CQE is written as it is. More are a title
// (the first CQE, format 3, its byte count the number of CQEs) at the
// session's first index and arrays of 8 mini CQEs, the first in the index
// after the title's and array k at the title's + 8k (how mlx5e and DPDK
// read them); the indexes between are left alone. The title goes last.
bool CqTable::flush(Cq &cq) {
    Cq::Session &s = cq.session;
    if (s.n == 0) {
        return true;
    }
    const uint32_t n = s.n;
    s.n = 0;
    if (cq.status != kStatusOk) {
        return false;  // a CQ in error takes no more CQEs
    }
    if (n == 1) {
        return write_slot(cq, s.at, reinterpret_cast<const uint8_t *>(&s.title), true);
    }
    const uint32_t arrays = (n + kMinisPerSlot - 1) / kMinisPerSlot;
    for (uint32_t k = 0; k < arrays; ++k) {
        std::array<uint8_t, 64> slot{};
        const uint32_t first = k * kMinisPerSlot;
        for (uint32_t i = first; i < std::min(n, first + kMinisPerSlot); ++i) {
            std::memcpy(slot.data() + (i - first) * 8, s.minis[i].data(), 8);
        }
        if (!write_slot(cq, s.at + (k == 0 ? 1 : k * kMinisPerSlot), slot.data(), false)) {
            return false;
        }
    }
    Cqe64 title = s.title;
    title.byte_cnt.set(n);
    title.op_own = static_cast<uint8_t>((title.op_own & 0xf3) | kFormatCompressed);
    HCA_TRACE(dev_, cqe_session, .cqn = cq.cqn, .at = s.at & 0xffffff, .count = n, .arrays = arrays,
              .format = mini_format_name(cq.mini_format), .wqe_counter = s.title.wqe_counter.get());
    return write_slot(cq, s.at, reinterpret_cast<const uint8_t *>(&title), true);
}

void CqTable::flush_sessions() {
    for (const uint32_t cqn : open_) {
        if (Cq *cq = find(cqn)) {
            flush(*cq);
        }
    }
    open_.clear();
}

std::string CqTable::info() const {
    std::string s = fmt::format("CQs: {}\n", cqs_.size());
    for (const auto &[cqn, cq] : cqs_) {
        fmt::format_to(std::back_inserter(s),
                       "  cqn=0x{:x} nent={} eqn={} uar={} pi=0x{:x} ci=0x{:x} arm={} status=0x{:x} cqes={} "
                       "events={}{}\n",
                       cqn, cq.nent(), cq.eqn, cq.uar, cq.pi & 0xffffff, cq.ci_seen,
                       cq.arm == Cq::Arm::None ? "no" : (cq.arm == Cq::Arm::Next ? "next" : "solicited"), cq.status,
                       cq.cqes, cq.events, cq.held.empty() ? "" : fmt::format(" held={}", cq.held.size()));
    }
    return s;
}

}  // namespace hca
