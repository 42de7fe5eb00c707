// QP objects: creation, query, destruction, the error state with its
// flushing, and multicast attachment (the modify state machine is in
// qp_modify.cpp).
#include "objects/qp.h"

#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "datapath/common.h"
#include "device.h"
#include "ifc/mlx5_ifc_extra.h"

namespace hca {

using ifc::qpc;

namespace {

// The QP context of CREATE_QP, as given.
Qp qp_of_create(CmdCtx &c) {
    const ifc::Block ctx = ifc::create_qp_in::qpc;
    auto f = [&](ifc::Field fld) { return c.get(ifc::in(ctx, fld)); };
    Qp qp;
    qp.st = static_cast<uint8_t>(f(qpc::st));
    qp.pd = static_cast<uint32_t>(f(qpc::pd));
    qp.uid = static_cast<uint16_t>(c.get(ifc::create_qp_in::uid));
    qp.user_index = static_cast<uint32_t>(f(qpc::user_index));
    qp.cqn_snd = static_cast<uint32_t>(f(qpc::cqn_snd));
    qp.cqn_rcv = static_cast<uint32_t>(f(qpc::cqn_rcv));
    qp.uar = static_cast<uint32_t>(f(qpc::uar_page));
    qp.dbr = f(qpc::dbr_addr);
    qp.log_page_size = static_cast<uint8_t>(f(qpc::log_page_size));
    qp.page_offset = static_cast<uint32_t>(f(qpc::page_offset));
    qp.rq_type = static_cast<uint8_t>(f(qpc::rq_type));
    qp.log_rq_size = static_cast<uint8_t>(f(qpc::log_rq_size));
    qp.rq_stride = 16u << f(qpc::log_rq_stride);
    qp.srqn = static_cast<uint32_t>(f(qpc::srqn_rmpn_xrqn));
    qp.xrcd = static_cast<uint32_t>(f(qpc::xrcd));
    qp.no_sq = f(qpc::no_sq);
    qp.log_sq_size = static_cast<uint8_t>(f(qpc::log_sq_size));
    qp.pm_state = static_cast<uint8_t>(f(qpc::pm_state));
    qp.rlky = f(qpc::rlky);
    qp.block_lb_mc = f(qpc::block_lb_mc);
    qp.offload_mode = static_cast<uint8_t>(f(qpc::ulp_stateless_offload_mode));
    qp.ipoib_offload = qp.offload_mode == 1;
    return qp;
}

}  // namespace

const char *qp_type_name(uint8_t st) {
    switch (st) {
    case kQpRc: return "RC";
    case kQpUc: return "UC";
    case kQpUd: return "UD";
    case kQpXrc: return "XRC";
    case kQpDci:
        return "DCI";
    case kQpDct:
        return "DCT";
    case kQpDcContext:
        return "DC_CONTEXT";
    case kQpSq:
        return "SQ";
    case kQpQp0: return "QP0";
    case kQpQp1: return "QP1";
    case kQpRegUmr: return "REG_UMR";
    default: return "?";
    }
}

const char *qp_state_name(QpState s) {
    switch (s) {
    case QpState::Rst: return "RST";
    case QpState::Init: return "INIT";
    case QpState::Rtr: return "RTR";
    case QpState::Rts: return "RTS";
    case QpState::Sqer: return "SQER";
    case QpState::Sqd: return "SQD";
    case QpState::Err: return "ERR";
    }
    return "?";
}

void QpTable::reset() {
    qps_.clear();
    mcgs_.clear();
    ids_.reset();
    dc_ids_.reset();
    dc_clock_ = 0;
    sq_.reset();
    resp_.reset();
}

Qp *QpTable::find(uint32_t qpn) {
    auto it = qps_.find(qpn);
    return it == qps_.end() ? nullptr : &it->second;
}

Qp *QpTable::find_qp(uint32_t qpn) {
    Qp *qp = find(qpn);
    return qp && qp->st != kQpDct && qp->st != kQpSq ? qp : nullptr;  // DCTs and SQs have their own commands
}

Qp *QpTable::find_of(CmdCtx &c, uint32_t n, uint8_t st) {
    Qp *q = find(n);
    const char *kind = qp_type_name(st);
    if (!q || q->st != st) {
        c.fail(Status::BadRes, "{} 0x{:x} does not exist", kind, n);
        return nullptr;
    }
    return c.may_touch(q->uid, kind, n) ? q : nullptr;
}

Qp *QpTable::special_qp(uint8_t st) {
    for (auto &[qpn, qp] : qps_) {
        if (qp.st == st) {
            return &qp;
        }
    }
    return nullptr;
}

// CREATE_QP's own fields against the capabilities and limits.
bool QpTable::create_qp_valid(CmdCtx &c, const Qp &qp) {
    const auto &caps = dev_.fw.caps();
    switch (qp.st) {
        case kQpRc:
        case kQpUc:
        case kQpUd:
        case kQpXrc:
        case kQpDci:
        case kQpQp0:
        case kQpQp1:
        case kQpRegUmr:
            break;
        default:
            c.fail(Status::BadParam, "QP type st=0x{:x} is not supported", qp.st);
            return false;
    }
    if ((qp.st == kQpUc && !caps.gen(ifc::cmd_hca_cap::uc)) || (qp.st == kQpXrc && !caps.gen(ifc::cmd_hca_cap::xrc)) ||
        (qp.st == kQpDci && !caps.gen(ifc::cmd_hca_cap::dct))) {
        c.fail(Status::BadParam, "QP type {} is not enabled", qp_type_name(qp.st));
        return false;
    }
    // The UMR QP is created without a PD (hw/qp.c create_kernel_qp()).
    if (qp.st != kQpRegUmr && !dev_.pds.pd_used_by(c, qp.pd, "QP")) {
        return false;
    }
    if (qp.special() && special_qp(qp.st)) {
        c.fail(Status::ResBusy, "{} already exists for port 1", qp_type_name(qp.st));
        return false;
    }
    const uint64_t max_log = caps.gen(ifc::cmd_hca_cap::log_max_qp_sz);
    if (qp.log_sq_size > max_log || qp.log_rq_size > max_log) {
        c.fail(Status::BadParam, "log_sq_size {} / log_rq_size {} exceed log_max_qp_sz {}", qp.log_sq_size,
               qp.log_rq_size, max_log);
        return false;
    }
    if (qp.rq_type != kRqRegular && qp.rq_type != kRqSrq && qp.rq_type != kRqZero) {
        c.fail(Status::BadParam, "rq_type {} is not supported", qp.rq_type);
        return false;
    }
    if (qp.rq_type == kRqRegular && qp.rq_stride > caps.gen(ifc::cmd_hca_cap::max_wqe_sz_rq)) {
        c.fail(Status::BadParam, "RQ stride {} exceeds max_wqe_sz_rq", qp.rq_stride);
        return false;
    }
    // Mode 1, IPoIB's basic offloads, is the one there is (and on UD only).
    if (qp.offload_mode && (qp.offload_mode != 1 || qp.st != kQpUd || !caps.gen(ifc::cmd_hca_cap::ipoib_basic_offloads))) {
        c.fail(Status::BadParam, "ulp_stateless_offload_mode {} on a {} QP is not supported", qp.offload_mode,
               qp_type_name(qp.st));
        return false;
    }
    return true;
}

// The objects a new QP names (SRQ, XRCD, CQs, UAR) exist; the ones it
// will hold a reference on are returned.
bool QpTable::create_qp_links(CmdCtx &c, const Qp &qp, Srq *&srq, Cq *&snd, Cq *&rcv) {
    if (qp.rq_type == kRqSrq && qp.st != kQpXrc) {
        srq = dev_.srqs.find(qp.srqn);
        if (!srq) {
            c.fail(Status::BadParam, "SRQ 0x{:x} does not exist", qp.srqn);
            return false;
        }
        if (!c.may_use(srq->uid, "SRQ", qp.srqn)) {
            return false;
        }
    }
    if (qp.st == kQpXrc && !dev_.pds.xrcd_exists(qp.xrcd)) {
        c.fail(Status::BadParam, "XRCD {} does not exist", qp.xrcd);
        return false;
    }
    if (!qp.no_sq) {
        snd = dev_.cqs.find_used_by(c, qp.cqn_snd, "send");
        if (!snd) {
            return false;
        }
        if (!dev_.uars.allocated(qp.uar)) {
            c.fail(Status::BadParam, "uar_page {} is not allocated", qp.uar);
            return false;
        }
    }
    if (qp.rq_type != kRqZero && qp.cqn_rcv) {
        rcv = dev_.cqs.find_used_by(c, qp.cqn_rcv, "receive");
        if (!rcv) {
            return false;
        }
    } else if (qp.rq_type == kRqRegular && !qp.cqn_rcv) {
        c.fail(Status::BadParam, "a QP with a receive queue needs a receive CQ");
        return false;
    }
    if (qp.dbr & 3) {
        c.fail(Status::BadParam, "dbr_addr 0x{:x} is not aligned", qp.dbr);
        return false;
    }
    return true;
}

void QpTable::cmd_create_qp(CmdCtx &c) {
    Qp qp = qp_of_create(c);
    Srq *srq = nullptr;
    Cq *snd = nullptr;
    Cq *rcv = nullptr;
    if (!create_qp_valid(c, qp) || !create_qp_links(c, qp, srq, snd, rcv)) {
        return;
    }
    const uint64_t rq_bytes = uint64_t{qp.rq_wqes()} * qp.rq_stride;
    const uint64_t bytes = rq_bytes + uint64_t{qp.sq_wqebbs()} * kWqeBb;
    qp.sq_offset = rq_bytes;
    // A DEVX QP has its doorbell record and its buffer in UMEMs.
    const UmemTable::QueueMemory mem{
        .dbr_umem = c.get(ifc::in(ifc::create_qp_in::qpc, qpc::dbr_umem_valid)) != 0,
        .dbr_umem_id = static_cast<uint32_t>(c.get(ifc::in(ifc::create_qp_in::qpc, ifc::extra::qpc_dbr_umem_id))),
        .buf_umem = c.get(ifc::create_qp_in::wq_umem_valid) != 0,
        .buf_umem_id = static_cast<uint32_t>(c.get(ifc::create_qp_in::wq_umem_id)),
        .buf_umem_offset = c.get(ifc::create_qp_in::wq_umem_offset),
        .pas = c.in_block(ifc::create_qp_in::pas),
        .log_page_size = qp.log_page_size,
        .page_offset = qp.page_offset};
    if (!dev_.umems.queue(c, "QP", mem, bytes, qp.dbr, qp.buf, qp.pins)) {
        return;
    }
    qp.qpn = alloc_qpn(c);
    if (!qp.qpn) {
        return;
    }
    if (snd) {
        ++snd->refs;
    }
    if (rcv) {
        ++rcv->refs;
    }
    if (srq) {
        ++srq->refs;
    }
    c.set(ifc::create_qp_out::qpn, qp.qpn);
    HCA_TRACE(dev_, obj_create_qp, .qpn = qp.qpn, .type = qp_type_name(qp.st), .pd = qp.pd, .sq_wqebbs = qp.sq_wqebbs(),
              .rq_wqes = qp.rq_wqes(), .rq_stride = qp.rq_stride, .rq_type = qp.rq_type, .srqn = qp.srqn,
              .cqn_snd = qp.cqn_snd, .cqn_rcv = qp.cqn_rcv, .uar = qp.uar, .dbr = qp.dbr, .pages = qp.buf.npages(),
              .uid = qp.uid);
    qps_.emplace(qp.qpn, std::move(qp));
}

uint32_t QpTable::alloc_qpn(CmdCtx &c) {
    if (ids_.count() >= (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_qp))) {
        c.fail(Status::NoRes, "all QPs are in use (DCTs and SQs count)");
        return 0;
    }
    auto qpn = ids_.alloc();
    if (!qpn) {
        c.fail(Status::NoRes, "no QP number left");
        return 0;
    }
    return *qpn;
}

