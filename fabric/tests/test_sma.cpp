// The switch's SMA as an SM in a guest sees it: directed-route SMPs from a
// CA on port 2 (the fabric runs with --no-sm), LID-routed SMPs once the
// switch has a LID, and SMPs that pass through the switch to another CA.
#include <catch2/catch.hpp>

#include "fixture.h"
#include "smp_agent.h"

using namespace fabric;
using namespace fabric::test;

namespace pi = iba::mad::port_info;
namespace ni = iba::mad::node_info;
namespace si = iba::mad::switch_info;

namespace {

struct SmaFixture {
    TestFabric f{test_options(4, false)};
    SmaFixture() {
        f.ca(2).connect();
        f.ca(4).connect();
        f.fabric->start();
        f.run(1000);
    }
    // A DR SMP from the CA on port 2 along path, and its response.
    Mad query(std::initializer_list<uint8_t> path, uint8_t method, uint16_t attr, uint32_t mod = 0,
              std::span<const uint8_t> data = {}) {
        std::vector<uint8_t> p(path);
        const uint64_t tid = f.ca(2).send_dr_smp(p, method, attr, mod, data);
        f.run(1000);
        const Mad *r = f.ca(2).smp_response(tid);
        REQUIRE(r);
        return *r;
    }
    Mad get(uint16_t attr, uint32_t mod = 0) { return query({0, 1}, mad::kGet, attr, mod); }
    Mad set(uint16_t attr, uint32_t mod, std::span<const uint8_t> data) {
        return query({0, 1}, mad::kSet, attr, mod, data);
    }
    static uint16_t status(const Mad &m) { return get16(m, mad::kStatus) & 0x7fff; }
    static std::array<uint8_t, 64> data(const Mad &m) {
        std::array<uint8_t, 64> d;
        std::copy_n(m.begin() + mad::smp::kData, 64, d.begin());
        return d;
    }
};

}  // namespace

TEST_CASE_METHOD(SmaFixture, "SMA: NodeInfo and NodeDescription of the switch", "[sma]") {
    const Mad r = get(mad::kAttrNodeInfo);
    CHECK(status(r) == 0);
    CHECK(r[mad::kMethod] == 0x81);
    CHECK(dr::direction(r));
    const auto d = data(r);
    CHECK(d[ni::kBaseVersion] == 1);
    CHECK(d[ni::kClassVersion] == 1);
    CHECK(d[ni::kNodeType] == 2);
    CHECK(d[ni::kNumPorts] == 4);
    CHECK(get64(d, ni::kNodeGuid) == 0x0002c90300ffff00ull);
    CHECK(get64(d, ni::kPortGuid) == 0x0002c90300ffff00ull);
    CHECK(get16(d, ni::kDeviceId) == SwitchSma::kDeviceId);
    CHECK(d[ni::kLocalPortNum] == 2);  // the port the SMP arrived on
    CHECK((uint32_t{d[ni::kVendorId]} << 16 | d[ni::kVendorId + 1] << 8 | d[ni::kVendorId + 2]) == 0x0002c9);
    const auto nd = data(get(mad::kAttrNodeDescription));
    CHECK(std::string(reinterpret_cast<const char *>(nd.data())) == "hcasim switch");
    // NodeInfo is read-only.
    CHECK(status(set(mad::kAttrNodeInfo, 0, d)) == mad::kStatusUnsupportedMethodAttr);
}

