// Fault injection: drop, corrupt and delay per link, reproducible with a
// fixed seed.
#include <catch2/catch.hpp>

#include "fixture.h"

using namespace fabric;
using namespace fabric::test;

namespace {

// Two Active CAs on ports 1 and 2, configured by the SM.
struct Pair {
    TestFabric f;
    explicit Pair(uint64_t seed = 1) : f(make(seed)) { f.bring_up({1, 2}); }
    static FabricOptions make(uint64_t seed) {
        auto o = test_options(2);
        o.sw.seed = seed;
        return o;
    }
    // Sends n packets from CA 1 to CA 2; returns the ids CA 2 got.
    std::vector<uint64_t> blast(size_t n) {
        const size_t before = f.ca(2).received().size();
        for (size_t i = 0; i < n; ++i) {
            f.ca(1).send_raw(f.ca(1).ud_packet(3, 0x99, 1, 64), 1000 + i);
        }
        f.run(1000);
        std::vector<uint64_t> ids;
        for (size_t i = before; i < f.ca(2).received().size(); ++i) {
            ids.push_back(f.ca(2).received()[i].id);
        }
        return ids;
    }
};

size_t crc_good(const std::vector<FakeCa::Received> &rx) {
    size_t n = 0;
    for (const auto &r : rx) {
        iba::PacketView v;
        n += iba::parse(r.packet, v) == iba::ParseError::None;
    }
    return n;
}

}  // namespace

TEST_CASE("faults: drop on the ingress link", "[faults]") {
    Pair p;
    REQUIRE(p.f.sw().faults().set_drop(1, 30));
    const auto ids = p.blast(1000);
    const uint64_t dropped = p.f.sw().port(1).ctr.fault_dropped;
    CHECK(dropped + ids.size() == 1000);
    CHECK(dropped > 200);
    CHECK(dropped < 400);
    CHECK(p.f.sw().drops(Drop::FaultDrop) == dropped);
    // The same seed, the same losses.
    Pair q;
    q.f.sw().faults().set_drop(1, 30);
    CHECK(q.blast(1000) == ids);
    // Another seed, other losses.
    Pair r(99);
    r.f.sw().faults().set_drop(1, 30);
    CHECK(r.blast(1000) != ids);
}

TEST_CASE("faults: drop on the egress link", "[faults]") {
    Pair p;
    p.f.sw().faults().set_drop(2, 50);
    const uint64_t xmit = p.f.sw().port(2).ctr.xmit_packets;
    const auto ids = p.blast(400);
    CHECK(p.f.sw().port(2).ctr.fault_dropped + ids.size() == 400);
    CHECK(p.f.sw().port(2).ctr.fault_dropped > 100);
    CHECK(p.f.sw().port(2).ctr.xmit_packets - xmit == 400);  // they left the switch
}

TEST_CASE("faults: a requests-only drop spares ACKs, NAKs and responses", "[faults]") {
    Pair p;
    REQUIRE(p.f.sw().faults().set_drop(1, 100, DropScope::Requests));
    auto rc_packet = [&](uint8_t opcode, bool grh) {
        iba::PacketSpec s;
        s.dlid = 3;
        s.slid = p.f.ca(1).lid();
        s.grh = grh;
        s.sgid = p.f.ca(1).gid();
        s.opcode = opcode;
        s.dqpn = 0x99;
        // AETH, plus AtomicAckETH for an atomic acknowledge; a SEND carries 64 bytes.
        const uint8_t op = opcode & 0x1f;
        const std::vector<uint8_t> ext(op == iba::kAtomicAck ? 12 : op == iba::kAck ? 4 : 0);
        const std::vector<uint8_t> payload(op == iba::kSendOnly ? 64 : 0);
        return iba::build(s, ext, payload);
    };
    const size_t before = p.f.ca(2).received().size();
    uint64_t id = 7000;
    for (bool grh : {false, true}) {
        for (uint8_t op : {iba::kAck, iba::kAtomicAck}) {
            p.f.ca(1).send_raw(rc_packet(iba::kRc | op, grh), id++);
            p.f.ca(1).send_raw(rc_packet(iba::kXrc | op, grh), id++);
        }
        p.f.ca(1).send_raw(rc_packet(iba::kRc | iba::kSendOnly, grh), id++);  // a request: lost
        p.f.ca(1).send_raw(rc_packet(iba::kUd | iba::kSendOnly, grh), id++);  // lost
    }
    p.f.ca(1).send_raw(p.f.ca(1).ud_packet(3, 0x99, 1, 64), id++);  // lost
    p.f.run(1000);
    CHECK(p.f.ca(2).received().size() - before == 8);
    CHECK(p.f.sw().port(1).ctr.fault_dropped == 5);
    CHECK(is_response(rc_packet(iba::kRc | iba::kAck, true)));
    CHECK_FALSE(is_response(rc_packet(iba::kUc | iba::kSendOnly, false)));
    CHECK_FALSE(is_response(std::vector<uint8_t>(9, 0)));  // too short for a BTH
    CHECK_FALSE(is_response({}));
}

