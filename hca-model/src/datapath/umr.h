// The UMR engine: UMR WQEs (the REG_UMR QP's key updates, REG_MR and
// LOCAL_INV on connected QPs, memory-window binds) applied to the memory
// keys. Stateless between WQEs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "objects/mkey.h"

namespace hca {

class Device;
struct Qp;
struct SqWqe;

class UmrEngine {
  public:
    explicit UmrEngine(Device &dev) : dev_(dev) {}
    // Carries out a UMR WQE; false with the completion syndrome if it failed.
    bool execute(Qp &qp, const SqWqe &w, uint8_t &synd);

  private:
    bool fetch_xlt(Qp &qp, uint16_t index, std::span<const uint8_t> seg, UmrOp &op, uint8_t &synd);
    void trace(const Qp &qp, uint16_t index, const UmrOp &op, uint32_t octowords);

    Device &dev_;
    std::vector<DmaChunk> chunks_;  // translations of the pointed-to entries
};

}  // namespace hca
