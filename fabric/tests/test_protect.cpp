// The fabric protects itself from a guest: M_Key on the switch SMA (IBA
// 14.2.4) with the built-in SM holding the key, SM transaction ids nobody
// can predict, responses only from the port a request left by, and caps on
// the switch's delay lines.
#include <catch2/catch.hpp>

#include <set>

#include "fixture.h"
#include "sa_records.h"
#include "smp_agent.h"

using namespace fabric;
using namespace fabric::test;

namespace pi = iba::mad::port_info;

namespace {

constexpr uint64_t kWrongKey = 0x1111222233334444ull;

std::array<uint8_t, 64> smp_data(const Mad &m) {
    std::array<uint8_t, 64> d;
    std::copy_n(m.begin() + mad::smp::kData, 64, d.begin());
    return d;
}

// A DR SMP from the CA on port `from` to the switch ([0, 1]: out of the
// CA's only port); the response, if any came back.
// PortInfo(0) as read, made fit for a Set that changes only the M_Key fields.
std::array<uint8_t, 64> port0_set(const Mad &get, uint64_t key, uint8_t level, uint16_t lease = 0) {
    auto d = smp_data(get);
    d[pi::kPortPhysStateLinkDown] = 0;      // no change
    d[pi::kLinkSpeedSupportedPortState] &= 0xf0;  // PortState: no change
    set64(d, pi::kMkey, key);
    set16(d, pi::kMkeyLeasePeriod, lease);
    d[pi::kMkeyProtLmc] = static_cast<uint8_t>(level << 6);
    return d;
}

std::optional<Mad> to_switch(TestFabric &f, uint8_t from, uint8_t method, uint16_t attr, uint32_t mod,
                             std::span<const uint8_t> data = {}) {
    const std::vector<uint8_t> path{0, 1};
    const uint64_t tid = f.ca(from).send_dr_smp(path, method, attr, mod, data);
    f.run(1000);
    const Mad *r = f.ca(from).smp_response(tid);
    return r ? std::optional<Mad>(*r) : std::nullopt;
}

}  // namespace

TEST_CASE("M_Key: with the SM's key on the switch a guest cannot disable a port or program the LFT", "[mkey]") {
    TestFabric f;
    f.bring_up({1, 2, 3});
    REQUIRE(f.sm().ca_state(3) == CaState::Active);
    REQUIRE(f.sw().fdb().lookup(f.fabric->sm()->lid_for_port(3)) == 3);
    // Gets still work for anyone (ibnetdiscover in a guest): protect level 1.
    auto pi3 = to_switch(f, 2, mad::kGet, mad::kAttrPortInfo, 3);
    REQUIRE(pi3);
    auto p0 = to_switch(f, 2, mad::kGet, mad::kAttrPortInfo, 0);
    REQUIRE(p0);
    CHECK(get64(smp_data(*p0), pi::kMkey) == 0);  // hidden from a Get without the key
    CHECK((smp_data(*p0)[pi::kMkeyProtLmc] >> 6) == 1);
    CHECK(f.sw().port(0).pi.mkey == f.sm().switch_mkey());
    CHECK(f.sm().switch_mkey() != 0);

    // The guest on port 2 tries to disable port 3: no answer, nothing changes.
    auto d = smp_data(*pi3);
    d[pi::kPortPhysStateLinkDown] = static_cast<uint8_t>(static_cast<uint8_t>(PhysState::Disabled) << 4);
    d[pi::kLinkSpeedSupportedPortState] &= 0xf0;
    CHECK_FALSE(to_switch(f, 2, mad::kSet, mad::kAttrPortInfo, 3, d));
    CHECK(f.sw().port(3).link_up());
    CHECK(f.sw().port(3).state == PortState::Active);
    // ... or to send LID 4 (port 3's CA) to itself.
    std::array<uint8_t, 64> lft{};
    lft.fill(2);
    CHECK_FALSE(to_switch(f, 2, mad::kSet, mad::kAttrLinearForwardingTable, 0, lft));
    CHECK(f.sw().fdb().lookup(f.fabric->sm()->lid_for_port(3)) == 3);
    // Both count as M_Key violations (PortInfo:M_KeyViolations of port 0).
    CHECK(f.sw().sma().mkey_discards() == 2);
    p0 = to_switch(f, 2, mad::kGet, mad::kAttrPortInfo, 0);
    REQUIRE(p0);
    CHECK(get16(smp_data(*p0), pi::kMkeyViolations) == 2);
    CHECK(f.log.contains("M_Key violation: Set attr 0x0015 mod 0x3 from port 2 discarded"));
    // With the key, the same Set works (the CA here plays the SM).
    f.ca(2).options().smp_mkey = f.sm().switch_mkey();
    auto ok = to_switch(f, 2, mad::kSet, mad::kAttrPortInfo, 3, d);
    REQUIRE(ok);
    CHECK((get16(*ok, mad::kStatus) & 0x7fff) == 0);
    CHECK_FALSE(f.sw().port(3).link_up());
    // The SM keeps working: a sweep still configures the switch with its key.
    f.sw().set_admin(3, true);
    f.run(2000000);
    CHECK(f.sm().ca_state(3) == CaState::Active);
    CHECK(f.sw().sma().mkey_discards() == 2);
}

