// On-demand paging (ODP; the PRM's transport page-fault scheme): a page an
// access needs is not present in its MTT key (the entry lacks the read or
// write bit, objects/mkey.h). The device stops the work that needs it,
// tells the driver with a PAGE_FAULT EQE, and goes on once the driver has
// mapped the pages (UMR) and answered with PAGE_FAULT_RESUME:
//  * requester (a send WQE's gather, a READ response's or atomic result's
//    scatter): the send queue stands still at the WQE until the resume,
//    then sends again from the packet that faulted;
//  * responder (a receive WQE's scatter, the target of an RDMA WRITE, READ
//    or atomic): the request gets an RNR NAK and the requester sends it
//    again after its RNR timer; a datagram is dropped.
// A resume with the error bit fails the work: the requester's WQE completes
// with a local protection error, the responder's next fault on the QP
// answers the request as an access violation. Without an EQ that takes
// page-fault events nobody could resolve a fault: the access fails as a
// protection error, as it does on a device without ODP.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace hca {

struct CmdCtx;
class Device;
struct Qp;
union EqeData;

// What faulted (mlx5 device.h enum wqe_page_fault_type; bit 0: requester).
enum class PfType : uint8_t { Rmp = 0, ReqSendOrWrite = 1, Resp = 2, ReqReadOrAtomic = 3 };

// A QP's outstanding faults, one per side: the token of a WQE fault (0:
// none), or for the responder an RDMA fault (named by the QP itself).
struct QpFaults {
    uint32_t req_token = 0;
    uint32_t resp_token = 0;
    bool resp_rdma = false;
    bool resp_failed = false;  // the responder's last fault was resumed with error
    bool responder_busy() const { return resp_token || resp_rdma; }
};

class PageFaults {
  public:
    explicit PageFaults(Device &dev) : dev_(dev) {}
    void reset();

    // The requester of qp needs a page for send WQE index (opcode: the
    // WQE's, and next: the WQEBB after it, for a failed resume's error
    // CQE). False if no fault can be raised: the caller fails the access.
    bool requester(Qp &qp, PfType type, uint16_t index, uint8_t opcode, uint32_t bytes_committed, uint16_t next = 0);
    // The responder needs a page for receive WQE index (of SRQ srqn, or
    // the QP's RQ for srqn 0). False also when the driver resumed the
    // responder's last fault with error: this fault is final.
    bool receive(Qp &qp, uint16_t index, uint32_t srqn, uint16_t packet_len);
    // The responder needs pages of rkey [va, va + len) for an RDMA request
    // (false as for receive()).
    bool rdma(Qp &qp, uint32_t rkey, uint64_t va, uint32_t len, uint16_t packet_len);
    // The QP was reset, destroyed or went to error: its faults are gone.
    void forget(Qp &qp);
    // Its send queue went to SQ error: the requester's fault is gone.
    void forget_requester(Qp &qp);

    void cmd_page_fault_resume(CmdCtx &c);
    size_t outstanding() const { return pending_.size() + rdma_faults_; }

  private:
    struct Pending {
        uint32_t qpn = 0;
        uint32_t wq = 0;  // the work queue the driver names in its resume
        PfType type = PfType::Resp;
        bool requester = false;
        uint8_t opcode = 0;
        uint16_t index = 0;
        uint16_t next = 0;
    };
    uint32_t post_wqe(Qp &qp, const Pending &p, EqeData &data);
    bool can_fault() const;
    bool responder_may_fault(Qp &qp) const;
    void resumed(const Pending &p, bool error);

    Device &dev_;
    std::map<uint32_t, Pending> pending_;  // WQE faults by token: at most two per QP
    uint32_t next_token_ = 1;
    size_t rdma_faults_ = 0;
};

}  // namespace hca
