// Link-level enumerations of IBA Vol. 1 ch. 14 with name tables: port
// states, physical states, MTU, link width/speed and the static-rate codes
// of PathRecord/MCMemberRecord (IBA 15.2.5.16 table 205).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fabric {

// PortInfo:PortState (IBA 14.2.5.6).
enum class PortState : uint8_t { Nop = 0, Down = 1, Init = 2, Armed = 3, Active = 4 };
// PortInfo:PortPhysicalState.
enum class PhysState : uint8_t { Nop = 0, Sleep = 1, Polling = 2, Disabled = 3, Training = 4, LinkUp = 5 };

const char *port_state_name(PortState s);
const char *phys_state_name(PhysState s);

// MTU codes: 1 = 256 ... 5 = 4096.
inline constexpr uint8_t kMtu256 = 1, kMtu512 = 2, kMtu1024 = 3, kMtu2048 = 4, kMtu4096 = 5;
inline constexpr size_t mtu_bytes(uint8_t code) { return code >= 1 && code <= 5 ? size_t{128} << code : 0; }
std::optional<uint8_t> mtu_code(unsigned bytes);

// LinkWidthActive: 1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x.  LinkSpeedActive:
// 1 = SDR (2.5 Gb/s per lane), 2 = DDR, 4 = QDR.
struct LinkRate {
    uint8_t width = 2;  // 4x
    uint8_t speed = 4;  // QDR
};
// Parses "4xQDR", "1xSDR", "12xDDR" (case-insensitive).
std::optional<LinkRate> parse_link_rate(std::string_view s);
std::string link_rate_name(LinkRate r);
unsigned link_lanes(uint8_t width);     // 0 if invalid
unsigned lane_mbps(uint8_t speed);      // 0 if invalid
// The IBA rate code for a width/speed pair (e.g. 4x QDR = 40 Gb/s = 7).
uint8_t rate_code(LinkRate r);
// Gb/s * 1000 of a rate code, 0 if unknown; the codes are not ordered.
unsigned rate_mbps(uint8_t code);

// Path selectors (IBA 15.2.5.16): 0 greater than, 1 less than, 2 exactly,
// 3 largest available.
enum Selector : uint8_t { kSelGreater = 0, kSelLess = 1, kSelExact = 2, kSelLargest = 3 };

}  // namespace fabric
