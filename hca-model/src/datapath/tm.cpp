#include "datapath/tm.h"

#include <algorithm>
#include <cstring>

#include "be.h"
#include "datapath/common.h"
#include "datapath/rc.h"
#include "datapath/rc_req.h"
#include "datapath/recv.h"
#include "device.h"
#include "fw/fw_limits.h"
#include "iba/packet.h"
#include "objects/qp.h"
#include "objects/srq.h"

namespace hca {

Tmh load_tmh(std::span<const uint8_t> msg) {
    Tmh h{};
    if (msg.size() >= sizeof(h)) {
        std::memcpy(&h, msg.data(), sizeof(h));
    }
    return h;
}

namespace {

// Budget units (8-byte translation entries) one tag entry is charged as.
constexpr uint64_t kEntryUnits = (sizeof(TagEntry) + 7) / 8;

}  // namespace

std::unique_ptr<TagList> TagList::make(Budget &budget, unsigned log_size, bool rndv) {
    const uint64_t units = (uint64_t{1} << log_size) * kEntryUnits;
    if (!budget.take(units)) {
        return nullptr;
    }
    std::unique_ptr<TagList> t(new TagList(budget, units));
    t->entries.resize(size_t{1} << log_size);
    t->log_size = log_size;
    t->rndv = rndv;
    return t;
}

TagList::~TagList() {
    budget_.give(charged_);
}

Srq *TagMatcher::xrq_of(const Qp &qp) {
    if (qp.st != kQpRc || qp.rq_type != kRqSrq) {
        return nullptr;
    }
    Srq *s = dev_.srqs.find(qp.srqn);
    return s && s->tm ? s : nullptr;
}

// APPEND puts a tagged buffer at the list's append index and moves that
// index to the one the WQE names (software's next free entry); REMOVE
// takes the entry at the WQE's index out, failing if a message consumed it
// first; NOP only reports. SW_CNT updates software's phase first.
bool TagMatcher::list_op(Qp &qp, const SqWqe &sw, uint8_t &synd) {
    synd = kSyndLocalQpOp;
    Srq *x = xrq_of(qp);
    if (!x) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: TAG_MATCHING on a QP without a tag-matching XRQ", qp.qpn, sw.index);
        return false;
    }
    if (sw.bytes.size() < sizeof(CtrlSeg) + sizeof(TmSeg)) {
        dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: TAG_MATCHING without its segment", qp.qpn, sw.index);
        return false;
    }
    TmSeg seg;
    std::memcpy(&seg, sw.bytes.data() + sizeof(CtrlSeg), sizeof(seg));
    TagList &tl = *x->tm;
    const uint8_t op = seg.opcode >> 4;
    const uint16_t index = seg.index.get();
    if (seg.flags & kTmFlagSwCnt) {
        tl.sw_phase = seg.sw_cnt.get();
    }
    HCA_TRACE(dev_, wqe_tag_op, .qpn = qp.qpn, .index = sw.index,
              .op = op == kTmOpAppend   ? "APPEND"
                    : op == kTmOpRemove ? "REMOVE"
                    : op == kTmOpNop    ? "NOP"
                                        : "?",
              .entry = trace_opt(op != kTmOpNop, op == kTmOpAppend ? tl.append_next : index),
              .tag = trace_opt(op == kTmOpAppend, seg.append_tag.get()),
              .mask = trace_opt(op == kTmOpAppend, seg.append_mask.get()),
              .sw_cnt = trace_opt((seg.flags & kTmFlagSwCnt) != 0, seg.sw_cnt.get()), .hw_cnt = tl.hw_phase);
    bool success = true;
    switch (op) {
        case kTmOpNop:
            break;
        case kTmOpAppend: {
            if (index >= tl.entries.size() || tl.entries[tl.append_next].listed) {
                dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: APPEND at entry {} (next {}) of a {}-entry list", qp.qpn,
                                 sw.index, tl.append_next, index, tl.entries.size());
                return false;
            }
            GatherList data;
            const size_t off = sizeof(CtrlSeg) + sizeof(TmSeg);
            if (!parse_data_segs(dev_, qp, sw.bytes.subspan(off), data, synd) || data.sges.size() > 1 ||
                !data.inline_data.empty()) {
                dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: a tagged buffer takes one data pointer", qp.qpn, sw.index);
                synd = kSyndLocalQpOp;
                return false;
            }
            TagEntry &e = tl.entries[tl.append_next];
            e = {};
            e.tag = seg.append_tag.get();
            e.mask = seg.append_mask.get();
            if (!data.sges.empty()) {
                e.buf = data.sges.front();
            }
            e.seq = ++tl.seq;
            e.listed = true;
            e.armed = tl.sw_phase == tl.hw_phase;
            tl.append_next = index;
            break;
        }
        case kTmOpRemove:
            if (index >= tl.entries.size()) {
                dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: REMOVE of entry {} of a {}-entry list", qp.qpn, sw.index,
                                 index, tl.entries.size());
                return false;
            }
            success = tl.entries[index].listed;
            tl.entries[index].listed = false;
            break;
        default:
            dev_.guest_error("qpn=0x{:x} WQE 0x{:x}: tag list operation {}", qp.qpn, sw.index, op);
            return false;
    }
    if (seg.flags & kTmFlagCqeReq) {
        list_cqe(qp, *x, op == kTmOpAppend ? kTmAppend : op == kTmOpRemove ? kTmRemove : kTmNoop, sw.index, success);
    }
    return true;
}

