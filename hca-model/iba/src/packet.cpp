#include "iba/packet.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <fmt/format.h>
#include <libdeflate.h>

namespace iba {

const char *opcode_name(uint8_t opcode) {
    static constexpr const char *kOps[] = {
        "SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_IMM", "SEND_ONLY", "SEND_ONLY_IMM",
        "RDMA_WRITE_FIRST", "RDMA_WRITE_MIDDLE", "RDMA_WRITE_LAST", "RDMA_WRITE_LAST_IMM", "RDMA_WRITE_ONLY",
        "RDMA_WRITE_ONLY_IMM", "RDMA_READ_REQUEST", "RDMA_READ_RESPONSE_FIRST", "RDMA_READ_RESPONSE_MIDDLE",
        "RDMA_READ_RESPONSE_LAST", "RDMA_READ_RESPONSE_ONLY", "ACKNOWLEDGE", "ATOMIC_ACKNOWLEDGE",
        "COMPARE_SWAP", "FETCH_ADD", "RESERVED_15", "SEND_LAST_INV", "SEND_ONLY_INV",
    };
    const uint8_t op = opcode & 0x1f;
    return op < std::size(kOps) ? kOps[op] : "RESERVED";
}

namespace {

constexpr OpcodeInfo decode_opcode(uint8_t opcode) {
    OpcodeInfo i;
    const uint8_t t = opcode & 0xe0;
    const uint8_t op = opcode & 0x1f;
    if (t == kUd) {
        if (op == kSendOnly || op == kSendOnlyImm) {
            i.valid = i.deth = i.payload = true;
            i.imm = op == kSendOnlyImm;
        }
        return i;
    }
    if (t == kDc) {
        // Requests only: the responses of a DCT are RC packets.
        i = decode_opcode(op);
        const bool request = i.valid && (op < kReadRespFirst || op > kAtomicAck);
        i.valid = request;
        i.dceth = request;
        return i;
    }
    if (t != kRc && t != kUc && t != kXrc) {
        return i;
    }
    i.xrceth = t == kXrc;
    switch (op) {
    case kSendFirst: case kSendMiddle: case kSendLast: case kSendOnly:
        i.valid = i.payload = true;
        break;
    case kSendLastImm: case kSendOnlyImm:
        i.valid = i.payload = i.imm = true;
        break;
    case kWriteFirst: case kWriteOnly:
        i.valid = i.payload = i.reth = true;
        break;
    case kWriteMiddle: case kWriteLast:
        i.valid = i.payload = true;
        break;
    case kWriteLastImm:
        i.valid = i.payload = i.imm = true;
        break;
    case kWriteOnlyImm:
        i.valid = i.payload = i.reth = i.imm = true;
        break;
    case kReadRequest:
        i.valid = i.reth = t != kUc;
        break;
    case kReadRespFirst: case kReadRespLast: case kReadRespOnly:
        i.valid = t != kUc;
        i.payload = i.aeth = i.valid;
        i.xrceth = false;
        break;
    case kReadRespMiddle:
        i.valid = i.payload = t != kUc;
        i.xrceth = false;
        break;
    case kAck:
        i.valid = i.aeth = t != kUc;
        i.xrceth = false;
        break;
    case kAtomicAck:
        i.valid = i.aeth = i.atomic_ack = t != kUc;
        i.xrceth = false;
        break;
    case kCompareSwap: case kFetchAdd:
        i.valid = i.atomic = t != kUc;
        break;
    case kSendLastInv: case kSendOnlyInv:
        i.valid = i.payload = i.ieth = t != kUc;
        break;
    default:
        break;
    }
    return i;
}

// Every packet is parsed: one table lookup instead of the branches above.
struct OpcodeTable {
    OpcodeInfo info[256];
    constexpr OpcodeTable() : info() {
        for (unsigned op = 0; op < 256; ++op) {
            info[op] = decode_opcode(static_cast<uint8_t>(op));
        }
    }
};
constexpr OpcodeTable kOpcodes;

}  // namespace

OpcodeInfo opcode_info(uint8_t opcode) { return kOpcodes.info[opcode]; }

const char *parse_error_name(ParseError e) {
    switch (e) {
    case ParseError::None: return "ok";
    case ParseError::Truncated: return "truncated";
    case ParseError::BadLength: return "length mismatch";
    case ParseError::BadLnh: return "unsupported LNH";
    case ParseError::BadVersion: return "bad version";
    case ParseError::BadOpcode: return "reserved opcode";
    case ParseError::BadIcrc: return "ICRC mismatch";
    case ParseError::BadVcrc: return "VCRC mismatch";
    }
    return "?";
}

// ICRC (IBA 7.8.1): CRC-32 over LRH..payload+pad with the variant fields
// taken as ones: the whole LRH, GRH TClass/FlowLabel/HopLmt, BTH Resv8a.
uint32_t icrc(std::span<const uint8_t> p) {
    uint8_t masked[8 + 40 + 12];
    const size_t lnh = p.size() >= 2 ? (p[1] & 3) : 0;
    const size_t hdr = 8 + (lnh == kLnhGlobal ? 40 : 0) + 12;
    if (p.size() < hdr) {
        return 0;
    }
    std::memcpy(masked, p.data(), hdr);
    std::memset(masked, 0xff, 8);
    size_t bth = 8;
    if (lnh == kLnhGlobal) {
        masked[8] |= 0x0f;  // TClass high nibble + FlowLabel
        std::memset(masked + 9, 0xff, 3);
        masked[8 + 7] = 0xff;  // HopLmt
        bth += 40;
    }
    masked[bth + 4] = 0xff;  // Resv8a
    // libdeflate's CRC-32 folds with PCLMULQDQ where the CPU has it (zlib
    // 1.2.13's is table-driven).
    const uint32_t crc = libdeflate_crc32(0, masked, hdr);
    return libdeflate_crc32(crc, p.data() + hdr, p.size() - hdr);
}

// VCRC (IBA 7.8.2): CRC-16, polynomial 0x100B, initial value all ones, over
// the whole packet from LRH through ICRC. Reflected form of
// x^16 + x^12 + x^3 + x + 1 (0xD008), eight bytes at a time through eight
// tables (slicing-by-8): t[0] is the byte-wise table, t[k] advances t[k-1]
// by one more zero byte.
namespace {

struct VcrcTables {
    uint16_t t[8][256];
    constexpr VcrcTables() : t() {
        for (unsigned i = 0; i < 256; ++i) {
            uint16_t c = static_cast<uint16_t>(i);
            for (int k = 0; k < 8; ++k) {
                c = (c & 1) ? static_cast<uint16_t>((c >> 1) ^ 0xd008) : static_cast<uint16_t>(c >> 1);
            }
            t[0][i] = c;
        }
        for (unsigned k = 1; k < 8; ++k) {
            for (unsigned i = 0; i < 256; ++i) {
                t[k][i] = static_cast<uint16_t>((t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff]);
            }
        }
    }
};
constexpr VcrcTables kVcrc;

}  // namespace

// A fuzzer learns nothing from the branches of a CRC loop, which under
// coverage instrumentation cost a callback per eight bytes, and ASan's
// check of every table lookup finds nothing the span's bounds do not
// already guarantee (together a fifth of the wire target's time): keep the
// functions out of both. Known-answer tests check them (test_iba.cpp).
#if defined(__clang__)
#define HCASIM_CRC_UNINSTRUMENTED __attribute__((no_sanitize("coverage", "address")))
#else
#define HCASIM_CRC_UNINSTRUMENTED
#endif

namespace {

// The register after n bytes from crc (no final inversion).
HCASIM_CRC_UNINSTRUMENTED
uint16_t vcrc_tables(uint16_t crc, const uint8_t *d, size_t n) {
    const auto &t = kVcrc.t;
    while (n >= 8) {
        const uint8_t b0 = static_cast<uint8_t>(d[0] ^ crc);
        const uint8_t b1 = static_cast<uint8_t>(d[1] ^ (crc >> 8));
        crc = static_cast<uint16_t>(t[7][b0] ^ t[6][b1] ^ t[5][d[2]] ^ t[4][d[3]] ^ t[3][d[4]] ^ t[2][d[5]] ^
                                    t[1][d[6]] ^ t[0][d[7]]);
        d += 8;
        n -= 8;
    }
    while (n--) {
        crc = static_cast<uint16_t>((crc >> 8) ^ t[0][(crc ^ *d++) & 0xff]);
    }
    return crc;
}

#if defined(__x86_64__)
// Long packets (RDMA payloads) fold 64 bytes a step with carry-less
// multiplies, four 128-bit lanes at a time. Everything is in the CRC's
// reflected bit order: a 16-byte block loaded little-endian holds the
// coefficient of x^127 in bit 0. clmul of two reflected 64-bit values is
// the reflected product times x, so the constants are x^(d+63) and
// x^(d-1) mod P for a fold over d bits. The lanes end folded into one
// 128-bit value congruent (mod P) to the bytes consumed, which the tables
// finish together with the tail.
constexpr uint16_t xpow_mod(unsigned k) {
    uint32_t r = 1;
    for (unsigned i = 0; i < k; ++i) {
        r <<= 1;
        if (r & 0x10000) {
            r ^= 0x1100b;
        }
    }
    return static_cast<uint16_t>(r);
}
// A polynomial of degree < 16 as a reflected 64-bit value.
constexpr uint64_t reflect64(uint16_t k) {
    uint64_t v = 0;
    for (unsigned j = 0; j < 16; ++j) {
        if (k >> j & 1) {
            v |= uint64_t{1} << (63 - j);
        }
    }
    return v;
}

// Fold constants, evaluated at compile time: {x^(d+63), x^(d-1)} mod P.
constexpr uint64_t kFold512Lo = reflect64(xpow_mod(575)), kFold512Hi = reflect64(xpow_mod(511));
constexpr uint64_t kFold128Lo = reflect64(xpow_mod(191)), kFold128Hi = reflect64(xpow_mod(127));

__attribute__((target("pclmul,sse4.1"))) inline __m128i fold(__m128i x, __m128i k, __m128i data) {
    const __m128i a = _mm_clmulepi64_si128(x, k, 0x00);
    const __m128i b = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(a, b), data);
}

HCASIM_CRC_UNINSTRUMENTED __attribute__((target("pclmul,sse4.1")))
uint16_t vcrc_clmul(const uint8_t *d, size_t n) {
    const __m128i k512 = _mm_set_epi64x(static_cast<int64_t>(kFold512Hi), static_cast<int64_t>(kFold512Lo));
    const __m128i k128 = _mm_set_epi64x(static_cast<int64_t>(kFold128Hi), static_cast<int64_t>(kFold128Lo));
    const auto load = [](const uint8_t *p) { return _mm_loadu_si128(reinterpret_cast<const __m128i *>(p)); };
    // The initial value 0xffff goes into the first 16 message bits.
    __m128i x0 = _mm_xor_si128(load(d), _mm_cvtsi32_si128(0xffff));
    __m128i x1 = load(d + 16), x2 = load(d + 32), x3 = load(d + 48);
    d += 64;
    n -= 64;
    while (n >= 64) {
        x0 = fold(x0, k512, load(d));
        x1 = fold(x1, k512, load(d + 16));
        x2 = fold(x2, k512, load(d + 32));
        x3 = fold(x3, k512, load(d + 48));
        d += 64;
        n -= 64;
    }
    const __m128i x = fold(fold(fold(x0, k128, x1), k128, x2), k128, x3);
    alignas(16) uint8_t rest[16];
    _mm_store_si128(reinterpret_cast<__m128i *>(rest), x);
    return vcrc_tables(vcrc_tables(0, rest, 16), d, n);
}

bool have_clmul() {
    static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    return yes;
}

// Where the CPU multiplies four 128-bit lanes at once (VPCLMULQDQ on
// 512-bit registers), packets of 256 bytes and more fold 256 bytes a
// step through four such registers, then one register 64 bytes a step,
// which leaves the same four lanes as vcrc_clmul's loop.
constexpr uint64_t kFold2048Lo = reflect64(xpow_mod(2111)), kFold2048Hi = reflect64(xpow_mod(2047));

__attribute__((target("avx512f,vpclmulqdq"))) inline __m512i fold4(__m512i x, __m512i k, __m512i data) {
    const __m512i a = _mm512_clmulepi64_epi128(x, k, 0x00);
    const __m512i b = _mm512_clmulepi64_epi128(x, k, 0x11);
    return _mm512_ternarylogic_epi64(a, b, data, 0x96);  // a ^ b ^ data
}

HCASIM_CRC_UNINSTRUMENTED __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.1")))
uint16_t vcrc_vpclmul(const uint8_t *d, size_t n) {
    // (No lambdas here: they would not inherit the target attribute.)
    const auto h2 = static_cast<int64_t>(kFold2048Hi), l2 = static_cast<int64_t>(kFold2048Lo);
    const auto h5 = static_cast<int64_t>(kFold512Hi), l5 = static_cast<int64_t>(kFold512Lo);
    const __m512i k2048 = _mm512_set_epi64(h2, l2, h2, l2, h2, l2, h2, l2);
    const __m512i k512 = _mm512_set_epi64(h5, l5, h5, l5, h5, l5, h5, l5);
    const __m128i k128 = _mm_set_epi64x(static_cast<int64_t>(kFold128Hi), static_cast<int64_t>(kFold128Lo));
    __m512i z0 = _mm512_xor_si512(_mm512_loadu_si512(d), _mm512_zextsi128_si512(_mm_cvtsi32_si128(0xffff)));
    __m512i z1 = _mm512_loadu_si512(d + 64), z2 = _mm512_loadu_si512(d + 128), z3 = _mm512_loadu_si512(d + 192);
    d += 256;
    n -= 256;
    while (n >= 256) {
        z0 = fold4(z0, k2048, _mm512_loadu_si512(d));
        z1 = fold4(z1, k2048, _mm512_loadu_si512(d + 64));
        z2 = fold4(z2, k2048, _mm512_loadu_si512(d + 128));
        z3 = fold4(z3, k2048, _mm512_loadu_si512(d + 192));
        d += 256;
        n -= 256;
    }
    __m512i z = fold4(fold4(fold4(z0, k512, z1), k512, z2), k512, z3);
    while (n >= 64) {
        z = fold4(z, k512, _mm512_loadu_si512(d));
        d += 64;
        n -= 64;
    }
    // Through memory: GCC 12's lane extract trips its own -Wuninitialized.
    alignas(64) __m128i lane[4];
    _mm512_store_si512(lane, z);
    const __m128i x = fold(fold(fold(lane[0], k128, lane[1]), k128, lane[2]), k128, lane[3]);
    alignas(16) uint8_t rest[16];
    _mm_store_si128(reinterpret_cast<__m128i *>(rest), x);
    return vcrc_tables(vcrc_tables(0, rest, 16), d, n);
}

bool have_vpclmul() {
    static const bool yes = have_clmul() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");
    return yes;
}
#endif

}  // namespace

