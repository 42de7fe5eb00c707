#include "link_port.h"

#include <filesystem>

#include "be.h"

namespace fabric {

namespace asio = boost::asio;
using asio::local::stream_protocol;

// One switch port's listening socket and its (single) device connection.
class LinkServer::Port : public PortSink {
  public:
    Port(LinkServer &srv, asio::io_context &io, IbSwitch &sw, Log &log, uint8_t num, const std::string &path)
        : srv_(srv), sw_(sw), log_(log), num_(num), path_(path), acceptor_(io) {
        ::unlink(path.c_str());
        stream_protocol::endpoint ep(path);
        acceptor_.open(ep.protocol());
        acceptor_.bind(ep);
        acceptor_.listen();
        accept();
    }
    ~Port() override {
        boost::system::error_code ec;
        acceptor_.close(ec);
        if (conn_) {
            auto c = std::move(conn_);
            sw_.detach(num_);
            c->close();
        }
        ::unlink(path_.c_str());
    }

    bool deliver(const Frame &f) override { return conn_ && conn_->send(f); }
    bool congested() const override { return conn_ && conn_->congested(); }
    void link_state(bool up) override {
        if (conn_) {
            conn_->send(make_link_state_frame(up));
        }
    }
    // Back-pressure: an egress this port's device sent to has drained.
    void resume() override {
        if (conn_) {
            conn_->resume_reading();
        }
    }

  private:
    void accept() {
        acceptor_.async_accept([this](boost::system::error_code ec, stream_protocol::socket sock) {
            if (ec) {
                return;
            }
            if (conn_) {
                // One device per port: a second client is refused.
                ++srv_.refused_;
                if (log_.allow("link")) {
                    log_.warn("link", "{}: a second client connected; closing it", sw_.pname(num_));
                }
                boost::system::error_code ignored;
                sock.close(ignored);
                accept();
                return;
            }
            conn_ = std::make_shared<FramedConn>(
                std::move(sock), [this](FramedConn &, Frame f) { on_frame(std::move(f)); },
                [this](FramedConn &c) { on_close(c); });
            conn_->set_log(&log_, "link " + sw_.pname(num_));
            conn_->set_on_drained([this] { sw_.drained(num_); });
            conn_->start();
            sw_.attach(num_, this);
            accept();
        });
    }

    void on_frame(Frame f) {
        LinkFrameView lf;
        if (!parse_link_frame(*f, lf)) {
            ++srv_.bad_frames_;
            return;
        }
        switch (lf.type) {
        case iba::link::kPacket:
            sw_.receive(num_, f);
            if (sw_.congested().any()) {
                hold(sw_.congested());
            }
            break;
        case iba::link::kHello: {
            iba::link::Hello h;
            if (!iba::link::parse_hello(lf.body, h)) {
                ++srv_.bad_frames_;
                return;
            }
            sw_.hello(num_, h.node_guid, h.port_guid, h.port_num);
            break;
        }
        default:
            ++srv_.bad_frames_;  // link-state frames go the other way
            break;
        }
    }

    void on_close(FramedConn &c) {
        if (conn_.get() != &c) {
            return;
        }
        auto keep = std::move(conn_);
        sw_.detach(num_);
    }

    // This port's device sent a frame to ports that are behind, so its
    // socket is not read until one of them has drained, or for at most the
    // HOQ lifetime (a stuck port stops holding anybody).
    void hold(const ForwardingTables::PortSet &behind) {
        if (!conn_) {
            return;
        }
        sw_.hold(num_, behind);
        if (conn_->hold_reading()) {
            ++srv_.holds_;
        }
    }

