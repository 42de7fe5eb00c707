// BlueFlame: WQEs carried in the doorbell write itself (the kernel's
// write-combining test, libmlx5's small WQEs), which copies the device
// runs, in which order, and what a torn or stray write falls back to.
#include <catch2/catch.hpp>

#include <cstring>

#include "alloc_count.h"
#include "be.h"
#include "driver.h"
#include "ud_setup.h"

using namespace hcatest;
namespace ifc = hca::ifc;

namespace {

using Setup = UdSetup;

uint8_t cqe_opcode(const Cqe &c) {
    return c[63] >> 4;
}
uint32_t be32(const Cqe &c, size_t off) {
    return hca::load_be32(c.data() + off);
}

}  // namespace

static void nop_in_sq(Setup &s, QpHandle &a, uint8_t (&w)[64]) {
    std::memset(w, 0, sizeof w);
    hca::store_be32(w, uint32_t(a.sq_pi) << 8 | hca::kWqeNop);
    hca::store_be32(w + 4, a.qpn << 8 | 1);
    s.b.host.write(a.sq_addr(a.sq_pi), w, 64);
    ++a.sq_pi;
    s.b.host.write_be32(a.dbr + 4, a.sq_pi);
}

// A NOP WQE posted like nop_in_sq() and copied whole through BlueFlame half
// `half` (0 or 256) as 8 x 8-byte writes, the way mlx5_ib/libmlx5 copy it;
// `ce` goes into the copy only.
static void bf_nop(Setup &s, QpHandle &a, uint32_t half, uint8_t ce = 0) {
    uint8_t w[64];
    nop_in_sq(s, a, w);
    w[11] = ce;
    const uint64_t base = uint64_t{s.uar} * 4096 + 0x800;
    for (int k = 0; k < 8; ++k) {
        s.d.bar_write(base + half + k * 8, w + k * 8, 8);
    }
}

TEST_CASE("BlueFlame: the WQE carried in the write is executed (the kernel's write-combining test)", "[dp][bf]") {
    Setup s;
    REQUIRE(s.b.dev.fw.caps().gen(ifc::cmd_hca_cap::bf) == 1);
    auto a = s.ud(1);
    // mem.c post_send_nop(): unsignalled NOPs in memory, each copied with
    // CE set as 8 x 8-byte writes, alternating half-buffers; all written
    // before the device runs.
    const uint64_t base = uint64_t{s.uar} * 4096 + 0x800;
    uint32_t half = 0;
    const int n = 6;
    for (int i = 0; i < n; ++i) {
        bf_nop(s, a, half, hca::kCeCqUpdate);
        half ^= 256;
    }
    s.b.pump();
    int cqes = 0;
    while (auto c = s.d.next_cqe(s.scq)) {
        CHECK(cqe_opcode(*c) == hca::kCqeReq);
        CHECK(be32(*c, 0x3c) >> 16 == static_cast<uint32_t>(cqes));  // wqe_counter
        ++cqes;
    }
    CHECK(cqes == n);
    CHECK(s.b.dev.qps.sq().bf_executed() == n);

    // The same WQEs rung with an 8-byte doorbell only: executed from memory
    // (unsignalled), so no completion.
    for (int i = 0; i < 3; ++i) {
        uint8_t w[64];
        nop_in_sq(s, a, w);
        s.d.bar_write(base + half, w, 8);
        half ^= 256;
    }
    s.b.pump();
    CHECK(!s.d.next_cqe(s.scq));
}

