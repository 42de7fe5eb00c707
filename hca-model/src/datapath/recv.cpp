// The receive side (responder) for UD, QP0 and QP1: Q_Key and P_Key checks,
// the next receive WQE from the RQ (doorbell record) or the SRQ (linked
// list), scatter of the GRH area and the payload through memory keys, and
// the responder CQE.
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "be.h"
#include "datapath/common.h"
#include "datapath/ipoib_offload.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

void Receiver::receive(const Packet &pkt, const iba::PacketView &v) {
    const uint32_t dqpn = v.dqpn();
    const bool ud = (v.opcode() & 0xe0) == iba::kUd;
    if (dqpn == iba::kMulticastQpn) {
        if (!ud || !v.grh) {
            dev_.port(1).counters().rcv_errors++;
            return;
        }
        auto it = qps_.mcgs().find(v.grh->dgid);
        if (it == qps_.mcgs().end()) {
            HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .dgid = v.grh->dgid,
                      .reason = "no QP attached to the multicast group");
            return;
        }
        const std::set<uint32_t> members = it->second;  // a receive may not change the group
        for (uint32_t qpn : members) {
            if (Qp *qp = qps_.find(qpn)) {
                receive_ud(*qp, pkt, v);
            }
        }
        return;
    }
    Qp *qp = nullptr;
    if (dqpn == 0) {
        qp = v.vl() == 15 ? qps_.special_qp(kQpQp0) : nullptr;
    } else if (dqpn == 1) {
        qp = qps_.special_qp(kQpQp1);
    } else {
        qp = qps_.find(dqpn);
    }
    if (!qp) {
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = dqpn, .reason = "no such QP");
        return;
    }
    if (qp->st == kQpDct) {
        // A DC request: the context of its initiator answers it.
        if (Qp *ctx = qps_.dc_context(*qp, pkt, v)) {
            ++qp->received;
            qps_.responder().rx(*ctx, pkt, v);
        }
        return;
    }
    if (!ud) {
        if (!qp->connected()) {
            ++qp->dropped;
            return;
        }
        const uint8_t op = v.opcode() & 0x1f;
        const bool response = op == iba::kAck || op == iba::kAtomicAck ||
                              (op >= iba::kReadRespFirst && op <= iba::kReadRespOnly);
        if (response) {
            qps_.requester().rx(*qp, pkt, v);
        } else {
            qps_.responder().rx(*qp, pkt, v);
        }
        return;
    }
    if (!qp->ud_like()) {
        ++qp->dropped;
        return;
    }
    receive_ud(*qp, pkt, v);
}

bool Receiver::next_recv_wqe(Qp &qp, uint64_t &addr, uint32_t &stride, uint16_t &index, Srq *&srq) {
    srq = nullptr;
    if (qp.rq_type == kRqSrq) {
        srq = dev_.srqs.find(qp.srqn);
        if (!srq) {
            return false;
        }
        auto i = dev_.srqs.take(*srq);
        if (!i) {
            return false;
        }
        index = *i;
        // Skip the next segment: scatter entries follow it.
        addr = dev_.srqs.wqe_addr(*srq, index, sizeof(SrqNextSeg));
        stride = srq->stride - static_cast<uint32_t>(sizeof(SrqNextSeg));
        return true;
    }
    if (qp.rq_type != kRqRegular) {
        return false;
    }
    be32 rcv;
    if (!dev_.dma_read(qp.dbr + offsetof(DbRecord, rcv), &rcv, 4)) {
        return false;
    }
    const uint16_t pi = static_cast<uint16_t>(rcv.get());
    if (pi == qp.rq_ci) {
        return false;
    }
    if (static_cast<uint16_t>(pi - qp.rq_ci) > qp.rq_wqes()) {
        dev_.guest_error("qpn=0x{:x} RQ producer 0x{:x} is more than {} WQEs ahead of 0x{:x}", qp.qpn, pi,
                         qp.rq_wqes(), qp.rq_ci);
    }
    index = qp.rq_ci++;
    addr = qp.buf.addr(uint64_t{index & (qp.rq_wqes() - 1)} * qp.rq_stride);
    stride = qp.rq_stride;
    return true;
}

