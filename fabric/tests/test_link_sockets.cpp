// The devices' link sockets: link-state frames, hellos, one client per
// port, packets between two clients through real unix sockets.
#include <catch2/catch.hpp>

#include <filesystem>

#include "fixture.h"
#include "link_port.h"

using namespace fabric;
using namespace fabric::test;
namespace asio = boost::asio;
using asio::local::stream_protocol;

namespace {

struct SocketFabric {
    asio::io_context io;
    AsioLoop loop{io};
    Log log;
    std::string dir;
    std::unique_ptr<IbFabric> fabric;
    std::unique_ptr<LinkServer> links;

    SocketFabric() {
        log.capture_in_memory();
        dir = (std::filesystem::temp_directory_path() / ("hcasim-links-" + std::to_string(::getpid()))).string();
        fabric = std::make_unique<IbFabric>(loop, log, test_options(2, false));
        links = std::make_unique<LinkServer>(io, fabric->sw(), log, dir);
        fabric->start();
    }
    ~SocketFabric() {
        links.reset();
        fabric.reset();
        std::filesystem::remove_all(dir);
    }
    void spin(int ms = 20) { io.run_for(std::chrono::milliseconds(ms)); }
};

struct Client {
    stream_protocol::socket s;
    std::vector<uint8_t> in;
    Client(SocketFabric &f, unsigned port) : s(f.io) {
        s.connect(stream_protocol::endpoint(LinkServer::socket_path(f.dir, port)));
    }
    void send(const Frame &fr) {
        uint8_t len[4];
        hca::store_be32(len, static_cast<uint32_t>(fr->size()));
        asio::write(s, std::array<asio::const_buffer, 2>{asio::buffer(len), asio::buffer(*fr)});
    }
    // Frames received so far (spinning the fabric's loop meanwhile).
    std::vector<std::vector<uint8_t>> frames(SocketFabric &f, size_t want, bool *eof = nullptr) {
        std::vector<std::vector<uint8_t>> out;
        for (int i = 0; i < 100 && out.size() < want; ++i) {
            f.spin(5);
            boost::system::error_code ec;
            while (s.available(ec) && !ec) {
                uint8_t buf[8192];
                const size_t n = s.read_some(asio::buffer(buf), ec);
                in.insert(in.end(), buf, buf + n);
            }
            if (eof) {
                // A closed peer: readable with zero bytes.
                s.non_blocking(true);
                uint8_t b;
                const size_t n = s.read_some(asio::buffer(&b, 1), ec);
                s.non_blocking(false);
                if (ec == asio::error::eof) {
                    *eof = true;
                    return out;
                }
                if (n == 1) {
                    in.push_back(b);
                }
            }
            while (in.size() >= 4) {
                const uint32_t len = hca::load_be32(in.data());
                if (in.size() < 4 + len) {
                    break;
                }
                out.emplace_back(in.begin() + 4, in.begin() + 4 + len);
                in.erase(in.begin(), in.begin() + 4 + len);
            }
        }
        return out;
    }
};

// Clients a on port 1 and b on port 2, both Active, LID 3 routed to port 2.
IbSwitch &cable_two(SocketFabric &f, Client &a, Client &b) {
    REQUIRE(a.frames(f, 1).size() == 1);
    REQUIRE(b.frames(f, 1).size() == 1);
    IbSwitch &sw = f.fabric->sw();
    sw.fdb().set_lft_entry(3, 2);
    sw.fdb().set_linear_top(3);
    for (uint8_t p : {1, 2}) {
        sw.set_port_state(p, PortState::Armed);
        sw.set_port_state(p, PortState::Active);
    }
    return sw;
}

}  // namespace

TEST_CASE("link sockets: link state, hello, one client per port, disconnect", "[links]") {
    SocketFabric f;
    CHECK(std::filesystem::exists(LinkServer::socket_path(f.dir, 1)));
    CHECK(std::filesystem::exists(LinkServer::socket_path(f.dir, 2)));
    Client c(f, 1);
    auto fr = c.frames(f, 1);
    REQUIRE(fr.size() == 1);
    REQUIRE(fr[0].size() == 13);
    CHECK(fr[0][0] == iba::link::kLinkState);
    CHECK(fr[0][12] == 1);
    CHECK(f.fabric->sw().port(1).phys() == PhysState::LinkUp);
    CHECK(f.fabric->sw().port(1).state == PortState::Init);
    c.send(make_hello_frame(0x1111, 0x2222, 1));
    f.spin();
    CHECK(f.fabric->sw().port(1).hello);
    CHECK(f.fabric->sw().port(1).peer_port_guid == 0x2222);
    CHECK(f.log.contains("hello node_guid=0x0000000000001111"));
    // A second client on the same port is closed at once.
    Client d(f, 1);
    bool eof = false;
    d.frames(f, 1, &eof);
    CHECK(eof);
    CHECK(f.links->refused() == 1);
    // `link 1 down` through the switch: a link-state frame (down).
    f.fabric->sw().set_admin(1, false);
    fr = c.frames(f, 1);
    REQUIRE(fr.size() == 1);
    CHECK(fr[0][0] == iba::link::kLinkState);
    CHECK(fr[0][12] == 0);
    f.fabric->sw().set_admin(1, true);
    fr = c.frames(f, 1);
    REQUIRE(fr.size() == 1);
    CHECK(fr[0][12] == 1);
    // Disconnect: the port goes down.
    c.s.close();
    f.spin(50);
    CHECK(f.fabric->sw().port(1).phys() == PhysState::Polling);
    CHECK(f.fabric->sw().port(1).state == PortState::Down);
    // And a new client can connect.
    Client e(f, 1);
    CHECK(e.frames(f, 1).size() == 1);
}

