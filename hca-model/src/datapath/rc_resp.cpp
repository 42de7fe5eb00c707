// Connected transports, responder side: PSN checking with duplicate and
// out-of-sequence handling, SEND into receive WQEs (RQ, SRQ, XRC SRQ),
// RDMA WRITE, RDMA READ responses, atomics with replay, ACK/NAK/RNR NAK
// generation and responder CQEs (IBA 9.7.5.1, 9.7.5.2).
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "datapath/common.h"
#include "datapath/rc_resp.h"
#include "datapath/sig_xfer.h"

#include "datapath/tm.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

namespace {

// The transport of the requests a QP takes (a DCI takes none: no opcode's
// transport bits are 0xff).
uint8_t transport_of(uint8_t st) {
    return st == kQpUc          ? iba::kUc
           : st == kQpXrc       ? iba::kXrc
           : st == kQpDcContext ? iba::kDc
           : st == kQpDci       ? 0xff
                                : iba::kRc;
}
// The transport of its responses (a DCT answers in RC packets).
uint8_t response_transport(uint8_t st) {
    return st == kQpXrc ? iba::kXrc : iba::kRc;
}

bool is_send(uint8_t op) {
    return op <= iba::kSendOnlyImm || op == iba::kSendLastInv || op == iba::kSendOnlyInv;
}
bool is_write(uint8_t op) { return op >= iba::kWriteFirst && op <= iba::kWriteOnlyImm; }
bool is_first(uint8_t op) {
    return op == iba::kSendFirst || op == iba::kSendOnly || op == iba::kSendOnlyImm || op == iba::kSendOnlyInv ||
           op == iba::kWriteFirst || op == iba::kWriteOnly || op == iba::kWriteOnlyImm;
}
bool is_last(uint8_t op) {
    return op == iba::kSendLast || op == iba::kSendLastImm || op == iba::kSendOnly || op == iba::kSendOnlyImm ||
           op == iba::kSendLastInv || op == iba::kSendOnlyInv || op == iba::kWriteLast || op == iba::kWriteLastImm ||
           op == iba::kWriteOnly || op == iba::kWriteOnlyImm;
}

// IBA 9.6 (header validation): a connected QP accepts requests only from
// the port its address path (primary or alternate) names: the SLID, and
// with a GRH on both sides, the SGID; others are silently dropped.
bool path_matches(const AddressPath &p, const iba::PacketView &v) {
    return v.slid() == p.rlid && (!p.grh || !v.grh || v.grh->sgid == p.rgid);
}

bool from_remote(Device &dev, Qp &qp, const Packet &pkt, const iba::PacketView &v) {
    if (path_matches(qp.path, v) || (qp.alt_path.rlid && path_matches(qp.alt_path, v))) {
        return true;
    }
    ++qp.dropped;
    HCA_TRACE(dev, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .slid = v.slid(), .rlid = qp.path.rlid,
              .sgid = trace_opt(v.grh ? &v.grh->sgid : nullptr), .rgid = trace_opt(qp.path.grh, qp.path.rgid),
              .reason = "not from the QP's remote port");
    return false;
}

void record_read(RcState &rc, uint32_t psn, uint32_t npkts) {
    rc.reads[rc.reads_total++ % RcState::kReadSlots] = {psn, npkts};
}

// The READ among the newest `window` ones whose response PSNs hold psn.
const RcState::ReadReq *find_read(const RcState &rc, unsigned window, uint32_t psn) {
    const uint32_t n = std::min<uint32_t>({window, RcState::kReadSlots, rc.reads_total});
    for (uint32_t i = 1; i <= n; ++i) {
        const RcState::ReadReq &r = rc.reads[(rc.reads_total - i) % RcState::kReadSlots];
        const int32_t d = psn_diff(psn, r.psn);
        if (d >= 0 && static_cast<uint32_t>(d) < r.npkts) {
            return &r;
        }
    }
    return nullptr;
}

// A response's AETH (IBA 9.3.5): the syndrome and the responder's MSN.
void add_aeth(iba::ExtHeaders &ext, const Qp &qp, uint8_t syndrome) {
    ext.add<iba::Aeth>().syndrome_msn.set(uint32_t{syndrome} << 24 | (qp.rc.msn & 0xffffff));
}

}  // namespace

void RcResponder::expect(Qp &qp, uint32_t psn) {
    qp.rc.epsn = psn;
}