void Receiver::give_back(Qp &qp, uint16_t index, Srq *srq) {
    if (srq) {
        dev_.srqs.give_back(*srq, index);
    } else if (static_cast<uint16_t>(qp.rq_ci - 1) == index) {
        --qp.rq_ci;
    }
}

// May this UD, QP0 or QP1 take the packet (state, Q_Key, P_Key)? Others
// are dropped and counted.
bool Receiver::ud_accepts(Qp &qp, const Packet &pkt, const iba::PacketView &v) {
    Port &port = dev_.port(qp.path.port);
    if (!qp.receives()) {
        ++qp.dropped;
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .state = qp_state_name(qp.state),
                  .reason = "the QP does not take packets in this state");
        return false;
    }
    const uint32_t qkey = v.deth->qkey.get();
    if (qp.st == kQpQp1 ? qkey != iba::mad::kQp1Qkey : (qp.st == kQpUd && qkey != qp.qkey)) {
        ++port.counters().qkey_violations;
        ++qp.dropped;
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .qkey = qkey, .expected = qp.qkey,
                  .reason = "the Q_Key does not match the QP's");
        return false;
    }
    if (qp.st != kQpQp0 && !port.pkey_ok(v.pkey())) {
        ++port.counters().pkey_violations;
        ++qp.dropped;
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .pkey = v.pkey(), .reason = "the P_Key is not in the table");
        return false;
    }
    return true;
}

// The scatter entries of the receive WQE at addr: until the
// MLX5_INVALID_LKEY terminator or the stride. False if it is not guest memory.
bool Receiver::read_recv_sges(uint64_t addr, uint32_t stride, SgeList &out) {
    out.clear();
    rx_segs_.resize(stride / sizeof(DataSeg));
    if (!rx_segs_.empty() && !dev_.dma_read(addr, rx_segs_.data(), rx_segs_.size() * sizeof(DataSeg))) {
        return false;
    }
    for (const DataSeg &d : rx_segs_) {
        if (d.lkey.get() == kInvalidLkey) {
            break;
        }
        if (d.byte_count.get()) {
            out.push_back({d.lkey.get(), d.addr.get(), d.byte_count.get()});
        }
    }
    return true;
}

// Writes a datagram into the receive WQE's scatter list: the first 40
// bytes receive the GRH (or stay untouched without one), then the payload
// (IBA 11.4.1.1). Returns 0 or the error CQE's syndrome.
uint8_t Receiver::ud_scatter(Qp &qp, uint32_t pd, uint16_t index, const iba::PacketView &v) {
    const size_t need = 40 + v.payload.size();
    size_t done = 0;
    for (const Sge &sge : ud_sges_) {
        if (done >= need) {
            break;
        }
        const uint32_t take = static_cast<uint32_t>(std::min<size_t>(sge.len, need - done));
        chunks_.clear();
        const XlatError e = dev_.mkeys.translate(sge.lkey, pd, sge.addr, take, kAccLocalWrite, chunks_);
        if (e == XlatError::PageFault) {
            return kSyndPageFault;
        }
        if (e != XlatError::None) {
            dev_.guest_error("qpn=0x{:x} receive SGE lkey=0x{:x} addr=0x{:x} len={}: {}", qp.qpn, sge.lkey, sge.addr,
                             take, xlat_error_name(e));
            return kSyndLocalProt;
        }
        for (const DmaChunk &ch : chunks_) {
            uint64_t a = ch.addr;
            uint32_t n = ch.len;
            if (done < 40) {
                const uint32_t m = static_cast<uint32_t>(std::min<size_t>(n, 40 - done));
                if (v.grh) {
                    dev_.mem_write(a, reinterpret_cast<const uint8_t *>(v.grh) + done, m);
                }
                a += m;
                n -= m;
                done += m;
            }
            if (n && !dev_.mem_write(a, v.payload.data() + (done - 40), n)) {
                return kSyndLocalProt;
            }
            done += n;
        }
    }
    if (done < need) {
        dev_.guest_error("qpn=0x{:x} receive WQE 0x{:x} holds {} bytes, the message needs {}", qp.qpn, index, done,
                         need);
        return kSyndLocalLength;
    }
    return 0;
}

