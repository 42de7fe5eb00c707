// Queue pairs: CREATE/DESTROY/QUERY_QP and every modify transition, applying
// only the fields a transition requires or its opt_param_mask names; the
// send queue (doorbell, WQE fetch and execution, requester CQEs), the
// receive side (RQ/SRQ WQE consumption, responder CQEs), error state and
// flushing, and multicast attachment.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "datapath/rc.h"
#include "datapath/umr.h"
#include "datapath/wqe.h"
#include "iba/packet.h"
#include "ifc/field.h"
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
    kQpQp0 = 0x7,
    kQpQp1 = 0x8,
    kQpRegUmr = 0xc,
};
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

struct Qp {
    uint32_t qpn = 0;
    uint8_t st = kQpUd;
    QpState state = QpState::Rst;
    uint32_t pd = 0;
    uint16_t uid = 0;
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
    // Engine state.
    uint16_t sq_ci = 0;      // WQEBBs consumed
    uint16_t rq_ci = 0;      // RQ WQEs consumed
    uint16_t rq_flushed = 0; // RQ WQEs flushed in the error state
    bool sq_pending = false;  // rung since the send queue last ran
    std::map<uint16_t, std::vector<uint8_t>> bf_wqes;  // WQEs delivered by BlueFlame, by index
    Timers::Id flush_timer = 0;
    int64_t flush_poll_ns = 0;  // the error state's RQ doorbell-record poll interval
    std::set<iba::Gid> mcgs;
    RcState rc;  // connected transports
    uint64_t sent = 0;
    uint64_t received = 0;
    uint64_t dropped = 0;

    bool special() const { return st == kQpQp0 || st == kQpQp1; }
    bool connected() const { return st == kQpRc || st == kQpUc || st == kQpXrc; }
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

class QpTable {
  public:
    explicit QpTable(Device &dev) : dev_(dev) {}
    void reset();
    // A UAR page changed hands (ALLOC_UAR/DEALLOC_UAR): its bfregs start
    // over (BlueFlame half, partial BlueFlame copies).
    void forget_uar(uint32_t uar);
    Qp *find(uint32_t qpn);
    // The HW QP that receives packets for IB QPN 0 / 1 of the port.
    Qp *special_qp(uint8_t st);
    size_t count() const { return qps_.size(); }

    void cmd_create_qp(CmdCtx &c);
    void cmd_destroy_qp(CmdCtx &c);
    void cmd_query_qp(CmdCtx &c);
    void cmd_modify_qp(CmdCtx &c);  // every *2*_QP opcode
    void cmd_attach_mcg(CmdCtx &c);
    void cmd_detach_mcg(CmdCtx &c);

    // SQ doorbell / BlueFlame write at UAR +0x800.. (send.cpp).
    static constexpr uint32_t kBfBufSize = 256;  // (1 << log_bf_reg_size) / 2
    void sq_doorbell(uint32_t uar, uint32_t offset, const uint8_t *data, unsigned size);
    // Runs the send queues rung or left with work, round robin: each QP in
    // turn does up to kQuantum WQEs or packets, until the device's run
    // budget is spent.
    void process_pending();
    bool sq_work() const { return !sq_pending_.empty(); }
    static constexpr uint32_t kQuantum = 16;
    uint64_t bf_executed() const { return bf_executed_; }
    // A packet arrived for this port (recv.cpp).
    void receive(const Packet &pkt, const iba::PacketView &v);
    // The ACKs coalesced while a batch of packets was received: one per
    // QP, for the newest PSN (rc_resp.cpp). The device calls it after each
    // batch.
    void pay_acks();

    // Moves a QP to the error state: flush CQEs for every outstanding WQE,
    // and keep flushing receive WQEs posted while in error.
    void to_error(Qp &qp, const char *why);
    // SQ error (UD-like QPs): the send queue flushes, receives go on.
    void to_sq_error(Qp &qp, const char *why);
    std::string info() const;

    // Multicast attachments: MGID -> QPNs.
    const std::map<iba::Gid, std::set<uint32_t>> &mcgs() const { return mcgs_; }

