// Data-path throughput of the model alone (fake host, one core): WQEs per
// second and ns per WQE for UD SEND 64 B (send and loopback receive on one
// device), RC SEND 64 B and RC RDMA WRITE 4 KiB (two devices cabled back to
// back, ACKs included), measured side by side in one run with the device
// trace
//
//   out   compiled out (the baseline: this file built over the model with
//         HCASIM_TRACE_COMPILED_OUT, run as a child process: --baseline),
//   off   no trace file (what a run with tracing off costs),
//   none  a trace file whose filter excludes everything ("none"),
//   on    every category, to a file.
//
// Each measurement is repeated (--rounds, interleaved) and the fastest round
// counts, so other load on the machine does not skew one column.  The cost
// of tracing off is off/out; it must stay under 2 %.
//
//   hcasim-bench-datapath [N] [--rounds R] [--baseline PATH] [--cpu C]
//   hcasim-bench-datapath --child CASE N [BATCH]  (one "off" measurement: ns/WQE in all, in the model)
//
// A second table, the model core: the device's own time per WQE (trace
// off) with one WQE per device run and with a batch of them per run, as
// the guest's doorbells arrive between two runs of the bottom half, next
// to a memcpy of 4 KiB in the same run.
//
// `ninja -C build bench-datapath` builds both binaries and runs them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>

#include "alloc_count.h"
#include "driver.h"

using namespace hcatest;

namespace {

// The trace file of the "none" and "on" measurements, and their filter.
const char *g_filter = "all";
// The devices compute every packet's ICRC and VCRC (DeviceConfig::link_crcs;
// by default the link carries packets without them).
bool g_link_crcs = false;

hca::DeviceConfig config(uint64_t guid, const char *trace) {
    hca::DeviceConfig c = Bench::fabric_config(guid);
    c.link_crcs = g_link_crcs;
    if (trace) {
        c.trace_path = trace;
        c.trace_filter = g_filter;
        c.trace_max_bytes = 64ull << 20;
    }
    return c;
}

struct Side {
    Driver d;
    uint32_t uar, pd;
    EqHandle eq;
    CqHandle scq, rcq;
    MrHandle mr;
    Side(Bench &b, uint16_t lid) : d(b) {
        d.bring_up();
        uar = d.alloc_uar();
        eq = d.create_eq(8, 1, {0, 0, 0, 0}, uar);
        pd = d.alloc_pd();
        scq = d.create_cq(12, eq.eqn, uar);
        rcq = d.create_cq(12, eq.eqn, uar);
        mr = d.create_mtt_mkey(pd, 0x10000000 + lid * 0x1000000, 1 << 20, 0x1f);
        d.activate_port(lid);
    }
    void drain() {
        while (d.next_cqe(scq)) {
        }
        while (d.next_cqe(rcq)) {
        }
    }
};

using Clock = std::chrono::steady_clock;
double ns(Clock::duration d) { return std::chrono::duration<double, std::nano>(d).count(); }

// One measurement, in ns per WQE: everything (the fake driver building
// WQEs and polling CQEs included), and the model alone (the device's
// bottom half and the frames it takes from the link, timed per batch; the
// few nanoseconds of recording a doorbell are the driver's side).
struct Timing {
    double total = 0;
    double model = 0;
    double allocs = 0;  // heap allocations per WQE inside the model, after the first kWarm runs
};

// Runs before the heap allocations count: the device's queues, rings and
// packet buffers grow to the traffic first.
constexpr int kWarm = 8;

// One device run (or both devices' runs and the link between them), timed
// and, past the warm-up, its heap allocations counted.
template <typename Pump>
void timed(Pump pump, int run, Clock::duration &model, uint64_t &allocs) {
    if (run >= kWarm) {
        AllocCount::start();
    }
    const auto t1 = Clock::now();
    pump();
    model += Clock::now() - t1;
    if (run >= kWarm) {
        allocs += AllocCount::stop();
    }
}

// Allocations per WQE over the runs past the warm-up.
double counted_per_wqe(uint64_t allocs, int n, int batch) {
    const int runs = (n + batch - 1) / batch - kWarm;
    return runs > 0 ? double(allocs) / (double(runs) * batch) : 0;
}

// batch: WQEs posted (each with its doorbell) before the device runs, as
// under QEMU, where the vCPU rings and the main loop runs the device later.
Timing ud_send(const char *trace, int n, int batch) {
    Bench b(config(0x0002c90300c00001, trace));
    b.dev.port_link(1, true);
    Side s(b, 7);
    CmdResult r;
    auto a = s.d.create_qp(hca::kQpUd, s.pd, s.scq.cqn, s.rcq.cqn, s.uar, 8, 8, &r);
    auto q = s.d.create_qp(hca::kQpUd, s.pd, s.scq.cqn, s.rcq.cqn, s.uar, 8, 8, &r);
    s.d.ud_to_rts(a, 1);
    s.d.ud_to_rts(q, 1);
    s.d.run_on_doorbell = false;
    Clock::duration model{};
    uint64_t allocs = 0;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; i += batch) {
        for (int k = 0; k < batch; ++k) {
            s.d.post_recv(q, s.mr.key, s.mr.iova + uint64_t(k) * 128, 128);
            s.d.post_ud_send(a, 7, q.qpn, 1, {{s.mr.key, s.mr.iova + 8192 + uint64_t(k) * 64, 64}});
        }
        timed([&] { b.pump(); }, i / batch, model, allocs);
        s.drain();
    }
    const int done = (n + batch - 1) / batch * batch;
    return {ns(Clock::now() - t0) / done, ns(model) / done, counted_per_wqe(allocs, n, batch)};
}

