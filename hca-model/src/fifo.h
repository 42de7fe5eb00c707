// A first-in first-out queue over a ring that keeps its storage: in a
// steady state pushing and popping allocate nothing (a std::deque
// allocates a node every few elements and frees it once they are popped,
// a heap allocation per few packets or WQEs). The ring doubles when full;
// the storage a burst beyond Keep elements took is given back when the
// queue drains.
#pragma once

#include <algorithm>
#include <cstddef>

#include <boost/circular_buffer.hpp>

namespace hca {

template <typename T, size_t Keep = 64>
class Fifo {
  public:
    using Ring = boost::circular_buffer<T>;
    bool empty() const { return ring_.empty(); }
    size_t size() const { return ring_.size(); }
    T &front() { return ring_.front(); }
    const T &front() const { return ring_.front(); }
    T &back() { return ring_.back(); }
    typename Ring::iterator begin() { return ring_.begin(); }
    typename Ring::iterator end() { return ring_.end(); }
    typename Ring::const_iterator begin() const { return ring_.begin(); }
    typename Ring::const_iterator end() const { return ring_.end(); }
    // References into the queue stay valid unless the ring has to grow.
    void push_back(T &&v) {
        grow_if_full();
        ring_.push_back(std::move(v));
    }
    void push_back(const T &v) { push_back(T(v)); }
    // A new default element at the back, to be filled in place (the ring
    // moves a default-constructed one in).
    T &emplace_back() {
        grow_if_full();
        ring_.push_back();
        return ring_.back();
    }
    // A new default element before the pos-th (pos == size(): at the back).
    T &emplace_at(size_t pos) {
        if (pos == ring_.size()) {
            return emplace_back();
        }
        grow_if_full();
        return *ring_.insert(ring_.begin() + static_cast<std::ptrdiff_t>(pos), T());
    }
    void pop_back() { ring_.pop_back(); }
    void pop_front() {
        ring_.pop_front();
        shrink();
    }
    typename Ring::iterator erase(typename Ring::iterator it) {
        it = ring_.erase(it);
        shrink();
        return it;
    }
    void clear() {
        ring_.clear();
        shrink();
    }

  private:
    void grow_if_full() {
        if (ring_.full()) {
            ring_.set_capacity(std::max<size_t>(8, ring_.capacity() * 2));
        }
    }
    void shrink() {
        if (ring_.empty() && ring_.capacity() > Keep) {
            ring_.set_capacity(Keep);
        }
    }
    Ring ring_;
};

}  // namespace hca