void QpTable::release(Qp &qp) {
    rc_reset(qp);
    if (qp.flush_timer) {
        dev_.cancel_timer(qp.flush_timer);
        qp.flush_timer = 0;
    }
    if (Cq *cq = qp.no_sq ? nullptr : dev_.cqs.find(qp.cqn_snd); cq && cq->refs) {
        --cq->refs;
    }
    if (Cq *cq = qp.rq_type != kRqZero && qp.cqn_rcv ? dev_.cqs.find(qp.cqn_rcv) : nullptr; cq && cq->refs) {
        --cq->refs;
    }
    if (Srq *s = qp.rq_type == kRqSrq && qp.st != kQpXrc ? dev_.srqs.find(qp.srqn) : nullptr; s && s->refs) {
        --s->refs;
    }
    for (const auto &g : qp.mcgs) {
        auto it = mcgs_.find(g);
        if (it != mcgs_.end()) {
            it->second.erase(qp.qpn);
            if (it->second.empty()) {
                mcgs_.erase(it);
            }
        }
    }
}

Qp *QpTable::find_qp_for(CmdCtx &c, uint32_t qpn) {
    Qp *qp = find_qp(qpn);
    if (!qp) {
        c.fail(Status::BadRes, "QP 0x{:x} does not exist", qpn);
    } else if (!c.may_touch(qp->uid, "QP", qpn)) {
        qp = nullptr;
    }
    return qp;
}

