// Connected transports between two devices cabled back to back: RC SEND,
// RDMA WRITE (with immediate), RDMA READ, atomics, RNR NAK and retry, loss
// and go-back-N retransmission, retry exhaustion, remote access errors and
// the responder's affiliated asynchronous errors, the requester's states,
// UC.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

#include "expect.h"
#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;


TEST_CASE("RC SEND of several MTUs: in-order delivery, both completions", "[rc]") {
    Pair p;
    const uint64_t src = p.a.mr.iova, dst = p.b.mr.iova + 4096;
    p.a.fill(src, 5000, 3);
    p.b.d.post_recv(p.qb, p.b.mr.key, dst, 8192);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, src, 5000}}});
    p.w.pump();
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(op(*rc) == hca::kCqeRespSend);
    CHECK(be32(*rc, 0x2c) == 5000);
    CHECK((be32(*rc, 0x18) & 0xffffff) == p.qa.qpn);
    CHECK(p.b.same(dst, 5000, 3));
    auto sc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(sc);
    CHECK(op(*sc) == hca::kCqeReq);
    CHECK(be32(*sc, 0x38) >> 24 == hca::kWqeSend);
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->rc.pending.empty());
}

TEST_CASE("RC: the responder coalesces the ACKs of one batch of requests into one", "[rc]") {
    Pair p;
    const uint64_t tx0 = p.w.b.dev.counters.packets_tx;
    // One SEND per device run: one ACK each.
    for (int i = 0; i < 3; ++i) {
        p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + i * 64, 64);
        p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 64}}});
        p.w.pump();
    }
    CHECK(p.w.b.dev.counters.packets_tx - tx0 == 3);
    // Eight SENDs rung before the device runs arrive at the responder in
    // one batch: one ACK, for the last PSN, completes all eight.
    p.a.d.run_on_doorbell = false;
    for (int i = 0; i < 8; ++i) {
        p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + 4096 + i * 64, 64);
        p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 64}}});
    }
    p.w.pump();
    CHECK(p.w.b.dev.counters.packets_tx - tx0 == 4);
    const hca::Qp *qa = p.w.a.dev.qps.find(p.qa.qpn);
    CHECK(qa->rc.pending.empty());
    CHECK(qa->rc.una == qa->next_send_psn);
    int sends = 0, recvs = 0;
    while (auto c = p.a.d.next_cqe(p.a.scq)) {
        sends += op(*c) == hca::kCqeReq;
    }
    while (auto c = p.b.d.next_cqe(p.b.rcq)) {
        recvs += op(*c) == hca::kCqeRespSend;
    }
    CHECK(sends == 11);
    CHECK(recvs == 11);
}

TEST_CASE("RC: an owed ACK goes out before the read response that follows it", "[rc]") {
    Pair p;
    p.a.d.run_on_doorbell = false;
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 64);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 64}}});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaRead, .sges = {{p.a.mr.key, p.a.mr.iova + 4096, 64}},
                           .raddr = p.b.mr.iova + 8192, .rkey = p.b.mr.key});
    // Keep b's frames to look at their order.
    p.w.a.pump();
    REQUIRE(p.w.a.host.tx.size() == 2);
    for (auto &f : p.w.a.host.tx) {
        p.w.b.dev.port_rx(1, f.data(), f.size());
    }
    p.w.a.host.tx.clear();
    p.w.b.pump();
    REQUIRE(p.w.b.host.tx.size() == 2);
    iba::PacketView first, second;
    REQUIRE(parse_frame(p.w.b.host.tx[0], first) == iba::ParseError::None);
    REQUIRE(parse_frame(p.w.b.host.tx[1], second) == iba::ParseError::None);
    CHECK((first.opcode() & 0x1f) == iba::kAck);
    CHECK((second.opcode() & 0x1f) == iba::kReadRespOnly);
    CHECK(first.psn() < second.psn());
}

