// Connected transports, requester side: WQEs of RC, UC and XRC QPs become
// request packets with PSNs (SEND, RDMA WRITE, RDMA READ, atomics), kept
// until acknowledged so they can be retransmitted (IBA 9.7).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "device.h"
#include "qp.h"

namespace hca {

namespace {

// Fence modes of the control segment (qp.h MLX5_FENCE_MODE_*).
constexpr uint8_t kFenceInitiatorSmall = 1;
constexpr uint8_t kFenceFence = 2;
constexpr uint8_t kFenceStrongOrdering = 3;
constexpr uint8_t kFenceSmallAndFence = 4;

uint8_t transport_of(uint8_t st) { return st == kQpUc ? iba::kUc : st == kQpXrc ? iba::kXrc : iba::kRc; }

}  // namespace

bool RcWqe::is_read() const { return opcode == kWqeRdmaRead; }
bool RcWqe::is_atomic() const {
    return opcode == kWqeAtomicCs || opcode == kWqeAtomicFa || opcode == kWqeAtomicMaskedCs ||
           opcode == kWqeAtomicMaskedFa;
}

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

uint32_t QpTable::rc_mtu(const Qp &qp) {
    const uint8_t port_mtu = dev_.port(qp.path.port).neighbor_mtu();
    return 128u << std::clamp<uint8_t>(std::min<uint8_t>(qp.mtu ? qp.mtu : 1, port_mtu), 1, 5);
}

void QpTable::rc_transmit(Qp &qp, uint8_t opcode, uint32_t psn, bool ack_req, bool se, std::span<const uint8_t> ext,
                          std::span<const uint8_t> payload, uint32_t dqpn) {
    Port &port = dev_.port(qp.path.port);
    iba::PacketSpec s;
    s.sl = qp.path.sl;
    s.vl = port.sl2vl(s.sl);
    s.dlid = qp.path.rlid;
    s.slid = static_cast<uint16_t>(port.lid() | (qp.path.mlid & ((1u << port.lmc()) - 1)));
    s.grh = qp.path.grh;
    if (s.grh) {
        s.tclass = qp.path.tclass;
        s.flow_label = qp.path.flow_label;
        s.hop_limit = qp.path.hop_limit;
        s.sgid = port.gid(qp.path.src_addr_index);
        s.dgid = qp.path.rgid;
    }
    s.opcode = opcode;
    s.se = se;
    s.pkey = port.pkey(qp.path.pkey_index);
    s.dqpn = dqpn;
    s.ack_req = ack_req;
    s.psn = psn & 0xffffff;
    Packet pkt;
    iba::build_into(pkt.bytes, s, ext, payload);
    dev_.transmit(std::move(pkt), qp.qpn, tx_wqe_);
}

// Parses the segments of an RC/UC/XRC send WQE (hw/wr.c mlx5_ib_post_send(),
// libmlx5 qp.c): [XRC] [remote address] [atomic] then data or inline.
bool QpTable::rc_parse_wqe(Qp &qp, uint16_t index, std::span<const uint8_t> wqe, RcWqe &w, uint8_t &synd) {
    CtrlSeg ctrl;
    std::memcpy(&ctrl, wqe.data(), sizeof(ctrl));
    w.index = index;
    w.opcode = static_cast<uint8_t>(ctrl.opmod_idx_opcode.get());
    w.signaled = (ctrl.fm_ce_se & kCeCqUpdate) != 0;
    w.solicited = (ctrl.fm_ce_se & kCtrlSolicited) != 0;
    w.imm = ctrl.imm.get();
    size_t off = sizeof(CtrlSeg);
    auto take = [&](void *dst, size_t n) {
        if (off + n > wqe.size()) {
            return false;
        }
        std::memcpy(dst, wqe.data() + off, n);
        off += n;
        return true;
    };
    const bool uc = qp.st == kQpUc;
    switch (w.opcode) {
    case kWqeSend: case kWqeSendImm: case kWqeRdmaWrite: case kWqeRdmaWriteImm:
        break;
    case kWqeSendInval: case kWqeRdmaRead: case kWqeAtomicCs: case kWqeAtomicFa:
        if (uc) {
            dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: {} on a UC QP", qp.qpn, index, wqe_opcode_name(w.opcode));
            synd = kSyndLocalQpOp;
            return false;
        }
        break;
    case kWqeAtomicMaskedCs: case kWqeAtomicMaskedFa:
        // Masked atomics are not advertised (atomic_operations = CAS | FAA).
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: {} is not supported", qp.qpn, index, wqe_opcode_name(w.opcode));
        synd = kSyndLocalQpOp;
        return false;
    default:
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: opcode {}(0x{:x}) on a {} QP", qp.qpn, index,
                         wqe_opcode_name(w.opcode), w.opcode, qp_type_name(qp.st));
        synd = kSyndLocalQpOp;
        return false;
    }
    if (qp.st == kQpXrc) {
        XrcSeg x;
        if (!take(&x, sizeof(x))) {
            synd = kSyndLocalQpOp;
            return false;
        }
        w.xrc_srqn = x.xrc_srqn.get() & 0xffffff;
    }
    const bool rdma = w.opcode == kWqeRdmaWrite || w.opcode == kWqeRdmaWriteImm || w.opcode == kWqeRdmaRead;
    if (rdma || w.is_atomic()) {
        RaddrSeg r;
        if (!take(&r, sizeof(r))) {
            synd = kSyndLocalQpOp;
            return false;
        }
        w.raddr = r.raddr.get();
        w.rkey = r.rkey.get();
    }
    if (w.is_atomic()) {
        AtomicSeg a;
        if (!take(&a, sizeof(a))) {
            synd = kSyndLocalQpOp;
            return false;
        }
        w.swap_add = a.swap_add.get();
        w.compare = a.compare.get();
        if (w.opcode == kWqeAtomicMaskedCs) {
            AtomicSeg m;
            if (!take(&m, sizeof(m))) {
                synd = kSyndLocalQpOp;
                return false;
            }
            w.swap_mask = m.swap_add.get();
            w.compare_mask = m.compare.get();
        } else if (w.opcode == kWqeAtomicMaskedFa) {
            w.compare_mask = w.compare;  // field boundary
            w.compare = 0;
        }
        // The operands are in no other line of the trace.
        dev_.trace(kTrWqe, "  atomic qpn=0x{:x} swap_add=0x{:x} compare=0x{:x}", qp.qpn, w.swap_add, w.compare);
    }
    // Data pointers or inline data.
    while (off + 4 <= wqe.size()) {
        const uint32_t bc = load_be32(wqe.data() + off);
        if (bc & kInlineSeg) {
            const uint32_t len = bc & 0x3ff;
            if (off + 4 + len > wqe.size()) {
                synd = kSyndLocalLength;
                return false;
            }
            dev_.trace(kTrWqe, "  inline qpn=0x{:x} len={} bytes={}", qp.qpn, len,
                       HexBytes{wqe.subspan(off + 4, std::min<uint32_t>(len, 32))});
            if (len) {
                w.sges.push_back({0, w.inline_data.size(), len, true});
                w.inline_data.insert(w.inline_data.end(), wqe.begin() + off + 4, wqe.begin() + off + 4 + len);
            }
            off += (4 + len + 15) & ~size_t{15};
            continue;
        }
        DataSeg d;
        if (!take(&d, sizeof(d))) {
            break;
        }
        // Every segment is traced, empty ones too, so the trace accounts
        // for all ds * 16 bytes of the WQE (./hcasim trace decode).
        dev_.trace(kTrWqe, "  data qpn=0x{:x} lkey=0x{:x} addr=0x{:x} len={}", qp.qpn, d.lkey.get(), d.addr.get(),
                   d.byte_count.get());
        if (d.byte_count.get() == 0) {
            continue;
        }
        w.sges.push_back({d.lkey.get(), d.addr.get(), d.byte_count.get()});
    }
    if (!w.inline_data.empty() && (w.is_read() || w.is_atomic())) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: inline data in a {}", qp.qpn, index, wqe_opcode_name(w.opcode));
        synd = kSyndLocalQpOp;
        return false;
    }
    uint64_t len = 0;
    for (const auto &s : w.sges) {
        len += s.len;
    }
    if (len > (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_msg))) {
        synd = kSyndLocalLength;
        return false;
    }
    w.length = static_cast<uint32_t>(len);
    if (w.is_atomic()) {
        if (w.length != 8 || !w.inline_data.empty()) {
            dev_.guest_error("qpn=0x{:x} atomic WQE 0x{:x} with a {}-byte result buffer", qp.qpn, index, w.length);
            synd = kSyndLocalLength;
            return false;
        }
        w.npkts = 1;
    } else {
        const uint32_t mtu = rc_mtu(qp);
        w.npkts = std::max<uint32_t>(1, (w.length + mtu - 1) / mtu);
    }
    if (dev_.tracer().on(kTrWqe)) {
        dev_.trace(kTrWqe, "  {} qpn=0x{:x} index=0x{:x} len={} raddr=0x{:x} rkey=0x{:x} pkts={}{}",
                   wqe_opcode_name(w.opcode), qp.qpn, index, w.length, w.raddr, w.rkey, w.npkts,
                   qp.st == kQpXrc ? fmt::format(" xrc_srqn=0x{:x}", w.xrc_srqn) : "");
    }
    return true;
}

