// The built-in SA: ClassPortInfo, PathRecord, MCMemberRecord (join,
// create, leave, the broadcast group), NodeRecord, PortInfoRecord, errors,
// duplicate TIDs, and GetTable responses over RMPP with ACK windows.
#include <catch2/catch.hpp>

#include "fixture.h"
#include "iba/pma.h"
#include "sa_records.h"
#include "smp_agent.h"

using namespace fabric;
using namespace fabric::test;

namespace {

constexpr uint64_t kIpoibBcastMask = sa::mcr::kMgid | sa::mcr::kPortGid | sa::mcr::kPkey | sa::mcr::kJoinState;
// IPoIB's mask for the other groups (ipoib_multicast.c), RFC 4391.
constexpr uint64_t kIpoibCreateMask = kIpoibBcastMask | sa::mcr::kQkey | sa::mcr::kMtuSelector | sa::mcr::kMtu |
                                      sa::mcr::kTClass | sa::mcr::kRateSelector | sa::mcr::kRate | sa::mcr::kSl |
                                      sa::mcr::kFlowLabel | sa::mcr::kHopLimit;

struct SaFixture {
    TestFabric f{test_options(4)};
    SaFixture() { f.bring_up({1, 2, 3}); }

    const FakeCa::SaResponse &ask(FakeCa &ca, uint8_t method, uint16_t attr, uint64_t mask,
                                  std::span<const uint8_t> rec, uint64_t tid = 0, bool grh = false) {
        tid = ca.send_sa(method, attr, mask, rec, tid, grh);
        f.run(50000);
        const FakeCa::SaResponse *r = ca.response_for(tid);
        REQUIRE(r);
        return *r;
    }
    static std::vector<uint8_t> mcr(const sa::McMemberRecord &r) {
        std::vector<uint8_t> v(sa::kMcMemberRecordSize);
        sa::encode(r, v);
        return v;
    }
    static std::vector<uint8_t> pr(const sa::PathRecord &r) {
        std::vector<uint8_t> v(sa::kPathRecordSize);
        sa::encode(r, v);
        return v;
    }
    sa::McMemberRecord bcast_join(FakeCa &ca, uint8_t join_state = sa::kFullMember) {
        sa::McMemberRecord q;
        q.mgid = McastGroups::kBroadcastMgid;
        q.port_gid = ca.gid();
        q.pkey = 0xffff;
        q.join_state = join_state;
        return q;
    }
    sa::McMemberRecord new_group(FakeCa &ca, uint8_t last_byte) {
        sa::McMemberRecord q = bcast_join(ca);
        q.mgid = {0xff, 0x12, 0x60, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, last_byte};
        q.qkey = 0x0b1b;
        q.mtu_selector = kSelExact;
        q.mtu = kMtu2048;
        q.rate_selector = kSelExact;
        q.rate = 3;
        return q;
    }
};

}  // namespace

TEST_CASE_METHOD(SaFixture, "SA: ClassPortInfo and the response's addressing", "[sa]") {
    const auto &r = ask(f.ca(2), mad::kGet, mad::sa::kClassPortInfo, 0, {});
    CHECK(r.status == 0);
    CHECK(r.method == 0x81);
    CHECK(r.from.slid == 1);
    CHECK(r.from.dlid == 3);
    CHECK(r.from.src_qp == 1);
    CHECK(r.from.dst_qp == 1);
    CHECK(r.from.qkey == mad::kQp1Qkey);
    CHECK(r.from.pkey == 0xffff);
    CHECK_FALSE(r.from.grh);
    CHECK(r.header[mad::kMgmtClass] == mad::kClassSubnAdm);
    CHECK(r.header[mad::kClassVersion] == 2);
    CHECK(r.data[0] == 1);
    CHECK(r.data[1] == 2);
    const uint32_t cm2 = get32(r.data, 4);
    CHECK(((cm2 >> 5) & (1u << 12)) != 0);  // SendOnlyFullMember supported
    CHECK((cm2 & 0x1f) == 18);
    CHECK(ask(f.ca(2), mad::kGetTable, mad::sa::kClassPortInfo, 0, {}).status == mad::kStatusUnsupportedMethodAttr);
    // With a GRH in, a GRH out, GIDs swapped.
    const auto &g = ask(f.ca(2), mad::kGet, mad::sa::kClassPortInfo, 0, {}, 0, true);
    REQUIRE(g.from.grh);
    CHECK(g.from.dgid == f.ca(2).gid());
    CHECK(hca::load_be64(g.from.sgid.data() + 8) == f.sw().node_guid());
}

