// The InfiniBand side of hcasim-fabric put together: the switch, the
// optional built-in SM and SA, the capture file and the fault knobs, plus
// the text the control socket shows.  No sockets here (link_port.h and
// control.h add those), so tests and fuzzers drive the same object.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "capture.h"
#include "event_loop.h"
#include "log.h"
#include "sa.h"
#include "subnet_manager.h"
#include "switch.h"

namespace fabric {

struct FabricOptions {
    SwitchConfig sw;
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

    IbSwitch &sw() { return *sw_; }
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
    void gsi_without_sa(const MadAddress &from, const Mad &m);

    Log &log_;
    FabricOptions opt_;
    std::unique_ptr<PcapngWriter> capture_;
    std::unique_ptr<IbSwitch> sw_;
    std::unique_ptr<SubnetManager> sm_;
    std::unique_ptr<SubnetAdmin> sa_;
};

}  // namespace fabric
