// A fabric on a virtual clock with fake CAs on its ports, for the tests.
#pragma once

#include <memory>
#include <vector>

#include "event_loop.h"
#include "fake_ca.h"
#include "iba/packet.h"
#include "ib_fabric.h"
#include "log.h"

namespace fabric::test {

inline FabricOptions test_options(uint8_t ports = 4, bool sm = true) {
    FabricOptions o;
    o.sw.num_ports = ports;
    o.sm = sm;
    return o;
}

// A UD SEND (QPN 0x42, payload bytes of 0x5a) from LID 2 to dlid.
inline std::vector<uint8_t> ud_send(uint16_t dlid, size_t payload) {
    iba::PacketSpec s;
    s.dlid = dlid;
    s.slid = 2;
    s.opcode = iba::kUd | iba::kSendOnly;
    s.dqpn = 0x42;
    uint8_t deth[8] = {};
    return iba::build(s, deth, std::vector<uint8_t>(payload, 0x5a));
}

inline FakeCa::Options ca_options(uint8_t n) {
    FakeCa::Options o;
    o.node_guid = 0x0002c90300a00000ull + uint64_t{n} * 0x10;
    o.port_guid = o.node_guid + 1;
    o.description = "fake CA " + std::to_string(n);
    return o;
}

struct TestFabric {
    ManualLoop loop;
    Log log;
    std::unique_ptr<IbFabric> fabric;
    std::vector<std::unique_ptr<FakeCa>> cas;  // cas[k - 1] on switch port k

    explicit TestFabric(const FabricOptions &opt = test_options()) {
        log.capture_in_memory();
        log.set_level(Log::Level::Debug);
        fabric = std::make_unique<IbFabric>(loop, log, opt);
        for (uint8_t k = 1; k <= opt.sw.num_ports; ++k) {
            cas.push_back(std::make_unique<FakeCa>(fabric->sw(), loop, k, ca_options(k)));
        }
    }
    ~TestFabric() {
        cas.clear();
        fabric.reset();
    }
    IbSwitch &sw() { return fabric->sw(); }
    SubnetManager &sm() { return *fabric->sm(); }
    SubnetAdmin &sa() { return *fabric->sa(); }
    FakeCa &ca(uint8_t port) { return *cas.at(port - 1u); }
    // Runs the virtual clock forward.
    void run(uint64_t us = 100000) { loop.advance(us); }
    // Starts the fabric with CAs on the given ports and lets the SM work.
    void bring_up(std::initializer_list<uint8_t> ports, uint64_t us = 200000) {
        for (uint8_t p : ports) {
            ca(p).connect();
        }
        fabric->start();
        run(us);
    }
};

}  // namespace fabric::test
