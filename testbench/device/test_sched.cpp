// Fair, bounded work: one run() of the device sends and receives at most
// its budget of packets, bytes and WQEs, the send queues with work take
// turns, and the device asks to run again while work is left.
#include <catch2/catch.hpp>

#include <algorithm>

#include "iba/link.h"
#include "pair.h"
#include "ud_setup.h"

using namespace hcatest;

namespace {

constexpr uint32_t kGiB = 1u << 30;

// The doorbell for the WQE post_send(..., false) just wrote, without
// running the device (Driver::ring_sq pumps it).
void ring_only(Driver &d, QpHandle &qp) {
    FakeHost &h = d.bench().host;
    const uint16_t index = static_cast<uint16_t>(qp.sq_pi - 1);
    const uint32_t head = h.read_be32(qp.sq_addr(index));
    const uint32_t qpn_ds = h.read_be32(qp.sq_addr(index) + 4);
    h.write_be32(qp.dbr + 4, qp.sq_pi);
    uint8_t db[8];
    hca::store_be32(db, head);
    hca::store_be32(db + 4, qpn_ds);
    d.bar_write(uint64_t{qp.uar} * 4096 + 0x800, db, 8);
}

// Frames one device sent, handed to the other.
size_t deliver(Bench &from, Bench &to) {
    const size_t n = from.host.tx.size();
    for (const auto &f : from.host.tx) {
        to.dev.port_rx(1, f.data(), f.size());
    }
    from.host.tx.clear();
    return n;
}

void run_once(Bench &b) {
    b.host.scheduled = false;
    b.dev.run();
}

}  // namespace

