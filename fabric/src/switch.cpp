#include "switch.h"

#include <cstring>

#include "dr_route.h"
#include "smp_agent.h"
#include "switch_internal.h"

namespace fabric {

const char *drop_name(Drop d) {
    switch (d) {
    case Drop::None: return "none";
    case Drop::LinkDown: return "link-down";
    case Drop::FaultDrop: return "fault-drop";
    case Drop::BadFrame: return "bad-frame";
    case Drop::Truncated: return "truncated";
    case Drop::BadLength: return "bad-length";
    case Drop::BadLnh: return "bad-lnh";
    case Drop::BadVersion: return "bad-version";
    case Drop::BadOpcode: return "bad-opcode";
    case Drop::BadIcrc: return "bad-icrc";
    case Drop::BadVcrc: return "bad-vcrc";
    case Drop::TooLong: return "too-long";
    case Drop::BadVl: return "bad-vl";
    case Drop::BadSmp: return "bad-smp";
    case Drop::DrDiscard: return "dr-discard";
    case Drop::NoSm: return "no-sm";
    case Drop::IngressNotActive: return "ingress-not-active";
    case Drop::EgressNotActive: return "egress-not-active";
    case Drop::EgressDown: return "egress-down";
    case Drop::PermissiveDlid: return "permissive-dlid";
    case Drop::ReservedDlid: return "reserved-dlid";
    case Drop::NoRoute: return "no-route";
    case Drop::Loop: return "loop";
    case Drop::NoQp: return "no-qp";
    case Drop::BadQkey: return "bad-qkey";
    case Drop::BadPkey: return "bad-pkey";
    case Drop::QueueFull: return "queue-full";
    case Drop::Partitioned: return "partitioned";
    case Drop::Count:
        break;
    }
    return "?";
}

namespace {

Drop drop_for(iba::ParseError e) {
    switch (e) {
    case iba::ParseError::None: return Drop::None;
    case iba::ParseError::Truncated: return Drop::Truncated;
    case iba::ParseError::BadLength: return Drop::BadLength;
    case iba::ParseError::BadLnh: return Drop::BadLnh;
    case iba::ParseError::BadVersion: return Drop::BadVersion;
    case iba::ParseError::BadOpcode: return Drop::BadOpcode;
    case iba::ParseError::BadIcrc: return Drop::BadIcrc;
    case iba::ParseError::BadVcrc: return Drop::BadVcrc;
    }
    return Drop::BadFrame;
}

// Packets made by the fabric itself carry ids with the top bit set, so they
// never collide with the ids the devices give theirs.
constexpr uint64_t kLocalIdBase = 1ull << 63;
constexpr size_t kSmpOffset = sizeof(iba::Lrh) + sizeof(iba::Bth) + sizeof(iba::Deth);

}  // namespace

IbSwitch::IbSwitch(EventLoop &loop, Log &log, const SwitchConfig &cfg)
    : loop_(loop),
      log_(log),
      cfg_(cfg),
      ports_(size_t{cfg.num_ports} + 1),
      fdb_(cfg.num_ports),
      faults_(cfg.seed, cfg.num_ports) {
    for (size_t i = 0; i < ports_.size(); ++i) {
        ports_[i].num = static_cast<uint8_t>(i);
        ports_[i].pi.neighbor_mtu = cfg_.mtu;
    }
    // The management port is always there: it starts in Init, and the SM
    // (ours or one in a guest) takes it through Armed to Active.
    ports_[0].state = PortState::Init;
    sma_ = std::make_unique<SwitchSma>(*this);
}

IbSwitch::~IbSwitch() {
    for (auto &p : ports_) {
        flush_egress(p);
        loop_.cancel(p.flap_timer);
    }
}

bool IbSwitch::is_local_lid(uint16_t lid) const {
    const uint16_t base = ports_[0].pi.lid;
    if (base == 0 || lid >= 0xc000) {
        return false;
    }
    // LMC on port 0: 2^LMC LIDs from the base LID (IBA 7.11.1).
    const uint16_t mask = static_cast<uint16_t>(~((1u << ports_[0].pi.lmc) - 1));
    return (lid & mask) == (base & mask);
}

uint64_t IbSwitch::total_drops() const {
    uint64_t n = 0;
    for (size_t i = 1; i < drops_.size(); ++i) {
        n += drops_[i];
    }
    return n;
}

// --- links ---

bool IbSwitch::attach(uint8_t port, PortSink *sink) {
    if (port == 0 || port > cfg_.num_ports || ports_[port].sink || !sink) {
        return false;
    }
    SwitchPort &p = ports_[port];
    p.sink = sink;
    ++p.generation;
    p.hello = false;
    log_.info("link", "{}: device connected{}", pname(port), p.admin_up ? "" : " (port disabled)");
    sink->link_state(p.admin_up);
    if (p.admin_up) {
        link_changed(port, true);
    }
    return true;
}

void IbSwitch::detach(uint8_t port) {
    if (port == 0 || port > cfg_.num_ports || !ports_[port].sink) {
        return;
    }
    SwitchPort &p = ports_[port];
    const bool was_up = p.link_up();
    // Nobody waits for a device that is gone (its frames are lost with it).
    drained(port);
    p.sink = nullptr;
    ++p.generation;
    p.hello = false;
    flush_egress(p);
    log_.info("link", "{}: device disconnected", pname(port));
    if (was_up) {
        link_changed(port, false);
    }
}

void IbSwitch::hello(uint8_t port, uint64_t node_guid, uint64_t port_guid, uint8_t port_num) {
    if (port == 0 || port > cfg_.num_ports) {
        return;
    }
    SwitchPort &p = ports_[port];
    p.hello = true;
    p.peer_node_guid = node_guid;
    p.peer_port_guid = port_guid;
    p.peer_port_num = port_num;
    log_.info("link", "{}: hello node_guid={:#018x} port_guid={:#018x} port={}", pname(port), node_guid, port_guid,
              port_num);
}

bool IbSwitch::set_admin(uint8_t port, bool up) {
    if (port == 0 || port > cfg_.num_ports) {
        return false;
    }
    SwitchPort &p = ports_[port];
    loop_.cancel(p.flap_timer);  // the last word wins over a flap in progress
    p.flap_timer = 0;
    if (p.admin_up == up) {
        return true;
    }
    const bool was_up = p.link_up();
    p.admin_up = up;
    log_.info("link", "{}: administratively {}", pname(port), up ? "enabled" : "disabled");
    if (p.sink) {
        p.sink->link_state(up);
    }
    if (was_up != p.link_up()) {
        link_changed(port, p.link_up());
    }
    return true;
}

void IbSwitch::flap(uint8_t port, uint32_t ms) {
    if (!set_admin(port, false)) {
        return;
    }
    ports_[port].flap_timer = loop_.after(uint64_t{ms} * 1000, [this, port] {
        ports_[port].flap_timer = 0;
        set_admin(port, true);
    });
}

void IbSwitch::retrain(uint8_t port) {
    SwitchPort &p = ports_.at(port);
    if (!p.link_up()) {
        return;
    }
    log_.info("link", "{}: LinkDown requested, link retrains", pname(port));
    p.sink->link_state(false);
    link_changed(port, false);
    // The link trains again shortly; the device sees a down/up pair.
    const uint64_t gen = p.generation;
    loop_.after(10000, [this, port, gen] {
        SwitchPort &q = ports_[port];
        if (q.generation == gen && q.link_up() && q.state == PortState::Down) {
            q.sink->link_state(true);
            link_changed(port, true);
        }
    });
}

std::string IbSwitch::pname(uint8_t port) const {
    return cfg_.name.empty() ? fmt::format("port {}", port) : fmt::format("{} port {}", cfg_.name, port);
}

void IbSwitch::hold(uint8_t ingress, const ForwardingTables::PortSet &behind) {
    for (uint8_t k = 1; k <= cfg_.num_ports; ++k) {
        if (behind.test(k) && k != ingress) {
            ports_[k].waiters.set(ingress);
        }
    }
}

void IbSwitch::drained(uint8_t egress) {
    if (egress > cfg_.num_ports) {
        return;
    }
    const ForwardingTables::PortSet w = ports_[egress].waiters;
    ports_[egress].waiters.reset();
    for (uint8_t k = 1; k <= cfg_.num_ports; ++k) {
        if (w.test(k) && ports_[k].sink) {
            ports_[k].sink->resume();
        }
    }
}

void IbSwitch::link_changed(uint8_t port, bool up) {
    SwitchPort &p = ports_[port];
    if (!up) {
        ++p.ctr.link_downed;
        flush_egress(p);
    }
    set_port_state(port, up ? PortState::Init : PortState::Down);
    if (link_handler_) {
        link_handler_(port, up);
    }
}

void IbSwitch::set_port_state(uint8_t port, PortState s) {
    SwitchPort &p = ports_.at(port);
    const PortState old = p.state;
    if (old == s) {
        return;
    }
    p.state = s;
    // IBA 14.2.5.4 PortStateChange: an external port went Down->Init or
    // any state -> Down.
    if (port != 0 && ((old == PortState::Down && s == PortState::Init) || s == PortState::Down)) {
        port_state_change_ = true;
    }
    log_.info("link", "{}: {} -> {}", pname(port), port_state_name(old), port_state_name(s));
}

// --- ingress ---

void IbSwitch::receive(uint8_t port, const Frame &frame) {
    congested_.reset();
    if (port == 0 || port > cfg_.num_ports || !frame) {
        return;
    }
    SwitchPort &p = ports_[port];
    LinkFrameView lf;
    if (!parse_link_frame(*frame, lf) || lf.type != iba::link::kPacket) {
        ++drops_[static_cast<size_t>(Drop::BadFrame)];
        ++p.ctr.rcv_errors;
        return;
    }
    Ingress in;
    in.port = port;
    in.id = lf.packet_id;
    in.flags = lf.flags;
    in.frame = frame;
    in.pkt = lf.body;
    ++p.ctr.rcv_packets;
    p.ctr.rcv_bytes += lf.body.size();
    Verdict v;
    if (!p.link_up()) {
        drop(in, v, Drop::LinkDown);
        record(in, v);
        return;
    }
    if (faults_.config(port).any()) {
        if (faults_.roll_drop(port, in.pkt)) {
            ++p.ctr.fault_dropped;
            drop(in, v, Drop::FaultDrop);
            record(in, v);
            return;
        }
        if (faults_.roll_corrupt(port)) {
            // The packet arrives with a flipped bit; the CRC check below
            // drops it and the capture shows what arrived.
            ++p.ctr.fault_corrupted;
            std::vector<uint8_t> copy(lf.body.begin(), lf.body.end());
            if (in.flags & iba::link::kNoCrcs) {
                iba::fill_crcs(copy);  // what the wire would have carried, then the flip
                in.flags &= static_cast<uint8_t>(~iba::link::kNoCrcs);
            }
            faults_.corrupt(copy);
            in.frame = make_packet_frame(in.id, copy, in.flags);
            in.pkt = std::span<const uint8_t>(*in.frame).subspan(iba::link::kHeader);
        }
    }
    process(in, v);
    record(in, v);
}

void IbSwitch::send_local(std::vector<uint8_t> packet) {
    Ingress in;
    in.port = 0;
    in.originated = true;
    in.id = kLocalIdBase | ++local_ids_;
    in.frame = make_packet_frame(in.id, packet);
    in.pkt = std::span<const uint8_t>(*in.frame).subspan(iba::link::kHeader);
    ++ports_[0].ctr.rcv_packets;
    ports_[0].ctr.rcv_bytes += packet.size();
    Verdict v;
    process(in, v);
    record(in, v);
}

void IbSwitch::drop(Ingress &in, Verdict &v, Drop d) {
    v.drop = d;
    ++drops_[static_cast<size_t>(d)];
    PortCounters &c = ports_[in.port].ctr;
    switch (d) {
    case Drop::Truncated: case Drop::BadLength: case Drop::BadLnh: case Drop::BadVersion:
    case Drop::BadOpcode: case Drop::BadIcrc: case Drop::BadVcrc: case Drop::TooLong:
    case Drop::BadVl: case Drop::BadSmp:
        ++c.rcv_errors;
        break;
    case Drop::DrDiscard: case Drop::NoSm:
        ++c.vl15_dropped;
        break;
    case Drop::EgressNotActive: case Drop::EgressDown: case Drop::NoRoute: case Drop::Loop:
    case Drop::IngressNotActive: case Drop::PermissiveDlid: case Drop::ReservedDlid:
        ++c.rcv_switch_relay_errors;
        break;
    default:
        break;
    }
}

void IbSwitch::record(const Ingress &in, const Verdict &v) {
    if (!capture_) {
        return;
    }
    if (in.flags & iba::link::kNoCrcs) {
        // The capture shows the packet as the wire would carry it.
        capture_buf_.assign(in.pkt.begin(), in.pkt.end());
        iba::fill_crcs(capture_buf_);
        capture_->record(in.id, in.port, capture_buf_, v.str());
        return;
    }
    capture_->record(in.id, in.port, in.pkt, v.str());
}

void IbSwitch::process(Ingress &in, Verdict &v) {
    const iba::ParseError err = iba::parse(in.pkt, in.v, !(in.flags & iba::link::kNoCrcs));
    if (err != iba::ParseError::None) {
        drop(in, v, drop_for(err));
        return;
    }
    const uint8_t vl = in.v.vl();
    if (vl == 15) {
        process_smp(in, v);
        return;
    }
    // OperationalVLs is VL0 only and every SL maps to VL0, so the VL of a
    // forwarded packet never changes (and neither does its VCRC).
    if (vl != 0) {
        drop(in, v, Drop::BadVl);
        return;
    }
    if (in.v.dqpn() == 0) {
        drop(in, v, Drop::BadSmp);  // QP0 is reached on VL15 only (IBA 3.5.8)
        return;
    }
    if (in.v.payload.size() > mtu_bytes(cfg_.mtu)) {
        drop(in, v, Drop::TooLong);
        return;
    }
    process_data(in, v);
}

void IbSwitch::process_data(Ingress &in, Verdict &v) {
    // IBA 7.2: only VL15 passes a port that is not Active.
    if (ports_[in.port].state != PortState::Active) {
        drop(in, v, Drop::IngressNotActive);
        return;
    }
    const uint16_t dlid = in.v.dlid();
    if (dlid == iba::kPermissiveLid) {
        drop(in, v, Drop::PermissiveDlid);
        return;
    }
    if (dlid >= iba::kMulticastLidBase) {
        // Replicate to the MFT's ports but the ingress port (IBA 18.2.4.3.2).
        ForwardingTables::PortSet ports = fdb_.mcast_ports(dlid);
        ports.reset(in.port);
        ports.reset(0);  // the management port joins no multicast group
        if (ports.none()) {
            drop(in, v, Drop::NoRoute);
            return;
        }
        bool sent = false;
        for (unsigned p = 1; p <= cfg_.num_ports; ++p) {
            if (!ports.test(p)) {
                continue;
            }
            SwitchPort &out = ports_[p];
            if (faults_.cut(in.port, static_cast<uint8_t>(p))) {
                ++out.ctr.partition_dropped;
                continue;
            }
            if (out.state != PortState::Active || !out.link_up()) {
                ++out.ctr.xmit_discards;
                continue;
            }
            transmit(static_cast<uint8_t>(p), in.frame, in.pkt.size(), v);
            sent = true;
        }
        if (!sent) {
            drop(in, v, Drop::EgressNotActive);
        }
        return;
    }
    if (dlid == 0) {
        drop(in, v, Drop::ReservedDlid);
        return;
    }
    const uint8_t out = is_local_lid(dlid) ? 0 : fdb_.lookup(dlid);
    if (out == ForwardingTables::kNoPort || out > cfg_.num_ports) {
        drop(in, v, Drop::NoRoute);
        return;
    }
    if (out == in.port) {
        drop(in, v, Drop::Loop);
        return;
    }
    if (out == 0) {
        if (ports_[0].state != PortState::Active) {
            drop(in, v, Drop::EgressNotActive);
            return;
        }
        deliver_gsi(in, v);
        return;
    }
    SwitchPort &op = ports_[out];
    if (faults_.cut(in.port, out)) {
        ++op.ctr.partition_dropped;
        drop(in, v, Drop::Partitioned);
        return;
    }
    if (!op.link_up()) {
        ++op.ctr.xmit_discards;
        drop(in, v, Drop::EgressDown);
        return;
    }
    if (op.state != PortState::Active) {
        ++op.ctr.xmit_discards;
        drop(in, v, Drop::EgressNotActive);
        return;
    }
    transmit(out, in.frame, in.pkt.size(), v);
}

void IbSwitch::deliver_gsi(Ingress &in, Verdict &v) {
    // The management port's only data QP is QP1 (GSI).
    MadAddress a;
    Mad m;
    if (in.v.dqpn() != 1 || !mad_from_packet(in.v, a, m)) {
        drop(in, v, Drop::NoQp);
        return;
    }
    SwitchPortInfo &p0 = ports_[0].pi;
    if (a.qkey != mad::kQp1Qkey) {
        ++p0.qkey_violations;
        drop(in, v, Drop::BadQkey);
        return;
    }
    if (!sma_->pkey_allows(a.pkey)) {
        ++p0.pkey_violations;
        drop(in, v, Drop::BadPkey);
        return;
    }
    if (m[mad::kMgmtClass] == mad::kClassPerf) {
        // The switch's own PMA answers, SM or not.
        v.local = true;
        ++local_delivered_;
        loop_.post([this, a, m] { pma(a, m); });
        return;
    }
    if (!gsi_handler_) {
        drop(in, v, Drop::NoQp);
        return;
    }
    v.local = true;
    ++local_delivered_;
    loop_.post([this, a, m] {
        if (gsi_handler_) {
            gsi_handler_(a, m);
        }
    });
}

void IbSwitch::process_smp(Ingress &in, Verdict &v) {
    // VL15 carries SMPs only: UD SEND to QP0, no GRH, one MAD.
    MadAddress a;
    Mad m;
    if (in.v.grh || in.v.dqpn() != 0 || !mad_from_packet(in.v, a, m)) {
        drop(in, v, Drop::BadSmp);
        return;
    }
    const uint8_t cls = m[mad::kMgmtClass];
    if (cls == mad::kClassSubnDr) {
        process_dr_smp(in, m, v);
        return;
    }
    if (cls != mad::kClassSubnLid) {
        drop(in, v, Drop::BadSmp);
        return;
    }
    // LID-routed SMP: forwarded whenever the physical link is up.  One for
    // this switch (its LID, or the permissive LID, which the receiving
    // node's SMA takes) goes to the SMA, or to the SM if it is a response
    // or a trap.
    const uint16_t dlid = in.v.dlid();
    const uint8_t method = m[mad::kMethod];
    const bool for_sm = is_response(method) || method == mad::kTrap;
    uint8_t out = 0;
    if (!is_local_lid(dlid) && dlid != iba::kPermissiveLid) {
        out = fdb_.lookup(dlid);
    }
    if (out == ForwardingTables::kNoPort || out > cfg_.num_ports) {
        drop(in, v, Drop::NoRoute);
        return;
    }
    if (out == 0) {
        deliver_smp_local(in, m, for_sm, v);
        return;
    }
    if (out == in.port) {
        drop(in, v, Drop::Loop);
        return;
    }
    if (!ports_[out].link_up()) {
        ++ports_[out].ctr.xmit_discards;
        drop(in, v, Drop::EgressDown);
        return;
    }
    transmit(out, in.frame, in.pkt.size(), v);
}

void IbSwitch::process_dr_smp(Ingress &in, Mad &m, Verdict &v) {
    uint16_t dlid = in.v.dlid();
    uint16_t slid = in.v.slid();
    DrContext c;
    c.originated = in.originated;
    c.in_port = in.originated ? 0 : in.port;
    c.num_ports = cfg_.num_ports;
    c.dlid_is_local = dlid == iba::kPermissiveLid || is_local_lid(dlid);
    // At most a few rounds: LID routing that ends at this switch is looked
    // at again as an arrival at the management port.
    for (int round = 0; round < 3; ++round) {
        const DrDecision d = dr_switch_process(m, c);
        v.detail = d.why;
        switch (d.action) {
        case DrAction::Discard:
            drop(in, v, Drop::DrDiscard);
            return;
        case DrAction::ToSma:
            deliver_smp_local(in, m, false, v);
            return;
        case DrAction::ToSm:
            deliver_smp_local(in, m, true, v);
            return;
        case DrAction::Forward: {
            SwitchPort &op = ports_[d.port];
            if (!op.link_up()) {
                ++op.ctr.xmit_discards;
                drop(in, v, Drop::EgressDown);
                return;
            }
            transmit(d.port, rebuilt_smp(in, m, dlid, slid), in.pkt.size(), v);
            return;
        }
        case DrAction::LidRoute: {
            if (d.new_dlid) {
                // A LID-routed part starts here: it leaves from this switch.
                dlid = d.new_dlid;
                slid = lid() ? lid() : iba::kPermissiveLid;
            }
            uint8_t out = 0;
            if (dlid != iba::kPermissiveLid && !is_local_lid(dlid)) {
                out = fdb_.lookup(dlid);
            }
            if (out == 0) {
                c.originated = false;
                c.in_port = 0;
                c.dlid_is_local = true;
                continue;
            }
            if (out == ForwardingTables::kNoPort || out > cfg_.num_ports) {
                drop(in, v, Drop::NoRoute);
                return;
            }
            if (!in.originated && out == in.port) {
                drop(in, v, Drop::Loop);
                return;
            }
            SwitchPort &op = ports_[out];
            if (!op.link_up()) {
                ++op.ctr.xmit_discards;
                drop(in, v, Drop::EgressDown);
                return;
            }
            transmit(out, rebuilt_smp(in, m, dlid, slid), in.pkt.size(), v);
            return;
        }
        }
    }
    v.detail = "LID routing loops back to this switch";
    drop(in, v, Drop::DrDiscard);
}

Frame IbSwitch::rebuilt_smp(const Ingress &in, const Mad &m, uint16_t dlid, uint16_t slid) {
    if (dlid == in.v.dlid() && slid == in.v.slid() &&
        std::memcmp(m.data(), in.pkt.data() + kSmpOffset, mad::kSize) == 0) {
        return in.frame;
    }
    // Hop pointer or return path changed: new ICRC (it covers the payload)
    // and VCRC.
    std::vector<uint8_t> p(in.pkt.begin(), in.pkt.end());
    auto *lrh = reinterpret_cast<iba::Lrh *>(p.data());
    lrh->dlid.set(dlid);
    lrh->slid.set(slid);
    std::memcpy(p.data() + kSmpOffset, m.data(), mad::kSize);
    iba::fill_crcs(p);
    return make_packet_frame(in.id, p, static_cast<uint8_t>(in.flags & ~iba::link::kNoCrcs));
}

void IbSwitch::deliver_smp_local(Ingress &in, const Mad &m, bool to_sm, Verdict &v) {
    MadAddress a;
    a.slid = in.v.slid();
    a.dlid = in.v.dlid();
    a.sl = in.v.sl();
    a.vl = 15;
    a.pkey = in.v.pkey();
    a.src_qp = 0;
    a.dst_qp = 0;
    a.in_port = in.originated ? 0 : in.port;
    if (to_sm) {
        if (!sm_handler_) {
            drop(in, v, Drop::NoSm);
            return;
        }
        v.local = true;
        ++local_delivered_;
        loop_.post([this, a, m] {
            if (sm_handler_) {
                sm_handler_(a, m);
            }
        });
        return;
    }
    v.local = true;
    ++local_delivered_;
    const uint8_t arrival = in.originated ? 0 : in.port;
    loop_.post([this, a, m, arrival] {
        std::optional<Mad> r = sma_->process(m, arrival);
        if (!r) {
            return;
        }
        MadAddress to;
        to.slid = lid() ? lid() : iba::kPermissiveLid;
        to.dlid = a.slid;
        if ((*r)[mad::kMgmtClass] == mad::kClassSubnDr && dr::dr_dlid(*r) == iba::kPermissiveLid) {
            to.dlid = iba::kPermissiveLid;  // the directed part uses the permissive DLID
        }
        to.pkey = a.pkey;
        to.sl = a.sl;
        to.src_qp = 0;
        to.dst_qp = 0;
        send_local(mad_packet(to, *r, ++local_psn_ & 0xffffff));
    });
}

}  // namespace fabric
