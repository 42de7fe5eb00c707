// A fake host for the model: guest memory in a vector, MSI-X and timer
// requests recorded, a manual clock.  Tests and fuzzers drive the device
// through it the way QEMU would, without a guest.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "device.h"
#include "host.h"
#include "iba/packet.h"

namespace hcatest {

class FakeHost final : public hca::Host {
  public:
    static constexpr uint64_t kMemBase = 0x10000000;

    // Guest memory is an anonymous mapping: pages nobody touches cost
    // nothing, so a test may give the device a GiB beyond what it allocates.
    explicit FakeHost(size_t mem_bytes = 64u << 20);
    ~FakeHost() override;
    FakeHost(const FakeHost &) = delete;
    FakeHost &operator=(const FakeHost &) = delete;

    // Guest memory.
    uint8_t *mem(uint64_t addr, size_t len);
    uint64_t alloc(size_t len, size_t align = 4096);  // bump allocator, zeroed
    void free_all();                                  // forget every allocation
    void write(uint64_t addr, const void *p, size_t len);
    void read(uint64_t addr, void *p, size_t len);
    uint32_t read_be32(uint64_t addr);
    void write_be32(uint64_t addr, uint32_t v);
    void write_be64(uint64_t addr, uint64_t v);

    // hca::Host
    bool dma_read(uint64_t addr, void *buf, size_t len) override;
    bool dma_write(uint64_t addr, const void *buf, size_t len) override;
    void msix_notify(unsigned vector) override;
    void schedule() override { scheduled = true; }
    void timer_mod(int64_t deadline_ns) override { timer_deadline = deadline_ns; }
    int64_t now_ns() override { return clock; }
    void port_tx(unsigned port, std::span<const uint8_t> head, std::span<const uint8_t> body) override;
    void port_tx_drop() override { ++tx_drops; }
    size_t port_tx_backlog(unsigned) const override { return backlog; }
    void port_rx_resume(unsigned) override { ++rx_resumes; }

    int64_t clock = 1'000'000'000;
    bool scheduled = false;
    int64_t timer_deadline = -1;
    std::map<unsigned, unsigned> msix;  // vector -> messages
    uint64_t dma_errors = 0;
    std::vector<std::vector<uint8_t>> tx;  // frames sent (a fake link sends at once)
    // Buffers of delivered frames, reused by port_tx (no allocation per
    // frame once warm: the benchmark times the link with the model).
    std::vector<std::vector<uint8_t>> spare;
    unsigned tx_drops = 0;                 // port_tx_drop() calls (resets, teardowns)
    size_t backlog = 0;                    // bytes the fake link has not written (flow control)
    unsigned rx_resumes = 0;               // port_rx_resume() calls

    // Every DMA, MSI-X message and transmitted frame of the device while
    // recording (teardown tests: nothing may touch the host after the
    // driver's teardown has completed).
    struct Access {
        char kind;  // 'r' DMA read, 'w' DMA write, 'i' MSI-X, 't' frame out
        uint64_t addr;  // guest address, vector or port
        size_t len;
    };
    bool recording = false;
    std::vector<Access> recorded;

  private:
    uint8_t *mem_ = nullptr;
    size_t size_ = 0;
    uint64_t next_ = kMemBase;
};

// A device plus its fake host; pump() runs deferred work and due timers
// the way QEMU's main loop would.
struct Bench {
    explicit Bench(const hca::DeviceConfig &cfg = {}, size_t mem_bytes = 64u << 20);
    static hca::DeviceConfig fabric_config(uint64_t guid);
    void pump();
    // Advance the clock, firing timers on the way.
    void advance(int64_t ns);

    FakeHost host;
    hca::Device dev;
};

// Two devices cabled back to back (each with fabric=true): frames one sends
// are handed to the other, unless the filter drops them.
struct Wire {
    Wire();
    Wire(const hca::DeviceConfig &cfg_a, const hca::DeviceConfig &cfg_b, size_t mem_bytes = 64u << 20);
    // Moves frames until both sides are quiet; drop(from_a, frame_no) may drop.
    void pump(const std::function<bool(bool, uint64_t)> &drop = {});
    // Advances both clocks, delivering frames and firing timers on the way.
    void advance(int64_t ns, const std::function<bool(bool, uint64_t)> &drop = {});

    Bench a;
    Bench b;
    uint64_t frames = 0;
    uint64_t dropped = 0;

  private:
    std::vector<std::vector<uint8_t>> from_a_, from_b_;  // frames in flight (buffers reused)
};

// The IBA packet of a link frame a device sent, parsed; its CRCs are
// checked unless the frame says it carries none (iba::link::kNoCrcs).
// BadLength for a frame that is not a packet.
iba::ParseError parse_frame(const std::vector<uint8_t> &frame, iba::PacketView &out);

}  // namespace hcatest
