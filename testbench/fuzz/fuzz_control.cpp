// libFuzzer target: the fabric's control language (fabric/src/control.cpp),
// the interpreter behind `hcasim-fabric`'s control socket and the guests'
// fabric_ctl.  Each input is a sequence of lines: either its own bytes up
// to a newline, or a command assembled from the language's words with
// arguments the input chooses (port numbers, "all", percentages in any
// notation, delays, scopes, partition sides).  Between lines a CA sends a packet to another
// so the link states and faults the commands set act on traffic, and the
// clock moves on (delay lines, SM sweeps).
#include <cstdint>
#include <memory>
#include <string>

#include "control.h"
#include "fake_ca.h"
#include "fuzz_input.h"
#include "ib_fabric.h"
#include "mad_util.h"

using namespace fabric;
using hcafuzz::Input;

namespace {

struct World {
    ManualLoop loop;
    Log log{"/dev/null"};
    std::unique_ptr<IbFabric> fabric;
    std::vector<std::unique_ptr<test::FakeCa>> cas;
    std::unique_ptr<ControlCommands> cmds;
    World() {
        log.set_level(Log::Level::Warn);
        FabricOptions o;
        o.sw.num_ports = 4;
        fabric = std::make_unique<IbFabric>(loop, log, o);
        for (uint8_t k = 1; k <= 3; ++k) {
            test::FakeCa::Options co;
            co.node_guid = 0x0002c90300c00000ull + k * 0x10;
            co.port_guid = co.node_guid + 1;
            co.record = false;
            cas.push_back(std::make_unique<test::FakeCa>(fabric->sw(), loop, k, co));
            cas.back()->connect();
        }
        fabric->start();
        loop.advance(200000);
        cmds = std::make_unique<ControlCommands>(fabric.get(), [] { return std::string("eth: frames=0\n"); });
    }
};

// Commands change the fabric for good (links down, loss): each input ends
// by undoing them, and the fabric is built again every 1024 inputs.
World &world() {
    static std::unique_ptr<World> w;
    static unsigned inputs = 0;
    if (!w || ++inputs % 1024 == 0) {
        w.reset();
        w = std::make_unique<World>();
    }
    return *w;
}

void undo(World &w) {
    for (const char *c : {"link all up", "drop all 0", "corrupt all 0", "delay all 0", "duplicate all 0",
                          "reorder all 0", "partition clear"}) {
        w.cmds->execute(c);
    }
    if (!w.fabric->sm()->running()) {
        w.cmds->execute("sm start");
    }
    w.loop.advance(200000);
}

constexpr const char *kWords[] = {"ports", "link",  "drop",   "corrupt", "delay",     "duplicate", "reorder",
                                  "sm",    "groups", "stats", "help",    "partition", ""};
constexpr const char *kArgs[] = {"all",  "up",      "down", "restart", "status", "requests",   "0",   "1",
                                 "100",  "1e2",     "nan",  "-0",      "50.5",   "4294967296", "0x10", "inf",
                                 "3",    "4",       "5",    "1000000", "flap",   "retrain",    "stop", "start",
                                 "rereg", "clear",  "off",  "1,2",     "2,3,",   "1,1",
                                 "lid",  "pkeys",   "0x8001,0xffff", "ffff"};

std::string line(Input &in) {
    std::string s;
    if (in.u8() < 40) {
        for (uint8_t c = in.u8(); c != '\n' && !in.empty(); c = in.u8()) {
            s.push_back(static_cast<char>(c));
        }
        return s;
    }
    s = in.pick(kWords);
    const unsigned n = in.u8() % 4;
    for (unsigned i = 0; i < n; ++i) {
        s += in.u8() < 200 ? " " : "\t ";
        s += in.u8() < 220 ? std::string(in.pick(kArgs)) : std::to_string(in.u32());
    }
    return s;
}

// A UD SEND from one CA to another (LIDs as the SM assigned them).
void traffic(World &w, Input &in) {
    const unsigned a = in.u8() % 3;
    const unsigned b = (a + 1 + in.u8() % 2) % 3;
    MadAddress to;
    to.slid = w.cas[a]->lid();
    to.dlid = w.cas[b]->lid();
    to.dst_qp = 1;
    to.src_qp = 1;
    to.qkey = mad::kQp1Qkey;
    Mad m{};
    m[mad::kBaseVersion] = 1;
    m[mad::kMgmtClass] = 0x09;  // a vendor class: delivered, not answered
    m[mad::kClassVersion] = 1;
    m[mad::kMethod] = 0x01;
    w.cas[a]->send_raw(mad_packet(to, m), in.u16());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    World &w = world();
    Input in(data, size);
    for (int steps = 0; !in.empty() && steps < 16; ++steps) {
        const std::string reply = w.cmds->execute(line(in));
        if (reply.empty() || reply.back() != '\n') {
            __builtin_trap();  // every reply ends with "ok\n" or "error ...\n"
        }
        traffic(w, in);
        w.loop.advance(uint64_t{in.u8()} * 1000);
    }
    undo(w);
    return 0;
}
