#include "subnet_manager.h"

#include <algorithm>

#include "smp_agent.h"
#include "switch.h"

namespace fabric {

namespace pi = iba::mad::port_info;
namespace ni = iba::mad::node_info;
namespace si = iba::mad::switch_info;

const char *ca_state_name(CaState s) {
    switch (s) {
    case CaState::NoLink: return "NoLink";
    case CaState::Discover: return "Discover";
    case CaState::Describe: return "Describe";
    case CaState::ReadPort: return "ReadPort";
    case CaState::Arm: return "Arm";
    case CaState::Activate: return "Activate";
    case CaState::Refresh: return "Refresh";
    case CaState::Active: return "Active";
    case CaState::Verify: return "Verify";
    case CaState::Unresponsive: return "Unresponsive";
    case CaState::Unsupported: return "Unsupported";
    }
    return "?";
}

iba::Gid Endport::gid(uint64_t prefix) const {
    iba::Gid g{};
    hca::store_be64(g.data(), prefix);
    hca::store_be64(g.data() + 8, port_guid);
    return g;
}

namespace {

constexpr uint64_t kGidPrefix = 0xfe80000000000000ull;
constexpr uint8_t kHop0[1] = {0};

uint16_t smp_status(const Mad &m) { return get16(m, mad::kStatus) & 0x7fff; }
const uint8_t *smp_data(const Mad &m) { return m.data() + mad::smp::kData; }
std::array<uint8_t, 64> data_of(const Mad &m) {
    std::array<uint8_t, 64> d;
    std::copy_n(smp_data(m), 64, d.begin());
    return d;
}
PortState pi_state(const std::array<uint8_t, 64> &d) {
    return static_cast<PortState>(d[pi::kLinkSpeedSupportedPortState] & 0x0f);
}

}  // namespace

SubnetManager::SubnetManager(IbSwitch &sw, EventLoop &loop, Log &log, const Config &cfg)
    : sw_(sw), loop_(loop), log_(log), cfg_(cfg), ports_(size_t{sw.num_ports()} + 1) {
    std::random_device rd;
    auto draw = [&rd] { return uint64_t{rd()} << 32 | rd(); };
    tid_rng_.seed(cfg_.tid_seed ? cfg_.tid_seed : draw());
    while (cfg_.switch_mkey == 0) {
        cfg_.switch_mkey = cfg_.tid_seed ? tid_rng_() : draw();
    }
}

SubnetManager::~SubnetManager() {
    for (auto &[tid, p] : pending_) {
        loop_.cancel(p.timer);
    }
    loop_.cancel(sweep_timer_);
    if (started_) {
        sw_.set_sm_handler({});
        sw_.set_link_handler({});
        sw_.sma().set_sm_info_provider({});
    }
}

void SubnetManager::start() {
    started_ = true;
    sw_.set_sm_handler([this](const MadAddress &a, const Mad &m) { on_mad(a, m); });
    sw_.set_link_handler([this](uint8_t port, bool up) { on_link(port, up); });
    sw_.sma().set_sm_info_provider([this](std::span<uint8_t, 64> d, bool set) { return sm_info(d, set); });
    log_.info("sm", "subnet manager starting: LID {} GUID {:#018x}", cfg_.sm_lid, sw_.node_guid());
    for (uint8_t k = 1; k <= sw_.num_ports(); ++k) {
        if (sw_.port(k).link_up()) {
            set_state(k, CaState::Discover);
        }
    }
    request_sweep();
    arm_sweep_timer();
}

void SubnetManager::arm_sweep_timer() {
    sweep_timer_ = loop_.after(cfg_.sweep_interval_us, [this] {
        sweep();
        arm_sweep_timer();
    });
}

void SubnetManager::restart() {
    log_.info("sm", "restart: forgetting the subnet, sweeping again (ClientReregister on configured ports)");
    ++epoch_;
    for (auto &[tid, p] : pending_) {
        loop_.cancel(p.timer);
    }
    pending_.clear();
    for (uint8_t k = 1; k <= sw_.num_ports(); ++k) {
        PortCtl &c = ports_[k];
        ++c.gen;
        c.busy = false;
        c.known_active = false;
        c.failures = 0;
        c.last_error.clear();
        c.ca = {};
        c.rereg_pending = sw_.port(k).link_up();
        c.state = sw_.port(k).link_up() ? CaState::Discover : CaState::NoLink;
    }
    // The SA forgets its groups; their MFT entries go with them.
    auto old = std::move(mcast_);
    mcast_.clear();
    for (auto &[mlid, ports] : old) {
        program_mft(mlid);
    }
    sweeping_ = false;
    sweep_again_ = false;
    if (restarted_) {
        restarted_();
    }
    request_sweep();
}

void SubnetManager::request_sweep() {
    if (sweep_posted_) {
        return;
    }
    sweep_posted_ = true;
    loop_.post([this] {
        sweep_posted_ = false;
        sweep();
    });
}

void SubnetManager::set_state(uint8_t port, CaState s) {
    PortCtl &c = ports_[port];
    if (c.state != s) {
        log_.debug("sm", "port {}: {} -> {}", port, ca_state_name(c.state), ca_state_name(s));
        c.state = s;
    }
}

uint16_t SubnetManager::sm_info(std::span<uint8_t, 64> d, bool set) {
    // IBA 14.2.5.13 SMInfo: GUID, SM_Key, ActCount, Priority 7:4, SMState
    // 3:0 (3 = MASTER).  Handover (Set) is not supported: this SM stays
    // master.
    std::fill(d.begin(), d.end(), 0);
    set64(d, 0, sw_.node_guid());
    set64(d, 8, 0);
    set32(d, 16, act_count_);
    d[20] = static_cast<uint8_t>(cfg_.priority << 4 | 3);
    return set ? mad::kStatusUnsupportedMethodAttr : mad::kStatusOk;
}

void SubnetManager::on_link(uint8_t port, bool up) {
    PortCtl &c = ports_.at(port);
    ++c.gen;
    c.busy = false;
    c.failures = 0;
    c.last_error.clear();
    if (up) {
        set_state(port, CaState::Discover);
    } else {
        port_gone(port);
        c.rereg_pending = false;
        set_state(port, CaState::NoLink);
    }
    request_sweep();
}

void SubnetManager::port_gone(uint8_t port) {
    PortCtl &c = ports_[port];
    const bool had = c.known_active;
    const uint64_t guid = c.ca.port_guid;
    c.known_active = false;
    c.routed = false;
    c.ca = {};
    if (had) {
        log_.info("sm", "port {}: CA port {:#018x} gone (LID {})", port, guid, lid_for_port(port));
        if (port_removed_) {
            port_removed_(guid);
        }
    }
    program_lft_block(lid_for_port(port) / ForwardingTables::kLftBlock);
}

// --- the switch ---

void SubnetManager::sweep() {
    if (!started_) {
        return;
    }
    if (sweeping_) {
        sweep_again_ = true;
        return;
    }
    sweeping_ = true;
    ++sweeps_;
    const uint64_t ep = epoch_;
    configure_switch([this, ep] {
        if (ep != epoch_) {
            return;
        }
        sweeping_ = false;
        for (uint8_t k = 1; k <= sw_.num_ports(); ++k) {
            PortCtl &c = ports_[k];
            if (!sw_.port(k).link_up() || c.busy || c.state == CaState::Unsupported) {
                continue;
            }
            if (c.known_active) {
                verify_port(k);
            } else {
                start_port(k);
            }
        }
        if (sweep_again_) {
            sweep_again_ = false;
            request_sweep();
        }
    });
}

void SubnetManager::configure_switch(std::function<void()> then) {
    const uint64_t ep = epoch_;
    // 1. Port 0: the switch LID (= the SM LID), the SM fields, Active.
    smp(kHop0, mad::kGet, mad::kAttrPortInfo, 0, nullptr, [this, ep, then](const Mad *r) {
        if (ep != epoch_) {
            return;
        }
        if (!r || smp_status(*r)) {
            log_.warn("sm", "switch PortInfo(0) failed");
            then();
            return;
        }
        auto d = data_of(*r);
        const PortState st = pi_state(d);
        const bool ok = get16(d, pi::kLid) == cfg_.sm_lid && get16(d, pi::kMasterSmLid) == cfg_.sm_lid &&
                        st == PortState::Active && get64(d, pi::kMkey) == cfg_.switch_mkey &&
                        (d[pi::kMkeyProtLmc] >> 6) == cfg_.mkey_protect &&
                        (d[pi::kClientReregSubnetTimeout] & 0x1f) == cfg_.subnet_timeout;
        auto switch_info = [this, ep, then] {
            // 2. SwitchInfo: LinearFDBTop, LifeTimeValue, clear PortStateChange.
            smp(kHop0, mad::kGet, mad::kAttrSwitchInfo, 0, nullptr, [this, ep, then](const Mad *r2) {
                if (ep != epoch_) {
                    return;
                }
                auto after = [this, then] {
                    program_lft();
                    then();
                };
                if (!r2 || smp_status(*r2)) {
                    log_.warn("sm", "switch SwitchInfo failed");
                    after();
                    return;
                }
                auto s = data_of(*r2);
                const uint16_t top = lid_for_port(sw_.num_ports());
                const uint8_t life = s[si::kLifeTimeValuePortStateChange];
                if (get16(s, si::kLinearFdbTop) == top && (life >> 3) == cfg_.life_time && !(life & 0x04)) {
                    after();
                    return;
                }
                set16(s, si::kLinearFdbTop, top);
                s[si::kLifeTimeValuePortStateChange] = static_cast<uint8_t>(cfg_.life_time << 3 | 0x04);
                smp(kHop0, mad::kSet, mad::kAttrSwitchInfo, 0, &s, [after](const Mad *) { after(); });
            });
        };
        if (ok) {
            switch_info();
            return;
        }
        // The switch's M_Key: only this SM may Set from now on.
        set64(d, pi::kMkey, cfg_.switch_mkey);
        set16(d, pi::kMkeyLeasePeriod, 0);
        set64(d, pi::kGidPrefix, kGidPrefix);
        set16(d, pi::kLid, cfg_.sm_lid);
        set16(d, pi::kMasterSmLid, cfg_.sm_lid);
        d[pi::kLinkWidthEnabled] = 0;
        d[pi::kPortPhysStateLinkDown] = 0;
        d[pi::kMkeyProtLmc] = static_cast<uint8_t>((cfg_.mkey_protect & 3) << 6);  // LMC 0
        d[pi::kLinkSpeedActiveEnabled] &= 0xf0;
        d[pi::kNeighborMtuMasterSmSl] &= 0xf0;  // MasterSMSL 0
        d[pi::kClientReregSubnetTimeout] = cfg_.subnet_timeout;
        const bool two_steps = st == PortState::Init;
        d[pi::kLinkSpeedSupportedPortState] = static_cast<uint8_t>(
            (d[pi::kLinkSpeedSupportedPortState] & 0xf0) |
            static_cast<uint8_t>(two_steps ? PortState::Armed : st == PortState::Armed ? PortState::Active
                                                                                      : PortState::Nop));
        smp(kHop0, mad::kSet, mad::kAttrPortInfo, 0, &d, [this, ep, d, two_steps, switch_info](const Mad *r3) mutable {
            if (ep != epoch_) {
                return;
            }
            if (!r3 || smp_status(*r3)) {
                log_.warn("sm", "switch Set(PortInfo 0) failed: status {:#06x}", r3 ? smp_status(*r3) : 0);
                switch_info();
                return;
            }
            log_.info("sm", "switch {:#018x}: LID {}", sw_.node_guid(), cfg_.sm_lid);
            if (!two_steps) {
                switch_info();
                return;
            }
            d[pi::kLinkSpeedSupportedPortState] =
                static_cast<uint8_t>((d[pi::kLinkSpeedSupportedPortState] & 0xf0) |
                                     static_cast<uint8_t>(PortState::Active));
            smp(kHop0, mad::kSet, mad::kAttrPortInfo, 0, &d, [switch_info](const Mad *) { switch_info(); });
        });
    });
}

void SubnetManager::set_switch_port(uint8_t port, PortState state, std::function<void(bool ok)> then) {
    const uint64_t gen = ports_[port].gen;
    smp(kHop0, mad::kGet, mad::kAttrPortInfo, port, nullptr, [this, port, state, gen, then](const Mad *r) {
        if (stale(port, gen)) {
            return;
        }
        if (!r || smp_status(*r)) {
            then(false);
            return;
        }
        auto d = data_of(*r);
        const PortState cur = pi_state(d);
        const uint8_t mtu = desired_mtu(ports_[port].ca.port_info);
        if ((cur == state || (state == PortState::Armed && cur == PortState::Active)) &&
            (d[pi::kNeighborMtuMasterSmSl] >> 4) == mtu) {
            then(true);  // already there (Active is past Armed)
            return;
        }
        PortState step = state;
        if (state == PortState::Active && cur == PortState::Init) {
            step = PortState::Armed;  // IBA: Init -> Armed -> Active
        }
        if (cur == state || (state == PortState::Armed && cur == PortState::Active)) {
            step = PortState::Nop;
        }
        d[pi::kLinkWidthEnabled] = 0;
        d[pi::kLinkSpeedSupportedPortState] =
            static_cast<uint8_t>((d[pi::kLinkSpeedSupportedPortState] & 0xf0) | static_cast<uint8_t>(step));
        d[pi::kPortPhysStateLinkDown] = 0;
        d[pi::kLinkSpeedActiveEnabled] &= 0xf0;
        d[pi::kNeighborMtuMasterSmSl] = static_cast<uint8_t>(mtu << 4 | (d[pi::kNeighborMtuMasterSmSl] & 0x0f));
        d[pi::kOperVlFilters] = static_cast<uint8_t>(1 << 4 | (d[pi::kOperVlFilters] & 0x0f));
        smp(kHop0, mad::kSet, mad::kAttrPortInfo, port, &d,
            [this, port, state, step, gen, then](const Mad *r2) {
                if (stale(port, gen)) {
                    return;
                }
                if (!r2 || smp_status(*r2)) {
                    then(false);
                    return;
                }
                if (step != state && step != PortState::Nop) {
                    set_switch_port(port, state, then);  // the second step
                    return;
                }
                const PortState now = pi_state(data_of(*r2));
                then(now == state || (state == PortState::Armed && now == PortState::Active));
            });
    });
}

void SubnetManager::program_lft_block(uint32_t block) {
    std::array<uint8_t, 64> d;
    d.fill(ForwardingTables::kNoPort);
    for (size_t i = 0; i < ForwardingTables::kLftBlock; ++i) {
        const uint32_t lid = block * ForwardingTables::kLftBlock + static_cast<uint32_t>(i);
        if (lid == cfg_.sm_lid) {
            d[i] = 0;
        } else if (lid >= 2 && lid - 1 <= sw_.num_ports() && ports_[lid - 1].routed) {
            d[i] = static_cast<uint8_t>(lid - 1);
        }
    }
    smp(kHop0, mad::kSet, mad::kAttrLinearForwardingTable, block, &d, [this, block](const Mad *r) {
        if (!r || smp_status(*r)) {
            log_.warn("sm", "Set(LinearForwardingTable {}) failed", block);
        }
    });
}

void SubnetManager::program_lft() {
    const uint32_t last = lid_for_port(sw_.num_ports()) / ForwardingTables::kLftBlock;
    for (uint32_t b = 0; b <= last; ++b) {
        program_lft_block(b);
    }
}

void SubnetManager::program_mft(uint16_t mlid) {
    if (mlid < iba::kMulticastLidBase || mlid - iba::kMulticastLidBase >= ForwardingTables::kMulticastCap) {
        return;
    }
    const uint32_t block = (mlid - iba::kMulticastLidBase) / ForwardingTables::kMftBlock;
    const size_t positions = sw_.fdb().mft_positions();
    for (uint32_t pos = 0; pos < positions; ++pos) {
        std::array<uint8_t, 64> d{};
        for (size_t i = 0; i < ForwardingTables::kMftBlock; ++i) {
            const auto m = static_cast<uint16_t>(iba::kMulticastLidBase + block * ForwardingTables::kMftBlock + i);
            auto it = mcast_.find(m);
            if (it == mcast_.end()) {
                continue;
            }
            uint16_t mask = 0;
            for (unsigned b = 0; b < 16; ++b) {
                if (it->second.test(pos * 16 + b)) {
                    mask = static_cast<uint16_t>(mask | 1u << b);
                }
            }
            set16(d, 2 * i, mask);
        }
        smp(kHop0, mad::kSet, mad::kAttrMulticastForwardingTable, pos << 28 | block, &d,
            [this, mlid](const Mad *r) {
                if (!r || smp_status(*r)) {
                    log_.warn("sm", "Set(MulticastForwardingTable) for MLID {:#06x} failed", mlid);
                }
            });
    }
}

void SubnetManager::set_mcast_ports(uint16_t mlid, const ForwardingTables::PortSet &ports) {
    if (ports.none()) {
        mcast_.erase(mlid);
    } else {
        mcast_[mlid] = ports;
    }
    program_mft(mlid);
}

// --- CA ports ---

uint8_t SubnetManager::desired_mtu(const std::array<uint8_t, 64> &ca_pi) const {
    uint8_t cap = ca_pi[pi::kInitTypeReplyMtuCap] & 0x0f;
    if (cap < kMtu256 || cap > kMtu4096) {
        cap = kMtu256;
    }
    return std::min(cap, sw_.config().mtu);
}

void SubnetManager::start_port(uint8_t port) {
    PortCtl &c = ports_[port];
    c.busy = true;
    const uint64_t gen = c.gen;
    set_state(port, CaState::Discover);
    const std::array<uint8_t, 2> path{0, port};
    smp(path, mad::kGet, mad::kAttrNodeInfo, 0, nullptr, [this, port, gen, path](const Mad *r) {
        if (stale(port, gen)) {
            return;
        }
        if (!r) {
            fail(port, gen, "no answer to NodeInfo (guest driver not loaded yet?)");
            return;
        }
        if (smp_status(*r)) {
            fail(port, gen, fmt::format("NodeInfo status {:#06x}", smp_status(*r)));
            return;
        }
        PortCtl &pc = ports_[port];
        const uint8_t *d = smp_data(*r);
        if (d[ni::kNodeType] != ni::kTypeCa) {
            pc.busy = false;
            if (pc.state != CaState::Unsupported) {
                log_.warn("sm", "port {}: neighbour node {:#018x} is of type {}, not a channel adapter; not managed",
                          port, get64({d, 64}, ni::kNodeGuid), d[ni::kNodeType]);
            }
            set_state(port, CaState::Unsupported);
            return;
        }
        std::copy_n(d, 40, pc.ca.node_info.begin());
        pc.ca.node_guid = get64({d, 64}, ni::kNodeGuid);
        pc.ca.port_guid = get64({d, 64}, ni::kPortGuid);
        pc.ca.port_num = d[ni::kLocalPortNum];
        pc.ca.switch_port = port;
        set_state(port, CaState::Describe);
        smp(path, mad::kGet, mad::kAttrNodeDescription, 0, nullptr, [this, port, gen, path](const Mad *r2) {
            if (stale(port, gen)) {
                return;
            }
            PortCtl &c2 = ports_[port];
            if (r2 && !smp_status(*r2)) {
                std::copy_n(smp_data(*r2), 64, c2.ca.node_desc.begin());
            }
            set_state(port, CaState::ReadPort);
            smp(path, mad::kGet, mad::kAttrPortInfo, c2.ca.port_num, nullptr, [this, port, gen](const Mad *r3) {
                if (stale(port, gen)) {
                    return;
                }
                if (!r3) {
                    fail(port, gen, "no answer to PortInfo");
                    return;
                }
                if (smp_status(*r3)) {
                    fail(port, gen, fmt::format("PortInfo status {:#06x}", smp_status(*r3)));
                    return;
                }
                ports_[port].ca.port_info = data_of(*r3);
                configure_ca(port, gen);
            });
        });
    });
}

void SubnetManager::configure_ca(uint8_t port, uint64_t gen) {
    PortCtl &c = ports_[port];
    const auto &d = c.ca.port_info;
    const PortState cur = pi_state(d);
    const uint16_t want_lid = lid_for_port(port);
    // IBA 14.4.11: a client that may have lost its registrations (the SM
    // restarted, or found the port configured by someone else) is told to
    // register again.
    const bool rereg = c.rereg_pending || (cur == PortState::Active && !c.known_active);
    auto activate = [this, port, gen, rereg] {
        set_state(port, CaState::Activate);
        ca_set_port_info(port, gen, PortState::Active, rereg, [this, port, gen](const std::array<uint8_t, 64> &) {
            set_switch_port(port, PortState::Active, [this, port, gen](bool ok) {
                if (stale(port, gen)) {
                    return;
                }
                if (!ok) {
                    fail(port, gen, "switch port did not become Active");
                    return;
                }
                ca_done(port);
            });
        });
    };
    switch (cur) {
    case PortState::Init:
        set_state(port, CaState::Arm);
        set_switch_port(port, PortState::Armed, [this, port, gen, activate](bool ok) {
            if (stale(port, gen)) {
                return;
            }
            if (!ok) {
                fail(port, gen, "switch port did not become Armed");
                return;
            }
            ca_set_port_info(port, gen, PortState::Armed, false,
                             [this, port, activate](const std::array<uint8_t, 64> &) {
                                 // Route the new LID before the port goes Active.
                                 ports_[port].routed = true;
                                 program_lft_block(lid_for_port(port) / ForwardingTables::kLftBlock);
                                 activate();
                             });
        });
        return;
    case PortState::Armed:
        activate();
        return;
    case PortState::Active: {
        const bool fields_ok = get16(d, pi::kLid) == want_lid && get16(d, pi::kMasterSmLid) == cfg_.sm_lid &&
                               (d[pi::kMkeyProtLmc] & 0x07) == 0 &&
                               (d[pi::kNeighborMtuMasterSmSl] >> 4) == desired_mtu(d);
        if (fields_ok && !rereg) {
            set_switch_port(port, PortState::Active, [this, port, gen](bool ok) {
                if (!stale(port, gen)) {
                    ok ? ca_done(port) : fail(port, gen, "switch port did not become Active");
                }
            });
            return;
        }
        set_state(port, CaState::Refresh);
        ca_set_port_info(port, gen, PortState::Nop, rereg, [this, port, gen](const std::array<uint8_t, 64> &) {
            set_switch_port(port, PortState::Active, [this, port, gen](bool ok) {
                if (!stale(port, gen)) {
                    ok ? ca_done(port) : fail(port, gen, "switch port did not become Active");
                }
            });
        });
        return;
    }
    default:
        fail(port, gen, fmt::format("CA port is {}", port_state_name(cur)));
        return;
    }
}

void SubnetManager::ca_set_port_info(uint8_t port, uint64_t gen, PortState state, bool rereg,
                                     std::function<void(const std::array<uint8_t, 64> &)> then) {
    PortCtl &c = ports_[port];
    std::array<uint8_t, 64> d = c.ca.port_info;
    const uint16_t want_lid = lid_for_port(port);
    // Start from what the port reported and change what the SM owns
    // (IBA 14.2.5.6); 0 in PortPhysicalState, LinkDownDefaultState, link
    // width/speed enables means "no change".
    set64(d, pi::kMkey, 0);
    set64(d, pi::kGidPrefix, kGidPrefix);
    set16(d, pi::kLid, want_lid);
    set16(d, pi::kMasterSmLid, cfg_.sm_lid);
    set16(d, pi::kMkeyLeasePeriod, 0);
    d[pi::kLinkWidthEnabled] = 0;
    d[pi::kLinkSpeedSupportedPortState] =
        static_cast<uint8_t>((d[pi::kLinkSpeedSupportedPortState] & 0xf0) | static_cast<uint8_t>(state));
    d[pi::kPortPhysStateLinkDown] = 0;
    d[pi::kMkeyProtLmc] = 0;  // M_KeyProtectBits 0, LMC 0
    d[pi::kLinkSpeedActiveEnabled] &= 0xf0;
    d[pi::kNeighborMtuMasterSmSl] = static_cast<uint8_t>(desired_mtu(c.ca.port_info) << 4);  // MasterSMSL 0
    d[pi::kOperVlFilters] = static_cast<uint8_t>(1 << 4 | (d[pi::kOperVlFilters] & 0x0f));  // VL0
    d[pi::kClientReregSubnetTimeout] = static_cast<uint8_t>((rereg ? 0x80 : 0) | cfg_.subnet_timeout);
    const std::array<uint8_t, 2> path{0, port};
    smp(path, mad::kSet, mad::kAttrPortInfo, c.ca.port_num, &d,
        [this, port, gen, state, rereg, want_lid, then](const Mad *r) {
            if (stale(port, gen)) {
                return;
            }
            if (!r) {
                fail(port, gen, "no answer to Set(PortInfo)");
                return;
            }
            if (smp_status(*r)) {
                fail(port, gen, fmt::format("Set(PortInfo) status {:#06x}", smp_status(*r)));
                return;
            }
            auto got = data_of(*r);
            ports_[port].ca.port_info = got;
            if (get16(got, pi::kLid) != want_lid || get16(got, pi::kMasterSmLid) != cfg_.sm_lid) {
                fail(port, gen, fmt::format("CA port did not take LID {} / SM LID {}", want_lid, cfg_.sm_lid));
                return;
            }
            if (state != PortState::Nop && pi_state(got) != state) {
                fail(port, gen,
                     fmt::format("CA port is {} after Set {}", port_state_name(pi_state(got)), port_state_name(state)));
                return;
            }
            if (rereg) {
                log_.info("sm", "port {}: ClientReregister sent to {:#018x}", port, ports_[port].ca.port_guid);
            }
            then(got);
        });
}

void SubnetManager::ca_done(uint8_t port) {
    PortCtl &c = ports_[port];
    c.busy = false;
    c.failures = 0;
    c.last_error.clear();
    c.rereg_pending = false;
    const bool was = c.known_active;
    c.known_active = true;
    c.routed = true;
    c.ca.lid = lid_for_port(port);
    c.ca.mtu = desired_mtu(c.ca.port_info);
    const uint8_t w = c.ca.port_info[pi::kLinkWidthActive];
    const uint8_t sp = c.ca.port_info[pi::kLinkSpeedActiveEnabled] >> 4;
    const uint8_t link = rate_code(sw_.config().rate);
    const uint8_t ca = rate_code(LinkRate{w, sp});
    // The path runs at the slower of the two ends.
    c.ca.rate = link_lanes(w) && lane_mbps(sp) && rate_mbps(ca) < rate_mbps(link) ? ca : link;
    set_state(port, CaState::Active);
    if (!was) {
        std::string desc(reinterpret_cast<const char *>(c.ca.node_desc.data()), 64);
        desc.resize(desc.find('\0') == std::string::npos ? 64 : desc.find('\0'));
        log_.info("sm", "port {}: CA {:#018x} '{}' port {} GUID {:#018x}: LID {} Active", port, c.ca.node_guid,
                  desc, c.ca.port_num, c.ca.port_guid, c.ca.lid);
        program_lft_block(c.ca.lid / ForwardingTables::kLftBlock);
        if (port_active_) {
            port_active_(c.ca);
        }
    }
}

void SubnetManager::verify_port(uint8_t port) {
    PortCtl &c = ports_[port];
    c.busy = true;
    const uint64_t gen = c.gen;
    set_state(port, CaState::Verify);
    const std::array<uint8_t, 2> path{0, port};
    smp(path, mad::kGet, mad::kAttrPortInfo, c.ca.port_num, nullptr, [this, port, gen](const Mad *r) {
        if (stale(port, gen)) {
            return;
        }
        PortCtl &c2 = ports_[port];
        if (!r || smp_status(*r)) {
            // No answer from an Active port: its QP0 agent may be busy or
            // reloading; keep it and look again next sweep.
            c2.busy = false;
            set_state(port, CaState::Active);
            return;
        }
        const auto d = data_of(*r);
        c2.ca.port_info = d;
        const PortState st = pi_state(d);
        if (st == PortState::Active && get16(d, pi::kLid) == lid_for_port(port) &&
            get16(d, pi::kMasterSmLid) == cfg_.sm_lid) {
            c2.busy = false;
            set_state(port, CaState::Active);
            return;
        }
        log_.info("sm", "port {}: CA port is {} with LID {}: configuring it again", port, port_state_name(st),
                  get16(d, pi::kLid));
        if (st != PortState::Active) {
            port_gone(port);
            c2.busy = false;
            start_port(port);
        } else {
            configure_ca(port, gen);
        }
    });
}

void SubnetManager::fail(uint8_t port, uint64_t gen, const std::string &why) {
    if (stale(port, gen)) {
        return;
    }
    PortCtl &c = ports_[port];
    c.busy = false;
    ++c.failures;
    if (c.last_error != why) {
        log_.info("sm", "port {}: {}; trying again every sweep", port, why);
        c.last_error = why;
    }
    set_state(port, CaState::Unresponsive);
}

// --- views ---

std::vector<Endport> SubnetManager::endports() const {
    std::vector<Endport> v;
    if (sw_.lid()) {
        Endport e;
        e.is_switch = true;
        e.lid = sw_.lid();
        e.node_guid = sw_.node_guid();
        e.port_guid = sw_.node_guid();
        e.port_num = 0;
        e.mtu = sw_.config().mtu;
        e.rate = rate_code(sw_.config().rate);
        sw_.sma().node_info(e.node_info, 0);
        sw_.sma().node_description(e.node_desc);
        sw_.sma().port_info(0, e.port_info, 0);
        v.push_back(e);
    }
    for (uint8_t k = 1; k <= sw_.num_ports(); ++k) {
        if (ports_[k].known_active) {
            v.push_back(ports_[k].ca);
        }
    }
    return v;
}

std::optional<Endport> SubnetManager::endport_by_lid(uint16_t lid) const {
    for (auto &e : endports()) {
        if (e.lid == lid) {
            return e;
        }
    }
    return std::nullopt;
}

std::optional<Endport> SubnetManager::endport_by_guid(uint64_t guid) const {
    for (auto &e : endports()) {
        if (e.port_guid == guid) {
            return e;
        }
    }
    return std::nullopt;
}

std::string SubnetManager::status() const {
    std::string s = fmt::format(
        "sm: state=master lid={} guid={:#018x} priority={} sweeps={} smps={} timeouts={} act_count={}\n",
        cfg_.sm_lid, sw_.node_guid(), cfg_.priority, sweeps_, smps_sent_, smp_timeouts_, act_count_);
    for (uint8_t k = 1; k <= sw_.num_ports(); ++k) {
        const PortCtl &c = ports_[k];
        fmt::format_to(std::back_inserter(s), "sm port {}: {}", k, ca_state_name(c.state));
        if (c.known_active) {
            fmt::format_to(std::back_inserter(s), " lid={} guid={:#018x}", c.ca.lid, c.ca.port_guid);
        }
        if (!c.last_error.empty() && !c.known_active) {
            fmt::format_to(std::back_inserter(s), " failures={} last_error=\"{}\"", c.failures, c.last_error);
        }
        s += '\n';
    }
    return s;
}

}  // namespace fabric
