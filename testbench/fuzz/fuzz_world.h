// Shared by the model's libFuzzer targets: a device brought up once through
// the fake host and reused across inputs.  Inputs put back what they
// change; the whole device is reset only when the fake guest memory (a bump
// allocator) runs low or an input changed the HCA's own state.
#pragma once

#include <cstdint>
#include <vector>

#include "be.h"
#include "driver.h"
#include "iba/link.h"
#include "iba/packet.h"

namespace hcafuzz {

// Guest memory the fake host has handed out so far.
inline uint64_t host_used(hcatest::FakeHost &h) { return h.alloc(64, 64) - hcatest::FakeHost::kMemBase; }

// A fresh device: reset, out of the initializing window, bring-up as
// mlx5_core does it, link up.
inline void fresh_device(hcatest::Bench &b, hcatest::Driver &d) {
    b.host.free_all();
    b.host.tx.clear();
    b.host.msix.clear();
    b.dev.reset();
    b.advance(hca::InitSeg::kInitDelayNs);
    b.dev.port_link(1, true);
    d.bring_up();
}

// An IBA packet into port 1 as a link frame, then the device runs.
inline void wire_rx(hcatest::Bench &b, const std::vector<uint8_t> &pkt, uint64_t id = 1) {
    std::vector<uint8_t> frame(iba::link::kHeader, 0);
    frame[0] = iba::link::kPacket;
    hca::store_be64(frame.data() + 4, id);
    frame.insert(frame.end(), pkt.begin(), pkt.end());
    b.dev.port_rx(1, frame.data(), frame.size());
    b.pump();
}

// Puts LRH PktLen, GRH PayLen, ICRC and VCRC right after bytes of a packet
// were changed, so the change gets past the CRC checks.
inline void repair(std::vector<uint8_t> &p) {
    while (p.size() < 8 + 12 + 6 || (p.size() - 2) % 4) {
        p.push_back(0);
    }
    hca::store_be16(&p[2], static_cast<uint16_t>((p[2] & 0xf8) << 8 | ((p.size() - 2) / 4 & 0x7ff)));
    if ((p[1] & 3) == iba::kLnhGlobal && p.size() >= 8 + 40 + 12 + 6) {
        hca::store_be16(&p[8 + 4], static_cast<uint16_t>(p.size() - 8 - 40 - 2));
    }
    iba::fill_crcs(p);
}

}  // namespace hcafuzz
