// A stream connection carrying frames with a 4-byte big-endian length
// prefix: the format of QEMU's -netdev stream/socket, used for every link
// between a VM and the fabric and between two fabric daemons.  It reads whatever the socket has (many
// frames per system call) and writes up to 64 queued frames with one
// gathered write.
//
// A connection fails alone: a bad length, a read or write error, or an
// exception out of the frame handler closes this connection (logged) and
// nothing else.
//
// Back-pressure, the way IBA's link-level flow control keeps a subnet
// lossless: a send queue above kHighFrames or kHighBytes is congested()
// and says so once it has drained to half (on_drained); whoever feeds it
// stops reading its own sources meanwhile (pause_reading).  A peer that
// takes nothing for kHoqLifetime is stuck (IBA's head-of-queue lifetime):
// it no longer holds anybody back and what is sent to it is dropped.
// The queue's hard cap (kMaxQueued, kMaxQueuedBytes) drops the rest; every
// drop is counted and logged.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "asio.h"

#include "frame.h"
#include "log.h"

namespace fabric {

class FramedConn : public std::enable_shared_from_this<FramedConn> {
  public:
    // A unix or a TCP stream (a device's link, an inter-switch link to
    // another daemon); either converts to this on construction.
    using Socket = boost::asio::generic::stream_protocol::socket;
    using OnFrame = std::function<void(FramedConn &, Frame)>;
    using OnClose = std::function<void(FramedConn &)>;
    using Clock = std::chrono::steady_clock;

    static constexpr uint32_t kMaxFrame = iba::link::kMaxFrame;
    // Frames queued for a peer that does not read are dropped past this.
    static constexpr size_t kMaxQueued = 4096;
    static constexpr size_t kMaxQueuedBytes = 32u << 20;
    static constexpr size_t kHighFrames = 512;
    static constexpr size_t kHighBytes = 4u << 20;
    static constexpr Clock::duration kHoqLifetime = std::chrono::seconds(2);

    FramedConn(Socket sock, OnFrame on_frame, OnClose on_close);
    void start();
    // False if the frame was dropped (closed, stuck or at the hard cap).
    bool send(Frame f);
    void close();

    // Above the high-water mark and the peer still reading.
    bool congested() const;
    // A stuck peer: frames wait and none was taken for kHoqLifetime.
    bool stuck() const;
    // Called when a queue that was congested is down to half.
    void set_on_drained(std::function<void()> f) { on_drained_ = std::move(f); }
    // Stop taking frames from the peer after the one being delivered, and
    // start again (a paused connection is still written to).
    void pause_reading() { paused_ = true; }
    void resume_reading();
    // Back-pressure: pause reading until resume_reading(), or for at most
    // the HOQ lifetime (a stuck egress holds nobody longer).  False if
    // reading was paused already.
    bool hold_reading();
    bool reading_paused() const { return paused_; }
    size_t queued() const { return queue_.size(); }
    uint64_t hoq_drops() const { return hoq_drops_; }
    uint64_t id() const { return id_; }
    uint64_t drops() const { return drops_; }
    bool closed() const { return closed_; }
    // Where errors and refused frames are logged, and the connection's name there.
    void set_log(Log *log, std::string name) {
        log_ = log;
        name_ = std::move(name);
    }

  private:
    // Reads as much as the socket has (many frames per system call) and
    // delivers the whole frames; a partial frame waits for the rest.
    void read_more();
    void take_frames();
    // Writes up to kWriteBatch queued frames in one gathered write.
    void write_next();
    void deliver(Frame frame);
    void fail(const char *what);

    Socket sock_;
    boost::asio::steady_timer hold_timer_;
    OnFrame on_frame_;
    OnClose on_close_;
    // Bytes read and not yet delivered: [rbegin_, rend_) of rbuf_ (grown,
    // not zeroed, up to one largest frame).
    static constexpr size_t kReadChunk = 64u << 10;
    std::unique_ptr<uint8_t[]> rbuf_;
    size_t rcap_ = 0, rbegin_ = 0, rend_ = 0;
    bool taking_ = false;  // inside take_frames(): a resume only clears paused_
    std::deque<Frame> queue_;
    static constexpr size_t kWriteBatch = 64;
    static constexpr size_t kWriteBatchBytes = 256u << 10;
    std::vector<std::array<uint8_t, iba::link::kLength>> out_hdrs_;
    std::vector<boost::asio::const_buffer> out_bufs_;
    size_t out_frames_ = 0;  // frames of the write in flight
    bool writing_ = false;
    bool closed_ = false;
    bool paused_ = false;
    bool read_stopped_ = false;  // paused with no read outstanding
    bool was_congested_ = false;
    Clock::time_point progress_{};  // last write completed (or queue started)
    std::function<void()> on_drained_;
    uint64_t drops_ = 0;
    uint64_t hoq_drops_ = 0;
    size_t queued_bytes_ = 0;
    uint64_t id_;
    Log *log_ = nullptr;
    std::string name_ = "connection";
};

}  // namespace fabric