// The bytes [offset, offset+len) of a send message: inline data or the
// gather list, through the memory keys.
bool QpTable::rc_gather(Qp &qp, const RcWqe &w, uint32_t offset, uint32_t len, std::vector<uint8_t> &out,
                        uint8_t &synd) {
    out.resize(len);
    uint32_t pos = 0;
    uint32_t base = 0;
    std::vector<DmaChunk> chunks;
    for (const auto &s : w.sges) {
        if (pos == len) {
            break;
        }
        if (offset + pos >= base + s.len) {
            base += s.len;
            continue;
        }
        const uint32_t in_sge = offset + pos - base;
        const uint32_t n = std::min(s.len - in_sge, len - pos);
        if (s.inl) {
            std::memcpy(out.data() + pos, w.inline_data.data() + s.addr + in_sge, n);
            pos += n;
            base += s.len;
            continue;
        }
        chunks.clear();
        const XlatError e = dev_.mkeys.translate(s.lkey, qp.pd, s.addr + in_sge, n, kAccLocalRead, chunks);
        if (e != XlatError::None) {
            dev_.guest_error("qpn=0x{:x} WQE 0x{:x} SGE lkey=0x{:x} addr=0x{:x} len={}: {}", qp.qpn, w.index, s.lkey,
                             s.addr + in_sge, n, xlat_error_name(e));
            synd = kSyndLocalProt;
            return false;
        }
        for (const DmaChunk &c : chunks) {
            if (!dev_.dma_read(c.addr, out.data() + pos, c.len)) {
                synd = kSyndLocalProt;
                return false;
            }
            pos += c.len;
        }
        base += s.len;
    }
    return true;
}

