// SA attribute records (IBA Vol. 1 15.2.5) with their component-mask bits
// and codecs: ClassPortInfo, NodeRecord, PortInfoRecord, PathRecord and
// MCMemberRecord.  Layouts as in the spec tables (and opensm's ib_types.h,
// the kernel's sa_query.c field tables); record sizes padded to 8 bytes
// because AttributeOffset counts 8-byte words.
#pragma once

#include <cstdint>
#include <span>

#include "iba/packet.h"

namespace fabric::sa {

inline constexpr size_t kClassPortInfoSize = 72;
inline constexpr size_t kNodeRecordSize = 112;      // LID, rsvd, NodeInfo 40, NodeDescription 64, pad
inline constexpr size_t kPortInfoRecordSize = 72;   // LID, PortNum, Options, PortInfo 64, pad
inline constexpr size_t kPathRecordSize = 64;
inline constexpr size_t kMcMemberRecordSize = 56;   // 52 + pad

// ComponentMask bits.
namespace nr {
inline constexpr uint64_t kLid = 1ull << 0;
inline constexpr uint64_t kNodeType = 1ull << 4;
inline constexpr uint64_t kNumPorts = 1ull << 5;
inline constexpr uint64_t kSysImageGuid = 1ull << 6;
inline constexpr uint64_t kNodeGuid = 1ull << 7;
inline constexpr uint64_t kPortGuid = 1ull << 8;
inline constexpr uint64_t kNodeDesc = 1ull << 14;
}  // namespace nr
namespace pir {
inline constexpr uint64_t kLid = 1ull << 0;
inline constexpr uint64_t kPortNum = 1ull << 1;
inline constexpr uint64_t kCapMask = 1ull << 7;
inline constexpr uint64_t kPortState = 1ull << 15;
}  // namespace pir
namespace pr {
inline constexpr uint64_t kServiceId = 3ull << 0;
inline constexpr uint64_t kDgid = 1ull << 2;
inline constexpr uint64_t kSgid = 1ull << 3;
inline constexpr uint64_t kDlid = 1ull << 4;
inline constexpr uint64_t kSlid = 1ull << 5;
inline constexpr uint64_t kRawTraffic = 1ull << 6;
inline constexpr uint64_t kFlowLabel = 1ull << 8;
inline constexpr uint64_t kHopLimit = 1ull << 9;
inline constexpr uint64_t kTClass = 1ull << 10;
inline constexpr uint64_t kReversible = 1ull << 11;
inline constexpr uint64_t kNumbPath = 1ull << 12;
inline constexpr uint64_t kPkey = 1ull << 13;
inline constexpr uint64_t kQosClass = 1ull << 14;
inline constexpr uint64_t kSl = 1ull << 15;
inline constexpr uint64_t kMtuSelector = 1ull << 16;
inline constexpr uint64_t kMtu = 1ull << 17;
inline constexpr uint64_t kRateSelector = 1ull << 18;
inline constexpr uint64_t kRate = 1ull << 19;
inline constexpr uint64_t kPltSelector = 1ull << 20;
inline constexpr uint64_t kPlt = 1ull << 21;
}  // namespace pr
namespace mcr {
inline constexpr uint64_t kMgid = 1ull << 0;
inline constexpr uint64_t kPortGid = 1ull << 1;
inline constexpr uint64_t kQkey = 1ull << 2;
inline constexpr uint64_t kMlid = 1ull << 3;
inline constexpr uint64_t kMtuSelector = 1ull << 4;
inline constexpr uint64_t kMtu = 1ull << 5;
inline constexpr uint64_t kTClass = 1ull << 6;
inline constexpr uint64_t kPkey = 1ull << 7;
inline constexpr uint64_t kRateSelector = 1ull << 8;
inline constexpr uint64_t kRate = 1ull << 9;
inline constexpr uint64_t kPltSelector = 1ull << 10;
inline constexpr uint64_t kPlt = 1ull << 11;
inline constexpr uint64_t kSl = 1ull << 12;
inline constexpr uint64_t kFlowLabel = 1ull << 13;
inline constexpr uint64_t kHopLimit = 1ull << 14;
inline constexpr uint64_t kScope = 1ull << 15;
inline constexpr uint64_t kJoinState = 1ull << 16;
inline constexpr uint64_t kProxyJoin = 1ull << 17;
// A join needs these (IBA 15.4.3, as opensm checks them).
inline constexpr uint64_t kJoinMask = kMgid | kPortGid | kJoinState;
// Creating a group needs the parameters no existing group can supply.
inline constexpr uint64_t kCreateMask = kJoinMask | kQkey | kTClass | kPkey | kFlowLabel | kSl;
}  // namespace mcr

// MCMemberRecord:JoinState bits (IBA 15.2.5.17).
inline constexpr uint8_t kFullMember = 1, kNonMember = 2, kSendOnlyNonMember = 4, kSendOnlyFullMember = 8;

struct PathRecord {
    uint64_t service_id = 0;
    iba::Gid dgid{};
    iba::Gid sgid{};
    uint16_t dlid = 0;
    uint16_t slid = 0;
    bool raw_traffic = false;
    uint32_t flow_label = 0;
    uint8_t hop_limit = 0;
    uint8_t tclass = 0;
    bool reversible = false;
    uint8_t numb_path = 0;
    uint16_t pkey = 0;
    uint16_t qos_class = 0;
    uint8_t sl = 0;
    uint8_t mtu_selector = 0;
    uint8_t mtu = 0;
    uint8_t rate_selector = 0;
    uint8_t rate = 0;
    uint8_t plt_selector = 0;
    uint8_t packet_life_time = 0;
    uint8_t preference = 0;
};
PathRecord decode_path_record(std::span<const uint8_t> d);
void encode(const PathRecord &r, std::span<uint8_t> d);

struct McMemberRecord {
    iba::Gid mgid{};
    iba::Gid port_gid{};
    uint32_t qkey = 0;
    uint16_t mlid = 0;
    uint8_t mtu_selector = 0;
    uint8_t mtu = 0;
    uint8_t tclass = 0;
    uint16_t pkey = 0;
    uint8_t rate_selector = 0;
    uint8_t rate = 0;
    uint8_t plt_selector = 0;
    uint8_t packet_life_time = 0;
    uint8_t sl = 0;
    uint32_t flow_label = 0;
    uint8_t hop_limit = 0;
    uint8_t scope = 0;
    uint8_t join_state = 0;
    bool proxy_join = false;
};
McMemberRecord decode_mcmember_record(std::span<const uint8_t> d);
void encode(const McMemberRecord &r, std::span<uint8_t> d);

// ClassPortInfo of the SA (IBA 13.4.8.1): versions, capability masks and
// the response time; no redirection, no traps.
void encode_sa_class_port_info(std::span<uint8_t> d, uint32_t cap_mask2, uint8_t resp_time);

}  // namespace fabric::sa