void QpTable::cmd_destroy_qp(CmdCtx &c) {
    const uint32_t qpn = static_cast<uint32_t>(c.get(ifc::destroy_qp_in::qpn));
    Qp *qp = find_qp_for(c, qpn);
    if (!qp) {
        return;
    }
    HCA_TRACE(dev_, obj_destroy_qp, .qpn = qpn, .type = qp_type_name(qp->st), .state = qp_state_name(qp->state),
              .sent = qp->sent, .received = qp->received, .dropped = qp->dropped);
    release(*qp);
    qps_.erase(qpn);
    ids_.release(qpn);
}

void QpTable::cmd_query_qp(CmdCtx &c) {
    const uint32_t qpn = static_cast<uint32_t>(c.get(ifc::query_qp_in::qpn));
    Qp *qp = find_qp_for(c, qpn);
    if (!qp) {
        return;
    }
    const ifc::Block ctx = ifc::query_qp_out::qpc;
    auto s = [&](ifc::Field fld, uint64_t v) { c.set(ifc::in(ctx, fld), v); };
    s(qpc::state, static_cast<uint8_t>(qp->state));
    s(qpc::st, qp->st);
    s(qpc::pm_state, qp->pm_state);
    s(qpc::pd, qp->pd);
    s(qpc::mtu, qp->mtu);
    s(qpc::log_msg_max, qp->log_msg_max);
    s(qpc::log_rq_size, qp->log_rq_size);
    s(qpc::log_rq_stride, __builtin_ctz(qp->rq_stride) - 4);
    s(qpc::no_sq, qp->no_sq);
    s(qpc::ulp_stateless_offload_mode, qp->offload_mode);
    s(qpc::log_sq_size, qp->log_sq_size);
    s(qpc::rlky, qp->rlky);
    s(qpc::uar_page, qp->uar);
    s(qpc::user_index, qp->user_index);
    s(qpc::log_page_size, qp->log_page_size);
    s(qpc::remote_qpn, qp->remote_qpn);
    s(qpc::retry_count, qp->retry_count);
    s(qpc::rnr_retry, qp->rnr_retry);
    s(qpc::next_send_psn, qp->next_send_psn);
    s(qpc::cqn_snd, qp->cqn_snd);
    s(qpc::log_rra_max, qp->log_rra_max);
    s(qpc::log_sra_max, qp->log_sra_max);
    s(qpc::atomic_mode, qp->atomic_mode);
    s(qpc::rre, qp->rre);
    s(qpc::rwe, qp->rwe);
    s(qpc::rae, qp->rae);
    s(qpc::page_offset, qp->page_offset);
    s(qpc::min_rnr_nak, qp->min_rnr_nak);
    s(qpc::next_rcv_psn, qp->connected() && qp->receives() ? qp->rc.epsn : qp->next_rcv_psn);
    s(qpc::xrcd, qp->xrcd);
    s(qpc::cqn_rcv, qp->cqn_rcv);
    s(qpc::dbr_addr, qp->dbr);
    s(qpc::q_key, qp->qkey);
    s(qpc::rq_type, qp->rq_type);
    s(qpc::srqn_rmpn_xrqn, qp->srqn);
    s(qpc::hw_sq_wqebb_counter, qp->sq_ci);
    s(qpc::hw_rq_counter, qp->rq_ci);
    s(qpc::counter_set_id, qp->counter_set);
    const ifc::Block pri = ifc::in(ctx, qpc::primary_address_path);
    auto p = [&](ifc::Field fld, uint64_t v) { c.set(ifc::in(pri, fld), v); };
    p(ifc::ads::pkey_index, qp->path.pkey_index);
    p(ifc::ads::grh, qp->path.grh);
    p(ifc::ads::mlid, qp->path.mlid);
    p(ifc::ads::rlid, qp->path.rlid);
    p(ifc::ads::ack_timeout, qp->path.ack_timeout);
    p(ifc::ads::src_addr_index, qp->path.src_addr_index);
    p(ifc::ads::stat_rate, qp->path.stat_rate);
    p(ifc::ads::hop_limit, qp->path.hop_limit);
    p(ifc::ads::tclass, qp->path.tclass);
    p(ifc::ads::flow_label, qp->path.flow_label);
    p(ifc::ads::sl, qp->path.sl);
    p(ifc::ads::vhca_port_num, qp->path.port);
    auto rgid = c.out_block(ifc::in(pri, ifc::ads::rgid_rip));
    if (rgid.size() >= 16) {
        std::memcpy(rgid.data(), qp->path.rgid.data(), 16);
    }
}

