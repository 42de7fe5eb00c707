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
        : srv_(srv), sw_(sw), log_(log), num_(num), path_(path), acceptor_(io), hold_timer_(io) {
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
                    log_.warn("link", "port {}: a second client connected; closing it", num_);
                }
                boost::system::error_code ignored;
                sock.close(ignored);
                accept();
                return;
            }
            conn_ = std::make_shared<FramedConn>(
                std::move(sock), [this](FramedConn &, Frame f) { on_frame(std::move(f)); },
                [this](FramedConn &c) { on_close(c); });
            conn_->set_log(&log_, "link port " + std::to_string(num_));
            conn_->set_on_drained([this] { release_waiters(); });
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
        // Nobody waits for a device that is gone (its frames are lost with it).
        release_waiters();
        resume();
    }

    // Back-pressure: this port's device sent a frame to ports that are
    // behind, so its socket is not read until one of them has drained, or
    // for at most the HOQ lifetime (a stuck port stops holding anybody).
    void hold(const ForwardingTables::PortSet &behind) {
        if (!conn_) {
            return;
        }
        for (uint8_t k = 1; k <= srv_.ports_.size(); ++k) {
            if (behind.test(k) && k != num_) {
                srv_.ports_[k - 1]->waiters_.set(num_);
            }
        }
        if (conn_->reading_paused()) {
            return;
        }
        conn_->pause_reading();
        ++srv_.holds_;
        hold_timer_.expires_after(FramedConn::kHoqLifetime);
        hold_timer_.async_wait([this](boost::system::error_code ec) {
            if (!ec) {
                resume();
            }
        });
    }
    void resume() {
        hold_timer_.cancel();
        if (conn_) {
            conn_->resume_reading();
        }
    }
    void release_waiters() {
        const ForwardingTables::PortSet w = waiters_;
        waiters_.reset();
        for (uint8_t k = 1; k <= srv_.ports_.size(); ++k) {
            if (w.test(k)) {
                srv_.ports_[k - 1]->resume();
            }
        }
    }

    LinkServer &srv_;
    IbSwitch &sw_;
    Log &log_;
    uint8_t num_;
    std::string path_;
    stream_protocol::acceptor acceptor_;
    std::shared_ptr<FramedConn> conn_;
    asio::steady_timer hold_timer_;
    ForwardingTables::PortSet waiters_;  // ingress ports held until this one drains
};

std::string LinkServer::socket_path(const std::string &dir, unsigned port) {
    return dir + "/port" + std::to_string(port) + ".sock";
}

LinkServer::LinkServer(asio::io_context &io, IbSwitch &sw, Log &log, const std::string &dir) {
    std::filesystem::create_directories(dir);
    for (uint8_t k = 1; k <= sw.num_ports(); ++k) {
        ports_.push_back(std::make_unique<Port>(*this, io, sw, log, k, socket_path(dir, k)));
    }
}

LinkServer::~LinkServer() = default;

}  // namespace fabric