// IBA 9.7.5.1.1: a responder may acknowledge several requests with one ACK
// (coalescing), as ConnectX does under load. An ACK for a request that
// asked for one waits until the device has taken in the batch of packets
// it arrived with; a newer one in the same batch replaces it. Anything
// else the responder of the QP sends (another ACK, a NAK, a read response,
// an atomic ACK) pays it first, so acknowledgements leave in PSN order.
void RcResponder::owe_ack(Qp &qp, uint32_t psn) {
    if (!qp.rc.ack_owed) {
        qp.rc.ack_owed = true;
        acks_owed_.push_back(qp.qpn);
    }
    qp.rc.ack_owed_psn = psn;
}

void RcResponder::pay_ack(Qp &qp) {
    if (qp.rc.ack_owed) {
        qp.rc.ack_owed = false;
        ack(qp, qp.rc.ack_owed_psn, kAethAck | kAckCreditInvalid);
    }
}

void RcResponder::pay_acks() {
    for (const uint32_t qpn : acks_owed_) {
        Qp *qp = qps_.find(qpn);
        if (!qp || !qp->rc.ack_owed) {
            continue;  // destroyed, reset, or paid meanwhile
        }
        if (qp->state == QpState::Rtr || qp->state == QpState::Rts || qp->state == QpState::Sqd ||
            qp->state == QpState::Sqer) {
            pay_ack(*qp);
        } else {
            qp->rc.ack_owed = false;  // moved to error: no more acknowledgements
        }
    }
    acks_owed_.clear();
}

void RcResponder::ack(Qp &qp, uint32_t psn, uint8_t syndrome) {
    pay_ack(qp);
    iba::ExtHeaders aeth;
    add_aeth(aeth, qp, syndrome);
    const uint8_t t = response_transport(qp.st);
    const uint8_t kind = syndrome & 0xe0;
    if (kind == kAethAck) {
        HCA_TRACE(dev_, pkt_ack_out, qp.qpn, psn, syndrome, qp.rc.msn);
    } else if (kind == kAethRnrNak) {
        HCA_TRACE(dev_, pkt_rnr_nak_out, qp.qpn, psn, syndrome, qp.rc.msn);
    } else {
        HCA_TRACE(dev_, pkt_nak_out, qp.qpn, psn, syndrome, qp.rc.msn);
    }
    rc_transmit(dev_, qp, t | iba::kAck, psn, false, false, aeth.bytes(), {}, qp.remote_qpn);
}

// Responder-side fatal error: NAK the requester, complete the receive WQE in
// error if one was in use, and move to the error state (IBA 9.9.3). An RC
// error that no receive completion reports (RDMA READ/WRITE, atomics) is an
// affiliated asynchronous error instead (IBA 11.6.3): Invalid Request or
// Local Access Violation Work Queue Error.
void RcResponder::fail(Qp &qp, uint32_t psn, uint8_t nak, uint8_t cqe_synd, const char *why) {
    if (qp.st != kQpUc) {
        ack(qp, psn, kAethNak | nak);
    }
    if (nak == kNakRemoteAccess || nak == kNakInvalidRequest) {
        dev_.qcounters.add(qp.counter_set, nak == kNakRemoteAccess ? QCounter::RespRemoteAccessErrors
                                                                   : QCounter::RespRemoteInvalidRequest);
    }
    const auto &r = qp.rc.recv;
    const bool completed = qp.rc.resp == RespState::InSend && cqe_synd;
    if (completed) {
        resp_err_cqe(dev_, qp, r.cqn, r.index, r.srq ? r.srqn : 0, cqe_synd, pkt_);
    }
    enter(qp, RespState::Idle, why);
    qps_.to_error(qp, why);
    // (A DC context's errors end its connection; the DCT has no such event.)
    if (!completed && qp.st != kQpUc && qp.st != kQpDcContext &&
        (nak == kNakRemoteAccess || nak == kNakInvalidRequest)) {
        dev_.eqs.post_event(nak == kNakRemoteAccess ? kEventWqAccessErr : kEventWqInvalReq, 0, EqeData::qp(qp.qpn));
    }
}

