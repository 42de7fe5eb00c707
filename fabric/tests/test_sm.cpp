// The built-in SM: discovery and configuration of CAs with directed-route
// SMPs, retries, sweeps on link changes, `sm restart` and ClientReregister.
#include <catch2/catch.hpp>

#include "fixture.h"
#include "sa_records.h"
#include "smp_agent.h"

using namespace fabric;
using namespace fabric::test;

namespace pi = iba::mad::port_info;

namespace {

// The SMPs the SM sent out of a switch port, in order: (method, attribute).
std::vector<std::pair<uint8_t, uint16_t>> smps_out(const MemoryCapture &cap, uint8_t port) {
    std::vector<std::pair<uint8_t, uint16_t>> v;
    const std::string fwd = "fwd=" + std::to_string(port);
    for (const auto &r : cap.records) {
        iba::PacketView pv;
        MadAddress a;
        Mad m;
        if (r.port != 0 || r.verdict.rfind(fwd, 0) != 0 || iba::parse(r.packet, pv) != iba::ParseError::None ||
            !mad_from_packet(pv, a, m) || is_response(m[mad::kMethod])) {
            continue;
        }
        v.emplace_back(m[mad::kMethod], get16(m, mad::kAttrId));
    }
    return v;
}

}  // namespace

TEST_CASE("SM: discovers and configures the CAs on every connected port", "[sm]") {
    TestFabric f;
    MemoryCapture cap;
    f.sw().set_capture(&cap);
    f.bring_up({1, 2, 4});
    // The switch itself: LID 1, port 0 Active, LinearFDBTop = the highest
    // LID a CA port can have (2 x 4 ports + 1: `sm lid` moves a port's LID
    // above the first range).
    CHECK(f.sw().lid() == 1);
    CHECK(f.sw().port(0).state == PortState::Active);
    CHECK(f.sw().fdb().linear_top() == 9);
    for (uint8_t k : {1, 2, 4}) {
        INFO("port " << int(k));
        FakeCa &ca = f.ca(k);
        CHECK(ca.state() == PortState::Active);
        CHECK(ca.lid() == k + 1);
        CHECK(ca.sm_lid() == 1);
        CHECK(ca.neighbor_mtu() == kMtu4096);
        REQUIRE(ca.sets().size() == 2);
        const auto &arm = ca.sets()[0];
        CHECK(arm.requested == PortState::Armed);
        CHECK(arm.lid == k + 1);
        CHECK(arm.sm_lid == 1);
        CHECK(arm.sm_sl == 0);
        CHECK(arm.lmc == 0);
        CHECK(arm.subnet_timeout == 18);
        CHECK(arm.neighbor_mtu == kMtu4096);
        CHECK(arm.oper_vls == 1);
        CHECK(arm.gid_prefix == 0xfe80000000000000ull);
        CHECK(arm.mkey == 0);
        CHECK_FALSE(arm.client_rereg);
        CHECK(arm.status == 0);
        CHECK(ca.sets()[1].requested == PortState::Active);
        CHECK_FALSE(ca.sets()[1].client_rereg);
        CHECK(f.sw().port(k).state == PortState::Active);
        CHECK(f.sw().fdb().lookup(k + 1) == k);
        CHECK(f.sm().ca_state(k) == CaState::Active);
        // The order of the SMPs on the wire: NodeInfo, NodeDescription,
        // PortInfo, Set(PortInfo Armed), Set(PortInfo Active).
        const auto seq = smps_out(cap, k);
        REQUIRE(seq.size() == 5);
        CHECK(seq[0] == std::make_pair(uint8_t{mad::kGet}, uint16_t{mad::kAttrNodeInfo}));
        CHECK(seq[1] == std::make_pair(uint8_t{mad::kGet}, uint16_t{mad::kAttrNodeDescription}));
        CHECK(seq[2] == std::make_pair(uint8_t{mad::kGet}, uint16_t{mad::kAttrPortInfo}));
        CHECK(seq[3] == std::make_pair(uint8_t{mad::kSet}, uint16_t{mad::kAttrPortInfo}));
        CHECK(seq[4] == std::make_pair(uint8_t{mad::kSet}, uint16_t{mad::kAttrPortInfo}));
    }
    CHECK(f.sw().fdb().lookup(1) == 0);
    CHECK(f.sw().fdb().lookup(4) == ForwardingTables::kNoPort);  // nothing on port 3
    CHECK(f.sw().port(3).state == PortState::Down);
    CHECK(f.sm().ca_state(3) == CaState::NoLink);
    CHECK(f.sm().endports().size() == 4);
    CHECK(f.log.contains("LID 5 Active"));
    f.sw().set_capture(nullptr);
}

