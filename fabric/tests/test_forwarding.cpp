// Forwarding: the LFT and MFT, link-state gating, and what the switch
// drops on ingress (CRC errors, malformed packets, wrong VLs, loops).
#include <catch2/catch.hpp>

#include <cstring>

#include "fixture.h"

using namespace fabric;
using namespace fabric::test;

namespace {

// A switch without SM: ports in Init; the test sets states and tables.
struct RawSwitch {
    TestFabric f{test_options(4, false)};
    RawSwitch() {
        for (uint8_t k : {1, 2, 3}) {
            f.ca(k).connect();
            f.ca(k).set_lid(static_cast<uint16_t>(k + 1));
            f.sw().fdb().set_lft_entry(static_cast<uint16_t>(k + 1), k);
        }
        f.sw().fdb().set_lft_entry(1, 0);
        f.sw().fdb().set_linear_top(10);
        f.fabric->start();
        f.run(1000);
    }
    void activate(std::initializer_list<uint8_t> ports) {
        for (uint8_t p : ports) {
            f.sw().set_port_state(p, PortState::Armed);
            f.sw().set_port_state(p, PortState::Active);
        }
    }
};

}  // namespace

TEST_CASE_METHOD(RawSwitch, "forwarding: unicast by the LFT, unchanged and with its id", "[fwd]") {
    activate({1, 2, 3});
    const auto pkt = f.ca(1).ud_packet(4, 0x99, 0x1111, 1000);
    f.ca(1).send_raw(pkt, 0x123456789);
    f.run(1000);
    REQUIRE(f.ca(3).received().size() == 1);
    CHECK(f.ca(3).received()[0].packet == pkt);
    CHECK(f.ca(3).received()[0].id == 0x123456789);
    CHECK(f.ca(2).received().empty());
    CHECK(f.sw().port(1).ctr.rcv_packets == 1);
    CHECK(f.sw().port(3).ctr.xmit_packets == 1);
    CHECK(f.sw().port(3).ctr.xmit_bytes == pkt.size());
    CHECK(f.sw().forwarded() == 1);
}

TEST_CASE_METHOD(RawSwitch, "forwarding: unroutable DLIDs are dropped and counted", "[fwd]") {
    activate({1, 2, 3});
    f.ca(1).send_ud(2, 0x99, 1, 64);  // its own LID: back out the ingress port
    f.ca(1).send_ud(5, 0x99, 1, 64);  // no LFT entry
    f.ca(1).send_ud(100, 0x99, 1, 64);  // above LinearFDBTop
    f.ca(1).send_ud(0, 0x99, 1, 64);
    f.ca(1).send_ud(iba::kPermissiveLid, 0x99, 1, 64);
    f.run(1000);
    CHECK(f.sw().drops(Drop::Loop) == 1);
    CHECK(f.sw().drops(Drop::NoRoute) == 2);
    CHECK(f.sw().drops(Drop::ReservedDlid) == 1);
    CHECK(f.sw().drops(Drop::PermissiveDlid) == 1);
    CHECK(f.sw().port(1).ctr.rcv_switch_relay_errors == 5);
    CHECK(f.ca(2).received().empty());
    CHECK(f.ca(3).received().empty());
}

TEST_CASE_METHOD(RawSwitch, "forwarding: only Active ports pass non-VL15 packets", "[fwd]") {
    f.ca(1).send_ud(3, 0x99, 1, 64);
    f.run(1000);
    CHECK(f.sw().drops(Drop::IngressNotActive) == 1);
    activate({1});
    f.ca(1).send_ud(3, 0x99, 1, 64);
    f.run(1000);
    CHECK(f.sw().drops(Drop::EgressNotActive) == 1);
    f.sw().set_port_state(2, PortState::Armed);
    f.ca(1).send_ud(3, 0x99, 1, 64);
    f.run(1000);
    CHECK(f.sw().drops(Drop::EgressNotActive) == 2);
    CHECK(f.ca(2).received_data() == 0);
    f.sw().set_port_state(2, PortState::Active);
    f.ca(1).send_ud(3, 0x99, 1, 64);
    f.run(1000);
    CHECK(f.ca(2).received_data() == 1);
    // VL15 goes through in Init: a DR SMP from port 3 (Init) to port 1.
    const uint64_t tid = f.ca(3).send_dr_smp(std::vector<uint8_t>{0, 1, 1}, mad::kGet, mad::kAttrNodeInfo, 0);
    f.run(1000);
    CHECK(f.ca(3).smp_response(tid));
    // A port whose link is down: what its device still sends is dropped.
    f.sw().set_admin(2, false);
    f.ca(2).send_ud(2, 0x99, 1, 64);
    f.ca(1).send_ud(3, 0x99, 1, 64);
    f.run(1000);
    CHECK(f.sw().drops(Drop::LinkDown) == 1);
    CHECK(f.sw().drops(Drop::EgressDown) == 1);
}