// Takes the receive WQE for a new SEND (or WRITE with immediate).
bool RcResponder::take_recv(Qp &qp, const iba::PacketView &v) {
    auto &r = qp.rc.recv;
    r = {};
    uint64_t addr;
    uint32_t stride;
    uint16_t index;
    Srq *srq = nullptr;
    if (qp.st == kQpXrc) {
        // XRC target: the packet names the XRC SRQ (IBA 9.2.2.1 XRCETH).
        const uint32_t srqn = v.xrceth ? v.xrceth->srqn.get() & 0xffffff : 0;
        srq = dev_.srqs.find(srqn);
        if (!srq || srq->kind != Srq::Kind::XrcSrq || srq->xrcd != qp.xrcd) {
            return false;
        }
        auto i = dev_.srqs.take(*srq);
        if (!i) {
            return false;
        }
        index = *i;
        addr = dev_.srqs.wqe_addr(*srq, index, sizeof(SrqNextSeg));
        stride = srq->stride - static_cast<uint32_t>(sizeof(SrqNextSeg));
    } else if (!qps_.receiver().next_recv_wqe(qp, addr, stride, index, srq)) {
        return false;
    }
    if (!qps_.receiver().read_recv_sges(addr, stride, r.sges)) {
        return false;
    }
    for (Sge &sge : r.sges) {
        sig_wire_sge(dev_, qp, sge);  // a bad one takes nothing: the message ends in a length error
    }
    r.index = index;
    r.srq = srq != nullptr;
    r.srqn = srq ? srq->srqn : 0;
    r.pd = srq ? srq->pd : qp.pd;
    r.cqn = srq && srq->kind == Srq::Kind::XrcSrq ? srq->cqn : qp.cqn_rcv;
    return true;
}

void RcResponder::recv_cqe(Qp &qp, const iba::PacketView &v, uint8_t opcode, uint32_t byte_cnt, uint32_t imm) {
    auto &r = qp.rc.recv;
    if (r.tm_app) {
        ++qp.received;
        qps_.tm().recv_cqe(qp, r.cqn, r.tm_app, r.tm_index, r.index, r.tmh, byte_cnt, &v, pkt_);
        return;
    }
    Cqe64 cqe{};
    cqe.slid.set(v.slid());
    // No GRH flag on a connected QP's receive: the GRH is not scattered
    // (IBV_WC_GRH is for UD); rdma-core's tag-matching tests check wc_flags.
    cqe.flags_rqpn.set(uint32_t{v.sl()} << 24 | (qp.remote_qpn & 0xffffff));
    cqe.srqn.set(r.srq ? r.srqn : 0);
    cqe.imm_inval_pkey.set(imm);
    cqe.byte_cnt.set(byte_cnt);
    cqe.sop_drop_qpn.set(qp.cqe_qpn());
    cqe.wqe_counter.set(r.index);
    cqe.op_own = static_cast<uint8_t>(opcode << 4 | (v.se() ? 2 : 0));
    ++qp.received;
    HCA_TRACE(dev_, cqe_cqe, .cqn = r.cqn, .qpn = qp.qpn,
              .kind = opcode == kCqeRespSend      ? "RESP_SEND"
                      : opcode == kCqeRespSendImm ? "RESP_SEND_IMM"
                      : opcode == kCqeRespWrImm   ? "RESP_WR_IMM"
                                                  : "RESP_SEND_INV",
              .wqe_counter = r.index, .byte_cnt = byte_cnt, .pkt = trace_opt(pkt_ != 0, pkt_));
    dev_.cqs.post(r.cqn, cqe, v.se());
}

const char *resp_state_name(RespState s) {
    switch (s) {
    case RespState::Idle: return "idle";
    case RespState::InSend: return "in SEND";
    case RespState::InWrite: return "in RDMA WRITE";
    }
    return "?";
}

// The one place the responder's message state changes. A message that ends
// early (why: an error, a UC gap or sequence error) is traced.
void RcResponder::enter(Qp &qp, RespState to, const char *why) {
    const RespState from = qp.rc.resp;
    qp.rc.resp = to;
    if (why && from != to) {
        HCA_TRACE(dev_, qp_responder, .qpn = qp.qpn, .from = resp_state_name(from), .to = resp_state_name(to),
                  .reason = why);
    }
}

// IBA 9.6: may this QP take the packet at all (state, transport, P_Key,
// source)? Others are dropped without an answer.
bool RcResponder::accepts(Qp &qp, const Packet &pkt, const iba::PacketView &v) {
    if (!qp.receives()) {
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .state = qp_state_name(qp.state),
                  .reason = "the QP does not take packets in this state");
        return false;
    }
    if ((v.opcode() & 0xe0) != transport_of(qp.st)) {
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .op = iba::opcode_name(v.opcode()),
                  .type = qp_type_name(qp.st), .reason = "an opcode of another transport");
        return false;
    }
    if (!dev_.port(qp.path.port).pkey_ok(v.pkey())) {
        ++dev_.port(qp.path.port).counters().pkey_violations;
        return false;
    }
    return from_remote(dev_, qp, pkt, v);
}

