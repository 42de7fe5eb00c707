// The send side (requester): the send queues' turns, WQE fetch through the
// QP buffer's page list (a WQE may wrap the ring; a BlueFlame copy is used
// instead, blueflame.cpp), segment decoding, gathering through memory keys,
// packet construction and requester CQEs.
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "datapath/common.h"
#include "datapath/ipoib_offload.h"
#include "datapath/sig_xfer.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

void SendQueue::reset() {
    bf_.clear();
    bfregs_.clear();
    for (const auto &[qpn, wait] : waits_) {
        dev_.cancel_timer(wait.timer);
    }
    waits_.clear();
    deferred_heads_ = 0;
    deferred_timer_ = false;  // the device's reset drops its timers
    pending_.clear();
    pending_half_.valid = false;
}

void SendQueue::process_pending() {
    // Every turn spends budget or retires a QP from the ring; the bound on
    // turns is only a backstop.
    for (uint32_t turns = 0; !pending_.empty() && dev_.budget_left() && turns < 4 * Device::kRunWqes; ++turns) {
        const uint32_t qpn = pending_.front();
        pending_.pop_front();
        if (Qp *qp = qps_.find(qpn)) {
            qp->sq_pending = false;
            quantum_ = kQuantum;
            process(*qp);  // defer()s the QP to the back of the ring if work is left
        }
    }
    quantum_ = 0;
}

bool SendQueue::may_work() const {
    return quantum_ > 0 && dev_.budget_left();
}

void SendQueue::defer(Qp &qp) {
    if (!qp.sq_pending) {
        qp.sq_pending = true;
        pending_.push_back(qp.qpn);
    }
    dev_.schedule();
}

// The WQE at index: the copy a BlueFlame write delivered, or WQEBBs
// fetched from the SQ buffer (a WQE may wrap from the last WQEBB to the
// first). Leaves it in wqe_buf_; bbs is the number of WQEBBs it occupies.
SendQueue::Fetch SendQueue::fetch_wqe(Qp &qp, uint16_t index, uint16_t pi, uint32_t &ds, uint32_t &bbs) {
    const uint32_t nbb = qp.sq_wqebbs();
    const uint32_t max_ds = static_cast<uint32_t>(dev_.fw.caps().gen(ifc::cmd_hca_cap::max_wqe_sz_sq)) / 16;
    if (!qp.bf_wqes.empty() && qp.bf_wqes.front().index == index) {  // (index is sq_ci)
        const Qp::BfWqe *bf = &qp.bf_wqes.front();
        wqe_buf_.assign(bf->bytes.begin(), bf->bytes.begin() + bf->len);  // dropped by consume_wqe()
        ++bf_executed_;
        ds = wqe_ds(wqe_buf_.data());
        bbs = std::max<uint32_t>(1, (ds * 16 + kWqeBb - 1) / kWqeBb);
        HCA_TRACE(dev_, wqe_blueflame, .qpn = qp.qpn, .index = index,
                  .reason = "executing the WQE from the BlueFlame write");
        return bbs > static_cast<uint16_t>(pi - index) ? Fetch::BadSize : Fetch::Ok;
    }
    const uint64_t first = qp.sq_offset + uint64_t{index & (nbb - 1)} * kWqeBb;
    wqe_buf_.resize(kWqeBb);
    if (!dev_.dma_read(qp.buf.addr(first), wqe_buf_.data(), kWqeBb)) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x} is not guest memory", qp.qpn, index);
        return Fetch::NotReadable;
    }
    ds = wqe_ds(wqe_buf_.data());
    bbs = std::max<uint32_t>(1, (ds * 16 + kWqeBb - 1) / kWqeBb);
    if (ds == 0 || ds > max_ds || bbs > static_cast<uint16_t>(pi - index)) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: DS {} (max {}, {} WQEBBs posted)", qp.qpn, index, ds, max_ds,
                         static_cast<uint16_t>(pi - index));
        return Fetch::BadSize;
    }
    wqe_buf_.resize(bbs * kWqeBb);
    for (uint32_t b = 1; b < bbs; ++b) {
        const uint64_t off = qp.sq_offset + uint64_t{(index + b) & (nbb - 1)} * kWqeBb;
        if (!dev_.dma_read(qp.buf.addr(off), wqe_buf_.data() + b * kWqeBb, kWqeBb)) {
            return Fetch::NotReadable;
        }
    }
    return Fetch::Ok;
}

