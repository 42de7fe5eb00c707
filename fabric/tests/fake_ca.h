// An in-process channel adapter for the fabric tests: plugged into a switch
// port like an emulated HCA, it answers SMPs from a small SMA (CA rules of
// IBA 14.2.2 for directed routes, NodeInfo/NodeDescription/PortInfo, the
// PortInfo state machine), records every Set(PortInfo), sends SA requests
// from QP1 and reassembles RMPP responses with ACKs, as the Linux ib_mad
// receiver does.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "event_loop.h"
#include "frame.h"
#include "ib_enums.h"
#include "mad_util.h"
#include "switch.h"

namespace fabric::test {

class FakeCa : public PortSink {
  public:
    struct Options {
        uint64_t node_guid = 0;
        uint64_t port_guid = 0;
        uint8_t port_num = 1;
        uint8_t mtu_cap = kMtu4096;
        bool answer_smps = true;       // false: the guest driver is not loaded
        uint8_t node_type = 1;         // NodeInfo:NodeType (2: a guest posing as a switch)
        bool client_rereg_sup = true;  // PortInfo:CapabilityMask bit 25
        std::string description = "fake CA";
        // RMPP receiver: segments per ACK window, and a segment to lose once.
        uint32_t rmpp_window = 4;
        uint32_t rmpp_drop_segment = 0;
        bool rmpp_ack = true;
        // Keep what arrives (tests); the fuzzer turns this off.
        bool record = true;
        // The M_Key this CA's SM puts in the SMPs it sends.
        uint64_t smp_mkey = 0;
    };
    struct PortInfoSet {
        PortState requested;  // PortState field of the Set
        uint16_t lid;
        uint16_t sm_lid;
        uint8_t sm_sl;
        uint8_t lmc;
        uint8_t neighbor_mtu;
        uint8_t subnet_timeout;
        uint8_t oper_vls;
        bool client_rereg;
        uint64_t gid_prefix;
        uint64_t mkey;
        uint16_t status;      // what the SMA answered
    };
    struct SaResponse {
        Mad header{};                // the (first) MAD
        std::vector<uint8_t> data;   // SA payload (records), RMPP reassembled
        uint16_t status = 0;
        uint8_t method = 0;
        bool rmpp = false;
        uint32_t segments = 0;
        MadAddress from;
    };
    struct Received {
        uint64_t id;
        std::vector<uint8_t> packet;
        uint8_t flags = 0;  // the link frame's (iba::link::kNoCrcs)
    };

    FakeCa(IbSwitch &sw, EventLoop &loop, uint8_t switch_port, const Options &opt);
    ~FakeCa() override;

    void connect();
    void disconnect();

    // PortSink
    bool deliver(const Frame &f) override;
    void link_state(bool up) override;

    // SMA state.
    PortState state() const { return state_; }
    bool link_up() const { return link_up_; }
    uint16_t lid() const { return lid_; }
    uint16_t sm_lid() const { return sm_lid_; }
    uint8_t neighbor_mtu() const { return neighbor_mtu_; }
    const std::vector<PortInfoSet> &sets() const { return sets_; }
    unsigned rereg_events() const { return rereg_events_; }
    // Called on a ClientReregister, before the Set is answered (a client
    // that registers again at once, as ib_ipoib does).
    std::function<void()> on_rereg;
    const std::array<uint16_t, 32> &pkeys() const { return pkeys_; }
    unsigned smps_answered() const { return smps_answered_; }
    void set_answer_smps(bool on) { opt_.answer_smps = on; }
    void force_state(PortState s) { state_ = s; }
    void set_lid(uint16_t lid) { lid_ = lid; }
    Options &options() { return opt_; }
    uint64_t port_guid() const { return opt_.port_guid; }
    iba::Gid gid() const;

    // QP1: an SA request (or any GMP) to the SM LID.  Returns the TID.
    uint64_t send_sa(uint8_t method, uint16_t attr, uint64_t comp_mask, std::span<const uint8_t> record,
                     uint64_t tid = 0, bool grh = false);
    // Sends an already built MAD from QP1 to LID dlid's QP1.
    void send_gmp(const Mad &m, uint16_t dlid, bool grh = false);
    std::vector<SaResponse> &sa_responses() { return sa_responses_; }
    const SaResponse *response_for(uint64_t tid) const;
    unsigned acks_sent() const { return acks_sent_; }

    // An SM on this CA (as opensm in a guest): a directed-route SMP along
    // path (path[0] unused, path[1] must be this CA's port).  Responses
    // that come back to this CA are collected.
    uint64_t send_dr_smp(std::span<const uint8_t> path, uint8_t method, uint16_t attr, uint32_t attr_mod,
                         std::span<const uint8_t> data = {}, uint16_t lrh_slid = iba::kPermissiveLid);
    std::vector<Mad> &smp_responses() { return smp_responses_; }
    // SMP requests that reached this CA (answered or not).
    const std::vector<Mad> &smp_requests() const { return smp_requests_; }
    const Mad *smp_response(uint64_t tid) const;

    // Data packets.
    void send_raw(std::vector<uint8_t> packet, uint64_t id = 0, uint8_t flags = 0);
    std::vector<uint8_t> ud_packet(uint16_t dlid, uint32_t dqpn, uint32_t qkey, size_t payload_len,
                                   bool grh = false, const iba::Gid &dgid = {}) const;
    void send_ud(uint16_t dlid, uint32_t dqpn, uint32_t qkey, size_t payload_len, bool grh = false,
                 const iba::Gid &dgid = {});
    std::vector<Received> &received() { return received_; }
    size_t received_data() const;  // non-VL15 packets received

  private:
    void handle(uint64_t id, std::vector<uint8_t> pkt, uint8_t flags);
    void handle_smp(const iba::PacketView &v, Mad m);
    uint16_t sma(Mad &m);
    void port_info(std::span<uint8_t> d) const;
    uint16_t port_info_set(std::span<const uint8_t> d);
    void handle_gmp(const iba::PacketView &v, const MadAddress &a, const Mad &m);
    void send_ack(const MadAddress &to, const Mad &data_seg, uint32_t seg, uint32_t newwin);

    IbSwitch &sw_;
    EventLoop &loop_;
    uint8_t sw_port_;
    Options opt_;
    bool attached_ = false;
    bool link_up_ = false;
    PortState state_ = PortState::Down;
    uint16_t lid_ = 0;
    uint16_t sm_lid_ = 0;
    uint8_t sm_sl_ = 0;
    uint8_t lmc_ = 0;
    uint8_t neighbor_mtu_ = kMtu256;
    uint8_t subnet_timeout_ = 0;
    uint8_t oper_vls_ = 1;
    uint64_t gid_prefix_ = 0;
    uint64_t mkey_ = 0;
    std::vector<PortInfoSet> sets_;
    unsigned rereg_events_ = 0;
    std::array<uint16_t, 32> pkeys_{0xffff};  // P_Key table block 0
    unsigned smps_answered_ = 0;
    uint64_t next_tid_ = 0x1000;
    uint64_t next_id_ = 1;
    std::vector<Received> received_;
    std::vector<SaResponse> sa_responses_;
    std::vector<Mad> smp_responses_;
    std::vector<Mad> smp_requests_;
    struct RmppRx {
        SaResponse resp;
        uint32_t expected = 1;
        uint32_t window_last = 1;
        bool done = false;
    };
    std::map<uint64_t, RmppRx> rmpp_rx_;
    std::set<uint32_t> dropped_once_;
    unsigned acks_sent_ = 0;
};

}  // namespace fabric::test
