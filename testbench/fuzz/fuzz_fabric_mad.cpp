// libFuzzer target: the fabric's management agents (fabric/src/):
// the switch SMA and PMA, the SM's handling of answers and traps, the SA
// and its RMPP sender.  A fabric with the built-in SM and three fake CAs is swept
// once; each input is a sequence of MADs sent from a CA (or the switch's
// own port), built from choices — SMPs LID-routed or directed-route with
// paths and hop fields, SA Get/GetTable/Set/Delete of every record type
// with component masks and record bytes, PMA Get/Set of the counters with
// any PortSelect and CounterSelect, RMPP DATA/ACK/STOP/ABORT with
// segment numbers and window — addressed to the switch LID, the SM, a CA
// or the permissive LID, with clock jumps (RMPP and SM timeouts).  The
// fabric is built again every few thousand inputs, so state an input left
// (a disabled port, a changed forwarding table) does not stay forever.
#include <cstdint>
#include <cstring>
#include <memory>

#include "fake_ca.h"
#include "fuzz_input.h"
#include "ib_fabric.h"
#include "mad_util.h"

using namespace fabric;
using hcafuzz::Input;

namespace {

struct World {
    ManualLoop loop;
    Log log{"/dev/null"};
    std::unique_ptr<IbFabric> fabric;
    std::vector<std::unique_ptr<test::FakeCa>> cas;
    World() {
        log.set_level(Log::Level::Warn);
        FabricOptions o;
        o.sw.num_ports = 4;
        fabric = std::make_unique<IbFabric>(loop, log, o);
        for (uint8_t k = 1; k <= 3; ++k) {
            test::FakeCa::Options co;
            co.node_guid = 0x0002c90300a00000ull + k * 0x10;
            co.port_guid = co.node_guid + 1;
            co.record = false;
            cas.push_back(std::make_unique<test::FakeCa>(fabric->sw(), loop, k, co));
            cas.back()->connect();
        }
        fabric->start();
        loop.advance(200000);
    }
};

std::unique_ptr<World> &world() {
    static std::unique_ptr<World> w;
    static unsigned inputs = 0;
    if (!w || ++inputs % 4096 == 0) {
        w.reset();
        w = std::make_unique<World>();
    }
    return w;
}

constexpr uint16_t kSmpAttrs[] = {
    mad::kAttrNodeDescription, mad::kAttrNodeInfo, mad::kAttrSwitchInfo, mad::kAttrGuidInfo, mad::kAttrPortInfo,
    mad::kAttrPKeyTable, mad::kAttrSlToVlTable, mad::kAttrVlArbitration, mad::kAttrLinearForwardingTable,
    mad::kAttrRandomForwardingTable, mad::kAttrMulticastForwardingTable, mad::kAttrSmInfo, mad::kAttrNotice,
    mad::kAttrLedInfo, mad::kAttrPortInfoExtended, mad::kAttrMlnxExtPortInfo, mad::kAttrHcasimSwitchLinks,
};
constexpr uint16_t kSaAttrs[] = {
    mad::sa::kClassPortInfo, mad::sa::kNotice, mad::sa::kInformInfo, mad::sa::kNodeRecord,
    mad::sa::kPortInfoRecord, mad::sa::kSwitchInfoRecord, mad::sa::kLinearFdbRecord, mad::sa::kSmInfoRecord,
    mad::sa::kLinkRecord, mad::sa::kGuidInfoRecord, mad::sa::kServiceRecord, mad::sa::kPKeyTableRecord,
    mad::sa::kPathRecord, mad::sa::kMcMemberRecord, mad::sa::kMultiPathRecord,
};
// Get, Set, Send, Trap, Report, TrapRepress, GetTable, GetTraceTable,
// GetMulti, Delete, and the responses of Get/Set/GetTable.
constexpr uint8_t kMethods[] = {0x01, 0x02, 0x03, 0x05, 0x06, 0x07, 0x12, 0x13, 0x14, 0x15, 0x81, 0x92, 0x86};

void smp(Input &in, Mad &m) {
    const bool dr = in.flag();
    m[mad::kMgmtClass] = dr ? mad::kClassSubnDr : mad::kClassSubnLid;
    hca::store_be16(m.data() + mad::kAttrId, in.u8() < 240 ? in.pick(kSmpAttrs) : in.u16());
    hca::store_be32(m.data() + mad::kAttrMod, in.u8() < 200 ? in.u8() % 8 : in.u32());
    hca::store_be64(m.data() + mad::smp::kMkey, in.u8() < 200 ? 0 : in.u64());
    if (dr) {
        m[mad::smp::kHopPtr] = in.u8() % 4;
        m[mad::smp::kHopCnt] = in.u8() < 240 ? in.u8() % 4 : in.u8();
        hca::store_be16(m.data() + mad::kStatus, in.flag() ? mad::smp::kDirectionBit : 0);
        hca::store_be16(m.data() + mad::smp::kDrSlid, in.flag() ? iba::kPermissiveLid : in.u16());
        hca::store_be16(m.data() + mad::smp::kDrDlid, in.flag() ? iba::kPermissiveLid : in.u16());
        for (unsigned i = 1; i < 4; ++i) {
            m[mad::smp::kInitialPath + i] = in.u8() % 6;
            m[mad::smp::kReturnPath + i] = in.u8() % 6;
        }
    }
    in.bytes(m.data() + mad::smp::kData, in.u8() % 65);
}

void sa(Input &in, Mad &m) {
    m[mad::kMgmtClass] = in.u8() < 250 ? mad::kClassSubnAdm : in.u8();
    m[mad::kClassVersion] = 2;
    hca::store_be16(m.data() + mad::kAttrId, in.u8() < 240 ? in.pick(kSaAttrs) : in.u16());
    hca::store_be32(m.data() + mad::kAttrMod, in.u8() < 220 ? 0 : in.u32());
    hca::store_be64(m.data() + mad::sa::kCompMask, in.flag() ? in.u8() : in.u64());
    uint8_t *r = m.data() + mad::sa::kRmppHeader;
    if (in.u8() > 150) {
        r[mad::sa::kRmppVersion] = 1;
        r[mad::sa::kRmppType] = static_cast<uint8_t>(1 + in.u8() % 4);
        r[mad::sa::kRmppRespTimeFlags] = static_cast<uint8_t>(in.u8() & 0xff);
        r[mad::sa::kRmppStatus] = in.u8() < 200 ? 0 : in.u8();
        hca::store_be32(r + mad::sa::kRmppSegment, in.u8() < 200 ? in.u8() % 8 : in.u32());
        hca::store_be32(r + mad::sa::kRmppPayloadLen, in.u8() < 200 ? in.u8() % 16 : in.u32());
    }
    in.bytes(m.data() + mad::sa::kData, in.u8() < 200 ? in.u8() % 72 : mad::sa::kDataSize);
}

// A PMA Get/Set (class 0x04): the switch's PMA and the counters it reads.
void pma(Input &in, Mad &m) {
    static constexpr uint16_t kPmaAttrs[] = {mad::perf::kClassPortInfo, mad::perf::kPortSamplesControl,
                                             mad::perf::kPortCounters, mad::perf::kPortCountersExtended};
    m[mad::kMgmtClass] = mad::kClassPerf;
    m[mad::kClassVersion] = in.u8() < 250 ? 1 : in.u8();
    hca::store_be16(m.data() + mad::kAttrId, in.u8() < 240 ? in.pick(kPmaAttrs) : in.u16());
    m[mad::perf::kData + 1] = in.u8() < 200 ? in.u8() % 6 : (in.flag() ? 0xff : in.u8());
    hca::store_be16(m.data() + mad::perf::kData + 2, in.u16());
    m[mad::perf::kData + 18] = in.u8();
}

// One MAD packet from a CA (or the switch port) to a chosen destination.
void send(World &w, Input &in) {
    Mad m{};
    m[mad::kBaseVersion] = in.u8() < 250 ? 1 : in.u8();
    m[mad::kClassVersion] = 1;
    m[mad::kMethod] = in.pick(kMethods);
    hca::store_be64(m.data() + mad::kTid, in.u8() < 128 ? in.u8() : in.u64());
    const bool to_qp0 = in.flag();
    if (to_qp0) {
        smp(in, m);
    } else if (in.u8() < 200) {
        sa(in, m);
    } else {
        pma(in, m);
    }
    hcafuzz::patch(in, m, 2);
    const uint8_t from = in.u8() % 4;
    MadAddress a;
    static constexpr uint16_t kDlids[] = {1, 2, 3, 4, 5, iba::kPermissiveLid};
    a.dlid = in.u8() < 240 ? in.pick(kDlids) : in.u16();
    a.slid = from == 0 ? 1 : (in.u8() < 230 ? w.cas[from - 1]->lid() : in.u16());
    a.dst_qp = to_qp0 ? 0 : (in.u8() < 240 ? 1 : in.u32() & 0xffffff);
    a.src_qp = to_qp0 ? 0 : 1;
    a.qkey = to_qp0 ? 0 : (in.u8() < 240 ? mad::kQp1Qkey : in.u32());
    a.vl = to_qp0 ? 15 : 0;
    a.pkey = in.u8() < 240 ? 0xffff : in.u16();
    std::vector<uint8_t> pkt = mad_packet(a, m, in.u32() & 0xffffff);
    if (from == 0) {
        w.fabric->sw().send_local(std::move(pkt));
    } else {
        w.cas[from - 1]->send_raw(std::move(pkt), in.u16());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    World &w = *world();
    Input in(data, size);
    for (int steps = 0; !in.empty() && steps < 32; ++steps) {
        if (in.u8() < 24) {
            w.loop.advance(uint64_t{in.u16()} * 100);  // up to 6.5 s
        } else {
            send(w, in);
            w.loop.advance(100);
        }
    }
    return 0;
}