TEST_CASE("M_Key: the SA's PortInfoRecords do not give the switch's key away", "[mkey]") {
    TestFabric f;
    f.bring_up({1, 2});
    REQUIRE(f.sw().port(0).pi.mkey != 0);
    std::vector<uint8_t> pir(sa::kPortInfoRecordSize);
    set16(pir, 0, 1);  // LID 1: the switch, ports 0..4
    const uint64_t tid = f.ca(2).send_sa(mad::kGetTable, mad::sa::kPortInfoRecord, sa::pir::kLid, pir);
    f.run(100000);
    const auto *r = f.ca(2).response_for(tid);
    REQUIRE(r);
    REQUIRE(r->status == 0);
    REQUIRE(r->data.size() == 5 * sa::kPortInfoRecordSize);
    for (size_t i = 0; i < 5; ++i) {
        CHECK(get64(std::span<const uint8_t>(r->data).subspan(i * sa::kPortInfoRecordSize + 4), pi::kMkey) == 0);
    }
}

TEST_CASE("M_Key: protect levels 0-3 (IBA 14.2.4.1 Table 125)", "[mkey]") {
    const uint8_t level = GENERATE(0, 1, 2, 3);
    TestFabric f{test_options(4, false)};
    f.ca(2).connect();
    f.fabric->start();
    f.run(1000);
    constexpr uint64_t key = 0xfeedfacecafe0001ull;
    auto cur = to_switch(f, 2, mad::kGet, mad::kAttrPortInfo, 0);
    REQUIRE(cur);
    const auto d = port0_set(*cur, key, level);
    auto set = to_switch(f, 2, mad::kSet, mad::kAttrPortInfo, 0, d);
    REQUIRE(set);
    REQUIRE((get16(*set, mad::kStatus) & 0x7fff) == 0);
    CHECK(f.sw().port(0).pi.mkey == key);

    // The wrong key.
    f.ca(2).options().smp_mkey = kWrongKey;
    auto g = to_switch(f, 2, mad::kGet, mad::kAttrPortInfo, 0);
    if (level < 2) {
        REQUIRE(g);
        CHECK(get64(smp_data(*g), pi::kMkey) == (level == 0 ? key : 0));
    } else {
        CHECK_FALSE(g);
    }
    CHECK_FALSE(to_switch(f, 2, mad::kSet, mad::kAttrPortInfo, 0, d));
    const uint16_t violations = level < 2 ? 1 : 2;
    CHECK(f.sw().port(0).pi.mkey_violations == violations);

    // The right key: Get shows the key and the count, Set is answered.
    f.ca(2).options().smp_mkey = key;
    g = to_switch(f, 2, mad::kGet, mad::kAttrPortInfo, 0);
    REQUIRE(g);
    CHECK(get64(smp_data(*g), pi::kMkey) == key);
    CHECK(get16(smp_data(*g), pi::kMkeyViolations) == violations);
    CHECK(to_switch(f, 2, mad::kSet, mad::kAttrPortInfo, 0, port0_set(*g, key, level)));
}

TEST_CASE("M_Key: the lease ends protection unless the key holder shows up", "[mkey]") {
    TestFabric f{test_options(4, false)};
    f.ca(2).connect();
    f.fabric->start();
    f.run(1000);
    constexpr uint64_t key = 0x77;
    auto cur = to_switch(f, 2, mad::kGet, mad::kAttrPortInfo, 0);
    REQUIRE(cur);
    const auto d = port0_set(*cur, key, 2, 2);  // level 2, lease 2 s
    auto set = to_switch(f, 2, mad::kSet, mad::kAttrPortInfo, 0, d);
    REQUIRE(set);
    REQUIRE((get16(*set, mad::kStatus) & 0x7fff) == 0);
    f.ca(2).options().smp_mkey = kWrongKey;
    CHECK_FALSE(to_switch(f, 2, mad::kGet, mad::kAttrNodeInfo, 0));  // violation: the lease starts
    // The key holder within the lease stops the timer.
    f.run(1000000);
    f.ca(2).options().smp_mkey = key;
    CHECK(to_switch(f, 2, mad::kGet, mad::kAttrNodeInfo, 0));
    f.run(3000000);
    f.ca(2).options().smp_mkey = kWrongKey;
    CHECK_FALSE(to_switch(f, 2, mad::kGet, mad::kAttrNodeInfo, 0));  // still protected; lease runs again
    f.run(2100000);
    auto g = to_switch(f, 2, mad::kGet, mad::kAttrPortInfo, 0);
    REQUIRE(g);  // the lease ran out: M_KeyProtectBits 0
    CHECK((smp_data(*g)[pi::kMkeyProtLmc] >> 6) == 0);
    CHECK(get64(smp_data(*g), pi::kMkey) == key);
    CHECK(f.log.contains("M_Key lease expired"));
}

