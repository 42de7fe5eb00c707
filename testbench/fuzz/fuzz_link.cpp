// libFuzzer target: the device<->fabric link.  The input is a byte stream
// as a link socket carries it — frames of a 4-byte big-endian length and
// a 12-byte header {type, flags, reserved, packet id} + body — with frames
// either raw or assembled from choices (hello with GUIDs and port number,
// link state up/down, packets, unknown types, lengths off by a little or a
// lot).  The same stream goes
//  * byte for byte into the fabric daemon's link socket (fabric/src:
//    FramedConn's length framing, frame.cpp's header parser, the link
//    server's hello handling and the switch behind it), over a real unix
//    socket of a LinkServer, connection by connection;
//  * in pieces of varying size through the link library's stream reader
//    (iba::link::StreamReader, what hca_model_port_rx() runs for QEMU)
//    into the model's port (Device::port_rx: packet, link state and
//    unknown frames), until a bad length breaks the stream.
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "fuzz_input.h"
#include "fuzz_world.h"
#include "iba/link.h"
#include "ib_fabric.h"
#include "link_port.h"

using hcafuzz::Input;
namespace asio = boost::asio;
using asio::local::stream_protocol;

namespace {

struct FabricSide {
    asio::io_context io;
    fabric::AsioLoop loop{io};
    fabric::Log log{"/dev/null"};
    std::string dir;
    std::unique_ptr<fabric::IbFabric> fabric;
    std::unique_ptr<fabric::LinkServer> links;
    FabricSide() {
        std::signal(SIGPIPE, SIG_IGN);  // the fabric may close first
        log.set_level(fabric::Log::Level::Warn);
        dir = (std::filesystem::temp_directory_path() / ("hcasim-fuzz-link-" + std::to_string(::getpid()))).string();
        fabric::FabricOptions o;
        o.sw.num_ports = 2;
        o.sm = false;  // no real-time SM timers: the same input does the same
        fabric = std::make_unique<fabric::IbFabric>(loop, log, o);
        links = std::make_unique<fabric::LinkServer>(io, fabric->sw(), log, dir);
        fabric->start();
    }
    ~FabricSide() {
        links.reset();
        fabric.reset();
        std::filesystem::remove_all(dir);
    }
    // One connection: the whole stream, then EOF; runs the fabric until it
    // has read everything and closed its end.
    void feed(const std::vector<uint8_t> &stream) {
        stream_protocol::socket s(io);
        s.connect(stream_protocol::endpoint(fabric::LinkServer::socket_path(dir, 1)));
        boost::system::error_code ec;
        s.non_blocking(true);
        size_t off = 0;
        for (int i = 0; i < 10000 && off < stream.size(); ++i) {
            off += s.write_some(asio::buffer(stream.data() + off, stream.size() - off), ec);
            io.poll();
            io.restart();
        }
        s.shutdown(stream_protocol::socket::shutdown_send, ec);
        // Until the server closed its end (EOF here after its frames).
        uint8_t buf[4096];
        for (int i = 0; i < 10000; ++i) {
            io.poll();
            io.restart();
            const size_t n = s.read_some(asio::buffer(buf), ec);
            if (ec == asio::error::eof || (ec && ec != asio::error::would_block)) {
                break;
            }
            (void)n;
        }
        s.close(ec);
        io.poll();
        io.restart();
    }
};

struct ModelSide {
    hcatest::Bench b;
    hcatest::Driver d{b};
    ModelSide() { hcafuzz::fresh_device(b, d); }
};

struct World {
    FabricSide fab;
    ModelSide model;
};

World &world() {
    static World *w = new World;
    return *w;
}

// One frame (without its length prefix) chosen by the input.
std::vector<uint8_t> frame(Input &in) {
    const uint8_t kind = in.u8();
    if (kind < 50) {
        return in.vec(in.u8() < 240 ? in.u8() % 40 : in.u16() % 2048);
    }
    std::vector<uint8_t> f(iba::link::kHeader, 0);
    static constexpr uint8_t kTypes[] = {iba::link::kPacket, iba::link::kHello, iba::link::kLinkState, 0, 4, 0xff};
    f[0] = in.pick(kTypes);
    f[1] = in.u8() < 230 ? 0 : in.u8();
    hca::store_be64(f.data() + 4, in.u8() < 200 ? in.u8() : in.u64());
    std::vector<uint8_t> body;
    switch (f[0]) {
    case iba::link::kHello:
        body.resize(in.u8() < 220 ? 17 : in.u8() % 24);
        for (size_t i = 0; i < body.size(); ++i) {
            body[i] = i < 16 && in.flag() ? static_cast<uint8_t>(0x02 + i) : in.u8();
        }
        break;
    case iba::link::kLinkState: body.assign(in.u8() < 230 ? 1 : in.u8() % 4, in.u8() & 1); break;
    default: {
        // A packet: plausible headers with right CRCs, or bytes.
        iba::PacketSpec s;
        s.dlid = in.u8() < 200 ? 3 : in.u16();
        s.slid = in.u16();
        s.opcode = static_cast<uint8_t>(iba::kUd | iba::kSendOnly);
        s.dqpn = in.u8() < 128 ? 1 : in.u32() & 0xffffff;
        s.vl = in.u8() & 15;
        uint8_t deth[8] = {};
        hca::store_be32(deth, in.flag() ? 0x80010000 : in.u32());
        body = in.u8() < 200 ? iba::build(s, {deth, 8}, in.vec(in.u8())) : in.vec(in.u8());
        hcafuzz::patch(in, body, 2);
        break;
    }
    }
    f.insert(f.end(), body.begin(), body.end());
    return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    World &w = world();
    if (hcafuzz::host_used(w.model.b.host) > (40u << 20)) {
        hcafuzz::fresh_device(w.model.b, w.model.d);
    }
    w.model.b.dev.port_link(1, true);
    Input in(data, size);
    std::vector<uint8_t> stream;
    for (int n = 0; !in.empty() && n < 32; ++n) {
        std::vector<uint8_t> f = frame(in);
        // The length prefix: right, or off by a little, or anything.
        const uint8_t how = in.u8();
        uint32_t len = static_cast<uint32_t>(f.size());
        if (how > 240) {
            len = how > 250 ? in.u32() : len + (how & 7) - 3;
        }
        uint8_t pre[4];
        hca::store_be32(pre, len);
        stream.insert(stream.end(), pre, pre + 4);
        stream.insert(stream.end(), f.begin(), f.end());
    }
    // The model reads the stream as QEMU hands it over: in pieces whose
    // sizes come from the stream itself.
    iba::link::StreamReader reader;
    for (size_t at = 0; at < stream.size();) {
        const size_t n = std::min<size_t>(stream.size() - at, 1 + stream[at] % 61 * (stream[at] & 0x80 ? 67 : 1));
        const bool ok = reader.feed({stream.data() + at, n}, [&](std::span<const uint8_t> f) {
            w.model.b.dev.port_rx(1, f.data(), f.size());
            w.model.b.pump();
        });
        if (!ok) {
            break;
        }
        at += n;
    }
    w.model.b.host.tx.clear();
    w.fab.feed(stream);
    return 0;
}
