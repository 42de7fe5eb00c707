// The send side (requester): SQ doorbells, WQE fetch through the QP buffer's
// page list (a WQE may wrap the ring), segment decoding, gathering through
// memory keys, packet construction and requester CQEs.
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "device.h"
#include "qp.h"

namespace hca {

namespace {

std::string hex(std::span<const uint8_t> b) { return to_hex(b); }

}  // namespace

// Writes at UAR +0x800.. (hw/mlx5 mlx5r_ring_db(), libmlx5 post_send_db()
// and mlx5_bf_copy(), mem.c post_send_nop()). The first 8 bytes of a
// BlueFlame half-buffer are the doorbell: the head of the last posted WQE
// (opmod_idx_opcode, qpn_ds). Further contiguous writes in the same
// half-buffer carry the rest of that WQE (BlueFlame); once ds*16 bytes have
// arrived the WQE is executed from them instead of being fetched. Writes
// are only recorded here; the send queues run once the batch of doorbells
// has been taken in (process_pending()).
void QpTable::sq_doorbell(uint32_t uar, uint32_t offset, const uint8_t *data, unsigned size) {
    const uint32_t rel = offset - UarTable::kBfRegion;
    const uint32_t in_buf = rel % kBfBufSize;
    const uint32_t buf_key = uar << 4 | rel / kBfBufSize;
    if (in_buf == 0 && size == 8) {
        doorbell_head(uar, offset, buf_key, load_be32(data), load_be32(data + 4));
        return;
    }
    if (in_buf == 0 && size == 4) {
        // First 32-bit half; the doorbell acts when the second half arrives.
        pending_half_ = {uar, offset, load_be32(data), true};
        return;
    }
    if (in_buf == 4 && size == 4 && pending_half_.valid && pending_half_.uar == uar &&
        pending_half_.offset + 4 == offset) {
        pending_half_.valid = false;
        doorbell_head(uar, offset - 4, buf_key, pending_half_.value, load_be32(data));
        return;
    }
    // A BlueFlame continuation.
    auto it = bf_.find(buf_key);
    if (it == bf_.end() || !it->second.active || it->second.got != in_buf) {
        dev_.guest_error("write of {} bytes at UAR {} +0x{:x}: not the continuation of a BlueFlame write", size, uar,
                         offset);
        if (it != bf_.end()) {
            it->second.active = false;
        }
        return;
    }
    BfCapture &cap = it->second;
    if (in_buf + size > cap.expected) {
        // Bytes past the WQE (the rest of a 64-byte chunk): ignored.
        cap.got = in_buf + size;
        return;
    }
    std::memcpy(cap.bytes.data() + in_buf, data, size);
    cap.got = in_buf + size;
    if (cap.got == cap.expected) {
        Qp *qp = find(cap.qpn);
        if (qp && !qp->no_sq && static_cast<uint16_t>(cap.index - qp->sq_ci) < qp->sq_wqebbs()) {
            if (dev_.tracer().on(kTrUar)) {
                dev_.trace(kTrUar, "blueflame uar={} offset=0x{:x} qpn=0x{:x} wqe_index=0x{:x} bytes={} data={}", uar,
                           offset - in_buf, cap.qpn, cap.index, cap.expected,
                           hex({cap.bytes.data(), cap.expected}));
            }
            qp->bf_wqes[cap.index].assign(cap.bytes.begin(), cap.bytes.begin() + cap.expected);
            ++bf_executed_;
            // A bfreg that carries BlueFlame copies alternates its two
            // halves on every doorbell (bf->offset ^= buf_size).
            if (cap.prev_half == static_cast<int8_t>(buf_key & 1)) {
                dev_.guest_error("BlueFlame alternation broken: doorbells in a row to half {} of bfreg {} of uar {}",
                                 buf_key & 1, (buf_key >> 1) & 7, uar);
            }
        }
        // Keep got past expected so the rest of the chunk is swallowed.
    }
}

void QpTable::doorbell_head(uint32_t uar, uint32_t offset, uint32_t buf_key, uint32_t head, uint32_t qpn_ds) {
    const uint32_t qpn = qpn_ds >> 8;
    const uint16_t index = static_cast<uint16_t>(head >> 8);
    const uint32_t ds = qpn_ds & 0x3f;
    Qp *qp = find(qpn);
    dev_.trace(kTrUar, "sq_doorbell uar={} offset=0x{:x} qpn=0x{:x} wqe_index=0x{:x} opcode={} ds={}", uar, offset,
               qpn, index, wqe_opcode_name(head & 0xff), ds);
    BfCapture &cap = bf_[buf_key];
    cap.active = false;
    {
        auto [it, fresh] = bf_last_half_.try_emplace(buf_key >> 1, static_cast<uint8_t>(buf_key & 1));
        cap.prev_half = fresh ? -1 : static_cast<int8_t>(it->second);
        it->second = static_cast<uint8_t>(buf_key & 1);
    }
    if (!qp) {
        dev_.guest_error("SQ doorbell for QP 0x{:x} that does not exist (uar={} +0x{:x})", qpn, uar, offset);
        return;
    }
    if (qp->uar != uar) {
        dev_.guest_error("SQ doorbell for qpn=0x{:x} through uar={}, but the QP belongs to uar={}: ignored", qpn, uar,
                         qp->uar);
        return;
    }
    if (qp->no_sq) {
        dev_.guest_error("SQ doorbell for qpn=0x{:x}, which has no send queue", qpn);
        return;
    }
    // The driver writes the doorbell record before the doorbell: the WQE the
    // doorbell names must be behind the record's producer counter.
    if (uint8_t db[4]; qp->state == QpState::Rts && dev_.dma_read(qp->dbr + 4, db, 4)) {
        const uint16_t pi = static_cast<uint16_t>(load_be32(db));
        if (static_cast<uint16_t>(pi - index - 1) >= qp->sq_wqebbs()) {
            dev_.guest_error("qpn=0x{:x} doorbell names WQE 0x{:x} but the doorbell record's producer counter is 0x{:x}",
                             qpn, index, pi);
        }
    }
    if (dev_.fw.caps().gen(ifc::cmd_hca_cap::bf) && ds && ds * 16 <= kBfBufSize) {
        // May be the start of a BlueFlame copy of this WQE.
        cap.active = true;
        cap.qpn = qpn;
        cap.index = index;
        cap.expected = ds * 16;
        cap.got = 8;
        store_be32(cap.bytes.data(), head);
        store_be32(cap.bytes.data() + 4, qpn_ds);
    }
    if (!qp->sq_pending) {
        qp->sq_pending = true;
        sq_pending_.push_back(qpn);
    }
}

void QpTable::process_pending() {
    // Every turn spends budget or retires a QP from the ring; the bound on
    // turns is only a backstop.
    for (uint32_t turns = 0; !sq_pending_.empty() && dev_.budget_left() && turns < 4 * Device::kRunWqes; ++turns) {
        const uint32_t qpn = sq_pending_.front();
        sq_pending_.pop_front();
        if (Qp *qp = find(qpn)) {
            qp->sq_pending = false;
            quantum_ = kQuantum;
            process_sq(*qp);  // defer()s the QP to the back of the ring if work is left
        }
    }
    quantum_ = 0;
}

bool QpTable::may_work() const { return quantum_ > 0 && dev_.budget_left(); }

void QpTable::defer(Qp &qp) {
    if (!qp.sq_pending) {
        qp.sq_pending = true;
        sq_pending_.push_back(qp.qpn);
    }
    dev_.schedule();
}

// The WQE at index: the copy a BlueFlame write delivered, or WQEBBs
// fetched from the SQ buffer (a WQE may wrap from the last WQEBB to the
// first). Leaves it in wqe_buf_; bbs is the number of WQEBBs it occupies.
QpTable::Fetch QpTable::fetch_wqe(Qp &qp, uint16_t index, uint16_t pi, uint32_t &ds, uint32_t &bbs) {
    const uint32_t nbb = qp.sq_wqebbs();
    const uint32_t max_ds = static_cast<uint32_t>(dev_.fw.caps().gen(ifc::cmd_hca_cap::max_wqe_sz_sq)) / 16;
    if (!qp.bf_wqes.empty()) {
        auto it = qp.bf_wqes.find(index);
        if (it != qp.bf_wqes.end()) {
            wqe_buf_ = it->second;  // dropped by consume_wqe()
            ds = load_be32(wqe_buf_.data() + 4) & 0x3f;
            bbs = std::max<uint32_t>(1, (ds * 16 + kWqeBb - 1) / kWqeBb);
            dev_.trace(kTrWqe, "blueflame qpn=0x{:x} index=0x{:x}: executing the WQE from the BlueFlame write",
                       qp.qpn, index);
            return bbs > static_cast<uint16_t>(pi - index) ? Fetch::BadSize : Fetch::Ok;
        }
    }
    const uint64_t first = qp.sq_offset + uint64_t{index & (nbb - 1)} * kWqeBb;
    wqe_buf_.resize(kWqeBb);
    if (!dev_.dma_read(qp.buf.addr(first), wqe_buf_.data(), kWqeBb)) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x} is not guest memory", qp.qpn, index);
        return Fetch::NotReadable;
    }
    ds = load_be32(wqe_buf_.data() + 4) & 0x3f;
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

