// Fabrics of several switches: the topology file, inter-switch links in one
// daemon (directed routes across them, forwarding by every switch's LFT,
// per-switch capture records, link state on both ends, back-pressure
// without loss), and an inter-switch link between two daemons over TCP.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "fixture.h"
#include "control.h"
#include "link_port.h"

using namespace fabric;
using namespace fabric::test;
namespace ni = iba::mad::node_info;

namespace {

Topology parse_ok(const std::string &text) {
    std::string err;
    auto t = parse_topology(text, err);
    INFO(err);
    REQUIRE(t);
    return *t;
}

std::string parse_error(const std::string &text) {
    std::string err;
    CHECK_FALSE(parse_topology(text, err));
    return err;
}

// leaf0:3 - spine:1, spine:2 - leaf1:3; a CA on port 1 of each leaf.
constexpr const char *kLine = R"(
# two leaves and a spine
switch leaf0 ports=4
switch spine ports=4 guid=0x0002c90300fff000
switch leaf1 ports=4
link leaf0:3 spine:1
link spine:2 leaf1:3   # trailing comment
node leaf0:1
node leaf1:1
)";

struct LineFabric {
    ManualLoop loop;
    Log log;
    MemoryCapture cap;
    std::unique_ptr<IbFabric> fabric;
    std::unique_ptr<FakeCa> a, b;

    explicit LineFabric(bool capture = false) {
        log.capture_in_memory();
        FabricOptions o = test_options(4, false);
        o.topology = parse_ok(kLine);
        fabric = std::make_unique<IbFabric>(loop, log, o);
        if (capture) {
            for (size_t i = 0; i < 3; ++i) {
                fabric->sw(i).set_capture(&cap);
            }
        }
        a = std::make_unique<FakeCa>(leaf0(), loop, 1, ca_options(1));
        b = std::make_unique<FakeCa>(leaf1(), loop, 1, ca_options(2));
        fabric->start();
        a->connect();
        b->connect();
        loop.advance(1000);
    }
    ~LineFabric() {
        a.reset();
        b.reset();
        fabric.reset();
    }
    IbSwitch &leaf0() { return fabric->sw(0); }
    IbSwitch &spine() { return fabric->sw(1); }
    IbSwitch &leaf1() { return fabric->sw(2); }
    // NodeInfo along a directed route from CA a.
    const Mad *node_info(std::initializer_list<uint8_t> path) {
        std::vector<uint8_t> p(path);
        const uint64_t tid = a->send_dr_smp(p, mad::kGet, mad::kAttrNodeInfo, 0);
        loop.advance(1000);
        return a->smp_response(tid);
    }
    // What a subnet manager would do: every port Active, LIDs routed
    // (a: LID 10, b: LID 20).
    void route() {
        for (size_t i = 0; i < 3; ++i) {
            IbSwitch &sw = fabric->sw(i);
            for (uint8_t k = 0; k <= sw.num_ports(); ++k) {
                if (k == 0 || sw.port(k).link_up()) {
                    sw.set_port_state(k, PortState::Active);
                }
            }
            sw.fdb().set_linear_top(64);
        }
        a->force_state(PortState::Active);
        b->force_state(PortState::Active);
        a->set_lid(10);
        b->set_lid(20);
        leaf0().fdb().set_lft_entry(10, 1);
        leaf0().fdb().set_lft_entry(20, 3);
        spine().fdb().set_lft_entry(10, 1);
        spine().fdb().set_lft_entry(20, 2);
        leaf1().fdb().set_lft_entry(10, 3);
        leaf1().fdb().set_lft_entry(20, 1);
    }
};

}  // namespace

