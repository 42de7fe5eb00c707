// The built-in subnet manager (IBA Vol. 1 ch. 14.4) at the first switch's
// management port, LID 1.  It configures its own switch through hop-0 SMPs
// to its SMA, and every other switch and every channel adapter only through
// directed-route SMPs on the wire: for the CA behind switch port k, path
// [0, k]; behind port k of a switch reached by path P, P + [k]:
//   Get NodeInfo, Get NodeDescription, Get PortInfo,
//   Set PortInfo (LID k+1, MasterSMLID 1, ..., PortState Armed),
//   Set PortInfo (PortState Active),
// with the switch port k taken Armed/Active alongside and the LFT entry
// programmed in between.  Each SMP waits 500 ms and is sent again up to
// three times (same TID); a port whose CA does not answer (guest driver
// not loaded yet) is tried again at the next sweep.  Sweeps run on link
// changes, every 5 s, and on `sm restart`, which forgets everything and
// sets ClientReregister on the ports it finds configured.
//
// Other switches (a topology, docs/FABRIC.md): a port whose neighbour
// answers NodeInfo as a switch is an inter-switch link; a switch not seen
// before is configured (LID, M_Key, SM LID, LinearFDBTop) and its ports
// are scanned the same way, every sweep.  Each switch port is an
// "attachment" with an index: the first switch's port k is k, another
// switch's port k its base + k (its port 0, the switch itself, is its
// base).  Attachment a has LID (a + 1) << LMC (with LMC 0 on one switch:
// port k + 1, as before).  Routes are min-hop over the Active inter-switch
// links; where several neighbours are equally close, the LID picks one
// (LID mod their number), so a CA's 2^LMC LIDs take different paths.
// Multicast goes along a spanning tree of the switches.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "event_loop.h"
#include "fdb.h"
#include "ib_enums.h"
#include "log.h"
#include "mad_util.h"

namespace fabric {

class IbSwitch;

// An end port of the subnet as the SM knows it: the switch's management
// port or a CA port the SM configured.
struct Endport {
    bool is_switch = false;
    uint8_t switch_port = 0;  // where a CA is attached (on its switch); 0 for a switch
    uint16_t attach = 0;      // the SM's index of that switch port (see above)
    uint16_t lid = 0;
    uint64_t node_guid = 0;
    uint64_t port_guid = 0;
    uint8_t port_num = 0;     // the node's own port number
    uint8_t mtu = kMtu256;    // active MTU code (NeighborMTU)
    uint8_t rate = 2;         // static rate code of the link
    std::array<uint8_t, 40> node_info{};
    std::array<uint8_t, 64> node_desc{};
    std::array<uint8_t, 64> port_info{};

    iba::Gid gid(uint64_t prefix = 0xfe80000000000000ull) const;
};

// The per-CA-port state machine of the SM, with names for logs and status.
enum class CaState : uint8_t {
    NoLink,        // the switch port's physical link is down
    Discover,      // Get NodeInfo
    Describe,      // Get NodeDescription
    ReadPort,      // Get PortInfo
    Arm,           // Set PortInfo ... PortState Armed
    Activate,      // Set PortInfo PortState Active
    Refresh,       // Set PortInfo on an Active port (fields, ClientReregister)
    Active,        // configured
    Verify,        // periodic Get PortInfo of an Active port
    Unresponsive,  // no answer (driver not loaded?); retried every sweep
    Unsupported,   // neither a channel adapter nor a switch (a router)
    InterSwitch,   // a link to another switch port
};
const char *ca_state_name(CaState s);

class SubnetManager {
  public:
    struct Config {
        uint16_t sm_lid = 1;
        uint32_t smp_timeout_us = 500000;
        unsigned retries = 3;
        uint32_t sweep_interval_us = 5000000;
        // How long a newly discovered CA port (in Init) waits before the SM
        // configures it. A real SM's heavy sweep discovers first and
        // configures later; here it keeps the SM's PortInfo Sets out of
        // mlx5_ib's registration window, which TCG stretches to ~100 ms
        // and in which the driver drops port events (docs/FAULTS.md).
        uint32_t new_port_settle_us = 0;
        uint8_t subnet_timeout = 18;
        uint8_t life_time = 18;     // SwitchInfo:LifeTimeValue
        uint8_t priority = 15;      // SMInfo
        // The switch's M_Key (0: a random one) and M_KeyProtectBits: 1 lets
        // anyone Get (ibnetdiscover in a guest) but hides the key, so only
        // this SM can Set.  Lease period 0: the protection never lapses.
        uint64_t switch_mkey = 0;
        uint8_t mkey_protect = 1;
        // TIDs come from a generator seeded with this (0: std::random_device),
        // so a guest cannot predict them and answer in the CA's place.
        uint64_t tid_seed = 0;
        // LID Mask Control of the CA ports (0..4): 2^lmc LIDs each, routed
        // on different paths where there are several.  With LMC n the SM's
        // own LID is 2^n (base LIDs keep their low n bits zero).
        uint8_t lmc = 0;
    };
    using SmpCallback = std::function<void(const Mad *resp)>;  // nullptr: timed out