void QpTable::consume_wqe(Qp &qp, uint32_t bbs) {
    if (!qp.bf_wqes.empty()) {
        for (uint32_t b = 0; b < bbs; ++b) {
            qp.bf_wqes.erase(static_cast<uint16_t>(qp.sq_ci + b));
        }
    }
    qp.sq_ci = static_cast<uint16_t>(qp.sq_ci + bbs);
}

void QpTable::process_sq(Qp &qp) {
    if (qp.no_sq) {
        return;
    }
    if (qp.state == QpState::Err) {
        flush_sq(qp);
        return;
    }
    if (qp.state != QpState::Rts) {
        return;  // executed once the QP reaches RTS
    }
    uint8_t db[4];
    if (!dev_.dma_read(qp.dbr + 4, db, 4)) {
        dev_.guest_error("qpn=0x{:x} doorbell record 0x{:x} is not guest memory", qp.qpn, qp.dbr);
        to_error(qp, "doorbell record not readable");
        return;
    }
    const uint16_t pi = static_cast<uint16_t>(load_be32(db));
    const uint32_t nbb = qp.sq_wqebbs();
    dev_.trace(kTrWqe, "dbr qpn=0x{:x} sq_pi=0x{:x} sq_ci=0x{:x} posted={}", qp.qpn, pi, qp.sq_ci,
               static_cast<uint16_t>(pi - qp.sq_ci));
    if (static_cast<uint16_t>(pi - qp.sq_ci) > nbb) {
        dev_.guest_error("qpn=0x{:x} SQ producer 0x{:x} is more than {} WQEBBs ahead of the consumer 0x{:x}", qp.qpn,
                         pi, nbb, qp.sq_ci);
        to_error(qp, "SQ producer counter out of range");
        return;
    }
    if (qp.connected()) {
        rc_process_sq(qp, pi);
        return;
    }
    while (qp.sq_ci != pi && qp.state == QpState::Rts) {
        if (!may_work()) {
            defer(qp);
            return;
        }
        spend();
        dev_.charge_wqe();
        const uint16_t index = qp.sq_ci;
        uint32_t ds = 0, bbs = 0;
        switch (fetch_wqe(qp, index, pi, ds, bbs)) {
        case Fetch::Ok:
            break;
        case Fetch::NotReadable:
            to_error(qp, "WQE not readable");
            return;
        case Fetch::BadSize:
            qp.sq_ci = static_cast<uint16_t>(qp.sq_ci + 1);
            req_err_cqe(qp, index, wqe_buf_[3], kSyndLocalQpOp);
            to_error(qp, "bad WQE size");
            return;
        }
        consume_wqe(qp, bbs);
        execute_wqe(qp, index, {wqe_buf_.data(), ds * 16});
    }
}

