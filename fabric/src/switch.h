// The InfiniBand switch (IBA Vol. 1 ch. 18): N external ports plus the
// enhanced management port 0, which holds the switch LID, the SMA and, when
// enabled, the SM and SA.  Packets are verified (ICRC/VCRC, lengths),
// gated by link state (VL15 whenever the physical link is up, everything
// else only between Active ports), and forwarded by the LFT (unicast), the
// MFT (multicast, replicated to every member port but the ingress port) or
// the directed-route rules (SMPs).  A forwarded packet keeps its bytes and
// its link-frame id; directed-route SMPs, whose hop pointer and return path
// change, get new ICRC/VCRC.  Every ingress packet is counted and, with a
// capture attached, recorded with its verdict.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "capture.h"
#include "event_loop.h"
#include "fault.h"
#include "fdb.h"
#include "frame.h"
#include "ib_enums.h"
#include "log.h"
#include "mad_util.h"

namespace fabric {

class SwitchSma;

struct SwitchConfig {
    uint8_t num_ports = 8;
    uint64_t node_guid = 0x0002c90300ffff00ull;
    uint8_t mtu = kMtu4096;  // link MTU (MTUCap of the external ports)
    LinkRate rate{};         // LinkWidthActive / LinkSpeedActive
    std::string description = "hcasim switch";
    std::string name;        // in logs and captures when a fabric has several switches
    uint64_t seed = 1;       // fault injection
};

// The device side of a port: an emulated HCA's link socket, or a test CA.
class PortSink {
  public:
    virtual ~PortSink() = default;
    // A packet frame for the device; false if it could not take it (lost).
    virtual bool deliver(const Frame &f) = 0;
    virtual void link_state(bool up) = 0;  // physical link up/down
    // The device is behind: whoever sent the last frame here should wait
    // (the link's flow control; LinkServer pauses the sender's socket).
    virtual bool congested() const { return false; }
    // The egress this port's last frame waited for has drained: take
    // frames from the device again (see IbSwitch::hold).
    virtual void resume() {}
    // A cable to another switch (not a device a guest drives).
    virtual bool switch_link() const { return false; }
};

// Why a packet was dropped; the names appear in counters, captures, logs.
enum class Drop : uint8_t {
    None,
    LinkDown,   // ingress link not up (port disabled or unplugged)
    FaultDrop,  // fault injection on the ingress link
    BadFrame,   // link frame too short or not a packet
    Truncated,
    BadLength,
    BadLnh,
    BadVersion,
    BadOpcode,
    BadIcrc,
    BadVcrc,
    TooLong,           // payload above the link MTU
    BadVl,             // a data VL the port does not operate (only VL0)
    BadSmp,            // VL15 packet that is no SMP, or QP0 traffic off VL15
    DrDiscard,         // directed-route rules (IBA 14.2.2)
    NoSm,              // returning SMP for an SM that does not run here
    IngressNotActive,  // non-VL15 packet on a port that is not Active
    EgressNotActive,
    EgressDown,      // physical link of the egress port down
    PermissiveDlid,  // only directed-route SMPs use LID 0xffff
    ReservedDlid,    // DLID 0
    NoRoute,         // LFT entry unset / above LinearFDBTop, MFT empty
    Loop,            // unicast egress = ingress port
    NoQp,            // management port: no such QP
    BadQkey,
    BadPkey,
    QueueFull,    // an egress delay line at its cap (IbSwitch::kMaxDelayed), or
                  // the device's send queue (a peer past the HOQ lifetime)
    Partitioned,  // ingress and egress port cut off each other (fault injection)
    Count,
};
const char *drop_name(Drop d);

// Per-port counters (names follow PortCounters, IBA 16.1.3.5).
struct PortCounters {
    uint64_t rcv_packets = 0;
    uint64_t rcv_bytes = 0;
    uint64_t xmit_packets = 0;
    uint64_t xmit_bytes = 0;
    uint64_t rcv_errors = 0;               // malformed or CRC errors
    uint64_t rcv_switch_relay_errors = 0;  // no route, loop, gating
    uint64_t xmit_discards = 0;            // egress down/not active/lost
    uint64_t xmit_wait = 0;                // frames that left the device's queue congested
    uint64_t vl15_dropped = 0;
    uint64_t fault_dropped = 0;
    uint64_t fault_corrupted = 0;
    uint64_t fault_delayed = 0;
    uint64_t fault_duplicated = 0;
    uint64_t fault_reordered = 0;
    uint64_t partition_dropped = 0;
    uint64_t link_downed = 0;
};

// What the SMA keeps per port for PortInfo (IBA 14.2.5.6).  Port 0 holds
// the switch's LID and SM fields; external ports their link parameters.
struct SwitchPortInfo {
    uint64_t mkey = 0;
    uint64_t gid_prefix = 0xfe80000000000000ull;
    uint16_t lid = 0;
    uint16_t master_sm_lid = 0;
    uint16_t mkey_lease_period = 0;
    uint8_t master_sm_sl = 0;
    uint8_t lmc = 0;
    uint8_t mkey_protect = 0;
    uint8_t link_width_enabled = 0;
    uint8_t link_speed_enabled = 0;
    uint8_t link_down_default = 2;  // Polling
    uint8_t neighbor_mtu = kMtu256;
    uint8_t oper_vls = 1;           // VL0
    uint8_t vl_high_limit = 0;
    uint8_t hoq_life = 19;
    uint8_t vl_stall_count = 7;
    uint8_t filters = 0;            // partition enforcement/filter raw bits (byte 43, 3:0)
    uint8_t subnet_timeout = 0;
    uint8_t resp_time = 18;
    uint8_t error_thresholds = 0;   // LocalPhyErrors 7:4, OverrunErrors 3:0
    uint8_t client_rereg = 0;
    uint16_t mkey_violations = 0;
    uint16_t pkey_violations = 0;
    uint16_t qkey_violations = 0;
};

struct SwitchPort {
    uint8_t num = 0;
    PortSink *sink = nullptr;
    bool admin_up = true;   // `link N down`, PortPhysicalState = Disabled
    PortState state = PortState::Down;
    SwitchPortInfo pi;
    PortCounters ctr;
    // From the device's hello.
    bool hello = false;
    uint64_t peer_node_guid = 0;
    uint64_t peer_port_guid = 0;
    uint8_t peer_port_num = 0;
    // Egress delay line (fault injection): frames and when they leave.
    std::deque<std::pair<uint64_t, Frame>> delayed;
    EventLoop::TimerId delay_timer = 0;
    EventLoop::TimerId flap_timer = 0;  // `link N flap MS`: back up at its end
    // A reordered frame: it leaves after the next one (or alone, later).
    Frame held;
    EventLoop::TimerId held_timer = 0;
    uint64_t generation = 0;  // bumped on every attach/detach
    // Ingress ports held (IbSwitch::hold) until this port's sink drains.
    ForwardingTables::PortSet waiters;

