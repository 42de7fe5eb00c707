// The performance management agent's counters (IBA 16.1): PortCounters and
// PortCountersExtended as an HCA port and a switch answer them, so that
// perfquery reads the same layout from both.
#pragma once

#include <cstdint>
#include <functional>

#include "iba/mad.h"

namespace iba::pma {

// Where one port's counters live; a null counter reads 0 and is not cleared.
// Data counters are bytes (PortCounters reports 4-byte words).
struct CounterRefs {
    uint64_t *link_downed = nullptr;
    uint64_t *rcv_errors = nullptr;
    uint64_t *rcv_switch_relay_errors = nullptr;
    uint64_t *xmit_discards = nullptr;
    uint64_t *vl15_dropped = nullptr;
    uint64_t *xmit_wait = nullptr;
    uint64_t *xmit_data = nullptr;
    uint64_t *rcv_data = nullptr;
    uint64_t *xmit_pkts = nullptr;
    uint64_t *rcv_pkts = nullptr;
    uint64_t *unicast_xmit = nullptr;
    uint64_t *unicast_rcv = nullptr;
    uint64_t *multicast_xmit = nullptr;
    uint64_t *multicast_rcv = nullptr;
};

// ClassPortInfo:CapabilityMask bits (IBA 16.1.2, Table 227 and A13).
inline constexpr uint16_t kCapAllPortSelect = 1u << 8;
inline constexpr uint16_t kCapExtendedWidth = 1u << 9;
inline constexpr uint16_t kCapXmitWait = 1u << 12;

// The counters of port n, or false if there is no such port.
using PortLookup = std::function<bool(uint8_t port, CounterRefs &refs)>;

// Answers a PMA Get or Set (out is a copy of in, its data is filled in):
// ClassPortInfo, PortCounters and PortCountersExtended for the port
// PortSelect names; PortSelect 0xff (AllPortSelect) sums (Get) or clears
// (Set) every port from 1 to 254 that lookup knows. Returns the MAD status.
uint16_t answer(const mad::Mad &in, mad::Mad &out, uint16_t cap_mask, const PortLookup &lookup);

}  // namespace iba::pma