TEST_CASE("topology: the file format", "[topology]") {
    const Topology t = parse_ok(kLine);
    REQUIRE(t.switches.size() == 3);
    CHECK(t.switches[0].name == "leaf0");
    CHECK(t.switches[0].ports == 4);
    CHECK(t.switches[1].guid == 0x0002c90300fff000ull);
    CHECK(t.switches[2].guid == 0);
    REQUIRE(t.links.size() == 2);
    CHECK(t.links[1].a.sw == 1);
    CHECK(t.links[1].a.port == 2);
    CHECK(t.links[1].b.sw == 2);
    REQUIRE(t.nodes.size() == 2);
    CHECK(t.nodes[1].sw == 2);
    const Topology r = parse_ok("switch a\nremote a:8 listen 127.0.0.1:0\nswitch b\nremote b:1 connect 127.0.0.1:7000\n");
    REQUIRE(r.remotes.size() == 2);
    CHECK(r.remotes[0].listen);
    CHECK(r.remotes[1].host == "127.0.0.1");
    CHECK(r.remotes[1].tcp_port == 7000);
    CHECK(Topology::single(3).nodes.size() == 3);

    CHECK(parse_error("") == "no switch declared");
    CHECK(parse_error("switch a\nswitch a\n") == "line 2: switch 'a' declared twice");
    CHECK(parse_error("switch a ports=65\n").starts_with("line 1: bad switch option"));
    CHECK(parse_error("switch a ports=4\nnode a:5\n") == "line 2: switch 'a' has no port 5");
    CHECK(parse_error("switch a\nnode b:1\n") == "line 2: no switch 'b' declared before");
    CHECK(parse_error("switch a\nlink a:1 a:1\n") == "line 2: a port 1 is used twice");
    CHECK(parse_error("switch a\nnode a:1\nnode a:1\n") == "line 3: a port 1 is used twice");
    CHECK(parse_error("switch a\nremote a:1 connect 127.0.0.1:0\n").starts_with("line 2: '127.0.0.1:0'"));
    CHECK(parse_error("switch a\nremote a:1 dial x:1\n").starts_with("line 2: remote"));
    CHECK(parse_error("switch a\nrouter r\n").starts_with("line 2: unknown keyword"));
    CHECK(parse_error("switch a\nnode a\n").starts_with("line 2: 'a' is not SWITCH:PORT"));
    std::string many;
    for (int i = 0; i < 65; ++i) {
        many += "switch s" + std::to_string(i) + "\n";
    }
    CHECK(parse_error(many) == "line 65: more than 64 switches");
}

TEST_CASE("topology: switches, GUIDs and inter-switch links come up", "[topology]") {
    LineFabric f;
    CHECK(f.fabric->num_switches() == 3);
    CHECK(f.leaf0().node_guid() == 0x0002c90300ffff00ull);
    CHECK(f.spine().node_guid() == 0x0002c90300fff000ull);
    CHECK(f.leaf1().node_guid() == 0x0002c90300ffff02ull);
    CHECK(f.leaf0().port(3).link_up());
    CHECK(f.spine().port(1).link_up());
    CHECK(f.spine().port(2).link_up());
    CHECK(f.leaf1().port(3).link_up());
    CHECK_FALSE(f.spine().port(3).link_up());
    CHECK(f.leaf0().port(3).state == PortState::Init);
    CHECK(f.leaf0().port(3).peer_node_guid == f.spine().node_guid());
    CHECK(f.leaf0().port(3).peer_port_num == 1);
    const std::string ports = f.fabric->ports_text();
    CHECK(ports.find("switch: name=leaf0 guid=0x0002c90300ffff00 ports=4\n") != std::string::npos);
    CHECK(ports.find("\nport 3: phys=LinkUp state=Init lid=- neighbor=0x0002c90300fff000") != std::string::npos);
    CHECK(ports.find("\nswitch spine port 2: phys=LinkUp") != std::string::npos);
    CHECK(ports.find("\nswitch leaf1 port 1: phys=LinkUp") != std::string::npos);
    CHECK(f.fabric->stats_text().find("switch leaf1 switch: forwarded=") != std::string::npos);
}