TEST_CASE("BlueFlame: only the head of a copy asks for a device run", "[dp][bf]") {
    // Under QEMU each 8 bytes of a copy is an MMIO write, and the main loop
    // may run the device between them. The seven after the head ask for no
    // run: the WQE is in memory too.
    Setup s;
    auto a = s.ud(1);
    const uint64_t base = uint64_t{s.uar} * 4096 + 0x800;
    s.b.pump();
    const uint64_t errors = s.b.dev.counters.guest_errors;
    uint8_t w[64];
    nop_in_sq(s, a, w);
    w[11] = hca::kCeCqUpdate;  // in the copy only
    s.b.host.scheduled = false;
    s.d.bar_write(base, w, 8);
    CHECK(s.b.host.scheduled);
    s.b.pump();  // the device runs after the head: the WQE from memory, unsignalled
    CHECK(!s.d.next_cqe(s.scq));
    for (int k = 1; k < 8; ++k) {
        s.d.bar_write(base + k * 8, w + k * 8, 8);
    }
    CHECK(!s.b.host.scheduled);
    CHECK(s.b.dev.qps.sq().bf_executed() == 0);
    // The next post's head runs them first: a copy of a WQE already done,
    // not executed again, no complaint.
    nop_in_sq(s, a, w);
    w[11] = hca::kCeCqUpdate;
    for (int k = 0; k < 8; ++k) {
        s.d.bar_write(base + 256 + k * 8, w + k * 8, 8);
    }
    CHECK(s.b.host.scheduled);
    s.b.pump();
    const auto c = s.d.next_cqe(s.scq);
    REQUIRE(c);
    CHECK(be32(*c, 0x3c) >> 16 == 1);  // the second WQE, from its copy
    CHECK(!s.d.next_cqe(s.scq));
    CHECK(s.b.dev.qps.sq().bf_executed() == 1);
    CHECK(s.b.dev.counters.guest_errors == errors);
    // A doorbell of 32-bit halves: the second half rings, so it asks.
    nop_in_sq(s, a, w);
    s.d.bar_write(base, w, 4);
    s.b.pump();
    s.d.bar_write(base + 4, w + 4, 4);
    CHECK(s.b.host.scheduled);
    s.b.pump();
    // A CQ doorbell (UAR +0x20) asks as before.
    s.b.host.scheduled = false;
    s.d.cq_arm(s.scq);
    CHECK(s.b.host.scheduled);
}

TEST_CASE("BlueFlame: copies on a bfreg that carries them allocate nothing per work request", "[dp][bf][alloc]") {
    // Once the bfreg is known to carry copies, each head leaves its run to
    // the end of its copy (its state lives with the bfreg) and the copy
    // waits with its QP until the send queue takes it (a ring that keeps
    // its storage): no heap allocation per post, in the MMIO writes or in
    // the device's run.
    Setup s;
    auto a = s.ud(1);
    uint32_t half = 0;
    uint64_t allocs = 0;
    int cqes = 0;
    constexpr int kBatches = 48, kWarm = 16, kPosts = 4;
    for (int i = 0; i < kBatches; ++i) {
        if (i >= kWarm) {
            AllocCount::start();
        }
        for (int k = 0; k < kPosts; ++k) {
            bf_nop(s, a, half, hca::kCeCqUpdate);
            half ^= 256;
        }
        s.b.pump();
        if (i >= kWarm) {
            allocs += AllocCount::stop();
        }
        while (auto c = s.d.next_cqe(s.scq)) {
            CHECK(cqe_opcode(*c) == hca::kCqeReq);
            ++cqes;
        }
    }
    CHECK(cqes == kBatches * kPosts);  // every NOP from its copy (CE is in the copy only)
    CHECK(s.b.dev.qps.sq().bf_executed() == kBatches * kPosts);
    CHECK(allocs == 0);
}

TEST_CASE("BlueFlame: copies are taken in WQE order, a copy that comes again replaces the one before", "[dp][bf]") {
    // Two NOPs in memory (unsignalled there), then copied out of order: the
    // second's copy (signalled), the first's (unsignalled), the first's
    // again (signalled). The device runs both from their copies, the first
    // from its last copy.
    Setup s;
    auto a = s.ud(1);
    uint8_t w0[64], w1[64];
    nop_in_sq(s, a, w0);
    nop_in_sq(s, a, w1);
    const uint64_t base = uint64_t{s.uar} * 4096 + 0x800;
    auto copy = [&](uint32_t half, uint8_t *w, uint8_t ce) {
        w[11] = ce;
        for (int k = 0; k < 8; ++k) {
            s.d.bar_write(base + half + k * 8, w + k * 8, 8);
        }
    };
    copy(0, w1, hca::kCeCqUpdate);
    copy(256, w0, 0);
    copy(0, w0, hca::kCeCqUpdate);
    s.b.pump();
    for (uint32_t want = 0; want < 2; ++want) {
        auto c = s.d.next_cqe(s.scq);
        REQUIRE(c);
        CHECK(be32(*c, 0x3c) >> 16 == want);  // wqe_counter
    }
    CHECK(!s.d.next_cqe(s.scq));
    CHECK(s.b.dev.qps.sq().bf_executed() == 2);
}

