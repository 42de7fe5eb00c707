// SQ objects: CREATE/MODIFY/QUERY/DESTROY_SQ (sqc + wq), the send queues
// of Ethernet and IPoIB-enhanced netdevs. The port is InfiniBand and the
// device has no Ethernet or underlay transmit path, so such an SQ carries
// only local work: NOPs, which mlx5_core's write-combining test
// (mlx5_wc_support_get(), 6.12 and later) rings through BlueFlame and
// polls for; anything else completes in error. An SQ is a QP of the
// model's own type kQpSq in the QP table (SQNs and QPNs share a space), so
// doorbells, BlueFlame copies, WQE fetch and CQEs are the send queue's.
#include <fmt/format.h>

#include "device.h"
#include "objects/pages.h"
#include "objects/qp.h"

namespace hca {

using ifc::sqc;

namespace {

const char *sq_state_name(uint64_t s) {
    switch (s) {
        case kSqRst:
            return "RST";
        case kSqRdy:
            return "RDY";
        case kSqErr:
            return "ERR";
    }
    return "?";
}

QpState qp_state_of(uint64_t s) {
    return s == kSqRdy ? QpState::Rts : s == kSqErr ? QpState::Err : QpState::Rst;
}

uint8_t sq_state_of(QpState s) {
    return s == QpState::Rst ? kSqRst : s == QpState::Rts ? kSqRdy : kSqErr;
}

// sqc.ts_format (MLX5_TIMESTAMP_FORMAT_*): real time is not offered.
constexpr uint64_t kTsFormatRealTime = 2;

}  // namespace

void QpTable::cmd_create_sq(CmdCtx &c) {
    const auto &caps = dev_.fw.caps();
    const ifc::Block ctx = ifc::create_sq_in::ctx;
    const ifc::Block wq = ifc::in(ctx, sqc::wq);
    auto f = [&](ifc::Field fld) { return c.get(ifc::in(ctx, fld)); };
    auto w = [&](ifc::Field fld) { return c.get(ifc::in(wq, fld)); };
    Qp s;
    s.st = kQpSq;
    s.uid = static_cast<uint16_t>(c.get(ifc::create_sq_in::uid));
    s.user_index = static_cast<uint32_t>(f(sqc::user_index));
    s.cqn_snd = static_cast<uint32_t>(f(sqc::cqn));
    s.rq_type = kRqZero;
    s.pd = static_cast<uint32_t>(w(ifc::wq::pd));
    s.uar = static_cast<uint32_t>(w(ifc::wq::uar_page));
    s.dbr = w(ifc::wq::dbr_addr);
    s.log_page_size = static_cast<uint8_t>(w(ifc::wq::log_wq_pg_sz));
    s.page_offset = static_cast<uint32_t>(w(ifc::wq::page_offset));
    s.log_sq_size = static_cast<uint8_t>(w(ifc::wq::log_wq_sz));
    if (f(sqc::state) != kSqRst) {
        c.fail(Status::BadParam, "SQ created in state {}, not RST", sq_state_name(f(sqc::state)));
        return;
    }
    if (w(ifc::wq::wq_type) != 1) {  // MLX5_WQ_TYPE_CYCLIC
        c.fail(Status::BadParam, "SQ wq_type {} is not cyclic", w(ifc::wq::wq_type));
        return;
    }
    if (w(ifc::wq::log_wq_stride) != 6 || s.log_sq_size > caps.gen(ifc::cmd_hca_cap::log_max_qp_sz)) {
        c.fail(Status::BadParam, "SQ of 2^{} WQEs of 2^{} bytes (WQEBBs of 64 bytes, at most 2^{})", s.log_sq_size,
               w(ifc::wq::log_wq_stride), caps.gen(ifc::cmd_hca_cap::log_max_qp_sz));
        return;
    }
    if (f(sqc::ts_format) == kTsFormatRealTime || f(sqc::hairpin) || f(sqc::reg_umr)) {
        c.fail(Status::BadParam, "SQ with real-time timestamps, hairpin or UMR: not offered");
        return;
    }
    // The write-combining test's SQ names PD 0 on a port without an
    // Ethernet netdev (mlx5e_res.hw_objs.pdn unset): a NOP reads no memory
    // through a key, so the SQ needs no PD.
    if (s.pd && !dev_.pds.pd_used_by(c, s.pd, "SQ")) {
        return;
    }
    Cq *cq = dev_.cqs.find_used_by(c, s.cqn_snd, "SQ");
    if (!cq) {
        return;
    }
    if (!dev_.uars.allocated(s.uar)) {
        c.fail(Status::BadParam, "SQ uar_page {} is not allocated", s.uar);
        return;
    }
    const UmemTable::QueueMemory mem{.dbr_umem = w(ifc::wq::dbr_umem_valid) != 0,
                                     .dbr_umem_id = static_cast<uint32_t>(w(ifc::wq::dbr_umem_id)),
                                     .buf_umem = w(ifc::wq::wq_umem_valid) != 0,
                                     .buf_umem_id = static_cast<uint32_t>(w(ifc::wq::wq_umem_id)),
                                     .buf_umem_offset = w(ifc::wq::wq_umem_offset),
                                     .pas = c.in_block(ifc::in(wq, ifc::wq::pas)),
                                     .log_page_size = s.log_page_size,
                                     .page_offset = s.page_offset};
    if (!dev_.umems.queue(c, "SQ", mem, uint64_t{s.sq_wqebbs()} * kWqeBb, s.dbr, s.buf, s.pins)) {
        return;
    }
    s.qpn = alloc_qpn(c);
    if (!s.qpn) {
        return;
    }
    ++cq->refs;
    c.set(ifc::create_sq_out::sqn, s.qpn);
    HCA_TRACE(dev_, obj_create_sq, .sqn = s.qpn, .pd = s.pd, .cqn = s.cqn_snd, .uar = s.uar, .wqebbs = s.sq_wqebbs(),
              .dbr = s.dbr, .pages = s.buf.npages(), .uid = s.uid);
    qps_.emplace(s.qpn, std::move(s));
}

// MODIFY_SQ: RST to RDY, RDY to RDY or ERR, and to RST from any state
// (mlx5e's recovery: ERR, RST, RDY). The other fields of the context
// (rate limit, QoS group) are not modelled and not checked.
void QpTable::cmd_modify_sq(CmdCtx &c) {
    const uint32_t sqn = static_cast<uint32_t>(c.get(ifc::modify_sq_in::sqn));
    Qp *s = find_of(c, sqn, kQpSq);
    if (!s) {
        return;
    }
    const uint64_t cur = c.get(ifc::modify_sq_in::sq_state);
    const uint64_t next = c.get(ifc::in(ifc::modify_sq_in::ctx, sqc::state));
    const uint8_t now = sq_state_of(s->state);
    if (cur != now) {
        c.fail(Status::BadParam, "SQ 0x{:x} is {}, not {}", sqn, sq_state_name(now), sq_state_name(cur));
        return;
    }
    const bool ok =
        next == kSqRst || (now == kSqRst && next == kSqRdy) || (now == kSqRdy && (next == kSqRdy || next == kSqErr));
    if (!ok) {
        c.fail(Status::BadParam, "SQ 0x{:x}: no transition from {} to {}", sqn, sq_state_name(now),
               sq_state_name(next));
        return;
    }
    const QpState old = s->state;
    s->state = qp_state_of(next);
    HCA_TRACE(dev_, qp_transition, .qpn = sqn, .type = qp_type_name(s->st), .cmd = "MODIFY_SQ",
              .from = qp_state_name(old), .to = qp_state_name(s->state), .opt = 0);
    if (s->state != old) {
        entered(*s, old);
    }
}

void QpTable::cmd_query_sq(CmdCtx &c) {
    Qp *s = find_of(c, static_cast<uint32_t>(c.get(ifc::query_sq_in::sqn)), kQpSq);
    if (!s) {
        return;
    }
    const ifc::Block ctx = ifc::query_sq_out::sq_context;
    const ifc::Block wq = ifc::in(ctx, sqc::wq);
    c.set(ifc::in(ctx, sqc::state), sq_state_of(s->state));
    c.set(ifc::in(ctx, sqc::user_index), s->user_index);
    c.set(ifc::in(ctx, sqc::cqn), s->cqn_snd);
    c.set(ifc::in(wq, ifc::wq::wq_type), 1);
    c.set(ifc::in(wq, ifc::wq::pd), s->pd);
    c.set(ifc::in(wq, ifc::wq::uar_page), s->uar);
    c.set(ifc::in(wq, ifc::wq::dbr_addr), s->dbr);
    c.set(ifc::in(wq, ifc::wq::hw_counter), s->sq_ci);
    c.set(ifc::in(wq, ifc::wq::log_wq_stride), 6);
    c.set(ifc::in(wq, ifc::wq::log_wq_pg_sz), s->log_page_size);
    c.set(ifc::in(wq, ifc::wq::log_wq_sz), s->log_sq_size);
    c.set(ifc::in(wq, ifc::wq::page_offset), s->page_offset);
}

void QpTable::cmd_destroy_sq(CmdCtx &c) {
    const uint32_t sqn = static_cast<uint32_t>(c.get(ifc::destroy_sq_in::sqn));
    Qp *s = find_of(c, sqn, kQpSq);
    if (!s) {
        return;
    }
    HCA_TRACE(dev_, obj_destroy_sq, .sqn = sqn, .state = qp_state_name(s->state), .sent = s->sent);
    release(*s);
    qps_.erase(sqn);
    ids_.release(sqn);
}

}  // namespace hca