void TagMatcher::list_cqe(Qp &qp, Srq &x, uint8_t app_op, uint16_t wqe_index, bool success) {
    Cqe64 cqe{};
    TmCqe tm;
    tm.success.set(success ? kTmSuccess : 0);
    tm.hw_phase_cnt.set(x.tm->hw_phase);
    std::memcpy(cqe.rsvd0, &tm, sizeof(tm));
    cqe.srqn.set(x.srqn);
    cqe.app = kCqeAppTagMatching;
    cqe.app_op = app_op;
    cqe.sop_drop_qpn.set(uint32_t{kWqeTagMatching} << 24 | qp.qpn);
    cqe.wqe_counter.set(wqe_index);
    cqe.op_own = static_cast<uint8_t>(kCqeNoPacket << 4);
    HCA_TRACE(dev_, cqe_tm, .cqn = x.cqn, .qpn = qp.qpn, .op = trace_name_tm_app_op(app_op), .wqe_counter = wqe_index,
              .ok = success, .hw_cnt = x.tm->hw_phase);
    dev_.cqs.post(x.cqn, cqe, false);
}

void TagMatcher::recv_cqe(const Qp &qp, uint32_t cqn, uint8_t app_op, uint16_t index, uint16_t wqe_counter,
                          std::span<const uint8_t, kTmhLen> tmh, uint32_t byte_cnt, const iba::PacketView *v,
                          uint64_t pkt) {
    Cqe64 cqe{};
    if (app_op == kTmConsumed || app_op == kTmConsumedMsg || app_op == kTmConsumedMsgSwRndv) {
        std::memcpy(cqe.rsvd0, tmh.data(), kTmhLen);  // the match scatters the TMH to its CQE
    }
    // (No GRH flag, as on every connected QP's receive.)
    if (v) {
        cqe.slid.set(v->slid());
        cqe.flags_rqpn.set(uint32_t{v->sl()} << 24 | (qp.remote_qpn & 0xffffff));
    } else {
        cqe.flags_rqpn.set(qp.remote_qpn & 0xffffff);
    }
    const Srq *x = dev_.srqs.find(qp.srqn);
    cqe.srqn.set(x ? x->srqn : 0);
    cqe.app = kCqeAppTagMatching;
    cqe.app_op = app_op;
    cqe.app_info.set(index);  // the tag entry
    cqe.byte_cnt.set(byte_cnt);
    cqe.sop_drop_qpn.set(qp.cqe_qpn());
    cqe.wqe_counter.set(wqe_counter);
    // The match itself (data still to come) has no packet of its own.
    cqe.op_own = static_cast<uint8_t>((app_op == kTmConsumed ? kCqeNoPacket : uint8_t{kCqeRespSend}) << 4);
    HCA_TRACE(dev_, cqe_tm, .cqn = cqn, .qpn = qp.qpn, .op = trace_name_tm_app_op(app_op), .wqe_counter = wqe_counter,
              .entry = index, .tag = load_tmh(tmh).tag.get(), .byte_cnt = byte_cnt, .pkt = trace_opt(pkt != 0, pkt));
    dev_.cqs.post(cqn, cqe, false);
}

