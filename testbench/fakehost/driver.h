// The driver's side of the device, played by tests and fuzzers: the
// initialization segment, the command queue with mailbox chains in polling
// and event mode, UARs and EQs (the shape of QEMU's libqos helpers).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "fake_host.h"
#include "ifc/mlx5_ifc.gen.h"
#include "prm.h"

namespace hcatest {

struct CmdResult {
    uint8_t delivery = 0;
    uint8_t status = 0;
    uint32_t syndrome = 0;
    std::vector<uint8_t> out;  // whole outbox (outlen bytes)
    bool completed = false;    // ownership returned to software

    uint64_t get(hca::ifc::Field f) const { return hca::ifc::get(out.data(), f); }
};

struct EqHandle {
    uint32_t eqn = 0;
    uint64_t buf = 0;
    uint32_t nent = 0;
    unsigned vector = 0;
    uint32_t uar = 0;
    uint32_t ci = 0;
};

using Eqe = std::array<uint8_t, 64>;

class Driver {
  public:
    explicit Driver(Bench &b) : b_(b) {}

    uint32_t iseg_read32(uint32_t off);
    uint8_t iseg_read8(uint32_t off);
    void iseg_write32(uint32_t off, uint32_t v);
    void bar_write(uint64_t off, const void *data, unsigned size);

    // Allocates the 4 KiB command page and programs its address.
    void setup_cmdq();
    // An inbox of inlen bytes with opcode/op_mod set.
    static std::vector<uint8_t> inbox(uint16_t opcode, uint16_t op_mod, size_t inlen);

    // Posts a command in slot and rings its doorbell without running the
    // device (for tests that ring several slots at once).
    void post(unsigned slot, const std::vector<uint8_t> &in, size_t outlen, uint8_t token = 0x5a);
    void ring(uint32_t bits);
    // Reads back the result of slot (whether or not it completed).
    CmdResult result(unsigned slot);
    // post + ring + pump + result.
    CmdResult exec(const std::vector<uint8_t> &in, size_t outlen, unsigned slot = 0);

    // ENABLE_HCA .. INIT_HCA as mlx5_core does it in polling mode.
    void bring_up();
    uint32_t alloc_uar();
    // CREATE_EQ with a freshly allocated buffer (owner bits set to 1 like
    // eq.c init_eq_buf()); arms it.
    EqHandle create_eq(unsigned log_size, unsigned vector, std::array<uint64_t, 4> events, uint32_t uar,
                       CmdResult *res = nullptr);
    // Next software-owned EQE, advancing the consumer index.
    std::optional<Eqe> next_eqe(EqHandle &eq);
    void eq_doorbell(const EqHandle &eq, bool arm);

    Bench &bench() { return b_; }
    uint64_t cmdq() const { return cmdq_; }

  private:
    uint64_t chain(size_t bytes, uint8_t token);  // allocates a mailbox chain

    Bench &b_;
    uint64_t cmdq_ = 0;
    std::map<uint32_t, std::vector<uint64_t>> pages_;  // EQ buffers by EQN
    struct Slot {
        uint64_t out_chain = 0;
        size_t outlen = 0;
    };
    std::array<Slot, 32> slots_{};
};

}  // namespace hcatest