void SendQueue::consume_wqe(Qp &qp, uint32_t bbs) {
    consume_to(qp, static_cast<uint16_t>(qp.sq_ci + bbs));
}

// May the send queue run, and up to which producer index? An SQ in error
// flushes instead; one before RTS runs once it gets there.
bool SendQueue::sq_producer(Qp &qp, uint16_t &pi) {
    if (qp.no_sq) {
        return false;
    }
    if (qp.state == QpState::Err || qp.state == QpState::Sqer) {
        qps_.flush_sq(qp);
        return false;
    }
    if (qp.state != QpState::Rts) {
        return false;
    }
    be32 snd;
    if (!dev_.dma_read(qp.dbr + offsetof(DbRecord, snd), &snd, 4)) {
        dev_.guest_error("qpn=0x{:x} doorbell record 0x{:x} is not guest memory", qp.qpn, qp.dbr);
        qps_.to_error(qp, "doorbell record not readable");
        return false;
    }
    pi = static_cast<uint16_t>(snd.get());
    // The driver writes the doorbell record before the doorbell: the WQE
    // the last doorbell named must be behind the record's producer counter.
    // (Far behind is no error: the doorbell waited in the device's queue
    // while the driver went on posting, and the record moved on.) Checked
    // here, where the record is read anyway, not with a read of its own.
    if (qp.db_named_valid) {
        qp.db_named_valid = false;
        if (static_cast<uint16_t>(qp.db_named - pi) < 0x8000) {
            dev_.guest_error(
                "qpn=0x{:x} doorbell names WQE 0x{:x} but the doorbell record's producer counter is 0x{:x}", qp.qpn,
                qp.db_named, pi);
        }
    }
    const uint32_t nbb = qp.sq_wqebbs();
    HCA_TRACE(dev_, wqe_dbr, .qpn = qp.qpn, .sq_pi = pi, .sq_ci = qp.sq_ci,
              .posted = static_cast<uint16_t>(pi - qp.sq_ci));
    if (static_cast<uint16_t>(pi - qp.sq_ci) > nbb) {
        dev_.guest_error("qpn=0x{:x} SQ producer 0x{:x} is more than {} WQEBBs ahead of the consumer 0x{:x}", qp.qpn,
                         pi, nbb, qp.sq_ci);
        qps_.to_error(qp, "SQ producer counter out of range");
        return false;
    }
    return true;
}

// The one WQE loop of every transport: fetch, decode and check each posted
// WQE, then hand it to its transport (execute_wqe()). A connected QP first
// sends what earlier messages still owe, and its WQEs may wait for a fence
// or a read credit.
void SendQueue::process(Qp &qp) {
    if (qp.no_sq) {
        // No WQEs, but maybe the device's own messages (tag matching's
        // rendezvous READ and FIN) to send.
        if (qp.connected() && qp.state == QpState::Rts && !qp.pf.req_token) {
            qps_.requester().pump(qp);
        }
        return;
    }
    uint16_t pi = 0;
    if (!sq_producer(qp, pi)) {
        return;
    }
    if (qp.pf.req_token) {
        return;  // a page fault holds the send queue until PAGE_FAULT_RESUME
    }
    if (qp.connected()) {
        if (!qps_.requester().pump(qp)) {
            return;  // earlier messages are still going out
        }
    }
    while (qp.sq_ci != pi && qp.state == QpState::Rts && !qp.sigerr_draining) {
        if (!may_work()) {
            defer(qp);
            return;
        }
        const uint16_t index = qp.sq_ci;
        if (qp.bf_copy_valid && qp.bf_copy == index) {
            await_copy(qp, index);
            return;
        }
        uint32_t ds = 0, bbs = 0;
        Fetch fetched = fetch_wqe(qp, index, pi, ds, bbs);
        if (const Fault *f = fetched == Fetch::Ok ? dev_.faults.hit(FaultKind::WqeDmaError, {.qpn = qp.qpn}) : nullptr) {
            dev_.faults.fired(*f, fmt::format("qpn=0x{:x} index=0x{:x}: WQE fetch failed", qp.qpn, index));
            fetched = Fetch::NotReadable;
        }
        if (fetched == Fetch::NotReadable) {
            // The HCA cannot read the WQE, so it cannot complete it: a local
            // work queue catastrophic error (IBA 11.6.3.1) tells the QP's
            // owner; its WRs are flushed.
            qps_.to_error(qp, "WQE not readable");
            dev_.eqs.post_event(kEventWqCatastrophic, 0, EqeData::qp(qp.qpn));
            return;
        }
        if (fetched == Fetch::BadSize) {
            consume_wqe(qp, 1);
            req_err_cqe(dev_, qp, index, wqe_buf_[3], kSyndLocalQpOp);
            qps_.to_error(qp, "bad WQE size");
            return;
        }
        const SqWqe w = SqWqe::decode(index, {wqe_buf_.data(), ds * 16});
        if (qp.connected() && qps_.requester().must_wait(qp, w)) {
            return;
        }
        consume_wqe(qp, bbs);
        spend();
        dev_.charge_wqe();
        if (!execute_wqe(qp, w)) {
            return;
        }
    }
    qps_.sigerr_drain_done(qp);
}

