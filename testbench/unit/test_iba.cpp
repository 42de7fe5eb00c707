// The IBA packet codec: build/parse round trips, CRC checks, length checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <string>

#include "iba/mad.h"
#include "iba/packet.h"

using namespace iba;

namespace {

std::vector<uint8_t> ud_packet(bool grh, size_t payload_len) {
    PacketSpec s;
    s.sl = 3;
    s.dlid = 0x12;
    s.slid = 0x34;
    s.grh = grh;
    s.hop_limit = 64;
    s.sgid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0xa0, 0, 1};
    s.dgid = {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    s.opcode = kUd | kSendOnlyImm;
    s.pkey = 0xffff;
    s.dqpn = 0xffffff;
    s.psn = 0x123456;
    Deth d{};
    d.qkey.set(0x0b1b);
    d.sqpn.set(0x48);
    uint8_t ext[12];
    std::memcpy(ext, &d, 8);
    hca::store_be32(ext + 8, 0xcafe0001);
    std::vector<uint8_t> payload(payload_len);
    std::iota(payload.begin(), payload.end(), 0);
    return build(s, ext, payload);
}

}  // namespace

TEST_CASE("UD packet build and parse round trip, with and without GRH", "[iba]") {
    for (bool grh : {false, true}) {
        for (size_t len : {0u, 1u, 3u, 4u, 255u, 2044u}) {
            auto pkt = ud_packet(grh, len);
            CHECK(pkt.size() % 4 == 2);  // LRH..ICRC in words, then the 2-byte VCRC
            PacketView v;
            REQUIRE(parse(pkt, v) == ParseError::None);
            CHECK(v.dlid() == 0x12);
            CHECK(v.slid() == 0x34);
            CHECK(v.sl() == 3);
            CHECK((v.grh != nullptr) == grh);
            CHECK(v.opcode() == (kUd | kSendOnlyImm));
            CHECK(v.dqpn() == 0xffffff);
            CHECK(v.psn() == 0x123456);
            REQUIRE(v.deth);
            CHECK(v.deth->qkey.get() == 0x0b1b);
            CHECK((v.deth->sqpn.get() & 0xffffff) == 0x48);
            REQUIRE(v.imm);
            CHECK(v.imm->get() == 0xcafe0001);
            REQUIRE(v.payload.size() == len);
            for (size_t i = 0; i < len; ++i) {
                REQUIRE(v.payload[i] == static_cast<uint8_t>(i));
            }
        }
    }
}

TEST_CASE("CRCs: invariant fields are covered, variant fields are not", "[iba]") {
    auto pkt = ud_packet(true, 64);
    PacketView v;
    REQUIRE(parse(pkt, v) == ParseError::None);
    // A payload bit flip: ICRC and VCRC both catch it; fixing the VCRC leaves the ICRC error.
    auto bad = pkt;
    bad[8 + 40 + 12 + 12 + 5] ^= 1;
    CHECK(parse(bad, v) == ParseError::BadVcrc);
    hca::store_be16(bad.data() + bad.size() - 2, vcrc({bad.data(), bad.size() - 2}));
    CHECK(parse(bad, v) == ParseError::BadIcrc);
    // A packet looped back inside the HCA is not checked again; its headers are.
    CHECK(parse(bad, v, false) == ParseError::None);
    CHECK(v.payload.size() == 64);
    auto truncated = bad;
    truncated.resize(8 + 40 + 12 + 4 + 6);
    CHECK(parse(truncated, v, false) != ParseError::None);
    // A switch may change the VL and the hop limit: only the VCRC is recomputed.
    auto routed = pkt;
    routed[0] = static_cast<uint8_t>(routed[0] | 0x20);  // VL 2
    routed[8 + 7] = 63;                                     // hop limit
    hca::store_be16(routed.data() + routed.size() - 2, vcrc({routed.data(), routed.size() - 2}));
    CHECK(parse(routed, v) == ParseError::None);
    CHECK(v.vl() == 2);
}

TEST_CASE("parser rejects malformed packets", "[iba]") {
    auto pkt = ud_packet(false, 16);
    PacketView v;
    CHECK(parse({pkt.data(), 10}, v) == ParseError::Truncated);
    auto longer = pkt;
    longer.push_back(0);
    CHECK(parse(longer, v) == ParseError::BadLength);
    auto lnh = pkt;
    lnh[1] &= 0xfc;  // raw
    CHECK(parse(lnh, v) == ParseError::BadLnh);
    auto op = pkt;
    op[8] = kUd | kWriteOnly;  // not a UD opcode
    CHECK(parse(op, v) == ParseError::BadOpcode);
    CHECK(std::string(opcode_name(kRc | kAck)) == "ACKNOWLEDGE");
}