TEST_CASE("BlueFlame: a run between a copy's head and its rest waits for the rest", "[dp][bf]") {
    // mlx5_core's write-combining test under TCG: the main loop may run the
    // device after the head of a copy, before the rest. On a bfreg that
    // carries copies the send queue waits for it (the copy holds CE, the
    // WQE in memory not); the rest then asks for a run.
    Setup s;
    auto a = s.ud(1);
    const uint64_t base = uint64_t{s.uar} * 4096 + 0x800;
    s.b.pump();
    const uint64_t errors = s.b.dev.counters.guest_errors;
    auto wqe_counter = [&] {
        const auto c = s.d.next_cqe(s.scq);
        return c ? static_cast<int>(be32(*c, 0x3c) >> 16) : -1;
    };
    bf_nop(s, a, 0, hca::kCeCqUpdate);  // the bfreg's first doorbell: a whole copy
    s.b.pump();
    CHECK(wqe_counter() == 0);
    // The bfreg carries copies now: a head asks for no run, the write that
    // completes its copy does. Here the main loop runs the device in
    // between all the same (for another device or a timer).
    uint8_t w[64];
    nop_in_sq(s, a, w);
    w[11] = hca::kCeCqUpdate;
    s.b.host.scheduled = false;
    s.d.bar_write(base + 256, w, 8);
    CHECK(!s.b.host.scheduled);
    s.b.dev.run();
    CHECK(wqe_counter() == -1);  // not executed from memory
    CHECK(s.b.dev.qps.sq().copy_awaited());
    s.b.host.scheduled = false;
    for (int k = 1; k < 8; ++k) {
        s.d.bar_write(base + 256 + k * 8, w + k * 8, 8);
    }
    CHECK(s.b.host.scheduled);
    s.b.pump();
    CHECK(wqe_counter() == 1);  // from the copy
    CHECK(!s.b.dev.qps.sq().copy_awaited());
    CHECK(s.b.dev.qps.sq().bf_executed() == 2);

    // One overtaken by the next doorbell of its bfreg (the device running
    // in between): the torn WQE from memory (unsignalled there), the next
    // from its copy, at once.
    nop_in_sq(s, a, w);
    s.b.host.scheduled = false;
    s.d.bar_write(base, w, 8);
    CHECK(!s.b.host.scheduled);
    s.b.dev.run();
    CHECK(s.b.dev.qps.sq().copy_awaited());
    bf_nop(s, a, 256, hca::kCeCqUpdate);
    CHECK(s.b.host.scheduled);
    s.b.pump();
    CHECK(wqe_counter() == 3);
    CHECK(wqe_counter() == -1);
    CHECK(!s.b.dev.qps.sq().copy_awaited());

    // A copy that never comes whole: after kCopyWaitNs the WQE is fetched
    // from memory (signalled there, so it shows); once with the device
    // running after the head (it waits), once without (the head's run
    // comes from the timer).
    nop_in_sq(s, a, w);
    w[11] = hca::kCeCqUpdate;
    s.b.host.write(a.sq_addr(a.sq_pi - 1), w, 64);
    s.d.bar_write(base, w, 8);
    s.b.dev.run();
    s.b.advance(hca::SendQueue::kCopyWaitNs / 2);
    CHECK(s.b.dev.qps.sq().copy_awaited());
    CHECK(wqe_counter() == -1);
    s.b.advance(hca::SendQueue::kCopyWaitNs);
    CHECK(wqe_counter() == 4);
    CHECK(!s.b.dev.qps.sq().copy_awaited());
    // The rest of that copy comes after all (its vCPU was preempted for
    // longer than the wait, as under 16-hostile's load): no guest error,
    // and the WQE, done from memory, is not done again.
    for (int k = 1; k < 8; ++k) {
        s.d.bar_write(base + k * 8, w + k * 8, 8);
    }
    s.b.pump();
    CHECK(wqe_counter() == -1);
    CHECK(s.b.dev.counters.guest_errors == errors);
    bf_nop(s, a, 256, hca::kCeCqUpdate);  // copies again
    s.b.pump();
    CHECK(wqe_counter() == 5);
    nop_in_sq(s, a, w);
    w[11] = hca::kCeCqUpdate;
    s.b.host.write(a.sq_addr(a.sq_pi - 1), w, 64);
    s.b.host.scheduled = false;
    s.d.bar_write(base, w, 8);
    CHECK(!s.b.host.scheduled);
    s.b.advance(hca::SendQueue::kCopyWaitNs / 2);
    CHECK(wqe_counter() == -1);
    s.b.advance(hca::SendQueue::kCopyWaitNs);
    CHECK(wqe_counter() == 6);
    CHECK(!s.b.dev.qps.sq().copy_awaited());
    CHECK(s.b.dev.counters.guest_errors == errors);
}

