// An inter-switch link inside one daemon: port a of one switch cabled to
// port b of another (or the same) switch.  Each direction is a bounded
// queue drained from the event loop, never from inside the sending
// switch's forwarding (so a loop of switches cannot recurse).  The link
// keeps IBA's promise of no congestion loss the way LinkServer's device
// ports do: a direction above kHighFrames is congested (the sending
// switch holds the ingress that fed it), and a direction whose receiving
// switch reports a congested egress stops until that egress drains
// (IbSwitch::hold/drained), or for at most the HOQ lifetime.  Past
// kMaxFrames a frame is dropped and counted by the sending switch.
// Disabling either port (`link N down`, an SM's PortState=Down) takes the
// physical link down on both switches.
#pragma once

#include <cstdint>
#include <deque>

#include "event_loop.h"
#include "switch.h"

namespace fabric {

class SwitchLink {
  public:
    static constexpr size_t kHighFrames = 512;
    static constexpr size_t kMaxFrames = 4096;
    static constexpr uint64_t kHoqLifetimeUs = 2000000;

    SwitchLink(EventLoop &loop, IbSwitch &a, uint8_t pa, IbSwitch &b, uint8_t pb);
    ~SwitchLink();
    SwitchLink(const SwitchLink &) = delete;
    SwitchLink &operator=(const SwitchLink &) = delete;

    uint64_t frames() const { return ends_[0].moved + ends_[1].moved; }

  private:
    // The sink at one switch's port: frames it is given go to the peer.
    class End : public PortSink {
      public:
        bool deliver(const Frame &f) override;
        bool congested() const override { return q.size() >= kHighFrames; }
        void link_state(bool up) override;
        void resume() override;
        bool switch_link() const override { return true; }

        SwitchLink *link = nullptr;
        IbSwitch *sw = nullptr;
        uint8_t port = 0;
        End *peer = nullptr;
        std::deque<Frame> q;          // towards the peer's switch
        bool posted = false;
        bool blocked = false;         // the peer switch holds this direction
        bool was_congested = false;
        EventLoop::TimerId hoq_timer = 0;
        uint64_t moved = 0;
        bool changing = false;        // inside link_state (attach calls back)
    };
    void drain(End &e);
    void post(End &e);

    EventLoop &loop_;
    End ends_[2];
    bool dying_ = false;
};

}  // namespace fabric
