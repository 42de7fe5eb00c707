// Connected transports, requester side: WQEs of RC, UC and XRC QPs become
// request packets with PSNs (SEND, RDMA WRITE, RDMA READ, atomics), kept
// until acknowledged so they can be retransmitted (IBA 9.7).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "datapath/common.h"
#include "datapath/rc_req.h"
#include "datapath/sig_xfer.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

namespace {

// Fence modes of the control segment (qp.h MLX5_FENCE_MODE_*).
constexpr uint8_t kFenceInitiatorSmall = 1;
constexpr uint8_t kFenceFence = 2;
constexpr uint8_t kFenceStrongOrdering = 3;
constexpr uint8_t kFenceSmallAndFence = 4;

uint8_t transport_of(uint8_t st) {
    return st == kQpUc ? iba::kUc : st == kQpXrc ? iba::kXrc : st == kQpDci ? iba::kDc : iba::kRc;
}

// Does the WQE become packets (and so, on a DCI, carry an address segment)?
bool goes_out(uint8_t op) {
    switch (op) {
        case kWqeSend:
        case kWqeSendImm:
        case kWqeSendInval:
        case kWqeRdmaWrite:
        case kWqeRdmaWriteImm:
        case kWqeRdmaRead:
        case kWqeAtomicCs:
        case kWqeAtomicFa:
        case kWqeAtomicMaskedCs:
        case kWqeAtomicMaskedFa:
            return true;
        default:
            return false;
    }
}

// Where a DCI's WQE sends to: its address segment (mlx5_wqe_datagram_seg,
// after the control segment; libmlx5 mlx5_send_wr_set_dc_addr()).
struct DcTarget {
    AddressPath path;
    uint32_t dctn = 0;
    uint64_t key = 0;
    bool same(const Qp &qp) const {
        const AddressPath &p = qp.path;
        return qp.dc.connected && qp.remote_qpn == dctn && qp.dc.key == key && p.rlid == path.rlid && p.sl == path.sl &&
               p.mlid == path.mlid && p.grh == path.grh && (!p.grh || p.rgid == path.rgid);
    }
};

bool dc_target(const Qp &qp, const SqWqe &sw, DcTarget &t) {
    AvSeg av;
    if (sizeof(CtrlSeg) + sizeof(av) > sw.bytes.size()) {
        return false;
    }
    std::memcpy(&av, sw.bytes.data() + sizeof(CtrlSeg), sizeof(av));
    t.path = qp.path;  // port, P_Key index and ACK timeout stay the DCI's
    t.key = uint64_t{av.qkey.get()} << 32 | av.reserved.get();
    t.dctn = av.dqp_dct.get() & 0xffffff;
    t.path.sl = av.stat_rate_sl & 0x0f;
    t.path.mlid = av.fl_mlid & 0x7f;
    t.path.rlid = av.rlid.get();
    const uint32_t gf = av.grh_gid_fl.get();
    t.path.grh = (gf >> 30) & 1;
    if (t.path.grh) {
        t.path.tclass = av.tclass;
        t.path.flow_label = gf & 0xfffff;
        t.path.hop_limit = av.hop_limit;
        t.path.src_addr_index = static_cast<uint8_t>(gf >> 20);
        std::memcpy(t.path.rgid.data(), av.rgid, 16);
    }
    return true;
}

}  // namespace

bool RcWqe::is_read() const { return opcode == kWqeRdmaRead; }
bool RcWqe::is_atomic() const { return wqe_reads_remote(opcode) && opcode != kWqeRdmaRead; }

int64_t rnr_timer_ns(uint8_t code) {
    // IBA 9.7.5.2.8, table 45, in microseconds x 100.
    static constexpr uint32_t kTimes[32] = {65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
                                            256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
                                            12288, 16384, 24576, 32768, 49152};
    return int64_t{kTimes[code & 31]} * 10'000;
}

int64_t ack_timeout_ns(uint8_t timeout) {
    if (timeout == 0) {
        return -1;  // no timeout
    }
    // IBA: 4.096 us * 2^timeout, but never below kAckTimeoutFloorNs (rc.h).
    return std::max<int64_t>(int64_t{4096} << std::min<uint8_t>(timeout, 31), kAckTimeoutFloorNs);
}

