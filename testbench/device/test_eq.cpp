// EQs: creation checks, EQE ring with owner bit across laps, arming and
// interrupts, overflow, doorbell misuse, QUERY_EQ.
#include <catch2/catch.hpp>

#include "be.h"
#include "driver.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

void post(Bench &b, uint32_t eqn, uint8_t type, uint32_t value) {
    hca::EqeData data;
    hca::store_be32(data.raw, value);
    b.dev.eqs.post(eqn, type, 0, data);
}

}  // namespace

TEST_CASE("EQE owner bit alternates per lap, one MSI-X per arm", "[eq]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    auto eq = d.create_eq(2, 7, {0, 0, 0, 0}, uar);  // 4 entries, completion EQ
    REQUIRE(b.dev.eqs.find(eq.eqn));
    for (uint32_t i = 0; i < 10; ++i) {
        post(b, eq.eqn, hca::kEventComp, i);
        auto e = d.next_eqe(eq);
        REQUIRE(e);
        CHECK(hca::load_be32(e->data() + 0x20) == i);
        CHECK(((*e)[63] & 1) == ((i >> 2) & 1));  // lap parity
        CHECK(!d.next_eqe(eq));
        CHECK(b.host.msix[7] == i + 1);  // armed each time below
        d.eq_doorbell(eq, true);
        b.pump();
    }
    // Disarmed EQ: EQEs queue silently; the CI-only doorbell does not arm.
    post(b, eq.eqn, hca::kEventComp, 99);
    post(b, eq.eqn, hca::kEventComp, 100);
    const unsigned before = b.host.msix[7];
    CHECK(before == 11);
    d.eq_doorbell(eq, false);
    b.pump();
    CHECK(b.host.msix[7] == before);
}

TEST_CASE("arming over pending EQEs interrupts immediately", "[eq]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    auto eq = d.create_eq(4, 2, {0, 0, 0, 0}, uar);
    post(b, eq.eqn, hca::kEventComp, 1);  // armed: interrupt, disarm
    CHECK(b.host.msix[2] == 1);
    post(b, eq.eqn, hca::kEventComp, 2);  // disarmed: queued
    CHECK(b.host.msix[2] == 1);
    REQUIRE(d.next_eqe(eq));  // consume only the first
    d.eq_doorbell(eq, true);  // ci=1 < pi=2
    b.pump();
    CHECK(b.host.msix[2] == 2);
}

TEST_CASE("EQ overflow puts the EQ in error instead of overwriting", "[eq]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    auto eq = d.create_eq(2, 1, {0, 0, 0, 0}, uar);
    for (uint32_t i = 0; i < 4; ++i) {
        post(b, eq.eqn, hca::kEventComp, i);
    }
    const uint64_t errors = b.dev.counters.guest_errors;
    post(b, eq.eqn, hca::kEventComp, 4);
    CHECK(b.dev.counters.guest_errors == errors + 1);
    CHECK(b.dev.eqs.find(eq.eqn)->status == 0xa);
    auto q = Driver::inbox(hca::kOpQueryEq, 0, 16);
    ifc::set(q.data(), ifc::query_eq_in::eq_number, eq.eqn);
    auto r = d.exec(q, ifc::query_eq_out::size_bytes);
    REQUIRE(r.status == 0);
    const auto ctx = ifc::query_eq_out::eq_context_entry;
    CHECK(r.get(ifc::in(ctx, ifc::eqc::status)) == 0xa);
    CHECK(r.get(ifc::in(ctx, ifc::eqc::log_eq_size)) == 2);
    CHECK(r.get(ifc::in(ctx, ifc::eqc::intr)) == 1);
    CHECK(r.get(ifc::in(ctx, ifc::eqc::uar_page)) == uar);
    CHECK(r.get(ifc::in(ctx, ifc::eqc::producer_counter)) == 4);
}

TEST_CASE("CREATE_EQ input checks", "[eq]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    CmdResult r;
    auto big = Driver::inbox(hca::kOpCreateEq, 0, ifc::create_eq_in::size_bytes + 8);
    ifc::set(big.data(), ifc::in(ifc::create_eq_in::eq_context_entry, ifc::eqc::log_eq_size), 23);
    ifc::set(big.data(), ifc::in(ifc::create_eq_in::eq_context_entry, ifc::eqc::uar_page), uar);
    CHECK(d.exec(big, 16).status == 0x03);  // log_eq_size > log_max_eq_sz
    d.create_eq(4, 64, {0, 0, 0, 0}, uar, &r);
    CHECK(r.status == 0x03);  // no such vector
    d.create_eq(4, 0, {0, 0, 0, 0}, 900, &r);
    CHECK(r.status == 0x03);  // UAR not allocated
    // A PAS list shorter than the buffer.
    auto in = Driver::inbox(hca::kOpCreateEq, 0, ifc::create_eq_in::size_bytes + 8);
    const auto ctx = ifc::create_eq_in::eq_context_entry;
    ifc::set(in.data(), ifc::in(ctx, ifc::eqc::log_eq_size), 8);  // 16 KiB: 4 pages
    ifc::set(in.data(), ifc::in(ctx, ifc::eqc::uar_page), uar);
    hca::store_be64(in.data() + 0x110, b.host.alloc(4096));
    CHECK(d.exec(in, 16).status == 0x03);
    // Sixteen EQs at most (log_max_eq 4).
    for (int i = 0; i < 16; ++i) {
        d.create_eq(1, 0, {0, 0, 0, 0}, uar, &r);
        CHECK(r.status == 0);
    }
    d.create_eq(1, 0, {0, 0, 0, 0}, uar, &r);
    CHECK(r.status == 0x0f);
}

TEST_CASE("EQ doorbells: wrong UAR and unknown EQ are ignored", "[eq]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    const uint32_t other = d.alloc_uar();
    auto eq = d.create_eq(3, 4, {0, 0, 0, 0}, uar);
    post(b, eq.eqn, hca::kEventComp, 1);
    CHECK(b.host.msix[4] == 1);
    post(b, eq.eqn, hca::kEventComp, 2);
    EqHandle wrong = eq;
    wrong.uar = other;
    const uint64_t errors = b.dev.counters.guest_errors;
    d.eq_doorbell(wrong, true);
    b.pump();
    CHECK(b.host.msix[4] == 1);
    CHECK(b.dev.counters.guest_errors == errors + 1);
    EqHandle missing = eq;
    missing.eqn = 200;
    d.eq_doorbell(missing, true);
    b.pump();
    CHECK(b.dev.counters.guest_errors == errors + 2);
}

TEST_CASE("an EQ whose buffer is not guest memory goes to error, the host stays up", "[eq]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    auto in = Driver::inbox(hca::kOpCreateEq, 0, ifc::create_eq_in::size_bytes + 8);
    const auto ctx = ifc::create_eq_in::eq_context_entry;
    ifc::set(in.data(), ifc::in(ctx, ifc::eqc::log_eq_size), 2);
    ifc::set(in.data(), ifc::in(ctx, ifc::eqc::uar_page), uar);
    hca::store_be64(in.data() + 0x110, 0xfee00000);  // not RAM
    auto r = d.exec(in, 16);
    REQUIRE(r.status == 0);
    const uint32_t eqn = static_cast<uint32_t>(r.get(ifc::create_eq_out::eq_number));
    post(b, eqn, hca::kEventComp, 1);
    CHECK(b.dev.eqs.find(eqn)->status == 0xa);
    CHECK(b.host.dma_errors >= 1);
}