TEST_CASE("SM: a new CA port waits the settle time before it is configured; a known one does not", "[sm]") {
    auto o = test_options(2);
    o.sm_cfg.new_port_settle_us = 300000;
    TestFabric f(o);
    f.bring_up({1}, 100000);
    CHECK(f.ca(1).state() == PortState::Init);  // discovered, waiting
    CHECK(f.ca(1).lid() == 0);
    f.run(300000);
    CHECK(f.ca(1).state() == PortState::Active);
    CHECK(f.ca(1).lid() == 2);
    // Already Active (a ClientReregister, a LID change): no wait.
    f.fabric->sm()->change_lid(1);
    f.run(50000);
    CHECK(f.ca(1).lid() == 4);
    // The SM stopped during the wait configures nothing.
    f.ca(2).connect();
    f.run(100000);
    f.fabric->sm()->stop();
    f.run(500000);
    CHECK(f.ca(2).state() == PortState::Init);
}

TEST_CASE("SM: NeighborMTU is the smaller of the link MTU and the CA's MTUCap", "[sm]") {
    auto opt = test_options(2);
    opt.sw.mtu = kMtu2048;
    TestFabric f(opt);
    f.ca(1).options().mtu_cap = kMtu1024;
    f.bring_up({1, 2});
    CHECK(f.ca(1).neighbor_mtu() == kMtu1024);
    CHECK(f.ca(2).neighbor_mtu() == kMtu2048);
    CHECK(f.sw().port(1).pi.neighbor_mtu == kMtu1024);
    CHECK(f.sw().port(2).pi.neighbor_mtu == kMtu2048);
}

TEST_CASE("SM: a CA that does not answer yet is tried again at later sweeps", "[sm]") {
    TestFabric f;
    f.ca(1).set_answer_smps(false);
    f.bring_up({1, 2});
    CHECK(f.ca(2).state() == PortState::Active);
    // 500 ms per attempt, 4 attempts: after 2 s the SM gives up for now,
    // without blocking the other port.
    f.run(2100000);
    CHECK(f.sm().ca_state(1) == CaState::Unresponsive);
    CHECK(f.sm().smp_timeouts() == 1);
    CHECK(f.ca(1).sets().empty());
    CHECK(f.log.contains("port 1: no answer to NodeInfo"));
    // The guest driver loads; the periodic sweep (5 s) finds it.
    f.ca(1).set_answer_smps(true);
    f.run(5000000);
    CHECK(f.ca(1).state() == PortState::Active);
    CHECK(f.ca(1).lid() == 2);
    CHECK(f.sm().ca_state(1) == CaState::Active);
}