// --- error state --------------------------------------------------------

void QpTable::to_error(Qp &qp, const char *why) {
    const QpState old = qp.state;
    qp.state = QpState::Err;
    if (old != QpState::Err) {
        HCA_TRACE(dev_, qp_error, .qpn = qp.qpn, .type = qp_type_name(qp.st), .from = qp_state_name(old),
                  .to = qp_state_name(QpState::Err), .reason = why);
    }
    if (qp.st == kQpDcContext) {
        // A responder error ends the connection, not the DCT: the context
        // takes nothing more until its initiator connects again.
        dev_.odp.forget(qp);
        return;
    }
    dev_.odp.forget(qp);  // a resume for its faults finds nothing waiting
    flush_sq(qp);
    flush_rq(qp);
    if (qp.rq_type == kRqSrq) {
        // IBA 11.6.3: the QP's last WQE from the SRQ has been consumed.
        dev_.eqs.post_event(kEventSrqLastWqe, 0, EqeData::qp(qp.qpn));
    }
    qp.flush_poll_ns = kFlushPollMinNs;
    arm_flush_timer(qp);
}

void QpTable::to_sq_error(Qp &qp, const char *why) {
    if (qp.state == QpState::Err) {
        return;
    }
    const QpState old = qp.state;
    qp.state = QpState::Sqer;
    HCA_TRACE(dev_, qp_error, .qpn = qp.qpn, .type = qp_type_name(qp.st), .from = qp_state_name(old),
              .to = qp_state_name(QpState::Sqer), .reason = why);
    dev_.odp.forget_requester(qp);
    flush_sq(qp);
}