TEST_CASE("topology: directed routes cross the inter-switch links, both ways", "[topology][dr]") {
    LineFabric f;
    // [0,1]: leaf0 itself; [0,1,3]: the spine (heard on its port 1);
    // [0,1,3,2]: leaf1 (on its port 3); [0,1,3,2,1]: CA b.
    const Mad *r = f.node_info({0, 1});
    REQUIRE(r);
    CHECK(get64(*r, mad::smp::kData + ni::kNodeGuid) == f.leaf0().node_guid());
    r = f.node_info({0, 1, 3});
    REQUIRE(r);
    CHECK(get64(*r, mad::smp::kData + ni::kNodeGuid) == f.spine().node_guid());
    CHECK((*r)[mad::smp::kData + ni::kLocalPortNum] == 1);
    CHECK((*r)[mad::smp::kData + ni::kNodeType] == ni::kTypeSwitch);
    r = f.node_info({0, 1, 3, 2});
    REQUIRE(r);
    CHECK(get64(*r, mad::smp::kData + ni::kNodeGuid) == f.leaf1().node_guid());
    CHECK((*r)[mad::smp::kData + ni::kLocalPortNum] == 3);
    r = f.node_info({0, 1, 3, 2, 1});
    REQUIRE(r);
    CHECK(get64(*r, mad::smp::kData + ni::kNodeGuid) == ca_options(2).node_guid);
    // A port with no cable ends the route there.
    CHECK_FALSE(f.node_info({0, 1, 3, 4}));
}

TEST_CASE("topology: a packet crosses three switches by their LFTs; each switch records it", "[topology]") {
    LineFabric f(true);
    f.route();
    f.a->send_ud(20, 0x42, 0x11111111, 256);
    f.loop.advance(1000);
    REQUIRE(f.b->received_data() == 1);
    CHECK(f.a->received_data() == 0);
    CHECK(f.leaf0().forwarded() == 1);
    CHECK(f.spine().forwarded() == 1);
    CHECK(f.leaf1().forwarded() == 1);
    // One record per switch it entered, the same packet id in each.
    std::vector<uint64_t> ids;
    for (const auto &rec : f.cap.records) {
        if (rec.packet.size() > 250) {
            ids.push_back(rec.id);
        }
    }
    REQUIRE(ids.size() == 3);
    CHECK(ids[0] == ids[1]);
    CHECK(ids[1] == ids[2]);
    // And back.
    f.b->send_ud(10, 0x42, 0x11111111, 64);
    f.loop.advance(1000);
    CHECK(f.a->received_data() == 1);
    // A LID the spine does not route is dropped there.
    f.a->send_ud(30, 0x42, 0x11111111, 64);
    f.leaf0().fdb().set_lft_entry(30, 3);
    f.a->send_ud(30, 0x42, 0x11111111, 64);
    f.loop.advance(1000);
    CHECK(f.spine().drops(Drop::NoRoute) == 1);
    CHECK(f.leaf0().drops(Drop::NoRoute) == 1);
}

TEST_CASE("topology: the capture names the switch", "[topology][capture]") {
    ManualLoop loop;
    Log log;
    log.capture_in_memory();
    const auto path = std::filesystem::temp_directory_path() / ("hcasim-topo-" + std::to_string(::getpid()) + ".pcapng");
    FabricOptions o = test_options(4, false);
    o.topology = parse_ok(kLine);
    o.capture = path.string();
    {
        IbFabric fab(loop, log, o);
        FakeCa a(fab.sw(0), loop, 1, ca_options(1));
        fab.start();
        a.connect();
        loop.advance(1000);
        const std::vector<uint8_t> p{0, 1, 3};
        a.send_dr_smp(p, mad::kGet, mad::kAttrNodeInfo, 0);
        loop.advance(1000);
        fab.flush();
    }
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::filesystem::remove(path);
    CHECK(bytes.find("switch=leaf0 port=1") == std::string::npos);  // the name comes first
    CHECK(bytes.find("port=1 switch=leaf0 fwd=3") != std::string::npos);
    CHECK(bytes.find("port=1 switch=spine") != std::string::npos);
}

TEST_CASE("topology: disabling either end of an inter-switch link takes both down", "[topology]") {
    LineFabric f;
    REQUIRE(f.spine().set_admin(1, false));
    CHECK_FALSE(f.spine().port(1).link_up());
    CHECK_FALSE(f.leaf0().port(3).link_up());
    CHECK(f.leaf0().port(3).state == PortState::Down);
    REQUIRE(f.spine().set_admin(1, true));
    CHECK(f.leaf0().port(3).link_up());
    CHECK(f.spine().port(1).link_up());
    CHECK(f.leaf0().port(3).state == PortState::Init);
    REQUIRE(f.leaf0().set_admin(3, false));
    CHECK_FALSE(f.spine().port(1).link_up());
    REQUIRE(f.leaf0().set_admin(3, true));
    CHECK(f.spine().port(1).link_up());
    // An SM's PortState=Down: the link retrains, both ends come back.
    f.spine().retrain(1);
    CHECK_FALSE(f.leaf0().port(3).link_up());
    f.loop.advance(20000);
    CHECK(f.leaf0().port(3).link_up());
    CHECK(f.spine().port(1).state == PortState::Init);
}