TEST_CASE("faults: corruption is caught by the CRC checks", "[faults]") {
    Pair p;
    SECTION("on the ingress link: the switch drops it") {
        p.f.sw().faults().set_corrupt(1, 20);
        const auto ids = p.blast(500);
        const uint64_t bad = p.f.sw().port(1).ctr.fault_corrupted;
        CHECK(bad > 50);
        CHECK(ids.size() + bad == 500);
        CHECK(p.f.sw().port(1).ctr.rcv_errors == bad);
    }
    SECTION("on the egress link: the device sees bad CRCs") {
        p.f.sw().faults().set_corrupt(2, 20);
        const size_t before = p.f.ca(2).received().size();
        const auto ids = p.blast(500);
        const uint64_t bad = p.f.sw().port(2).ctr.fault_corrupted;
        CHECK(bad > 50);
        CHECK(ids.size() == 500);
        std::vector<FakeCa::Received> got(p.f.ca(2).received().begin() + static_cast<ptrdiff_t>(before),
                                          p.f.ca(2).received().end());
        CHECK(crc_good(got) == 500 - bad);
    }
}

TEST_CASE("faults: packets sent without CRCs get them before a bit flips", "[faults]") {
    // A device leaves the CRCs out (iba::link::kNoCrcs); the switch neither
    // checks nor adds them on the way, but a corrupting fault computes them
    // first, so the flipped bit is caught as on a wire.
    MemoryCapture cap;  // outlives the fabric, which records until it is gone
    Pair p;
    p.f.sw().set_capture(&cap);
    auto blast = [&](size_t n) {
        const size_t before = p.f.ca(2).received().size();
        for (size_t i = 0; i < n; ++i) {
            auto pkt = p.f.ca(1).ud_packet(3, 0x99, 1, 64);
            std::fill(pkt.end() - 6, pkt.end(), uint8_t{0});
            p.f.ca(1).send_raw(std::move(pkt), 5000 + i, iba::link::kNoCrcs);
        }
        p.f.run(1000);
        return std::vector<FakeCa::Received>(p.f.ca(2).received().begin() + static_cast<ptrdiff_t>(before),
                                             p.f.ca(2).received().end());
    };
    SECTION("no fault: forwarded as they came, the capture shows the wire's CRCs") {
        const auto got = blast(100);
        REQUIRE(got.size() == 100);
        for (const auto &r : got) {
            CHECK(r.flags == iba::link::kNoCrcs);
            CHECK(hca::load_be32(&r.packet[r.packet.size() - 6]) == 0);
        }
        CHECK(p.f.sw().port(1).ctr.rcv_errors == 0);
        size_t data = 0;
        for (const auto &c : cap.records) {
            if (c.id >= 5000 && c.id < 5100) {
                ++data;
                iba::PacketView v;
                CHECK(iba::parse(c.packet, v) == iba::ParseError::None);  // CRCs checked
            }
        }
        CHECK(data == 100);
    }
    SECTION("corrupted on the ingress link: the switch drops them") {
        p.f.sw().faults().set_corrupt(1, 20);
        const auto got = blast(500);
        const uint64_t bad = p.f.sw().port(1).ctr.fault_corrupted;
        CHECK(bad > 50);
        CHECK(got.size() + bad == 500);
        CHECK(p.f.sw().port(1).ctr.rcv_errors == bad);
    }
    SECTION("corrupted on the egress link: the device gets them with CRCs that fail") {
        p.f.sw().faults().set_corrupt(2, 20);
        const auto got = blast(500);
        const uint64_t bad = p.f.sw().port(2).ctr.fault_corrupted;
        CHECK(bad > 50);
        REQUIRE(got.size() == 500);
        size_t with_crcs = 0, good = 0;
        for (const auto &r : got) {
            if (!(r.flags & iba::link::kNoCrcs)) {
                ++with_crcs;
                iba::PacketView v;
                good += iba::parse(r.packet, v) == iba::ParseError::None;
            }
        }
        CHECK(with_crcs == bad);
        CHECK(good == 0);
    }
}

TEST_CASE("faults: delay towards the device keeps the order", "[faults]") {
    Pair p;
    p.f.sw().faults().set_delay(2, 2000);
    const size_t before = p.f.ca(2).received().size();
    for (size_t i = 0; i < 10; ++i) {
        p.f.ca(1).send_raw(p.f.ca(1).ud_packet(3, 0x99, 1, 64), 500 + i);
        p.f.run(100);
    }
    CHECK(p.f.ca(2).received().size() == before);
    p.f.run(1500);
    CHECK(p.f.ca(2).received().size() > before);
    CHECK(p.f.ca(2).received().size() < before + 10);
    p.f.run(2000);
    REQUIRE(p.f.ca(2).received().size() == before + 10);
    for (size_t i = 0; i < 10; ++i) {
        CHECK(p.f.ca(2).received()[before + i].id == 500 + i);
    }
    CHECK(p.f.sw().port(2).ctr.fault_delayed == 10);
    // Knob limits.
    CHECK_FALSE(p.f.sw().faults().set_delay(2, FaultInjector::kMaxDelayUs + 1));
    CHECK_FALSE(p.f.sw().faults().set_drop(2, 101));
    CHECK_FALSE(p.f.sw().faults().set_drop(0, 1));
    CHECK_FALSE(p.f.sw().faults().set_corrupt(3, 1));
}

