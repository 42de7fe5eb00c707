// IPoIB offloads (datapath/ipoib_offload.h) against a plain big-endian
// RFC 1071 checksum written here: checksums filled and verified, large
// sends cut into segments that reassemble to the original stream.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "be.h"
#include "datapath/ipoib_offload.h"
#include "ip_packet.h"

namespace ipo = hca::ipoib;
using namespace hcatest;


TEST_CASE("ipoib offload: the checksum sum matches RFC 1071 for every length and alignment", "[ipoib]") {
    std::mt19937 rng(7);
    std::vector<uint8_t> b(300);
    for (auto &x : b) {
        x = static_cast<uint8_t>(rng());
    }
    for (size_t start = 0; start < 4; start += 2) {
        for (size_t n = 0; n < 200; ++n) {
            const uint16_t mine = ipo::fold(ipo::sum(b.data() + start, n, 0));
            uint8_t be[2];
            std::memcpy(be, &mine, 2);  // the host-order sum, stored as is
            REQUIRE(hca::load_be16(be) == ref_fold(ref_add(b.data() + start, n)));
        }
    }
}

TEST_CASE("ipoib offload: IPv4 and TCP/UDP checksums filled, verified, damage seen", "[ipoib]") {
    for (uint8_t proto : {ipo::kProtoTcp, ipo::kProtoUdp}) {
        for (bool v6 : {false, true}) {
            for (size_t data : {0, 1, 2, 1001, 1992}) {
                auto p = ipoib_packet(v6, proto, data);
                CAPTURE(proto, v6, data);
                CHECK(ipo::rx_flags(p).hds_ip_ext == (v6 ? ipo::kCqeL3Ok : 0));  // checksums still zero
                ipo::fill_checksums(p, ipo::kCsumL3 | ipo::kCsumL4);
                if (!v6) {
                    CHECK(ref_ipv4_ok(p));
                }
                CHECK(ref_l4_ok(p, v6));
                const auto f = ipo::rx_flags(p);
                CHECK(f.hds_ip_ext == (ipo::kCqeL3Ok | ipo::kCqeL4Ok));
                CHECK((f.l4_l3_hdr_type >> 2 & 3) == (v6 ? 1 : 2));
                CHECK((f.l4_l3_hdr_type >> 4) == (proto == ipo::kProtoUdp ? 2 : data ? 4 : 3));
                if (data) {
                    p.back() ^= 0x40;
                    CHECK(ipo::rx_flags(p).hds_ip_ext == ipo::kCqeL3Ok);
                }
                if (!v6) {
                    p[4 + 8] ^= 1;  // TTL: the IPv4 header checksum no longer holds
                    CHECK(ipo::rx_flags(p).hds_ip_ext == 0);
                }
            }
        }
    }
}