    bool link_up() const { return sink != nullptr && admin_up; }
    PhysState phys() const {
        return !admin_up ? PhysState::Disabled : sink ? PhysState::LinkUp : PhysState::Polling;
    }
};

class IbSwitch {
  public:
    // Packets one egress delay line holds; more are dropped (and logged).
    static constexpr size_t kMaxDelayed = 16384;
    // How long a reordered frame waits for one to overtake it.
    static constexpr uint64_t kReorderWaitUs = 1000;
    // Received MADs for the management port's SM (returning SMPs, traps,
    // LID-routed responses) and QP1 (GSI: the SA and other classes).
    using MadHandler = std::function<void(const MadAddress &, const Mad &)>;
    using LinkHandler = std::function<void(uint8_t port, bool up)>;

    IbSwitch(EventLoop &loop, Log &log, const SwitchConfig &cfg);
    ~IbSwitch();
    IbSwitch(const IbSwitch &) = delete;
    IbSwitch &operator=(const IbSwitch &) = delete;

    const SwitchConfig &config() const { return cfg_; }
    uint8_t num_ports() const { return cfg_.num_ports; }
    uint64_t node_guid() const { return cfg_.node_guid; }
    uint16_t lid() const { return ports_[0].pi.lid; }
    bool is_local_lid(uint16_t lid) const;
    uint64_t now_us() const { return loop_.now_us(); }
    Log &log() { return log_; }

