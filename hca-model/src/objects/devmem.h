// Device memory (MEMIC): memory on the HCA that the host maps through BAR0
// and the data path reaches through MEMIC memory keys (ALLOC/DEALLOC_MEMIC,
// device_mem_cap; ibv_alloc_dm, ibv_reg_dm_mr).
//
// The memory is kBytes of the model at BAR0 offset kBarOffset: guest loads
// and stores reach it through Device::mmio_read/mmio_write, as CPU
// accesses to a real HCA's device memory cross PCIe. ALLOC_MEMIC
// places an allocation in a range the driver names; the data path addresses
// the memory as tagged() offsets that Device::mem_read/mem_write route here.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "hcasim/hca_model.h"

namespace hca {

struct CmdCtx;
class Device;

class DevMem {
  public:
    static constexpr uint64_t kBarOffset = HCA_MODEL_MEMIC_BAR_OFFSET;
    static constexpr uint32_t kBytes = HCA_MODEL_MEMIC_SIZE;
    static constexpr unsigned kLogMinAlloc = 6;      // 64-byte granules (MLX5_MEMIC_BASE_SIZE)
    static constexpr unsigned kLogMaxAlignment = 6;  // alignment up to 64 << 6 = 4 KiB
    // Addresses the data path uses for device memory: the tag bit over the
    // offset into it. No bus address of the host has bit 63 set.
    static constexpr uint64_t kTag = uint64_t{1} << 63;
    static uint64_t tagged(uint64_t offset) { return kTag | offset; }
    static bool is_tagged(uint64_t addr) { return addr & kTag; }

    explicit DevMem(Device &dev);
    // Teardown and reset: every allocation is gone and the memory zeroed.
    void reset();
    uint8_t *base() { return mem_.data(); }
    size_t allocations() const { return allocs_.size(); }
    // [offset, offset + len) inside the memory? (BAR0 offsets minus kBarOffset)
    static bool inside(uint64_t offset, uint64_t len) { return offset <= kBytes && len <= kBytes - offset; }
    bool read(uint64_t offset, void *buf, size_t len) const;
    bool write(uint64_t offset, const void *buf, size_t len);

    void cmd_alloc_memic(CmdCtx &c);
    void cmd_dealloc_memic(CmdCtx &c);

  private:
    // The lowest start >= from, aligned to align, of len free bytes ending
    // by end; kBytes if there is none.
    uint64_t find_free(uint64_t from, uint64_t end, uint64_t len, uint64_t align) const;

    Device &dev_;
    std::vector<uint8_t> mem_;
    std::map<uint64_t, uint64_t> allocs_;  // offset -> bytes
};

}  // namespace hca
