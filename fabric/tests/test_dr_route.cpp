// Directed-route SMP processing hop by hop (IBA 14.2.2, C14-9 and C14-13),
// at the switch and at channel adapters, in both directions.
#include <catch2/catch.hpp>

#include "dr_route.h"

using namespace fabric;

namespace {

constexpr uint16_t kPerm = iba::kPermissiveLid;

Mad dr_request(std::initializer_list<uint8_t> path_list, uint16_t dr_slid = kPerm, uint16_t dr_dlid = kPerm) {
    std::vector<uint8_t> path(path_list);
    Mad m;
    init_dr_smp(m, mad::kGet, 0x77, mad::kAttrNodeInfo, 0, path);
    set16(m, mad::smp::kDrSlid, dr_slid);
    set16(m, mad::smp::kDrDlid, dr_dlid);
    return m;
}

void make_response(Mad &m) {
    m[mad::kMethod] = mad::kGet | mad::kResp;
    set16(m, mad::kStatus, mad::smp::kDirectionBit);
}

DrContext from_port(uint8_t port, bool dlid_local = true) {
    DrContext c;
    c.in_port = port;
    c.num_ports = 8;
    c.dlid_is_local = dlid_local;
    return c;
}

DrContext originated() {
    DrContext c;
    c.originated = true;
    c.num_ports = 8;
    return c;
}

}  // namespace

TEST_CASE("DR: the switch SM reaches the CA on port 3 and the answer comes back", "[dr]") {
    Mad m = dr_request({0, 3});
    // The SM at the management port sends: C14-9:1.
    DrDecision d = dr_switch_process(m, originated());
    REQUIRE(d.action == DrAction::Forward);
    CHECK(d.port == 3);
    CHECK(dr::hop_ptr(m) == 1);
    // The CA (its port 1) is the end of the path: C14-9:3.
    d = dr_ca_receive(m, 1);
    REQUIRE(d.action == DrAction::ToSma);
    CHECK(dr::hop_ptr(m) == 2);
    CHECK(dr::return_path(m, 1) == 1);
    // The CA answers: C14-13:1 on its side.
    make_response(m);
    d = dr_ca_send_response(m, 1);
    REQUIRE(d.action == DrAction::Forward);
    CHECK(dr::hop_ptr(m) == 1);
    // Back at the switch on port 3: C14-13:3, hop pointer 0, to the SM.
    d = dr_switch_process(m, from_port(3, false));
    REQUIRE(d.action == DrAction::ToSm);
    CHECK(dr::hop_ptr(m) == 0);
}

TEST_CASE("DR: hop count 0 is processed by the switch itself", "[dr]") {
    Mad m = dr_request({0});
    DrDecision d = dr_switch_process(m, originated());
    REQUIRE(d.action == DrAction::ToSma);
    CHECK(dr::hop_ptr(m) == 1);
    make_response(m);
    d = dr_switch_process(m, originated());
    REQUIRE(d.action == DrAction::ToSm);
    CHECK(dr::hop_ptr(m) == 0);
}

TEST_CASE("DR: an SM on a CA queries the switch (path [0,1])", "[dr]") {
    Mad m = dr_request({0, 1});
    m[mad::smp::kHopPtr] = 1;  // the CA's send processing, C14-9:1
    // The switch receives it on port 2 and is the destination.
    DrDecision d = dr_switch_process(m, from_port(2));
    REQUIRE(d.action == DrAction::ToSma);
    CHECK(dr::hop_ptr(m) == 2);
    CHECK(dr::return_path(m, 1) == 2);
    // The switch SMA's response goes back out port 2.
    make_response(m);
    d = dr_switch_process(m, originated());
    REQUIRE(d.action == DrAction::Forward);
    CHECK(d.port == 2);
    CHECK(dr::hop_ptr(m) == 1);
    // The SM's CA: C14-13:3.
    d = dr_ca_receive(m, 1);
    REQUIRE(d.action == DrAction::ToSm);
    CHECK(dr::hop_ptr(m) == 0);
}

TEST_CASE("DR: through the switch from CA on port 2 to CA on port 4 (path [0,1,4])", "[dr]") {
    Mad m = dr_request({0, 1, 4});
    m[mad::smp::kHopPtr] = 1;
    // Intermediate hop at the switch: C14-9:2.
    DrDecision d = dr_switch_process(m, from_port(2, false));
    REQUIRE(d.action == DrAction::Forward);
    CHECK(d.port == 4);
    CHECK(dr::hop_ptr(m) == 2);
    CHECK(dr::return_path(m, 1) == 2);
    // The far CA.
    d = dr_ca_receive(m, 1);
    REQUIRE(d.action == DrAction::ToSma);
    CHECK(dr::hop_ptr(m) == 3);
    CHECK(dr::return_path(m, 2) == 1);
    make_response(m);
    REQUIRE(dr_ca_send_response(m, 1).action == DrAction::Forward);
    CHECK(dr::hop_ptr(m) == 2);
    // Returning intermediate hop: C14-13:2, out the port it came in.
    d = dr_switch_process(m, from_port(4, false));
    REQUIRE(d.action == DrAction::Forward);
    CHECK(d.port == 2);
    CHECK(dr::hop_ptr(m) == 1);
    d = dr_ca_receive(m, 1);
    REQUIRE(d.action == DrAction::ToSm);
    CHECK(dr::hop_ptr(m) == 0);
}

