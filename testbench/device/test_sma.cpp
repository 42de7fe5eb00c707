// The SMA and PMA behind MAD_IFC: every attribute, Set rules, port events,
// M_Key, unsupported attributes.
#include <catch2/catch.hpp>

#include <cstring>

#include "be.h"
#include "driver.h"
#include "iba/mad.h"

using namespace hcatest;
namespace mad = iba::mad;

namespace {

using Mad = std::array<uint8_t, 256>;

Mad smp(uint8_t cls, uint8_t method, uint16_t attr, uint32_t mod) {
    Mad m{};
    m[0] = 1;
    m[1] = cls;
    m[2] = 1;
    m[3] = method;
    hca::store_be64(m.data() + 8, 0x1234);
    hca::store_be16(m.data() + 16, attr);
    hca::store_be32(m.data() + 20, mod);
    return m;
}

struct Setup {
    Bench b;
    Driver d{b};
    uint32_t uar = 0;
    EqHandle async;
    Setup() {
        d.bring_up();
        uar = d.alloc_uar();
        // An async EQ subscribed to port changes.
        async = d.create_eq(6, 2, {uint64_t{1} << hca::kEventPortChange, 0, 0, 0}, uar);
    }
    uint16_t get(uint8_t cls, uint16_t attr, uint32_t mod, Mad &resp) {
        auto r = d.mad_ifc(smp(cls, mad::kGet, attr, mod), resp);
        REQUIRE(r.status == 0);
        CHECK(resp[3] == 0x81);
        CHECK(hca::load_be64(resp.data() + 8) == 0x1234);  // TID echoed
        return hca::load_be16(resp.data() + 4) & 0x7fff;
    }
    std::vector<uint8_t> port_events() {
        std::vector<uint8_t> v;
        while (auto e = d.next_eqe(async)) {
            if ((*e)[1] == hca::kEventPortChange) {
                CHECK((*e)[0x28] >> 4 == 1);  // port number
                v.push_back((*e)[3]);
            }
        }
        d.eq_doorbell(async, true);
        b.pump();
        return v;
    }
};

}  // namespace

TEST_CASE("SMA NodeInfo, NodeDescription, GUIDInfo, PKeyTable", "[sma]") {
    Setup s;
    Mad r;
    CHECK(s.get(mad::kClassSubnLid, mad::kAttrNodeInfo, 0, r) == 0);
    const uint8_t *d = r.data() + 64;
    CHECK(d[0] == 1);   // BaseVersion
    CHECK(d[2] == 1);   // CA
    CHECK(d[3] == 1);   // one port
    CHECK(hca::load_be64(d + 12) == s.b.dev.node_guid());
    CHECK(hca::load_be16(d + 28) == 128);    // PartitionCap
    CHECK(hca::load_be16(d + 30) == 0x1017);
    CHECK(d[36] == 1);
    CHECK((d[37] << 16 | d[38] << 8 | d[39]) == 0x0002c9);  // Mellanox OUI
    CHECK(s.get(mad::kClassSubnDr, mad::kAttrNodeDescription, 0, r) == 0);
    CHECK(std::string(reinterpret_cast<const char *>(r.data() + 64)).rfind("MT4119", 0) == 0);
    CHECK(s.get(mad::kClassSubnLid, mad::kAttrGuidInfo, 0, r) == 0);
    CHECK(hca::load_be64(r.data() + 64) == s.b.dev.node_guid());
    CHECK(s.get(mad::kClassSubnLid, mad::kAttrPKeyTable, 0, r) == 0);
    CHECK(hca::load_be16(r.data() + 64) == 0xffff);
    CHECK(hca::load_be16(r.data() + 66) == 0);
    CHECK(s.get(mad::kClassSubnLid, mad::kAttrPKeyTable, 4, r) == mad::kStatusInvalidField);
    // Set PKeyTable: entry 1 = 0x8001; a PKEY event follows.
    auto set = smp(mad::kClassSubnLid, mad::kSet, mad::kAttrPKeyTable, 0);
    hca::store_be16(set.data() + 64, 0xffff);
    hca::store_be16(set.data() + 66, 0x8001);
    REQUIRE(s.d.mad_ifc(set, r).status == 0);
    CHECK(hca::load_be16(r.data() + 66) == 0x8001);
    CHECK(s.port_events() == std::vector<uint8_t>{hca::kPortEventPkey});
    CHECK(s.b.dev.port1.pkey_ok(0x0001));  // limited member matches a full member
}

