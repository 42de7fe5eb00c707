#include "subnet_manager.h"

#include <algorithm>

#include "sm_util.h"
#include "smp_agent.h"
#include "switch.h"

namespace fabric {

namespace pi = iba::mad::port_info;
namespace ni = iba::mad::node_info;
using namespace sm_util;

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
    case CaState::InterSwitch: return "Switch";
    }
    return "?";
}

iba::Gid Endport::gid(uint64_t prefix) const {
    iba::Gid g{};
    hca::store_be64(g.data(), prefix);
    hca::store_be64(g.data() + 8, port_guid);
    return g;
}


SubnetManager::SubnetManager(IbSwitch &sw, EventLoop &loop, Log &log, const Config &cfg)
    : sw_(sw), loop_(loop), log_(log), cfg_(cfg), ports_(size_t{sw.num_ports()} + 1) {
    cfg_.lmc = std::min<uint8_t>(cfg_.lmc, 4);
    if (cfg_.lmc) {
        cfg_.sm_lid = static_cast<uint16_t>(1u << cfg_.lmc);  // LID 1 with its low LMC bits zero
    }
    SwitchNode root;
    root.guid = sw.node_guid();
    root.num_ports = sw.num_ports();
    root.path = {0};
    switches_.push_back(root);
    for (size_t k = 0; k < ports_.size(); ++k) {
        ports_[k].port = static_cast<uint8_t>(k);
    }
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
    for (auto &c : ports_) {
        loop_.cancel(c.settle_timer);
    }
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

void SubnetManager::stop() {
    if (!running()) {
        return;
    }
    log_.info("sm", "stop: the SM is gone (no sweeps, no trap answers, no SA) until 'sm start'");
    stopped_ = true;
    ++epoch_;
    for (auto &[tid, p] : pending_) {
        loop_.cancel(p.timer);
    }
    pending_.clear();
    sweeping_ = false;
    sweep_again_ = false;
}

void SubnetManager::reregister(uint8_t port) {
    if (!running() || port == 0 || port > sw_.num_ports() || !sw_.port(port).link_up()) {
        return;
    }
    PortCtl &c = ports_[port];
    log_.info("sm", "port {}: ClientReregister requested", port);
    c.rereg_pending = true;
    if (!c.busy) {
        ++c.gen;
        start_port(port);
    }
}

bool SubnetManager::change_lid(uint8_t port) {
    if (!running() || port == 0 || port > sw_.num_ports() || !ports_[port].known_active) {
        return false;
    }
    PortCtl &c = ports_[port];
    const uint16_t old = lid_for_port(port);
    c.moved = !c.moved;
    log_.info("sm", "port {}: LID {} -> {}", port, old, lid_for_port(port));
    program_lft_block(old / ForwardingTables::kLftBlock);  // the old LID leads nowhere now
    if (!c.busy) {
        ++c.gen;
        start_port(port);
    }
    return true;
}

bool SubnetManager::set_pkeys(uint8_t port, std::vector<uint16_t> pkeys) {
    if (!running() || port == 0 || port > sw_.num_ports() || !ports_[port].known_active || pkeys.empty() ||
        pkeys.size() > 32) {
        return false;
    }
    ports_[port].pkeys = std::move(pkeys);
    apply_pkeys(port);
    return true;
}

// Set(P_KeyTable) block 0 of the CA port (IBA 14.2.5.7); the CA raises a
// P_Key change event when its table changes.
void SubnetManager::apply_pkeys(uint16_t port) {
    const PortCtl &c = ports_[port];
    if (c.pkeys.empty()) {
        return;
    }
    std::array<uint8_t, 64> d{};
    std::string list;
    for (size_t i = 0; i < c.pkeys.size(); ++i) {
        set16(d, i * 2, c.pkeys[i]);
        list += fmt::format("{}{:#06x}", i ? "," : "", c.pkeys[i]);
    }
    log_.info("sm", "{}: P_Key table {}", aname(port), list);
    smp(ca_path(port), mad::kSet, mad::kAttrPKeyTable, 0, &d, [this, port](const Mad *r) {
        if (!r || smp_status(*r)) {
            log_.warn("sm", "{}: Set(P_KeyTable) failed: {}", aname(port),
                      r ? fmt::format("status {:#06x}", smp_status(*r)) : std::string("no answer"));
        }
    });
    apply_switch_pkeys();
}

// The switch's port 0 joins every partition in use (the SA answers in each).
void SubnetManager::apply_switch_pkeys() {
    Endport sw;
    sw.is_switch = true;
    const auto keys = pkeys_of(sw);
    std::array<uint8_t, 64> d{};
    for (size_t i = 0; i < keys.size(); ++i) {
        set16(d, i * 2, keys[i]);
    }
    switch_smp(0, mad::kSet, mad::kAttrPKeyTable, 0, &d, [this](const Mad *r) {
        if (!r || smp_status(*r)) {
            log_.warn("sm", "switch port 0: Set(P_KeyTable) failed");
        }
    });
}

std::vector<uint16_t> SubnetManager::pkeys_of(const Endport &e) const {
    if (!e.is_switch) {
        if (e.attach < ports_.size() && !ports_[e.attach].pkeys.empty()) {
            return ports_[e.attach].pkeys;
        }
        return {0xffff};
    }
    std::vector<uint16_t> all{0xffff};
    for (const PortCtl &c : ports_) {
        for (const uint16_t k : c.pkeys) {
            const uint16_t full = k | 0x8000;
            if ((k & 0x7fff) && std::find(all.begin(), all.end(), full) == all.end() && all.size() < 32) {
                all.push_back(full);
            }
        }
    }
    return all;
}

std::optional<uint16_t> SubnetManager::pkey_entry(const Endport &e, uint16_t pkey) const {
    if (!(pkey & 0x7fff)) {
        return std::nullopt;  // the invalid P_Key names no partition
    }
    for (const uint16_t k : pkeys_of(e)) {
        if ((k & 0x7fff) == (pkey & 0x7fff)) {
            return k;
        }
    }
    return std::nullopt;
}

std::optional<uint16_t> SubnetManager::shared_pkey(const Endport &a, const Endport &b, uint16_t pkey) const {
    const auto ka = pkey_entry(a, pkey), kb = pkey_entry(b, pkey);
    if (!ka || !kb || !((*ka | *kb) & 0x8000)) {
        return std::nullopt;
    }
    return ka;
}

uint16_t SubnetManager::port_for_lid(uint16_t lid) const {
    const unsigned n = attachments();
    const unsigned i = lid >> cfg_.lmc;  // a CA answers to its 2^LMC LIDs
    const unsigned p = i >= 2 && i <= n + 1 ? i - 1u : i >= n + 2 && i <= 2 * n + 1 ? i - 1u - n : 0;
    const auto base = static_cast<uint16_t>(lid & ~((1u << cfg_.lmc) - 1));
    return p && ports_[p].routed && !ports_[p].isl && lid_for_port(static_cast<uint16_t>(p)) == base
               ? static_cast<uint16_t>(p)
               : 0;
}

std::vector<uint8_t> SubnetManager::ca_path(uint16_t a) const {
    std::vector<uint8_t> p = switches_[ports_[a].sw].path;
    p.push_back(ports_[a].port);
    return p;
}

std::string SubnetManager::aname(uint16_t a) const {
    const PortCtl &c = ports_[a];
    return c.sw == 0 ? fmt::format("port {}", c.port)
                     : fmt::format("switch {:#018x} port {}", switches_[c.sw].guid, c.port);
}

void SubnetManager::restart() {
    log_.info("sm", "{}: forgetting the subnet, sweeping again (ClientReregister on configured ports)",
              stopped_ ? "start" : "restart");
    stopped_ = false;
    ++epoch_;
    for (auto &[tid, p] : pending_) {
        loop_.cancel(p.timer);
    }
    pending_.clear();
    // The other switches are found again by the sweep.
    switches_.resize(1);
    switches_[0].configured = false;
    switches_[0].busy = false;
    ports_.resize(size_t{sw_.num_ports()} + 1);
    for (uint8_t k = 1; k <= sw_.num_ports(); ++k) {
        PortCtl &c = ports_[k];
        c.isl = false;
        c.isl_active = false;
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

void SubnetManager::set_state(uint16_t port, CaState s) {
    PortCtl &c = ports_[port];
    if (c.state != s) {
        log_.debug("sm", "{}: {} -> {}", aname(port), ca_state_name(c.state), ca_state_name(s));
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

void SubnetManager::port_gone(uint16_t port) {
    PortCtl &c = ports_[port];
    if (c.isl) {
        isl_down(port);
        return;
    }
    const bool had = c.known_active;
    const uint64_t guid = c.ca.port_guid;
    c.known_active = false;
    c.routed = false;
    c.ca = {};
    if (had) {
        log_.info("sm", "{}: CA port {:#018x} gone (LID {})", aname(port), guid, lid_for_port(port));
        if (port_removed_) {
            port_removed_(guid);
        }
    }
    program_lft_block(lid_for_port(port) / ForwardingTables::kLftBlock);
}

// --- CA ports ---

uint8_t SubnetManager::desired_mtu(const std::array<uint8_t, 64> &ca_pi) const {
    uint8_t cap = ca_pi[pi::kInitTypeReplyMtuCap] & 0x0f;
    if (cap < kMtu256 || cap > kMtu4096) {
        cap = kMtu256;
    }
    return std::min(cap, sw_.config().mtu);
}

void SubnetManager::start_port(uint16_t port) {
    PortCtl &c = ports_[port];
    c.busy = true;
    const uint64_t gen = c.gen;
    if (!c.isl && c.state != CaState::Unresponsive) {
        set_state(port, CaState::Discover);  // a silent port stays Unresponsive until it answers
    }
    const std::vector<uint8_t> path = ca_path(port);
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
        if (d[ni::kNodeType] == ni::kTypeSwitch) {
            verify_switch(port, gen, data_of(*r));
            return;
        }
        if (d[ni::kNodeType] != ni::kTypeCa) {
            pc.busy = false;
            if (pc.state != CaState::Unsupported) {
                log_.warn("sm", "{}: neighbour node {:#018x} is of type {}, neither a channel adapter nor a switch; "
                          "not managed", aname(port), get64({d, 64}, ni::kNodeGuid), d[ni::kNodeType]);
            }
            set_state(port, CaState::Unsupported);
            return;
        }
        std::copy_n(d, 40, pc.ca.node_info.begin());
        pc.ca.node_guid = get64({d, 64}, ni::kNodeGuid);
        pc.ca.port_guid = get64({d, 64}, ni::kPortGuid);
        pc.ca.port_num = d[ni::kLocalPortNum];
        pc.ca.switch_port = pc.port;
        pc.ca.attach = port;
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
                if (cfg_.new_port_settle_us == 0 || pi_state(ports_[port].ca.port_info) != PortState::Init) {
                    configure_ca(port, gen);
                    return;
                }
                ports_[port].settle_timer = loop_.after(cfg_.new_port_settle_us, [this, port, gen] {
                    ports_[port].settle_timer = 0;
                    if (!stale(port, gen) && running()) {
                        configure_ca(port, gen);
                    }
                });
            });
        });
    });
}

