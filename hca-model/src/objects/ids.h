// Number allocation for firmware objects (PDN, CQN, QPN, ...): the lowest
// free number at or after a rolling cursor, so a freed number is not handed
// out again at once (stale references from the driver then miss instead of
// hitting a new object, as on hardware).
#pragma once

#include <cstdint>
#include <optional>
#include <set>

namespace hca {

class IdAllocator {
  public:
    // Numbers in [first, limit), skipping any in `reserved`.
    IdAllocator(uint32_t first, uint32_t limit) : first_(first), limit_(limit), cursor_(first) {}

    std::optional<uint32_t> alloc() {
        if (used_.size() >= limit_ - first_) {
            return std::nullopt;
        }
        uint32_t id = cursor_;
        while (used_.count(id)) {
            id = id + 1 >= limit_ ? first_ : id + 1;
        }
        used_.insert(id);
        cursor_ = id + 1 >= limit_ ? first_ : id + 1;
        return id;
    }
    bool release(uint32_t id) { return used_.erase(id) != 0; }
    bool used(uint32_t id) const { return used_.count(id) != 0; }
    size_t count() const { return used_.size(); }
    void reset() {
        used_.clear();
        cursor_ = first_;
    }
    void set_limit(uint32_t limit) { limit_ = limit; }

  private:
    uint32_t first_;
    uint32_t limit_;
    uint32_t cursor_;
    std::set<uint32_t> used_;
};

}  // namespace hca
