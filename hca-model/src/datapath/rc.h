// Connected transports (RC, UC, XRC): per-QP requester, completer and
// responder state (IBA ch. 9.7-9.9), kept in the QP.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "datapath/wqe.h"
#include "fifo.h"
#include "timers.h"

namespace hca {

// A send WQE the requester has started: what it needs to (re)transmit the
// message and to complete it.
struct RcWqe {
    uint16_t index = 0;          // WQE index (CQE wqe_counter)
    uint8_t opcode = 0;          // WQE opcode (CQE sop_drop_qpn[31:24])
    bool signaled = false;
    bool solicited = false;
    uint32_t first_psn = 0;
    uint32_t npkts = 1;          // PSNs the message uses
    uint32_t length = 0;         // message bytes
    GatherList data;             // gathered from (send, write) or scattered to (read, atomic: sges only)
    uint64_t raddr = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;            // immediate or invalidate rkey
    uint64_t swap_add = 0;
    uint64_t compare = 0;
    uint32_t xrc_srqn = 0;
    uint32_t next_resp_psn = 0;  // read: the response PSN expected next
    bool acked = false;          // done: acknowledged / response received
    // The device's own work for a rendezvous it matched (datapath/tm.h):
    // the READ of the payload, then the FIN. 0 for a send WQE.
    uint8_t hw = 0;
    uint16_t tm_index = 0;          // the tag entry
    uint32_t tm_srqn = 0;           // its XRQ
    uint32_t pd = 0;                // the PD the READ's buffer is checked against (the XRQ's)
    std::array<uint8_t, 16> tmh{};  // the rendezvous request's TMH
    static constexpr uint8_t kHwRndvRead = 1;
    static constexpr uint8_t kHwRndvFin = 2;
    bool is_read() const;
    bool is_atomic() const;
    uint32_t last_psn() const { return (first_psn + npkts - 1) & 0xffffff; }
};

// The responder's message in progress (IBA 9.8.3: a FIRST or ONLY opcode
// starts a message, MIDDLE and LAST continue it). Transitions happen in
// RcResponder::enter() only.
enum class RespState : uint8_t {
    Idle,     // between messages
    InSend,   // a SEND holds its receive WQE (RcState::recv) until its last packet
    InWrite,  // an RDMA WRITE lands through its RETH (RcState::write) until its last packet
};
const char *resp_state_name(RespState s);

// The requester's progress on its outstanding messages (IBA 9.7). The
// completer has no state of its own: what an acknowledgement, a NAK or a
// timer does is a requester transition. Transitions happen in
// RcRequester::enter() only, which also keeps the timers true to the
// state: the local ACK timeout is armed only while the requester waits for
// answers (Sending, WaitAck, Blocked), the RNR timer only in RnrWait.
enum class ReqState : uint8_t {
    Idle,       // no message outstanding
    Sending,    // packets between the transmit cursor and next_send_psn wait for the run budget
    WaitAck,    // everything sent; acknowledgements or responses outstanding
    Blocked,    // as WaitAck, and the next WQE waits for a fence or a read credit (IBA 10.8.3.3)
    RnrWait,    // after an RNR NAK: nothing goes out until the RNR timer fires (IBA 9.7.5.2.8)
    PageFault,  // a page a packet needs is not present: nothing goes out until PAGE_FAULT_RESUME (odp.h)
    Error,      // gave up (retries exhausted, a fatal NAK, a local error) or the QP was flushed
};
const char *req_state_name(ReqState s);
// Does the requester wait for answers in this state, so that the local ACK
// timer runs?
inline bool req_waits(ReqState s) {
    return s == ReqState::Sending || s == ReqState::WaitAck || s == ReqState::Blocked;
}

struct RcState {
    // Requester (and completer).
    ReqState req = ReqState::Idle;
    // In WQE order, until completed. A QP keeps the storage of up to 32
    // (about 6 KiB) once it has had that many in flight: no allocation per
    // WQE while it streams.
    Fifo<RcWqe, 32> pending;
    uint32_t una = 0;            // oldest PSN not yet acknowledged
    uint32_t tx_psn = 0;         // next PSN to (re)transmit; behind next_send_psn while packets wait for the budget
    uint8_t retry_left = 0;
    uint8_t rnr_left = 0;
    Timers::Id ack_timer = 0;
    int64_t ack_timer_at = 0;    // when ack_timer fires
    int64_t ack_deadline = 0;    // when the local ACK timeout is due; 0: disarmed (RcRequester::arm_ack_timer)
    Timers::Id rnr_timer = 0;
    uint64_t retransmits = 0;
    // Responder.
    RespState resp = RespState::Idle;
    uint32_t epsn = 0;           // next expected request PSN
    uint32_t msn = 0;
    bool nak_sent = false;       // a PSN sequence NAK is outstanding (IBA 9.7.5.1.3: one per gap)
    bool ack_owed = false;       // a coalesced ACK waits for the end of the receive batch
    uint32_t ack_owed_psn = 0;   // the newest PSN it acknowledges
    struct Recv {                // the receive WQE of a SEND or WRITE with immediate
        uint16_t index = 0;
        uint32_t srqn = 0;
        bool srq = false;
        SgeList sges;
        uint32_t offset = 0;
        uint32_t pd = 0;
        uint32_t cqn = 0;
        // A message on a tag-matching XRQ (datapath/tm.h): the app_op of
        // its last CQE (0: not tag matching), its tag entry, its TMH, and
        // the bytes of its first packet not scattered (a matched TMH).
        uint8_t tm_app = 0;
        uint16_t tm_index = 0;
        uint32_t skip = 0;
        std::array<uint8_t, 16> tmh{};
    } recv;
    struct Write {
        uint64_t va = 0;
        uint32_t rkey = 0;
        uint32_t len = 0;
        uint32_t offset = 0;
        uint32_t pd = 0;
    } write;
    // Atomic results by request PSN, for duplicate requests (IBA 9.7.5.2.3).
    std::map<uint32_t, uint64_t> atomic_replay;
    // The last RDMA READ requests, for duplicates (IBA 9.7.5.1.1): a ring of
    // kReadSlots; the newest 2^log_rra_max (responder resources) count.
    struct ReadReq {
        uint32_t psn = 0;
        uint32_t npkts = 0;
    };
    static constexpr unsigned kReadSlots = 16;  // 2^log_max_ra_res_qp
    std::array<ReadReq, kReadSlots> reads{};
    uint32_t reads_total = 0;  // READs recorded since the QP was reset
};

// AETH syndromes (IBA 9.7.5.2.1).
inline constexpr uint8_t kAethAck = 0x00;
inline constexpr uint8_t kAethRnrNak = 0x20;
inline constexpr uint8_t kAethNak = 0x60;
inline constexpr uint8_t kNakPsnSeq = 0;
inline constexpr uint8_t kNakInvalidRequest = 1;
inline constexpr uint8_t kNakRemoteAccess = 2;
inline constexpr uint8_t kNakRemoteOp = 3;
inline constexpr uint8_t kAckCreditInvalid = 0x1f;  // no end-to-end credit limit

// RNR timer field to nanoseconds (IBA table 45).
int64_t rnr_timer_ns(uint8_t code);
// The local ACK timeout never fires sooner than this. Under TCG both ends
// of a connection are emulated on a shared host: a peer VM whose threads
// are descheduled answers hundreds of milliseconds late (measured: ACKs
// 280 ms late with a background build on a 2-core host), and the 67 ms
// timeout that drivers and rdma-core ask for (ack_timeout 14) with 7
// retries gave up after half a second (retry counter exceeded in
// 08-verbs). 500 ms x 8 tries tolerates four seconds of host stall. Loss
// recovery by NAK (a gap in PSNs) is not slowed; only a lost last packet
// waits for the timer.
inline constexpr int64_t kAckTimeoutFloorNs = 500'000'000;
// Local ACK timeout: 4.096 us * 2^timeout, at least kAckTimeoutFloorNs
// (0: infinite, -1).
int64_t ack_timeout_ns(uint8_t timeout);
// Signed distance a - b in the 24-bit PSN space.
inline int32_t psn_diff(uint32_t a, uint32_t b) {
    return static_cast<int32_t>((a - b) << 8) >> 8;
}

}  // namespace hca