void QpTable::sigerr_drain_done(Qp &qp) {
    if (!qp.sigerr_draining || qp.state != QpState::Rts || (qp.connected() && !qp.rc.pending.empty())) {
        return;
    }
    qp.sigerr_draining = false;
    qp.state = QpState::Sqd;
    HCA_TRACE(dev_, qp_error, .qpn = qp.qpn, .type = qp_type_name(qp.st), .from = qp_state_name(QpState::Rts),
              .to = qp_state_name(QpState::Sqd), .reason = "send queue drained after a signature error");
    dev_.eqs.post_event(kEventSqDrained, 0, EqeData::qp(qp.qpn));
}

void QpTable::arm_flush_timer(Qp &qp) {
    // There is no RQ doorbell: receive WQEs posted while in error are
    // noticed by polling the doorbell record (ib_drain_rq(), IPoIB stop).
    // Drivers post them right after the move to ERR, so the poll starts
    // at 2 ms and backs off to 64 ms while nothing is posted: a QP left
    // in error does not cost a timer every 2 ms.
    if (qp.rq_type != kRqRegular || qp.flush_timer) {
        return;
    }
    const uint32_t qpn = qp.qpn;
    qp.flush_timer = dev_.add_timer(std::max(qp.flush_poll_ns, kFlushPollMinNs), [this, qpn] {
        Qp *q = find(qpn);
        if (!q) {
            return;
        }
        q->flush_timer = 0;
        if (q->state == QpState::Err) {
            const uint16_t flushed = q->rq_flushed;
            flush_rq(*q);
            q->flush_poll_ns = q->rq_flushed != flushed ? kFlushPollMinNs
                                                        : std::min(q->flush_poll_ns * 2, kFlushPollMaxNs);
            arm_flush_timer(*q);
        }
    });
}

