#include "control.h"

#include <charconv>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "ib_fabric.h"

namespace fabric {

namespace {

std::vector<std::string> split(const std::string &line) {
    std::istringstream in(line);
    std::vector<std::string> w;
    std::string s;
    while (in >> s) {
        w.push_back(s);
    }
    return w;
}

bool parse_double(const std::string &s, double &out) {
    const char *b = s.data(), *e = s.data() + s.size();
    auto [p, ec] = std::from_chars(b, e, out);
    return ec == std::errc{} && p == e;
}

bool parse_u32(const std::string &s, uint32_t &out) {
    const char *b = s.data(), *e = s.data() + s.size();
    auto [p, ec] = std::from_chars(b, e, out);
    return ec == std::errc{} && p == e;
}

constexpr const char *kHelp =
    "ports\n"
    "link PORT down|up\n"
    "drop PORT PERCENT [all|requests]\n"
    "corrupt PORT PERCENT\n"
    "delay PORT MICROSECONDS\n"
    "sm restart\n"
    "sm status\n"
    "groups\n"
    "stats\n"
    "help\n";

}  // namespace

ControlCommands::ControlCommands(IbFabric *fabric, std::function<std::string()> extra_stats)
    : fabric_(fabric), extra_stats_(std::move(extra_stats)) {}

namespace {

// The ports a PORT argument names: one number or "all".
bool port_list(const IbSwitch &sw, const std::string &arg, std::vector<uint8_t> &out) {
    if (arg == "all") {
        for (uint8_t k = 1; k <= sw.num_ports(); ++k) {
            out.push_back(k);
        }
        return true;
    }
    uint32_t n = 0;
    if (!parse_u32(arg, n) || n < 1 || n > sw.num_ports()) {
        return false;
    }
    out.push_back(static_cast<uint8_t>(n));
    return true;
}

std::string bad_port(const IbSwitch &sw, const std::string &arg) {
    return fmt::format("error bad port '{}' (1..{} or all)\n", arg, sw.num_ports());
}

}  // namespace

std::string ControlCommands::execute(const std::string &line) {
    const auto w = split(line);
    if (w.empty()) {
        return "error empty command\n";
    }
    const std::string &cmd = w[0];
    if (cmd == "help") {
        return std::string(kHelp) + "ok\n";
    }
    if (cmd == "stats" && w.size() == 1) {
        std::string s = fabric_ ? fabric_->stats_text() : std::string();
        if (extra_stats_) {
            s += extra_stats_();
        }
        return s + "ok\n";
    }
    if (!fabric_) {
        return "error no InfiniBand switch (start with --ib-socket-dir)\n";
    }
    if (cmd == "ports" && w.size() == 1) {
        return fabric_->ports_text() + "ok\n";
    }
    if (cmd == "groups" && w.size() == 1) {
        if (!fabric_->sa()) {
            return "error no SA (started with --no-sm)\n";
        }
        return fabric_->groups_text() + "ok\n";
    }
    if (cmd == "link" && w.size() == 3) {
        return link(w);
    }
    if ((cmd == "drop" || cmd == "corrupt" || cmd == "delay") && (w.size() == 3 || (cmd == "drop" && w.size() == 4))) {
        return fault(w);
    }
    if (cmd == "sm" && w.size() == 2) {
        return sm(w[1]);
    }
    return fmt::format("error unknown command '{}' (try help)\n", line.size() > 80 ? line.substr(0, 80) : line);
}

// link PORT up|down
std::string ControlCommands::link(const std::vector<std::string> &w) {
    IbSwitch &sw = fabric_->sw();
    std::vector<uint8_t> ps;
    if (!port_list(sw, w[1], ps)) {
        return bad_port(sw, w[1]);
    }
    if (w[2] != "up" && w[2] != "down") {
        return "error expected up or down\n";
    }
    for (uint8_t p : ps) {
        sw.set_admin(p, w[2] == "up");
    }
    return "ok\n";
}

// drop PORT PCT [all|requests], corrupt PORT PCT, delay PORT US
std::string ControlCommands::fault(const std::vector<std::string> &w) {
    IbSwitch &sw = fabric_->sw();
    std::vector<uint8_t> ps;
    if (!port_list(sw, w[1], ps)) {
        return bad_port(sw, w[1]);
    }
    FaultInjector &f = sw.faults();
    if (w[0] == "delay") {
        uint32_t us = 0;
        if (!parse_u32(w[2], us) || us > FaultInjector::kMaxDelayUs) {
            return fmt::format("error bad delay '{}' (0..{} microseconds)\n", w[2], FaultInjector::kMaxDelayUs);
        }
        for (uint8_t p : ps) {
            f.set_delay(p, us);
        }
        return "ok\n";
    }
    double pct = 0;
    if (!parse_double(w[2], pct) || !(pct >= 0 && pct <= 100)) {
        return fmt::format("error bad percentage '{}' (0..100)\n", w[2]);
    }
    DropScope scope = DropScope::All;
    if (w.size() == 4 && !parse_drop_scope(w[3], scope)) {
        return fmt::format("error bad drop scope '{}' (all or requests)\n", w[3]);
    }
    for (uint8_t p : ps) {
        w[0] == "drop" ? f.set_drop(p, pct, scope) : f.set_corrupt(p, pct);
    }
    return "ok\n";
}

// sm restart|status
std::string ControlCommands::sm(const std::string &what) {
    SubnetManager *sm = fabric_->sm();
    if (!sm) {
        return "error no SM (started with --no-sm)\n";
    }
    if (what == "restart") {
        sm->restart();
        return "ok\n";
    }
    if (what == "status") {
        return sm->status() + "ok\n";
    }
    return "error expected 'sm restart' or 'sm status'\n";
}

// One client connection: reads lines, writes replies in order.
class ControlServer::Session : public std::enable_shared_from_this<ControlServer::Session> {
  public:
    Session(boost::asio::local::stream_protocol::socket s, ControlCommands &cmds)
        : sock_(std::move(s)), cmds_(cmds), buf_(kMaxLine) {}
    void start() { read(); }

