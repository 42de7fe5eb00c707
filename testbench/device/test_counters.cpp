// Q counters: ALLOC/DEALLOC/QUERY_Q_COUNTER as mlx5_ib uses them (one set
// per port, one per rdma counter), a QP bound at RST2INIT or by RTS2RTS with
// COUNTER_SET_ID, and what the data path counts: requests served, RNR,
// sequence errors, timeouts and error CQEs by syndrome.
#include <catch2/catch.hpp>

#include "pair.h"

using namespace hcatest;
using hca::QCounter;
namespace ifc = hca::ifc;

namespace {

constexpr uint16_t kAlloc = 0x771, kDealloc = 0x772, kQuery = 0x773, kRts2Rts = 0x505;
constexpr uint32_t kOptCounterSetId = 1u << 25;

CmdResult alloc_set(Driver &d) {
    return d.exec(Driver::inbox(kAlloc, 0, ifc::alloc_q_counter_in::size_bytes), ifc::alloc_q_counter_out::size_bytes);
}

uint32_t new_set(Driver &d) {
    const CmdResult r = alloc_set(d);
    REQUIRE(r.status == 0);
    return static_cast<uint32_t>(r.get(ifc::alloc_q_counter_out::counter_set_id));
}

CmdResult query_set(Driver &d, uint32_t set, bool clear = false) {
    auto in = Driver::inbox(kQuery, 0, ifc::query_q_counter_in::size_bytes);
    ifc::set(in.data(), ifc::query_q_counter_in::counter_set_id, set);
    ifc::set(in.data(), ifc::query_q_counter_in::clear, clear);
    return d.exec(in, ifc::query_q_counter_out::size_bytes);
}

CmdResult dealloc_set(Driver &d, uint32_t set) {
    auto in = Driver::inbox(kDealloc, 0, ifc::dealloc_q_counter_in::size_bytes);
    ifc::set(in.data(), ifc::dealloc_q_counter_in::counter_set_id, set);
    return d.exec(in, ifc::dealloc_q_counter_out::size_bytes);
}

// RTS2RTS with COUNTER_SET_ID, as mlx5_ib binds an RTS QP to a counter.
CmdResult bind(Driver &d, uint32_t qpn, uint32_t set) {
    return d.modify_qp(
        kRts2Rts, qpn,
        [&](std::vector<uint8_t> &in) {
            ifc::set(in.data(), ifc::in(ifc::rts2rts_qp_in::qpc, ifc::qpc::counter_set_id), set);
        },
        kOptCounterSetId);
}

// Both QPs of a pair bound to a fresh set on their device.
struct CountedPair : Pair {
    uint32_t sa = 0, sb = 0;
    explicit CountedPair(uint8_t rnr_retry = 7) : Pair(hca::kQpRc, 7, rnr_retry) {
        sa = new_set(a.d);
        sb = new_set(b.d);
        REQUIRE(bind(a.d, qa.qpn, sa).status == 0);
        REQUIRE(bind(b.d, qb.qpn, sb).status == 0);
    }
    uint32_t ca(QCounter c) const { return w.a.dev.qcounters.get(sa, c); }
    uint32_t cb(QCounter c) const { return w.b.dev.qcounters.get(sb, c); }
};

}  // namespace

