// The PRM state machine of a QP: every *2*_QP command, applying only the
// fields a transition requires or its opt_param_mask names (to a copy, so a
// refused modify changes nothing), and what entering a state starts or
// stops in the engine.
#include <cstring>

#include <fmt/format.h>

#include "device.h"
#include "objects/qp.h"

namespace hca {

using ifc::qpc;

namespace {

// Modify opcodes (fw/prm.h) and the state each starts from / leads to.
struct Transition {
    uint16_t opcode;
    const char *name;
    int from;  // -1: any state
    QpState to;
};

constexpr Transition kTransitions[] = {
    {kOpRst2InitQp, "RST2INIT", int(QpState::Rst), QpState::Init},
    {kOpInit2InitQp, "INIT2INIT", int(QpState::Init), QpState::Init},
    {kOpInit2RtrQp, "INIT2RTR", int(QpState::Init), QpState::Rtr},
    {kOpRtr2RtsQp, "RTR2RTS", int(QpState::Rtr), QpState::Rts},
    {kOpRts2RtsQp, "RTS2RTS", int(QpState::Rts), QpState::Rts},
    {kOpSqerr2RtsQp, "SQERR2RTS", int(QpState::Sqer), QpState::Rts},
    {kOpSqd2RtsQp, "SQD2RTS", int(QpState::Sqd), QpState::Rts},
    {kOp2ErrQp, "2ERR", -1, QpState::Err},
    {kOp2RstQp, "2RST", -1, QpState::Rst},
};

// opt_param_mask bits (qp.h MLX5_QP_OPTPAR_*).
enum : uint32_t {
    kOptAltPath = 1u << 0,
    kOptRre = 1u << 1,
    kOptRae = 1u << 2,
    kOptRwe = 1u << 3,
    kOptPkeyIndex = 1u << 4,
    kOptQkey = 1u << 5,
    kOptRnrTimeout = 1u << 6,
    kOptPrimaryPath = 1u << 7,
    kOptSraMax = 1u << 8,
    kOptRraMax = 1u << 9,
    kOptPmState = 1u << 10,
    kOptDrainSigerr = 1u << 11,  // INIT2INIT only (MLX5_QPC_OPT_MASK_INIT2INIT_DRAIN_SIGERR)
    kOptRetryCount = 1u << 12,
    kOptRnrRetry = 1u << 13,
    kOptAckTimeout = 1u << 14,
    kOptPriPort = 1u << 16,
    kOptCounterSetId = 1u << 25,
};

// The attributes a modify applied, against the port and the capabilities:
// P_Key index and port, and the outstanding RDMA READ/atomic depth
// (log_max_ra_req_qp, log_max_ra_res_qp; the responder keeps state for
// 2^log_rra_max requests).
bool modify_within_limits(const Qp &qp, const Caps &caps, CmdCtx &c) {
    if (c.opcode == kOpRst2InitQp || c.opcode == kOpInit2InitQp || c.opcode == kOpInit2RtrQp) {
        if (qp.path.pkey_index >= Port::kPkeyTableSize) {
            c.fail(Status::BadParam, "pkey_index {} beyond the P_Key table", qp.path.pkey_index);
            return false;
        }
        if (qp.path.port != 1) {
            c.fail(Status::BadParam, "port {} does not exist", qp.path.port);
            return false;
        }
    }
    const uint64_t max_res = caps.gen(ifc::cmd_hca_cap::log_max_ra_res_qp);
    const uint64_t max_req = caps.gen(ifc::cmd_hca_cap::log_max_ra_req_qp);
    if (qp.log_rra_max > max_res || qp.log_sra_max > max_req) {
        c.fail(Status::BadParam, "log_rra_max {} / log_sra_max {} exceed log_max_ra_res_qp {} / log_max_ra_req_qp {}",
               qp.log_rra_max, qp.log_sra_max, max_res, max_req);
        return false;
    }
    return true;
}

void apply_path(AddressPath &p, std::span<const uint8_t> in, ifc::Block ads) {
    auto f = [&](ifc::Field fld) {
        const ifc::Field g = ifc::in(ads, fld);
        return g.end_byte() <= in.size() ? ifc::get(in.data(), g) : 0;
    };
    p.pkey_index = static_cast<uint16_t>(f(ifc::ads::pkey_index));
    p.grh = f(ifc::ads::grh);
    p.mlid = static_cast<uint8_t>(f(ifc::ads::mlid));
    p.rlid = static_cast<uint16_t>(f(ifc::ads::rlid));
    p.ack_timeout = static_cast<uint8_t>(f(ifc::ads::ack_timeout));
    p.src_addr_index = static_cast<uint8_t>(f(ifc::ads::src_addr_index));
    p.stat_rate = static_cast<uint8_t>(f(ifc::ads::stat_rate));
    p.hop_limit = static_cast<uint8_t>(f(ifc::ads::hop_limit));
    p.tclass = static_cast<uint8_t>(f(ifc::ads::tclass));
    p.flow_label = static_cast<uint32_t>(f(ifc::ads::flow_label));
    p.sl = static_cast<uint8_t>(f(ifc::ads::sl));
    if (const uint8_t port = static_cast<uint8_t>(f(ifc::ads::vhca_port_num))) {
        p.port = port;
    }
    const ifc::Block rgid = ifc::in(ads, ifc::ads::rgid_rip);
    if (rgid.byte() + 16 <= in.size()) {
        std::memcpy(p.rgid.data(), in.data() + rgid.byte(), 16);
    }
}

// The QP context of a modify command's inbox: applies the fields each
// transition requires or its opt_param_mask names, and notes them for the
// trace.
class ModifyIn {
  public:
    explicit ModifyIn(CmdCtx &c)
        : c_(c), has_ctx_(c.in.size() >= ifc::rst2init_qp_in::size_bytes),
          opt_(has_ctx_ ? static_cast<uint32_t>(c.get(ifc::rst2init_qp_in::opt_param_mask)) : 0) {}
    uint32_t opt() const { return opt_; }
    const std::string &applied() const { return applied_; }

