#include "mcast_groups.h"

#include <fmt/format.h>

#include "be.h"
#include "ib_enums.h"
#include "iba/mad.h"

namespace fabric {

namespace {
namespace mcr = sa::mcr;
constexpr uint16_t kReqInvalid = iba::mad::kSaReqInvalid;
constexpr uint16_t kInsufficient = iba::mad::kSaInsufficientComponents;
constexpr uint16_t kNoResources = iba::mad::kSaNoResources;

bool is_zero(const iba::Gid &g) {
    for (uint8_t b : g) {
        if (b) {
            return false;
        }
    }
    return true;
}

// Rate codes from slowest to fastest.
std::vector<uint8_t> rates_upto(uint8_t link_rate) {
    std::vector<uint8_t> v;
    for (uint8_t c = 2; c <= 18; ++c) {
        if (rate_mbps(c) && rate_mbps(c) <= rate_mbps(link_rate)) {
            v.push_back(c);
        }
    }
    std::sort(v.begin(), v.end(), [](uint8_t a, uint8_t b) { return rate_mbps(a) < rate_mbps(b); });
    return v;
}
}  // namespace

const iba::Gid McastGroups::kBroadcastMgid = {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0,
                                              0,    0,    0,    0,    0xff, 0xff, 0xff, 0xff};

bool mtu_satisfies(uint8_t sel, uint8_t wanted, uint8_t have) {
    switch (sel) {
    case kSelGreater: return have > wanted;
    case kSelLess: return have < wanted;
    case kSelExact: return have == wanted;
    default: return true;  // largest available
    }
}

bool rate_satisfies(uint8_t sel, uint8_t wanted, uint8_t have) {
    const unsigned w = rate_mbps(wanted), h = rate_mbps(have);
    switch (sel) {
    case kSelGreater: return w && h > w;
    case kSelLess: return w && h < w;
    case kSelExact: return w && h == w;
    default: return true;
    }
}

std::optional<uint8_t> select_mtu(uint8_t sel, uint8_t wanted, uint8_t link_mtu) {
    // The largest supported value that satisfies the selector.
    for (uint8_t m = link_mtu; m >= kMtu256; --m) {
        if (mtu_satisfies(sel, wanted, m)) {
            return m;
        }
    }
    return std::nullopt;
}

std::optional<uint8_t> select_rate(uint8_t sel, uint8_t wanted, uint8_t link_rate) {
    const auto v = rates_upto(link_rate);
    for (auto it = v.rbegin(); it != v.rend(); ++it) {
        if (rate_satisfies(sel, wanted, *it)) {
            return *it;
        }
    }
    return std::nullopt;
}

McastGroups::McastGroups(uint8_t link_mtu, uint8_t link_rate, uint8_t packet_life_time, uint8_t ipoib_mtu)
    : link_mtu_(link_mtu), ipoib_mtu_(ipoib_mtu), link_rate_(link_rate), plt_(packet_life_time) {
    reset();
}

void McastGroups::reset() {
    groups_.clear();
    McGroup g;
    g.permanent = true;
    g.params.mgid = kBroadcastMgid;
    g.params.qkey = 0x0b1b;
    g.params.mlid = kBroadcastMlid;
    g.params.mtu = std::min(ipoib_mtu_, link_mtu_);
    g.params.tclass = 0;
    g.params.pkey = 0xffff;
    // 10 Gb/s (code 3), or the link rate if that is slower.
    g.params.rate = rate_mbps(link_rate_) < rate_mbps(3) ? link_rate_ : uint8_t{3};
    g.params.packet_life_time = plt_;
    g.params.sl = 0;
    g.params.flow_label = 0;
    g.params.hop_limit = 0;
    g.params.scope = 2;  // link-local
    groups_.emplace(g.params.mgid, g);
}

namespace {

iba::Gid ipoib_broadcast_mgid(uint16_t pkey) {
    iba::Gid mgid = McastGroups::kBroadcastMgid;
    hca::store_be16(mgid.data() + 4, pkey | 0x8000);
    return mgid;
}

}  // namespace

bool McastGroups::is_ipoib_broadcast(const iba::Gid &mgid, uint16_t pkey) { return mgid == ipoib_broadcast_mgid(pkey); }

bool McastGroups::ensure_ipoib_broadcast(uint16_t pkey) {
    const iba::Gid mgid = ipoib_broadcast_mgid(pkey);
    if (groups_.count(mgid)) {
        return true;
    }
    const auto mlid = allocate_mlid();
    if (!mlid || groups_.size() >= kMaxGroups) {
        return false;
    }
    McGroup g = groups_.at(kBroadcastMgid);
    g.members.clear();
    g.params.mgid = mgid;
    g.params.pkey = pkey | 0x8000;
    g.params.mlid = *mlid;
    groups_.emplace(mgid, std::move(g));
    return true;
}

const McGroup *McastGroups::find(const iba::Gid &mgid) const {
    auto it = groups_.find(mgid);
    return it == groups_.end() ? nullptr : &it->second;
}

std::optional<uint16_t> McastGroups::allocate_mlid() const {
    std::vector<bool> used(ForwardingTables::kMulticastCap);
    for (const auto &[mgid, g] : groups_) {
        used[g.params.mlid - iba::kMulticastLidBase] = true;
    }
    for (size_t i = 1; i < used.size(); ++i) {
        if (!used[i]) {
            return static_cast<uint16_t>(iba::kMulticastLidBase + i);
        }
    }
    return std::nullopt;
}

sa::McMemberRecord McastGroups::record_for(const McGroup &g, const iba::Gid &port_gid, uint8_t join_state,
                                           bool proxy) const {
    sa::McMemberRecord r = g.params;
    r.port_gid = port_gid;
    r.join_state = join_state;
    r.proxy_join = proxy;
    r.mtu_selector = kSelExact;
    r.rate_selector = kSelExact;
    r.plt_selector = kSelExact;
    return r;
}

bool McastGroups::params_match(const McGroup &g, const sa::McMemberRecord &q, uint64_t mask) const {
    const sa::McMemberRecord &p = g.params;
    if ((mask & mcr::kQkey) && q.qkey != p.qkey) {
        return false;
    }
    if ((mask & mcr::kMlid) && q.mlid != p.mlid) {
        return false;
    }
    if ((mask & mcr::kTClass) && q.tclass != p.tclass) {
        return false;
    }
    if ((mask & mcr::kPkey) && (q.pkey & 0x7fff) != (p.pkey & 0x7fff)) {
        return false;
    }
    if ((mask & mcr::kSl) && q.sl != p.sl) {
        return false;
    }
    if ((mask & mcr::kFlowLabel) && q.flow_label != p.flow_label) {
        return false;
    }
    if ((mask & mcr::kHopLimit) && q.hop_limit != p.hop_limit) {
        return false;
    }
    if ((mask & mcr::kScope) && q.scope != p.scope) {
        return false;
    }
    if (mask & mcr::kMtu) {
        const uint8_t sel = (mask & mcr::kMtuSelector) ? q.mtu_selector : uint8_t{kSelExact};
        if (!mtu_satisfies(sel, q.mtu, p.mtu)) {
            return false;
        }
    }
    if (mask & mcr::kRate) {
        const uint8_t sel = (mask & mcr::kRateSelector) ? q.rate_selector : uint8_t{kSelExact};
        if (!rate_satisfies(sel, q.rate, p.rate)) {
            return false;
        }
    }
    if (mask & mcr::kPlt) {
        const uint8_t sel = (mask & mcr::kPltSelector) ? q.plt_selector : uint8_t{kSelExact};
        if (!mtu_satisfies(sel, q.packet_life_time, p.packet_life_time)) {  // plain ordered values
            return false;
        }
    }
    return true;
}

// IBA 15.4.3: the group a join creates, with the parameters its creator
// gave (or the SA's choice of MGID, MTU and rate); 0 or a MAD status.
uint16_t McastGroups::create(const sa::McMemberRecord &req, uint64_t mask, McGroup &g) {
    g.params.mgid = req.mgid;
    if (is_zero(req.mgid)) {
        // The SA assigns an MGID (IBA 15.4.3): flags 0x1 (transient),
        // link-local scope, signature 0xA01B, then P_Key and a counter.
        g.params.mgid = {0xff, 0x12, 0xa0, 0x1b};
        hca::store_be16(g.params.mgid.data() + 4, req.pkey);
        hca::store_be64(g.params.mgid.data() + 8, next_mgid_++);
    } else if (req.mgid[0] != 0xff) {
        return kReqInvalid;
    }
    g.params.qkey = req.qkey;
    g.params.tclass = req.tclass;
    g.params.pkey = req.pkey;
    g.params.sl = req.sl;
    g.params.flow_label = req.flow_label;
    g.params.hop_limit = (mask & mcr::kHopLimit) ? req.hop_limit : 0;
    g.params.scope = g.params.mgid[1] & 0x0f;
    std::optional<uint8_t> mtu = link_mtu_, rate = link_rate_;
    if (mask & mcr::kMtu) {
        mtu = select_mtu((mask & mcr::kMtuSelector) ? req.mtu_selector : uint8_t{kSelExact}, req.mtu, link_mtu_);
    }
    if (mask & mcr::kRate) {
        rate = select_rate((mask & mcr::kRateSelector) ? req.rate_selector : uint8_t{kSelExact}, req.rate, link_rate_);
    }
    if (!mtu || !rate) {
        return kReqInvalid;  // no MTU/rate the fabric has satisfies the request
    }
    g.params.mtu = *mtu;
    g.params.rate = *rate;
    g.params.packet_life_time = (mask & mcr::kPlt) ? req.packet_life_time : plt_;
    const auto mlid = allocate_mlid();
    if (!mlid) {
        return kNoResources;
    }
    g.params.mlid = *mlid;
    return 0;
}

McastGroups::Result McastGroups::join(const sa::McMemberRecord &req, uint64_t mask, uint64_t port_guid,
                                      uint16_t switch_port) {
    Result res;
    res.rec = req;
    if ((mask & mcr::kJoinMask) != mcr::kJoinMask) {
        res.status = kInsufficient;
        return res;
    }
    const uint8_t js = req.join_state & 0x0f;
    if (js == 0) {
        res.status = kReqInvalid;
        return res;
    }
    auto it = groups_.find(req.mgid);
    const bool creating = it == groups_.end();
    if (creating) {
        // IBA 15.4.3: the creator supplies every group parameter, and only a
        // full member (or send-only full member) creates.
        if ((mask & mcr::kCreateMask) != mcr::kCreateMask) {
            res.status = kInsufficient;
            return res;
        }
        if (!(js & (sa::kFullMember | sa::kSendOnlyFullMember))) {
            res.status = kReqInvalid;
            return res;
        }
        if (groups_.size() >= kMaxGroups) {
            res.status = kNoResources;
            return res;
        }
        McGroup g;
        if ((res.status = create(req, mask, g))) {
            return res;
        }
        it = groups_.emplace(g.params.mgid, g).first;
    } else if (!params_match(it->second, req, mask)) {
        res.status = kReqInvalid;
        return res;
    }
    McGroup &g = it->second;
    auto m = g.members.find(req.port_gid);
    if (m == g.members.end()) {
        if (g.members.size() >= kMaxMembersPerGroup) {
            res.status = kNoResources;
            return res;
        }
        m = g.members.emplace(req.port_gid, McGroup::Member{}).first;
    }
    const auto before = receivers(g.params.mlid);
    m->second.join_state = static_cast<uint8_t>(m->second.join_state | js);
    m->second.switch_port = switch_port;
    m->second.port_guid = port_guid;
    m->second.proxy = (mask & mcr::kProxyJoin) && req.proxy_join;
    if (receivers(g.params.mlid) != before || creating) {
        res.changed_mlid = g.params.mlid;
    }
    res.rec = record_for(g, req.port_gid, m->second.join_state, m->second.proxy);
    return res;
}

McastGroups::Result McastGroups::leave(const sa::McMemberRecord &req, uint64_t mask) {
    Result res;
    res.rec = req;
    if ((mask & mcr::kJoinMask) != mcr::kJoinMask) {
        res.status = kInsufficient;
        return res;
    }
    auto it = groups_.find(req.mgid);
    if (it == groups_.end()) {
        res.status = kReqInvalid;
        return res;
    }
    McGroup &g = it->second;
    auto m = g.members.find(req.port_gid);
    // IBA o15-0.1.14: the JoinState to leave must be one the member has.
    if (m == g.members.end() || !(m->second.join_state & req.join_state & 0x0f)) {
        res.status = kReqInvalid;
        return res;
    }
    const auto before = receivers(g.params.mlid);
    m->second.join_state = static_cast<uint8_t>(m->second.join_state & ~req.join_state);
    res.rec = record_for(g, req.port_gid, m->second.join_state, m->second.proxy);
    if (m->second.join_state == 0) {
        g.members.erase(m);
    }
    const uint16_t mlid = g.params.mlid;
    if (g.members.empty() && !g.permanent) {
        groups_.erase(it);  // the MLID is free again
        res.changed_mlid = mlid;
    } else if (receivers(mlid) != before) {
        res.changed_mlid = mlid;
    }
    return res;
}

std::vector<sa::McMemberRecord> McastGroups::query(const sa::McMemberRecord &q, uint64_t mask) const {
    std::vector<sa::McMemberRecord> out;
    for (const auto &[mgid, g] : groups_) {
        if ((mask & mcr::kMgid) && mgid != q.mgid) {
            continue;
        }
        if (!params_match(g, q, mask)) {
            continue;
        }
        if (g.members.empty()) {
            if (!(mask & (mcr::kPortGid | mcr::kJoinState))) {
                out.push_back(record_for(g, {}, 0, false));
            }
            continue;
        }
        for (const auto &[gid, m] : g.members) {
            if ((mask & mcr::kPortGid) && gid != q.port_gid) {
                continue;
            }
            if ((mask & mcr::kJoinState) && !(m.join_state & q.join_state)) {
                continue;
            }
            out.push_back(record_for(g, gid, m.join_state, m.proxy));
        }
    }
    return out;
}

std::vector<uint16_t> McastGroups::remove_port(uint64_t port_guid) {
    std::vector<uint16_t> changed;
    for (auto it = groups_.begin(); it != groups_.end();) {
        McGroup &g = it->second;
        const auto before = receivers(g.params.mlid);
        for (auto m = g.members.begin(); m != g.members.end();) {
            m = m->second.port_guid == port_guid ? g.members.erase(m) : std::next(m);
        }
        const uint16_t mlid = g.params.mlid;
        if (g.members.empty() && !g.permanent) {
            it = groups_.erase(it);
            changed.push_back(mlid);
            continue;
        }
        if (receivers(mlid) != before) {
            changed.push_back(mlid);
        }
        ++it;
    }
    return changed;
}

ForwardingTables::PortSet McastGroups::receivers(uint16_t mlid) const {
    ForwardingTables::PortSet s;
    for (const auto &[mgid, g] : groups_) {
        if (g.params.mlid != mlid) {
            continue;
        }
        for (const auto &[gid, m] : g.members) {
            // Send-only members take no traffic (IBA 15.4.3).
            if (m.join_state & (sa::kFullMember | sa::kNonMember)) {
                s.set(m.switch_port);
            }
        }
    }
    return s;
}

std::string McastGroups::describe() const {
    std::string s;
    for (const auto &[mgid, g] : groups_) {
        const auto &p = g.params;
        fmt::format_to(std::back_inserter(s),
                       "group {} mlid={:#06x} qkey={:#010x} pkey={:#06x} mtu={} rate={} sl={} scope={} members={}{}\n",
                       iba::gid_str(mgid), p.mlid, p.qkey, p.pkey, mtu_bytes(p.mtu), p.rate, p.sl, p.scope,
                       g.members.size(), g.permanent ? " (broadcast)" : "");
        for (const auto &[gid, m] : g.members) {
            fmt::format_to(std::back_inserter(s), "  member {} port={} join_state={:#x}\n", iba::gid_str(gid),
                           m.switch_port, m.join_state);
        }
    }
    return s;
}

}  // namespace fabric
