// What the data-path stages share: the CQE writers, a send WQE's data
// segments, gather and scatter through the memory keys, and the headers of
// connected-transport packets. Free functions over the device: each stage
// passes its QP, its own scratch and, for the trace, the packet that
// caused the work (0: none).
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "datapath/common.h"
#include "datapath/sig_xfer.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

void req_cqe(Device &dev, const Qp &qp, uint16_t index, uint8_t wqe_opcode, uint32_t byte_cnt, bool signaled,
             bool solicited, uint64_t pkt) {
    if (!signaled) {
        return;
    }
    Cqe64 cqe{};
    cqe.byte_cnt.set(byte_cnt);
    cqe.sop_drop_qpn.set(uint32_t{wqe_opcode} << 24 | qp.qpn);
    cqe.wqe_counter.set(index);
    cqe.op_own = static_cast<uint8_t>(kCqeReq << 4);
    if (dev.fault_cqe_opcode() && qp.st != kQpQp0 && qp.st != kQpQp1 && qp.st != kQpRegUmr && wqe_opcode != kWqeNop) {
        // Deliberately wrong (--test-fault), on data-path work requests only
        // (not the management QPs, the UMR QP or mlx5_ib's NOP-based
        // write-combining probe) so the drivers load, the port comes up and
        // the tests reach their own checks.
        cqe.op_own = static_cast<uint8_t>(kCqeRespSend << 4);
    }
    HCA_TRACE(dev, cqe_cqe, .cqn = qp.cqn_snd, .qpn = qp.qpn, .kind = "REQ", .opcode = wqe_opcode_name(wqe_opcode),
              .wqe_counter = index, .byte_cnt = byte_cnt, .pkt = trace_opt(pkt != 0, pkt));
    dev.cqs.post(qp.cqn_snd, cqe, solicited);
}

void req_err_cqe(Device &dev, const Qp &qp, uint16_t index, uint8_t wqe_opcode, uint8_t syndrome, uint64_t pkt) {
    ErrCqe e{};
    e.syndrome = syndrome;
    e.vendor_err_synd = cqe_vendor_syndrome(syndrome, true);
    e.s_wqe_opcode_qpn.set(uint32_t{wqe_opcode} << 24 | qp.qpn);
    e.wqe_counter.set(index);
    e.op_own = static_cast<uint8_t>(kCqeReqErr << 4);
    HCA_TRACE(dev, cqe_cqe, .cqn = qp.cqn_snd, .qpn = qp.qpn, .kind = "REQ_ERR", .opcode = wqe_opcode_name(wqe_opcode),
              .wqe_counter = index, .syndrome = TraceNamed{cqe_syndrome_name(syndrome), syndrome},
              .vendor = e.vendor_err_synd, .pkt = trace_opt(pkt != 0, pkt));
    dev.cqs.post(qp.cqn_snd, reinterpret_cast<Cqe64 &>(e), true);
    dev.qcounters.add_error_cqe(qp.counter_set, true, syndrome);
}

// A receive WQE that could not take its message: its error CQE.
void resp_err_cqe(Device &dev, const Qp &qp, uint32_t cqn, uint16_t index, uint32_t srqn, uint8_t synd, uint64_t pkt) {
    ErrCqe e{};
    e.syndrome = synd;
    e.vendor_err_synd = cqe_vendor_syndrome(synd, false);
    e.s_wqe_opcode_qpn.set(qp.cqe_qpn());
    e.wqe_counter.set(index);
    e.srqn.set(srqn);
    e.op_own = kCqeRespErr << 4;
    HCA_TRACE(dev, cqe_cqe, .cqn = cqn, .qpn = qp.qpn, .kind = "RESP_ERR", .wqe_counter = index,
              .syndrome = TraceNamed{cqe_syndrome_name(synd), synd}, .vendor = e.vendor_err_synd,
              .pkt = trace_opt(pkt != 0, pkt));
    dev.cqs.post(cqn, reinterpret_cast<Cqe64 &>(e), true);
    dev.qcounters.add_error_cqe(qp.counter_set, false, synd);
}

// The data pointer and inline segments that end a send WQE. Every segment
// is traced, empty ones too, so the trace accounts for all ds * 16 bytes
// of the WQE (./hcasim trace decode).
bool parse_data_segs(Device &dev, const Qp &qp, std::span<const uint8_t> segs, GatherList &out, uint8_t &synd) {
    out.clear();
    size_t off = 0;
    while (off + 4 <= segs.size()) {
        const uint32_t bc = load_be32(segs.data() + off);
        if (bc & kInlineSeg) {
            const uint32_t len = bc & 0x3ff;
            if (off + 4 + len > segs.size()) {
                dev.guest_error("qpn=0x{:x} inline segment of {} bytes overruns the WQE", qp.qpn, len);
                synd = kSyndLocalLength;
                return false;
            }
            const auto bytes = segs.subspan(off + 4, len);
            HCA_TRACE(dev, wqe_inline, .qpn = qp.qpn, .len = len, .bytes = bytes.first(std::min<uint32_t>(len, 32)));
            if (len) {
                out.sges.push_back({0, out.inline_data.size(), len, true});
                out.inline_data.insert(out.inline_data.end(), bytes.begin(), bytes.end());
            }
            off += (4 + len + 15) & ~size_t{15};
            continue;
        }
        if (off + sizeof(DataSeg) > segs.size()) {
            break;
        }
        DataSeg d;
        std::memcpy(&d, segs.data() + off, sizeof(d));
        off += sizeof(DataSeg);
        HCA_TRACE(dev, wqe_data, .qpn = qp.qpn, .lkey = d.lkey.get(), .addr = d.addr.get(), .len = d.byte_count.get());
        if (d.byte_count.get()) {
            out.sges.push_back({d.lkey.get(), d.addr.get(), d.byte_count.get()});
            if (!sig_wire_sge(dev, qp, out.sges.back())) {
                synd = kSyndLocalLength;
                return false;
            }
        }
    }
    return true;
}

