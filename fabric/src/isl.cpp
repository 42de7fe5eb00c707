#include "isl.h"

namespace fabric {

SwitchLink::SwitchLink(EventLoop &loop, IbSwitch &a, uint8_t pa, IbSwitch &b, uint8_t pb) : loop_(loop) {
    ends_[0].sw = &a;
    ends_[0].port = pa;
    ends_[1].sw = &b;
    ends_[1].port = pb;
    for (int i = 0; i < 2; ++i) {
        ends_[i].link = this;
        ends_[i].peer = &ends_[1 - i];
    }
    // Both ends cabled: each switch's port comes up (an end that is
    // administratively down tells the other through link_state).
    a.attach(pa, &ends_[0]);
    b.attach(pb, &ends_[1]);
    a.hello(pa, b.node_guid(), b.node_guid(), pb);
    b.hello(pb, a.node_guid(), a.node_guid(), pa);
}

SwitchLink::~SwitchLink() {
    dying_ = true;
    for (End &e : ends_) {
        loop_.cancel(e.hoq_timer);
        e.sw->detach(e.port);
    }
}

bool SwitchLink::End::deliver(const Frame &f) {
    if (q.size() >= kMaxFrames) {
        return false;  // the sending switch counts the discard
    }
    q.push_back(f);
    if (congested()) {
        was_congested = true;
    }
    link->post(*this);
    return true;
}

void SwitchLink::post(End &e) {
    if (e.posted || e.blocked || dying_) {
        return;
    }
    e.posted = true;
    loop_.post([this, &e] {
        e.posted = false;
        drain(e);
    });
}

// Frames from e's switch enter the peer's switch, until the peer switch
// has a congested egress for them.
void SwitchLink::drain(End &e) {
    End &to = *e.peer;
    while (!e.q.empty() && !e.blocked && !dying_) {
        Frame f = std::move(e.q.front());
        e.q.pop_front();
        ++e.moved;
        if (!to.sw->port(to.port).link_up()) {
            continue;  // lost with the link
        }
        to.sw->receive(to.port, f);
        if (to.sw->congested().any()) {
            to.sw->hold(to.port, to.sw->congested());
            e.blocked = true;
            e.hoq_timer = loop_.after(kHoqLifetimeUs, [this, &e] {
                e.hoq_timer = 0;
                e.blocked = false;
                post(e);
            });
        }
    }
    if (e.was_congested && e.q.size() <= kHighFrames / 2) {
        e.was_congested = false;
        e.sw->drained(e.port);  // whoever e's switch held for this port reads again
    }
}

// The peer switch's egress that held frames from this end's peer drained:
// the direction towards this end's switch moves again.
void SwitchLink::End::resume() {
    End &from = *peer;
    if (!from.blocked) {
        return;
    }
    from.blocked = false;
    link->loop_.cancel(from.hoq_timer);
    from.hoq_timer = 0;
    link->post(from);
}

// This end's switch disabled or enabled its port: the cable's other end
// loses or regains its physical link.
void SwitchLink::End::link_state(bool up) {
    if (changing || link->dying_) {
        return;
    }
    changing = true;
    if (up) {
        peer->sw->attach(peer->port, peer);
    } else {
        peer->sw->detach(peer->port);
        q.clear();
        peer->q.clear();
    }
    changing = false;
}

}  // namespace fabric
