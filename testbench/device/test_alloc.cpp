// The data path's steady state allocates nothing from the heap (issue 18:
// no per-packet allocation): once the queues, rings and packet buffers
// have grown to the traffic, a batch of work requests through the device
// (doorbells, WQE fetch, packets, the link, receive, ACKs, CQEs) makes no
// operator new call. The fake driver's own allocations are outside the
// counted stretch: only the device's run (and the fake link between two
// devices) is counted.
#include <vector>

#include "alloc_count.h"
#include "pair.h"
#include "ud_setup.h"

using namespace hcatest;

namespace {

constexpr int kBatch = 16;
constexpr int kWarm = 8;      // batches before counting: queues reach their size
constexpr int kCounted = 32;  // batches counted

void drain(Driver &d, CqHandle &cq, int &n) {
    while (auto c = d.next_cqe(cq)) {
        CHECK((*c)[63] >> 4 != hca::kCqeReqErr);
        CHECK((*c)[63] >> 4 != hca::kCqeRespErr);
        ++n;
    }
}

}  // namespace

TEST_CASE("the allocation counter counts", "[alloc]") {
    AllocCount::start();
    auto *v = new std::vector<int>(100);
    asm volatile("" : : "r"(v) : "memory");  // the allocation may not be elided
    const uint64_t n = AllocCount::stop();
    delete v;
    CHECK(n == 2);  // the vector and its elements
    AllocCount::start();
    CHECK(AllocCount::stop() == 0);
}

TEST_CASE("UD SEND with loopback receive allocates nothing per work request", "[alloc][perf]") {
    UdSetup s;
    auto a = s.ud(0x11, hca::kQpUd, 7, 6);
    auto q = s.ud(0x11, hca::kQpUd, 7, 6);
    const uint64_t src = s.buffer(64 * kBatch, 1), dst = s.b.host.alloc(128 * kBatch, 64);
    s.d.run_on_doorbell = false;
    uint64_t allocs = 0;
    int sent = 0, received = 0;
    for (int i = 0; i < kWarm + kCounted; ++i) {
        for (int k = 0; k < kBatch; ++k) {
            s.d.post_recv(q, s.lkey, dst + uint64_t(k) * 128, 128);
            s.d.post_ud_send(a, 5, q.qpn, 0x11, {{s.lkey, src + uint64_t(k) * 64, 64}});
        }
        if (i < kWarm) {
            s.b.pump();
        } else {
            AllocCount::start();
            s.b.pump();
            allocs += AllocCount::stop();
        }
        drain(s.d, s.scq, sent);
        drain(s.d, s.rcq, received);
    }
    CHECK(sent == (kWarm + kCounted) * kBatch);
    CHECK(received == (kWarm + kCounted) * kBatch);
    CHECK(allocs == 0);
}

TEST_CASE("RC SEND and RDMA WRITE allocate nothing per work request", "[alloc][perf]") {
    const bool write = GENERATE(false, true);
    const uint32_t len = write ? 4096 : 64;
    INFO((write ? "RDMA WRITE 4 KiB" : "SEND 64 B"));
    Pair p;
    p.a.d.run_on_doorbell = false;
    p.b.d.run_on_doorbell = false;
    uint64_t allocs = 0;
    int sent = 0, received = 0;
    for (int i = 0; i < kWarm + kCounted; ++i) {
        for (int k = 0; k < kBatch; ++k) {
            const uint64_t at = uint64_t(k % 8) * len;
            Driver::SendWr wr{.opcode = write ? hca::kWqeRdmaWrite : hca::kWqeSend,
                              .sges = {{p.a.mr.key, p.a.mr.iova + at, len}}};
            if (write) {
                wr.raddr = p.b.mr.iova + 32768 + at;
                wr.rkey = p.b.mr.key;
            } else {
                p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + 32768 + at, len);
            }
            p.a.d.post_send(p.qa, wr);
        }
        if (i < kWarm) {
            p.w.pump();
        } else {
            AllocCount::start();
            p.w.pump();
            allocs += AllocCount::stop();
        }
        drain(p.a.d, p.a.scq, sent);
        drain(p.b.d, p.b.rcq, received);
    }
    CHECK(sent == (kWarm + kCounted) * kBatch);
    CHECK(received == (write ? 0 : (kWarm + kCounted) * kBatch));
    CHECK(allocs == 0);
}
