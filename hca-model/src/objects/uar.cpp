#include "objects/uar.h"

#include <algorithm>

#include "device.h"

namespace hca {

UarTable::UarTable(Device &dev, uint32_t pages) : dev_(dev), used_(pages, false) {}

void UarTable::reset() { std::fill(used_.begin(), used_.end(), false); }

std::optional<uint32_t> UarTable::alloc() {
    for (uint32_t i = kFirst; i < used_.size(); ++i) {
        if (!used_[i]) {
            used_[i] = true;
            return i;
        }
    }
    return std::nullopt;
}

size_t UarTable::in_use() const { return static_cast<size_t>(std::count(used_.begin(), used_.end(), true)); }

void UarTable::cmd_alloc_uar(CmdCtx &c) {
    auto idx = alloc();
    if (!idx) {
        c.fail(Status::NoRes, "all {} UAR pages are allocated", used_.size() - kFirst);
        return;
    }
    c.set(ifc::alloc_uar_out::uar, *idx);
    dev_.qps.sq().forget_uar(*idx);
    HCA_TRACE(dev_, uar_alloc, .uar = *idx);
}

void UarTable::cmd_dealloc_uar(CmdCtx &c) {
    const uint32_t idx = static_cast<uint32_t>(c.get(ifc::dealloc_uar_in::uar));
    if (!allocated(idx)) {
        c.fail(Status::BadRes, "UAR {} is not allocated", idx);
        return;
    }
    used_[idx] = false;
    dev_.qps.sq().forget_uar(idx);
    HCA_TRACE(dev_, uar_dealloc, .uar = idx);
}

}  // namespace hca
