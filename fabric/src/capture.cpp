#include "capture.h"

#include <chrono>
#include <stdexcept>

#include <fmt/format.h>

namespace fabric {

namespace {

// pcapng is written in the host's byte order (little-endian here); the
// byte-order magic tells readers.
void put16(std::vector<uint8_t> &b, uint16_t v) {
    b.push_back(static_cast<uint8_t>(v));
    b.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(std::vector<uint8_t> &b, uint32_t v) {
    put16(b, static_cast<uint16_t>(v));
    put16(b, static_cast<uint16_t>(v >> 16));
}
void put_be16(std::vector<uint8_t> &b, uint16_t v) {
    b.push_back(static_cast<uint8_t>(v >> 8));
    b.push_back(static_cast<uint8_t>(v));
}
void pad4(std::vector<uint8_t> &b) {
    while (b.size() % 4) {
        b.push_back(0);
    }
}
void option(std::vector<uint8_t> &b, uint16_t code, std::string_view v) {
    put16(b, code);
    put16(b, static_cast<uint16_t>(v.size()));
    b.insert(b.end(), v.begin(), v.end());
    pad4(b);
}
// Block type, total length (patched at the end) ... total length.
void begin_block(std::vector<uint8_t> &b, uint32_t type) {
    b.clear();
    put32(b, type);
    put32(b, 0);
}
void end_block(std::vector<uint8_t> &b) {
    const uint32_t len = static_cast<uint32_t>(b.size() + 4);
    for (int i = 0; i < 4; ++i) {
        b[4 + i] = static_cast<uint8_t>(len >> (8 * i));
    }
    put32(b, len);
}

constexpr uint32_t kShb = 0x0a0d0d0a, kIdb = 1, kEpb = 6;
constexpr uint16_t kOptEnd = 0, kOptComment = 1, kShbUserAppl = 4, kIfName = 2, kIfTsresol = 9;

}  // namespace

PcapngWriter::PcapngWriter(const std::string &path, uint64_t max_bytes) : max_bytes_(max_bytes) {
    f_ = std::fopen(path.c_str(), "wb");
    if (!f_) {
        throw std::runtime_error("cannot create capture file " + path);
    }
    clock_ = [] {
        return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
    };
    std::vector<uint8_t> b;
    begin_block(b, kShb);
    put32(b, 0x1a2b3c4d);
    put16(b, 1);
    put16(b, 0);
    put32(b, 0xffffffff);  // section length unknown
    put32(b, 0xffffffff);
    option(b, kShbUserAppl, "hcasim-fabric");
    put32(b, kOptEnd);
    end_block(b);
    write_block(b);
    begin_block(b, kIdb);
    put16(b, kLinktypeErf);
    put16(b, 0);
    put32(b, 0);  // no snap length limit
    option(b, kIfName, "hcasim-ib-switch");
    const uint8_t ns = 9;  // timestamps in 10^-9 s
    option(b, kIfTsresol, std::string_view(reinterpret_cast<const char *>(&ns), 1));
    put32(b, kOptEnd);
    end_block(b);
    write_block(b);
}

PcapngWriter::~PcapngWriter() {
    if (f_) {
        std::fclose(f_);
    }
}

void PcapngWriter::flush() {
    if (f_) {
        std::fflush(f_);
    }
}

bool PcapngWriter::write_block(const std::vector<uint8_t> &b) {
    if (full_) {
        return false;
    }
    if (bytes_ + b.size() > max_bytes_) {
        full_ = true;
        std::fflush(f_);
        if (on_full_) {
            on_full_();
        }
        return false;
    }
    if (std::fwrite(b.data(), 1, b.size(), f_) != b.size()) {
        full_ = true;
        return false;
    }
    bytes_ += b.size();
    return true;
}

void PcapngWriter::record(uint64_t packet_id, uint8_t port, std::span<const uint8_t> packet,
                          std::string_view verdict) {
    if (full_) {
        return;
    }
    const uint64_t ns = clock_();
    const size_t erf_len = 16 + packet.size();
    auto &b = buf_;
    begin_block(b, kEpb);
    put32(b, 0);  // interface 0
    put32(b, static_cast<uint32_t>(ns >> 32));
    put32(b, static_cast<uint32_t>(ns));
    put32(b, static_cast<uint32_t>(erf_len));
    put32(b, static_cast<uint32_t>(erf_len));
    // ERF header: timestamp as 32.32 fixed-point seconds, little-endian.
    const uint64_t secs = ns / 1000000000u;
    const uint64_t frac = ((ns % 1000000000u) << 32) / 1000000000u;
    const uint64_t erf_ts = secs << 32 | frac;
    for (int i = 0; i < 8; ++i) {
        b.push_back(static_cast<uint8_t>(erf_ts >> (8 * i)));
    }
    b.push_back(kErfTypeInfiniband);
    b.push_back(0x04);  // flags: varying-length record, interface 0
    put_be16(b, static_cast<uint16_t>(erf_len));  // rlen
    put_be16(b, 0);                                // lctr: nothing lost
    put_be16(b, static_cast<uint16_t>(packet.size()));  // wlen
    b.insert(b.end(), packet.begin(), packet.end());
    pad4(b);
    option(b, kOptComment, fmt::format("id=0x{:x} port={} {}", packet_id, port, verdict));
    put32(b, kOptEnd);
    end_block(b);
    if (write_block(b)) {
        ++records_;
    }
}

}  // namespace fabric