    SubnetManager(IbSwitch &sw, EventLoop &loop, Log &log, const Config &cfg);
    ~SubnetManager();
    SubnetManager(const SubnetManager &) = delete;
    SubnetManager &operator=(const SubnetManager &) = delete;

    // Registers with the switch and sweeps.
    void start();
    // `sm restart`: forget everything, sweep, set ClientReregister.
    void restart();
    // `sm stop`: the SM is gone (it sweeps no more, answers no trap, and
    // its SA answers nothing) until restart().
    void stop();
    bool running() const { return started_ && !stopped_; }
    // `sm rereg PORT` (a port of the first switch): configure the CA port
    // again with ClientReregister.
    void reregister(uint8_t port);
    // `sm lid PORT`: give the Active CA port its other LID (a LID change:
    // the old LID is no longer routed, the CA gets the new one).
    bool change_lid(uint8_t port);
    // `sm pkeys PORT P,...`: the CA port's P_Key table block 0 (the rest of
    // its 32 entries 0), set now and again whenever the port is configured
    // anew (a reset CA starts from its default table). False if no CA
    // port is Active there or the table is too long.
    bool set_pkeys(uint8_t port, std::vector<uint16_t> pkeys);
    // A sweep soon (coalesces requests).
    void request_sweep();

    uint16_t lid() const { return cfg_.sm_lid; }
    // The LID of attachment a (a CA port, or a switch's port 0): a + 1, or
    // a + 1 + the number of attachments once `sm lid PORT` has moved it
    // (and back on the next move); shifted left by the LMC.
    uint16_t lid_for_port(uint16_t a) const {
        const bool moved = a < ports_.size() && ports_[a].moved;
        return static_cast<uint16_t>((a + 1 + (moved ? attachments() : 0)) << cfg_.lmc);
    }
    // The highest LID a CA port can have (LinearFDBTop).
    uint16_t max_lid() const {
        return static_cast<uint16_t>(((2 * attachments() + 1) << cfg_.lmc) | ((1u << cfg_.lmc) - 1));
    }
    CaState ca_state(uint16_t a) const { return ports_.at(a).state; }
    // The Active CA port at a switch's port, if the SM configured one.
    std::optional<Endport> ca_at(uint64_t switch_guid, uint8_t port) const;
    size_t switches_known() const { return switches_.size(); }
    // At most this many attachments (switch ports, switches' port 0).
    static constexpr size_t kMaxAttachments = 255;
    // Attempts (of retries + 1 SMPs each) at a silent CA port that follow
    // each other at once before the SM waits for its sweeps.
    static constexpr unsigned kFastRetries = 30;
    std::string status() const;
    uint64_t sweeps() const { return sweeps_; }
    uint64_t smps_sent() const { return smps_sent_; }
    uint64_t smp_timeouts() const { return smp_timeouts_; }
    uint64_t smps_rejected() const { return smps_rejected_; }
    uint64_t switch_mkey() const { return cfg_.switch_mkey; }

