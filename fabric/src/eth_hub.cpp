#include "eth_hub.h"

#include <algorithm>
#include <cstdio>

namespace fabric {

namespace asio = boost::asio;
using asio::local::stream_protocol;

EthHub::EthHub(asio::io_context &io, const std::string &socket_path, Log *log) : acceptor_(io), log_(log) {
    ::unlink(socket_path.c_str());
    stream_protocol::endpoint ep(socket_path);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    acceptor_.listen();
    accept();
}

void EthHub::accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, stream_protocol::socket sock) {
        if (ec) {
            return;
        }
        if (conns_.size() >= kMaxConns) {
            ++stats_.conns_refused;
            if (log_ && log_->allow("eth-conns")) {
                log_->warn("eth", "{} connections already: refusing another", kMaxConns);
            }
            boost::system::error_code ignored;
            sock.close(ignored);
            accept();
            return;
        }
        auto c = std::make_shared<FramedConn>(
            std::move(sock), [this](FramedConn &from, Frame f) { on_frame(from, std::move(f)); },
            [this](FramedConn &cl) { on_close(cl); });
        c->set_log(log_, "eth");
        conns_.emplace(c->id(), c);
        c->start();
        accept();
    });
}

void EthHub::on_close(FramedConn &c) {
    const uint64_t id = c.id();
    for (auto it = macs_.begin(); it != macs_.end();) {
        it = it->second == id ? macs_.erase(it) : std::next(it);
    }
    conns_.erase(id);
}

void EthHub::learn(const Mac &src, uint64_t conn) {
    auto it = macs_.find(src);
    if (it != macs_.end()) {
        it->second = conn;
        return;
    }
    if (macs_.size() >= kMaxMacs) {
        ++stats_.macs_refused;
        if (log_ && log_->allow("eth-macs")) {
            log_->warn("eth", "MAC table full ({} addresses): {:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} not learned",
                       kMaxMacs, src[0], src[1], src[2], src[3], src[4], src[5]);
        }
        return;
    }
    macs_.emplace(src, conn);
}

void EthHub::on_frame(FramedConn &from, Frame f) {
    if (f->size() < 14) {
        return;
    }
    ++stats_.frames;
    stats_.bytes += f->size();
    Mac dst, src;
    std::copy_n(f->begin(), 6, dst.begin());
    std::copy_n(f->begin() + 6, 6, src.begin());
    if (!(src[0] & 1)) {
        learn(src, from.id());
    }
    if (!(dst[0] & 1)) {
        auto it = macs_.find(dst);
        if (it != macs_.end()) {
            auto c = conns_.find(it->second);
            if (c != conns_.end() && c->first != from.id()) {
                c->second->send(std::move(f));
            }
            return;
        }
    }
    ++stats_.flooded;
    for (auto &[id, c] : conns_) {
        if (id != from.id()) {
            c->send(f);
        }
    }
}

}  // namespace fabric