const char *req_state_name(ReqState s) {
    switch (s) {
        case ReqState::Idle:
            return "idle";
        case ReqState::Sending:
            return "sending";
        case ReqState::WaitAck:
            return "wait-ack";
        case ReqState::Blocked:
            return "blocked";
        case ReqState::RnrWait:
            return "rnr-wait";
        case ReqState::PageFault:
            return "page-fault";
        case ReqState::Error:
            return "error";
    }
    return "?";
}

// The one place the requester's state changes. Leaving a state stops the
// timer that belonged to it. Going idle only disarms the local ACK timeout:
// the host timer stays and ends when it fires, so a QP that goes idle
// after every message does not add and remove a host timer per message
// (the next message's arm_ack_timer() reuses it). The routine cycle of a
// message (idle, sending, waiting for its ACK) is not traced, the WQE and
// packet lines show it; every other transition comes with a reason and is.
void RcRequester::enter(Qp &qp, ReqState to, const char *why) {
    const ReqState from = qp.rc.req;
    if (from == to) {
        return;
    }
    qp.rc.req = to;
    if (from == ReqState::RnrWait && qp.rc.rnr_timer) {
        dev_.cancel_timer(qp.rc.rnr_timer);
        qp.rc.rnr_timer = 0;
    }
    if (!req_waits(to)) {
        qp.rc.ack_deadline = 0;
        if (to != ReqState::Idle && qp.rc.ack_timer) {
            dev_.cancel_timer(qp.rc.ack_timer);
            qp.rc.ack_timer = 0;
        }
    }
    if (why) {
        HCA_TRACE(dev_, qp_requester, .qpn = qp.qpn, .from = req_state_name(from), .to = req_state_name(to),
                  .reason = why);
    }
}

// Is the opcode one a QP of this transport may post? (Masked atomics are
// not advertised: atomic_operations = CAS | FAA.)
bool RcRequester::opcode_ok(Qp &qp, const SqWqe &sw, uint8_t &synd) {
    switch (sw.opcode) {
    case kWqeSend: case kWqeSendImm: case kWqeRdmaWrite: case kWqeRdmaWriteImm:
        return true;
    case kWqeSendInval: case kWqeRdmaRead: case kWqeAtomicCs: case kWqeAtomicFa:
        if (qp.st != kQpUc) {
            return true;
        }
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: {} on a UC QP", qp.qpn, sw.index, wqe_opcode_name(sw.opcode));
        break;
    case kWqeAtomicMaskedCs: case kWqeAtomicMaskedFa:
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: {} is not supported", qp.qpn, sw.index, wqe_opcode_name(sw.opcode));
        break;
    default:
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: opcode {}(0x{:x}) on a {} QP", qp.qpn, sw.index,
                         wqe_opcode_name(sw.opcode), sw.opcode, qp_type_name(qp.st));
        break;
    }
    synd = kSyndLocalQpOp;
    return false;
}

// The transport segments between the control segment and the data: [XRC]
// [remote address] [atomic]. Returns the offset of the data segments, 0 if
// the WQE is too short for them.
size_t RcRequester::parse_ext(Qp &qp, const SqWqe &sw, RcWqe &w) {
    size_t off = sizeof(CtrlSeg);
    if (qp.st == kQpDci) {
        // Its address: dc_must_wait() connected the DCI to it.
        DcTarget t;
        if (!dc_target(qp, sw, t)) {
            return 0;
        }
        HCA_TRACE(dev_, wqe_dc, .qpn = qp.qpn, .dlid = t.path.rlid, .dctn = t.dctn, .key = t.key, .sl = t.path.sl,
                  .grh = t.path.grh, .dgid = trace_opt(t.path.grh, t.path.rgid));
        off += sizeof(AvSeg);
    }
    auto take = [&](void *dst, size_t n) {
        if (off + n > sw.bytes.size()) {
            return false;
        }
        std::memcpy(dst, sw.bytes.data() + off, n);
        off += n;
        return true;
    };
    if (qp.st == kQpXrc) {
        XrcSeg x;
        if (!take(&x, sizeof(x))) {
            return 0;
        }
        w.xrc_srqn = x.xrc_srqn.get() & 0xffffff;
    }
    const bool rdma = w.opcode == kWqeRdmaWrite || w.opcode == kWqeRdmaWriteImm || w.opcode == kWqeRdmaRead;
    if (rdma || w.is_atomic()) {
        RaddrSeg r;
        if (!take(&r, sizeof(r))) {
            return 0;
        }
        w.raddr = r.raddr.get();
        w.rkey = r.rkey.get();
    }
    if (w.is_atomic()) {
        AtomicSeg a;
        if (!take(&a, sizeof(a))) {
            return 0;
        }
        w.swap_add = a.swap_add.get();
        w.compare = a.compare.get();
        // The operands are in no other line of the trace.
        HCA_TRACE(dev_, wqe_atomic, .qpn = qp.qpn, .swap_add = w.swap_add, .compare = w.compare);
    }
    return off;
}

