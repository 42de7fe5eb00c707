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
    configure_switch(0, [this, ep] {
        if (ep != epoch_) {
            return;
        }
        sweeping_ = false;
        sweep_ports(ep);
        if (sweep_again_) {
            sweep_again_ = false;
            request_sweep();
        }
    });
}

// The SM's own switch's ports (their link state is known here), then every
// other switch found so far, configured and scanned through its SMA.
void SubnetManager::sweep_ports(uint64_t ep) {
    for (uint8_t k = 1; k <= sw_.num_ports(); ++k) {
        PortCtl &c = ports_[k];
        if (!sw_.port(k).link_up() || c.busy || c.state == CaState::Unsupported || (c.isl && c.isl_active)) {
            continue;
        }
        if (c.known_active) {
            verify_port(k);
        } else {
            start_port(k);
        }
    }
    for (size_t s = 1; s < switches_.size(); ++s) {
        if (switches_[s].busy) {
            continue;
        }
        switches_[s].busy = true;
        configure_switch(s, [this, s, ep] {
            if (ep == epoch_ && s < switches_.size()) {
                scan_switch(s, ep);
            }
        });
    }
}

// Switch s's port 0: its LID (the SM's own for the first switch), the SM
// fields and M_Key, Active; then SwitchInfo.
void SubnetManager::configure_switch(size_t s, std::function<void()> then) {
    const uint64_t ep = epoch_;
    const uint16_t lid = s == 0 ? cfg_.sm_lid : lid_for_port(switches_[s].base);
    switch_smp(s, mad::kGet, mad::kAttrPortInfo, 0, nullptr, [this, s, ep, lid, then](const Mad *r) {
        if (ep != epoch_) {
            return;
        }
        if (!r || smp_status(*r)) {
            log_.warn("sm", "switch {:#018x}: PortInfo(0) failed", switches_[s].guid);
            then();
            return;
        }
        auto d = data_of(*r);
        const PortState st = pi_state(d);
        const bool ok = get16(d, pi::kLid) == lid && get16(d, pi::kMasterSmLid) == cfg_.sm_lid &&
                        st == PortState::Active && get64(d, pi::kMkey) == cfg_.switch_mkey &&
                        (d[pi::kMkeyProtLmc] >> 6) == cfg_.mkey_protect &&
                        (d[pi::kClientReregSubnetTimeout] & 0x1f) == cfg_.subnet_timeout;
        if (ok) {
            switches_[s].port_info = d;
            switch_info(s, ep, then);
            return;
        }
        // The switch's M_Key: only this SM may Set from now on.
        set64(d, pi::kMkey, cfg_.switch_mkey);
        set16(d, pi::kMkeyLeasePeriod, 0);
        set64(d, pi::kGidPrefix, kGidPrefix);
        set16(d, pi::kLid, lid);
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
        switch_smp(s, mad::kSet, mad::kAttrPortInfo, 0, &d, [this, s, ep, d, lid, two_steps, then](const Mad *r3) mutable {
            if (ep != epoch_) {
                return;
            }
            if (!r3 || smp_status(*r3)) {
                log_.warn("sm", "switch {:#018x}: Set(PortInfo 0) failed: status {:#06x}", switches_[s].guid,
                          r3 ? smp_status(*r3) : 0);
                switch_info(s, ep, then);
                return;
            }
            log_.info("sm", "switch {:#018x}: LID {}", switches_[s].guid, lid);
            switches_[s].port_info = data_of(*r3);
            if (!two_steps) {
                switch_info(s, ep, then);
                return;
            }
            d[pi::kLinkSpeedSupportedPortState] =
                static_cast<uint8_t>((d[pi::kLinkSpeedSupportedPortState] & 0xf0) |
                                     static_cast<uint8_t>(PortState::Active));
            switch_smp(s, mad::kSet, mad::kAttrPortInfo, 0, &d, [this, s, ep, then](const Mad *r4) {
                if (ep != epoch_) {
                    return;
                }
                if (r4 && !smp_status(*r4)) {
                    switches_[s].port_info = data_of(*r4);
                }
                switch_info(s, ep, then);
            });
        });
    });
}

