#include "objects/sig.h"

#include <fmt/format.h>
#include <isa-l/crc.h>
#include <libdeflate.h>
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "be.h"
#include "datapath/ipoib_offload.h"

namespace hca {

namespace {

// include/linux/mlx5/qp.h struct mlx5_bsf_inl: one domain's T10-DIF
// section.
struct BsfInline {
    be16 vld_refresh;  // 15: valid
    be16 dif_apptag;
    be32 dif_reftag;
    uint8_t sig_type;  // kDifCrc or kDifIpcs: the guard
    uint8_t rp_inv_seed;
    uint8_t rsvd[3];
    uint8_t dif_inc_ref_guard_check;
    be16 dif_app_bitmask_check;
};
static_assert(sizeof(BsfInline) == 16 && offsetof(BsfInline, sig_type) == 8);

// struct mlx5_bsf: the basic, extended and inline sections.
struct Bsf {
    uint8_t bsf_size_sbs;
    uint8_t check_byte_mask;
    uint8_t wire_selector;  // with sbs: copy_byte_mask
    uint8_t mem_selector;
    be32 raw_data_size;
    be32 w_bfs_psv;
    be32 m_bfs_psv;
    uint8_t ext[16];  // mlx5_bsf_ext: not used
    BsfInline w_inl;
    BsfInline m_inl;
};
static_assert(sizeof(Bsf) == 64 && offsetof(Bsf, w_bfs_psv) == 8 && offsetof(Bsf, m_inl) == 48);

// mlx5_bsf_basic.bsf_size_sbs; mlx5_bsf_inl's bits.
constexpr uint8_t kBsfSizeInline = 2;  // bits 7:6: basic + extended + inline sections
constexpr uint8_t kBsfSbs = 1 << 4;
constexpr uint16_t kInlValid = 1 << 15;
constexpr uint8_t kDifCrc = 1;
constexpr uint8_t kDifIpcs = 2;
constexpr uint8_t kInlSeed = 0x08;
constexpr uint8_t kInlIncRef = 0x40;
constexpr uint8_t kInlAppRefEscape = 0x02;
constexpr uint8_t kInlAppEscape = 0x01;
// The block format selector of a CRC domain (w_bfs_psv/m_bfs_psv 31:24):
// the CRC in bits 7:4 (2: CRC32; CRC32C and CRC64 are not offered), then
// repeat and seed bits.
constexpr uint8_t kBfsCrc32 = 0x20;
constexpr uint8_t kBfsCrcTypeMask = 0xf0;
constexpr uint8_t kBfsSeedZero = 0x01;

uint32_t block_of_selector(uint8_t sel) {
    switch (sel) {
        case 1:
            return 512;
        case 2:
            return 520;
        case 3:
            return 4096;
        case 4:
            return 4160;
        default:
            return 0;  // 4048 (6) is not offered (sig_block_4048 0)
    }
}

// One domain: its block format selector and PSV, its inline section, its
// block size selector (0 with the same block structure: the memory's).
const char *parse_domain(be32 bfs_psv, const BsfInline &inl, uint8_t bs_sel, SigDomain &d) {
    const uint32_t bp = bfs_psv.get();
    const uint8_t bfs = static_cast<uint8_t>(bp >> 24);
    d.psv = bp & 0xffffff;
    if (inl.vld_refresh.get() & kInlValid) {
        d.type = SigType::T10dif;
        if (inl.sig_type != kDifCrc && inl.sig_type != kDifIpcs) {
            return "T10-DIF guard type is neither CRC nor IP checksum";
        }
        d.ip_csum = inl.sig_type == kDifIpcs;
        d.guard_seed = inl.rp_inv_seed & kInlSeed;
        d.app_tag = inl.dif_apptag.get();
        d.ref_tag = inl.dif_reftag.get();
        const uint8_t flags = inl.dif_inc_ref_guard_check;
        d.inc_ref = flags & kInlIncRef;
        d.appref_escape = flags & kInlAppRefEscape;
        d.app_escape = (flags & kInlAppEscape) && !d.appref_escape;
        d.app_mask = inl.dif_app_bitmask_check.get();
    } else if (bfs) {
        if ((bfs & kBfsCrcTypeMask) != kBfsCrc32) {
            return "CRC type other than CRC32 (sig_crc32c and sig_crc64_xp10 are not offered)";
        }
        d.type = SigType::Crc32;
        d.crc_seed_zero = bfs & kBfsSeedZero;
    } else {
        return nullptr;  // no signature in this domain
    }
    d.block = block_of_selector(bs_sel);
    return d.block ? nullptr : "block size selector not offered";
}

uint16_t guard_of(const SigDomain &d, const uint8_t *data) {
    if (d.ip_csum) {
        // The Internet checksum of the block (Linux's t10_pi_ip_fn()).
        // ipoib::sum() adds in host order: its folded value, stored as is,
        // is the checksum's bytes, read here as the big-endian guard.
        const uint16_t csum = static_cast<uint16_t>(~ipoib::fold(ipoib::sum(data, d.block, 0)));
        uint8_t bytes[2];
        std::memcpy(bytes, &csum, 2);
        return load_be16(bytes);
    }
    return crc16_t10dif(d.guard_seed ? 0xffff : 0, data, d.block);
}

uint32_t crc_of(const SigDomain &d, const uint8_t *data) {
    // libdeflate inverts what it is given first: ~0 starts the CRC at zero.
    return libdeflate_crc32(d.crc_seed_zero ? 0xffffffffu : 0, data, d.block);
}

}  // namespace

std::string SigDomain::describe() const {
    switch (type) {
        case SigType::None:
            return "none";
        case SigType::Crc32:
            return fmt::format("crc32/{}{}", block, crc_seed_zero ? "/seed0" : "");
        case SigType::T10dif:
            return fmt::format("t10dif/{}/{}/app=0x{:x}/ref=0x{:x}{}", block, ip_csum ? "ipcs" : "crc", app_tag,
                               ref_tag, inc_ref ? "/inc" : "");
    }
    return "?";
}

uint32_t SigConfig::unit() const {
    return block() + std::min(mem.pi_bytes(), wire.pi_bytes());
}

const char *parse_bsf(std::span<const uint8_t> bsf, SigConfig &out) {
    if (bsf.size() < 64) {
        return "BSF shorter than 64 bytes";
    }
    out = SigConfig{};
    Bsf b;
    std::memcpy(&b, bsf.data(), sizeof(b));
    if ((b.bsf_size_sbs >> 6) != kBsfSizeInline) {
        return "BSF size other than basic + extended + inline";
    }
    out.sbs = b.bsf_size_sbs & kBsfSbs;
    out.check_mask = b.check_byte_mask;
    if (const char *e = parse_domain(b.m_bfs_psv, b.m_inl, b.mem_selector, out.mem)) {
        return e;
    }
    if (const char *e = parse_domain(b.w_bfs_psv, b.w_inl, out.sbs ? b.mem_selector : b.wire_selector, out.wire)) {
        return e;
    }
    if (out.sbs) {
        if (out.mem.type == SigType::None || out.mem.type != out.wire.type) {
            return "same block structure without the same signature in both domains";
        }
        out.copy_mask = b.wire_selector;
    }
    if (out.mem.type == SigType::None && out.wire.type == SigType::None) {
        return "no signature in either domain";
    }
    if (out.mem.type != SigType::None && out.wire.type != SigType::None && out.mem.block != out.wire.block) {
        return "domains of different block sizes";
    }
    return nullptr;
}

void sig_make_pi(const SigDomain &d, const uint8_t *data, uint64_t n, uint8_t *pi) {
    if (d.type == SigType::Crc32) {
        store_be32(pi, crc_of(d, data));
        return;
    }
    store_be16(pi, guard_of(d, data));
    store_be16(pi + 2, d.app_tag);
    store_be32(pi + 4, d.inc_ref ? static_cast<uint32_t>(d.ref_tag + n) : d.ref_tag);
}

void sig_copy_pi(const SigConfig &c, const uint8_t *from, uint8_t *to) {
    if (!c.sbs) {
        return;
    }
    for (unsigned b = 0; b < c.mem.pi_bytes(); ++b) {
        if (c.copy_mask & (0x80 >> b)) {
            to[b] = from[b];
        }
    }
}

uint16_t sig_check_pi(const SigDomain &d, uint8_t check_mask, const uint8_t *data, uint64_t n, const uint8_t *pi,
                      SigError &e) {
    uint8_t want[8];
    sig_make_pi(d, data, n, want);
    uint8_t differ = 0;
    for (unsigned i = 0; i < d.pi_bytes(); ++i) {
        if (want[i] != pi[i]) {
            differ |= static_cast<uint8_t>(0x80 >> i);
        }
    }
    differ &= check_mask;
    if (d.type == SigType::Crc32) {
        e.expected_sig = load_be32(want);
        e.actual_sig = load_be32(pi);
        return differ ? kSigErrGuard : 0;
    }
    const uint16_t app = load_be16(pi + 2);
    const uint32_t ref = load_be32(pi + 4);
    if ((d.app_escape && app == 0xffff) || (d.appref_escape && app == 0xffff && ref == 0xffffffff)) {
        return 0;
    }
    // The application tag is compared under its bit mask.
    if ((app & d.app_mask) == (d.app_tag & d.app_mask)) {
        differ &= static_cast<uint8_t>(~kSigCheckApp);
    }
    e.expected_sig = load_be32(want);
    e.actual_sig = load_be32(pi);
    e.expected_ref = load_be32(want + 4);
    e.actual_ref = ref;
    uint16_t synd = 0;
    synd |= (differ & kSigCheckGuard) ? kSigErrGuard : 0;
    synd |= (differ & kSigCheckApp) ? kSigErrApp : 0;
    synd |= (differ & kSigCheckRef) ? kSigErrRef : 0;
    return synd;
}

}  // namespace hca
