// InfiniBand wire format (IBA Vol. 1 ch. 7 and 9): LRH, GRH, BTH and the
// extended transport headers, with a parser that checks lengths and CRCs and
// a builder that assembles headers, payload, pad, ICRC and VCRC.  Shared by
// the HCA model and the fabric daemon.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "be.h"

namespace iba {

using hca::be16;
using hca::be32;
using hca::be64;

using Gid = std::array<uint8_t, 16>;

inline constexpr uint16_t kPermissiveLid = 0xffff;
inline constexpr uint16_t kMulticastLidBase = 0xc000;
inline constexpr uint32_t kMulticastQpn = 0xffffff;
inline constexpr uint8_t kGrhNextHeader = 0x1b;  // IBA transport
inline constexpr size_t kMaxPacket = 4096 + 128;  // 4 KiB MTU plus headers

// LRH link next header (LNH).
enum Lnh : uint8_t { kLnhRaw = 0, kLnhIpv6 = 1, kLnhLocal = 2, kLnhGlobal = 3 };

struct Lrh {
    uint8_t vl_lver;  // VL 7:4, LVer 3:0
    uint8_t sl_lnh;   // SL 7:4, reserved 3:2, LNH 1:0
    be16 dlid;
    be16 pktlen;      // reserved 15:11, PktLen 10:0 (4-byte words, LRH..ICRC)
    be16 slid;
};
static_assert(sizeof(Lrh) == 8);

struct Grh {
    be32 ver_tclass_flow;  // IPVer 31:28 (6), TClass 27:20, FlowLabel 19:0
    be16 paylen;           // bytes from BTH to ICRC inclusive
    uint8_t next_hdr;
    uint8_t hop_limit;
    Gid sgid;
    Gid dgid;
};
static_assert(sizeof(Grh) == 40);

struct Bth {
    uint8_t opcode;
    uint8_t se_m_pad_tver;  // SE 7, M 6, PadCnt 5:4, TVer 3:0
    be16 pkey;
    be32 dqpn;              // Resv8a 31:24, DestQP 23:0
    be32 psn;               // AckReq 31, PSN 23:0
};
static_assert(sizeof(Bth) == 12);

struct Deth {
    be32 qkey;
    be32 sqpn;  // reserved 31:24, SrcQP 23:0
};
struct Reth {
    be64 va;
    be32 rkey;
    be32 dma_len;
};
struct Aeth {
    be32 syndrome_msn;  // Syndrome 31:24, MSN 23:0
};
struct AtomicEth {
    be64 va;
    be32 rkey;
    be64 swap_add;
    be64 compare;
};
struct AtomicAckEth {
    be64 orig;
};
struct XrcEth {
    be32 srqn;  // reserved 31:24, XRCSRQ 23:0
};
// The dynamically connected transport's header, right after the BTH of a
// DC request (opcodes kDc | op). DC is Mellanox's and the IBA does not
// define its wire format; between hcasim nodes a request carries the DC
// access key the DCT checks, the initiator's DCI number (the DCT keeps one
// responder context per initiator) and a connect flag on the packets that
// open a connection (docs/ARCHITECTURE.md "Dynamically connected").
struct DcEth {
    be64 key;
    be32 dci;  // connect 31, reserved 30:24, DCI QPN 23:0
};
inline constexpr uint32_t kDcConnect = 0x80000000;
struct ImmDt {
    be32 data;
};
struct Ieth {
    be32 rkey;  // the key to invalidate
};
static_assert(sizeof(Deth) == 8 && sizeof(Reth) == 16 && sizeof(Aeth) == 4 && sizeof(AtomicEth) == 28 &&
              sizeof(AtomicAckEth) == 8 && sizeof(XrcEth) == 4 && sizeof(DcEth) == 12 && sizeof(ImmDt) == 4 &&
              sizeof(Ieth) == 4);

// The extended headers a sender puts after the BTH, in wire order (IBA
// 9.3: XRCETH or DETH or DcEth, then RETH or AtomicETH, AETH, AtomicAckETH,
// ImmDt or IETH): each add<H>() appends a zeroed H to fill in.
class ExtHeaders {
  public:
    template <typename H>
    H &add() {
        static_assert(alignof(H) == 1 && sizeof(H) <= kMax);
        assert(n_ + sizeof(H) <= kMax);
        H *h = new (bytes_.data() + n_) H{};
        n_ += sizeof(H);
        return *h;
    }
    std::span<const uint8_t> bytes() const { return {bytes_.data(), n_}; }

