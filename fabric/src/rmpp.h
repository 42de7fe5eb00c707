// The sending side of RMPP (IBA Vol. 1 13.6), for SA responses longer than
// one MAD (GetTableResp): DATA segments of 200 bytes of SA payload, each
// with the 56-byte MAD+RMPP+SA header, First/Last flags, segment numbers
// and PayloadLength; the receiver's ACKs move the window (the first
// segment goes alone, as the sender's window starts at 1); a timeout sends
// the unacknowledged part of the window again, a few times, then ABORTs.
// PayloadLength follows the Linux ib_mad receiver (mad_rmpp.c), which
// counts the 20 bytes of SA header of every segment: first segment = data
// + 20 * segments, last = its data + 20.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "event_loop.h"
#include "log.h"
#include "mad_util.h"

namespace fabric {

enum class RmppType : uint8_t { None = 0, Data = 1, Ack = 2, Stop = 3, Abort = 4 };
const char *rmpp_type_name(RmppType t);
inline constexpr uint8_t kRmppActive = 0x1, kRmppFirst = 0x2, kRmppLast = 0x4;
// RMPP status codes (IBA 13.6.2.2 table 170).
inline constexpr uint8_t kRmppStatusT2L = 118, kRmppStatusBadT = 121, kRmppStatusW2S = 122,
                         kRmppStatusS2B = 123, kRmppStatusUnspec = 127;
inline constexpr size_t kRmppSegData = mad::sa::kDataSize;  // 200
inline constexpr size_t kRmppHdrLen = mad::sa::kData;       // 56

class RmppSender {
  public:
    using Send = std::function<void(const MadAddress &, const Mad &)>;
    struct Config {
        uint32_t timeout_us = 1000000;
        unsigned retries = 5;
        size_t max_transfers = 64;
        size_t max_bytes = 4 << 20;  // one response's payload
    };
    struct Stats {
        uint64_t started = 0;
        uint64_t completed = 0;
        uint64_t aborted = 0;
        uint64_t segments = 0;
        uint64_t retransmits = 0;
        uint64_t acks = 0;
    };

    RmppSender(EventLoop &loop, Log &log, Send send, const Config &cfg);
    ~RmppSender();

    // Sends 'data' (the records) after 'header' (the first 56 bytes of the
    // response: MAD header with method, status, TID, attribute; SA header)
    // to 'to'.  A transfer with the same destination and TID is replaced
    // (the request was sent again).  False if the data is too large.
    bool start(const MadAddress &to, const Mad &header, std::vector<uint8_t> data);
    // An RMPP ACK / STOP / ABORT from 'from' (its LID and QP identify it).
    void on_control(const MadAddress &from, const Mad &m);
    size_t active() const { return transfers_.size(); }
    const Stats &stats() const { return stats_; }
    void clear();

    static uint32_t segments_for(size_t bytes) {
        return bytes == 0 ? 1 : static_cast<uint32_t>((bytes + kRmppSegData - 1) / kRmppSegData);
    }

  private:
    using Key = std::tuple<uint16_t, uint32_t, uint64_t>;  // LID, QP, TID
    struct Transfer {
        MadAddress to;
        Mad header{};
        std::vector<uint8_t> data;
        uint32_t seg_count = 1;
        uint32_t last_ack = 0;     // highest segment acknowledged
        uint32_t window_last = 1;  // NewWindowLast of the last ACK
        uint32_t next = 1;         // next segment to send
        unsigned retries = 0;
        EventLoop::TimerId timer = 0;
    };
    void pump(const Key &k, Transfer &t);
    void send_segment(Transfer &t, uint32_t seg);
    void send_abort(const MadAddress &to, const Mad &like, uint8_t status);
    void arm(const Key &k, Transfer &t);
    void on_timeout(const Key &k);
    void finish(std::map<Key, Transfer>::iterator it);

    EventLoop &loop_;
    Log &log_;
    Send send_;
    Config cfg_;
    std::map<Key, Transfer> transfers_;
    Stats stats_;
};

}  // namespace fabric
