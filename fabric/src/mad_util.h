// MADs on the wire for the fabric: field accessors on the 256-byte MAD,
// big-endian bit fields (SA records are specified as bit offsets), the UD
// packets that carry MADs on QP0/QP1 and the directed-route SMP fields.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "be.h"
#include "iba/mad.h"
#include "iba/packet.h"

namespace fabric {

using Mad = iba::mad::Mad;
namespace mad = iba::mad;

inline uint8_t get8(std::span<const uint8_t> m, size_t off) { return m[off]; }
inline uint16_t get16(std::span<const uint8_t> m, size_t off) { return hca::load_be16(&m[off]); }
inline uint32_t get32(std::span<const uint8_t> m, size_t off) { return hca::load_be32(&m[off]); }
inline uint64_t get64(std::span<const uint8_t> m, size_t off) { return hca::load_be64(&m[off]); }
inline void set16(std::span<uint8_t> m, size_t off, uint16_t v) { hca::store_be16(&m[off], v); }
inline void set32(std::span<uint8_t> m, size_t off, uint32_t v) { hca::store_be32(&m[off], v); }
inline void set64(std::span<uint8_t> m, size_t off, uint64_t v) { hca::store_be64(&m[off], v); }

// Bit fields counted from the most significant bit of byte 0, as the IBA
// record tables (and ib_pack() in the kernel) give them.  nbits <= 64.
uint64_t get_bits(std::span<const uint8_t> buf, size_t bit_off, unsigned nbits);
void set_bits(std::span<uint8_t> buf, size_t bit_off, unsigned nbits, uint64_t value);

// The addressing of a MAD: what the receiver learned from LRH/GRH/BTH/DETH.
struct MadAddress {
    uint16_t slid = 0;
    uint16_t dlid = 0;
    uint8_t sl = 0;
    uint8_t vl = 0;
    uint32_t src_qp = 0;
    uint32_t dst_qp = 0;
    uint32_t qkey = 0;
    uint16_t pkey = 0xffff;
    bool grh = false;
    iba::Gid sgid{};
    iba::Gid dgid{};
    uint8_t tclass = 0;
    uint32_t flow_label = 0;
    uint8_t hop_limit = 0;
    uint8_t in_port = 0;  // the switch port it arrived on (0: made by the switch itself)
};

// A parsed UD packet whose payload is a MAD.  False if the packet is not a
// UD SEND_ONLY with exactly 256 bytes of payload.
bool mad_from_packet(const iba::PacketView &v, MadAddress &addr, Mad &m);

// A UD SEND_ONLY packet carrying m, LRH..VCRC.  VL15 and Q_Key 0 for QP0,
// the given VL otherwise.
std::vector<uint8_t> mad_packet(const MadAddress &to, const Mad &m, uint32_t psn = 0);

// The address a response to a MAD received at 'req' goes to: LIDs and QPs
// swapped, the same P_Key, a GRH only if the request had one (IBA 13.5.4.3:
// with SGID and DGID swapped), Q_Key 0x80010000 for QP1.
MadAddress reply_address(const MadAddress &req, uint16_t my_lid);

// Response method for a request method (GetTable 0x12 -> GetTableResp 0x92).
inline uint8_t response_method(uint8_t method) {
    return method == mad::kSet ? uint8_t{mad::kGet | mad::kResp} : static_cast<uint8_t>(method | mad::kResp);
}
inline bool is_response(uint8_t method) { return (method & mad::kResp) != 0; }

// Directed-route SMP fields (IBA 14.2.1.2).
namespace dr {
inline bool direction(const Mad &m) { return (get16(m, mad::kStatus) & mad::smp::kDirectionBit) != 0; }
inline uint8_t hop_ptr(const Mad &m) { return m[mad::smp::kHopPtr]; }
inline uint8_t hop_cnt(const Mad &m) { return m[mad::smp::kHopCnt]; }
inline uint16_t dr_slid(const Mad &m) { return get16(m, mad::smp::kDrSlid); }
inline uint16_t dr_dlid(const Mad &m) { return get16(m, mad::smp::kDrDlid); }
inline uint8_t initial_path(const Mad &m, size_t i) { return m[mad::smp::kInitialPath + i]; }
inline uint8_t return_path(const Mad &m, size_t i) { return m[mad::smp::kReturnPath + i]; }
inline constexpr unsigned kMaxHops = 64;  // IBA C14-6: hop count 0..63
}  // namespace dr

// An SMP request header: base version 1, class version 1.
void init_smp(Mad &m, uint8_t mgmt_class, uint8_t method, uint64_t tid, uint16_t attr, uint32_t attr_mod);
// A directed-route request along 'path' (path[0] unused, as in the
// InitialPath field), DrSLID and DrDLID permissive, hop pointer 0.
void init_dr_smp(Mad &m, uint8_t method, uint64_t tid, uint16_t attr, uint32_t attr_mod,
                 std::span<const uint8_t> path);

}  // namespace fabric
