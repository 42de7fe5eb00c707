#include "objects/pages.h"

#include <fmt/format.h>

#include "be.h"
#include "fw/firmware.h"

namespace hca {

bool PageList::charge(Budget &b) {
    charge_.reset();
    auto ch = std::make_shared<Charge>(Charge{b, 0});
    if (!b.take(pages_.size())) {
        return false;
    }
    ch->n = pages_.size();
    charge_ = std::move(ch);
    return true;
}

std::string PageList::init(std::span<const uint8_t> pas, uint64_t npages, unsigned log_page_size,
                           uint64_t page_offset_bytes, uint64_t bytes) {
    if (log_page_size > kMaxLogPageSize) {
        return fmt::format("log_page_size {} is larger than 1 GiB pages", log_page_size);
    }
    const unsigned shift = 12 + log_page_size;
    if (page_offset_bytes >= (uint64_t{1} << shift)) {
        return fmt::format("page_offset {} is not inside the first page", page_offset_bytes);
    }
    const uint64_t need = pages_needed(bytes, log_page_size, page_offset_bytes);
    if (need > npages) {
        return fmt::format("the buffer needs {} pages but {} are given", need, npages);
    }
    if (need * 8 > pas.size()) {
        return fmt::format("the page list needs {} bytes but the input has {}", need * 8, pas.size());
    }
    charge_.reset();
    pages_.resize(need);
    for (uint64_t i = 0; i < need; ++i) {
        // Low bits may carry flags (e.g. MLX5_IB_MTT_PRESENT): the page
        // address is what remains when they are cleared.
        const uint64_t a = load_be64(pas.data() + i * 8) & ~uint64_t{7};
        if (a & ((uint64_t{1} << shift) - 1) & ~uint64_t{0xfff}) {
            return fmt::format("page {} at 0x{:x} is not aligned to the page size", i, a);
        }
        if (a & 0xfff) {
            return fmt::format("page {} at 0x{:x} is not 4 KiB aligned", i, a);
        }
        pages_[i] = a;
    }
    shift_ = shift;
    offset_ = page_offset_bytes;
    bytes_ = bytes;
    return {};
}

std::string PageList::slice(const PageList &from, uint64_t off, uint64_t bytes) {
    if (bytes == 0 || off > from.bytes_ || bytes > from.bytes_ - off) {
        return fmt::format("0x{:x} bytes at offset 0x{:x} do not fit in its 0x{:x} bytes", bytes, off, from.bytes_);
    }
    const uint64_t first = from.offset_ + off;
    const uint64_t last = first + bytes - 1;
    charge_.reset();
    pages_.assign(from.pages_.begin() + static_cast<ptrdiff_t>(first >> from.shift_),
                  from.pages_.begin() + static_cast<ptrdiff_t>((last >> from.shift_) + 1));
    shift_ = from.shift_;
    offset_ = first & ((uint64_t{1} << shift_) - 1);
    bytes_ = bytes;
    return {};
}

bool load_queue_buffer(CmdCtx &c, Budget &budget, PageList &buf, const char *what, std::span<const uint8_t> pas,
                       uint64_t npages, unsigned log_page_size, uint64_t page_offset_bytes, uint64_t bytes) {
    if (std::string why = buf.init(pas, npages, log_page_size, page_offset_bytes, bytes); !why.empty()) {
        c.fail(Status::BadParam, "{} buffer: {}", what, why);
        return false;
    }
    if (!buf.charge(budget)) {
        c.fail(Status::ExceedLim, "{} buffer: {} page entries exceed the translation budget ({} of {} in use)", what,
               buf.npages(), budget.used(), budget.max());
        return false;
    }
    return true;
}

}  // namespace hca