namespace {

// A device that honours the switch's back-pressure: it sends while its
// switch has no congested egress, and waits for resume() otherwise.
struct Pump : PortSink {
    IbSwitch &sw;
    uint8_t port;
    std::vector<uint8_t> pkt;
    size_t left;
    size_t holds = 0;
    Pump(IbSwitch &s, uint8_t p, std::vector<uint8_t> packet, size_t n) : sw(s), port(p), pkt(std::move(packet)), left(n) {}
    bool deliver(const Frame &) override { return true; }
    void link_state(bool) override {}
    void resume() override { send(); }
    void send() {
        while (left) {
            --left;
            sw.receive(port, make_packet_frame(left + 1, pkt));
            if (sw.congested().any()) {
                sw.hold(port, sw.congested());
                ++holds;
                return;
            }
        }
    }
};

// A device that takes 8 frames every 100 us and is congested above 64.
struct Slow : PortSink {
    ManualLoop &loop;
    IbSwitch &sw;
    uint8_t port;
    size_t backlog = 0, got = 0;
    bool was = false;
    Slow(ManualLoop &l, IbSwitch &s, uint8_t p) : loop(l), sw(s), port(p) { tick(); }
    bool deliver(const Frame &) override {
        ++backlog;
        ++got;
        was = was || congested();
        return backlog < 100000;
    }
    bool congested() const override { return backlog > 64; }
    void link_state(bool) override {}
    void tick() {
        backlog -= std::min<size_t>(backlog, 8);
        if (was && backlog <= 32) {
            was = false;
            sw.drained(port);
        }
        loop.after(100, [this] { tick(); });
    }
};

}  // namespace

TEST_CASE("topology: back-pressure crosses the inter-switch links; nothing is lost", "[topology][sched]") {
    LineFabric f;
    Pump pump(f.leaf0(), 2, f.a->ud_packet(40, 0x42, 0x11111111, 1024), 20000);
    Slow slow(f.loop, f.leaf1(), 2);
    REQUIRE(f.leaf0().attach(2, &pump));
    REQUIRE(f.leaf1().attach(2, &slow));
    f.route();
    f.leaf0().fdb().set_lft_entry(40, 3);
    f.spine().fdb().set_lft_entry(40, 2);
    f.leaf1().fdb().set_lft_entry(40, 2);
    pump.send();
    for (int i = 0; i < 400 && slow.got < 20000; ++i) {
        f.loop.advance(1000);
    }
    CHECK(slow.got == 20000);
    CHECK(pump.left == 0);
    CHECK(pump.holds > 0);
    for (size_t i = 0; i < 3; ++i) {
        INFO("switch " << i);
        CHECK(f.fabric->sw(i).drops(Drop::QueueFull) == 0);
        CHECK(f.fabric->sw(i).total_drops() == 0);
    }
    // The spine's egress towards leaf1 waited (PortXmitWait counts it).
    CHECK(f.spine().port(2).ctr.xmit_wait > 0);
    f.leaf0().detach(2);
    f.leaf1().detach(2);
}

