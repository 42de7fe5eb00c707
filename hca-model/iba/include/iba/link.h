// The link between an HCA port and the fabric daemon: a unix stream socket
// carrying frames of a 4-byte big-endian length and this 12-byte header,
// followed by the body.  A packet keeps the id its sender gave it across the
// switch, so the device traces of both ends and the fabric capture name the
// same packet with the same number.
#pragma once

#include <cstdint>

namespace iba::link {

inline constexpr size_t kHeader = 12;

enum Type : uint8_t {
    kPacket = 1,     // body: one IBA packet, LRH to VCRC
    kHello = 2,      // device -> fabric: node GUID (8), port GUID (8), port number (1)
    kLinkState = 3,  // fabric -> device: body[0] = 1 physical link up, 0 down
};

// Header layout: type (1), flags (1), reserved (2), packet id (8, big-endian).
struct Header {
    uint8_t type;
    uint8_t flags;
    uint16_t reserved;
    uint64_t packet_id;
};

}  // namespace iba::link
