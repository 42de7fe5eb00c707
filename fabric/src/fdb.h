// The switch's forwarding database (IBA Vol. 1 18.2.4.3): the linear
// forwarding table for unicast LIDs and the multicast forwarding table,
// with the block layouts of the LinearForwardingTable (64 one-byte port
// entries per block) and MulticastForwardingTable attributes (32 MLIDs per
// block, a 16-bit port mask per MLID for each group of 16 ports).
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <span>
#include <vector>

namespace fabric {

class ForwardingTables {
  public:
    static constexpr uint16_t kLinearCap = 49152;   // LIDs 0x0000..0xbfff
    static constexpr uint16_t kMulticastCap = 4096; // MLIDs 0xc000..0xcfff
    static constexpr size_t kLftBlock = 64;
    static constexpr size_t kMftBlock = 32;
    static constexpr uint8_t kNoPort = 0xff;        // LFT entry: discard
    static constexpr unsigned kMaxPorts = 256;
    using PortSet = std::bitset<kMaxPorts>;

    explicit ForwardingTables(uint8_t num_ports);

    uint8_t num_ports() const { return num_ports_; }
    // Unicast lookup: kNoPort if the LID is above LinearFDBTop or unset.
    uint8_t lookup(uint16_t dlid) const;
    uint16_t linear_top() const { return linear_top_; }
    void set_linear_top(uint16_t top) { linear_top_ = top; }
    void set_lft_entry(uint16_t lid, uint8_t port);

    // Attribute blocks; false if the block or position does not exist.
    bool get_lft_block(uint32_t block, std::span<uint8_t, kLftBlock> out) const;
    bool set_lft_block(uint32_t block, std::span<const uint8_t, kLftBlock> in);
    size_t mft_positions() const { return (num_ports_ + 1u + 15u) / 16u; }
    bool get_mft_block(uint32_t block, uint32_t position, std::span<uint8_t, 2 * kMftBlock> out) const;
    bool set_mft_block(uint32_t block, uint32_t position, std::span<const uint8_t, 2 * kMftBlock> in);

    // Multicast lookup: the ports of an MLID (empty if out of range).
    PortSet mcast_ports(uint16_t mlid) const;
    void set_mcast_ports(uint16_t mlid, const PortSet &ports);
    // Highest LID with a valid LFT entry, for LinearFDBTop.
    uint16_t highest_programmed_lid() const;
    void clear();

  private:
    uint8_t num_ports_;
    uint16_t linear_top_ = 0;
    std::vector<uint8_t> lft_;
    std::vector<std::array<uint16_t, 16>> mft_;  // [mlid - 0xc000][position]
};

}  // namespace fabric