bool QpTable::execute_wqe(Qp &qp, uint16_t index, std::span<const uint8_t> wqe) {
    CtrlSeg ctrl;
    std::memcpy(&ctrl, wqe.data(), sizeof(ctrl));
    const uint32_t hdr = ctrl.opmod_idx_opcode.get();
    const uint8_t opcode = static_cast<uint8_t>(hdr);
    const uint16_t wqe_index = static_cast<uint16_t>(hdr >> 8);
    const uint32_t wqe_qpn = ctrl.qpn_ds.get() >> 8;
    if (dev_.tracer().on(kTrWqe)) {
        dev_.trace(kTrWqe, "fetch qpn=0x{:x} index=0x{:x} opcode={}(0x{:x}) opmod=0x{:x} ds={} fence={} ce={} se={} "
                   "imm=0x{:08x}",
                   qp.qpn, index, wqe_opcode_name(opcode), opcode, hdr >> 24, wqe.size() / 16, ctrl.fm_ce_se >> 5,
                   (ctrl.fm_ce_se >> 2) & 3, (ctrl.fm_ce_se >> 1) & 1, ctrl.imm.get());
    }
    if (wqe_index != index) {
        dev_.guest_error("qpn=0x{:x} WQE at slot 0x{:x} carries index 0x{:x}", qp.qpn, index, wqe_index);
    }
    if (wqe_qpn != qp.qpn) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x} names QPN 0x{:x}", qp.qpn, index, wqe_qpn);
        req_err_cqe(qp, index, opcode, kSyndLocalQpOp);
        to_error(qp, "WQE for another QP");
        return false;
    }
    const bool signaled = (ctrl.fm_ce_se & kCeCqUpdate) != 0;
    if (opcode == kWqeNop) {
        req_cqe(qp, index, opcode, 0, signaled, false);
        return true;
    }
    if (qp.st == kQpRegUmr) {
        uint8_t synd = kSyndLocalQpOp;
        if (opcode != kWqeUmr) {
            dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: opcode {} on the UMR QP", qp.qpn, index, wqe_opcode_name(opcode));
        } else if (umr_wqe(qp, index, wqe, synd)) {
            req_cqe(qp, index, opcode, 0, signaled, false);
            return true;
        }
        req_err_cqe(qp, index, opcode, synd);
        to_error(qp, "UMR failed");
        return false;
    }
    if (qp.ud_like()) {
        if (opcode != kWqeSend && opcode != kWqeSendImm) {
            dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: opcode {} on a {} QP", qp.qpn, index, wqe_opcode_name(opcode),
                             qp_type_name(qp.st));
            req_err_cqe(qp, index, opcode, kSyndLocalQpOp);
            to_error(qp, "opcode not valid for the QP type");
            return false;
        }
        send_ud(qp, ctrl, wqe, index);
        return true;
    }
    dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: {} QPs have no send queue", qp.qpn, index, qp_type_name(qp.st));
    req_err_cqe(qp, index, opcode, kSyndLocalQpOp);
    to_error(qp, "no send queue for this QP type");
    return false;
}

