// Connected transports, completer side: ACKs, NAKs, RNR NAKs, read
// responses and atomic acknowledgements for the requester's outstanding
// WQEs; go-back-N retransmission on sequence NAKs and local ACK timeouts;
// RNR back-off; requester CQEs in WQE order (IBA 9.7.5, 9.9.2).
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "datapath/common.h"
#include "datapath/rc_req.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

// The local ACK timer restarts on every sign of progress, which on a busy
// QP is every ACK. Restarting only moves the deadline: the timer already
// armed stays (no allocation, no host timer change) and, if it fires
// before the deadline, arms itself again for the rest. With nothing to
// wait for the deadline is cleared (disarmed); a host timer still armed
// then ends when it fires.
void RcRequester::arm_ack_timer(Qp &qp) {
    const int64_t t = ack_timeout_ns(qp.path.ack_timeout);
    if (qp.rc.pending.empty() || t < 0 || !req_waits(qp.rc.req) || qp.st == kQpUc) {
        qp.rc.ack_deadline = 0;
        return;
    }
    qp.rc.ack_deadline = dev_.now() + t;
    if (qp.rc.ack_timer && qp.rc.ack_timer_at <= qp.rc.ack_deadline) {
        return;
    }
    if (qp.rc.ack_timer) {
        dev_.cancel_timer(qp.rc.ack_timer);  // a shorter timeout than the one armed (RTS2RTS)
    }
    add_ack_timer(qp, t);
}

void RcRequester::add_ack_timer(Qp &qp, int64_t delay) {
    const uint32_t qpn = qp.qpn;
    qp.rc.ack_timer_at = dev_.now() + delay;
    qp.rc.ack_timer = dev_.add_timer(delay, [this, qpn] {
        Qp *q = qps_.find(qpn);
        if (!q) {
            return;
        }
        q->rc.ack_timer = 0;
        if (q->rc.ack_deadline == 0 || q->state != QpState::Rts || q->rc.pending.empty() || !req_waits(q->rc.req)) {
            return;
        }
        if (const int64_t left = q->rc.ack_deadline - dev_.now(); left > 0) {
            add_ack_timer(*q, left);  // restarted since it was armed
            return;
        }
        // IBA 9.7.6.1.3: local ACK timeout.
        if (q->rc.retry_left == 0) {
            fail(*q, kSyndTransportRetryExc, "transport retry counter exceeded");
            return;
        }
        --q->rc.retry_left;
        dev_.qcounters.add(q->counter_set, QCounter::LocalAckTimeoutErr);
        HCA_TRACE(dev_, qp_ack_timeout, .qpn = q->qpn, .psn = q->rc.una, .retries_left = q->rc.retry_left);
        retransmit(*q, q->rc.una, "local ACK timeout");
    });
}

// A retransmission for a sequence error (NAK or implied NAK) counts against
// the retry counter like a local ACK timeout (IBA 9.7.5.2.2); forward
// progress resets it. Without this a peer that keeps answering the same
// way (a misconfigured or hostile one) would keep the QP retransmitting
// forever. False once the counter has run out: the QP has failed.
bool RcRequester::retry_budget(Qp &qp, const char *why) {
    if (qp.rc.retry_left == 0) {
        fail(qp, kSyndTransportRetryExc, "transport retry counter exceeded");
        return false;
    }
    --qp.rc.retry_left;
    HCA_TRACE(dev_, qp_seq_retry, .qpn = qp.qpn, .retries_left = qp.rc.retry_left, .reason = why);
    return true;
}

