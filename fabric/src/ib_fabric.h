// The InfiniBand side of hcasim-fabric put together: the switch, the
// optional built-in SM and SA, the capture file and the fault knobs, plus
// the text the control socket shows.  No sockets here (link_port.h and
// control.h add those), so tests and fuzzers drive the same object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capture.h"
#include "event_loop.h"
#include "log.h"
#include "sa.h"
#include "subnet_manager.h"
#include "isl.h"
#include "switch.h"
#include "topology.h"

namespace fabric {

struct FabricOptions {
    SwitchConfig sw;                 // every switch's (name, GUID, ports from the topology)
    std::optional<Topology> topology;  // none: one switch of sw.num_ports ports
    bool sm = true;                  // built-in SM and SA (--no-sm: off)
    std::string capture;             // pcapng file, empty: none
    uint64_t capture_max_bytes = 512ull << 20;
    double drop_pct = 0;             // applied to every port
    double corrupt_pct = 0;
    uint32_t delay_us = 0;
    SubnetManager::Config sm_cfg;
    SubnetAdmin::Config sa_cfg;
};

class IbFabric {
  public:
    // Throws std::runtime_error for unusable options (capture file).
    IbFabric(EventLoop &loop, Log &log, const FabricOptions &opt);
    ~IbFabric();

    void start();

    // The first switch: the management port with the SM and SA.
    IbSwitch &sw() { return *switches_[0]; }
    size_t num_switches() const { return switches_.size(); }
    IbSwitch &sw(size_t i) { return *switches_.at(i); }
    const Topology &topology() const { return topo_; }
    SubnetManager *sm() { return sm_.get(); }
    SubnetAdmin *sa() { return sa_.get(); }
    PcapngWriter *capture() { return capture_.get(); }
    const FabricOptions &options() const { return opt_; }

    // Control-socket views (one line per item, no trailing "ok").
    std::string ports_text() const;
    std::string stats_text() const;
    std::string groups_text() const;
    void flush();

  private:
    class NamedCapture;
    void gsi_without_sa(const MadAddress &from, const Mad &m);
    void gsi_without_sa(IbSwitch &sw, const MadAddress &from, const Mad &m);
    void switch_ports_text(std::string &s, size_t i) const;

    Log &log_;
    FabricOptions opt_;
    std::unique_ptr<PcapngWriter> capture_;
    Topology topo_;
    std::vector<std::unique_ptr<NamedCapture>> captures_;
    std::vector<std::unique_ptr<IbSwitch>> switches_;
    std::vector<std::unique_ptr<SwitchLink>> links_;
    IbSwitch *sw_ = nullptr;  // switches_[0]
    std::unique_ptr<SubnetManager> sm_;
    std::unique_ptr<SubnetAdmin> sa_;
};

}  // namespace fabric