    // --- the device side of external ports (1..N) ---
    // A device connected: the physical link comes up unless the port is
    // administratively down.  false if the port is out of range or taken.
    bool attach(uint8_t port, PortSink *sink);
    void detach(uint8_t port);
    void hello(uint8_t port, uint64_t node_guid, uint64_t port_guid, uint8_t port_num);
    // A frame from the device (link header + packet).
    void receive(uint8_t port, const Frame &frame);
    // The egress ports the last receive() left congested (PortSink::congested):
    // the ingress should stop reading until they drain.
    const ForwardingTables::PortSet &congested() const { return congested_; }
    // Back-pressure between ports: the ingress stopped reading because its
    // last frame went to the congested ports `behind`; once one of them
    // drains (its sink calls drained()), the ingress's sink is resumed.
    void hold(uint8_t ingress, const ForwardingTables::PortSet &behind);
    void drained(uint8_t egress);
    // "port 3", or "leaf1 port 3" in a fabric of several switches.
    std::string pname(uint8_t port) const;
    // `link N up|down`: the device is told through link-state frames.
    bool set_admin(uint8_t port, bool up);
    // Set(PortInfo) PortState=Down on an external port: the link retrains.
    void retrain(uint8_t port);
    // Administratively down now, up again ms later (a link flap).
    void flap(uint8_t port, uint32_t ms);

    // --- the management port (port 0) ---
    // Sends a packet made by the SM, SA or SMA into the switch.
    void send_local(std::vector<uint8_t> packet);
    void set_sm_handler(MadHandler h) { sm_handler_ = std::move(h); }
    void set_gsi_handler(MadHandler h) { gsi_handler_ = std::move(h); }
    void set_link_handler(LinkHandler h) { link_handler_ = std::move(h); }
    bool has_sm() const { return static_cast<bool>(sm_handler_); }

    // --- state for the SMA, SM, control socket ---
    SwitchPort &port(uint8_t n) { return ports_.at(n); }
    const SwitchPort &port(uint8_t n) const { return ports_.at(n); }
    ForwardingTables &fdb() { return fdb_; }
    SwitchSma &sma() { return *sma_; }
    const SwitchSma &sma() const { return *sma_; }
    FaultInjector &faults() { return faults_; }
    const FaultInjector &faults() const { return faults_; }
    void set_capture(Capture *c) { capture_ = c; }
    // Changes a port's logical state (the SMA's Set(PortInfo) and link
    // events go through here).  Sets SwitchInfo:PortStateChange (IBA
    // 14.2.5.4) on Down<->Init transitions of external ports.
    void set_port_state(uint8_t port, PortState s);
    bool port_state_change() const { return port_state_change_; }
    void clear_port_state_change() { port_state_change_ = false; }

    uint64_t drops(Drop d) const { return drops_[static_cast<size_t>(d)]; }
    uint64_t total_drops() const;
    uint64_t forwarded() const { return forwarded_; }
    uint64_t local_delivered() const { return local_delivered_; }

  private:
    struct Verdict;
    struct Ingress;

    void process(Ingress &in, Verdict &v);
    void process_smp(Ingress &in, Verdict &v);
    void process_dr_smp(Ingress &in, Mad &m, Verdict &v);
    void process_data(Ingress &in, Verdict &v);
    void deliver_gsi(Ingress &in, Verdict &v);
    void pma(const MadAddress &from, const Mad &req);  // switch_pma.cpp
    void deliver_smp_local(Ingress &in, const Mad &m, bool to_sm, Verdict &v);
    // Sends a copy of the ingress packet with a new MAD (and LRH LIDs).
    Frame rebuilt_smp(const Ingress &in, const Mad &m, uint16_t dlid, uint16_t slid);
    void transmit(uint8_t port, const Frame &f, uint64_t bytes, Verdict &v);
    bool transmit_now(SwitchPort &p, const Frame &f);
    void emit(SwitchPort &p, const Frame &f);
    void release_held(SwitchPort &p);
    void flush_egress(SwitchPort &p);
    void run_delay_line(uint8_t port);
    void drop(Ingress &in, Verdict &v, Drop d);
    void record(const Ingress &in, const Verdict &v);
    void link_changed(uint8_t port, bool up);

    EventLoop &loop_;
    Log &log_;
    SwitchConfig cfg_;
    std::vector<SwitchPort> ports_;
    ForwardingTables fdb_;
    FaultInjector faults_;
    std::unique_ptr<SwitchSma> sma_;
    Capture *capture_ = nullptr;
    std::vector<uint8_t> capture_buf_;  // a packet sent without CRCs, with them, for the capture
    MadHandler sm_handler_;
    MadHandler gsi_handler_;
    LinkHandler link_handler_;
    bool port_state_change_ = false;
    ForwardingTables::PortSet congested_;
    std::array<uint64_t, static_cast<size_t>(Drop::Count)> drops_{};
    uint64_t forwarded_ = 0;
    uint64_t local_delivered_ = 0;
    uint64_t local_ids_ = 0;
    uint32_t local_psn_ = 0;
};

}  // namespace fabric
