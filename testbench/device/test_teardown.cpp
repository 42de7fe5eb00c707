// Teardown and reset like firmware: TEARDOWN_HCA, DISABLE_HCA, a re-enable
// and a function reset (FLR, QEMU reset) destroy every object and timer the
// driver left, with RC traffic and retransmissions in flight, and nothing of
// the old function touches the host afterwards: every DMA, MSI-X message
// and frame the device makes after the command completed is recorded and
// the test fails on any.
#include <catch2/catch.hpp>

#include <string>

#include "expect.h"
#include "pair.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

// A's side busy in every way that involves a timer or later DMA: an RC QP
// with unacknowledged SEND/WRITE/READ (B sees none of A's packets, so A's
// ACK timer is armed), B retransmitting a SEND to A (whose receive is
// posted), a UD QP in the error state (its flush timer polls the doorbell
// record), a moderated CQ with a pending moderation timer, an SRQ.
struct Busy {
    Pair p;
    QpHandle ud;
    Busy() {
        Node &a = p.a;
        a.d.post_recv(p.qa, a.mr.key, a.mr.iova + 32768, 4096);
        p.b.d.post_recv(p.qb, p.b.mr.key, p.b.mr.iova, 16384);
        REQUIRE(a.d.moderate_cq(a.rcq, 1000, 64) == 0);
        CmdResult r = a.d.exec(Driver::inbox(hca::kOpAllocQCounter, 0, 16), 16);  // a Q counter set
        REQUIRE(r.status == 0);
        ud = a.d.create_qp(hca::kQpUd, a.pd, a.scq.cqn, a.rcq.cqn, a.uar, 4, 4, &r);
        REQUIRE(r.status == 0);
        a.d.ud_to_rts(ud, 0x11111111);
        REQUIRE(a.d.modify_qp(hca::kOp2ErrQp, ud.qpn).status == 0);
        a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .sges = {{a.mr.key, a.mr.iova, 9000}}});
        a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaWrite, .sges = {{a.mr.key, a.mr.iova, 20000}},
                             .raddr = p.b.mr.iova + 16384, .rkey = p.b.mr.key});
        a.d.post_send(p.qa, {.opcode = hca::kWqeRdmaRead, .sges = {{a.mr.key, a.mr.iova + 40000, 4000}},
                             .raddr = p.b.mr.iova, .rkey = p.b.mr.key});
        p.b.d.post_send(p.qb, {.opcode = hca::kWqeSend, .inline_data = {1, 2, 3, 4}});
        p.w.pump([](bool, uint64_t) { return true; });  // the wire loses everything for now
        const hca::Qp *qa = p.w.a.dev.qps.find(p.qa.qpn);
        REQUIRE(qa);
        REQUIRE(qa->rc.pending.size() == 3);
        REQUIRE(qa->rc.ack_timer != 0);
        REQUIRE(p.w.a.host.timer_deadline >= 0);
    }
};

std::string describe(const std::vector<FakeHost::Access> &acc) {
    std::string s;
    for (size_t i = 0; i < acc.size() && i < 8; ++i) {
        s += fmt::format("{} 0x{:x} len={}\n", acc[i].kind, acc[i].addr, acc[i].len);
    }
    return s;
}

uint8_t query_qp(Driver &d, uint32_t qpn) {
    auto in = Driver::inbox(hca::kOpQueryQp, 0, ifc::query_qp_in::size_bytes);
    ifc::set(in.data(), ifc::query_qp_in::qpn, qpn);
    return d.exec(in, ifc::query_qp_out::size_bytes).status;
}

}  // namespace

TEST_CASE("teardown and reset destroy every object and timer, nothing touches the host afterwards",
          "[hca][teardown]") {
    const char *how = GENERATE("TEARDOWN_HCA", "DISABLE_HCA", "ENABLE_HCA again", "function reset");
    INFO(how);
    Busy busy;
    Pair &p = busy.p;
    Bench &a = p.w.a;
    const std::string how_s = how;
    if (how_s == "function reset") {
        a.dev.reset();  // what FLR and a QEMU system reset do (hca_model_reset)
    } else {
        const uint16_t op = how_s == "TEARDOWN_HCA"  ? hca::kOpTeardownHca
                            : how_s == "DISABLE_HCA" ? hca::kOpDisableHca
                                                     : hca::kOpEnableHca;
        CHECK(p.a.d.exec(Driver::inbox(op, 0, 16), 16).status == 0);
    }
    a.host.recording = true;
    expect_no_objects(a.dev);
    CHECK(a.host.timer_deadline < 0);  // no timer of the old function is armed

    // The old driver's doorbells (SQ, CQ arm) still reach the BAR, B keeps
    // retransmitting to A, and seconds pass: all of it is dropped silently.
    p.a.d.post_send(p.qa, {.opcode = hca::kWqeSend, .inline_data = {7}});
    p.a.d.cq_arm(p.a.rcq);
    const uint64_t frames = p.w.frames;
    p.w.advance(1'000'000'000, [](bool, uint64_t) { return false; });  // counts frames, drops none
    CHECK(p.w.frames > frames);  // B's retransmissions did reach A
    INFO(describe(a.host.recorded));
    CHECK(a.host.recorded.empty());
    a.host.recording = false;

    // The driver starts over; the old QPN is gone.
    if (how_s == "TEARDOWN_HCA") {
        CHECK(query_qp(p.a.d, p.qa.qpn) == uint8_t(hca::Status::BadSysState));  // not initialized
    }
    p.a.d.bring_up();
    CHECK(query_qp(p.a.d, p.qa.qpn) == uint8_t(hca::Status::BadRes));
    CHECK(a.dev.qps.count() == 0);
}

TEST_CASE("TEARDOWN_HCA while RC traffic flows both ways: the peer's retransmissions end in retry exceeded",
          "[hca][teardown][rc]") {
    Busy busy;
    Pair &p = busy.p;
    CHECK(p.a.d.exec(Driver::inbox(hca::kOpTeardownHca, 0, 16), 16).status == 0);
    p.w.a.host.recording = true;
    // Long enough for all of B's retries at the local ACK timeout floor
    // (kAckTimeoutFloorNs, 500 ms each).
    p.w.advance(8'000'000'000);
    CHECK(p.w.a.host.recorded.empty());
    // B's SEND was never acknowledged: its requester gives up like against a dead node.
    auto e = p.b.d.next_cqe(p.b.scq);
    REQUIRE(e);
    CHECK(op(*e) == hca::kCqeReqErr);
    CHECK((*e)[0x37] == hca::kSyndTransportRetryExc);
}
