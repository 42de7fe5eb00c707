// Directed-route SMP processing at a switch (IBA Vol. 1 14.2.2.2 and
// 14.2.2.3): hop pointer, hop count, InitialPath/ReturnPath, the D bit and
// the optional LID-routed parts given by DrSLID/DrDLID.  Pure functions on
// the MAD, so both directions can be tested hop by hop.  The conditions are
// the ones of C14-9 (outgoing) and C14-13 (returning), which the Linux
// kernel's drivers/infiniband/core/smi.c also implements.
#pragma once

#include <cstdint>

#include "mad_util.h"

namespace fabric {

enum class DrAction : uint8_t {
    Discard,   // drop; 'why' says which rule
    Forward,   // send out 'port' (a physical port, 1..N), still directed
    ToSma,     // outgoing SMP reached its destination here: the switch SMA
    ToSm,      // returning SMP reached its destination here: the local SM
    LidRoute,  // route by the LRH DLID (rewritten to new_dlid if non-zero)
};
const char *dr_action_name(DrAction a);

struct DrDecision {
    DrAction action = DrAction::Discard;
    uint8_t port = 0;
    uint16_t new_dlid = 0;  // LID routing starts: LRH DLID := new_dlid
    const char *why = "";
};

struct DrContext {
    // The SMP was made here: a request of this switch's SM or a response of
    // its SMA/SM.  Otherwise it was received on in_port (1..N), or it
    // reached the management port by LID routing (in_port 0).
    bool originated = false;
    uint8_t in_port = 0;
    uint8_t num_ports = 0;
    // The LRH DLID is this switch's LID (or the permissive LID): a
    // LID-routed segment ends here.
    bool dlid_is_local = false;
};

// Applies the switch's processing to m (hop pointer, ReturnPath) and says
// where the SMP goes next.  m must be a DR SMP (class 0x81).
DrDecision dr_switch_process(Mad &m, const DrContext &ctx);

// The same rules at a channel adapter port (used by test CAs): the SMP was
// received on 'port'.  Returns ToSma for a request to hand to the SMA, ToSm
// for a returning response, Discard otherwise.
DrDecision dr_ca_receive(Mad &m, uint8_t port);
// Prepares a CA's response (D already set) for sending on 'port':
// Forward, or Discard if the return path does not start at 'port'.
DrDecision dr_ca_send_response(Mad &m, uint8_t port);

}  // namespace fabric
