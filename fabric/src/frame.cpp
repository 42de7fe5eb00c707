#include "frame.h"

#include "be.h"

namespace fabric {

bool parse_link_frame(std::span<const uint8_t> f, LinkFrameView &out) {
    if (f.size() < iba::link::kHeader) {
        return false;
    }
    out.type = f[0];
    out.flags = f[1];
    out.packet_id = hca::load_be64(&f[4]);
    out.body = f.subspan(iba::link::kHeader);
    return true;
}

namespace {
std::vector<uint8_t> header(uint8_t type, uint8_t flags, uint64_t id, size_t body) {
    std::vector<uint8_t> v(iba::link::kHeader + body);
    v[0] = type;
    v[1] = flags;
    hca::store_be64(&v[4], id);
    return v;
}
}  // namespace

Frame make_packet_frame(uint64_t packet_id, std::span<const uint8_t> packet, uint8_t flags) {
    auto v = header(iba::link::kPacket, flags, packet_id, packet.size());
    std::copy(packet.begin(), packet.end(), v.begin() + iba::link::kHeader);
    return std::make_shared<const std::vector<uint8_t>>(std::move(v));
}

Frame make_link_state_frame(bool up) {
    auto v = header(iba::link::kLinkState, 0, 0, 1);
    v[iba::link::kHeader] = up ? 1 : 0;
    return std::make_shared<const std::vector<uint8_t>>(std::move(v));
}

Frame make_hello_frame(uint64_t node_guid, uint64_t port_guid, uint8_t port_num) {
    auto v = header(iba::link::kHello, 0, 0, 17);
    hca::store_be64(&v[iba::link::kHeader], node_guid);
    hca::store_be64(&v[iba::link::kHeader + 8], port_guid);
    v[iba::link::kHeader + 16] = port_num;
    return std::make_shared<const std::vector<uint8_t>>(std::move(v));
}

}  // namespace fabric
