// hcasim-fabric: the daemon the VMs of one run connect to: the management
// Ethernet hub and the InfiniBand switch (with its subnet manager and SA).
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include "asio.h"
#include <fmt/format.h>

#include "control.h"
#include "eth_hub.h"
#include "event_loop.h"
#include "ib_fabric.h"
#include "link_port.h"
#include "log.h"

namespace {

// GUIDs are given in hex (0x...) or decimal.
bool parse_u64(const std::string &s, uint64_t &out) {
    try {
        size_t pos = 0;
        out = std::stoull(s, &pos, 0);
        return pos == s.size();
    } catch (const std::exception &) {
        return false;
    }
}

// The command line.
struct Args {
    std::string eth_socket, ready_file, ib_dir, control_socket, capture, log_file, rate = "4xQDR";
    std::string switch_guid = "0x0002c90300ffff00";
    std::string topology;
    unsigned ib_ports = 8, mtu = 4096, ipoib_mtu = 2048;
    uint64_t seed = 1, capture_max = 512ull << 20;
    double drop = 0, corrupt = 0;
    uint32_t delay_us = 0;
    uint32_t sm_settle_ms = 1000;
    unsigned lmc = 0;
    bool no_sm = false;
};

void add_options(CLI::App &app, Args &a) {
    app.add_option("--eth-socket", a.eth_socket, "Unix socket for the VMs' management virtio-net (-netdev stream)");
    app.add_option("--ready-file", a.ready_file, "File created once every socket listens");
    app.add_option("--ib-socket-dir", a.ib_dir, "Directory of the InfiniBand link sockets port1.sock ... portN.sock");
    app.add_option("--ib-ports", a.ib_ports, "Number of external switch ports")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    app.add_option("--topology", a.topology,
                   "Topology file: several switches, inter-switch links (also to other daemons over TCP), and "
                   "where each VM is cabled (docs/FABRIC.md)")
        ->check(CLI::ExistingFile);
    app.add_option("--control-socket", a.control_socket, "Unix socket of the line-based control interface");
    app.add_option("--switch-guid", a.switch_guid, "Node GUID of the switch")->capture_default_str();
    app.add_option("--mtu", a.mtu, "Link MTU: 256, 512, 1024, 2048 or 4096")
        ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}))
        ->capture_default_str();
    app.add_option("--ipoib-mtu", a.ipoib_mtu,
                   "MTU of the IPoIB broadcast groups the built-in SM creates (opensm's partitions.conf mtu=): "
                   "ib0's datagram MTU is 4 bytes less; at most --mtu")
        ->check(CLI::IsMember({256, 512, 1024, 2048, 4096}))
        ->capture_default_str();
    app.add_option("--rate", a.rate, "Link width and speed reported in PortInfo: 1x|4x|8x|12x with SDR|DDR|QDR")
        ->capture_default_str();
    app.add_flag("--no-sm", a.no_sm, "No built-in SM/SA (an opensm in a guest manages the fabric)");
    app.add_option("--drop", a.drop, "Percent of packets lost on every link")->check(CLI::Range(0.0, 100.0));
    app.add_option("--corrupt", a.corrupt, "Percent of packets with a flipped bit on every link")
        ->check(CLI::Range(0.0, 100.0));
    app.add_option("--delay-us", a.delay_us, "Delay of packets towards every device, microseconds")
        ->check(CLI::Range(0u, 10000000u));
    app.add_option("--seed", a.seed, "Seed of the fault injection")->capture_default_str();
    app.add_option("--capture", a.capture, "pcapng file of every packet entering the switch (ERF InfiniBand)");
    app.add_option("--capture-max-bytes", a.capture_max, "Size limit of the capture file")->capture_default_str();
    app.add_option("--log", a.log_file, "Log file (default: stdout)");
    app.add_option("--lmc", a.lmc, "LID Mask Control the built-in SM gives CA ports: 2^LMC LIDs each, on "
                                   "different paths where a topology has several")
        ->check(CLI::Range(0, 4))
        ->capture_default_str();
    app.add_option("--sm-settle-ms", a.sm_settle_ms,
                   "How long the SM waits before configuring a newly found CA port (0: at once)")
        ->check(CLI::Range(0, 60000))
        ->capture_default_str();
}

