// The IBA packet codec: build/parse round trips, CRC checks, length checks.
#include <catch2/catch.hpp>

#include <numeric>

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
}
