// libFuzzer target: the model's SMA and PMA (hca-model/src/port/port.cpp)
// through MAD_IFC.  Each input is a sequence of MADs — LID-routed and
// directed-route SMPs and PMA MADs with the method, attribute, modifier,
// M_Key, DR hop pointer/count and paths it chooses, and a data part that is
// either its own bytes or a plausible PortInfo/P_Key/SL2VL/VLArb/
// NodeDescription/PortCounters payload with fields changed — so state
// changes (LID, SM LID, port state, M_Key and its protection and lease,
// P_Keys, counters) build on each other within one input.  The port's SMA
// state is reset before each input.
#include <array>
#include <cstdint>
#include <cstring>
#include <iterator>

#include "fuzz_input.h"
#include "fuzz_world.h"
#include "iba/mad.h"

using namespace hcatest;
using hcafuzz::Input;
namespace mad = iba::mad;

namespace {

struct World {
    Bench b;
    Driver d{b};
    uint64_t mkey = 0;  // the last M_Key the input set, for later SMPs
    void setup() { hcafuzz::fresh_device(b, d); }
};

World &world() {
    static World *w = [] {
        auto *x = new World;
        x->setup();
        return x;
    }();
    return *w;
}

constexpr uint16_t kSmpAttrs[] = {
    mad::kAttrNodeDescription, mad::kAttrNodeInfo, mad::kAttrGuidInfo,  mad::kAttrPortInfo,
    mad::kAttrPKeyTable,       mad::kAttrSlToVlTable, mad::kAttrVlArbitration, mad::kAttrSmInfo,
    mad::kAttrLedInfo,         mad::kAttrPortInfoExtended, mad::kAttrMlnxExtPortInfo, mad::kAttrSwitchInfo,
    mad::kAttrNotice,
};
constexpr uint16_t kPmaAttrs[] = {mad::perf::kClassPortInfo, mad::perf::kPortSamplesControl,
                                  mad::perf::kPortCounters, mad::perf::kPortCountersExtended};
constexpr uint8_t kMethods[] = {mad::kGet, mad::kSet, mad::kGet, mad::kSet, 0x03, 0x05, 0x06, 0x07, 0x81};

// A PortInfo payload with the fields an SM sets, each chosen by the input.
void port_info(World &x, Input &in, uint8_t *d) {
    namespace pi = mad::port_info;
    const uint64_t key = in.flag() ? x.mkey : in.u64();
    hca::store_be64(d + pi::kMkey, key);
    hca::store_be64(d + pi::kGidPrefix, in.flag() ? 0xfe80000000000000ull : in.u64());
    hca::store_be16(d + pi::kLid, in.flag() ? 3 : in.u16());
    hca::store_be16(d + pi::kMasterSmLid, in.flag() ? 1 : in.u16());
    hca::store_be32(d + pi::kCapMask, in.flag() ? 0 : in.u32());
    hca::store_be16(d + pi::kMkeyLeasePeriod, in.flag() ? 0 : in.u16());
    d[pi::kLinkSpeedSupportedPortState] = static_cast<uint8_t>(in.u8() % 6);
    d[pi::kPortPhysStateLinkDown] = static_cast<uint8_t>(in.flag() ? 0 : in.u8());
    d[pi::kMkeyProtLmc] = in.u8();
    d[pi::kNeighborMtuMasterSmSl] = static_cast<uint8_t>((in.u8() % 7) << 4 | (in.u8() & 15));
    d[pi::kOperVlFilters] = static_cast<uint8_t>((in.u8() % 6) << 4);
    d[pi::kClientReregSubnetTimeout] = in.u8();
    d[pi::kGuidCap] = in.u8();
    d[pi::kVlHighLimit] = in.u8();
    if (in.flag()) {
        x.mkey = key;
    }
}

std::array<uint8_t, 256> make_mad(World &x, Input &in) {
    std::array<uint8_t, 256> m{};
    const uint8_t k = in.u8();
    const uint8_t cls = k < 110 ? mad::kClassSubnLid : k < 200 ? mad::kClassSubnDr : k < 245 ? mad::kClassPerf : in.u8();
    const bool dr = cls == mad::kClassSubnDr;
    m[mad::kBaseVersion] = in.u8() < 250 ? 1 : in.u8();
    m[mad::kMgmtClass] = cls;
    m[mad::kClassVersion] = 1;
    m[mad::kMethod] = in.pick(kMethods);
    const bool pma = cls == mad::kClassPerf;
    const uint16_t attr = in.u8() < 240 ? (pma ? in.pick(kPmaAttrs) : in.pick(kSmpAttrs)) : in.u16();
    hca::store_be16(m.data() + mad::kAttrId, attr);
    hca::store_be32(m.data() + mad::kAttrMod, in.u8() < 200 ? in.u8() % 4 : in.u32());
    hca::store_be64(m.data() + mad::kTid, in.u64());
    uint8_t *data = m.data() + (pma ? mad::perf::kData : mad::smp::kData);
    if (!pma) {
        hca::store_be64(m.data() + mad::smp::kMkey, in.flag() ? x.mkey : in.u64());
    }
    if (dr) {
        m[mad::smp::kHopPtr] = in.u8() % 4;
        m[mad::smp::kHopCnt] = in.u8() % 4;
        hca::store_be16(m.data() + mad::kStatus, in.flag() ? mad::smp::kDirectionBit : 0);
        hca::store_be16(m.data() + mad::smp::kDrSlid, in.flag() ? iba::kPermissiveLid : in.u16());
        hca::store_be16(m.data() + mad::smp::kDrDlid, in.flag() ? iba::kPermissiveLid : in.u16());
        for (unsigned i = 1; i < 4; ++i) {
            m[mad::smp::kInitialPath + i] = in.u8() % 3;
            m[mad::smp::kReturnPath + i] = in.u8() % 3;
        }
    }
    if (!pma && attr == mad::kAttrPortInfo && in.u8() < 200) {
        port_info(x, in, data);
    } else {
        in.bytes(data, in.u8() % 65);
    }
    hcafuzz::patch(in, m, 2);
    return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    World &x = world();
    if (hcafuzz::host_used(x.b.host) > (40u << 20)) {
        x.setup();
    }
    x.b.dev.port1.reset();
    x.mkey = 0;
    Input in(data, size);
    for (int steps = 0; !in.empty() && steps < 32; ++steps) {
        const auto m = make_mad(x, in);
        const uint8_t how = in.u8();
        // op_mod bit 0: skip the M_Key check (the driver's own MADs);
        // sometimes port 2 or a short inbox.
        auto box = Driver::inbox(hca::kOpMadIfc, how & 3, hca::ifc::mad_ifc_in::size_bytes);
        hca::ifc::set(box.data(), hca::ifc::mad_ifc_in::port, how < 250 ? 1 : how & 3);
        std::memcpy(box.data() + 16, m.data(), m.size());
        if (how > 252) {
            box.resize(16 + in.u8());
        }
        x.d.exec(box, how == 251 ? 16 + in.u8() : hca::ifc::mad_ifc_out::size_bytes);
    }
    return 0;
}