// Checks what every WQE must satisfy, then runs it on its transport.
// False if the send queue must stop (the QP failed, or the run budget ran
// out in the middle of a message).
bool SendQueue::execute_wqe(Qp &qp, const SqWqe &w) {
    HCA_TRACE(dev_, wqe_fetch, .qpn = qp.qpn, .index = w.index,
              .opcode = TraceNamed{wqe_opcode_name(w.opcode), w.opcode}, .opmod = w.opmod, .ds = w.bytes.size() / 16,
              .fence = w.fence, .ce = w.ce, .se = w.solicited, .imm = w.imm);
    if (w.wqe_index != w.index) {
        dev_.guest_error("qpn=0x{:x} WQE at slot 0x{:x} carries index 0x{:x}", qp.qpn, w.index, w.wqe_index);
    }
    if (w.qpn != qp.qpn) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x} names QPN 0x{:x}", qp.qpn, w.index, w.qpn);
        return fail_wqe(qp, w, kSyndLocalQpOp, "WQE for another QP");
    }
    if (const Fault *f = dev_.faults.hit(FaultKind::ErrorCqe, {.qpn = qp.qpn, .cqn = qp.cqn_snd})) {
        dev_.faults.fired(*f, fmt::format("qpn=0x{:x} index=0x{:x} opcode={} syndrome={}(0x{:x})", qp.qpn, w.index,
                                          wqe_opcode_name(w.opcode), cqe_syndrome_name(static_cast<uint8_t>(f->syndrome)),
                                          f->syndrome));
        return fail_wqe(qp, w, static_cast<uint8_t>(f->syndrome), "injected fault");
    }
    if (w.opcode == kWqeNop) {
        return local_done(qp, w);
    }
    if (qp.st == kQpRegUmr || (qp.connected() && w.opcode == kWqeUmr)) {
        // UMR QP work, or IB_WR_REG_MR / IB_WR_LOCAL_INV on a connected QP.
        uint8_t synd = kSyndLocalQpOp;
        if (w.opcode != kWqeUmr) {
            dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: opcode {} on the UMR QP", qp.qpn, w.index,
                             wqe_opcode_name(w.opcode));
        } else if (umr_.execute(qp, w, synd)) {
            return local_done(qp, w);
        }
        return fail_wqe(qp, w, synd, "UMR failed");
    }
    if (w.opcode == kWqeSetPsv && qp.st != kQpRegUmr) {
        uint8_t synd = kSyndLocalQpOp;
        if (set_psv(dev_, qp, w, synd)) {
            return local_done(qp, w);
        }
        return fail_wqe(qp, w, synd, "SET_PSV failed");
    }
    if (w.opcode == kWqeTagMatching && qp.st == kQpRc) {
        // A tag list operation on a tag-matching XRQ's command QP.
        uint8_t synd = kSyndLocalQpOp;
        if (qps_.tm().list_op(qp, w, synd)) {
            return true;
        }
        return fail_wqe(qp, w, synd, "bad tag list operation");
    }
    if (qp.connected()) {
        return qps_.requester().start(qp, w);
    }
    if (qp.ud_like()) {
        return send_ud(qp, w);
    }
    if (qp.st == kQpSq) {
        // No Ethernet (or IPoIB underlay) transmit path on an InfiniBand port.
        dev_.guest_error("sqn=0x{:x} WQE 0x{:x}: {} on an SQ object, which carries only NOPs here", qp.qpn, w.index,
                         wqe_opcode_name(w.opcode));
        return fail_wqe(qp, w, kSyndLocalQpOp, "SQ object: no transmit path");
    }
    dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: {} QPs have no send queue", qp.qpn, w.index, qp_type_name(qp.st));
    return fail_wqe(qp, w, kSyndLocalQpOp, "no send queue for this QP type");
}