// Sends packet k of w: a segment of a SEND or RDMA WRITE, the request for
// the rest of a READ from packet k on (IBA 9.4.4: a retried read may start
// in the middle), or the atomic request. Returns the PSNs it covered, 0 if
// gathering the payload failed (synd says why).
uint32_t QpTable::rc_send_packet(Qp &qp, RcWqe &w, uint32_t k, uint8_t &synd) {
    struct WqeContext {
        int32_t &slot;
        ~WqeContext() { slot = -1; }
    } ctx{tx_wqe_};
    tx_wqe_ = w.index;
    const uint8_t t = transport_of(qp.st);
    const uint32_t mtu = rc_mtu(qp);
    uint8_t ext[4 + 16 + 28 + 4];
    size_t n = 0;
    if (qp.st == kQpXrc) {
        store_be32(ext, w.xrc_srqn);
        n = 4;
    }
    if (w.is_read()) {
        const uint32_t off = k * mtu;
        store_be64(ext + n, w.raddr + off);
        store_be32(ext + n + 8, w.rkey);
        store_be32(ext + n + 12, w.length - std::min(off, w.length));
        n += 16;
        w.next_resp_psn = (w.first_psn + k) & 0xffffff;
        rc_transmit(qp, t | iba::kReadRequest, w.first_psn + k, true, false, {ext, n}, {}, qp.remote_qpn);
        return w.npkts - k;
    }
    if (w.is_atomic()) {
        store_be64(ext + n, w.raddr);
        store_be32(ext + n + 8, w.rkey);
        store_be64(ext + n + 12, w.swap_add);
        store_be64(ext + n + 20, w.compare);
        n += 28;
        const uint8_t op = w.opcode == kWqeAtomicCs || w.opcode == kWqeAtomicMaskedCs ? iba::kCompareSwap
                                                                                       : iba::kFetchAdd;
        rc_transmit(qp, t | op, w.first_psn, true, false, {ext, n}, {}, qp.remote_qpn);
        return 1;
    }
    const bool write = w.opcode == kWqeRdmaWrite || w.opcode == kWqeRdmaWriteImm;
    const bool imm = w.opcode == kWqeSendImm || w.opcode == kWqeRdmaWriteImm;
    const bool inv = w.opcode == kWqeSendInval;
    const bool first = k == 0;
    const bool last = k + 1 == w.npkts;
    const uint32_t off = k * mtu;
    const uint32_t len = std::min(mtu, w.length - std::min(off, w.length));
    if (!rc_gather(qp, w, off, len, payload_buf_, synd)) {
        return 0;
    }
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
        store_be64(ext + n, w.raddr);
        store_be32(ext + n + 8, w.rkey);
        store_be32(ext + n + 12, w.length);
        n += 16;
    }
    if (last && (imm || inv)) {
        store_be32(ext + n, w.imm);
        n += 4;
    }
    // AckReq on the last packet of every message, and every 16 packets
    // of long ones so the requester's window keeps moving.
    const bool ack_req = t != iba::kUc && (last || (k % 16) == 15);
    rc_transmit(qp, t | op, w.first_psn + k, ack_req, last && w.solicited, {ext, n}, payload_buf_, qp.remote_qpn);
    return 1;
}