TEST_CASE_METHOD(SmaFixture, "SMA: SwitchInfo, LinearFDBTop and PortStateChange", "[sma]") {
    auto d = data(get(mad::kAttrSwitchInfo));
    CHECK(get16(d, si::kLinearFdbCap) == 49152);
    CHECK(get16(d, si::kMulticastFdbCap) == 4096);
    CHECK(get16(d, si::kLinearFdbTop) == 0);
    CHECK((d[si::kFlags] & 0x08) != 0);  // EnhancedPort0
    CHECK((d[si::kLifeTimeValuePortStateChange] >> 3) == SwitchSma::kLifeTimeDefault);
    // Two links came up: PortStateChange is set (IBA 14.2.5.4).
    CHECK((d[si::kLifeTimeValuePortStateChange] & 0x04) != 0);
    set16(d, si::kLinearFdbTop, 100);
    d[si::kLifeTimeValuePortStateChange] = 17 << 3 | 0x04;  // writing 1 clears
    auto r = set(mad::kAttrSwitchInfo, 0, d);
    CHECK(status(r) == 0);
    d = data(r);
    CHECK(get16(d, si::kLinearFdbTop) == 100);
    CHECK((d[si::kLifeTimeValuePortStateChange] >> 3) == 17);
    CHECK((d[si::kLifeTimeValuePortStateChange] & 0x04) == 0);
    CHECK(f.sw().fdb().linear_top() == 100);
    // A port going down sets it again.
    f.ca(4).disconnect();
    CHECK(f.sw().port_state_change());
    // LinearFDBTop beyond the capacity is an invalid field.
    set16(d, si::kLinearFdbTop, 0xc000);
    CHECK(status(set(mad::kAttrSwitchInfo, 0, d)) == mad::kStatusInvalidField);
}

TEST_CASE_METHOD(SmaFixture, "SMA: PortInfo of the management port and external ports", "[sma]") {
    auto p0 = data(get(mad::kAttrPortInfo, 0));
    CHECK(get16(p0, pi::kLid) == 0);
    CHECK((p0[pi::kLinkSpeedSupportedPortState] & 0x0f) == 2);  // Init
    CHECK((p0[pi::kPortPhysStateLinkDown] >> 4) == 5);          // LinkUp
    CHECK((get32(p0, pi::kCapMask) & pi::kCapIsSm) == 0);       // --no-sm
    CHECK(p0[pi::kGuidCap] == 1);
    CHECK(p0[pi::kLocalPortNum] == 2);
    auto p2 = data(get(mad::kAttrPortInfo, 2));
    CHECK((p2[pi::kLinkSpeedSupportedPortState] & 0x0f) == 2);  // Init: link up
    CHECK((p2[pi::kPortPhysStateLinkDown] >> 4) == 5);
    CHECK(p2[pi::kLinkWidthActive] == 2);                      // 4x
    CHECK((p2[pi::kLinkSpeedActiveEnabled] >> 4) == 4);        // QDR
    CHECK((p2[pi::kInitTypeReplyMtuCap] & 0x0f) == 5);         // 4096
    CHECK((p2[pi::kVlCapInitType] >> 4) == 1);                 // VL0
    CHECK(get32(p2, pi::kCapMask) == 0);                       // port 0's field
    auto p3 = data(get(mad::kAttrPortInfo, 3));
    CHECK((p3[pi::kLinkSpeedSupportedPortState] & 0x0f) == 1);  // Down
    CHECK((p3[pi::kPortPhysStateLinkDown] >> 4) == 2);          // Polling
    CHECK(status(get(mad::kAttrPortInfo, 5)) == mad::kStatusInvalidField);
}

