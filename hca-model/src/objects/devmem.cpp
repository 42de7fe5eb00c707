#include "objects/devmem.h"

#include <algorithm>
#include <cstring>

#include "device.h"

namespace hca {

DevMem::DevMem(Device &dev) : dev_(dev), mem_(kBytes) {}

void DevMem::reset() {
    allocs_.clear();
    std::fill(mem_.begin(), mem_.end(), 0);
}

bool DevMem::read(uint64_t offset, void *buf, size_t len) const {
    if (!inside(offset, len)) {
        return false;
    }
    std::memcpy(buf, mem_.data() + offset, len);
    return true;
}

bool DevMem::write(uint64_t offset, const void *buf, size_t len) {
    if (!inside(offset, len)) {
        return false;
    }
    std::memcpy(mem_.data() + offset, buf, len);
    return true;
}

uint64_t DevMem::find_free(uint64_t from, uint64_t end, uint64_t len, uint64_t align) const {
    uint64_t at = (from + align - 1) & ~(align - 1);
    for (auto it = allocs_.begin(); at <= end && len <= end - at; at = (at + align - 1) & ~(align - 1)) {
        // The first allocation that ends after at: a free start lies before
        // it or after it.
        while (it != allocs_.end() && it->first + it->second <= at) {
            ++it;
        }
        if (it == allocs_.end() || at + len <= it->first) {
            return at;
        }
        at = it->first + it->second;
    }
    return kBytes;
}

void DevMem::cmd_alloc_memic(CmdCtx &c) {
    const uint64_t start = c.get(ifc::alloc_memic_in::range_start_addr);
    const uint64_t range = c.get(ifc::alloc_memic_in::range_size);
    const uint64_t size = c.get(ifc::alloc_memic_in::memic_size);
    const uint64_t log_align = c.get(ifc::alloc_memic_in::log_memic_addr_alignment);
    if (start < kBarOffset || !inside(start - kBarOffset, range)) {
        c.fail(Status::BadParam, "MEMIC range 0x{:x}+0x{:x} is outside the device memory (BAR0 0x{:x}+0x{:x})", start,
               range, kBarOffset, kBytes);
        return;
    }
    if (size == 0 || size > range || size % (uint64_t{1} << kLogMinAlloc)) {
        c.fail(Status::BadParam, "MEMIC size 0x{:x} is not a multiple of {} bytes within the range of 0x{:x}", size,
               1u << kLogMinAlloc, range);
        return;
    }
    if (log_align > kLogMaxAlignment) {
        c.fail(Status::BadParam, "log_memic_addr_alignment {} exceeds {}", log_align, kLogMaxAlignment);
        return;
    }
    const uint64_t from = start - kBarOffset;
    const uint64_t at = find_free(from, from + range, size, uint64_t{64} << log_align);
    if (at == kBytes) {
        c.fail(Status::NoRes, "no free 0x{:x} bytes of device memory in 0x{:x}+0x{:x}", size, start, range);
        return;
    }
    allocs_.emplace(at, size);
    std::memset(mem_.data() + at, 0, size);  // nothing of an earlier owner is left to read
    c.set(ifc::alloc_memic_out::memic_start_addr, kBarOffset + at);
    HCA_TRACE(dev_, obj_alloc_memic, .addr = kBarOffset + at, .size = size, .range = start, .range_size = range);
}

void DevMem::cmd_dealloc_memic(CmdCtx &c) {
    const uint64_t addr = c.get(ifc::dealloc_memic_in::memic_start_addr);
    const uint64_t size = c.get(ifc::dealloc_memic_in::memic_size);
    auto it = addr >= kBarOffset ? allocs_.find(addr - kBarOffset) : allocs_.end();
    if (it == allocs_.end() || it->second != size) {
        c.fail(Status::BadParam, "no MEMIC allocation of 0x{:x} bytes at 0x{:x}", size, addr);
        return;
    }
    allocs_.erase(it);
    HCA_TRACE(dev_, obj_dealloc_memic, .addr = addr, .size = size);
}

}  // namespace hca