TEST_CASE_METHOD(SaFixture, "SA: PathRecord as IPoIB asks for it", "[sa]") {
    sa::PathRecord q;
    q.dgid = f.ca(3).gid();
    q.sgid = f.ca(1).gid();
    q.numb_path = 1;
    q.pkey = 0xffff;
    const uint64_t mask = sa::pr::kDgid | sa::pr::kSgid | sa::pr::kNumbPath | sa::pr::kTClass | sa::pr::kPkey;
    const auto &r = ask(f.ca(1), mad::kGet, mad::sa::kPathRecord, mask, pr(q));
    REQUIRE(r.status == 0);
    const auto p = sa::decode_path_record(r.data);
    CHECK(p.dgid == q.dgid);  // echoed exactly
    CHECK(p.sgid == q.sgid);
    CHECK(p.dlid == 4);
    CHECK(p.slid == 2);
    CHECK(p.reversible);
    CHECK(p.numb_path == 1);
    CHECK(p.pkey == 0xffff);
    CHECK(p.sl == 0);
    CHECK(p.mtu_selector == 2);
    CHECK(p.mtu == kMtu4096);
    CHECK(p.rate_selector == 2);
    CHECK(p.rate == 7);  // 4x QDR = 40 Gb/s
    CHECK(p.plt_selector == 2);
    CHECK(p.hop_limit == 0);
    CHECK(get16(r.header, mad::sa::kAttrOffset) == sa::kPathRecordSize / 8);

    SECTION("by LIDs, and to the SA itself") {
        sa::PathRecord l;
        l.dlid = 1;
        l.slid = 3;
        const auto &rl = ask(f.ca(2), mad::kGet, mad::sa::kPathRecord, sa::pr::kDlid | sa::pr::kSlid, pr(l));
        REQUIRE(rl.status == 0);
        const auto pl = sa::decode_path_record(rl.data);
        CHECK(pl.dlid == 1);
        CHECK(pl.slid == 3);
        CHECK(hca::load_be64(pl.dgid.data() + 8) == f.sw().node_guid());
    }
    SECTION("unknown destinations: ERR_NO_RECORDS") {
        sa::PathRecord u = q;
        u.dgid[15] ^= 0x55;
        CHECK(ask(f.ca(1), mad::kGet, mad::sa::kPathRecord, mask, pr(u)).status == mad::kSaNoRecords);
        u = q;
        u.dgid[0] = 0xfe;
        u.dgid[1] = 0xc0;  // another subnet prefix
        CHECK(ask(f.ca(1), mad::kGet, mad::sa::kPathRecord, mask, pr(u)).status == mad::kSaNoRecords);
        sa::PathRecord l;
        l.dlid = 5;  // port 4 has no CA
        CHECK(ask(f.ca(1), mad::kGet, mad::sa::kPathRecord, sa::pr::kDlid, pr(l)).status == mad::kSaNoRecords);
        // An SL other than 0 cannot be had.
        u = q;
        u.sl = 3;
        CHECK(ask(f.ca(1), mad::kGet, mad::sa::kPathRecord, mask | sa::pr::kSl, pr(u)).status ==
              mad::kSaNoRecords);
    }
    SECTION("MTU selector: less than 4096") {
        sa::PathRecord m = q;
        m.mtu_selector = kSelLess;
        m.mtu = kMtu4096;
        const auto &rm = ask(f.ca(1), mad::kGet, mad::sa::kPathRecord,
                             mask | sa::pr::kMtuSelector | sa::pr::kMtu, pr(m));
        REQUIRE(rm.status == 0);
        CHECK(sa::decode_path_record(rm.data).mtu == kMtu2048);
    }
    SECTION("GetTable of every path") {
        const auto &t = ask(f.ca(1), mad::kGetTable, mad::sa::kPathRecord, 0, {});
        REQUIRE(t.status == 0);
        CHECK(t.method == 0x92);
        CHECK(t.rmpp);
        CHECK(t.data.size() == 16 * sa::kPathRecordSize);  // 4 end ports squared
        CHECK(t.segments == 6);
    }
}

