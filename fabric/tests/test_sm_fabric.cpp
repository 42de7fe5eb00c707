// The built-in SM on a fabric of several switches: it finds the switches
// behind inter-switch links, gives them and the CAs behind them LIDs,
// routes min-hop (with LMC, a CA's LIDs on different paths), routes around
// a link that goes down, and carries multicast along a spanning tree.
#include <catch2/catch.hpp>

#include "fixture.h"

using namespace fabric;
using namespace fabric::test;

namespace {

// The fat tree of testbench/guest/topologies/fat-tree.topo, with CAs on
// leaf0:1 (a), leaf1:1 (b) and leaf0:2 (c).
constexpr const char *kFatTree = R"(
switch leaf0 ports=8
switch leaf1 ports=8
switch spine0 ports=8
switch spine1 ports=8
link leaf0:7 spine0:1
link leaf0:8 spine1:1
link leaf1:7 spine0:2
link leaf1:8 spine1:2
node leaf0:1
node leaf1:1
node leaf0:2
)";

struct FatTree {
    ManualLoop loop;
    Log log;
    std::unique_ptr<IbFabric> fabric;
    std::unique_ptr<FakeCa> a, b, c;

    explicit FatTree(uint8_t lmc = 0, uint8_t c_node_type = 1) {
        log.capture_in_memory();
        log.set_level(Log::Level::Debug);
        FabricOptions o = test_options(8, true);
        std::string err;
        o.topology = parse_topology(kFatTree, err);
        REQUIRE(o.topology);
        o.sm_cfg.lmc = lmc;
        fabric = std::make_unique<IbFabric>(loop, log, o);
        a = std::make_unique<FakeCa>(sw(0), loop, 1, ca_options(1));
        b = std::make_unique<FakeCa>(sw(1), loop, 1, ca_options(2));
        FakeCa::Options co = ca_options(3);
        co.node_type = c_node_type;
        c = std::make_unique<FakeCa>(sw(0), loop, 2, co);
        a->connect();
        b->connect();
        c->connect();
        fabric->start();
        loop.advance(3000000);
    }
    ~FatTree() {
        a.reset();
        b.reset();
        c.reset();
        fabric.reset();
    }
    IbSwitch &sw(size_t i) { return fabric->sw(i); }
    SubnetManager &sm() { return *fabric->sm(); }
    size_t data_at(FakeCa &ca) { return ca.received_data(); }
};

}  // namespace

TEST_CASE("SM fabric: every switch and CA of a fat tree is found, configured and Active", "[sm][topology]") {
    FatTree f;
    CHECK(f.sm().switches_known() == 4);
    for (FakeCa *ca : {f.a.get(), f.b.get(), f.c.get()}) {
        INFO("CA " << std::hex << ca->port_guid());
        CHECK(ca->state() == PortState::Active);
        CHECK(ca->sm_lid() == 1);
    }
    // The SM's own switch's CAs keep port + 1; others follow the order the
    // switches were found in.
    CHECK(f.a->lid() == 2);
    CHECK(f.c->lid() == 3);
    CHECK(f.b->lid() > 9);
    CHECK(f.b->lid() != f.a->lid());
    for (size_t i = 0; i < 4; ++i) {
        INFO("switch " << i);
        CHECK(f.sw(i).lid() != 0);
        CHECK(f.sw(i).port(0).state == PortState::Active);
        CHECK(f.sw(i).port(0).pi.master_sm_lid == 1);
        CHECK(f.sw(i).fdb().linear_top() == f.sm().max_lid());
    }
    CHECK(f.sw(1).lid() != f.sw(2).lid());
    // Every inter-switch port and CA port is Active.
    CHECK(f.sw(0).port(7).state == PortState::Active);
    CHECK(f.sw(0).port(8).state == PortState::Active);
    CHECK(f.sw(2).port(1).state == PortState::Active);
    CHECK(f.sw(3).port(2).state == PortState::Active);
    CHECK(f.sw(1).port(1).state == PortState::Active);
    // The SA knows the four switches and three CAs.
    CHECK(f.sm().endports().size() == 7);
    const std::string st = f.sm().status();
    CHECK(st.find("sm port 7: Switch") != std::string::npos);
    CHECK(st.find("sm switch 0x0002c90300ffff01: lid=") != std::string::npos);
    const std::string ports = f.fabric->ports_text();
    CHECK(ports.find(fmt::format("switch leaf1 port 1: phys=LinkUp state=Active lid={} ", f.b->lid())) !=
          std::string::npos);
}

TEST_CASE("SM fabric: min-hop routes; packets cross leaf, spine, leaf", "[sm][topology]") {
    FatTree f;
    const uint16_t lb = f.b->lid();
    // leaf0 sends b's LID up to a spine, the spine down to leaf1, leaf1 to b.
    const uint8_t up = f.sw(0).fdb().lookup(lb);
    CHECK((up == 7 || up == 8));
    IbSwitch &spine = f.sw(up == 7 ? 2 : 3);
    CHECK(spine.fdb().lookup(lb) == 2);
    CHECK(f.sw(1).fdb().lookup(lb) == 1);
    CHECK(f.sw(1).fdb().lookup(f.a->lid()) >= 7);
    CHECK(f.sw(0).fdb().lookup(f.c->lid()) == 2);
    f.a->send_ud(lb, 0x42, 0x11111111, 256);
    f.b->send_ud(f.a->lid(), 0x42, 0x11111111, 256);
    f.a->send_ud(f.c->lid(), 0x42, 0x11111111, 256);
    f.loop.advance(1000);
    CHECK(f.data_at(*f.b) == 1);
    CHECK(f.data_at(*f.a) == 1);
    CHECK(f.data_at(*f.c) == 1);
    // Switch LIDs are routed too (LID-routed SMPs to a spine, perfquery).
    CHECK(f.sw(1).fdb().lookup(f.sw(2).lid()) == 7);
    CHECK(f.sw(2).fdb().lookup(f.sw(2).lid()) == 0);
}

