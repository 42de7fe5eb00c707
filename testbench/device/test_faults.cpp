// Fault injection (fault/faults.h, docs/FAULTS.md): the spec syntax and
// its refusals, the triggers (count, every, prob, for, after), and what each
// kind does to the device as a driver sees it: command status, delivery
// status, delay and silence; error CQEs and WQE fetch errors; lost CQEs,
// EQEs and MSI-X; health syndromes and a stalled counter; "initializing"
// after reset; page requests; affiliated, CQ and port events.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "be.h"
#include "driver.h"
#include "idle_ops.h"
#include "ud_setup.h"
#include "hcasim/hca_model.h"

using namespace hcatest;
namespace ifc = hca::ifc;
using hca::FaultKind;

namespace {

struct Setup : UdSetup {
    using UdSetup::UdSetup;
    std::string arm(const std::string &spec) { return b.dev.faults.command(spec); }
    // A CREATE_CQ through the command queue; its result.
    CmdResult create_cq() {
        CmdResult r;
        d.create_cq(4, ceq.eqn, uar, &r);
        return r;
    }
};

uint8_t cqe_opcode(const Cqe &c) { return c[63] >> 4; }

}  // namespace

TEST_CASE("fault specs: kinds, names, numbers and every refusal", "[fault]") {
    CHECK(hca::parse_fault("cmd-status:opcode=CREATE_CQ,status=BAD_PARAM,syndrome=0x1234").scope.opcode == 0x400);
    CHECK(hca::parse_fault("cmd-status:opcode=0x400,status=3").status == 3);
    CHECK(hca::parse_fault("CMD_DELIVERY:delivery=fw_internal_err").delivery == 6);
    const hca::Fault f = hca::parse_fault("error-cqe:qpn=0x48,syndrome=4,every=3,count=2,for=50,after=10");
    CHECK(f.scope.qpn == 0x48);
    CHECK(f.every == 3);
    CHECK(f.count == 2);
    CHECK(f.window_ns == 50'000'000);
    CHECK(f.after_ns == 10'000'000);
    CHECK(hca::parse_fault("lost-eqe:for=5").count == 0);  // a window without a count: all of it
    CHECK(hca::parse_fault("qp-event:qpn=7,type=last-wqe").type == hca::kEventSrqLastWqe);
    CHECK(hca::parse_fault("health-fatal").syndrome == hca::InitSeg::kSyndFwInternalErr);
    CHECK(hca::parse_fault("lost-msix:event=cmd").scope.event == hca::kEventCmd);
    CHECK(hca::parse_fault("lost-eqe:event=0xb").scope.event == hca::kEventPageRequest);
    for (const char *bad : {"", "no-such-kind", "cmd-status", "cmd-status:status=0", "cmd-status:opcode=NOPE,status=3",
                            "cmd-status:status=3,qpn=1", "cmd-delay:opcode=CREATE_CQ", "error-cqe:qpn=1",
                            "error-cqe:syndrome=4,qpn=0x1000000", "lost-eqe:every=0", "lost-eqe:prob=0",
                            "lost-eqe:prob=1.5", "lost-eqe:prob=x", "page-request:npages=0",
                            "page-request:npages=1,count=2", "qp-event:qpn=1", "qp-event:qpn=1,type=nope",
                            "port-event", "cq-error:cqn=1,syndrome=7", "lost-eqe:eqn", "lost-eqe:=3",
                            "lost-eqe:eqn=99999999999999999999999", "init-delay:ms=-1", "lost-eqe:event=bogus",
                            "cmd-drop:event=cmd"}) {
        CAPTURE(bad);
        CHECK_THROWS_AS(hca::parse_fault(bad), hca::FaultSpecError);
    }
}

TEST_CASE("fault commands: arm, list, clear, kinds; at most 64 armed", "[fault]") {
    Bench b;
    auto &t = b.dev.faults;
    CHECK(t.command("lost-eqe:eqn=3,count=0") == "ok armed 1\n");
    CHECK(t.command(" cmd-drop:opcode=NOP \n") == "ok armed 2\n");
    CHECK(t.command("bogus").starts_with("error no fault kind 'bogus'"));
    const std::string l = t.command("list");
    CHECK(l.find("1 lost-eqe:eqn=3,count=0 matches=0 fired=0") != std::string::npos);
    CHECK(l.find("2 cmd-drop:opcode=NOP") != std::string::npos);
    CHECK(t.armed(FaultKind::LostEqe));
    CHECK(t.command("clear 1") == "ok cleared 1\n");
    CHECK(!t.armed(FaultKind::LostEqe));
    CHECK(t.command("clear 1") == "error no fault 1\n");
    CHECK(t.command("clear") == "ok cleared 1\n");
    CHECK(t.command("kinds").find("health-fatal") != std::string::npos);
    for (int i = 0; i < 64; ++i) {
        REQUIRE(t.command("lost-msix").starts_with("ok"));
    }
    CHECK(t.command("lost-msix").starts_with("error 64 faults are armed already"));
}