// An RC/UC/XRC send WQE as the requester keeps it (hw/wr.c
// mlx5_ib_post_send(), libmlx5 qp.c).
bool RcRequester::parse_wqe(Qp &qp, const SqWqe &sw, RcWqe &w, uint8_t &synd) {
    w.index = sw.index;
    w.opcode = sw.opcode;
    w.signaled = sw.signaled;
    w.solicited = sw.solicited;
    w.imm = sw.imm;
    if (!opcode_ok(qp, sw, synd)) {
        return false;
    }
    const size_t off = parse_ext(qp, sw, w);
    if (off == 0) {
        synd = kSyndLocalQpOp;
        return false;
    }
    if (!parse_data_segs(dev_, qp, sw.bytes.subspan(off), w.data, synd)) {
        return false;
    }
    if (!w.data.inline_data.empty() && (w.is_read() || w.is_atomic())) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: inline data in a {}", qp.qpn, w.index, wqe_opcode_name(w.opcode));
        synd = kSyndLocalQpOp;
        return false;
    }
    // A signature key's gather is read and transformed now; a READ's
    // scatter goes through it as the responses come.
    if (!w.is_read() && !sig_gather(dev_, qp, w.index, w.data, synd)) {
        return false;
    }
    const uint64_t len = w.data.length();
    if (len > (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_msg))) {
        synd = kSyndLocalLength;
        return false;
    }
    w.length = static_cast<uint32_t>(len);
    if (w.is_atomic()) {
        if (w.length != 8) {
            dev_.guest_error("qpn=0x{:x} atomic WQE 0x{:x} with a {}-byte result buffer", qp.qpn, w.index, w.length);
            synd = kSyndLocalLength;
            return false;
        }
        w.npkts = 1;
    } else {
        const uint32_t mtu = rc_mtu(dev_, qp);
        w.npkts = std::max<uint32_t>(1, (w.length + mtu - 1) / mtu);
    }
    HCA_TRACE(dev_, wqe_remote, .op = wqe_opcode_name(w.opcode), .qpn = qp.qpn, .index = w.index, .len = w.length,
              .raddr = w.raddr, .rkey = w.rkey, .pkts = w.npkts, .xrc_srqn = trace_opt(qp.st == kQpXrc, w.xrc_srqn));
    return true;
}

// A QP reset starts a new requester: nothing of the old one survives,
// its timers included.
void RcRequester::reset(Qp &qp) {
    for (Timers::Id *t : {&qp.rc.ack_timer, &qp.rc.rnr_timer}) {
        if (*t) {
            dev_.cancel_timer(*t);
            *t = 0;
        }
    }
    enter(qp, ReqState::Idle, "the QP was reset");
}

void RcRequester::ready(Qp &qp, bool from_rtr) {
    if (from_rtr) {
        qp.rc.una = qp.next_send_psn;
        qp.rc.tx_psn = qp.next_send_psn;
    }
    qp.rc.retry_left = qp.retry_count;
    qp.rc.rnr_left = qp.rnr_retry;
}

// The QP is in error: the started but unfinished WQEs complete in order
// with a flush error (on a QP without a send queue: the device's own
// rendezvous work).
void RcRequester::flush(Qp &qp) {
    if (qp.connected()) {
        enter(qp, ReqState::Error, "the QP is in error");
    }
    while (!qp.rc.pending.empty()) {
        RcWqe w = std::move(qp.rc.pending.front());
        qp.rc.pending.pop_front();
        wqe_done(qp, w, kSyndWrFlush);
    }
}

// A local operation (NOP, UMR) is done: its CQE comes in order behind the
// messages still outstanding.
void RcRequester::local_done(Qp &qp, const SqWqe &sw) {
    RcWqe r;
    r.index = sw.index;
    r.opcode = sw.opcode;
    r.signaled = sw.signaled;
    r.acked = true;
    r.npkts = 0;
    r.first_psn = qp.next_send_psn;
    qp.rc.pending.push_back(std::move(r));
    complete(qp);
}