TEST_CASE_METHOD(SmaFixture, "SMA: Set PortInfo follows Init -> Armed -> Active", "[sma]") {
    auto d = data(get(mad::kAttrPortInfo, 0));
    set16(d, pi::kLid, 7);
    set16(d, pi::kMasterSmLid, 3);
    d[pi::kPortPhysStateLinkDown] = 0;
    SECTION("Init -> Active is refused and changes nothing") {
        d[pi::kLinkSpeedSupportedPortState] = (d[pi::kLinkSpeedSupportedPortState] & 0xf0) | 4;
        const Mad r = set(mad::kAttrPortInfo, 0, d);
        CHECK(status(r) == mad::kStatusInvalidField);
        CHECK(get16(data(r), pi::kLid) == 0);
        CHECK(f.sw().port(0).state == PortState::Init);
    }
    SECTION("Armed, then Active") {
        d[pi::kLinkSpeedSupportedPortState] = (d[pi::kLinkSpeedSupportedPortState] & 0xf0) | 3;
        Mad r = set(mad::kAttrPortInfo, 0, d);
        CHECK(status(r) == 0);
        CHECK((data(r)[pi::kLinkSpeedSupportedPortState] & 0x0f) == 3);
        CHECK(get16(data(r), pi::kLid) == 7);
        CHECK(get16(data(r), pi::kMasterSmLid) == 3);
        CHECK(f.sw().lid() == 7);
        d[pi::kLinkSpeedSupportedPortState] = (d[pi::kLinkSpeedSupportedPortState] & 0xf0) | 4;
        r = set(mad::kAttrPortInfo, 0, d);
        CHECK(status(r) == 0);
        CHECK(f.sw().port(0).state == PortState::Active);
        // Init (2) cannot be set.
        d[pi::kLinkSpeedSupportedPortState] = (d[pi::kLinkSpeedSupportedPortState] & 0xf0) | 2;
        CHECK(status(set(mad::kAttrPortInfo, 0, d)) == mad::kStatusInvalidField);
    }
    SECTION("an external port, and NeighborMTU above MTUCap") {
        auto e = data(get(mad::kAttrPortInfo, 4));
        e[pi::kPortPhysStateLinkDown] = 0;
        e[pi::kNeighborMtuMasterSmSl] = 6 << 4;
        CHECK(status(set(mad::kAttrPortInfo, 4, e)) == mad::kStatusInvalidField);
        e[pi::kNeighborMtuMasterSmSl] = 4 << 4;
        e[pi::kLinkSpeedSupportedPortState] = (e[pi::kLinkSpeedSupportedPortState] & 0xf0) | 3;
        CHECK(status(set(mad::kAttrPortInfo, 4, e)) == 0);
        CHECK(f.sw().port(4).state == PortState::Armed);
        CHECK(f.sw().port(4).pi.neighbor_mtu == 4);
        // Armed on a port whose link is down is refused.
        auto p3 = data(get(mad::kAttrPortInfo, 3));
        p3[pi::kPortPhysStateLinkDown] = 0;
        p3[pi::kLinkSpeedSupportedPortState] = (p3[pi::kLinkSpeedSupportedPortState] & 0xf0) | 3;
        CHECK(status(set(mad::kAttrPortInfo, 3, p3)) == mad::kStatusInvalidField);
    }
}

TEST_CASE_METHOD(SmaFixture, "SMA: PortPhysicalState Disabled/Polling and LinkDown", "[sma]") {
    auto e = data(get(mad::kAttrPortInfo, 4));
    e[pi::kLinkSpeedSupportedPortState] &= 0xf0;  // PortState: no change
    e[pi::kPortPhysStateLinkDown] = 3 << 4;       // Disabled
    CHECK(status(set(mad::kAttrPortInfo, 4, e)) == 0);
    CHECK_FALSE(f.ca(4).link_up());
    CHECK(f.sw().port(4).phys() == PhysState::Disabled);
    CHECK(f.sw().port(4).state == PortState::Down);
    e[pi::kPortPhysStateLinkDown] = 2 << 4;  // Polling: enabled again
    CHECK(status(set(mad::kAttrPortInfo, 4, e)) == 0);
    CHECK(f.ca(4).link_up());
    CHECK(f.sw().port(4).state == PortState::Init);
    // LinkDown: the link retrains; the device sees it go down and up.
    f.ca(4).force_state(PortState::Active);
    e[pi::kPortPhysStateLinkDown] = 0;
    e[pi::kLinkSpeedSupportedPortState] = (e[pi::kLinkSpeedSupportedPortState] & 0xf0) | 1;
    set(mad::kAttrPortInfo, 4, e);
    f.run(20000);
    CHECK(f.ca(4).link_up());
    CHECK(f.ca(4).state() == PortState::Init);
    CHECK(f.sw().port(4).state == PortState::Init);
    CHECK(f.sw().port(4).ctr.link_downed >= 2);
}