// IBA 9.7.5.1: is this the request the responder expects next? Duplicates
// are answered, a gap is NAKed once (RC) or aborts the message (UC).
bool RcResponder::check_psn(Qp &qp, const iba::PacketView &v) {
    const uint32_t psn = v.psn();
    const int32_t diff = psn_diff(psn, qp.rc.epsn);
    if (diff < 0) {
        if (qp.st != kQpUc) {
            dev_.qcounters.add(qp.counter_set, QCounter::DuplicateRequest);
            on_duplicate(qp, v);
        }
        return false;
    }
    if (diff > 0) {
        dev_.qcounters.add(qp.counter_set, QCounter::OutOfSequence);
        if (qp.st != kQpUc) {
            // IBA 9.7.5.1.3: out of sequence; one NAK until the gap is filled.
            if (!qp.rc.nak_sent) {
                qp.rc.nak_sent = true;
                ack(qp, qp.rc.epsn, kAethNak | kNakPsnSeq);
            }
            return false;
        }
        // UC: a lost packet aborts the message in progress.
        enter(qp, RespState::Idle, "UC: PSN gap, message dropped");
        if (!is_first(v.opcode() & 0x1f)) {
            return false;
        }
        qp.rc.epsn = psn;
    }
    qp.rc.nak_sent = false;
    return true;
}

// IBA 9.8.3: a middle or last packet needs a message in progress, a first
// one needs none.
bool RcResponder::check_seq(Qp &qp, const iba::PacketView &v) {
    const uint8_t op = v.opcode() & 0x1f;
    const RespState s = qp.rc.resp;
    if ((is_send(op) && !is_first(op) && s != RespState::InSend) ||
        (is_write(op) && !is_first(op) && s != RespState::InWrite) || (is_first(op) && s != RespState::Idle)) {
        if (qp.st == kQpUc) {
            enter(qp, RespState::Idle, "UC: opcode out of sequence, message dropped");
            return false;
        }
        fail(qp, v.psn(), kNakInvalidRequest, kSyndRemoteInvalReq, "opcode out of sequence");
        return false;
    }
    return true;
}

// No receive WQE for a message: RC answers RNR NAK and the requester
// retries (IBA 9.7.5.2.8); UC drops the message. The rest of the message
// already on its way is out of sequence now, and dropped without another
// NAK (one NAK until the requester sends the PSN again, as for a gap).
void RcResponder::rnr(Qp &qp, uint32_t psn) {
    dev_.qcounters.add(qp.counter_set, QCounter::OutOfBuffer);
    if (qp.st != kQpUc) {
        rnr_nak(qp, psn);
    }
}

void RcResponder::rnr_nak(Qp &qp, uint32_t psn) {
    ack(qp, psn, static_cast<uint8_t>(kAethRnrNak | (qp.min_rnr_nak & 0x1f)));
    qp.rc.nak_sent = true;
}

// Page faults (odp.h): the request waits for its pages behind an RNR NAK;
// the requester sends it again after its RNR timer (UC drops the message).
// False if no fault can be raised, or the driver failed the last one: the
// caller answers as for an access violation.
void RcResponder::fault_nak(Qp &qp, uint32_t psn) {
    if (qp.st != kQpUc) {
        rnr_nak(qp, psn);
    } else {
        enter(qp, RespState::Idle, "UC: page fault, message dropped");
    }
}

bool RcResponder::rdma_fault(Qp &qp, uint32_t psn, uint32_t rkey, uint64_t va, uint32_t len, size_t pkt_len) {
    if (!dev_.odp.rdma(qp, rkey, va, len, static_cast<uint16_t>(pkt_len))) {
        return false;
    }
    fault_nak(qp, psn);
    return true;
}

// The receive WQE of the SEND at hand needs a page. A first packet gives
// its WQE back: the SEND takes it again when it comes again.
bool RcResponder::recv_fault(Qp &qp, uint32_t psn, bool first, size_t pkt_len) {
    auto &r = qp.rc.recv;
    if (!dev_.odp.receive(qp, r.index, r.srq ? r.srqn : 0, static_cast<uint16_t>(pkt_len))) {
        return false;
    }
    if (first) {
        qps_.receiver().give_back(qp, r.index, r.srq ? dev_.srqs.find(r.srqn) : nullptr);
        enter(qp, RespState::Idle);
    }
    fault_nak(qp, psn);
    return true;
}