// Go-back-N: resend everything outstanding from psn on. The transmit
// cursor moves back and the packets go out from run(), within its budget
// (a timer or an incoming NAK never sends a whole window at once). While
// the requester waits out an RNR NAK only the cursor moves: the RNR
// timer sends.
void RcRequester::retransmit(Qp &qp, uint32_t psn, const char *why) {
    ++qp.rc.retransmits;
    HCA_TRACE(dev_, qp_retransmit, .qpn = qp.qpn, .from_psn = psn, .wqes = qp.rc.pending.size());
    if (psn_diff(psn, qp.rc.tx_psn) < 0) {
        qp.rc.tx_psn = psn;
    }
    if (qp.rc.req == ReqState::RnrWait || qp.rc.req == ReqState::PageFault) {
        return;
    }
    enter(qp, ReqState::Sending, why);
    qps_.sq().defer(qp);
    arm_ack_timer(qp);
}

// Completion error on the oldest outstanding WQE; the QP goes to error and
// flushes everything after it.
void RcRequester::fail(Qp &qp, uint8_t synd, const char *why) {
    enter(qp, ReqState::Error, why);
    if (!qp.rc.pending.empty()) {
        RcWqe w = std::move(qp.rc.pending.front());
        qp.rc.pending.pop_front();
        wqe_done(qp, w, synd);
    }
    qps_.to_error(qp, why);
}

// Writes the CQEs of completed WQEs at the head, in order, then lets the
// send queue continue if it waited for them.
void RcRequester::complete(Qp &qp) {
    bool progress = false;
    while (!qp.rc.pending.empty() && qp.rc.pending.front().acked) {
        RcWqe w = std::move(qp.rc.pending.front());
        qp.rc.pending.pop_front();
        wqe_done(qp, w, 0);
        progress = true;
    }
    if (qp.rc.pending.empty()) {
        qp.rc.una = qp.next_send_psn;
        qp.dc.connected = false;  // a DCI with nothing outstanding disconnects (dc_must_wait())
    } else if (psn_diff(qp.rc.pending.front().first_psn, qp.rc.una) > 0) {
        qp.rc.una = qp.rc.pending.front().first_psn;
    }
    if (qp.rc.pending.empty() && qp.rc.req == ReqState::WaitAck) {
        enter(qp, ReqState::Idle);
    }
    qps_.sigerr_drain_done(qp);
    if (progress) {
        qp.rc.rnr_left = qp.rnr_retry;
        arm_ack_timer(qp);
        if (qp.rc.req == ReqState::Blocked) {
            qps_.sq().process(qp);
        }
    }
}

// Everything up to and including psn is acknowledged.  Forward progress
// resets the retry counter (IBA 9.7.6.1.3).
void RcRequester::ack_upto(Qp &qp, uint32_t psn) {
    if (psn_diff(psn, qp.rc.una) >= 0 && psn_diff(psn, qp.next_send_psn) < 0) {
        qp.rc.una = (psn + 1) & 0xffffff;
        qp.rc.retry_left = qp.retry_count;
        arm_ack_timer(qp);  // progress restarts the local ACK timer (long messages)
    }
    for (RcWqe &w : qp.rc.pending) {
        if (w.npkts == 0) {
            continue;
        }
        if (psn_diff(w.last_psn(), psn) > 0) {
            break;
        }
        if (!w.is_read() && !w.is_atomic()) {
            w.acked = true;
        }
    }
}

// An ACK: everything up to its PSN is done, but an ACK beyond a read or
// atomic still unanswered means that response was lost (implied NAK,
// IBA 9.7.5.1.1).
void RcRequester::got_ack(Qp &qp, uint32_t psn) {
    ack_upto(qp, psn);
    for (RcWqe &w : qp.rc.pending) {
        if (psn_diff(w.first_psn, psn) > 0) {
            break;
        }
        if ((w.is_read() || w.is_atomic()) && !w.acked && psn_diff(w.last_psn(), psn) < 0) {
            complete(qp);
            if (retry_budget(qp, "implied NAK")) {
                dev_.qcounters.add(qp.counter_set, QCounter::ImpliedNakSeqErr);
                retransmit(qp, w.next_resp_psn ? w.next_resp_psn : w.first_psn, "implied NAK");
            }
            return;
        }
    }
    complete(qp);
}

