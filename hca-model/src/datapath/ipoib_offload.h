// IPoIB stateless offloads of a UD QP created with ulp_stateless_offload_mode
// (mlx5_ib sets it for IB_QP_CREATE_IPOIB_UD_LSO when the device reports
// ipoib_basic_offloads): IPv4 header and TCP/UDP checksums computed on
// send, large sends cut into MSS-sized datagrams (LSO), and checksums
// verified on receive for the CQE's L3_OK/L4_OK flags.
//
// A datagram's payload is the 4-byte IPoIB encapsulation header (EtherType,
// reserved; ipoib.h struct ipoib_header), then the IP packet. Only what
// ipoib asks of the device is handled: IPv4 (with options) and IPv6
// without extension headers, TCP and UDP. These functions only read and
// write the bytes given, never past them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace hca::ipoib {

inline constexpr size_t kEncapLen = 4;
// mlx5_wqe_eth_seg cs_flags (qp.h MLX5_ETH_WQE_L3_CSUM, MLX5_ETH_WQE_L4_CSUM).
inline constexpr uint8_t kCsumL3 = 1 << 6;
inline constexpr uint8_t kCsumL4 = 1 << 7;
// mlx5_cqe64 hds_ip_ext (device.h CQE_L2_OK, CQE_L3_OK, CQE_L4_OK).
inline constexpr uint8_t kCqeL3Ok = 1 << 1;
inline constexpr uint8_t kCqeL4Ok = 1 << 2;
inline constexpr uint8_t kProtoTcp = 6;
inline constexpr uint8_t kProtoUdp = 17;

// Where the headers of one IPoIB payload are. ip_end is where the IP
// packet ends by its own length field (bytes after it are padding).
struct Headers {
    bool ipv6 = false;
    size_t l3 = kEncapLen;
    size_t l4 = 0;          // 0: no TCP/UDP header to work on
    size_t l4_len = 0;      // the TCP header with its options, or 8 for UDP
    size_t ip_end = 0;
    uint8_t proto = 0;
    bool fragment = false;  // an IPv4 fragment: no transport checksum
    bool l3_sound = false;  // the IPv4 header checksum is right (IPv6: always)
};

// Parses the encapsulation, IP and transport headers; false if the payload
// is not IPv4/IPv6 or is shorter than its headers say. With whole false, p
// is only the headers of a large send (the IP length field is not checked;
// ip_end is the end of p).
bool parse(std::span<const uint8_t> p, Headers &h, bool whole = true);

// The Internet checksum (RFC 1071) of the bytes, added to a running
// one's-complement sum. Bytes are summed in host order; fold() gives the
// 16-bit sum that, stored as is (memcpy), is the checksum field's value.
uint64_t sum(const uint8_t *p, size_t n, uint64_t acc);
uint16_t fold(uint64_t acc);

// Computes the checksums cs_flags asks for (kCsumL3, kCsumL4) in place.
// Packets that are not IP, transport checksums of fragments and of other
// protocols are left as they are.
void fill_checksums(std::span<uint8_t> p, uint8_t cs_flags);

// What the CQE of a received payload says about it: hds_ip_ext kCqeL3Ok if
// its IP header is sound, kCqeL4Ok if its TCP/UDP checksum is right too;
// l4_l3_hdr_type the header types (PRM CQE: l4_hdr_type 6:4 1 TCP, 2 UDP,
// 3 TCP ACK without data, 4 TCP ACK with data; l3_hdr_type 3:2 1 IPv6,
// 2 IPv4).
struct RxFlags {
    uint8_t hds_ip_ext = 0;
    uint8_t l4_l3_hdr_type = 0;
};
RxFlags rx_flags(std::span<const uint8_t> p);

// One segment of a large send: p is the header (as the driver gave it,
// parsed into h: TCP over IPv4 or IPv6) followed by this segment's data.
// Sets the IP length, the IPv4 identification (first ID + k), the TCP
// sequence number (first + seq_advance), clears FIN and PSH unless last
// and CWR unless first, and computes the IPv4 and TCP checksums.
void lso_segment(std::span<uint8_t> p, const Headers &h, uint32_t k, uint32_t seq_advance, bool first,
                 bool last);

}  // namespace hca::ipoib
