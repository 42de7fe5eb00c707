#include "rmpp.h"

#include <algorithm>

namespace fabric {

namespace {
constexpr size_t kRmpp = mad::sa::kRmppHeader;
constexpr uint8_t kNoRespTime = 0x1f;  // RRespTime "no time given"

uint8_t rmpp_flags(const Mad &m) { return m[kRmpp + mad::sa::kRmppRespTimeFlags] & 0x07; }
}  // namespace

const char *rmpp_type_name(RmppType t) {
    switch (t) {
    case RmppType::None: return "none";
    case RmppType::Data: return "DATA";
    case RmppType::Ack: return "ACK";
    case RmppType::Stop: return "STOP";
    case RmppType::Abort: return "ABORT";
    }
    return "?";
}

RmppSender::RmppSender(EventLoop &loop, Log &log, Send send, const Config &cfg)
    : loop_(loop), log_(log), send_(std::move(send)), cfg_(cfg) {}

RmppSender::~RmppSender() { clear(); }

void RmppSender::clear() {
    for (auto &[k, t] : transfers_) {
        loop_.cancel(t.timer);
    }
    transfers_.clear();
}

bool RmppSender::start(const MadAddress &to, const Mad &header, std::vector<uint8_t> data) {
    if (data.size() > cfg_.max_bytes) {
        return false;
    }
    const Key k{to.dlid, to.dst_qp, get64(header, mad::kTid)};
    if (auto it = transfers_.find(k); it != transfers_.end()) {
        loop_.cancel(it->second.timer);
        transfers_.erase(it);
    } else if (transfers_.size() >= cfg_.max_transfers) {
        // Bounded: the oldest transfer (lowest key) gives way.
        auto victim = transfers_.begin();
        if (log_.allow("rmpp-caps")) {
            log_.warn("rmpp", "{} transfers in flight: aborting the one to LID {} TID {:#x}", cfg_.max_transfers,
                      victim->second.to.dlid, std::get<2>(victim->first));
        }
        loop_.cancel(victim->second.timer);
        transfers_.erase(victim);
        ++stats_.aborted;
    }
    Transfer t;
    t.to = to;
    t.header = header;
    t.data = std::move(data);
    t.seg_count = segments_for(t.data.size());
    ++stats_.started;
    auto &ref = transfers_.emplace(k, std::move(t)).first->second;
    pump(k, ref);
    return true;
}

void RmppSender::send_segment(Transfer &t, uint32_t seg) {
    Mad m = t.header;
    std::fill(m.begin() + kRmppHdrLen, m.end(), 0);
    m[kRmpp + mad::sa::kRmppVersion] = 1;
    m[kRmpp + mad::sa::kRmppType] = static_cast<uint8_t>(RmppType::Data);
    uint8_t flags = kRmppActive;
    const size_t d = t.data.size();
    uint32_t paylen = 0;
    if (seg == 1) {
        flags |= kRmppFirst;
        paylen = static_cast<uint32_t>(d + 20 * size_t{t.seg_count});
    }
    if (seg == t.seg_count) {
        flags |= kRmppLast;
        paylen = static_cast<uint32_t>(d - (t.seg_count - 1) * kRmppSegData + 20);
    }
    m[kRmpp + mad::sa::kRmppRespTimeFlags] = static_cast<uint8_t>(kNoRespTime << 3 | flags);
    m[kRmpp + mad::sa::kRmppStatus] = 0;
    set32(m, kRmpp + mad::sa::kRmppSegment, seg);
    set32(m, kRmpp + mad::sa::kRmppPayloadLen, paylen);
    const size_t off = (seg - 1) * kRmppSegData;
    if (off < d) {
        std::copy_n(t.data.begin() + static_cast<ptrdiff_t>(off), std::min(kRmppSegData, d - off),
                    m.begin() + kRmppHdrLen);
    }
    ++stats_.segments;
    send_(t.to, m);
}

void RmppSender::pump(const Key &k, Transfer &t) {
    t.next = std::max(t.next, t.last_ack + 1);
    while (t.next <= std::min(t.window_last, t.seg_count)) {
        send_segment(t, t.next++);
    }
    arm(k, t);
}

void RmppSender::arm(const Key &k, Transfer &t) {
    loop_.cancel(t.timer);
    t.timer = loop_.after(cfg_.timeout_us, [this, k] { on_timeout(k); });
}

void RmppSender::on_timeout(const Key &k) {
    auto it = transfers_.find(k);
    if (it == transfers_.end()) {
        return;
    }
    Transfer &t = it->second;
    t.timer = 0;
    if (++t.retries > cfg_.retries) {
        if (log_.allow("rmpp")) {
            log_.info("rmpp", "to LID {} TID {:#x}: no ACK after {} retries, aborting", t.to.dlid,
                      std::get<2>(k), cfg_.retries);
        }
        send_abort(t.to, t.header, kRmppStatusT2L);
        ++stats_.aborted;
        transfers_.erase(it);
        return;
    }
    // IBA 13.6.3.3: resend what the window holds beyond the last ACK.
    stats_.retransmits += std::min(t.window_last, t.seg_count) - t.last_ack;
    t.next = t.last_ack + 1;
    pump(k, t);
}

void RmppSender::send_abort(const MadAddress &to, const Mad &like, uint8_t status) {
    Mad m = like;
    std::fill(m.begin() + kRmppHdrLen, m.end(), 0);
    m[kRmpp + mad::sa::kRmppVersion] = 1;
    m[kRmpp + mad::sa::kRmppType] = static_cast<uint8_t>(RmppType::Abort);
    m[kRmpp + mad::sa::kRmppRespTimeFlags] = static_cast<uint8_t>(kNoRespTime << 3 | kRmppActive);
    m[kRmpp + mad::sa::kRmppStatus] = status;
    set32(m, kRmpp + mad::sa::kRmppSegment, 0);
    set32(m, kRmpp + mad::sa::kRmppPayloadLen, 0);
    send_(to, m);
}

void RmppSender::finish(std::map<Key, Transfer>::iterator it) {
    loop_.cancel(it->second.timer);
    ++stats_.completed;
    transfers_.erase(it);
}

void RmppSender::on_control(const MadAddress &from, const Mad &m) {
    const auto type = static_cast<RmppType>(m[kRmpp + mad::sa::kRmppType]);
    if (!(rmpp_flags(m) & kRmppActive)) {
        return;
    }
    const Key k{from.slid, from.src_qp, get64(m, mad::kTid)};
    auto it = transfers_.find(k);
    if (it == transfers_.end()) {
        return;  // e.g. the ACK of a transfer that already completed
    }
    Transfer &t = it->second;
    if (type == RmppType::Stop || type == RmppType::Abort) {
        if (log_.allow("rmpp")) {
            log_.info("rmpp", "to LID {}: receiver sent {} (status {})", from.slid, rmpp_type_name(type),
                      m[kRmpp + mad::sa::kRmppStatus]);
        }
        loop_.cancel(t.timer);
        ++stats_.aborted;
        transfers_.erase(it);
        return;
    }
    if (type != RmppType::Ack) {
        return;
    }
    ++stats_.acks;
    const uint32_t seg = get32(m, kRmpp + mad::sa::kRmppSegment);
    const uint32_t newwin = get32(m, kRmpp + mad::sa::kRmppPayloadLen);
    // IBA 13.6.3.2 (and mad_rmpp.c process_rmpp_ack): a window ending
    // before the ACKed segment, or an ACK beyond what was sent, aborts.
    if (newwin < seg) {
        send_abort(t.to, t.header, kRmppStatusW2S);
        loop_.cancel(t.timer);
        ++stats_.aborted;
        transfers_.erase(it);
        return;
    }
    if (seg > t.seg_count || seg >= t.next) {
        send_abort(t.to, t.header, kRmppStatusS2B);
        loop_.cancel(t.timer);
        ++stats_.aborted;
        transfers_.erase(it);
        return;
    }
    if (seg < t.last_ack || newwin < t.window_last) {
        return;  // an old ACK
    }
    if (seg > t.last_ack) {
        t.retries = 0;
    }
    t.last_ack = seg;
    t.window_last = newwin;
    if (t.last_ack == t.seg_count) {
        finish(it);
        return;
    }
    pump(k, t);
}

}  // namespace fabric