TEST_CASE("RC RDMA WRITE and WRITE with immediate", "[rc]") {
    Pair p;
    p.a.fill(p.a.mr.iova, 3000, 11);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 3000}},
                           .raddr = p.b.mr.iova + 100, .rkey = p.b.mr.key});
    p.w.pump();
    CHECK(p.b.same(p.b.mr.iova + 100, 3000, 11));
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    CHECK(!p.b.d.next_cqe(p.b.rcq));  // no receive completion for a plain write
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + 50000, 64);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWriteImm, .sges = {{p.a.mr.key, p.a.mr.iova, 8}},
                           .raddr = p.b.mr.iova, .rkey = p.b.mr.key, .imm = 0x12345678});
    p.w.pump();
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(op(*rc) == hca::kCqeRespWrImm);
    CHECK(be32(*rc, 0x24) == 0x12345678);
}

TEST_CASE("RC RDMA READ and atomics", "[rc]") {
    Pair p;
    p.b.fill(p.b.mr.iova + 8192, 4100, 77);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaRead, .sges = {{p.a.mr.key, p.a.mr.iova + 1, 4100}},
                           .raddr = p.b.mr.iova + 8192, .rkey = p.b.mr.key});
    p.w.pump();
    auto sc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(sc);
    CHECK(op(*sc) == hca::kCqeReq);
    CHECK(be32(*sc, 0x38) >> 24 == hca::kWqeRdmaRead);
    CHECK(be32(*sc, 0x2c) == 4100);
    CHECK(p.a.same(p.a.mr.iova + 1, 4100, 77));

    // Fetch-and-add then compare-and-swap on a 64-bit counter (host byte order).
    uint64_t v = 40;
    std::memcpy(p.b.mem(p.b.mr.iova + 64, 8), &v, 8);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeAtomicFa, .sges = {{p.a.mr.key, p.a.mr.iova + 256, 8}},
                           .raddr = p.b.mr.iova + 64, .rkey = p.b.mr.key, .swap_add = 2});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeAtomicCs, .sges = {{p.a.mr.key, p.a.mr.iova + 264, 8}},
                           .raddr = p.b.mr.iova + 64, .rkey = p.b.mr.key, .swap_add = 1000, .compare = 42});
    p.w.pump();
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    uint64_t r1, r2, now;
    std::memcpy(&r1, p.a.mem(p.a.mr.iova + 256, 8), 8);
    std::memcpy(&r2, p.a.mem(p.a.mr.iova + 264, 8), 8);
    std::memcpy(&now, p.b.mem(p.b.mr.iova + 64, 8), 8);
    CHECK(r1 == 40);
    CHECK(r2 == 42);
    CHECK(now == 1000);
}

TEST_CASE("RC RNR NAK: the sender retries until a receive is posted", "[rc]") {
    Pair p;
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {1, 2, 3, 4}});
    p.w.pump();
    CHECK(!p.a.d.next_cqe(p.a.scq));
    p.w.advance(2'000'000);  // several RNR rounds
    CHECK(!p.a.d.next_cqe(p.a.scq));
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 64);
    p.w.advance(2'000'000);
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(be32(*rc, 0x2c) == 4);
}

TEST_CASE("RC RNR NAK on a multi-packet SEND: the rest is dropped without a NAK, no retry is spent", "[rc]") {
    // Before the responder dropped the packets after an RNR NAK silently,
    // each RNR round also earned a PSN sequence NAK, and the requester ran
    // out of retries (7) after 8 rounds.
    Pair p;
    p.a.fill(p.a.mr.iova, 5000, 2);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 5000}}});
    p.w.advance(5'000'000);  // hundreds of RNR rounds of 10 us
    CHECK(!p.a.d.next_cqe(p.a.scq));
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->state == hca::QpState::Rts);
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->rc.retry_left == 7);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 8192);
    p.w.advance(1'000'000);
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(be32(*rc, 0x2c) == 5000);
    CHECK(p.b.same(p.b.mr.iova, 5000, 2));
    auto sc = p.a.d.next_cqe(p.a.scq);
    REQUIRE(sc);
    CHECK(op(*sc) == hca::kCqeReq);
}