void SubnetManager::configure_ca(uint16_t port, uint64_t gen) {
    PortCtl &c = ports_[port];
    const auto &d = c.ca.port_info;
    const PortState cur = pi_state(d);
    const uint16_t want_lid = lid_for_port(port);
    // A client that may have lost its registrations is told to register
    // again (ca_reregister), in a Set of its own once the port is Active and
    // known: a client that registers at once must find its port in the
    // SA's tables.
    const bool rereg = c.rereg_pending || (cur == PortState::Active && !c.known_active);
    // The switch port follows the CA port to Active; then the port is done.
    auto done = [this, port, gen, rereg](bool ok) {
        if (stale(port, gen)) {
            return;
        }
        if (!ok) {
            fail(port, gen, "switch port did not become Active");
            return;
        }
        ca_done(port);
        ca_reregister(port, gen, rereg);
    };
    auto activate = [this, port, gen, done] {
        set_state(port, CaState::Activate);
        ca_set_port_info(port, gen, PortState::Active, false, [this, port, done](const std::array<uint8_t, 64> &) {
            set_switch_port(port, PortState::Active, done);
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
                               (d[pi::kMkeyProtLmc] & 0x07) == cfg_.lmc &&
                               (d[pi::kNeighborMtuMasterSmSl] >> 4) == desired_mtu(d);
        if (fields_ok) {
            set_switch_port(port, PortState::Active, done);
            return;
        }
        set_state(port, CaState::Refresh);
        ca_set_port_info(port, gen, PortState::Nop, false, [this, port, done](const std::array<uint8_t, 64> &) {
            set_switch_port(port, PortState::Active, done);
        });
        return;
    }
    default:
        fail(port, gen, fmt::format("CA port is {}", port_state_name(cur)));
        return;
    }
}

void SubnetManager::ca_set_port_info(uint16_t port, uint64_t gen, PortState state, bool rereg,
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
    d[pi::kMkeyProtLmc] = cfg_.lmc;  // M_KeyProtectBits 0
    d[pi::kLinkSpeedActiveEnabled] &= 0xf0;
    d[pi::kNeighborMtuMasterSmSl] = static_cast<uint8_t>(desired_mtu(c.ca.port_info) << 4);  // MasterSMSL 0
    d[pi::kOperVlFilters] = static_cast<uint8_t>(1 << 4 | (d[pi::kOperVlFilters] & 0x0f));  // VL0
    d[pi::kClientReregSubnetTimeout] = static_cast<uint8_t>((rereg ? 0x80 : 0) | cfg_.subnet_timeout);
    smp(ca_path(port), mad::kSet, mad::kAttrPortInfo, c.ca.port_num, &d,
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
                log_.info("sm", "{}: ClientReregister sent to {:#018x}", aname(port), ports_[port].ca.port_guid);
            }
            then(got);
        });
}

