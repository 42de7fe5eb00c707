#include "datapath/ipoib_offload.h"

#include <cstring>

#include "be.h"

namespace hca::ipoib {

namespace {

constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherIpv6 = 0x86dd;
constexpr size_t kIpv6Len = 40;
constexpr uint8_t kTcpFin = 0x01;
constexpr uint8_t kTcpPsh = 0x08;
constexpr uint8_t kTcpCwr = 0x80;

size_t csum_field(const Headers &h) { return h.l4 + (h.proto == kProtoTcp ? 16 : 6); }

// The one's-complement sum of the pseudo header (RFC 793, RFC 8200 8.1)
// and the transport segment [l4, ip_end), checksum field included.
uint64_t l4_sum(std::span<const uint8_t> p, const Headers &h) {
    const uint32_t len = static_cast<uint32_t>(h.ip_end - h.l4);
    uint64_t acc;
    if (h.ipv6) {
        uint8_t tail[8] = {};
        store_be32(tail, len);
        tail[7] = h.proto;
        acc = sum(p.data() + h.l3 + 8, 32, sum(tail, sizeof(tail), 0));
    } else {
        uint8_t tail[4] = {0, h.proto};
        store_be16(tail + 2, static_cast<uint16_t>(len));
        acc = sum(p.data() + h.l3 + 12, 8, sum(tail, sizeof(tail), 0));
    }
    return sum(p.data() + h.l4, len, acc);
}

void set_ipv4_checksum(std::span<uint8_t> p, const Headers &h) {
    const size_t ihl = h.l4 ? h.l4 - h.l3 : static_cast<size_t>(p[h.l3] & 0x0f) * 4;
    std::memset(p.data() + h.l3 + 10, 0, 2);
    const uint16_t c = static_cast<uint16_t>(~fold(sum(p.data() + h.l3, ihl, 0)));
    std::memcpy(p.data() + h.l3 + 10, &c, 2);
}

void set_l4_checksum(std::span<uint8_t> p, const Headers &h) {
    const size_t at = csum_field(h);
    std::memset(p.data() + at, 0, 2);
    uint16_t c = static_cast<uint16_t>(~fold(l4_sum(p, h)));
    if (c == 0 && h.proto == kProtoUdp) {
        c = 0xffff;  // RFC 768: a computed zero is sent as all ones
    }
    std::memcpy(p.data() + at, &c, 2);
}

}  // namespace

bool parse(std::span<const uint8_t> p, Headers &h, bool whole) {
    h = Headers{};
    if (p.size() < kEncapLen + 20) {
        return false;
    }
    const uint16_t type = load_be16(p.data());
    const uint8_t *ip = p.data() + h.l3;
    size_t l4 = 0;
    if (type == kEtherIpv4 && ip[0] >> 4 == 4) {
        const size_t ihl = static_cast<size_t>(ip[0] & 0x0f) * 4;
        const size_t tot = load_be16(ip + 2);
        if (ihl < 20 || h.l3 + ihl > p.size() || (whole && (tot < ihl || h.l3 + tot > p.size()))) {
            return false;
        }
        h.ip_end = whole ? h.l3 + tot : p.size();
        h.proto = ip[9];
        const uint16_t frag = load_be16(ip + 6);
        h.fragment = (frag & 0x3fff) != 0;
        h.l3_sound = fold(sum(ip, ihl, 0)) == 0xffff;
        if ((frag & 0x1fff) == 0) {
            l4 = h.l3 + ihl;
        }
    } else if (type == kEtherIpv6 && ip[0] >> 4 == 6) {
        if (h.l3 + kIpv6Len > p.size()) {
            return false;
        }
        const size_t plen = load_be16(ip + 4);
        if (whole && (plen == 0 || h.l3 + kIpv6Len + plen > p.size())) {
            return false;  // a jumbogram, or cut short
        }
        h.ipv6 = true;
        h.ip_end = whole ? h.l3 + kIpv6Len + plen : p.size();
        h.proto = ip[6];
        h.l3_sound = true;
        l4 = h.l3 + kIpv6Len;
    } else {
        return false;
    }
    if (l4 && h.proto == kProtoTcp && l4 + 20 <= h.ip_end) {
        const size_t doff = static_cast<size_t>(p[l4 + 12] >> 4) * 4;
        if (doff >= 20 && l4 + doff <= h.ip_end) {
            h.l4 = l4;
            h.l4_len = doff;
        }
    } else if (l4 && h.proto == kProtoUdp && l4 + 8 <= h.ip_end) {
        h.l4 = l4;
        h.l4_len = 8;
    }
    return true;
}

uint64_t sum(const uint8_t *p, size_t n, uint64_t acc) {
    // 32-bit words into a 64-bit accumulator: no carry is lost below 2^32
    // words, far beyond any packet.
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        std::memcpy(&w, p, 8);
        acc += (w & 0xffffffff) + (w >> 32);
    }
    if (n >= 4) {
        uint32_t w;
        std::memcpy(&w, p, 4);
        acc += w;
        p += 4;
        n -= 4;
    }
    if (n >= 2) {
        uint16_t w;
        std::memcpy(&w, p, 2);
        acc += w;
        p += 2;
        n -= 2;
    }
    if (n) {
        // The odd last byte is the high-order byte of a zero-padded word.
        const uint8_t last[2] = {p[0], 0};
        uint16_t w;
        std::memcpy(&w, last, 2);
        acc += w;
    }
    return acc;
}