TEST_CASE("Q counter sets: allocated from 1 up to max_qp_cnt, queried, cleared, freed", "[counters]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t max = static_cast<uint32_t>(b.dev.fw.caps().gen(ifc::cmd_hca_cap::max_qp_cnt));
    REQUIRE(max == 255);
    std::set<uint32_t> sets;
    for (uint32_t i = 0; i < max; ++i) {
        sets.insert(new_set(d));
    }
    CHECK(sets.size() == max);
    CHECK(*sets.begin() == 1);
    CHECK(*sets.rbegin() == max);
    CHECK(alloc_set(d).status == 0x0f);  // NO_RESOURCES
    CHECK(dealloc_set(d, 7).status == 0);
    CHECK(dealloc_set(d, 7).status == 0x03);  // no longer allocated
    CHECK(query_set(d, 7).status == 0x03);
    CHECK(query_set(d, 0).status == 0x03);
    CHECK(new_set(d) == 7);

    // A query returns the counts; with clear it zeroes them.
    b.dev.qcounters.add(3, QCounter::OutOfSequence, 5);
    b.dev.qcounters.add(3, QCounter::ReqCqeError);
    CmdResult r = query_set(d, 3, true);
    REQUIRE(r.status == 0);
    CHECK(r.get(ifc::query_q_counter_out::out_of_sequence) == 5);
    CHECK(r.get(ifc::query_q_counter_out::req_cqe_error) == 1);
    r = query_set(d, 3);
    CHECK(r.get(ifc::query_q_counter_out::out_of_sequence) == 0);

    // Another vport's counters or an aggregate are not offered.
    auto in = Driver::inbox(kQuery, 0, ifc::query_q_counter_in::size_bytes);
    ifc::set(in.data(), ifc::query_q_counter_in::other_vport, 1);
    ifc::set(in.data(), ifc::query_q_counter_in::counter_set_id, 3);
    CHECK(d.exec(in, ifc::query_q_counter_out::size_bytes).status == 0x03);

    // Teardown: nothing survives.
    CHECK(d.exec(Driver::inbox(hca::kOpTeardownHca, 0, 16), 16).status == 0);
    CHECK(b.dev.qcounters.count() == 0);
}

TEST_CASE("Q counters: a QP counts into the set it is bound to; binding to a free set is refused", "[counters]") {
    Pair p;
    const uint32_t set = new_set(p.a.d);
    CmdResult r = bind(p.a.d, p.qa.qpn, set + 1);
    CHECK(r.status == 0x03);
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->counter_set == 0);
    REQUIRE(bind(p.a.d, p.qa.qpn, set).status == 0);
    CHECK(p.w.a.dev.qps.find(p.qa.qpn)->counter_set == set);
    // QUERY_QP reports it.
    auto in = Driver::inbox(0x50b, 0, ifc::query_qp_in::size_bytes);
    ifc::set(in.data(), ifc::query_qp_in::qpn, p.qa.qpn);
    r = p.a.d.exec(in, ifc::query_qp_out::size_bytes);
    REQUIRE(r.status == 0);
    CHECK(r.get(ifc::in(ifc::query_qp_out::qpc, ifc::qpc::counter_set_id)) == set);
    // A freed set stops counting; the QP can still be modified.
    REQUIRE(dealloc_set(p.a.d, set).status == 0);
    p.w.a.dev.qcounters.add(set, QCounter::OutOfBuffer);
    CHECK(p.w.a.dev.qcounters.get(set, QCounter::OutOfBuffer) == 0);
    CHECK(p.a.d.modify_qp(0x507, p.qa.qpn).status == 0);
}

TEST_CASE("Q counters: requests served and the responder's and requester's errors", "[counters]") {
    CountedPair p;
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 3000}},
                           .raddr = p.b.mr.iova, .rkey = p.b.mr.key});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaRead, .sges = {{p.a.mr.key, p.a.mr.iova, 5000}},
                           .raddr = p.b.mr.iova, .rkey = p.b.mr.key});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeAtomicFa, .sges = {{p.a.mr.key, p.a.mr.iova + 8192, 8}},
                           .raddr = p.b.mr.iova + 64, .rkey = p.b.mr.key, .swap_add = 1});
    p.w.pump();
    for (int i = 0; i < 3; ++i) {
        auto c = p.a.d.next_cqe(p.a.scq);
        REQUIRE(c);
        CHECK(op(*c) == hca::kCqeReq);
    }
    CHECK(p.cb(QCounter::RxWriteRequests) == 1);  // one message of three packets
    CHECK(p.cb(QCounter::RxReadRequests) == 1);
    CHECK(p.cb(QCounter::RxAtomicRequests) == 1);
    CHECK(p.ca(QCounter::RxWriteRequests) == 0);
    CHECK(p.ca(QCounter::ReqCqeError) == 0);

    // A bad rkey: remote access error on both sides, the next WR flushed.
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 16}},
                           .raddr = p.b.mr.iova, .rkey = p.b.mr.key ^ 0x100});
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {1}});
    p.w.pump();
    CHECK(p.ca(QCounter::ReqRemoteAccessErrors) == 1);
    CHECK(p.ca(QCounter::ReqCqeError) == 1);
    CHECK(p.ca(QCounter::ReqCqeFlushError) == 1);
    CHECK(p.cb(QCounter::RespRemoteAccessErrors) == 1);
    CHECK(p.cb(QCounter::RespCqeError) == 0);  // no receive WQE was in use
    CHECK(p.cb(QCounter::RxWriteRequests) == 2);

    // A SEND longer than its receive WQE: local length on the responder,
    // invalid request on the requester.
    CountedPair q;
    q.b.d.post_recv(q.qb, q.b.mr.key, q.b.mr.iova, 16);
    q.a.d.post_send(q.qa, {.opcode = hca::kWqeSend, .sges = {{q.a.mr.key, q.a.mr.iova, 64}}});
    q.w.pump();
    CHECK(q.cb(QCounter::RespLocalLengthError) == 1);
    CHECK(q.cb(QCounter::RespCqeError) == 1);
    CHECK(q.cb(QCounter::RespRemoteInvalidRequest) == 1);
    CHECK(q.ca(QCounter::ReqRemoteInvalidRequest) == 1);
    CHECK(q.ca(QCounter::ReqCqeError) == 1);
}

