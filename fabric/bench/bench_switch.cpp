// Forwarding rate of the InfiniBand switch, reported (not asserted): the
// same IbSwitch::receive() path the daemon uses, in process on a virtual
// clock, and end to end through the unix link sockets. Packets go as the
// HCA model sends them, without CRCs (iba::link::kNoCrcs), and, for
// comparison in the same run, with CRCs the switch checks.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "event_loop.h"
#include "frame.h"
#include "ib_fabric.h"
#include "link_port.h"
#include "switch.h"

using namespace fabric;
using Clock = std::chrono::steady_clock;

namespace {

class CountingSink : public PortSink {
  public:
    bool deliver(const Frame &f) override {
        ++frames;
        bytes += f->size();
        return true;
    }
    void link_state(bool) override {}
    uint64_t frames = 0, bytes = 0;
};

// A UD packet; crcs = false: as the HCA model sends it (frame flag
// kNoCrcs, see flags_for).
std::vector<uint8_t> ud(uint16_t dlid, uint16_t slid, size_t payload, bool grh = false, bool crcs = true) {
    iba::PacketSpec s;
    s.crcs = crcs;
    s.dlid = dlid;
    s.slid = slid;
    s.grh = grh;
    s.opcode = iba::kUd | iba::kSendOnly;
    s.dqpn = 0x48;
    uint8_t deth[8] = {};
    std::vector<uint8_t> p(payload, 0x5a);
    return iba::build(s, deth, p);
}
uint8_t flags_for(bool crcs) { return crcs ? 0 : iba::link::kNoCrcs; }

struct InProcess {
    ManualLoop loop;
    Log log{"/dev/null"};
    SwitchConfig cfg;
    std::unique_ptr<IbSwitch> sw;
    CountingSink sinks[5];
    InProcess() {
        cfg.num_ports = 4;
        sw = std::make_unique<IbSwitch>(loop, log, cfg);
        for (uint8_t k = 1; k <= 4; ++k) {
            sw->attach(k, &sinks[k]);
            sw->set_port_state(k, PortState::Armed);
            sw->set_port_state(k, PortState::Active);
            sw->fdb().set_lft_entry(static_cast<uint16_t>(k + 1), k);
        }
        sw->fdb().set_linear_top(10);
        ForwardingTables::PortSet ps;
        ps.set(1);
        ps.set(2);
        ps.set(3);
        ps.set(4);
        sw->fdb().set_mcast_ports(0xc000, ps);
    }
};

void row(const char *name, uint64_t pkts, uint64_t bytes, double secs) {
    fmt::print("{:<44} {:>10} {:>9.3f} {:>10.3f} {:>9.2f}\n", name, pkts, secs, pkts / secs / 1e6,
               bytes * 8 / secs / 1e9);
}

void run_in_process(const char *name, const std::vector<uint8_t> &pkt, uint64_t n, uint8_t port = 1,
                    Capture *cap = nullptr, uint8_t flags = 0) {
    InProcess ip;
    ip.sw->set_capture(cap);
    const Frame f = make_packet_frame(1, pkt, flags);
    const auto t0 = Clock::now();
    for (uint64_t i = 0; i < n; ++i) {
        ip.sw->receive(port, f);
    }
    ip.loop.run_all();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    row(name, n, n * pkt.size(), secs);
}

void run_sockets(size_t payload, uint64_t n, bool crcs) {
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("hcasim-bench-" + std::to_string(::getpid()))).string();
    boost::asio::io_context io;
    AsioLoop loop(io);
    Log log("/dev/null");
    FabricOptions o;
    o.sw.num_ports = 2;
    o.sm = false;
    IbFabric fab(loop, log, o);
    LinkServer links(io, fab.sw(), log, dir);
    namespace asio = boost::asio;
    using asio::local::stream_protocol;
    stream_protocol::socket a(io), b(io);
    a.connect(stream_protocol::endpoint(LinkServer::socket_path(dir, 1)));
    b.connect(stream_protocol::endpoint(LinkServer::socket_path(dir, 2)));
    io.run_for(std::chrono::milliseconds(50));
    IbSwitch &sw = fab.sw();
    for (uint8_t k = 1; k <= 2; ++k) {
        sw.set_port_state(k, PortState::Armed);
        sw.set_port_state(k, PortState::Active);
    }
    sw.fdb().set_lft_entry(3, 2);
    sw.fdb().set_linear_top(3);
    // One buffer of n framed packets, written by a thread; another thread
    // reads until it has seen them all (or a timeout).
    const auto pkt = ud(3, 2, payload, false, crcs);
    const Frame fr = make_packet_frame(7, pkt, flags_for(crcs));
    std::vector<uint8_t> burst;
    for (uint64_t i = 0; i < n; ++i) {
        uint8_t len[4];
        hca::store_be32(len, static_cast<uint32_t>(fr->size()));
        burst.insert(burst.end(), len, len + 4);
        burst.insert(burst.end(), fr->begin(), fr->end());
    }
    std::atomic<uint64_t> got{0};
    std::atomic<bool> stop{false};
    // The reader notes when it has everything: the main loop below only
    // looks every 10 ms, which would round the time up by as much.
    std::atomic<int64_t> done_ns{0};
    const uint64_t want_bytes = n * (fr->size() + 4) + 17;  // + the link-state frame
    const auto t0 = Clock::now();
    std::thread reader([&] {
        std::vector<uint8_t> buf(1 << 16);
        uint64_t total = 0;
        boost::system::error_code ec;
        while (total < want_bytes && !stop) {
            total += b.read_some(asio::buffer(buf), ec);
            if (ec) {
                break;
            }
        }
        done_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        got = total;
    });
    std::thread writer([&] { asio::write(a, asio::buffer(burst)); });
    while (got.load() == 0 && Clock::now() - t0 < std::chrono::seconds(30)) {
        io.run_for(std::chrono::milliseconds(10));
    }
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    if (done_ns.load() > 0) {
        secs = static_cast<double>(done_ns.load()) / 1e9;
    }
    stop = true;
    writer.join();
    boost::system::error_code ec;
    b.shutdown(asio::socket_base::shutdown_both, ec);
    reader.join();
    const uint64_t delivered = got >= 17 ? (got - 17) / (fr->size() + 4) : 0;
    row(fmt::format("unicast {} B through unix sockets{}", payload, crcs ? ", CRCs" : "").c_str(), delivered,
        delivered * pkt.size(), secs);
    if (delivered < n) {
        fmt::print("  ({} of {} delivered; the rest were dropped by a full send queue)\n", delivered, n);
    }
    std::filesystem::remove_all(dir);
}

}  // namespace