TEST_CASE("BlueFlame: a bfreg that only rings never waits for a copy", "[dp][bf]") {
    // mlx5_ib rings with the head alone; so does libmlx5 for a list of WRs.
    Setup s;
    auto a = s.ud(1);
    const uint64_t base = uint64_t{s.uar} * 4096 + 0x800 + 512;  // bfreg 1
    s.b.pump();
    uint32_t half = 0;
    auto ring_signalled = [&] {
        uint8_t w[64];
        nop_in_sq(s, a, w);
        w[11] = hca::kCeCqUpdate;
        s.b.host.write(a.sq_addr(a.sq_pi - 1), w, 64);
        s.d.bar_write(base + half, w, 8);
        half ^= 256;
        s.b.pump();
    };
    for (int i = 0; i < 4; ++i) {
        ring_signalled();
        const auto c = s.d.next_cqe(s.scq);
        REQUIRE(c);
        CHECK(be32(*c, 0x3c) >> 16 == static_cast<uint32_t>(i));
        CHECK(!s.b.dev.qps.sq().copy_awaited());
    }
    // After a copy the bfreg counts as copying: a ring alone is taken in
    // once kCopyWaitNs has passed (its head left the run to a copy that
    // does not come); then the bfreg counts as ringing again.
    bf_nop(s, a, 512 + half, hca::kCeCqUpdate);  // bfreg 1 too
    half ^= 256;
    s.b.pump();
    CHECK(s.d.next_cqe(s.scq));
    ring_signalled();
    CHECK(!s.d.next_cqe(s.scq));
    s.b.advance(hca::SendQueue::kCopyWaitNs);
    CHECK(s.d.next_cqe(s.scq));
    ring_signalled();
    CHECK(s.d.next_cqe(s.scq));
    CHECK(!s.b.dev.qps.sq().copy_awaited());
}

TEST_CASE("doorbells written before a command's doorbell are taken in before the command runs", "[dp][bf]") {
    // mlx5_core's write-combining test: NOPs rung, the SQ destroyed as soon
    // as the first CQE is in, its other doorbells still queued.
    Setup s;
    s.d.run_on_doorbell = false;
    auto a = s.ud(1);
    s.b.pump();
    const uint64_t errors = s.b.dev.counters.guest_errors;
    uint8_t w[64];
    nop_in_sq(s, a, w);
    s.d.bar_write(uint64_t{s.uar} * 4096 + 0x800, w, 8);
    auto in = Driver::inbox(hca::kOpDestroyQp, 0, ifc::destroy_qp_in::size_bytes);
    ifc::set(in.data(), ifc::destroy_qp_in::qpn, a.qpn);
    s.d.post(0, in, 16);
    s.d.ring(1);
    s.b.pump();
    CHECK(s.d.result(0).status == 0);
    CHECK(!s.b.dev.qps.find(a.qpn));
    CHECK(s.b.dev.counters.guest_errors == errors);  // not "SQ doorbell for a QP that does not exist"
}

TEST_CASE("BlueFlame alternation: two doorbells in a row to one half warn, a reallocated UAR starts over", "[dp][bf]") {
    Setup s;
    auto a = s.ud(1);
    auto nop = [&](uint32_t half) {
        bf_nop(s, a, half);
        s.b.pump();
    };
    nop(0);
    nop(256);
    const uint64_t errors = s.b.dev.counters.guest_errors;
    nop(256);  // the same half twice: the driver lost track of bf->offset
    CHECK(s.b.dev.counters.guest_errors == errors + 1);
    // DEALLOC_UAR + ALLOC_UAR (a new user context gets the page): its first
    // doorbell may use half 0 even though the old owner's last one did too.
    nop(0);
    const uint64_t before = s.b.dev.counters.guest_errors;
    auto in = Driver::inbox(hca::kOpDeallocUar, 0, ifc::dealloc_uar_in::size_bytes);
    hca::ifc::set(in.data(), ifc::dealloc_uar_in::uar, s.uar);
    REQUIRE(s.d.exec(in, ifc::dealloc_uar_out::size_bytes).status == 0);
    REQUIRE(s.d.alloc_uar() == s.uar);
    nop(0);
    CHECK(s.b.dev.counters.guest_errors == before);
}

