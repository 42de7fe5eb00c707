// Shared by the libFuzzer targets: a reader that turns the input bytes into
// numbers and choices (zeros once the input is used up), so a short input
// is still a complete, meaningful sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace hcafuzz {

class Input {
  public:
    Input(const uint8_t *d, size_t n) : d_(d), n_(n) {}
    bool empty() const { return n_ == 0; }
    size_t left() const { return n_; }
    uint8_t u8() {
        if (!n_) {
            return 0;
        }
        --n_;
        return *d_++;
    }
    uint16_t u16() { return static_cast<uint16_t>(u8() << 8 | u8()); }
    uint32_t u32() { return uint32_t{u16()} << 16 | u16(); }
    uint64_t u64() { return uint64_t{u32()} << 32 | u32(); }
    bool flag() { return u8() & 1; }
    // One of n choices (n > 0).
    unsigned pick(unsigned n) { return u8() % n; }
    template <typename T, size_t N>
    T pick(const T (&a)[N]) {
        return a[u8() % N];
    }
    void bytes(uint8_t *out, size_t len) {
        for (size_t i = 0; i < len; ++i) {
            out[i] = u8();
        }
    }
    std::vector<uint8_t> vec(size_t len) {
        std::vector<uint8_t> v(len);
        bytes(v.data(), len);
        return v;
    }

  private:
    const uint8_t *d_;
    size_t n_;
};

// Up to max_patches single-byte overwrites of a well-formed buffer at
// offsets the input chooses: how a structured input still reaches every
// field of an inbox or header.
inline void patch(Input &in, std::span<uint8_t> buf, unsigned max_patches = 4) {
    if (buf.empty()) {
        return;
    }
    const unsigned n = in.u8() % (max_patches + 1);
    for (unsigned i = 0; i < n; ++i) {
        const size_t off = in.u16() % buf.size();
        buf[off] = in.u8();
    }
}

}  // namespace hcafuzz
