#include "smp_agent.h"

#include <algorithm>
#include <cstring>

#include "switch.h"

namespace fabric {

namespace ni = iba::mad::node_info;
namespace pi = iba::mad::port_info;
namespace si = iba::mad::switch_info;

namespace {
constexpr uint16_t kOk = mad::kStatusOk;
constexpr uint16_t kBadVersion = mad::kStatusBadVersion;
constexpr uint16_t kBadMethod = mad::kStatusUnsupportedMethod;
constexpr uint16_t kBadAttr = mad::kStatusUnsupportedMethodAttr;
constexpr uint16_t kBadField = mad::kStatusInvalidField;
}  // namespace

SwitchSma::SwitchSma(IbSwitch &sw) : sw_(sw) { pkeys_[0] = 0xffff; }

uint8_t SwitchSma::width_supported() const {
    // Every width up to the configured one (1x always).
    const uint8_t w = sw_.config().rate.width;
    uint8_t s = 0;
    for (uint8_t b = 1; b <= w && b != 0; b = static_cast<uint8_t>(b << 1)) {
        s = static_cast<uint8_t>(s | b);
    }
    return s;
}

uint8_t SwitchSma::speed_supported() const {
    const uint8_t sp = sw_.config().rate.speed;
    uint8_t s = 0;
    for (uint8_t b = 1; b <= sp && b != 0; b = static_cast<uint8_t>(b << 1)) {
        s = static_cast<uint8_t>(s | b);
    }
    return s;
}

uint32_t SwitchSma::port0_capability_mask() const {
    uint32_t cap = pi::kCapIsSlMappingSup | pi::kCapIsSysImageGuidSup;
    if (sw_.has_sm()) {
        cap |= pi::kCapIsSm;
    }
    return cap;
}

bool SwitchSma::pkey_allows(uint16_t pkey) const {
    // IBA 10.9.3: the base values match and at least one is a full member.
    for (uint16_t e : pkeys_) {
        if ((e & 0x7fff) != 0 && (e & 0x7fff) == (pkey & 0x7fff) && ((e | pkey) & 0x8000)) {
            return true;
        }
    }
    return false;
}

void SwitchSma::node_info(std::span<uint8_t> d, uint8_t local_port) const {
    std::fill(d.begin(), d.begin() + 40, 0);
    d[ni::kBaseVersion] = 1;
    d[ni::kClassVersion] = 1;
    d[ni::kNodeType] = ni::kTypeSwitch;
    d[ni::kNumPorts] = sw_.num_ports();
    set64(d, ni::kSystemImageGuid, sw_.node_guid());
    set64(d, ni::kNodeGuid, sw_.node_guid());
    set64(d, ni::kPortGuid, sw_.node_guid());  // port 0's GUID
    set16(d, ni::kPartitionCap, kPkeyEntries);
    set16(d, ni::kDeviceId, kDeviceId);
    set32(d, ni::kRevision, kRevision);
    d[ni::kLocalPortNum] = local_port;
    d[ni::kVendorId] = static_cast<uint8_t>(kVendorId >> 16);
    d[ni::kVendorId + 1] = static_cast<uint8_t>(kVendorId >> 8);
    d[ni::kVendorId + 2] = static_cast<uint8_t>(kVendorId);
}

void SwitchSma::node_description(std::span<uint8_t> d) const {
    std::fill(d.begin(), d.begin() + 64, 0);
    const auto &s = sw_.config().description;
    std::copy_n(s.begin(), std::min<size_t>(s.size(), 63), d.begin());
}

void SwitchSma::switch_info(std::span<uint8_t> d) const {
    std::fill(d.begin(), d.begin() + 64, 0);
    set16(d, si::kLinearFdbCap, ForwardingTables::kLinearCap);
    set16(d, si::kRandomFdbCap, 0);
    set16(d, si::kMulticastFdbCap, ForwardingTables::kMulticastCap);
    set16(d, si::kLinearFdbTop, sw_.fdb().linear_top());
    d[si::kDefaultPort] = default_port_;
    d[si::kDefaultMcastPrimaryPort] = default_mcast_primary_;
    d[si::kDefaultMcastNotPrimaryPort] = default_mcast_not_primary_;
    d[si::kLifeTimeValuePortStateChange] =
        static_cast<uint8_t>(life_time_ << 3 | (sw_.port_state_change() ? 0x04 : 0));
    set16(d, si::kLidsPerPort, 0);
    set16(d, si::kPartitionEnforcementCap, 0);
    d[si::kFlags] = 0x08;  // EnhancedPort0; no enforcement or filtering
    // MulticastFDBTop stays reserved (0): port 0 does not advertise
    // IsMulticastFDBTopSupported, so every MFT block is valid.
}

void SwitchSma::port_info(uint8_t port, std::span<uint8_t> d, uint8_t local_port) const {
    std::fill(d.begin(), d.begin() + 64, 0);
    const SwitchPort &p = sw_.port(port);
    const SwitchPortInfo &p0 = sw_.port(0).pi;
    const SwitchConfig &cfg = sw_.config();
    // M_Key, GID prefix, LID, SM fields and CapabilityMask belong to port 0;
    // external switch ports leave them reserved (IBA 14.2.5.6; opensm takes
    // an external port's capabilities from port 0 too).
    if (port == 0) {
        set64(d, pi::kMkey, p0.mkey);
        set64(d, pi::kGidPrefix, p0.gid_prefix);
        set16(d, pi::kLid, p0.lid);
        set16(d, pi::kMasterSmLid, p0.master_sm_lid);
        set32(d, pi::kCapMask, port0_capability_mask());
        set16(d, pi::kMkeyLeasePeriod, p0.mkey_lease_period);
    }
    d[pi::kLocalPortNum] = local_port;
    d[pi::kLinkWidthEnabled] = p.pi.link_width_enabled ? p.pi.link_width_enabled : width_supported();
    d[pi::kLinkWidthSupported] = width_supported();
    d[pi::kLinkWidthActive] = cfg.rate.width;
    const PortState st = p.state;
    d[pi::kLinkSpeedSupportedPortState] = static_cast<uint8_t>(speed_supported() << 4 | static_cast<uint8_t>(st));
    const PhysState ph = port == 0 ? PhysState::LinkUp : p.phys();
    d[pi::kPortPhysStateLinkDown] = static_cast<uint8_t>(static_cast<uint8_t>(ph) << 4 | p.pi.link_down_default);
    d[pi::kMkeyProtLmc] = port == 0 ? static_cast<uint8_t>(p0.mkey_protect << 6 | p0.lmc) : 0;
    const uint8_t speed_en = p.pi.link_speed_enabled ? p.pi.link_speed_enabled : speed_supported();
    d[pi::kLinkSpeedActiveEnabled] = static_cast<uint8_t>(cfg.rate.speed << 4 | speed_en);
    d[pi::kNeighborMtuMasterSmSl] =
        static_cast<uint8_t>(p.pi.neighbor_mtu << 4 | (port == 0 ? p0.master_sm_sl & 0x0f : 0));
    d[pi::kVlCapInitType] = 1 << 4;  // VLCap: VL0 only
    d[pi::kVlHighLimit] = p.pi.vl_high_limit;
    d[pi::kVlArbHighCap] = 8;
    d[pi::kVlArbLowCap] = 8;
    d[pi::kInitTypeReplyMtuCap] = cfg.mtu;
    d[pi::kVlStallHoqLife] = static_cast<uint8_t>(p.pi.vl_stall_count << 5 | (p.pi.hoq_life & 0x1f));
    d[pi::kOperVlFilters] = static_cast<uint8_t>(p.pi.oper_vls << 4 | (p.pi.filters & 0x0f));
    set16(d, pi::kMkeyViolations, p0.mkey_violations);
    set16(d, pi::kPkeyViolations, p.pi.pkey_violations);
    set16(d, pi::kQkeyViolations, p.pi.qkey_violations);
    d[pi::kGuidCap] = port == 0 ? 1 : 0;
    d[pi::kClientReregSubnetTimeout] = port == 0 ? static_cast<uint8_t>(p0.subnet_timeout & 0x1f) : 0;
    d[pi::kRespTimeValue] = p0.resp_time & 0x1f;
    d[pi::kLocalPhyOverrunErrors] = p.pi.error_thresholds;
}

SwitchSma::MkeyCheck SwitchSma::check_mkey(const Mad &req, uint8_t in_port) {
    SwitchPortInfo &p0 = sw_.port(0).pi;
    const uint64_t now = sw_.now_us();
    if (lease_end_us_ && now >= lease_end_us_) {
        // 14.2.4.2: nobody with the key answered within the lease.
        lease_end_us_ = 0;
        p0.mkey_protect = 0;
        sw_.log().warn("sma", "M_Key lease expired: M_KeyProtectBits now 0");
    }
    const uint8_t method = req[mad::kMethod];
    if (p0.mkey == 0 || get64(req, mad::smp::kMkey) == p0.mkey) {
        lease_end_us_ = 0;  // a valid Get/Set/TrapRepress stops the lease timer
        return MkeyCheck::Pass;
    }
    if (method == mad::kGet && p0.mkey_protect < 2) {
        return p0.mkey_protect == 1 ? MkeyCheck::HideKey : MkeyCheck::Pass;
    }
    if (p0.mkey_violations != 0xffff) {
        ++p0.mkey_violations;
    }
    ++mkey_discards_;
    if (!lease_end_us_ && p0.mkey_lease_period) {
        lease_end_us_ = now + uint64_t{p0.mkey_lease_period} * 1000000;
    }
    if (sw_.log().allow("mkey")) {
        sw_.log().warn("sma", "M_Key violation: {} attr {:#06x} mod {:#x} from port {} discarded",
                       method == mad::kSet ? "Set" : method == mad::kGet ? "Get" : "TrapRepress",
                       get16(req, mad::kAttrId), get32(req, mad::kAttrMod), in_port);
    }
    return MkeyCheck::Discard;
}

std::optional<Mad> SwitchSma::process(const Mad &req, uint8_t in_port) {
    const uint8_t method = req[mad::kMethod];
    if (is_response(method) || method == mad::kTrap) {
        return std::nullopt;
    }
    ++requests_;
    const bool checked = method == mad::kGet || method == mad::kSet || method == mad::kTrapRepress;
    const MkeyCheck mk = checked ? check_mkey(req, in_port) : MkeyCheck::Pass;
    if (mk == MkeyCheck::Discard || method == mad::kTrapRepress) {
        return std::nullopt;  // the switch sends no traps: a TrapRepress needs no answer
    }
    Mad resp = req;
    resp[mad::kMethod] = mad::kGet | mad::kResp;
    const bool is_dr = req[mad::kMgmtClass] == mad::kClassSubnDr;
    uint16_t status;
    if (req[mad::kBaseVersion] != 1 || req[mad::kClassVersion] != 1) {
        status = kBadVersion;
    } else if (method != mad::kGet && method != mad::kSet) {
        status = kBadMethod;
        resp[mad::kMethod] = static_cast<uint8_t>(method | mad::kResp);
    } else {
        Data data(resp.data() + mad::smp::kData, 64);
        status = do_attr(method, get16(req, mad::kAttrId), get32(req, mad::kAttrMod), data, in_port);
        if (mk == MkeyCheck::HideKey && get16(req, mad::kAttrId) == mad::kAttrPortInfo) {
            set64(data, pi::kMkey, 0);  // protect level 1: the key stays secret
        }
    }
    if (status != kOk) {
        ++errors_;
    }
    // IBA 14.2.1.2: the D bit shares the status word of DR SMPs.
    set16(resp, mad::kStatus, static_cast<uint16_t>(status | (is_dr ? mad::smp::kDirectionBit : 0)));
    return resp;
}

// The table attributes: P_Key, SL-to-VL, VL arbitration, linear and
// multicast forwarding.
uint16_t SwitchSma::table_attr(bool set, uint16_t attr, uint32_t mod, Data d) {
    const uint8_t n = sw_.num_ports();
    switch (attr) {
    case mad::kAttrPKeyTable: {
        // Attribute modifier: port 31:16, block 15:0.  Only port 0 has a
        // table (PartitionEnforcementCap 0).
        const uint32_t port = mod >> 16, block = mod & 0xffff;
        if (port != 0 || block * 32 >= kPkeyEntries) {
            return kBadField;
        }
        if (set) {
            for (size_t i = 0; i < kPkeyEntries; ++i) {
                pkeys_[i] = get16(d, 2 * i);
            }
        }
        for (size_t i = 0; i < kPkeyEntries; ++i) {
            set16(d, 2 * i, pkeys_[i]);
        }
        return kOk;
    }
    case mad::kAttrSlToVlTable: {
        // Switch: input port 15:8, output port 7:0 (IBA 14.2.5.8).
        const uint32_t in = (mod >> 8) & 0xff, out = mod & 0xff;
        if (in > n || out > n || (mod >> 16)) {
            return kBadField;
        }
        auto &e = sl2vl_[static_cast<uint16_t>(mod & 0xffff)];
        if (set) {
            std::copy_n(d.begin(), 8, e.begin());
        }
        std::fill(d.begin(), d.end(), 0);
        std::copy(e.begin(), e.end(), d.begin());
        return kOk;
    }
    case mad::kAttrVlArbitration: {
        // Block 31:16 (1, 2 low priority; 3, 4 high), port 15:0.
        const uint32_t block = mod >> 16, port = mod & 0xffff;
        if (block < 1 || block > 4 || port > n) {
            return kBadField;
        }
        auto &e = vlarb_[mod];
        if (set) {
            std::copy(d.begin(), d.end(), e.begin());
        }
        std::copy(e.begin(), e.end(), d.begin());
        return kOk;
    }
    case mad::kAttrLinearForwardingTable: {
        std::span<uint8_t, ForwardingTables::kLftBlock> blk(d.data(), ForwardingTables::kLftBlock);
        if (set && !sw_.fdb().set_lft_block(mod, blk)) {
            return kBadField;
        }
        return sw_.fdb().get_lft_block(mod, blk) ? kOk : kBadField;
    }
    case mad::kAttrMulticastForwardingTable: {
        // Position 31:28, block 8:0 (IBA 14.2.5.12).
        const uint32_t position = mod >> 28, block = mod & 0x1ff;
        if (mod & 0x0ffffe00u) {
            return kBadField;
        }
        std::span<uint8_t, 2 * ForwardingTables::kMftBlock> blk(d.data(), 2 * ForwardingTables::kMftBlock);
        if (set && !sw_.fdb().set_mft_block(block, position, blk)) {
            return kBadField;
        }
        return sw_.fdb().get_mft_block(block, position, blk) ? kOk : kBadField;
    }
    default:
        return kBadAttr;
    }
}

uint16_t SwitchSma::do_attr(uint8_t method, uint16_t attr, uint32_t mod, Data d, uint8_t in_port) {
    const bool set = method == mad::kSet;
    const uint8_t n = sw_.num_ports();
    switch (attr) {
    case mad::kAttrNodeDescription:
        if (set) {
            return kBadAttr;
        }
        node_description(d);
        return kOk;
    case mad::kAttrNodeInfo:
        if (set) {
            return kBadAttr;
        }
        node_info(d, in_port);
        return kOk;
    case mad::kAttrSwitchInfo: {
        if (set) {
            std::array<uint8_t, 64> in;
            std::copy(d.begin(), d.end(), in.begin());
            if (const uint16_t st = switch_info_set(in); st != kOk) {
                switch_info(d);
                return st;
            }
        }
        switch_info(d);
        return kOk;
    }
    case mad::kAttrGuidInfo: {
        // Only port 0 of a switch has GUIDs; GUIDCap 1: block 0, entry 0.
        // A Set cannot change entry 0 and ignores entries beyond GUIDCap.
        if (mod != 0) {
            return kBadField;
        }
        std::fill(d.begin(), d.end(), 0);
        set64(d, 0, sw_.node_guid());
        return kOk;
    }
    case mad::kAttrPortInfo: {
        const uint8_t port = static_cast<uint8_t>(mod & 0xff);  // bit 31: SMSupportExtendedSpeeds
        if (port > n || (mod & 0x7fffff00u)) {
            return kBadField;
        }
        if (set) {
            std::array<uint8_t, 64> in;
            std::copy(d.begin(), d.end(), in.begin());
            const uint16_t st = port_info_set(port, in);
            port_info(port, d, in_port);
            return st;
        }
        port_info(port, d, in_port);
        return kOk;
    }
    case mad::kAttrPKeyTable:
    case mad::kAttrSlToVlTable:
    case mad::kAttrVlArbitration:
    case mad::kAttrLinearForwardingTable:
    case mad::kAttrMulticastForwardingTable:
        return table_attr(set, attr, mod, d);
    case mad::kAttrSmInfo:
        if (!sm_info_) {
            return kBadAttr;
        }
        return sm_info_(d, set);
    case mad::kAttrHcasimSwitchLinks:
        if (set || mod != 0) {
            return set ? kBadAttr : kBadField;
        }
        std::fill(d.begin(), d.end(), uint8_t{0});
        for (uint8_t k = 1; k <= n; ++k) {
            if (sw_.port(k).sink && sw_.port(k).sink->switch_link()) {
                d[k / 8] = static_cast<uint8_t>(d[k / 8] | 1u << (k % 8));
            }
        }
        return kOk;
    case mad::kAttrMlnxExtPortInfo:
        // Mellanox ExtendedPortInfo (ibnetdiscover asks every port): no
        // FDR10, so StateChangeEnable and the LinkSpeed bytes are zero.
        if (mod > n) {
            return kBadField;
        }
        std::fill(d.begin(), d.end(), uint8_t{0});
        return kOk;
    default:
        // RandomForwardingTable (RandomFDBCap 0), LedInfo, other vendor
        // attributes: not implemented.
        return kBadAttr;
    }
}

uint16_t SwitchSma::switch_info_set(std::span<const uint8_t, 64> in) {
    const uint16_t top = get16(in, si::kLinearFdbTop);
    if (top >= ForwardingTables::kLinearCap) {
        return kBadField;
    }
    const uint8_t n = sw_.num_ports();
    if (in[si::kDefaultPort] > n && in[si::kDefaultPort] != 0xff) {
        return kBadField;
    }
    sw_.fdb().set_linear_top(top);
    default_port_ = in[si::kDefaultPort];
    default_mcast_primary_ = in[si::kDefaultMcastPrimaryPort];
    default_mcast_not_primary_ = in[si::kDefaultMcastNotPrimaryPort];
    life_time_ = in[si::kLifeTimeValuePortStateChange] >> 3;
    // PortStateChange is cleared by writing 1 (IBA 14.2.5.4).
    if (in[si::kLifeTimeValuePortStateChange] & 0x04) {
        sw_.clear_port_state_change();
    }
    return kOk;
}

namespace {

// May a PortInfo Set ask port (in state cur) for PortState want?
bool state_change_allowed(uint8_t port, PortState cur, PortState want) {
    switch (want) {
    case PortState::Nop:
        return true;
    case PortState::Down:
        // LinkDown: the link retrains (external ports only).
        return port != 0;
    case PortState::Armed:
        // IBA 14.2.5.6: Armed only from Init (setting it again is a no-op).
        return cur == PortState::Init || cur == PortState::Armed;
    case PortState::Active:
        return cur == PortState::Armed || cur == PortState::Active;
    default:  // Init cannot be set; 5..15 are reserved
        return false;
    }
}

}  // namespace

uint16_t SwitchSma::port_info_set(uint8_t port, std::span<const uint8_t, 64> in) {
    SwitchPort &p = sw_.port(port);
    // Validate everything first: a Set with an invalid field changes
    // nothing, and the response carries the current values (IBA 14.2.5.6).
    auto want = static_cast<PortState>(in[pi::kLinkSpeedSupportedPortState] & 0x0f);
    if (want == p.state) {
        want = PortState::Nop;  // writing back the current state changes nothing
    }
    const auto phys = static_cast<PhysState>(in[pi::kPortPhysStateLinkDown] >> 4);
    const uint8_t ldd = in[pi::kPortPhysStateLinkDown] & 0x0f;
    const uint8_t width_en = in[pi::kLinkWidthEnabled];
    const uint8_t speed_en = in[pi::kLinkSpeedActiveEnabled] & 0x0f;
    const uint8_t nmtu = in[pi::kNeighborMtuMasterSmSl] >> 4;
    const uint8_t op_vls = in[pi::kOperVlFilters] >> 4;
    const uint16_t lid = get16(in, pi::kLid);
    if (!state_change_allowed(port, p.state, want)) {
        return kBadField;
    }
    if (phys != PhysState::Nop && phys != PhysState::Polling && phys != PhysState::Disabled) {
        return kBadField;
    }
    if (ldd > 2) {
        return kBadField;
    }
    if (width_en != 0 && width_en != 0xff && (width_en & ~width_supported())) {
        return kBadField;
    }
    if (speed_en != 0 && speed_en != 0x0f && (speed_en & ~speed_supported())) {
        return kBadField;
    }
    if (nmtu < kMtu256 || nmtu > sw_.config().mtu) {
        return kBadField;
    }
    if (op_vls > 1) {  // VLCap is VL0 only
        return kBadField;
    }
    if (port == 0 && lid >= 0xc000) {
        return kBadField;
    }

    // Apply.
    if (port == 0) {
        SwitchPortInfo &p0 = p.pi;
        p0.mkey = get64(in, pi::kMkey);
        p0.gid_prefix = get64(in, pi::kGidPrefix);
        p0.lid = lid;
        p0.master_sm_lid = get16(in, pi::kMasterSmLid);
        p0.mkey_lease_period = get16(in, pi::kMkeyLeasePeriod);
        p0.mkey_protect = in[pi::kMkeyProtLmc] >> 6;
        p0.lmc = in[pi::kMkeyProtLmc] & 0x07;
        p0.master_sm_sl = in[pi::kNeighborMtuMasterSmSl] & 0x0f;
        p0.subnet_timeout = in[pi::kClientReregSubnetTimeout] & 0x1f;
        p0.resp_time = in[pi::kRespTimeValue] & 0x1f;
    }
    if (width_en) {
        p.pi.link_width_enabled = width_en == 0xff ? width_supported() : width_en;
    }
    if (speed_en) {
        p.pi.link_speed_enabled = speed_en == 0x0f ? speed_supported() : speed_en;
    }
    if (ldd) {
        p.pi.link_down_default = ldd;
    }
    p.pi.neighbor_mtu = nmtu;
    if (op_vls) {
        p.pi.oper_vls = op_vls;
    }
    p.pi.vl_high_limit = in[pi::kVlHighLimit];
    p.pi.vl_stall_count = in[pi::kVlStallHoqLife] >> 5;
    p.pi.hoq_life = in[pi::kVlStallHoqLife] & 0x1f;
    p.pi.error_thresholds = in[pi::kLocalPhyOverrunErrors];
    if (port != 0 && phys == PhysState::Disabled) {
        sw_.set_admin(port, false);
    } else if (port != 0 && phys == PhysState::Polling) {
        sw_.set_admin(port, true);
    }
    if (want == PortState::Down) {
        sw_.retrain(port);
    } else if (want == PortState::Armed || want == PortState::Active) {
        sw_.set_port_state(port, want);
    }
    return kOk;
}

}  // namespace fabric
