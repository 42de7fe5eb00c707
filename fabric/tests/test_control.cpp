// The control interface: every command through ControlCommands, and the
// line protocol over a real unix socket.
#include <catch2/catch.hpp>

#include <filesystem>

#include "control.h"
#include "fixture.h"

using namespace fabric;
using namespace fabric::test;

namespace {
bool ends_ok(const std::string &s) { return s.size() >= 3 && s.compare(s.size() - 3, 3, "ok\n") == 0; }
bool is_error(const std::string &s) { return s.rfind("error ", 0) == 0 && s.back() == '\n'; }
}  // namespace

TEST_CASE("control: commands and replies", "[control]") {
    TestFabric f;
    f.bring_up({1, 2});
    ControlCommands c(f.fabric.get(), [] { return std::string("eth: frames=0\n"); });

    const std::string ports = c.execute("ports");
    CHECK(ends_ok(ports));
    CHECK(ports.find("port 0: phys=LinkUp state=Active lid=1") != std::string::npos);
    CHECK(ports.find("port 1: phys=LinkUp state=Active lid=2 neighbor=0x0002c90300a00011") != std::string::npos);
    CHECK(ports.find("port 3: phys=Polling state=Down lid=- neighbor=-") != std::string::npos);

    CHECK(c.execute("link 1 down") == "ok\n");
    CHECK_FALSE(f.ca(1).link_up());
    CHECK(c.execute("ports").find("port 1: phys=Disabled state=Down") != std::string::npos);
    f.run(100000);
    CHECK(c.execute("link 1 up") == "ok\n");
    f.run(100000);
    CHECK(f.ca(1).state() == PortState::Active);
    CHECK(is_error(c.execute("link 9 down")));
    CHECK(is_error(c.execute("link 1 sideways")));

    CHECK(c.execute("drop 2 12.5") == "ok\n");
    CHECK(f.sw().faults().config(2).drop_pct == 12.5);
    CHECK(c.execute("corrupt all 3") == "ok\n");
    CHECK(f.sw().faults().config(4).corrupt_pct == 3);
    CHECK(c.execute("delay 3 250") == "ok\n");
    CHECK(f.sw().faults().config(3).delay_us == 250);
    CHECK(c.execute("ports").find("drop=12.5% corrupt=3% delay=0us") != std::string::npos);
    CHECK(is_error(c.execute("drop 2 101")));
    CHECK(is_error(c.execute("drop 2 lots")));
    CHECK(is_error(c.execute("delay 3 -5")));
    CHECK(is_error(c.execute("delay 0 5")));
    CHECK(is_error(c.execute("corrupt 2")));
    CHECK(c.execute("drop 3 2 requests") == "ok\n");
    CHECK(f.sw().faults().config(3).drop_scope == DropScope::Requests);
    CHECK(c.execute("ports").find("drop=2%(requests) corrupt=3%") != std::string::npos);
    CHECK(is_error(c.execute("drop 3 2 acks")));
    CHECK(is_error(c.execute("corrupt 3 2 requests")));
    CHECK(c.execute("drop all 0") == "ok\n");
    CHECK(f.sw().faults().config(3).drop_scope == DropScope::All);
    CHECK(c.execute("corrupt all 0") == "ok\n");

    const std::string st = c.execute("sm status");
    CHECK(ends_ok(st));
    CHECK(st.find("sm port 2: Active lid=3") != std::string::npos);
    CHECK(c.execute("sm restart") == "ok\n");
    f.run(100000);
    CHECK(f.ca(2).rereg_events() == 1);
    CHECK(is_error(c.execute("sm dance")));

    const std::string groups = c.execute("groups");
    CHECK(ends_ok(groups));
    CHECK(groups.find("group ff12:401b:ffff:0000:0000:0000:ffff:ffff mlid=0xc000 qkey=0x00000b1b") != std::string::npos);

    const std::string stats = c.execute("stats");
    CHECK(ends_ok(stats));
    CHECK(stats.find("switch: forwarded=") != std::string::npos);
    CHECK(stats.find("sm: running sweeps=") != std::string::npos);
    CHECK(stats.find("sa: requests=") != std::string::npos);
    CHECK(stats.find("eth: frames=0") != std::string::npos);
    CHECK(ends_ok(c.execute("help")));
    CHECK(is_error(c.execute("frobnicate")));
    CHECK(is_error(c.execute("")));
    CHECK(is_error(c.execute("ports extra")));
}