TEST_CASE("RC RNR retries run out: RNR retry exceeded", "[rc]") {
    Pair p(hca::kQpRc, 7, 2);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {9}});
    p.w.advance(20'000'000);
    auto e = p.a.d.next_cqe(p.a.scq);
    REQUIRE(e);
    CHECK(op(*e) == hca::kCqeReqErr);
    CHECK((*e)[0x37] == hca::kSyndRnrRetryExc);
    CHECK((*e)[0x36] == 0x82);  // vendor_err_synd
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->state == hca::QpState::Err);
}

TEST_CASE("RC requester: an RNR NAK holds the send queue, new WQEs included, until the RNR timer", "[rc]") {
    Pair p;
    TraceCapture t(p.w.a.dev, hca::kTrQp);
    const hca::Qp *qa = p.w.a.dev.qps.find(p.qa.qpn);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {1, 2, 3, 4}});
    p.w.pump();
    CHECK(qa->rc.req == hca::ReqState::RnrWait);
    CHECK(qa->rc.rnr_timer != 0);
    CHECK(qa->rc.ack_timer == 0);  // the RNR timer owns the wait
    // A receive and a second SEND meanwhile: the second waits for the
    // retry of the first (sending it now would only earn a sequence NAK).
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 64);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + 64, 64);
    const uint64_t tx = p.w.a.dev.counters.packets_tx;
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {5, 6, 7, 8}});
    p.w.pump();
    CHECK(p.w.a.dev.counters.packets_tx == tx);
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    p.w.advance(1'000'000);  // the RNR timer: 10 us (min_rnr_timer 1)
    for (uint8_t i = 0; i < 2; ++i) {
        auto rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(be32(*rc, 0x2c) == 4);
        CHECK(p.b.mem(p.b.mr.iova + 64 * i, 1)[0] == 1 + 4 * i);
        auto sc = p.a.d.next_cqe(p.a.scq);
        REQUIRE(sc);
        CHECK(op(*sc) == hca::kCqeReq);
    }
    CHECK(qa->rc.req == hca::ReqState::Idle);
    CHECK(qa->rc.ack_deadline == 0);  // disarmed
    CHECK(p.w.a.dev.qcounters.get(qa->counter_set, hca::QCounter::PacketSeqErr) == 0);
    const std::string qpn = fmt::format("qpn=0x{:x}", p.qa.qpn);
    CHECK(t.lines({"qp requester", qpn, "from=wait-ack to=rnr-wait", "RNR NAK"}).size() == 1);
    CHECK(t.lines({"qp requester", qpn, "from=rnr-wait to=sending", "RNR timer expired"}).size() == 1);
}

TEST_CASE("RC requester: a QP that goes idle after every message keeps one host ACK timer", "[rc]") {
    Pair p;
    const hca::Qp *qa = p.w.a.dev.qps.find(p.qa.qpn);
    for (int i = 0; i < 4; ++i) {
        p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + i * 64, 64);
    }
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {1}});
    p.w.pump();
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    const hca::Timers::Id first = qa->rc.ack_timer;
    CHECK(first != 0);
    CHECK(qa->rc.req == hca::ReqState::Idle);
    CHECK(qa->rc.ack_deadline == 0);  // disarmed, the host timer left to end
    for (uint8_t i = 2; i <= 3; ++i) {
        p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {i}});
        p.w.pump();
        REQUIRE(p.a.d.next_cqe(p.a.scq));
        CHECK(qa->rc.ack_timer == first);  // reused, not removed and added again
    }
    // Idle past the timeout: the timer ends without a retransmission.
    p.w.advance(2'000'000'000);
    CHECK(qa->rc.ack_timer == 0);
    CHECK(qa->rc.retransmits == 0);
    CHECK(p.w.a.dev.qcounters.get(qa->counter_set, hca::QCounter::LocalAckTimeoutErr) == 0);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {4}});
    p.w.pump();
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    CHECK(qa->rc.ack_timer != 0);
    CHECK(qa->rc.ack_timer != first);
    for (uint8_t i = 1; i <= 4; ++i) {
        auto rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(p.b.mem(p.b.mr.iova + (i - 1) * 64, 1)[0] == i);
    }
}

