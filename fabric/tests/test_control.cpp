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
    CHECK(stats.find("sm: sweeps=") != std::string::npos);
    CHECK(stats.find("sa: requests=") != std::string::npos);
    CHECK(stats.find("eth: frames=0") != std::string::npos);
    CHECK(ends_ok(c.execute("help")));
    CHECK(is_error(c.execute("frobnicate")));
    CHECK(is_error(c.execute("")));
    CHECK(is_error(c.execute("ports extra")));
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
