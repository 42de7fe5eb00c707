// The command interface as mlx5_core drives it: slots, mailbox chains,
// ownership, delivery status, polling and event completion.
#include <catch2/catch.hpp>

#include <cstring>
#include <set>

#include "be.h"
#include "driver.h"
#include "fw/cmdif.h"

using namespace hcatest;
namespace ifc = hca::ifc;
using hca::CommandInterface;

TEST_CASE("a polled command completes: ownership returned, delivery and status OK", "[cmdif]") {
    Bench b;
    Driver d(b);
    d.setup_cmdq();
    auto r = d.exec(Driver::inbox(hca::kOpEnableHca, 0, 16), 16);
    CHECK(r.completed);
    CHECK(r.delivery == 0);
    CHECK(r.status == 0);
    CHECK(b.dev.fw.state() == hca::HcaState::Enabled);
}

TEST_CASE("output spanning eight mailboxes (QUERY_HCA_CAP, 4112 bytes)", "[cmdif]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    auto r = d.exec(Driver::inbox(hca::kOpQueryHcaCap, 1, 16), ifc::query_hca_cap_out::size_bytes);
    REQUIRE(r.status == 0);
    REQUIRE(r.out.size() == 4112);
    const uint8_t *cap = r.out.data() + 16;
    CHECK(ifc::get(cap, ifc::cmd_hca_cap::num_ports) == 1);
    CHECK(ifc::get(cap, ifc::cmd_hca_cap::xrc) == 1);
    CHECK(ifc::get(cap, ifc::cmd_hca_cap::max_wqe_sz_rq) == 512);
    // The unused tail of the 4096-byte union is zero.
    for (size_t i = 16 + 256; i < r.out.size(); ++i) {
        REQUIRE(r.out[i] == 0);
    }
}

TEST_CASE("input spanning several mailboxes (MANAGE_PAGES with 200 pages)", "[cmdif]") {
    Bench b;
    Driver d(b);
    d.setup_cmdq();
    REQUIRE(d.exec(Driver::inbox(hca::kOpEnableHca, 0, 16), 16).status == 0);
    auto give = Driver::inbox(hca::kOpManagePages, 1, 16 + 200 * 8);
    ifc::set(give.data(), ifc::manage_pages_in::input_num_entries, 200);
    std::set<uint64_t> given;
    for (uint32_t i = 0; i < 200; ++i) {
        const uint64_t p = b.host.alloc(4096);
        given.insert(p);
        hca::store_be64(give.data() + 16 + i * 8, p);
    }
    auto r = d.exec(give, 16, 31);  // the page queue slot
    REQUIRE(r.status == 0);
    CHECK(b.dev.fw.pages_held() == 200);
    // Take them back in two rounds; every page comes back exactly once.
    std::set<uint64_t> back;
    for (uint32_t round = 0; round < 2; ++round) {
        auto take = Driver::inbox(hca::kOpManagePages, 2, 16);
        ifc::set(take.data(), ifc::manage_pages_in::input_num_entries, 150);
        auto t = d.exec(take, 16 + 150 * 8, 31);
        REQUIRE(t.status == 0);
        const uint32_t n = static_cast<uint32_t>(t.get(ifc::manage_pages_out::output_num_entries));
        CHECK(n == (round == 0 ? 150u : 50u));
        for (uint32_t i = 0; i < n; ++i) {
            back.insert(hca::load_be64(t.out.data() + 16 + i * 8));
        }
    }
    CHECK(back == given);
    CHECK(b.dev.fw.pages_held() == 0);
}

TEST_CASE("delivery errors: bad block number, token, descriptor type, lengths", "[cmdif]") {
    Bench b;
    Driver d(b);
    d.setup_cmdq();
    auto big = Driver::inbox(hca::kOpManagePages, 1, 16 + 64);
    SECTION("bad block number") {
        d.post(0, big, 16);
        uint8_t l[64];
        b.host.read(d.cmdq(), l, 64);
        b.host.write_be32(hca::load_be64(l + CommandInterface::kLayInPtr) + CommandInterface::kBlockNum, 7);
        d.ring(1);
        b.pump();
        auto r = d.result(0);
        CHECK(r.completed);
        CHECK(r.delivery == 0x03);
    }
    SECTION("token mismatch") {
        d.post(0, big, 16);
        uint8_t l[64];
        b.host.read(d.cmdq(), l, 64);
        b.host.mem(hca::load_be64(l + CommandInterface::kLayInPtr) + CommandInterface::kBlockToken, 1)[0] ^= 0xff;
        d.ring(1);
        b.pump();
        CHECK(d.result(0).delivery == 0x02);
    }
    SECTION("bad descriptor type") {
        d.post(0, Driver::inbox(hca::kOpEnableHca, 0, 16), 16);
        b.host.mem(d.cmdq(), 1)[0] = 3;
        d.ring(1);
        b.pump();
        CHECK(d.result(0).delivery == 0x10);
    }
    SECTION("input length") {
        d.post(0, Driver::inbox(hca::kOpEnableHca, 0, 4), 16);
        d.ring(1);
        b.pump();
        CHECK(d.result(0).delivery == 0x07);
    }
    SECTION("input pointer not guest memory") {
        d.post(0, big, 16);
        b.host.write_be64(d.cmdq() + CommandInterface::kLayInPtr, 0x10);
        d.ring(1);
        b.pump();
        auto r = d.result(0);
        CHECK(r.completed);
        CHECK(r.delivery != 0);
    }
    CHECK(b.dev.counters.guest_errors > 0);
}

