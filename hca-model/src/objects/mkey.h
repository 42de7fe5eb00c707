// Memory keys (CREATE/DESTROY/QUERY_MKEY) and the translation every SGE,
// RDMA address and atomic goes through: key variant, free state, PD, the QP
// a type 2 window is bound to, bounds, access rights, then physical (PA),
// page-table (MTT), indirect (KLM: memory windows, KSM) or device memory (MEMIC)
// translation; KSM keys are indirect keys of fixed-size entries
// (1 << log_page_size bytes each, implicit on-demand paging).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "be.h"
#include "objects/devx.h"
#include "objects/dma_chunk.h"
#include "objects/ids.h"
#include "objects/sig.h"
#include "objects/xlt_table.h"

namespace hca {

struct CmdCtx;
class Device;

// mkc.access_mode (4:2 and 1:0 together).
enum class MkeyMode : uint8_t { Pa = 0, Mtt = 1, Klm = 2, Ksm = 3, Memic = 5 };

// Access rights needed by an operation.
enum Access : uint8_t {
    kAccLocalRead = 1,
    kAccLocalWrite = 2,
    kAccRemoteRead = 4,
    kAccRemoteWrite = 8,
    kAccRemoteAtomic = 16,
};

// The access bits of an MTT entry (mlx5_ib MLX5_IB_MTT_READ / _WRITE).
inline constexpr uint64_t kMttRead = 1;
inline constexpr uint64_t kMttWrite = 2;
inline constexpr uint64_t kMttAccess = kMttRead | kMttWrite;

// One entry of an indirect key's list (mlx5_klm): byte_count bytes of key
// from address on, after the bytes of the entries before it.
struct Klm {
    uint32_t bc = 0;
    uint32_t key = 0;
    uint64_t addr = 0;
    bool operator==(const Klm &) const = default;
};

// An entry of a KLM or KSM list as the driver writes it (mlx5_klm;
// a KSM entry's byte count is reserved).
struct KlmSeg {
    be32 byte_count;
    be32 key;
    be64 va;
};
static_assert(sizeof(KlmSeg) == 16);

inline constexpr uint32_t kAnyQpn = 0xffffff;

// A signature key's BSF: 64 bytes (struct mlx5_bsf, MLX5_MKEY_BSF_OCTO_SIZE).
inline constexpr uint32_t kBsfOctwords = 4;

// A KLM list whose first entry names this "key" is a repeated block
// (mlx5_wqe_umr_repeat_block_seg: byte_count, op 0x400, repeat_count,
// num_ent), its entries strided (mlx5_wqe_umr_repeat_ent_seg: stride,
// byte_count, key, address): mlx5dv_wr_mr_interleaved(). A key stores it
// as the UMR gave it, one KLM entry per octoword.
inline constexpr uint32_t kRepeatBlockOp = 0x400;

// The null mkey (QUERY_SPECIAL_CONTEXTS, cap null_mkey): index 0, never
// allocated. A KSM entry naming it maps nothing; an access through it page
// faults (implicit on-demand paging: mlx5_ib zaps a KSM key's entries to it
// and fills them with 1 GiB children as faults come).
inline constexpr uint32_t kNullMkey = 0x00000001;

struct Mkey {
    uint32_t index = 0;
    uint8_t variant = 0;  // mkc.mkey_7_0
    uint32_t pd = 0;
    uint32_t qpn = kAnyQpn;     // a bound type 2 window's QP
    uint16_t uid = 0;
    UmemPin pin;  // a DEVX key's UMEM
    MkeyMode mode = MkeyMode::Pa;
    bool free = false;
    bool umr_en = false;
    bool lr = false, lw = false, rr = false, rw = false, a = false;
    bool length64 = false;
    bool en_rinval = false;
    uint64_t start = 0;
    uint64_t len = 0;
    uint8_t log_page_size = 12;
    uint32_t octwords = 0;      // translations_octword_size
    // MTT mode: page addresses, each with its access bits in bits 1:0
    // (kMttRead, kMttWrite). A page without the bit an access needs is not
    // present: the access page-faults (on-demand paging, datapath/odp.h).
    XltTable<uint64_t> mtt;
    // KLM and KSM modes: the entries (a KSM entry has no byte count; one
    // never loaded names the null mkey).
    XltTable<Klm> klm;
    // A signature key (created with bsf_en): its BSF once a UMR enabled it
    // (objects/sig.h), and its signature error arming: a block that fails
    // its check is reported (a SIGERR CQE) while the count of reported
    // errors and expected_sigerr_count (set by a UMR) differ in parity.
    bool bsf_en = false;
    std::unique_ptr<SigState> sig;
    bool sigerr_expected = false;
    uint32_t sigerr_count = 0;

