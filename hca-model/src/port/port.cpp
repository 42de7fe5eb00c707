#include "port/port.h"

#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "device.h"
#include "iba/pma.h"

namespace hca {

namespace mad = iba::mad;
namespace pi = iba::mad::port_info;
namespace ni = iba::mad::node_info;

namespace {

const char *state_name(uint8_t s) {
    static constexpr const char *kNames[] = {"NOP", "Down", "Init", "Armed", "Active"};
    return s < std::size(kNames) ? kNames[s] : "?";
}

constexpr char kDefaultNodeDesc[] = "MT4119 ConnectX5   Mellanox Technologies";

}  // namespace

Port::Port(Device &dev, uint8_t num) : dev_(dev), num_(num) { reset(); }

void Port::reset() {
    const bool up = link_up();
    state_ = up ? pi::kInit : pi::kDown;
    lid_ = 0;
    lmc_ = 0;
    sm_lid_ = 0;
    sm_sl_ = 0;
    mkey_ = 0;
    mkey_prot_ = 0;
    mkey_lease_ = 0;
    gid_prefix_ = 0xfe80000000000000ull;
    cap_mask_ = kBaseCapMask;
    neighbor_mtu_ = kMtuCap;
    op_vls_ = 1;
    subnet_timeout_ = 0;
    pkeys_.fill(0);
    pkeys_[0] = 0xffff;
    guids_.fill(0);
    sl2vl_.fill(0);
    vlarb_.fill(0);
    node_desc_.fill(0);
    std::memcpy(node_desc_.data(), kDefaultNodeDesc, sizeof(kDefaultNodeDesc) - 1);
    counters_ = {};
}

uint64_t Port::port_guid() const { return dev_.node_guid(); }

iba::Gid Port::gid(unsigned index) const {
    iba::Gid g{};
    store_be64(g.data(), gid_prefix_);
    store_be64(g.data() + 8, index == 0 ? port_guid() : (index < kGuidCap ? guids_[index] : 0));
    return g;
}

bool Port::pkey_ok(uint16_t pkey) const {
    if ((pkey & 0x7fff) == 0) {
        return false;  // the invalid P_Key
    }
    for (uint16_t p : pkeys_) {
        if ((p & 0x7fff) == (pkey & 0x7fff) && ((p | pkey) & 0x8000)) {
            return true;
        }
    }
    return false;
}

void Port::event(uint8_t sub_type) {
    HCA_TRACE(dev_, port_event, .port = num_, .sub_type = sub_type);
    dev_.eqs.post_event(kEventPortChange, sub_type, EqeData::port_state(num_));
}

void Port::change_state(uint8_t state) {
    if (state == state_) {
        return;
    }
    const uint8_t old = state_;
    state_ = state;
    HCA_TRACE(dev_, port_state, .port = num_, .from = state_name(old), .to = state_name(state), .lid = lid_,
              .sm_lid = sm_lid_);
    if (state == pi::kActive) {
        event(kPortEventActive);
    } else if (old == pi::kActive) {
        event(state == pi::kInit ? kPortEventInitialized : kPortEventDown);
    }
}

void Port::set_link(bool up) {
    const uint8_t phys = up ? pi::kPhysLinkUp : pi::kPhysPolling;
    if (phys == phys_) {
        return;
    }
    phys_ = phys;
    HCA_TRACE(dev_, port_link, .port = num_, .state = up ? "up" : "down");
    if (up) {
        change_state(pi::kInit);
    } else {
        ++counters_.link_downed;
        const bool was_active = state_ == pi::kActive;
        state_ = pi::kDown;
        if (was_active || state_ != pi::kDown) {
            event(kPortEventDown);
        }
    }
}

void Port::set_cap_mask(uint32_t mask) {
    if (mask != cap_mask_) {
        HCA_TRACE(dev_, port_capability_mask, .port = num_, .from = cap_mask_, .to = mask);
    }
    cap_mask_ = mask;
}

void Port::set_node_desc(const uint8_t *desc64) {
    std::memcpy(node_desc_.data(), desc64, node_desc_.size());
    HCA_TRACE(dev_, port_node_description,
              .text = std::string_view(reinterpret_cast<const char *>(node_desc_.data()),
                                       strnlen(reinterpret_cast<const char *>(node_desc_.data()), 64)));
}

// --- SMA ---------------------------------------------------------------

uint16_t Port::get_node_info(uint8_t *d) const {
    d[ni::kBaseVersion] = 1;
    d[ni::kClassVersion] = 1;
    d[ni::kNodeType] = ni::kTypeCa;
    d[ni::kNumPorts] = 1;
    store_be64(d + ni::kSystemImageGuid, dev_.node_guid());
    store_be64(d + ni::kNodeGuid, dev_.node_guid());
    store_be64(d + ni::kPortGuid, port_guid());
    store_be16(d + ni::kPartitionCap, kPkeyTableSize);
    store_be16(d + ni::kDeviceId, HCA_MODEL_PCI_DEVICE_ID);
    store_be32(d + ni::kRevision, 0);
    d[ni::kLocalPortNum] = num_;
    d[ni::kVendorId] = 0x00;
    d[ni::kVendorId + 1] = 0x02;
    d[ni::kVendorId + 2] = 0xc9;
    return mad::kStatusOk;
}

uint16_t Port::get_port_info(uint32_t attr_mod, uint8_t *d) const {
    if (attr_mod != 0 && attr_mod != num_) {
        return mad::kStatusInvalidField;
    }
    store_be64(d + pi::kMkey, mkey_);
    store_be64(d + pi::kGidPrefix, gid_prefix_);
    store_be16(d + pi::kLid, lid_);
    store_be16(d + pi::kMasterSmLid, sm_lid_);
    store_be32(d + pi::kCapMask, cap_mask_);
    store_be16(d + pi::kMkeyLeasePeriod, mkey_lease_);
    d[pi::kLocalPortNum] = num_;
    d[pi::kLinkWidthEnabled] = link_width_enabled_;
    d[pi::kLinkWidthSupported] = 3;  // 1x, 4x
    d[pi::kLinkWidthActive] = 2;     // 4x
    d[pi::kLinkSpeedSupportedPortState] = static_cast<uint8_t>(7 << 4 | state_);  // SDR, DDR, QDR
    d[pi::kPortPhysStateLinkDown] = static_cast<uint8_t>(phys_ << 4 | 2);        // default: polling
    d[pi::kMkeyProtLmc] = static_cast<uint8_t>(mkey_prot_ << 6 | lmc_);
    d[pi::kLinkSpeedActiveEnabled] = static_cast<uint8_t>(4 << 4 | link_speed_enabled_);  // QDR
    d[pi::kNeighborMtuMasterSmSl] = static_cast<uint8_t>(neighbor_mtu_ << 4 | sm_sl_);
    d[pi::kVlCapInitType] = static_cast<uint8_t>(kVlCap << 4);
    d[pi::kVlHighLimit] = vl_high_limit_;
    d[pi::kVlArbHighCap] = 8;
    d[pi::kVlArbLowCap] = 8;
    d[pi::kInitTypeReplyMtuCap] = static_cast<uint8_t>(init_type_reply_ << 4 | kMtuCap);
    d[pi::kVlStallHoqLife] = 0xe7;  // VLStallCount 7, HOQLife 7
    d[pi::kOperVlFilters] = static_cast<uint8_t>(op_vls_ << 4);
    store_be16(d + pi::kMkeyViolations, static_cast<uint16_t>(std::min<uint64_t>(counters_.mkey_violations, 0xffff)));
    store_be16(d + pi::kPkeyViolations, static_cast<uint16_t>(std::min<uint64_t>(counters_.pkey_violations, 0xffff)));
    store_be16(d + pi::kQkeyViolations, static_cast<uint16_t>(std::min<uint64_t>(counters_.qkey_violations, 0xffff)));
    d[pi::kGuidCap] = kGuidCap;
    d[pi::kClientReregSubnetTimeout] = subnet_timeout_ & 0x1f;
    d[pi::kRespTimeValue] = resp_time_ & 0x1f;
    return mad::kStatusOk;
}

// IBA 14.2.5.6: validate everything, then apply.
uint16_t Port::set_port_info(uint32_t attr_mod, const uint8_t *d) {
    if (attr_mod != 0 && attr_mod != num_) {
        return mad::kStatusInvalidField;
    }
    const uint16_t lid = load_be16(d + pi::kLid);
    const uint8_t state = d[pi::kLinkSpeedSupportedPortState] & 0x0f;
    const uint8_t phys = d[pi::kPortPhysStateLinkDown] >> 4;
    const uint8_t lmc = d[pi::kMkeyProtLmc] & 7;
    const uint8_t mtu = d[pi::kNeighborMtuMasterSmSl] >> 4;
    const uint8_t op_vls = d[pi::kOperVlFilters] >> 4;
    if (lid >= iba::kMulticastLidBase) {
        return mad::kStatusInvalidField;
    }
    if (state == pi::kArmed && state_ != pi::kInit && state_ != pi::kArmed) {
        return mad::kStatusInvalidField;
    }
    if (state == pi::kActive && state_ != pi::kArmed && state_ != pi::kActive) {
        return mad::kStatusInvalidField;
    }
    if (state == pi::kInit || state > pi::kActive || (phys != 0 && phys != 2 && phys != 3)) {
        return mad::kStatusInvalidField;
    }
    if (mtu > kMtuCap || op_vls > kVlCap) {
        return mad::kStatusInvalidField;
    }
    const uint16_t old_lid = lid_;
    const uint8_t old_lmc = lmc_;
    const uint16_t old_sm = sm_lid_;
    const uint8_t old_sm_sl = sm_sl_;
    mkey_ = load_be64(d + pi::kMkey);
    gid_prefix_ = load_be64(d + pi::kGidPrefix);
    lid_ = lid;
    sm_lid_ = load_be16(d + pi::kMasterSmLid);
    mkey_lease_ = load_be16(d + pi::kMkeyLeasePeriod);
    if (d[pi::kLinkWidthEnabled]) {
        link_width_enabled_ = d[pi::kLinkWidthEnabled] == 0xff ? 3 : d[pi::kLinkWidthEnabled];
    }
    mkey_prot_ = d[pi::kMkeyProtLmc] >> 6;
    lmc_ = lmc;
    if (d[pi::kLinkSpeedActiveEnabled] & 0x0f) {
        link_speed_enabled_ = (d[pi::kLinkSpeedActiveEnabled] & 0x0f) == 0x0f ? 7 : d[pi::kLinkSpeedActiveEnabled] & 0x0f;
    }
    if (mtu) {
        neighbor_mtu_ = mtu;
    }
    sm_sl_ = d[pi::kNeighborMtuMasterSmSl] & 0x0f;
    vl_high_limit_ = d[pi::kVlHighLimit];
    if (op_vls) {
        op_vls_ = op_vls;
    }
    subnet_timeout_ = d[pi::kClientReregSubnetTimeout] & 0x1f;
    const bool rereg = d[pi::kClientReregSubnetTimeout] >> 7;
    HCA_TRACE(dev_, port_set_port_info, .port = num_, .lid = lid_, .lmc = lmc_, .sm_lid = sm_lid_, .sm_sl = sm_sl_,
              .mtu = neighbor_mtu_, .state = state, .phys = phys, .rereg = rereg);
    if (phys == 3 || state == pi::kDown) {
        // Link down requested: the link retrains at once and comes back in Init.
        ++counters_.link_downed;
        if (state_ == pi::kActive) {
            event(kPortEventDown);
        }
        state_ = link_up() ? pi::kInit : pi::kDown;
    } else if (state == pi::kArmed || state == pi::kActive) {
        change_state(state);
    }
    if (lid_ != old_lid || lmc_ != old_lmc || sm_lid_ != old_sm || sm_sl_ != old_sm_sl) {
        event(kPortEventLid);
    }
    if (rereg) {
        event(kPortEventClientRereg);
    }
    return mad::kStatusOk;
}

uint16_t Port::pkey_table(bool set, uint32_t attr_mod, uint8_t *d) {
    const uint32_t block = attr_mod & 0xffff;
    if (block >= kPkeyTableSize / 32) {
        return mad::kStatusInvalidField;
    }
    bool changed = false;
    for (unsigned i = 0; i < 32; ++i) {
        if (set) {
            const uint16_t v = load_be16(d + i * 2);
            changed |= pkeys_[block * 32 + i] != v;
            pkeys_[block * 32 + i] = v;
        }
        store_be16(d + i * 2, pkeys_[block * 32 + i]);
    }
    if (changed) {
        event(kPortEventPkey);
    }
    return mad::kStatusOk;
}

uint16_t Port::guid_info(bool set, uint32_t attr_mod, uint8_t *d) {
    if (attr_mod != 0) {
        return mad::kStatusInvalidField;  // GUIDCap 8: one block
    }
    bool changed = false;
    for (unsigned i = 0; i < kGuidCap; ++i) {
        if (set && i > 0) {  // entry 0 is the port GUID, read-only
            const uint64_t v = load_be64(d + i * 8);
            changed |= guids_[i] != v;
            guids_[i] = v;
        }
        store_be64(d + i * 8, i == 0 ? port_guid() : guids_[i]);
    }
    if (changed) {
        event(kPortEventGuid);
    }
    return mad::kStatusOk;
}

uint16_t Port::sma(const Mad &in, Mad &out, bool ignore_mkey) {
    const uint8_t method = in[mad::kMethod];
    const uint16_t attr = load_be16(in.data() + mad::kAttrId);
    const uint32_t attr_mod = load_be32(in.data() + mad::kAttrMod);
    const bool set = method == mad::kSet;
    if (in[mad::kClassVersion] != 1) {
        return mad::kStatusBadVersion;
    }
    if (method != mad::kGet && method != mad::kSet && method != mad::kTrapRepress) {
        return mad::kStatusUnsupportedMethod;
    }
    // M_Key check (IBA 14.2.4): a mismatching key makes the SMP discarded.
    if (!ignore_mkey && mkey_ != 0 && load_be64(in.data() + mad::smp::kMkey) != mkey_ &&
        (set || mkey_prot_ >= 2)) {
        ++counters_.mkey_violations;
        return 0xffff;
    }
    uint8_t *d = out.data() + mad::smp::kData;
    const uint8_t *req = in.data() + mad::smp::kData;
    switch (attr) {
    case mad::kAttrNodeInfo:
        return set ? uint16_t{mad::kStatusUnsupportedMethodAttr} : get_node_info(d);
    case mad::kAttrNodeDescription:
        if (set) {
            return mad::kStatusUnsupportedMethodAttr;
        }
        std::memcpy(d, node_desc_.data(), node_desc_.size());
        return mad::kStatusOk;
    case mad::kAttrPortInfo:
        if (set) {
            if (uint16_t st = set_port_info(attr_mod, req); st != mad::kStatusOk) {
                return st;
            }
        }
        return get_port_info(attr_mod, d);
    case mad::kAttrPKeyTable:
        if (set) {
            std::memcpy(d, req, mad::smp::kDataSize);
        }
        return pkey_table(set, attr_mod, d);
    case mad::kAttrGuidInfo:
        if (set) {
            std::memcpy(d, req, mad::smp::kDataSize);
        }
        return guid_info(set, attr_mod, d);
    case mad::kAttrSlToVlTable:
        if (set) {
            for (unsigned i = 0; i < 8; ++i) {
                sl2vl_[2 * i] = req[i] >> 4;
                sl2vl_[2 * i + 1] = req[i] & 0x0f;
            }
        }
        for (unsigned i = 0; i < 8; ++i) {
            d[i] = static_cast<uint8_t>(sl2vl_[2 * i] << 4 | sl2vl_[2 * i + 1]);
        }
        return mad::kStatusOk;
    case mad::kAttrVlArbitration: {
        const uint32_t block = attr_mod >> 16;
        if (block < 1 || block > 4) {
            return mad::kStatusInvalidField;
        }
        // Blocks 1, 2: low priority; 3, 4: high priority; 32 entries of 2 bytes each (16 per block).
        uint8_t *table = vlarb_.data() + (block - 1) * 16;
        if (set) {
            std::memcpy(table, req, 16);
        }
        std::memcpy(d, table, 16);
        return mad::kStatusOk;
    }
    case mad::kAttrMlnxExtPortInfo:
        // Mellanox ExtendedPortInfo: StateChangeEnable (byte 3) and the
        // FDR10 LinkSpeedSupported/Enabled/Active bytes 7/11/15, all zero:
        // the link runs plain QDR (mlx5_query_ext_port_caps(), ibnetdiscover).
        std::memset(d, 0, mad::smp::kDataSize);
        return mad::kStatusOk;
    default:
        return mad::kStatusUnsupportedMethodAttr;
    }
}

// --- PMA (IBA 16.1) -------------------------------------------------------

uint16_t Port::pma(const Mad &in, Mad &out) {
    // An HCA port answers for itself (PortSelect its number, 0 or 0xff).
    return iba::pma::answer(in, out, iba::pma::kCapAllPortSelect | iba::pma::kCapExtendedWidth,
                            [this](uint8_t port, iba::pma::CounterRefs &r) {
                                if (port != num_ && port != 0) {
                                    return false;
                                }
                                PortCounters &c = counters_;
                                r.link_downed = &c.link_downed;
                                r.rcv_errors = &c.rcv_errors;
                                r.xmit_discards = &c.xmit_discards;
                                r.vl15_dropped = &c.vl15_dropped;
                                r.xmit_data = &c.xmit_data;
                                r.rcv_data = &c.rcv_data;
                                r.xmit_pkts = &c.xmit_pkts;
                                r.rcv_pkts = &c.rcv_pkts;
                                r.unicast_xmit = &c.unicast_xmit;
                                r.unicast_rcv = &c.unicast_rcv;
                                r.multicast_xmit = &c.multicast_xmit;
                                r.multicast_rcv = &c.multicast_rcv;
                                return true;
                            });
}

void Port::cmd_mad_ifc(CmdCtx &c) {
    const uint32_t port = static_cast<uint32_t>(c.get(ifc::mad_ifc_in::port));
    if (port != num_) {
        c.fail(Status::BadParam, "MAD_IFC for port {} (the device has port 1)", port);
        return;
    }
    auto inb = c.in_block(ifc::mad_ifc_in::mad);
    auto outb = c.out_block(ifc::mad_ifc_out::response_mad_packet);
    if (inb.size() < mad::kSize || outb.size() < mad::kSize) {
        c.fail(Status::BadInputLen, "MAD_IFC needs 256-byte MADs");
        return;
    }
    Mad in, out;
    std::memcpy(in.data(), inb.data(), mad::kSize);
    out = in;
    const uint8_t cls = in[mad::kMgmtClass];
    const uint8_t method = in[mad::kMethod];
    const uint16_t attr = load_be16(in.data() + mad::kAttrId);
    uint16_t status;
    if (in[mad::kBaseVersion] != 1) {
        status = mad::kStatusBadVersion;
    } else if (cls == mad::kClassSubnLid || cls == mad::kClassSubnDr) {
        status = sma(in, out, c.op_mod & 1);
    } else if (cls == mad::kClassPerf) {
        status = pma(in, out);
    } else {
        status = mad::kStatusUnsupportedMethodAttr;  // vendor and congestion classes
    }
    if (status == 0xffff) {
        c.fail(Status::BadPkt, "M_Key violation: SMP attr 0x{:x} discarded", attr);
        return;
    }
    out[mad::kMethod] = static_cast<uint8_t>(mad::kResp | (method == mad::kSet ? uint8_t{mad::kGet} : method));
    // DR SMPs keep the D bit of the status word; the driver sets it on return.
    const uint16_t keep = cls == mad::kClassSubnDr ? (load_be16(in.data() + mad::kStatus) & mad::smp::kDirectionBit) : 0;
    store_be16(out.data() + mad::kStatus, keep | status);
    std::memcpy(outb.data(), out.data(), mad::kSize);
    HCA_TRACE(dev_, mad_mad_ifc, .port = port, .class_ = cls, .method = method, .attr = attr,
              .mod = load_be32(in.data() + mad::kAttrMod), .status = status);
}

void Port::cmd_query_hca_vport_context(CmdCtx &c) {
    if (c.get(ifc::query_hca_vport_context_in::other_vport) ||
        c.get(ifc::query_hca_vport_context_in::vport_number) != 0) {
        c.fail(Status::BadParam, "only vport 0 exists");
        return;
    }
    const uint32_t port = static_cast<uint32_t>(c.get(ifc::query_hca_vport_context_in::port_num));
    if (port > 1) {
        c.fail(Status::BadParam, "port {} does not exist", port);
        return;
    }
    const ifc::Block v = ifc::query_hca_vport_context_out::hca_vport_context;
    using ifc::hca_vport_context;
    c.set(ifc::in(v, hca_vport_context::has_smi), 1);
    c.set(ifc::in(v, hca_vport_context::grh_required), 0);
    c.set(ifc::in(v, hca_vport_context::port_physical_state), phys_);
    c.set(ifc::in(v, hca_vport_context::port_state), state_);
    c.set(ifc::in(v, hca_vport_context::vport_state), state_);
    c.set(ifc::in(v, hca_vport_context::system_image_guid), dev_.node_guid());
    c.set(ifc::in(v, hca_vport_context::port_guid), port_guid());
    c.set(ifc::in(v, hca_vport_context::node_guid), dev_.node_guid());
    c.set(ifc::in(v, hca_vport_context::cap_mask1), cap_mask_);
    c.set(ifc::in(v, hca_vport_context::lid), lid_);
    c.set(ifc::in(v, hca_vport_context::lmc), lmc_);
    c.set(ifc::in(v, hca_vport_context::subnet_timeout), subnet_timeout_);
    c.set(ifc::in(v, hca_vport_context::sm_lid), sm_lid_);
    c.set(ifc::in(v, hca_vport_context::sm_sl), sm_sl_);
}

std::string Port::info() const {
    return fmt::format(
        "port {}: {} phys={} lid={} lmc={} sm_lid={} mtu={} cap_mask=0x{:08x} guid=0x{:016x}\n"
        "  counters: xmit_pkts={} rcv_pkts={} xmit_bytes={} rcv_bytes={} rcv_errors={} xmit_discards={} "
        "qkey_violations={} pkey_violations={}\n",
        num_, state_name(state_), phys_ == pi::kPhysLinkUp ? "LinkUp" : "Polling", lid_, lmc_, sm_lid_,
        128 << neighbor_mtu_, cap_mask_, port_guid(), counters_.xmit_pkts, counters_.rcv_pkts, counters_.xmit_data,
        counters_.rcv_data, counters_.rcv_errors, counters_.xmit_discards, counters_.qkey_violations,
        counters_.pkey_violations);
}

}  // namespace hca