TEST_CASE_METHOD(RawSwitch, "forwarding: bad packets are dropped on ingress and counted", "[fwd]") {
    activate({1, 2, 3});
    const auto good = f.ca(1).ud_packet(3, 0x99, 1, 200);
    auto icrc = good;
    icrc[40] ^= 0x01;  // payload: ICRC and VCRC both fail, VCRC is checked first
    auto vcrc = good;
    vcrc.back() ^= 0x01;
    auto icrc_only = good;
    icrc_only[icrc_only.size() - 6] ^= 0x80;  // the ICRC itself: VCRC covers it, so fix the VCRC
    hca::store_be16(&icrc_only[icrc_only.size() - 2],
                    iba::vcrc(std::span<const uint8_t>(icrc_only).first(icrc_only.size() - 2)));
    auto shortp = good;
    shortp.resize(20);
    auto badlen = good;
    badlen.push_back(0);
    badlen.push_back(0);
    badlen.push_back(0);
    badlen.push_back(0);
    for (auto *p : {&icrc, &vcrc, &icrc_only, &shortp, &badlen}) {
        f.ca(1).send_raw(*p);
    }
    f.run(1000);
    CHECK(f.sw().drops(Drop::BadVcrc) == 2);
    CHECK(f.sw().drops(Drop::BadIcrc) == 1);
    CHECK(f.sw().drops(Drop::Truncated) == 1);
    CHECK(f.sw().drops(Drop::BadLength) == 1);
    CHECK(f.sw().port(1).ctr.rcv_errors == 5);
    CHECK(f.ca(2).received().empty());
    // A frame that is not even a link header.
    f.sw().receive(1, std::make_shared<const std::vector<uint8_t>>(std::vector<uint8_t>{1, 2, 3}));
    CHECK(f.sw().drops(Drop::BadFrame) == 1);
}

TEST_CASE_METHOD(RawSwitch, "forwarding: VLs, QP0 and VL15 rules", "[fwd]") {
    activate({1, 2, 3});
    iba::PacketSpec s;
    s.dlid = 3;
    s.slid = 2;
    s.opcode = iba::kUd | iba::kSendOnly;
    s.dqpn = 0x99;
    uint8_t deth[8] = {};
    std::vector<uint8_t> payload(256);
    s.vl = 3;  // a data VL the ports do not operate
    f.ca(1).send_raw(iba::build(s, deth, payload));
    s.vl = 0;
    s.dqpn = 0;  // QP0 off VL15
    f.ca(1).send_raw(iba::build(s, deth, payload));
    s.vl = 15;  // VL15 but not QP0
    s.dqpn = 5;
    f.ca(1).send_raw(iba::build(s, deth, payload));
    s.dqpn = 0;  // VL15, QP0, but a short MAD
    f.ca(1).send_raw(iba::build(s, deth, std::span<const uint8_t>(payload).first(100)));
    s.grh = true;  // VL15 with a GRH
    f.ca(1).send_raw(iba::build(s, deth, payload));
    f.run(1000);
    CHECK(f.sw().drops(Drop::BadVl) == 1);
    CHECK(f.sw().drops(Drop::BadSmp) == 4);
    CHECK(f.ca(2).received().empty());
}

TEST_CASE("forwarding: packets longer than the link MTU are dropped", "[fwd]") {
    auto opt = test_options(2, false);
    opt.sw.mtu = kMtu256;
    TestFabric f(opt);
    f.ca(1).connect();
    f.ca(2).connect();
    f.sw().fdb().set_lft_entry(3, 2);
    f.sw().fdb().set_linear_top(3);
    for (uint8_t p : {1, 2}) {
        f.sw().set_port_state(p, PortState::Armed);
        f.sw().set_port_state(p, PortState::Active);
    }
    f.ca(1).send_ud(3, 0x99, 1, 256);
    f.ca(1).send_ud(3, 0x99, 1, 260);
    f.run(1000);
    CHECK(f.ca(2).received_data() == 1);
    CHECK(f.sw().drops(Drop::TooLong) == 1);
}

TEST_CASE_METHOD(RawSwitch, "forwarding: multicast by the MFT to every member but the sender", "[fwd]") {
    activate({1, 2, 3});
    ForwardingTables::PortSet ps;
    ps.set(1);
    ps.set(2);
    ps.set(3);
    f.sw().fdb().set_mcast_ports(0xc005, ps);
    const auto pkt = f.ca(1).ud_packet(0xc005, 0xffffff, 0x0b1b, 300, true, McastGroups::kBroadcastMgid);
    f.ca(1).send_raw(pkt, 77);
    f.run(1000);
    CHECK(f.ca(1).received_data() == 0);
    REQUIRE(f.ca(2).received_data() == 1);
    REQUIRE(f.ca(3).received_data() == 1);
    CHECK(f.ca(2).received()[0].packet == pkt);
    CHECK(f.ca(3).received()[0].id == 77);
    // A member port that is not Active is skipped.
    f.sw().set_port_state(3, PortState::Down);
    f.ca(1).send_raw(pkt);
    f.run(1000);
    CHECK(f.ca(2).received_data() == 2);
    CHECK(f.ca(3).received_data() == 1);
    CHECK(f.sw().port(3).ctr.xmit_discards == 1);
    // An MLID without members.
    f.ca(1).send_ud(0xc006, 0xffffff, 1, 64);
    f.run(1000);
    CHECK(f.sw().drops(Drop::NoRoute) == 1);
}

TEST_CASE_METHOD(RawSwitch, "forwarding: the management port takes QP1 only", "[fwd]") {
    activate({1});
    f.sw().set_port_state(0, PortState::Armed);
    f.sw().set_port_state(0, PortState::Active);
    f.sw().port(0).pi.lid = 1;
    f.ca(1).send_ud(1, 2, mad::kQp1Qkey, 256);  // QP2 does not exist
    f.ca(1).send_ud(1, 1, mad::kQp1Qkey, 100);  // QP1 but no MAD
    f.run(1000);
    CHECK(f.sw().drops(Drop::NoQp) == 2);
}
