// The connected transports' requester and completer (RC, UC, XRC; IBA
// 9.7): send WQEs become request packets with PSNs, kept until they are
// acknowledged; ACKs, NAKs, RNR NAKs, read responses and atomic
// acknowledgements complete them in order, and losses are resent
// (go-back-N). Its state is the QP's RcState::req (ReqState, rc.h),
// changed in enter() only.
#pragma once

#include <cstdint>
#include <vector>

#include "datapath/rc.h"
#include "datapath/wqe.h"
#include "iba/packet.h"
#include "objects/mkey.h"

namespace hca {

class Device;
class QpTable;
struct Qp;
struct Packet;

class RcRequester {
  public:
    RcRequester(Device &dev, QpTable &qps) : dev_(dev), qps_(qps) {}
    // From the WQE loop: may the WQE start now (IBA 10.8.3.3 fences, read
    // credits)? If not the requester is blocked until a completion.
    bool must_wait(Qp &qp, const SqWqe &sw);
    // A new message: its PSNs and first packets. False if the loop must stop.
    bool start(Qp &qp, const SqWqe &sw);
    // Work of the device's own (RcWqe::hw: a tag-matching rendezvous),
    // started like a message of the send queue, after those outstanding.
    void start_hw(Qp &qp, RcWqe &&w);
    // The completion of a finished or failed message (synd 0: success):
    // the send queue's CQE, or for the device's own work, tag matching's.
    void wqe_done(Qp &qp, const RcWqe &w, uint8_t synd);
    // Sends what earlier messages still owe (new packets, go-back-N
    // retransmissions). False if the budget ran out or the QP failed.
    bool pump(Qp &qp);
    // Completes the acknowledged WQEs at the head, in order (a local WQE
    // queued behind outstanding messages too).
    void complete(Qp &qp);
    // The completer: a response to this QP's requests arrived.
    void rx(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    // The one place the requester's state changes (rc.h ReqState).
    void enter(Qp &qp, ReqState to, const char *why = nullptr);
    // The QP was reset: its timers are cancelled, the state is idle.
    void reset(Qp &qp);
    // The QP enters RTS: from RTR its first PSN is the QP context's
    // next_send_psn; the retry budgets are full again either way.
    void ready(Qp &qp, bool from_rtr);
    // The QP is in error: every started WQE completes with a flush error.
    void flush(Qp &qp);
    // A local WQE (NOP, UMR) is done; it completes behind the messages
    // still outstanding.
    void local_done(Qp &qp, const SqWqe &sw);
    // PAGE_FAULT_RESUME for the requester's page fault: send again from
    // the packet that faulted, or (error) fail.
    void resume(Qp &qp, bool error);

  private:
    bool begin(Qp &qp);
    bool opcode_ok(Qp &qp, const SqWqe &sw, uint8_t &synd);
    bool dc_must_wait(Qp &qp, const SqWqe &sw);
    size_t parse_ext(Qp &qp, const SqWqe &sw, RcWqe &w);
    bool parse_wqe(Qp &qp, const SqWqe &sw, RcWqe &w, uint8_t &synd);
    uint32_t send_packet(Qp &qp, RcWqe &w, uint32_t k, uint8_t &synd);
    void arm_ack_timer(Qp &qp);
    void add_ack_timer(Qp &qp, int64_t delay);
    bool retry_budget(Qp &qp, const char *why);
    void retransmit(Qp &qp, uint32_t psn, const char *why);
    void fail(Qp &qp, uint8_t synd, const char *why);
    bool page_fault(Qp &qp, const RcWqe &w, uint32_t psn, uint32_t bytes_committed);
    void ack_upto(Qp &qp, uint32_t psn);
    void got_ack(Qp &qp, uint32_t psn);
    void got_rnr_nak(Qp &qp, uint32_t psn, uint8_t timer);
    void got_nak(Qp &qp, uint32_t psn, uint8_t code);
    void got_atomic_ack(Qp &qp, RcWqe &w, const iba::PacketView &v);
    void got_read_response(Qp &qp, RcWqe &w, const Packet &pkt, const iba::PacketView &v);

    Device &dev_;
    QpTable &qps_;
    std::vector<DmaChunk> chunks_;  // translations of the buffer a response lands in
    uint64_t pkt_ = 0;              // the response being handled, for the trace (rx())
};

}  // namespace hca
