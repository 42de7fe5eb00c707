#include "datapath/wqe.h"

#include <cstring>

#include "trace/trace.h"

namespace hca {

SqWqe SqWqe::decode(uint16_t index, std::span<const uint8_t> bytes) {
    CtrlSeg ctrl;
    std::memcpy(&ctrl, bytes.data(), sizeof(ctrl));
    const uint32_t hdr = ctrl.opmod_idx_opcode.get();
    SqWqe w;
    w.index = index;
    w.wqe_index = static_cast<uint16_t>(hdr >> 8);
    w.opcode = static_cast<uint8_t>(hdr);
    w.opmod = static_cast<uint8_t>(hdr >> 24);
    w.qpn = ctrl.qpn_ds.get() >> 8;
    w.fence = ctrl.fm_ce_se >> 5;
    w.ce = (ctrl.fm_ce_se >> 2) & 3;
    w.signaled = (ctrl.fm_ce_se & kCeCqUpdate) != 0;
    w.solicited = (ctrl.fm_ce_se & kCtrlSolicited) != 0;
    w.imm = ctrl.imm.get();
    w.bytes = bytes;
    return w;
}

uint64_t GatherList::length() const {
    uint64_t n = 0;
    for (const Sge &s : sges) {
        n += s.len;
    }
    return n;
}

// The names are declared once, in hca-model/trace-events (names wqe_opcode),
// for the trace and for `./hcasim trace decode`.
const char *wqe_opcode_name(uint8_t op) { return trace_name_wqe_opcode(op); }

const char *cqe_syndrome_name(uint8_t s) {
    switch (s) {
    case kSyndLocalLength: return "local length error";
    case kSyndLocalQpOp: return "local QP operation error";
    case kSyndLocalProt: return "local protection error";
    case kSyndWrFlush: return "WR flushed";
    case kSyndMwBind: return "memory window bind error";
    case kSyndBadResp: return "bad response";
    case kSyndLocalAccess: return "local access error";
    case kSyndRemoteInvalReq: return "remote invalid request";
    case kSyndRemoteAccess: return "remote access error";
    case kSyndRemoteOp: return "remote operation error";
    case kSyndTransportRetryExc: return "transport retry counter exceeded";
    case kSyndRnrRetryExc: return "RNR retry counter exceeded";
    case kSyndRemoteAborted: return "remote aborted";
    default: return "unknown syndrome";
    }
}

uint8_t cqe_vendor_syndrome(uint8_t syndrome, bool requester) {
    switch (syndrome) {
    case kSyndLocalLength:
    case kSyndLocalQpOp: return 0x68;
    case kSyndLocalProt: return requester ? 0x52 : 0x32;
    case kSyndWrFlush: return 0xf9;
    case kSyndRemoteInvalReq: return 0x8a;
    case kSyndRemoteAccess: return 0x88;
    case kSyndRemoteOp: return 0x89;
    case kSyndTransportRetryExc: return 0x81;
    case kSyndRnrRetryExc: return 0x82;
    default: return 0;
    }
}

}  // namespace hca
