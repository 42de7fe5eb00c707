#include "log.h"

#include <chrono>
#include <ctime>
#include <stdexcept>

namespace fabric {

Log::Log(const std::string &path) {
    if (path.empty()) {
        return;
    }
    file_ = std::fopen(path.c_str(), "a");
    if (!file_) {
        throw std::runtime_error("cannot open log file " + path);
    }
    own_ = true;
}

Log::~Log() {
    if (own_) {
        std::fclose(file_);
    } else {
        std::fflush(file_);
    }
}

bool Log::contains(std::string_view needle) const {
    for (const auto &l : lines_) {
        if (l.find(needle) != std::string::npos) {
            return true;
        }
    }
    return false;
}

bool Log::allow(std::string_view key) {
    const auto now = std::chrono::steady_clock::now();
    auto it = buckets_.find(key);
    if (it == buckets_.end()) {
        if (buckets_.size() > 1000) {
            buckets_.clear();  // keys are a fixed set; never grow without bound
        }
        it = buckets_.emplace(std::string(key), Bucket{now}).first;
    }
    Bucket &b = it->second;
    if (now - b.start >= std::chrono::seconds(1)) {
        if (b.suppressed) {
            write(Level::Warn, key, fmt::format("{} similar lines suppressed", b.suppressed));
        }
        b = Bucket{now};
    }
    if (b.lines < kBurst) {
        ++b.lines;
        return true;
    }
    ++b.suppressed;
    return false;
}

void Log::flush() {
    if (!memory_ && std::fflush(file_) != 0) {
        ++write_errors_;
        std::clearerr(file_);
    }
}

// A log line that cannot be written (disk full, closed pipe) is counted and
// lost; it never takes the daemon down.
void Log::write(Level l, std::string_view cat, const std::string &msg) noexcept {
    try {
        write_line(l, cat, msg);
    } catch (...) {
        ++write_errors_;
        if (!memory_) {
            std::clearerr(file_);
        }
    }
}

void Log::write_line(Level l, std::string_view cat, const std::string &msg) {
    const char *lvl = l == Level::Warn ? "warning: " : "";
    if (memory_) {
        // Bounded: a test that floods the log keeps the newest lines.
        if (lines_.size() >= 100000) {
            lines_.erase(lines_.begin(), lines_.begin() + 50000);
        }
        lines_.push_back(fmt::format("{}: {}{}", cat, lvl, msg));
        return;
    }
    const auto now = std::chrono::system_clock::now();
    const auto t = std::chrono::system_clock::to_time_t(now);
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    fmt::print(file_, "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z {}: {}{}\n", tm.tm_year + 1900, tm.tm_mon + 1,
               tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms, cat, lvl, msg);
    if (l != Level::Debug && std::fflush(file_) != 0) {
        ++write_errors_;
        std::clearerr(file_);
    }
}

}  // namespace fabric