  private:
    void read() {
        auto self = shared_from_this();
        boost::asio::async_read_until(sock_, buf_, '\n', [this, self](boost::system::error_code ec, size_t n) {
            if (ec) {
                if (ec == boost::asio::error::not_found) {
                    reply("error line too long\n", true);
                }
                return;
            }
            std::string line(boost::asio::buffers_begin(buf_.data()),
                             boost::asio::buffers_begin(buf_.data()) + static_cast<ptrdiff_t>(n));
            buf_.consume(n);
            while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
                line.pop_back();
            }
            std::string out;
            try {
                out = cmds_.execute(line);
            } catch (const std::exception &e) {
                reply(fmt::format("error internal: {}\n", e.what()), true);  // this session ends, not the daemon
                return;
            }
            reply(std::move(out), false);
        });
    }
    void reply(std::string text, bool close) {
        auto self = shared_from_this();
        auto out = std::make_shared<std::string>(std::move(text));
        boost::asio::async_write(sock_, boost::asio::buffer(*out),
                                 [this, self, out, close](boost::system::error_code ec, size_t) {
                                     if (!ec && !close) {
                                         read();
                                     }
                                 });
    }

    boost::asio::local::stream_protocol::socket sock_;
    ControlCommands &cmds_;
    boost::asio::streambuf buf_;
};

ControlServer::ControlServer(boost::asio::io_context &io, const std::string &path, ControlCommands &cmds)
    : acceptor_(io), cmds_(cmds), path_(path) {
    ::unlink(path.c_str());
    boost::asio::local::stream_protocol::endpoint ep(path);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    acceptor_.listen();
    accept();
}

ControlServer::~ControlServer() {
    boost::system::error_code ec;
    acceptor_.close(ec);
    ::unlink(path_.c_str());
}

void ControlServer::accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, boost::asio::local::stream_protocol::socket s) {
        if (ec) {
            return;
        }
        std::make_shared<Session>(std::move(s), cmds_)->start();
        accept();
    });
}

}  // namespace fabric
