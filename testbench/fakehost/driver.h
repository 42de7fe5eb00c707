// The driver's side of the device, played by tests and fuzzers: the
// initialization segment, the command queue with mailbox chains in polling
// and event mode, UARs and EQs (the shape of QEMU's libqos helpers).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "fake_host.h"
#include "fw/prm.h"
#include "ifc/mlx5_ifc.gen.h"

namespace hcatest {

struct CmdResult {
    uint8_t delivery = 0;
    uint8_t status = 0;
    uint32_t syndrome = 0;
    std::vector<uint8_t> out;  // whole outbox (outlen bytes)
    bool completed = false;    // ownership returned to software

    uint64_t get(hca::ifc::Field f) const { return hca::ifc::get(out.data(), f); }
};

struct EqHandle {
    uint32_t eqn = 0;
    uint64_t buf = 0;
    uint32_t nent = 0;
    unsigned vector = 0;
    uint32_t uar = 0;
    uint32_t ci = 0;
};

using Eqe = std::array<uint8_t, 64>;
using Cqe = std::array<uint8_t, 64>;

struct CqHandle {
    uint32_t cqn = 0;
    std::vector<uint64_t> pages;  // 4 KiB each
    uint32_t nent = 0;
    uint64_t dbr = 0;
    uint32_t uar = 0;
    uint32_t ci = 0;
    uint32_t stride = 64;  // 128 with cqe_sz 1 or 2 (the CQE in the second half)
};

struct QpHandle {
    uint32_t qpn = 0;
    uint8_t st = 0;
    std::vector<uint64_t> pages;
    uint32_t rq_wqes = 0;
    uint32_t rq_stride = 0;
    uint32_t sq_wqebbs = 0;
    uint64_t dbr = 0;
    uint32_t uar = 0;
    uint16_t sq_pi = 0;  // WQEBBs posted
    uint16_t rq_pi = 0;  // receive WQEs posted
    uint64_t addr(uint64_t off) const { return pages.at(off / 4096) + off % 4096; }
    uint64_t sq_addr(uint32_t wqebb) const {
        return addr(uint64_t{rq_wqes} * rq_stride + uint64_t{wqebb & (sq_wqebbs - 1)} * 64);
    }
};

// A memory region in guest memory registered with a PA or MTT key.
struct MrHandle {
    uint64_t addr = 0;  // guest physical address of the buffer
    uint64_t iova = 0;  // address the key translates (== addr for PA keys)
    uint32_t len = 0;
    uint32_t key = 0;
};

class Driver {
  public:
    explicit Driver(Bench &b) : b_(b) {}

    uint32_t iseg_read32(uint32_t off);
    uint8_t iseg_read8(uint32_t off);
    void iseg_write32(uint32_t off, uint32_t v);
    void bar_write(uint64_t off, const void *data, unsigned size);

    // Allocates the 4 KiB command page and programs its address.
    void setup_cmdq();
    // An inbox of inlen bytes with opcode/op_mod set.
    static std::vector<uint8_t> inbox(uint16_t opcode, uint16_t op_mod, size_t inlen);

    // Posts a command in slot and rings its doorbell without running the
    // device (for tests that ring several slots at once).
    void post(unsigned slot, const std::vector<uint8_t> &in, size_t outlen, uint8_t token = 0x5a);
    void ring(uint32_t bits);
    // Reads back the result of slot (whether or not it completed).
    CmdResult result(unsigned slot);
    // post + ring + pump + result.
    CmdResult exec(const std::vector<uint8_t> &in, size_t outlen, unsigned slot = 0);

    // ENABLE_HCA .. INIT_HCA as mlx5_core does it in polling mode.
    void bring_up();
    uint32_t alloc_uar();
    // CREATE_EQ with a freshly allocated buffer (owner bits set to 1 like
    // eq.c init_eq_buf()); arms it.
    EqHandle create_eq(unsigned log_size, unsigned vector, std::array<uint64_t, 4> events, uint32_t uar,
                       CmdResult *res = nullptr);
    // Next software-owned EQE, advancing the consumer index.
    std::optional<Eqe> next_eqe(EqHandle &eq);
    void eq_doorbell(const EqHandle &eq, bool arm);