// The oldest armed entry whose tag matches under its mask takes an EAGER
// or RNDV message; no entry, a NO_TAG or any other header: the message
// goes whole into the XRQ's next receive WQE.
TmStart TagMatcher::start_message(Qp &qp, RcState::Recv &r, Srq &x, const iba::PacketView &v, bool last, uint64_t pkt) {
    TagList &tl = *x.tm;
    r = {};
    const std::span<const uint8_t> p = v.payload;
    const Tmh h = load_tmh(p);
    const uint8_t tmh_op = p.size() >= kTmhLen ? h.opcode : uint8_t{kTmhNoTag};
    const uint64_t tag = h.tag.get();
    std::copy_n(p.begin(), std::min(p.size(), kTmhLen), r.tmh.begin());
    int best = -1;
    const bool taggable =
        p.size() >= kTmhLen &&
        (tmh_op == kTmhEager || (tmh_op == kTmhRndv && tl.rndv && last && p.size() >= kTmhLen + kRvhLen));
    if (taggable) {
        for (size_t i = 0; i < tl.entries.size(); ++i) {
            const TagEntry &e = tl.entries[i];
            if (e.listed && e.armed && ((e.tag ^ tag) & e.mask) == 0 &&
                (best < 0 || e.seq < tl.entries[static_cast<size_t>(best)].seq)) {
                best = static_cast<int>(i);
            }
        }
    }
    HCA_TRACE(dev_, qp_tm_match, .qpn = qp.qpn, .xrqn = x.srqn, .tmh = trace_name_tmh_op(tmh_op), .tag = tag,
              .entry = trace_opt(best >= 0, best), .hw_cnt = tl.hw_phase, .sw_cnt = tl.sw_phase);
    r.srq = true;
    r.srqn = x.srqn;
    r.cqn = x.cqn;
    r.pd = x.pd;
    if (best >= 0) {
        const uint16_t index = static_cast<uint16_t>(best);
        TagEntry &e = tl.entries[index];
        const TagEntry taken = e;
        e.listed = false;
        r.tm_index = index;
        if (tmh_op == kTmhRndv) {
            return start_rndv(qp, r, x, taken, index, p, v, pkt) ? TmStart::Done : TmStart::Failed;
        }
        r.sges.assign(1, taken.buf);  // not push_back: GCC 12 misreads the inlined growth path (-Wstringop-overflow)
        r.skip = kTmhLen;
        r.tm_app = last ? kTmConsumedMsg : kTmExpected;
        if (!last) {
            recv_cqe(qp, r.cqn, kTmConsumed, index, 0, r.tmh, 0, &v, pkt);
        }
        return TmStart::Deliver;
    }
    uint64_t addr;
    uint32_t stride;
    uint16_t index;
    Srq *srq = nullptr;
    if (!qps_.receiver().next_recv_wqe(qp, addr, stride, index, srq)) {
        return TmStart::NoBuffer;
    }
    if (!qps_.receiver().read_recv_sges(addr, stride, r.sges)) {
        qps_.to_error(qp, "XRQ receive WQE not readable");
        return TmStart::Failed;
    }
    r.index = index;
    r.tm_app = tmh_op == kTmhNoTag ? kTmNoTag : kTmUnexpected;
    if (r.tm_app == kTmUnexpected) {
        ++tl.hw_phase;  // tags appended from now on wait for software to catch up
    }
    return TmStart::Deliver;
}