TEST_CASE("SM fabric: with LMC 1 a CA's two LIDs take different spines", "[sm][topology]") {
    FatTree f(1);
    CHECK(f.sm().lid() == 2);
    CHECK(f.a->sm_lid() == 2);
    const uint16_t lb = f.b->lid();
    REQUIRE(lb % 2 == 0);
    CHECK(f.b->sets().back().lmc == 1);
    const uint8_t p0 = f.sw(0).fdb().lookup(lb), p1 = f.sw(0).fdb().lookup(static_cast<uint16_t>(lb + 1));
    CHECK(p0 >= 7);
    CHECK(p1 >= 7);
    CHECK(p0 != p1);
    f.a->send_ud(lb, 0x42, 0x11111111, 64);
    f.a->send_ud(static_cast<uint16_t>(lb + 1), 0x42, 0x11111111, 64);
    f.loop.advance(1000);
    CHECK(f.data_at(*f.b) == 2);
    CHECK(f.sw(2).forwarded() > 0);
    CHECK(f.sw(3).forwarded() > 0);
}

TEST_CASE("SM fabric: a link that goes down is routed around; back up, both are used", "[sm][topology]") {
    FatTree f(1);
    const uint16_t lb = f.b->lid();
    REQUIRE(f.sw(0).set_admin(7, false));  // leaf0 - spine0
    f.loop.advance(1000000);
    CHECK(f.sw(0).fdb().lookup(lb) == 8);
    CHECK(f.sw(0).fdb().lookup(static_cast<uint16_t>(lb + 1)) == 8);
    CHECK(f.sw(1).fdb().lookup(f.a->lid()) == 8);  // leaf1 reaches leaf0 through spine1 only
    f.a->send_ud(lb, 0x42, 0x11111111, 64);
    f.b->send_ud(f.a->lid(), 0x42, 0x11111111, 64);
    f.loop.advance(1000);
    CHECK(f.data_at(*f.b) == 1);
    CHECK(f.data_at(*f.a) == 1);
    REQUIRE(f.sw(0).set_admin(7, true));
    f.loop.advance(3000000);
    CHECK(f.sw(0).port(7).state == PortState::Active);
    CHECK(f.sw(2).port(1).state == PortState::Active);
    CHECK(f.sw(0).fdb().lookup(lb) != f.sw(0).fdb().lookup(static_cast<uint16_t>(lb + 1)));
}

TEST_CASE("SM fabric: multicast reaches each member once along a spanning tree", "[sm][topology][mcast]") {
    FatTree f;
    ForwardingTables::PortSet members;
    const auto ea = f.sm().endport_by_lid(f.a->lid());
    const auto eb = f.sm().endport_by_lid(f.b->lid());
    REQUIRE(ea);
    REQUIRE(eb);
    members.set(ea->attach);
    members.set(eb->attach);
    f.sm().set_mcast_ports(0xc001, members);
    f.loop.advance(100000);
    f.a->send_ud(0xc001, 0xffffff, 0x11111111, 64);
    f.b->send_ud(0xc001, 0xffffff, 0x11111111, 64);
    f.loop.advance(1000);
    CHECK(f.data_at(*f.b) == 1);   // a's packet, once (not back its own)
    CHECK(f.data_at(*f.a) == 1);   // b's
    CHECK(f.data_at(*f.c) == 0);   // not a member
    // leaf1 has b's port and one link of the tree (no cycle through both spines).
    const auto l1 = f.sw(1).fdb().mcast_ports(0xc001);
    CHECK(l1.count() == 2);
    CHECK(l1.test(1));
    CHECK(f.sw(0).fdb().mcast_ports(0xc001).test(1));
    CHECK_FALSE(f.sw(0).fdb().mcast_ports(0xc001).test(2));
}

TEST_CASE("SM fabric: a guest answering NodeInfo as a switch is not believed and never sees the M_Key",
          "[sm][topology][protect]") {
    FatTree f(0, 2);  // c, on leaf0's device port 2, claims to be a switch
    CHECK(f.sm().switches_known() == 4);
    CHECK(f.sm().ca_state(2) == CaState::Unsupported);
    CHECK(f.log.contains("port 2: the node there answers as switch"));
    // It got the NodeInfo probe and nothing with a key.
    for (const Mad &m : f.c->smp_requests()) {
        CHECK(get64(m, mad::smp::kMkey) == 0);
    }
    CHECK_FALSE(f.c->smp_requests().empty());
    // The real switches still hold their key, and the others are Active.
    CHECK(f.sw(0).port(0).pi.mkey == f.sm().switch_mkey());
    CHECK(f.a->state() == PortState::Active);
    CHECK(f.b->state() == PortState::Active);
    // The switch tells which of its ports are cabled to switches.
    CHECK(f.sw(0).port(7).sink->switch_link());
    CHECK_FALSE(f.sw(0).port(2).sink->switch_link());
}