    // Objects of mlx5_ib, the way the kernel builds them.
    uint32_t alloc_pd();
    uint32_t alloc_xrcd();
    // A physical-address key over all memory (mlx5_ib_get_dma_mr()).
    uint32_t create_pa_mkey(uint32_t pd, uint8_t variant = 0x11, bool remote = false);
    // An MTT key for a fresh buffer of len bytes starting at iova (4 KiB pages).
    MrHandle create_mtt_mkey(uint32_t pd, uint64_t iova, uint32_t len, uint8_t access = 0x3, CmdResult *res = nullptr);
    // Device memory as mlx5_ib's dm.c asks for it: ALLOC_MEMIC of size bytes
    // in [range_start, +range) of BAR0 (alignment 64 << log_align).
    CmdResult alloc_memic(uint64_t range_start, uint32_t range, uint32_t size, uint8_t log_align = 0);
    uint8_t dealloc_memic(uint64_t addr, uint32_t size);
    // A zero-based MEMIC key over [bar_off, bar_off + len) of BAR0, as
    // mlx5_ib_get_dm_mr() makes it (access bits as create_mtt_mkey's).
    CmdResult create_memic_mkey(uint32_t pd, uint64_t bar_off, uint64_t len, uint8_t access, uint8_t variant = 0x5d);
    // cqe_sz: 0 64-byte CQEs, 1 128-byte, 2 128-byte padded; mini_format
    // >= 0: CQE compression (cqe_comp_en) with that mini_cqe_res_format.
    CqHandle create_cq(unsigned log_size, uint32_t eqn, uint32_t uar, CmdResult *res = nullptr, unsigned cqe_sz = 0,
                       int mini_format = -1, unsigned layout = 0);
    // qpc fields beyond the defaults: set qp_fill before create_qp (used once).
    std::function<void(std::vector<uint8_t> &)> qp_fill;
    QpHandle create_qp(uint8_t st, uint32_t pd, uint32_t cqn_snd, uint32_t cqn_rcv, uint32_t uar, unsigned log_sq,
                       unsigned log_rq, CmdResult *res = nullptr, uint8_t rq_type = 0, uint32_t srqn = 0);
    CmdResult modify_qp(uint16_t opcode, uint32_t qpn, const std::function<void(std::vector<uint8_t> &)> &fill = {},
                        uint32_t opt = 0);
    // RST -> INIT -> RTR -> RTS for a UD-like QP with Q_Key qkey.
    void ud_to_rts(const QpHandle &qp, uint32_t qkey);
    std::optional<Cqe> next_cqe(CqHandle &cq);
    // The CQEs at the consumer index: one plain CQE, or a compressed
    // session decompressed as mlx5e does it (the title with each mini
    // CQE's byte count and, by format, hash, checksum or stride index; the
    // WQE counter counted on from the title's unless the stride index has
    // it). Empty if none. sessions counts the compressed sessions read.
    std::vector<Cqe> next_cqes(CqHandle &cq, int mini_format, unsigned *sessions = nullptr);
    // MODIFY_CQ resize to 2^log_size entries: a fresh buffer, CQEs the
    // driver had not polled copied after the RESIZE CQE like
    // copy_resize_cqes() does. Returns the command status.
    uint8_t resize_cq(CqHandle &cq, unsigned log_size);
    // MODIFY_CQ moderation (period in microseconds, count in CQEs).
    uint8_t moderate_cq(const CqHandle &cq, uint16_t period_us, uint16_t count);
    void cq_arm(const CqHandle &cq, bool solicited = false);
    // Post one receive WQE with a single scatter entry; rings nothing.
    void post_recv(QpHandle &qp, uint32_t lkey, uint64_t addr, uint32_t len);
    // Post a UD SEND of the given data segments (or inline bytes) and ring the doorbell.
    struct Sge {
        uint32_t lkey;
        uint64_t addr;
        uint32_t len;
    };
    void post_ud_send(QpHandle &qp, uint16_t dlid, uint32_t dqpn, uint32_t qkey, std::vector<Sge> sges,
                      bool signaled = true, const std::vector<uint8_t> &inline_data = {}, bool grh = false,
                      const std::array<uint8_t, 16> &dgid = {}, bool imm = false, uint32_t imm_data = 0,
                      bool two_halves = false);
    void ring_sq(QpHandle &qp, uint32_t wqebb_index, uint32_t ds, uint8_t opcode, bool two_halves = false);
    // A send WQE of a connected QP (RC/UC/XRC/DCI); rings the doorbell.
    struct SendWr {
        uint8_t opcode = hca::kWqeSend;
        std::vector<Sge> sges;
        std::vector<uint8_t> inline_data;
        uint64_t raddr = 0;
        uint32_t rkey = 0;
        uint64_t swap_add = 0;
        uint64_t compare = 0;
        uint32_t imm = 0;
        uint32_t xrc_srqn = 0;
        bool signaled = true;
        bool solicited = false;
        uint8_t fence = 0;
        // A DCI's address segment: the DCT, its LID and access key.
        uint32_t dctn = 0;
        uint16_t dlid = 0;
        uint64_t dc_key = 0;
    };
    void post_send(QpHandle &qp, const SendWr &wr, bool ring = true);
    // Any WQE: a control segment for opcode/imm followed by body (whole
    // 16-byte units); rings the doorbell.
    void post_raw(QpHandle &qp, uint8_t opcode, uint32_t imm, const std::vector<uint8_t> &body, bool signaled = true,
                  uint8_t fence = 0);
    // A free, UMR-enabled MTT key with room for octwords*2 pages, like the
    // MR cache (mr.c set_cache_mkc()) and ib_alloc_mr().
    uint32_t create_free_mkey(uint32_t pd, uint32_t octwords, uint8_t variant = 0x33);
    // A memory window as mlx5_ib_alloc_mw() makes it: a free, UMR-enabled
    // KLM key with room for 4 entries, remote invalidation for type 2.
    uint32_t create_window(uint32_t pd, bool type2, uint8_t variant = 0x44, CmdResult *res = nullptr,
                           bool free = true);
    // An indirect key of pd (mode 2: KLM, 3: KSM) over all addresses
    // (length64), every access right, its entries given at creation (one
    // per octoword: byte count, key, address; KSM ignores the count) and
    // entities of 2^log_page bytes (KSM); a free key waits for a UMR.
    struct IndirectEntry {
        uint32_t bc;
        uint32_t key;
        uint64_t addr;
    };
    uint32_t create_indirect_mkey(uint32_t pd, uint8_t mode, uint8_t log_page, uint32_t octwords,
                                  const std::vector<IndirectEntry> &entries, bool free = false,
                                  CmdResult *res = nullptr);
    // RST -> INIT -> RTR -> RTS for a connected QP talking to remote_qpn at dlid.
    void connect_qp(const QpHandle &qp, uint32_t remote_qpn, uint16_t dlid, uint8_t mtu = 3, uint8_t retry = 7,
                    uint8_t rnr_retry = 7, uint8_t timeout = 14, uint8_t min_rnr = 1);
    // MAD_IFC with a 256-byte MAD; returns the response MAD (status in bytes 4..5).
    CmdResult mad_ifc(const std::array<uint8_t, 256> &mad, std::array<uint8_t, 256> &resp, uint16_t op_mod = 3);
    // Sets the port's LID/SM LID and walks it Init -> Armed -> Active through the SMA.
    void activate_port(uint16_t lid, uint16_t sm_lid = 1);

    Bench &bench() { return b_; }
    // Whether ringing a send doorbell also runs the device at once (the
    // default).  Off, doorbells only queue, as the vCPU's MMIO writes do
    // under QEMU until the main loop runs the device's bottom half; the
    // caller pumps (the benchmark's batches).
    bool run_on_doorbell = true;
    uint64_t cmdq() const { return cmdq_; }

  private:
    uint64_t chain(size_t bytes, uint8_t token);  // allocates a mailbox chain

    Bench &b_;
    uint64_t cmdq_ = 0;
    std::map<uint32_t, std::vector<uint64_t>> pages_;  // EQ buffers by EQN
    struct Slot {
        uint64_t out_chain = 0;
        size_t outlen = 0;
    };
    std::array<Slot, 32> slots_{};
};

}  // namespace hcatest