uint16_t vcrc(std::span<const uint8_t> p) {
#if defined(__x86_64__)
    if (p.size() >= 256 && have_vpclmul()) {
        return static_cast<uint16_t>(~vcrc_vpclmul(p.data(), p.size()));
    }
    if (p.size() >= 64 && have_clmul()) {
        return static_cast<uint16_t>(~vcrc_clmul(p.data(), p.size()));
    }
#endif
    return static_cast<uint16_t>(~vcrc_tables(0xffff, p.data(), p.size()));
}

ParseError parse(std::span<const uint8_t> pkt, PacketView &v, bool check_crcs) {
    v = {};
    if (pkt.size() < sizeof(Lrh) + sizeof(Bth) + 6) {
        return ParseError::Truncated;
    }
    size_t off = 0;
    v.lrh = reinterpret_cast<const Lrh *>(pkt.data());
    off += sizeof(Lrh);
    const uint8_t lnh = v.lrh->sl_lnh & 3;
    if (lnh != kLnhLocal && lnh != kLnhGlobal) {
        return ParseError::BadLnh;
    }
    if ((v.lrh->vl_lver & 0x0f) != 0) {
        return ParseError::BadVersion;
    }
    const size_t words = v.lrh->pktlen.get() & 0x7ff;
    if (words * 4 + 2 != pkt.size()) {
        return ParseError::BadLength;
    }
    if (lnh == kLnhGlobal) {
        if (pkt.size() < off + sizeof(Grh) + sizeof(Bth) + 6) {
            return ParseError::Truncated;
        }
        v.grh = reinterpret_cast<const Grh *>(pkt.data() + off);
        off += sizeof(Grh);
        if ((v.grh->ver_tclass_flow.get() >> 28) != 6 || v.grh->next_hdr != kGrhNextHeader) {
            return ParseError::BadVersion;
        }
        if (v.grh->paylen.get() != pkt.size() - off - 2) {
            return ParseError::BadLength;
        }
    }
    v.bth = reinterpret_cast<const Bth *>(pkt.data() + off);
    off += sizeof(Bth);
    if ((v.bth->se_m_pad_tver & 0x0f) != 0) {
        return ParseError::BadVersion;
    }
    const OpcodeInfo info = opcode_info(v.bth->opcode);
    if (!info.valid) {
        return ParseError::BadOpcode;
    }
    const size_t end = pkt.size() - 6;  // ICRC + VCRC
    auto take = [&](auto *&ptr) {
        using T = std::remove_const_t<std::remove_pointer_t<std::remove_reference_t<decltype(ptr)>>>;
        if (off + sizeof(T) > end) {
            return false;
        }
        ptr = reinterpret_cast<const T *>(pkt.data() + off);
        off += sizeof(T);
        return true;
    };
    if ((info.dceth && !take(v.dceth)) || (info.xrceth && !take(v.xrceth)) || (info.deth && !take(v.deth)) ||
        (info.reth && !take(v.reth)) || (info.atomic && !take(v.atomic)) || (info.aeth && !take(v.aeth)) ||
        (info.atomic_ack && !take(v.atomic_ack)) || ((info.imm || info.ieth) && !take(v.imm))) {
        return ParseError::Truncated;
    }
    const size_t pad = (v.bth->se_m_pad_tver >> 4) & 3;
    if (off + pad > end || (!info.payload && end - off != pad)) {
        return ParseError::BadLength;
    }
    v.payload = pkt.subspan(off, end - off - pad);
    v.icrc = hca::load_be32(pkt.data() + end);
    v.vcrc = hca::load_be16(pkt.data() + end + 4);
    // Each CRC is stored big-endian on the wire in our captures.
    if (!check_crcs) {
        return ParseError::None;
    }
    if (vcrc(pkt.first(end + 4)) != v.vcrc) {
        return ParseError::BadVcrc;
    }
    if (icrc(pkt.first(end)) != v.icrc) {
        return ParseError::BadIcrc;
    }
    return ParseError::None;
}