void QpTable::rc_reset(Qp &qp) {
    req_.reset(qp);  // its timers
    qp.rc = RcState{};
    qp.dc.connected = false;  // a DCI starts unconnected
    dev_.odp.forget(qp);
}

void QpTable::flush_sq(Qp &qp) {
    if (qp.state != QpState::Err && qp.state != QpState::Sqer) {
        return;
    }
    req_.flush(qp);  // started but unfinished WQEs first, in order
    if (qp.no_sq) {
        return;
    }
    uint8_t db[4];
    if (!dev_.dma_read(qp.dbr + 4, db, 4)) {
        return;
    }
    const uint16_t pi = static_cast<uint16_t>(load_be32(db));
    uint32_t guard = qp.sq_wqebbs();
    while (qp.sq_ci != pi && guard--) {
        const uint64_t addr = qp.buf.addr(qp.sq_offset + uint64_t{qp.sq_ci & (qp.sq_wqebbs() - 1)} * kWqeBb);
        CtrlSeg ctrl{};
        dev_.dma_read(addr, &ctrl, sizeof(ctrl));
        const uint32_t ds = ctrl.qpn_ds.get() & 0x3f;
        const uint16_t index = qp.sq_ci;
        req_err_cqe(dev_, qp, index, static_cast<uint8_t>(ctrl.opmod_idx_opcode.get()), kSyndWrFlush);
        qp.sq_ci = static_cast<uint16_t>(qp.sq_ci + std::max<uint32_t>(1, (ds * 16 + kWqeBb - 1) / kWqeBb));
    }
    qp.bf_wqes.clear();
}

void QpTable::flush_rq(Qp &qp) {
    if (qp.rq_type != kRqRegular || qp.state != QpState::Err) {
        return;
    }
    uint8_t db[4];
    if (!dev_.dma_read(qp.dbr, db, 4)) {
        return;
    }
    const uint16_t pi = static_cast<uint16_t>(load_be32(db));
    uint32_t guard = qp.rq_wqes();
    while (qp.rq_ci != pi && guard--) {
        ErrCqe e{};
        e.syndrome = kSyndWrFlush;
        e.vendor_err_synd = cqe_vendor_syndrome(kSyndWrFlush, false);
        e.s_wqe_opcode_qpn.set(qp.qpn);
        e.wqe_counter.set(qp.rq_ci);
        e.op_own = kCqeRespErr << 4;
        HCA_TRACE(dev_, cqe_cqe, .cqn = qp.cqn_rcv, .qpn = qp.qpn, .kind = "RESP_ERR", .wqe_counter = qp.rq_ci,
                  .syndrome = TraceNamed{cqe_syndrome_name(kSyndWrFlush), kSyndWrFlush}, .vendor = e.vendor_err_synd);
        dev_.cqs.post(qp.cqn_rcv, reinterpret_cast<Cqe64 &>(e), true);
        dev_.qcounters.add(qp.counter_set, QCounter::RespCqeFlushError);
        ++qp.rq_ci;
        ++qp.rq_flushed;
    }
}

// --- multicast --------------------------------------------------------------