TEST_CASE("fault triggers: every, count, scope, prob with a seed, a time window", "[fault]") {
    Bench b;
    auto &t = b.dev.faults;
    REQUIRE(t.command("lost-eqe:eqn=5,every=3,count=2").starts_with("ok"));
    std::string pattern;
    for (int i = 0; i < 12; ++i) {
        CHECK(!t.hit(FaultKind::LostEqe, {.eqn = 4}));  // out of scope: never a match
        pattern += t.hit(FaultKind::LostEqe, {.eqn = 5}) ? 'x' : '.';
    }
    CHECK(pattern == "..x..x......");
    CHECK(!t.armed(FaultKind::LostEqe));  // retired after its two firings

    // prob: the same seed draws the same matches.
    const auto draws = [&](const char *spec) {
        REQUIRE(t.command(spec).starts_with("ok"));
        std::string p;
        for (int i = 0; i < 64; ++i) {
            p += t.hit(FaultKind::LostMsix, {}) ? 'x' : '.';
        }
        t.clear_all();
        return p;
    };
    const std::string p1 = draws("lost-msix:prob=0.25,seed=7,count=0");
    CHECK(p1 == draws("lost-msix:prob=0.25,seed=7,count=0"));
    CHECK(p1 != draws("lost-msix:prob=0.25,seed=8,count=0"));
    const auto n = std::count(p1.begin(), p1.end(), 'x');
    CHECK(n > 4);
    CHECK(n < 32);

    // for=: every match inside the window, none after; after=: not before.
    REQUIRE(t.command("lost-cqe:after=10,for=20").starts_with("ok"));
    CHECK(!t.hit(FaultKind::LostCqe, {}));
    b.advance(10'000'000);
    CHECK(t.hit(FaultKind::LostCqe, {}));
    CHECK(t.hit(FaultKind::LostCqe, {}));
    b.advance(20'000'000);
    CHECK(!t.hit(FaultKind::LostCqe, {}));
    CHECK(!t.armed(FaultKind::LostCqe));  // expired
}

TEST_CASE("cmd-status: the next CREATE_CQ fails with the chosen status and syndrome, unexecuted", "[fault][cmd]") {
    Setup s;
    REQUIRE(s.arm("cmd-status:opcode=CREATE_CQ,status=BAD_RES_STATE,syndrome=0xabc123") == "ok armed 1\n");
    const uint64_t cqs = s.b.dev.cqs.info().size();
    const auto nop = s.d.exec(Driver::inbox(hca::kOpNop, 0, 16), 16);  // another opcode: untouched
    CHECK(nop.status == 0);
    const CmdResult r = s.create_cq();
    CHECK(r.completed);
    CHECK(r.delivery == 0);
    CHECK(r.status == 0x09);
    CHECK(r.syndrome == 0xabc123);
    CHECK(s.b.dev.cqs.info().size() == cqs);  // no CQ was made
    CHECK(s.create_cq().status == 0);         // one-shot
}

TEST_CASE("cmd-delivery: the delivery status of status_own, nothing executed", "[fault][cmd]") {
    Setup s;
    REQUIRE(s.arm("cmd-delivery:opcode=CREATE_CQ,delivery=FW_INTERNAL_ERR").starts_with("ok"));
    const CmdResult r = s.create_cq();
    CHECK(r.completed);
    CHECK(r.delivery == 0x06);
    CHECK(s.create_cq().delivery == 0);
}

