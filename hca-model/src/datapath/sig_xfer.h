// Transfers through signature keys (objects/sig.h): what the data path does
// with an SGE whose key has its BSF enabled, and the SET_PSV WQE.
//
// Carried: a local gather (SEND and RDMA WRITE of RC, UC, XRC and UD QPs:
// memory to wire, read and transformed when the WQE starts) and a local
// scatter (an RC/UC/XRC receive, an RDMA READ's response: wire to memory,
// block by block as the packets come). Not carried: a signature key named
// as an RDMA WRITE's or READ's remote key, a UD receive, an atomic's
// buffer; those fail as a protection error (XlatError::Signature).
//
// An SGE through a signature key names whole blocks of the key's address
// space (SigConfig::unit()); parse_data_segs() and read_recv_sges() give it
// the length of its wire bytes (sig_wire_sge()). A block whose input PI
// does not check is a signature error: the transfer goes on, and while the
// key is armed a SIGERR CQE goes to the QP's CQ (the send CQ for a gather
// or a READ, the receive CQ for a receive) before the work request's own.
#pragma once

#include <cstdint>
#include <span>

#include "datapath/wqe.h"

namespace hca {

class Device;
struct Qp;

// Gives a signature SGE the length of its wire bytes and marks it (sig);
// false if it does not name whole blocks or carries more than the device
// stages for one SGE.
bool sig_wire_sge(Device &dev, const Qp &qp, Sge &s);

// Replaces each signature SGE of a gather list with the wire bytes it reads
// (inline pieces): the memory domain's PI checked, the wire domain's made.
// A signature error stops the send queue of a QP with drain_sigerr
// (Qp::sigerr_draining; SendQueue finishes the drain).
bool sig_gather(Device &dev, Qp &qp, uint16_t index, GatherList &msg, uint8_t &synd);

// Writes the wire bytes [in_sge, in_sge + data.size()) of a signature SGE:
// each block, once whole, has its wire PI checked and is written with the
// memory domain's PI.
bool sig_scatter(Device &dev, const Qp &qp, uint32_t pd, uint32_t cqn, const Sge &s, uint32_t in_sge,
                 std::span<const uint8_t> data, uint8_t &synd);

// SET_PSV (mlx5_wqe_set_psv_seg after the control segment): loads a PSV's
// transient signature.
bool set_psv(Device &dev, const Qp &qp, const SqWqe &w, uint8_t &synd);

}  // namespace hca