void QpTable::cmd_attach_mcg(CmdCtx &c) {
    const uint32_t qpn = static_cast<uint32_t>(c.get(ifc::attach_to_mcg_in::qpn));
    Qp *qp = find_qp_for(c, qpn);
    if (!qp) {
        return;
    }
    if (qp->st != kQpUd) {
        c.fail(Status::BadParam, "only UD QPs join multicast groups (QP 0x{:x} is {})", qpn, qp_type_name(qp->st));
        return;
    }
    iba::Gid g{};
    std::memcpy(g.data(), c.in_block(ifc::attach_to_mcg_in::multicast_gid).data(), 16);
    if (g[0] != 0xff) {
        c.fail(Status::BadParam, "{} is not a multicast GID", iba::gid_str(g));
        return;
    }
    auto it = mcgs_.find(g);
    if (it == mcgs_.end() && mcgs_.size() >= (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_mcg))) {
        c.fail(Status::NoRes, "all multicast groups are in use");
        return;
    }
    if (it != mcgs_.end() && !it->second.count(qpn) &&
        it->second.size() >= dev_.fw.caps().gen(ifc::cmd_hca_cap::max_qp_mcg)) {
        c.fail(Status::NoRes, "group {} has max_qp_mcg QPs", iba::gid_str(g));
        return;
    }
    mcgs_[g].insert(qpn);
    qp->mcgs.insert(g);
    HCA_TRACE(dev_, obj_attach_mcg, .qpn = qpn, .mgid = g, .members = mcgs_[g].size());
}

void QpTable::cmd_detach_mcg(CmdCtx &c) {
    const uint32_t qpn = static_cast<uint32_t>(c.get(ifc::detach_from_mcg_in::qpn));
    Qp *qp = find_qp_for(c, qpn);
    iba::Gid g{};
    std::memcpy(g.data(), c.in_block(ifc::detach_from_mcg_in::multicast_gid).data(), 16);
    if (!qp) {
        return;
    }
    auto it = mcgs_.find(g);
    if (it == mcgs_.end() || !it->second.erase(qpn)) {
        c.fail(Status::BadParam, "QP 0x{:x} is not attached to {}", qpn, iba::gid_str(g));
        return;
    }
    if (it->second.empty()) {
        mcgs_.erase(it);
    }
    qp->mcgs.erase(g);
    HCA_TRACE(dev_, obj_detach_mcg, .qpn = qpn, .mgid = g);
}

std::string QpTable::info() const {
    std::string s = fmt::format("QPs: {}\n", qps_.size());
    for (const auto &[qpn, qp] : qps_) {
        // Producer counters as the driver last wrote them in the doorbell record.
        DbRecord db{};
        const bool dbr = dev_.dma_read(qp.dbr, &db, sizeof(db));
        const uint16_t rq_pi = static_cast<uint16_t>(db.rcv.get());
        const uint16_t sq_pi = static_cast<uint16_t>(db.snd.get());
        fmt::format_to(std::back_inserter(s),
                       "  qpn=0x{:x}{} {} {} pd={} cqn=0x{:x}/0x{:x} sq={} pi=0x{:x} ci=0x{:x} (posted {}) rq={} "
                       "pi=0x{:x} ci=0x{:x} srqn=0x{:x} sq_psn=0x{:x} rq_psn=0x{:x} qkey=0x{:x} sent={} received={} "
                       "dropped={}",
                       qpn, qp.special() ? fmt::format(" (QP{})", qp.ib_qpn()) : "", qp_type_name(qp.st),
                       qp_state_name(qp.state), qp.pd, qp.cqn_snd, qp.cqn_rcv, qp.sq_wqebbs(), dbr ? sq_pi : 0,
                       qp.sq_ci, dbr ? static_cast<uint16_t>(sq_pi - qp.sq_ci) : 0, qp.rq_wqes(), dbr ? rq_pi : 0,
                       qp.rq_ci, qp.srqn, qp.next_send_psn, qp.next_rcv_psn, qp.qkey, qp.sent, qp.received,
                       qp.dropped);
        if (qp.connected()) {
            fmt::format_to(std::back_inserter(s),
                           " remote_qpn=0x{:x} dlid={} unacked_psn=0x{:x} expected_psn=0x{:x} outstanding_wqes={} "
                           "retransmits={} requester={} responder={}",
                           qp.remote_qpn, qp.path.rlid, qp.rc.una, qp.rc.epsn, qp.rc.pending.size(), qp.rc.retransmits,
                           req_state_name(qp.rc.req), resp_state_name(qp.rc.resp));
        }
        s += '\n';
    }
    for (const auto &[g, members] : mcgs_) {
        fmt::format_to(std::back_inserter(s), "  mcg {} qps={}\n", iba::gid_str(g), members.size());
    }
    return s;
}

}  // namespace hca
