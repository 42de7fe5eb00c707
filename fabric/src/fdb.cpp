#include "fdb.h"

#include <algorithm>

#include "be.h"

namespace fabric {

ForwardingTables::ForwardingTables(uint8_t num_ports)
    : num_ports_(num_ports), lft_(kLinearCap, kNoPort), mft_(kMulticastCap) {}

void ForwardingTables::clear() {
    std::fill(lft_.begin(), lft_.end(), kNoPort);
    for (auto &e : mft_) {
        e.fill(0);
    }
    linear_top_ = 0;
}

uint8_t ForwardingTables::lookup(uint16_t dlid) const {
    // IBA 14.2.5.4: LIDs above LinearFDBTop are not forwarded.
    if (dlid >= kLinearCap || dlid > linear_top_) {
        return kNoPort;
    }
    return lft_[dlid];
}

void ForwardingTables::set_lft_entry(uint16_t lid, uint8_t port) {
    if (lid < kLinearCap) {
        lft_[lid] = port;
    }
}

bool ForwardingTables::get_lft_block(uint32_t block, std::span<uint8_t, kLftBlock> out) const {
    if (block >= kLinearCap / kLftBlock) {
        return false;
    }
    std::copy_n(lft_.begin() + block * kLftBlock, kLftBlock, out.begin());
    return true;
}

bool ForwardingTables::set_lft_block(uint32_t block, std::span<const uint8_t, kLftBlock> in) {
    if (block >= kLinearCap / kLftBlock) {
        return false;
    }
    std::copy(in.begin(), in.end(), lft_.begin() + block * kLftBlock);
    return true;
}

bool ForwardingTables::get_mft_block(uint32_t block, uint32_t position,
                                     std::span<uint8_t, 2 * kMftBlock> out) const {
    if (block >= kMulticastCap / kMftBlock || position >= mft_positions()) {
        return false;
    }
    for (size_t i = 0; i < kMftBlock; ++i) {
        hca::store_be16(&out[2 * i], mft_[block * kMftBlock + i][position]);
    }
    return true;
}

bool ForwardingTables::set_mft_block(uint32_t block, uint32_t position,
                                     std::span<const uint8_t, 2 * kMftBlock> in) {
    if (block >= kMulticastCap / kMftBlock || position >= mft_positions()) {
        return false;
    }
    // Bits for ports the switch does not have are ignored.
    const unsigned first = position * 16;
    uint16_t valid = 0;
    for (unsigned b = 0; b < 16; ++b) {
        if (first + b <= num_ports_) {
            valid = static_cast<uint16_t>(valid | 1u << b);
        }
    }
    for (size_t i = 0; i < kMftBlock; ++i) {
        mft_[block * kMftBlock + i][position] = hca::load_be16(&in[2 * i]) & valid;
    }
    return true;
}

ForwardingTables::PortSet ForwardingTables::mcast_ports(uint16_t mlid) const {
    PortSet s;
    if (mlid < 0xc000 || mlid - 0xc000u >= kMulticastCap) {
        return s;
    }
    const auto &e = mft_[mlid - 0xc000u];
    for (size_t pos = 0; pos < mft_positions(); ++pos) {
        for (unsigned b = 0; b < 16; ++b) {
            if (e[pos] >> b & 1u) {
                s.set(pos * 16 + b);
            }
        }
    }
    return s;
}

void ForwardingTables::set_mcast_ports(uint16_t mlid, const PortSet &ports) {
    if (mlid < 0xc000 || mlid - 0xc000u >= kMulticastCap) {
        return;
    }
    auto &e = mft_[mlid - 0xc000u];
    e.fill(0);
    for (unsigned p = 0; p <= num_ports_; ++p) {
        if (ports.test(p)) {
            e[p / 16] = static_cast<uint16_t>(e[p / 16] | 1u << (p % 16));
        }
    }
}

uint16_t ForwardingTables::highest_programmed_lid() const {
    for (size_t lid = kLinearCap; lid-- > 0;) {
        if (lft_[lid] != kNoPort) {
            return static_cast<uint16_t>(lid);
        }
    }
    return 0;
}

}  // namespace fabric
