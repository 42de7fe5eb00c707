#include "iba/link.h"

#include <algorithm>

#include "be.h"

namespace iba::link {

bool parse(std::span<const uint8_t> f, FrameView &out) {
    if (f.size() < kHeader) {
        return false;
    }
    out.type = f[0];
    out.flags = f[kFlagsByte];
    out.packet_id = hca::load_be64(&f[4]);
    out.body = f.subspan(kHeader);
    return true;
}

bool parse_hello(std::span<const uint8_t> body, Hello &out) {
    if (body.size() < kHelloBody) {
        return false;
    }
    out.node_guid = hca::load_be64(&body[0]);
    out.port_guid = hca::load_be64(&body[8]);
    out.port_num = body[16];
    return true;
}

void put_header(uint8_t *out, Type type, uint8_t flags, uint64_t packet_id) {
    out[0] = type;
    out[kFlagsByte] = flags;
    out[2] = 0;
    out[3] = 0;
    hca::store_be64(out + 4, packet_id);
}

std::vector<uint8_t> packet_frame(uint64_t packet_id, std::span<const uint8_t> packet, uint8_t flags) {
    std::vector<uint8_t> v(kHeader + packet.size());
    put_header(v.data(), kPacket, flags, packet_id);
    std::copy(packet.begin(), packet.end(), v.begin() + kHeader);
    return v;
}

std::vector<uint8_t> link_state_frame(bool up) {
    std::vector<uint8_t> v(kHeader + 1);
    put_header(v.data(), kLinkState, 0, 0);
    v[kHeader] = up ? 1 : 0;
    return v;
}

std::vector<uint8_t> hello_frame(const Hello &h) {
    std::vector<uint8_t> v(kHeader + kHelloBody);
    put_header(v.data(), kHello, 0, 0);
    hca::store_be64(&v[kHeader], h.node_guid);
    hca::store_be64(&v[kHeader + 8], h.port_guid);
    v[kHeader + 16] = h.port_num;
    return v;
}

uint32_t frame_length(const uint8_t *prefix) { return hca::load_be32(prefix); }

void put_length(uint8_t *out, uint32_t len) { hca::store_be32(out, len); }

bool StreamReader::take_partial(std::span<const uint8_t> &in, std::span<const uint8_t> &frame) {
    if (buf_.size() < kLength) {
        const size_t n = std::min(kLength - buf_.size(), in.size());
        buf_.insert(buf_.end(), in.begin(), in.begin() + n);
        in = in.subspan(n);
        if (buf_.size() < kLength) {
            return true;
        }
    }
    const uint32_t len = frame_length(buf_.data());
    if (len == 0 || len > kMaxFrame) {
        broken_ = true;
        bad_length_ = len;
        return false;
    }
    const size_t n = std::min(kLength + len - buf_.size(), in.size());
    buf_.insert(buf_.end(), in.begin(), in.begin() + n);
    in = in.subspan(n);
    if (buf_.size() == kLength + len) {
        frame = std::span<const uint8_t>(buf_).subspan(kLength);
    }
    return true;
}

bool StreamWriter::push(std::span<const uint8_t> head, std::span<const uint8_t> body) {
    const size_t len = head.size() + body.size();
    if (len == 0 || len > kMaxFrame || buf_.size() - head_ + kLength + len > kMaxQueued) {
        ++frames_dropped_;
        return false;
    }
    if (head_ == buf_.size()) {
        buf_.clear();
        head_ = 0;
    }
    const size_t at = buf_.size();
    buf_.resize(at + kLength + len);
    put_length(&buf_[at], static_cast<uint32_t>(len));
    std::copy(head.begin(), head.end(), buf_.begin() + at + kLength);
    std::copy(body.begin(), body.end(), buf_.begin() + at + kLength + head.size());
    ++frames_out_;
    return true;
}

void StreamWriter::consumed(size_t n) {
    n = std::min(n, buf_.size() - head_);
    size_t pos = head_;
    const size_t end = head_ + n;
    while (pos < end) {
        if (head_left_ == 0) {
            head_left_ = kLength + frame_length(&buf_[pos]);
        }
        const size_t take = std::min(end - pos, head_left_);
        head_left_ -= take;
        pos += take;
    }
    head_ = end;
    if (head_ == buf_.size()) {
        buf_.clear();
        head_ = 0;
    } else if (head_ > (1u << 16) && head_ > buf_.size() / 2) {
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
    }
}

void StreamWriter::drop_packets() {
    std::vector<uint8_t> keep(buf_.begin() + static_cast<std::ptrdiff_t>(head_),
                              buf_.begin() + static_cast<std::ptrdiff_t>(head_ + head_left_));
    size_t pos = head_ + head_left_;
    // Every queued frame is whole and at least one byte (push()).
    while (pos + kLength < buf_.size()) {
        const size_t len = kLength + frame_length(&buf_[pos]);
        if (buf_[pos + kLength] != kPacket) {
            keep.insert(keep.end(), buf_.begin() + static_cast<std::ptrdiff_t>(pos),
                        buf_.begin() + static_cast<std::ptrdiff_t>(pos + len));
        } else {
            ++frames_dropped_;
        }
        pos += len;
    }
    buf_ = std::move(keep);
    head_ = 0;
}

void StreamWriter::clear() {
    buf_.clear();
    head_ = 0;
    head_left_ = 0;
}

}  // namespace iba::link
