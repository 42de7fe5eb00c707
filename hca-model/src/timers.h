// One-shot timers of the model, multiplexed onto the host's single timer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <utility>

namespace hca {

class Timers {
  public:
    using Id = uint64_t;

    Id add(int64_t deadline_ns, std::function<void()> fn) {
        const Id id = ++last_id_;
        queue_.emplace(std::make_pair(deadline_ns, id), std::move(fn));
        deadline_of_.emplace(id, deadline_ns);
        return id;
    }
    void cancel(Id id) {
        auto it = deadline_of_.find(id);
        if (it != deadline_of_.end()) {
            queue_.erase(std::make_pair(it->second, id));
            deadline_of_.erase(it);
        }
    }
    bool pending(Id id) const { return deadline_of_.count(id) != 0; }
    // Runs every timer due at now_ns (callbacks may add or cancel timers).
    void run_expired(int64_t now_ns) {
        while (!queue_.empty() && queue_.begin()->first.first <= now_ns) {
            auto node = queue_.extract(queue_.begin());
            deadline_of_.erase(node.key().second);
            node.mapped()();
        }
    }
    int64_t next_deadline() const { return queue_.empty() ? -1 : queue_.begin()->first.first; }
    void clear() {
        queue_.clear();
        deadline_of_.clear();
    }

  private:
    std::map<std::pair<int64_t, Id>, std::function<void()>> queue_;
    std::unordered_map<Id, int64_t> deadline_of_;
    Id last_id_ = 0;
};

}  // namespace hca
