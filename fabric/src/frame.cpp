#include "frame.h"

namespace fabric {

namespace {
Frame share(std::vector<uint8_t> v) { return std::make_shared<const std::vector<uint8_t>>(std::move(v)); }
}  // namespace

Frame make_packet_frame(uint64_t packet_id, std::span<const uint8_t> packet, uint8_t flags) {
    return share(iba::link::packet_frame(packet_id, packet, flags));
}

Frame make_link_state_frame(bool up) { return share(iba::link::link_state_frame(up)); }

Frame make_hello_frame(uint64_t node_guid, uint64_t port_guid, uint8_t port_num) {
    return share(iba::link::hello_frame({.node_guid = node_guid, .port_guid = port_guid, .port_num = port_num}));
}

}  // namespace fabric
