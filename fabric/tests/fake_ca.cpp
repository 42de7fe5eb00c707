#include "fake_ca.h"

#include <algorithm>

#include "dr_route.h"

namespace fabric::test {

namespace ni = iba::mad::node_info;
namespace pi = iba::mad::port_info;

FakeCa::FakeCa(IbSwitch &sw, EventLoop &loop, uint8_t switch_port, const Options &opt)
    : sw_(sw), loop_(loop), sw_port_(switch_port), opt_(opt) {}

FakeCa::~FakeCa() { disconnect(); }

void FakeCa::connect() {
    if (!attached_ && sw_.attach(sw_port_, this)) {
        attached_ = true;
        sw_.hello(sw_port_, opt_.node_guid, opt_.port_guid, opt_.port_num);
    }
}

void FakeCa::disconnect() {
    if (attached_) {
        attached_ = false;
        sw_.detach(sw_port_);
        link_state(false);
    }
}

iba::Gid FakeCa::gid() const {
    iba::Gid g{};
    hca::store_be64(g.data(), 0xfe80000000000000ull);
    hca::store_be64(g.data() + 8, opt_.port_guid);
    return g;
}

void FakeCa::link_state(bool up) {
    link_up_ = up;
    // The physical link decides between Down and Init; the SM does the rest.
    state_ = up ? PortState::Init : PortState::Down;
}

bool FakeCa::deliver(const Frame &f) {
    LinkFrameView lf;
    if (!parse_link_frame(*f, lf)) {
        return true;
    }
    // A device handles packets off the switch's call path.
    std::vector<uint8_t> pkt(lf.body.begin(), lf.body.end());
    const uint64_t id = lf.packet_id;
    const uint8_t flags = lf.flags;
    loop_.post([this, id, flags, pkt = std::move(pkt)]() mutable { handle(id, std::move(pkt), flags); });
    return true;
}

size_t FakeCa::received_data() const {
    size_t n = 0;
    for (const auto &r : received_) {
        if ((r.packet[0] >> 4) != 15) {
            ++n;
        }
    }
    return n;
}

void FakeCa::send_raw(std::vector<uint8_t> packet, uint64_t id, uint8_t flags) {
    if (!attached_) {
        return;
    }
    sw_.receive(sw_port_,
                make_packet_frame(id ? id : (uint64_t{opt_.port_guid & 0xffff} << 32 | next_id_++), packet, flags));
}

std::vector<uint8_t> FakeCa::ud_packet(uint16_t dlid, uint32_t dqpn, uint32_t qkey, size_t payload_len, bool grh,
                                       const iba::Gid &dgid) const {
    iba::PacketSpec s;
    s.dlid = dlid;
    s.slid = lid_;
    s.grh = grh;
    s.sgid = gid();
    s.dgid = dgid;
    s.opcode = iba::kUd | iba::kSendOnly;
    s.dqpn = dqpn;
    uint8_t deth[8];
    hca::store_be32(deth, qkey);
    hca::store_be32(deth + 4, 0x48);
    std::vector<uint8_t> payload(payload_len, 0xa5);
    return iba::build(s, deth, payload);
}

void FakeCa::send_ud(uint16_t dlid, uint32_t dqpn, uint32_t qkey, size_t payload_len, bool grh,
                     const iba::Gid &dgid) {
    send_raw(ud_packet(dlid, dqpn, qkey, payload_len, grh, dgid));
}

void FakeCa::handle(uint64_t id, std::vector<uint8_t> pkt, uint8_t flags) {
    if (opt_.record) {
        received_.push_back({id, pkt, flags});
    }
    iba::PacketView v;
    if (iba::parse(pkt, v, !(flags & iba::link::kNoCrcs)) != iba::ParseError::None) {
        return;
    }
    MadAddress a;
    Mad m;
    if (v.vl() == 15) {
        if (v.dqpn() == 0 && mad_from_packet(v, a, m) && link_up_) {
            handle_smp(v, m);
        }
        return;
    }
    if (v.dqpn() == 1 && mad_from_packet(v, a, m) && a.qkey == mad::kQp1Qkey) {
        handle_gmp(v, a, m);
    }
}

// --- SMA ---

void FakeCa::handle_smp(const iba::PacketView &v, Mad m) {
    if (opt_.record && !is_response(m[mad::kMethod]) && smp_requests_.size() < 10000) {
        smp_requests_.push_back(m);
    }
    if (!opt_.answer_smps) {
        return;
    }
    const bool is_dr = m[mad::kMgmtClass] == mad::kClassSubnDr;
    if (is_dr) {
        const DrAction act = dr_ca_receive(m, opt_.port_num).action;
        if (act == DrAction::ToSm && is_response(m[mad::kMethod])) {
            if (opt_.record) {
                smp_responses_.push_back(m);  // for the SM on this CA
            }
            return;
        }
        if (act != DrAction::ToSma) {
            return;
        }
    } else if (m[mad::kMgmtClass] != mad::kClassSubnLid || (v.dlid() != lid_ && v.dlid() != iba::kPermissiveLid)) {
        return;
    }
    const uint8_t method = m[mad::kMethod];
    if (method != mad::kGet && method != mad::kSet) {
        return;
    }
    const uint16_t status = sma(m);
    m[mad::kMethod] = mad::kGet | mad::kResp;
    set16(m, mad::kStatus, static_cast<uint16_t>(status | (is_dr ? mad::smp::kDirectionBit : 0)));
    if (is_dr && dr_ca_send_response(m, opt_.port_num).action != DrAction::Forward) {
        return;
    }
    ++smps_answered_;
    // As ib_mad's agent_send_response(): back to the request's LRH SLID.
    MadAddress to;
    to.slid = lid_ ? lid_ : iba::kPermissiveLid;
    to.dlid = v.slid();
    to.src_qp = 0;
    to.dst_qp = 0;
    to.pkey = v.pkey();
    send_raw(mad_packet(to, m));
}

void FakeCa::port_info(std::span<uint8_t> d) const {
    std::fill(d.begin(), d.begin() + 64, 0);
    set64(d, pi::kMkey, mkey_);
    set64(d, pi::kGidPrefix, gid_prefix_);
    set16(d, pi::kLid, lid_);
    set16(d, pi::kMasterSmLid, sm_lid_);
    set32(d, pi::kCapMask, pi::kCapIsSmDisabled | (opt_.client_rereg_sup ? pi::kCapIsClientReregSup : 0));
    d[pi::kLocalPortNum] = opt_.port_num;
    d[pi::kLinkWidthEnabled] = 3;
    d[pi::kLinkWidthSupported] = 3;
    d[pi::kLinkWidthActive] = 2;
    d[pi::kLinkSpeedSupportedPortState] = static_cast<uint8_t>(7 << 4 | static_cast<uint8_t>(state_));
    d[pi::kPortPhysStateLinkDown] =
        static_cast<uint8_t>(static_cast<uint8_t>(link_up_ ? PhysState::LinkUp : PhysState::Polling) << 4 | 2);
    d[pi::kMkeyProtLmc] = lmc_;
    d[pi::kLinkSpeedActiveEnabled] = 4 << 4 | 7;
    d[pi::kNeighborMtuMasterSmSl] = static_cast<uint8_t>(neighbor_mtu_ << 4 | sm_sl_);
    d[pi::kVlCapInitType] = 4 << 4;
    d[pi::kInitTypeReplyMtuCap] = opt_.mtu_cap;
    d[pi::kOperVlFilters] = static_cast<uint8_t>(oper_vls_ << 4);
    d[pi::kGuidCap] = 1;
    d[pi::kClientReregSubnetTimeout] = subnet_timeout_;
    d[pi::kRespTimeValue] = 16;
}

uint16_t FakeCa::port_info_set(std::span<const uint8_t> d) {
    PortInfoSet s{};
    s.requested = static_cast<PortState>(d[pi::kLinkSpeedSupportedPortState] & 0x0f);
    s.lid = get16(d, pi::kLid);
    s.sm_lid = get16(d, pi::kMasterSmLid);
    s.sm_sl = d[pi::kNeighborMtuMasterSmSl] & 0x0f;
    s.lmc = d[pi::kMkeyProtLmc] & 0x07;
    s.neighbor_mtu = d[pi::kNeighborMtuMasterSmSl] >> 4;
    s.subnet_timeout = d[pi::kClientReregSubnetTimeout] & 0x1f;
    s.oper_vls = d[pi::kOperVlFilters] >> 4;
    s.client_rereg = d[pi::kClientReregSubnetTimeout] >> 7;
    s.gid_prefix = get64(d, pi::kGidPrefix);
    s.mkey = get64(d, pi::kMkey);
    // IBA 14.2.5.6 state rules, as a CA's SMA applies them.
    uint16_t status = 0;
    switch (s.requested) {
    case PortState::Nop:
        break;
    case PortState::Armed:
        if (state_ != PortState::Init && state_ != PortState::Armed) {
            status = mad::kStatusInvalidField;
        }
        break;
    case PortState::Active:
        if (state_ != PortState::Armed && state_ != PortState::Active) {
            status = mad::kStatusInvalidField;
        }
        break;
    default:
        status = mad::kStatusInvalidField;
        break;
    }
    if (s.neighbor_mtu < kMtu256 || s.neighbor_mtu > opt_.mtu_cap) {
        status = mad::kStatusInvalidField;
    }
    s.status = status;
    if (opt_.record) {
        sets_.push_back(s);
    }
    if (status) {
        return status;
    }
    lid_ = s.lid;
    sm_lid_ = s.sm_lid;
    sm_sl_ = s.sm_sl;
    lmc_ = s.lmc;
    neighbor_mtu_ = s.neighbor_mtu;
    subnet_timeout_ = s.subnet_timeout;
    if (s.oper_vls) {
        oper_vls_ = s.oper_vls;
    }
    gid_prefix_ = s.gid_prefix;
    mkey_ = s.mkey;
    if (s.requested == PortState::Armed || s.requested == PortState::Active) {
        state_ = s.requested;
    }
    if (s.client_rereg && opt_.client_rereg_sup) {
        ++rereg_events_;  // the HCA would post PORT_CHANGE CLIENT_REREG
        if (on_rereg) {
            on_rereg();
        }
    }
    return 0;
}

uint16_t FakeCa::sma(Mad &m) {
    const bool set = m[mad::kMethod] == mad::kSet;
    std::span<uint8_t> d(m.data() + mad::smp::kData, 64);
    switch (get16(m, mad::kAttrId)) {
    case mad::kAttrNodeInfo:
        if (set) {
            return mad::kStatusUnsupportedMethodAttr;
        }
        std::fill(d.begin(), d.end(), 0);
        d[ni::kBaseVersion] = 1;
        d[ni::kClassVersion] = 1;
        d[ni::kNodeType] = opt_.node_type;
        d[ni::kNumPorts] = 1;
        set64(d, ni::kSystemImageGuid, opt_.node_guid);
        set64(d, ni::kNodeGuid, opt_.node_guid);
        set64(d, ni::kPortGuid, opt_.port_guid);
        set16(d, ni::kPartitionCap, 128);
        set16(d, ni::kDeviceId, 0x1017);
        d[ni::kLocalPortNum] = opt_.port_num;
        d[ni::kVendorId + 2] = 0xc9;
        d[ni::kVendorId + 1] = 0x02;
        return 0;
    case mad::kAttrNodeDescription:
        if (set) {
            return mad::kStatusUnsupportedMethodAttr;
        }
        std::fill(d.begin(), d.end(), 0);
        std::copy_n(opt_.description.begin(), std::min<size_t>(63, opt_.description.size()), d.begin());
        return 0;
    case mad::kAttrPortInfo: {
        const uint32_t mod = get32(m, mad::kAttrMod);
        if (mod != 0 && mod != opt_.port_num) {
            return mad::kStatusInvalidField;
        }
        uint16_t st = 0;
        if (set) {
            std::array<uint8_t, 64> in;
            std::copy(d.begin(), d.end(), in.begin());
            st = port_info_set(in);
        }
        port_info(d);
        return st;
    }
    case mad::kAttrPKeyTable:  // block 0 only: 32 P_Keys
        if (get32(m, mad::kAttrMod) != 0) {
            return mad::kStatusInvalidField;
        }
        for (size_t i = 0; i < pkeys_.size(); ++i) {
            if (set) {
                pkeys_[i] = get16(d, i * 2);
            }
            set16(d, i * 2, pkeys_[i]);
        }
        return 0;
    default:
        return mad::kStatusUnsupportedMethodAttr;
    }
}

uint64_t FakeCa::send_dr_smp(std::span<const uint8_t> path, uint8_t method, uint16_t attr, uint32_t attr_mod,
                             std::span<const uint8_t> data, uint16_t lrh_slid) {
    Mad m;
    const uint64_t tid = ++next_tid_;
    init_dr_smp(m, method, tid, attr, attr_mod, path);
    set64(m, mad::smp::kMkey, opt_.smp_mkey);
    std::copy_n(data.begin(), std::min<size_t>(data.size(), 64), m.begin() + mad::smp::kData);
    // C14-9:1 at the sending CA: advance the hop pointer, leave by
    // InitialPath[1] (this CA's only port).
    if (dr::hop_cnt(m) > 0) {
        m[mad::smp::kHopPtr] = 1;
    }
    MadAddress to;
    to.slid = lrh_slid;
    to.dlid = iba::kPermissiveLid;
    to.src_qp = 0;
    to.dst_qp = 0;
    send_raw(mad_packet(to, m));
    return tid;
}

const Mad *FakeCa::smp_response(uint64_t tid) const {
    for (const auto &m : smp_responses_) {
        if (get64(m, mad::kTid) == tid) {
            return &m;
        }
    }
    return nullptr;
}

// --- QP1 ---

uint64_t FakeCa::send_sa(uint8_t method, uint16_t attr, uint64_t comp_mask, std::span<const uint8_t> record,
                         uint64_t tid, bool grh) {
    Mad m{};
    m[mad::kBaseVersion] = 1;
    m[mad::kMgmtClass] = mad::kClassSubnAdm;
    m[mad::kClassVersion] = 2;
    m[mad::kMethod] = method;
    if (!tid) {
        tid = ++next_tid_;
    }
    set64(m, mad::kTid, tid);
    set16(m, mad::kAttrId, attr);
    set64(m, mad::sa::kCompMask, comp_mask);
    std::copy_n(record.begin(), std::min(record.size(), mad::sa::kDataSize), m.begin() + mad::sa::kData);
    send_gmp(m, sm_lid_, grh);
    return tid;
}

void FakeCa::send_gmp(const Mad &m, uint16_t dlid, bool grh) {
    MadAddress to;
    to.slid = lid_;
    to.dlid = dlid;
    to.src_qp = 1;
    to.dst_qp = 1;
    to.qkey = mad::kQp1Qkey;
    to.pkey = 0xffff;
    if (grh) {
        to.grh = true;
        to.sgid = gid();
        hca::store_be64(to.dgid.data(), 0xfe80000000000000ull);
        hca::store_be64(to.dgid.data() + 8, sw_.node_guid());
        to.hop_limit = 64;
    }
    send_raw(mad_packet(to, m));
}

const FakeCa::SaResponse *FakeCa::response_for(uint64_t tid) const {
    for (auto it = sa_responses_.rbegin(); it != sa_responses_.rend(); ++it) {
        if (get64(it->header, mad::kTid) == tid) {
            return &*it;
        }
    }
    return nullptr;
}

void FakeCa::send_ack(const MadAddress &to, const Mad &seg, uint32_t seg_num, uint32_t newwin) {
    if (!opt_.rmpp_ack) {
        return;
    }
    Mad ack{};
    std::copy_n(seg.begin(), mad::sa::kData, ack.begin());
    ack[mad::kMethod] = static_cast<uint8_t>(ack[mad::kMethod] ^ mad::kResp);
    set16(ack, mad::kStatus, 0);
    const size_t r = mad::sa::kRmppHeader;
    ack[r + mad::sa::kRmppVersion] = 1;
    ack[r + mad::sa::kRmppType] = 2;  // ACK
    ack[r + mad::sa::kRmppRespTimeFlags] = 0x1f << 3 | 1;
    ack[r + mad::sa::kRmppStatus] = 0;
    set32(ack, r + mad::sa::kRmppSegment, seg_num);
    set32(ack, r + mad::sa::kRmppPayloadLen, newwin);
    ++acks_sent_;
    send_gmp(ack, to.slid);
}

void FakeCa::handle_gmp(const iba::PacketView &, const MadAddress &a, const Mad &m) {
    if (!is_response(m[mad::kMethod])) {
        return;
    }
    const size_t r = mad::sa::kRmppHeader;
    const uint8_t flags = m[r + mad::sa::kRmppRespTimeFlags] & 7;
    const uint8_t type = m[r + mad::sa::kRmppType];
    const uint64_t tid = get64(m, mad::kTid);
    if (!(flags & 1)) {
        SaResponse s;
        s.header = m;
        s.data.assign(m.begin() + mad::sa::kData, m.end());
        s.status = get16(m, mad::kStatus);
        s.method = m[mad::kMethod];
        s.from = a;
        if (opt_.record) {
            sa_responses_.push_back(std::move(s));
        }
        return;
    }
    if (type != 1) {
        SaResponse s;  // an ABORT/STOP from the sender
        s.header = m;
        s.status = get16(m, mad::kStatus);
        s.method = m[mad::kMethod];
        s.rmpp = true;
        s.from = a;
        if (opt_.record) {
            sa_responses_.push_back(std::move(s));
        }
        return;
    }
    const uint32_t seg = get32(m, r + mad::sa::kRmppSegment);
    if (seg == opt_.rmpp_drop_segment && !dropped_once_.count(seg)) {
        dropped_once_.insert(seg);
        return;  // lost on the way
    }
    auto it = rmpp_rx_.find(tid);
    if (seg == 1 && (flags & 2) && (it == rmpp_rx_.end() || it->second.done)) {
        RmppRx rx;
        rx.resp.header = m;
        rx.resp.status = get16(m, mad::kStatus);
        rx.resp.method = m[mad::kMethod];
        rx.resp.rmpp = true;
        rx.resp.from = a;
        if (rmpp_rx_.size() >= 64) {
            rmpp_rx_.clear();
        }
        it = rmpp_rx_.insert_or_assign(tid, std::move(rx)).first;
    }
    if (it == rmpp_rx_.end()) {
        return;
    }
    RmppRx &rx = it->second;
    if (seg < rx.expected || rx.done) {
        send_ack(a, m, rx.expected - 1, rx.window_last);  // a duplicate: ACK again
        return;
    }
    if (seg != rx.expected || seg > rx.window_last) {
        return;  // out of order or beyond the window: dropped (as mad_rmpp.c)
    }
    const uint32_t paylen = get32(m, r + mad::sa::kRmppPayloadLen);
    size_t take = mad::sa::kDataSize;
    if (flags & 4) {
        take = paylen >= 20 ? std::min<size_t>(paylen - 20, mad::sa::kDataSize) : 0;
    }
    rx.resp.data.insert(rx.resp.data.end(), m.begin() + mad::sa::kData,
                        m.begin() + static_cast<ptrdiff_t>(mad::sa::kData + take));
    rx.resp.segments = seg;
    ++rx.expected;
    if (flags & 4) {
        rx.done = true;
        send_ack(a, m, seg, rx.window_last);
        if (opt_.record) {
            sa_responses_.push_back(rx.resp);
        }
        return;
    }
    if (seg == rx.window_last) {
        rx.window_last = seg + opt_.rmpp_window;
        send_ack(a, m, seg, rx.window_last);
    }
}

}  // namespace fabric::test
