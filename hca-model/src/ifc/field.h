// PRM layout primitives.  Every command box, context and capability is a
// big-endian bit string; mlx5_ifc.h numbers its bits from the most significant
// bit of byte 0.  A Field is a scalar of at most 64 bits, a Block is a nested
// structure or an array.  The generated mlx5_ifc.gen.h declares one of them
// per member, with the driver's own names.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>

namespace hca::ifc {

using u128 = unsigned __int128;

struct Field {
    uint32_t off;    // bit offset from the start of the structure
    uint32_t width;  // bits, 1..64

    constexpr uint32_t byte() const { return off / 8; }
    constexpr uint32_t end_byte() const { return (off + width + 7) / 8; }
};

struct Block {
    uint32_t off;        // bit offset, always byte aligned for blocks we use
    uint32_t elem_bits;  // size of one element
    uint32_t count;      // number of elements (0: flexible array)

    constexpr uint32_t byte() const { return off / 8; }
    constexpr uint32_t elem_bytes() const { return elem_bits / 8; }
    constexpr uint32_t bytes() const { return elem_bits / 8 * count; }
    // Byte offset of element i.
    constexpr uint32_t at(uint32_t i) const { return off / 8 + i * (elem_bits / 8); }
};

// Extracts a field from a buffer that is at least f.end_byte() long.
inline uint64_t get(const uint8_t *base, Field f) {
    const uint32_t first = f.off / 8;
    const uint32_t last = (f.off + f.width - 1) / 8;
    u128 acc = 0;
    for (uint32_t i = first; i <= last; ++i) {
        acc = (acc << 8) | base[i];
    }
    const uint32_t tail = (last + 1) * 8 - (f.off + f.width);
    acc >>= tail;
    const uint64_t mask = f.width == 64 ? ~uint64_t{0} : (uint64_t{1} << f.width) - 1;
    return static_cast<uint64_t>(acc) & mask;
}

inline void set(uint8_t *base, Field f, uint64_t value) {
    const uint32_t first = f.off / 8;
    const uint32_t last = (f.off + f.width - 1) / 8;
    const uint32_t tail = (last + 1) * 8 - (f.off + f.width);
    const u128 mask = (f.width == 64 ? ~u128{0} >> 64 : (u128{1} << f.width) - 1) << tail;
    u128 acc = 0;
    for (uint32_t i = first; i <= last; ++i) {
        acc = (acc << 8) | base[i];
    }
    acc = (acc & ~mask) | ((static_cast<u128>(value) << tail) & mask);
    for (uint32_t i = last + 1; i-- > first;) {
        base[i] = static_cast<uint8_t>(acc);
        acc >>= 8;
    }
}

// Span-checked variants for buffers whose size is not statically known.
inline uint64_t get(std::span<const uint8_t> buf, Field f) {
    assert(f.end_byte() <= buf.size());
    return get(buf.data(), f);
}

inline void set(std::span<uint8_t> buf, Field f, uint64_t value) {
    assert(f.end_byte() <= buf.size());
    set(buf.data(), f, value);
}

// Shifts a Field by the bit offset of the Block that contains it, so that
// fields of a nested context (qpc inside create_qp_in) can be addressed in
// the outer box.
constexpr Field in(Block outer, Field f) { return Field{outer.off + f.off, f.width}; }
constexpr Block in(Block outer, Block b) { return Block{outer.off + b.off, b.elem_bits, b.count}; }

// Common header of every command inbox/outbox (mlx5_core.h mbox_in/out).
struct cmd_in_hdr {
    static constexpr Field opcode{0x00, 16};
    static constexpr Field uid{0x10, 16};
    static constexpr Field op_mod{0x30, 16};
};
struct cmd_out_hdr {
    static constexpr Field status{0x00, 8};
    static constexpr Field syndrome{0x20, 32};
};

}  // namespace hca::ifc
