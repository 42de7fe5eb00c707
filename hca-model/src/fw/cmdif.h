// The command interface (core/cmd.c): 32 command slots of 64 bytes at the
// address in the initialization segment, input/output mailbox chains of
// 512-byte data blocks, ownership and delivery status, and completion by
// polling or by CMD EQEs.
#pragma once

#include <cstdint>
#include <vector>

#include "fw/prm.h"

namespace hca {

class Device;
struct CmdCtx;

class CommandInterface {
  public:
    static constexpr unsigned kSlots = 32;
    static constexpr unsigned kSlotSize = 64;
    // struct mlx5_cmd_layout
    static constexpr unsigned kLayType = 0x00;
    static constexpr unsigned kLayInlen = 0x04;
    static constexpr unsigned kLayInPtr = 0x08;
    static constexpr unsigned kLayIn = 0x10;
    static constexpr unsigned kLayOut = 0x20;
    static constexpr unsigned kLayOutPtr = 0x30;
    static constexpr unsigned kLayOutlen = 0x38;
    static constexpr unsigned kLayToken = 0x3c;
    static constexpr unsigned kLayStatusOwn = 0x3f;
    static constexpr uint8_t kPciCmdXport = 7;
    // struct mlx5_cmd_prot_block
    static constexpr unsigned kBlockData = 512;
    static constexpr unsigned kBlockSize = 576;
    static constexpr unsigned kBlockNext = 0x230;
    static constexpr unsigned kBlockNum = 0x238;
    static constexpr unsigned kBlockToken = 0x23d;
    // Largest message accepted (a CREATE_MKEY with the page list of a 16 GiB MR).
    static constexpr uint32_t kMaxMsg = 32u << 20;

    explicit CommandInterface(Device &dev) : dev_(dev) {}
    void reset();
    // Command doorbell write: one bit per slot handed to the device.
    void ring(uint32_t bits);
    bool pending() const { return pending_ != 0; }
    // Executes every rung slot; called from Device::run().
    void process();

  private:
    // Returns true when the completion may be signalled with a CMD EQE.
    bool execute(unsigned slot);
    static Delivery descriptor_status(uint8_t type, uint32_t inlen, uint32_t outlen);
    void report_status(const CmdCtx &ctx);
    Delivery gather(uint64_t ptr, uint8_t token, std::vector<uint8_t> &in, uint32_t inlen);
    Delivery scatter(uint64_t ptr, uint8_t token, const std::vector<uint8_t> &out);
    enum class Injected : uint8_t { None, Status, Delivery, Delay, Drop };
    struct Verdict {
        Injected what = Injected::None;
        int64_t delay_ns = 0;  // of Injected::Delay
    };
    Verdict injected(unsigned slot, CmdCtx &ctx, Delivery &deliv);
    void complete_later(int64_t delay_ns, unsigned slot, uint64_t lay_addr, uint8_t status_own, bool eqe);

    Device &dev_;
    uint32_t pending_ = 0;
};

}  // namespace hca