TEST_CASE("a 1 GiB RDMA WRITE at MTU 256 does not hold back another QP's SEND beyond one run", "[rc][sched]") {
    // Both sides get 1.25 GiB of guest memory, mapped but untouched until used.
    Wire w(Bench::fabric_config(0x0002c90300b00001), Bench::fabric_config(0x0002c90300b00002),
           size_t{kGiB} + (256u << 20));
    Node a(w.a, 1);
    Node b(w.b, 2);
    CmdResult r;
    QpHandle big_a = a.d.create_qp(hca::kQpRc, a.pd, a.scq.cqn, a.rcq.cqn, a.uar, 6, 6, &r);
    QpHandle small_a = a.d.create_qp(hca::kQpRc, a.pd, a.scq.cqn, a.rcq.cqn, a.uar, 6, 6, &r);
    QpHandle big_b = b.d.create_qp(hca::kQpRc, b.pd, b.scq.cqn, b.rcq.cqn, b.uar, 6, 6, &r);
    QpHandle small_b = b.d.create_qp(hca::kQpRc, b.pd, b.scq.cqn, b.rcq.cqn, b.uar, 6, 6, &r);
    REQUIRE(r.status == 0);
    a.d.connect_qp(big_a, big_b.qpn, 2, 1);  // MTU 256
    b.d.connect_qp(big_b, big_a.qpn, 1, 1);
    a.d.connect_qp(small_a, small_b.qpn, 2, 1);
    b.d.connect_qp(small_b, small_a.qpn, 1, 1);
    const uint32_t pa_a = a.d.create_pa_mkey(a.pd);
    const uint32_t pa_b = b.d.create_pa_mkey(b.pd, 0x11, true);
    const uint64_t buf = FakeHost::kMemBase + (256u << 20);  // past every allocation
    b.d.post_recv(small_b, b.mr.key, b.mr.iova, 64);

    // One doorbell for the whole GiB, then the small SEND; the device has not run yet.
    a.d.post_send(big_a, {.opcode = hca::kWqeRdmaWrite, .sges = {{pa_a, buf, kGiB}}, .raddr = buf, .rkey = pa_b},
                  false);
    ring_only(a.d, big_a);
    a.d.post_send(small_a, {.opcode = hca::kWqeSend, .inline_data = {1, 2, 3, 4}}, false);
    ring_only(a.d, small_a);

    std::optional<Cqe> done;
    size_t most = 0;
    int runs = 0;
    while (!done && runs < 2) {
        run_once(w.a);
        ++runs;
        most = std::max(most, w.a.host.tx.size());
        CHECK(w.a.host.scheduled);  // the GiB is not through: the run asked for another
        deliver(w.a, w.b);
        w.b.pump();
        deliver(w.b, w.a);
        while (auto c = a.d.next_cqe(a.scq)) {
            REQUIRE((be32(*c, 0x38) & 0xffffff) == small_a.qpn);  // never the big one
            done = c;
        }
    }
    if (!done) {
        run_once(w.a);  // the ACK that arrived after the second run
        ++runs;
        done = a.d.next_cqe(a.scq);
    }
    INFO("runs " << runs);
    REQUIRE(done);
    CHECK(op(*done) == hca::kCqeReq);
    CHECK(runs <= 2);
    auto rc = b.d.next_cqe(b.rcq);
    REQUIRE(rc);
    CHECK(be32(*rc, 0x2c) == 4);

    // The GiB keeps streaming, a budget per run.
    const hca::Qp *big = w.a.dev.qps.find(big_a.qpn);
    REQUIRE(big);
    CHECK(big->rc.pending.size() == 1);
    CHECK(hca::psn_diff(big->next_send_psn, big->rc.tx_psn) > 0);
    for (int i = 0; i < 20; ++i) {
        run_once(w.a);
        most = std::max(most, w.a.host.tx.size());
        deliver(w.a, w.b);
        w.b.pump();
        deliver(w.b, w.a);
    }
    CHECK(most <= hca::Device::kRunPackets);
    CHECK(most >= hca::Device::kRunPackets / 2);
    CHECK(w.a.host.scheduled);
    CHECK(big->rc.pending.size() == 1);
    CHECK(!a.d.next_cqe(a.scq));

    // Cleaned up mid-stream: the teardown stops it for good.
    CHECK(a.d.exec(Driver::inbox(hca::kOpTeardownHca, 0, 16), 16).status == 0);
    w.a.host.recording = true;
    for (int i = 0; i < 3; ++i) {
        run_once(w.a);
    }
    w.a.advance(1'000'000'000);
    CHECK(w.a.host.recorded.empty());
    CHECK(w.a.host.tx.empty());
}

TEST_CASE("send queues take turns: many QPs with long messages all progress in one run", "[rc][sched]") {
    Pair p;
    std::vector<QpHandle> qa, qb;
    for (int i = 0; i < 4; ++i) {
        CmdResult r;
        qa.push_back(p.a.d.create_qp(hca::kQpRc, p.a.pd, p.a.scq.cqn, p.a.rcq.cqn, p.a.uar, 6, 6, &r));
        qb.push_back(p.b.d.create_qp(hca::kQpRc, p.b.pd, p.b.scq.cqn, p.b.rcq.cqn, p.b.uar, 6, 6, &r));
        REQUIRE(r.status == 0);
    }
    for (int i = 0; i < 4; ++i) {
        p.a.d.connect_qp(qa[i], qb[i].qpn, 2, 1);
        p.b.d.connect_qp(qb[i], qa[i].qpn, 1, 1);
    }
    // Each QP: a 64 KiB WRITE (256 packets at MTU 256).
    for (int i = 0; i < 4; ++i) {
        p.a.d.post_send(qa[i], {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 65536}},
                                .raddr = p.b.mr.iova, .rkey = p.b.mr.key},
                        false);
        ring_only(p.a.d, qa[i]);
    }
    run_once(p.w.a);
    CHECK(p.w.a.host.tx.size() == hca::Device::kRunPackets);
    for (int i = 0; i < 4; ++i) {
        const hca::Qp *q = p.w.a.dev.qps.find(qa[i].qpn);
        INFO("qp " << i);
        const int32_t sent = hca::psn_diff(q->rc.tx_psn, q->rc.pending.front().first_psn);
        CHECK(sent >= int32_t(hca::Device::kRunPackets / 4 - hca::SendQueue::kQuantum));
        CHECK(sent <= int32_t(hca::Device::kRunPackets / 4 + hca::SendQueue::kQuantum));
    }
    // And all of it completes in the end.
    p.w.pump();
    int done = 0;
    while (auto c = p.a.d.next_cqe(p.a.scq)) {
        CHECK(op(*c) == hca::kCqeReq);
        ++done;
    }
    CHECK(done == 4);
}

