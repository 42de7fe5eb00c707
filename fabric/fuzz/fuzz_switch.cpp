// libFuzzer target: arbitrary packets into the switch's ports (and its
// management port), through the parser, forwarding, the directed-route
// rules, the SMA, the SM's response handling and the SA with RMPP.  A
// fabric with an SM and three fake CAs is set up once; inputs accumulate
// state (groups, transfers), as a long-running fabric does.
//
// Input: records of [port][flags][length (2 bytes)][packet].  flags bit 0:
// repair the packet (LRH PktLen, GRH PayLen, ICRC, VCRC) so it gets past
// the CRC checks; bit 1: advance the clock 2 s afterwards (timeouts); bit 2:
// the link frame says the packet carries no CRCs (iba::link::kNoCrcs), as
// the HCA model sends them.
#include <cstdint>
#include <cstring>
#include <memory>

#include "fake_ca.h"
#include "ib_fabric.h"

using namespace fabric;

namespace {

struct World {
    ManualLoop loop;
    Log log{"/dev/null"};
    std::unique_ptr<IbFabric> fabric;
    std::vector<std::unique_ptr<test::FakeCa>> cas;
    World() {
        log.set_level(Log::Level::Warn);
        FabricOptions o;
        o.sw.num_ports = 4;
        o.sm_cfg.tid_seed = 1;  // reproducible runs: the SM's TIDs and key from a fixed seed
        fabric = std::make_unique<IbFabric>(loop, log, o);
        for (uint8_t k = 1; k <= 3; ++k) {
            test::FakeCa::Options co;
            co.node_guid = 0x0002c90300a00000ull + k * 0x10;
            co.port_guid = co.node_guid + 1;
            co.record = false;
            cas.push_back(std::make_unique<test::FakeCa>(fabric->sw(), loop, k, co));
            cas.back()->connect();
        }
        fabric->start();
        loop.advance(200000);
    }
};

void repair(std::vector<uint8_t> &p) {
    if (p.size() < 8 + 12 + 6 || (p.size() - 2) % 4) {
        return;
    }
    hca::store_be16(&p[2], static_cast<uint16_t>((p[2] & 0xf8) << 8 | ((p.size() - 2) / 4 & 0x7ff)));
    if ((p[1] & 3) == iba::kLnhGlobal && p.size() >= 8 + 40 + 12 + 6) {
        hca::store_be16(&p[8 + 4], static_cast<uint16_t>(p.size() - 8 - 40 - 2));
    }
    iba::fill_crcs(p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static World w;
    size_t off = 0;
    while (off + 4 <= size) {
        const uint8_t port = data[off] % 5;
        const uint8_t flags = data[off + 1];
        size_t len = static_cast<size_t>(data[off + 2]) << 8 | data[off + 3];
        off += 4;
        len = std::min(len, size - off);
        std::vector<uint8_t> pkt(data + off, data + off + len);
        off += len;
        if (flags & 1) {
            // Round to the LRH's 4-byte words plus the VCRC.
            while (pkt.size() < 26 || (pkt.size() - 2) % 4) {
                pkt.push_back(0);
            }
            repair(pkt);
        }
        if (port == 0) {
            w.fabric->sw().send_local(std::move(pkt));
        } else if (port == 4) {
            // Port 4 has no device: the switch refuses frames there.
            w.fabric->sw().receive(4, make_packet_frame(off, pkt));
        } else {
            w.cas[port - 1u]->send_raw(std::move(pkt), off, (flags & 4) ? iba::link::kNoCrcs : 0);
        }
        w.loop.advance((flags & 2) ? 2000000 : 1000);
    }
    return 0;
}
