// Tag matching on RC (rdma-core Documentation/tag_matching.md; the PRM's
// "Tag Matching" XRQ): an XRQ of the tag-matching topology holds a list of
// tagged buffers that software fills and empties with TAG_MATCHING WQEs on
// a command QP (APPEND, REMOVE, NOP). A SEND arriving on an RC QP attached
// to the XRQ starts with a tag-matching header (TMH): an EAGER or RNDV
// message whose tag matches a listed buffer (the oldest appended first)
// is delivered there without its TMH; anything else is unexpected and
// goes whole into an ordinary XRQ receive WQE. For a matched rendezvous
// request the device itself reads the payload from the sender (the RVH
// names it) on the receiving QP's send side and then sends the FIN.
//
// Ordering (the phase counts): each unexpected message raises the XRQ's
// hardware count; software reports how many it has handled (the sw_cnt of
// an operation flagged SW_CNT). A buffer appended while the two differ is
// listed but never matched by the device, since software has unexpected
// messages it might match first; its APPEND completion carries the
// hardware count so that software can see this.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "datapath/rc.h"
#include "datapath/wqe.h"
#include "objects/mkey.h"

namespace iba {
struct PacketView;
}

namespace hca {

class Budget;
class Device;
class QpTable;
struct Qp;
struct RcWqe;
struct Srq;

// xrqc.topology and xrqc.offload (MLX5_XRQC_*).
inline constexpr uint64_t kXrqTagMatching = 1;
inline constexpr uint64_t kXrqOffloadRndv = 1;

// TMH opcodes (infiniband/tm_types.h) and header sizes.
enum TmhOp : uint8_t { kTmhNoTag = 0, kTmhRndv = 1, kTmhFin = 2, kTmhEager = 3 };
inline constexpr size_t kTmhLen = 16;
inline constexpr size_t kRvhLen = 16;
// The headers at the start of a tag-matching message (ibv_tmh, ibv_rvh).
struct Tmh {
    uint8_t opcode;  // TmhOp
    uint8_t rsvd[3];
    be32 app_ctx;
    be64 tag;
};
struct Rvh {  // after the TMH of a rendezvous request: the sender's buffer
    be64 va;
    be32 rkey;
    be32 len;
};
// The start of a list operation's CQE (mlx5_tm_cqe).
struct TmCqe {
    be32 success;  // kTmSuccess
    be16 hw_phase_cnt;
};
static_assert(sizeof(Tmh) == kTmhLen && sizeof(Rvh) == kRvhLen && offsetof(Tmh, tag) == 8 && sizeof(TmCqe) == 6);
// The TMH of a message's first bytes (zeros if it has fewer).
Tmh load_tmh(std::span<const uint8_t> msg);

// A TM CQE's app field (CQE byte 0x28) and its app_op values (byte 0x29).
inline constexpr uint8_t kCqeAppTagMatching = 1;
enum TmAppOp : uint8_t {
    kTmConsumed = 0x1,    // matched; the data comes later (EXPECTED)
    kTmExpected = 0x2,    // the data of a matched message is in place
    kTmUnexpected = 0x3,  // no match: the message is in an XRQ receive WQE
    kTmNoTag = 0x4,       // a NO_TAG message, in an XRQ receive WQE
    kTmAppend = 0x5,      // list operation completions
    kTmRemove = 0x6,
    kTmNoop = 0x7,
    kTmConsumedMsg = 0xa,        // matched and complete in one
    kTmConsumedMsgSwRndv = 0xb,  // a rendezvous the buffer cannot hold: its headers are in it
    kTmMsgCanceled = 0xc,        // a matched rendezvous whose read failed
};
inline constexpr uint32_t kTmSuccess = 0x80000000;  // tm_cqe.success
// The CQE opcode of a list operation's completion and of a match whose
// data comes later (MLX5_CQE_NO_PACKET).
inline constexpr uint8_t kCqeNoPacket = 6;

// A send WQE's TAG_MATCHING segment (mlx5_wqe_tm_seg).
struct TmSeg {
    uint8_t opcode;  // 7:4 list operation
    uint8_t flags;   // kTmFlag*
    be16 index;
    uint8_t rsvd0[2];
    be16 sw_cnt;
    uint8_t rsvd1[8];
    be64 append_tag;
    be64 append_mask;
};
static_assert(sizeof(TmSeg) == 32);
enum TmListOp : uint8_t { kTmOpNop = 0, kTmOpAppend = 1, kTmOpRemove = 2 };
inline constexpr uint8_t kTmFlagSwCnt = 1 << 6;
inline constexpr uint8_t kTmFlagCqeReq = 1 << 7;

struct TagEntry {
    uint64_t tag = 0;
    uint64_t mask = 0;
    Sge buf{};         // one scatter entry (the device's max_sge is 1); len 0: no buffer
    uint64_t seq = 0;  // append order
    bool listed = false;
    bool armed = false;  // appended in phase: the device may match it
};

// The matching state of a tag-matching XRQ.
class TagList {
  public:
    // nullptr when the device's translation budget cannot hold 2^log_size
    // entries more.
    static std::unique_ptr<TagList> make(Budget &budget, unsigned log_size, bool rndv);
    ~TagList();
    TagList(const TagList &) = delete;
    TagList &operator=(const TagList &) = delete;