TEST_CASE("DR: discards", "[dr]") {
    SECTION("hop count above 63 (C14-6)") {
        Mad m = dr_request({0, 1});
        m[mad::smp::kHopCnt] = 64;
        CHECK(dr_switch_process(m, originated()).action == DrAction::Discard);
        CHECK(dr_ca_receive(m, 1).action == DrAction::Discard);
    }
    SECTION("path naming port 0 or a port the switch lacks") {
        Mad m = dr_request({0, 0});
        CHECK(dr_switch_process(m, originated()).action == DrAction::Discard);
        Mad m2 = dr_request({0, 9});
        CHECK(dr_switch_process(m2, originated()).action == DrAction::Discard);
        Mad m3 = dr_request({0, 1, 200});
        m3[mad::smp::kHopPtr] = 1;
        CHECK(dr_switch_process(m3, from_port(2)).action == DrAction::Discard);
    }
    SECTION("hop pointer beyond hop count + 1 (C14-9:5, C14-13:5)") {
        Mad m = dr_request({0, 1, 2});
        m[mad::smp::kHopPtr] = 5;
        CHECK(dr_switch_process(m, from_port(1)).action == DrAction::Discard);
        make_response(m);
        CHECK(dr_switch_process(m, from_port(1)).action == DrAction::Discard);
    }
    SECTION("a CA is no intermediate hop") {
        Mad m = dr_request({0, 1, 2, 3});
        m[mad::smp::kHopPtr] = 1;
        CHECK(dr_ca_receive(m, 1).action == DrAction::Discard);
        Mad r = dr_request({0, 1, 2, 3});
        make_response(r);
        r[mad::smp::kHopPtr] = 2;
        CHECK(dr_ca_receive(r, 1).action == DrAction::Discard);
    }
    SECTION("a CA that did not advance the hop pointer (C14-9:1)") {
        Mad m = dr_request({0, 1});
        CHECK(dr_ca_receive(m, 1).action == DrAction::Discard);
    }
    SECTION("a request made here must start at hop pointer 0") {
        Mad m = dr_request({0, 1});
        m[mad::smp::kHopPtr] = 1;
        CHECK(dr_switch_process(m, originated()).action == DrAction::Discard);
    }
    SECTION("a CA response whose return path does not start at its port") {
        Mad m = dr_request({0, 1});
        m[mad::smp::kHopPtr] = 1;
        REQUIRE(dr_ca_receive(m, 1).action == DrAction::ToSma);
        make_response(m);
        CHECK(dr_ca_send_response(m, 2).action == DrAction::Discard);
    }
}

TEST_CASE("DR: initial LID-routed part (DrSLID not permissive)", "[dr]") {
    // An SM at LID 10 sends LID-routed to this switch, which starts the
    // directed part towards port 3.
    Mad m = dr_request({0, 3}, 10, kPerm);
    DrDecision d = dr_switch_process(m, from_port(1, false));
    CHECK(d.action == DrAction::LidRoute);  // not addressed to us yet
    CHECK(d.new_dlid == 0);
    d = dr_switch_process(m, from_port(1, true));
    REQUIRE(d.action == DrAction::Forward);
    CHECK(d.port == 3);
    CHECK(dr::hop_ptr(m) == 1);
    // The CA answers; back at the switch, C14-13:3 turns it into LID
    // routing to DrSLID.
    REQUIRE(dr_ca_receive(m, 1).action == DrAction::ToSma);
    make_response(m);
    REQUIRE(dr_ca_send_response(m, 1).action == DrAction::Forward);
    d = dr_switch_process(m, from_port(3, false));
    REQUIRE(d.action == DrAction::LidRoute);
    CHECK(d.new_dlid == 10);
    CHECK(dr::hop_ptr(m) == 0);
    // Arriving at LID 10's switch with hop pointer 0: C14-13:4.
    CHECK(dr_switch_process(m, from_port(5, true)).action == DrAction::ToSm);
    CHECK(dr_switch_process(m, from_port(5, false)).action == DrAction::LidRoute);
}

TEST_CASE("DR: ending LID-routed part (DrDLID not permissive)", "[dr]") {
    // This switch ends the directed part and routes on to LID 20.
    Mad m = dr_request({0, 1}, kPerm, 20);
    m[mad::smp::kHopPtr] = 1;
    DrDecision d = dr_switch_process(m, from_port(2));
    REQUIRE(d.action == DrAction::LidRoute);
    CHECK(d.new_dlid == 20);
    CHECK(dr::hop_ptr(m) == 2);
    CHECK(dr::return_path(m, 1) == 2);
    // On the way (C14-9:4) and at LID 20's switch.
    Mad on = m;
    CHECK(dr_switch_process(on, from_port(4, false)).action == DrAction::LidRoute);
    CHECK(dr_switch_process(on, from_port(4, true)).action == DrAction::ToSma);
    // LID 20 answers LID-routed to this switch; here it turns directed
    // again out the return path: C14-13:1.
    make_response(m);
    d = dr_switch_process(m, from_port(6, true));
    REQUIRE(d.action == DrAction::Forward);
    CHECK(d.port == 2);
    CHECK(dr::hop_ptr(m) == 1);
    // A response made by an SMA at the end of the LID-routed part goes back
    // LID-routed.
    Mad r = dr_request({0, 1}, kPerm, 20);
    r[mad::smp::kHopPtr] = 2;
    make_response(r);
    CHECK(dr_switch_process(r, originated()).action == DrAction::LidRoute);
}