// A WQE the requester could not carry out: its error CQE, and the QP goes
// to the error state (which flushes the WQEs behind it). A UD-like QP goes
// to SQ error instead: its send queue flushes, its receive queue works on,
// and SQERR2RTS resumes it (IBA 10.3.1; ipoib_qp_state_validate_work()
// recovers IPoIB's QP this way).
bool SendQueue::fail_wqe(Qp &qp, const SqWqe &w, uint8_t synd, const char *why) {
    fail_at(qp, w.index, qp.sq_ci, w.opcode, synd, why);  // the WQE is consumed already
    return false;
}

// A datagram's gather failed. At a page that is not present the send
// queue stands still at the WQE (not consumed) until PAGE_FAULT_RESUME;
// an LSO's datagrams before the page go again after it.
bool SendQueue::gather_failed(Qp &qp, const SqWqe &w, uint8_t synd, uint32_t done) {
    if (synd == kSyndPageFault) {
        const auto next = static_cast<uint16_t>(w.index + std::max<size_t>(1, (w.bytes.size() + kWqeBb - 1) / kWqeBb));
        if (dev_.odp.requester(qp, PfType::ReqSendOrWrite, w.index, w.opcode, done, next)) {
            // Back to the WQE (its BlueFlame copy went when it was
            // consumed: it is fetched from memory again).
            qp.sq_ci = w.index;
            return false;
        }
        synd = kSyndLocalProt;
    }
    return fail_wqe(qp, w, synd, "send gather failed");
}

void SendQueue::fail_at(Qp &qp, uint16_t index, uint16_t next, uint8_t opcode, uint8_t synd, const char *why) {
    req_err_cqe(dev_, qp, index, opcode, synd);
    consume_to(qp, next);
    if (qp.ud_like()) {
        qps_.to_sq_error(qp, why);
    } else {
        qps_.to_error(qp, why);
    }
}

// A local operation (NOP, UMR) is done. On a connected QP its CQE comes in
// order behind the messages still outstanding.
bool SendQueue::local_done(Qp &qp, const SqWqe &w) {
    if (!qp.connected()) {
        req_cqe(dev_, qp, w.index, w.opcode, 0, w.signaled, false);
        return true;
    }
    qps_.requester().local_done(qp, w);
    return true;
}

// The Ethernet segment of an IPoIB offload QP's WQE, after the datagram
// segment and its pad (hw/mlx5/wr.c handle_qpt_ud(), set_eth_seg()): the
// checksums to compute, and for LSO the MSS and the packet headers, inline.
// Returns the offset of the data segments that follow, 0 if the segment
// overruns the WQE.
size_t SendQueue::parse_eth_seg(Qp &qp, const SqWqe &w, EthOffload &eo) {
    const size_t at = sizeof(CtrlSeg) + sizeof(AvSeg) + kEthPadLen;
    if (w.bytes.size() < at + sizeof(EthSeg)) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x} of an IPoIB offload QP has no Ethernet segment", qp.qpn, w.index);
        return 0;
    }
    EthSeg e;
    std::memcpy(&e, w.bytes.data() + at, sizeof(e));
    const size_t hdr_len = e.inline_hdr_sz.get();
    const size_t hdr_at = at + offsetof(EthSeg, inline_hdr_start);
    const size_t end = at + ((sizeof(EthSeg) - sizeof(e.inline_hdr_start) + hdr_len + 15) & ~size_t{15});
    if (end > w.bytes.size()) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: inline header of {} bytes overruns the WQE ({} bytes)", qp.qpn,
                         w.index, hdr_len, w.bytes.size());
        return 0;
    }
    eo.cs_flags = e.cs_flags;
    eo.mss = e.mss.get();
    eo.hdr = w.bytes.subspan(hdr_at, hdr_len);
    HCA_TRACE(dev_, wqe_eth, .qpn = qp.qpn, .cs_flags = eo.cs_flags, .mss = eo.mss, .inline_hdr_sz = hdr_len,
              .hdr = eo.hdr.first(std::min<size_t>(hdr_len, 64)));
    return end;
}