// Sends packet k of w: a segment of a SEND or RDMA WRITE, the request for
// the rest of a READ from packet k on (IBA 9.4.4: a retried read may start
// in the middle), or the atomic request. Returns the PSNs it covered, 0 if
// gathering the payload failed (synd says why).

uint32_t RcRequester::send_packet(Qp &qp, RcWqe &w, uint32_t k, uint8_t &synd) {
    const uint8_t t = transport_of(qp.st);
    const uint32_t mtu = rc_mtu(dev_, qp);
    iba::ExtHeaders ext;
    if (qp.st == kQpDci) {
        // The packet that opens the connection says so.
        const bool connect = ((w.first_psn + k) & 0xffffff) == qp.dc.conn_psn;
        auto &dc = ext.add<iba::DcEth>();
        dc.key.set(qp.dc.key);
        dc.dci.set(qp.qpn | (connect ? iba::kDcConnect : 0));
    }
    if (qp.st == kQpXrc) {
        ext.add<iba::XrcEth>().srqn.set(w.xrc_srqn);
    }
    if (w.is_read()) {
        const uint32_t off = k * mtu;
        auto &reth = ext.add<iba::Reth>();
        reth.va.set(w.raddr + off);
        reth.rkey.set(w.rkey);
        reth.dma_len.set(w.length - std::min(off, w.length));
        w.next_resp_psn = (w.first_psn + k) & 0xffffff;
        rc_transmit(dev_, qp, t | iba::kReadRequest, w.first_psn + k, true, false, ext.bytes(), {}, qp.remote_qpn,
                    w.index);
        return w.npkts - k;
    }
    if (w.is_atomic()) {
        auto &at = ext.add<iba::AtomicEth>();
        at.va.set(w.raddr);
        at.rkey.set(w.rkey);
        at.swap_add.set(w.swap_add);
        at.compare.set(w.compare);
        const uint8_t op = w.opcode == kWqeAtomicCs || w.opcode == kWqeAtomicMaskedCs ? iba::kCompareSwap
                                                                                       : iba::kFetchAdd;
        rc_transmit(dev_, qp, t | op, w.first_psn, true, false, ext.bytes(), {}, qp.remote_qpn, w.index);
        return 1;
    }
    const bool write = w.opcode == kWqeRdmaWrite || w.opcode == kWqeRdmaWriteImm;
    const bool imm = w.opcode == kWqeSendImm || w.opcode == kWqeRdmaWriteImm;
    const bool inv = w.opcode == kWqeSendInval;
    const bool first = k == 0;
    const bool last = k + 1 == w.npkts;
    const uint32_t off = k * mtu;
    const uint32_t len = std::min(mtu, w.length - std::min(off, w.length));
    uint8_t op;
    if (write) {
        op = first && last ? (imm ? iba::kWriteOnlyImm : iba::kWriteOnly)
             : first       ? iba::kWriteFirst
             : last        ? (imm ? iba::kWriteLastImm : iba::kWriteLast)
                           : iba::kWriteMiddle;
    } else {
        op = first && last ? (imm ? iba::kSendOnlyImm : inv ? iba::kSendOnlyInv : iba::kSendOnly)
             : first       ? iba::kSendFirst
             : last        ? (imm ? iba::kSendLastImm : inv ? iba::kSendLastInv : iba::kSendLast)
                           : iba::kSendMiddle;
    }
    if (write && first) {
        auto &reth = ext.add<iba::Reth>();
        reth.va.set(w.raddr);
        reth.rkey.set(w.rkey);
        reth.dma_len.set(w.length);
    }
    if (last && imm) {
        ext.add<iba::ImmDt>().data.set(w.imm);
    } else if (last && inv) {
        ext.add<iba::Ieth>().rkey.set(w.imm);
    }
    // AckReq on the last packet of every message, and every 16 packets
    // of long ones so the requester's window keeps moving.
    const bool ack_req = t != iba::kUc && (last || (k % 16) == 15);
    // The payload is gathered straight into the packet.
    Packet pkt = dev_.new_packet();
    uint8_t *at = rc_headers(dev_, qp, pkt, t | op, w.first_psn + k, ack_req, last && w.solicited, ext.bytes(), len,
                             qp.remote_qpn);
    if (!gather(dev_, qp, w.index, w.data, off, len, at, chunks_, synd)) {
        dev_.recycle(std::move(pkt));
        return 0;
    }
    dev_.transmit(std::move(pkt), qp.qpn, w.index);
    return 1;
}