TEST_CASE("SM: a late link comes up, a link goes down", "[sm]") {
    TestFabric f;
    f.bring_up({1});
    f.ca(3).connect();
    f.run(100000);
    CHECK(f.ca(3).state() == PortState::Active);
    CHECK(f.ca(3).lid() == 4);
    CHECK(f.sw().fdb().lookup(4) == 3);
    f.ca(3).disconnect();
    f.run(100000);
    CHECK(f.sm().ca_state(3) == CaState::NoLink);
    CHECK(f.sw().port(3).state == PortState::Down);
    CHECK(f.sw().fdb().lookup(4) == ForwardingTables::kNoPort);
    CHECK_FALSE(f.sm().endport_by_lid(4));
    CHECK(f.log.contains("port 3: CA port"));
    // Administratively down and up through the switch: the same.
    f.sw().set_admin(1, false);
    f.run(100000);
    CHECK_FALSE(f.ca(1).link_up());
    CHECK(f.sw().fdb().lookup(2) == ForwardingTables::kNoPort);
    f.sw().set_admin(1, true);
    f.run(100000);
    CHECK(f.ca(1).state() == PortState::Active);
    CHECK(f.sw().fdb().lookup(2) == 1);
}

TEST_CASE("SM: `sm restart` sets ClientReregister on the configured ports", "[sm]") {
    TestFabric f;
    f.bring_up({1, 2});
    REQUIRE(f.ca(1).sets().size() == 2);
    f.sm().restart();
    f.run(100000);
    for (uint8_t k : {1, 2}) {
        FakeCa &ca = f.ca(k);
        REQUIRE(ca.sets().size() == 3);
        const auto &s = ca.sets()[2];
        CHECK(s.client_rereg);
        CHECK(s.requested == PortState::Nop);  // already Active
        CHECK(s.lid == k + 1);
        CHECK(ca.rereg_events() == 1);
        CHECK(ca.state() == PortState::Active);
    }
    // Once is enough: the next sweep only verifies.
    f.run(5100000);
    CHECK(f.ca(1).sets().size() == 3);
    CHECK(f.ca(1).rereg_events() == 1);
}

TEST_CASE("SM: a client that registers at once on ClientReregister finds its port in the SA", "[sm]") {
    // ib_ipoib joins its broadcast group the moment the HCA reports
    // CLIENT_REREG, before the SM has the answer to its Set(PortInfo). The
    // SA must know the port by then (it once answered ERR_REQ_INVALIDGID,
    // and the guest logged "multicast join failed ... status -22").
    TestFabric f;
    f.bring_up({1, 2});
    sa::McMemberRecord q;
    q.mgid = McastGroups::kBroadcastMgid;
    q.pkey = 0xffff;
    q.join_state = 1;
    q.port_gid = f.ca(1).gid();
    std::vector<uint8_t> rec(sa::kMcMemberRecordSize);
    sa::encode(q, rec);
    uint64_t tid = 0;
    f.ca(1).on_rereg = [&] {
        tid = f.ca(1).send_sa(mad::kSet, mad::sa::kMcMemberRecord,
                              sa::mcr::kMgid | sa::mcr::kPortGid | sa::mcr::kPkey | sa::mcr::kJoinState, rec);
    };
    f.sm().restart();
    f.run(100000);
    REQUIRE(f.ca(1).rereg_events() == 1);
    REQUIRE(tid != 0);
    const auto *r = f.ca(1).response_for(tid);
    REQUIRE(r);
    CHECK(r->status == 0);
}

TEST_CASE("SM: a port found Active that this SM did not configure gets ClientReregister", "[sm]") {
    TestFabric f;
    f.ca(1).connect();
    f.ca(1).force_state(PortState::Active);  // configured by someone else
    f.ca(1).set_lid(9);
    f.fabric->start();
    f.run(100000);
    // Its LID first, then (Active and known to the SA) the reregistration.
    REQUIRE(f.ca(1).sets().size() == 2);
    CHECK_FALSE(f.ca(1).sets()[0].client_rereg);
    CHECK(f.ca(1).sets()[0].lid == 2);
    CHECK(f.ca(1).sets()[1].client_rereg);
    CHECK(f.ca(1).lid() == 2);
    CHECK(f.ca(1).rereg_events() == 1);
    CHECK(f.sw().port(1).state == PortState::Active);
}