// A SEND packet: scattered into the receive WQE the first packet took; the
// last one completes it.
bool RcResponder::on_send(Qp &qp, const iba::PacketView &v) {
    const uint8_t op = v.opcode() & 0x1f;
    const uint32_t psn = v.psn();
    std::span<const uint8_t> data = v.payload;
    if (is_first(op)) {
        Srq *xrq = qps_.tm().xrq_of(qp);
        const TmStart st = xrq                ? qps_.tm().start_message(qp, qp.rc.recv, *xrq, v, is_last(op), pkt_)
                           : take_recv(qp, v) ? TmStart::Deliver
                                              : TmStart::NoBuffer;
        if (st == TmStart::NoBuffer) {
            rnr(qp, psn);
            return false;
        }
        if (st == TmStart::Failed) {
            return false;
        }
        if (st == TmStart::Done) {  // a rendezvous request the device took over
            qp.rc.msn = (qp.rc.msn + 1) & 0xffffff;
            ++qp.received;
            return true;
        }
        enter(qp, RespState::InSend);
        data = data.subspan(std::min<size_t>(data.size(), qp.rc.recv.skip));
    }
    auto &r = qp.rc.recv;
    uint64_t cap = 0;
    for (const Sge &s : r.sges) {
        cap += s.len;
    }
    if (r.offset + data.size() > cap) {
        dev_.guest_error("qpn=0x{:x} SEND of more than the {}-byte receive WQE 0x{:x}", qp.qpn, cap, r.index);
        fail(qp, psn, kNakInvalidRequest, kSyndLocalLength, "receive WQE too small");
        return false;
    }
    uint8_t synd = 0;
    if (!scatter(dev_, qp, r.pd, r.sges, r.offset, data, chunks_, synd, r.cqn)) {
        // (A tagged buffer is not given back: a page fault in it is an error.)
        if (synd == kSyndPageFault && !r.tm_app && recv_fault(qp, psn, is_first(op), v.payload.size())) {
            return false;
        }
        fail(qp, psn, kNakRemoteOp, fault_as_prot(synd), "receive scatter failed");
        return false;
    }
    r.offset += static_cast<uint32_t>(data.size());
    if (!is_last(op)) {
        return true;
    }
    uint8_t cqe_op = kCqeRespSend;
    uint32_t imm = 0;
    if (op == iba::kSendLastImm || op == iba::kSendOnlyImm) {
        cqe_op = kCqeRespSendImm;
        imm = v.imm->get();
    } else if (op == iba::kSendLastInv || op == iba::kSendOnlyInv) {
        cqe_op = kCqeRespSendInv;
        imm = v.imm->get();
        dev_.mkeys.invalidate(imm, r.pd, qp.qpn);
    }
    qp.rc.msn = (qp.rc.msn + 1) & 0xffffff;
    recv_cqe(qp, v, cqe_op, r.offset, imm);
    enter(qp, RespState::Idle);
    return true;
}