TEST_CASE("control: link faults (flap, retrain, duplicate, reorder, partition, SM gone and back, rereg)",
          "[control]") {
    TestFabric f;
    f.bring_up({1, 2});
    ControlCommands c(f.fabric.get());

    CHECK(c.execute("link 1 flap 200") == "ok\n");
    CHECK_FALSE(f.ca(1).link_up());
    f.run(150000);
    CHECK_FALSE(f.ca(1).link_up());
    f.run(100000);
    CHECK(f.ca(1).link_up());
    f.run(200000);
    CHECK(f.ca(1).state() == PortState::Active);
    CHECK(c.execute("link 1 flap 1000") == "ok\n");
    CHECK(c.execute("link 1 down") == "ok\n");  // the last word wins: it stays down
    f.run(1'500'000);
    CHECK_FALSE(f.ca(1).link_up());
    CHECK(c.execute("link 1 up") == "ok\n");
    f.run(200000);
    CHECK(f.ca(1).state() == PortState::Active);
    CHECK(is_error(c.execute("link 1 flap 0")));
    CHECK(is_error(c.execute("link 1 flap")));  // found by the control fuzz target
    CHECK(is_error(c.execute("link 1 flap soon")));
    CHECK(is_error(c.execute("link 1 down 5")));
    const uint64_t downed = f.sw().port(2).ctr.link_downed;
    CHECK(c.execute("link 2 retrain") == "ok\n");
    f.run(200000);
    CHECK(f.sw().port(2).ctr.link_downed == downed + 1);
    CHECK(f.ca(2).state() == PortState::Active);

    CHECK(c.execute("duplicate 2 5") == "ok\n");
    CHECK(c.execute("reorder all 1.5") == "ok\n");
    CHECK(f.sw().faults().config(2).duplicate_pct == 5);
    CHECK(f.sw().faults().config(1).reorder_pct == 1.5);
    CHECK(c.execute("ports").find("duplicate=5% reorder=1.5%") != std::string::npos);
    CHECK(is_error(c.execute("reorder 2 200")));
    CHECK(is_error(c.execute("duplicate 2 5 requests")));

    CHECK(c.execute("partition 1 2,3") == "ok\n");
    CHECK(f.sw().faults().cut(1, 3));
    CHECK(c.execute("ports").find("partition: port 1 | port 2") != std::string::npos);
    CHECK(c.execute("partition 1 3 off") == "ok\n");
    CHECK_FALSE(f.sw().faults().cut(1, 3));
    CHECK(f.sw().faults().cut(1, 2));
    CHECK(is_error(c.execute("partition 1 1,2")));
    CHECK(is_error(c.execute("partition 1 2,")));
    CHECK(is_error(c.execute("partition 1 9")));
    CHECK(is_error(c.execute("partition 1 2 maybe")));
    CHECK(is_error(c.execute("partition everything")));
    CHECK(c.execute("partition clear") == "ok\n");
    CHECK(f.sw().faults().cuts().empty());

    // SM gone: no sweeps, no SA answers; the ports stay Active.
    const unsigned rereg = f.ca(2).rereg_events();
    CHECK(c.execute("sm stop") == "ok\n");
    CHECK(c.execute("stats").find("sm: stopped") != std::string::npos);
    const uint64_t sweeps = f.fabric->sm()->sweeps();
    const uint64_t tid = f.ca(2).send_sa(mad::kGet, 0x0001, 0, {});
    f.run(6'000'000);
    CHECK(f.fabric->sm()->sweeps() == sweeps);
    CHECK(f.ca(2).response_for(tid) == nullptr);
    CHECK(f.ca(2).state() == PortState::Active);
    CHECK(c.execute("stats").find("unanswered_sm_down=1") != std::string::npos);
    CHECK(c.execute("sm rereg 2") == "ok\n");  // nobody to do it
    f.run(100000);
    CHECK(f.ca(2).rereg_events() == rereg);
    // ... and back: a new master sweeps and asks every port to reregister.
    CHECK(c.execute("sm start") == "ok\n");
    f.run(200000);
    CHECK(f.ca(2).rereg_events() == rereg + 1);
    CHECK(f.ca(1).rereg_events() >= 1);
    const uint64_t tid2 = f.ca(2).send_sa(mad::kGet, 0x0001, 0, {});
    f.run(50000);
    CHECK(f.ca(2).response_for(tid2) != nullptr);
    // One port's ClientReregister, the other port untouched.
    const unsigned r1 = f.ca(1).rereg_events();
    CHECK(c.execute("sm rereg 2") == "ok\n");
    f.run(200000);
    CHECK(f.ca(2).rereg_events() == rereg + 2);
    CHECK(f.ca(1).rereg_events() == r1);
    CHECK(f.ca(2).state() == PortState::Active);
    CHECK(is_error(c.execute("sm rereg 0")));
    CHECK(is_error(c.execute("sm stop 2")));

    // A LID change: port 2 (LID 3) gets LID 3 + 4 ports = 7, and back.
    SubnetManager &sm = *f.fabric->sm();
    CHECK(sm.lid_for_port(2) == 3);
    CHECK(c.execute("sm lid 2") == "ok\n");
    CHECK(sm.lid_for_port(2) == 7);
    f.run(1000);
    CHECK(f.sw().fdb().lookup(3) == ForwardingTables::kNoPort);  // the old LID leads nowhere at once
    f.run(200000);
    CHECK(f.ca(2).lid() == 7);
    CHECK(f.ca(2).state() == PortState::Active);
    CHECK(f.sw().fdb().lookup(7) == 2);
    CHECK(sm.endport_by_lid(7).has_value());
    CHECK_FALSE(sm.endport_by_lid(3).has_value());
    CHECK(c.execute("sm status").find("lid=7") != std::string::npos);
    f.run(6'000'000);  // a sweep's verification keeps it
    CHECK(f.ca(2).lid() == 7);
    CHECK(c.execute("sm lid 2") == "ok\n");
    f.run(200000);
    CHECK(f.ca(2).lid() == 3);
    CHECK(f.sw().fdb().lookup(3) == 2);
    CHECK(f.sw().fdb().lookup(7) == ForwardingTables::kNoPort);
    CHECK(is_error(c.execute("sm lid 3")));  // nothing Active there

    // The CA port's P_Key table: set now, and again after the CA resets.
    CHECK(c.execute("sm pkeys 2 0x8001,0xffff") == "ok\n");
    f.run(100000);
    CHECK(f.ca(2).pkeys()[0] == 0x8001);
    CHECK(f.ca(2).pkeys()[1] == 0xffff);
    CHECK(c.execute("sm status").find("pkeys=0x8001,0xffff") != std::string::npos);
    CHECK(is_error(c.execute("sm pkeys 2 0x10000")));
    CHECK(is_error(c.execute("sm pkeys 2 0x")));
    CHECK(is_error(c.execute("sm pkeys 2 ffff,,1")));
    CHECK(is_error(c.execute("sm pkeys 3 0xffff")));
    CHECK(is_error(c.execute("sm pkeys 2 " + std::string(33 * 7, ',').replace(0, 1, "1"))));
    CHECK(c.execute("sm pkeys 2 ffff") == "ok\n");
    f.run(100000);
    CHECK(f.ca(2).pkeys()[0] == 0xffff);
    CHECK(f.ca(2).pkeys()[1] == 0);
}