uint16_t fold(uint64_t acc) {
    while (acc >> 16) {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    return static_cast<uint16_t>(acc);
}

void fill_checksums(std::span<uint8_t> p, uint8_t cs_flags) {
    Headers h;
    if (!parse(p, h, true)) {
        return;
    }
    if ((cs_flags & kCsumL3) && !h.ipv6) {
        set_ipv4_checksum(p, h);
    }
    if ((cs_flags & kCsumL4) && h.l4 && !h.fragment) {
        set_l4_checksum(p, h);
    }
}

RxFlags rx_flags(std::span<const uint8_t> p) {
    Headers h;
    RxFlags f;
    if (!parse(p, h, true)) {
        return f;
    }
    uint8_t l4_type = 0;
    if (h.l4 && h.proto == kProtoUdp) {
        l4_type = 2;
    } else if (h.l4) {
        const bool ack = p[h.l4 + 13] & 0x10;
        l4_type = !ack ? 1 : h.l4 + h.l4_len == h.ip_end ? 3 : 4;
    }
    f.l4_l3_hdr_type = static_cast<uint8_t>(l4_type << 4 | (h.ipv6 ? 1 : 2) << 2);
    if (!h.l3_sound) {
        return f;
    }
    f.hds_ip_ext = kCqeL3Ok;
    if (h.l4 && !h.fragment) {
        const bool udp_unchecked = h.proto == kProtoUdp && !h.ipv6 && load_be16(p.data() + csum_field(h)) == 0;
        if (udp_unchecked || fold(l4_sum(p, h)) == 0xffff) {
            f.hds_ip_ext |= kCqeL4Ok;
        }
    }
    return f;
}

void lso_segment(std::span<uint8_t> p, const Headers &h, uint32_t k, uint32_t seq_advance, bool first,
                 bool last) {
    Headers seg = h;
    seg.ip_end = p.size();
    uint8_t *ip = p.data() + h.l3;
    if (h.ipv6) {
        store_be16(ip + 4, static_cast<uint16_t>(p.size() - h.l3 - kIpv6Len));
    } else {
        store_be16(ip + 2, static_cast<uint16_t>(p.size() - h.l3));
        store_be16(ip + 4, static_cast<uint16_t>(load_be16(ip + 4) + k));
    }
    uint8_t *tcp = p.data() + h.l4;
    store_be32(tcp + 4, load_be32(tcp + 4) + seq_advance);
    if (!last) {
        tcp[13] &= static_cast<uint8_t>(~(kTcpFin | kTcpPsh));
    }
    if (!first) {
        tcp[13] &= static_cast<uint8_t>(~kTcpCwr);
    }
    if (!h.ipv6) {
        set_ipv4_checksum(p, seg);
    }
    set_l4_checksum(p, seg);
}

}  // namespace hca::ipoib