// An RDMA WRITE packet: the first one checks the whole RETH range against
// the rkey; every one lands at its offset; a last one with immediate takes
// a receive WQE and completes it.
bool RcResponder::on_write(Qp &qp, const iba::PacketView &v) {
    const uint8_t op = v.opcode() & 0x1f;
    const uint32_t psn = v.psn();
    const bool uc = qp.st == kQpUc;
    auto &w = qp.rc.write;
    if (is_first(op)) {
        w = {};
        w.va = v.reth->va.get();
        w.rkey = v.reth->rkey.get();
        w.len = v.reth->dma_len.get();
        w.pd = rdma_pd(qp, v);
        chunks_.clear();
        const XlatError e = qp.rwe ? dev_.mkeys.translate(w.rkey, w.pd, w.va, w.len, kAccRemoteWrite, chunks_, qp.qpn)
                                   : XlatError::Access;
        if (e == XlatError::PageFault && rdma_fault(qp, psn, w.rkey, w.va, w.len, v.payload.size())) {
            return false;
        }
        if (e != XlatError::None) {
            HCA_TRACE(dev_, mkey_fail, .qpn = qp.qpn, .rkey = w.rkey, .va = w.va, .len = w.len, .op = "write",
                      .reason = qp.rwe ? xlat_error_name(e) : "RDMA write not enabled on the QP");
            if (!uc) {
                fail(qp, psn, kNakRemoteAccess, 0, "RDMA write access violation");
            }
            return false;
        }
        enter(qp, RespState::InWrite);
    }
    if (w.offset + v.payload.size() > w.len) {
        if (!uc) {
            fail(qp, psn, kNakInvalidRequest, 0, "RDMA write longer than its RETH length");
        } else {
            enter(qp, RespState::Idle, "UC: RDMA write longer than its RETH length, message dropped");
        }
        return false;
    }
    chunks_.clear();
    // Checked whole on the first packet; a page may have gone since (an
    // on-demand paging invalidation).
    if (const XlatError e =
            dev_.mkeys.translate(w.rkey, w.pd, w.va + w.offset, v.payload.size(), kAccRemoteWrite, chunks_, qp.qpn);
        e != XlatError::None) {
        if (e == XlatError::PageFault &&
            rdma_fault(qp, psn, w.rkey, w.va + w.offset, w.len - w.offset, v.payload.size())) {
            return false;
        }
        HCA_TRACE(dev_, mkey_fail, .qpn = qp.qpn, .rkey = w.rkey, .va = w.va + w.offset, .len = v.payload.size(),
                  .op = "write", .reason = xlat_error_name(e));
        if (!uc) {
            fail(qp, psn, kNakRemoteAccess, 0, "RDMA write access violation");
        } else {
            enter(qp, RespState::Idle, "UC: RDMA write access violation, message dropped");
        }
        return false;
    }
    size_t pos = 0;
    for (const DmaChunk &c : chunks_) {
        dev_.mem_write(c.addr, v.payload.data() + pos, c.len);
        pos += c.len;
    }
    w.offset += static_cast<uint32_t>(v.payload.size());
    if (!is_last(op)) {
        return true;
    }
    if (op == iba::kWriteLastImm || op == iba::kWriteOnlyImm) {
        // The immediate consumes a receive WQE; without one the last
        // packet is refused and comes again.
        if (!take_recv(qp, v)) {
            if (uc) {
                enter(qp, RespState::Idle, "UC: no receive WQE for the immediate, message dropped");
            } else {
                w.offset -= static_cast<uint32_t>(v.payload.size());
            }
            rnr(qp, psn);
            return false;
        }
        qp.rc.msn = (qp.rc.msn + 1) & 0xffffff;
        recv_cqe(qp, v, kCqeRespWrImm, w.len, v.imm->get());
    } else {
        qp.rc.msn = (qp.rc.msn + 1) & 0xffffff;
    }
    enter(qp, RespState::Idle);
    return true;
}

// A new request (in sequence, not a duplicate) for the Q counters.
void RcResponder::count_request(Qp &qp, uint8_t op) {
    if (op == iba::kReadRequest) {
        dev_.qcounters.add(qp.counter_set, QCounter::RxReadRequests);
    } else if (op == iba::kCompareSwap || op == iba::kFetchAdd) {
        dev_.qcounters.add(qp.counter_set, QCounter::RxAtomicRequests);
    } else if (is_write(op) && is_first(op)) {
        dev_.qcounters.add(qp.counter_set, QCounter::RxWriteRequests);
    }
}

// The responder (IBA 9.7.5): checks, then the request's operation, then
// the expected PSN moves on and the requester gets its ACK if it asked.
void RcResponder::rx(Qp &qp, const Packet &pkt, const iba::PacketView &v) {
    const PacketScope scope(pkt_, pkt.id);
    if (!accepts(qp, pkt, v) || !check_psn(qp, v) || !check_seq(qp, v)) {
        return;
    }
    const uint8_t op = v.opcode() & 0x1f;
    const uint32_t psn = v.psn();
    count_request(qp, op);
    if (op == iba::kReadRequest) {
        on_read(qp, v, true);  // moves the expected PSN past the response
        return;
    }
    bool done = false;
    if (is_send(op)) {
        done = on_send(qp, v);
    } else if (is_write(op)) {
        done = on_write(qp, v);
    } else if (op == iba::kCompareSwap || op == iba::kFetchAdd) {
        done = on_atomic(qp, v);  // answers with its own ATOMIC ACK
        if (done) {
            qp.rc.epsn = (psn + 1) & 0xffffff;
        }
        return;
    } else {
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .op = iba::opcode_name(v.opcode()),
                  .reason = "not a request");
    }
    if (!done) {
        return;
    }
    qp.rc.epsn = (psn + 1) & 0xffffff;
    if (qp.st != kQpUc && v.ack_req()) {
        owe_ack(qp, psn);
    }
}

