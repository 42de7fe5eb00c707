// Data-path throughput of the model alone (fake host, one core): WQEs per
// second and ns per WQE for UD SEND 64 B (send and loopback receive on one
// device), RC SEND 64 B and RC RDMA WRITE 4 KiB (two devices cabled back to
// back, ACKs included), each with the device trace off and on (every
// category, to a file), measured side by side in one run.
#include <chrono>
#include <cstdio>
#include <string>
#include <unistd.h>

#include "driver.h"

using namespace hcatest;

namespace {

hca::DeviceConfig config(uint64_t guid, const char *trace) {
    hca::DeviceConfig c = Bench::fabric_config(guid);
    if (trace) {
        c.trace_path = trace;
        c.trace_filter = "all";
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
double ns_since(Clock::time_point t0, int n) {
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
}

double ud_send(const char *trace, int n) {
    Bench b(config(0x0002c90300c00001, trace));
    b.dev.port_link(1, true);
    Side s(b, 7);
    CmdResult r;
    auto a = s.d.create_qp(hca::kQpUd, s.pd, s.scq.cqn, s.rcq.cqn, s.uar, 8, 8, &r);
    auto q = s.d.create_qp(hca::kQpUd, s.pd, s.scq.cqn, s.rcq.cqn, s.uar, 8, 8, &r);
    s.d.ud_to_rts(a, 1);
    s.d.ud_to_rts(q, 1);
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
        s.d.post_recv(q, s.mr.key, s.mr.iova, 4096);
        s.d.post_ud_send(a, 7, q.qpn, 1, {{s.mr.key, s.mr.iova + 8192, 64}});
        s.drain();
    }
    return ns_since(t0, n);
}

double rc(const char *trace, int n, bool write, uint32_t len) {
    Wire w(config(0x0002c90300c00001, trace), config(0x0002c90300c00002, nullptr));
    Side x(w.a, 1), y(w.b, 2);
    CmdResult r;
    auto qa = x.d.create_qp(hca::kQpRc, x.pd, x.scq.cqn, x.rcq.cqn, x.uar, 8, 8, &r);
    auto qb = y.d.create_qp(hca::kQpRc, y.pd, y.scq.cqn, y.rcq.cqn, y.uar, 8, 8, &r);
    x.d.connect_qp(qa, qb.qpn, 2, 5);
    y.d.connect_qp(qb, qa.qpn, 1, 5);
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) {
        Driver::SendWr wr{.opcode = write ? hca::kWqeRdmaWrite : hca::kWqeSend,
                          .sges = {{x.mr.key, x.mr.iova, len}}};
        if (write) {
            wr.raddr = y.mr.iova;
            wr.rkey = y.mr.key;
        } else {
            y.d.post_recv(qb, y.mr.key, y.mr.iova, 4096);
        }
        x.d.post_send(qa, wr);
        w.pump();
        x.drain();
        y.drain();
    }
    return ns_since(t0, n);
}

}  // namespace

int main(int argc, char **argv) {
    const int n = argc > 1 ? std::stoi(argv[1]) : 50000;
    char path[] = "/tmp/hcasim-bench-trace-XXXXXX";
    close(mkstemp(path));
    struct Case {
        const char *name;
        double (*fn)(const char *, int);
    } cases[] = {
        {"UD SEND 64 B (+ loopback receive)", [](const char *t, int k) { return ud_send(t, k); }},
        {"RC SEND 64 B (+ receive, ACK)", [](const char *t, int k) { return rc(t, k, false, 64); }},
        {"RC RDMA WRITE 4 KiB (+ ACK)", [](const char *t, int k) { return rc(t, k, true, 4096); }},
    };
    std::printf("%-36s %12s %10s %12s %10s %8s\n", "work request", "off WQE/s", "ns/WQE", "on WQE/s", "ns/WQE",
                "on/off");
    for (const auto &c : cases) {
        const double off = c.fn(nullptr, n);
        const double on = c.fn(path, n);
        std::printf("%-36s %12.0f %10.0f %12.0f %10.0f %8.2f\n", c.name, 1e9 / off, off, 1e9 / on, on, on / off);
    }
    std::remove(path);
    std::remove((std::string(path) + ".1").c_str());
    return 0;
}
