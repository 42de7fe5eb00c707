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
        case Status::Ok:
            return "OK";
        case Status::IntErr:
            return "internal error";
        case Status::BadOp:
            return "bad operation";
        case Status::BadParam:
            return "bad parameter";
        case Status::BadSysState:
            return "bad system state";
        case Status::BadRes:
            return "bad resource";
        case Status::ResBusy:
            return "resource busy";
        case Status::ExceedLim:
            return "limits exceeded";
        case Status::BadResState:
            return "bad resource state";
        case Status::BadIndex:
            return "bad index";
        case Status::NoRes:
            return "no resources";
        case Status::BadQpState:
            return "bad QP state";
        case Status::BadPkt:
            return "bad packet";
        case Status::BadSize:
            return "bad size";
        case Status::BadInputLen:
            return "bad input length";
        case Status::BadOutputLen:
            return "bad output length";
    }
    return "unknown status";
}

const char *delivery_name(Delivery d) {
    switch (d) {
        case Delivery::Ok:
            return "no errors";
        case Delivery::SignatureErr:
            return "signature error";
        case Delivery::TokenErr:
            return "token error";
        case Delivery::BadBlockNumber:
            return "bad block number";
        case Delivery::OutputPointerNotAligned:
            return "output pointer not aligned to block size";
        case Delivery::InputPointerNotAligned:
            return "input pointer not aligned to block size";
        case Delivery::FwInternalErr:
            return "firmware internal error";
        case Delivery::InputLenErr:
            return "command input length error";
        case Delivery::OutputLenErr:
            return "command output length error";
        case Delivery::ReservedNotZero:
            return "reserved fields not cleared";
        case Delivery::BadCommandDescriptor:
            return "bad command descriptor type";
    }
    return "unknown delivery status";
}

}  // namespace hca
