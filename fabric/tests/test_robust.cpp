// The daemon survives any bytes on any socket: random bytes, truncated
// frames, oversized lengths and floods on the link, Ethernet and control
// sockets close (at most) the connection that sent them, and the fabric
// keeps forwarding for everyone else.  A handler that throws, a log that
// cannot be written and a full MAC table end nothing either.
#include <catch2/catch.hpp>

#include <filesystem>
#include <random>

#include "control.h"
#include "eth_hub.h"
#include "fixture.h"
#include "link_port.h"

using namespace fabric;
using namespace fabric::test;
namespace asio = boost::asio;
using asio::local::stream_protocol;

namespace {

struct Daemon {
    asio::io_context io;
    AsioLoop loop{io};
    Log log;
    std::string dir;
    std::unique_ptr<IbFabric> fabric;
    std::unique_ptr<LinkServer> links;
    std::unique_ptr<EthHub> eth;
    std::unique_ptr<ControlCommands> cmds;
    std::unique_ptr<ControlServer> control;

    Daemon() {
        log.capture_in_memory();
        dir = (std::filesystem::temp_directory_path() / ("hcasim-robust-" + std::to_string(::getpid()))).string();
        fabric = std::make_unique<IbFabric>(loop, log, test_options(4, false));
        links = std::make_unique<LinkServer>(io, fabric->sw(), log, dir);
        eth = std::make_unique<EthHub>(io, dir + "/eth.sock", &log);
        cmds = std::make_unique<ControlCommands>(fabric.get());
        control = std::make_unique<ControlServer>(io, dir + "/ctl.sock", *cmds);
        fabric->start();
        // Ports 1 and 2 Active, LID 3 behind port 2.
        IbSwitch &sw = fabric->sw();
        sw.fdb().set_lft_entry(3, 2);
        sw.fdb().set_linear_top(3);
    }
    ~Daemon() {
        control.reset();
        eth.reset();
        links.reset();
        fabric.reset();
        std::filesystem::remove_all(dir);
    }
    void spin(int ms = 20) { io.run_for(std::chrono::milliseconds(ms)); }
    void activate(uint8_t p) {
        fabric->sw().set_port_state(p, PortState::Armed);
        fabric->sw().set_port_state(p, PortState::Active);
    }
};

struct Peer {
    stream_protocol::socket s;
    std::vector<uint8_t> in;
    Peer(Daemon &d, const std::string &path) : s(d.io) { s.connect(stream_protocol::endpoint(path)); }
    // Writes raw bytes; false once the daemon closed the connection.
    bool raw(std::span<const uint8_t> b) {
        boost::system::error_code ec;
        asio::write(s, asio::buffer(b.data(), b.size()), ec);
        return !ec;
    }
    // One write per frame: the socket buffer counts every write separately.
    void frame(std::span<const uint8_t> body) {
        std::vector<uint8_t> b(4 + body.size());
        hca::store_be32(b.data(), static_cast<uint32_t>(body.size()));
        std::copy(body.begin(), body.end(), b.begin() + 4);
        raw(b);
    }
    // Reads what arrived while the daemon runs; true if the peer closed.
    bool drain(Daemon &d, int rounds = 10) {
        for (int i = 0; i < rounds; ++i) {
            d.spin(5);
            boost::system::error_code ec;
            s.non_blocking(true);
            for (;;) {
                uint8_t buf[65536];
                const size_t n = s.read_some(asio::buffer(buf), ec);
                if (ec == asio::error::would_block) {
                    break;
                }
                if (ec) {
                    s.non_blocking(false);
                    return true;
                }
                in.insert(in.end(), buf, buf + n);
            }
            s.non_blocking(false);
        }
        return false;
    }
    // Complete frames in what arrived.
    std::vector<std::vector<uint8_t>> frames() {
        std::vector<std::vector<uint8_t>> out;
        size_t off = 0;
        while (in.size() - off >= 4) {
            const uint32_t len = hca::load_be32(in.data() + off);
            if (in.size() - off - 4 < len) {
                break;
            }
            out.emplace_back(in.begin() + static_cast<ptrdiff_t>(off + 4),
                             in.begin() + static_cast<ptrdiff_t>(off + 4 + len));
            off += 4 + len;
        }
        in.erase(in.begin(), in.begin() + static_cast<ptrdiff_t>(off));
        return out;
    }
};

std::vector<uint8_t> random_bytes(std::mt19937 &rng, size_t n) {
    std::vector<uint8_t> v(n);
    for (auto &b : v) {
        b = static_cast<uint8_t>(rng());
    }
    return v;
}

// Everything a hostile or broken client can send on a framed socket.
void abuse(Daemon &d, const std::string &path, std::mt19937 &rng) {
    const std::vector<std::vector<uint8_t>> attacks = {
        random_bytes(rng, 65536),
        {0xff, 0xff, 0xff, 0xff, 1, 2, 3},   // 4 GiB length
        {0x00, 0x10, 0x00, 0x01},            // 1 MiB + 1
        {0, 0, 0, 0},                        // length 0
        {0, 0, 0x10, 0, 1, 2, 3},            // truncated: 4096 announced, 3 sent
        {0, 0, 0, 3, 9, 9, 9},               // a frame too short for any header
    };
    for (const auto &a : attacks) {
        Peer p(d, path);
        p.raw(a);
        p.drain(d, 2);
    }
    // Many small random frames on one connection.
    Peer p(d, path);
    for (int i = 0; i < 2000; ++i) {
        p.frame(random_bytes(rng, 1 + rng() % 300));
        if (i % 32 == 0) {
            p.drain(d, 1);  // one thread: let the daemon read before the socket buffer fills
        }
    }
    p.drain(d, 4);
}

std::vector<uint8_t> eth_frame(uint8_t dst_last, const std::array<uint8_t, 6> &src) {
    std::vector<uint8_t> f(64, 0);
    f[0] = 0x52;
    f[1] = 0x54;
    f[5] = dst_last;
    std::copy(src.begin(), src.end(), f.begin() + 6);
    f[12] = 0x08;
    return f;
}

}  // namespace

