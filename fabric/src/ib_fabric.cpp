#include "ib_fabric.h"

#include "smp_agent.h"

namespace fabric {

// A switch's records in the shared capture name the switch (several switches).
class IbFabric::NamedCapture : public Capture {
  public:
    NamedCapture(PcapngWriter &out, std::string name) : out_(out), prefix_("switch=" + std::move(name) + " ") {}
    void record(uint64_t id, uint8_t port, std::span<const uint8_t> packet, std::string_view verdict) override {
        buf_.assign(prefix_);
        buf_.append(verdict);
        out_.record(id, port, packet, buf_);
    }

  private:
    PcapngWriter &out_;
    std::string prefix_;
    std::string buf_;
};

IbFabric::IbFabric(EventLoop &loop, Log &log, const FabricOptions &opt)
    : log_(log), opt_(opt), topo_(opt.topology ? *opt.topology : Topology::single(opt.sw.num_ports)) {
    if (!opt_.capture.empty()) {
        capture_ = std::make_unique<PcapngWriter>(opt_.capture, opt_.capture_max_bytes);
        capture_->on_full([this] {
            log_.warn("capture", "{} reached {} bytes; no more packets are recorded", opt_.capture,
                      opt_.capture_max_bytes);
        });
    }
    const bool several = topo_.switches.size() > 1 || opt_.topology;
    for (size_t i = 0; i < topo_.switches.size(); ++i) {
        const Topology::Switch &ts = topo_.switches[i];
        SwitchConfig c = opt_.sw;
        c.num_ports = ts.ports;
        c.node_guid = ts.guid ? ts.guid : opt_.sw.node_guid + i;
        c.seed = opt_.sw.seed + i;
        if (several) {
            c.name = ts.name;
            c.description = "hcasim switch " + ts.name;
        }
        switches_.push_back(std::make_unique<IbSwitch>(loop, log, c));
        IbSwitch &sw = *switches_.back();
        if (capture_ && several) {
            captures_.push_back(std::make_unique<NamedCapture>(*capture_, ts.name));
            sw.set_capture(captures_.back().get());
        } else if (capture_) {
            sw.set_capture(capture_.get());
        }
        for (uint8_t k = 1; k <= c.num_ports; ++k) {
            if (!sw.faults().set_drop(k, opt_.drop_pct) || !sw.faults().set_corrupt(k, opt_.corrupt_pct) ||
                !sw.faults().set_delay(k, opt_.delay_us)) {
                throw std::runtime_error("fault knobs out of range (percent 0..100, delay up to 10 s)");
            }
        }
    }
    sw_ = switches_[0].get();
    for (const Topology::Link &l : topo_.links) {
        links_.push_back(std::make_unique<SwitchLink>(loop, *switches_[l.a.sw], l.a.port, *switches_[l.b.sw], l.b.port));
    }
    if (opt_.sm) {
        sm_ = std::make_unique<SubnetManager>(*sw_, loop, log, opt_.sm_cfg);
        sa_ = std::make_unique<SubnetAdmin>(*sw_, *sm_, loop, log, opt_.sa_cfg);
    } else {
        sw_->set_gsi_handler([this](const MadAddress &a, const Mad &m) { gsi_without_sa(a, m); });
    }
    for (size_t i = 1; i < switches_.size(); ++i) {
        IbSwitch &sw = *switches_[i];
        sw.set_gsi_handler([this, &sw](const MadAddress &a, const Mad &m) { gsi_without_sa(sw, a, m); });
        // A link change on another switch of this daemon: the SM looks at
        // once (a switch in another daemon is seen at the next sweep).
        if (sm_) {
            sw.set_link_handler([this](uint8_t, bool) { sm_->request_sweep(); });
        }
    }
}

IbFabric::~IbFabric() {
    for (size_t i = 1; i < switches_.size(); ++i) {
        switches_[i]->set_link_handler({});
    }
    sa_.reset();
    sm_.reset();
    links_.clear();
    switches_.clear();
    if (capture_) {
        capture_->flush();
    }
}

void IbFabric::start() {
    for (size_t i = 0; i < switches_.size(); ++i) {
        const IbSwitch &sw = *switches_[i];
        log_.info("fabric", "InfiniBand switch {}{:#018x}: {} ports, MTU {}, {}, {}", sw.config().name.empty() ? "" : sw.config().name + " ",
                  sw.node_guid(), sw.num_ports(), mtu_bytes(opt_.sw.mtu), link_rate_name(opt_.sw.rate),
                  i ? "no SM" : opt_.sm ? "built-in SM/SA at LID 1" : "no SM (--no-sm)");
    }
    for (const Topology::Link &l : topo_.links) {
        log_.info("fabric", "inter-switch link: {} <-> {}", topo_.port_name(l.a), topo_.port_name(l.b));
    }
    if (sm_) {
        sa_->start();
        sm_->start();
    }
}

void IbFabric::flush() {
    if (capture_) {
        capture_->flush();
    }
    log_.flush();
}

void IbFabric::gsi_without_sa(const MadAddress &from, const Mad &m) { gsi_without_sa(*sw_, from, m); }

void IbFabric::gsi_without_sa(IbSwitch &sw, const MadAddress &from, const Mad &m) {
    // No class agent runs on the management port: requests get "unsupported".
    const uint8_t method = m[mad::kMethod];
    if (is_response(method) || method == mad::kTrapRepress) {
        return;
    }
    Mad r = m;
    r[mad::kMethod] = response_method(method);
    set16(r, mad::kStatus, mad::kStatusUnsupportedMethodAttr);
    sw.send_local(mad_packet(reply_address(from, sw.lid()), r));
}

std::string IbFabric::ports_text() const {
    std::string s;
    for (size_t i = 0; i < switches_.size(); ++i) {
        switch_ports_text(s, i);
    }
    return s;
}

// The first switch's lines start "port N:" (one switch or several); the
// others' "switch NAME port N:".
void IbFabric::switch_ports_text(std::string &s, size_t i) const {
    const IbSwitch &sw = *switches_[i];
    const std::string pre = i ? fmt::format("switch {} ", sw.config().name) : std::string();
    const SwitchPort &p0 = sw.port(0);
    if (switches_.size() > 1) {
        fmt::format_to(std::back_inserter(s), "{}switch: name={} guid={:#018x} ports={}\n", pre, sw.config().name,
                       sw.node_guid(), sw.num_ports());
    }
    fmt::format_to(std::back_inserter(s), "{}port 0: phys=LinkUp state={} lid={} guid={:#018x} (management port{})\n",
                   pre, port_state_name(p0.state), p0.pi.lid, sw.node_guid(), i == 0 && sm_ ? ", SM/SA" : "");
    for (uint8_t k = 1; k <= sw.num_ports(); ++k) {
        const SwitchPort &p = sw.port(k);
        std::string lid = "-", neighbor = "-";
        if (sm_) {
            if (auto e = sm_->ca_at(sw.node_guid(), k)) {
                lid = std::to_string(e->lid);
                neighbor = fmt::format("{:#018x}", e->port_guid);
            }
        }
        if (neighbor == "-" && p.hello) {
            neighbor = fmt::format("{:#018x}", p.peer_port_guid);
        }
        const FaultConfig &f = sw.faults().config(k);
        const PortCounters &c = p.ctr;
        fmt::format_to(std::back_inserter(s),
                       "{}port {}: phys={} state={} lid={} neighbor={} mtu={} rx={} tx={} rx_bytes={} tx_bytes={} "
                       "rcv_errors={} relay_errors={} xmit_discards={} xmit_wait={} vl15_dropped={} link_downed={} "
                       "fault_dropped={} fault_corrupted={} fault_duplicated={} fault_reordered={} "
                       "partition_dropped={} drop={}%{} corrupt={}% delay={}us duplicate={}% reorder={}%\n",
                       pre, k, phys_state_name(p.phys()), port_state_name(p.state), lid, neighbor,
                       mtu_bytes(p.pi.neighbor_mtu), c.rcv_packets, c.xmit_packets, c.rcv_bytes, c.xmit_bytes,
                       c.rcv_errors, c.rcv_switch_relay_errors, c.xmit_discards, c.xmit_wait, c.vl15_dropped, c.link_downed,
                       c.fault_dropped, c.fault_corrupted, c.fault_duplicated, c.fault_reordered,
                       c.partition_dropped, f.drop_pct, f.drop_scope == DropScope::Requests ? "(requests)" : "",
                       f.corrupt_pct, f.delay_us, f.duplicate_pct, f.reorder_pct);
    }
    for (const auto &[a, b] : sw.faults().cuts()) {
        fmt::format_to(std::back_inserter(s), "{}partition: port {} | port {}\n", pre, a, b);
    }
}

std::string IbFabric::stats_text() const {
    std::string s;
    // The first switch's lines as with one switch; the others' prefixed
    // "switch NAME ".
    for (size_t k = 0; k < switches_.size(); ++k) {
        const IbSwitch &sw = *switches_[k];
        const std::string pre = k ? fmt::format("switch {} ", sw.config().name) : std::string();
        fmt::format_to(std::back_inserter(s), "{}switch: forwarded={} local={} dropped={}\n", pre, sw.forwarded(),
                       sw.local_delivered(), sw.total_drops());
        for (size_t i = 1; i < static_cast<size_t>(Drop::Count); ++i) {
            if (const uint64_t n = sw.drops(static_cast<Drop>(i))) {
                fmt::format_to(std::back_inserter(s), "{}drop {}={}\n", pre, drop_name(static_cast<Drop>(i)), n);
            }
        }
        fmt::format_to(std::back_inserter(s), "{}sma: requests={} errors={} mkey_violations={}\n", pre,
                       sw.sma().requests(), sw.sma().errors(), sw.sma().mkey_discards());
    }
    if (sm_) {
        fmt::format_to(std::back_inserter(s), "sm: {} sweeps={} smps={} timeouts={} rejected_responses={}\n",
                       sm_->running() ? "running" : "stopped", sm_->sweeps(), sm_->smps_sent(), sm_->smp_timeouts(),
                       sm_->smps_rejected());
        const auto &st = sa_->stats();
        const auto &rs = sa_->rmpp().stats();
        fmt::format_to(std::back_inserter(s),
                       "sa: requests={} errors={} duplicates={} non_sa={} joins={} leaves={} unanswered_sm_down={} "
                       "groups={}\n",
                       st.requests, st.errors, st.duplicates, st.non_sa, st.joins, st.leaves, st.sm_down,
                       sa_->groups().groups().size());
        fmt::format_to(std::back_inserter(s),
                       "rmpp: started={} completed={} aborted={} segments={} retransmits={} acks={} active={}\n",
                       rs.started, rs.completed, rs.aborted, rs.segments, rs.retransmits, rs.acks,
                       sa_->rmpp().active());
    }
    if (capture_) {
        fmt::format_to(std::back_inserter(s), "capture: file={} records={} bytes={}{}\n", opt_.capture,
                       capture_->records(), capture_->bytes(), capture_->full() ? " (full)" : "");
    }
    return s;
}

std::string IbFabric::groups_text() const { return sa_ ? sa_->groups().describe() : std::string(); }

}  // namespace fabric