    std::vector<TagEntry> entries;
    uint16_t append_next = 0;  // where the next APPEND lands
    uint16_t sw_phase = 0;     // unexpected messages software has reported handled
    uint16_t hw_phase = 0;     // unexpected messages the device delivered
    uint64_t seq = 0;
    bool rndv = false;  // rendezvous offload (xrqc.offload)
    unsigned log_size = 0;

  private:
    TagList(Budget &budget, uint64_t charged) : budget_(budget), charged_(charged) {}
    Budget &budget_;
    uint64_t charged_;
};

// What the first packet of a SEND to a tag-matching XRQ became.
enum class TmStart : uint8_t {
    Deliver,   // the receive state is set up: scatter the payload from RcState::Recv::skip on
    Done,      // handled whole (a matched rendezvous request)
    NoBuffer,  // unexpected, and the XRQ has no receive WQE: RNR
    Failed,    // the XRQ's receive WQE was unreadable; the QP is in error
};

class TagMatcher {
  public:
    TagMatcher(Device &dev, QpTable &qps) : dev_(dev), qps_(qps) {}
    // The tag-matching XRQ an RC QP receives through, or nullptr.
    Srq *xrq_of(const Qp &qp);
    // A TAG_MATCHING WQE on a command QP. False (synd set) if it is bad.
    bool list_op(Qp &qp, const SqWqe &sw, uint8_t &synd);
    // The first packet of a SEND on a QP receiving through x: fills in the
    // responder's message in progress (r).
    TmStart start_message(Qp &qp, RcState::Recv &r, Srq &x, const iba::PacketView &v, bool last, uint64_t pkt);
    // A TM receive CQE (the responder's recv_cqe for messages on an XRQ).
    void recv_cqe(const Qp &qp, uint32_t cqn, uint8_t app_op, uint16_t index, uint16_t wqe_counter,
                  std::span<const uint8_t, kTmhLen> tmh, uint32_t byte_cnt, const iba::PacketView *v, uint64_t pkt);
    // The device's own rendezvous work (RcWqe::hw) is done, or failed.
    void hw_done(Qp &qp, const RcWqe &w, bool ok);

  private:
    bool start_rndv(Qp &qp, const RcState::Recv &r, Srq &x, const TagEntry &e, uint16_t index,
                    std::span<const uint8_t> msg, const iba::PacketView &v, uint64_t pkt);
    void list_cqe(Qp &qp, Srq &x, uint8_t app_op, uint16_t wqe_index, bool success);

    Device &dev_;
    QpTable &qps_;
    std::vector<DmaChunk> chunks_;  // translations of the tagged buffer at hand
};

}  // namespace hca