TEST_CASE("robust: random bytes, bad lengths and floods on every socket end nothing", "[robust]") {
    Daemon d;
    std::mt19937 rng(7);
    Peer a(d, LinkServer::socket_path(d.dir, 1)), b(d, LinkServer::socket_path(d.dir, 2));
    d.spin();
    d.activate(1);
    d.activate(2);
    for (unsigned port : {3u, 4u}) {
        abuse(d, LinkServer::socket_path(d.dir, port), rng);
    }
    abuse(d, d.dir + "/eth.sock", rng);
    abuse(d, d.dir + "/ctl.sock", rng);
    CHECK(d.log.contains("frame length above 1 MiB; closing it"));

    // The other guests' traffic still flows: a packet from port 1 to port 2 ...
    b.drain(d, 2);
    b.frames();
    const Frame f = make_packet_frame(0x1234, ud_send(3, 256));
    a.frame(*f);
    CHECK_FALSE(b.drain(d));
    const auto got = b.frames();
    REQUIRE(got.size() == 1);
    CHECK(got[0] == *f);
    // ... Ethernet between two VMs ...
    Peer e1(d, d.dir + "/eth.sock"), e2(d, d.dir + "/eth.sock");
    d.spin();
    e2.frame(eth_frame(0x01, {0x52, 0x54, 0, 0, 0, 0x02}));
    e1.frame(eth_frame(0x02, {0x52, 0x54, 0, 0, 0, 0x01}));
    e2.drain(d);
    bool seen = false;
    for (const auto &fr : e2.frames()) {
        seen |= fr.size() == 64 && fr[11] == 0x01;
    }
    CHECK(seen);
    // ... and the control socket answers.
    Peer c(d, d.dir + "/ctl.sock");
    const std::string help = "help\n";
    c.raw(std::span(reinterpret_cast<const uint8_t *>(help.data()), help.size()));
    c.drain(d);
    CHECK(std::string(c.in.begin(), c.in.end()).find("ok\n") != std::string::npos);
}

TEST_CASE("robust: the MAC table of the management network is capped", "[robust][caps]") {
    Daemon d;
    Peer p(d, d.dir + "/eth.sock");
    for (uint32_t i = 0; i < EthHub::kMaxMacs + 100; ++i) {
        p.frame(eth_frame(0xff, {0x52, 0x54, 0x11, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8),
                                 static_cast<uint8_t>(i)}));
        if (i % 32 == 0) {
            d.spin(1);
        }
    }
    d.spin(200);
    CHECK(d.eth->macs() == EthHub::kMaxMacs);
    CHECK(d.eth->stats().macs_refused == 100);
    CHECK(d.log.contains("MAC table full"));
}

TEST_CASE("robust: an exception in a frame handler closes that connection only", "[robust]") {
    asio::io_context io;
    Log log;
    log.capture_in_memory();
    const std::string path =
        (std::filesystem::temp_directory_path() / ("hcasim-throw-" + std::to_string(::getpid()))).string();
    ::unlink(path.c_str());
    stream_protocol::acceptor acc(io, stream_protocol::endpoint(path));
    std::vector<std::shared_ptr<FramedConn>> conns;
    unsigned good = 0, closed = 0;
    std::function<void()> accept = [&] {
        acc.async_accept([&](boost::system::error_code ec, stream_protocol::socket s) {
            if (ec) {
                return;
            }
            auto c = std::make_shared<FramedConn>(
                std::move(s),
                [&](FramedConn &, Frame f) {
                    if ((*f)[0] == 0xee) {
                        throw std::runtime_error("handler bug");
                    }
                    ++good;
                },
                [&](FramedConn &) { ++closed; });
            c->set_log(&log, "test");
            c->start();
            conns.push_back(c);
            accept();
        });
    };
    accept();
    stream_protocol::socket x(io), y(io);
    x.connect(stream_protocol::endpoint(path));
    y.connect(stream_protocol::endpoint(path));
    const uint8_t bad[5] = {0, 0, 0, 1, 0xee}, ok[5] = {0, 0, 0, 1, 0x01};
    asio::write(x, asio::buffer(bad));
    asio::write(y, asio::buffer(ok));
    io.run_for(std::chrono::milliseconds(50));
    asio::write(y, asio::buffer(ok));
    io.run_for(std::chrono::milliseconds(50));
    CHECK(closed == 1);
    CHECK(good == 2);
    CHECK(log.contains("test #"));
    CHECK(log.contains("handler bug; closing it"));
    ::unlink(path.c_str());
}

TEST_CASE("robust: a handler that throws outside any connection does not end the loop", "[robust]") {
    asio::io_context io;
    Log log;
    log.capture_in_memory();
    bool after = false;
    asio::post(io, [] { throw std::runtime_error("timer bug"); });
    asio::post(io, [&] { after = true; });
    run_guarded(io, log);
    CHECK(after);
    CHECK(log.contains("a handler failed: timer bug; carrying on"));
}

TEST_CASE("robust: a log that cannot be written loses lines, not the daemon", "[robust]") {
    Log log("/dev/full");
    for (int i = 0; i < 2000; ++i) {
        CHECK_NOTHROW(log.warn("test", "line {} of a log on a full disk", i));
    }
    CHECK_NOTHROW(log.flush());
    CHECK(log.write_errors() > 0);
}