TEST_CASE("a doorbell for a slot software still owns leaves it untouched", "[cmdif]") {
    Bench b;
    Driver d(b);
    d.setup_cmdq();
    d.post(3, Driver::inbox(hca::kOpEnableHca, 0, 16), 16);
    b.host.mem(d.cmdq() + 3 * 64 + CommandInterface::kLayStatusOwn, 1)[0] = 0;
    const uint64_t errors = b.dev.counters.guest_errors;
    d.ring(1u << 3);
    b.pump();
    CHECK(b.dev.fw.state() == hca::HcaState::Disabled);
    CHECK(b.dev.counters.guest_errors == errors + 1);
}

TEST_CASE("unknown opcode answers BAD_OP, short inbox BAD_INPUT_LEN, wrong state BAD_SYS_STATE", "[cmdif]") {
    Bench b;
    Driver d(b);
    d.setup_cmdq();
    CHECK(d.exec(Driver::inbox(0x7ff, 0, 16), 16).status == 0x02);
    CHECK(d.exec(Driver::inbox(hca::kOpQueryIssi, 0, 16), ifc::query_issi_out::size_bytes).status == 0x04);  // not enabled
    REQUIRE(d.exec(Driver::inbox(hca::kOpEnableHca, 0, 16), 16).status == 0);
    auto r = d.exec(Driver::inbox(hca::kOpSetDriverVersion, 0, 16), 16);
    CHECK(r.status == 0x50);  // inbox shorter than set_driver_version_in
    CHECK(r.syndrome != 0);
    CHECK(d.exec(Driver::inbox(hca::kOpQueryHcaCap, 1, 16), 16).status == 0x51);  // outbox too short
    CHECK(d.exec(Driver::inbox(hca::kOpCreateEq, 0, 0x110), 16).status == 0x04);  // before INIT_HCA
}

TEST_CASE("several slots rung with one write all complete", "[cmdif]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    for (unsigned s = 0; s < 8; ++s) {
        d.post(s, Driver::inbox(hca::kOpQueryIssi, 0, 16), ifc::query_issi_out::size_bytes);
    }
    d.ring(0xff);
    b.pump();
    for (unsigned s = 0; s < 8; ++s) {
        auto r = d.result(s);
        CHECK(r.completed);
        CHECK(r.status == 0);
        CHECK(r.get(ifc::query_issi_out::supported_issi_dw0) == 3);
    }
}

TEST_CASE("event mode: CMD EQEs carry completed slots, never for the cmd EQ's own create/destroy",
          "[cmdif][eq]") {
    Bench b;
    Driver d(b);
    d.bring_up();
    const uint32_t uar = d.alloc_uar();
    CmdResult created;
    auto eq = d.create_eq(8, 5, {uint64_t{1} << 0x0a, 0, 0, 0}, uar, &created);
    REQUIRE(created.status == 0);
    CHECK(!d.next_eqe(eq));  // the CREATE_EQ of the command EQ completed by polling only
    CHECK(b.host.msix[5] == 0);

    // Three commands rung together: one EQE (or more) covering exactly those slots.
    for (unsigned s : {0u, 4u, 9u}) {
        d.post(s, Driver::inbox(hca::kOpNop, 0, 16), 16);
    }
    d.ring((1u << 0) | (1u << 4) | (1u << 9));
    b.pump();
    uint32_t seen = 0;
    while (auto e = d.next_eqe(eq)) {
        CHECK((*e)[1] == 0x0a);
        seen |= hca::load_be32(e->data() + 0x20);
    }
    CHECK(seen == ((1u << 0) | (1u << 4) | (1u << 9)));
    CHECK(b.host.msix[5] == 1);  // one interrupt, then disarmed

    // The EQ was disarmed: the next completion writes an EQE but no interrupt
    // until the driver re-arms; arming over it fires at once.
    d.exec(Driver::inbox(hca::kOpNop, 0, 16), 16);
    CHECK(b.host.msix[5] == 1);
    d.eq_doorbell(eq, true);
    b.pump();
    CHECK(b.host.msix[5] == 2);
    auto e = d.next_eqe(eq);
    REQUIRE(e);
    CHECK(hca::load_be32(e->data() + 0x20) == 1);

    // Destroying the command EQ completes by polling only.
    auto destroy = Driver::inbox(hca::kOpDestroyEq, 0, 16);
    ifc::set(destroy.data(), ifc::destroy_eq_in::eq_number, eq.eqn);
    d.eq_doorbell(eq, true);
    b.pump();
    CHECK(d.exec(destroy, 16).status == 0);
    CHECK(!d.next_eqe(eq));
}

TEST_CASE("commands are ignored while nic_interface is DISABLED", "[cmdif][iseg]") {
    Bench b;
    Driver d(b);
    d.setup_cmdq();
    d.iseg_write32(hca::InitSeg::kCmdqAddrLSz, static_cast<uint32_t>(d.cmdq()) | (1u << 8));
    auto r = d.exec(Driver::inbox(hca::kOpEnableHca, 0, 16), 16);
    CHECK(!r.completed);
    d.iseg_write32(hca::InitSeg::kCmdqAddrLSz, static_cast<uint32_t>(d.cmdq()));
    r = d.exec(Driver::inbox(hca::kOpEnableHca, 0, 16), 16);
    CHECK(r.completed);
    CHECK(r.status == 0);
}