    uint32_t key() const { return index << 8 | variant; }
    // The page address of MTT entry i, without its access bits.
    uint64_t page(size_t i) const { return mtt[i] & ~uint64_t{7}; }
};

// Access rights as the trace writes them: "rwRWA", a "-" for each missing.
inline std::string access_letters(bool lr, bool lw, bool rr, bool rw, bool a) {
    return {lr ? 'r' : '-', lw ? 'w' : '-', rr ? 'R' : '-', rw ? 'W' : '-', a ? 'A' : '-'};
}

// PageFault: a page of an MTT key is not present for the access (its entry
// lacks the read or write bit); the caller raises a page fault (odp.h).
// Signature: a signature key with its BSF enabled where the path does not
// carry signatures (datapath/sig_xfer.h lists the paths that do).
enum class XlatError : uint8_t {
    None,
    BadKey,
    Free,
    BadPd,
    BoundQp,
    Bounds,
    Access,
    NoTranslation,
    Depth,
    PageFault,
    Signature
};
const char *xlat_error_name(XlatError e);

// A user-mode memory registration (UMR WQE, include/linux/mlx5/qp.h
// mlx5_wqe_umr_ctrl_seg + mlx5_mkey_seg): which fields of the mkey change
// (mkey_mask, MLX5_MKEY_MASK_*), the new values, and translation entries
// to load at an offset.
struct UmrOp {
    // mlx5_wqe_umr_ctrl_seg.flags
    static constexpr uint8_t kCheckQpn = 1 << 3;  // fail unless a bound window is bound to this QP
    static constexpr uint8_t kOffsetEn = 1 << 4;
    static constexpr uint8_t kCheckMask = 3 << 5;
    static constexpr uint8_t kCheckNotFree = 1 << 5;  // fail unless the key is free
    static constexpr uint8_t kCheckFree = 2 << 5;     // fail if the key is free
    static constexpr uint8_t kInline = 1 << 7;
    // MLX5_MKEY_MASK_*
    static constexpr uint64_t kMaskLen = 1ull << 0;
    static constexpr uint64_t kMaskPageSize = 1ull << 1;
    static constexpr uint64_t kMaskStartAddr = 1ull << 6;
    static constexpr uint64_t kMaskPd = 1ull << 7;
    static constexpr uint64_t kMaskEnRinval = 1ull << 8;
    static constexpr uint64_t kMaskEnSigerr = 1ull << 9;
    static constexpr uint64_t kMaskBsfEn = 1ull << 12;
    static constexpr uint64_t kMaskKey = 1ull << 13;
    static constexpr uint64_t kMaskQpn = 1ull << 14;
    static constexpr uint64_t kMaskLr = 1ull << 17;
    static constexpr uint64_t kMaskLw = 1ull << 18;
    static constexpr uint64_t kMaskRr = 1ull << 19;
    static constexpr uint64_t kMaskRw = 1ull << 20;
    static constexpr uint64_t kMaskA = 1ull << 21;
    static constexpr uint64_t kMaskSmallFence = 1ull << 23;
    static constexpr uint64_t kMaskRoWrite = 1ull << 25;
    static constexpr uint64_t kMaskFree = 1ull << 29;
    static constexpr uint64_t kMaskRoRead = 1ull << 47;
    static constexpr uint64_t kMaskSupported = kMaskLen | kMaskPageSize | kMaskStartAddr | kMaskPd | kMaskEnRinval |
                                               kMaskKey | kMaskQpn | kMaskLr | kMaskLw | kMaskRr | kMaskRw | kMaskA |
                                               kMaskSmallFence | kMaskRoWrite | kMaskFree | kMaskRoRead |
                                               kMaskEnSigerr | kMaskBsfEn;

    uint32_t key = 0;       // ctrl imm: the key to modify
    uint32_t qpn = kAnyQpn;  // the issuing QP (kCheckQpn)
    uint8_t flags = 0;
    uint64_t mask = 0;
    const uint8_t *mkc = nullptr;     // 64-byte mkey segment (mkc layout)
    uint64_t xlt_first = 0;           // first translation entry to load
    bool xlt_offset_high = false;     // xlt_offset_47_16 set (needs umr_extended_translation_offset)
    std::vector<uint64_t> xlt;        // entries (big-endian decoded)
    std::span<const uint8_t> bsf;     // the BSF after the entries (BSF_EN with bsf_en set)
};

// Why a UMR failed; the WQE completes in error with kSyndLocalProt for the
// key checks and kSyndLocalQpOp for malformed requests.
enum class UmrError : uint8_t {
    None,
    NoKey,
    NotUmrEnabled,
    Variant,
    IsFree,
    NotFree,
    BadPd,
    OtherQp,
    BadMask,
    BadPageSize,
    XltTooLong,
    XltNoMtt,
    XltOffset,
    Budget,
    BindMr,
    NoBsf,
    BadBsf
};
const char *umr_error_name(UmrError e);

class MkeyTable {
  public:
    static constexpr uint32_t kFirstIndex = 2;  // 0 and 1 would collide with MLX5_INVALID_LKEY (0x100)