TEST_CASE_METHOD(SaFixture, "SA: partitions: paths and groups inside the P_Keys the SM gave", "[sa][pkey]") {
    // Port 1 a full member of 0x0001, port 2 a limited one, port 3 only in
    // the default partition.
    REQUIRE(f.sm().set_pkeys(1, {0x8001, 0xffff}));
    REQUIRE(f.sm().set_pkeys(2, {0xffff, 0x0001}));
    f.run(100000);
    CHECK(f.ca(1).pkeys()[0] == 0x8001);
    // The SA's port joined the partition: requests in it reach the SA.
    CHECK(f.sw().sma().pkey_allows(0x8001));
    CHECK(f.sw().sma().pkey_allows(0x0001));
    CHECK_FALSE(f.sw().sma().pkey_allows(0x8002));

    const uint64_t mask = sa::pr::kDgid | sa::pr::kSgid | sa::pr::kNumbPath | sa::pr::kPkey;
    auto path = [&](int from, int to, uint16_t pkey) {
        sa::PathRecord q;
        q.dgid = f.ca(to).gid();
        q.sgid = f.ca(from).gid();
        q.numb_path = 1;
        q.pkey = pkey;
        return ask(f.ca(from), mad::kGet, mad::sa::kPathRecord, mask, pr(q));
    };
    const auto &full = path(1, 2, 0x8001);
    REQUIRE(full.status == 0);
    CHECK(sa::decode_path_record(full.data).pkey == 0x8001);  // the source's own entry
    const auto &limited = path(2, 1, 0x8001);
    REQUIRE(limited.status == 0);
    CHECK(sa::decode_path_record(limited.data).pkey == 0x0001);
    CHECK(path(1, 3, 0x8001).status == mad::kSaNoRecords);  // port 3 is not in it
    CHECK(path(1, 3, 0xffff).status == 0);
    // Two limited members cannot talk (IBA 10.9.3).
    REQUIRE(f.sm().set_pkeys(3, {0x0001}));
    f.run(100000);
    CHECK(path(2, 3, 0x0001).status == mad::kSaNoRecords);
    // Without a P_Key component: the partition both share.
    sa::PathRecord q;
    q.dgid = f.ca(3).gid();
    q.sgid = f.ca(1).gid();
    const auto &any = ask(f.ca(1), mad::kGet, mad::sa::kPathRecord, sa::pr::kDgid | sa::pr::kSgid, pr(q));
    REQUIRE(any.status == 0);
    CHECK(sa::decode_path_record(any.data).pkey == 0x8001);

    // IPoIB only joins its partition's broadcast group (the SM is to have
    // it): the SA makes it on the first join of a member, as it has the
    // default partition's; a port outside the partition cannot join it.
    auto bcast = bcast_join(f.ca(1));
    bcast.mgid = {0xff, 0x12, 0x40, 0x1b, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    bcast.pkey = 0x8001;
    const auto &j1 = ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(bcast));
    REQUIRE(j1.status == 0);
    const auto g = sa::decode_mcmember_record(j1.data);
    CHECK(g.pkey == 0x8001);
    CHECK(g.qkey == 0x0b1b);
    CHECK(g.mlid != McastGroups::kBroadcastMlid);
    REQUIRE(f.sm().set_pkeys(3, {0xffff}));
    f.run(100000);
    bcast.port_gid = f.ca(3).gid();
    CHECK(ask(f.ca(3), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(bcast)).status ==
          mad::kSaReqInvalid);
    bcast.port_gid = f.ca(2).gid();
    bcast.pkey = 0x0001;  // a limited member: its MGID still says 0x8001
    CHECK(ask(f.ca(2), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(bcast)).status == 0);
    f.run(1000);
    CHECK(f.sw().fdb().mcast_ports(g.mlid).count() == 2);
    // Another partition's broadcast MGID with a P_Key that does not match it is no such group.
    CHECK_FALSE(McastGroups::is_ipoib_broadcast(bcast.mgid, 0x8002));
}

TEST_CASE_METHOD(SaFixture, "SA: the pre-created IPoIB broadcast group", "[sa][mcast]") {
    const auto &r = ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(bcast_join(f.ca(1))));
    REQUIRE(r.status == 0);
    CHECK(r.method == 0x81);
    const auto g = sa::decode_mcmember_record(r.data);
    CHECK(g.mgid == McastGroups::kBroadcastMgid);
    CHECK(g.port_gid == f.ca(1).gid());
    CHECK(g.mlid == 0xc000);
    CHECK(g.qkey == 0x0b1b);
    CHECK(g.mtu == kMtu2048);
    CHECK(g.mtu_selector == 2);
    CHECK(g.rate == 3);
    CHECK(g.pkey == 0xffff);
    CHECK(g.sl == 0);
    CHECK(g.tclass == 0);
    CHECK(g.flow_label == 0);
    CHECK(g.hop_limit == 0);
    CHECK(g.scope == 2);
    CHECK(g.join_state == sa::kFullMember);
    ask(f.ca(2), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(bcast_join(f.ca(2))));
    // A send-only full member joins but receives nothing.
    CHECK(ask(f.ca(3), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask,
              mcr(bcast_join(f.ca(3), sa::kSendOnlyFullMember)))
              .status == 0);
    f.run(1000);
    const auto ports = f.sw().fdb().mcast_ports(0xc000);
    CHECK(ports.test(1));
    CHECK(ports.test(2));
    CHECK_FALSE(ports.test(3));
    // Multicast forwarding: to every member port but the ingress port.
    const size_t before1 = f.ca(1).received_data(), before2 = f.ca(2).received_data();
    f.ca(3).send_ud(0xc000, 0xffffff, 0x0b1b, 100, true, McastGroups::kBroadcastMgid);
    f.ca(1).send_ud(0xc000, 0xffffff, 0x0b1b, 100, true, McastGroups::kBroadcastMgid);
    f.run(1000);
    CHECK(f.ca(1).received_data() == before1 + 1);
    CHECK(f.ca(2).received_data() == before2 + 2);
    // Leave: DeleteResp; the broadcast group stays without members.
    const auto &l = ask(f.ca(1), mad::kDelete, mad::sa::kMcMemberRecord, kIpoibBcastMask,
                        mcr(bcast_join(f.ca(1))));
    CHECK(l.status == 0);
    CHECK(l.method == 0x95);
    f.run(1000);
    CHECK_FALSE(f.sw().fdb().mcast_ports(0xc000).test(1));
    CHECK(f.sa().groups().find(McastGroups::kBroadcastMgid));
    // Leaving again is an error (no such member).
    CHECK(ask(f.ca(1), mad::kDelete, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(bcast_join(f.ca(1)))).status ==
          mad::kSaReqInvalid);
}

