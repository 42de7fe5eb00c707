#include "fw/iseg.h"

#include "be.h"
#include "device.h"

namespace hca {

void InitSeg::reset() {
    cmdq_h_ = 0;
    cmdq_l_ = 0;
    // After a reset the firmware shows the NIC interface disabled until the
    // driver's command-interface setup writes cmdq_addr_l_sz (nic_interface
    // 0, full driver). A driver bound across a function reset sees it
    // through its health poll (mlx5_health_check_fatal_sensors():
    // MLX5_SENSOR_NIC_DISABLED) and recovers; mlx5_error_sw_reset() waits for
    // this same state after the software reset handshake.
    nic_interface_ = kNicDisabled;
    ready_at_ = dev_.now() + kInitDelayNs;
    if (const Fault *f = dev_.faults.hit(FaultKind::InitDelay, {})) {
        ready_at_ = dev_.now() + f->ms * 1'000'000;
        dev_.faults.fired(*f, fmt::format("initializing for {} ms", f->ms));
    }
    synd_ = 0;
    died_at_ = 0;
    stalled_at_ = -1;
}

void InitSeg::stall_health() {
    if (stalled_at_ < 0) {
        stalled_at_ = dev_.now();
    }
}

void InitSeg::set_fatal(uint8_t synd, int64_t now) noexcept {
    if (!synd_) {
        synd_ = synd;
        died_at_ = now;
    }
}

uint32_t InitSeg::read32(uint32_t off) {
    const uint32_t fw_rev = (uint32_t{kFwMinor} << 16) | kFwMajor;  // major in the low half
    switch (off) {
    case kFwRev:
    case kHealthFwVer:
        return fw_rev;
    case kCmdifRevFwSub:
        return (kCmdifRev << 16) | kFwSubMinor;
    case kCmdqAddrH:
        return cmdq_h_;
    case kCmdqAddrLSz:
        return cmdq_l_ | (uint32_t{nic_interface_} << 8) | (kCmdqLogSize << 4) | kCmdqLogStride;
    case kInitializing:
        // Bit 31: firmware still initializing; bit 30: the firmware can be
        // reset through nic_interface (health.c reset_fw_if_needed()); bit
        // 23 (embedded CPU) is 0.
        return (dev_.now() < ready_at_ ? 0x80000000u : 0) | kFwResetSupported;
    case kInternalTimerH:
        return static_cast<uint32_t>(static_cast<uint64_t>(dev_.now()) >> 32);
    case kInternalTimerL:
        return static_cast<uint32_t>(dev_.now());
    case kHealthCounter:
        return static_cast<uint32_t>((synd_ ? died_at_ : stalled_at_ >= 0 ? stalled_at_ : dev_.now()) / kHealthTickNs);
    case kHealthTime:
        return synd_ ? static_cast<uint32_t>(died_at_ / 1'000'000'000) : 0;
    case kHealthRfr:
        return synd_ ? uint32_t{kRfrSeverityFatal} << 24 : 0;
    case kHealthSynd:
        return uint32_t{synd_} << 16;
    default:
        // Health buffer all zeros (healthy, synd 0), timeouts 0 (driver
        // defaults), doorbell and reserved words read 0.
        return 0;
    }
}

void InitSeg::read(uint32_t off, uint8_t *data, unsigned size) {
    for (unsigned i = 0; i < size; ++i) {
        const uint32_t o = off + i;
        const uint32_t word = o < kSize ? read32(o & ~3u) : 0;
        data[i] = static_cast<uint8_t>(word >> (24 - 8 * (o & 3)));
    }
}

void InitSeg::write(uint32_t off, const uint8_t *data, unsigned size) {
    // Split into 32-bit registers; a partial write merges into the current value.
    for (unsigned i = 0; i < size;) {
        const uint32_t o = off + i;
        const uint32_t reg = o & ~3u;
        uint8_t bytes[4];
        store_be32(bytes, reg == kCmdDbell ? 0 : read32(reg));
        unsigned n = 0;
        for (; i < size && ((off + i) & ~3u) == reg; ++i, ++n) {
            bytes[(off + i) & 3] = data[i];
        }
        if (n) {
            write32(reg, load_be32(bytes));
        }
    }
}

void InitSeg::write32(uint32_t off, uint32_t value) {
    switch (off) {
    case kCmdqAddrH:
        cmdq_h_ = value;
        HCA_TRACE(dev_, iseg_cmdq_addr_h, .value = value);
        return;
    case kCmdqAddrLSz: {
        // The driver writes the 4 KiB aligned address; log size and stride
        // are read-only.  Bits 10:8 carry nic_interface (fast teardown and
        // software reset write it).
        const uint8_t nic = (value >> 8) & 7;
        if (nic == kNicSwReset && synd_) {
            // The driver's recovery asks for the firmware reset the health
            // buffer's "reset for recovery" wants (health.c
            // reset_fw_if_needed()): everything is dropped as on a function
            // reset, and the firmware comes back with nic_interface disabled
            // and the health counter running, which mlx5_error_sw_reset()
            // and wait_vital() wait for.
            HCA_TRACE(dev_, iseg_nic_interface, .from = nic_interface_, .to = nic, .health_syndrome = synd_,
                      .reason = "firmware reset for recovery");
            dev_.reset();
            return;
        }
        if (dev_.fatal()) {
            return;  // nothing else reaches dead firmware
        }
        cmdq_l_ = value & ~0xfffu;
        if (nic != nic_interface_) {
            HCA_TRACE(dev_, iseg_nic_interface, .from = nic_interface_, .to = nic);
        }
        nic_interface_ = nic;
        HCA_TRACE(dev_, iseg_cmdq_addr_l, .value = value, .cmdq = cmdq_addr());
        return;
    }
    case kCmdDbell:
        dev_.cmdif.ring(value);
        return;
    default:
        dev_.guest_error("iseg write to read-only offset 0x{:x} value=0x{:08x}", off, value);
        return;
    }
}

}  // namespace hca
