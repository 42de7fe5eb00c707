#include "mad_util.h"

#include <algorithm>
#include <cstring>

namespace fabric {

uint64_t get_bits(std::span<const uint8_t> buf, size_t bit_off, unsigned nbits) {
    uint64_t v = 0;
    for (unsigned i = 0; i < nbits; ++i) {
        const size_t b = bit_off + i;
        v = v << 1 | ((buf[b / 8] >> (7 - b % 8)) & 1u);
    }
    return v;
}

void set_bits(std::span<uint8_t> buf, size_t bit_off, unsigned nbits, uint64_t value) {
    for (unsigned i = 0; i < nbits; ++i) {
        const size_t b = bit_off + i;
        const unsigned bit = static_cast<unsigned>((value >> (nbits - 1 - i)) & 1u);
        const uint8_t mask = static_cast<uint8_t>(1u << (7 - b % 8));
        buf[b / 8] = static_cast<uint8_t>(bit ? (buf[b / 8] | mask) : (buf[b / 8] & ~mask));
    }
}

bool mad_from_packet(const iba::PacketView &v, MadAddress &a, Mad &m) {
    if (v.opcode() != (iba::kUd | iba::kSendOnly) || !v.deth || v.payload.size() != mad::kSize) {
        return false;
    }
    a = {};
    a.slid = v.slid();
    a.dlid = v.dlid();
    a.sl = v.sl();
    a.vl = v.vl();
    a.src_qp = v.deth->sqpn.get() & 0xffffff;
    a.dst_qp = v.dqpn();
    a.qkey = v.deth->qkey.get();
    a.pkey = v.pkey();
    if (v.grh) {
        a.grh = true;
        a.sgid = v.grh->sgid;
        a.dgid = v.grh->dgid;
        const uint32_t vtf = v.grh->ver_tclass_flow.get();
        a.tclass = static_cast<uint8_t>(vtf >> 20);
        a.flow_label = vtf & 0xfffff;
        a.hop_limit = v.grh->hop_limit;
    }
    std::copy(v.payload.begin(), v.payload.end(), m.begin());
    return true;
}

std::vector<uint8_t> mad_packet(const MadAddress &to, const Mad &m, uint32_t psn) {
    iba::PacketSpec s;
    s.vl = to.dst_qp == 0 ? 15 : to.vl;
    s.sl = to.sl;
    s.dlid = to.dlid;
    s.slid = to.slid;
    s.grh = to.grh;
    s.tclass = to.tclass;
    s.flow_label = to.flow_label;
    s.hop_limit = to.hop_limit;
    s.sgid = to.sgid;
    s.dgid = to.dgid;
    s.opcode = iba::kUd | iba::kSendOnly;
    s.migreq = false;
    s.pkey = to.pkey;
    s.dqpn = to.dst_qp;
    s.psn = psn;
    uint8_t deth[8];
    hca::store_be32(deth, to.dst_qp == 0 ? 0 : to.qkey);
    hca::store_be32(deth + 4, to.src_qp & 0xffffff);
    return iba::build(s, deth, m);
}

MadAddress reply_address(const MadAddress &req, uint16_t my_lid) {
    MadAddress r;
    r.slid = my_lid;
    r.dlid = req.slid;
    r.sl = req.sl;
    r.vl = req.vl;
    r.src_qp = req.dst_qp;
    r.dst_qp = req.src_qp;
    r.qkey = mad::kQp1Qkey;
    r.pkey = req.pkey;
    if (req.grh) {
        r.grh = true;
        r.sgid = req.dgid;
        r.dgid = req.sgid;
        r.tclass = req.tclass;
        r.flow_label = req.flow_label;
        r.hop_limit = 0xff;  // as ib_init_ah_attr_from_wc() does
    }
    return r;
}

void init_smp(Mad &m, uint8_t mgmt_class, uint8_t method, uint64_t tid, uint16_t attr, uint32_t attr_mod) {
    m.fill(0);
    m[mad::kBaseVersion] = 1;
    m[mad::kMgmtClass] = mgmt_class;
    m[mad::kClassVersion] = 1;
    m[mad::kMethod] = method;
    set64(m, mad::kTid, tid);
    set16(m, mad::kAttrId, attr);
    set32(m, mad::kAttrMod, attr_mod);
}

void init_dr_smp(Mad &m, uint8_t method, uint64_t tid, uint16_t attr, uint32_t attr_mod,
                 std::span<const uint8_t> path) {
    init_smp(m, mad::kClassSubnDr, method, tid, attr, attr_mod);
    const size_t hops = path.empty() ? 0 : std::min<size_t>(path.size() - 1, dr::kMaxHops - 1);
    m[mad::smp::kHopPtr] = 0;
    m[mad::smp::kHopCnt] = static_cast<uint8_t>(hops);
    set16(m, mad::smp::kDrSlid, iba::kPermissiveLid);
    set16(m, mad::smp::kDrDlid, iba::kPermissiveLid);
    for (size_t i = 1; i <= hops; ++i) {
        m[mad::smp::kInitialPath + i] = path[i];
    }
}

}  // namespace fabric
