// HCA capabilities (QUERY_HCA_CAP / SET_HCA_CAP), declared once as tables of
// PRM field names with their maximum and power-on current values.  Enabling
// a feature is one table line plus its implementation.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "ifc/mlx5_ifc.gen.h"

namespace hca {

// Capability types: QUERY_HCA_CAP op_mod = type << 1 | current (mlx5_ifc.h
// MLX5_SET_HCA_CAP_OP_MOD_*).
enum CapType : uint16_t {
    kCapGeneral = 0x0,
    kCapOdp = 0x2,
    kCapAtomic = 0x3,
    kCapNicFlowTable = 0x7,  // all zeros: no NIC flow steering (nic_flow_table 0)
    kCapDevMem = 0xf,
};

struct CapEntry {
    ifc::Field field;
    const char *name;
    uint64_t max;       // value of the "maximum" copy
    uint64_t cur;       // current value after power-on / reset
    bool settable;      // SET_HCA_CAP may change the current value (<= max)
};

class Caps {
  public:
    static constexpr size_t kCapBytes = 4096;
    using Image = std::array<uint8_t, kCapBytes>;

    Caps();
    void reset();
    bool supported(uint16_t type) const { return pages_.count(type) != 0; }
    const Image &image(uint16_t type, bool current) const;
    // Applies the driver's capability image; returns "" or why it was refused.
    std::string set(uint16_t type, const uint8_t *img);
    // Current value of a general capability.
    uint64_t gen(ifc::Field f) const { return ifc::get(pages_.at(kCapGeneral).cur.data(), f); }

  private:
    struct Page {
        Image max{};
        Image cur{};
    };
    std::map<uint16_t, Page> pages_;
};

}  // namespace hca
