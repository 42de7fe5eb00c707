// The subnet manager beyond its own switch: switches found behind
// inter-switch links, their ports scanned every sweep, min-hop routes over
// the Active links, a spanning tree for multicast (subnet_manager.h).
#include <deque>
#include <limits>

#include "sm_util.h"
#include "subnet_manager.h"
#include "switch.h"

namespace fabric {

namespace pi = iba::mad::port_info;
namespace ni = iba::mad::node_info;
using namespace sm_util;

namespace {
constexpr unsigned kFar = std::numeric_limits<unsigned>::max();
constexpr uint8_t kPhysLinkUp = 5;
constexpr size_t kMaxSwitches = 64;
}  // namespace

void SubnetManager::verify_switch(uint16_t a, uint64_t gen, const std::array<uint8_t, 64> &node_info) {
    const size_t s = ports_[a].sw;
    const uint8_t k = ports_[a].port;
    switch_smp(s, mad::kGet, mad::kAttrHcasimSwitchLinks, 0, nullptr, [this, a, k, gen, node_info](const Mad *r) {
        if (stale(a, gen)) {
            return;
        }
        if (r && !smp_status(*r) && (smp_data(*r)[k / 8] >> (k % 8) & 1)) {
            found_switch(a, node_info.data());
            return;
        }
        PortCtl &c = ports_[a];
        c.busy = false;
        if (c.state != CaState::Unsupported) {
            log_.warn("sm", "{}: the node there answers as switch {:#018x}, but the port is cabled to a device "
                            "(a guest posing as a switch?); not managed",
                      aname(a), get64(node_info, ni::kNodeGuid));
        }
        set_state(a, CaState::Unsupported);
    });
}

// Attachment a's neighbour answered NodeInfo as a switch: a is an
// inter-switch link; a switch not seen before gets its attachments.
void SubnetManager::found_switch(uint16_t a, const uint8_t *d) {
    PortCtl &c = ports_[a];
    c.busy = false;
    const uint64_t guid = get64({d, 64}, ni::kNodeGuid);
    const uint8_t local = d[ni::kLocalPortNum];
    const uint8_t nports = d[ni::kNumPorts];
    size_t s2 = switches_.size();
    for (size_t i = 0; i < switches_.size(); ++i) {
        if (switches_[i].guid == guid) {
            s2 = i;
        }
    }
    if (s2 == switches_.size()) {
        if (switches_.size() >= kMaxSwitches || ports_.size() + nports + 1 > kMaxAttachments + 1 ||
            ca_path(a).size() > dr::kMaxHops) {
            if (c.state != CaState::Unsupported) {
                log_.warn("sm", "{}: switch {:#018x} not managed: at most {} switches and {} ports in all", aname(a),
                          guid, kMaxSwitches, kMaxAttachments);
            }
            set_state(a, CaState::Unsupported);
            return;
        }
        SwitchNode n;
        n.guid = guid;
        n.num_ports = nports;
        n.base = static_cast<uint16_t>(ports_.size());
        n.path = ca_path(a);
        std::copy_n(d, 40, n.node_info.begin());
        switches_.push_back(n);
        ports_.resize(ports_.size() + nports + 1u);
        for (uint8_t k = 0; k <= nports; ++k) {
            ports_[n.base + k].sw = static_cast<uint16_t>(s2);
            ports_[n.base + k].port = k;
        }
        log_.info("sm", "{}: switch {:#018x} ({} ports) behind it, its port {}: LID {}", aname(a), guid, nports, local,
                  lid_for_port(n.base));
        request_sweep();  // configures and scans it
    }
    if (local < 1 || local > switches_[s2].num_ports) {
        set_state(a, CaState::Unsupported);
        return;
    }
    const auto b = static_cast<uint16_t>(switches_[s2].base + local);
    PortCtl &pc = ports_[a];  // ports_ may have grown
    pc.isl = true;
    pc.peer = b;
    ports_[b].isl = true;
    ports_[b].peer = a;
    set_state(a, CaState::InterSwitch);
    update_paths();
    if (pc.isl_active) {
        return;
    }
    // This end Init -> Armed -> Active; the other end when its switch is scanned.
    pc.busy = true;
    const uint64_t gen = pc.gen;
    set_switch_port(a, PortState::Active, [this, a, gen](bool ok) {
        if (stale(a, gen)) {
            return;
        }
        PortCtl &p = ports_[a];
        p.busy = false;
        p.isl_active = ok;
        if (!ok) {
            fail(a, gen, "inter-switch port did not become Active");
            return;
        }
        if (ports_[p.peer].isl_active) {
            isl_up(a);
        }
    });
}

// Every port of switch s: PortInfo tells its physical link; a port with
// a link is probed as the SM's own switch's ports are.
void SubnetManager::scan_switch(size_t s, uint64_t ep) {
    const uint8_t n = switches_[s].num_ports;
    auto left = std::make_shared<unsigned>(n);
    for (uint8_t k = 1; k <= n; ++k) {
        const auto a = static_cast<uint16_t>(switches_[s].base + k);
        switch_smp(s, mad::kGet, mad::kAttrPortInfo, k, nullptr, [this, s, a, ep, left](const Mad *r) {
            if (ep != epoch_) {
                return;
            }
            if (r && !smp_status(*r)) {
                scan_port(a, data_of(*r));
            }
            if (--*left == 0) {
                switches_[s].busy = false;
            }
        });
    }
    if (n == 0) {
        switches_[s].busy = false;
    }
}

void SubnetManager::scan_port(uint16_t a, const std::array<uint8_t, 64> &d) {
    PortCtl &c = ports_[a];
    const bool up = (d[pi::kPortPhysStateLinkDown] >> 4) == kPhysLinkUp;
    if (!up) {
        if (c.state != CaState::NoLink) {
            ++c.gen;
            c.busy = false;
            port_gone(a);
            c.rereg_pending = false;
            set_state(a, CaState::NoLink);
        }
        return;
    }
    if (c.busy || c.state == CaState::Unsupported) {
        return;
    }
    if (c.state == CaState::NoLink) {
        ++c.gen;
        c.failures = 0;
        c.last_error.clear();
        set_state(a, CaState::Discover);
    }
    if (c.isl && c.isl_active && pi_state(d) == PortState::Active) {
        return;
    }
    if (c.known_active) {
        verify_port(a);
    } else {
        c.isl_active = false;
        start_port(a);
    }
}

void SubnetManager::isl_up(uint16_t a) {
    const PortCtl &c = ports_[a];
    log_.info("sm", "{} <-> {}: inter-switch link Active", aname(a), aname(c.peer));
    program_lft();
    for (const auto &[mlid, ports] : mcast_) {
        program_mft(mlid);
    }
}

void SubnetManager::isl_down(uint16_t a) {
    PortCtl &c = ports_[a];
    const bool was = c.isl_active && ports_[c.peer].isl_active;
    c.isl_active = false;
    c.isl = false;
    PortCtl &p = ports_[c.peer];
    if (p.isl && p.peer == a) {
        p.isl_active = false;
        p.isl = false;
    }
    update_paths();
    if (was) {
        log_.info("sm", "{} <-> {}: inter-switch link down; routing around it", aname(a), aname(c.peer));
        program_lft();
        for (const auto &[mlid, ports] : mcast_) {
            program_mft(mlid);
        }
    }
}

// Each switch's directed route: the shortest over the inter-switch links
// whose both ends the SM knows (directed routes need a physical link only).
// A switch no longer reachable keeps its old route (its SMPs time out).
void SubnetManager::update_paths() {
    each_tree_link(false, [this](size_t u, uint8_t k, uint16_t peer) {
        std::vector<uint8_t> p = switches_[u].path;
        p.push_back(k);
        if (p.size() <= dr::kMaxHops) {
            switches_[ports_[peer].sw].path = std::move(p);
        }
    });
}

// hops()[t][s]: inter-switch links from switch s to switch t (kFar: none).
SubnetManager::Hops SubnetManager::hops() const {
    const size_t n = switches_.size();
    Hops h(n, std::vector<unsigned>(n, kFar));
    for (size_t t = 0; t < n; ++t) {
        std::deque<size_t> q{t};
        h[t][t] = 0;
        while (!q.empty()) {
            const size_t u = q.front();
            q.pop_front();
            each_link(u, true, [&](uint8_t, uint16_t peer) {
                const size_t v = ports_[peer].sw;
                if (h[t][v] == kFar) {
                    h[t][v] = h[t][u] + 1;
                    q.push_back(v);
                }
            });
        }
    }
    return h;
}

// Switch s's LFT entry for lid: its own port 0, the port of a CA on it, or
// the link towards a switch one hop closer to the destination (min-hop);
// among several, lid picks (LIDs of one CA spread over the paths).
uint8_t SubnetManager::route(size_t s, uint16_t lid, const Hops &h) const {
    size_t t = switches_.size();
    uint8_t port = 0;
    if (const uint16_t a = port_for_lid(lid)) {
        t = ports_[a].sw;
        port = ports_[a].port;
    } else {
        for (size_t i = 0; i < switches_.size(); ++i) {
            const uint16_t sl = i == 0 ? cfg_.sm_lid : lid_for_port(switches_[i].base);
            if (sl == lid && (i == 0 || switches_[i].configured)) {
                t = i;
            }
        }
    }
    if (t == switches_.size()) {
        return ForwardingTables::kNoPort;
    }
    if (t == s) {
        return port;
    }
    if (h[t][s] == kFar) {
        return ForwardingTables::kNoPort;
    }
    uint8_t cand[64];
    size_t n = 0;
    each_link(s, true, [&](uint8_t k, uint16_t peer) {
        if (n < sizeof cand && h[t][ports_[peer].sw] + 1 == h[t][s]) {
            cand[n++] = k;
        }
    });
    return n ? cand[lid % n] : ForwardingTables::kNoPort;
}

// The ports of switch s on a spanning tree of the switches (breadth first
// from the SM's switch, over Active links).
ForwardingTables::PortSet SubnetManager::tree_ports(size_t s) const {
    ForwardingTables::PortSet out;
    each_tree_link(true, [&](size_t u, uint8_t k, uint16_t peer) {
        if (u == s) {
            out.set(k);
        }
        if (ports_[peer].sw == s) {
            out.set(ports_[peer].port);
        }
    });
    return out;
}

std::optional<Endport> SubnetManager::ca_at(uint64_t switch_guid, uint8_t port) const {
    for (const SwitchNode &n : switches_) {
        const size_t a = size_t{n.base} + port;
        if (n.guid == switch_guid && port >= 1 && port <= n.num_ports && a < ports_.size() &&
            ports_[a].known_active) {
            return ports_[a].ca;
        }
    }
    return std::nullopt;
}

}  // namespace fabric
