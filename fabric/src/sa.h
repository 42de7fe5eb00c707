// The built-in subnet administrator (IBA Vol. 1 ch. 15) on QP1 of the
// switch's management port: ClassPortInfo, NodeRecord, PortInfoRecord,
// PathRecord and MCMemberRecord; GetTable responses go out with RMPP.
// Responses go to the requester's LID and QP (normally QP1) from QP1, with
// the request's P_Key and a GRH only if the request had one.  A request
// sent again with the same TID gets the same answer again (the kernel's
// sa_query retransmits every 100-300 ms).  MADs of other classes sent to
// the management port are answered "unsupported method/attribute".
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "event_loop.h"
#include "log.h"
#include "mad_util.h"
#include "mcast_groups.h"
#include "rmpp.h"
#include "sa_records.h"

namespace fabric {

class IbSwitch;
class SubnetManager;
struct Endport;

class SubnetAdmin {
  public:
    struct Config {
        uint8_t resp_time = 18;         // ClassPortInfo:RespTimeValue
        uint8_t packet_life_time = 18;  // PathRecord / MCMemberRecord
        uint8_t ipoib_mtu = kMtu2048;   // MTU code of the IPoIB broadcast groups
        RmppSender::Config rmpp{};
        size_t max_records = 16384;
    };
    struct Stats {
        uint64_t requests = 0;
        uint64_t errors = 0;
        uint64_t duplicates = 0;
        uint64_t non_sa = 0;
        uint64_t joins = 0;
        uint64_t leaves = 0;
        uint64_t sm_down = 0;  // requests unanswered while the SM was stopped
    };

    SubnetAdmin(IbSwitch &sw, SubnetManager &sm, EventLoop &loop, Log &log, const Config &cfg);
    ~SubnetAdmin();
    SubnetAdmin(const SubnetAdmin &) = delete;
    SubnetAdmin &operator=(const SubnetAdmin &) = delete;

    // Registers as the management port's GSI handler and with the SM.
    void start();
    // A MAD that arrived at the management port's QP1.
    void handle(const MadAddress &from, const Mad &req);

    McastGroups &groups() { return groups_; }
    const Stats &stats() const { return stats_; }
    const RmppSender &rmpp() const { return rmpp_; }

  private:
    using Records = std::vector<std::vector<uint8_t>>;
    struct Answer {
        uint16_t status = 0;
        size_t rec_size = 0;
        Records records;
    };

    void respond(const MadAddress &from, const Mad &req, Answer a);
    void send(const MadAddress &to, const Mad &m);
    void reply_status(const MadAddress &from, const Mad &req, uint16_t status);

    Answer class_port_info(const Mad &req);
    Answer node_records(const Mad &req);
    Answer port_info_records(const Mad &req);
    Answer path_records(const MadAddress &from, const Mad &req);
    std::optional<sa::PathRecord> path_between(const sa::PathRecord &q, uint64_t mask, const Endport &s,
                                               const Endport &d) const;
    Answer mcmember(const MadAddress &from, const Mad &req);
    void mft_changed(uint16_t mlid);

    // Duplicate requests: the last answers, keyed by requester and TID.
    struct Cached {
        std::tuple<uint16_t, uint32_t, uint64_t> key;
        Mad req;
        Mad resp;
    };
    const Cached *cached(const MadAddress &from, const Mad &req) const;

    IbSwitch &sw_;
    SubnetManager &sm_;
    Log &log_;
    Config cfg_;
    McastGroups groups_;
    RmppSender rmpp_;
    std::deque<Cached> cache_;
    Stats stats_;
    bool started_ = false;
    uint32_t psn_ = 0;
};

}  // namespace fabric
