// Firmware page management (core/pagealloc.c): the device asks for pages at
// boot and at INIT_HCA through QUERY_PAGES, takes them with MANAGE_PAGES
// GIVE and returns every one of them, as given, on MANAGE_PAGES TAKE.
#include "be.h"
#include "device.h"

namespace hca {

namespace {

// QUERY_PAGES op_mod
enum : uint16_t { kPagesBoot = 1, kPagesInit = 2, kPagesRegular = 3 };
// MANAGE_PAGES op_mod
enum : uint16_t { kManageAllocFail = 0, kManageGive = 1, kManageTake = 2 };

}  // namespace

void Firmware::query_pages(CmdCtx &c) {
    if (c.get(ifc::query_pages_in::function_id) != 0 || c.get(ifc::query_pages_in::embedded_cpu_function)) {
        c.fail(Status::BadParam, "function_id {}: only the PF (0) exists", c.get(ifc::query_pages_in::function_id));
        return;
    }
    int32_t n = 0;
    switch (c.op_mod) {
    case kPagesBoot:
        n = state_ == HcaState::Enabled && pages_.size() < static_cast<size_t>(kBootPages)
                ? kBootPages - static_cast<int32_t>(pages_.size())
                : 0;
        break;
    case kPagesInit:
        if (state_ == HcaState::Enabled) {
            n = std::max<int32_t>(0, kBootPages + kInitPages - static_cast<int32_t>(pages_.size()));
        }
        break;
    case kPagesRegular:
        n = 0;
        break;
    default:
        c.fail(Status::BadParam, "QUERY_PAGES op_mod {} is not boot/init/regular", c.op_mod);
        return;
    }
    pages_wanted_ = n;
    c.set(ifc::query_pages_out::function_id, 0);
    c.set(ifc::query_pages_out::num_pages, static_cast<uint32_t>(n));
    HCA_TRACE(dev_, pages_query, .op_mod = c.op_mod, .num_pages = n, .held = pages_.size());
}

void Firmware::page_request(int32_t npages) {
    if (npages > 0) {
        pages_wanted_ += npages;
    }
    HCA_TRACE(dev_, pages_request, .num_pages = npages, .held = pages_.size());
}

void Firmware::manage_pages(CmdCtx &c) {
    if (c.get(ifc::manage_pages_in::function_id) != 0 || c.get(ifc::manage_pages_in::embedded_cpu_function)) {
        c.fail(Status::BadParam, "function_id {}: only the PF (0) exists", c.get(ifc::manage_pages_in::function_id));
        return;
    }
    const uint32_t n = static_cast<uint32_t>(c.get(ifc::manage_pages_in::input_num_entries));
    switch (c.op_mod) {
    case kManageAllocFail:
        HCA_TRACE(dev_, pages_alloc_fail, .num_pages = n);
        pages_wanted_ = 0;
        return;
    case kManageGive: {
        auto pas = c.in_block(ifc::manage_pages_in::pas);
        if (uint64_t{n} * 8 > pas.size()) {
            c.fail(Status::BadInputLen, "{} page entries need {} bytes, the inbox has {}", n, uint64_t{n} * 8,
                   pas.size());
            return;
        }
        if (pages_.size() + n > limits::kFirmwarePages) {
            c.fail(Status::ExceedLim, "{} more pages exceed the {} the device keeps ({} held, {} asked for)", n,
                   limits::kFirmwarePages, pages_.size(), pages_wanted_);
            return;
        }
        for (uint32_t i = 0; i < n; ++i) {
            const uint64_t a = load_be64(pas.data() + i * 8);
            if (a & 0xfff) {
                c.fail(Status::BadParam, "page {} address 0x{:x} is not 4 KiB aligned", i, a);
                return;
            }
        }
        for (uint32_t i = 0; i < n; ++i) {
            pages_.push_back(load_be64(pas.data() + i * 8));
        }
        pages_wanted_ = std::max<int32_t>(0, pages_wanted_ - static_cast<int32_t>(n));
        HCA_TRACE(dev_, pages_give, .num = n, .held = pages_.size());
        return;
    }
    case kManageTake: {
        auto out = c.out_block(ifc::manage_pages_out::pas);
        const uint32_t fits = static_cast<uint32_t>(out.size() / 8);
        const uint32_t take = std::min<uint32_t>({n, fits, static_cast<uint32_t>(pages_.size())});
        for (uint32_t i = 0; i < take; ++i) {
            store_be64(out.data() + i * 8, pages_.back());
            pages_.pop_back();
        }
        c.set(ifc::manage_pages_out::output_num_entries, take);
        HCA_TRACE(dev_, pages_take, .asked = n, .returned = take, .held = pages_.size());
        return;
    }
    default:
        c.fail(Status::BadParam, "MANAGE_PAGES op_mod {} is not give/take/alloc-fail", c.op_mod);
        return;
    }
}

}  // namespace hca