TEST_CASE("SM: transaction ids are unpredictable", "[mkey][sm]") {
    auto tids = [] {
        TestFabric f;
        f.bring_up({1});
        std::vector<uint64_t> t;
        for (const Mad &m : f.ca(1).smp_requests()) {
            t.push_back(get64(m, mad::kTid));
        }
        return t;
    };
    const auto a = tids(), b = tids();
    REQUIRE(a.size() >= 4);
    REQUIRE(b.size() >= 4);
    // Two runs of the same SM differ, and no TID follows from the one before.
    CHECK(a != b);
    unsigned sequential = 0;
    for (size_t i = 1; i < a.size(); ++i) {
        const uint64_t diff = a[i] - a[i - 1];
        sequential += (diff > 0 && diff < 0x10000) || a[i] >> 32 == a[i - 1] >> 32;
    }
    CHECK(sequential == 0);
}

TEST_CASE("SM: a response from another port than the request's is ignored", "[mkey][sm]") {
    TestFabric f;
    f.ca(2).options().answer_smps = false;  // its driver is not loaded yet
    f.ca(2).connect();
    f.ca(3).connect();
    f.fabric->start();
    f.run(1000);
    REQUIRE(f.sw().lid() == 1);
    // The guest on port 3 learned the TID the SM used towards port 2 (as
    // if it could guess) and answers NodeInfo in port 2's place, LID-routed
    // to the SM and as a returning directed-route SMP.
    REQUIRE(!f.ca(2).smp_requests().empty());
    const Mad req = f.ca(2).smp_requests().back();
    REQUIRE(get16(req, mad::kAttrId) == mad::kAttrNodeInfo);
    Mad forged = req;
    forged[mad::kMgmtClass] = mad::kClassSubnLid;
    forged[mad::kMethod] = mad::kGet | mad::kResp;
    set16(forged, mad::kStatus, 0);
    uint8_t *d = forged.data() + mad::smp::kData;
    d[iba::mad::node_info::kBaseVersion] = 1;
    d[iba::mad::node_info::kClassVersion] = 1;
    d[iba::mad::node_info::kNodeType] = 1;
    d[iba::mad::node_info::kNumPorts] = 1;
    d[iba::mad::node_info::kLocalPortNum] = 1;
    set64({d, 64}, iba::mad::node_info::kNodeGuid, 0xbad0bad0bad0bad0ull);
    set64({d, 64}, iba::mad::node_info::kPortGuid, 0xbad0bad0bad0bad1ull);
    MadAddress to;
    to.slid = f.ca(3).lid();
    to.dlid = 1;
    f.ca(3).send_raw(mad_packet(to, forged));
    Mad dr = req;
    std::copy_n(forged.begin() + mad::smp::kData, 64, dr.begin() + mad::smp::kData);
    dr[mad::kMethod] = mad::kGet | mad::kResp;
    set16(dr, mad::kStatus, mad::smp::kDirectionBit);
    to.slid = iba::kPermissiveLid;
    to.dlid = iba::kPermissiveLid;
    f.ca(3).send_raw(mad_packet(to, dr));
    f.run(1000);
    CHECK(f.sm().smps_rejected() >= 1);
    CHECK(f.log.contains("to an SMP sent to port 2 ignored"));
    f.run(3000000);
    // Only NodeInfo requests ever reached port 2: the forgery was not taken.
    for (const Mad &m : f.ca(2).smp_requests()) {
        CHECK(get16(m, mad::kAttrId) == mad::kAttrNodeInfo);
    }
    CHECK(f.sm().ca_state(2) == CaState::Unresponsive);
    CHECK(f.sm().ca_state(3) == CaState::Active);
}

TEST_CASE("switch: a delay line holds at most kMaxDelayed packets", "[caps]") {
    TestFabric f;
    f.bring_up({1, 2});
    REQUIRE(f.sm().ca_state(2) == CaState::Active);
    f.sw().faults().set_delay(2, 1000000);
    for (size_t i = 0; i < IbSwitch::kMaxDelayed + 500; ++i) {
        f.ca(1).send_ud(f.fabric->sm()->lid_for_port(2), 0x42, 0x1234, 64);
    }
    CHECK(f.sw().port(2).delayed.size() == IbSwitch::kMaxDelayed);
    CHECK(f.sw().drops(Drop::QueueFull) == 500);
    CHECK(f.log.contains("delay line full"));
    f.run(1100000);
    CHECK(f.ca(2).received_data() == IbSwitch::kMaxDelayed);
}