TEST_CASE("opcode table: extended headers per opcode", "[iba]") {
    CHECK(opcode_info(kRc | kWriteFirst).reth);
    CHECK(!opcode_info(kRc | kWriteMiddle).reth);
    CHECK(opcode_info(kRc | kReadRespFirst).aeth);
    CHECK(!opcode_info(kRc | kReadRespMiddle).aeth);
    CHECK(opcode_info(kRc | kCompareSwap).atomic);
    CHECK(opcode_info(kRc | kAtomicAck).atomic_ack);
    CHECK(!opcode_info(kUc | kReadRequest).valid);
    CHECK(opcode_info(kXrc | kSendOnly).xrceth);
    CHECK(!opcode_info(kXrc | kAck).xrceth);
    CHECK(opcode_info(kRc | kSendOnlyInv).ieth);
}

TEST_CASE("VCRC: the table-driven CRC-16 equals the bit-by-bit definition", "[iba]") {
    auto reference = [](std::span<const uint8_t> p) {
        uint16_t crc = 0xffff;
        for (uint8_t b : p) {
            crc ^= b;
            for (int i = 0; i < 8; ++i) {
                crc = (crc & 1) ? static_cast<uint16_t>((crc >> 1) ^ 0xd008) : static_cast<uint16_t>(crc >> 1);
            }
        }
        return static_cast<uint16_t>(~crc);
    };
    std::vector<uint8_t> buf(4200);
    uint32_t x = 12345;
    for (auto &b : buf) {
        x = x * 1103515245 + 12345;
        b = static_cast<uint8_t>(x >> 16);
    }
    for (size_t len : {0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 2048, 4117, 4200}) {
        INFO("length " << len);
        CHECK(iba::vcrc({buf.data(), len}) == reference({buf.data(), len}));
    }
    for (size_t off = 1; off < 9; ++off) {
        CHECK(iba::vcrc({buf.data() + off, 100}) == reference({buf.data() + off, 100}));
    }
    // Every length around the folding paths' entries (64; 256 where the CPU
    // has VPCLMULQDQ) and their 64- and 256-byte steps, at every alignment.
    for (size_t len = 56; len < 1100; ++len) {
        for (size_t off = 0; off < 16; off += 5) {
            INFO("length " << len << " at offset " << off);
            CHECK(iba::vcrc({buf.data() + off, len}) == reference({buf.data() + off, len}));
        }
    }
}

// Known-answer CRC vectors from an implementation independent of the model:
// testbench/unit/iba_vectors.py computes them with Python's zlib.crc32 (ICRC)
// and a bit-serial CRC-16 written from IBA 7.8.2 (VCRC), masking the variant
// fields as IBA Vol. 1 7.8.1 defines. That script first reproduces the ICRC
// a ConnectX-4 Lx put on the wire in a captured RoCEv2 packet, which fixes the
// wire byte order: lowest byte of the CRC-32 value first. Each vector is the
// packet from LRH through ICRC (no VCRC); regenerate with the script.
namespace {

struct CrcVector {
    const char *name;
    bool grh;
    uint32_t icrc;  // CRC-32 value over the masked packet
    uint16_t vcrc;  // CRC-16 value over LRH..ICRC
    const char *hex;
    PacketSpec spec;  // the same headers for the model's builder
    std::vector<uint8_t> ext;
    size_t payload_len;
};

std::vector<uint8_t> unhex(const char *s) {
    std::vector<uint8_t> out;
    for (; s[0] && s[1]; s += 2) {
        out.push_back(static_cast<uint8_t>(std::stoi(std::string(s, 2), nullptr, 16)));
    }
    return out;
}

std::vector<uint8_t> be_words(std::initializer_list<uint32_t> words) {
    std::vector<uint8_t> out;
    for (uint32_t w : words) {
        out.resize(out.size() + 4);
        hca::store_be32(out.data() + out.size() - 4, w);
    }
    return out;
}

PacketSpec spec(uint8_t vl, uint8_t sl, bool grh, uint16_t dlid, uint16_t slid, uint8_t opcode, uint32_t dqpn,
                uint32_t psn) {
    PacketSpec s;
    s.vl = vl;
    s.sl = sl;
    s.grh = grh;
    s.dlid = dlid;
    s.slid = slid;
    s.opcode = opcode;
    s.dqpn = dqpn;
    s.psn = psn;
    s.ack_req = true;
    s.migreq = false;
    s.sgid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0xa0, 0, 1};
    s.dgid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0xa0, 0, 2};
    return s;
}

