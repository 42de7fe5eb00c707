// UAR pages: BAR0 page N (N >= 3; pages 0-2 hold the initialization
// segment) is UAR index N.  ALLOC_UAR hands them out, the doorbells written
// to them are decoded by Device::uar_doorbell().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hca {

struct CmdCtx;
class Device;

class UarTable {
  public:
    static constexpr uint32_t kFirst = 3;  // indexes 0-2 overlap the init segment

    // UAR page offsets (cq.h, lib/eq.h, hw/wr.c).
    static constexpr uint32_t kCqDoorbell = 0x020;
    static constexpr uint32_t kEqArmDoorbell = 0x040;
    static constexpr uint32_t kEqCiDoorbell = 0x048;
    static constexpr uint32_t kBfRegion = 0x800;

    UarTable(Device &dev, uint32_t pages);
    void reset();
    std::optional<uint32_t> alloc();
    bool allocated(uint32_t idx) const { return idx < used_.size() && used_[idx]; }
    size_t in_use() const;

    void cmd_alloc_uar(CmdCtx &c);
    void cmd_dealloc_uar(CmdCtx &c);

  private:
    Device &dev_;
    std::vector<bool> used_;
};

}  // namespace hca
