// Queue pairs: the QP object, CREATE/DESTROY/QUERY_QP and every modify
// transition (applying only the fields a transition requires or its
// opt_param_mask names), the error state and flushing, multicast
// attachment; and the table that owns the data-path stages.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "be.h"
#include "datapath/odp.h"
#include "datapath/rc.h"
#include "datapath/rc_req.h"
#include "datapath/rc_resp.h"
#include "datapath/recv.h"
#include "datapath/send.h"
#include "datapath/tm.h"
#include "datapath/wqe.h"
#include "fifo.h"
#include "iba/packet.h"
#include "ifc/field.h"
#include "objects/devx.h"
#include "objects/ids.h"
#include "objects/mkey.h"
#include "objects/pages.h"
#include "timers.h"

namespace hca {

// " pkt=0x<id>" in a trace line when the event was caused by a received
// packet (its id as the sender and the fabric capture know it), else nothing.
struct PktRef {
    uint64_t id;
};

}  // namespace hca

template <>
struct fmt::formatter<hca::PktRef> : fmt::formatter<std::string_view> {
    auto format(hca::PktRef r, fmt::format_context &ctx) const {
        return r.id ? fmt::format_to(ctx.out(), " pkt=0x{:x}", r.id) : ctx.out();
    }
};

namespace hca {

struct CmdCtx;
class Device;
struct Srq;
struct Cq;

// qpc.st
enum QpType : uint8_t {
    kQpRc = 0x0,
    kQpUc = 0x1,
    kQpUd = 0x2,
    kQpXrc = 0x3,
    kQpDci = 0x5,  // DC initiator
    kQpDct = 0x6,  // DC target (CREATE_DCT, not CREATE_QP; shares the QPN space)
    kQpQp0 = 0x7,
    kQpQp1 = 0x8,
    kQpRegUmr = 0xc,
    // The model's own: a DCT's responder context for one initiator (never
    // in a qpc; see DcState).
    kQpDcContext = 0xf0,
    // An SQ object (CREATE_SQ, objects/sq.cpp): a send queue of local
    // work only; its number is from the QPN space.
    kQpSq = 0xf1,
};
// An SQ object's states (sqc.state, MLX5_SQC_STATE_*).
enum SqState : uint8_t { kSqRst = 0, kSqRdy = 1, kSqErr = 3 };

const char *qp_type_name(uint8_t st);

// qpc.state (qp.h MLX5_QP_STATE_*)
enum class QpState : uint8_t { Rst = 0, Init = 1, Rtr = 2, Rts = 3, Sqer = 4, Sqd = 5, Err = 6 };
const char *qp_state_name(QpState s);

// qpc.rq_type
enum RqType : uint8_t { kRqRegular = 0, kRqSrq = 1, kRqZero = 3 };

struct AddressPath {
    uint16_t pkey_index = 0;
    bool grh = false;
    uint8_t mlid = 0;  // source path bits
    uint16_t rlid = 0;
    uint8_t ack_timeout = 0;
    uint8_t src_addr_index = 0;
    uint8_t stat_rate = 0;
    uint8_t hop_limit = 0;
    uint8_t tclass = 0;
    uint32_t flow_label = 0;
    iba::Gid rgid{};
    uint8_t sl = 0;
    uint8_t port = 1;
};

// The dynamically connected transport (docs/ARCHITECTURE.md "Dynamically
// connected"). A DCI is an RC requester whose destination comes with each
// WQE (its address segment: LID, DCT number, access key); it connects to
// one DCT at a time and waits for its messages to the last one before it
// reconnects. A DCT keeps a responder context per initiator, made (or
// started over) by a connect packet: a hidden kQpDcContext QP the RC
// responder serves, keyed in the QP table above the 24-bit QPN space.
enum class DctState : uint8_t { Active = 0, Draining = 1, Drained = 2 };  // dctc.state
struct DcState {
    uint64_t key = 0;  // DCT and context: the access key; DCI: the connected DCT's
    // DCI: the DCT it is connected to (dlid and remote_qpn are in path and
    // remote_qpn), and the first PSN of the connection (its packets carry
    // the connect flag).
    bool connected = false;
    uint32_t conn_psn = 0;
    // DCT.
    DctState state = DctState::Active;
    uint8_t cs_res = 0;
    uint32_t key_violations = 0;
    bool armed = false;                     // ARM_DCT_FOR_KEY_VIOLATION
    std::map<uint64_t, uint32_t> contexts;  // initiator (SLID << 24 | DCI QPN) -> context key
    // Context: its DCT, its initiator, when it was last used (eviction).
    uint32_t dct = 0;
    uint64_t initiator = 0;
    uint64_t last_used = 0;
};

// A QP's doorbell record (mlx5_ib MLX5_RCV_DBR, MLX5_SND_DBR): the
// producer counters the driver last wrote for its receive and send queues.
struct DbRecord {
    be32 rcv;
    be32 snd;
};
static_assert(sizeof(DbRecord) == 8 && offsetof(DbRecord, snd) == 4);

struct Qp {
    uint32_t qpn = 0;
    uint8_t st = kQpUd;
    QpState state = QpState::Rst;
    uint32_t pd = 0;
    uint16_t uid = 0;
    UmemPin pins[2];  // a DEVX QP's doorbell and buffer UMEMs
    uint32_t user_index = 0;
    uint32_t cqn_snd = 0;
    uint32_t cqn_rcv = 0;
    uint32_t uar = 0;
    uint64_t dbr = 0;
    uint8_t log_page_size = 0;
    uint32_t page_offset = 0;
    PageList buf;
    // Receive queue.
    uint8_t rq_type = kRqRegular;
    uint8_t log_rq_size = 0;
    uint32_t rq_stride = 0;
    uint32_t srqn = 0;
    uint32_t xrcd = 0;
    // Send queue.
    bool no_sq = false;
    uint8_t log_sq_size = 0;
    uint64_t sq_offset = 0;
    // Attributes (applied by the modify commands).
    uint32_t qkey = 0;
    AddressPath path;
    AddressPath alt_path;
    uint8_t mtu = 0;
    uint8_t log_msg_max = 0;
    uint32_t remote_qpn = 0;
    uint32_t next_send_psn = 0;
    uint32_t next_rcv_psn = 0;
    uint8_t retry_count = 0;
    uint8_t rnr_retry = 0;
    uint8_t min_rnr_nak = 0;
    uint8_t log_sra_max = 0;
    uint8_t log_rra_max = 0;
    uint8_t atomic_mode = 0;
    bool rre = false, rwe = false, rae = false;
    uint8_t pm_state = 3;
    bool rlky = false;
    bool block_lb_mc = false;  // own multicast sends are not looped back
    // ulp_stateless_offload_mode 1: IPoIB checksums and LSO
    // (datapath/ipoib_offload.h); WQEs carry an Ethernet segment.
    uint8_t offload_mode = 0;
    bool ipoib_offload = false;
    uint8_t counter_set = 0;   // the Q counter set it counts into (0: none)
    // qpc.drain_sigerr (signature pipelining, INIT2INIT): a signature error
    // in a WQE's gather stops the send queue after it; once the messages
    // under way complete the QP is in SQD (SQ_DRAINED event) until SQD2RTS.
    bool drain_sigerr = false;
    // Engine state.
    bool sigerr_draining = false;  // drain_sigerr: the send queue stops
    uint16_t sq_ci = 0;      // WQEBBs consumed
    uint16_t rq_ci = 0;      // RQ WQEs consumed
    uint16_t rq_flushed = 0; // RQ WQEs flushed in the error state
    bool sq_pending = false;  // rung since the send queue last ran
    // The WQE the last doorbell named (opmod_idx_opcode), checked against
    // the doorbell record's producer counter when the send queue runs.
    uint16_t db_named = 0;
    bool db_named_valid = false;
    // WQEs delivered by BlueFlame and not yet consumed, one per index, in
    // the order of the WQEs from sq_ci (SendQueue's store_bf_wqe()). The
    // ring keeps its storage: a copy allocates nothing once it has grown.
    static constexpr uint32_t kBfWqeMax = 256;  // a BlueFlame half-buffer
    struct BfWqe {
        uint16_t index = 0;
        uint16_t len = 0;
        std::array<uint8_t, kBfWqeMax> bytes{};
    };
    Fifo<BfWqe, 8> bf_wqes;
    // A BlueFlame copy of WQE bf_copy is under way (its head is in, the rest
    // is not yet) on a bfreg whose doorbells come with copies: the send
    // queue waits for it there (SendQueue::await_copy()).
    uint16_t bf_copy = 0;
    bool bf_copy_valid = false;
    Timers::Id flush_timer = 0;
    int64_t flush_poll_ns = 0;  // the error state's RQ doorbell-record poll interval
    std::set<iba::Gid> mcgs;
    RcState rc;  // connected transports
    DcState dc;  // DCI, DCT, DC responder context
    QpFaults pf;  // page faults waiting for PAGE_FAULT_RESUME (datapath/odp.h)
    uint64_t sent = 0;
    uint64_t received = 0;
    uint64_t dropped = 0;

