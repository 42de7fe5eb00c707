#include "ib_enums.h"

#include <cctype>
#include <charconv>

#include <fmt/format.h>

namespace fabric {

const char *port_state_name(PortState s) {
    switch (s) {
    case PortState::Nop: return "NoChange";
    case PortState::Down: return "Down";
    case PortState::Init: return "Init";
    case PortState::Armed: return "Armed";
    case PortState::Active: return "Active";
    }
    return "?";
}

const char *phys_state_name(PhysState s) {
    switch (s) {
    case PhysState::Nop: return "NoChange";
    case PhysState::Sleep: return "Sleep";
    case PhysState::Polling: return "Polling";
    case PhysState::Disabled: return "Disabled";
    case PhysState::Training: return "Training";
    case PhysState::LinkUp: return "LinkUp";
    }
    return "?";
}

std::optional<uint8_t> mtu_code(unsigned bytes) {
    for (uint8_t c = kMtu256; c <= kMtu4096; ++c) {
        if (mtu_bytes(c) == bytes) {
            return c;
        }
    }
    return std::nullopt;
}

unsigned link_lanes(uint8_t width) {
    switch (width) {
    case 1: return 1;
    case 2: return 4;
    case 4: return 8;
    case 8: return 12;
    default: return 0;
    }
}

unsigned lane_mbps(uint8_t speed) {
    switch (speed) {
    case 1: return 2500;
    case 2: return 5000;
    case 4: return 10000;
    default: return 0;
    }
}

namespace {
// IBA table 205 (static rate codes) as Gb/s * 1000.
constexpr struct {
    uint8_t code;
    unsigned mbps;
} kRates[] = {
    {2, 2500},   {3, 10000},  {4, 30000},  {5, 5000},    {6, 20000},   {7, 40000},
    {8, 60000},  {9, 80000},  {10, 120000}, {11, 14000}, {12, 56000},  {13, 112000},
    {14, 168000}, {15, 25000}, {16, 100000}, {17, 200000}, {18, 300000},
};
}  // namespace

unsigned rate_mbps(uint8_t code) {
    for (const auto &r : kRates) {
        if (r.code == code) {
            return r.mbps;
        }
    }
    return 0;
}

uint8_t rate_code(LinkRate r) {
    const unsigned mbps = link_lanes(r.width) * lane_mbps(r.speed);
    for (const auto &e : kRates) {
        if (e.mbps == mbps) {
            return e.code;
        }
    }
    return 2;  // 2.5 Gb/s: the slowest, never wrong for a path
}

std::optional<LinkRate> parse_link_rate(std::string_view s) {
    std::string t;
    for (char c : s) {
        t.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    const auto x = t.find('x');
    if (x == std::string::npos || x == 0) {
        return std::nullopt;
    }
    unsigned lanes = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + x, lanes);
    if (ec != std::errc{} || p != t.data() + x) {
        return std::nullopt;
    }
    LinkRate r;
    switch (lanes) {
    case 1: r.width = 1; break;
    case 4: r.width = 2; break;
    case 8: r.width = 4; break;
    case 12: r.width = 8; break;
    default: return std::nullopt;
    }
    std::string_view sp = std::string_view(t).substr(x + 1);
    if (!sp.empty() && sp.front() == '-') {
        sp.remove_prefix(1);
    }
    if (sp == "sdr") {
        r.speed = 1;
    } else if (sp == "ddr") {
        r.speed = 2;
    } else if (sp == "qdr") {
        r.speed = 4;
    } else {
        return std::nullopt;
    }
    return r;
}

std::string link_rate_name(LinkRate r) {
    const char *sp = r.speed == 1 ? "SDR" : r.speed == 2 ? "DDR" : r.speed == 4 ? "QDR" : "?";
    return fmt::format("{}x{}", link_lanes(r.width), sp);
}

}  // namespace fabric