// The fabric's options from the command line; false (with a message) if
// a value does not parse.
bool fabric_options(const Args &a, fabric::FabricOptions &opt) {
    if (!parse_u64(a.switch_guid, opt.sw.node_guid)) {
        fmt::print(stderr, "hcasim-fabric: bad --switch-guid '{}'\n", a.switch_guid);
        return false;
    }
    const auto r = fabric::parse_link_rate(a.rate);
    if (!r) {
        fmt::print(stderr, "hcasim-fabric: bad --rate '{}' (e.g. 4xQDR, 1xSDR, 12xDDR)\n", a.rate);
        return false;
    }
    opt.sw.rate = *r;
    opt.sw.mtu = *fabric::mtu_code(a.mtu);
    opt.sa_cfg.ipoib_mtu = *fabric::mtu_code(a.ipoib_mtu);
    opt.sw.num_ports = static_cast<uint8_t>(a.ib_ports);
    opt.sw.seed = a.seed;
    opt.sm = !a.no_sm;
    opt.capture = a.capture;
    opt.capture_max_bytes = a.capture_max;
    opt.drop_pct = a.drop;
    opt.corrupt_pct = a.corrupt;
    opt.delay_us = a.delay_us;
    opt.sm_cfg.new_port_settle_us = a.sm_settle_ms * 1000;
    opt.sm_cfg.lmc = static_cast<uint8_t>(a.lmc);
    if (!a.topology.empty()) {
        std::ifstream f(a.topology);
        std::stringstream text;
        text << f.rdbuf();
        std::string err;
        opt.topology = fabric::parse_topology(text.str(), err);
        if (!f || !opt.topology) {
            fmt::print(stderr, "hcasim-fabric: {}: {}\n", a.topology, f ? err : "cannot read it");
            return false;
        }
    }
    return true;
}

// What the daemon serves, for its first log line.
std::string listening_text(const Args &a, const fabric::FabricOptions &opt, bool eth, bool ib, bool control) {
    std::string what;
    if (eth) {
        what += " eth=" + a.eth_socket;
    }
    if (ib && opt.topology) {
        what += fmt::format(" ib={} ({} switches, {} node ports, {} remote links{})", a.ib_dir,
                            opt.topology->switches.size(), opt.topology->nodes.size(), opt.topology->remotes.size(),
                            a.no_sm ? ", no SM" : "");
    } else if (ib) {
        what += fmt::format(" ib={} ({} ports{})", a.ib_dir, a.ib_ports, a.no_sm ? ", no SM" : "");
    }
    if (control) {
        what += " control=" + a.control_socket;
    }
    return what;
}

// The devices' link sockets, and the topology's links to other daemons.
std::unique_ptr<fabric::LinkServer> make_links(boost::asio::io_context &io, fabric::IbFabric &ib, fabric::Log &log,
                                               const std::string &dir,
                                               std::vector<std::unique_ptr<fabric::RemoteLink>> &remotes) {
    if (!ib.options().topology) {
        return std::make_unique<fabric::LinkServer>(io, ib.sw(), log, dir);
    }
    // The n-th node line's port: port<n>.sock.
    const fabric::Topology &t = ib.topology();
    std::vector<fabric::LinkServer::Attachment> at;
    for (size_t n = 0; n < t.nodes.size(); ++n) {
        at.push_back({&ib.sw(t.nodes[n].sw), t.nodes[n].port,
                      fabric::LinkServer::socket_path(dir, static_cast<unsigned>(n + 1))});
    }
    auto links = std::make_unique<fabric::LinkServer>(io, log, at);
    for (const auto &r : t.remotes) {
        remotes.push_back(
            std::make_unique<fabric::RemoteLink>(io, ib.sw(r.at.sw), log, r.at.port, r.listen, r.host, r.tcp_port));
    }
    return links;
}

