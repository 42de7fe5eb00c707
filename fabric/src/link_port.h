// The devices' link sockets: for a single switch DIR/port<k>.sock for its
// ports 1..N; with a topology (topology.h) DIR/port<n>.sock for the n-th
// `node` attachment, wherever it is.  Unix stream, FramedConn framing,
// iba/link.h frames.  A port's physical link is up while exactly one
// client is connected to its socket; a second client is closed at once.
// On connect the client gets a link-state (up) frame, sends a hello (its
// GUIDs, logged) and then packet frames.  A port whose device sends to a
// congested port is not read until that port drains (IbSwitch::hold), so
// a slow device slows its senders down instead of losing their packets.
//
// RemoteLink is an inter-switch link to another hcasim-fabric over TCP:
// the same frames, a hello with the switch's GUID, link-state frames for
// `link N down|up` on either side, and the same back-pressure (a TCP
// connection that the other side does not read fills up and holds the
// ports that send to it).  The connecting side tries again every second.
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
    struct Attachment {
        IbSwitch *sw = nullptr;
        uint8_t port = 0;
        std::string path;
    };
    // Every port of one switch: dir/port<k>.sock.  Creates dir if needed;
    // throws on socket errors.
    LinkServer(boost::asio::io_context &io, IbSwitch &sw, Log &log, const std::string &dir);
    LinkServer(boost::asio::io_context &io, Log &log, const std::vector<Attachment> &at);
    ~LinkServer();
    static std::string socket_path(const std::string &dir, unsigned port);

    uint64_t refused() const { return refused_; }
    uint64_t bad_frames() const { return bad_frames_; }
    // Times a port's socket was held for a congested egress (back-pressure).
    uint64_t holds() const { return holds_; }

  private:
    class Port;
    void add(boost::asio::io_context &io, Log &log, const Attachment &a);
    std::vector<std::unique_ptr<Port>> ports_;
    uint64_t refused_ = 0;
    uint64_t bad_frames_ = 0;
    uint64_t holds_ = 0;
};

class RemoteLink : public PortSink {
  public:
    // listen: accept one peer at host:port; otherwise connect to it.
    // Throws on a bad address or a port it cannot listen on.
    RemoteLink(boost::asio::io_context &io, IbSwitch &sw, Log &log, uint8_t port, bool listen,
               const std::string &host, uint16_t tcp_port);
    ~RemoteLink() override;
    RemoteLink(const RemoteLink &) = delete;
    RemoteLink &operator=(const RemoteLink &) = delete;

    bool deliver(const Frame &f) override;
    bool congested() const override;
    void link_state(bool up) override;
    void resume() override;
    bool switch_link() const override { return true; }

    bool connected() const { return conn_ != nullptr; }
    uint64_t connects() const { return connects_; }
    uint64_t bad_frames() const { return bad_frames_; }
    // The TCP port it listens on (0 for a connecting side): with port 0 in
    // the address, the one the system chose.
    uint16_t listening_port() const;

  private:
    void accept();
    void connect();
    void retry_later();
    void up(std::shared_ptr<FramedConn> c);
    void on_frame(Frame f);
    void on_close(FramedConn &c);
    void hold();

    boost::asio::io_context &io_;
    IbSwitch &sw_;
    Log &log_;
    uint8_t port_;
    bool listen_;
    boost::asio::ip::tcp::endpoint ep_;
    std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
    std::unique_ptr<boost::asio::ip::tcp::socket> connecting_;
    boost::asio::steady_timer retry_timer_;
    std::shared_ptr<FramedConn> conn_;
    bool peer_up_ = true;  // the other side's port is not administratively down
    bool closing_ = false;
    uint64_t connects_ = 0;
    uint64_t bad_frames_ = 0;
    std::string what_;
};

}  // namespace fabric
