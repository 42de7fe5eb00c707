// Access registers (ACCESS_REG, core/port.c mlx5_core_access_reg()): a
// table of register id, name, size and handler.  A read answers the
// register with the input's index fields echoed; a write updates it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>
#include <string>

namespace hca {

struct CmdCtx;
class Device;

// Register ids (include/linux/mlx5/driver.h MLX5_REG_*).
enum RegisterId : uint16_t {
    kRegMcqs = 0x9060,
    kRegMcqi = 0x9061,
    kRegMcam = 0x907f,
    kRegMpein = 0x9050,
    kRegMfrl = 0x9028,
    kRegHostEndianness = 0x7004,
    kRegPcap = 0x5001,
    kRegNodeDesc = 0x6001,
};

struct RegAccess {
    CmdCtx &cmd;
    bool write;
    uint32_t argument;
    std::span<const uint8_t> in;  // register data from the inbox
    std::span<uint8_t> out;       // register data of the outbox (in echoed)
};

class Registers {
  public:
    explicit Registers(Device &dev) : dev_(dev) {}
    void reset();
    void access(CmdCtx &c);

    // Handlers (one per register).
    void host_endianness(RegAccess &r);
    void mcam(RegAccess &r);
    void mcqs(RegAccess &r);
    void mcqi(RegAccess &r);
    void pcap(RegAccess &r);
    void node_desc(RegAccess &r);
    void mpein(RegAccess &r);
    void mfrl(RegAccess &r);

    // MPEIN pwr_status (events.c: 0 could not be read, 1 sufficient, 2
    // insufficient) and the watts the slot advertises. The slot's, not
    // the firmware's: a reset keeps them. The general-event fault of
    // subtype pci-power sets them before its event.
    static constexpr uint8_t kPowerUnknown = 0, kPowerSufficient = 1, kPowerInsufficient = 2;
    void set_slot_power(uint8_t status, uint16_t watts) {
        slot_power_status_ = status;
        slot_power_watts_ = watts;
    }

  private:
    Device &dev_;
    std::array<uint8_t, 16> host_endianness_{};
    std::vector<uint8_t> request_;  // a short read request, zero-extended
    uint8_t slot_power_status_ = kPowerSufficient;
    uint16_t slot_power_watts_ = 75;  // a x16 slot's
};

}  // namespace hca