void Receiver::receive_ud(Qp &qp, const Packet &pkt, const iba::PacketView &v) {
    if (!ud_accepts(qp, pkt, v)) {
        return;
    }
    uint64_t wqe = 0;
    uint32_t stride = 0;
    uint16_t index = 0;
    Srq *srq = nullptr;
    if (!next_recv_wqe(qp, wqe, stride, index, srq)) {
        ++qp.dropped;
        dev_.qcounters.add(qp.counter_set, QCounter::OutOfBuffer);
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .reason = "no receive WQE posted");
        return;
    }
    if (!read_recv_sges(wqe, stride, ud_sges_)) {
        qps_.to_error(qp, "receive WQE not readable");
        return;
    }
    const uint32_t srqn = srq ? srq->srqn : 0;
    if (uint8_t synd = ud_scatter(qp, srq ? srq->pd : qp.pd, index, v)) {
        if (synd == kSyndPageFault) {
            // The datagram is lost; the WQE waits for its pages (odp.h).
            if (dev_.odp.receive(qp, index, srqn, static_cast<uint16_t>(v.payload.size()))) {
                give_back(qp, index, srq);
                ++qp.dropped;
                HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = qp.qpn, .reason = "receive WQE page fault");
                return;
            }
            synd = kSyndLocalProt;
        }
        resp_err_cqe(dev_, qp, qp.cqn_rcv, index, srqn, synd, pkt.id);
        ++qp.dropped;
        return;
    }
    const uint32_t byte_cnt = static_cast<uint32_t>(40 + v.payload.size());
    Cqe64 cqe{};
    const bool imm = v.imm != nullptr;
    cqe.ml_path = static_cast<uint8_t>(v.dlid() & ((1u << dev_.port(qp.path.port).lmc()) - 1));
    cqe.slid.set(v.slid());
    cqe.flags_rqpn.set((v.grh ? 1u : 0u) << 28 | uint32_t{v.sl()} << 24 | (v.deth->sqpn.get() & 0xffffff));
    cqe.srqn.set(srqn);
    // QP1 receives report the packet's P_Key (hw/cq.c maps it back to an index);
    // other receives carry the immediate or P_Key index 0.
    cqe.imm_inval_pkey.set(qp.st == kQpQp1 ? v.pkey() : (imm ? v.imm->get() : 0));
    cqe.byte_cnt.set(byte_cnt);
    cqe.sop_drop_qpn.set(qp.qpn);
    cqe.wqe_counter.set(index);
    cqe.op_own = static_cast<uint8_t>((imm ? kCqeRespSendImm : kCqeRespSend) << 4 | (v.se() ? 2 : 0));
    if (qp.ipoib_offload) {
        // The checksums were verified on the way in (hw/mlx5/cq.c reports
        // IB_WC_IP_CSUM_OK when both L3_OK and L4_OK are set).
        const ipoib::RxFlags f = ipoib::rx_flags(v.payload);
        cqe.hds_ip_ext = f.hds_ip_ext;
        cqe.l4_l3_hdr_type = f.l4_l3_hdr_type;
    }
    ++qp.received;
    HCA_TRACE(dev_, cqe_cqe, .cqn = qp.cqn_rcv, .qpn = qp.qpn, .kind = imm ? "RESP_SEND_IMM" : "RESP_SEND",
              .wqe_counter = index, .byte_cnt = byte_cnt, .slid = v.slid(), .src_qp = v.deth->sqpn.get() & 0xffffff,
              .sl = v.sl(), .grh = v.grh != nullptr, .hds_ip_ext = cqe.hds_ip_ext,
              .pkt = trace_opt(pkt.id != 0, pkt.id));
    dev_.cqs.post(qp.cqn_rcv, cqe, v.se());
}

}  // namespace hca