TEST_CASE("topology: an inter-switch link between two daemons over TCP", "[topology][links]") {
    namespace asio = boost::asio;
    asio::io_context io;
    AsioLoop loop(io);
    Log log;
    log.capture_in_memory();
    FabricOptions oa = test_options(4, false), ob = test_options(4, false);
    oa.topology = parse_ok("switch east ports=4 guid=0x0002c90300eeee00\nnode east:1\n");
    ob.topology = parse_ok("switch west ports=4 guid=0x0002c90300dddd00\nnode west:1\n");
    IbFabric fa(loop, log, oa), fb(loop, log, ob);
    FakeCa ca(fa.sw(), loop, 1, ca_options(1));
    fa.start();
    fb.start();
    ca.connect();
    auto spin = [&](int ms) { io.run_for(std::chrono::milliseconds(ms)); };
    auto east = std::make_unique<RemoteLink>(io, fa.sw(), log, 4, true, "127.0.0.1", 0);
    const uint16_t tcp_port = east->listening_port();
    REQUIRE(tcp_port != 0);
    auto west = std::make_unique<RemoteLink>(io, fb.sw(), log, 2, false, "127.0.0.1", tcp_port);
    for (int i = 0; i < 100 && !(fa.sw().port(4).hello && fb.sw().port(2).hello); ++i) {
        spin(10);
    }
    REQUIRE(east->connected());
    REQUIRE(west->connected());
    CHECK(fa.sw().port(4).link_up());
    CHECK(fb.sw().port(2).link_up());
    CHECK(fa.sw().port(4).peer_node_guid == 0x0002c90300dddd00ull);
    CHECK(fa.sw().port(4).peer_port_num == 2);
    CHECK(fb.sw().port(2).peer_node_guid == 0x0002c90300eeee00ull);
    // A directed route from the CA on east reaches west's SMA and back.
    const std::vector<uint8_t> path{0, 1, 4};
    const uint64_t tid = ca.send_dr_smp(path, mad::kGet, mad::kAttrNodeInfo, 0);
    for (int i = 0; i < 100 && !ca.smp_response(tid); ++i) {
        spin(5);
    }
    const Mad *r = ca.smp_response(tid);
    REQUIRE(r);
    CHECK(get64(*r, mad::smp::kData + ni::kNodeGuid) == 0x0002c90300dddd00ull);
    CHECK((*r)[mad::smp::kData + ni::kLocalPortNum] == 2);
    // Disabling west's port takes east's down too, and back.
    REQUIRE(fb.sw().set_admin(2, false));
    for (int i = 0; i < 100 && fa.sw().port(4).link_up(); ++i) {
        spin(5);
    }
    CHECK_FALSE(fa.sw().port(4).link_up());
    REQUIRE(fb.sw().set_admin(2, true));
    for (int i = 0; i < 100 && !fa.sw().port(4).link_up(); ++i) {
        spin(5);
    }
    CHECK(fa.sw().port(4).link_up());
    // The listening side goes away: the other end's link is down, and it
    // comes back once a listener is there again (the connecting side retries).
    east.reset();
    for (int i = 0; i < 100 && fb.sw().port(2).link_up(); ++i) {
        spin(5);
    }
    CHECK_FALSE(fb.sw().port(2).link_up());
    east = std::make_unique<RemoteLink>(io, fa.sw(), log, 4, true, "127.0.0.1", tcp_port);
    for (int i = 0; i < 300 && !fb.sw().port(2).link_up(); ++i) {
        spin(10);
    }
    CHECK(fb.sw().port(2).link_up());
    CHECK(west->connects() == 2);
    west.reset();
    east.reset();
}

TEST_CASE("topology: control commands name a switch's port as SWITCH:PORT", "[topology][control]") {
    LineFabric f;
    ControlCommands c(f.fabric.get());
    CHECK(c.execute("link spine:1 down") == "ok\n");
    CHECK_FALSE(f.spine().port(1).admin_up);
    CHECK_FALSE(f.leaf0().port(3).link_up());
    CHECK(c.execute("link spine:1 up") == "ok\n");
    CHECK(f.leaf0().port(3).link_up());
    CHECK(c.execute("drop leaf1:3 5") == "ok\n");
    CHECK(f.leaf1().faults().config(3).drop_pct == 5);
    CHECK(f.leaf0().faults().config(3).drop_pct == 0);
    CHECK(c.execute("link 3 down") == "ok\n");  // a bare port: the first switch
    CHECK_FALSE(f.leaf0().port(3).admin_up);
    CHECK(c.execute("link core:1 down") == "error no switch named 'core'\n");
    CHECK(c.execute("link spine:9 down") == "error bad port '9' (1..4 or all)\n");
    CHECK(c.execute("delay spine:all 10") == "ok\n");
    CHECK(f.spine().faults().config(4).delay_us == 10);
}
