// Multicast groups of the SA (IBA Vol. 1 15.4.3, MCMemberRecord): join
// (creating a group when the request carries the parameters), leave, and
// queries.  The IPoIB broadcast group ff12:401b:ffff::ffff:ffff exists from
// the start, as opensm's default partition creates it (Q_Key 0x0B1B, MTU
// 2048, 10 Gb/s, MLID 0xC000); other groups get MLIDs from 0xC001 up.  The
// receivers (full and non members, not send-only members) give the MFT.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fdb.h"
#include "ib_enums.h"
#include "sa_records.h"

namespace fabric {

struct McGroup {
    struct Member {
        uint8_t join_state = 0;
        uint16_t switch_port = 0;  // the SM's attachment index of its switch port
        uint64_t port_guid = 0;
        bool proxy = false;
    };
    sa::McMemberRecord params;  // MGID, Q_Key, MLID, MTU, ...; no member fields
    bool permanent = false;     // the pre-created broadcast group stays when empty
    std::map<iba::Gid, Member> members;
};

class McastGroups {
  public:
    static constexpr uint16_t kBroadcastMlid = 0xc000;
    static constexpr size_t kMaxGroups = 1024;
    static constexpr size_t kMaxMembersPerGroup = 1024;
    static const iba::Gid kBroadcastMgid;

    // link_mtu/link_rate: what the fabric can carry. ipoib_mtu: the MTU
    // code of the IPoIB broadcast groups (opensm's partitions.conf mtu=,
    // 2048 by default; 4096 gives ib_ipoib a 4092-byte datagram MTU), at
    // most link_mtu.
    McastGroups(uint8_t link_mtu, uint8_t link_rate, uint8_t packet_life_time, uint8_t ipoib_mtu = kMtu2048);

    // Forgets every group but the broadcast group, which loses its members.
    void reset();
    // Is mgid IPoIB's broadcast group of pkey's partition (RFC 4391:
    // ff12:401b:<P_Key with the full bit>::ffff:ffff)?
    static bool is_ipoib_broadcast(const iba::Gid &mgid, uint16_t pkey);
    // That group, made as the default partition's is (an SM configures one
    // per partition with IPoIB; IPoIB only joins it): false when no group
    // or MLID is left.
    bool ensure_ipoib_broadcast(uint16_t pkey);

    struct Result {
        uint16_t status = 0;  // MAD status (SA class codes in 15:8)
        sa::McMemberRecord rec;
        uint16_t changed_mlid = 0;  // receivers changed: reprogram the MFT
    };
    // Set(MCMemberRecord) for the end port port_guid on switch port
    // switch_port (already resolved from PortGID by the SA).
    Result join(const sa::McMemberRecord &req, uint64_t mask, uint64_t port_guid, uint16_t switch_port);
    // Delete(MCMemberRecord).
    Result leave(const sa::McMemberRecord &req, uint64_t mask);
    // Get/GetTable: one record per member matching the masked fields, and
    // one with a zero PortGID for a group without members.
    std::vector<sa::McMemberRecord> query(const sa::McMemberRecord &req, uint64_t mask) const;
    // An end port went away: it leaves every group.  Returns changed MLIDs.
    std::vector<uint16_t> remove_port(uint64_t port_guid);

    ForwardingTables::PortSet receivers(uint16_t mlid) const;
    const std::map<iba::Gid, McGroup> &groups() const { return groups_; }
    const McGroup *find(const iba::Gid &mgid) const;
    std::string describe() const;

  private:
    std::optional<uint16_t> allocate_mlid() const;
    sa::McMemberRecord record_for(const McGroup &g, const iba::Gid &port_gid, uint8_t join_state,
                                  bool proxy) const;
    bool params_match(const McGroup &g, const sa::McMemberRecord &req, uint64_t mask) const;
    uint16_t create(const sa::McMemberRecord &req, uint64_t mask, McGroup &g);

    uint8_t link_mtu_;
    uint8_t ipoib_mtu_;
    uint8_t link_rate_;
    uint8_t plt_;
    std::map<iba::Gid, McGroup> groups_;
    uint64_t next_mgid_ = 1;
};

// Picks a value for a selector (IBA 15.2.5.16: 0 greater than, 1 less
// than, 2 exactly, 3 largest available) among what the fabric supports:
// MTU codes 1..link_mtu, or the rate codes not faster than link_rate.
std::optional<uint8_t> select_mtu(uint8_t selector, uint8_t wanted, uint8_t link_mtu);
std::optional<uint8_t> select_rate(uint8_t selector, uint8_t wanted, uint8_t link_rate);
// Whether an existing value satisfies a selector.
bool mtu_satisfies(uint8_t selector, uint8_t wanted, uint8_t have);
bool rate_satisfies(uint8_t selector, uint8_t wanted, uint8_t have);

}  // namespace fabric
