// Firmware-like limits of every guest-sized resource that the capabilities
// (caps.cpp) do not already state, in one place; docs/STATUS.md "Limits"
// lists them all.  The object counts and queue sizes are the advertised
// capabilities (log_max_qp, log_max_cq_sz, ...) checked by each create
// command; what is here bounds the host memory the device keeps for a
// guest.
#pragma once

#include <cstdint>

namespace hca {

namespace limits {

// Translation entries (8 bytes of host memory each) one function may have
// the device keep: MTT entries of memory keys and the page lists of EQs,
// CQs, QPs and SRQs.  Firmware keeps them in ICM backed by the driver's
// pages; the model keeps them in host memory, so a budget bounds them:
// 2^22 entries = 32 MiB, enough to map 16 GiB of guest memory in 4 KiB
// pages.  A command over the budget fails with LIM (EXCEED_LIM: the driver
// sees -ENOMEM), a UMR over it completes in error.
inline constexpr uint64_t kTranslationEntries = uint64_t{1} << 22;

// Pages the driver may have given with MANAGE_PAGES GIVE and not taken
// back.  The device asks for Firmware::kBootPages + kInitPages; more than
// this is refused with LIM.
inline constexpr uint64_t kFirmwarePages = uint64_t{1} << 16;

// translations_octword_size of one MTT key: no more than one CREATE_MKEY
// inbox can carry (CommandInterface::kMaxMsg / 16 bytes per octword).
inline constexpr uint64_t kMkeyOctwords = (uint64_t{32} << 20) / 16;

// translations_octword_size of one KSM key (one entry per octoword, loaded
// by UMRs): mlx5_ib's implicit ODP key on a guest with 5-level paging has
// an entry per GiB of 2^56 bytes. The entries are kept sparse
// (objects/xlt_table.h): what is charged is what is not the null mkey.
inline constexpr uint64_t kKsmOctwords = uint64_t{1} << 26;

}  // namespace limits

// A budget of translation entries (limits::kTranslationEntries), shared by
// the object tables of one device.
class Budget {
  public:
    explicit Budget(uint64_t max) : max_(max) {}
    bool take(uint64_t n) {
        if (n > max_ - used_) {
            return false;
        }
        used_ += n;
        return true;
    }
    void give(uint64_t n) { used_ -= n < used_ ? n : used_; }
    uint64_t used() const { return used_; }
    uint64_t max() const { return max_; }

  private:
    uint64_t max_;
    uint64_t used_ = 0;
};

}  // namespace hca