// IBA 9.7.5.1.1: a duplicate request. Re-acknowledge; replay reads (within
// the responder resources) and atomics.
void RcResponder::on_duplicate(Qp &qp, const iba::PacketView &v) {
    const uint8_t op = v.opcode() & 0x1f;
    const uint32_t psn = v.psn();
    HCA_TRACE(dev_, pkt_duplicate, .qpn = qp.qpn, .psn = psn, .expected = qp.rc.epsn,
              .op = iba::opcode_name(v.opcode()));
    if (op == iba::kReadRequest) {
        on_read(qp, v, false);
    } else if (op == iba::kCompareSwap || op == iba::kFetchAdd) {
        auto it = qp.rc.atomic_replay.find(psn);
        if (it != qp.rc.atomic_replay.end()) {
            pay_ack(qp);  // acknowledgements leave in PSN order
            atomic_ack(qp, psn, it->second);
        }
    } else if (v.ack_req()) {
        ack(qp, (qp.rc.epsn - 1) & 0xffffff, kAethAck | kAckCreditInvalid);
    }
}

// RDMA READ: validate, then answer with response packets carrying the data
// (fresh requests advance the expected PSN; duplicates are replayed).
bool RcResponder::on_read(Qp &qp, const iba::PacketView &v, bool fresh) {
    const uint32_t psn = v.psn();
    const uint64_t va = v.reth->va.get();
    const uint32_t rkey = v.reth->rkey.get();
    const uint32_t len = v.reth->dma_len.get();
    const uint32_t mtu = rc_mtu(dev_, qp);
    const uint32_t npkts = static_cast<uint32_t>(std::max<uint64_t>(1, (uint64_t{len} + mtu - 1) / mtu));
    if (!fresh) {
        // A duplicate is answered only within the responder resources, and
        // with no more packets than the original READ had left: an older
        // or larger one is dropped, as a responder without its state does.
        const RcState::ReadReq *r = find_read(qp.rc, 1u << qp.log_rra_max, psn);
        if (!r || npkts > r->npkts - static_cast<uint32_t>(psn_diff(psn, r->psn))) {
            ++qp.dropped;
            HCA_TRACE(dev_, pkt_drop, .qpn = qp.qpn, .op = "RDMA_READ_REQUEST", .psn = psn, .pkts = npkts,
                      .reason = r ? "a duplicate RDMA READ longer than the original"
                                  : "a duplicate RDMA READ outside the responder resources window");
            return false;
        }
    }
    if (len > (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_msg))) {
        fail(qp, psn, kNakInvalidRequest, 0, "RDMA read longer than the maximum message");
        return false;
    }
    std::vector<DmaChunk> &chunks = read_chunks_;
    chunks.clear();
    const XlatError e =
        qp.rre ? dev_.mkeys.translate(rkey, rdma_pd(qp, v), va, len, kAccRemoteRead, chunks, qp.qpn) : XlatError::Access;
    if (e == XlatError::PageFault && rdma_fault(qp, psn, rkey, va, len, 0)) {
        return false;
    }
    if (e != XlatError::None) {
        HCA_TRACE(dev_, mkey_fail, .qpn = qp.qpn, .rkey = rkey, .va = va, .len = len, .op = "read",
                  .reason = qp.rre ? xlat_error_name(e) : "RDMA read not enabled on the QP");
        fail(qp, psn, kNakRemoteAccess, 0, "RDMA read access violation");
        return false;
    }
    if (fresh) {
        qp.rc.msn = (qp.rc.msn + 1) & 0xffffff;
        qp.rc.epsn = (psn + npkts) & 0xffffff;
        record_read(qp.rc, psn, npkts);
    }
    const uint8_t t = response_transport(qp.st);
    pay_ack(qp);  // acknowledgements leave in PSN order
    size_t chunk = 0;
    uint32_t chunk_off = 0;
    for (uint32_t k = 0; k < npkts; ++k) {
        const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(mtu, len - uint64_t{k} * mtu));
        const bool first = k == 0;
        const bool last = k + 1 == npkts;
        const uint8_t op = first && last ? iba::kReadRespOnly
                           : first       ? iba::kReadRespFirst
                           : last        ? iba::kReadRespLast
                                         : iba::kReadRespMiddle;
        iba::ExtHeaders aeth;
        if (op != iba::kReadRespMiddle) {
            add_aeth(aeth, qp, kAethAck | kAckCreditInvalid);
        }
        // The n bytes of this response, read from the translated chunks
        // straight into the packet.
        Packet pkt = dev_.new_packet();
        uint8_t *data = rc_headers(dev_, qp, pkt, t | op, psn + k, false, false, aeth.bytes(), n, qp.remote_qpn);
        uint32_t got = 0;
        while (got < n && chunk < chunks.size()) {
            const uint32_t m = std::min(n - got, chunks[chunk].len - chunk_off);
            if (!dev_.mem_read(chunks[chunk].addr + chunk_off, data + got, m)) {
                dev_.recycle(std::move(pkt));
                fail(qp, psn, kNakRemoteOp, 0, "read source not guest memory");
                return false;
            }
            got += m;
            chunk_off += m;
            if (chunk_off == chunks[chunk].len) {
                ++chunk;
                chunk_off = 0;
            }
        }
        dev_.transmit(std::move(pkt), qp.qpn, -1);
    }
    return true;
}

