// Event queues: CREATE/DESTROY/QUERY_EQ, the EQE ring with its owner bit,
// arming and consumer-index doorbells at UAR +0x40/+0x48, and one MSI-X
// message (eqc.intr) per armed EQ that receives an EQE.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "be.h"
#include "objects/pages.h"

namespace hca {

struct CmdCtx;
class Device;

// The per-type data of an EQE (include/linux/mlx5/device.h union ev_data):
// the members the model raises, as packed big-endian structures.
struct EqeComp {  // completion: the CQ
    uint8_t rsvd[24];
    be32 cqn;
};
struct EqeQpSrq {  // QP/SRQ affiliated events
    uint8_t rsvd0[20];
    uint8_t type;  // 0 QP, 1 SRQ
    uint8_t rsvd1[3];
    be32 qp_srq_n;
};
struct EqeCqErr {
    be32 cqn;
    uint8_t rsvd0[7];
    uint8_t syndrome;  // 1 overrun, 2 access violation
    uint8_t rsvd1[16];
};
struct EqePortState {
    uint8_t rsvd0[8];
    uint8_t port;  // 7:4 port number
    uint8_t rsvd1[19];
};
struct EqeCmd {
    be32 vector;  // the completed command slots
    uint8_t rsvd[24];
};
struct EqeDct {  // DCT_DRAINED, DCT_KEY_VIOLATION
    uint8_t rsvd[24];
    be32 dctn;
};
struct EqePageReq {  // PAGE_REQUEST: the firmware wants pages (num_pages > 0) or gives them back
    be16 ec_function;
    be16 func_id;
    be32 num_pages;  // signed
    uint8_t rsvd[20];
};
// Page faults (mlx5_eqe_page_fault): a WQE's buffers (sub_type 0) or an
// RDMA request's target (sub_type 1) are not present (datapath/odp.h).
struct EqePfWqe {
    be32 bytes_committed;
    uint8_t rsvd1[2];
    be16 wqe_index;
    uint8_t rsvd2[2];
    be16 packet_length;
    be32 token;
    uint8_t rsvd4[8];
    be32 pftype_wq;  // 31:24 type (MLX5_WQE_PF_TYPE_*), 23:0 the QP or SRQ
};
struct EqePfRdma {
    be32 bytes_committed;
    be32 r_key;
    uint8_t rsvd1[2];
    be16 packet_length;
    be32 rdma_op_len;
    be64 rdma_va;
    be32 pftype_token;  // 31:24 type, 23:0 token (the QP)
};
union EqeData {
    uint8_t raw[28] = {};
    EqePfWqe pf_wqe;
    EqePfRdma pf_rdma;
    EqeComp comp;
    EqeQpSrq qp_srq;
    EqeCqErr cq_err;
    EqePortState port;
    EqeCmd cmd;
    EqeDct dct_ev;
    EqePageReq page_req;

    static EqeData completion(uint32_t cqn);
    static EqeData qp(uint32_t qpn) { return affiliated(0, qpn); }
    static EqeData srq(uint32_t srqn) { return affiliated(1, srqn); }
    static EqeData cq_error(uint32_t cqn, uint8_t syndrome);
    static EqeData port_state(uint8_t port);
    static EqeData command(uint32_t slots);
    static EqeData dct(uint32_t dctn);  // mlx5_eqe_dct
    static EqeData page_request(int32_t npages);  // mlx5_eqe_page_req, function 0

  private:
    static EqeData affiliated(uint8_t type, uint32_t n);
};
static_assert(sizeof(EqeData) == 28 && offsetof(EqeComp, cqn) == 0x18 && offsetof(EqeQpSrq, type) == 0x14 &&
              offsetof(EqeQpSrq, qp_srq_n) == 0x18 && offsetof(EqeCqErr, syndrome) == 0x0b &&
              offsetof(EqePortState, port) == 0x08 && sizeof(EqeDct) == 28 && offsetof(EqeDct, dctn) == 0x18 &&
              sizeof(EqePageReq) == 28 && offsetof(EqePageReq, func_id) == 0x02 &&
              offsetof(EqePageReq, num_pages) == 0x04);
static_assert(sizeof(EqePfWqe) == 28 && offsetof(EqePfWqe, wqe_index) == 0x06 && offsetof(EqePfWqe, token) == 0x0c &&
              offsetof(EqePfWqe, pftype_wq) == 0x18 && sizeof(EqePfRdma) == 28 && offsetof(EqePfRdma, r_key) == 0x04 &&
              offsetof(EqePfRdma, rdma_op_len) == 0x0c && offsetof(EqePfRdma, rdma_va) == 0x10 &&
              offsetof(EqePfRdma, pftype_token) == 0x18);

// struct mlx5_eqe
struct Eqe {
    uint8_t rsvd0;
    uint8_t type;
    uint8_t rsvd1;
    uint8_t sub_type;
    uint8_t rsvd2[28];
    EqeData data;
    uint8_t rsvd3[2];
    uint8_t signature;
    uint8_t owner;
};
static_assert(sizeof(Eqe) == 64 && offsetof(Eqe, data) == 0x20 && offsetof(Eqe, owner) == 0x3f);

struct Eq {
    uint32_t eqn = 0;
    uint8_t log_size = 0;
    uint32_t uar = 0;
    uint16_t intr = 0;
    uint8_t log_page_size = 0;
    PageList buf;
    std::bitset<256> events;  // event types this EQ receives
    uint32_t pi = 0;          // EQEs produced (the driver sees it mod 2^24)
    uint32_t ci = 0;          // consumer counter from the last doorbell (24 bits)
    bool armed = false;
    uint8_t status = 0;       // eqc.status: 0 OK, 0xa write failure / overflow
    uint64_t eqes = 0;
    uint64_t interrupts = 0;

    uint32_t nent() const { return 1u << log_size; }
    uint32_t outstanding() const { return (pi - ci) & 0xffffff; }
};

class EqTable {
  public:
    static constexpr uint8_t kStatusOk = 0x0;
    static constexpr uint8_t kStatusWriteFailure = 0xa;
    // eqc.st
    static constexpr uint8_t kStArmed = 0x9;
    static constexpr uint8_t kStFired = 0xa;

    explicit EqTable(Device &dev) : dev_(dev) {}
    void reset();

    void cmd_create_eq(CmdCtx &c);
    void cmd_destroy_eq(CmdCtx &c);
    void cmd_query_eq(CmdCtx &c);

    // EQ doorbell: value = eqn << 24 | consumer counter; arm at +0x40 only.
    void doorbell(uint32_t uar, bool arm, uint32_t value);

    // Writes an EQE to EQ eqn; false if it was dropped (no EQ, overflow).
    bool post(uint32_t eqn, uint8_t type, uint8_t sub_type, const EqeData &data);
    // Writes an EQE to the EQ subscribed to type (async events).
    bool post_event(uint8_t type, uint8_t sub_type, const EqeData &data);
    // Command completion EQE (type 0x0a) with the bitmask of slots.
    void post_cmd_completion(uint32_t slots);
    const Eq *subscriber(uint8_t type) const;
    Eq *find(uint32_t eqn);
    size_t count() const { return eqs_.size(); }
    std::string info() const;

  private:
    // An EQ interrupt; type: the EQE that raised it (-1: arming over EQEs pending).
    void fire(Eq &eq, int32_t type = -1, int64_t cqn = -1);

    Device &dev_;
    std::map<uint32_t, Eq> eqs_;
};

}  // namespace hca