TEST_CASE("ipoib offload: only what cs_flags asks, not for fragments, padding or other payloads", "[ipoib]") {
    auto p = ipoib_packet(false, ipo::kProtoTcp, 100);
    ipo::fill_checksums(p, ipo::kCsumL4);
    CHECK(hca::load_be16(p.data() + 4 + 10) == 0);  // no L3 checksum asked for
    CHECK(ref_l4_ok(p, false));

    // An IPv4 fragment gets its header checksum, never a transport one.
    auto frag = ipoib_packet(false, ipo::kProtoUdp, 64);
    hca::store_be16(frag.data() + 4 + 6, 0x2000);  // MF
    ipo::fill_checksums(frag, ipo::kCsumL3 | ipo::kCsumL4);
    CHECK(ref_ipv4_ok(frag));
    CHECK(hca::load_be16(frag.data() + 4 + 20 + 6) == 0);
    CHECK(ipo::rx_flags(frag).hds_ip_ext == ipo::kCqeL3Ok);

    // Bytes past the IP length (padding) are not summed.
    auto padded = ipoib_packet(false, ipo::kProtoUdp, 10);
    ipo::fill_checksums(padded, ipo::kCsumL3 | ipo::kCsumL4);
    padded.insert(padded.end(), {0xde, 0xad, 0xbe});
    CHECK(ipo::rx_flags(padded).hds_ip_ext == (ipo::kCqeL3Ok | ipo::kCqeL4Ok));

    // ARP, a cut-short IP packet, and garbage: left alone, flagged nothing.
    std::vector<uint8_t> arp(4 + 28, 0x11);
    hca::store_be16(arp.data(), 0x0806);
    auto before = arp;
    ipo::fill_checksums(arp, ipo::kCsumL3 | ipo::kCsumL4);
    CHECK(arp == before);
    CHECK(ipo::rx_flags(arp).hds_ip_ext == 0);
    auto cut = ipoib_packet(false, ipo::kProtoTcp, 50);
    cut.resize(cut.size() - 1);
    CHECK(ipo::rx_flags(cut).hds_ip_ext == 0);
    std::mt19937 rng(3);
    for (int i = 0; i < 2000; ++i) {
        std::vector<uint8_t> g(rng() % 80);
        for (auto &x : g) {
            x = static_cast<uint8_t>(rng());
        }
        if (g.size() > 4) {
            g[0] = i & 1 ? 0x86 : 0x08;
            g[1] = i & 1 ? 0xdd : 0x00;
            g[4] = static_cast<uint8_t>((i & 1 ? 0x60 : 0x40) | (g[4] & 0x0f));
        }
        ipo::Headers h;
        if (ipo::parse(g, h)) {
            REQUIRE(h.ip_end <= g.size());
            REQUIRE(h.l4 + h.l4_len <= h.ip_end);
        }
        ipo::fill_checksums(g, ipo::kCsumL3 | ipo::kCsumL4);
        (void)ipo::rx_flags(g);
    }
}

TEST_CASE("ipoib offload: a large send's segments carry the stream with fixed headers", "[ipoib]") {
    for (bool v6 : {false, true}) {
        CAPTURE(v6);
        const size_t data = 5000, mss = 1988;
        const auto whole = ipoib_packet(v6, ipo::kProtoTcp, data, 9);
        const size_t hlen = whole.size() - data;
        ipo::Headers h;
        REQUIRE(ipo::parse({whole.data(), hlen}, h, false));
        REQUIRE(h.l4 + h.l4_len == hlen);
        std::vector<uint8_t> stream;
        const uint32_t n = (data + mss - 1) / mss;
        for (uint32_t k = 0; k < n; ++k) {
            const size_t chunk = std::min(mss, data - k * mss);
            std::vector<uint8_t> seg(whole.begin(), whole.begin() + static_cast<long>(hlen));
            seg.insert(seg.end(), whole.begin() + static_cast<long>(hlen + k * mss),
                       whole.begin() + static_cast<long>(hlen + k * mss + chunk));
            ipo::lso_segment(seg, h, k, static_cast<uint32_t>(k * mss), k == 0, k + 1 == n);
            CHECK(ipo::rx_flags(seg).hds_ip_ext == (ipo::kCqeL3Ok | ipo::kCqeL4Ok));
            if (!v6) {
                CHECK(ref_ipv4_ok(seg));
                CHECK(hca::load_be16(seg.data() + 4 + 2) == seg.size() - 4);
                CHECK(hca::load_be16(seg.data() + 4 + 4) == 0x1234 + k);
            } else {
                CHECK(hca::load_be16(seg.data() + 4 + 4) == seg.size() - 44);
            }
            CHECK(ref_l4_ok(seg, v6));
            const uint8_t *t = seg.data() + h.l4;
            CHECK(hca::load_be32(t + 4) == static_cast<uint32_t>(0xfffff000u + k * mss));
            CHECK(bool(t[13] & 0x80) == (k == 0));          // CWR on the first only
            CHECK(bool(t[13] & 0x09) == (k + 1 == n));      // FIN, PSH on the last only
            CHECK(t[13] & 0x10);                            // ACK on all
            stream.insert(stream.end(), seg.begin() + static_cast<long>(hlen), seg.end());
        }
        CHECK(stream == std::vector<uint8_t>(whole.begin() + static_cast<long>(hlen), whole.end()));
    }
}
