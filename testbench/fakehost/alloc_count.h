// Counts the heap allocations (operator new) a stretch of code makes: the
// device's steady state must make none per work request (issue 18). The
// program's operator new is replaced by one that counts while counting is
// on (this thread only) and otherwise only allocates.
#pragma once

#include <cstdint>

namespace hcatest {

struct AllocCount {
    static void start();
    // Allocations since start(); counting stops.
    static uint64_t stop();
};

}  // namespace hcatest