// Data pointer and inline segments after the transport segments.
bool QpTable::gather(Qp &qp, std::span<const uint8_t> segs, std::vector<uint8_t> &payload, uint8_t &synd) {
    payload.clear();
    size_t off = 0;
    std::vector<DmaChunk> chunks;
    while (off + 4 <= segs.size()) {
        const uint32_t bc = load_be32(segs.data() + off);
        if (bc & kInlineSeg) {
            const uint32_t len = bc & 0x3ff;
            if (off + 4 + len > segs.size()) {
                synd = kSyndLocalLength;
                dev_.guest_error("qpn=0x{:x} inline segment of {} bytes overruns the WQE", qp.qpn, len);
                return false;
            }
            payload.insert(payload.end(), segs.begin() + off + 4, segs.begin() + off + 4 + len);
            dev_.trace(kTrWqe, "  inline qpn=0x{:x} len={} bytes={}", qp.qpn, len,
                       HexBytes{segs.subspan(off + 4, std::min<uint32_t>(len, 32))});
            off += (4 + len + 15) & ~size_t{15};
            continue;
        }
        if (off + sizeof(DataSeg) > segs.size()) {
            break;
        }
        DataSeg d;
        std::memcpy(&d, segs.data() + off, sizeof(d));
        off += sizeof(DataSeg);
        const uint32_t len = d.byte_count.get();
        const uint32_t lkey = d.lkey.get();
        const uint64_t addr = d.addr.get();
        dev_.trace(kTrWqe, "  data qpn=0x{:x} lkey=0x{:x} addr=0x{:x} len={}", qp.qpn, lkey, addr, len);
        if (len == 0) {
            continue;
        }
        if (payload.size() + len > (1u << 20)) {
            synd = kSyndLocalLength;
            return false;
        }
        chunks.clear();
        const XlatError e = dev_.mkeys.translate(lkey, qp.pd, addr, len, kAccLocalRead, chunks);
        if (e != XlatError::None) {
            dev_.trace(kTrMkey, "fail qpn=0x{:x} lkey=0x{:x} addr=0x{:x} len={}: {}", qp.qpn, lkey, addr, len,
                       xlat_error_name(e));
            dev_.guest_error("qpn=0x{:x} send SGE lkey=0x{:x} addr=0x{:x} len={}: {}", qp.qpn, lkey, addr, len,
                             xlat_error_name(e));
            synd = kSyndLocalProt;
            return false;
        }
        const size_t at = payload.size();
        payload.resize(at + len);
        size_t pos = at;
        for (const DmaChunk &ch : chunks) {
            if (!dev_.dma_read(ch.addr, payload.data() + pos, ch.len)) {
                dev_.guest_error("qpn=0x{:x} SGE lkey=0x{:x} translates to 0x{:x}, not guest memory", qp.qpn, lkey,
                                 ch.addr);
                synd = kSyndLocalProt;
                return false;
            }
            pos += ch.len;
        }
    }
    return true;
}

