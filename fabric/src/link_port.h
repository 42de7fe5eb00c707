// The devices' link sockets: DIR/port<k>.sock for switch ports 1..N (unix
// stream, FramedConn framing, iba/link.h frames).  Port k's physical link
// is up while exactly one client is connected to port<k>.sock; a second
// client is closed at once.  On connect the client gets a link-state (up)
// frame, sends a hello (its GUIDs, logged) and then packet frames.  A
// port whose device sends to a congested port is not read until that port
// drains (FramedConn's back-pressure), so a slow device slows its senders
// down instead of losing their packets.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "asio.h"

#include "framed.h"
#include "log.h"
#include "switch.h"

namespace fabric {

class LinkServer {
  public:
    // Creates dir if needed; throws on socket errors.
    LinkServer(boost::asio::io_context &io, IbSwitch &sw, Log &log, const std::string &dir);
    ~LinkServer();
    static std::string socket_path(const std::string &dir, unsigned port);

    uint64_t refused() const { return refused_; }
    uint64_t bad_frames() const { return bad_frames_; }
    // Times a port's socket was held for a congested egress (back-pressure).
    uint64_t holds() const { return holds_; }

  private:
    class Port;
    std::vector<std::unique_ptr<Port>> ports_;
    uint64_t refused_ = 0;
    uint64_t bad_frames_ = 0;
    uint64_t holds_ = 0;
};

}  // namespace fabric
