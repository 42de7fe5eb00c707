// Small helpers the subnet manager's files share: SMP status and data, and
// the port state in a PortInfo.
#pragma once

#include <algorithm>
#include <array>

#include "mad_util.h"
#include "switch.h"

namespace fabric::sm_util {

inline constexpr uint64_t kGidPrefix = 0xfe80000000000000ull;  // the default subnet prefix
inline constexpr uint8_t kHop0[1] = {0};

inline uint16_t smp_status(const Mad &m) { return get16(m, mad::kStatus) & 0x7fff; }
inline const uint8_t *smp_data(const Mad &m) { return m.data() + mad::smp::kData; }
inline std::array<uint8_t, 64> data_of(const Mad &m) {
    std::array<uint8_t, 64> d;
    std::copy_n(smp_data(m), 64, d.begin());
    return d;
}
inline PortState pi_state(const std::array<uint8_t, 64> &d) {
    return static_cast<PortState>(d[iba::mad::port_info::kLinkSpeedSupportedPortState] & 0x0f);
}

}  // namespace fabric::sm_util
