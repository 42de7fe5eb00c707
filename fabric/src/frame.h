// Frames of the device<->fabric link as the fabric passes them around:
// shared, immutable byte vectors. The format is iba/link.h's (the link
// library owns it); these wrap its encoders. The 4-byte length prefix
// belongs to FramedConn and is not part of a Frame.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "iba/link.h"

namespace fabric {

using Frame = std::shared_ptr<const std::vector<uint8_t>>;
using LinkFrameView = iba::link::FrameView;

// False if the frame is shorter than the link header.
inline bool parse_link_frame(std::span<const uint8_t> frame, LinkFrameView &out) {
    return iba::link::parse(frame, out);
}
Frame make_packet_frame(uint64_t packet_id, std::span<const uint8_t> packet, uint8_t flags = 0);
Frame make_link_state_frame(bool up);
// A hello as a device sends it (tests and the benchmark play devices).
Frame make_hello_frame(uint64_t node_guid, uint64_t port_guid, uint8_t port_num);

}  // namespace fabric
