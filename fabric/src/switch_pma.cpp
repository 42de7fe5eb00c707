// The switch's performance management agent (IBA 16.1): perfquery against
// the switch's LID reads each external port's counters, the ones
// `fabric_ctl ports` shows (iba/pma.h has the layout, shared with the HCA).
#include "iba/pma.h"
#include "mad_util.h"
#include "switch.h"

namespace fabric {

void IbSwitch::pma(const MadAddress &from, const Mad &req) {
    const uint8_t method = req[mad::kMethod];
    if (is_response(method) || method == mad::kTrapRepress) {
        return;
    }
    Mad r = req;
    r[mad::kMethod] = response_method(method);
    namespace pma = iba::pma;
    const uint16_t status = pma::answer(req, r, pma::kCapAllPortSelect | pma::kCapExtendedWidth | pma::kCapXmitWait,
                                        [this](uint8_t port, pma::CounterRefs &refs) {
                                            if (port == 0 || port > cfg_.num_ports) {
                                                return false;
                                            }
                                            PortCounters &c = ports_[port].ctr;
                                            refs.link_downed = &c.link_downed;
                                            refs.rcv_errors = &c.rcv_errors;
                                            refs.rcv_switch_relay_errors = &c.rcv_switch_relay_errors;
                                            refs.xmit_discards = &c.xmit_discards;
                                            refs.vl15_dropped = &c.vl15_dropped;
                                            refs.xmit_wait = &c.xmit_wait;
                                            refs.xmit_data = &c.xmit_bytes;
                                            refs.rcv_data = &c.rcv_bytes;
                                            refs.xmit_pkts = &c.xmit_packets;
                                            refs.rcv_pkts = &c.rcv_packets;
                                            return true;
                                        });
    set16(r, mad::kStatus, status);
    send_local(mad_packet(reply_address(from, lid()), r));
}

}  // namespace fabric
