// hcasim-fabric: the daemon the VMs of one run connect to.
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include "asio.h"
#include <fmt/format.h>

#include "eth_hub.h"

int main(int argc, char **argv) {
    CLI::App app{"hcasim fabric: management Ethernet switch (and InfiniBand switch) for hcasim VMs"};
    std::string eth_socket;
    std::string ready_file;
    app.add_option("--eth-socket", eth_socket, "Unix socket for the VMs' management virtio-net (-netdev stream)");
    app.add_option("--ready-file", ready_file, "File created once every socket listens");
    CLI11_PARSE(app, argc, argv);

    boost::asio::io_context io;
    std::unique_ptr<fabric::EthHub> eth;
    try {
        if (!eth_socket.empty()) {
            eth = std::make_unique<fabric::EthHub>(io, eth_socket);
        }
    } catch (const std::exception &e) {
        fmt::print(stderr, "hcasim-fabric: {}\n", e.what());
        return 1;
    }
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](boost::system::error_code, int sig) {
        fmt::print("hcasim-fabric: signal {}, exiting\n", sig);
        if (eth) {
            fmt::print("eth: frames={} flooded={} bytes={}\n", eth->stats().frames, eth->stats().flooded,
                       eth->stats().bytes);
        }
        io.stop();
    });
    if (!ready_file.empty()) {
        if (FILE *f = std::fopen(ready_file.c_str(), "w")) {
            std::fclose(f);
        }
    }
    fmt::print("hcasim-fabric: listening{}{}\n", eth ? " eth=" : "", eth_socket);
    std::fflush(stdout);
    io.run();
    return 0;
}
