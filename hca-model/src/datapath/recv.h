// The receive stage: a packet from the port goes to its QP (unicast,
// QP0/QP1, multicast members); connected QPs' packets go to the responder
// (requests) or the completer (responses); UD, QP0 and QP1 datagrams are
// checked and scattered into the next receive WQE here. It also reads
// receive WQEs for the responder.
#pragma once

#include <cstdint>
#include <vector>

#include "datapath/wqe.h"
#include "iba/packet.h"
#include "objects/mkey.h"

namespace hca {

class Device;
class QpTable;
struct Qp;
struct Packet;
struct Srq;

class Receiver {
  public:
    Receiver(Device &dev, QpTable &qps) : dev_(dev), qps_(qps) {}
    // A packet arrived for this port.
    void receive(const Packet &pkt, const iba::PacketView &v);
    // The next receive WQE of the QP's RQ or SRQ: where its scatter entries
    // start and how many bytes they may take. False if none is posted.
    bool next_recv_wqe(Qp &qp, uint64_t &addr, uint32_t &stride, uint16_t &index, Srq *&srq);
    // The scatter entries of the receive WQE at addr: until the
    // MLX5_INVALID_LKEY terminator or the stride. False if it is not guest memory.
    bool read_recv_sges(uint64_t addr, uint32_t stride, SgeList &out);
    // Returns the receive WQE just taken by next_recv_wqe() (a page fault:
    // the message that took it comes again).
    void give_back(Qp &qp, uint16_t index, Srq *srq);

  private:
    void receive_ud(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    bool ud_accepts(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    uint8_t ud_scatter(Qp &qp, uint32_t pd, uint16_t index, const iba::PacketView &v);

    Device &dev_;
    QpTable &qps_;
    std::vector<DmaChunk> chunks_;  // translations of the SGE at hand
    std::vector<DataSeg> rx_segs_;  // a receive WQE as read
    SgeList ud_sges_;               // the receive WQE a datagram lands in
};

}  // namespace hca