Timing rc(const char *trace, int n, bool write, uint32_t len, int batch) {
    Wire w(config(0x0002c90300c00001, trace), config(0x0002c90300c00002, nullptr));
    Side x(w.a, 1), y(w.b, 2);
    CmdResult r;
    auto qa = x.d.create_qp(hca::kQpRc, x.pd, x.scq.cqn, x.rcq.cqn, x.uar, 8, 8, &r);
    auto qb = y.d.create_qp(hca::kQpRc, y.pd, y.scq.cqn, y.rcq.cqn, y.uar, 8, 8, &r);
    x.d.connect_qp(qa, qb.qpn, 2, 5);
    y.d.connect_qp(qb, qa.qpn, 1, 5);
    x.d.run_on_doorbell = false;
    Clock::duration model{};
    uint64_t allocs = 0;
    const auto t0 = Clock::now();
    for (int i = 0; i < n; i += batch) {
        for (int k = 0; k < batch; ++k) {
            const uint64_t at = uint64_t(k) * len;
            Driver::SendWr wr{.opcode = write ? hca::kWqeRdmaWrite : hca::kWqeSend,
                              .sges = {{x.mr.key, x.mr.iova + at, len}}};
            if (write) {
                wr.raddr = y.mr.iova + at;
                wr.rkey = y.mr.key;
            } else {
                y.d.post_recv(qb, y.mr.key, y.mr.iova + at, len);
            }
            x.d.post_send(qa, wr);
        }
        timed([&] { w.pump(); }, i / batch, model, allocs);
        x.drain();
        y.drain();
    }
    const int done = (n + batch - 1) / batch * batch;
    return {ns(Clock::now() - t0) / done, ns(model) / done, counted_per_wqe(allocs, n, batch)};
}

// A plain memcpy of len bytes between the two buffers an RDMA WRITE of
// len moves (the same guest memory of the fake host), ns per copy.
double memcpy_ns(int n, uint32_t len, int batch) {
    Bench b;
    const uint64_t src = b.host.alloc(size_t{len} * batch), dst = b.host.alloc(size_t{len} * batch);
    uint8_t *s = b.host.mem(src, size_t{len} * batch), *d = b.host.mem(dst, size_t{len} * batch);
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
        const size_t at = size_t(i % batch) * len;
        std::memcpy(d + at, s + at, len);
        asm volatile("" : : "r"(d) : "memory");
    }
    return ns(Clock::now() - t0) / n;
}

struct Case {
    const char *name;
    Timing (*fn)(const char *, int, int);
};
const Case kCases[] = {
    {"UD SEND 64 B (+ loopback receive)", [](const char *t, int k, int b) { return ud_send(t, k, b); }},
    {"RC SEND 64 B (+ receive, ACK)", [](const char *t, int k, int b) { return rc(t, k, false, 64, b); }},
    {"RC RDMA WRITE 4 KiB (+ ACK)", [](const char *t, int k, int b) { return rc(t, k, true, 4096, b); }},
};
constexpr int kNumCases = sizeof(kCases) / sizeof(kCases[0]);
constexpr int kBatch = 32;  // WQEs per device run in the batched measurements

