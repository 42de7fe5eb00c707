// What the switch's own files share about one packet: its ingress record
// and the verdict the capture shows (switch.cpp, switch_egress.cpp).
#pragma once

#include <string>

#include <fmt/format.h>

#include "switch.h"

namespace fabric {

// What happened to one ingress packet.
struct IbSwitch::Verdict {
    Drop drop = Drop::None;
    const char *detail = nullptr;
    ForwardingTables::PortSet out;
    ForwardingTables::PortSet lost;
    bool local = false;

    std::string str() const {
        std::string s;
        if (drop != Drop::None) {
            s = fmt::format("drop={}", drop_name(drop));
        } else {
            if (out.any()) {
                s = "fwd=";
                bool first = true;
                for (unsigned p = 1; p < ForwardingTables::kMaxPorts; ++p) {
                    if (out.test(p)) {
                        fmt::format_to(std::back_inserter(s), "{}{}{}", first ? "" : ",", p,
                                       lost.test(p) ? "(lost)" : "");
                        first = false;
                    }
                }
            }
            if (local) {
                s += s.empty() ? "local" : " local";
            }
            if (s.empty()) {
                s = "consumed";
            }
        }
        if (detail && *detail) {
            fmt::format_to(std::back_inserter(s), " [{}]", detail);
        }
        return s;
    }
};

// One packet entering the switch, from a port or from the management port.
struct IbSwitch::Ingress {
    uint8_t port = 0;
    bool originated = false;
    uint64_t id = 0;
    uint8_t flags = 0;
    Frame frame;  // the link frame as it arrived (forwarded unchanged)
    std::span<const uint8_t> pkt;
    iba::PacketView v;
};

}  // namespace fabric
