// Translation of a queue buffer (EQ, CQ, QP, SRQ) described by a PAS list:
// pages of 4 KiB << log_page_size, the first one entered at page_offset.
// Kernel buffers are not physically contiguous, so every access goes
// through here.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "fw/fw_limits.h"

namespace hca {

struct CmdCtx;

class PageList {
  public:
    // Largest log_page_size (over 4 KiB) a queue's page list may use: 1 GiB.
    static constexpr unsigned kMaxLogPageSize = 18;
    // Byte offset of a queue in its first page from the context's
    // page_offset (in 1/64ths of a page). 0 for a page size init() refuses,
    // so a guest's 6-bit log_page_size never makes the shift undefined.
    static uint64_t offset_bytes(uint64_t page_offset, unsigned log_page_size) {
        return log_page_size > kMaxLogPageSize ? 0 : page_offset << (12 + log_page_size) >> 6;
    }
    // Reads npages BE64 entries; checks count and alignment against the
    // bytes the queue needs.  Returns "" or why the list is unusable.
    std::string init(std::span<const uint8_t> pas, uint64_t npages, unsigned log_page_size,
                     uint64_t page_offset_bytes, uint64_t bytes);
    // The bytes [off, off + bytes) of another list (a UMEM's) as a buffer of
    // its own.  Returns "" or why the range does not fit.
    std::string slice(const PageList &from, uint64_t off, uint64_t bytes);
    // Counts the entries against the device's translation budget until the
    // list (and every copy of it: MODIFY_QP works on a copy) is destroyed or
    // replaced; false (nothing charged) when the budget is spent.
    bool charge(Budget &b);
    // Guest address of byte off of the buffer (off < bytes()).
    uint64_t addr(uint64_t off) const {
        const uint64_t o = off + offset_;
        return pages_[o >> shift_] + (o & ((uint64_t{1} << shift_) - 1));
    }
    // Bytes from off to the end of its page (for contiguous DMA chunks).
    uint64_t run(uint64_t off) const {
        const uint64_t o = off + offset_;
        return (uint64_t{1} << shift_) - (o & ((uint64_t{1} << shift_) - 1));
    }
    uint64_t bytes() const { return bytes_; }
    unsigned page_shift() const { return shift_; }
    size_t npages() const { return pages_.size(); }
    // Number of PAS entries a buffer of this size needs.
    static uint64_t pages_needed(uint64_t bytes, unsigned log_page_size, uint64_t page_offset_bytes) {
        const unsigned shift = 12 + log_page_size;
        return (bytes + page_offset_bytes + (uint64_t{1} << shift) - 1) >> shift;
    }

  private:
    struct Charge {
        Budget &budget;
        uint64_t n;
        ~Charge() { budget.give(n); }
    };

    std::vector<uint64_t> pages_;
    std::shared_ptr<const Charge> charge_;
    unsigned shift_ = 12;
    uint64_t offset_ = 0;
    uint64_t bytes_ = 0;
};

// init() and charge() for the command that creates (or resizes) a queue of
// kind what: false when the command failed, with BAD_PARAM for an unusable
// page list or LIM when the translation budget is spent.
bool load_queue_buffer(CmdCtx &c, Budget &budget, PageList &buf, const char *what, std::span<const uint8_t> pas,
                       uint64_t npages, unsigned log_page_size, uint64_t page_offset_bytes, uint64_t bytes);

}  // namespace hca