TEST_CASE("BlueFlame: a SEND with inline data from the write, torn and stray writes fall back", "[dp][bf]") {
    Setup s;
    auto a = s.ud(1);
    auto bq = s.ud(1);
    const uint64_t rbuf = s.b.host.alloc(512, 64);
    s.d.post_recv(bq, s.lkey, rbuf, 512);
    s.d.post_recv(bq, s.lkey, rbuf, 512);
    // ctrl + datagram + 20 inline bytes = 16 + 48 + 24 -> ds 6, 2 WQEBBs.
    auto build = [&](uint8_t fill, uint8_t *w) {
        std::memset(w, 0, 128);
        hca::store_be32(w, uint32_t(a.sq_pi) << 8 | hca::kWqeSend);
        hca::store_be32(w + 4, a.qpn << 8 | 6);
        w[11] = hca::kCeCqUpdate;
        hca::store_be32(w + 16, 1);                     // Q_Key
        hca::store_be32(w + 24, 0x80000000u | bq.qpn);  // DQPN
        hca::store_be16(w + 16 + 0x0e, 5);              // DLID
        hca::store_be32(w + 64, 0x80000000u | 20);
        std::memset(w + 68, fill, 20);
    };
    const uint64_t base = uint64_t{s.uar} * 4096 + 0x800;
    uint8_t mem_copy[128], bf_copy[128];
    build(0x11, mem_copy);
    build(0x22, bf_copy);
    s.b.host.write(a.sq_addr(a.sq_pi), mem_copy, 64);
    s.b.host.write(a.sq_addr(a.sq_pi + 1), mem_copy + 64, 64);
    a.sq_pi += 2;
    s.b.host.write_be32(a.dbr + 4, a.sq_pi);
    // libmlx5 may copy with 16-byte stores that arrive as 8-byte halves,
    // and 32-bit pieces are accepted too.
    s.d.bar_write(base, bf_copy, 8);
    for (int k = 8; k < 128; k += 4) {
        s.d.bar_write(base + k, bf_copy + k, 4);
    }
    s.b.pump();
    auto rc = s.d.next_cqe(s.rcq);
    REQUIRE(rc);
    CHECK(be32(*rc, 0x2c) == 40 + 20);
    CHECK(s.b.host.mem(rbuf + 40, 1)[0] == 0x22);  // the BlueFlame bytes were sent

    // Torn: the head and 16 of the 96 bytes arrive; the send queue waits
    // for the rest (the bfreg carries copies), then uses memory.
    build(0x33, mem_copy);
    build(0x44, bf_copy);
    s.b.host.write(a.sq_addr(a.sq_pi), mem_copy, 64);
    s.b.host.write(a.sq_addr(a.sq_pi + 1), mem_copy + 64, 64);
    a.sq_pi += 2;
    s.b.host.write_be32(a.dbr + 4, a.sq_pi);
    s.d.bar_write(base + 256, bf_copy, 8);
    s.d.bar_write(base + 256 + 8, bf_copy + 8, 8);
    s.b.pump();
    CHECK(!s.d.next_cqe(s.rcq));
    s.b.advance(hca::SendQueue::kCopyWaitNs);
    rc = s.d.next_cqe(s.rcq);
    REQUIRE(rc);
    CHECK(s.b.host.mem(rbuf + 40, 1)[0] == 0x33);
    // The rest arriving late, and writes in the middle of a buffer with no
    // head, are errors the device reports and ignores. Being past a head's
    // first 8 bytes they ask for no run; the next one (here the host's)
    // reports them.
    const uint64_t errors = s.b.dev.counters.guest_errors;
    s.d.bar_write(base + 256 + 24, bf_copy + 24, 8);
    s.d.bar_write(base + 512 + 40, bf_copy, 8);
    CHECK(!s.b.host.scheduled);
    s.b.dev.run();
    CHECK(s.b.dev.counters.guest_errors >= errors + 2);
    CHECK(!s.d.next_cqe(s.rcq));
    CHECK(s.b.dev.qps.find(a.qpn)->state == hca::QpState::Rts);
}
