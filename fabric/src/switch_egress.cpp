// The switch's egress stage: counters, the fault injector's drop, corrupt,
// delay, duplicate and reorder, and the delivery to the port's device.
#include "switch.h"
#include "switch_internal.h"

namespace fabric {

void IbSwitch::transmit(uint8_t port, const Frame &f, uint64_t bytes, Verdict &v) {
    SwitchPort &p = ports_[port];
    v.out.set(port);
    ++forwarded_;
    ++p.ctr.xmit_packets;
    p.ctr.xmit_bytes += bytes;
    const FaultConfig &fc = faults_.config(port);
    if (!fc.any()) {
        if (!transmit_now(p, f)) {
            v.lost.set(port);
        }
        return;
    }
    if (faults_.roll_drop(port, std::span<const uint8_t>(*f).subspan(iba::link::kHeader))) {
        ++p.ctr.fault_dropped;
        v.lost.set(port);
        return;
    }
    Frame out = f;
    if (faults_.roll_corrupt(port)) {
        ++p.ctr.fault_corrupted;
        std::vector<uint8_t> copy(f->begin(), f->end());
        uint8_t &flags = copy[iba::link::kFlagsByte];  // parsed before: a whole header
        if (flags & iba::link::kNoCrcs) {
            // What the wire would have carried, then the flip: the
            // receiver checks the CRCs again and sees it.
            iba::fill_crcs(std::span<uint8_t>(copy).subspan(iba::link::kHeader));
            flags = static_cast<uint8_t>(flags & ~iba::link::kNoCrcs);
        }
        faults_.corrupt(copy, iba::link::kHeader);
        out = std::make_shared<const std::vector<uint8_t>>(std::move(copy));
    }
    if (fc.delay_us == 0) {
        emit(p, out);
        return;
    }
    // A delay line per port keeps the packets in order.
    if (p.delayed.size() >= kMaxDelayed) {
        ++p.ctr.xmit_discards;
        ++drops_[static_cast<size_t>(Drop::QueueFull)];
        v.lost.set(port);
        if (log_.allow("delay-full")) {
            log_.warn("switch", "{}: delay line full ({} packets), packet dropped", pname(port), kMaxDelayed);
        }
        return;
    }
    ++p.ctr.fault_delayed;
    p.delayed.emplace_back(loop_.now_us() + fc.delay_us, std::move(out));
    if (!p.delay_timer) {
        p.delay_timer = loop_.after(fc.delay_us, [this, port] { run_delay_line(port); });
    }
}

bool IbSwitch::transmit_now(SwitchPort &p, const Frame &f) {
    if (!p.link_up()) {
        return false;
    }
    if (!p.sink->deliver(f)) {
        ++p.ctr.xmit_discards;
        ++drops_[static_cast<size_t>(Drop::QueueFull)];
        return false;
    }
    if (p.sink->congested()) {
        congested_.set(p.num);
        ++p.ctr.xmit_wait;
    }
    return true;
}

// The last stage of a faulty egress: a frame is sent twice (duplicate%),
// or held back until the next frame has overtaken it (reorder%).
void IbSwitch::emit(SwitchPort &p, const Frame &f) {
    const FaultConfig &fc = faults_.config(p.num);
    if (!p.held && faults_.roll_reorder(p.num)) {
        ++p.ctr.fault_reordered;
        p.held = f;
        p.held_timer = loop_.after(kReorderWaitUs, [this, port = p.num] {
            ports_[port].held_timer = 0;
            release_held(ports_[port]);
        });
        return;
    }
    transmit_now(p, f);
    if (fc.duplicate_pct > 0 && faults_.roll_duplicate(p.num)) {
        ++p.ctr.fault_duplicated;
        transmit_now(p, f);
    }
    release_held(p);
}

void IbSwitch::release_held(SwitchPort &p) {
    if (!p.held) {
        return;
    }
    if (p.held_timer) {
        loop_.cancel(p.held_timer);
        p.held_timer = 0;
    }
    const Frame f = std::move(p.held);
    p.held = nullptr;
    transmit_now(p, f);
}

// A link that goes down or away loses what waits on it.
void IbSwitch::flush_egress(SwitchPort &p) {
    p.delayed.clear();
    loop_.cancel(p.delay_timer);
    p.delay_timer = 0;
    p.held = nullptr;
    loop_.cancel(p.held_timer);
    p.held_timer = 0;
}

void IbSwitch::run_delay_line(uint8_t port) {
    SwitchPort &p = ports_[port];
    p.delay_timer = 0;
    const uint64_t now = loop_.now_us();
    while (!p.delayed.empty() && p.delayed.front().first <= now) {
        Frame f = std::move(p.delayed.front().second);
        p.delayed.pop_front();
        emit(p, f);
    }
    if (!p.delayed.empty()) {
        p.delay_timer = loop_.after(p.delayed.front().first - now, [this, port] { run_delay_line(port); });
    }
}

}  // namespace fabric