// The protection domain RDMA and atomic requests are checked against: the
// QP's, or for an XRC target QP (which has none of its own) the PD of the
// XRC SRQ the request names.
uint32_t RcResponder::rdma_pd(const Qp &qp, const iba::PacketView &v) {
    if (qp.st != kQpXrc) {
        return qp.pd;
    }
    const Srq *srq = v.xrceth ? dev_.srqs.find(v.xrceth->srqn.get() & 0xffffff) : nullptr;
    if (!srq || srq->kind != Srq::Kind::XrcSrq || srq->xrcd != qp.xrcd) {
        return kNoPd;
    }
    return srq->pd;
}

// Atomics on 8 naturally aligned bytes, in the responder's (host) byte
// order (atomic_req_8B_endianness_mode = host), with the result kept for
// duplicate requests.
bool RcResponder::on_atomic(Qp &qp, const iba::PacketView &v) {
    const uint32_t psn = v.psn();
    const uint64_t va = v.atomic->va.get();
    const uint32_t rkey = v.atomic->rkey.get();
    std::vector<DmaChunk> chunks;
    XlatError e = XlatError::Access;
    if (qp.rae && (va & 7) == 0) {
        e = dev_.mkeys.translate(rkey, rdma_pd(qp, v), va, 8, kAccRemoteAtomic, chunks, qp.qpn);
    }
    if (e == XlatError::PageFault && rdma_fault(qp, psn, rkey, va, 8, 0)) {
        return false;
    }
    if (e != XlatError::None || chunks.size() != 1) {
        HCA_TRACE(dev_, mkey_fail, .qpn = qp.qpn, .rkey = rkey, .va = va, .op = "atomic",
                  .reason = !qp.rae    ? "atomics not enabled on the QP"
                            : (va & 7) ? "not 8-byte aligned"
                                       : xlat_error_name(e));
        fail(qp, psn, (va & 7) && qp.rae ? kNakInvalidRequest : kNakRemoteAccess, 0, "atomic access violation");
        return false;
    }
    uint64_t orig = 0;
    if (!dev_.mem_read(chunks[0].addr, &orig, 8)) {
        fail(qp, psn, kNakRemoteOp, 0, "atomic target not guest memory");
        return false;
    }
    uint64_t value = orig;
    if ((v.opcode() & 0x1f) == iba::kCompareSwap) {
        if (orig == v.atomic->compare.get()) {
            value = v.atomic->swap_add.get();
        }
    } else {
        value = orig + v.atomic->swap_add.get();
    }
    dev_.mem_write(chunks[0].addr, &value, 8);
    qp.rc.atomic_replay[psn] = orig;
    while (qp.rc.atomic_replay.size() > 16) {
        qp.rc.atomic_replay.erase(qp.rc.atomic_replay.begin());
    }
    qp.rc.msn = (qp.rc.msn + 1) & 0xffffff;
    pay_ack(qp);  // acknowledgements leave in PSN order
    atomic_ack(qp, psn, orig);
    return true;
}

// The answer to an atomic request: the AETH and the value the target held.
void RcResponder::atomic_ack(Qp &qp, uint32_t psn, uint64_t orig) {
    iba::ExtHeaders ext;
    add_aeth(ext, qp, kAethAck | kAckCreditInvalid);
    ext.add<iba::AtomicAckEth>().orig.set(orig);
    rc_transmit(dev_, qp, response_transport(qp.st) | iba::kAtomicAck, psn, false, false, ext.bytes(), {},
                qp.remote_qpn);
}

}  // namespace hca