TEST_CASE("link sockets: a packet from one client to another", "[links]") {
    SocketFabric f;
    Client a(f, 1), b(f, 2);
    cable_two(f, a, b);
    const auto pkt = ud_send(3, 1500);
    a.send(make_packet_frame(0xfeedface, pkt));
    const auto got = b.frames(f, 1);
    REQUIRE(got.size() == 1);
    LinkFrameView lf;
    REQUIRE(parse_link_frame(got[0], lf));
    CHECK(lf.type == iba::link::kPacket);
    CHECK(lf.packet_id == 0xfeedface);
    CHECK(std::vector<uint8_t>(lf.body.begin(), lf.body.end()) == pkt);
    // Junk frames are counted and ignored.
    a.send(std::make_shared<const std::vector<uint8_t>>(std::vector<uint8_t>{9, 9, 9}));
    a.send(std::make_shared<const std::vector<uint8_t>>(std::vector<uint8_t>(12, 0x77)));
    f.spin();
    CHECK(f.links->bad_frames() == 2);
}

namespace {

// A device that writes frames without blocking (the fabric runs on this
// thread) and counts the packet frames it reads.
struct Pushing {
    stream_protocol::socket &s;
    std::vector<uint8_t> wire;  // one length-prefixed frame
    size_t off = 0;             // bytes of the current copy written
    uint64_t sent = 0;          // whole frames written
    // Writes while the socket takes it; bytes written.
    size_t push(bool more = true) {
        s.non_blocking(true);
        size_t n = 0;
        while (more || off != 0) {
            boost::system::error_code ec;
            const size_t k = s.write_some(asio::buffer(wire.data() + off, wire.size() - off), ec);
            if (ec) {
                break;
            }
            n += k;
            off += k;
            if (off == wire.size()) {
                off = 0;
                ++sent;
            }
        }
        return n;
    }
};

size_t drain_packets(stream_protocol::socket &s, std::vector<uint8_t> &in) {
    s.non_blocking(true);
    size_t packets = 0;
    uint8_t buf[65536];
    boost::system::error_code ec;
    for (;;) {
        const size_t n = s.read_some(asio::buffer(buf), ec);
        if (ec) {
            break;
        }
        in.insert(in.end(), buf, buf + n);
    }
    size_t at = 0;
    while (in.size() - at >= 4) {
        const uint32_t len = hca::load_be32(in.data() + at);
        if (in.size() - at < 4 + len) {
            break;
        }
        packets += in[at + 4] == iba::link::kPacket;
        at += 4 + len;
    }
    in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(at));
    return packets;
}

}  // namespace

TEST_CASE("link sockets: back-pressure holds a fast sender instead of dropping; a stuck peer is dropped after the "
          "HOQ lifetime", "[links][flow]") {
    SocketFabric f;
    Client a(f, 1), b(f, 2);
    IbSwitch &sw = cable_two(f, a, b);
    const auto pkt = ud_send(3, 1500);
    const Frame fr = make_packet_frame(1, pkt);
    Pushing tx{a.s};
    tx.wire.assign(4 + fr->size(), 0);
    hca::store_be32(tx.wire.data(), static_cast<uint32_t>(fr->size()));
    std::copy(fr->begin(), fr->end(), tx.wire.begin() + 4);

    // b reads nothing: a is held once b's queue is congested, so a's
    // socket fills and a stops, far below what the fabric would drop.
    int stalled = 0;
    for (int round = 0; round < 400 && stalled < 10; ++round) {
        stalled = tx.push() ? 0 : stalled + 1;
        f.spin(2);
    }
    INFO("frames sent " << tx.sent);
    CHECK(stalled >= 10);
    CHECK(f.links->holds() >= 1);
    CHECK(sw.total_drops() == 0);
    CHECK(sw.port(2).ctr.xmit_wait >= 1);
    CHECK(tx.sent < FramedConn::kMaxQueued);

    // b reads again: every frame a wrote arrives, none is lost.
    std::vector<uint8_t> in;
    uint64_t got = 0;
    for (int round = 0; round < 2000 && (got < tx.sent || tx.off != 0); ++round) {
        tx.push(false);  // finish a frame cut short
        f.spin(1);
        got += drain_packets(b.s, in);
    }
    CHECK(got == tx.sent);
    CHECK(sw.total_drops() == 0);
    CHECK(sw.port(2).ctr.xmit_discards == 0);

    // b stops reading for good: after the HOQ lifetime a is read again and
    // what is sent to b is dropped (counted), so a stuck peer holds nobody.
    stalled = 0;
    for (int round = 0; round < 400 && stalled < 10; ++round) {
        stalled = tx.push() ? 0 : stalled + 1;
        f.spin(2);
    }
    REQUIRE(stalled >= 10);
    const uint64_t before = tx.sent;
    const auto start = std::chrono::steady_clock::now();
    const auto until = start + 2 * FramedConn::kHoqLifetime + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until && !(sw.drops(Drop::QueueFull) > 0 && tx.sent > before + 100)) {
        tx.push();
        f.spin(5);
    }
    // (the lifetime counts from b's last progress, a little before start)
    CHECK(std::chrono::steady_clock::now() - start >= FramedConn::kHoqLifetime / 2);
    CHECK(tx.sent > before + 100);
    CHECK(sw.drops(Drop::QueueFull) > 0);
    CHECK(sw.port(2).ctr.xmit_discards == sw.drops(Drop::QueueFull));
    CHECK(f.log.contains("head-of-queue lifetime"));
}
