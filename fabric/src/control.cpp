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
    "link PORT down|up|retrain\n"
    "link PORT flap MILLISECONDS\n"
    "drop PORT PERCENT [all|requests]\n"
    "corrupt PORT PERCENT\n"
    "delay PORT MICROSECONDS\n"
    "duplicate PORT PERCENT\n"
    "reorder PORT PERCENT\n"
    "partition PORTS PORTS [off]\n"
    "partition clear\n"
    "sm restart|stop|start|status\n"
    "sm rereg|lid PORT\n"
    "sm pkeys PORT PKEY[,PKEY...]\n"
    "groups\n"
    "stats\n"
    "help\n"
    "(link and the packet faults: PORT may be SWITCH:PORT of a topology's switch)\n";

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

// The items of a comma-separated list ("1,3,4"; "" is one empty item):
// at most max + 1, so that a caller can tell a list that is too long.
std::vector<std::string> comma_items(const std::string &arg, size_t max) {
    std::vector<std::string> items;
    size_t b = 0;
    while (b <= arg.size() && items.size() <= max) {
        const size_t e = std::min(arg.find(',', b), arg.size());
        items.push_back(arg.substr(b, e - b));
        b = e + 1;
    }
    return items;
}

// The ports a side of a partition names: "1,3,4" or one port.
bool port_set(const IbSwitch &sw, const std::string &arg, std::vector<uint8_t> &out) {
    const auto items = comma_items(arg, 255);
    if (items.size() > 255) {
        return false;
    }
    for (const std::string &item : items) {
        uint32_t n = 0;
        if (!parse_u32(item, n) || n < 1 || n > sw.num_ports()) {
            return false;
        }
        out.push_back(static_cast<uint8_t>(n));
    }
    return !out.empty();
}

std::string bad_port(const IbSwitch &sw, const std::string &arg) {
    return fmt::format("error bad port '{}' (1..{} or all)\n", arg, sw.num_ports());
}

// The switch a PORT argument is on: SWITCH:PORT names a switch of the
// topology, a bare PORT the first switch.  Null if there is no such switch.
IbSwitch *switch_of(IbFabric &f, std::string &arg) {
    const size_t colon = arg.find(':');
    if (colon == std::string::npos) {
        return &f.sw();
    }
    const std::string name = arg.substr(0, colon);
    arg = arg.substr(colon + 1);
    for (size_t i = 0; i < f.num_switches(); ++i) {
        if (f.sw(i).config().name == name) {
            return &f.sw(i);
        }
    }
    return nullptr;
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
    if (cmd == "link" && (w.size() == 3 || (w.size() == 4 && w[2] == "flap"))) {
        return link(w);
    }
    if ((cmd == "drop" || cmd == "corrupt" || cmd == "delay" || cmd == "duplicate" || cmd == "reorder") &&
        (w.size() == 3 || (cmd == "drop" && w.size() == 4))) {
        return fault(w);
    }
    if (cmd == "partition" && w.size() >= 2 && w.size() <= 4) {
        return partition(w);
    }
    if (cmd == "sm" && w.size() == 4 && w[1] == "pkeys") {
        return pkeys(w);
    }
    if (cmd == "sm" && (w.size() == 2 || w.size() == 3)) {
        return sm(w);
    }
    return fmt::format("error unknown command '{}' (try help)\n", line.size() > 80 ? line.substr(0, 80) : line);
}

// link PORT up|down|retrain, link PORT flap MS
std::string ControlCommands::link(const std::vector<std::string> &w) {
    std::string arg = w[1];
    IbSwitch *swp = switch_of(*fabric_, arg);
    if (!swp) {
        return fmt::format("error no switch named '{}'\n", w[1].substr(0, w[1].find(':')));
    }
    IbSwitch &sw = *swp;
    std::vector<uint8_t> ps;
    if (!port_list(sw, arg, ps)) {
        return bad_port(sw, arg);
    }
    uint32_t ms = 0;
    if (w[2] == "flap" && (w.size() != 4 || !parse_u32(w[3], ms) || ms < 1 || ms > kMaxFlapMs)) {
        return fmt::format("error bad flap time '{}' (1..{} milliseconds)\n", w.size() == 4 ? w[3] : "",
                           kMaxFlapMs);
    }
    if (w[2] != "up" && w[2] != "down" && w[2] != "retrain" && w[2] != "flap") {
        return "error expected up, down, retrain or flap MS\n";
    }
    for (uint8_t p : ps) {
        if (w[2] == "retrain") {
            sw.retrain(p);
        } else if (w[2] == "flap") {
            sw.flap(p, ms);
        } else {
            sw.set_admin(p, w[2] == "up");
        }
    }
    return "ok\n";
}