std::vector<CrcVector> crc_vectors() {
    std::vector<CrcVector> v;
    v.push_back({"UD SEND_ONLY with GRH", true, 0x25acf66e, 0xd791,
                 "00030002001800016201234500301b40fe800000000000000002c90300a00001"
                 "fe800000000000000002c90300a000026400ffff000000018000012380010000"
                 "0000004800070e151c232a31383f464d545b626970777e858c939aa16ef6ac25",
                 spec(0, 0, true, 2, 1, kUd | kSendOnly, 1, 0x123), be_words({0x80010000, 0x48}), 24});
    v.back().spec.hop_limit = 64;
    v.back().spec.tclass = 0x20;
    v.back().spec.flow_label = 0x12345;
    v.push_back({"UD SEND_ONLY_IMM without GRH on VL 1", false, 0x12cec071, 0x907c,
                 "10320012000d00346530ffff00000048800004568001000000000048cafe0001"
                 "0102030405060708090a0b0c0d00000071c0ce12",
                 spec(1, 3, false, 0x12, 0x34, kUd | kSendOnlyImm, 0x48, 0x456),
                 be_words({0x80010000, 0x48, 0xcafe0001}), 13});
    v.push_back({"RC RDMA_WRITE_ONLY without GRH, pad 3", false, 0xeaa40223, 0x1afa,
                 "00020003000e00040a30ffff000012348000000700007f001234500000abcdef"
                 "0000000d0102030405060708090a0b0c0d0000002302a4ea",
                 spec(0, 0, false, 3, 4, kRc | kWriteOnly, 0x1234, 7), be_words({0x7f00, 0x12345000, 0xabcdef, 13}),
                 13});
    v.push_back({"RC SEND_ONLY with GRH", true, 0x4071dd1e, 0x57f7,
                 "00530003001600046000000000281b01fe800000000000000002c90300a00001"
                 "fe800000000000000002c90300a000020400ffff0000123480ffffff00070e15"
                 "1c232a31383f464d545b626970777e858c939aa11edd7140",
                 spec(0, 5, true, 3, 4, kRc | kSendOnly, 0x1234, 0xffffff), {}, 24});
    v.back().spec.hop_limit = 1;
    return v;
}

// The payload bytes of the vectors: 1..13, or i * 7 for 24 bytes.
std::vector<uint8_t> vector_payload(size_t len) {
    std::vector<uint8_t> p(len);
    for (size_t i = 0; i < len; ++i) {
        p[i] = static_cast<uint8_t>(len == 13 ? i + 1 : i * 7);
    }
    return p;
}

}  // namespace

TEST_CASE("ICRC and VCRC: known answers from an independent implementation", "[iba]") {
    for (const auto &v : crc_vectors()) {
        INFO(v.name);
        const auto wire = unhex(v.hex);
        const size_t end = wire.size() - 4;
        // The model's builder lays out the same headers, payload and pad.
        const auto payload = vector_payload(v.payload_len);
        const auto built = build(v.spec, v.ext, payload);
        REQUIRE(built.size() == wire.size() + 2);
        CHECK(std::equal(wire.begin(), wire.begin() + static_cast<long>(end), built.begin()));
        // The VCRC value over LRH..ICRC (the ICRC bytes as real hardware
        // orders them).
        CHECK(vcrc(wire) == v.vcrc);
        // The ICRC value of packets with a GRH: the whole LRH is variant.
        if (v.grh) {
            CHECK(icrc({wire.data(), end}) == v.icrc);
        }
    }
}

// Known deviations of the model from IBA 7.8.1, kept as tests that pass while
// the model deviates and fail once it is fixed (then drop [!shouldfail]):
// the model takes the whole LRH as variant in local packets too, where only
// the VL is, and stores the ICRC value big-endian, where hardware sends its
// lowest byte first.
TEST_CASE("Known deviation: a local packet's ICRC covers its LRH but the VL", "[iba][!shouldfail]") {
    for (const auto &v : crc_vectors()) {
        if (!v.grh) {
            INFO(v.name);
            const auto wire = unhex(v.hex);
            CHECK(icrc({wire.data(), wire.size() - 4}) == v.icrc);
        }
    }
}

TEST_CASE("Known deviation: the ICRC goes on the wire lowest byte first", "[iba][!shouldfail]") {
    for (const auto &v : crc_vectors()) {
        INFO(v.name);
        const auto wire = unhex(v.hex);
        const auto built = build(v.spec, v.ext, vector_payload(v.payload_len));
        CHECK(std::equal(wire.end() - 4, wire.end(), built.end() - 6));
    }
}