TEST_CASE("SA: --ipoib-mtu 4096 gives the broadcast groups MTU 4096, never more than the links", "[sa][mcast]") {
    for (const auto &[link, want] : {std::pair{kMtu4096, kMtu4096}, std::pair{kMtu2048, kMtu2048}}) {
        CAPTURE(link);
        FabricOptions o = test_options(4);
        o.sa_cfg.ipoib_mtu = kMtu4096;
        o.sw.mtu = link;
        TestFabric f{o};
        f.bring_up({1, 2});
        sa::McMemberRecord q;
        q.mgid = McastGroups::kBroadcastMgid;
        q.port_gid = f.ca(1).gid();
        q.pkey = 0xffff;
        q.join_state = sa::kFullMember;
        std::vector<uint8_t> rec(sa::kMcMemberRecordSize);
        sa::encode(q, rec);
        const uint64_t tid = f.ca(1).send_sa(mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, rec);
        f.run(50000);
        const FakeCa::SaResponse *r = f.ca(1).response_for(tid);
        REQUIRE(r);
        REQUIRE(r->status == 0);
        CHECK(sa::decode_mcmember_record(r->data).mtu == want);
        // The group itself (what the MFT and every later join use).
        REQUIRE(f.sa().groups().find(McastGroups::kBroadcastMgid));
        CHECK(f.sa().groups().find(McastGroups::kBroadcastMgid)->params.mtu == want);
    }
}

TEST_CASE_METHOD(SaFixture, "SA: creating, joining and deleting groups", "[sa][mcast]") {
    // Not enough components to create a group that does not exist.
    CHECK(ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(new_group(f.ca(1), 1))).status ==
          mad::kSaInsufficientComponents);
    // No JoinState component at all.
    CHECK(ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask & ~sa::mcr::kJoinState,
              mcr(bcast_join(f.ca(1))))
              .status == mad::kSaInsufficientComponents);
    // IPoIB's full mask creates it: MLIDs from 0xc001.
    const auto &c1 = ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibCreateMask, mcr(new_group(f.ca(1), 1)));
    REQUIRE(c1.status == 0);
    CHECK(sa::decode_mcmember_record(c1.data).mlid == 0xc001);
    CHECK(sa::decode_mcmember_record(c1.data).mtu == kMtu2048);
    const auto &c2 = ask(f.ca(2), mad::kSet, mad::sa::kMcMemberRecord, kIpoibCreateMask, mcr(new_group(f.ca(2), 2)));
    REQUIRE(c2.status == 0);
    CHECK(sa::decode_mcmember_record(c2.data).mlid == 0xc002);
    // Joining the first with the same parameters, then with a wrong Q_Key.
    CHECK(ask(f.ca(3), mad::kSet, mad::sa::kMcMemberRecord, kIpoibCreateMask, mcr(new_group(f.ca(3), 1))).status == 0);
    auto bad = new_group(f.ca(3), 1);
    bad.qkey = 0x1234;
    CHECK(ask(f.ca(3), mad::kSet, mad::sa::kMcMemberRecord, kIpoibCreateMask, mcr(bad)).status == mad::kSaReqInvalid);
    // An MTU the fabric cannot give.
    auto big = new_group(f.ca(1), 9);
    big.mtu_selector = kSelGreater;
    big.mtu = kMtu4096;
    CHECK(ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibCreateMask, mcr(big)).status == mad::kSaReqInvalid);
    // A PortGID nobody has.
    auto stranger = new_group(f.ca(1), 1);
    stranger.port_gid[15] ^= 0x7f;
    CHECK(ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibCreateMask, mcr(stranger)).status ==
          mad::kSaInvalidGid);
    f.run(1000);
    CHECK(f.sw().fdb().mcast_ports(0xc001).count() == 2);
    // GetTable lists the members; Get by MGID and PortGID finds one.
    const auto &t = ask(f.ca(1), mad::kGetTable, mad::sa::kMcMemberRecord, 0, {});
    REQUIRE(t.status == 0);
    CHECK(t.data.size() == 4 * sa::kMcMemberRecordSize);  // broadcast (empty), 0xc001 x2, 0xc002
    auto q = new_group(f.ca(3), 1);
    const auto &one = ask(f.ca(1), mad::kGet, mad::sa::kMcMemberRecord, sa::mcr::kMgid | sa::mcr::kPortGid, mcr(q));
    CHECK(one.status == 0);
    // Everyone leaves 0xc001: the group and its MLID go away.
    CHECK(ask(f.ca(1), mad::kDelete, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(new_group(f.ca(1), 1))).status == 0);
    CHECK(ask(f.ca(3), mad::kDelete, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(new_group(f.ca(3), 1))).status == 0);
    f.run(1000);
    CHECK(f.sw().fdb().mcast_ports(0xc001).none());
    CHECK(f.sa().groups().groups().size() == 2);
    CHECK(ask(f.ca(1), mad::kDelete, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(new_group(f.ca(1), 1))).status ==
          mad::kSaReqInvalid);
    // The next group reuses the free MLID.
    const auto &c3 = ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibCreateMask, mcr(new_group(f.ca(1), 3)));
    CHECK(sa::decode_mcmember_record(c3.data).mlid == 0xc001);
}