int main(int argc, char **argv) {
    const uint64_t n = argc > 1 ? std::stoull(argv[1]) : 1000000;
    fmt::print("{:<44} {:>10} {:>9} {:>10} {:>9}\n", "scenario", "packets", "seconds", "Mpkt/s", "Gbit/s");
    run_in_process("unicast 64 B (in process)", ud(3, 2, 64, false, false), n, 1, nullptr, flags_for(false));
    run_in_process("unicast 64 B (in process), CRCs", ud(3, 2, 64), n);
    run_in_process("unicast 1024 B (in process)", ud(3, 2, 1024, false, false), n / 2, 1, nullptr, flags_for(false));
    run_in_process("unicast 4096 B (in process)", ud(3, 2, 4096, false, false), n / 4, 1, nullptr, flags_for(false));
    run_in_process("unicast 4096 B (in process), CRCs", ud(3, 2, 4096), n / 4);
    run_in_process("multicast 256 B to 3 ports (in process)", ud(0xc000, 2, 256, true), n / 2);
    run_in_process("bad VCRC, dropped (in process)", [] {
        auto p = ud(3, 2, 64);
        p.back() ^= 1;
        return p;
    }(), n);
    {
        // A directed-route SMP through the switch: hop pointer and return
        // path change, so ICRC and VCRC are computed again.
        Mad m;
        const std::array<uint8_t, 3> path{0, 1, 3};
        init_dr_smp(m, mad::kGet, 1, mad::kAttrNodeInfo, 0, path);
        m[mad::smp::kHopPtr] = 1;
        MadAddress to;
        to.slid = iba::kPermissiveLid;
        to.dlid = iba::kPermissiveLid;
        run_in_process("DR SMP through the switch (in process)", mad_packet(to, m), n / 2, 2);
    }
    {
        const std::string path = (std::filesystem::temp_directory_path() / "hcasim-bench.pcapng").string();
        PcapngWriter cap(path, 1ull << 40);
        run_in_process("unicast 64 B with pcapng capture (in process)", ud(3, 2, 64, false, false), n / 2, 1, &cap,
                       flags_for(false));
        std::filesystem::remove(path);
    }
    for (const bool crcs : {false, true}) {
        run_sockets(64, n / 4, crcs);
        run_sockets(4096, n / 20, crcs);
    }
    return 0;
}
