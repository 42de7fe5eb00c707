#include "iba/pma.h"

#include <algorithm>
#include <cstring>

namespace iba::pma {

using hca::load_be16;
using hca::store_be16;
using hca::store_be32;
using hca::store_be64;

namespace {

constexpr size_t kData = mad::perf::kData;
constexpr uint8_t kAllPorts = 0xff;

uint64_t get(const uint64_t *c) { return c ? *c : 0; }

void clear(uint64_t *c, bool yes) {
    if (c && yes) {
        *c = 0;
    }
}

// Totals over the ports a PortSelect names.
struct Totals {
    uint64_t link_downed = 0, rcv_errors = 0, relay_errors = 0, xmit_discards = 0, vl15_dropped = 0,
             xmit_wait = 0, xmit_data = 0, rcv_data = 0, xmit_pkts = 0, rcv_pkts = 0, unicast_xmit = 0,
             unicast_rcv = 0, multicast_xmit = 0, multicast_rcv = 0;
    void add(const CounterRefs &r) {
        link_downed += get(r.link_downed);
        rcv_errors += get(r.rcv_errors);
        relay_errors += get(r.rcv_switch_relay_errors);
        xmit_discards += get(r.xmit_discards);
        vl15_dropped += get(r.vl15_dropped);
        xmit_wait += get(r.xmit_wait);
        xmit_data += get(r.xmit_data);
        rcv_data += get(r.rcv_data);
        xmit_pkts += get(r.xmit_pkts);
        rcv_pkts += get(r.rcv_pkts);
        unicast_xmit += get(r.unicast_xmit);
        unicast_rcv += get(r.unicast_rcv);
        multicast_xmit += get(r.multicast_xmit);
        multicast_rcv += get(r.multicast_rcv);
    }
};

// Which CounterSelect bit clears which counter.
struct SelectBit {
    uint64_t *CounterRefs::*counter;
    uint16_t bit;
};

// PortCounters:CounterSelect (IBA Table 247); CounterSelect2 (byte 18,
// IBA 1.3) bit 0 clears PortXmitWait.
constexpr SelectBit kCounterSelect[] = {
    {&CounterRefs::link_downed, 0x0004}, {&CounterRefs::rcv_errors, 0x0008},
    {&CounterRefs::rcv_switch_relay_errors, 0x0020}, {&CounterRefs::xmit_discards, 0x0040},
    {&CounterRefs::vl15_dropped, 0x0800}, {&CounterRefs::xmit_data, 0x1000},
    {&CounterRefs::rcv_data, 0x2000}, {&CounterRefs::xmit_pkts, 0x4000},
    {&CounterRefs::rcv_pkts, 0x8000},
};

// PortCountersExtended:CounterSelect (IBA Table 260).
constexpr SelectBit kExtendedSelect[] = {
    {&CounterRefs::xmit_data, 0x01},      {&CounterRefs::rcv_data, 0x02},     {&CounterRefs::xmit_pkts, 0x04},
    {&CounterRefs::rcv_pkts, 0x08},       {&CounterRefs::unicast_xmit, 0x10}, {&CounterRefs::unicast_rcv, 0x20},
    {&CounterRefs::multicast_xmit, 0x40}, {&CounterRefs::multicast_rcv, 0x80},
};

template <size_t N>
void clear_selected(const CounterRefs &r, const SelectBit (&bits)[N], uint16_t select) {
    for (const SelectBit &b : bits) {
        clear(r.*b.counter, (select & b.bit) != 0);
    }
}

uint32_t sat32(uint64_t v) { return static_cast<uint32_t>(std::min<uint64_t>(v, 0xffffffffu)); }
uint16_t sat16(uint64_t v) { return static_cast<uint16_t>(std::min<uint64_t>(v, 0xffff)); }
uint8_t sat8(uint64_t v) { return static_cast<uint8_t>(std::min<uint64_t>(v, 0xff)); }

void put_counters(uint8_t *d, uint8_t port, const Totals &t) {
    std::memset(d, 0, 64);
    d[1] = port;
    d[7] = sat8(t.link_downed);
    store_be16(d + 8, sat16(t.rcv_errors));
    store_be16(d + 12, sat16(t.relay_errors));
    store_be16(d + 14, sat16(t.xmit_discards));
    store_be16(d + 22, sat16(t.vl15_dropped));
    store_be32(d + 24, sat32(t.xmit_data / 4));
    store_be32(d + 28, sat32(t.rcv_data / 4));
    store_be32(d + 32, sat32(t.xmit_pkts));
    store_be32(d + 36, sat32(t.rcv_pkts));
    store_be32(d + 40, sat32(t.xmit_wait));
}

void put_extended(uint8_t *d, uint8_t port, const Totals &t) {
    std::memset(d, 0, 72);
    d[1] = port;
    store_be64(d + 8, t.xmit_data / 4);
    store_be64(d + 16, t.rcv_data / 4);
    store_be64(d + 24, t.xmit_pkts);
    store_be64(d + 32, t.rcv_pkts);
    store_be64(d + 40, t.unicast_xmit);
    store_be64(d + 48, t.unicast_rcv);
    store_be64(d + 56, t.multicast_xmit);
    store_be64(d + 64, t.multicast_rcv);
}

}  // namespace

uint16_t answer(const mad::Mad &in, mad::Mad &out, uint16_t cap_mask, const PortLookup &lookup) {
    const uint8_t method = in[mad::kMethod];
    const uint16_t attr = load_be16(in.data() + mad::kAttrId);
    uint8_t *d = out.data() + kData;
    if (in[mad::kClassVersion] != 1) {
        return mad::kStatusBadVersion;
    }
    if (method != mad::kGet && method != mad::kSet) {
        return mad::kStatusUnsupportedMethod;
    }
    if (attr == mad::perf::kClassPortInfo) {
        if (method != mad::kGet) {
            return mad::kStatusUnsupportedMethodAttr;
        }
        std::memset(d, 0, 64);
        d[0] = 1;  // BaseVersion
        d[1] = 1;  // ClassVersion
        store_be16(d + 2, cap_mask);
        store_be32(d + 4, 18);  // RespTimeValue
        return mad::kStatusOk;
    }
    if (attr != mad::perf::kPortCounters && attr != mad::perf::kPortCountersExtended) {
        return mad::kStatusUnsupportedMethodAttr;
    }
    const uint8_t port = in[kData + 1];
    Totals t;
    CounterRefs refs;
    auto each = [&](auto &&fn) {
        if (port != kAllPorts) {
            if (!lookup(port, refs)) {
                return false;
            }
            fn(refs);
            return true;
        }
        if (!(cap_mask & kCapAllPortSelect)) {
            return false;
        }
        for (unsigned p = 1; p < kAllPorts; ++p) {
            if (CounterRefs r; lookup(static_cast<uint8_t>(p), r)) {
                fn(r);
            }
        }
        return true;
    };
    const bool extended = attr == mad::perf::kPortCountersExtended;
    if (method == mad::kSet) {
        const uint16_t sel = load_be16(in.data() + kData + 2);
        const uint8_t sel2 = in[kData + 18];
        if (!each([&](const CounterRefs &r) {
                if (extended) {
                    clear_selected(r, kExtendedSelect, sel);
                } else {
                    clear_selected(r, kCounterSelect, sel);
                    clear(r.xmit_wait, (sel2 & 0x01) != 0);  // CounterSelect2 bit 0
                }
            })) {
            return mad::kStatusInvalidField;
        }
    }
    if (!each([&](const CounterRefs &r) { t.add(r); })) {
        return mad::kStatusInvalidField;
    }
    if (extended) {
        put_extended(d, port, t);
    } else {
        put_counters(d, port, t);
    }
    return mad::kStatusOk;
}

}  // namespace iba::pma