// The Ethernet hub's line of the control language's "stats" ("" without one).
std::string eth_stats(const fabric::EthHub *eth) {
    if (!eth) {
        return {};
    }
    return fmt::format("eth: ports={} frames={} flooded={} bytes={} macs={} macs_refused={} conns_refused={}\n",
                       eth->ports(), eth->stats().frames, eth->stats().flooded, eth->stats().bytes, eth->macs(),
                       eth->stats().macs_refused, eth->stats().conns_refused);
}

// The last lines of the log when a signal ends the daemon: its counters.
void log_exit(fabric::Log &log, int sig, const fabric::EthHub *eth, fabric::IbFabric *ib) {
    log.info("fabric", "signal {}, exiting", sig);
    if (eth) {
        log.info("eth", "frames={} flooded={} bytes={}", eth->stats().frames, eth->stats().flooded, eth->stats().bytes);
    }
    if (ib) {
        std::string s = ib->stats_text();
        while (!s.empty() && s.back() == '\n') {
            s.pop_back();
        }
        log.info("fabric", "final counters:\n{}", s);
        ib->flush();
    }
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"hcasim fabric: management Ethernet switch and InfiniBand switch for hcasim VMs"};
    Args args;
    add_options(app, args);
    CLI11_PARSE(app, argc, argv);
    fabric::FabricOptions opt;
    if (!fabric_options(args, opt)) {
        return 2;
    }
    const std::string &eth_socket = args.eth_socket, &ib_dir = args.ib_dir, &control_socket = args.control_socket;

    // A log on a pipe nobody reads (or a peer gone mid-write) must give
    // EPIPE, counted and survived, not SIGPIPE.
    std::signal(SIGPIPE, SIG_IGN);
    boost::asio::io_context io;
    fabric::AsioLoop loop(io);
    std::unique_ptr<fabric::Log> log;
    std::unique_ptr<fabric::EthHub> eth;
    std::unique_ptr<fabric::IbFabric> ib;
    std::unique_ptr<fabric::LinkServer> links;
    std::vector<std::unique_ptr<fabric::RemoteLink>> remotes;
    std::unique_ptr<fabric::ControlCommands> cmds;
    std::unique_ptr<fabric::ControlServer> control;
    try {
        log = std::make_unique<fabric::Log>(args.log_file);
        if (!eth_socket.empty()) {
            eth = std::make_unique<fabric::EthHub>(io, eth_socket, log.get());
        }
        if (!ib_dir.empty()) {
            ib = std::make_unique<fabric::IbFabric>(loop, *log, opt);
            links = make_links(io, *ib, *log, ib_dir, remotes);
        }
        cmds = std::make_unique<fabric::ControlCommands>(ib.get(), [&eth] { return eth_stats(eth.get()); });
        if (!control_socket.empty()) {
            control = std::make_unique<fabric::ControlServer>(io, control_socket, *cmds);
        }
    } catch (const std::exception &e) {
        fmt::print(stderr, "hcasim-fabric: {}\n", e.what());
        return 1;
    }
    if (ib) {
        ib->start();
    }
    // Flush the capture now and then so a reader sees recent packets.
    std::function<void()> flush_tick = [&] {
        if (ib) {
            ib->flush();
        }
        loop.after(1000000, flush_tick);
    };
    loop.after(1000000, flush_tick);

    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code, int sig) {
        log_exit(*log, sig, eth.get(), ib.get());
        io.stop();
    });
    if (!args.ready_file.empty()) {
        if (FILE *f = std::fopen(args.ready_file.c_str(), "w")) {
            std::fclose(f);
        }
    }
    const std::string what = listening_text(args, opt, eth != nullptr, ib != nullptr, control != nullptr);
    log->info("hcasim-fabric", "listening{}", what);
    log->flush();
    fabric::run_guarded(io, *log);
    return 0;
}