TEST_CASE_METHOD(SaFixture, "SA: a port that goes down leaves its groups", "[sa][mcast]") {
    ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(bcast_join(f.ca(1))));
    ask(f.ca(2), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, mcr(bcast_join(f.ca(2))));
    ask(f.ca(2), mad::kSet, mad::sa::kMcMemberRecord, kIpoibCreateMask, mcr(new_group(f.ca(2), 5)));
    f.run(1000);
    CHECK(f.sw().fdb().mcast_ports(0xc000).test(2));
    f.ca(2).disconnect();
    f.run(1000);
    CHECK_FALSE(f.sw().fdb().mcast_ports(0xc000).test(2));
    CHECK(f.sw().fdb().mcast_ports(0xc000).test(1));
    CHECK(f.sw().fdb().mcast_ports(0xc001).none());
    CHECK(f.sa().groups().groups().size() == 1);
    // `sm restart` forgets the groups; the broadcast group stays, empty.
    f.sm().restart();
    f.run(100000);
    CHECK(f.sa().groups().groups().size() == 1);
    CHECK(f.sa().groups().find(McastGroups::kBroadcastMgid)->members.empty());
    CHECK(f.sw().fdb().mcast_ports(0xc000).none());
}

TEST_CASE_METHOD(SaFixture, "SA: a request sent again with the same TID gets the same answer", "[sa]") {
    const auto rec = mcr(bcast_join(f.ca(1)));
    const uint64_t tid = 0xabcdef;
    const auto first = ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, rec, tid);
    const auto again = ask(f.ca(1), mad::kSet, mad::sa::kMcMemberRecord, kIpoibBcastMask, rec, tid);
    CHECK(first.status == 0);
    CHECK(again.header == first.header);
    CHECK(f.sa().stats().duplicates == 1);
    // A leave retransmitted after its answer was lost is answered, not refused.
    const uint64_t ltid = 0xabcdf0;
    ask(f.ca(1), mad::kDelete, mad::sa::kMcMemberRecord, kIpoibBcastMask, rec, ltid);
    CHECK(ask(f.ca(1), mad::kDelete, mad::sa::kMcMemberRecord, kIpoibBcastMask, rec, ltid).status == 0);
    // A different request with an old TID is a new request.
    CHECK(ask(f.ca(1), mad::kGet, mad::sa::kClassPortInfo, 0, {}, tid).status == 0);
}

TEST_CASE_METHOD(SaFixture, "SA: NodeRecord and PortInfoRecord", "[sa]") {
    std::vector<uint8_t> nr(sa::kNodeRecordSize);
    set16(nr, 0, 1);
    const auto &sw = ask(f.ca(1), mad::kGet, mad::sa::kNodeRecord, sa::nr::kLid, nr);
    REQUIRE(sw.status == 0);
    CHECK(get16(sw.data, 0) == 1);
    CHECK(sw.data[4 + iba::mad::node_info::kNodeType] == 2);
    CHECK(std::string(reinterpret_cast<const char *>(sw.data.data() + 44)) == "hcasim switch");
    set64(std::span<uint8_t>(nr).subspan(4), iba::mad::node_info::kNodeGuid, f.ca(3).options().node_guid);
    const auto &ca = ask(f.ca(1), mad::kGet, mad::sa::kNodeRecord, sa::nr::kNodeGuid, nr);
    REQUIRE(ca.status == 0);
    CHECK(get16(ca.data, 0) == 4);
    CHECK(std::string(reinterpret_cast<const char *>(ca.data.data() + 44)) == "fake CA 3");
    // A Get matching several records.
    CHECK(ask(f.ca(1), mad::kGet, mad::sa::kNodeRecord, 0, nr).status == mad::kSaTooManyRecords);
    // GetTable of every node (saquery's default): RMPP, 4 records.
    const auto &all = ask(f.ca(1), mad::kGetTable, mad::sa::kNodeRecord, 0, {});
    REQUIRE(all.status == 0);
    CHECK(all.data.size() == 4 * sa::kNodeRecordSize);
    CHECK(get16(all.header, mad::sa::kAttrOffset) == sa::kNodeRecordSize / 8);
    // PortInfoRecords of the switch: ports 0..4.
    std::vector<uint8_t> pir(sa::kPortInfoRecordSize);
    set16(pir, 0, 1);
    const auto &sp = ask(f.ca(1), mad::kGetTable, mad::sa::kPortInfoRecord, sa::pir::kLid, pir);
    REQUIRE(sp.status == 0);
    CHECK(sp.data.size() == 5 * sa::kPortInfoRecordSize);
    set16(pir, 0, 3);
    const auto &cp = ask(f.ca(1), mad::kGet, mad::sa::kPortInfoRecord, sa::pir::kLid, pir);
    REQUIRE(cp.status == 0);
    CHECK(get16(cp.data, 4 + iba::mad::port_info::kLid) == 3);
    CHECK(cp.data[2] == 1);
    // Ports with IsSM: the management port only.
    std::vector<uint8_t> sm(sa::kPortInfoRecordSize);
    set32(std::span<uint8_t>(sm).subspan(4), iba::mad::port_info::kCapMask, iba::mad::port_info::kCapIsSm);
    const auto &sms = ask(f.ca(1), mad::kGet, mad::sa::kPortInfoRecord, sa::pir::kCapMask, sm);
    CHECK(sms.status == 0);  // exactly one
    CHECK(get16(sms.data, 0) == 1);
    CHECK(sms.data[2] == 0);
}