TEST_CASE("RC requester: a fenced WQE blocks the send queue until the READ before it is answered", "[rc]") {
    Pair p;
    TraceCapture t(p.w.a.dev, hca::kTrQp | hca::kTrWqe);
    const hca::Qp *qa = p.w.a.dev.qps.find(p.qa.qpn);
    p.b.fill(p.b.mr.iova + 8192, 64, 21);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 64);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaRead,
                           .sges = {{p.a.mr.key, p.a.mr.iova, 64}},
                           .raddr = p.b.mr.iova + 8192,
                           .rkey = p.b.mr.key});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {3}, .fence = 2});
    // The read response is lost: the SEND stays behind its fence.
    p.w.pump([](bool from_a, uint64_t) { return !from_a; });
    CHECK(qa->rc.req == hca::ReqState::Blocked);
    CHECK(qa->rc.ack_timer != 0);  // the READ is still being waited for
    CHECK(qa->rc.pending.size() == 1);
    CHECK(!p.b.d.next_cqe(p.b.rcq));
    // The local ACK timeout resends the READ; its answer releases the SEND.
    p.w.advance(2'000'000'000);
    auto read = p.a.d.next_cqe(p.a.scq);
    REQUIRE(read);
    CHECK(be32(*read, 0x38) >> 24 == hca::kWqeRdmaRead);
    CHECK(p.a.same(p.a.mr.iova, 64, 21));
    auto send = p.a.d.next_cqe(p.a.scq);
    REQUIRE(send);
    CHECK(be32(*send, 0x38) >> 24 == hca::kWqeSend);
    REQUIRE(p.b.d.next_cqe(p.b.rcq));
    CHECK(qa->rc.req == hca::ReqState::Idle);
    const std::string qpn = fmt::format("qpn=0x{:x}", p.qa.qpn);
    CHECK(t.lines({"qp requester", qpn, "from=blocked to=sending", "local ACK timeout"}).size() == 1);
    // Blocked before the timeout, and again behind the resent READ.
    CHECK(t.lines({"qp requester", qpn, "from=wait-ack to=blocked", "fenced WQE"}).size() == 2);
    CHECK(t.lines({"qp requester", qpn, "from=blocked to=idle", "answered"}).size() == 1);
}

TEST_CASE("RC loss: every 5th packet dropped, data still correct (go-back-N)", "[rc]") {
    Pair p;
    auto drop = [](bool, uint64_t n) { return n % 5 == 2; };
    p.a.fill(p.a.mr.iova, 16384, 5);
    for (int i = 0; i < 4; ++i) {
        p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova + i * 16384, 16384);
    }
    for (int i = 0; i < 4; ++i) {
        p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 10000}}});
    }
    p.w.advance(3'000'000'000, drop);
    int recv = 0, sent = 0;
    while (auto c = p.b.d.next_cqe(p.b.rcq)) {
        CHECK(op(*c) == hca::kCqeRespSend);
        CHECK(be32(*c, 0x2c) == 10000);
        ++recv;
    }
    while (auto c = p.a.d.next_cqe(p.a.scq)) {
        INFO("syndrome " << int((*c)[0x37]));
        CHECK(op(*c) == hca::kCqeReq);
        ++sent;
    }
    CHECK(recv == 4);
    CHECK(sent == 4);
    for (int i = 0; i < 4; ++i) {
        CHECK(p.b.same(p.b.mr.iova + i * 16384, 10000, 5));
    }
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->rc.retransmits > 0);
    CHECK(p.w.dropped > 0);
}