    bool special() const { return st == kQpQp0 || st == kQpQp1; }
    bool connected() const { return st == kQpRc || st == kQpUc || st == kQpXrc || st == kQpDci || st == kQpDcContext; }
    bool reliable() const { return st == kQpRc || st == kQpXrc || st == kQpDci || st == kQpDcContext; }
    bool is_dc() const { return st == kQpDci || st == kQpDct || st == kQpDcContext; }
    // The QPN its CQEs and events name: a DC context's is its DCT's.
    uint32_t cqe_qpn() const { return st == kQpDcContext ? dc.dct : qpn; }
    bool ud_like() const { return st == kQpUd || special(); }
    uint32_t ib_qpn() const { return st == kQpQp0 ? 0 : st == kQpQp1 ? 1 : qpn; }
    uint32_t sq_wqebbs() const { return no_sq ? 0 : 1u << log_sq_size; }
    uint32_t rq_wqes() const { return rq_type == kRqRegular ? 1u << log_rq_size : 0; }
    bool receives() const { return state == QpState::Rtr || state == QpState::Rts || state == QpState::Sqd || state == QpState::Sqer; }
};

// A packet as the device handles it between its queues and the wire.
struct Packet {
    std::vector<uint8_t> bytes;  // LRH .. VCRC
    uint64_t id = 0;             // the sender's packet id (link frames, traces, capture)
    // No CRCs to check: looped back by this HCA to its own port, or from a
    // link frame flagged iba::link::kNoCrcs.
    bool no_crcs = false;
};

// The QPs and their commands (create, modify through the PRM state
// machine, query, destroy, multicast attachment), the error state and its
// flushes. The data path is in the stages it owns (datapath/): the send
// queue (with the UMR engine), the receiver, the connected requester
// (with its completer) and responder. Each stage owns its state and
// scratch; they reach each other through the accessors below and share
// only the free functions of datapath/common.h.
class QpTable {
  public:
    explicit QpTable(Device &dev) : dev_(dev) {}
    void reset();
    Qp *find(uint32_t qpn);
    // The QP the QP commands name: not a DCT.
    Qp *find_qp(uint32_t qpn);
    // The QP a command acts on: null, with the command failed (BAD_RES, or
    // BAD_PARAM for another user context's), when there is none.
    Qp *find_qp_for(CmdCtx &c, uint32_t qpn);
    // The HW QP that receives packets for IB QPN 0 / 1 of the port.
    Qp *special_qp(uint8_t st);
    size_t count() const { return qps_.size(); }

