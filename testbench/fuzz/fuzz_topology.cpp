// libFuzzer target: the fabric's topology files (fabric/src/topology.cpp)
// and the fabrics they describe.  Each input is either its own bytes as a
// file (when it starts with a printable character), or a file assembled from the format's words with names, port
// numbers and options the input chooses (switch links to itself, a port
// used twice, out-of-range ports and GUIDs).  A file that parses is built
// (in-process switches and inter-switch links; `remote` lines need
// sockets and are not opened here), a CA on its first node port sends
// directed-route SMPs along paths the input chooses and packets to LIDs the
// input chooses, and the clock runs: every drain, hold and resume of the
// links runs under ASan/UBSan.
#include <cstdint>
#include <memory>
#include <string>

#include "fake_ca.h"
#include "fuzz_input.h"
#include "ib_fabric.h"
#include "topology.h"

using namespace fabric;
using hcafuzz::Input;

namespace {

constexpr const char *kNames[] = {"a", "b", "c", "leaf0", "spine", "", "a:b", "x"};

std::string assembled(Input &in) {
    std::string s;
    const unsigned lines = 1 + in.u8() % 16;
    for (unsigned i = 0; i < lines && !in.empty(); ++i) {
        auto port = [&] { return fmt::format("{}:{}", in.pick(kNames), in.u8() % 10); };
        switch (in.u8() % 6) {
        case 0:
        case 1:
            s += fmt::format("switch {} ports={}{}\n", in.pick(kNames), in.u8() % 10,
                             in.flag() ? fmt::format(" guid={:#x}", in.u64()) : "");
            break;
        case 2:
            s += fmt::format("link {} {}\n", port(), port());
            break;
        case 3:
            s += fmt::format("remote {} {} 127.0.0.1:{}\n", port(), in.flag() ? "listen" : "connect", in.u16());
            break;
        case 4:
            s += fmt::format("node {}\n", port());
            break;
        default:
            s += fmt::format("# {}\n", in.u8());
            break;
        }
    }
    return s;
}

void exercise(const Topology &t, Input &in) {
    if (t.nodes.empty() || t.switches.size() > 8) {
        return;
    }
    ManualLoop loop;
    Log log{"/dev/null"};
    log.set_level(Log::Level::Warn);
    FabricOptions o;
    o.topology = t;
    o.sm = in.flag();
    IbFabric fab(loop, log, o);
    test::FakeCa::Options co;
    co.node_guid = 0x0002c90300c00010ull;
    co.port_guid = co.node_guid + 1;
    co.record = false;
    test::FakeCa ca(fab.sw(t.nodes[0].sw), loop, t.nodes[0].port, co);
    ca.connect();
    fab.start();
    loop.advance(100000);
    for (int i = 0; i < 8 && !in.empty(); ++i) {
        if (in.flag()) {
            std::vector<uint8_t> path(1 + in.u8() % 8);
            for (size_t h = 1; h < path.size(); ++h) {
                path[h] = in.u8() % 10;
            }
            ca.send_dr_smp(path, mad::kGet, in.flag() ? mad::kAttrNodeInfo : mad::kAttrPortInfo, in.u8() % 10);
        } else {
            ca.send_ud(in.u16(), 1, 0, in.u8() * 16u);
        }
        loop.advance(uint64_t{in.u8()} * 1000);
    }
    loop.advance(1000000);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // Text (a first byte that is printable) is the file itself; anything
    // else chooses a file made of the format's words.
    Input in(data, size);
    std::string text;
    if (size && data[0] >= 0x20 && data[0] < 0x7f) {
        text.assign(reinterpret_cast<const char *>(data), size);
    } else {
        in.u8();
        text = assembled(in);
    }
    std::string err;
    const auto t = parse_topology(text, err);
    if (!t && err.empty()) {
        __builtin_trap();  // a refused file always says why
    }
    if (t) {
        exercise(*t, in);
    }
    return 0;
}