// The address vector of a UD WQE as the headers of its datagrams (the PSN
// is the caller's).
void SendQueue::ud_spec(Qp &qp, const SqWqe &w, const AvSeg &av, iba::PacketSpec &s) {
    Port &port = dev_.port(qp.path.port);
    s.sl = av.stat_rate_sl & 0x0f;
    s.vl = qp.st == kQpQp0 ? 15 : port.sl2vl(s.sl);
    s.dlid = av.rlid.get();
    s.slid = static_cast<uint16_t>(port.lid() | (av.fl_mlid & 0x7f & ((1u << port.lmc()) - 1)));
    if (s.dlid == iba::kPermissiveLid && port.lid() == 0) {
        s.slid = iba::kPermissiveLid;
    }
    const uint32_t gf = av.grh_gid_fl.get();
    s.grh = (gf >> 30) & 1;
    if (s.grh) {
        s.tclass = av.tclass;
        s.flow_label = gf & 0xfffff;
        s.hop_limit = av.hop_limit;
        s.sgid = port.gid((gf >> 20) & 0xff);
        std::memcpy(s.dgid.data(), av.rgid, 16);
    }
    s.opcode = iba::kUd | (w.opcode == kWqeSendImm ? iba::kSendOnlyImm : iba::kSendOnly);
    s.se = w.solicited;
    s.pkey = qp.st == kQpQp0 ? 0xffff : port.pkey(qp.path.pkey_index);
    s.dqpn = av.dqp_dct.get() & 0xffffff;
}

bool SendQueue::send_ud(Qp &qp, const SqWqe &w) {
    const bool lso = w.opcode == kWqeLso && qp.ipoib_offload;
    if (w.opcode != kWqeSend && w.opcode != kWqeSendImm && !lso) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: opcode {} on a {} QP", qp.qpn, w.index, wqe_opcode_name(w.opcode),
                         qp_type_name(qp.st));
        return fail_wqe(qp, w, kSyndLocalQpOp, "opcode not valid for the QP type");
    }
    if (w.bytes.size() < sizeof(CtrlSeg) + sizeof(AvSeg)) {
        dev_.guest_error("qpn=0x{:x} UD WQE 0x{:x} has no datagram segment", qp.qpn, w.index);
        return fail_wqe(qp, w, kSyndLocalQpOp, "UD WQE without address vector");
    }
    AvSeg av;
    std::memcpy(&av, w.bytes.data() + sizeof(CtrlSeg), sizeof(av));
    EthOffload eo;
    size_t segs_at = sizeof(CtrlSeg) + sizeof(AvSeg);
    if (qp.ipoib_offload) {
        segs_at = parse_eth_seg(qp, w, eo);
        if (!segs_at) {
            return fail_wqe(qp, w, kSyndLocalLength, "Ethernet segment overruns the WQE");
        }
    }
    uint8_t synd = 0;
    if (!parse_data_segs(dev_, qp, w.bytes.subspan(segs_at), ud_msg_, synd) ||
        !sig_gather(dev_, qp, w.index, ud_msg_, synd)) {
        return fail_wqe(qp, w, synd, "bad send WQE");
    }
    Port &port = dev_.port(qp.path.port);
    const uint32_t mtu = 128u << std::min<uint8_t>(port.neighbor_mtu(), qp.mtu ? qp.mtu : 5);
    const uint64_t len = eo.hdr.size() + ud_msg_.length();
    if (!lso && len > mtu) {
        dev_.guest_error("qpn=0x{:x} UD message of {} bytes exceeds the path MTU {}", qp.qpn, len, mtu);
        return fail_wqe(qp, w, kSyndLocalLength, "UD message longer than the MTU");
    }
    const uint32_t av_qkey = av.qkey.get();
    // IBA 10.2.5: a Q_Key with the high bit set means "use the QP's own Q_Key".
    const uint32_t qkey = (av_qkey & 0x80000000u) ? qp.qkey : av_qkey;
    iba::PacketSpec s;
    ud_spec(qp, w, av, s);
    iba::ExtHeaders ext;
    auto &deth = ext.add<iba::Deth>();
    deth.qkey.set(qkey);
    deth.sqpn.set(qp.ib_qpn());
    if (w.opcode == kWqeSendImm) {
        ext.add<iba::ImmDt>().data.set(w.imm);
    }
    HCA_TRACE(dev_, wqe_datagram, .qpn = qp.qpn, .dlid = s.dlid, .dqpn = s.dqpn, .qkey = qkey, .sl = s.sl, .grh = s.grh,
              .dgid = trace_opt(s.grh, s.dgid));
    if (lso) {
        return send_lso(qp, w, s, ext.bytes(), eo, mtu);
    }
    // The payload (the inline header, then the gather list) is gathered
    // straight into the packet.
    s.psn = qp.next_send_psn;
    Packet pkt = dev_.new_packet();
    uint8_t *at = iba::build_headers(pkt.bytes, s, ext.bytes(), len);
    if (!eo.hdr.empty()) {
        std::memcpy(at, eo.hdr.data(), eo.hdr.size());
    }
    if (!gather(dev_, qp, w.index, ud_msg_, 0, static_cast<uint32_t>(ud_msg_.length()), at + eo.hdr.size(), chunks_,
                synd)) {
        dev_.recycle(std::move(pkt));
        return gather_failed(qp, w, synd, 0);
    }
    if (eo.cs_flags & (ipoib::kCsumL3 | ipoib::kCsumL4)) {
        ipoib::fill_checksums({at, len}, eo.cs_flags);
    }
    qp.next_send_psn = (qp.next_send_psn + 1) & 0xffffff;
    ++qp.sent;
    dev_.transmit(std::move(pkt), qp.qpn, w.index);
    req_cqe(dev_, qp, w.index, w.opcode, static_cast<uint32_t>(len), w.signaled, s.se);
    return true;
}

