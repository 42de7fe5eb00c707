// A memory key's translation entries (MTT pages, KLM or KSM entries),
// stored in chunks that exist only once an entry in them holds something
// other than the table's blank value. On-demand paging zaps whole tables:
// mlx5_ib's implicit MR is a KSM key with an entry per GiB of a 5-level
// address space (2^26) and children of 2^18 to 2^22 MTT entries, nearly
// all of them blank (the null mkey, a page not present) for their whole
// life; a dense table would cost gigabytes of host memory.
//
// What the table costs the device's translation budget is counted in
// 8-byte units of host memory: one per chunk slot (slots exist up to the
// last chunk present), sizeof(T) / 8 per entry of each chunk present.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace hca {

template <typename T>
class XltTable {
  public:
    static constexpr size_t kChunk = 64;

    explicit XltTable(T blank = T{}) : blank_(blank) {}

    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    // Entry i (i < size()); blank where nothing was ever stored.
    T operator[](size_t i) const {
        const size_t c = i / kChunk;
        return c < chunks_.size() && chunks_[c] ? (*chunks_[c])[i % kChunk] : blank_;
    }
    uint64_t cost() const { return chunks_.size() + present_ * kUnitsPerChunk; }
    // The cost that storing vals from entry first on adds (the table grows
    // to first + vals.size() entries if it is smaller).
    uint64_t extra_cost(size_t first, std::span<const T> vals) const {
        size_t slots = chunks_.size();
        uint64_t chunks = 0;
        for (size_t i = 0; i < vals.size();) {
            const size_t c = (first + i) / kChunk;
            const size_t stop = std::min(vals.size(), (c + 1) * kChunk - first);
            if ((c >= chunks_.size() || !chunks_[c]) &&
                std::any_of(vals.begin() + i, vals.begin() + stop, [this](const T &v) { return !(v == blank_); })) {
                ++chunks;
                slots = std::max(slots, c + 1);
            }
            i = stop;
        }
        return slots - chunks_.size() + chunks * kUnitsPerChunk;
    }
    // Stores vals from entry first on, growing the table; adds exactly
    // extra_cost(first, vals) to cost().
    void store(size_t first, std::span<const T> vals) {
        size_ = std::max(size_, first + vals.size());
        for (size_t i = 0; i < vals.size(); ++i) {
            const size_t c = (first + i) / kChunk;
            if (c >= chunks_.size() || !chunks_[c]) {
                if (vals[i] == blank_) {
                    continue;
                }
                if (c >= chunks_.size()) {
                    chunks_.resize(c + 1);
                }
                chunks_[c] = std::make_unique<Chunk>();
                chunks_[c]->fill(blank_);
                ++present_;
            }
            (*chunks_[c])[(first + i) % kChunk] = vals[i];
        }
    }

  private:
    using Chunk = std::array<T, kChunk>;
    static constexpr uint64_t kUnitsPerChunk = kChunk * ((sizeof(T) + 7) / 8);

    T blank_;
    size_t size_ = 0;
    size_t present_ = 0;
    std::vector<std::unique_ptr<Chunk>> chunks_;
};

}  // namespace hca
