// The send queue stage: SQ doorbells and BlueFlame writes, the run budget
// that serves the rung QPs round robin, the one WQE loop of every
// transport (fetch, decode, checks), and the UD/QP0/QP1 send with its
// IPoIB offloads. Connected QPs' WQEs go to the requester, UMR WQEs to the
// UMR engine.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "datapath/umr.h"
#include "datapath/wqe.h"
#include "fifo.h"
#include "iba/packet.h"
#include "objects/mkey.h"
#include "timers.h"

namespace hca {

class Device;
class QpTable;
struct Qp;

class SendQueue {
  public:
    SendQueue(Device &dev, QpTable &qps) : dev_(dev), qps_(qps), umr_(dev) {}
    void reset();
    // A UAR page changed hands (ALLOC_UAR/DEALLOC_UAR): its bfregs start
    // over (BlueFlame half, partial BlueFlame copies).
    void forget_uar(uint32_t uar);

    // SQ doorbell / BlueFlame write at UAR +0x800..
    static constexpr uint32_t kBfBufSize = 256;  // (1 << log_bf_reg_size) / 2
    void doorbell(uint32_t uar, uint32_t offset, const uint8_t *data, unsigned size);
    // Runs the send queues rung or left with work, round robin: each QP in
    // turn does up to kQuantum WQEs or packets, until the device's run
    // budget is spent.
    void process_pending();
    bool has_work() const { return !pending_.empty(); }
    // Does a send queue wait for the rest of a BlueFlame copy? Then the
    // write that completes it asks for a device run (completes_copy()).
    bool copy_awaited() const { return !waits_.empty(); }
    // At the MMIO write, before any run: may the head of a copy (data,
    // the 8 bytes at a half-buffer's start) leave its run to the write
    // that completes the copy? Yes on a bfreg whose doorbells come with
    // copies: a run between the head and the rest would only wait for it.
    bool defer_head(uint32_t uar, uint32_t offset, const uint8_t *data);
    // Would this write at UAR uar +offset complete a copy whose head left
    // its run to it, or one a send queue waits for?
    bool completes_copy(uint32_t uar, uint32_t offset, unsigned size);
    // How long a send queue waits for the rest of a copy whose head is in
    // before it fetches the WQE from memory (a vCPU preempted in the middle
    // of a copy, or a guest that never finishes one).
    static constexpr int64_t kCopyWaitNs = 1'000'000;
    static constexpr uint32_t kQuantum = 16;
    uint64_t bf_executed() const { return bf_executed_; }

    // For the other stages and the QP commands: run a QP's send queue now
    // (a transition to RTS, a completion that frees a fenced WQE).
    void process(Qp &qp);
    // The run budget: may this QP do one more WQE or packet now? If not,
    // defer() queues it for a later turn.
    bool may_work() const;
    void spend() {
        if (quantum_) {
            --quantum_;
        }
    }
    void defer(Qp &qp);
    // A WQE that could not be carried out: its error CQE, and the QP goes to
    // error (a UD-like QP to SQ error). Returns false.
    bool fail_wqe(Qp &qp, const SqWqe &w, uint8_t synd, const char *why);
    // The same for the WQE at index (next: the WQEBB after it), no longer
    // at hand (a page fault resumed with error).
    void fail_at(Qp &qp, uint16_t index, uint16_t next, uint8_t opcode, uint8_t synd, const char *why);

  private:
    enum class Fetch { Ok, NotReadable, BadSize };
    void doorbell_head(uint32_t uar, uint32_t offset, uint32_t buf_key, uint32_t head, uint32_t qpn_ds);
    struct BfCapture;
    // A copy that will not be completed (torn, overtaken, overdue): its QP
    // stops waiting for it.
    void abandon(BfCapture &cap);
    // The wait of QP qpn for its copy of WQE index ends (whole or not).
    void end_wait(uint32_t qpn, uint16_t index, const char *why);
    // The send queue stops at a WQE whose copy is under way; a timer bounds
    // the wait.
    void await_copy(Qp &qp, uint16_t index);
    void copy_overdue(uint32_t qpn, uint16_t index);
    Fetch fetch_wqe(Qp &qp, uint16_t index, uint16_t pi, uint32_t &ds, uint32_t &bbs);
    void consume_to(Qp &qp, uint16_t next);
    void consume_wqe(Qp &qp, uint32_t bbs);
    bool sq_producer(Qp &qp, uint16_t &pi);
    bool execute_wqe(Qp &qp, const SqWqe &w);
    bool local_done(Qp &qp, const SqWqe &w);
    bool send_ud(Qp &qp, const SqWqe &w);
    bool gather_failed(Qp &qp, const SqWqe &w, uint8_t synd, uint32_t done);
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

    Device &dev_;
    QpTable &qps_;
    UmrEngine umr_;
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
    // A BlueFlame write in progress, per UAR half-buffer (uar << 4 | half).
    struct BfCapture {
        bool active = false;    // a copy may follow the head and has not been torn
        bool possible = false;  // the head allowed a copy (BlueFlame on, the WQE small enough)
        bool late = false;      // the wait for its rest ran out (copy_overdue()): the rest is no error
        uint32_t qpn = 0;
        uint16_t index = 0;
        uint32_t expected = 0;  // ds * 16
        uint32_t got = 0;       // bytes written so far
        int8_t prev_half = -1;  // half of the bfreg's previous doorbell (-1: none)
        std::array<uint8_t, kBfBufSize> bytes{};
    };
    std::map<uint32_t, BfCapture> bf_;
    // Per bfreg (uar << 3 | bfreg): the half of its last doorbell, and how
    // its doorbells have come, judged by the last one that allowed a copy.
    // libmlx5 copies a single small WQE and rings for a list or a big one,
    // mlx5_ib rings only, mlx5_core's write-combining test copies every
    // NOP. A send queue waits for a copy only on a bfreg that carries them.
    enum class BfUse : uint8_t { Unknown, Copies, Plain };
    // A head that left its run to the end of its copy (defer_head()): the
    // bytes the copy needs (0: none deferred), and until when it may take.
    // A timer runs the device for a head whose copy does not come in time;
    // such a head is taken in as overdue (no wait for its copy).
    struct DeferredHead {
        uint32_t end = 0;
        int64_t deadline = 0;
        bool overdue = false;
    };
    struct BfReg {
        uint8_t last_half = 0;
        BfUse use = BfUse::Unknown;
        std::array<DeferredHead, 2> deferred{};  // per half-buffer
    };
    std::map<uint32_t, BfReg> bfregs_;
    // How the doorbells of buf_key's bfreg come, as soon as it is known: a
    // copy completed, or one overdue. (A head also judges the doorbell
    // before it.)
    void judge(uint32_t buf_key, BfUse use);
    // QPs waiting for a copy: their timers, and where the copy ends (the
    // half-buffer, uar << 4 | half, and the bytes it needs).
    struct CopyWait {
        Timers::Id timer = 0;
        uint32_t buf_key = 0;
        uint32_t end = 0;
    };
    std::map<uint32_t, CopyWait> waits_;
    // How many heads wait for their copies (BfReg::deferred, whose state
    // lives with its bfreg: a post allocates nothing).
    uint32_t deferred_heads_ = 0;
    bool deferred_timer_ = false;
    void deferred_heads_due();
    Fifo<uint32_t, 1024> pending_;          // QPs rung or left with work, in turn order
    uint32_t quantum_ = 0;                  // what the QP being served may still do in this turn
    uint64_t bf_executed_ = 0;
};

}  // namespace hca
