#include "trace/trace.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hca {

const char *trace_cat_name(uint32_t cat) {
    for (const auto &c : kTraceCats) {
        if (c.cat == cat) {
            return c.name;
        }
    }
    return "?";
}

std::string to_hex(std::span<const uint8_t> bytes) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s(bytes.size() * 2, '0');
    for (size_t i = 0; i < bytes.size(); ++i) {
        s[2 * i] = kDigits[bytes[i] >> 4];
        s[2 * i + 1] = kDigits[bytes[i] & 15];
    }
    return s;
}

namespace {

bool parse_number(std::string_view s, uint32_t *out) {
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s.remove_prefix(2);
        base = 16;
    }
    if (s.empty()) {
        return false;
    }
    uint64_t v = 0;
    for (char ch : s) {
        const int d = ch >= '0' && ch <= '9' ? ch - '0'
                      : base == 16 && ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                      : base == 16 && ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                                             : -1;
        if (d < 0) {
            return false;
        }
        v = v * base + d;
        if (v > 0xffffff) {
            return false;
        }
    }
    *out = static_cast<uint32_t>(v);
    return true;
}

}  // namespace

bool Tracer::in_scope(std::optional<uint64_t> qpn, std::optional<uint64_t> cqn) const {
    if (scope_.empty() || (!qpn && !cqn)) {
        return true;
    }
    auto has = [](const std::vector<uint32_t> &set, uint64_t v) {
        return std::find(set.begin(), set.end(), v) != set.end();
    };
    return (qpn && has(scope_.qpns, *qpn)) || (cqn && has(scope_.cqns, *cqn));
}

std::back_insert_iterator<fmt::memory_buffer> Tracer::begin(uint32_t cat, int64_t now_ns) {
    buf_.clear();
    return fmt::format_to(std::back_inserter(buf_), "{} {}.{:03} {} ", ++seq_, now_ns / 1000,
                          (now_ns % 1000 + 1000) % 1000, trace_cat_name(cat));
}

void Tracer::commit() {
    buf_.push_back('\n');
    write(std::string_view(buf_.data(), buf_.size()));
}

void Tracer::header() {
    const std::string h = fmt::format("# hcasim trace format {}\n", kTraceFormat);
    std::fwrite(h.data(), 1, h.size(), file_);
    written_ = h.size();
}

bool parse_trace_filter(std::string_view filter, uint32_t *mask, TraceScope *scope) {
    uint32_t m = 0;
    TraceScope sc;
    while (!filter.empty()) {
        const size_t comma = filter.find(',');
        std::string_view word = filter.substr(0, comma);
        filter = comma == std::string_view::npos ? std::string_view{} : filter.substr(comma + 1);
        bool remove = false;
        if (!word.empty() && word.front() == '-') {
            remove = true;
            word.remove_prefix(1);
        }
        uint32_t bits = 0;
        if (word.starts_with("qpn=") || word.starts_with("cqn=")) {
            uint32_t v;
            if (remove || !scope || !parse_number(word.substr(4), &v)) {
                return false;
            }
            (word[0] == 'q' ? sc.qpns : sc.cqns).push_back(v);
            continue;
        }
        if (word == "all") {
            bits = ~kTrCmdData;  // payload dumps only on request
        } else if (word == "none" || word.empty()) {
            if (!remove) {
                m = 0;
            }
            continue;
        } else {
            for (const auto &c : kTraceCats) {
                if (word == c.name) {
                    bits = c.cat;
                }
            }
            if (!bits) {
                return false;
            }
        }
        m = remove ? m & ~bits : m | bits;
    }
    *mask = m;
    if (scope) {
        *scope = std::move(sc);
    }
    return true;
}

Tracer::~Tracer() {
    if (file_) {
        std::fclose(file_);
    }
}

bool Tracer::open(const std::string &path, uint64_t max_bytes, std::string *err) {
    if (file_) {
        std::fclose(file_);
        file_ = nullptr;
    }
    path_ = path;
    max_bytes_ = max_bytes ? max_bytes : uint64_t{256} << 20;
    written_ = 0;
    if (!path.empty()) {
        file_ = std::fopen(path.c_str(), "w");
        if (!file_) {
            *err = fmt::format("cannot open trace file {}: {}", path, std::strerror(errno));
            return false;
        }
        std::setvbuf(file_, nullptr, _IOFBF, 1 << 16);
        header();
    }
    set_mask(wanted_);
    return true;
}

void Tracer::write(std::string_view line) {
    if (written_ + line.size() > max_bytes_ / 2) {
        // Keep the newest half-cap in <path>.1 and start a fresh file.
        std::fclose(file_);
        std::rename(path_.c_str(), (path_ + ".1").c_str());
        file_ = std::fopen(path_.c_str(), "w");
        written_ = 0;
        if (!file_) {
            mask_ = 0;
            return;
        }
        std::setvbuf(file_, nullptr, _IOFBF, 1 << 16);
        header();
    }
    std::fwrite(line.data(), 1, line.size(), file_);
    written_ += line.size();
}

}  // namespace hca
