// The model's end of the fabric link through the C interface, as the QEMU
// device drives it: the host only carries bytes; the model says hello,
// unframes what the fabric sends in any pieces, refuses a broken stream and
// forgets its queue when the connection is lost.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "idle_ops.h"
#include "hcasim/hca_model.h"
#include "iba/link.h"

namespace {

struct LinkedModel {
    HcaModel *m = nullptr;
    int ready = 0;
    explicit LinkedModel(uint64_t guid) {
        static const HcaHostOps ops = [] {
            HcaHostOps o = fakehost::idle_host_ops();
            o.port_tx_ready = [](void *self, unsigned) { ++static_cast<LinkedModel *>(self)->ready; };
            return o;
        }();
        HcaModelConfig cfg = {};
        cfg.node_guid = guid;
        cfg.fabric = true;
        char err[256] = "";
        m = hca_model_new(&ops, this, &cfg, err, sizeof(err));
        REQUIRE(m);
    }
    ~LinkedModel() { hca_model_free(m); }
    std::vector<uint8_t> pending() {
        const void *p = nullptr;
        const size_t n = hca_model_port_tx_peek(m, 1, &p);
        const auto *b = static_cast<const uint8_t *>(p);
        return n ? std::vector<uint8_t>(b, b + n) : std::vector<uint8_t>{};
    }
    std::string info() {
        char *s = hca_model_info(m);
        std::string r = s ? s : "";
        std::free(s);
        return r;
    }
    bool feed(const std::vector<uint8_t> &frame, size_t piece) {
        std::vector<uint8_t> b(iba::link::kLength);
        iba::link::put_length(b.data(), static_cast<uint32_t>(frame.size()));
        b.insert(b.end(), frame.begin(), frame.end());
        for (size_t at = 0; at < b.size(); at += piece) {
            if (!hca_model_port_rx(m, 1, b.data() + at, std::min(piece, b.size() - at))) {
                return false;
            }
        }
        return true;
    }
};

void check_hello(const std::vector<uint8_t> &bytes, uint64_t guid) {
    REQUIRE(bytes.size() == iba::link::kLength + iba::link::kHeader + iba::link::kHelloBody);
    CHECK(iba::link::frame_length(bytes.data()) == iba::link::kHeader + iba::link::kHelloBody);
    iba::link::FrameView f;
    REQUIRE(iba::link::parse({bytes.data() + iba::link::kLength, bytes.size() - iba::link::kLength}, f));
    CHECK(f.type == iba::link::kHello);
    iba::link::Hello h;
    REQUIRE(iba::link::parse_hello(f.body, h));
    CHECK(h.node_guid == guid);
    CHECK(h.port_guid == guid);
    CHECK(h.port_num == 1);
}

}  // namespace

TEST_CASE("link through the C interface: hello, link state in pieces, a broken stream, reconnection", "[link]") {
    LinkedModel x(0x0002c90300a0beefULL);
    CHECK(x.pending().empty());  // nothing before the host connects

    hca_model_port_connected(x.m, 1);
    CHECK(x.ready == 1);
    const auto hello = x.pending();
    check_hello(hello, 0x0002c90300a0beefULL);
    // The host writes the hello in two pieces.
    hca_model_port_tx_done(x.m, 1, 3);
    CHECK(x.pending().size() == hello.size() - 3);
    hca_model_port_tx_done(x.m, 1, hello.size() - 3);
    CHECK(x.pending().empty());

    // The fabric's link-state frame, one byte per read: the link comes up.
    CHECK(x.info().find("phys=Polling") != std::string::npos);
    REQUIRE(x.feed(iba::link::link_state_frame(true), 1));
    CHECK(x.info().find("phys=LinkUp") != std::string::npos);

    // A frame length of 0 breaks the stream; the host closes it and says so.
    CHECK_FALSE(x.feed({}, 64));
    hca_model_port_link(x.m, 1, false);
    CHECK(x.info().find("phys=Polling") != std::string::npos);
    CHECK_FALSE(x.feed(iba::link::link_state_frame(true), 64));  // not connected: nothing is read

    // Reconnected: a fresh stream with a fresh hello, and the link follows the fabric again.
    hca_model_port_connected(x.m, 1);
    check_hello(x.pending(), 0x0002c90300a0beefULL);
    REQUIRE(x.feed(iba::link::link_state_frame(true), 5));
    CHECK(x.info().find("phys=LinkUp") != std::string::npos);

    // A reset keeps the hello the fabric has not read yet.
    hca_model_reset(x.m);
    check_hello(x.pending(), 0x0002c90300a0beefULL);
}

// QEMU logs guest errors (LOG_GUEST_ERROR) through the host's guest_error
// hook: each one as a line, within the model's budget of 100 a second.
TEST_CASE("C interface: guest errors reach the host's guest_error hook, at most 100 a second", "[link]") {
    struct Seen {
        std::vector<std::string> lines;
    } seen;
    static const HcaHostOps ops = [] {
        HcaHostOps o = fakehost::idle_host_ops();
        o.guest_error = [](void *self, const char *msg) { static_cast<Seen *>(self)->lines.emplace_back(msg); };
        return o;
    }();
    HcaModelConfig cfg = {};
    char err[256] = "";
    HcaModel *m = hca_model_new(&ops, &seen, &cfg, err, sizeof(err));
    REQUIRE(m);
    // A command doorbell before the driver chose its interface (cmdq
    // address not written): ignored, and a guest error each time.
    const uint8_t ring[4] = {0, 0, 0, 1};
    for (int i = 0; i < 150; ++i) {
        hca_model_mmio_write(m, 0x18, ring, sizeof(ring));
        hca_model_run(m);
    }
    REQUIRE(seen.lines.size() == 100);
    CHECK(seen.lines[0].find("command doorbell") != std::string::npos);
    CHECK(seen.lines[0].find('\n') == std::string::npos);
    hca_model_free(m);
}