void QpTable::send_ud(Qp &qp, const CtrlSeg &ctrl, std::span<const uint8_t> wqe, uint16_t index) {
    const uint8_t opcode = static_cast<uint8_t>(ctrl.opmod_idx_opcode.get());
    if (wqe.size() < sizeof(CtrlSeg) + sizeof(AvSeg)) {
        dev_.guest_error("qpn=0x{:x} UD WQE 0x{:x} has no datagram segment", qp.qpn, index);
        req_err_cqe(qp, index, opcode, kSyndLocalQpOp);
        to_error(qp, "UD WQE without address vector");
        return;
    }
    AvSeg av;
    std::memcpy(&av, wqe.data() + sizeof(CtrlSeg), sizeof(av));
    uint8_t synd = 0;
    if (!gather(qp, wqe.subspan(sizeof(CtrlSeg) + sizeof(AvSeg)), payload_buf_, synd)) {
        req_err_cqe(qp, index, opcode, synd);
        to_error(qp, "send gather failed");
        return;
    }
    Port &port = dev_.port(qp.path.port);
    const uint32_t mtu = 128u << std::min<uint8_t>(port.neighbor_mtu(), qp.mtu ? qp.mtu : 5);
    if (payload_buf_.size() > mtu) {
        dev_.guest_error("qpn=0x{:x} UD message of {} bytes exceeds the path MTU {}", qp.qpn, payload_buf_.size(), mtu);
        req_err_cqe(qp, index, opcode, kSyndLocalLength);
        to_error(qp, "UD message longer than the MTU");
        return;
    }
    const uint32_t av_qkey = av.qkey.get();
    // IBA 10.2.5: a Q_Key with the high bit set means "use the QP's own Q_Key".
    const uint32_t qkey = (av_qkey & 0x80000000u) ? qp.qkey : av_qkey;
    iba::PacketSpec s;
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
    s.opcode = iba::kUd | (opcode == kWqeSendImm ? iba::kSendOnlyImm : iba::kSendOnly);
    s.se = (ctrl.fm_ce_se & kCtrlSolicited) != 0;
    s.pkey = qp.st == kQpQp0 ? 0xffff : port.pkey(qp.path.pkey_index);
    s.dqpn = av.dqp_dct.get() & 0xffffff;
    s.psn = qp.next_send_psn;
    qp.next_send_psn = (qp.next_send_psn + 1) & 0xffffff;
    uint8_t ext[12];
    store_be32(ext, qkey);
    store_be32(ext + 4, qp.ib_qpn());
    size_t ext_len = 8;
    if (opcode == kWqeSendImm) {
        store_be32(ext + 8, ctrl.imm.get());
        ext_len = 12;
    }
    if (dev_.tracer().on(kTrWqe)) {
        dev_.trace(kTrWqe, "  datagram qpn=0x{:x} dlid={} dqpn=0x{:x} qkey=0x{:x} sl={} grh={}{}", qp.qpn, s.dlid,
                   s.dqpn, qkey, s.sl, s.grh, s.grh ? fmt::format(" dgid={}", iba::gid_str(s.dgid)) : "");
    }
    Packet pkt;
    iba::build_into(pkt.bytes, s, {ext, ext_len}, payload_buf_);
    ++qp.sent;
    dev_.transmit(std::move(pkt), qp.qpn, index);
    req_cqe(qp, index, opcode, static_cast<uint32_t>(payload_buf_.size()), (ctrl.fm_ce_se & kCeCqUpdate) != 0, s.se);
}