TEST_CASE("cmd-drop: no completion, the slot stays the device's; the next command on it works", "[fault][cmd]") {
    Setup s;
    REQUIRE(s.arm("cmd-drop:opcode=NOP").starts_with("ok"));
    const uint64_t eqes = s.b.dev.counters.eqes;
    s.d.post(5, Driver::inbox(hca::kOpNop, 0, 16), 16);
    s.d.ring(1u << 5);
    s.b.pump();
    s.b.advance(1'000'000'000);
    CHECK(!s.d.result(5).completed);
    CHECK(s.b.dev.counters.eqes == eqes);
    // The driver gives up on it and uses the slot again (cmd.c after a timeout).
    const CmdResult r = s.d.exec(Driver::inbox(hca::kOpNop, 0, 16), 16, 5);
    CHECK(r.completed);
    CHECK(r.status == 0);
}

TEST_CASE("cmd-delay: executed now, completed ms later; a reset first drops the completion", "[fault][cmd]") {
    Setup s;
    REQUIRE(s.arm("cmd-delay:opcode=NOP,ms=30").starts_with("ok"));
    s.d.post(2, Driver::inbox(hca::kOpNop, 0, 16), 16);
    s.d.ring(1u << 2);
    s.b.pump();
    CHECK(!s.d.result(2).completed);
    s.b.advance(29'000'000);
    CHECK(!s.d.result(2).completed);
    s.b.advance(1'000'000);
    CHECK(s.d.result(2).completed);
    CHECK(s.d.result(2).status == 0);

    REQUIRE(s.arm("cmd-delay:opcode=NOP,ms=30").starts_with("ok"));
    s.d.post(3, Driver::inbox(hca::kOpNop, 0, 16), 16);
    s.d.ring(1u << 3);
    s.b.pump();
    s.b.dev.reset();
    s.b.host.recording = true;
    s.b.advance(100'000'000);
    CHECK(s.b.host.recorded.empty());  // nothing DMA'd after the reset
    CHECK(!s.d.result(3).completed);
}

TEST_CASE("error-cqe: the QP's next send completes in error with the syndrome; the QP flushes", "[fault][dp]") {
    Setup s;
    auto a = s.ud(0x11);
    auto other = s.ud(0x22);
    const uint64_t buf = s.b.host.alloc(64, 64);
    REQUIRE(s.arm(fmt::format("error-cqe:qpn={},syndrome=0x4", a.qpn)).starts_with("ok"));
    s.d.post_ud_send(other, 5, a.qpn, 0x11, {{s.lkey, buf, 16}});  // another QP: not touched
    auto ok = s.d.next_cqe(s.scq);
    REQUIRE(ok);
    CHECK(cqe_opcode(*ok) == hca::kCqeReq);
    s.d.post_ud_send(a, 5, other.qpn, 0x22, {{s.lkey, buf, 16}});
    s.d.post_ud_send(a, 5, other.qpn, 0x22, {{s.lkey, buf, 16}});
    auto e = s.d.next_cqe(s.scq);
    REQUIRE(e);
    CHECK(cqe_opcode(*e) == hca::kCqeReqErr);
    CHECK((*e)[0x37] == 0x4);  // local protection
    CHECK((*e)[0x36] == 0x52);  // its vendor syndrome on a requester
    auto flushed = s.d.next_cqe(s.scq);
    REQUIRE(flushed);
    CHECK(cqe_opcode(*flushed) == hca::kCqeReqErr);
    CHECK((*flushed)[0x37] == hca::kSyndWrFlush);
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Sqer);  // UD: SQ error
    CHECK(s.b.dev.qps.find(other.qpn)->state == hca::QpState::Rts);
}

TEST_CASE("wqe-dma-error: the fetch fails, the QP goes to error with a catastrophic event", "[fault][dp]") {
    Setup s;
    auto a = s.ud(0x11);
    auto aeq = s.d.create_eq(4, 1, {1ull << hca::kEventWqCatastrophic, 0, 0, 0}, s.uar);
    const uint64_t buf = s.b.host.alloc(64, 64);
    REQUIRE(s.arm(fmt::format("wqe-dma-error:qpn={}", a.qpn)).starts_with("ok"));
    s.d.post_ud_send(a, 5, a.qpn, 0x11, {{s.lkey, buf, 16}});
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Err);
    auto e = s.d.next_eqe(aeq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventWqCatastrophic);
    CHECK((hca::load_be32(e->data() + 0x38) & 0xffffff) == a.qpn);
    // The WR it could not read is flushed, not completed.
    auto c = s.d.next_cqe(s.scq);
    REQUIRE(c);
    CHECK(cqe_opcode(*c) == hca::kCqeReqErr);
    CHECK((*c)[0x37] == hca::kSyndWrFlush);
}

