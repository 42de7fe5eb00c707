#include "trace.h"

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

bool parse_trace_filter(std::string_view filter, uint32_t *mask) {
    uint32_t m = 0;
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
    }
    std::fwrite(line.data(), 1, line.size(), file_);
    written_ += line.size();
}

}  // namespace hca
