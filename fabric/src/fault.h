// Fault injection on the switch's links: each packet crossing a port's
// link (in either direction) is lost with probability drop%, has one bit
// flipped with probability corrupt% (the receiver's CRC check then drops
// it), and packets towards the device wait delay microseconds.  One seeded
// generator, consumed only when a knob is non-zero, makes runs with the same
// packet order reproducible.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace fabric {

struct FaultConfig {
    double drop_pct = 0;
    double corrupt_pct = 0;
    uint32_t delay_us = 0;
    bool any() const { return drop_pct > 0 || corrupt_pct > 0 || delay_us > 0; }
};

class FaultInjector {
  public:
    static constexpr uint32_t kMaxDelayUs = 10'000'000;

    FaultInjector(uint64_t seed, size_t num_ports);

    // Port 0 (the management port) has no link; it takes no faults.
    const FaultConfig &config(uint8_t port) const { return cfg_.at(port); }
    bool set_drop(uint8_t port, double pct);
    bool set_corrupt(uint8_t port, double pct);
    bool set_delay(uint8_t port, uint32_t us);
    void reseed(uint64_t seed) { rng_.seed(seed); }

    bool roll_drop(uint8_t port) { return roll(cfg_[port].drop_pct); }
    bool roll_corrupt(uint8_t port) { return roll(cfg_[port].corrupt_pct); }
    // Flips one bit of the bytes [begin, end) of pkt.
    void corrupt(std::vector<uint8_t> &pkt, size_t begin = 0);

  private:
    bool roll(double pct);
    std::vector<FaultConfig> cfg_;
    std::mt19937_64 rng_;
};

}  // namespace fabric