void QpTable::req_cqe(Qp &qp, uint16_t index, uint8_t wqe_opcode, uint32_t byte_cnt, bool signaled, bool solicited) {
    if (!signaled) {
        return;
    }
    Cqe64 cqe{};
    cqe.byte_cnt.set(byte_cnt);
    cqe.sop_drop_qpn.set(uint32_t{wqe_opcode} << 24 | qp.qpn);
    cqe.wqe_counter.set(index);
    cqe.op_own = static_cast<uint8_t>(kCqeReq << 4);
    if (dev_.fault_cqe_opcode() && qp.st != kQpQp0 && qp.st != kQpQp1 && qp.st != kQpRegUmr &&
        wqe_opcode != kWqeNop) {
        // Deliberately wrong (--test-fault), on data-path work requests only
        // (not the management QPs, the UMR QP or mlx5_ib's NOP-based
        // write-combining probe) so the drivers load, the port comes up and
        // the tests reach their own checks.
        cqe.op_own = static_cast<uint8_t>(kCqeRespSend << 4);
    }
    dev_.trace(kTrCqe, "cqe cqn=0x{:x} qpn=0x{:x} REQ opcode={} wqe_counter=0x{:x} byte_cnt={}{}", qp.cqn_snd, qp.qpn,
               wqe_opcode_name(wqe_opcode), index, byte_cnt, PktRef{rx_pkt_});
    dev_.cqs.post(qp.cqn_snd, cqe, solicited);
}

void QpTable::req_err_cqe(Qp &qp, uint16_t index, uint8_t wqe_opcode, uint8_t syndrome) {
    ErrCqe e{};
    e.syndrome = syndrome;
    e.s_wqe_opcode_qpn.set(uint32_t{wqe_opcode} << 24 | qp.qpn);
    e.wqe_counter.set(index);
    e.op_own = static_cast<uint8_t>(kCqeReqErr << 4);
    dev_.trace(kTrCqe, "cqe cqn=0x{:x} qpn=0x{:x} REQ_ERR opcode={} wqe_counter=0x{:x} syndrome={}(0x{:x}){}",
               qp.cqn_snd, qp.qpn, wqe_opcode_name(wqe_opcode), index, cqe_syndrome_name(syndrome), syndrome,
               PktRef{rx_pkt_});
    dev_.cqs.post(qp.cqn_snd, reinterpret_cast<Cqe64 &>(e), true);
}

}  // namespace hca
