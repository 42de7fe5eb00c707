// The connected transports' responder (RC, UC, XRC; IBA 9.7.5): PSN
// checks with duplicates and gaps, SENDs into receive WQEs, RDMA WRITE,
// READ responses, atomics with replay, ACK / NAK / RNR NAK (coalesced per
// batch of received packets) and responder CQEs. Its state is the QP's
// RcState::resp (RespState, rc.h), changed in enter() only.
#pragma once

#include <cstdint>
#include <vector>

#include "datapath/rc.h"
#include "iba/packet.h"
#include "objects/mkey.h"

namespace hca {

class Device;
class QpTable;
struct Qp;
struct Packet;

class RcResponder {
  public:
    RcResponder(Device &dev, QpTable &qps) : dev_(dev), qps_(qps) {}
    void reset() { acks_owed_.clear(); }
    // The first request expected has this PSN (the QP enters RTR, or a
    // DCT's initiator context is made).
    static void expect(Qp &qp, uint32_t psn);
    // A request for this QP arrived.
    void rx(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    // The ACKs coalesced while a batch of packets was received: one per
    // QP, for the newest PSN. The device calls it after each batch.
    void pay_acks();
    // Between messages, with no ACK owed: the QP's responder state can be
    // dropped without losing anything (a DCT initiator context, objects/dct.cpp).
    static bool idle(const RcState &rc) { return rc.resp == RespState::Idle && !rc.ack_owed; }

  private:
    bool accepts(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    bool check_psn(Qp &qp, const iba::PacketView &v);
    bool check_seq(Qp &qp, const iba::PacketView &v);
    void rnr(Qp &qp, uint32_t psn);
    void rnr_nak(Qp &qp, uint32_t psn);
    bool rdma_fault(Qp &qp, uint32_t psn, uint32_t rkey, uint64_t va, uint32_t len, size_t pkt_len);
    bool recv_fault(Qp &qp, uint32_t psn, bool first, size_t pkt_len);
    void fault_nak(Qp &qp, uint32_t psn);
    bool on_send(Qp &qp, const iba::PacketView &v);
    bool on_write(Qp &qp, const iba::PacketView &v);
    bool on_read(Qp &qp, const iba::PacketView &v, bool fresh);
    bool on_atomic(Qp &qp, const iba::PacketView &v);
    void on_duplicate(Qp &qp, const iba::PacketView &v);
    void ack(Qp &qp, uint32_t psn, uint8_t syndrome);
    void atomic_ack(Qp &qp, uint32_t psn, uint64_t orig);
    void owe_ack(Qp &qp, uint32_t psn);
    void pay_ack(Qp &qp);
    void fail(Qp &qp, uint32_t psn, uint8_t nak, uint8_t cqe_synd, const char *why);
    bool take_recv(Qp &qp, const iba::PacketView &v);
    void enter(Qp &qp, RespState to, const char *why = nullptr);
    void recv_cqe(Qp &qp, const iba::PacketView &v, uint8_t opcode, uint32_t byte_cnt, uint32_t imm);
    void count_request(Qp &qp, uint8_t op);
    static constexpr uint32_t kNoPd = 0xffffffff;  // matches no memory key
    uint32_t rdma_pd(const Qp &qp, const iba::PacketView &v);

    Device &dev_;
    QpTable &qps_;
    std::vector<uint32_t> acks_owed_;    // QPs with RcState::ack_owed, in the order they came to owe
    std::vector<DmaChunk> chunks_;       // translations of the buffer a SEND or WRITE lands in
    std::vector<DmaChunk> read_chunks_;  // translations of the RDMA READ being answered
    uint64_t pkt_ = 0;                   // the request being handled, for the trace (rx())
};

}  // namespace hca