TEST_CASE("flow control: send queues wait for a backed-up link, a device behind refuses received bytes", "[sched][link]") {
    Pair p(hca::kQpUc);
    FakeHost &ha = p.w.a.host;
    for (uint32_t i = 0; i < 4; ++i) {
        p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + i * 1024, 1024);
    }
    // The link has not written a MiB yet: four SENDs are posted and rung,
    // and nothing goes out.
    ha.backlog = hca::Device::kTxHigh;
    for (uint32_t i = 0; i < 4; ++i) {
        p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova + i * 1024, 1024}}});
    }
    CHECK(ha.tx.empty());
    CHECK(p.w.a.dev.qps.sq().has_work());
    CHECK(p.w.a.dev.counters.tx_waits == 1);
    CHECK(!p.a.d.next_cqe(p.a.scq));
    // Written down to just above the low-water mark: still waiting.
    ha.backlog = hca::Device::kTxLow + 1;
    ha.scheduled = false;
    p.w.a.dev.port_tx_done();
    CHECK(!ha.scheduled);
    p.w.a.pump();
    CHECK(ha.tx.empty());
    // Below it: the device asks to run and the SENDs go, none lost.
    ha.backlog = hca::Device::kTxLow;
    p.w.a.dev.port_tx_done();
    CHECK(ha.scheduled);
    p.w.pump();
    CHECK(p.w.dropped == 0);
    int sent = 0, received = 0;
    while (p.a.d.next_cqe(p.a.scq)) {
        ++sent;
    }
    while (auto c = p.b.d.next_cqe(p.b.rcq)) {
        CHECK(be32(*c, 0x2c) == 1024);
        ++received;
    }
    CHECK(sent == 4);
    CHECK(received == 4);
    CHECK(p.w.a.dev.counters.tx_waits == 1);

    // The receiving side: frames arrive faster than it runs. Past
    // kRxHigh bytes waiting it takes no more, once it has handled them
    // it says so (once), and it has its room back.
    hca::Device &db = p.w.b.dev;
    std::vector<uint8_t> frame(iba::link::kHeader + 4096, 0);
    iba::link::put_header(frame.data(), iba::link::kPacket, 0, 7);
    size_t fed = 0;
    while (db.port_rx_room() > 0 && fed < 10000) {
        db.port_rx(1, frame.data(), frame.size());
        ++fed;
    }
    CHECK(fed == hca::Device::kRxHigh / 4096);
    CHECK(db.port_rx_room() == 0);
    CHECK(db.counters.rx_waits == 1);
    CHECK(p.w.b.host.rx_resumes == 0);
    p.w.b.pump();
    CHECK(p.w.b.host.rx_resumes == 1);
    CHECK(db.port_rx_room() == hca::Device::kRxHigh);
}

TEST_CASE("a guest that rings faster than the device runs: the doorbell queue stays bounded", "[sched][uar]") {
    UdSetup s;
    auto a = s.ud(0x11, hca::kQpUd, 7, 6);
    auto q = s.ud(0x11, hca::kQpUd, 7, 6);
    const uint64_t src = s.buffer(64 * 16, 1), dst = s.b.host.alloc(128 * 16, 64);
    s.d.run_on_doorbell = false;
    for (int k = 0; k < 16; ++k) {
        s.d.post_recv(q, s.lkey, dst + uint64_t(k) * 128, 128);
        s.d.post_ud_send(a, 5, q.qpn, 0x11, {{s.lkey, src + uint64_t(k) * 64, 64}});
    }
    // The driver rings the last WQE's doorbell again and again before the
    // device runs once: 16 + 5,000 MMIO writes.
    const uint64_t before = s.b.dev.counters.doorbells;
    for (int i = 0; i < 5000; ++i) {
        ring_only(s.d, a);
    }
    CHECK(s.b.dev.counters.doorbells - before >= 5000);
    CHECK(s.b.dev.counters.doorbell_stalls == 1);  // at the 4,097th waiting write
    s.b.pump();
    int sent = 0, received = 0;
    while (auto c = s.d.next_cqe(s.scq)) {
        CHECK((*c)[63] >> 4 == hca::kCqeReq);
        ++sent;
    }
    while (auto c = s.d.next_cqe(s.rcq)) {
        CHECK((*c)[63] >> 4 == hca::kCqeRespSend);
        ++received;
    }
    CHECK(sent == 16);  // each WQE once, however often it was rung
    CHECK(received == 16);
    CHECK(s.b.dev.info().find("doorbell_stalls=1") != std::string::npos);
}
