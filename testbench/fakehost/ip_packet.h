// IPoIB payloads for the offload tests (unit and device): the
// encapsulation header, an IPv4 or IPv6 header, TCP or UDP, and data; and a
// plain big-endian RFC 1071 checksum to check the model's against.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "be.h"
#include "datapath/ipoib_offload.h"

namespace hcatest {

// The reference: 16-bit big-endian words, the odd byte padded with zero.
inline uint32_t ref_add(const uint8_t *p, size_t n, uint32_t s = 0) {
    for (size_t i = 0; i + 1 < n; i += 2) {
        s += uint32_t{p[i]} << 8 | p[i + 1];
    }
    if (n & 1) {
        s += uint32_t{p[n - 1]} << 8;
    }
    return s;
}
inline uint16_t ref_fold(uint32_t s) {
    while (s >> 16) {
        s = (s & 0xffff) + (s >> 16);
    }
    return static_cast<uint16_t>(s);
}

// An IPoIB payload: encapsulation, IPv4 (or IPv6) header, TCP (20 + opts)
// or UDP header, then data bytes seed, seed+1, ...
inline std::vector<uint8_t> ipoib_packet(bool v6, uint8_t proto, size_t data, uint8_t seed = 1, size_t tcp_opts = 12) {
    const size_t l3 = v6 ? 40 : 20;
    const size_t l4 = proto == hca::ipoib::kProtoTcp ? 20 + tcp_opts : 8;
    std::vector<uint8_t> p(4 + l3 + l4 + data);
    hca::store_be16(p.data(), v6 ? 0x86dd : 0x0800);
    uint8_t *ip = p.data() + 4;
    if (v6) {
        ip[0] = 0x60;
        hca::store_be16(ip + 4, static_cast<uint16_t>(l4 + data));
        ip[6] = proto;
        ip[7] = 64;
        for (int i = 0; i < 32; ++i) {
            ip[8 + i] = static_cast<uint8_t>(0xa0 + i);
        }
    } else {
        ip[0] = 0x45;
        hca::store_be16(ip + 2, static_cast<uint16_t>(l3 + l4 + data));
        hca::store_be16(ip + 4, 0x1234);
        hca::store_be16(ip + 6, 0x4000);  // DF
        ip[8] = 64;
        ip[9] = proto;
        const uint8_t addrs[8] = {192, 168, 77, 1, 192, 168, 77, 2};
        std::memcpy(ip + 12, addrs, 8);
    }
    uint8_t *t = ip + l3;
    hca::store_be16(t, 40000);
    hca::store_be16(t + 2, 5201);
    if (proto == hca::ipoib::kProtoTcp) {
        hca::store_be32(t + 4, 0xfffff000);  // wraps during a large send
        hca::store_be32(t + 8, 77);
        t[12] = static_cast<uint8_t>((20 + tcp_opts) / 4 << 4);
        t[13] = 0x80 | 0x10 | 0x08 | 0x01;  // CWR ACK PSH FIN
        hca::store_be16(t + 14, 512);
        for (size_t i = 0; i < tcp_opts; ++i) {
            t[20 + i] = 1;  // NOPs
        }
    } else {
        hca::store_be16(t + 4, static_cast<uint16_t>(8 + data));
    }
    for (size_t i = 0; i < data; ++i) {
        p[4 + l3 + l4 + i] = static_cast<uint8_t>(seed + i);
    }
    return p;
}

// Checks the packet's checksums with the reference.
inline bool ref_ipv4_ok(const std::vector<uint8_t> &p) { return ref_fold(ref_add(p.data() + 4, 20)) == 0xffff; }
inline bool ref_l4_ok(const std::vector<uint8_t> &p, bool v6) {
    const size_t l3 = v6 ? 40 : 20;
    const uint8_t *ip = p.data() + 4;
    const size_t len = p.size() - 4 - l3;
    uint32_t s = v6 ? ref_add(ip + 8, 32) : ref_add(ip + 12, 8);
    s += v6 ? ip[6] : ip[9];
    s += static_cast<uint32_t>(len);
    return ref_fold(ref_add(ip + l3, len, s)) == 0xffff;
}


}  // namespace hcatest
