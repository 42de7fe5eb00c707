// Fault injection on the switch's links: each packet crossing a port's
// link (in either direction) is lost with probability drop%, has one bit
// flipped with probability corrupt% (the receiver's CRC check then drops
// it), and packets towards the device wait delay microseconds, are sent
// twice with probability duplicate%, or overtaken by the next packet with
// probability reorder%.  A partition cuts two ports off each other (the
// links stay up, the SM still reaches both).  Drops can
// be limited to requests (everything but ACKs, NAKs, read responses and
// atomic acknowledgements): a program without a closing handshake, like
// ibv_rc_pingpong, cannot survive losing the last ACK of its final message
// after its peer has exited, on real hardware either.  One seeded
// generator, consumed only when a knob is non-zero, makes runs with the same
// packet order reproducible.
#pragma once

#include <cstdint>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace fabric {

// Which packets drop_pct applies to.
enum class DropScope : uint8_t { All, Requests };
bool parse_drop_scope(const std::string &s, DropScope &out);

// True for RC/XRC responder-generated packets (ACK/NAK, read response,
// atomic acknowledge); pkt starts at the LRH.
bool is_response(std::span<const uint8_t> pkt);

struct FaultConfig {
    double drop_pct = 0;
    DropScope drop_scope = DropScope::All;
    double corrupt_pct = 0;
    uint32_t delay_us = 0;
    double duplicate_pct = 0;
    double reorder_pct = 0;
    bool any() const {
        return drop_pct > 0 || corrupt_pct > 0 || delay_us > 0 || duplicate_pct > 0 || reorder_pct > 0;
    }
};

class FaultInjector {
  public:
    static constexpr uint32_t kMaxDelayUs = 10'000'000;

    FaultInjector(uint64_t seed, size_t num_ports);

    // Port 0 (the management port) has no link; it takes no faults.
    const FaultConfig &config(uint8_t port) const { return cfg_.at(port); }
    bool set_drop(uint8_t port, double pct, DropScope scope = DropScope::All);
    bool set_corrupt(uint8_t port, double pct);
    bool set_delay(uint8_t port, uint32_t us);
    bool set_duplicate(uint8_t port, double pct);
    bool set_reorder(uint8_t port, double pct);
    // Packets between ports a and b (either way) are lost while cut.
    bool set_cut(uint8_t a, uint8_t b, bool cut);
    void clear_cuts() { cuts_.clear(); }
    bool cut(uint8_t a, uint8_t b) const {
        return !cuts_.empty() && cuts_.contains(a < b ? std::pair{a, b} : std::pair{b, a});
    }
    const std::set<std::pair<uint8_t, uint8_t>> &cuts() const { return cuts_; }
    void reseed(uint64_t seed) { rng_.seed(seed); }

    // pkt starts at the LRH.
    bool roll_drop(uint8_t port, std::span<const uint8_t> pkt) {
        const FaultConfig &c = cfg_[port];
        return (c.drop_scope == DropScope::All || !is_response(pkt)) && roll(c.drop_pct);
    }
    bool roll_corrupt(uint8_t port) { return roll(cfg_[port].corrupt_pct); }
    bool roll_duplicate(uint8_t port) { return roll(cfg_[port].duplicate_pct); }
    bool roll_reorder(uint8_t port) { return roll(cfg_[port].reorder_pct); }
    // Flips one bit of the bytes [begin, end) of pkt.
    void corrupt(std::vector<uint8_t> &pkt, size_t begin = 0);

  private:
    bool set_pct(uint8_t port, double pct, double FaultConfig::*knob);
    bool roll(double pct);
    std::vector<FaultConfig> cfg_;
    std::set<std::pair<uint8_t, uint8_t>> cuts_;  // (lower, higher) port
    std::mt19937_64 rng_;
};

}  // namespace fabric