TEST_CASE_METHOD(SaFixture, "SA: errors and other classes", "[sa]") {
    CHECK(ask(f.ca(1), mad::kGet, mad::sa::kServiceRecord, 0, {}).status == mad::kStatusUnsupportedMethodAttr);
    CHECK(ask(f.ca(1), mad::kSet, mad::sa::kInformInfo, 0, {}).status == mad::kStatusUnsupportedMethodAttr);
    CHECK(ask(f.ca(1), mad::kSet, mad::sa::kNodeRecord, 0, {}).status == mad::kStatusUnsupportedMethodAttr);
    CHECK(ask(f.ca(1), mad::kSend, mad::sa::kNodeRecord, 0, {}).status == mad::kStatusUnsupportedMethod);
    // A PMA attribute the switch's PMA does not have (PortSamplesControl).
    Mad pma{};
    pma[mad::kBaseVersion] = 1;
    pma[mad::kMgmtClass] = mad::kClassPerf;
    pma[mad::kClassVersion] = 1;
    pma[mad::kMethod] = mad::kGet;
    set64(pma, mad::kTid, 0x9999);
    set16(pma, mad::kAttrId, mad::perf::kPortSamplesControl);
    f.ca(1).send_gmp(pma, 1);
    f.run(1000);
    const auto *r = f.ca(1).response_for(0x9999);
    REQUIRE(r);
    CHECK(r->status == mad::kStatusUnsupportedMethodAttr);
    CHECK(r->method == 0x81);
    // A bad class version.
    Mad v{};
    v[mad::kBaseVersion] = 1;
    v[mad::kMgmtClass] = mad::kClassSubnAdm;
    v[mad::kClassVersion] = 7;
    v[mad::kMethod] = mad::kGet;
    set64(v, mad::kTid, 0x9998);
    f.ca(1).send_gmp(v, 1);
    f.run(1000);
    REQUIRE(f.ca(1).response_for(0x9998));
    CHECK(f.ca(1).response_for(0x9998)->status == mad::kStatusBadVersion);
    // A wrong Q_Key at QP1 is dropped and counted.
    std::vector<uint8_t> pkt = f.ca(1).ud_packet(1, 1, 0x1234, 256);
    f.ca(1).send_raw(pkt);
    f.run(1000);
    CHECK(f.sw().drops(Drop::BadQkey) == 1);
    CHECK(f.sw().port(0).pi.qkey_violations == 1);
}