// Sends what lies between the transmit cursor and next_send_psn (new
// messages and go-back-N retransmissions), one packet per unit of the run
// budget. False if the budget ran out first (the QP is deferred and goes
// on where it stopped) or the QP failed.
bool RcRequester::pump(Qp &qp) {
    if (qp.rc.req == ReqState::RnrWait || qp.rc.req == ReqState::PageFault) {
        return false;  // the RNR timer or PAGE_FAULT_RESUME sends again
    }
    auto &pend = qp.rc.pending;
    while (psn_diff(qp.rc.tx_psn, qp.next_send_psn) < 0 && qp.state == QpState::Rts) {
        // The WQE holding the cursor (pending is in PSN order).
        auto it = std::partition_point(pend.begin(), pend.end(), [&](const RcWqe &w) {
            return psn_diff((w.first_psn + w.npkts) & 0xffffff, qp.rc.tx_psn) <= 0;
        });
        if (it == pend.end()) {
            qp.rc.tx_psn = qp.next_send_psn;  // the rest was acknowledged meanwhile
            break;
        }
        if (psn_diff(it->first_psn, qp.rc.tx_psn) > 0) {
            qp.rc.tx_psn = it->first_psn;
        }
        if (!qps_.sq().may_work()) {
            qps_.sq().defer(qp);
            return false;
        }
        qps_.sq().spend();
        uint8_t synd = 0;
        const uint32_t k = static_cast<uint32_t>(psn_diff(qp.rc.tx_psn, it->first_psn));
        const uint32_t covered = send_packet(qp, *it, k, synd);
        if (!covered && synd == kSyndPageFault && page_fault(qp, *it, qp.rc.tx_psn, k * rc_mtu(dev_, qp))) {
            return false;
        }
        if (!covered) {
            synd = fault_as_prot(synd);
            const RcWqe w = std::move(*it);
            pend.erase(it);
            wqe_done(qp, w, synd);
            qps_.to_error(qp, "send gather failed");
            return false;
        }
        qp.rc.tx_psn = (qp.rc.tx_psn + covered) & 0xffffff;
        if (qp.st == kQpUc && k + covered == it->npkts) {
            it->acked = true;  // unreliable: complete once sent
            complete(qp);
        }
    }
    if (qp.state != QpState::Rts) {
        return false;
    }
    if (qp.rc.req == ReqState::Sending) {
        enter(qp, pend.empty() ? ReqState::Idle : ReqState::WaitAck);
    }
    return true;
}

// A page a packet of w needs is not present (odp.h): the requester stands
// still, with the packet at psn the next to go, until PAGE_FAULT_RESUME.
// False if no fault can be raised (the caller fails the WQE).
bool RcRequester::page_fault(Qp &qp, const RcWqe &w, uint32_t psn, uint32_t bytes_committed) {
    const PfType type = w.is_read() || w.is_atomic() ? PfType::ReqReadOrAtomic : PfType::ReqSendOrWrite;
    if (!dev_.odp.requester(qp, type, w.index, w.opcode, bytes_committed)) {
        return false;
    }
    enter(qp, ReqState::PageFault, "page fault");
    if (psn_diff(psn, qp.rc.tx_psn) < 0) {
        qp.rc.tx_psn = psn;
    }
    return true;
}

void RcRequester::resume(Qp &qp, bool error) {
    if (qp.rc.req != ReqState::PageFault) {
        return;
    }
    if (error) {
        fail(qp, kSyndLocalProt, "page fault resumed with error");
        return;
    }
    enter(qp, ReqState::Sending, "page fault resolved");
    qps_.sq().defer(qp);
    arm_ack_timer(qp);
}

// IBA 10.8.3.3: a fenced WQE waits for every earlier read and atomic, and a
// read or atomic waits for a read credit (the initiator depth). The send
// queue goes on when a completion frees what it waits for.
bool RcRequester::must_wait(Qp &qp, const SqWqe &sw) {
    if (qp.st == kQpDci && dc_must_wait(qp, sw)) {
        return true;
    }
    const bool fenced = sw.fence == kFenceFence || sw.fence == kFenceSmallAndFence ||
                        sw.fence == kFenceInitiatorSmall || sw.fence == kFenceStrongOrdering;
    uint32_t reads = 0;
    if (fenced || wqe_reads_remote(sw.opcode)) {  // neither waits for reads: no need to count them
        for (const RcWqe &p : qp.rc.pending) {
            reads += !p.acked && (p.is_read() || p.is_atomic());
        }
    }
    const bool fence_waits = reads && fenced;
    if (!fence_waits && !(wqe_reads_remote(sw.opcode) && reads >= 1u << qp.log_sra_max)) {
        if (qp.rc.req == ReqState::Blocked) {
            enter(qp, qp.rc.pending.empty() ? ReqState::Idle : ReqState::WaitAck,
                  "the reads it waited for are answered");
        }
        return false;
    }
    enter(qp, ReqState::Blocked,
          fence_waits ? "a fenced WQE waits for reads and atomics" : "a read or atomic waits for a read credit");
    HCA_TRACE(dev_, wqe_blocked, .qpn = qp.qpn, .index = sw.index, .fence = sw.fence, .reads_outstanding = reads);
    return true;
}

