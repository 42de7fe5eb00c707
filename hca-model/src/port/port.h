// The InfiniBand port: link and logical state, the subnet management agent
// (SMA) and performance management agent (PMA) that MAD_IFC runs, port
// counters, the capability mask (ACCESS_REG PCAP), the node description
// (ACCESS_REG NODE_DESC), QUERY_HCA_VPORT_CONTEXT, and PORT_CHANGE events.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "iba/mad.h"
#include "iba/packet.h"

namespace hca {

struct CmdCtx;
class Device;

// PORT_CHANGE EQE sub-types (device.h MLX5_PORT_CHANGE_SUBTYPE_*).
enum PortEvent : uint8_t {
    kPortEventDown = 1,
    kPortEventActive = 4,
    kPortEventInitialized = 5,
    kPortEventLid = 6,
    kPortEventPkey = 7,
    kPortEventGuid = 8,
    kPortEventClientRereg = 9,
};

struct PortCounters {
    uint64_t xmit_data = 0;  // bytes (reported in 4-byte words)
    uint64_t rcv_data = 0;
    uint64_t xmit_pkts = 0;
    uint64_t rcv_pkts = 0;
    uint64_t unicast_xmit = 0;
    uint64_t unicast_rcv = 0;
    uint64_t multicast_xmit = 0;
    uint64_t multicast_rcv = 0;
    uint64_t rcv_errors = 0;      // bad CRC, malformed
    uint64_t xmit_discards = 0;   // no link, port not active
    uint64_t vl15_dropped = 0;
    uint64_t qkey_violations = 0;
    uint64_t pkey_violations = 0;
    uint64_t mkey_violations = 0;
    uint64_t link_downed = 0;
};

class Port {
  public:
    static constexpr uint16_t kPkeyTableSize = 128;  // PartitionCap (pkey_table_size 0)
    static constexpr uint8_t kGuidCap = 8;
    static constexpr uint8_t kMtuCap = 5;            // 4096
    static constexpr uint8_t kVlCap = 1;             // VL0 only
    static constexpr uint32_t kBaseCapMask =
        iba::mad::port_info::kCapIsTrapSup | iba::mad::port_info::kCapIsSysImageGuidSup |
        iba::mad::port_info::kCapIsClientReregSup | iba::mad::port_info::kCapIsLinkRoundTripLatencySup;

    Port(Device &dev, uint8_t num);
    void reset();

    // A PORT_CHANGE EQE of sub_type (kPortEvent*).
    void event(uint8_t sub_type);
    // Physical link (fabric link state, or always up without a fabric).
    void set_link(bool up);
    bool link_up() const { return phys_ == iba::mad::port_info::kPhysLinkUp; }
    bool active() const { return state_ == iba::mad::port_info::kActive; }
    uint8_t state() const { return state_; }
    uint16_t lid() const { return lid_; }
    uint8_t lmc() const { return lmc_; }
    uint16_t sm_lid() const { return sm_lid_; }
    uint8_t num() const { return num_; }
    uint8_t neighbor_mtu() const { return neighbor_mtu_; }
    uint64_t port_guid() const;
    iba::Gid gid(unsigned index) const;
    uint16_t pkey(unsigned index) const { return index < kPkeyTableSize ? pkeys_[index] : 0; }
    // True if the packet's P_Key matches an entry (IBA 10.9.3: a full member
    // matches either membership, a limited member only a full member).
    bool pkey_ok(uint16_t pkey) const;
    // True if a packet to dlid is for this port (LID and LMC path bits).
    bool owns_lid(uint16_t dlid) const { return lid_ && (dlid & ~((1u << lmc_) - 1)) == lid_; }
    uint8_t sl2vl(uint8_t sl) const { return static_cast<uint8_t>(sl2vl_[sl & 15]); }
    PortCounters &counters() { return counters_; }

    // Commands.
    void cmd_mad_ifc(CmdCtx &c);
    void cmd_query_hca_vport_context(CmdCtx &c);
    // ACCESS_REG PCAP (capability mask) and NODE_DESC.
    void set_cap_mask(uint32_t mask);
    uint32_t cap_mask() const { return cap_mask_; }
    void set_node_desc(const uint8_t *desc64);
    const std::array<uint8_t, 64> &node_desc() const { return node_desc_; }

    std::string info() const;

  private:
    using Mad = iba::mad::Mad;
    uint16_t sma(const Mad &in, Mad &out, bool ignore_mkey);
    uint16_t pma(const Mad &in, Mad &out);
    uint16_t get_node_info(uint8_t *d) const;
    uint16_t get_port_info(uint32_t attr_mod, uint8_t *d) const;
    uint16_t set_port_info(uint32_t attr_mod, const uint8_t *d);
    uint16_t pkey_table(bool set, uint32_t attr_mod, uint8_t *d);
    uint16_t guid_info(bool set, uint32_t attr_mod, uint8_t *d);
    void change_state(uint8_t state);

    Device &dev_;
    uint8_t num_;
    uint8_t phys_ = iba::mad::port_info::kPhysPolling;
    uint8_t state_ = iba::mad::port_info::kDown;
    uint16_t lid_ = 0;
    uint8_t lmc_ = 0;
    uint16_t sm_lid_ = 0;
    uint8_t sm_sl_ = 0;
    uint64_t mkey_ = 0;
    uint8_t mkey_prot_ = 0;
    uint16_t mkey_lease_ = 0;
    uint64_t gid_prefix_ = 0xfe80000000000000ull;
    uint32_t cap_mask_ = kBaseCapMask;
    uint8_t neighbor_mtu_ = kMtuCap;
    uint8_t op_vls_ = 1;
    uint8_t subnet_timeout_ = 0;
    uint8_t resp_time_ = 0;
    uint8_t link_width_enabled_ = 3;
    uint8_t link_speed_enabled_ = 7;
    uint8_t vl_high_limit_ = 0;
    uint8_t init_type_reply_ = 0;
    std::array<uint16_t, kPkeyTableSize> pkeys_{};
    std::array<uint64_t, kGuidCap> guids_{};
    std::array<uint8_t, 16> sl2vl_{};
    std::array<uint8_t, 64> vlarb_{};
    std::array<uint8_t, 64> node_desc_{};
    PortCounters counters_;
};

}  // namespace hca