    explicit MkeyTable(Device &dev) : dev_(dev) {}
    void reset();
    size_t count() const { return mkeys_.size(); }
    size_t sig_keys() const { return sig_keys_; }  // keys with their BSF enabled
    uint64_t mtt_entries() const { return mtt_entries_; }
    const Mkey *find(uint32_t key) const;
    Mkey *find(uint32_t key);
    // The key's signature state if it is a signature key with its BSF
    // enabled, else nullptr.
    SigState *sig_of(uint32_t key);

    // Translates [va, va+len) of key for an object of protection domain pd
    // (and, for a remote access, the responder QP qpn: a type 2 window
    // serves only the QP it is bound to); appends the physical pieces to out
    // (merging adjacent ones).
    XlatError translate(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                        std::vector<DmaChunk> &out, uint32_t qpn = kAnyQpn) const;

    // translate() of a signature key's own layout (the memory domain's
    // bytes), which translate() refuses.
    XlatError translate_layout(const Mkey &m, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                               std::vector<DmaChunk> &out) const;

    // Remote invalidation (SEND with Invalidate, arriving on QP qpn): the
    // key becomes free (IBA 10.6.5); a type 2 window only from its QP.
    bool invalidate(uint32_t key, uint32_t pd, uint32_t qpn = kAnyQpn);

    // Applies a UMR. qp_pd is the PD of the issuing QP, or nullptr for the
    // privileged UMR QP, which may modify a key of any PD.
    UmrError umr(const UmrOp &op, const uint32_t *qp_pd);

    void cmd_create_mkey(CmdCtx &c);
    void cmd_destroy_mkey(CmdCtx &c);
    void cmd_query_mkey(CmdCtx &c);
    void cmd_query_special_contexts(CmdCtx &c);
    std::string info() const;

  private:
    // The checks of a UMR's translation entries; the last one charges the
    // entries the table grows by to the budget.
    struct XltLoad {  // a UMR's entries as the key stores them
        size_t first = 0;
        std::vector<uint64_t> mtt;
        std::vector<Klm> klm;
    };
    UmrError charge_xlt(Mkey &m, const UmrOp &op, XltLoad &load);
    UmrError load_bsf(const Mkey &m, const UmrOp &op, std::unique_ptr<SigState> &out) const;
    // A window bind's checks of the keys its KLM entries name (IBA
    // 10.6.7.2: same PD, valid, the range inside, local write under remote
    // write or atomic access).
    bool bind_ok(const Mkey &w, const UmrOp &op) const;
    void apply_umr(Mkey &m, const UmrOp &op, const XltLoad &load);
    // CREATE_MKEY's access mode checks (PA, MTT, KLM, KSM, MEMIC).
    bool create_mode_ok(CmdCtx &c, const Mkey &m, uint32_t mode) const;
    // An indirect key's entries given at creation (KLM or KSM).
    bool create_indirect(CmdCtx &c, Mkey &m);
    bool create_mtt(CmdCtx &c, Mkey &m);
    bool create_mtt_umem(CmdCtx &c, Mkey &m, uint64_t pages);
    // Takes cost units of the budget for a new key's entries, or fails the
    // command with EXCEED_LIM.
    bool charge(CmdCtx &c, uint64_t cost, uint64_t entries);
    XlatError translate_mtt(const Mkey &m, uint64_t va, uint64_t len, uint8_t access, std::vector<DmaChunk> &out) const;
    XlatError translate_klm(const Mkey &m, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                            std::vector<DmaChunk> &out, int depth) const;
    XlatError translate_repeat(const Mkey &m, uint32_t pd, uint64_t off, uint64_t len, uint8_t access,
                               std::vector<DmaChunk> &out, int depth) const;
    XlatError translate_ksm(const Mkey &m, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                            std::vector<DmaChunk> &out, int depth) const;
    XlatError translate_in(const Mkey &m, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                           std::vector<DmaChunk> &out, int depth) const;
    XlatError translate_key(const Mkey &m, uint32_t pd, uint64_t va, uint64_t len, uint8_t access,
                            std::vector<DmaChunk> &out, int depth) const;

    Device &dev_;
    IdAllocator ids_{kFirstIndex, 1u << 24};
    std::map<uint32_t, Mkey> mkeys_;  // by index
    uint64_t mtt_entries_ = 0;        // of all keys, charged to the device's budget
    size_t sig_keys_ = 0;             // keys with a BSF: none, and sig_of() is free
};

}  // namespace hca