TEST_CASE("SM: the periodic sweep repairs a CA that lost its configuration", "[sm]") {
    TestFabric f;
    f.bring_up({1, 2});
    SECTION("the port went back to Init (driver reload)") {
        f.ca(1).force_state(PortState::Init);
        f.run(5100000);
        CHECK(f.ca(1).state() == PortState::Active);
        REQUIRE(f.ca(1).sets().size() == 4);
        CHECK(f.ca(1).sets()[2].requested == PortState::Armed);
        CHECK(f.ca(1).sets()[3].requested == PortState::Active);
    }
    SECTION("the port lost its LID but stayed Active") {
        f.ca(2).set_lid(77);
        f.run(5100000);
        CHECK(f.ca(2).lid() == 3);
        REQUIRE(f.ca(2).sets().size() == 3);
        CHECK(f.ca(2).sets()[2].requested == PortState::Nop);
        CHECK_FALSE(f.ca(2).sets()[2].client_rereg);
    }
}

TEST_CASE("SM: SMInfo, traps, and a neighbour that is not a CA", "[sm]") {
    TestFabric f;
    f.bring_up({1});
    // SMInfo through the switch's management port: the SM is master.
    const uint64_t tid = f.ca(1).send_dr_smp(std::vector<uint8_t>{0, 1}, mad::kGet, mad::kAttrSmInfo, 0);
    f.run(1000);
    const Mad *r = f.ca(1).smp_response(tid);
    REQUIRE(r);
    CHECK((get16(*r, mad::kStatus) & 0x7fff) == 0);
    CHECK(get64(*r, mad::smp::kData) == f.sw().node_guid());
    CHECK(((*r)[mad::smp::kData + 20] & 0x0f) == 3);  // MASTER
    CHECK(((*r)[mad::smp::kData + 20] >> 4) == 15);
    // The management port now says IsSM.
    CHECK((f.sw().sma().port0_capability_mask() & pi::kCapIsSm) != 0);
    // A trap to the SM LID is acknowledged with TrapRepress.
    Mad trap;
    init_smp(trap, mad::kClassSubnLid, mad::kTrap, 0x5151, mad::kAttrNotice, 0);
    MadAddress to;
    to.slid = f.ca(1).lid();
    to.dlid = 1;
    f.ca(1).send_raw(mad_packet(to, trap));
    f.run(1000);
    bool repressed = false;
    for (const auto &rx : f.ca(1).received()) {
        iba::PacketView v;
        MadAddress a;
        Mad m;
        if (iba::parse(rx.packet, v) == iba::ParseError::None && mad_from_packet(v, a, m) &&
            get64(m, mad::kTid) == 0x5151) {
            repressed = m[mad::kMethod] == mad::kTrapRepress;
        }
    }
    CHECK(repressed);
}

TEST_CASE("SM: status text", "[sm]") {
    TestFabric f;
    f.ca(2).set_answer_smps(false);
    f.bring_up({1, 2}, 2200000);
    const std::string s = f.sm().status();
    CHECK(s.find("state=master lid=1") != std::string::npos);
    CHECK(s.find("sm port 1: Active lid=2") != std::string::npos);
    CHECK(s.find("sm port 2: Unresponsive") != std::string::npos);
    CHECK(s.find("sm port 3: NoLink") != std::string::npos);
}

TEST_CASE("SM: a silent CA port is probed again at once, so a driver that loads is configured within a second",
          "[sm]") {
    TestFabric f;
    f.ca(1).set_answer_smps(false);
    f.bring_up({1});
    f.run(3000000);  // one attempt failed at 2 s; the next is under way
    CHECK(f.sm().ca_state(1) == CaState::Unresponsive);
    CHECK(f.sm().smp_timeouts() == 1);
    f.ca(1).set_answer_smps(true);
    f.run(1000000);  // well before the next sweep (5 s)
    CHECK(f.ca(1).state() == PortState::Active);
    CHECK(f.sm().ca_state(1) == CaState::Active);
}
