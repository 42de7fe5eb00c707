// Block signatures (signature handover, cap sho): what a signature key's
// BSF (block signature format, the 64 bytes a UMR loads after the key's
// translation entries; include/linux/mlx5/qp.h struct mlx5_bsf) says about
// its two domains, memory and wire, and the protection information (PI) of
// one block: T10-DIF (guard CRC16 or IP checksum, application tag,
// reference tag: 8 bytes) or CRC32 (4 bytes), after each block's data.
//
// A transfer through a signature key moves whole blocks. The key's address
// space counts a block's data and the PI both domains carry
// (SigConfig::unit(): 512 bytes for a 512-byte block with PI in one domain,
// 520 with T10-DIF in both), as mlx5_ib's rdma_rw_ctx_signature_init() and
// rdma-core's signature tests size their SGEs. Reading through the key
// (memory to wire) checks the memory domain's PI and makes the wire's;
// writing (wire to memory) checks the wire's and makes the memory's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "objects/dma_chunk.h"

namespace hca {

enum class SigType : uint8_t { None, T10dif, Crc32 };

struct SigDomain {
    SigType type = SigType::None;
    uint32_t block = 0;  // data bytes per block
    uint32_t psv = 0;
    // T10-DIF (mlx5_bsf_inl).
    bool ip_csum = false;        // guard: IP checksum (else CRC16 T10-DIF)
    bool guard_seed = false;     // the guard CRC starts at 0xffff (else 0)
    bool inc_ref = false;        // reference tag + block number (Type 1)
    bool app_escape = false;     // application tag 0xffff: the block is not checked
    bool appref_escape = false;  // application tag 0xffff and reference tag 0xffffffff: not checked
    uint16_t app_tag = 0;
    uint16_t app_mask = 0;
    uint32_t ref_tag = 0;
    // CRC32: the CRC starts at 0 (BFS seed bit), else at all ones.
    bool crc_seed_zero = false;

    unsigned pi_bytes() const { return type == SigType::T10dif ? 8 : type == SigType::Crc32 ? 4 : 0; }
    std::string describe() const;
};

// PI byte check bits (mlx5_bsf_basic.check_byte_mask, one per PI byte, byte 0 the MSB).
inline constexpr uint8_t kSigCheckGuard = 0xc0;
inline constexpr uint8_t kSigCheckApp = 0x30;
inline constexpr uint8_t kSigCheckRef = 0x0f;

// The syndrome bits of a signature error (mlx5_sig_err_cqe.syndrome).
inline constexpr uint16_t kSigErrRef = 1 << 11;
inline constexpr uint16_t kSigErrApp = 1 << 12;
inline constexpr uint16_t kSigErrGuard = 1 << 13;

struct SigConfig {
    SigDomain mem, wire;
    uint8_t check_mask = 0;  // of the input domain's PI bytes
    uint8_t copy_mask = 0;   // same block structure: PI bytes copied from the input domain
    bool sbs = false;

    uint32_t block() const { return mem.type != SigType::None ? mem.block : wire.block; }
    // Bytes of the key's address space per block.
    uint32_t unit() const;
    uint32_t mem_unit() const { return block() + mem.pi_bytes(); }
    uint32_t wire_unit() const { return block() + wire.pi_bytes(); }
};

// Parses a BSF. Returns nullptr, or why the device refuses it (the UMR
// completes with a local QP operation error).
const char *parse_bsf(std::span<const uint8_t> bsf, SigConfig &out);

// A block whose PI did not check out (mlx5_sig_err_cqe).
struct SigError {
    uint16_t syndrome = 0;                      // kSigErr*
    bool memory = false;                        // the domain checked: memory (else wire)
    uint32_t expected_sig = 0, actual_sig = 0;  // T10-DIF: guard << 16 | app tag; CRC32: the CRC
    uint32_t expected_ref = 0, actual_ref = 0;
    uint64_t offset = 0;  // of the block in the transfer (key address space)
};

// The PI of domain d for the block number n with data (d.block bytes).
void sig_make_pi(const SigDomain &d, const uint8_t *data, uint64_t n, uint8_t *pi);
// With the same block structure, the PI bytes of the copy mask go from the
// input domain's PI to the output's as they are.
void sig_copy_pi(const SigConfig &c, const uint8_t *from, uint8_t *to);
// Checks pi (domain d's, the input) under check_mask; 0 or the syndrome,
// with the values in e.
uint16_t sig_check_pi(const SigDomain &d, uint8_t check_mask, const uint8_t *data, uint64_t n, const uint8_t *pi,
                      SigError &e);

// A signature key's state: its configuration (from the last UMR that
// enabled its BSF) and, for writes that arrive a packet at a time, the
// block being assembled.
struct SigState {
    SigConfig cfg;
    uint64_t stream_next = UINT64_MAX;  // key address of the next expected byte of a write
    std::vector<uint8_t> block;         // the wire bytes of the block being assembled
    std::vector<uint8_t> out;           // scratch: one block in the memory domain
    std::vector<DmaChunk> chunks;       // scratch: where it goes
};

}  // namespace hca