    // RST2INIT (required fields) and INIT2INIT (optional ones).
    void to_init(Qp &qp) {
        const bool rst = c_.opcode == kOpRst2InitQp;
        if (rst || (opt_ & kOptPkeyIndex)) pkey_index(qp);
        if (rst || (opt_ & kOptPriPort)) port(qp);
        if (rst ? qp.ud_like() : (opt_ & kOptQkey)) qkey(qp);
        if (rst ? qp.connected() : (opt_ & (kOptRre | kOptRwe | kOptRae))) access(qp);
        if (rst || (opt_ & kOptCounterSetId)) counter_set(qp);
        if (!rst && (opt_ & kOptDrainSigerr)) {
            qp.drain_sigerr = f(qpc::drain_sigerr);
            note(fmt::format("drain_sigerr={}", qp.drain_sigerr));
        }
    }

    void init2rtr(Qp &qp) {
        qp.mtu = static_cast<uint8_t>(f(qpc::mtu));
        qp.log_msg_max = static_cast<uint8_t>(f(qpc::log_msg_max));
        note(fmt::format("mtu={}", 128u << qp.mtu));
        if (qp.connected()) {
            qp.remote_qpn = static_cast<uint32_t>(f(qpc::remote_qpn));
            qp.next_rcv_psn = static_cast<uint32_t>(f(qpc::next_rcv_psn));
            note(fmt::format("remote_qpn=0x{:x} rq_psn=0x{:x}", qp.remote_qpn, qp.next_rcv_psn));
            primary(qp);
        }
        if (reliable(qp)) {
            qp.log_rra_max = static_cast<uint8_t>(f(qpc::log_rra_max));
            qp.min_rnr_nak = static_cast<uint8_t>(f(qpc::min_rnr_nak));
            note(fmt::format("log_rra_max={} min_rnr_nak={}", qp.log_rra_max, qp.min_rnr_nak));
        }
        if (opt_ & kOptPkeyIndex) pkey_index(qp);
        if (opt_ & kOptQkey) qkey(qp);
        if (opt_ & (kOptRre | kOptRwe | kOptRae)) access(qp);
        if (opt_ & kOptAltPath) apply_path(qp.alt_path, c_.in, kAlt);
        if (opt_ & kOptCounterSetId) counter_set(qp);
    }

