#include "ib_fabric.h"

#include "smp_agent.h"

namespace fabric {

IbFabric::IbFabric(EventLoop &loop, Log &log, const FabricOptions &opt) : log_(log), opt_(opt) {
    if (!opt_.capture.empty()) {
        capture_ = std::make_unique<PcapngWriter>(opt_.capture, opt_.capture_max_bytes);
        capture_->on_full([this] {
            log_.warn("capture", "{} reached {} bytes; no more packets are recorded", opt_.capture,
                      opt_.capture_max_bytes);
        });
    }
    sw_ = std::make_unique<IbSwitch>(loop, log, opt_.sw);
    if (capture_) {
        sw_->set_capture(capture_.get());
    }
    for (uint8_t k = 1; k <= opt_.sw.num_ports; ++k) {
        if (!sw_->faults().set_drop(k, opt_.drop_pct) || !sw_->faults().set_corrupt(k, opt_.corrupt_pct) ||
            !sw_->faults().set_delay(k, opt_.delay_us)) {
            throw std::runtime_error("fault knobs out of range (percent 0..100, delay up to 10 s)");
        }
    }
    if (opt_.sm) {
        sm_ = std::make_unique<SubnetManager>(*sw_, loop, log, opt_.sm_cfg);
        sa_ = std::make_unique<SubnetAdmin>(*sw_, *sm_, loop, log, opt_.sa_cfg);
    } else {
        sw_->set_gsi_handler([this](const MadAddress &a, const Mad &m) { gsi_without_sa(a, m); });
    }
}

IbFabric::~IbFabric() {
    sa_.reset();
    sm_.reset();
    sw_.reset();
    if (capture_) {
        capture_->flush();
    }
}

void IbFabric::start() {
    log_.info("fabric", "InfiniBand switch {:#018x}: {} ports, MTU {}, {}, {}", opt_.sw.node_guid,
              opt_.sw.num_ports, mtu_bytes(opt_.sw.mtu), link_rate_name(opt_.sw.rate),
              opt_.sm ? "built-in SM/SA at LID 1" : "no SM (--no-sm)");
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

void IbFabric::gsi_without_sa(const MadAddress &from, const Mad &m) {
    // No class agent runs on the management port: requests get "unsupported".
    const uint8_t method = m[mad::kMethod];
    if (is_response(method) || method == mad::kTrapRepress) {
        return;
    }
    Mad r = m;
    r[mad::kMethod] = response_method(method);
    set16(r, mad::kStatus, mad::kStatusUnsupportedMethodAttr);
    sw_->send_local(mad_packet(reply_address(from, sw_->lid()), r));
}

std::string IbFabric::ports_text() const {
    std::string s;
    const IbSwitch &sw = *sw_;
    const SwitchPort &p0 = sw.port(0);
    fmt::format_to(std::back_inserter(s), "port 0: phys=LinkUp state={} lid={} guid={:#018x} (management port{})\n",
                   port_state_name(p0.state), p0.pi.lid, sw.node_guid(), sm_ ? ", SM/SA" : "");
    for (uint8_t k = 1; k <= sw.num_ports(); ++k) {
        const SwitchPort &p = sw.port(k);
        std::string lid = "-", neighbor = "-";
        if (sm_) {
            if (auto e = sm_->endport_by_lid(sm_->lid_for_port(k)); e && e->switch_port == k) {
                lid = std::to_string(e->lid);
                neighbor = fmt::format("{:#018x}", e->port_guid);
            }
        }
        if (neighbor == "-" && p.hello) {
            neighbor = fmt::format("{:#018x}", p.peer_port_guid);
        }
        const FaultConfig &f = sw_->faults().config(k);
        const PortCounters &c = p.ctr;
        fmt::format_to(std::back_inserter(s),
                       "port {}: phys={} state={} lid={} neighbor={} mtu={} rx={} tx={} rx_bytes={} tx_bytes={} "
                       "rcv_errors={} relay_errors={} xmit_discards={} xmit_wait={} vl15_dropped={} link_downed={} "
                       "fault_dropped={} fault_corrupted={} fault_duplicated={} fault_reordered={} "
                       "partition_dropped={} drop={}%{} corrupt={}% delay={}us duplicate={}% reorder={}%\n",
                       k, phys_state_name(p.phys()), port_state_name(p.state), lid, neighbor,
                       mtu_bytes(p.pi.neighbor_mtu), c.rcv_packets, c.xmit_packets, c.rcv_bytes, c.xmit_bytes,
                       c.rcv_errors, c.rcv_switch_relay_errors, c.xmit_discards, c.xmit_wait, c.vl15_dropped, c.link_downed,
                       c.fault_dropped, c.fault_corrupted, c.fault_duplicated, c.fault_reordered,
                       c.partition_dropped, f.drop_pct, f.drop_scope == DropScope::Requests ? "(requests)" : "",
                       f.corrupt_pct, f.delay_us, f.duplicate_pct, f.reorder_pct);
    }
    for (const auto &[a, b] : sw_->faults().cuts()) {
        fmt::format_to(std::back_inserter(s), "partition: port {} | port {}\n", a, b);
    }
    return s;
}

std::string IbFabric::stats_text() const {
    std::string s;
    const IbSwitch &sw = *sw_;
    fmt::format_to(std::back_inserter(s), "switch: forwarded={} local={} dropped={}\n", sw.forwarded(),
                   sw.local_delivered(), sw.total_drops());
    for (size_t i = 1; i < static_cast<size_t>(Drop::kCount); ++i) {
        if (const uint64_t n = sw.drops(static_cast<Drop>(i))) {
            fmt::format_to(std::back_inserter(s), "drop {}={}\n", drop_name(static_cast<Drop>(i)), n);
        }
    }
    fmt::format_to(std::back_inserter(s), "sma: requests={} errors={} mkey_violations={}\n",
                   sw_->sma().requests(), sw_->sma().errors(), sw_->sma().mkey_discards());
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