    // The SA's view: the switch port 0 and every Active CA port.
    std::vector<Endport> endports() const;
    std::optional<Endport> endport_by_lid(uint16_t lid) const;
    std::optional<Endport> endport_by_guid(uint64_t port_guid) const;
    // Partitions (IBA 10.9). The P_Key table the SM gave an endport: a
    // CA's as set (the default partition's full member when none was);
    // the switch's management port, where the SA lives, is a full member
    // of every partition in use, as an SM's own port is.
    std::vector<uint16_t> pkeys_of(const Endport &e) const;
    // The entry of e's table in pkey's partition (the same 15-bit key), if any.
    std::optional<uint16_t> pkey_entry(const Endport &e, uint16_t pkey) const;
    // The P_Key a uses to reach b in pkey's partition: both are members
    // and not both limited ones (IBA 10.9.3); nullopt if they cannot.
    std::optional<uint16_t> shared_pkey(const Endport &a, const Endport &b, uint16_t pkey) const;

    // Multicast: the SA tells which attachments (CA ports) receive an MLID.
    void set_mcast_ports(uint16_t mlid, const ForwardingTables::PortSet &ports);

    // Hooks for the SA.
    void on_port_removed(std::function<void(uint64_t port_guid)> fn) { port_removed_ = std::move(fn); }
    void on_restart(std::function<void()> fn) { restarted_ = std::move(fn); }
    void on_port_active(std::function<void(const Endport &)> fn) { port_active_ = std::move(fn); }

  private:
    // A switch the SM found: the first is its own.
    struct SwitchNode {
        uint64_t guid = 0;
        uint8_t num_ports = 0;
        uint16_t base = 0;             // attachment index of its port 0
        std::vector<uint8_t> path;     // directed route from the SM ({0}: its own switch)
        std::array<uint8_t, 40> node_info{};
        std::array<uint8_t, 64> node_desc{};
        std::array<uint8_t, 64> port_info{};  // its port 0
        bool configured = false;       // LID and SwitchInfo set (once per SM epoch)
        bool busy = false;             // configure or scan in progress
    };
    // Min-hop distances between switches over Active inter-switch links.
    using Hops = std::vector<std::vector<unsigned>>;

    uint16_t attachments() const { return static_cast<uint16_t>(ports_.size() - 1); }
    uint16_t port_for_lid(uint16_t lid) const;  // the CA attachment; 0: no CA port has it
    std::vector<uint8_t> ca_path(uint16_t a) const;
    void apply_pkeys(uint16_t a);
    void apply_switch_pkeys();
    struct Pending {
        Mad req;
        uint8_t port = 0;  // where the response must arrive: path[1], or 0 for the switch
        unsigned tries = 0;
        EventLoop::TimerId timer = 0;
        SmpCallback cb;
    };
    struct PortCtl {
        CaState state = CaState::NoLink;
        uint64_t gen = 0;  // bumped on link changes and restarts
        bool busy = false;
        bool known_active = false;
        bool routed = false;  // the LFT sends its LID to this port
        bool rereg_pending = false;
        bool moved = false;  // has its second LID (lid_for_port)
        std::vector<uint16_t> pkeys;  // P_Key table block 0 to set (empty: the CA's own)
        uint16_t sw = 0;      // the switch (index into switches_) and its port
        uint8_t port = 0;
        bool isl = false;     // an inter-switch link to attachment `peer`
        bool isl_active = false;
        uint16_t peer = 0;
        EventLoop::TimerId settle_timer = 0;  // a new port waiting (Config::new_port_settle_us)
        unsigned failures = 0;
        std::string last_error;
        Endport ca;
    };

    // SMP transport.
    void smp(std::span<const uint8_t> path, uint8_t method, uint16_t attr, uint32_t mod,
             const std::array<uint8_t, 64> *data, SmpCallback cb, bool switch_mkey = false);
    // An SMP to switch s's SMA (with the switches' M_Key).
    void switch_smp(size_t s, uint8_t method, uint16_t attr, uint32_t mod, const std::array<uint8_t, 64> *data,
                    SmpCallback cb);
    void send_pending(uint64_t tid);
    uint64_t new_tid();
    bool response_matches(const Pending &p, const MadAddress &from, const Mad &m);
    void on_mad(const MadAddress &from, const Mad &m);
    void on_timeout(uint64_t tid);
    void on_link(uint8_t port, bool up);
    uint16_t sm_info(std::span<uint8_t, 64> data, bool set);