TEST_CASE("RC: a dead peer exhausts the retry count", "[rc]") {
    Pair p(hca::kQpRc, 2, 7);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {1}});
    p.w.advance(5'000'000'000, [](bool from_a, uint64_t) { return from_a; });  // nothing reaches b
    auto e = p.a.d.next_cqe(p.a.scq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndTransportRetryExc);
    CHECK((*e)[0x36] == 0x81);  // vendor_err_synd
    // The requester gave up and holds no timer; a reset makes it new.
    const hca::Qp *qa = p.w.a.dev.qps.find(p.qa.qpn);
    CHECK(qa->rc.req == hca::ReqState::Error);
    CHECK(qa->rc.ack_timer == 0);
    CHECK(qa->rc.rnr_timer == 0);
    REQUIRE(p.a.d.modify_qp(hca::kOp2RstQp, p.qa.qpn).status == 0);
    CHECK(qa->rc.req == hca::ReqState::Idle);
    CHECK(qa->rc.pending.empty());
    CHECK(qa->rc.ack_timer == 0);
}

TEST_CASE("RC remote access error: bad rkey on the requester, both sides in error", "[rc]") {
    Pair p;
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 16}},
                           .raddr = p.b.mr.iova, .rkey = p.b.mr.key ^ 0x100});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {1}});
    p.w.pump();
    auto e = p.a.d.next_cqe(p.a.scq);
    REQUIRE(e);
    CHECK(op(*e) == hca::kCqeReqErr);
    CHECK((*e)[0x37] == hca::kSyndRemoteAccess);
    CHECK((*e)[0x36] == 0x88);  // vendor_err_synd
    auto f = p.a.d.next_cqe(p.a.scq);
    REQUIRE(f);
    CHECK((*f)[0x37] == hca::kSyndWrFlush);
    CHECK((*f)[0x36] == 0xf9);  // vendor_err_synd
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->state == hca::QpState::Err);
    CHECK(p.w.b.dev.qps.find(p.qb.qpn)->state == hca::QpState::Err);
    // A read past the end of the remote region is refused the same way.
    Pair q;
    q.a.d.post_send(q.qa, {.opcode = hca::kWqeRdmaRead, .sges = {{q.a.mr.key, q.a.mr.iova, 64}},
                           .raddr = q.b.mr.iova + 65536 - 32, .rkey = q.b.mr.key});
    q.w.pump();
    e = q.a.d.next_cqe(q.a.scq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndRemoteAccess);
    CHECK((*e)[0x36] == 0x88);  // vendor_err_synd
}

TEST_CASE("RC responder errors without a receive completion raise an affiliated async error on its QP",
          "[rc][eq]") {
    // Async EQs subscribed to Invalid Request (0x10) and Local Access
    // Violation (0x11) Work Queue Errors, as mlx5_core's async EQ is.
    const std::array<uint64_t, 4> wq_errors{uint64_t{3} << hca::kEventWqInvalReq, 0, 0, 0};
    auto qp_of = [](const Eqe &e) { return hca::load_be32(e.data() + 0x20 + 0x18) & 0xffffff; };

    // RDMA WRITE through a bad rkey: the requester has its error CQE, the
    // responder's QP an access violation event.
    Pair p;
    auto aeq_a = p.a.d.create_eq(4, 1, wq_errors, p.a.uar);
    auto aeq_b = p.b.d.create_eq(4, 1, wq_errors, p.b.uar);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 16}},
                           .raddr = p.b.mr.iova, .rkey = p.b.mr.key ^ 0x100});
    p.w.pump();
    auto e = p.a.d.next_cqe(p.a.scq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndRemoteAccess);
    CHECK((*e)[0x36] == 0x88);  // vendor_err_synd
    auto ev = p.b.d.next_eqe(aeq_b);
    REQUIRE(ev);
    CHECK((*ev)[1] == hca::kEventWqAccessErr);
    CHECK(qp_of(*ev) == p.qb.qpn);
    CHECK(!p.b.d.next_eqe(aeq_b));
    CHECK(!p.a.d.next_eqe(aeq_a));  // the requester's error is its CQE

    // A misaligned atomic is an invalid request.
    Pair q;
    auto aeq_q = q.b.d.create_eq(4, 1, wq_errors, q.b.uar);
    q.a.d.post_send(q.qa, {.opcode = hca::kWqeAtomicFa, .sges = {{q.a.mr.key, q.a.mr.iova, 8}},
                           .raddr = q.b.mr.iova + 4, .rkey = q.b.mr.key, .swap_add = 1});
    q.w.pump();
    e = q.a.d.next_cqe(q.a.scq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndRemoteInvalReq);
    CHECK((*e)[0x36] == 0x8a);  // vendor_err_synd
    ev = q.b.d.next_eqe(aeq_q);
    REQUIRE(ev);
    CHECK((*ev)[1] == hca::kEventWqInvalReq);
    CHECK(qp_of(*ev) == q.qb.qpn);

    // A SEND too long for its receive WQE is reported by the receive
    // completion, with no event.
    Pair r;
    auto aeq_r = r.b.d.create_eq(4, 1, wq_errors, r.b.uar);
    r.b.d.post_recv(r.qb, r.b.mr.key, r.b.mr.iova, 16);
    r.a.d.post_send(r.qa, {.opcode = hca::kWqeSend, .sges = {{r.a.mr.key, r.a.mr.iova, 64}}});
    r.w.pump();
    e = r.b.d.next_cqe(r.b.rcq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndLocalLength);
    CHECK((*e)[0x36] == 0x68);  // vendor_err_synd
    CHECK(!r.b.d.next_eqe(aeq_r));
}

