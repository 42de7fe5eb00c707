// The subnet manager's sweep and its work on the switch: the switch's own
// port, its ports' states, and the linear and multicast forwarding tables.
#include "subnet_manager.h"

#include "sm_util.h"
#include "smp_agent.h"
#include "switch.h"

namespace fabric {

namespace pi = iba::mad::port_info;
namespace si = iba::mad::switch_info;
using namespace sm_util;

void SubnetManager::sweep() {
    if (!running()) {
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
                const uint16_t top = max_lid();
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
        } else if (const uint8_t p = port_for_lid(static_cast<uint16_t>(lid))) {
            d[i] = p;
        }
    }
    smp(kHop0, mad::kSet, mad::kAttrLinearForwardingTable, block, &d, [this, block](const Mad *r) {
        if (!r || smp_status(*r)) {
            log_.warn("sm", "Set(LinearForwardingTable {}) failed", block);
        }
    });
}

void SubnetManager::program_lft() {
    const uint32_t last = max_lid() / ForwardingTables::kLftBlock;
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

}  // namespace fabric
