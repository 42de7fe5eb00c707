#include "objects/counters.h"

#include "datapath/wqe.h"
#include "device.h"

namespace hca {

namespace {

using Out = ifc::query_q_counter_out;

// Where each count goes in QUERY_Q_COUNTER's outbox (QCounter order).
constexpr ifc::Field kOutField[] = {
    Out::rx_write_requests,
    Out::rx_read_requests,
    Out::rx_atomic_requests,
    Out::rx_dct_connect,
    Out::out_of_buffer,
    Out::out_of_sequence,
    Out::duplicate_request,
    Out::rnr_nak_retry_err,
    Out::packet_seq_err,
    Out::implied_nak_seq_err,
    Out::local_ack_timeout_err,
    Out::req_rnr_retries_exceeded,
    Out::resp_local_length_error,
    Out::req_local_length_error,
    Out::resp_local_qp_error,
    Out::local_operation_error,
    Out::resp_local_protection,
    Out::req_local_protection,
    Out::resp_cqe_error,
    Out::req_cqe_error,
    Out::req_mw_binding,
    Out::req_bad_response,
    Out::req_remote_invalid_request,
    Out::resp_remote_invalid_request,
    Out::req_remote_access_errors,
    Out::resp_remote_access_errors,
    Out::req_remote_operation_errors,
    Out::req_transport_retries_exceeded,
    Out::resp_cqe_flush_error,
    Out::req_cqe_flush_error,
};
static_assert(std::size(kOutField) == static_cast<size_t>(QCounter::Count));

// The count an error CQE's syndrome adds to besides req/resp_cqe_error.
bool syndrome_counter(uint8_t syndrome, bool requester, QCounter &out) {
    switch (syndrome) {
    case kSyndLocalLength: out = requester ? QCounter::ReqLocalLengthError : QCounter::RespLocalLengthError; return true;
    case kSyndLocalQpOp: out = requester ? QCounter::LocalOperationError : QCounter::RespLocalQpError; return true;
    case kSyndLocalProt: out = requester ? QCounter::ReqLocalProtection : QCounter::RespLocalProtection; return true;
    default: break;
    }
    if (!requester) {
        return false;
    }
    switch (syndrome) {
    case kSyndMwBind: out = QCounter::ReqMwBinding; return true;
    case kSyndBadResp: out = QCounter::ReqBadResponse; return true;
    case kSyndRemoteInvalReq: out = QCounter::ReqRemoteInvalidRequest; return true;
    case kSyndRemoteAccess: out = QCounter::ReqRemoteAccessErrors; return true;
    case kSyndRemoteOp: out = QCounter::ReqRemoteOperationErrors; return true;
    case kSyndTransportRetryExc: out = QCounter::ReqTransportRetriesExceeded; return true;
    case kSyndRnrRetryExc: out = QCounter::ReqRnrRetriesExceeded; return true;
    default: return false;
    }
}

}  // namespace

void QCounterTable::reset() {
    sets_.reset();
    live_.reset();
    counts_ = {};
}

void QCounterTable::add_error_cqe(uint32_t set, bool requester, uint8_t syndrome) {
    if (syndrome == kSyndWrFlush) {
        add(set, requester ? QCounter::ReqCqeFlushError : QCounter::RespCqeFlushError);
        return;
    }
    add(set, requester ? QCounter::ReqCqeError : QCounter::RespCqeError);
    if (QCounter c; syndrome_counter(syndrome, requester, c)) {
        add(set, c);
    }
}

void QCounterTable::cmd_alloc(CmdCtx &c) {
    sets_.set_limit(1u + static_cast<uint32_t>(dev_.fw.caps().gen(ifc::cmd_hca_cap::max_qp_cnt)));
    auto set = sets_.alloc();
    if (!set) {
        c.fail(Status::NoRes, "all {} Q counter sets are in use", sets_.count());
        return;
    }
    counts_[*set] = {};
    live_.set(*set);
    c.set(ifc::alloc_q_counter_out::counter_set_id, *set);
    HCA_TRACE(dev_, obj_alloc_q_counter, .set = *set, .uid = c.get(ifc::alloc_q_counter_in::uid));
}

void QCounterTable::cmd_dealloc(CmdCtx &c) {
    const uint32_t set = static_cast<uint32_t>(c.get(ifc::dealloc_q_counter_in::counter_set_id));
    if (!sets_.release(set)) {
        c.fail(Status::BadParam, "Q counter set {} is not allocated", set);
        return;
    }
    live_.reset(set);
    HCA_TRACE(dev_, obj_dealloc_q_counter, .set = set);
}

void QCounterTable::cmd_query(CmdCtx &c) {
    using In = ifc::query_q_counter_in;
    const uint32_t set = static_cast<uint32_t>(c.get(In::counter_set_id));
    if (c.get(In::other_vport) || c.get(In::aggregate)) {
        // q_counter_other_vport / q_counter_aggregation are not advertised.
        c.fail(Status::BadParam, "other_vport/aggregate queries are not supported (vport {})", c.get(In::vport_number));
        return;
    }
    if (!exists(set)) {
        c.fail(Status::BadParam, "Q counter set {} is not allocated", set);
        return;
    }
    Counts &counts = counts_[set];
    for (size_t i = 0; i < counts.size(); ++i) {
        c.set(kOutField[i], counts[i]);
    }
    if (c.get(In::clear)) {
        counts = {};
    }
}

}  // namespace hca