    LinkServer &srv_;
    IbSwitch &sw_;
    Log &log_;
    uint8_t num_;
    std::string path_;
    stream_protocol::acceptor acceptor_;
    std::shared_ptr<FramedConn> conn_;
};

std::string LinkServer::socket_path(const std::string &dir, unsigned port) {
    return dir + "/port" + std::to_string(port) + ".sock";
}

LinkServer::LinkServer(asio::io_context &io, IbSwitch &sw, Log &log, const std::string &dir) {
    std::filesystem::create_directories(dir);
    for (uint8_t k = 1; k <= sw.num_ports(); ++k) {
        add(io, log, {&sw, k, socket_path(dir, k)});
    }
}

LinkServer::LinkServer(asio::io_context &io, Log &log, const std::vector<Attachment> &at) {
    for (const Attachment &a : at) {
        std::filesystem::create_directories(std::filesystem::path(a.path).parent_path());
        add(io, log, a);
    }
}

void LinkServer::add(asio::io_context &io, Log &log, const Attachment &a) {
    ports_.push_back(std::make_unique<Port>(*this, io, *a.sw, log, a.port, a.path));
}

LinkServer::~LinkServer() = default;

// --- RemoteLink ---

RemoteLink::RemoteLink(asio::io_context &io, IbSwitch &sw, Log &log, uint8_t port, bool listen,
                       const std::string &host, uint16_t tcp_port)
    : io_(io),
      sw_(sw),
      log_(log),
      port_(port),
      listen_(listen),
      ep_(asio::ip::make_address(host), tcp_port),
      retry_timer_(io) {
    what_ = fmt::format("{}: inter-switch link {} {}:{}", sw_.pname(port), listen ? "listening on" : "to", host,
                        tcp_port);
    if (listen_) {
        acceptor_ = std::make_unique<asio::ip::tcp::acceptor>(io_);
        acceptor_->open(ep_.protocol());
        acceptor_->set_option(asio::socket_base::reuse_address(true));
        acceptor_->bind(ep_);
        acceptor_->listen();
        accept();
    } else {
        connect();
    }
}

RemoteLink::~RemoteLink() {
    closing_ = true;
    boost::system::error_code ec;
    if (acceptor_) {
        acceptor_->close(ec);
    }
    if (connecting_) {
        connecting_->close(ec);
    }
    retry_timer_.cancel();
    if (conn_) {
        auto c = std::move(conn_);
        sw_.detach(port_);
        c->close();
    }
}

uint16_t RemoteLink::listening_port() const {
    boost::system::error_code ec;
    return acceptor_ ? acceptor_->local_endpoint(ec).port() : 0;
}

void RemoteLink::accept() {
    acceptor_->async_accept([this](boost::system::error_code ec, asio::ip::tcp::socket sock) {
        if (ec || closing_) {
            return;
        }
        if (conn_) {
            // One peer per link; a second one is refused.
            if (log_.allow("isl")) {
                log_.warn("link", "{}: a second peer connected; closing it", what_);
            }
            boost::system::error_code ignored;
            sock.close(ignored);
            accept();
            return;
        }
        boost::system::error_code ignored;
        sock.set_option(asio::ip::tcp::no_delay(true), ignored);
        up(std::make_shared<FramedConn>(
            FramedConn::Socket(std::move(sock)), [this](FramedConn &, Frame f) { on_frame(std::move(f)); },
            [this](FramedConn &c) { on_close(c); }));
        accept();
    });
}

void RemoteLink::connect() {
    connecting_ = std::make_unique<asio::ip::tcp::socket>(io_);
    connecting_->async_connect(ep_, [this](boost::system::error_code ec) {
        if (closing_) {
            return;
        }
        if (ec) {
            connecting_.reset();
            retry_later();
            return;
        }
        boost::system::error_code ignored;
        connecting_->set_option(asio::ip::tcp::no_delay(true), ignored);
        auto sock = std::move(*connecting_);
        connecting_.reset();
        up(std::make_shared<FramedConn>(
            FramedConn::Socket(std::move(sock)), [this](FramedConn &, Frame f) { on_frame(std::move(f)); },
            [this](FramedConn &c) { on_close(c); }));
    });
}

void RemoteLink::retry_later() {
    retry_timer_.expires_after(std::chrono::seconds(1));
    retry_timer_.async_wait([this](boost::system::error_code ec) {
        if (!ec && !closing_) {
            connect();
        }
    });
}

void RemoteLink::up(std::shared_ptr<FramedConn> c) {
    conn_ = std::move(c);
    ++connects_;
    peer_up_ = true;
    conn_->set_log(&log_, what_);
    conn_->set_on_drained([this] { sw_.drained(port_); });
    conn_->start();
    log_.info("link", "{}: connected", what_);
    // Our end of the cable: this switch's GUID and port number.
    conn_->send(make_hello_frame(sw_.node_guid(), sw_.node_guid(), port_));
    sw_.attach(port_, this);
}

bool RemoteLink::deliver(const Frame &f) { return conn_ && conn_->send(f); }

bool RemoteLink::congested() const { return conn_ && conn_->congested(); }

// `link N down|up` on this side: the other side's port goes down/up with it.
void RemoteLink::link_state(bool up) {
    if (conn_) {
        conn_->send(make_link_state_frame(up));
    }
}

void RemoteLink::resume() {
    if (conn_) {
        conn_->resume_reading();
    }
}

void RemoteLink::hold() {
    sw_.hold(port_, sw_.congested());
    conn_->hold_reading();
}

void RemoteLink::on_frame(Frame f) {
    LinkFrameView lf;
    if (!parse_link_frame(*f, lf)) {
        ++bad_frames_;
        return;
    }
    switch (lf.type) {
    case iba::link::kPacket:
        sw_.receive(port_, f);
        if (sw_.congested().any() && conn_) {
            hold();
        }
        break;
    case iba::link::kHello: {
        iba::link::Hello h;
        if (!iba::link::parse_hello(lf.body, h)) {
            ++bad_frames_;
            return;
        }
        sw_.hello(port_, h.node_guid, h.port_guid, h.port_num);
        break;
    }
    case iba::link::kLinkState: {
        // The other side's port was disabled or enabled: the cable's
        // physical link follows (our port's own admin state is kept).
        const bool up = !lf.body.empty() && lf.body[0] == 1;
        if (up == peer_up_) {
            break;
        }
        peer_up_ = up;
        if (up) {
            sw_.attach(port_, this);
        } else {
            sw_.detach(port_);
        }
        break;
    }
    default:
        ++bad_frames_;
        break;
    }
}

void RemoteLink::on_close(FramedConn &c) {
    if (conn_.get() != &c) {
        return;
    }
    auto keep = std::move(conn_);
    log_.info("link", "{}: disconnected", what_);
    sw_.detach(port_);
    if (!listen_ && !closing_) {
        retry_later();
    }
}

}  // namespace fabric
