// PSVs (protection signature variables, CREATE_PSV/DESTROY_PSV): the
// per-domain state a signature key names in its BSF, whose transient
// signature a SET_PSV WQE loads (objects/sig.h). mlx5_ib makes two per
// integrity MR (memory and wire); libmlx5 makes each through DEVX.
#pragma once

#include <cstdint>
#include <map>

#include "objects/ids.h"

namespace hca {

struct CmdCtx;
class Device;

struct Psv {
    uint32_t pd = 0;
    uint16_t uid = 0;
    uint64_t transient_sig = 0;  // the last SET_PSV's
};

class PsvTable {
  public:
    // PSVs the device keeps (a firmware limit: beyond it CREATE_PSV answers
    // NO_RESOURCES).
    static constexpr uint32_t kMaxPsvs = 1u << 16;

    explicit PsvTable(Device &dev) : dev_(dev) {}
    void reset();
    size_t count() const { return psvs_.size(); }
    Psv *find(uint32_t index);
    const Psv *find(uint32_t index) const;

    void cmd_create_psv(CmdCtx &c);
    void cmd_destroy_psv(CmdCtx &c);

  private:
    Device &dev_;
    IdAllocator ids_{1, 1u << 24};
    std::map<uint32_t, Psv> psvs_;
};

}  // namespace hca