TEST_CASE("UC: SEND and WRITE without acknowledgements", "[rc][uc]") {
    Pair p(hca::kQpUc);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 4096);
    p.a.fill(p.a.mr.iova, 2500, 1);
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 2500}}});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 2500}},
                           .raddr = p.b.mr.iova + 8192, .rkey = p.b.mr.key});
    p.w.pump();
    CHECK(p.a.d.next_cqe(p.a.scq));
    CHECK(p.a.d.next_cqe(p.a.scq));
    auto rc = p.b.d.next_cqe(p.b.rcq);
    REQUIRE(rc);
    CHECK(be32(*rc, 0x2c) == 2500);
    CHECK(p.b.same(p.b.mr.iova + 8192, 2500, 1));
    // A read on UC is a local QP operation error.
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaRead, .sges = {{p.a.mr.key, p.a.mr.iova, 8}},
                           .raddr = p.b.mr.iova, .rkey = p.b.mr.key});
    auto e = p.a.d.next_cqe(p.a.scq);
    REQUIRE(e);
    CHECK((*e)[0x37] == hca::kSyndLocalQpOp);
}

TEST_CASE("128-byte CQEs, plain (cqe_sz 1) and padded (cqe_sz 2, cqe_128_always)", "[rc][cq]") {
    const unsigned sz = GENERATE(1u, 2u);
    INFO("cqe_sz " << sz);
    Pair p;
    CmdResult r;
    CqHandle cq = p.a.d.create_cq(4, p.a.ceq.eqn, p.a.uar, &r, sz);
    REQUIRE(r.status == 0);
    for (uint64_t page : cq.pages) {
        for (unsigned e = 0; e < 4096 / 128; ++e) {
            std::memset(p.w.a.host.mem(page + e * 128, 64), 0xee, 64);  // the first halves
        }
    }
    QpHandle qa = p.a.d.create_qp(hca::kQpRc, p.a.pd, cq.cqn, cq.cqn, p.a.uar, 6, 6, &r);
    REQUIRE(r.status == 0);
    QpHandle qb = p.b.d.create_qp(hca::kQpRc, p.b.pd, p.b.scq.cqn, p.b.rcq.cqn, p.b.uar, 6, 6, &r);
    REQUIRE(r.status == 0);
    p.a.d.connect_qp(qa, qb.qpn, 2);
    p.b.d.connect_qp(qb, qa.qpn, 1);
    p.b.d.post_recv(qb, p.b.mr.key, p.b.mr.iova, 64);
    p.a.d.post_send(qa, {.opcode = hca::kWqeSend, .inline_data = {1, 2, 3}});
    p.w.pump();
    auto c = p.a.d.next_cqe(cq);  // read from the second half
    REQUIRE(c);
    CHECK(op(*c) == hca::kCqeReq);
    const uint8_t *first = p.w.a.host.mem(cq.pages[0], 64);
    CHECK(std::all_of(first, first + 64, [&](uint8_t b) { return b == (sz == 2 ? 0 : 0xee); }));
    auto q = Driver::inbox(hca::kOpQueryCq, 0, 16);
    ifc::set(q.data(), ifc::query_cq_in::cqn, cq.cqn);
    CHECK(p.a.d.exec(q, ifc::query_cq_out::size_bytes).get(ifc::in(ifc::query_cq_out::cq_context, ifc::cqc::cqe_sz)) ==
          sz);
    p.a.d.create_cq(4, p.a.ceq.eqn, p.a.uar, &r, 3);
    CHECK(r.status == 0x03);
}