// A DCI sends to one DCT at a time: a WQE for another waits until every
// message to the current one is complete, then the DCI connects to its
// DCT. A DCI with nothing outstanding is disconnected (complete()), so
// each burst of messages opens its connection anew.
bool RcRequester::dc_must_wait(Qp &qp, const SqWqe &sw) {
    DcTarget t;
    if (!goes_out(sw.opcode) || !dc_target(qp, sw, t) || t.same(qp)) {
        return false;  // (a WQE too short for its address fails in parse_wqe())
    }
    if (!qp.rc.pending.empty()) {
        enter(qp, ReqState::Blocked, "a DCI waits for its messages to the DCT it is connected to");
        HCA_TRACE(dev_, wqe_blocked, .qpn = qp.qpn, .index = sw.index, .fence = sw.fence,
                  .reads_outstanding = qp.rc.pending.size());
        return true;
    }
    qp.path = t.path;
    qp.remote_qpn = t.dctn;
    qp.dc.key = t.key;
    qp.dc.connected = true;
    qp.dc.conn_psn = qp.next_send_psn;
    HCA_TRACE(dev_, qp_dc_connect, .qpn = qp.qpn, .dctn = t.dctn, .dlid = t.path.rlid, .key = t.key,
              .psn = qp.next_send_psn);
    return false;
}

// A new message: its PSNs, its place among the outstanding ones, and its
// first packets (as far as the run budget goes).
bool RcRequester::start(Qp &qp, const SqWqe &sw) {
    RcWqe &w = qp.rc.pending.emplace_back();  // parsed where it waits for its ACK
    uint8_t synd = 0;
    if (!parse_wqe(qp, sw, w, synd)) {
        qp.rc.pending.pop_back();
        return qps_.sq().fail_wqe(qp, sw, synd, "bad send WQE");
    }
    ++qp.sent;
    return begin(qp);
}

// The newest WQE of pending starts: its PSNs, then the requester sends.
bool RcRequester::begin(Qp &qp) {
    RcWqe &w = qp.rc.pending.back();
    w.first_psn = qp.next_send_psn;
    qp.next_send_psn = (qp.next_send_psn + w.npkts) & 0xffffff;
    if (qp.rc.pending.size() == 1) {
        qp.rc.una = w.first_psn;
    }
    enter(qp, ReqState::Sending);
    arm_ack_timer(qp);
    return pump(qp);  // false: the rest of this message goes out in later turns
}

// The device's own work goes out like a message of the send queue, but
// never waits for it: a requester waiting for its RNR timer or a page
// sends it with the rest when it resumes.
void RcRequester::start_hw(Qp &qp, RcWqe &&w) {
    if (qp.state != QpState::Rts || qp.rc.req == ReqState::Error) {
        wqe_done(qp, w, kSyndWrFlush);
        return;
    }
    if (qp.rc.req == ReqState::RnrWait || qp.rc.req == ReqState::PageFault) {
        w.first_psn = qp.next_send_psn;
        qp.next_send_psn = (qp.next_send_psn + w.npkts) & 0xffffff;
        qp.rc.pending.push_back(std::move(w));
        return;
    }
    qp.rc.pending.push_back(std::move(w));
    begin(qp);
}

void RcRequester::wqe_done(Qp &qp, const RcWqe &w, uint8_t synd) {
    if (w.hw) {
        qps_.tm().hw_done(qp, w, synd == 0);
    } else if (synd) {
        req_err_cqe(dev_, qp, w.index, w.opcode, synd, pkt_);
    } else {
        req_cqe(dev_, qp, w.index, w.opcode, w.is_atomic() ? 8 : w.length, w.signaled, false, pkt_);
    }
}

}  // namespace hca