TEST_CASE("lost-cqe, lost-eqe, lost-msix: the driver is not told", "[fault][dp]") {
    Setup s;
    auto a = s.ud(0x11);
    const uint64_t buf = s.b.host.alloc(64, 64);
    s.d.cq_arm(s.scq);
    REQUIRE(s.arm(fmt::format("lost-cqe:cqn={}", s.scq.cqn)).starts_with("ok"));
    s.d.post_ud_send(a, 5, a.qpn, 0x11, {{s.lkey, buf, 16}});
    CHECK(!s.d.next_cqe(s.scq));
    const unsigned irqs = s.b.host.msix[3];
    s.d.post_ud_send(a, 5, a.qpn, 0x11, {{s.lkey, buf, 16}});
    REQUIRE(s.d.next_cqe(s.scq));  // the next one is written
    CHECK(s.b.host.msix[3] == irqs + 1);

    // Each step: the EQ and the CQ armed again, a fault armed, one SEND;
    // returns whether its completion EQE was written.
    auto step = [&](const std::string &spec) {
        while (s.d.next_eqe(s.ceq)) {
        }
        REQUIRE(s.b.dev.faults.command("clear").starts_with("ok"));
        s.d.eq_doorbell(s.ceq, true);
        s.b.pump();
        s.d.cq_arm(s.scq);
        REQUIRE(s.arm(spec).starts_with("ok"));
        s.d.post_ud_send(a, 5, a.qpn, 0x11, {{s.lkey, buf, 16}});
        REQUIRE(s.d.next_cqe(s.scq));
        return s.d.next_eqe(s.ceq).has_value();
    };
    // lost-eqe: scoped to another CQ, it spares this one's EQE; scoped to
    // the EQ, no EQE and no MSI-X.
    CHECK(step(fmt::format("lost-eqe:event=comp,cqn={}", s.rcq.cqn)));
    CHECK(s.b.host.msix[3] == irqs + 2);
    CHECK(!step(fmt::format("lost-eqe:eqn={}", s.ceq.eqn)));
    CHECK(s.b.host.msix[3] == irqs + 2);
    // lost-msix: the EQE is there, the interrupt is not, and the EQ is
    // disarmed as if it had been sent. Scoped to another CQ, it waits.
    CHECK(step(fmt::format("lost-msix:cqn={}", s.rcq.cqn)));
    CHECK(s.b.host.msix[3] == irqs + 3);
    CHECK(step(fmt::format("lost-msix:cqn={}", s.scq.cqn)));
    CHECK(s.b.host.msix[3] == irqs + 3);
    CHECK(!s.b.dev.eqs.find(s.ceq.eqn)->armed);
}

TEST_CASE("cqe-delay: the CQE and every later one of its CQ are written ms later, in order", "[fault][dp]") {
    Setup s;
    auto a = s.ud(0x11);
    auto other = s.ud(0x22);
    const uint64_t buf = s.b.host.alloc(64, 64);
    while (s.d.next_eqe(s.ceq)) {
    }
    s.d.eq_doorbell(s.ceq, true);
    s.b.pump();
    s.d.cq_arm(s.scq);
    const unsigned irqs = s.b.host.msix[3];
    REQUIRE(s.arm(fmt::format("cqe-delay:qpn={},ms=20", a.qpn)).starts_with("ok"));
    s.d.post_ud_send(other, 5, a.qpn, 0x11, {{s.lkey, buf, 16}});  // another QP first: not held
    auto first = s.d.next_cqe(s.scq);
    REQUIRE(first);
    CHECK((hca::load_be32(first->data() + 0x38) & 0xffffff) == other.qpn);
    const unsigned after_first = s.b.host.msix[3];
    CHECK(after_first == irqs + 1);
    while (s.d.next_eqe(s.ceq)) {
    }
    s.d.eq_doorbell(s.ceq, true);
    s.b.pump();
    s.d.cq_arm(s.scq);
    s.d.post_ud_send(a, 5, other.qpn, 0x22, {{s.lkey, buf, 16}});      // held
    s.d.post_ud_send(other, 5, a.qpn, 0x11, {{s.lkey, buf, 16}});      // held behind it (CQ order)
    s.d.post_ud_send(a, 5, other.qpn, 0x22, {{s.lkey, buf, 16}});      // held
    const int64_t completed_at = s.b.host.clock;
    CHECK(!s.d.next_cqe(s.scq));
    CHECK(s.b.host.msix[3] == after_first);  // no CQE, no event
    CHECK(s.b.dev.cqs.info().find("held=3") != std::string::npos);
    s.b.advance(19'000'000);
    CHECK(!s.d.next_cqe(s.scq));
    s.b.advance(1'000'000);
    const uint32_t order[] = {a.qpn, other.qpn, a.qpn};
    for (uint32_t qpn : order) {
        auto c = s.d.next_cqe(s.scq);
        REQUIRE(c);
        CHECK(cqe_opcode(*c) == hca::kCqeReq);
        CHECK((hca::load_be32(c->data() + 0x38) & 0xffffff) == qpn);
        // Stamped when the work completed, not 20 ms later when written.
        CHECK(hca::load_be64(c->data() + 0x30) == static_cast<uint64_t>(completed_at));
    }
    CHECK(s.b.host.msix[3] == after_first + 1);  // the arm's one event, when they are written
    CHECK(s.b.dev.cqs.info().find("held=") == std::string::npos);
    // One-shot: the next completion is on time.
    s.d.post_ud_send(a, 5, other.qpn, 0x22, {{s.lkey, buf, 16}});
    CHECK(s.d.next_cqe(s.scq));

    // A reset while CQEs are held: nothing is written after it.
    REQUIRE(s.arm(fmt::format("cqe-delay:cqn={},ms=50", s.scq.cqn)).starts_with("ok"));
    s.d.post_ud_send(a, 5, other.qpn, 0x22, {{s.lkey, buf, 16}});
    CHECK(!s.d.next_cqe(s.scq));
    s.b.dev.reset();
    s.b.host.recording = true;
    s.b.advance(100'000'000);
    CHECK(s.b.host.recorded.empty());
}