// IBA 14.4.11: a client that may have lost its registrations (the SM
// restarted, or found the port configured by someone else) is told to
// register again, once the port is Active and known to the SA. If this
// Set goes unanswered, the next sweep sends it again.
void SubnetManager::ca_reregister(uint16_t port, uint64_t gen, bool rereg) {
    if (!rereg) {
        return;
    }
    PortCtl &c = ports_[port];
    c.rereg_pending = true;
    c.busy = true;
    ca_set_port_info(port, gen, PortState::Nop, true, [this, port](const std::array<uint8_t, 64> &) {
        ports_[port].rereg_pending = false;
        ports_[port].busy = false;
    });
}

void SubnetManager::ca_done(uint16_t port) {
    PortCtl &c = ports_[port];
    c.busy = false;
    c.failures = 0;
    c.last_error.clear();
    c.rereg_pending = false;
    const bool was = c.known_active;
    const uint16_t old_lid = c.ca.lid;
    c.known_active = true;
    c.routed = true;
    c.ca.lid = lid_for_port(port);
    if (was && old_lid != c.ca.lid) {
        log_.info("sm", "{}: CA port {:#018x} has LID {} now", aname(port), c.ca.port_guid, c.ca.lid);
        program_lft_block(c.ca.lid / ForwardingTables::kLftBlock);
    }
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
        log_.info("sm", "{}: CA {:#018x} '{}' port {} GUID {:#018x}: LID {} Active", aname(port), c.ca.node_guid,
                  desc, c.ca.port_num, c.ca.port_guid, c.ca.lid);
        program_lft_block(c.ca.lid / ForwardingTables::kLftBlock);
        apply_pkeys(port);
        if (port_active_) {
            port_active_(c.ca);
        }
    }
}