// IBA 9.7.5.2.8: the responder had no receive WQE; send again from psn
// after the RNR timer, while the RNR retry count lasts.
// Nothing goes out meanwhile, new WQEs included: the requester stands
// still until the timer (the WQEs completed before psn get their CQEs now).
void RcRequester::got_rnr_nak(Qp &qp, uint32_t psn, uint8_t timer) {
    ack_upto(qp, (psn - 1) & 0xffffff);
    if (qp.rc.rnr_left == 0) {
        complete(qp);
        fail(qp, kSyndRnrRetryExc, "RNR retry counter exceeded");
        return;
    }
    if (qp.rnr_retry != 7) {  // 7: retry forever
        --qp.rc.rnr_left;
    }
    dev_.qcounters.add(qp.counter_set, QCounter::RnrNakRetryErr);
    if (qp.rc.req == ReqState::PageFault) {
        retransmit(qp, psn, nullptr);  // from psn once the fault is resolved
        complete(qp);
        return;
    }
    const int64_t wait = rnr_timer_ns(timer);
    HCA_TRACE(dev_, qp_rnr_nak, .qpn = qp.qpn, .psn = psn, .wait_us = wait / 1000, .retries_left = qp.rc.rnr_left);
    if (qp.rc.req != ReqState::RnrWait) {
        enter(qp, ReqState::RnrWait, "RNR NAK");
        const uint32_t qpn = qp.qpn;
        qp.rc.rnr_timer = dev_.add_timer(wait, [this, qpn, psn] {
            if (Qp *q = qps_.find(qpn)) {
                q->rc.rnr_timer = 0;
                enter(*q, ReqState::Sending, "RNR timer expired");
                retransmit(*q, psn, nullptr);
            }
        });
    }
    complete(qp);
}

// A NAK: a PSN sequence error is retried from psn (go-back-N); the others
// end the QP with the matching error completion (IBA 9.7.5.2.4).
void RcRequester::got_nak(Qp &qp, uint32_t psn, uint8_t code) {
    ack_upto(qp, (psn - 1) & 0xffffff);
    complete(qp);
    HCA_TRACE(dev_, qp_nak, .qpn = qp.qpn, .psn = psn, .code = code);
    if (code == kNakPsnSeq) {
        if (retry_budget(qp, "PSN sequence NAK")) {
            dev_.qcounters.add(qp.counter_set, QCounter::PacketSeqErr);
            retransmit(qp, psn, "PSN sequence NAK");
        }
        return;
    }
    const uint8_t synd = code == kNakInvalidRequest ? kSyndRemoteInvalReq
                         : code == kNakRemoteAccess ? kSyndRemoteAccess
                                                    : kSyndRemoteOp;
    fail(qp, synd, code == kNakRemoteAccess ? "remote access error" : "remote error");
}

// An ATOMIC ACKNOWLEDGE: the original value goes to the WQE's result buffer.
void RcRequester::got_atomic_ack(Qp &qp, RcWqe &w, const iba::PacketView &v) {
    if (!w.is_atomic() || !v.atomic_ack) {
        return;
    }
    ack_upto(qp, (v.psn() - 1) & 0xffffff);
    // Host endianness (atomic_req_8B_endianness_mode): the original value
    // lands in the local buffer in the guest's byte order.
    uint8_t orig[8];
    const uint64_t value = v.atomic_ack->orig.get();
    std::memcpy(orig, &value, 8);
    uint8_t synd = 0;
    if (!scatter(dev_, qp, qp.pd, w.data.sges, 0, orig, chunks_, synd, qp.cqn_snd)) {
        if (synd == kSyndPageFault && page_fault(qp, w, w.first_psn, 0)) {
            return;  // the request goes again; the responder replays its result
        }
        fail(qp, fault_as_prot(synd), "atomic result scatter failed");
        return;
    }
    w.acked = true;
    complete(qp);
}

