// The link library's stream: frames out of bytes cut anywhere, bad lengths,
// the bounded send queue and what a function reset keeps of it.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "iba/link.h"

using namespace iba::link;

namespace {

std::vector<uint8_t> framed(const std::vector<uint8_t> &frame) {
    std::vector<uint8_t> v(kLength);
    put_length(v.data(), static_cast<uint32_t>(frame.size()));
    v.insert(v.end(), frame.begin(), frame.end());
    return v;
}

std::vector<uint8_t> payload(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    std::iota(v.begin(), v.end(), seed);
    return v;
}

}  // namespace

TEST_CASE("link: frames encode and parse", "[link]") {
    const auto p = packet_frame(0x1122334455667788, payload(40, 7), 3);
    FrameView f;
    REQUIRE(parse(p, f));
    CHECK(f.type == kPacket);
    CHECK(f.flags == 3);
    CHECK(f.packet_id == 0x1122334455667788);
    CHECK(f.body.size() == 40);
    CHECK(f.body[0] == 7);

    Hello h;
    const auto hello = hello_frame({.node_guid = 0xa, .port_guid = 0xb, .port_num = 1});
    REQUIRE(parse(hello, f));
    CHECK(f.type == kHello);
    REQUIRE(parse_hello(f.body, h));
    CHECK(h.node_guid == 0xa);
    CHECK(h.port_guid == 0xb);
    CHECK(h.port_num == 1);
    CHECK_FALSE(parse_hello(f.body.first(kHelloBody - 1), h));

    const auto up = link_state_frame(true);
    REQUIRE(parse(up, f));
    CHECK(f.type == kLinkState);
    CHECK(f.body.size() == 1);
    CHECK(f.body[0] == 1);
    const std::vector<uint8_t> short_frame(kHeader - 1, 0);
    CHECK_FALSE(parse(short_frame, f));
}

TEST_CASE("link: the reader gives the same frames however the bytes are cut", "[link]") {
    std::vector<std::vector<uint8_t>> frames = {packet_frame(1, payload(100, 1)), link_state_frame(false),
                                                packet_frame(2, payload(5000, 9)), hello_frame({})};
    std::vector<uint8_t> stream;
    for (const auto &f : frames) {
        const auto b = framed(f);
        stream.insert(stream.end(), b.begin(), b.end());
    }
    for (size_t piece : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{17}, size_t{4096}, stream.size()}) {
        INFO("pieces of " << piece);
        StreamReader r;
        std::vector<std::vector<uint8_t>> got;
        for (size_t at = 0; at < stream.size(); at += piece) {
            const size_t n = std::min(piece, stream.size() - at);
            REQUIRE(r.feed({stream.data() + at, n}, [&](std::span<const uint8_t> f) { got.emplace_back(f.begin(), f.end()); }));
        }
        CHECK(got == frames);
    }
}

TEST_CASE("link: a length of 0 or above 1 MiB breaks the stream", "[link]") {
    const auto count = [](uint32_t len, size_t piece) {
        std::vector<uint8_t> stream(kLength + 8, 0);
        put_length(stream.data(), len);
        StreamReader r;
        bool ok = true;
        for (size_t at = 0; at < stream.size() && ok; at += piece) {
            ok = r.feed({stream.data() + at, std::min(piece, stream.size() - at)}, [](std::span<const uint8_t>) {});
        }
        // A broken stream stays broken until cleared.
        CHECK_FALSE(r.feed(stream, [](std::span<const uint8_t>) {}));
        return std::pair{ok, r.bad_length()};
    };
    CHECK(count(0, 1) == std::pair{false, 0u});
    CHECK(count(0, 100) == std::pair{false, 0u});
    CHECK(count(kMaxFrame + 1, 2) == std::pair{false, kMaxFrame + 1});
    CHECK(count(kMaxFrame + 1, 100) == std::pair{false, kMaxFrame + 1});

    // Exactly 1 MiB is a frame.
    const auto big = framed(payload(kMaxFrame, 0));
    StreamReader r;
    size_t frames = 0;
    CHECK(r.feed(big, [&](std::span<const uint8_t> f) { frames += f.size() == kMaxFrame; }));
    CHECK(frames == 1);
}

TEST_CASE("link: the writer frames, follows partial writes and keeps the hello over a reset", "[link]") {
    StreamWriter w;
    const auto p1 = packet_frame(1, payload(50, 1));
    const auto hello = hello_frame({.node_guid = 5, .port_guid = 5, .port_num = 1});
    const auto p2 = packet_frame(2, payload(60, 2));
    REQUIRE(w.push(p1));
    REQUIRE(w.push(hello));
    REQUIRE(w.push(p2));
    CHECK(w.pending().size() == 3 * kLength + p1.size() + hello.size() + p2.size());

    // Five bytes of p1 went out: the rest of p1 must follow, then the hello;
    // p2 is forgotten.
    w.consumed(5);
    w.drop_packets();
    auto expect = framed(p1);
    expect.erase(expect.begin(), expect.begin() + 5);
    const auto h = framed(hello);
    expect.insert(expect.end(), h.begin(), h.end());
    const auto pending = w.pending();
    CHECK(std::vector<uint8_t>(pending.begin(), pending.end()) == expect);
    CHECK(w.frames_dropped() == 1);

    // What is left parses as whole frames once the head is written.
    w.consumed(kLength + p1.size() - 5);
    StreamReader r;
    std::vector<uint8_t> got;
    CHECK(r.feed(w.pending(), [&](std::span<const uint8_t> f) { got.assign(f.begin(), f.end()); }));
    CHECK(got == hello);
    w.consumed(w.pending().size());
    CHECK(w.pending().empty());
}

TEST_CASE("link: the writer's queue is bounded", "[link]") {
    StreamWriter w;
    const auto big = packet_frame(1, payload(kMaxFrame - kHeader, 0));
    size_t pushed = 0;
    while (w.push(big)) {
        ++pushed;
        REQUIRE(pushed <= StreamWriter::kMaxQueued / big.size());
    }
    CHECK(pushed == StreamWriter::kMaxQueued / (big.size() + kLength));
    CHECK(w.frames_dropped() == 1);
    CHECK(w.pending().size() <= StreamWriter::kMaxQueued);
    CHECK_FALSE(w.push({}));  // an empty frame is not a frame
}
