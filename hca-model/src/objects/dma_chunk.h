// A piece of guest memory a translation yields (objects/mkey.h).
#pragma once

#include <cstdint>

namespace hca {

// One physically contiguous piece of a translated range.
struct DmaChunk {
    uint64_t addr;
    uint32_t len;
};

}  // namespace hca
