// Q counters (ALLOC/DEALLOC/QUERY_Q_COUNTER): sets of event counts. A QP
// counts into the set its context names (qpc.counter_set_id: given at
// RST2INIT, changed by RTS2RTS with COUNTER_SET_ID); the data path adds
// what happened to it. mlx5_ib allocates one set per port (its
// hw_counters, `rdma statistic show`) and one per rdma counter a user
// binds QPs to (`rdma statistic qp set ... auto`, `... bind`).
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <string>

#include "objects/ids.h"

namespace hca {

struct CmdCtx;
class Device;

// The counts of a set, named as query_q_counter_out names them.
enum class QCounter : uint8_t {
    RxWriteRequests,        // responder: new RDMA WRITE messages
    RxReadRequests,         // responder: new RDMA READ requests
    RxAtomicRequests,       // responder: new atomic requests
    RxDctConnect,           // a DCT: connections from initiators (objects/dct.cpp)
    OutOfBuffer,            // responder: no receive WQE (UD drop, RNR NAK)
    OutOfSequence,          // responder: a request with a PSN beyond the expected one
    DuplicateRequest,       // responder: a request with a PSN already seen
    RnrNakRetryErr,         // requester: an RNR NAK received, retries left
    PacketSeqErr,           // requester: a PSN sequence error NAK received, retries left
    ImpliedNakSeqErr,       // requester: an ACK beyond an unanswered READ or atomic
    LocalAckTimeoutErr,     // requester: the local ACK timer expired, retries left
    ReqRnrRetriesExceeded,  // the error CQEs by syndrome, requester (req_) and
    RespLocalLengthError,   // responder (resp_) side
    ReqLocalLengthError,
    RespLocalQpError,
    LocalOperationError,
    RespLocalProtection,
    ReqLocalProtection,
    RespCqeError,  // every error CQE but a flush
    ReqCqeError,
    ReqMwBinding,
    ReqBadResponse,
    ReqRemoteInvalidRequest,
    RespRemoteInvalidRequest,  // responder: NAK Invalid Request sent
    ReqRemoteAccessErrors,
    RespRemoteAccessErrors,  // responder: NAK Remote Access Error sent
    ReqRemoteOperationErrors,
    ReqTransportRetriesExceeded,
    RespCqeFlushError,
    ReqCqeFlushError,
    Count
};

class QCounterTable {
  public:
    // Set numbers are 8-bit (qpc.counter_set_id); 0 is no set.
    static constexpr uint32_t kMaxSets = 255;

    explicit QCounterTable(Device &dev) : dev_(dev) {}
    void reset();
    bool exists(uint32_t set) const { return set <= kMaxSets && live_[set]; }
    size_t count() const { return sets_.count(); }
    // Adds n to one count of a set; nothing for set 0 or a freed set. On
    // the data path: a bit test, not the allocator's tree.
    void add(uint32_t set, QCounter what, uint32_t n = 1) {
        if (exists(set)) {
            uint32_t &v = counts_[set][static_cast<size_t>(what)];
            v += n;
        }
    }
    // An error CQE with this syndrome (wqe.h kSynd*) on the requester or
    // responder side.
    void add_error_cqe(uint32_t set, bool requester, uint8_t syndrome);
    uint32_t get(uint32_t set, QCounter what) const {
        return set <= kMaxSets ? counts_[set][static_cast<size_t>(what)] : 0;
    }

    void cmd_alloc(CmdCtx &c);
    void cmd_dealloc(CmdCtx &c);
    void cmd_query(CmdCtx &c);

  private:
    using Counts = std::array<uint32_t, static_cast<size_t>(QCounter::Count)>;

    Device &dev_;
    IdAllocator sets_{1, kMaxSets + 1};
    std::bitset<kMaxSets + 1> live_;  // the allocated sets (bit 0 never set)
    std::array<Counts, kMaxSets + 1> counts_{};
};

}  // namespace hca
