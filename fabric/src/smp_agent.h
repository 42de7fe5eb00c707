// The switch's subnet management agent (IBA Vol. 1 14.2.5 and 14.3): the
// SMP attributes of a switch with enhanced port 0.  Get/Set of PortInfo
// drive the switch's port states (Init -> Armed -> Active, LinkDown,
// Disabled/Polling), Get/Set of the forwarding tables program the switch.
// Errors get the MAD status codes of IBA 13.4.7.2: 0x0004 bad version,
// 0x0008 unsupported method, 0x000C unsupported method/attribute, 0x001C
// invalid attribute field or modifier.
//
// M_Key (IBA 14.2.4): port 0's PortInfo:M_Key protects the whole switch.
// An SMP whose M_Key does not match a non-zero key is checked against
// M_KeyProtectBits (Table 125 of 14.2.4.1):
//   0: Get answered (PortInfo shows the key); Set, TrapRepress discarded
//   1: Get answered with PortInfo:M_Key 0; Set, TrapRepress discarded
//   2, 3: Get, Set, TrapRepress discarded
// A discarded SMP gets no response and counts in PortInfo:M_KeyViolations
// (saturating at 0xffff).  The M_Key lease (14.2.4.2) starts at a violation
// when M_KeyLeasePeriod is non-zero; an SMP with the right key stops it and
// at its end M_KeyProtectBits fall to 0.  Lease period 0 = infinite.  No
// Bad M_Key trap is sent: the violation is logged (rate-limited) instead.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>

#include "mad_util.h"

namespace fabric {

class IbSwitch;

class SwitchSma {
  public:
    static constexpr uint16_t kDeviceId = 0xcf08;
    static constexpr uint32_t kVendorId = 0x0002c9;
    static constexpr uint32_t kRevision = 0x000000a0;
    static constexpr size_t kPkeyEntries = 32;  // PartitionCap of port 0
    static constexpr uint8_t kLifeTimeDefault = 18;

    explicit SwitchSma(IbSwitch &sw);

    // Handles a request SMP that reached this switch's SMA through in_port
    // (0 if it came from the switch itself).  Returns the response (D bit
    // set for directed-route SMPs), or nothing if the MAD needs no response
    // (responses, traps, trap represses).
    std::optional<Mad> process(const Mad &req, uint8_t in_port);

    // The SM running on this switch answers SMInfo (IBA 14.2.5.13); without
    // it SMInfo is unsupported.  set: the request was a Set.
    using SmInfoProvider = std::function<uint16_t(std::span<uint8_t, 64> data, bool set)>;
    void set_sm_info_provider(SmInfoProvider p) { sm_info_ = std::move(p); }

    // Attribute encoders, also used by the SA for its records.
    void node_info(std::span<uint8_t> out, uint8_t local_port) const;
    void node_description(std::span<uint8_t> out) const;
    void port_info(uint8_t port, std::span<uint8_t> out, uint8_t local_port) const;
    void switch_info(std::span<uint8_t> out) const;
    uint32_t port0_capability_mask() const;
    bool pkey_allows(uint16_t pkey) const;

    uint64_t requests() const { return requests_; }
    uint64_t errors() const { return errors_; }
    uint64_t mkey_discards() const { return mkey_discards_; }

  private:
    using Data = std::span<uint8_t, 64>;
    enum class MkeyCheck : uint8_t { Pass, HideKey, Discard };
    MkeyCheck check_mkey(const Mad &req, uint8_t in_port);
    uint16_t do_attr(uint8_t method, uint16_t attr, uint32_t mod, Data d, uint8_t in_port);
    uint16_t table_attr(bool set, uint16_t attr, uint32_t mod, Data d);
    uint16_t port_info_set(uint8_t port, std::span<const uint8_t, 64> in);
    uint16_t switch_info_set(std::span<const uint8_t, 64> in);
    uint8_t width_supported() const;
    uint8_t speed_supported() const;

    IbSwitch &sw_;
    SmInfoProvider sm_info_;
    uint8_t life_time_ = kLifeTimeDefault;
    uint8_t default_port_ = 0;
    uint8_t default_mcast_primary_ = 0;
    uint8_t default_mcast_not_primary_ = 0;
    std::array<uint16_t, kPkeyEntries> pkeys_{};
    std::map<uint16_t, std::array<uint8_t, 8>> sl2vl_;    // (in port << 8) | out port
    std::map<uint32_t, std::array<uint8_t, 64>> vlarb_;   // (block << 16) | port
    uint64_t requests_ = 0;
    uint64_t errors_ = 0;
    uint64_t mkey_discards_ = 0;
    uint64_t lease_end_us_ = 0;  // 0: the M_Key lease timer is not running
};

}  // namespace fabric
