#include "framed.h"

namespace fabric {

namespace asio = boost::asio;

namespace {
uint64_t next_id = 0;
}

FramedConn::FramedConn(Socket sock, OnFrame on_frame, OnClose on_close)
    : sock_(std::move(sock)),
      hold_timer_(sock_.get_executor()),
      on_frame_(std::move(on_frame)),
      on_close_(std::move(on_close)),
      id_(++next_id) {}

void FramedConn::start() { read_more(); }

void FramedConn::close() {
    if (closed_) {
        return;
    }
    closed_ = true;
    hold_timer_.cancel();
    boost::system::error_code ec;
    sock_.close(ec);
    auto self = shared_from_this();
    on_close_(*this);
}

void FramedConn::read_more() {
    // Room for a chunk after what is kept (a partial frame), moved to the
    // front; the buffer grows only for a frame larger than a chunk.
    const size_t kept = rend_ - rbegin_;
    size_t want = kept + kReadChunk;
    if (kept >= iba::link::kLength) {
        want = std::max(want, iba::link::kLength + size_t{iba::link::frame_length(&rbuf_[rbegin_])});
    }
    if (want > rcap_) {
        auto bigger = std::make_unique<uint8_t[]>(want);
        std::copy(rbuf_.get() + rbegin_, rbuf_.get() + rend_, bigger.get());
        rbuf_ = std::move(bigger);
        rcap_ = want;
    } else if (rbegin_ > 0) {
        std::copy(rbuf_.get() + rbegin_, rbuf_.get() + rend_, rbuf_.get());
    }
    rbegin_ = 0;
    rend_ = kept;
    auto self = shared_from_this();
    sock_.async_read_some(asio::buffer(rbuf_.get() + rend_, rcap_ - rend_),
                          [this, self](boost::system::error_code ec, size_t n) {
                              if (ec) {
                                  close();
                                  return;
                              }
                              rend_ += n;
                              take_frames();
                          });
}

void FramedConn::take_frames() {
    taking_ = true;
    while (!closed_ && !paused_ && rend_ - rbegin_ >= iba::link::kLength) {
        const uint32_t len = iba::link::frame_length(&rbuf_[rbegin_]);
        if (len == 0 || len > kMaxFrame) {
            taking_ = false;
            fail(len ? "frame length above 1 MiB" : "frame length 0");
            return;
        }
        if (rend_ - rbegin_ < iba::link::kLength + len) {
            break;
        }
        const uint8_t *body = &rbuf_[rbegin_ + iba::link::kLength];
        rbegin_ += iba::link::kLength + len;
        deliver(std::make_shared<const std::vector<uint8_t>>(body, body + len));
    }
    taking_ = false;
    if (closed_) {
        return;
    }
    if (paused_) {
        read_stopped_ = true;
        return;
    }
    read_more();
}

bool FramedConn::hold_reading() {
    if (paused_ || closed_) {
        return false;
    }
    paused_ = true;
    hold_timer_.expires_after(kHoqLifetime);
    hold_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec) {
            self->resume_reading();
        }
    });
    return true;
}

void FramedConn::resume_reading() {
    hold_timer_.cancel();
    paused_ = false;
    if (read_stopped_ && !closed_ && !taking_) {
        read_stopped_ = false;
        auto self = shared_from_this();  // a frame handler may drop the last other owner
        take_frames();                   // the frames already read first
    }
}

bool FramedConn::stuck() const { return !queue_.empty() && Clock::now() - progress_ >= kHoqLifetime; }

bool FramedConn::congested() const {
    return (queue_.size() >= kHighFrames || queued_bytes_ >= kHighBytes) && !stuck();
}

// The exception barrier: whatever goes wrong handling one connection's frame
// ends that connection, never the daemon.
void FramedConn::deliver(Frame frame) {
    try {
        on_frame_(*this, std::move(frame));
    } catch (const std::exception &e) {
        fail(e.what());
    } catch (...) {
        fail("unknown exception");
    }
}

void FramedConn::fail(const char *what) {
    if (log_) {
        try {
            if (log_->allow("conn-error")) {
                log_->warn("conn", "{} #{}: {}; closing it", name_, id_, what);
            }
        } catch (...) {
        }
    }
    try {
        close();
    } catch (...) {
        // on_close_ failed too: the socket is closed already (closed_ is set).
    }
}

bool FramedConn::send(Frame f) {
    if (closed_ || !f) {
        return false;
    }
    if (stuck()) {
        ++drops_;
        ++hoq_drops_;
        if (log_ && log_->allow("conn-hoq")) {
            log_->warn("conn", "{} #{}: the peer took nothing for {} ms ({} frames waiting): head-of-queue lifetime "
                       "exceeded, frame dropped", name_, id_,
                       std::chrono::duration_cast<std::chrono::milliseconds>(kHoqLifetime).count(), queue_.size());
        }
        return false;
    }
    if (queue_.size() >= kMaxQueued || queued_bytes_ + f->size() > kMaxQueuedBytes) {
        ++drops_;
        if (log_ && log_->allow("conn-queue")) {
            log_->warn("conn", "{} #{}: send queue full ({} frames, {} bytes), frame dropped", name_, id_,
                       queue_.size(), queued_bytes_);
        }
        return false;
    }
    if (queue_.empty()) {
        progress_ = Clock::now();
    }
    queued_bytes_ += f->size();
    queue_.push_back(std::move(f));
    was_congested_ = was_congested_ || congested();
    if (!writing_) {
        write_next();
    }
    return true;
}

void FramedConn::write_next() {
    if (queue_.empty() || closed_) {
        writing_ = false;
        return;
    }
    writing_ = true;
    // One gathered write of the frames at the head of the queue.
    out_frames_ = 0;
    out_bufs_.clear();
    size_t bytes = 0;
    out_hdrs_.resize(kWriteBatch);
    while (out_frames_ < queue_.size() && out_frames_ < kWriteBatch && bytes < kWriteBatchBytes) {
        const Frame &f = queue_[out_frames_];
        iba::link::put_length(out_hdrs_[out_frames_].data(), static_cast<uint32_t>(f->size()));
        out_bufs_.push_back(asio::buffer(out_hdrs_[out_frames_]));
        out_bufs_.push_back(asio::buffer(*f));
        bytes += f->size();
        ++out_frames_;
    }
    auto self = shared_from_this();
    asio::async_write(sock_, out_bufs_, [this, self](boost::system::error_code ec, size_t) {
        if (ec) {
            fail(ec.message().c_str());
            return;
        }
        for (size_t i = 0; i < out_frames_; ++i) {
            queued_bytes_ -= queue_.front()->size();
            queue_.pop_front();
        }
        progress_ = Clock::now();
        if (was_congested_ && queue_.size() <= kHighFrames / 2 && queued_bytes_ <= kHighBytes / 2) {
            was_congested_ = false;
            if (on_drained_) {
                on_drained_();
            }
        }
        write_next();
    });
}

}  // namespace fabric