uint8_t *build_headers(std::vector<uint8_t> &out, const PacketSpec &s, std::span<const uint8_t> ext,
                       size_t payload_len) {
    const size_t pad = (4 - payload_len % 4) % 4;
    const size_t hdr = sizeof(Lrh) + (s.grh ? sizeof(Grh) : 0) + sizeof(Bth);
    const size_t body = hdr + ext.size() + payload_len + pad;
    out.resize(body + 6);
    uint8_t *p = out.data();
    auto *lrh = reinterpret_cast<Lrh *>(p);
    lrh->vl_lver = static_cast<uint8_t>(s.vl << 4);
    lrh->sl_lnh = static_cast<uint8_t>(s.sl << 4 | (s.grh ? kLnhGlobal : kLnhLocal));
    lrh->dlid.set(s.dlid);
    lrh->pktlen.set(static_cast<uint16_t>((body + 4) / 4));
    lrh->slid.set(s.slid);
    size_t off = sizeof(Lrh);
    if (s.grh) {
        auto *grh = reinterpret_cast<Grh *>(p + off);
        grh->ver_tclass_flow.set(6u << 28 | uint32_t{s.tclass} << 20 | (s.flow_label & 0xfffff));
        grh->paylen.set(static_cast<uint16_t>(body - off - sizeof(Grh) + 4));
        grh->next_hdr = kGrhNextHeader;
        grh->hop_limit = s.hop_limit;
        grh->sgid = s.sgid;
        grh->dgid = s.dgid;
        off += sizeof(Grh);
    }
    auto *bth = reinterpret_cast<Bth *>(p + off);
    bth->opcode = s.opcode;
    bth->se_m_pad_tver = static_cast<uint8_t>((s.se ? 0x80 : 0) | (s.migreq ? 0x40 : 0) | pad << 4);
    bth->pkey.set(s.pkey);
    bth->dqpn.set(s.dqpn & 0xffffff);
    bth->psn.set((s.ack_req ? 0x80000000u : 0) | (s.psn & 0xffffff));
    off += sizeof(Bth);
    if (!ext.empty()) {
        std::memcpy(p + off, ext.data(), ext.size());
        off += ext.size();
    }
    std::memset(p + off + payload_len, 0, pad + 6);
    return p + off;
}

void build_into(std::vector<uint8_t> &out, const PacketSpec &s, std::span<const uint8_t> ext,
                std::span<const uint8_t> payload) {
    uint8_t *at = build_headers(out, s, ext, payload.size());
    if (!payload.empty()) {
        std::memcpy(at, payload.data(), payload.size());
    }
    if (s.crcs) {
        fill_crcs(out);
    }
}

void fill_crcs(std::span<uint8_t> pkt) {
    if (pkt.size() < sizeof(Lrh) + 6) {
        return;
    }
    const size_t end = pkt.size() - 6;
    hca::store_be32(pkt.data() + end, icrc(pkt.first(end)));
    hca::store_be16(pkt.data() + end + 4, vcrc(pkt.first(end + 4)));
}

std::vector<uint8_t> build(const PacketSpec &s, std::span<const uint8_t> ext, std::span<const uint8_t> payload) {
    std::vector<uint8_t> out;
    build_into(out, s, ext, payload);
    return out;
}

std::string gid_str(const Gid &g) {
    std::string s;
    for (int i = 0; i < 16; i += 2) {
        fmt::format_to(std::back_inserter(s), "{}{:02x}{:02x}", i ? ":" : "", g[i], g[i + 1]);
    }
    return s;
}

}  // namespace iba
