#include "fault.h"

#include <cmath>

#include "iba/packet.h"

namespace fabric {

FaultInjector::FaultInjector(uint64_t seed, size_t num_ports) : cfg_(num_ports + 1), rng_(seed) {}

namespace {
bool valid_pct(double pct) { return std::isfinite(pct) && pct >= 0 && pct <= 100; }
}  // namespace

bool parse_drop_scope(const std::string &s, DropScope &out) {
    if (s == "all" || s == "requests") {
        out = s == "all" ? DropScope::All : DropScope::Requests;
        return true;
    }
    return false;
}

bool is_response(std::span<const uint8_t> pkt) {
    if (pkt.size() < sizeof(iba::Lrh)) {
        return false;
    }
    const size_t bth = sizeof(iba::Lrh) + ((pkt[1] & 3) == iba::kLnhGlobal ? sizeof(iba::Grh) : 0);
    if (pkt.size() <= bth) {
        return false;
    }
    const uint8_t transport = pkt[bth] & 0xe0, op = pkt[bth] & 0x1f;
    return (transport == iba::kRc || transport == iba::kXrc) && op >= iba::kReadRespFirst && op <= iba::kAtomicAck;
}

bool FaultInjector::set_pct(uint8_t port, double pct, double FaultConfig::*knob) {
    if (port == 0 || port >= cfg_.size() || !valid_pct(pct)) {
        return false;
    }
    cfg_[port].*knob = pct;
    return true;
}

bool FaultInjector::set_drop(uint8_t port, double pct, DropScope scope) {
    if (port == 0 || port >= cfg_.size() || !valid_pct(pct)) {
        return false;
    }
    cfg_[port].drop_pct = pct;
    cfg_[port].drop_scope = scope;
    return true;
}

bool FaultInjector::set_corrupt(uint8_t port, double pct) { return set_pct(port, pct, &FaultConfig::corrupt_pct); }

bool FaultInjector::set_delay(uint8_t port, uint32_t us) {
    if (port == 0 || port >= cfg_.size() || us > kMaxDelayUs) {
        return false;
    }
    cfg_[port].delay_us = us;
    return true;
}

bool FaultInjector::set_duplicate(uint8_t port, double pct) { return set_pct(port, pct, &FaultConfig::duplicate_pct); }

bool FaultInjector::set_reorder(uint8_t port, double pct) { return set_pct(port, pct, &FaultConfig::reorder_pct); }

bool FaultInjector::set_cut(uint8_t a, uint8_t b, bool cut) {
    if (a == 0 || b == 0 || a >= cfg_.size() || b >= cfg_.size() || a == b) {
        return false;
    }
    const auto key = a < b ? std::pair{a, b} : std::pair{b, a};
    cut ? (void)cuts_.insert(key) : (void)cuts_.erase(key);
    return true;
}

bool FaultInjector::roll(double pct) {
    if (pct <= 0) {
        return false;
    }
    // Integer arithmetic on the raw generator output: the same on every
    // standard library, unlike the std:: distributions.
    const uint64_t threshold = static_cast<uint64_t>(std::llround(pct * 10000.0));  // parts per million
    return rng_() % 1000000 < threshold;
}

void FaultInjector::corrupt(std::vector<uint8_t> &pkt, size_t begin) {
    if (pkt.size() <= begin) {
        return;
    }
    const uint64_t r = rng_();
    const size_t byte = begin + static_cast<size_t>(r % (pkt.size() - begin));
    pkt[byte] = static_cast<uint8_t>(pkt[byte] ^ (1u << ((r >> 32) % 8)));
}

}  // namespace fabric