// SwitchInfo: LinearFDBTop, LifeTimeValue, clear PortStateChange; then the
// switch's forwarding tables.
void SubnetManager::switch_info(size_t s, uint64_t ep, std::function<void()> then) {
    switch_smp(s, mad::kGet, mad::kAttrSwitchInfo, 0, nullptr, [this, s, ep, then](const Mad *r2) {
        if (ep != epoch_) {
            return;
        }
        auto after = [this, s, then] {
            const bool first = !switches_[s].configured;
            switches_[s].configured = true;
            if (s == 0 || first) {
                program_lft();  // every switch's: a new one changes the routes
            }
            then();
        };
        if (!r2 || smp_status(*r2)) {
            log_.warn("sm", "switch {:#018x}: SwitchInfo failed", switches_[s].guid);
            after();
            return;
        }
        auto d = data_of(*r2);
        const uint16_t top = max_lid();
        const uint8_t life = d[si::kLifeTimeValuePortStateChange];
        if (get16(d, si::kLinearFdbTop) == top && (life >> 3) == cfg_.life_time && !(life & 0x04)) {
            after();
            return;
        }
        set16(d, si::kLinearFdbTop, top);
        d[si::kLifeTimeValuePortStateChange] = static_cast<uint8_t>(cfg_.life_time << 3 | 0x04);
        switch_smp(s, mad::kSet, mad::kAttrSwitchInfo, 0, &d, [after](const Mad *) { after(); });
    });
}

void SubnetManager::set_switch_port(uint16_t port, PortState state, std::function<void(bool ok)> then) {
    const uint64_t gen = ports_[port].gen;
    const size_t sw = ports_[port].sw;
    const uint8_t num = ports_[port].port;
    switch_smp(sw, mad::kGet, mad::kAttrPortInfo, num, nullptr, [this, port, sw, num, state, gen, then](const Mad *r) {
        if (stale(port, gen)) {
            return;
        }
        if (!r || smp_status(*r)) {
            then(false);
            return;
        }
        auto d = data_of(*r);
        const PortState cur = pi_state(d);
        // A link between switches runs at the switches' MTU.
        const uint8_t mtu = ports_[port].isl ? sw_.config().mtu : desired_mtu(ports_[port].ca.port_info);
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
        switch_smp(sw, mad::kSet, mad::kAttrPortInfo, num, &d,
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
    const Hops h = hops();
    for (size_t s = 0; s < switches_.size(); ++s) {
        if (s && !switches_[s].configured) {
            continue;
        }
        std::array<uint8_t, 64> d;
        for (size_t i = 0; i < ForwardingTables::kLftBlock; ++i) {
            d[i] = route(s, static_cast<uint16_t>(block * ForwardingTables::kLftBlock + i), h);
        }
        switch_smp(s, mad::kSet, mad::kAttrLinearForwardingTable, block, &d, [this, s, block](const Mad *r) {
            if (!r || smp_status(*r)) {
                log_.warn("sm", "switch {:#018x}: Set(LinearForwardingTable {}) failed",
                          s < switches_.size() ? switches_[s].guid : 0, block);
            }
        });
    }
}

void SubnetManager::program_lft() {
    const uint32_t last = max_lid() / ForwardingTables::kLftBlock;
    for (uint32_t b = 0; b <= last; ++b) {
        program_lft_block(b);
    }
}

// Every switch's MFT entries of the block holding mlid: the member CA
// ports on that switch, and its links of the spanning tree (a packet
// reaches every switch once; IbSwitch never sends it back out its ingress).
void SubnetManager::program_mft(uint16_t mlid) {
    if (mlid < iba::kMulticastLidBase || mlid - iba::kMulticastLidBase >= ForwardingTables::kMulticastCap) {
        return;
    }
    const uint32_t block = (mlid - iba::kMulticastLidBase) / ForwardingTables::kMftBlock;
    for (size_t s = 0; s < switches_.size(); ++s) {
        if (s && !switches_[s].configured) {
            continue;
        }
        const ForwardingTables::PortSet tree = tree_ports(s);
        const size_t positions = (switches_[s].num_ports + 1u + 15u) / 16u;
        for (uint32_t pos = 0; pos < positions; ++pos) {
            std::array<uint8_t, 64> d{};
            for (size_t i = 0; i < ForwardingTables::kMftBlock; ++i) {
                const auto m = static_cast<uint16_t>(iba::kMulticastLidBase + block * ForwardingTables::kMftBlock + i);
                auto it = mcast_.find(m);
                if (it == mcast_.end()) {
                    continue;
                }
                ForwardingTables::PortSet here = tree;
                for (size_t a = 0; a < ports_.size() && a < it->second.size(); ++a) {
                    if (it->second.test(a) && ports_[a].sw == s) {
                        here.set(ports_[a].port);
                    }
                }
                uint16_t mask = 0;
                for (unsigned b = 0; b < 16; ++b) {
                    if (here.test(pos * 16 + b)) {
                        mask = static_cast<uint16_t>(mask | 1u << b);
                    }
                }
                set16(d, 2 * i, mask);
            }
            switch_smp(s, mad::kSet, mad::kAttrMulticastForwardingTable, pos << 28 | block, &d,
                       [this, mlid](const Mad *r) {
                           if (!r || smp_status(*r)) {
                               log_.warn("sm", "Set(MulticastForwardingTable) for MLID {:#06x} failed", mlid);
                           }
                       });
        }
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