TEST_CASE("SMA PortInfo: defaults, Set LID/SM LID, Init->Armed->Active with events", "[sma]") {
    Setup s;
    Mad r;
    REQUIRE(s.get(mad::kClassSubnLid, mad::kAttrPortInfo, 1, r) == 0);
    const uint8_t *d = r.data() + 64;
    CHECK((d[32] & 0xf) == 2);       // Init
    CHECK((d[33] >> 4) == 5);        // LinkUp
    CHECK((d[41] & 0xf) == 5);       // MTUCap 4096
    CHECK(d[50] == 8);               // GUIDCap
    CHECK(hca::load_be64(d + 8) == 0xfe80000000000000ull);
    CHECK(s.get(mad::kClassSubnLid, mad::kAttrPortInfo, 2, r) == mad::kStatusInvalidField);

    // Active straight from Init is refused.
    auto set = smp(mad::kClassSubnLid, mad::kSet, mad::kAttrPortInfo, 1);
    set[64 + 32] = 4;
    REQUIRE(s.d.mad_ifc(set, r).status == 0);
    CHECK((hca::load_be16(r.data() + 4) & 0x7fff) == mad::kStatusInvalidField);
    CHECK(s.b.dev.port1.state() == 2);

    s.d.activate_port(7, 3);
    CHECK(s.b.dev.port1.active());
    CHECK(s.b.dev.port1.lid() == 7);
    CHECK(s.b.dev.port1.sm_lid() == 3);
    CHECK(s.port_events() == std::vector<uint8_t>{hca::kPortEventLid, hca::kPortEventActive});

    // Client reregistration.
    set = smp(mad::kClassSubnLid, mad::kSet, mad::kAttrPortInfo, 1);
    hca::store_be16(set.data() + 64 + 16, 7);
    hca::store_be16(set.data() + 64 + 18, 3);
    set[64 + 51] = 0x80 | 18;
    REQUIRE(s.d.mad_ifc(set, r).status == 0);
    CHECK(s.port_events() == std::vector<uint8_t>{hca::kPortEventClientRereg});

    // Link loss: DOWN event, and back to Init when the link returns.
    s.b.dev.port_link(1, false);
    CHECK(s.port_events() == std::vector<uint8_t>{hca::kPortEventDown});
    s.b.dev.port_link(1, true);
    CHECK(s.b.dev.port1.state() == 2);
}

TEST_CASE("SMA rejects what it does not implement and honours M_Key", "[sma]") {
    Setup s;
    Mad r;
    // Mellanox ExtendedPortInfo answers (no FDR10: LinkSpeedActive 0).
    CHECK(s.get(mad::kClassSubnLid, mad::kAttrMlnxExtPortInfo, 1, r) == mad::kStatusOk);
    CHECK(r[mad::smp::kData + 15] == 0);
    CHECK(s.get(mad::kClassSubnLid, mad::kAttrRandomForwardingTable, 0, r) == mad::kStatusUnsupportedMethodAttr);
    CHECK(s.get(mad::kClassSubnLid, mad::kAttrSwitchInfo, 0, r) == mad::kStatusUnsupportedMethodAttr);
    auto bad = smp(mad::kClassSubnLid, 0x13, mad::kAttrNodeInfo, 0);
    REQUIRE(s.d.mad_ifc(bad, r).status == 0);
    CHECK((hca::load_be16(r.data() + 4) & 0x7fff) == mad::kStatusUnsupportedMethod);
    auto ver = smp(mad::kClassSubnLid, mad::kGet, mad::kAttrNodeInfo, 0);
    ver[2] = 2;
    REQUIRE(s.d.mad_ifc(ver, r).status == 0);
    CHECK((hca::load_be16(r.data() + 4) & 0x7fff) == mad::kStatusBadVersion);

    // Set an M_Key with protection 2; then SMPs without it are discarded
    // unless the driver asks to ignore the key (MAD_IFC op_mod bit 0).
    auto set = smp(mad::kClassSubnLid, mad::kSet, mad::kAttrPortInfo, 1);
    hca::store_be64(set.data() + 64, 0xfeedf00d);
    set[64 + 34] = 2 << 6;
    REQUIRE(s.d.mad_ifc(set, r).status == 0);
    auto get = smp(mad::kClassSubnLid, mad::kGet, mad::kAttrPortInfo, 1);
    CHECK(s.d.mad_ifc(get, r, 0).status == 0x30);  // discarded
    CHECK(s.d.mad_ifc(get, r, 1).status == 0);
    hca::store_be64(get.data() + 24, 0xfeedf00d);
    CHECK(s.d.mad_ifc(get, r, 0).status == 0);
}

TEST_CASE("PMA ClassPortInfo, PortCounters and PortCountersExtended with reset", "[sma][pma]") {
    Setup s;
    s.b.dev.port1.counters().xmit_pkts = 5;
    s.b.dev.port1.counters().xmit_data = 4000;
    Mad r;
    CHECK(s.get(mad::kClassPerf, mad::perf::kClassPortInfo, 0, r) == 0);
    CHECK((hca::load_be16(r.data() + 64 + 2) & (1u << 9)) != 0);  // extended counters
    auto get = smp(mad::kClassPerf, mad::kGet, mad::perf::kPortCounters, 0);
    get[64 + 1] = 1;
    REQUIRE(s.d.mad_ifc(get, r).status == 0);
    CHECK(hca::load_be32(r.data() + 64 + 24) == 1000);  // data in 4-byte words
    CHECK(hca::load_be32(r.data() + 64 + 32) == 5);
    auto ext = smp(mad::kClassPerf, mad::kGet, mad::perf::kPortCountersExtended, 0);
    ext[64 + 1] = 1;
    REQUIRE(s.d.mad_ifc(ext, r).status == 0);
    CHECK(hca::load_be64(r.data() + 64 + 24) == 5);
    auto reset = smp(mad::kClassPerf, mad::kSet, mad::perf::kPortCounters, 0);
    reset[64 + 1] = 1;
    hca::store_be16(reset.data() + 64 + 2, 0xf000);
    REQUIRE(s.d.mad_ifc(reset, r).status == 0);
    CHECK(s.b.dev.port1.counters().xmit_pkts == 0);
    get[64 + 1] = 9;
    REQUIRE(s.d.mad_ifc(get, r).status == 0);
    CHECK((hca::load_be16(r.data() + 4) & 0x7fff) == mad::kStatusInvalidField);
}
