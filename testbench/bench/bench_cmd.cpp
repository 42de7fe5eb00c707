// Command throughput of the model through the device-level test bench:
// commands per second and ns per command, for a small command (NOP, no
// mailbox) and a large one (QUERY_HCA_CAP, 4112-byte output in 8
// mailboxes), with tracing off and on, measured side by side in one run.
#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "driver.h"

using namespace hcatest;

namespace {

double run(const char *trace_path, uint16_t opcode, uint16_t op_mod, size_t outlen, int n) {
    hca::DeviceConfig cfg;
    if (trace_path) {
        cfg.trace_path = trace_path;
        cfg.trace_filter = "all";
    }
    Bench b(cfg);
    Driver d(b);
    d.bring_up();
    const auto in = Driver::inbox(opcode, op_mod, 16);
    d.post(0, in, outlen);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
        // Re-arm the slot the way the driver does: owner bit, doorbell.
        b.host.mem(d.cmdq() + 0x3f, 1)[0] = 1;
        d.ring(1);
        b.pump();
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (d.result(0).status != 0) {
        std::fprintf(stderr, "command failed\n");
    }
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

}  // namespace

int main(int argc, char **argv) {
    const int n = argc > 1 ? std::stoi(argv[1]) : 200000;
    char path[] = "/tmp/hcasim-bench-trace-XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    struct Case {
        const char *name;
        uint16_t opcode;
        uint16_t op_mod;
        size_t outlen;
    } cases[] = {{"NOP (no mailbox)", hca::kOpNop, 0, 16}, {"QUERY_HCA_CAP (8 out mailboxes)", hca::kOpQueryHcaCap, 1, 4112}};
    std::printf("%-34s %14s %12s %14s %12s %8s\n", "command", "trace off/s", "ns/cmd", "trace on/s", "ns/cmd", "on/off");
    for (const auto &c : cases) {
        const double off = run(nullptr, c.opcode, c.op_mod, c.outlen, n);
        const double on = run(path, c.opcode, c.op_mod, c.outlen, n);
        std::printf("%-34s %14.0f %12.1f %14.0f %12.1f %8.2f\n", c.name, 1e9 / off, off, 1e9 / on, on, on / off);
    }
    std::remove(path);
    std::remove((std::string(path) + ".1").c_str());
    return 0;
}
