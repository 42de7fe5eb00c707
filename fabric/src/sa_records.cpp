#include "sa_records.h"

#include <algorithm>

#include "mad_util.h"

namespace fabric::sa {

namespace {
iba::Gid gid_at(std::span<const uint8_t> d, size_t off) {
    iba::Gid g;
    std::copy_n(d.begin() + static_cast<ptrdiff_t>(off), 16, g.begin());
    return g;
}
void put_gid(std::span<uint8_t> d, size_t off, const iba::Gid &g) {
    std::copy(g.begin(), g.end(), d.begin() + static_cast<ptrdiff_t>(off));
}
}  // namespace

// PathRecord (IBA 15.2.5.16): ServiceID 0, DGID 8, SGID 24, DLID 40,
// SLID 42, RawTraffic/FlowLabel/HopLimit 44, TClass 48, Reversible/NumbPath
// 49, P_Key 50, QoSClass/SL 52, MTU 54, Rate 55, PacketLifeTime 56,
// Preference 57.
PathRecord decode_path_record(std::span<const uint8_t> d) {
    PathRecord r;
    r.service_id = get64(d, 0);
    r.dgid = gid_at(d, 8);
    r.sgid = gid_at(d, 24);
    r.dlid = get16(d, 40);
    r.slid = get16(d, 42);
    const uint32_t w = get32(d, 44);
    r.raw_traffic = w >> 31;
    r.flow_label = (w >> 8) & 0xfffff;
    r.hop_limit = static_cast<uint8_t>(w);
    r.tclass = d[48];
    r.reversible = d[49] >> 7;
    r.numb_path = d[49] & 0x7f;
    r.pkey = get16(d, 50);
    r.qos_class = get16(d, 52) >> 4;
    r.sl = d[53] & 0x0f;
    r.mtu_selector = d[54] >> 6;
    r.mtu = d[54] & 0x3f;
    r.rate_selector = d[55] >> 6;
    r.rate = d[55] & 0x3f;
    r.plt_selector = d[56] >> 6;
    r.packet_life_time = d[56] & 0x3f;
    r.preference = d[57];
    return r;
}

void encode(const PathRecord &r, std::span<uint8_t> d) {
    std::fill(d.begin(), d.begin() + kPathRecordSize, 0);
    set64(d, 0, r.service_id);
    put_gid(d, 8, r.dgid);
    put_gid(d, 24, r.sgid);
    set16(d, 40, r.dlid);
    set16(d, 42, r.slid);
    set32(d, 44, (r.raw_traffic ? 1u << 31 : 0) | (r.flow_label & 0xfffff) << 8 | r.hop_limit);
    d[48] = r.tclass;
    d[49] = static_cast<uint8_t>((r.reversible ? 0x80 : 0) | (r.numb_path & 0x7f));
    set16(d, 50, r.pkey);
    set16(d, 52, static_cast<uint16_t>((r.qos_class & 0xfff) << 4 | (r.sl & 0x0f)));
    d[54] = static_cast<uint8_t>(r.mtu_selector << 6 | (r.mtu & 0x3f));
    d[55] = static_cast<uint8_t>(r.rate_selector << 6 | (r.rate & 0x3f));
    d[56] = static_cast<uint8_t>(r.plt_selector << 6 | (r.packet_life_time & 0x3f));
    d[57] = r.preference;
}

// MCMemberRecord (IBA 15.2.5.17): MGID 0, PortGID 16, Q_Key 32, MLID 36,
// MTU 38, TClass 39, P_Key 40, Rate 42, PacketLifeTime 43,
// SL/FlowLabel/HopLimit 44, Scope/JoinState 48, ProxyJoin 49.
McMemberRecord decode_mcmember_record(std::span<const uint8_t> d) {
    McMemberRecord r;
    r.mgid = gid_at(d, 0);
    r.port_gid = gid_at(d, 16);
    r.qkey = get32(d, 32);
    r.mlid = get16(d, 36);
    r.mtu_selector = d[38] >> 6;
    r.mtu = d[38] & 0x3f;
    r.tclass = d[39];
    r.pkey = get16(d, 40);
    r.rate_selector = d[42] >> 6;
    r.rate = d[42] & 0x3f;
    r.plt_selector = d[43] >> 6;
    r.packet_life_time = d[43] & 0x3f;
    const uint32_t w = get32(d, 44);
    r.sl = static_cast<uint8_t>(w >> 28);
    r.flow_label = (w >> 8) & 0xfffff;
    r.hop_limit = static_cast<uint8_t>(w);
    r.scope = d[48] >> 4;
    r.join_state = d[48] & 0x0f;
    r.proxy_join = d[49] >> 7;
    return r;
}

void encode(const McMemberRecord &r, std::span<uint8_t> d) {
    std::fill(d.begin(), d.begin() + kMcMemberRecordSize, 0);
    put_gid(d, 0, r.mgid);
    put_gid(d, 16, r.port_gid);
    set32(d, 32, r.qkey);
    set16(d, 36, r.mlid);
    d[38] = static_cast<uint8_t>(r.mtu_selector << 6 | (r.mtu & 0x3f));
    d[39] = r.tclass;
    set16(d, 40, r.pkey);
    d[42] = static_cast<uint8_t>(r.rate_selector << 6 | (r.rate & 0x3f));
    d[43] = static_cast<uint8_t>(r.plt_selector << 6 | (r.packet_life_time & 0x3f));
    set32(d, 44, uint32_t{r.sl} << 28 | (r.flow_label & 0xfffff) << 8 | r.hop_limit);
    d[48] = static_cast<uint8_t>(r.scope << 4 | (r.join_state & 0x0f));
    d[49] = r.proxy_join ? 0x80 : 0;
}

void encode_sa_class_port_info(std::span<uint8_t> d, uint32_t cap_mask2, uint8_t resp_time) {
    std::fill(d.begin(), d.begin() + kClassPortInfoSize, 0);
    d[0] = 1;  // BaseVersion
    d[1] = 2;  // ClassVersion of the SA
    set16(d, 2, 0);  // CapabilityMask
    // CapabilityMask2 31:5, RespTimeValue 4:0.
    set32(d, 4, (cap_mask2 & 0x7ffffff) << 5 | (resp_time & 0x1f));
}

}  // namespace fabric::sa
