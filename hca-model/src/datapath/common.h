// What the data-path stages share: the CQE writers, a send WQE's data
// segments, gather and scatter through the memory keys, and the headers of
// connected-transport packets. Free functions over the device: each stage
// passes its QP, its own scratch and, for the trace, the packet that
// caused the work (pkt: its id, 0 for none).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "datapath/wqe.h"
#include "objects/mkey.h"

namespace hca {

class Device;
struct Qp;
struct Packet;

// Requester CQEs: a completion (only if signaled) and an error completion.
void req_cqe(Device &dev, const Qp &qp, uint16_t index, uint8_t wqe_opcode, uint32_t byte_cnt, bool signaled,
             bool solicited, uint64_t pkt = 0);
void req_err_cqe(Device &dev, const Qp &qp, uint16_t index, uint8_t wqe_opcode, uint8_t syndrome, uint64_t pkt = 0);
// A receive WQE that could not take its message: its error CQE on cqn.
void resp_err_cqe(Device &dev, const Qp &qp, uint32_t cqn, uint16_t index, uint32_t srqn, uint8_t synd,
                  uint64_t pkt = 0);

// The data pointer and inline segments that end a send WQE, each traced.
bool parse_data_segs(Device &dev, const Qp &qp, std::span<const uint8_t> segs, GatherList &out, uint8_t &synd);
// The bytes [offset, offset + len) of a message into out: inline pieces, or
// guest memory read through the memory keys (chunks: the caller's scratch).
// gather() and scatter() fail with synd kSyndPageFault at a page that is
// not present (the bytes before it are done).
bool gather(Device &dev, const Qp &qp, uint16_t index, const GatherList &msg, uint32_t offset, uint32_t len,
            uint8_t *out, std::vector<DmaChunk> &chunks, uint8_t &synd);
// data written into the scatter list sges from byte offset on, through the
// memory keys of pd.
// An SGE through a signature key (datapath/sig_xfer.h) reports signature
// errors to sigerr_cqn (0: the QP's receive CQ).
bool scatter(Device &dev, const Qp &qp, uint32_t pd, const SgeList &sges, uint32_t offset,
             std::span<const uint8_t> data, std::vector<DmaChunk> &chunks, uint8_t &synd, uint32_t sigerr_cqn = 0);

// The path MTU of a connected QP in bytes: its own, capped by the port's.
uint32_t rc_mtu(Device &dev, const Qp &qp);
// The headers of a connected-transport packet into pkt; returns where its
// payload_len bytes go. The caller then hands pkt to Device::transmit.
uint8_t *rc_headers(Device &dev, const Qp &qp, Packet &pkt, uint8_t opcode, uint32_t psn, bool ack_req, bool se,
                    std::span<const uint8_t> ext, size_t payload_len, uint32_t dqpn);
// A whole packet with a small payload, sent (wqe: the send WQE it belongs
// to, for the trace; -1 for none).
void rc_transmit(Device &dev, const Qp &qp, uint8_t opcode, uint32_t psn, bool ack_req, bool se,
                 std::span<const uint8_t> ext, std::span<const uint8_t> payload, uint32_t dqpn, int32_t wqe = -1);

// The packet a stage is handling, named by the CQEs it causes: set for the
// scope of the stage's rx(), 0 otherwise.
class PacketScope {
  public:
    PacketScope(uint64_t &slot, uint64_t id) : slot_(slot) { slot_ = id; }
    ~PacketScope() { slot_ = 0; }
    PacketScope(const PacketScope &) = delete;
    PacketScope &operator=(const PacketScope &) = delete;

  private:
    uint64_t &slot_;
};

}  // namespace hca
