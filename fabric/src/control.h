// The control interface of hcasim-fabric: one text command per line, the
// reply is zero or more lines and then "ok" or "error <reason>".
//
//   ports                     state and counters of every port
//   link PORT down|up         drop/restore a port's physical link (the
//                             device gets link-state frames); the socket
//                             stays connected
//   drop PORT PERCENT         lose PERCENT of the packets on PORT's link
//   corrupt PORT PERCENT      flip a bit in PERCENT of them
//   delay PORT MICROSECONDS   delay packets towards the device
//   sm restart                the SM forgets the subnet and sweeps again,
//                             setting ClientReregister on configured ports
//   sm status                 SM state per port
//   groups                    multicast groups and members
//   stats                     switch, SMA, SM, SA, RMPP, capture counters
//   help
//
// PORT is a port number or "all" (of the first switch), or SWITCH:PORT
// for a switch of the topology (`link spine0:1 down`; link and the packet
// faults).  ControlCommands is the interpreter
// (tested without sockets); ControlServer serves it on a unix socket.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "asio.h"

namespace fabric {

class IbFabric;

class ControlCommands {
  public:
    static constexpr uint32_t kMaxFlapMs = 600'000;
    // fabric may be null (no InfiniBand side); extra_stats adds lines to
    // `stats` (the Ethernet hub).
    explicit ControlCommands(IbFabric *fabric, std::function<std::string()> extra_stats = {});
    // The reply to one line, ending with "ok\n" or "error ...\n".
    std::string execute(const std::string &line);

  private:
    std::string link(const std::vector<std::string> &w);
    std::string fault(const std::vector<std::string> &w);
    std::string partition(const std::vector<std::string> &w);
    std::string sm(const std::vector<std::string> &w);
    std::string pkeys(const std::vector<std::string> &w);

    IbFabric *fabric_;
    std::function<std::string()> extra_stats_;
};

class ControlServer {
  public:
    static constexpr size_t kMaxLine = 4096;
    ControlServer(boost::asio::io_context &io, const std::string &path, ControlCommands &cmds);
    ~ControlServer();

  private:
    class Session;
    void accept();

    boost::asio::local::stream_protocol::acceptor acceptor_;
    ControlCommands &cmds_;
    std::string path_;
};

}  // namespace fabric
