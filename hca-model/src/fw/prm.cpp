#include "fw/prm.h"

#include <algorithm>
#include <array>
#include <utility>

namespace hca {

namespace {

struct OpcodeName {
    uint16_t opcode;
    const char *name;
};

constexpr OpcodeName kOpcodeNames[] = {
#include "ifc/opcodes.gen.inc"
};

constexpr auto sorted_opcode_names() {
    std::array<OpcodeName, std::size(kOpcodeNames)> a{};
    std::copy(std::begin(kOpcodeNames), std::end(kOpcodeNames), a.begin());
    std::sort(a.begin(), a.end(), [](const OpcodeName &x, const OpcodeName &y) { return x.opcode < y.opcode; });
    return a;
}

constexpr auto kSortedOpcodeNames = sorted_opcode_names();

}  // namespace

const char *opcode_name(uint16_t opcode) {
    auto it = std::lower_bound(kSortedOpcodeNames.begin(), kSortedOpcodeNames.end(), opcode,
                               [](const OpcodeName &n, uint16_t op) { return n.opcode < op; });
    return it != kSortedOpcodeNames.end() && it->opcode == opcode ? it->name : "unknown command opcode";
}

const char *status_name(Status s) {
    switch (s) {
    case Status::OK: return "OK";
    case Status::INT_ERR: return "internal error";
    case Status::BAD_OP: return "bad operation";
    case Status::BAD_PARAM: return "bad parameter";
    case Status::BAD_SYS_STATE: return "bad system state";
    case Status::BAD_RES: return "bad resource";
    case Status::RES_BUSY: return "resource busy";
    case Status::LIM: return "limits exceeded";
    case Status::BAD_RES_STATE: return "bad resource state";
    case Status::BAD_INDEX: return "bad index";
    case Status::NO_RES: return "no resources";
    case Status::BAD_QP_STATE: return "bad QP state";
    case Status::BAD_PKT: return "bad packet";
    case Status::BAD_SIZE: return "bad size";
    case Status::BAD_INPUT_LEN: return "bad input length";
    case Status::BAD_OUTPUT_LEN: return "bad output length";
    }
    return "unknown status";
}

const char *delivery_name(Delivery d) {
    switch (d) {
    case Delivery::OK: return "no errors";
    case Delivery::SIGNATURE_ERR: return "signature error";
    case Delivery::TOKEN_ERR: return "token error";
    case Delivery::BAD_BLOCK_NUMBER: return "bad block number";
    case Delivery::OUTPUT_POINTER_NOT_ALIGNED: return "output pointer not aligned to block size";
    case Delivery::INPUT_POINTER_NOT_ALIGNED: return "input pointer not aligned to block size";
    case Delivery::FW_INTERNAL_ERR: return "firmware internal error";
    case Delivery::INPUT_LEN_ERR: return "command input length error";
    case Delivery::OUTPUT_LEN_ERR: return "command output length error";
    case Delivery::RESERVED_NOT_ZERO: return "reserved fields not cleared";
    case Delivery::BAD_COMMAND_DESCRIPTOR: return "bad command descriptor type";
    }
    return "unknown delivery status";
}

}  // namespace hca
