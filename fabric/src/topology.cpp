#include "topology.h"

#include <charconv>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace fabric {

namespace {

constexpr size_t kMaxSwitches = 64;

bool parse_uint(std::string_view s, uint64_t &out, int base = 10) {
    if (base == 0) {
        if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
            s.remove_prefix(2);
            base = 16;
        } else {
            base = 10;
        }
    }
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out, base);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

std::vector<std::string_view> words(std::string_view line) {
    std::vector<std::string_view> w;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) {
            ++i;
        }
        size_t j = i;
        while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') {
            ++j;
        }
        if (j > i) {
            w.push_back(line.substr(i, j - i));
        }
        i = j;
    }
    return w;
}

}  // namespace

Topology Topology::single(uint8_t ports) {
    Topology t;
    t.switches.push_back({"", ports, 0});
    for (uint8_t k = 1; k <= ports; ++k) {
        t.nodes.push_back({0, k});
    }
    return t;
}

std::string Topology::port_name(const Port &p) const {
    return fmt::format("{} port {}", switches.at(p.sw).name, p.port);
}

namespace {

// One file's parse: a line at a time, an error names its line.
class Parser {
  public:
    bool line(const std::vector<std::string_view> &w, std::string &why) {
        if (w[0] == "switch") {
            return switch_line(w, why);
        }
        if (w[0] == "link") {
            Topology::Link l;
            if (w.size() != 3) {
                why = "link SWITCH:PORT SWITCH:PORT";
                return false;
            }
            if (!port_ref(w[1], l.a, why) || !port_ref(w[2], l.b, why)) {
                return false;
            }
            t.links.push_back(l);
            return true;
        }
        if (w[0] == "remote") {
            return remote_line(w, why);
        }
        if (w[0] == "node") {
            Topology::Port p;
            if (w.size() != 2) {
                why = "node SWITCH:PORT";
                return false;
            }
            if (!port_ref(w[1], p, why)) {
                return false;
            }
            t.nodes.push_back(p);
            return true;
        }
        why = fmt::format("unknown keyword '{}' (switch, link, remote, node)", w[0]);
        return false;
    }

    Topology t;

  private:
    bool switch_line(const std::vector<std::string_view> &w, std::string &why) {
        if (w.size() < 2) {
            why = "switch needs a name";
            return false;
        }
        Topology::Switch s;
        s.name = std::string(w[1]);
        if (s.name.find(':') != std::string::npos || s.name.size() > 32) {
            why = fmt::format("bad switch name '{}' (at most 32 characters, no ':')", s.name);
            return false;
        }
        if (by_name_.count(s.name)) {
            why = fmt::format("switch '{}' declared twice", s.name);
            return false;
        }
        if (t.switches.size() >= kMaxSwitches) {
            why = fmt::format("more than {} switches", kMaxSwitches);
            return false;
        }
        for (size_t i = 2; i < w.size(); ++i) {
            uint64_t v = 0;
            if (w[i].starts_with("ports=") && parse_uint(w[i].substr(6), v) && v >= 1 && v <= 64) {
                s.ports = static_cast<uint8_t>(v);
            } else if (w[i].starts_with("guid=") && parse_uint(w[i].substr(5), v, 0) && v != 0) {
                s.guid = v;
            } else {
                why = fmt::format("bad switch option '{}' (ports=1..64, guid=G)", w[i]);
                return false;
            }
        }
        by_name_.emplace(s.name, t.switches.size());
        t.switches.push_back(std::move(s));
        return true;
    }

    bool remote_line(const std::vector<std::string_view> &w, std::string &why) {
        Topology::Remote r;
        if (w.size() != 4 || (w[2] != "listen" && w[2] != "connect")) {
            why = "remote SWITCH:PORT listen|connect HOST:PORT";
            return false;
        }
        if (!port_ref(w[1], r.at, why)) {
            return false;
        }
        r.listen = w[2] == "listen";
        const size_t colon = w[3].rfind(':');
        uint64_t p = 0;
        if (colon == std::string_view::npos || colon == 0 || !parse_uint(w[3].substr(colon + 1), p) || p > 65535 ||
            (!r.listen && p == 0)) {
            why = fmt::format("'{}' is not HOST:PORT", w[3]);
            return false;
        }
        r.host = std::string(w[3].substr(0, colon));
        r.tcp_port = static_cast<uint16_t>(p);
        t.remotes.push_back(std::move(r));
        return true;
    }

    // NAME:P of a declared switch, a port not used before.
    bool port_ref(std::string_view s, Topology::Port &out, std::string &why) {
        const size_t colon = s.rfind(':');
        uint64_t p = 0;
        if (colon == std::string_view::npos || !parse_uint(s.substr(colon + 1), p)) {
            why = fmt::format("'{}' is not SWITCH:PORT", s);
            return false;
        }
        auto it = by_name_.find(s.substr(0, colon));
        if (it == by_name_.end()) {
            why = fmt::format("no switch '{}' declared before", s.substr(0, colon));
            return false;
        }
        if (p < 1 || p > t.switches[it->second].ports) {
            why = fmt::format("switch '{}' has no port {}", it->first, p);
            return false;
        }
        out = {it->second, static_cast<uint8_t>(p)};
        if (!used_.insert({out.sw, out.port}).second) {
            why = fmt::format("{} is used twice", t.port_name(out));
            return false;
        }
        return true;
    }

    std::map<std::string, size_t, std::less<>> by_name_;
    std::set<std::pair<size_t, uint8_t>> used_;
};

}  // namespace

std::optional<Topology> parse_topology(std::string_view text, std::string &error) {
    Parser parser;
    unsigned lineno = 0;
    std::istringstream in{std::string(text)};
    std::string raw;
    while (std::getline(in, raw)) {
        ++lineno;
        std::string_view line = raw;
        if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
            line = line.substr(0, hash);
        }
        const auto w = words(line);
        std::string why;
        if (!w.empty() && !parser.line(w, why)) {
            error = fmt::format("line {}: {}", lineno, why);
            return std::nullopt;
        }
    }
    if (parser.t.switches.empty()) {
        error = "no switch declared";
        return std::nullopt;
    }
    return std::move(parser.t);
}

}  // namespace fabric
