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
        const uint32_t len = uint32_t{hdr_[0]} << 24 | uint32_t{hdr_[1]} << 16 | uint32_t{hdr_[2]} << 8 | hdr_[3];
        if (len == 0 || len > kMaxFrame) {
            close();
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
        on_frame_(*this, std::move(frame));
        if (!closed_) {
            read_header();
        }
    });
}

void FramedConn::send(Frame f) {
    if (closed_) {
        return;
    }
    if (queue_.size() >= kMaxQueued) {
        ++drops_;
        return;
    }
    queue_.push_back(std::move(f));
    if (!writing_) {
        write_next();
    }
}

void FramedConn::write_next() {
    if (queue_.empty() || closed_) {
        writing_ = false;
        return;
    }
    writing_ = true;
    const uint32_t len = static_cast<uint32_t>(queue_.front()->size());
    out_hdr_[0] = static_cast<uint8_t>(len >> 24);
    out_hdr_[1] = static_cast<uint8_t>(len >> 16);
    out_hdr_[2] = static_cast<uint8_t>(len >> 8);
    out_hdr_[3] = static_cast<uint8_t>(len);
    const std::array<asio::const_buffer, 2> bufs{asio::buffer(out_hdr_), asio::buffer(*queue_.front())};
    auto self = shared_from_this();
    asio::async_write(sock_, bufs, [this, self](boost::system::error_code ec, size_t) {
        if (ec) {
            close();
            return;
        }
        queue_.pop_front();
        write_next();
    });
}

}  // namespace fabric
