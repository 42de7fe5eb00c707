// The fabric daemon's event log: one line per SM, SA, link or switch event,
// "<UTC time> <category>: <message>", to stdout or a file (--log).  Tests
// keep the lines in memory to assert on them.
#pragma once

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace fabric {

class Log {
  public:
    enum class Level { Debug, Info, Warn };

    // A log to stdout with timestamps.
    Log() = default;
    // path empty: stdout.  Throws if the file cannot be opened.
    explicit Log(const std::string &path);
    ~Log();
    Log(const Log &) = delete;
    Log &operator=(const Log &) = delete;

    // Keep lines in memory (tests) instead of writing them.
    void capture_in_memory() { memory_ = true; }
    const std::vector<std::string> &lines() const { return lines_; }
    bool contains(std::string_view needle) const;
    void set_level(Level l) { level_ = l; }

    template <typename... Args>
    void debug(std::string_view cat, fmt::format_string<Args...> f, Args &&...args) {
        if (level_ <= Level::Debug) {
            write(Level::Debug, cat, fmt::format(f, std::forward<Args>(args)...));
        }
    }
    template <typename... Args>
    void info(std::string_view cat, fmt::format_string<Args...> f, Args &&...args) {
        if (level_ <= Level::Info) {
            write(Level::Info, cat, fmt::format(f, std::forward<Args>(args)...));
        }
    }
    template <typename... Args>
    void warn(std::string_view cat, fmt::format_string<Args...> f, Args &&...args) {
        write(Level::Warn, cat, fmt::format(f, std::forward<Args>(args)...));
    }
    void flush();
    // Lines lost because the file could not be written.
    uint64_t write_errors() const { return write_errors_; }

    // For lines a guest can cause (SA joins, traps, refused clients): true
    // for the first kBurst lines of a key in each second; the rest are
    // counted and reported once when the next second starts.
    static constexpr unsigned kBurst = 100;
    bool allow(std::string_view key);

  private:
    struct Bucket {
        std::chrono::steady_clock::time_point start;
        unsigned lines = 0;
        uint64_t suppressed = 0;
    };
    std::map<std::string, Bucket, std::less<>> buckets_;

    void write(Level l, std::string_view cat, const std::string &msg) noexcept;
    void write_line(Level l, std::string_view cat, const std::string &msg);

    FILE *file_ = stdout;
    bool own_ = false;
    bool memory_ = false;
    Level level_ = Level::Info;
    std::vector<std::string> lines_;
    uint64_t write_errors_ = 0;
};

}  // namespace fabric