// One measurement by the baseline binary (trace compiled out): ns/WQE, or
// a negative number if it failed.
double baseline(const std::string &bin, int c, int n) {
    const std::string cmd = bin + " --child " + std::to_string(c) + " " + std::to_string(n);
    FILE *p = popen(cmd.c_str(), "r");
    if (!p) {
        return -1;
    }
    double v = -1;
    if (std::fscanf(p, "%lf", &v) != 1) {
        v = -1;
    }
    return pclose(p) == 0 ? v : -1;
}

// The model's own cost with the trace off, one doorbell per run (each WQE
// waits for the device) and kBatch per run, next to a memcpy of the bytes
// an RDMA WRITE moves, all in this run.
void model_core(int n, int rounds) {
    std::printf("\nmodel core, trace off: ns per WQE inside the device (its runs and the frames it takes "
                "in), and in all (the fake driver too); fastest of %d interleaved rounds\n\n",
                rounds);
    std::printf(
        "allocs/WQE: heap allocations (operator new) per WQE inside the device's runs once %d runs "
        "have warmed its queues up (the most of any round; the goal is none).\n",
        kWarm);
    std::printf(
        "CRCs on: the model with link CRCs on (every packet's ICRC and VCRC computed and "
        "checked by the devices, as before the link carried packets without them).\n\n");
    std::printf("%-36s %9s %9s %9s %12s %10s %11s\n", "work request", "WQEs/run", "model", "all", "model WQE/s",
                "CRCs on", "allocs/WQE");
    double batched[kNumCases] = {}, batched_crcs[kNumCases] = {};
    double copy = 1e300;
    for (int c = 0; c < kNumCases; ++c) {
        for (int batch : {1, kBatch}) {
            Timing best{1e300, 1e300, 0};
            double crcs = 1e300;
            for (int r = 0; r < rounds; ++r) {
                const Timing t = kCases[c].fn(nullptr, n, batch);
                best.total = std::min(best.total, t.total);
                best.model = std::min(best.model, t.model);
                best.allocs = std::max(best.allocs, t.allocs);
                g_link_crcs = true;
                crcs = std::min(crcs, kCases[c].fn(nullptr, n, batch).model);
                g_link_crcs = false;
                if (c == kNumCases - 1 && batch == kBatch) {
                    copy = std::min(copy, memcpy_ns(n, 4096, kBatch));
                }
            }
            std::printf("%-36s %9d %9.0f %9.0f %12.0f %10.0f %11.4f\n", batch == 1 ? kCases[c].name : "", batch,
                        best.model, best.total, 1e9 / best.model, crcs, best.allocs);
            if (batch == kBatch) {
                batched[c] = best.model;
                batched_crcs[c] = crcs;
            }
        }
    }
    std::printf("%-36s %9s %9.0f\n", "memcpy 4 KiB (same memory)", "", copy);
    std::printf("\nsmall WQEs, %d per run: UD SEND %.2f M/s, RC SEND %.2f M/s (goal >= 5 M/s; with link CRCs "
                "%.2f and %.2f M/s)\n",
                kBatch, 1e3 / batched[0], 1e3 / batched[1], 1e3 / batched_crcs[0], 1e3 / batched_crcs[1]);
    std::printf("RC RDMA WRITE 4 KiB, %d per run: %.1fx a memcpy of 4 KiB (goal <= 3x; with link CRCs %.1fx)\n",
                kBatch, batched[2] / copy, batched_crcs[2] / copy);
}

bool file_exists(const std::string &path) { return access(path.c_str(), X_OK) == 0; }