TEST_CASE("Q counters: RNR NAKs, then the RNR retries exceeded", "[counters]") {
    CountedPair p;
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {1, 2, 3, 4}});
    p.w.advance(2'000'000);
    p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 64);
    p.w.advance(2'000'000);
    REQUIRE(p.a.d.next_cqe(p.a.scq));
    const uint32_t naks = p.ca(QCounter::RnrNakRetryErr);
    CHECK(naks >= 1);
    CHECK(p.cb(QCounter::OutOfBuffer) == naks);  // each RNR NAK: a message with no receive WQE
    CHECK(p.cb(QCounter::DuplicateRequest) == 0);

    CountedPair q(2);
    q.a.d.post_send(q.qa, {.opcode = hca::kWqeSend, .inline_data = {9}});
    q.w.advance(20'000'000);
    REQUIRE(q.a.d.next_cqe(q.a.scq));
    CHECK(q.ca(QCounter::RnrNakRetryErr) == 2);
    CHECK(q.ca(QCounter::ReqRnrRetriesExceeded) == 1);
    CHECK(q.ca(QCounter::ReqCqeError) == 1);
    CHECK(q.cb(QCounter::OutOfBuffer) == 3);
}

TEST_CASE("Q counters: loss counts out-of-sequence requests, sequence NAKs and ACK timeouts", "[counters]") {
    CountedPair p;
    auto drop = [](bool, uint64_t n) { return n % 7 == 3; };
    for (int i = 0; i < 4; ++i) {
        p.a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{p.a.mr.key, p.a.mr.iova, 10000}},
                               .raddr = p.b.mr.iova + i * 10000, .rkey = p.b.mr.key});
    }
    p.w.advance(5'000'000'000, drop);
    int done = 0;
    while (auto c = p.a.d.next_cqe(p.a.scq)) {
        CHECK(op(*c) == hca::kCqeReq);
        ++done;
    }
    CHECK(done == 4);
    CHECK(p.cb(QCounter::RxWriteRequests) == 4);  // each message counted once, retransmissions not
    CHECK(p.cb(QCounter::OutOfSequence) > 0);
    CHECK(p.ca(QCounter::PacketSeqErr) + p.ca(QCounter::LocalAckTimeoutErr) > 0);
    CHECK(p.ca(QCounter::PacketSeqErr) <= p.cb(QCounter::OutOfSequence));

    // A lost ACK: the requester times out and resends, the responder sees
    // a duplicate.
    CountedPair q;
    q.a.d.post_send(q.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{q.a.mr.key, q.a.mr.iova, 16}},
                           .raddr = q.b.mr.iova, .rkey = q.b.mr.key});
    bool dropped = false;
    q.w.advance(3'000'000'000, [&](bool from_a, uint64_t) {
        if (!from_a && !dropped) {
            dropped = true;
            return true;
        }
        return false;
    });
    REQUIRE(q.a.d.next_cqe(q.a.scq));
    CHECK(q.ca(QCounter::LocalAckTimeoutErr) == 1);
    CHECK(q.cb(QCounter::DuplicateRequest) == 1);
    CHECK(q.cb(QCounter::RxWriteRequests) == 1);
}