  private:
    // send.cpp
    enum class Fetch { Ok, NotReadable, BadSize };
    void doorbell_head(uint32_t uar, uint32_t offset, uint32_t buf_key, uint32_t head, uint32_t qpn_ds);
    Fetch fetch_wqe(Qp &qp, uint16_t index, uint16_t pi, uint32_t &ds, uint32_t &bbs);
    void consume_wqe(Qp &qp, uint32_t bbs);
    bool sq_producer(Qp &qp, uint16_t &pi);
    void process_sq(Qp &qp);
    // The run budget: may this QP do one more WQE or packet now? If not,
    // defer() queues it for a later turn.
    bool may_work() const;
    void spend() {
        if (quantum_) {
            --quantum_;
        }
    }
    void defer(Qp &qp);
    bool execute_wqe(Qp &qp, const SqWqe &w);
    bool fail_wqe(Qp &qp, const SqWqe &w, uint8_t synd, const char *why);
    bool local_done(Qp &qp, const SqWqe &w);
    bool parse_data_segs(Qp &qp, std::span<const uint8_t> segs, GatherList &out, uint8_t &synd);
    // The bytes [offset, offset + len) of a message into out (len bytes).
    bool gather(Qp &qp, uint16_t index, const GatherList &msg, uint32_t offset, uint32_t len, uint8_t *out,
                uint8_t &synd);
    bool send_ud(Qp &qp, const SqWqe &w);
    // IPoIB offloads (ulp_stateless_offload_mode): the Ethernet segment.
    struct EthOffload {
        uint8_t cs_flags = 0;
        uint16_t mss = 0;
        std::span<const uint8_t> hdr;  // the inline header, in the WQE
    };
    static constexpr uint64_t kMaxLsoBytes = 256 * 1024;  // like max_lso_cap 18
    static constexpr uint32_t kMaxLsoSegments = 4096;     // the model's bound on one WQE's packets
    size_t parse_eth_seg(Qp &qp, const SqWqe &w, EthOffload &eo);
    void ud_spec(Qp &qp, const SqWqe &w, const AvSeg &av, iba::PacketSpec &s);
    bool send_lso(Qp &qp, const SqWqe &w, iba::PacketSpec &s, std::span<const uint8_t> ext, const EthOffload &eo,
                  uint32_t mtu);
    void req_cqe(Qp &qp, uint16_t index, uint8_t wqe_opcode, uint32_t byte_cnt, bool force, bool solicited);
    void req_err_cqe(Qp &qp, uint16_t index, uint8_t wqe_opcode, uint8_t syndrome);
    // rc_req.cpp, rc_comp.cpp, rc_resp.cpp: connected transports
    uint32_t rc_mtu(const Qp &qp);
    void rc_transmit(Qp &qp, uint8_t opcode, uint32_t psn, bool ack_req, bool se, std::span<const uint8_t> ext,
                     std::span<const uint8_t> payload, uint32_t dqpn);
    // The first step of rc_transmit, for a payload written in place: the
    // headers into pkt; returns where the payload_len bytes go. The caller
    // then hands pkt to Device::transmit.
    uint8_t *rc_begin(Qp &qp, Packet &pkt, uint8_t opcode, uint32_t psn, bool ack_req, bool se,
                      std::span<const uint8_t> ext, size_t payload_len, uint32_t dqpn);
    bool rc_opcode_ok(Qp &qp, const SqWqe &sw, uint8_t &synd);
    size_t rc_parse_ext(Qp &qp, const SqWqe &sw, RcWqe &w);
    bool rc_parse_wqe(Qp &qp, const SqWqe &sw, RcWqe &w, uint8_t &synd);
    uint32_t rc_send_packet(Qp &qp, RcWqe &w, uint32_t k, uint8_t &synd);
    bool rc_pump(Qp &qp);
    bool rc_must_wait(Qp &qp, const SqWqe &sw);
    bool rc_start(Qp &qp, const SqWqe &sw);
    void rc_arm_ack_timer(Qp &qp);
    void rc_add_ack_timer(Qp &qp, int64_t delay);
    bool rc_retry_budget(Qp &qp, const char *why);
    void rc_retransmit(Qp &qp, uint32_t psn, const char *why);
    void rc_req_enter(Qp &qp, ReqState to, const char *why = nullptr);
    bool rc_req_waits(const Qp &qp) const;
    void rc_fail(Qp &qp, uint8_t synd, const char *why);
    void rc_complete(Qp &qp);
    void rc_ack_upto(Qp &qp, uint32_t psn);
    bool rc_scatter(Qp &qp, uint32_t pd, const SgeList &sges, uint32_t offset,
                    std::span<const uint8_t> data, uint8_t &synd);
    void rc_requester_rx(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    void rc_got_ack(Qp &qp, uint32_t psn);
    void rc_got_rnr_nak(Qp &qp, uint32_t psn, uint8_t timer);
    void rc_got_nak(Qp &qp, uint32_t psn, uint8_t code);
    void rc_got_atomic_ack(Qp &qp, RcWqe &w, const iba::PacketView &v);
    void rc_got_read_response(Qp &qp, RcWqe &w, const Packet &pkt, const iba::PacketView &v);
    void count_request(Qp &qp, uint8_t op);
    void rc_responder_rx(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    bool rc_resp_accepts(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    bool rc_resp_check_psn(Qp &qp, const iba::PacketView &v);
    bool rc_resp_check_seq(Qp &qp, const iba::PacketView &v);
    void rc_resp_rnr(Qp &qp, uint32_t psn);
    bool rc_resp_send(Qp &qp, const iba::PacketView &v);
    bool rc_resp_write(Qp &qp, const iba::PacketView &v);
    void rc_ack(Qp &qp, uint32_t psn, uint8_t syndrome);
    void rc_owe_ack(Qp &qp, uint32_t psn);
    void rc_pay_ack(Qp &qp);
    void rc_resp_error(Qp &qp, uint32_t psn, uint8_t nak, uint8_t cqe_synd, const char *why);
    bool rc_take_recv(Qp &qp, const iba::PacketView &v);
    void rc_resp_enter(Qp &qp, RespState to, const char *why = nullptr);
    void rc_resp_cqe(Qp &qp, const iba::PacketView &v, uint8_t opcode, uint32_t byte_cnt, uint32_t imm);
    void rc_duplicate(Qp &qp, const iba::PacketView &v);
    bool rc_read_response(Qp &qp, const iba::PacketView &v, bool fresh);
    bool rc_atomic(Qp &qp, const iba::PacketView &v);
    static constexpr uint32_t kNoPd = 0xffffffff;  // matches no memory key
    uint32_t rdma_pd(const Qp &qp, const iba::PacketView &v);
    void rc_reset(Qp &qp);
    // recv.cpp
    void receive_ud(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    bool ud_accepts(Qp &qp, const Packet &pkt, const iba::PacketView &v);
    uint8_t ud_scatter(Qp &qp, uint32_t pd, uint16_t index, const iba::PacketView &v);
    bool read_recv_sges(uint64_t addr, uint32_t stride, SgeList &out);
    void resp_err_cqe(Qp &qp, uint32_t cqn, uint16_t index, uint32_t srqn, uint8_t synd);
    bool next_recv_wqe(Qp &qp, uint64_t &addr, uint32_t &stride, uint16_t &index, Srq *&srq);
    // qp.cpp
    void flush_sq(Qp &qp);
    void flush_rq(Qp &qp);
    void arm_flush_timer(Qp &qp);
    static constexpr int64_t kFlushPollMinNs = 2'000'000;
    static constexpr int64_t kFlushPollMaxNs = 64'000'000;
    void entered(Qp &qp, QpState old);
    bool create_qp_valid(CmdCtx &c, const Qp &qp);
    bool create_qp_links(CmdCtx &c, const Qp &qp, Srq *&srq, Cq *&snd, Cq *&rcv);
    void release(Qp &qp);

    Device &dev_;
    UmrEngine umr_{dev_};
    IdAllocator ids_{0x100, 0xffffff};
    std::map<uint32_t, Qp> qps_;
    std::map<iba::Gid, std::set<uint32_t>> mcgs_;
    std::vector<uint8_t> wqe_buf_;
    // First half of an SQ doorbell written as two 32-bit stores.
    struct {
        uint32_t uar = 0;
        uint32_t offset = 0;
        uint32_t value = 0;
        bool valid = false;
    } pending_half_;
    GatherList ud_msg_;             // the UD message being sent
    std::vector<DmaChunk> chunks_;  // translations of the SGE at hand
    std::vector<DmaChunk> read_chunks_;  // translations of the RDMA READ being answered
    std::vector<DataSeg> rx_segs_;  // a receive WQE as read
    SgeList ud_sges_;               // the receive WQE a datagram lands in
    // A BlueFlame write in progress, per UAR half-buffer (uar << 4 | half).
    struct BfCapture {
        bool active = false;
        uint32_t qpn = 0;
        uint16_t index = 0;
        uint32_t expected = 0;  // ds * 16
        uint32_t got = 0;       // bytes written so far
        int8_t prev_half = -1;  // half of the bfreg's previous doorbell (-1: none)
        std::array<uint8_t, kBfBufSize> bytes{};
    };
    std::map<uint32_t, BfCapture> bf_;
    std::map<uint32_t, uint8_t> bf_last_half_;  // per bfreg: the half of its last doorbell
    std::deque<uint32_t> sq_pending_;
    std::vector<uint32_t> acks_owed_;  // QPs with RcState::ack_owed, in the order they came to owe
    uint32_t quantum_ = 0;  // what the QP being served may still do in this turn
    // Trace context: the WQE whose packets are being sent, the packet
    // being received.
    int32_t tx_wqe_ = -1;
    uint64_t rx_pkt_ = 0;
    uint64_t bf_executed_ = 0;
};

}  // namespace hca
