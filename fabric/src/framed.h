// A stream connection carrying frames with a 4-byte big-endian length
// prefix: the format of QEMU's -netdev stream/socket, used for every link
// between a VM and the fabric.
//
// A connection fails alone: a bad length, a read or write error, or an
// exception out of the frame handler closes this connection (logged) and
// nothing else.  Its send queue is capped in frames and bytes; frames past
// the cap are dropped, counted and logged.
#pragma once

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
    using Socket = boost::asio::local::stream_protocol::socket;
    using OnFrame = std::function<void(FramedConn &, Frame)>;
    using OnClose = std::function<void(FramedConn &)>;

    static constexpr uint32_t kMaxFrame = iba::link::kMaxFrame;
    // Frames queued for a peer that does not read are dropped past this.
    static constexpr size_t kMaxQueued = 4096;
    static constexpr size_t kMaxQueuedBytes = 32u << 20;

    FramedConn(Socket sock, OnFrame on_frame, OnClose on_close);
    void start();
    void send(Frame f);
    void close();
    uint64_t id() const { return id_; }
    uint64_t drops() const { return drops_; }
    bool closed() const { return closed_; }
    // Where errors and refused frames are logged, and the connection's name there.
    void set_log(Log *log, std::string name) {
        log_ = log;
        name_ = std::move(name);
    }

  private:
    void read_header();
    void read_body(uint32_t len);
    void write_next();
    void deliver(Frame frame);
    void fail(const char *what);

    Socket sock_;
    OnFrame on_frame_;
    OnClose on_close_;
    uint8_t hdr_[iba::link::kLength] = {};
    std::vector<uint8_t> body_;
    std::deque<Frame> queue_;
    uint8_t out_hdr_[iba::link::kLength] = {};
    bool writing_ = false;
    bool closed_ = false;
    uint64_t drops_ = 0;
    size_t queued_bytes_ = 0;
    uint64_t id_;
    Log *log_ = nullptr;
    std::string name_ = "connection";
};

}  // namespace fabric