TEST_CASE("cqe-delay: a destroyed CQ takes its held CQEs with it; the spec needs ms=", "[fault][dp]") {
    Setup s;
    auto cq = s.d.create_cq(4, s.ceq.eqn, s.uar);
    CmdResult r;
    auto qp = s.d.create_qp(hca::kQpUd, s.pd, cq.cqn, s.rcq.cqn, s.uar, 4, 4, &r);
    REQUIRE(r.status == 0);
    s.d.ud_to_rts(qp, 0x11);
    const uint64_t buf = s.b.host.alloc(64, 64);
    CHECK(s.arm("cqe-delay:qpn=0x10").starts_with("error cqe-delay needs ms="));
    REQUIRE(s.arm(fmt::format("cqe-delay:cqn={},ms=10", cq.cqn)).starts_with("ok"));
    s.d.post_ud_send(qp, 5, qp.qpn, 0x11, {{s.lkey, buf, 16}});
    CHECK(!s.d.next_cqe(cq));
    REQUIRE(s.d.modify_qp(hca::kOp2RstQp, qp.qpn).status == 0);
    auto destroy = Driver::inbox(hca::kOpDestroyQp, 0, 16);
    ifc::set(destroy.data(), ifc::destroy_qp_in::qpn, qp.qpn);
    REQUIRE(s.d.exec(destroy, 16).status == 0);
    auto dcq = Driver::inbox(hca::kOpDestroyCq, 0, 16);
    ifc::set(dcq.data(), ifc::destroy_cq_in::cqn, cq.cqn);
    REQUIRE(s.d.exec(dcq, 16).status == 0);
    s.b.host.recording = true;
    s.b.advance(20'000'000);
    CHECK(s.b.host.recorded.empty());  // nothing written after the destroy
}

TEST_CASE("general-event: a GENERAL_EVENT EQE; pci-power sets what MPEIN reports", "[fault][events]") {
    Setup s;
    auto aeq = s.d.create_eq(4, 1, {1ull << hca::kEventGeneral, 0, 0, 0}, s.uar);
    while (s.d.next_eqe(aeq)) {
    }
    const auto mpein = [&s] {
        auto in = Driver::inbox(hca::kOpAccessReg, 1, 16 + ifc::mpein_reg::size_bytes);
        ifc::set(in.data(), ifc::access_register_in::register_id, 0x9050);
        auto r = s.d.exec(in, 16 + ifc::mpein_reg::size_bytes);
        REQUIRE(r.status == 0);
        return std::pair{ifc::get(r.out.data() + 16, ifc::mpein_reg::pwr_status),
                         ifc::get(r.out.data() + 16, ifc::mpein_reg::pci_power)};
    };
    CHECK(mpein() == std::pair<uint64_t, uint64_t>{1, 75});  // a x16 slot's 75 W, sufficient
    REQUIRE(s.arm("general-event:subtype=pci-power,power=insufficient,watts=25").starts_with("ok"));
    auto e = s.d.next_eqe(aeq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventGeneral);
    CHECK((*e)[3] == hca::kGeneralPciPowerChange);
    CHECK(mpein() == std::pair<uint64_t, uint64_t>{2, 25});
    s.b.dev.reset();  // the slot's power, not the firmware's: a reset keeps it
    s.d.bring_up();
    CHECK(mpein() == std::pair<uint64_t, uint64_t>{2, 25});

    // MCAM says MPEIN can be read (mcam_enhanced_features.pci_status_and_power).
    auto mcam = Driver::inbox(hca::kOpAccessReg, 1, 16 + ifc::mcam_reg::size_bytes);
    ifc::set(mcam.data(), ifc::access_register_in::register_id, 0x907f);
    auto r = s.d.exec(mcam, 16 + ifc::mcam_reg::size_bytes);
    REQUIRE(r.status == 0);
    const uint8_t *features = r.out.data() + 16 + ifc::mcam_reg::mng_feature_cap_mask.byte();
    CHECK(ifc::get(features, ifc::mcam_enhanced_features::pci_status_and_power) == 1);

    CHECK(s.arm("general-event:subtype=down").starts_with("error subtype=down: one of pci-power"));
    CHECK(s.arm("general-event:subtype=pci-power,watts=5000").starts_with("error watts=5000"));
    CHECK(s.arm("general-event").starts_with("error general-event needs subtype="));
}

