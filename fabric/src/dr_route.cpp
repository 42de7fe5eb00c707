#include "dr_route.h"

namespace fabric {

const char *dr_action_name(DrAction a) {
    switch (a) {
    case DrAction::Discard: return "discard";
    case DrAction::Forward: return "forward";
    case DrAction::ToSma: return "to-sma";
    case DrAction::ToSm: return "to-sm";
    case DrAction::LidRoute: return "lid-route";
    }
    return "?";
}

namespace {

DrDecision discard(const char *why) { return {DrAction::Discard, 0, 0, why}; }
DrDecision to_sma(const char *why) { return {DrAction::ToSma, 0, 0, why}; }
DrDecision to_sm(const char *why) { return {DrAction::ToSm, 0, 0, why}; }
DrDecision lid_route(uint16_t new_dlid, const char *why) { return {DrAction::LidRoute, 0, new_dlid, why}; }

DrDecision forward(uint8_t port, uint8_t num_ports, const char *why) {
    // Port 0 is not a physical port: a path naming it, or a port the switch
    // does not have, is discarded (the kernel's phys_port_cnt check).
    if (port == 0 || port > num_ports) {
        return discard("path names no physical port");
    }
    return {DrAction::Forward, port, 0, why};
}

uint8_t &hop_ptr_ref(Mad &m) { return m[mad::smp::kHopPtr]; }
void set_return_path(Mad &m, size_t i, uint8_t port) { m[mad::smp::kReturnPath + i] = port; }

// The start of the directed part at this switch (C14-9:1, or C14-9:3 for a
// hop count of 0): by the SM that made it, or where the initial LID-routed
// part ends.
DrDecision start_outgoing(Mad &m, const DrContext &c) {
    uint8_t &ptr = hop_ptr_ref(m);
    const uint8_t cnt = dr::hop_cnt(m);
    ptr = 1;
    if (cnt == 0) {
        if (dr::dr_dlid(m) == iba::kPermissiveLid) {
            return to_sma("C14-9:3 hop count 0: this node");
        }
        return lid_route(dr::dr_dlid(m), "C14-9:3 hop count 0, ending LID-routed part to DrDLID");
    }
    return forward(dr::initial_path(m, 1), c.num_ports, "C14-9:1 start of directed route");
}

DrDecision outgoing(Mad &m, const DrContext &c) {
    uint8_t &ptr = hop_ptr_ref(m);
    const uint8_t cnt = dr::hop_cnt(m);
    const bool dlid_perm = dr::dr_dlid(m) == iba::kPermissiveLid;
    if (c.originated) {
        if (ptr != 0) {
            return discard("request made here must start with hop pointer 0");
        }
        // With a non-permissive DrSLID the SM asked for an initial
        // LID-routed part, which the LRH DLID addresses (IBA 14.2.2.1).
        if (dr::dr_slid(m) != iba::kPermissiveLid && !c.dlid_is_local) {
            return lid_route(0, "initial LID-routed part");
        }
        return start_outgoing(m, c);
    }
    if (ptr == 0) {
        if (!c.dlid_is_local) {
            return lid_route(0, "initial LID-routed part");
        }
        return start_outgoing(m, c);
    }
    if (c.in_port == 0 && ptr <= cnt) {
        return discard("directed part reached the management port by LID routing");
    }
    if (ptr < cnt) {
        // C14-9:2 intermediate hop: remember where it came from.
        set_return_path(m, ptr, c.in_port);
        ++ptr;
        return forward(dr::initial_path(m, ptr), c.num_ports, "C14-9:2 intermediate hop");
    }
    if (ptr == cnt) {
        // C14-9:3 end of the directed part.
        set_return_path(m, ptr, c.in_port);
        ++ptr;
        if (dlid_perm) {
            return to_sma("C14-9:3 end of directed route");
        }
        return lid_route(dr::dr_dlid(m), "C14-9:3 ending LID-routed part to DrDLID");
    }
    if (ptr == cnt + 1) {
        // C14-9:4 in the ending LID-routed part.
        return c.dlid_is_local ? to_sma("C14-9:4 ending LID-routed part arrived")
                               : lid_route(0, "C14-9:4 ending LID-routed part");
    }
    return discard("C14-9:5 hop pointer out of range");
}

DrDecision returning(Mad &m, const DrContext &c) {
    uint8_t &ptr = hop_ptr_ref(m);
    const uint8_t cnt = dr::hop_cnt(m);
    const bool slid_perm = dr::dr_slid(m) == iba::kPermissiveLid;
    auto end_of_directed = [&]() {
        // C14-13:3 the node that started the directed part.
        ptr = 0;
        if (slid_perm) {
            return to_sm("C14-13:3 end of return path");
        }
        return lid_route(dr::dr_slid(m), "C14-13:3 initial LID-routed part back to DrSLID");
    };
    if (c.originated) {
        // A response made here by the SMA (or SM).  If the request came in
        // through an ending LID-routed part, the response goes back the
        // same way, to the LRH DLID the SMA took from the request's SLID.
        if (dr::dr_dlid(m) != iba::kPermissiveLid) {
            return lid_route(0, "response to the ending LID-routed part");
        }
        if (cnt && ptr == cnt + 1) {
            --ptr;
            return forward(dr::return_path(m, ptr), c.num_ports, "C14-13:1 start of return path");
        }
        if (ptr == 1) {
            return end_of_directed();
        }
        return discard("response hop pointer out of range");
    }
    if (cnt && ptr == cnt + 1) {
        // C14-13:1 the ending LID-routed part of the response arrived at the
        // last switch of the directed part: go back along the return path.
        if (!c.dlid_is_local) {
            return lid_route(0, "ending LID-routed part of the response");
        }
        --ptr;
        return forward(dr::return_path(m, ptr), c.num_ports, "C14-13:1 start of return path");
    }
    if (ptr >= 2 && ptr <= cnt) {
        if (c.in_port == 0) {
            return discard("directed part reached the management port by LID routing");
        }
        --ptr;
        return forward(dr::return_path(m, ptr), c.num_ports, "C14-13:2 intermediate hop");
    }
    if (ptr == 1) {
        return end_of_directed();
    }
    if (ptr == 0) {
        return c.dlid_is_local ? to_sm("C14-13:4 initial LID-routed part arrived")
                               : lid_route(0, "C14-13:4 initial LID-routed part");
    }
    return discard("C14-13:5 hop pointer out of range");
}

}  // namespace

DrDecision dr_switch_process(Mad &m, const DrContext &c) {
    // C14-6: valid hop counts are 0 to 63.
    if (dr::hop_cnt(m) >= dr::kMaxHops) {
        return discard("C14-6 hop count above 63");
    }
    return dr::direction(m) ? returning(m, c) : outgoing(m, c);
}

DrDecision dr_ca_receive(Mad &m, uint8_t port) {
    uint8_t &ptr = hop_ptr_ref(m);
    const uint8_t cnt = dr::hop_cnt(m);
    if (cnt >= dr::kMaxHops) {
        return discard("C14-6 hop count above 63");
    }
    if (!dr::direction(m)) {
        if (cnt && ptr == 0) {
            return discard("C14-9:1 sender did not advance the hop pointer");
        }
        if (ptr && ptr < cnt) {
            return discard("C14-9:2 a CA is no intermediate hop");
        }
        if (ptr == cnt) {
            if (cnt) {
                set_return_path(m, ptr, port);
            }
            ++ptr;
            return dr::dr_dlid(m) == iba::kPermissiveLid ? to_sma("C14-9:3 end of directed route")
                                                         : discard("C14-9:3 a CA cannot LID-route onwards");
        }
        return ptr == cnt + 1 ? to_sma("C14-9:4") : discard("C14-9:5 hop pointer out of range");
    }
    if (cnt && ptr == cnt + 1) {
        --ptr;
        return dr::return_path(m, ptr) == port ? to_sm("C14-13:1") : discard("C14-13:1 wrong port");
    }
    if (ptr >= 2 && ptr <= cnt) {
        return discard("C14-13:2 a CA is no intermediate hop");
    }
    if (ptr == 1) {
        if (dr::dr_slid(m) != iba::kPermissiveLid) {
            return discard("C14-13:3 a CA cannot LID-route onwards");
        }
        ptr = 0;
        return to_sm("C14-13:3 end of return path");
    }
    return ptr == 0 ? to_sm("C14-13:4") : discard("C14-13:5 hop pointer out of range");
}

DrDecision dr_ca_send_response(Mad &m, uint8_t port) {
    uint8_t &ptr = hop_ptr_ref(m);
    const uint8_t cnt = dr::hop_cnt(m);
    if (dr::dr_dlid(m) != iba::kPermissiveLid) {
        return {DrAction::Forward, port, 0, "LID-routed response"};
    }
    if (cnt && ptr == cnt + 1) {
        --ptr;
        if (dr::return_path(m, ptr) != port) {
            return discard("C14-13:1 return path does not start at this port");
        }
        return {DrAction::Forward, port, 0, "C14-13:1 start of return path"};
    }
    return discard("response stays local (hop count 0)");
}

}  // namespace fabric
