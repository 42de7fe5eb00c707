// A stream connection carrying frames with a 4-byte big-endian length
// prefix: the format of QEMU's -netdev stream/socket, used for every link
// between a VM and the fabric.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "asio.h"

#include "frame.h"

namespace fabric {

class FramedConn : public std::enable_shared_from_this<FramedConn> {
  public:
    using Socket = boost::asio::local::stream_protocol::socket;
    using OnFrame = std::function<void(FramedConn &, Frame)>;
    using OnClose = std::function<void(FramedConn &)>;

    static constexpr uint32_t kMaxFrame = 1 << 20;
    // Frames queued for a peer that does not read are dropped past this.
    static constexpr size_t kMaxQueued = 4096;

    FramedConn(Socket sock, OnFrame on_frame, OnClose on_close);
    void start();
    void send(Frame f);
    void close();
    uint64_t id() const { return id_; }
    uint64_t drops() const { return drops_; }

  private:
    void read_header();
    void read_body(uint32_t len);
    void write_next();

    Socket sock_;
    OnFrame on_frame_;
    OnClose on_close_;
    uint8_t hdr_[4] = {};
    std::vector<uint8_t> body_;
    std::deque<Frame> queue_;
    uint8_t out_hdr_[4] = {};
    bool writing_ = false;
    bool closed_ = false;
    uint64_t drops_ = 0;
    uint64_t id_;
};

}  // namespace fabric