// The bytes [offset, offset+len) of a message: inline pieces, or guest
// memory read through the memory keys.
bool gather(Device &dev, const Qp &qp, uint16_t index, const GatherList &msg, uint32_t offset, uint32_t len,
            uint8_t *out, std::vector<DmaChunk> &chunks, uint8_t &synd) {
    uint32_t pos = 0;
    uint64_t base = 0;
    for (const Sge &s : msg.sges) {
        if (pos == len) {
            break;
        }
        if (offset + pos >= base + s.len) {
            base += s.len;
            continue;
        }
        const uint32_t in_sge = static_cast<uint32_t>(offset + pos - base);
        const uint32_t n = std::min(s.len - in_sge, len - pos);
        base += s.len;
        if (s.inl) {
            std::memcpy(out + pos, msg.inline_data.data() + s.addr + in_sge, n);
            pos += n;
            continue;
        }
        chunks.clear();
        const XlatError e = dev.mkeys.translate(s.lkey, qp.pd, s.addr + in_sge, n, kAccLocalRead, chunks);
        if (e == XlatError::PageFault) {
            synd = kSyndPageFault;
            return false;
        }
        if (e != XlatError::None) {
            HCA_TRACE(dev, mkey_fail, .qpn = qp.qpn, .lkey = s.lkey, .addr = s.addr + in_sge, .len = n,
                      .reason = xlat_error_name(e));
            dev.guest_error("qpn=0x{:x} WQE 0x{:x} SGE lkey=0x{:x} addr=0x{:x} len={}: {}", qp.qpn, index, s.lkey,
                            s.addr + in_sge, n, xlat_error_name(e));
            synd = kSyndLocalProt;
            return false;
        }
        for (const DmaChunk &c : chunks) {
            if (!dev.mem_read(c.addr, out + pos, c.len)) {
                dev.guest_error("qpn=0x{:x} SGE lkey=0x{:x} translates to 0x{:x}, not guest memory", qp.qpn, s.lkey,
                                c.addr);
                synd = kSyndLocalProt;
                return false;
            }
            pos += c.len;
        }
    }
    return true;
}

// Scatter through the memory keys: SEND payloads into receive WQEs, read
// responses and atomic results into the requester's buffers.
bool scatter(Device &dev, const Qp &qp, uint32_t pd, const SgeList &sges, uint32_t offset,
             std::span<const uint8_t> data, std::vector<DmaChunk> &chunks, uint8_t &synd, uint32_t sigerr_cqn) {
    uint32_t base = 0;
    uint32_t pos = 0;
    for (const auto &s : sges) {
        if (pos == data.size()) {
            break;
        }
        if (offset + pos >= base + s.len) {
            base += s.len;
            continue;
        }
        const uint32_t in_sge = offset + pos - base;
        const uint32_t n = std::min<uint32_t>(s.len - in_sge, static_cast<uint32_t>(data.size()) - pos);
        if (s.sig) {
            if (!sig_scatter(dev, qp, pd, sigerr_cqn ? sigerr_cqn : qp.cqn_rcv, s, in_sge, data.subspan(pos, n),
                             synd)) {
                return false;
            }
            pos += n;
            base += s.len;
            continue;
        }
        chunks.clear();
        const XlatError e = dev.mkeys.translate(s.lkey, pd, s.addr + in_sge, n, kAccLocalWrite, chunks);
        if (e == XlatError::PageFault) {
            synd = kSyndPageFault;
            return false;
        }
        if (e != XlatError::None) {
            dev.guest_error("qpn=0x{:x} scatter lkey=0x{:x} addr=0x{:x} len={}: {}", qp.qpn, s.lkey, s.addr + in_sge, n,
                            xlat_error_name(e));
            synd = kSyndLocalProt;
            return false;
        }
        for (const DmaChunk &c : chunks) {
            if (!dev.mem_write(c.addr, data.data() + pos, c.len)) {
                synd = kSyndLocalProt;
                return false;
            }
            pos += c.len;
        }
        base += s.len;
    }
    if (pos != data.size()) {
        synd = kSyndLocalLength;
        return false;
    }
    return true;
}

uint32_t rc_mtu(Device &dev, const Qp &qp) {
    const uint8_t port_mtu = dev.port(qp.path.port).neighbor_mtu();
    return 128u << std::clamp<uint8_t>(std::min<uint8_t>(qp.mtu ? qp.mtu : 1, port_mtu), 1, 5);
}

uint8_t *rc_headers(Device &dev, const Qp &qp, Packet &pkt, uint8_t opcode, uint32_t psn, bool ack_req, bool se,
                    std::span<const uint8_t> ext, size_t payload_len, uint32_t dqpn) {
    Port &port = dev.port(qp.path.port);
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
    return iba::build_headers(pkt.bytes, s, ext, payload_len);
}

void rc_transmit(Device &dev, const Qp &qp, uint8_t opcode, uint32_t psn, bool ack_req, bool se,
                 std::span<const uint8_t> ext, std::span<const uint8_t> payload, uint32_t dqpn, int32_t wqe) {
    Packet pkt = dev.new_packet();
    uint8_t *at = rc_headers(dev, qp, pkt, opcode, psn, ack_req, se, ext, payload.size(), dqpn);
    if (!payload.empty()) {
        std::memcpy(at, payload.data(), payload.size());
    }
    dev.transmit(std::move(pkt), qp.qpn, wqe);
}

}  // namespace hca