TEST_CASE("SA: GetTable over RMPP with ACK windows, loss and retransmission", "[sa][rmpp]") {
    TestFabric f(test_options(4));
    f.bring_up({1, 2, 3, 4});
    FakeCa &ca = f.ca(1);
    const auto table = [&]() -> const FakeCa::SaResponse * {
        const uint64_t tid = ca.send_sa(mad::kGetTable, mad::sa::kPathRecord, 0, {});
        f.run(20000);
        return ca.response_for(tid);
    };
    // 5 end ports: 25 paths x 64 bytes = 1600 bytes = 8 segments.
    SECTION("window of 4: ACKs after segments 1, 5 and 8") {
        ca.options().rmpp_window = 4;
        const auto *r = table();
        REQUIRE(r);
        CHECK(r->data.size() == 25 * sa::kPathRecordSize);
        CHECK(r->segments == 8);
        CHECK(ca.acks_sent() == 3);
        CHECK(f.sa().rmpp().stats().completed == 1);
        CHECK(f.sa().rmpp().active() == 0);
        // The records arrive intact and in order.
        const auto first = sa::decode_path_record(std::span<const uint8_t>(r->data).first(64));
        CHECK(first.slid == 1);
        CHECK(first.dlid == 1);
        const auto last = sa::decode_path_record(std::span<const uint8_t>(r->data).subspan(24 * 64, 64));
        CHECK(last.slid == 5);
        CHECK(last.dlid == 5);
    }
    SECTION("window of 1: one ACK per segment") {
        ca.options().rmpp_window = 1;
        const auto *r = table();
        REQUIRE(r);
        CHECK(ca.acks_sent() == 8);
    }
    SECTION("a lost segment is sent again after the timeout") {
        ca.options().rmpp_window = 8;
        ca.options().rmpp_drop_segment = 4;
        const uint64_t tid = ca.send_sa(mad::kGetTable, mad::sa::kPathRecord, 0, {});
        f.run(20000);
        CHECK_FALSE(ca.response_for(tid));
        f.run(1100000);
        const auto *r = ca.response_for(tid);
        REQUIRE(r);
        CHECK(r->data.size() == 25 * sa::kPathRecordSize);
        CHECK(f.sa().rmpp().stats().retransmits > 0);
    }
    SECTION("a receiver that never ACKs: the sender gives up with ABORT") {
        ca.options().rmpp_ack = false;
        const uint64_t tid = ca.send_sa(mad::kGetTable, mad::sa::kPathRecord, 0, {});
        f.run(7000000);
        CHECK(f.sa().rmpp().active() == 0);
        CHECK(f.sa().rmpp().stats().aborted == 1);
        const auto *r = ca.response_for(tid);
        REQUIRE(r);  // the ABORT
        CHECK(r->header[mad::sa::kRmppHeader + mad::sa::kRmppType] == 4);
        CHECK(r->header[mad::sa::kRmppHeader + mad::sa::kRmppStatus] == kRmppStatusT2L);
    }
    SECTION("an ACK whose window ends before its segment aborts (W2S)") {
        ca.options().rmpp_ack = false;
        const uint64_t tid = ca.send_sa(mad::kGetTable, mad::sa::kPathRecord, 0, {});
        f.run(1000);
        Mad ack{};
        ack[mad::kBaseVersion] = 1;
        ack[mad::kMgmtClass] = mad::kClassSubnAdm;
        ack[mad::kClassVersion] = 2;
        ack[mad::kMethod] = mad::kGetTable;
        set64(ack, mad::kTid, tid);
        set16(ack, mad::kAttrId, mad::sa::kPathRecord);
        ack[mad::sa::kRmppHeader + mad::sa::kRmppVersion] = 1;
        ack[mad::sa::kRmppHeader + mad::sa::kRmppType] = 2;
        ack[mad::sa::kRmppHeader + mad::sa::kRmppRespTimeFlags] = 1;
        set32(ack, mad::sa::kRmppHeader + mad::sa::kRmppSegment, 1);
        set32(ack, mad::sa::kRmppHeader + mad::sa::kRmppPayloadLen, 0);
        ca.send_gmp(ack, 1);
        f.run(1000);
        CHECK(f.sa().rmpp().active() == 0);
        const auto *r = ca.response_for(tid);
        REQUIRE(r);
        CHECK(r->header[mad::sa::kRmppHeader + mad::sa::kRmppStatus] == kRmppStatusW2S);
    }
    SECTION("the same GetTable again restarts the transfer") {
        ca.options().rmpp_ack = false;
        const uint64_t tid = ca.send_sa(mad::kGetTable, mad::sa::kPathRecord, 0, {});
        f.run(1000);
        ca.options().rmpp_ack = true;
        ca.send_sa(mad::kGetTable, mad::sa::kPathRecord, 0, {}, tid);
        f.run(20000);
        const auto *r = ca.response_for(tid);
        REQUIRE(r);
        CHECK(r->data.size() == 25 * sa::kPathRecordSize);
        CHECK(f.sa().rmpp().active() == 0);
    }
}

TEST_CASE("SA: RMPP PayloadLength and flags of each segment", "[sa][rmpp]") {
    ManualLoop loop;
    Log log;
    log.capture_in_memory();
    std::vector<Mad> sent;
    RmppSender s(loop, log, [&](const MadAddress &, const Mad &m) { sent.push_back(m); }, {});
    MadAddress to;
    to.dlid = 9;
    to.dst_qp = 1;
    Mad hdr{};
    hdr[mad::kMethod] = mad::kGetTable | mad::kResp;
    set64(hdr, mad::kTid, 5);
    std::vector<uint8_t> data(450);  // 3 segments: 200, 200, 50
    for (size_t i = 0; i < data.size(); ++i) {
        data[i] = static_cast<uint8_t>(i);
    }
    REQUIRE(s.start(to, hdr, data));
    REQUIRE(sent.size() == 1);  // the window starts at one segment
    const size_t r = mad::sa::kRmppHeader;
    CHECK(sent[0][r + mad::sa::kRmppType] == 1);
    CHECK((sent[0][r + mad::sa::kRmppRespTimeFlags] & 7) == (kRmppActive | kRmppFirst));
    CHECK(get32(sent[0], r + mad::sa::kRmppSegment) == 1);
    CHECK(get32(sent[0], r + mad::sa::kRmppPayloadLen) == 450 + 3 * 20);
    MadAddress from;
    from.slid = 9;
    from.src_qp = 1;
    Mad ack = hdr;
    ack[r + mad::sa::kRmppType] = 2;
    ack[r + mad::sa::kRmppRespTimeFlags] = 1;
    set32(ack, r + mad::sa::kRmppSegment, 1);
    set32(ack, r + mad::sa::kRmppPayloadLen, 10);
    s.on_control(from, ack);
    REQUIRE(sent.size() == 3);
    CHECK((sent[1][r + mad::sa::kRmppRespTimeFlags] & 7) == kRmppActive);
    CHECK(get32(sent[1], r + mad::sa::kRmppPayloadLen) == 0);
    CHECK((sent[2][r + mad::sa::kRmppRespTimeFlags] & 7) == (kRmppActive | kRmppLast));
    CHECK(get32(sent[2], r + mad::sa::kRmppPayloadLen) == 50 + 20);
    CHECK(sent[2][mad::sa::kData] == static_cast<uint8_t>(400));
    CHECK(sent[2][mad::sa::kData + 50] == 0);  // padding
    // An ACK for a segment never sent aborts (S2B).
    set32(ack, r + mad::sa::kRmppSegment, 7);
    s.on_control(from, ack);
    CHECK(s.active() == 0);
    CHECK(sent.back()[r + mad::sa::kRmppType] == 4);
    CHECK(sent.back()[r + mad::sa::kRmppStatus] == kRmppStatusS2B);
}