// An RDMA READ response packet: in order, of the right length, scattered
// at its offset; the last one completes the WQE.
void RcRequester::got_read_response(Qp &qp, RcWqe &w, const Packet &pkt, const iba::PacketView &v) {
    const uint32_t psn = v.psn();
    const uint8_t op = v.opcode() & 0x1f;
    if (!w.is_read()) {
        return;
    }
    if (psn != w.next_resp_psn) {
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .psn = psn, .expected = w.next_resp_psn,
                  .reason = "read response out of order");
        return;
    }
    if (v.aeth) {
        ack_upto(qp, (w.first_psn - 1) & 0xffffff);
    }
    const uint32_t mtu = rc_mtu(dev_, qp);
    const uint32_t offset = static_cast<uint32_t>(psn_diff(psn, w.first_psn)) * mtu;
    const bool last = op == iba::kReadRespLast || op == iba::kReadRespOnly;
    if (offset + v.payload.size() > w.length || (!last && v.payload.size() != mtu) ||
        (last && offset + v.payload.size() != w.length)) {
        fail(qp, kSyndBadResp, "read response of the wrong length");
        return;
    }
    uint8_t synd = 0;
    if (!scatter(dev_, qp, w.hw ? w.pd : qp.pd, w.data.sges, offset, v.payload, chunks_, synd, qp.cqn_snd)) {
        if (synd == kSyndPageFault && page_fault(qp, w, psn, offset)) {
            return;  // the READ is asked again from this response on
        }
        fail(qp, fault_as_prot(synd), "read response scatter failed");
        return;
    }
    w.next_resp_psn = (psn + 1) & 0xffffff;
    if (last) {
        w.acked = true;
        complete(qp);
    } else {
        arm_ack_timer(qp);
    }
}

// The completer (IBA 9.7.6): responses to this QP's requests.
void RcRequester::rx(Qp &qp, const Packet &pkt, const iba::PacketView &v) {
    const PacketScope scope(pkt_, pkt.id);
    const uint32_t psn = v.psn();
    const uint8_t op = v.opcode() & 0x1f;
    if (qp.state != QpState::Rts && qp.state != QpState::Sqd) {
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .state = qp_state_name(qp.state),
                  .reason = "a response for a QP in this state");
        return;
    }
    // Responses to PSNs not outstanding are stale duplicates.
    if (qp.rc.pending.empty() || psn_diff(psn, qp.rc.una) < 0 || psn_diff(psn, qp.next_send_psn) >= 0) {
        HCA_TRACE(dev_, pkt_ignore, .id = pkt.id, .op = iba::opcode_name(op), .psn = psn, .from = qp.rc.una,
                  .to = qp.next_send_psn);
        return;
    }
    if (op == iba::kAck) {
        const uint8_t syndrome = v.aeth ? static_cast<uint8_t>(v.aeth->syndrome_msn.get() >> 24) : 0;
        switch (syndrome & 0xe0) {
        case kAethAck:
            HCA_TRACE(dev_, pkt_ack, .qpn = qp.qpn, .psn = psn, .msn = v.aeth->syndrome_msn.get() & 0xffffff,
                      .id = pkt.id);
            got_ack(qp, psn);
            return;
        case kAethRnrNak:
            got_rnr_nak(qp, psn, syndrome & 0x1f);
            return;
        case kAethNak:
            got_nak(qp, psn, syndrome & 0x1f);
            return;
        default:
            return;
        }
    }
    if (qp.rc.req == ReqState::PageFault) {
        // Asked again once the fault is resolved.
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .psn = psn,
                  .reason = "a response while the requester waits for a page fault");
        return;
    }
    // Read responses and atomic acknowledgements answer one outstanding WQE.
    for (RcWqe &w : qp.rc.pending) {
        if (w.npkts && psn_diff(psn, w.first_psn) >= 0 && psn_diff(psn, w.last_psn()) <= 0) {
            if (w.acked) {
                return;
            }
            if (op == iba::kAtomicAck) {
                got_atomic_ack(qp, w, v);
            } else {
                got_read_response(qp, w, pkt, v);
            }
            return;
        }
    }
}

}  // namespace hca