TEST_CASE("control: without an SM, and without an InfiniBand switch", "[control]") {
    TestFabric f(test_options(2, false));
    ControlCommands c(f.fabric.get());
    CHECK(is_error(c.execute("sm status")));
    CHECK(is_error(c.execute("sm restart")));
    CHECK(is_error(c.execute("groups")));
    CHECK(ends_ok(c.execute("ports")));
    ControlCommands none(nullptr);
    CHECK(is_error(none.execute("ports")));
    CHECK(ends_ok(none.execute("stats")));
}

TEST_CASE("control: the line protocol on a unix socket", "[control]") {
    namespace asio = boost::asio;
    const auto dir = std::filesystem::temp_directory_path() / ("hcasim-ctl-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "ctl.sock").string();
    TestFabric f(test_options(2));
    f.fabric->start();
    f.run(1000);
    ControlCommands cmds(f.fabric.get());
    asio::io_context io;
    ControlServer server(io, path, cmds);
    asio::local::stream_protocol::socket s(io);
    s.connect(asio::local::stream_protocol::endpoint(path));
    asio::write(s, asio::buffer(std::string("ports\r\nsm status\nnonsense\n")));
    std::string got;
    // Until the answer to the last line has arrived (up to 10 s: a loaded
    // sanitizer run is slow), not a count of lines: the answers come in
    // pieces.
    for (int i = 0; i < 2000 && got.find("error unknown command 'nonsense'\n") == std::string::npos; ++i) {
        io.run_for(std::chrono::milliseconds(5));
        while (s.available()) {
            char buf[4096];
            got.append(buf, s.read_some(asio::buffer(buf)));
        }
    }
    CHECK(got.find("port 0: phys=LinkUp") != std::string::npos);
    CHECK(got.find("sm: state=master") != std::string::npos);
    CHECK(got.find("error unknown command 'nonsense'") != std::string::npos);
    // A line that never ends is refused and the connection closed.
    asio::local::stream_protocol::socket t(io);
    t.connect(asio::local::stream_protocol::endpoint(path));
    asio::write(t, asio::buffer(std::string(ControlServer::kMaxLine + 10, 'x')));
    std::string got2;
    for (int i = 0; i < 2000 && got2.find('\n') == std::string::npos; ++i) {
        io.run_for(std::chrono::milliseconds(5));
        while (t.available()) {
            char buf[256];
            got2.append(buf, t.read_some(asio::buffer(buf)));
        }
    }
    CHECK(got2 == "error line too long\n");
    std::filesystem::remove_all(dir);
}
