// Every initialization-segment register the driver reads or writes.
#include <catch2/catch.hpp>

#include "be.h"
#include "driver.h"
#include "fw/iseg.h"

using namespace hcatest;
using hca::InitSeg;

TEST_CASE("iseg identity: firmware revision and command interface revision", "[iseg]") {
    Bench b;
    Driver d(b);
    const uint32_t fw = d.iseg_read32(InitSeg::kFwRev);
    CHECK((fw & 0xffff) == hca::kFwMajor);  // device.h fw_rev_maj(): low half
    CHECK((fw >> 16) == hca::kFwMinor);
    const uint32_t rev = d.iseg_read32(InitSeg::kCmdifRevFwSub);
    CHECK((rev >> 16) == 5);  // CMD_IF_REV
    CHECK((rev & 0xffff) == hca::kFwSubMinor);
}

TEST_CASE("iseg command queue address, geometry and nic_interface", "[iseg]") {
    Bench b;
    Driver d(b);
    uint32_t lsz = d.iseg_read32(InitSeg::kCmdqAddrLSz);
    CHECK((lsz & 0xff) == 0x56);      // log_sz 5, log_stride 6
    CHECK(((lsz >> 8) & 7) == 1);     // nic_interface after reset: disabled
    d.iseg_write32(InitSeg::kCmdqAddrH, 0x12);
    d.iseg_write32(InitSeg::kCmdqAddrLSz, 0x34567000);
    CHECK(d.iseg_read32(InitSeg::kCmdqAddrH) == 0x12);
    lsz = d.iseg_read32(InitSeg::kCmdqAddrLSz);
    CHECK(((lsz >> 8) & 7) == 0);  // mlx5_cmd_init()'s write: full driver
    CHECK((lsz & 0xfffff000) == 0x34567000);
    CHECK((lsz & 0xff) == 0x56);  // geometry survives the address write
    CHECK(b.dev.iseg.cmdq_addr() == 0x1234567000ull);
    // The driver writes nic_interface with read-modify-write (health.c mlx5_set_nic_state()).
    d.iseg_write32(InitSeg::kCmdqAddrLSz, (lsz & ~0x700u) | (1u << 8));
    CHECK(((d.iseg_read32(InitSeg::kCmdqAddrLSz) >> 8) & 7) == 1);
    CHECK((d.iseg_read32(InitSeg::kCmdqAddrLSz) & 0xff) == 0x56);
}

TEST_CASE("iseg initializing bit clears after reset, embedded CPU bit is 0", "[iseg]") {
    Bench b;
    Driver d(b);
    CHECK(d.iseg_read32(InitSeg::kInitializing) == InitSeg::kFwResetSupported);
    b.dev.reset();
    CHECK(d.iseg_read32(InitSeg::kInitializing) >> 31 == 1);
    CHECK((d.iseg_read32(InitSeg::kInitializing) >> 23 & 1) == 0);
    b.advance(InitSeg::kInitDelayNs);
    CHECK(d.iseg_read32(InitSeg::kInitializing) == InitSeg::kFwResetSupported);
}

TEST_CASE("iseg health buffer is healthy and health_counter advances", "[iseg]") {
    Bench b;
    Driver d(b);
    for (uint32_t off = InitSeg::kHealth; off < InitSeg::kHealth + 0x40; off += 4) {
        if (off == InitSeg::kHealthFwVer) {
            CHECK(d.iseg_read32(off) != 0xffffffff);  // sensor_pci_not_working()
        } else {
            CHECK(d.iseg_read32(off) == 0);
        }
    }
    CHECK(d.iseg_read8(0x23d) == 0);  // synd, read as a byte by the driver
    CHECK(d.iseg_read8(0x238) == 0);  // rfr_severity
    const uint32_t c0 = d.iseg_read32(InitSeg::kHealthCounter);
    b.advance(1'000'000'000);
    const uint32_t c1 = d.iseg_read32(InitSeg::kHealthCounter);
    CHECK(c1 != c0);  // advances at least once a second
    CHECK(c1 - c0 >= 1);
    CHECK(d.iseg_read32(InitSeg::kCmdQInitTo) == 0);  // driver default timeouts
    CHECK(d.iseg_read32(InitSeg::kCmdExecTo) == 0);
}

TEST_CASE("iseg internal timer counts nanoseconds (device_frequency_khz 1e6)", "[iseg]") {
    Bench b;
    Driver d(b);
    auto timer = [&] {
        return (uint64_t{d.iseg_read32(InitSeg::kInternalTimerH)} << 32) | d.iseg_read32(InitSeg::kInternalTimerL);
    };
    const uint64_t t0 = timer();
    b.advance(5000);
    CHECK(timer() - t0 == 5000);
    // 64-bit reads of the pair come out in big-endian order too.
    uint8_t raw[8];
    b.dev.mmio_read(InitSeg::kInternalTimerH, raw, 8);
    CHECK(hca::load_be64(raw) == timer());
}

TEST_CASE("iseg writes to read-only registers are ignored and counted", "[iseg]") {
    Bench b;
    Driver d(b);
    const uint64_t errors = b.dev.counters.guest_errors;
    d.iseg_write32(InitSeg::kFwRev, 0xdeadbeef);
    d.iseg_write32(InitSeg::kHealthCounter, 0);
    CHECK(d.iseg_read32(InitSeg::kFwRev) != 0xdeadbeef);
    CHECK(b.dev.counters.guest_errors == errors + 2);
    // Writes beyond BAR0 are refused, not a crash.
    uint8_t v[8] = {};
    b.dev.mmio_write(HCA_MODEL_BAR0_SIZE - 4, v, 8);
    CHECK(b.dev.counters.guest_errors == errors + 3);
}

TEST_CASE("iseg reads of UAR pages return zeros", "[iseg]") {
    Bench b;
    uint8_t v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    b.dev.mmio_read(5 * 4096 + 0x800, v, 8);
    for (uint8_t x : v) {
        CHECK(x == 0);
    }
}