TEST_CASE_METHOD(SmaFixture, "SMA: P_Key table, GUIDInfo, SL2VL, VLArbitration", "[sma]") {
    auto pk = data(get(mad::kAttrPKeyTable, 0));
    CHECK(get16(pk, 0) == 0xffff);
    CHECK(get16(pk, 2) == 0);
    CHECK(status(get(mad::kAttrPKeyTable, 2u << 16)) == mad::kStatusInvalidField);  // no table on port 2
    CHECK(status(get(mad::kAttrPKeyTable, 1)) == mad::kStatusInvalidField);        // block 1
    auto g = data(get(mad::kAttrGuidInfo, 0));
    CHECK(get64(g, 0) == 0x0002c90300ffff00ull);
    CHECK(status(get(mad::kAttrGuidInfo, 1)) == mad::kStatusInvalidField);
    auto sl = data(get(mad::kAttrSlToVlTable, 2 << 8 | 4));
    CHECK(sl[0] == 0);
    sl[0] = 0x01;
    CHECK(data(set(mad::kAttrSlToVlTable, 2 << 8 | 4, sl))[0] == 0x01);
    CHECK(status(get(mad::kAttrSlToVlTable, 9 << 8)) == mad::kStatusInvalidField);
    auto va = data(get(mad::kAttrVlArbitration, 1u << 16 | 2));
    va[1] = 0x20;
    CHECK(data(set(mad::kAttrVlArbitration, 1u << 16 | 2, va))[1] == 0x20);
    CHECK(status(get(mad::kAttrVlArbitration, 5u << 16)) == mad::kStatusInvalidField);
}

TEST_CASE_METHOD(SmaFixture, "SMA: linear and multicast forwarding tables", "[sma]") {
    std::array<uint8_t, 64> lft;
    lft.fill(0xff);
    lft[1] = 0;
    lft[2] = 2;
    lft[5] = 4;
    Mad r = set(mad::kAttrLinearForwardingTable, 0, lft);
    CHECK(status(r) == 0);
    CHECK(data(r) == lft);
    CHECK(data(get(mad::kAttrLinearForwardingTable, 0)) == lft);
    f.sw().fdb().set_linear_top(63);
    CHECK(f.sw().fdb().lookup(5) == 4);
    CHECK(status(get(mad::kAttrLinearForwardingTable, 768)) == mad::kStatusInvalidField);
    // MFT: block 1 (MLIDs 0xc020..0xc03f), position 0 (ports 0-15).
    std::array<uint8_t, 64> mft{};
    set16(mft, 2 * 3, 1u << 2 | 1u << 4);  // MLID 0xc023: ports 2 and 4
    set16(mft, 2 * 4, 0xffff);             // ports the switch lacks are dropped
    r = set(mad::kAttrMulticastForwardingTable, 1, mft);
    CHECK(status(r) == 0);
    CHECK(get16(data(r), 2 * 4) == 0x1f);  // ports 0..4
    CHECK(f.sw().fdb().mcast_ports(0xc023).test(2));
    CHECK(f.sw().fdb().mcast_ports(0xc023).test(4));
    CHECK(f.sw().fdb().mcast_ports(0xc023).count() == 2);
    CHECK(status(get(mad::kAttrMulticastForwardingTable, 1u << 28 | 1)) == mad::kStatusInvalidField);  // position 1
    CHECK(status(get(mad::kAttrMulticastForwardingTable, 128)) == mad::kStatusInvalidField);           // block 128
}

TEST_CASE_METHOD(SmaFixture, "SMA: unsupported attributes, methods, versions", "[sma]") {
    CHECK(status(get(mad::kAttrRandomForwardingTable)) == mad::kStatusUnsupportedMethodAttr);
    CHECK(status(get(mad::kAttrMlnxExtPortInfo, 1)) == mad::kStatusOk);  // answered, all zero (no FDR10)
    CHECK(status(get(mad::kAttrMlnxExtPortInfo, 200)) == mad::kStatusInvalidField);
    CHECK(status(get(mad::kAttrSmInfo)) == mad::kStatusUnsupportedMethodAttr);  // no SM here
    const Mad r = query({0, 1}, mad::kGetTable, mad::kAttrNodeInfo);
    CHECK(status(r) == mad::kStatusUnsupportedMethod);
    // Direct calls: bad class version; responses and traps get no answer.
    Mad m;
    init_dr_smp(m, mad::kGet, 1, mad::kAttrNodeInfo, 0, std::array<uint8_t, 1>{0});
    m[mad::kClassVersion] = 2;
    auto resp = f.sw().sma().process(m, 0);
    REQUIRE(resp);
    CHECK((get16(*resp, mad::kStatus) & 0x7fff) == mad::kStatusBadVersion);
    m[mad::kMethod] = mad::kGet | mad::kResp;
    CHECK_FALSE(f.sw().sma().process(m, 0));
    m[mad::kMethod] = mad::kTrap;
    CHECK_FALSE(f.sw().sma().process(m, 0));
}

