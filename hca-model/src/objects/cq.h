// Completion queues: CREATE/DESTROY/QUERY_CQ, CQE writing with the owner
// bit, overrun detection against the doorbell record, arming through
// UAR +0x20 with one completion EQE per arm, and CQE compression
// (cqe_comp_en: sessions of a title CQE and mini CQE arrays).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "be.h"
#include "datapath/wqe.h"
#include "objects/devx.h"
#include "objects/ids.h"
#include "objects/pages.h"

namespace hca {

struct CmdCtx;
class Device;

// The CQ arm doorbell (mlx5_cq_arm(): the arm sequence number, command and
// consumer index, then the CQ number), written to the UAR at 0x20.
struct CqArmDoorbell {
    be32 sn_cmd_ci;  // 29:28 sn, 27:24 command, 23:0 consumer index
    be32 cqn;
};
static_assert(sizeof(CqArmDoorbell) == 8);

struct Cq {
    enum class Arm : uint8_t { None, Next, Solicited };

    uint32_t cqn = 0;
    uint8_t log_size = 0;
    uint32_t uar = 0;
    uint32_t eqn = 0;
    uint32_t stride = 64;  // 64- or 128-byte CQEs (the 64-byte CQE sits in the second half)
    bool pad128 = false;   // cqe_sz 2: every CQE written as a whole 128 bytes, zeros first
    uint8_t log_page_size = 0;
    uint32_t page_offset = 0;
    PageList buf;
    uint64_t dbr = 0;
    uint16_t uid = 0;
    UmemPin pins[2];        // a DEVX CQ's doorbell and buffer UMEMs
    bool oi = false;        // ignore overrun
    uint8_t status = 0;     // cqc.status: 0 OK, 9 overflow, 0xa write failure
    uint32_t pi = 0;        // CQEs produced
    uint32_t ci_seen = 0;   // consumer counter last read from the doorbell record
    Arm arm = Arm::None;
    uint64_t cqes = 0;
    uint64_t events = 0;
    // Event moderation (MODIFY_CQ): an event after max_count CQEs or
    // period_us after the first CQE since the arm, whichever comes first.
    uint16_t max_count = 0;
    uint16_t period_us = 0;
    uint32_t mod_pending = 0;
    uint64_t mod_timer = 0;
    uint32_t refs = 0;      // QPs and SRQs using this CQ
    // The cqe-delay fault: CQEs waiting to be written, in order, and the
    // timer that writes them.
    struct Held {
        Cqe64 cqe;
        bool solicited;
    };
    std::deque<Held> held;
    uint64_t hold_timer = 0;
    // CQE compression (cqc.cqe_comp_en, mini_cqe_res_format): responder
    // CQEs of one QP that follow each other within one run of the device
    // are written as one session (CqTable::flush()).
    bool comp = false;
    uint8_t mini_format = 0;  // CqTable::kMini*
    struct Session {
        uint32_t at = 0;  // the title's index (producer counter)
        uint32_t n = 0;   // CQEs in it (0: no session open)
        Cqe64 title{};    // the first CQE
        uint16_t last_wqe = 0;
        std::vector<std::array<uint8_t, 8>> minis;  // one per CQE, the first's too
    } session;

    uint32_t nent() const { return 1u << log_size; }
};

class CqTable {
  public:
    static constexpr uint8_t kStatusOk = 0x0;
    static constexpr uint8_t kStatusOverflow = 0x9;
    static constexpr uint8_t kStatusWriteFail = 0xa;
    // mlx5_eqe_cq_err.syndrome (PRM: 1 CQ overrun, 2 CQ access violation)
    static constexpr uint8_t kCqErrOverrun = 1;
    static constexpr uint8_t kCqErrAccess = 2;

    explicit CqTable(Device &dev) : dev_(dev) {}
    void reset();
    Cq *find(uint32_t cqn);
    // The CQ a command acts on, or (an object it creates names) uses: null,
    // with the command failed, when there is none or the uid may not.
    Cq *find_for(CmdCtx &c, uint32_t cqn);
    Cq *find_used_by(CmdCtx &c, uint32_t cqn, const char *what);
    size_t count() const { return cqs_.size(); }

    void cmd_create_cq(CmdCtx &c);
    void cmd_destroy_cq(CmdCtx &c);
    void cmd_query_cq(CmdCtx &c);
    void cmd_modify_cq(CmdCtx &c);  // moderation (op_mod 0) and resize (op_mod 1)

    // Arm doorbell: dword0 = sn << 28 | cmd | ci, dword1 = cqn.
    void doorbell(uint32_t uar, const uint8_t *data);
    // Writes a CQE (owner bit and op_own set here); false if dropped.
    // solicited: SE or an error completion (wakes REQ_NOT_SOL arms).
    bool post(uint32_t cqn, Cqe64 &cqe, bool solicited);
    std::string info() const;

    // At most this many CQEs wait for a cqe-delay: then the CQ catches up.
    static constexpr size_t kMaxHeld = 4096;

    // mini_cqe_res_format: what a mini CQE carries besides the byte count
    // (include/linux/mlx5/device.h MLX5_CQE_FORMAT_*, mlx5_mini_cqe8).
    static constexpr uint8_t kMiniHash = 0;        // rx_hash_result
    static constexpr uint8_t kMiniCsum = 1;        // check_sum
    static constexpr uint8_t kMiniCsumStridx = 3;  // check_sum, stride index
    // cqe_compression_max_num: the most CQEs one session holds.
    static constexpr uint32_t kMaxSession = 64;
    // Writes every open compression session (the end of a device run, or
    // of its timers): nothing stays unwritten once the device is idle.
    void flush_sessions();
    static const char *mini_format_name(uint8_t format);

  private:
    void notify(Cq &cq);
    bool deliver(Cq &cq, Cqe64 &cqe, bool solicited);
    void release(Cq &cq, const char *why);
    bool write_cqe(Cq &cq, Cqe64 &cqe);
    // One 64-byte CQE or mini CQE array at index (the owner bit of op_own
    // set here for a CQE), op_own last; false (CQ in error) if not guest
    // memory.
    bool write_slot(Cq &cq, uint32_t index, const uint8_t *bytes, bool cqe);
    // CQE compression: a CQE joins the CQ's open session, opens one, or
    // is written alone; flush() writes the session.
    [[gnu::noinline]] bool produce(Cq &cq, Cqe64 &cqe);
    bool joins(const Cq &cq, const Cqe64 &cqe) const;
    void add_mini(Cq &cq, const Cqe64 &cqe);
    bool flush(Cq &cq);
    void resize(CmdCtx &c, Cq &cq, uint32_t select);
    bool compression_ok(CmdCtx &c, Cq &cq);

    Device &dev_;
    IdAllocator ids_{1, 1u << 24};
    std::map<uint32_t, Cq> cqs_;
    std::vector<uint32_t> open_;  // CQs with an open compression session
};

}  // namespace hca
