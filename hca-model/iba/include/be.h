// Big-endian scalar wrappers for the packed data-path structures (WQE
// segments, CQEs, EQEs, IBA headers) and loads/stores on raw byte buffers.
#pragma once

#include <cstdint>
#include <cstring>

namespace hca {

inline uint16_t load_be16(const void *p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return __builtin_bswap16(v);
}
inline uint32_t load_be32(const void *p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}
inline uint64_t load_be64(const void *p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}
inline void store_be16(void *p, uint16_t v) {
    v = __builtin_bswap16(v);
    std::memcpy(p, &v, 2);
}
inline void store_be32(void *p, uint32_t v) {
    v = __builtin_bswap32(v);
    std::memcpy(p, &v, 4);
}
inline void store_be64(void *p, uint64_t v) {
    v = __builtin_bswap64(v);
    std::memcpy(p, &v, 8);
}

// A big-endian integer as it sits in guest memory.  Only get()/set(), so
// every access states its byte order.
template <typename T>
class Be {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

  public:
    T get() const {
        if constexpr (sizeof(T) == 2) {
            return load_be16(raw_);
        } else if constexpr (sizeof(T) == 4) {
            return load_be32(raw_);
        } else {
            return load_be64(raw_);
        }
    }
    void set(T v) {
        if constexpr (sizeof(T) == 2) {
            store_be16(raw_, v);
        } else if constexpr (sizeof(T) == 4) {
            store_be32(raw_, v);
        } else {
            store_be64(raw_, v);
        }
    }

  private:
    uint8_t raw_[sizeof(T)];
};

// Byte arrays: no padding or alignment, so packed layouts need no attributes.
static_assert(sizeof(Be<uint32_t>) == 4 && alignof(Be<uint64_t>) == 1);

using be16 = Be<uint16_t>;
using be32 = Be<uint32_t>;
using be64 = Be<uint64_t>;

}  // namespace hca