  private:
    // The most a packet carries: DcEth, AtomicETH, ImmDt.
    static constexpr size_t kMax = sizeof(DcEth) + sizeof(AtomicEth) + sizeof(ImmDt);
    std::array<uint8_t, kMax> bytes_;  // not zeroed: add() writes each header whole
    size_t n_ = 0;
};

// BTH opcodes: transport in 7:5, operation in 4:0 (IBA 9.2). kDc is in
// the manufacturer-specific range (0xc0-0xff): DC requests, the RC
// operations with a DcEth; their responses are RC responses.
inline constexpr uint8_t kRc = 0x00, kUc = 0x20, kRd = 0x40, kUd = 0x60, kCnp = 0x80, kXrc = 0xa0, kDc = 0xc0;
inline constexpr uint8_t kSendFirst = 0x00;
inline constexpr uint8_t kSendMiddle = 0x01;
inline constexpr uint8_t kSendLast = 0x02;
inline constexpr uint8_t kSendLastImm = 0x03;
inline constexpr uint8_t kSendOnly = 0x04;
inline constexpr uint8_t kSendOnlyImm = 0x05;
inline constexpr uint8_t kWriteFirst = 0x06;
inline constexpr uint8_t kWriteMiddle = 0x07;
inline constexpr uint8_t kWriteLast = 0x08;
inline constexpr uint8_t kWriteLastImm = 0x09;
inline constexpr uint8_t kWriteOnly = 0x0a;
inline constexpr uint8_t kWriteOnlyImm = 0x0b;
inline constexpr uint8_t kReadRequest = 0x0c;
inline constexpr uint8_t kReadRespFirst = 0x0d;
inline constexpr uint8_t kReadRespMiddle = 0x0e;
inline constexpr uint8_t kReadRespLast = 0x0f;
inline constexpr uint8_t kReadRespOnly = 0x10;
inline constexpr uint8_t kAck = 0x11;
inline constexpr uint8_t kAtomicAck = 0x12;
inline constexpr uint8_t kCompareSwap = 0x13;
inline constexpr uint8_t kFetchAdd = 0x14;
inline constexpr uint8_t kSendLastInv = 0x16;
inline constexpr uint8_t kSendOnlyInv = 0x17;

const char *opcode_name(uint8_t opcode);

// Which extended headers follow the BTH for an opcode (IBA table 38).
struct OpcodeInfo {
    bool valid = false;
    bool deth = false, xrceth = false, dceth = false, reth = false, aeth = false, atomic = false, atomic_ack = false;
    bool imm = false, ieth = false, payload = false;
};
OpcodeInfo opcode_info(uint8_t opcode);

// A parsed packet; pointers into the caller's buffer.
struct PacketView {
    const Lrh *lrh = nullptr;
    const Grh *grh = nullptr;
    const Bth *bth = nullptr;
    const Deth *deth = nullptr;
    const XrcEth *xrceth = nullptr;
    const DcEth *dceth = nullptr;
    const Reth *reth = nullptr;
    const Aeth *aeth = nullptr;
    const AtomicEth *atomic = nullptr;
    const AtomicAckEth *atomic_ack = nullptr;
    const be32 *imm = nullptr;  // ImmDt or IETH
    std::span<const uint8_t> payload;
    uint32_t icrc = 0;
    uint16_t vcrc = 0;

    uint16_t dlid() const { return lrh->dlid.get(); }
    uint16_t slid() const { return lrh->slid.get(); }
    uint8_t sl() const { return lrh->sl_lnh >> 4; }
    uint8_t vl() const { return lrh->vl_lver >> 4; }
    uint8_t opcode() const { return bth->opcode; }
    uint32_t dqpn() const { return bth->dqpn.get() & 0xffffff; }
    uint32_t psn() const { return bth->psn.get() & 0xffffff; }
    bool ack_req() const { return bth->psn.get() >> 31; }
    bool se() const { return bth->se_m_pad_tver >> 7; }
    uint16_t pkey() const { return bth->pkey.get(); }
};

enum class ParseError {
    None,
    Truncated,     // shorter than its headers
    BadLength,     // LRH PktLen or GRH PayLen disagree with the frame
    BadLnh,        // raw or IPv6 packets are not handled
    BadVersion,    // LVer / TVer / IPVer / NxtHdr
    BadOpcode,     // reserved opcode
    BadIcrc,
    BadVcrc,
};
const char *parse_error_name(ParseError e);

// Parses and checks a whole packet, LRH to VCRC.
// check_crcs = false: a packet that never left the HCA (looped back to its
// own port) has CRCs the HCA itself just computed; real hardware does not
// check them again, and neither need we.
ParseError parse(std::span<const uint8_t> pkt, PacketView &out, bool check_crcs = true);

// Incremental packet construction.
struct PacketSpec {
    uint8_t vl = 0;
    uint8_t sl = 0;
    uint16_t dlid = 0;
    uint16_t slid = 0;
    bool grh = false;
    uint8_t tclass = 0;
    uint32_t flow_label = 0;
    uint8_t hop_limit = 0;
    Gid sgid{};
    Gid dgid{};
    uint8_t opcode = 0;
    bool se = false;
    bool migreq = true;  // APM migrated state (pm_state 3)
    uint16_t pkey = 0xffff;
    uint32_t dqpn = 0;
    bool ack_req = false;
    uint32_t psn = 0;
    // false: ICRC and VCRC are left zero, for a link that carries the packet
    // reliably and says so (link.h, kNoCrcs); fill_crcs() adds them later
    // for whoever needs them (a capture, a fault that flips a bit).
    bool crcs = true;
};

// Builds LRH [GRH] BTH + ext (already encoded) + payload + pad + ICRC + VCRC.
std::vector<uint8_t> build(const PacketSpec &s, std::span<const uint8_t> ext, std::span<const uint8_t> payload);
// The same into a caller buffer, resized to the packet and every byte of it
// written (so a reused buffer needs no clearing), to avoid allocations.
void build_into(std::vector<uint8_t> &out, const PacketSpec &s, std::span<const uint8_t> ext,
                std::span<const uint8_t> payload);
// The first step of build_into, for a payload written in place (gathered
// straight from memory): everything but the payload's payload_len bytes
// (the CRC fields zero); returns where the payload goes. fill_crcs(out)
// completes the packet once the payload is in, if it carries CRCs.
uint8_t *build_headers(std::vector<uint8_t> &out, const PacketSpec &s, std::span<const uint8_t> ext,
                       size_t payload_len);

// CRCs (IBA 7.8).
uint32_t icrc(std::span<const uint8_t> pkt_without_crcs);
uint16_t vcrc(std::span<const uint8_t> pkt_without_vcrc);
// Computes and stores the ICRC and VCRC of a whole packet (LRH .. VCRC, its
// last 6 bytes the CRC fields); a packet too short to have them is left as is.
void fill_crcs(std::span<uint8_t> pkt);

std::string gid_str(const Gid &g);

}  // namespace iba
