#include "sa.h"

#include <algorithm>
#include <cstring>

#include "smp_agent.h"
#include "subnet_manager.h"
#include "switch.h"

namespace fabric {

namespace {

constexpr uint64_t kSubnetPrefix = 0xfe80000000000000ull;
constexpr size_t kMaxCached = 256;
constexpr uint32_t kCapMask2SendOnlyFullMember = 1u << 12;  // IB_SA_CAP_MASK2_SENDONLY_FULL_MEM_SUPPORT

// Record sizes for AttributeOffset, also in error responses (clients divide
// the payload by it).
size_t record_size(uint16_t attr) {
    switch (attr) {
    case mad::sa::kClassPortInfo: return sa::kClassPortInfoSize;
    case mad::sa::kNodeRecord: return sa::kNodeRecordSize;
    case mad::sa::kPortInfoRecord: return sa::kPortInfoRecordSize;
    case mad::sa::kPathRecord: return sa::kPathRecordSize;
    case mad::sa::kMcMemberRecord: return sa::kMcMemberRecordSize;
    default: return 0;
    }
}

std::span<const uint8_t> record_of(const Mad &m) { return {m.data() + mad::sa::kData, mad::sa::kDataSize}; }
uint64_t comp_mask(const Mad &m) { return get64(m, mad::sa::kCompMask); }
uint64_t gid_prefix(const iba::Gid &g) { return hca::load_be64(g.data()); }
uint64_t gid_guid(const iba::Gid &g) { return hca::load_be64(g.data() + 8); }

}  // namespace

SubnetAdmin::SubnetAdmin(IbSwitch &sw, SubnetManager &sm, EventLoop &loop, Log &log, const Config &cfg)
    : sw_(sw),
      sm_(sm),
      log_(log),
      cfg_(cfg),
      groups_(sw.config().mtu, rate_code(sw.config().rate), cfg.packet_life_time, cfg.ipoib_mtu),
      rmpp_(loop, log, [this](const MadAddress &to, const Mad &m) { send(to, m); }, cfg.rmpp) {}

SubnetAdmin::~SubnetAdmin() {
    if (started_) {
        sw_.set_gsi_handler({});
        sm_.on_port_removed({});
        sm_.on_restart({});
    }
}

void SubnetAdmin::start() {
    started_ = true;
    sw_.set_gsi_handler([this](const MadAddress &a, const Mad &m) { handle(a, m); });
    sm_.on_port_removed([this](uint64_t guid) {
        for (uint16_t mlid : groups_.remove_port(guid)) {
            mft_changed(mlid);
        }
    });
    sm_.on_restart([this] {
        groups_.reset();
        rmpp_.clear();
        cache_.clear();
    });
}

void SubnetAdmin::send(const MadAddress &to, const Mad &m) {
    sw_.send_local(mad_packet(to, m, ++psn_ & 0xffffff));
}

void SubnetAdmin::reply_status(const MadAddress &from, const Mad &req, uint16_t status) {
    Mad r = req;
    r[mad::kMethod] = response_method(req[mad::kMethod]);
    set16(r, mad::kStatus, status);
    send(reply_address(from, sw_.lid()), r);
}

const SubnetAdmin::Cached *SubnetAdmin::cached(const MadAddress &from, const Mad &req) const {
    const auto key = std::make_tuple(from.slid, from.src_qp, get64(req, mad::kTid));
    for (const auto &c : cache_) {
        if (c.key == key && c.req == req) {
            return &c;
        }
    }
    return nullptr;
}

void SubnetAdmin::handle(const MadAddress &from, const Mad &req) {
    if (!sm_.running()) {
        ++stats_.sm_down;
        return;  // the SA went with its SM: requests time out
    }
    const uint8_t method = req[mad::kMethod];
    if (req[mad::kMgmtClass] != mad::kClassSubnAdm) {
        // The management port runs no other class agent (PMA, ...): answer
        // requests as the kernel does for unmatched MADs.
        ++stats_.non_sa;
        if (!is_response(method) && method != mad::kTrapRepress) {
            reply_status(from, req, mad::kStatusUnsupportedMethodAttr);
        }
        return;
    }
    if (req[mad::kBaseVersion] != 1 || req[mad::kClassVersion] != 2) {
        if (!is_response(method)) {
            ++stats_.errors;
            reply_status(from, req, mad::kStatusBadVersion);
        }
        return;
    }
    const uint8_t rflags = req[mad::sa::kRmppHeader + mad::sa::kRmppRespTimeFlags] & 0x07;
    const auto rtype = static_cast<RmppType>(req[mad::sa::kRmppHeader + mad::sa::kRmppType]);
    if (rflags & kRmppActive) {
        if (rtype == RmppType::Ack || rtype == RmppType::Stop || rtype == RmppType::Abort) {
            rmpp_.on_control(from, req);
            return;
        }
        if (rtype != RmppType::Data || (rflags & (kRmppFirst | kRmppLast)) != (kRmppFirst | kRmppLast)) {
            // Requests of more than one segment are not taken (no SA
            // request needs them): ABORT, IBA 13.6.4.
            Mad r = req;
            r[mad::kMethod] = response_method(method);
            std::fill(r.begin() + mad::sa::kRmppHeader, r.begin() + mad::sa::kRmppHeader + 12, 0);
            r[mad::sa::kRmppHeader + mad::sa::kRmppVersion] = 1;
            r[mad::sa::kRmppHeader + mad::sa::kRmppType] = static_cast<uint8_t>(RmppType::Abort);
            r[mad::sa::kRmppHeader + mad::sa::kRmppRespTimeFlags] = 0x1f << 3 | kRmppActive;
            r[mad::sa::kRmppHeader + mad::sa::kRmppStatus] = kRmppStatusUnspec;
            ++stats_.errors;
            send(reply_address(from, sw_.lid()), r);
            return;
        }
    }
    if (is_response(method)) {
        return;
    }
    ++stats_.requests;
    if (const Cached *c = cached(from, req)) {
        ++stats_.duplicates;
        send(reply_address(from, sw_.lid()), c->resp);
        return;
    }
    Answer a;
    const uint16_t attr = get16(req, mad::kAttrId);
    const bool get = method == mad::kGet, table = method == mad::kGetTable;
    if (!get && !table && method != mad::kSet && method != mad::kDelete) {
        a.status = mad::kStatusUnsupportedMethod;
    } else {
        switch (attr) {
        case mad::sa::kClassPortInfo:
            a = get ? class_port_info(req) : Answer{mad::kStatusUnsupportedMethodAttr};
            break;
        case mad::sa::kNodeRecord:
            a = get || table ? node_records(req) : Answer{mad::kStatusUnsupportedMethodAttr};
            break;
        case mad::sa::kPortInfoRecord:
            a = get || table ? port_info_records(req) : Answer{mad::kStatusUnsupportedMethodAttr};
            break;
        case mad::sa::kPathRecord:
            a = get || table ? path_records(from, req) : Answer{mad::kStatusUnsupportedMethodAttr};
            break;
        case mad::sa::kMcMemberRecord:
            a = mcmember(from, req);
            break;
        default:
            // ServiceRecord, InformInfo, LinkRecord, ...: not implemented.
            a.status = mad::kStatusUnsupportedMethodAttr;
            break;
        }
    }
    respond(from, req, std::move(a));
}

void SubnetAdmin::respond(const MadAddress &from, const Mad &req, Answer a) {
    const uint8_t method = req[mad::kMethod];
    if (a.status == 0 && a.records.size() > cfg_.max_records) {
        a.status = mad::kSaNoResources;
    }
    if (a.status == mad::kSaNoResources && log_.allow("sa-caps")) {
        // A cap refused it: too many records, multicast groups or members.
        log_.warn("sa", "attr {:#06x} from LID {}: no resources ({} records, cap {})", get16(req, mad::kAttrId),
                  from.slid, a.records.size(), cfg_.max_records);
    }
    if (a.status == 0 && method == mad::kGet) {
        // IBA 15.4.1 (C15-0.1.30): a Get answers exactly one record.
        if (a.records.empty()) {
            a.status = mad::kSaNoRecords;
        } else if (a.records.size() > 1) {
            a.status = mad::kSaTooManyRecords;
        }
    }
    if (a.status) {
        ++stats_.errors;
        // Rate-limited on its own, so a burst of joins cannot hide it.
        if (log_.allow("sa-status")) {
            log_.info("sa", "attr {:#06x} method {:#04x} from LID {}: status {:#06x}", get16(req, mad::kAttrId),
                      method, from.slid, a.status);
        }
    }
    Mad r{};
    std::copy_n(req.begin(), mad::sa::kData, r.begin());
    r[mad::kMethod] = response_method(method);
    set16(r, mad::kStatus, a.status);
    std::fill(r.begin() + mad::sa::kRmppHeader, r.begin() + mad::sa::kRmppHeader + 12, 0);
    set64(r, mad::sa::kSmKey, 0);
    if (a.rec_size == 0) {
        a.rec_size = record_size(get16(req, mad::kAttrId));
    }
    set16(r, mad::sa::kAttrOffset, static_cast<uint16_t>(a.rec_size / 8));
    const MadAddress to = reply_address(from, sw_.lid());
    if (method == mad::kGetTable && a.status == 0) {
        std::vector<uint8_t> data;
        data.reserve(a.records.size() * a.rec_size);
        for (const auto &rec : a.records) {
            data.insert(data.end(), rec.begin(), rec.end());
        }
        if (rmpp_.start(to, r, std::move(data))) {
            return;
        }
        set16(r, mad::kStatus, mad::kSaNoResources);
        if (log_.allow("sa-caps")) {
            log_.warn("sa", "attr {:#06x} from LID {}: {} bytes of records, above the RMPP cap",
                      get16(req, mad::kAttrId), from.slid, a.records.size() * a.rec_size);
        }
    } else if (a.status == 0) {
        std::copy_n(a.records.front().begin(), std::min(a.records.front().size(), mad::sa::kDataSize),
                    r.begin() + mad::sa::kData);
    } else {
        // Errors carry the request's record back.
        std::copy(req.begin() + mad::sa::kData, req.end(), r.begin() + mad::sa::kData);
    }
    if (cache_.size() >= kMaxCached) {
        cache_.pop_front();
    }
    cache_.push_back({std::make_tuple(from.slid, from.src_qp, get64(req, mad::kTid)), req, r});
    send(to, r);
}

SubnetAdmin::Answer SubnetAdmin::class_port_info(const Mad &) {
    Answer a;
    a.rec_size = sa::kClassPortInfoSize;
    std::vector<uint8_t> rec(sa::kClassPortInfoSize);
    sa::encode_sa_class_port_info(rec, kCapMask2SendOnlyFullMember, cfg_.resp_time);
    a.records.push_back(std::move(rec));
    return a;
}

SubnetAdmin::Answer SubnetAdmin::node_records(const Mad &req) {
    namespace ni = iba::mad::node_info;
    Answer a;
    a.rec_size = sa::kNodeRecordSize;
    const auto q = record_of(req);
    const uint64_t mask = comp_mask(req);
    const auto qni = q.subspan(4, 40);
    for (const Endport &e : sm_.endports()) {
        const std::span<const uint8_t> ni(e.node_info);
        if ((mask & sa::nr::kLid) && get16(q, 0) != e.lid) {
            continue;
        }
        if ((mask & sa::nr::kNodeType) && qni[ni::kNodeType] != ni[ni::kNodeType]) {
            continue;
        }
        if ((mask & sa::nr::kNumPorts) && qni[ni::kNumPorts] != ni[ni::kNumPorts]) {
            continue;
        }
        if ((mask & sa::nr::kSysImageGuid) && get64(qni, ni::kSystemImageGuid) != get64(ni, ni::kSystemImageGuid)) {
            continue;
        }
        if ((mask & sa::nr::kNodeGuid) && get64(qni, ni::kNodeGuid) != e.node_guid) {
            continue;
        }
        if ((mask & sa::nr::kPortGuid) && get64(qni, ni::kPortGuid) != e.port_guid) {
            continue;
        }
        if ((mask & sa::nr::kNodeDesc) && !std::equal(e.node_desc.begin(), e.node_desc.end(), q.begin() + 44)) {
            continue;
        }
        std::vector<uint8_t> rec(sa::kNodeRecordSize);
        set16(rec, 0, e.lid);
        std::copy(e.node_info.begin(), e.node_info.end(), rec.begin() + 4);
        std::copy(e.node_desc.begin(), e.node_desc.end(), rec.begin() + 44);
        a.records.push_back(std::move(rec));
    }
    return a;
}

SubnetAdmin::Answer SubnetAdmin::port_info_records(const Mad &req) {
    namespace pi = iba::mad::port_info;
    Answer a;
    a.rec_size = sa::kPortInfoRecordSize;
    const auto q = record_of(req);
    const uint64_t mask = comp_mask(req);
    const auto qpi = q.subspan(4, 64);
    auto consider = [&](uint16_t lid, uint8_t port_num, std::span<const uint8_t> p) {
        if ((mask & sa::pir::kLid) && get16(q, 0) != lid) {
            return;
        }
        if ((mask & sa::pir::kPortNum) && q[2] != port_num) {
            return;
        }
        // Every requested capability bit (as opensm's capability-mask match).
        if ((mask & sa::pir::kCapMask) && (get32(p, pi::kCapMask) & get32(qpi, pi::kCapMask)) != get32(qpi, pi::kCapMask)) {
            return;
        }
        if ((mask & sa::pir::kPortState) &&
            (p[pi::kLinkSpeedSupportedPortState] & 0x0f) != (qpi[pi::kLinkSpeedSupportedPortState] & 0x0f)) {
            return;
        }
        std::vector<uint8_t> rec(sa::kPortInfoRecordSize);
        set16(rec, 0, lid);
        rec[2] = port_num;
        std::copy_n(p.begin(), 64, rec.begin() + 4);
        // The M_Key only to a requester with the SM_Key (IBA 15.2.5.3);
        // this SA trusts nobody, so a guest never learns the switch's key.
        set64(std::span<uint8_t>(rec).subspan(4), pi::kMkey, 0);
        a.records.push_back(std::move(rec));
    };
    for (const Endport &e : sm_.endports()) {
        if (e.is_switch && e.node_guid == sw_.node_guid()) {
            std::array<uint8_t, 64> p;
            for (uint8_t k = 0; k <= sw_.num_ports(); ++k) {
                sw_.sma().port_info(k, p, k);
                consider(e.lid, k, p);
            }
        } else {
            consider(e.lid, e.port_num, e.port_info);
        }
    }
    return a;
}

namespace {

// The endports one side of a PathRecord query names: by GID (and LID if
// both are given), by LID, the requester (a Get without a source), or all.
std::vector<Endport> path_side(const std::vector<Endport> &eps, uint64_t mask, uint64_t gid_bit,
                               const iba::Gid &gid, uint64_t lid_bit, uint16_t lid, std::optional<uint16_t> requester) {
    std::vector<Endport> v;
    if (mask & gid_bit) {
        if (gid_prefix(gid) == kSubnetPrefix) {
            for (const auto &e : eps) {
                if (e.port_guid == gid_guid(gid) && (!(mask & lid_bit) || e.lid == lid)) {
                    v.push_back(e);
                }
            }
        }
        return v;
    }
    if (!(mask & lid_bit) && !requester) {
        return eps;
    }
    const uint16_t want = (mask & lid_bit) ? lid : *requester;
    for (const auto &e : eps) {
        if (e.lid == want) {
            v.push_back(e);
        }
    }
    return v;
}

}  // namespace

// The record for the path s -> d that meets the query, if one does.
std::optional<sa::PathRecord> SubnetAdmin::path_between(const sa::PathRecord &q, uint64_t mask, const Endport &s,
                                                        const Endport &d) const {
    const uint8_t path_mtu = std::min(s.mtu, d.mtu);
    const uint8_t path_rate = rate_mbps(s.rate) <= rate_mbps(d.rate) ? s.rate : d.rate;
    std::optional<uint8_t> mtu = path_mtu, rate = path_rate;
    if (mask & sa::pr::kMtu) {
        mtu = select_mtu((mask & sa::pr::kMtuSelector) ? q.mtu_selector : uint8_t{kSelExact}, q.mtu, path_mtu);
    }
    if (mask & sa::pr::kRate) {
        rate = select_rate((mask & sa::pr::kRateSelector) ? q.rate_selector : uint8_t{kSelExact}, q.rate,
                           path_rate);
    }
    if (!mtu || !rate) {
        return std::nullopt;
    }
    if ((mask & sa::pr::kPlt) && !mtu_satisfies((mask & sa::pr::kPltSelector) ? q.plt_selector : uint8_t{kSelExact},
                                                q.packet_life_time, cfg_.packet_life_time)) {
        return std::nullopt;
    }
    // A path lies in one partition both ends share: the one asked for, or
    // without one the default partition, else the source's first.
    std::optional<uint16_t> pkey;
    if (mask & sa::pr::kPkey) {
        pkey = sm_.shared_pkey(s, d, q.pkey);
    } else {
        pkey = sm_.shared_pkey(s, d, 0xffff);
        if (!pkey) {
            for (const uint16_t k : sm_.pkeys_of(s)) {
                if ((pkey = sm_.shared_pkey(s, d, k))) {
                    break;
                }
            }
        }
    }
    if (!pkey) {
        return std::nullopt;
    }
    sa::PathRecord r;
    r.service_id = (mask & sa::pr::kServiceId) ? q.service_id : 0;
    // IPoIB compares the DGID of the answer with its request.
    r.dgid = (mask & sa::pr::kDgid) ? q.dgid : d.gid();
    r.sgid = (mask & sa::pr::kSgid) ? q.sgid : s.gid();
    r.dlid = d.lid;
    r.slid = s.lid;
    r.flow_label = (mask & sa::pr::kFlowLabel) ? q.flow_label : 0;
    r.hop_limit = (mask & sa::pr::kHopLimit) ? q.hop_limit : 0;  // 0: no GRH within the subnet
    r.tclass = (mask & sa::pr::kTClass) ? q.tclass : 0;
    r.reversible = true;
    r.numb_path = 1;
    r.pkey = *pkey;
    r.sl = 0;
    r.mtu_selector = kSelExact;
    r.mtu = *mtu;
    r.rate_selector = kSelExact;
    r.rate = *rate;
    r.plt_selector = kSelExact;
    r.packet_life_time = cfg_.packet_life_time;
    return r;
}

SubnetAdmin::Answer SubnetAdmin::path_records(const MadAddress &from, const Mad &req) {
    Answer a;
    a.rec_size = sa::kPathRecordSize;
    const sa::PathRecord q = sa::decode_path_record(record_of(req));
    const uint64_t mask = comp_mask(req);
    // Constraints this fabric cannot meet give no records: raw traffic,
    // an SL or QoS class other than the default ones.
    if (((mask & sa::pr::kRawTraffic) && q.raw_traffic) || ((mask & sa::pr::kSl) && q.sl != 0) ||
        ((mask & sa::pr::kQosClass) && q.qos_class != 0) || ((mask & sa::pr::kNumbPath) && q.numb_path == 0)) {
        return a;
    }
    const auto eps = sm_.endports();
    const bool get = req[mad::kMethod] == mad::kGet;
    const auto srcs = path_side(eps, mask, sa::pr::kSgid, q.sgid, sa::pr::kSlid, q.slid,
                                get ? std::optional<uint16_t>(from.slid) : std::nullopt);
    const auto dsts = path_side(eps, mask, sa::pr::kDgid, q.dgid, sa::pr::kDlid, q.dlid, std::nullopt);
    for (const auto &s : srcs) {
        for (const auto &d : dsts) {
            const auto r = path_between(q, mask, s, d);
            if (!r) {
                continue;
            }
            std::vector<uint8_t> rec(sa::kPathRecordSize);
            sa::encode(*r, rec);
            a.records.push_back(std::move(rec));
            if (a.records.size() > cfg_.max_records) {
                return a;
            }
        }
    }
    return a;
}

SubnetAdmin::Answer SubnetAdmin::mcmember(const MadAddress &from, const Mad &req) {
    Answer a;
    a.rec_size = sa::kMcMemberRecordSize;
    const uint8_t method = req[mad::kMethod];
    const sa::McMemberRecord q = sa::decode_mcmember_record(record_of(req));
    const uint64_t mask = comp_mask(req);
    auto one = [&](const McastGroups::Result &res) {
        a.status = res.status;
        if (res.status == 0) {
            std::vector<uint8_t> rec(sa::kMcMemberRecordSize);
            sa::encode(res.rec, rec);
            a.records.push_back(std::move(rec));
        }
        if (res.changed_mlid) {
            mft_changed(res.changed_mlid);
        }
    };
    switch (method) {
    case mad::kSet: {
        if ((mask & sa::mcr::kJoinMask) != sa::mcr::kJoinMask) {
            a.status = mad::kSaInsufficientComponents;
            break;
        }
        if (gid_prefix(q.port_gid) != kSubnetPrefix) {
            a.status = mad::kSaInvalidGid;
            break;
        }
        const auto ep = sm_.endport_by_guid(gid_guid(q.port_gid));
        if (!ep) {
            a.status = mad::kSaInvalidGid;
            break;
        }
        ++stats_.joins;
        if ((mask & sa::mcr::kPkey) && !sm_.pkey_entry(*ep, q.pkey)) {
            a.status = mad::kSaReqInvalid;  // a group of a partition the port is not in
            break;
        }
        if ((mask & sa::mcr::kPkey) && McastGroups::is_ipoib_broadcast(q.mgid, q.pkey) &&
            !groups_.ensure_ipoib_broadcast(q.pkey)) {
            a.status = mad::kSaNoResources;
            break;
        }
        const auto res = groups_.join(q, mask, ep->port_guid, ep->attach);
        if (log_.allow("sa")) {
            log_.info("sa", "join {} by {} (LID {}) state {:#x}: {}", iba::gid_str(q.mgid), iba::gid_str(q.port_gid),
                  from.slid, q.join_state,
                  res.status ? fmt::format("status {:#06x}", res.status)
                             : fmt::format("MLID {:#06x}", res.rec.mlid));
        }
        one(res);
        break;
    }
    case mad::kDelete: {
        ++stats_.leaves;
        const auto res = groups_.leave(q, mask);
        if (log_.allow("sa")) {
            log_.info("sa", "leave {} by {} state {:#x}: status {:#06x}", iba::gid_str(q.mgid),
                      iba::gid_str(q.port_gid), q.join_state, res.status);
        }
        one(res);
        break;
    }
    case mad::kGet:
    case mad::kGetTable:
        for (const auto &r : groups_.query(q, mask)) {
            std::vector<uint8_t> rec(sa::kMcMemberRecordSize);
            sa::encode(r, rec);
            a.records.push_back(std::move(rec));
        }
        break;
    default:
        a.status = mad::kStatusUnsupportedMethodAttr;
        break;
    }
    return a;
}

void SubnetAdmin::mft_changed(uint16_t mlid) { sm_.set_mcast_ports(mlid, groups_.receivers(mlid)); }

}  // namespace fabric