TEST_CASE("lost-msix event=cmd: a command's completion EQE is written, its interrupt is not", "[fault][cmd]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    auto ceq = d.create_eq(4, 6, {1ull << hca::kEventComp, 0, 0, 0}, uar);
    auto cmdq = d.create_eq(4, 0, {1ull << hca::kEventCmd, 0, 0, 0}, uar);
    REQUIRE(b.dev.faults.command("lost-msix:event=cmd").starts_with("ok"));
    hca::EqeData data;
    b.dev.eqs.post(ceq.eqn, hca::kEventComp, 0, data);  // another type: its interrupt is sent
    CHECK(b.host.msix[6] == 1);
    const unsigned before = b.host.msix[0];
    CHECK(d.exec(Driver::inbox(hca::kOpNop, 0, 16), 16).completed);
    CHECK(b.host.msix[0] == before);
    auto e = d.next_eqe(cmdq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventCmd);
    CHECK(!b.dev.eqs.find(cmdq.eqn)->armed);
    d.eq_doorbell(cmdq, true);  // the driver's recovery polls and re-arms: the next one interrupts
    b.pump();
    CHECK(d.exec(Driver::inbox(hca::kOpNop, 0, 16), 16).completed);
    CHECK(b.host.msix[0] == before + 1);
}