// Sends what lies between the transmit cursor and next_send_psn (new
// messages and go-back-N retransmissions), one packet per unit of the run
// budget. False if the budget ran out first (the QP is deferred and goes
// on where it stopped) or the QP failed.
bool QpTable::rc_pump(Qp &qp) {
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
        if (!may_work()) {
            defer(qp);
            return false;
        }
        spend();
        uint8_t synd = 0;
        const uint32_t k = static_cast<uint32_t>(psn_diff(qp.rc.tx_psn, it->first_psn));
        const uint32_t covered = rc_send_packet(qp, *it, k, synd);
        if (!covered) {
            const RcWqe w = std::move(*it);
            pend.erase(it);
            req_err_cqe(qp, w.index, w.opcode, synd);
            to_error(qp, "send gather failed");
            return false;
        }
        qp.rc.tx_psn = (qp.rc.tx_psn + covered) & 0xffffff;
        if (qp.st == kQpUc && k + covered == it->npkts) {
            it->acked = true;  // unreliable: complete once sent
            rc_complete(qp);
        }
    }
    return qp.state == QpState::Rts;
}

// The send queue of a connected QP: start every posted WQE the fences and
// read credits allow.
void QpTable::rc_process_sq(Qp &qp, uint16_t pi) {
    const uint32_t max_reads = 1u << qp.log_sra_max;
    qp.rc.blocked = false;
    if (!rc_pump(qp)) {
        return;  // earlier messages are still going out
    }
    while (qp.sq_ci != pi && qp.state == QpState::Rts) {
        if (!may_work()) {
            defer(qp);
            return;
        }
        const uint16_t index = qp.sq_ci;
        uint32_t ds = 0, bbs = 0;
        const Fetch fetched = fetch_wqe(qp, index, pi, ds, bbs);
        if (fetched == Fetch::NotReadable) {
            to_error(qp, "WQE not readable");
            return;
        }
        CtrlSeg ctrl;
        std::memcpy(&ctrl, wqe_buf_.data(), sizeof(ctrl));
        const uint8_t opcode = static_cast<uint8_t>(ctrl.opmod_idx_opcode.get());
        if (fetched == Fetch::BadSize) {
            consume_wqe(qp, 1);
            req_err_cqe(qp, index, opcode, kSyndLocalQpOp);
            to_error(qp, "bad WQE size");
            return;
        }
        const uint8_t fence = ctrl.fm_ce_se >> 5;
        // IBA 10.8.3.3: a fenced WQE waits for every earlier read and atomic.
        uint32_t reads = 0;
        for (const RcWqe &p : qp.rc.pending) {
            reads += !p.acked && (p.is_read() || p.is_atomic());
        }
        const bool is_ra = opcode == kWqeRdmaRead || opcode == kWqeAtomicCs || opcode == kWqeAtomicFa ||
                           opcode == kWqeAtomicMaskedCs || opcode == kWqeAtomicMaskedFa;
        if ((reads && (fence == kFenceFence || fence == kFenceSmallAndFence || fence == kFenceInitiatorSmall ||
                       fence == kFenceStrongOrdering)) ||
            (is_ra && reads >= max_reads)) {
            qp.rc.blocked = true;
            dev_.trace(kTrWqe, "blocked qpn=0x{:x} index=0x{:x}: fence={} reads outstanding={}", qp.qpn, index, fence,
                       reads);
            break;
        }
        consume_wqe(qp, bbs);
        spend();
        dev_.charge_wqe();
        if (dev_.tracer().on(kTrWqe)) {
            dev_.trace(kTrWqe, "fetch qpn=0x{:x} index=0x{:x} opcode={}(0x{:x}) ds={} fence={} ce={} se={} imm=0x{:08x}",
                       qp.qpn, index, wqe_opcode_name(opcode), opcode, ds, fence, (ctrl.fm_ce_se >> 2) & 3,
                       (ctrl.fm_ce_se >> 1) & 1, ctrl.imm.get());
        }
        if ((ctrl.opmod_idx_opcode.get() >> 8 & 0xffff) != index) {
            dev_.guest_error("qpn=0x{:x} WQE at slot 0x{:x} carries index 0x{:x}", qp.qpn, index,
                             ctrl.opmod_idx_opcode.get() >> 8 & 0xffff);
        }
        if (opcode == kWqeNop) {
            // A NOP completes in order behind what is outstanding.
            RcWqe w;
            w.index = index;
            w.opcode = opcode;
            w.signaled = (ctrl.fm_ce_se & kCeCqUpdate) != 0;
            w.acked = true;
            w.npkts = 0;
            w.first_psn = qp.next_send_psn;
            qp.rc.pending.push_back(std::move(w));
            rc_complete(qp);
            continue;
        }
        if (opcode == kWqeUmr) {
            // IB_WR_REG_MR / IB_WR_LOCAL_INV: a local operation, done at
            // once and completed in order behind what is outstanding.
            uint8_t synd = kSyndLocalQpOp;
            if (!umr_wqe(qp, index, {wqe_buf_.data(), ds * 16}, synd)) {
                req_err_cqe(qp, index, opcode, synd);
                to_error(qp, "UMR failed");
                return;
            }
            RcWqe w;
            w.index = index;
            w.opcode = opcode;
            w.signaled = (ctrl.fm_ce_se & kCeCqUpdate) != 0;
            w.acked = true;
            w.npkts = 0;
            w.first_psn = qp.next_send_psn;
            qp.rc.pending.push_back(std::move(w));
            rc_complete(qp);
            continue;
        }
        RcWqe w;
        uint8_t synd = 0;
        if (!rc_parse_wqe(qp, index, {wqe_buf_.data(), ds * 16}, w, synd)) {
            req_err_cqe(qp, index, opcode, synd);
            to_error(qp, "bad send WQE");
            return;
        }
        w.first_psn = qp.next_send_psn;
        qp.next_send_psn = (qp.next_send_psn + w.npkts) & 0xffffff;
        ++qp.sent;
        if (qp.rc.pending.empty()) {
            qp.rc.una = w.first_psn;
        }
        qp.rc.pending.push_back(std::move(w));
        rc_arm_ack_timer(qp);
        if (!rc_pump(qp)) {
            return;  // the rest of this message goes out in later turns
        }
    }
}

}  // namespace hca
