// The link between an HCA port and the fabric daemon, owned here and only
// here: the QEMU device (through the model's C interface), the model, the
// fabric daemon and the tests all encode and decode it with these functions.
//
// A unix stream socket carries frames, each a 4-byte big-endian length
// (1 .. kMaxFrame) and a body: this 12-byte header and the frame's payload.
// A packet keeps the id its sender gave it across the switch, so the device
// traces of both ends and the fabric capture name the same packet with the
// same number.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace iba::link {

inline constexpr size_t kLength = 4;        // the stream's length prefix
inline constexpr size_t kHeader = 12;       // type, flags, reserved (2), packet id (8, big-endian)
inline constexpr uint32_t kMaxFrame = 1u << 20;
inline constexpr size_t kHelloBody = 17;    // node GUID (8), port GUID (8), port number (1)

enum Type : uint8_t {
    kPacket = 1,     // body: one IBA packet, LRH to VCRC
    kHello = 2,      // device -> fabric, first frame of a connection: see Hello
    kLinkState = 3,  // fabric -> device: body[0] = 1 physical link up, 0 down
};

// Frame flags (kPacket).
// kNoCrcs: the packet's ICRC and VCRC fields are zero; its sender left them
// out, as a NIC leaves checksums to the host stack between two VMs on one
// host (virtio-net's checksum offload). The link is a reliable byte stream,
// so only the simulator's own fault injection can damage a packet, and
// whoever does (or writes a capture) computes the CRCs first
// (iba::fill_crcs). A receiver does not check a packet's CRCs.
inline constexpr uint8_t kNoCrcs = 0x01;
inline constexpr size_t kFlagsByte = 1;  // where the flags lie in the header

struct FrameView {
    uint8_t type = 0;
    uint8_t flags = 0;
    uint64_t packet_id = 0;
    std::span<const uint8_t> body;
};

struct Hello {
    uint64_t node_guid = 0;
    uint64_t port_guid = 0;
    uint8_t port_num = 0;
};

// A frame's header and body; false if it is shorter than the header.
bool parse(std::span<const uint8_t> frame, FrameView &out);
// A hello's body; false if it is too short.
bool parse_hello(std::span<const uint8_t> body, Hello &out);

// Writes the kHeader bytes of a frame header at out.
void put_header(uint8_t *out, Type type, uint8_t flags, uint64_t packet_id);
std::vector<uint8_t> packet_frame(uint64_t packet_id, std::span<const uint8_t> packet, uint8_t flags = 0);
std::vector<uint8_t> link_state_frame(bool up);
std::vector<uint8_t> hello_frame(const Hello &h);

// Length prefix: 0 or above kMaxFrame breaks the stream.
uint32_t frame_length(const uint8_t *prefix);
void put_length(uint8_t *out, uint32_t len);

// The receiving end of a stream: bytes in any pieces, whole frames out.
// Complete frames in the input are handed over where they lie; only a frame
// split across reads is buffered (at most kLength + kMaxFrame bytes).
class StreamReader {
  public:
    // Calls on_frame(std::span<const uint8_t>) for each complete frame.
    // False on a bad length: the stream is broken (bad_length() says which)
    // and must be closed; clear() before reusing it.
    template <typename F>
    bool feed(std::span<const uint8_t> in, F &&on_frame);
    void clear() {
        buf_.clear();
        broken_ = false;
    }
    uint32_t bad_length() const { return bad_length_; }

  private:
    // Bytes of the frame at the head of in that complete buf_ (0: none yet).
    bool take_partial(std::span<const uint8_t> &in, std::span<const uint8_t> &frame);
    std::vector<uint8_t> buf_;
    bool broken_ = false;
    uint32_t bad_length_ = 0;
};

// The sending end: a bounded queue of length-prefixed frames that a host
// writes out as bytes (pending(), consumed()).
class StreamWriter {
  public:
    static constexpr size_t kMaxQueued = 16u << 20;

    // Queues one frame; false if the queue is full (the frame is dropped and
    // counted, as on a congested link).
    bool push(std::span<const uint8_t> frame) { return push(frame, {}); }
    // Queues the frame head + body (a header and the packet it frames,
    // copied once, straight into the queue).
    bool push(std::span<const uint8_t> head, std::span<const uint8_t> body);
    std::span<const uint8_t> pending() const { return {buf_.data() + head_, buf_.size() - head_}; }
    void consumed(size_t n);
    // A function reset: queued packets are forgotten; a frame partly
    // written is finished (the stream stays framed) and frames that are
    // not packets (the hello) are kept.
    void drop_packets();
    void clear();
    uint64_t frames_out() const { return frames_out_; }
    uint64_t frames_dropped() const { return frames_dropped_; }

  private:
    std::vector<uint8_t> buf_;
    size_t head_ = 0;       // bytes of buf_ already written
    size_t head_left_ = 0;  // bytes of the frame at head_ still to write after a partial write
    uint64_t frames_out_ = 0;
    uint64_t frames_dropped_ = 0;
};

template <typename F>
bool StreamReader::feed(std::span<const uint8_t> in, F &&on_frame) {
    if (broken_) {
        return false;
    }
    if (!buf_.empty()) {
        std::span<const uint8_t> frame;
        if (!take_partial(in, frame)) {
            return false;
        }
        if (frame.empty()) {
            return true;  // still incomplete; everything is buffered
        }
        on_frame(frame);
        buf_.clear();
    }
    while (in.size() >= kLength) {
        const uint32_t len = frame_length(in.data());
        if (len == 0 || len > kMaxFrame) {
            broken_ = true;
            bad_length_ = len;
            return false;
        }
        if (in.size() < kLength + len) {
            break;
        }
        on_frame(in.subspan(kLength, len));
        in = in.subspan(kLength + len);
    }
    buf_.assign(in.begin(), in.end());
    return true;
}

}  // namespace iba::link
