// Host services for driving the model through its C interface with no
// guest behind it: no memory (every DMA fails), no interrupts, no deferred
// work (the test calls hca_model_run itself), the clock stopped at 0 and no
// fabric. Tests set the members they need on a copy.
#pragma once

#include <cstdint>

#include "hcasim/hca_model.h"

namespace fakehost {

inline HcaHostOps idle_host_ops() {
    return HcaHostOps{
        .dma_read = [](void *, uint64_t, void *, size_t) { return false; },
        .dma_write = [](void *, uint64_t, const void *, size_t) { return false; },
        .msix_notify = [](void *, unsigned) {},
        .schedule = [](void *) {},
        .timer_mod = [](void *, int64_t) {},
        .clock_ns = [](void *) { return int64_t{0}; },
        .port_tx_ready = nullptr,
        .guest_error = nullptr,
        .port_rx_ready = nullptr,
    };
}

}  // namespace fakehost