    void cmd_create_qp(CmdCtx &c);
    void cmd_destroy_qp(CmdCtx &c);
    void cmd_query_qp(CmdCtx &c);
    void cmd_modify_qp(CmdCtx &c);  // every *2*_QP opcode
    void cmd_attach_mcg(CmdCtx &c);
    void cmd_detach_mcg(CmdCtx &c);
    // DCTs (objects/dct.cpp).
    void cmd_create_dct(CmdCtx &c);
    void cmd_destroy_dct(CmdCtx &c);
    void cmd_drain_dct(CmdCtx &c);
    void cmd_query_dct(CmdCtx &c);
    void cmd_arm_dct(CmdCtx &c);
    // SQ objects (objects/sq.cpp).
    void cmd_create_sq(CmdCtx &c);
    void cmd_modify_sq(CmdCtx &c);
    void cmd_query_sq(CmdCtx &c);
    void cmd_destroy_sq(CmdCtx &c);
    // A DC request for a DCT: the responder context of its initiator (made,
    // or started over by a connect), or nullptr if the packet is dropped.
    Qp *dc_context(Qp &dct, const Packet &pkt, const iba::PacketView &v);
    // Responder contexts above the 24-bit QPN space: at most kDcContexts in
    // all, kDcContextsPerDct per DCT (the least recently used idle one
    // makes room).
    static constexpr uint32_t kDcContextBase = 0x1000000;
    static constexpr uint32_t kDcContexts = 4096;
    static constexpr uint32_t kDcContextsPerDct = 256;