// A large send (MLX5_OPCODE_LSO): the gather list cut into MSS-sized
// pieces, each sent as a datagram behind a copy of the inline TCP/IP
// header with its lengths, IPv4 ID, sequence number, flags and checksums
// fixed for that piece (ipoib::lso_segment()).
bool SendQueue::send_lso(Qp &qp, const SqWqe &w, iba::PacketSpec &s, std::span<const uint8_t> ext, const EthOffload &eo,
                         uint32_t mtu) {
    ipoib::Headers h;
    const size_t hlen = eo.hdr.size();
    const uint64_t data = ud_msg_.length();
    const char *bad = nullptr;
    if (!ipoib::parse(eo.hdr, h, false) || h.proto != ipoib::kProtoTcp || h.l4 + h.l4_len != hlen) {
        bad = "the inline header is not an IPoIB header, IP header and TCP header";
    } else if (eo.mss == 0 || hlen + eo.mss > mtu) {
        bad = "header and MSS do not fit the path MTU";
    } else if (data > kMaxLsoBytes || (data + eo.mss - 1) / eo.mss > kMaxLsoSegments) {
        bad = "more data or segments than a large send may have";
    }
    if (bad) {
        dev_.guest_error("qpn=0x{:x} LSO WQE 0x{:x} (header {} bytes, mss {}, {} bytes of data, MTU {}): {}", qp.qpn,
                         w.index, hlen, eo.mss, data, mtu, bad);
        return fail_wqe(qp, w, kSyndLocalLength, "bad large send");
    }
    const uint32_t n = std::max<uint32_t>(1, static_cast<uint32_t>((data + eo.mss - 1) / eo.mss));
    const bool se = s.se;
    uint8_t synd = 0;
    for (uint32_t k = 0; k < n; ++k) {
        const uint32_t off = k * eo.mss;
        const uint32_t chunk = static_cast<uint32_t>(std::min<uint64_t>(eo.mss, data - off));
        s.psn = qp.next_send_psn;
        s.se = se && k + 1 == n;
        Packet pkt = dev_.new_packet();
        uint8_t *at = iba::build_headers(pkt.bytes, s, ext, hlen + chunk);
        std::memcpy(at, eo.hdr.data(), hlen);
        if (!gather(dev_, qp, w.index, ud_msg_, off, chunk, at + hlen, chunks_, synd)) {
            dev_.recycle(std::move(pkt));
            return gather_failed(qp, w, synd, off);
        }
        ipoib::lso_segment({at, hlen + chunk}, h, k, off, k == 0, k + 1 == n);
        qp.next_send_psn = (qp.next_send_psn + 1) & 0xffffff;
        ++qp.sent;
        dev_.transmit(std::move(pkt), qp.qpn, w.index);
    }
    HCA_TRACE(dev_, wqe_lso, .qpn = qp.qpn, .index = w.index, .segments = n, .mss = eo.mss, .hdr_len = hlen,
              .data = data);
    req_cqe(dev_, qp, w.index, w.opcode, static_cast<uint32_t>(hlen + data), w.signaled, se);
    return true;
}

}  // namespace hca