TEST_CASE("health-fatal and health-stall: the health buffer and counter as the driver polls them", "[fault][health]") {
    {
        Setup s;
        REQUIRE(s.arm("health-fatal:syndrome=0x8").starts_with("ok"));
        CHECK(s.b.dev.fatal());
        CHECK((s.d.iseg_read32(hca::InitSeg::kHealthSynd) >> 16 & 0xff) == 0x8);
        CHECK(s.d.iseg_read32(hca::InitSeg::kHealthRfr) >> 31 == 1);  // reset for recovery
        const uint32_t c = s.d.iseg_read32(hca::InitSeg::kHealthCounter);
        s.b.advance(2'000'000'000);
        CHECK(s.d.iseg_read32(hca::InitSeg::kHealthCounter) == c);
        CHECK(s.b.dev.faults.list().empty());  // an event is done once it happened
        s.b.dev.reset();
        CHECK(!s.b.dev.fatal());
        CHECK(s.d.iseg_read32(hca::InitSeg::kHealthSynd) == 0);
    }
    {
        Setup s;
        REQUIRE(s.arm("health-stall").starts_with("ok"));
        const uint32_t c = s.d.iseg_read32(hca::InitSeg::kHealthCounter);
        s.b.advance(2'000'000'000);
        CHECK(s.d.iseg_read32(hca::InitSeg::kHealthCounter) == c);
        CHECK(s.d.iseg_read32(hca::InitSeg::kHealthSynd) == 0);
        CHECK(!s.b.dev.fatal());
        CHECK(s.d.exec(Driver::inbox(hca::kOpNop, 0, 16), 16).status == 0);  // still working
        s.b.dev.reset();
        const uint32_t c2 = s.d.iseg_read32(hca::InitSeg::kHealthCounter);
        s.b.advance(1'000'000'000);
        CHECK(s.d.iseg_read32(hca::InitSeg::kHealthCounter) != c2);
    }
}

TEST_CASE("health-fatal: the driver's software reset request resets the firmware (health.c recovery)",
          "[fault][health]") {
    Setup s;
    CHECK(s.d.iseg_read32(hca::InitSeg::kInitializing) & hca::InitSeg::kFwResetSupported);
    REQUIRE(s.arm("health-fatal:syndrome=0x8").starts_with("ok"));
    REQUIRE(s.b.dev.fatal());
    // Dead firmware ignores doorbells and commands ...
    const CmdResult dead = s.d.exec(Driver::inbox(hca::kOpNop, 0, 16), 16);
    CHECK(!dead.completed);
    // ... but not the reset request: nic_interface := SW_RESET (7).
    const uint32_t l = s.d.iseg_read32(hca::InitSeg::kCmdqAddrLSz);
    const unsigned drops = s.b.host.tx_drops;
    s.d.iseg_write32(hca::InitSeg::kCmdqAddrLSz, (l & 0xfffff000u) | 7u << 8);
    CHECK(!s.b.dev.fatal());
    CHECK(s.b.host.tx_drops == drops + 1);  // no packet of the old function goes out
    CHECK((s.d.iseg_read32(hca::InitSeg::kCmdqAddrLSz) >> 8 & 7) == hca::InitSeg::kNicDisabled);
    CHECK(s.d.iseg_read32(hca::InitSeg::kHealthSynd) == 0);
    CHECK(s.b.dev.qps.info().find("QPs: 0") != std::string::npos);  // nothing survives
    const uint32_t c = s.d.iseg_read32(hca::InitSeg::kHealthCounter);
    s.b.advance(1'000'000'000);
    CHECK(s.d.iseg_read32(hca::InitSeg::kHealthCounter) != c);  // wait_vital() sees it move
    // Without a syndrome the same write is only a nic_interface change.
    s.d.iseg_write32(hca::InitSeg::kCmdqAddrLSz, (l & 0xfffff000u) | 7u << 8);
    CHECK((s.d.iseg_read32(hca::InitSeg::kCmdqAddrLSz) >> 8 & 7) == hca::InitSeg::kNicSwReset);
}

TEST_CASE("pci-gone: off the bus, reads all ones, nothing moves; a new function in the slot ms later",
          "[fault][pci]") {
    Setup s;
    auto a = s.ud(0x11);
    const uint64_t buf = s.b.host.alloc(64, 64);
    const unsigned irqs = s.b.host.msix[3];
    const unsigned drops = s.b.host.tx_drops;
    REQUIRE(s.arm("pci-gone:ms=500").starts_with("ok"));
    CHECK(s.b.host.tx_drops == drops + 1);  // what was queued for the link goes with it
    CHECK(s.d.iseg_read32(hca::InitSeg::kHealthCounter) == 0xffffffffu);  // sensor_pci_not_working()
    CHECK(s.d.iseg_read32(0) == 0xffffffffu);
    CHECK(s.b.dev.off_bus());  // the host answers configuration reads with all ones
    s.d.cq_arm(s.scq);
    s.d.post_ud_send(a, 5, a.qpn, 0x11, {{s.lkey, buf, 16}});  // a doorbell nobody hears
    CHECK(!s.d.next_cqe(s.scq));
    CHECK(s.b.host.msix[3] == irqs);
    CHECK(!s.d.exec(Driver::inbox(hca::kOpNop, 0, 16), 16).completed);
    s.b.advance(499'000'000);
    CHECK(s.d.iseg_read32(0) == 0xffffffffu);
    CHECK(s.b.dev.off_bus());
    s.b.advance(1'000'000);
    // The next access finds a new function: power-on state, nothing of the old one.
    CHECK(s.d.iseg_read32(0) != 0xffffffffu);
    CHECK(!s.b.dev.fatal());
    CHECK(s.b.dev.qps.info().find("QPs: 0") != std::string::npos);
    CHECK(s.d.iseg_read32(hca::InitSeg::kHealthSynd) == 0);

    REQUIRE(s.arm("pci-gone").starts_with("ok"));  // without ms=: until a reset
    s.b.advance(3'600'000'000'000);
    CHECK(s.d.iseg_read32(0) == 0xffffffffu);
    s.b.dev.reset();
    CHECK(s.d.iseg_read32(0) != 0xffffffffu);
}

TEST_CASE("health-fatal after= waits, and a reset before its time drops it", "[fault][health]") {
    Setup s;
    REQUIRE(s.arm("health-fatal:after=50").starts_with("ok"));
    CHECK(!s.b.dev.fatal());
    s.b.advance(50'000'000);
    CHECK(s.b.dev.fatal());
    s.b.dev.reset();
    REQUIRE(s.arm("health-fatal:after=50").starts_with("ok"));
    s.b.dev.reset();
    CHECK(s.b.dev.faults.list().empty());
    s.b.advance(100'000'000);
    CHECK(!s.b.dev.fatal());
}

TEST_CASE("init-delay: after the next reset the device stays initializing for ms", "[fault][health]") {
    Bench b;
    Driver d(b);
    REQUIRE(b.dev.faults.command("init-delay:ms=500").starts_with("ok"));
    b.dev.reset();
    b.advance(400'000'000);
    CHECK(d.iseg_read32(hca::InitSeg::kInitializing) >> 31 == 1);
    b.advance(100'000'000);
    CHECK(d.iseg_read32(hca::InitSeg::kInitializing) >> 31 == 0);
    b.dev.reset();  // one-shot: the usual delay again
    b.advance(hca::InitSeg::kInitDelayNs);
    CHECK(d.iseg_read32(hca::InitSeg::kInitializing) >> 31 == 0);
}

TEST_CASE("page-request: an EQE asks for pages, MANAGE_PAGES gives them", "[fault][events]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    auto eq = d.create_eq(4, 0, {1ull << hca::kEventPageRequest, 0, 0, 0}, uar);
    REQUIRE(b.dev.faults.command("page-request:npages=5").starts_with("ok"));
    auto e = d.next_eqe(eq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventPageRequest);
    CHECK(hca::load_be16(e->data() + 0x22) == 0);  // func_id: the PF
    CHECK(static_cast<int32_t>(hca::load_be32(e->data() + 0x24)) == 5);
    const size_t held = b.dev.fw.pages_held();
    auto in = Driver::inbox(hca::kOpManagePages, 1, 0x10 + 5 * 8);
    ifc::set(in.data(), ifc::manage_pages_in::input_num_entries, 5);
    for (unsigned i = 0; i < 5; ++i) {
        hca::store_be64(in.data() + 0x10 + i * 8, b.host.alloc(4096, 4096));
    }
    CHECK(d.exec(in, 16).status == 0);
    CHECK(b.dev.fw.pages_held() == held + 5);

    REQUIRE(b.dev.faults.command("page-request:npages=-2").starts_with("ok"));
    e = d.next_eqe(eq);
    REQUIRE(e);
    CHECK(static_cast<int32_t>(hca::load_be32(e->data() + 0x24)) == -2);
}

TEST_CASE("qp-event, cq-error, port-event: EQEs of the kind; error events stop the object", "[fault][events]") {
    Setup s;
    auto a = s.ud(0x11);
    const uint32_t uar = s.uar;
    auto aeq = s.d.create_eq(4, 1,
                             {(1ull << hca::kEventCommEst) | (1ull << hca::kEventWqCatastrophic) |
                                  (1ull << hca::kEventCqError) | (1ull << hca::kEventPortChange),
                              0, 0, 0},
                             uar);
    while (s.d.next_eqe(aeq)) {
    }
    REQUIRE(s.arm(fmt::format("qp-event:qpn={},type=comm-est", a.qpn)).starts_with("ok"));
    auto e = s.d.next_eqe(aeq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventCommEst);
    CHECK((hca::load_be32(e->data() + 0x38) & 0xffffff) == a.qpn);
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Rts);

    REQUIRE(s.arm(fmt::format("qp-event:qpn={},type=catastrophic", a.qpn)).starts_with("ok"));
    e = s.d.next_eqe(aeq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventWqCatastrophic);
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Err);

    REQUIRE(s.arm(fmt::format("cq-error:cqn={},syndrome=overrun", s.rcq.cqn)).starts_with("ok"));
    e = s.d.next_eqe(aeq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventCqError);
    CHECK(hca::load_be32(e->data() + 0x20) == s.rcq.cqn);
    CHECK((*e)[0x2b] == 1);
    CHECK(s.b.dev.cqs.find(s.rcq.cqn)->status != 0);

    REQUIRE(s.arm("port-event:subtype=client-rereg").starts_with("ok"));
    e = s.d.next_eqe(aeq);
    REQUIRE(e);
    CHECK((*e)[1] == hca::kEventPortChange);
    CHECK((*e)[3] == 9);
    CHECK((*e)[0x28] >> 4 == 1);

    // An object that does not exist: nothing happens, the trace says so.
    REQUIRE(s.arm("qp-event:qpn=0xabcde,type=comm-est").starts_with("ok"));
    CHECK(!s.d.next_eqe(aeq));
}

TEST_CASE("faults through the C interface and at power-on; a bad one refuses the configuration", "[fault][capi]") {
    Bench b;
    hca::DeviceConfig cfg;
    cfg.faults = "cmd-status:opcode=CREATE_CQ,status=3;;lost-eqe:eqn=1";
    Bench armed(cfg);
    CHECK(armed.dev.faults.armed(FaultKind::CmdStatus));
    CHECK(armed.dev.faults.armed(FaultKind::LostEqe));
    cfg.faults = "cmd-status:opcode=CREATE_CQ";
    CHECK_THROWS_AS(Bench(cfg), hca::ConfigError);

    static const HcaHostOps ops = fakehost::idle_host_ops();
    HcaModelConfig c{};
    c.faults = "nope";
    char err[256] = "";
    CHECK(!hca_model_new(&ops, nullptr, &c, err, sizeof(err)));
    CHECK(std::string(err).find("fault 'nope'") != std::string::npos);
    c.faults = "lost-msix:count=0";
    HcaModel *m = hca_model_new(&ops, nullptr, &c, err, sizeof(err));
    REQUIRE(m);
    char *r = hca_model_fault(m, "list");
    CHECK(std::string(r).starts_with("ok\n1 lost-msix:count=0"));
    std::free(r);
    r = hca_model_fault(m, "cmd-drop:opcode=CREATE_QP");
    CHECK(std::string(r) == "ok armed 2\n");
    std::free(r);
    r = hca_model_fault(m, nullptr);
    CHECK(std::string(r).starts_with("error"));
    std::free(r);
    // A surprise removal until a reset: configuration space is an empty slot's.
    CHECK(hca_model_on_bus(m));
    r = hca_model_fault(m, "pci-gone");
    CHECK(std::string(r).starts_with("ok"));
    std::free(r);
    CHECK(!hca_model_on_bus(m));
    hca_model_reset(m);
    CHECK(hca_model_on_bus(m));
    hca_model_free(m);
}