// drop PORT PCT [all|requests], corrupt PORT PCT, delay PORT US
std::string ControlCommands::fault(const std::vector<std::string> &w) {
    std::string arg = w[1];
    IbSwitch *swp = switch_of(*fabric_, arg);
    if (!swp) {
        return fmt::format("error no switch named '{}'\n", w[1].substr(0, w[1].find(':')));
    }
    IbSwitch &sw = *swp;
    std::vector<uint8_t> ps;
    if (!port_list(sw, arg, ps)) {
        return bad_port(sw, arg);
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
        if (w[0] == "drop") {
            f.set_drop(p, pct, scope);
        } else if (w[0] == "corrupt") {
            f.set_corrupt(p, pct);
        } else if (w[0] == "duplicate") {
            f.set_duplicate(p, pct);
        } else {
            f.set_reorder(p, pct);
        }
    }
    return "ok\n";
}

// partition PORTS PORTS [off], partition clear: while on, no packet
// passes between a port of one side and a port of the other.
std::string ControlCommands::partition(const std::vector<std::string> &w) {
    IbSwitch &sw = fabric_->sw();
    FaultInjector &f = sw.faults();
    if (w.size() == 2) {
        if (w[1] != "clear") {
            return "error expected 'partition clear' or 'partition PORTS PORTS [off]'\n";
        }
        f.clear_cuts();
        return "ok\n";
    }
    std::vector<uint8_t> a, b;
    if (!port_set(sw, w[1], a)) {
        return bad_port(sw, w[1]);
    }
    if (!port_set(sw, w[2], b)) {
        return bad_port(sw, w[2]);
    }
    if (w.size() == 4 && w[3] != "off") {
        return "error expected 'off' after the two sides\n";
    }
    for (uint8_t x : a) {
        for (uint8_t y : b) {
            if (x == y) {
                return fmt::format("error port {} is on both sides\n", x);
            }
        }
    }
    for (uint8_t x : a) {
        for (uint8_t y : b) {
            f.set_cut(x, y, w.size() == 3);
        }
    }
    return "ok\n";
}

// sm pkeys PORT PKEY[,PKEY...]: the CA port's P_Key table, in index order.
std::string ControlCommands::pkeys(const std::vector<std::string> &w) {
    SubnetManager *sm = fabric_->sm();
    if (!sm) {
        return "error no SM (started with --no-sm)\n";
    }
    uint32_t port = 0;
    if (!parse_u32(w[2], port) || port < 1 || port > fabric_->sw().num_ports()) {
        return bad_port(fabric_->sw(), w[2]);
    }
    const auto items = comma_items(w[3], 32);
    if (items.size() > 32) {
        return "error at most 32 P_Keys (one block)\n";
    }
    std::vector<uint16_t> keys;
    for (const std::string &k : items) {
        uint32_t v = 0;
        const char *first = k.data() + (k.starts_with("0x") ? 2 : 0);
        auto [p, ec] = std::from_chars(first, k.data() + k.size(), v, 16);
        if (ec != std::errc{} || p != k.data() + k.size() || v > 0xffff) {
            return fmt::format("error bad P_Key '{}' (hex, e.g. 0xffff,0x8001)\n", k);
        }
        keys.push_back(static_cast<uint16_t>(v));
    }
    if (!sm->set_pkeys(static_cast<uint8_t>(port), std::move(keys))) {
        return fmt::format("error port {}: no Active CA port there (or the SM is stopped)\n", port);
    }
    return "ok\n";
}

// sm restart|stop|start|status, sm rereg PORT, sm lid PORT
std::string ControlCommands::sm(const std::vector<std::string> &w) {
    SubnetManager *sm = fabric_->sm();
    if (!sm) {
        return "error no SM (started with --no-sm)\n";
    }
    const std::string &what = w[1];
    if (w.size() == 3) {
        std::vector<uint8_t> ps;
        if (what != "rereg" && what != "lid") {
            return "error expected 'sm rereg PORT' or 'sm lid PORT'\n";
        }
        if (!port_list(fabric_->sw(), w[2], ps)) {
            return bad_port(fabric_->sw(), w[2]);
        }
        for (uint8_t p : ps) {
            if (what == "rereg") {
                sm->reregister(p);
            } else if (!sm->change_lid(p)) {
                return fmt::format("error port {}: no Active CA port there (or the SM is stopped)\n", p);
            }
        }
        return "ok\n";
    }
    if (what == "restart" || what == "start") {
        sm->restart();  // a (new) master SM sweeps and asks every port to reregister
        return "ok\n";
    }
    if (what == "stop") {
        sm->stop();
        return "ok\n";
    }
    if (what == "status") {
        return sm->status() + "ok\n";
    }
    return "error expected 'sm restart', 'sm stop', 'sm start', 'sm status', 'sm rereg PORT' or 'sm lid PORT'\n";
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