    // The switches (sm_switch.cpp).
    void arm_sweep_timer();
    void sweep();
    void sweep_ports(uint64_t ep);
    void configure_switch(size_t s, std::function<void()> then);
    void switch_info(size_t s, uint64_t ep, std::function<void()> then);
    void set_switch_port(uint16_t a, PortState state, std::function<void(bool ok)> then);
    void program_lft_block(uint32_t block);
    void program_lft();
    void program_mft(uint16_t mlid);
    // Other switches (sm_fabric.cpp).
    // A node answered NodeInfo as a switch behind attachment a: believed only
    // if a's own switch says a is cabled to a switch (kAttrHcasimSwitchLinks),
    // so a guest posing as a switch never gets the switches' M_Key.
    void verify_switch(uint16_t a, uint64_t gen, const std::array<uint8_t, 64> &node_info);
    void found_switch(uint16_t a, const uint8_t *node_info);
    void scan_switch(size_t s, uint64_t ep);
    void scan_port(uint16_t a, const std::array<uint8_t, 64> &pi);
    void isl_up(uint16_t a);
    void isl_down(uint16_t a);
    void update_paths();
    // f(port, peer attachment) for each inter-switch link of switch u whose
    // both ends the SM knows (and, if active, both are Active).
    template <typename F>
    void each_link(size_t u, bool active, F &&f) const {
        for (uint8_t k = 1; k <= switches_[u].num_ports; ++k) {
            const auto a = static_cast<uint16_t>(switches_[u].base + k);
            const PortCtl &c = ports_[a];
            const PortCtl &p = ports_[c.peer];
            if (c.isl && p.isl && p.peer == a && (!active || (c.isl_active && p.isl_active))) {
                f(k, c.peer);
            }
        }
    }
    // f(u, port, peer attachment) for each link of a breadth-first spanning
    // tree of the switches from the SM's own (the link from u to a switch
    // first reached through it).
    template <typename F>
    void each_tree_link(bool active, F &&f) const {
        std::vector<bool> seen(switches_.size());
        std::vector<size_t> q{0};
        seen[0] = true;
        for (size_t i = 0; i < q.size(); ++i) {
            const size_t u = q[i];
            each_link(u, active, [&](uint8_t k, uint16_t peer) {
                if (!seen[ports_[peer].sw]) {
                    seen[ports_[peer].sw] = true;
                    q.push_back(ports_[peer].sw);
                    f(u, k, peer);
                }
            });
        }
    }
    Hops hops() const;
    uint8_t route(size_t s, uint16_t lid, const Hops &h) const;
    ForwardingTables::PortSet tree_ports(size_t s) const;

    // CA ports.
    void set_state(uint16_t a, CaState s);
    void start_port(uint16_t a);
    void verify_port(uint16_t a);
    void configure_ca(uint16_t a, uint64_t gen);
    void ca_set_port_info(uint16_t a, uint64_t gen, PortState state, bool rereg,
                          std::function<void(const std::array<uint8_t, 64> &pi)> then);
    void ca_done(uint16_t a);
    void ca_reregister(uint16_t a, uint64_t gen, bool rereg);
    void fail(uint16_t a, uint64_t gen, const std::string &why);
    void port_gone(uint16_t a);
    uint8_t desired_mtu(const std::array<uint8_t, 64> &ca_pi) const;
    bool stale(uint16_t a, uint64_t gen) const { return ports_[a].gen != gen; }
    std::string aname(uint16_t a) const;  // "port 3", or "switch 0x... port 3"

    IbSwitch &sw_;
    EventLoop &loop_;
    Log &log_;
    Config cfg_;
    std::vector<PortCtl> ports_;        // by attachment index
    std::vector<SwitchNode> switches_;  // [0]: the SM's own
    std::map<uint64_t, Pending> pending_;
    std::mt19937_64 tid_rng_;
    uint64_t epoch_ = 0;
    bool started_ = false;
    bool stopped_ = false;  // `sm stop`
    bool sweeping_ = false;
    bool sweep_again_ = false;
    bool sweep_posted_ = false;
    EventLoop::TimerId sweep_timer_ = 0;
    uint64_t sweeps_ = 0;
    uint64_t smps_sent_ = 0;
    uint64_t smp_timeouts_ = 0;
    uint64_t smps_rejected_ = 0;
    uint32_t act_count_ = 0;
    std::map<uint16_t, ForwardingTables::PortSet> mcast_;
    std::function<void(uint64_t)> port_removed_;
    std::function<void()> restarted_;
    std::function<void(const Endport &)> port_active_;
};

}  // namespace fabric
