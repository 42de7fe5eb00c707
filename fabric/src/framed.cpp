#include "framed.h"

namespace fabric {

namespace asio = boost::asio;

namespace {
uint64_t next_id = 0;
}

FramedConn::FramedConn(Socket sock, OnFrame on_frame, OnClose on_close)
    : sock_(std::move(sock)), on_frame_(std::move(on_frame)), on_close_(std::move(on_close)), id_(++next_id) {}

void FramedConn::start() { read_header(); }

void FramedConn::close() {
    if (closed_) {
        return;
    }
    closed_ = true;
    boost::system::error_code ec;
    sock_.close(ec);
    auto self = shared_from_this();
    on_close_(*this);
}

void FramedConn::read_header() {
    auto self = shared_from_this();
    asio::async_read(sock_, asio::buffer(hdr_), [this, self](boost::system::error_code ec, size_t) {
        if (ec) {
            close();
            return;
        }
        const uint32_t len = iba::link::frame_length(hdr_);
        if (len == 0 || len > kMaxFrame) {
            fail(len ? "frame length above 1 MiB" : "frame length 0");
            return;
        }
        read_body(len);
    });
}

void FramedConn::read_body(uint32_t len) {
    auto self = shared_from_this();
    body_.resize(len);
    asio::async_read(sock_, asio::buffer(body_), [this, self](boost::system::error_code ec, size_t) {
        if (ec) {
            close();
            return;
        }
        auto frame = std::make_shared<const std::vector<uint8_t>>(std::move(body_));
        body_ = {};
        deliver(std::move(frame));
        if (closed_) {
            return;
        }
        if (paused_) {
            read_stopped_ = true;
            return;
        }
        read_header();
    });
}

void FramedConn::resume_reading() {
    paused_ = false;
    if (read_stopped_ && !closed_) {
        read_stopped_ = false;
        read_header();
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
    iba::link::put_length(out_hdr_, static_cast<uint32_t>(queue_.front()->size()));
    const std::array<asio::const_buffer, 2> bufs{asio::buffer(out_hdr_), asio::buffer(*queue_.front())};
    auto self = shared_from_this();
    asio::async_write(sock_, bufs, [this, self](boost::system::error_code ec, size_t) {
        if (ec) {
            fail(ec.message().c_str());
            return;
        }
        queued_bytes_ -= queue_.front()->size();
        queue_.pop_front();
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