TEST_CASE("a doorbell naming a WQE its doorbell record does not cover yet is a guest error", "[rc][uar]") {
    Pair p;
    const uint64_t before = p.w.a.dev.counters.guest_errors;
    p.a.d.ring_sq(p.qa, p.qa.sq_pi, 1, hca::kWqeNop);  // record 0, doorbell names WQE 0: rung too early
    CHECK(p.w.a.dev.counters.guest_errors == before + 1);
    // Posted properly, the doorbell is behind the record: no error.
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {1}});
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 64);
    p.w.pump();
    CHECK(p.w.a.dev.counters.guest_errors == before + 1);
}

TEST_CASE("RC: packets go to the link without CRCs unless the device is told to compute them", "[rc][link]") {
    for (const bool link_crcs : {false, true}) {
        INFO("link_crcs=" << link_crcs);
        Pair p(hca::kQpRc, 7, 7, link_crcs);
        p.a.fill(p.a.mr.iova, 3000, 5);
        p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 4096);
        p.a.d.run_on_doorbell = false;
        p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{p.a.mr.key, p.a.mr.iova, 3000}}});
        p.w.a.pump();
        REQUIRE(p.w.a.host.tx.size() == 3);  // MTU 1024
        std::vector<std::vector<uint8_t>> frames = p.w.a.host.tx;
        p.w.a.host.tx.clear();
        for (const auto &f : frames) {
            iba::link::FrameView fv;
            REQUIRE(iba::link::parse(f, fv));
            iba::PacketView v;
            if (link_crcs) {
                CHECK(fv.flags == 0);
                CHECK(iba::parse(fv.body, v) == iba::ParseError::None);
            } else {
                CHECK(fv.flags == iba::link::kNoCrcs);
                CHECK(hca::load_be32(&fv.body[fv.body.size() - 6]) == 0);
                CHECK(hca::load_be16(&fv.body[fv.body.size() - 2]) == 0);
                CHECK(iba::parse(fv.body, v) == iba::ParseError::BadVcrc);
                CHECK(iba::parse(fv.body, v, false) == iba::ParseError::None);
            }
        }
        // The first packet with its flag cleared and no CRCs is damaged on
        // the way; the others arrive as sent. The receiver drops the first,
        // and the requester's retransmission (go-back-N) delivers it.
        const uint64_t errors = p.w.b.dev.port(1).counters().rcv_errors;
        std::vector<uint8_t> bad = frames[0];
        bad[iba::link::kFlagsByte] = 0;
        if (link_crcs) {
            bad[bad.size() - 1] ^= 0x01;
        }
        p.w.b.dev.port_rx(1, bad.data(), bad.size());
        p.w.b.pump();
        CHECK(p.w.b.dev.port(1).counters().rcv_errors == errors + 1);
        for (const auto &f : frames) {
            p.w.b.dev.port_rx(1, f.data(), f.size());
        }
        p.w.pump();
        auto rc = p.b.d.next_cqe(p.b.rcq);
        REQUIRE(rc);
        CHECK(op(*rc) == hca::kCqeRespSend);
        CHECK(be32(*rc, 0x2c) == 3000);
        CHECK(p.b.same(p.b.mr.iova, 3000, 5));
    }
}