TEST_CASE("faults: command-line knobs apply to every port", "[faults]") {
    auto o = test_options(3);
    o.drop_pct = 5;
    o.corrupt_pct = 1;
    o.delay_us = 10;
    TestFabric f(o);
    for (uint8_t k = 1; k <= 3; ++k) {
        CHECK(f.sw().faults().config(k).drop_pct == 5);
        CHECK(f.sw().faults().config(k).corrupt_pct == 1);
        CHECK(f.sw().faults().config(k).delay_us == 10);
    }
    // The SM still gets its CAs configured through the lossy links.
    f.bring_up({1, 2, 3}, 3000000);
    for (uint8_t k = 1; k <= 3; ++k) {
        CHECK(f.ca(k).state() == PortState::Active);
    }
}

TEST_CASE("faults: duplicate sends a packet twice", "[faults]") {
    Pair p;
    REQUIRE(p.f.sw().faults().set_duplicate(2, 100));
    const auto ids = p.blast(10);
    REQUIRE(ids.size() == 20);
    for (size_t i = 0; i < 10; ++i) {
        CHECK(ids[2 * i] == 1000 + i);
        CHECK(ids[2 * i + 1] == 1000 + i);
    }
    CHECK(p.f.sw().port(2).ctr.fault_duplicated == 10);
    CHECK_FALSE(p.f.sw().faults().set_duplicate(2, 100.5));
}

TEST_CASE("faults: reorder lets the next packet overtake; a lone one leaves later", "[faults]") {
    Pair p;
    REQUIRE(p.f.sw().faults().set_reorder(2, 100));
    const auto ids = p.blast(10);
    // Every other packet is held and overtaken by the one after it.
    CHECK(ids == std::vector<uint64_t>{1001, 1000, 1003, 1002, 1005, 1004, 1007, 1006, 1009, 1008});
    CHECK(p.f.sw().port(2).ctr.fault_reordered == 5);
    const size_t before = p.f.ca(2).received().size();
    p.f.ca(1).send_raw(p.f.ca(1).ud_packet(3, 0x99, 1, 64), 77);
    p.f.run(IbSwitch::kReorderWaitUs / 2);
    CHECK(p.f.ca(2).received().size() == before);  // held, nothing to overtake it
    p.f.run(IbSwitch::kReorderWaitUs);
    REQUIRE(p.f.ca(2).received().size() == before + 1);
    CHECK(p.f.ca(2).received().back().id == 77);
    // A link that goes down loses the held packet with it.
    p.f.ca(1).send_raw(p.f.ca(1).ud_packet(3, 0x99, 1, 64), 78);
    p.f.sw().set_admin(2, false);
    p.f.run(2 * IbSwitch::kReorderWaitUs);
    CHECK(p.f.ca(2).received().size() == before + 1);
}

TEST_CASE("faults: a partition cuts two ports off each other, the SM still reaches both", "[faults]") {
    auto o = test_options(3);
    TestFabric f(o);
    f.bring_up({1, 2, 3});
    FaultInjector &fi = f.sw().faults();
    REQUIRE(fi.set_cut(1, 2, true));
    CHECK(fi.cut(2, 1));
    CHECK_FALSE(fi.cut(1, 3));
    CHECK_FALSE(fi.set_cut(1, 1, true));
    CHECK_FALSE(fi.set_cut(0, 1, true));
    auto sent_to = [&](uint8_t from, uint8_t to, uint64_t id) {
        const size_t before = f.ca(to).received().size();
        f.ca(from).send_raw(f.ca(from).ud_packet(static_cast<uint16_t>(to + 1), 0x99, 1, 64), id);
        f.run(1000);
        return f.ca(to).received().size() > before;
    };
    CHECK_FALSE(sent_to(1, 2, 1));
    CHECK_FALSE(sent_to(2, 1, 2));
    CHECK(sent_to(1, 3, 3));
    CHECK(sent_to(3, 2, 4));
    CHECK(f.sw().drops(Drop::Partitioned) == 2);
    CHECK(f.sw().port(2).ctr.partition_dropped == 1);
    // The SM sweeps through it: every port stays Active.
    f.run(6'000'000);
    for (uint8_t k = 1; k <= 3; ++k) {
        CHECK(f.ca(k).state() == PortState::Active);
    }
    fi.clear_cuts();
    CHECK(sent_to(1, 2, 5));
}
