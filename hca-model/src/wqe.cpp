#include "wqe.h"

namespace hca {

const char *wqe_opcode_name(uint8_t op) {
    switch (op) {
    case kWqeNop: return "NOP";
    case kWqeSendInval: return "SEND_INVAL";
    case kWqeRdmaWrite: return "RDMA_WRITE";
    case kWqeRdmaWriteImm: return "RDMA_WRITE_IMM";
    case kWqeSend: return "SEND";
    case kWqeSendImm: return "SEND_IMM";
    case kWqeLso: return "LSO";
    case kWqeRdmaRead: return "RDMA_READ";
    case kWqeAtomicCs: return "ATOMIC_CS";
    case kWqeAtomicFa: return "ATOMIC_FA";
    case kWqeAtomicMaskedCs: return "ATOMIC_MASKED_CS";
    case kWqeAtomicMaskedFa: return "ATOMIC_MASKED_FA";
    case kWqeBindMw: return "BIND_MW";
    case kWqeConfigCmd: return "CONFIG_CMD";
    case kWqeUmr: return "UMR";
    default: return "unknown";
    }
}

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

}  // namespace hca