TEST_CASE_METHOD(SaFixture, "switch PMA: perfquery's PortCounters per port, AllPortSelect, reset", "[pma]") {
    FakeCa &ca = *f.cas[0];
    IbSwitch &sw = f.fabric->sw();
    auto ask_pma = [&](uint8_t method, uint16_t attr, uint8_t port, uint16_t select = 0, uint8_t select2 = 0) {
        Mad m{};
        m[mad::kBaseVersion] = 1;
        m[mad::kMgmtClass] = mad::kClassPerf;
        m[mad::kClassVersion] = 1;
        m[mad::kMethod] = method;
        static uint64_t tid = 0x77000;
        hca::store_be64(&m[mad::kTid], ++tid);
        hca::store_be16(&m[mad::kAttrId], attr);
        m[mad::perf::kData + 1] = port;
        hca::store_be16(&m[mad::perf::kData + 2], select);
        m[mad::perf::kData + 18] = select2;
        ca.send_gmp(m, sw.lid());
        f.run(50000);
        const FakeCa::SaResponse *r = ca.response_for(tid);
        REQUIRE(r);
        CHECK(r->method == (mad::kGet | mad::kResp));  // GetResp, to a Set too
        return *r;
    };
    const uint8_t *d = nullptr;
    auto r = ask_pma(mad::kGet, mad::perf::kClassPortInfo, 0);
    CHECK(r.status == 0);
    CHECK(hca::load_be16(&r.header[mad::perf::kData + 2]) & iba::pma::kCapXmitWait);

    // What `fabric_ctl ports` shows for port 2 is what perfquery reads.
    PortCounters &c2 = sw.port(2).ctr;
    c2.xmit_wait = 5;
    c2.xmit_discards = 3;
    REQUIRE(c2.xmit_packets > 0);
    r = ask_pma(mad::kGet, mad::perf::kPortCounters, 2);
    REQUIRE(r.status == 0);
    d = &r.header[mad::perf::kData];
    CHECK(d[1] == 2);
    CHECK(hca::load_be16(d + 14) == 3);
    CHECK(hca::load_be32(d + 40) == 5);
    CHECK(hca::load_be32(d + 32) == std::min<uint64_t>(c2.xmit_packets, 0xffffffff));
    CHECK(hca::load_be32(d + 24) == c2.xmit_bytes / 4);

    // AllPortSelect sums the external ports.
    sw.port(3).ctr.xmit_wait = 2;
    r = ask_pma(mad::kGet, mad::perf::kPortCounters, 0xff);
    REQUIRE(r.status == 0);
    CHECK(hca::load_be32(&r.header[mad::perf::kData + 40]) == 7);

    // Reset (perfquery -R): CounterSelect and CounterSelect2 clear port 2 only.
    r = ask_pma(mad::kSet, mad::perf::kPortCounters, 2, 0xffff, 0x01);
    REQUIRE(r.status == 0);
    CHECK(c2.xmit_wait == 0);
    CHECK(c2.xmit_discards == 0);
    CHECK(sw.port(3).ctr.xmit_wait == 2);

    // Extended counters are 64-bit.
    c2.rcv_packets = 0x123456789ull;
    r = ask_pma(mad::kGet, mad::perf::kPortCountersExtended, 2);
    REQUIRE(r.status == 0);
    CHECK(hca::load_be64(&r.header[mad::perf::kData + 32]) == 0x123456789ull);

    // A port the switch does not have.
    r = ask_pma(mad::kGet, mad::perf::kPortCounters, 9);
    CHECK(r.status == mad::kStatusInvalidField);
    r = ask_pma(mad::kGet, mad::perf::kPortCounters, 0);
    CHECK(r.status == mad::kStatusInvalidField);
}