    // RTR2RTS (required fields), and the optional fields of every *2RTS.
    void to_rts(Qp &qp) {
        if (c_.opcode == kOpRtr2RtsQp) {
            qp.next_send_psn = static_cast<uint32_t>(f(qpc::next_send_psn));
            note(fmt::format("sq_psn=0x{:x}", qp.next_send_psn));
            if (reliable(qp)) {
                qp.retry_count = static_cast<uint8_t>(f(qpc::retry_count));
                qp.rnr_retry = static_cast<uint8_t>(f(qpc::rnr_retry));
                qp.path.ack_timeout = static_cast<uint8_t>(path_field(ifc::ads::ack_timeout));
                qp.log_sra_max = static_cast<uint8_t>(f(qpc::log_sra_max));
                note(fmt::format("retry={} rnr_retry={} ack_timeout={} log_sra_max={}", qp.retry_count, qp.rnr_retry,
                                 qp.path.ack_timeout, qp.log_sra_max));
            }
        }
        if (opt_ & kOptQkey) qkey(qp);
        if (opt_ & (kOptRre | kOptRwe | kOptRae)) access(qp);
        if (opt_ & kOptRnrTimeout) qp.min_rnr_nak = static_cast<uint8_t>(f(qpc::min_rnr_nak));
        if (opt_ & kOptRetryCount) qp.retry_count = static_cast<uint8_t>(f(qpc::retry_count));
        if (opt_ & kOptRnrRetry) qp.rnr_retry = static_cast<uint8_t>(f(qpc::rnr_retry));
        if (opt_ & kOptAckTimeout) qp.path.ack_timeout = static_cast<uint8_t>(path_field(ifc::ads::ack_timeout));
        if (opt_ & kOptPrimaryPath) primary(qp);
        if (opt_ & kOptAltPath) apply_path(qp.alt_path, c_.in, kAlt);
        if (opt_ & kOptPmState) qp.pm_state = static_cast<uint8_t>(f(qpc::pm_state));
        if (opt_ & kOptSraMax) qp.log_sra_max = static_cast<uint8_t>(f(qpc::log_sra_max));
        if (opt_ & kOptRraMax) qp.log_rra_max = static_cast<uint8_t>(f(qpc::log_rra_max));
        if (opt_ & kOptCounterSetId) counter_set(qp);
    }

  private:
    static constexpr ifc::Block kCtx = ifc::rst2init_qp_in::qpc;
    static constexpr ifc::Block kPri = ifc::in(kCtx, qpc::primary_address_path);
    static constexpr ifc::Block kAlt = ifc::in(kCtx, qpc::secondary_address_path);

    static bool reliable(const Qp &qp) { return qp.reliable(); }
    uint64_t f(ifc::Field fld) const { return has_ctx_ ? c_.get(ifc::in(kCtx, fld)) : 0; }
    uint64_t path_field(ifc::Field fld) const { return has_ctx_ ? c_.get(ifc::in(kPri, fld)) : 0; }
    void note(const std::string &s) { applied_ += applied_.empty() ? s : " " + s; }

