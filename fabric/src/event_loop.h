// Time and deferred work for the InfiniBand fabric.  The switch, the subnet
// manager, the SA's RMPP sender and the fault injector only see this
// interface, so the same code runs on Boost.Asio in the daemon and on a
// virtual clock in tests, fuzzers and the benchmark.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "asio.h"

namespace fabric {

class EventLoop {
  public:
    using Fn = std::function<void()>;
    using TimerId = uint64_t;

    virtual ~EventLoop() = default;
    // Monotonic time in microseconds.
    virtual uint64_t now_us() const = 0;
    // Runs fn once, delay_us from now.  Timers with the same due time run
    // in the order they were created.
    virtual TimerId after(uint64_t delay_us, Fn fn) = 0;
    // Cancelling a timer that already ran (or id 0) does nothing.
    virtual void cancel(TimerId id) = 0;
    // Runs fn after the current handler returns (never re-entrantly).
    void post(Fn fn) { after(0, std::move(fn)); }
};

// Virtual time: nothing happens until the owner runs the loop.
class ManualLoop : public EventLoop {
  public:
    uint64_t now_us() const override { return now_; }
    TimerId after(uint64_t delay_us, Fn fn) override;
    void cancel(TimerId id) override;

    // Runs everything due at the current time (including work that it
    // posts), without advancing the clock.  Returns the handlers run.
    size_t run_ready(size_t limit = 1000000);
    // Advances the clock to now + us, running timers in order on the way.
    size_t advance(uint64_t us, size_t limit = 10000000);
    // Runs until no timer is left or the limit of handlers is reached,
    // advancing the clock as needed.
    size_t run_all(size_t limit = 1000000);
    size_t pending() const { return timers_.size(); }

  private:
    // Key: (due time, creation sequence) keeps equal-time timers in order.
    std::map<std::pair<uint64_t, uint64_t>, Fn> timers_;
    std::map<TimerId, std::pair<uint64_t, uint64_t>> ids_;
    uint64_t now_ = 0;
    uint64_t seq_ = 0;
};

// Boost.Asio: one steady_timer per pending timer.
class AsioLoop : public EventLoop {
  public:
    explicit AsioLoop(boost::asio::io_context &io);
    ~AsioLoop() override;
    uint64_t now_us() const override;
    TimerId after(uint64_t delay_us, Fn fn) override;
    void cancel(TimerId id) override;
    boost::asio::io_context &io() { return io_; }

  private:
    boost::asio::io_context &io_;
    std::map<TimerId, std::unique_ptr<boost::asio::steady_timer>> timers_;
    TimerId next_ = 0;
    // Posted handlers may outlive the loop object inside io_context.
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
    std::chrono::steady_clock::time_point epoch_;
};

class Log;

// Runs io until it has no more work or is stopped.  The last exception
// barrier of the daemon: a handler that throws (a bug, out of memory) is
// logged and the loop goes on serving every other connection; FramedConn
// and the control sessions close only the connection at fault.
void run_guarded(boost::asio::io_context &io, Log &log);

}  // namespace fabric
