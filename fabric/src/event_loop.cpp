#include "event_loop.h"

#include "log.h"

namespace fabric {

EventLoop::TimerId ManualLoop::after(uint64_t delay_us, Fn fn) {
    const auto key = std::make_pair(now_ + delay_us, ++seq_);
    timers_.emplace(key, std::move(fn));
    ids_.emplace(seq_, key);
    return seq_;
}

void ManualLoop::cancel(TimerId id) {
    auto it = ids_.find(id);
    if (it == ids_.end()) {
        return;
    }
    timers_.erase(it->second);
    ids_.erase(it);
}

size_t ManualLoop::run_ready(size_t limit) {
    size_t n = 0;
    while (n < limit && !timers_.empty() && timers_.begin()->first.first <= now_) {
        auto node = timers_.extract(timers_.begin());
        ids_.erase(node.key().second);
        node.mapped()();
        ++n;
    }
    return n;
}

size_t ManualLoop::advance(uint64_t us, size_t limit) {
    const uint64_t end = now_ + us;
    size_t n = 0;
    while (n < limit && !timers_.empty() && timers_.begin()->first.first <= end) {
        now_ = std::max(now_, timers_.begin()->first.first);
        n += run_ready(1);
    }
    now_ = end;
    return n + run_ready(limit > n ? limit - n : 0);
}

size_t ManualLoop::run_all(size_t limit) {
    size_t n = 0;
    while (n < limit && !timers_.empty()) {
        now_ = std::max(now_, timers_.begin()->first.first);
        n += run_ready(1);
    }
    return n;
}

AsioLoop::AsioLoop(boost::asio::io_context &io) : io_(io), epoch_(std::chrono::steady_clock::now()) {}

AsioLoop::~AsioLoop() {
    *alive_ = false;
    for (auto &[id, t] : timers_) {
        t->cancel();
    }
}

uint64_t AsioLoop::now_us() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - epoch_).count());
}

EventLoop::TimerId AsioLoop::after(uint64_t delay_us, Fn fn) {
    const TimerId id = ++next_;
    if (delay_us == 0) {
        // post() keeps FIFO order, which timers with equal expiry do not.
        boost::asio::post(io_, [this, alive = alive_, id, fn = std::move(fn)] {
            if (*alive && timers_.erase(id)) {
                fn();
            }
        });
        timers_.emplace(id, nullptr);
        return id;
    }
    auto t = std::make_unique<boost::asio::steady_timer>(io_, std::chrono::microseconds(delay_us));
    t->async_wait([this, id, fn = std::move(fn)](boost::system::error_code ec) {
        if (ec || !timers_.erase(id)) {
            return;
        }
        fn();
    });
    timers_.emplace(id, std::move(t));
    return id;
}

void AsioLoop::cancel(TimerId id) {
    auto it = timers_.find(id);
    if (it == timers_.end()) {
        return;
    }
    if (it->second) {
        it->second->cancel();
    }
    timers_.erase(it);
}

void run_guarded(boost::asio::io_context &io, Log &log) {
    for (;;) {
        try {
            io.run();
            return;
        } catch (const std::exception &e) {
            log.warn("fabric", "a handler failed: {}; carrying on", e.what());
        } catch (...) {
            log.warn("fabric", "a handler failed (unknown exception); carrying on");
        }
    }
}

}  // namespace fabric