    void access(Qp &qp) {
        qp.rre = f(qpc::rre);
        qp.rwe = f(qpc::rwe);
        qp.rae = f(qpc::rae);
        qp.atomic_mode = static_cast<uint8_t>(f(qpc::atomic_mode));
        note(fmt::format("access={}{}{}", qp.rre ? "R" : "-", qp.rwe ? "W" : "-", qp.rae ? "A" : "-"));
    }
    void counter_set(Qp &qp) {
        qp.counter_set = static_cast<uint8_t>(f(qpc::counter_set_id));
        note(fmt::format("counter_set={}", qp.counter_set));
    }
    void qkey(Qp &qp) {
        qp.qkey = static_cast<uint32_t>(f(qpc::q_key));
        note(fmt::format("q_key=0x{:x}", qp.qkey));
    }
    void pkey_index(Qp &qp) {
        qp.path.pkey_index = static_cast<uint16_t>(path_field(ifc::ads::pkey_index));
        note(fmt::format("pkey_index={}", qp.path.pkey_index));
    }
    void port(Qp &qp) {
        if (const uint8_t p = static_cast<uint8_t>(path_field(ifc::ads::vhca_port_num))) {
            qp.path.port = p;
        }
    }
    void primary(Qp &qp) {
        const uint16_t pk = qp.path.pkey_index;
        apply_path(qp.path, c_.in, kPri);
        qp.path.pkey_index = pk;  // only with PKEY_INDEX
        note(fmt::format("dlid={} sl={} grh={} path_bits={}", qp.path.rlid, qp.path.sl, qp.path.grh, qp.path.mlid));
    }

    CmdCtx &c_;
    const bool has_ctx_;
    const uint32_t opt_;
    std::string applied_;
};

}  // namespace

void QpTable::cmd_modify_qp(CmdCtx &c) {
    const Transition *t = nullptr;
    for (const Transition &x : kTransitions) {
        if (x.opcode == c.opcode) {
            t = &x;
        }
    }
    const uint32_t qpn = static_cast<uint32_t>(c.get(ifc::rst2init_qp_in::qpn));
    Qp *qp = find_qp_for(c, qpn);
    if (!qp) {
        return;
    }
    if (!t) {
        c.fail(Status::BadOp, "opcode 0x{:x} is not a QP transition", c.opcode);
        return;
    }
    if (t->from >= 0 && int(qp->state) != t->from) {
        c.fail(Status::BadQpState, "{} on QP 0x{:x} in state {}", t->name, qpn, qp_state_name(qp->state));
        return;
    }
    // Apply to a copy: a refused modify changes nothing.
    Qp next = *qp;
    ModifyIn in(c);
    switch (c.opcode) {
    case kOpRst2InitQp:
    case kOpInit2InitQp:
        in.to_init(next);
        break;
    case kOpInit2RtrQp:
        in.init2rtr(next);
        break;
    case kOpRtr2RtsQp:
    case kOpRts2RtsQp:
    case kOpSqerr2RtsQp:
    case kOpSqd2RtsQp:
        in.to_rts(next);
        break;
    default:
        break;
    }
    if (next.counter_set != qp->counter_set && next.counter_set && !dev_.qcounters.exists(next.counter_set)) {
        c.fail(Status::BadParam, "counter_set_id {} is not an allocated Q counter set", next.counter_set);
        return;
    }
    if (!modify_within_limits(next, dev_.fw.caps(), c)) {
        return;
    }
    *qp = std::move(next);
    const QpState old = qp->state;
    qp->state = t->to;
    HCA_TRACE(dev_, qp_transition, .qpn = qpn, .type = qp_type_name(qp->st), .cmd = t->name, .from = qp_state_name(old),
              .to = qp_state_name(t->to), .opt = in.opt(), .applied = in.applied());
    entered(*qp, old);
}

// What entering qp.state from old starts or stops in the engine.
void QpTable::entered(Qp &qp, QpState old) {
    if (qp.state == QpState::Rst) {
        if (qp.flush_timer) {
            dev_.cancel_timer(qp.flush_timer);
            qp.flush_timer = 0;
        }
        qp.sq_ci = 0;
        qp.sigerr_draining = false;
        qp.drain_sigerr = false;
        qp.bf_wqes.clear();
        qp.rq_ci = 0;
        qp.rq_flushed = 0;
        rc_reset(qp);
    } else if (qp.state == QpState::Rtr && old == QpState::Init) {
        RcResponder::expect(qp, qp.next_rcv_psn);
    } else if (qp.state == QpState::Err && old != QpState::Err) {
        to_error(qp, "modify to error");
    } else if (qp.state == QpState::Rts && old != QpState::Rts) {
        req_.ready(qp, old == QpState::Rtr);
        sq_.process(qp);
    }
}

}  // namespace hca
