// The initialization segment at BAR0 offset 0 (device.h struct
// mlx5_init_seg): firmware revision, command-queue address and geometry,
// command doorbell, "initializing" flag, health buffer and counter, and the
// free-running internal timer.
#pragma once

#include <cstdint>

namespace hca {

class Device;

class InitSeg {
  public:
    // Register offsets (MLX5-OFFSETS.txt, mlx5_init_seg).
    static constexpr uint32_t kFwRev = 0x000;
    static constexpr uint32_t kCmdifRevFwSub = 0x004;
    static constexpr uint32_t kCmdqAddrH = 0x010;
    static constexpr uint32_t kCmdqAddrLSz = 0x014;
    static constexpr uint32_t kCmdDbell = 0x018;
    static constexpr uint32_t kInitializing = 0x1fc;
    static constexpr uint32_t kHealth = 0x200;        // struct health_buffer, 64 bytes
    static constexpr uint32_t kHealthTime = 0x22c;
    static constexpr uint32_t kHealthFwVer = 0x230;
    static constexpr uint32_t kHealthRfr = 0x238;     // rfr_severity byte, then reserved
    static constexpr uint32_t kHealthSynd = 0x23c;    // irisc_index, synd, ext_synd (16 bits)
    static constexpr uint32_t kCmdExecTo = 0xff8;
    static constexpr uint32_t kCmdQInitTo = 0xffc;
    static constexpr uint32_t kInternalTimerH = 0x1000;
    static constexpr uint32_t kInternalTimerL = 0x1004;
    static constexpr uint32_t kHealthCounter = 0x1010;
    static constexpr uint32_t kSize = 0x2010;

    static constexpr uint32_t kCmdifRev = 5;
    static constexpr uint32_t kCmdqLogSize = 5;    // 32 slots
    static constexpr uint32_t kCmdqLogStride = 6;  // 64-byte slots
    // "Initializing" stays set this long after a reset.
    static constexpr int64_t kInitDelayNs = 20'000'000;
    // health_counter advances this often (the driver polls every 2-3 s).
    static constexpr int64_t kHealthTickNs = 250'000'000;

    // nic_interface (cmdq_addr_l_sz bits 10:8, health.c mlx5_get_nic_state()).
    // Health syndromes (mlx5_ifc.h initial_seg_health_syndrome; health.c
    // hsynd_str()): 0x1 "firmware internal error".
    static constexpr uint8_t kSyndFwInternalErr = 0x1;
    // rfr_severity: bit 7 "reset for recovery" makes a non-zero syndrome a
    // fatal sensor (health.c sensor_fw_synd_rfr()); bit 3 marks the low
    // bits as a valid severity, 2 = critical (mlx5_health_get_severity()).
    static constexpr uint8_t kRfrSeverityFatal = 0x80 | 0x08 | 2;

    // initializing bit 30 (MLX5_FW_RESET_SUPPORTED).
    static constexpr uint32_t kFwResetSupported = 1u << 30;

    enum NicInterface : uint8_t { kNicFullDriver = 0, kNicDisabled = 1, kNicNoDram = 2, kNicSwReset = 7 };

    explicit InitSeg(Device &dev) : dev_(dev) {}
    void reset();
    void read(uint32_t off, uint8_t *data, unsigned size);
    void write(uint32_t off, const uint8_t *data, unsigned size);

    uint64_t cmdq_addr() const { return (uint64_t{cmdq_h_} << 32) | cmdq_l_; }
    uint8_t nic_interface() const { return nic_interface_; }
    uint32_t read32(uint32_t off);
    // Firmware died: the health buffer reports synd and asks for a reset,
    // and health_counter stops (the iRISCs no longer run).  reset() clears it.
    void set_fatal(uint8_t synd, int64_t now) noexcept;
    uint8_t health_synd() const { return synd_; }
    // The health counter stops (a fault: firmware hung, not dead) until reset.
    void stall_health();

  private:
    void write32(uint32_t off, uint32_t value);

    Device &dev_;
    uint32_t cmdq_h_ = 0;
    uint32_t cmdq_l_ = 0;
    uint8_t nic_interface_ = kNicFullDriver;
    int64_t ready_at_ = 0;
    uint8_t synd_ = 0;
    int64_t died_at_ = 0;
    int64_t stalled_at_ = -1;
};

}  // namespace hca