TEST_CASE_METHOD(SmaFixture, "SMA: LID-routed SMPs once the switch and the CA have LIDs", "[sma]") {
    // Give the switch LID 1 and route LID 3 to port 2 (as an SM would).
    auto p0 = data(get(mad::kAttrPortInfo, 0));
    set16(p0, pi::kLid, 1);
    p0[pi::kPortPhysStateLinkDown] = 0;
    CHECK(status(set(mad::kAttrPortInfo, 0, p0)) == 0);
    std::array<uint8_t, 64> lft;
    lft.fill(0xff);
    lft[1] = 0;
    lft[3] = 2;
    CHECK(status(set(mad::kAttrLinearForwardingTable, 0, lft)) == 0);
    auto si_d = data(get(mad::kAttrSwitchInfo));
    set16(si_d, si::kLinearFdbTop, 3);
    CHECK(status(set(mad::kAttrSwitchInfo, 0, si_d)) == 0);
    f.ca(2).set_lid(3);
    // A LID-routed Get(NodeInfo) to LID 1 from LID 3 (VL15 needs no Active).
    Mad m;
    init_smp(m, mad::kClassSubnLid, mad::kGet, 0x4242, mad::kAttrNodeInfo, 0);
    MadAddress to;
    to.slid = 3;
    to.dlid = 1;
    f.ca(2).send_raw(mad_packet(to, m));
    f.run(1000);
    bool found = false;
    for (const auto &rx : f.ca(2).received()) {
        iba::PacketView v;
        MadAddress a;
        Mad resp;
        if (iba::parse(rx.packet, v) == iba::ParseError::None && mad_from_packet(v, a, resp) &&
            get64(resp, mad::kTid) == 0x4242) {
            found = true;
            CHECK(v.dlid() == 3);
            CHECK(v.slid() == 1);
            CHECK(v.vl() == 15);
            CHECK(resp[mad::kMethod] == 0x81);
            CHECK(resp[mad::kMgmtClass] == mad::kClassSubnLid);
            CHECK(resp[mad::smp::kData + ni::kNodeType] == 2);
        }
    }
    CHECK(found);
}

TEST_CASE_METHOD(SmaFixture, "SMA: a DR SMP through the switch to the CA on port 4", "[sma]") {
    const Mad r = query({0, 1, 4}, mad::kGet, mad::kAttrNodeInfo);
    CHECK(status(r) == 0);
    CHECK(r[mad::smp::kData + ni::kNodeType] == 1);
    CHECK(get64(r, mad::smp::kData + ni::kPortGuid) == f.ca(4).port_guid());
    CHECK(dr::return_path(r, 1) == 2);  // where it entered the switch
    CHECK(dr::hop_ptr(r) == 0);
    // The switch rewrote the packets, so their CRCs had to be recomputed:
    // the CA checked them (it would have dropped a bad packet).
    CHECK(f.ca(4).smps_answered() == 1);
    CHECK(f.sw().drops(Drop::BadIcrc) == 0);
    // A DR SMP towards a port without a device is dropped (egress down).
    f.ca(2).send_dr_smp(std::vector<uint8_t>{0, 1, 3}, mad::kGet, mad::kAttrNodeInfo, 0);
    f.run(1000);
    CHECK(f.sw().drops(Drop::EgressDown) == 1);
}
