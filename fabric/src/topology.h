// A fabric of several switches, as a text file (`--topology FILE`):
//
//   # comments and blank lines are ignored
//   switch NAME [ports=N] [guid=G]          N 1..64 (default 8); G hex or decimal
//   link NAME:P NAME:P                      an inter-switch link in this daemon
//   remote NAME:P listen|connect HOST:PORT  an inter-switch link to another
//                                           hcasim-fabric over TCP
//   node NAME:P                             where the next VM is cabled: the
//                                           n-th node line is socket port<n>.sock
//
// The first switch holds the management port with the built-in SM and SA
// (LID 1).  A switch without a guid= gets --switch-guid plus its index.  A
// port is used at most once; node ports are the devices' link sockets.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fabric {

struct Topology {
    struct Switch {
        std::string name;
        uint8_t ports = 8;
        uint64_t guid = 0;  // 0: base GUID + index
    };
    struct Port {
        size_t sw = 0;
        uint8_t port = 0;
    };
    struct Link {
        Port a, b;
    };
    struct Remote {
        Port at;
        bool listen = false;
        std::string host;
        uint16_t tcp_port = 0;
    };
    std::vector<Switch> switches;
    std::vector<Link> links;
    std::vector<Remote> remotes;
    std::vector<Port> nodes;

    // One switch of `ports` ports, node n on port n (no --topology).
    static Topology single(uint8_t ports);
    // "leaf1 port 3" in messages.
    std::string port_name(const Port &p) const;
};

// The topology in text; nullopt with a message naming the line otherwise.
std::optional<Topology> parse_topology(std::string_view text, std::string &error);

}  // namespace fabric