// A matched rendezvous request: CONSUMED now; the device reads the RVH's
// buffer into the tagged one on this QP's send side, then sends the FIN
// (the TMH and RVH back, opcode FIN). A buffer too small for the payload
// gets the request's headers instead, and software finishes the transfer.
bool TagMatcher::start_rndv(Qp &qp, const RcState::Recv &r, Srq &x, const TagEntry &e, uint16_t index,
                            std::span<const uint8_t> msg, const iba::PacketView &v, uint64_t pkt) {
    Rvh rvh;  // start_message() saw the TMH and RVH whole
    std::memcpy(&rvh, msg.data() + kTmhLen, sizeof(rvh));
    const uint64_t va = rvh.va.get();
    const uint32_t rkey = rvh.rkey.get();
    const uint32_t len = rvh.len.get();
    // A buffer too small for the payload, or a payload beyond the largest
    // message (log_max_msg): software finishes the transfer.
    if (len > e.buf.len || len > (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_msg))) {
        SgeList sges{e.buf};
        const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(msg.size(), e.buf.len));
        uint8_t synd = 0;
        if (n && !scatter(dev_, qp, x.pd, sges, 0, msg.first(n), chunks_, synd)) {
            qps_.to_error(qp, "rendezvous headers scatter failed");
            return false;
        }
        recv_cqe(qp, x.cqn, kTmConsumedMsgSwRndv, index, 0, r.tmh, n, &v, pkt);
        return true;
    }
    recv_cqe(qp, x.cqn, kTmConsumed, index, 0, r.tmh, 0, &v, pkt);
    RcWqe rd;
    rd.hw = RcWqe::kHwRndvRead;
    rd.opcode = kWqeRdmaRead;
    rd.raddr = va;
    rd.rkey = rkey;
    rd.length = len;
    rd.data.sges.push_back(Sge{e.buf.lkey, e.buf.addr, len, false});
    rd.tm_index = index;
    rd.tm_srqn = x.srqn;
    rd.pd = x.pd;
    rd.tmh = r.tmh;
    const uint32_t mtu = rc_mtu(dev_, qp);
    rd.npkts = std::max<uint32_t>(1, (len + mtu - 1) / mtu);
    RcWqe fin;
    fin.hw = RcWqe::kHwRndvFin;
    fin.opcode = kWqeSend;
    fin.data.inline_data.assign(msg.begin(), msg.begin() + kTmhLen + kRvhLen);
    fin.data.inline_data[0] = kTmhFin;
    fin.data.sges.push_back(Sge{0, 0, static_cast<uint32_t>(kTmhLen + kRvhLen), true});
    fin.length = static_cast<uint32_t>(kTmhLen + kRvhLen);
    fin.tm_srqn = x.srqn;
    HCA_TRACE(dev_, qp_tm_rndv, .qpn = qp.qpn, .entry = index, .raddr = va, .rkey = rkey, .len = len);
    qps_.requester().start_hw(qp, std::move(rd));
    qps_.requester().start_hw(qp, std::move(fin));
    return true;
}

void TagMatcher::hw_done(Qp &qp, const RcWqe &w, bool ok) {
    if (w.hw != RcWqe::kHwRndvRead) {
        return;  // the FIN completes nothing
    }
    Srq *x = dev_.srqs.find(w.tm_srqn);
    if (!x || !x->tm) {
        return;  // the XRQ is gone
    }
    recv_cqe(qp, x->cqn, ok ? kTmExpected : kTmMsgCanceled, w.tm_index, 0, w.tmh, ok ? w.length : 0, nullptr, 0);
}

}  // namespace hca