void SubnetManager::verify_port(uint16_t port) {
    PortCtl &c = ports_[port];
    c.busy = true;
    const uint64_t gen = c.gen;
    set_state(port, CaState::Verify);
    smp(ca_path(port), mad::kGet, mad::kAttrPortInfo, c.ca.port_num, nullptr, [this, port, gen](const Mad *r) {
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
        log_.info("sm", "{}: CA port is {} with LID {}: configuring it again", aname(port), port_state_name(st),
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

void SubnetManager::fail(uint16_t port, uint64_t gen, const std::string &why) {
    if (stale(port, gen)) {
        return;
    }
    PortCtl &c = ports_[port];
    c.busy = false;
    ++c.failures;
    if (c.last_error != why) {
        log_.info("sm", "{}: {}; trying again every sweep", aname(port), why);
        c.last_error = why;
    }
    set_state(port, CaState::Unresponsive);
    // A port whose link is up but whose CA does not answer yet is most
    // likely a guest loading its driver: for its first kFastRetries
    // attempts (a minute) the next one starts at once rather than at the
    // next sweep, so the port is configured within an SMP timeout of the
    // driver's SMA coming up.
    if (c.failures <= kFastRetries && why.starts_with("no answer to NodeInfo")) {
        loop_.post([this, port, gen] {
            if (running() && port < ports_.size() && !stale(port, gen) && !ports_[port].busy &&
                ports_[port].state == CaState::Unresponsive) {
                start_port(port);
            }
        });
    }
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
    for (size_t s = 1; s < switches_.size(); ++s) {
        const SwitchNode &n = switches_[s];
        if (!n.configured) {
            continue;
        }
        Endport e;
        e.is_switch = true;
        e.attach = n.base;
        e.lid = lid_for_port(n.base);
        e.node_guid = n.guid;
        e.port_guid = n.guid;
        e.mtu = sw_.config().mtu;
        e.rate = rate_code(sw_.config().rate);
        e.node_info = n.node_info;
        e.node_desc = n.node_desc;
        e.port_info = n.port_info;
        v.push_back(e);
    }
    for (size_t a = 1; a < ports_.size(); ++a) {
        if (ports_[a].known_active) {
            v.push_back(ports_[a].ca);
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
    for (size_t i = 1; i < switches_.size(); ++i) {
        fmt::format_to(std::back_inserter(s), "sm switch {:#018x}: lid={} ports={} hops={}{}\n", switches_[i].guid,
                       lid_for_port(switches_[i].base), switches_[i].num_ports, switches_[i].path.size() - 1,
                       switches_[i].configured ? "" : " (not configured yet)");
    }
    for (size_t k = 1; k < ports_.size(); ++k) {
        const PortCtl &c = ports_[k];
        if (c.sw && c.port == 0) {
            continue;  // a switch's own port 0
        }
        if (c.sw) {
            fmt::format_to(std::back_inserter(s), "sm port {:#018x}:{}: {}", switches_[c.sw].guid, c.port,
                           ca_state_name(c.state));
        } else {
            fmt::format_to(std::back_inserter(s), "sm port {}: {}", k, ca_state_name(c.state));
        }
        if (c.known_active) {
            fmt::format_to(std::back_inserter(s), " lid={} guid={:#018x}", c.ca.lid, c.ca.port_guid);
            for (size_t i = 0; i < c.pkeys.size(); ++i) {
                fmt::format_to(std::back_inserter(s), "{}{:#06x}", i ? "," : " pkeys=", c.pkeys[i]);
            }
        }
        if (!c.last_error.empty() && !c.known_active) {
            fmt::format_to(std::back_inserter(s), " failures={} last_error=\"{}\"", c.failures, c.last_error);
        }
        s += '\n';
    }
    return s;
}

}  // namespace fabric