    // Moves a QP to the error state: flush CQEs for every outstanding WQE,
    // and keep flushing receive WQEs posted while in error.
    void to_error(Qp &qp, const char *why);
    // SQ error (UD-like QPs): the send queue flushes, receives go on.
    void to_sq_error(Qp &qp, const char *why);
    // A drain a signature error began (Qp::sigerr_draining) ends once
    // nothing the send queue started is outstanding: the QP is in SQD and
    // its owner gets SQ_DRAINED.
    void sigerr_drain_done(Qp &qp);
    // Flush CQEs for the send WQEs of a QP in error (also for WQEs posted
    // while it is).
    void flush_sq(Qp &qp);
    std::string info() const;

    // Multicast attachments: MGID -> QPNs.
    const std::map<iba::Gid, std::set<uint32_t>> &mcgs() const { return mcgs_; }

    // The data-path stages.
    SendQueue &sq() { return sq_; }
    Receiver &receiver() { return recv_; }
    RcRequester &requester() { return req_; }
    RcResponder &responder() { return resp_; }
    TagMatcher &tm() { return tm_; }

  private:
    void flush_rq(Qp &qp);
    void arm_flush_timer(Qp &qp);
    static constexpr int64_t kFlushPollMinNs = 2'000'000;
    static constexpr int64_t kFlushPollMaxNs = 64'000'000;
    void entered(Qp &qp, QpState old);
    bool create_qp_valid(CmdCtx &c, const Qp &qp);
    bool create_qp_links(CmdCtx &c, const Qp &qp, Srq *&srq, Cq *&snd, Cq *&rcv);
    // A number of the QPN space (QPs, DCTs, SQs) within log_max_qp, or 0
    // with the command failed.
    uint32_t alloc_qpn(CmdCtx &c);
    void release(Qp &qp);
    void rc_reset(Qp &qp);
    // An object of the QPN space of type st (kQpDct, kQpSq) that c's
    // context may touch, or nullptr with the command failed.
    Qp *find_of(CmdCtx &c, uint32_t n, uint8_t st);
    Qp *new_dc_context(Qp &dct, uint64_t initiator);
    void start_dc_context(Qp &dct, Qp &ctx, const iba::PacketView &v, uint32_t dci);
    void drop_dc_contexts(Qp &dct);
    void drop_dc_context(Qp &ctx);

    Device &dev_;
    IdAllocator ids_{0x100, 0xffffff};
    IdAllocator dc_ids_{kDcContextBase, kDcContextBase + kDcContexts};
    uint64_t dc_clock_ = 0;  // orders the contexts' use
    std::map<uint32_t, Qp> qps_;
    std::map<iba::Gid, std::set<uint32_t>> mcgs_;
    SendQueue sq_{dev_, *this};
    Receiver recv_{dev_, *this};
    RcRequester req_{dev_, *this};
    RcResponder resp_{dev_, *this};
    TagMatcher tm_{dev_, *this};
};

}  // namespace hca
