#include "fake_host.h"

#include "iba/link.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "be.h"

namespace hcatest {

FakeHost::FakeHost(size_t mem_bytes) : size_(mem_bytes) {
    void *p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        throw std::runtime_error("fake host: cannot map guest memory");
    }
    mem_ = static_cast<uint8_t *>(p);
}

FakeHost::~FakeHost() { munmap(mem_, size_); }

uint8_t *FakeHost::mem(uint64_t addr, size_t len) {
    if (addr < kMemBase || len > size_ || addr - kMemBase > size_ - len) {
        return nullptr;
    }
    return mem_ + (addr - kMemBase);
}

uint64_t FakeHost::alloc(size_t len, size_t align) {
    next_ = (next_ + align - 1) & ~(uint64_t{align} - 1);
    const uint64_t a = next_;
    if (!mem(a, len)) {
        throw std::runtime_error("fake host out of guest memory");
    }
    next_ += len;
    std::memset(mem(a, len), 0, len);
    return a;
}

void FakeHost::free_all() {
    std::memset(mem_, 0, next_ - kMemBase);
    next_ = kMemBase;
}

void FakeHost::write(uint64_t addr, const void *p, size_t len) {
    uint8_t *m = mem(addr, len);
    if (!m) {
        throw std::runtime_error("test writes outside guest memory");
    }
    std::memcpy(m, p, len);
}

void FakeHost::read(uint64_t addr, void *p, size_t len) {
    uint8_t *m = mem(addr, len);
    if (!m) {
        throw std::runtime_error("test reads outside guest memory");
    }
    std::memcpy(p, m, len);
}

uint32_t FakeHost::read_be32(uint64_t addr) {
    uint8_t b[4];
    read(addr, b, 4);
    return hca::load_be32(b);
}

void FakeHost::write_be32(uint64_t addr, uint32_t v) {
    uint8_t b[4];
    hca::store_be32(b, v);
    write(addr, b, 4);
}

void FakeHost::write_be64(uint64_t addr, uint64_t v) {
    uint8_t b[8];
    hca::store_be64(b, v);
    write(addr, b, 8);
}

bool FakeHost::dma_read(uint64_t addr, void *buf, size_t len) {
    if (recording) {
        recorded.push_back({'r', addr, len});
    }
    uint8_t *m = mem(addr, len);
    if (!m) {
        ++dma_errors;
        return false;
    }
    std::memcpy(buf, m, len);
    return true;
}

bool FakeHost::dma_write(uint64_t addr, const void *buf, size_t len) {
    if (recording) {
        recorded.push_back({'w', addr, len});
    }
    uint8_t *m = mem(addr, len);
    if (!m) {
        ++dma_errors;
        return false;
    }
    std::memcpy(m, buf, len);
    return true;
}

void FakeHost::msix_notify(unsigned vector) {
    if (recording) {
        recorded.push_back({'i', vector, 0});
    }
    ++msix[vector];
}

void FakeHost::port_tx(unsigned port, std::span<const uint8_t> head, std::span<const uint8_t> body) {
    if (recording) {
        recorded.push_back({'t', port, head.size() + body.size()});
    }
    if (spare.empty()) {
        tx.emplace_back();
    } else {
        tx.push_back(std::move(spare.back()));
        spare.pop_back();
    }
    auto &f = tx.back();
    f.assign(head.begin(), head.end());
    f.insert(f.end(), body.begin(), body.end());
}

Bench::Bench(const hca::DeviceConfig &cfg, size_t mem_bytes) : host(mem_bytes), dev(host, cfg) {
    // Past the "initializing" window of a power-on reset.
    advance(hca::InitSeg::kInitDelayNs);
}

hca::DeviceConfig Bench::fabric_config(uint64_t guid) {
    hca::DeviceConfig c;
    c.fabric = true;
    c.node_guid = guid;
    return c;
}

iba::ParseError parse_frame(const std::vector<uint8_t> &frame, iba::PacketView &out) {
    iba::link::FrameView f;
    if (!iba::link::parse(frame, f) || f.type != iba::link::kPacket) {
        return iba::ParseError::BadLength;
    }
    return iba::parse(f.body, out, !(f.flags & iba::link::kNoCrcs));
}

Wire::Wire() : Wire(Bench::fabric_config(0x0002c90300b00001), Bench::fabric_config(0x0002c90300b00002)) {}

Wire::Wire(const hca::DeviceConfig &cfg_a, const hca::DeviceConfig &cfg_b, size_t mem_bytes)
    : a(cfg_a, mem_bytes), b(cfg_b, mem_bytes) {
    a.dev.port_link(1, true);
    b.dev.port_link(1, true);
}

void Wire::pump(const std::function<bool(bool, uint64_t)> &drop) {
    for (int round = 0; round < 100000; ++round) {
        a.pump();
        b.pump();
        if (a.host.tx.empty() && b.host.tx.empty()) {
            return;
        }
        from_a_.swap(a.host.tx);
        from_b_.swap(b.host.tx);
        for (auto &f : from_a_) {
            if (drop && drop(true, frames++)) {
                ++dropped;
            } else {
                b.dev.port_rx(1, f.data(), f.size());
            }
            a.host.spare.push_back(std::move(f));
        }
        for (auto &f : from_b_) {
            if (drop && drop(false, frames++)) {
                ++dropped;
            } else {
                a.dev.port_rx(1, f.data(), f.size());
            }
            b.host.spare.push_back(std::move(f));
        }
        from_a_.clear();
        from_b_.clear();
    }
}

void Wire::advance(int64_t ns, const std::function<bool(bool, uint64_t)> &drop) {
    const int64_t step = 100'000;
    for (int64_t t = 0; t < ns; t += step) {
        a.advance(std::min(step, ns - t));
        b.advance(std::min(step, ns - t));
        pump(drop);
    }
}

void Bench::pump() {
    for (int i = 0; i < 1000 && host.scheduled; ++i) {
        host.scheduled = false;
        dev.run();
    }
    if (host.timer_deadline >= 0 && host.timer_deadline <= host.clock) {
        host.timer_deadline = -1;
        dev.on_timer();
        pump();
    }
}

void Bench::advance(int64_t ns) {
    const int64_t end = host.clock + ns;
    while (host.timer_deadline >= 0 && host.timer_deadline <= end) {
        host.clock = std::max(host.clock, host.timer_deadline);
        pump();
    }
    host.clock = end;
    pump();
}

}  // namespace hcatest