// Every measurement (the baseline's children inherit it) on one CPU, the
// last one allowed unless --cpu says which: on a shared two-core VM the
// CPUs differ by more than the effects measured here.
int pin(int cpu) {
    cpu_set_t set;
    if (cpu < 0) {
        if (sched_getaffinity(0, sizeof(set), &set) != 0) {
            return -1;
        }
        for (int c = CPU_SETSIZE - 1; c >= 0 && cpu < 0; --c) {
            if (CPU_ISSET(c, &set)) {
                cpu = c;
            }
        }
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0 ? cpu : -1;
}

// The baseline's side: one measurement with the trace off, "total model
// allocs" on one line (and a way to profile one case: perf record ...
// --child C N B).
int child(const std::vector<int> &args) {
    const int c = args[0];
    const int batch = args.size() > 2 ? std::max(1, args[2]) : 1;
    if (c < 0 || c >= kNumCases) {
        return 2;
    }
    const Timing t = kCases[c].fn(nullptr, args[1], batch);
    std::printf("%.3f %.3f %.4f\n", t.total, t.model, t.allocs);
    return 0;
}

// Which baseline binary the "out" column comes from; false if there is none.
bool announce_baseline(const char *self, const std::string &base) {
    if (!file_exists(base)) {
        std::printf("no baseline binary %s: the trace-off cost is not measured (ninja -C build bench-datapath "
                    "builds it)\n",
                    base.c_str());
        return false;
    }
    struct stat a {
    }, b{};
    stat(self, &a);
    stat(base.c_str(), &b);
    std::printf("baseline (trace compiled out): %s%s\n", base.c_str(),
                b.st_mtime + 60 < a.st_mtime ? "  (OLDER than this binary: rebuild with ninja -C build "
                                               "bench-datapath)"
                                             : "");
    return true;
}

// The first table: each case with the trace compiled out, off, filtered
// to nothing and on, fastest of the rounds. Returns whether trace off
// stays within 2 % of compiled out (true when that is not measured).
bool trace_table(const std::string &base, bool have_base, int n, int rounds) {
    char path[] = "/tmp/hcasim-bench-trace-XXXXXX";
    close(mkstemp(path));
    std::printf("%-36s %9s %9s %9s %9s %10s %9s %8s\n", "work request", "out", "off", "none", "on", "off WQE/s",
                "off/out", "on/off");
    double worst = -1;
    bool base_failed = false;
    for (int c = 0; c < kNumCases; ++c) {
        double best[4] = {1e300, 1e300, 1e300, 1e300};  // out, off, none, on
        for (int r = 0; r < rounds; ++r) {
            if (have_base) {
                const double v = baseline(base, c, n);
                if (v > 0) {
                    best[0] = std::min(best[0], v);
                } else {
                    base_failed = true;
                }
            }
            best[1] = std::min(best[1], kCases[c].fn(nullptr, n, 1).total);
            g_filter = "none";
            best[2] = std::min(best[2], kCases[c].fn(path, n, 1).total);
            g_filter = "all";
            best[3] = std::min(best[3], kCases[c].fn(path, n, 1).total);
        }
        char out_s[32] = "-", ratio_s[32] = "-";
        if (have_base && best[0] < 1e300) {
            std::snprintf(out_s, sizeof(out_s), "%.0f", best[0]);
            std::snprintf(ratio_s, sizeof(ratio_s), "%.4f", best[1] / best[0]);
            worst = std::max(worst, best[1] / best[0] - 1);
        }
        std::printf("%-36s %9s %9.0f %9.0f %9.0f %10.0f %9s %8.2f\n", kCases[c].name, out_s, best[1], best[2],
                    best[3], 1e9 / best[1], ratio_s, best[3] / best[1]);
    }
    std::remove(path);
    std::remove((std::string(path) + ".1").c_str());
    if (base_failed) {
        std::printf("\nthe baseline binary failed; the out column is incomplete\n");
    }
    if (have_base && !base_failed) {
        std::printf("\ntrace off costs %+.2f %% over trace compiled out (worst case; requirement < 2 %%): %s\n",
                    worst * 100, worst < 0.02 ? "ok" : "TOO SLOW");
    }
    return !have_base || base_failed || worst < 0.02;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"the model's data path alone (fake host): ns and WQEs/s per work request"};
    int n = 50000;
    int rounds = 5;
    int cpu = -1;
    std::string base = std::string(argv[0]) + "-notrace";  // next to this binary when built
    std::vector<int> child_args;
    app.add_option("n", n, "WQEs per measurement")->check(CLI::PositiveNumber);
    app.add_option("--rounds", rounds, "interleaved rounds; the fastest counts")->check(CLI::PositiveNumber);
    app.add_option("--cpu", cpu, "the CPU to run on (default: the last one allowed)");
    app.add_option("--baseline", base, "the bench built over the model with the trace compiled out");
    app.add_option("--child", child_args, "one trace-off measurement: CASE N [BATCH]")->expected(2, 3);
    CLI11_PARSE(app, argc, argv);
    if (!child_args.empty()) {
        return child(child_args);
    }
    if (!hca::kTraceCompiled) {
        std::fprintf(stderr, "this is the baseline binary (trace compiled out); run hcasim-bench-datapath\n");
        return 2;
    }
    const bool have_base = announce_baseline(argv[0], base);
    const int on_cpu = pin(cpu);
    std::printf("%d WQEs per measurement, fastest of %d interleaved rounds, on CPU %d; ns per WQE\n\n", n, rounds,
                on_cpu);
    const bool trace_ok = trace_table(base, have_base, n, rounds);
    model_core(n, rounds);
    return trace_ok ? 0 : 1;
}
