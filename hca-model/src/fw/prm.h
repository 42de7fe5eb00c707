// PRM constants shared by the firmware and the data path: command status
// codes, delivery status, event types, command opcodes.
#pragma once

#include <cstdint>

namespace hca {

// Command outbox status (core/cmd.c cmd_status_str()).
enum class Status : uint8_t {
    Ok = 0x00,
    IntErr = 0x01,
    BadOp = 0x02,
    BadParam = 0x03,
    BadSysState = 0x04,
    BadRes = 0x05,
    ResBusy = 0x06,
    ExceedLim = 0x08,
    BadResState = 0x09,
    BadIndex = 0x0a,
    NoRes = 0x0f,
    BadQpState = 0x10,
    BadPkt = 0x30,
    BadSize = 0x40,
    BadInputLen = 0x50,
    BadOutputLen = 0x51,
};
const char *status_name(Status s);

// Command-queue delivery status, status_own bits 7:1 (cmd.c deliv_status_to_str()).
enum class Delivery : uint8_t {
    Ok = 0x00,
    SignatureErr = 0x01,
    TokenErr = 0x02,
    BadBlockNumber = 0x03,
    OutputPointerNotAligned = 0x04,
    InputPointerNotAligned = 0x05,
    FwInternalErr = 0x06,
    InputLenErr = 0x07,
    OutputLenErr = 0x08,
    ReservedNotZero = 0x09,
    BadCommandDescriptor = 0x10,
};
const char *delivery_name(Delivery d);

// EQE types (device.h MLX5_EVENT_TYPE_*).
enum EventType : uint8_t {
    kEventComp = 0x00,
    kEventPathMig = 0x01,
    kEventCommEst = 0x02,
    kEventSqDrained = 0x03,
    kEventCqError = 0x04,
    kEventWqCatastrophic = 0x05,
    kEventPathMigFailed = 0x07,
    kEventPortChange = 0x09,
    kEventCmd = 0x0a,
    kEventPageRequest = 0x0b,
    kEventPageFault = 0x0c,
    kEventWqInvalReq = 0x10,
    kEventWqAccessErr = 0x11,
    kEventSrqCatastrophic = 0x12,
    kEventSrqLastWqe = 0x13,
    kEventSrqRqLimit = 0x14,
    kEventDctDrained = 0x1c,
    kEventDctKeyViolation = 0x1d,
    kEventGeneral = 0x22,
};

// GENERAL_EVENT sub-types (device.h MLX5_GENERAL_SUBTYPE_*).
enum GeneralSubtype : uint8_t {
    kGeneralDelayDropTimeout = 0x1,
    kGeneralPciPowerChange = 0x5,
    kGeneralFwLivePatch = 0x7,
};

// Firmware command opcodes (mlx5_ifc.h MLX5_CMD_OP_*).
enum Opcode : uint16_t {
    kOpQueryHcaCap = 0x100,
    kOpQueryAdapter = 0x101,
    kOpInitHca = 0x102,
    kOpTeardownHca = 0x103,
    kOpEnableHca = 0x104,
    kOpDisableHca = 0x105,
    kOpQueryPages = 0x107,
    kOpManagePages = 0x108,
    kOpSetHcaCap = 0x109,
    kOpQueryIssi = 0x10a,
    kOpSetIssi = 0x10b,
    kOpSetDriverVersion = 0x10d,
    kOpCreateEq = 0x301,
    kOpDestroyEq = 0x302,
    kOpQueryEq = 0x303,
    kOpAllocUar = 0x802,
    kOpDeallocUar = 0x803,
    kOpAccessReg = 0x805,
    kOpNop = 0x80d,
    kOpCreateMkey = 0x200,
    kOpQueryMkey = 0x201,
    kOpDestroyMkey = 0x202,
    kOpQuerySpecialContexts = 0x203,
    kOpPageFaultResume = 0x204,
    kOpAllocMemic = 0x205,
    kOpDeallocMemic = 0x206,
    kOpCreatePsv = 0x600,
    kOpDestroyPsv = 0x601,
    kOpCreateCq = 0x400,
    kOpDestroyCq = 0x401,
    kOpQueryCq = 0x402,
    kOpModifyCq = 0x403,
    kOpCreateQp = 0x500,
    kOpDestroyQp = 0x501,
    kOpRst2InitQp = 0x502,
    kOpInit2RtrQp = 0x503,
    kOpRtr2RtsQp = 0x504,
    kOpRts2RtsQp = 0x505,
    kOpSqerr2RtsQp = 0x506,
    kOp2ErrQp = 0x507,
    kOp2RstQp = 0x50a,
    kOpQueryQp = 0x50b,
    kOpSqd2RtsQp = 0x50c,
    kOpMadIfc = 0x50d,
    kOpInit2InitQp = 0x50e,
    kOpCreateSrq = 0x700,
    kOpDestroySrq = 0x701,
    kOpQuerySrq = 0x702,
    kOpArmRq = 0x703,
    kOpCreateXrcSrq = 0x705,
    kOpDestroyXrcSrq = 0x706,
    kOpQueryXrcSrq = 0x707,
    kOpArmXrcSrq = 0x708,
    kOpCreateDct = 0x710,
    kOpDestroyDct = 0x711,
    kOpDrainDct = 0x712,
    kOpQueryDct = 0x713,
    kOpArmDctForKeyViolation = 0x714,
    kOpCreateXrq = 0x717,
    kOpDestroyXrq = 0x718,
    kOpQueryXrq = 0x719,
    kOpQueryHcaVportContext = 0x762,
    kOpAllocQCounter = 0x771,
    kOpDeallocQCounter = 0x772,
    kOpQueryQCounter = 0x773,
    kOpAllocPd = 0x800,
    kOpDeallocPd = 0x801,
    kOpAttachToMcg = 0x806,
    kOpDetachFromMcg = 0x807,
    kOpAllocXrcd = 0x80e,
    kOpDeallocXrcd = 0x80f,
    kOpCreateUctx = 0xa04,
    kOpDestroyUctx = 0xa06,
    kOpCreateUmem = 0xa08,
    kOpDestroyUmem = 0xa0a,
    kOpCreateSq = 0x904,
    kOpModifySq = 0x905,
    kOpDestroySq = 0x906,
    kOpQuerySq = 0x907,
    kOpCreateRmp = 0x90c,
    kOpModifyRmp = 0x90d,
    kOpDestroyRmp = 0x90e,
    kOpQueryRmp = 0x90f,
};
// Name as the driver prints it (core/cmd.c mlx5_command_str()).
const char *opcode_name(uint16_t opcode);

// The uid of objects shared by every user context (MLX5_SHARED_RESOURCE_UID):
// mlx5_core's completion EQs and mlx5_ib's port Q counters once user
// contexts (DEVX) exist.
inline constexpr uint16_t kSharedUid = 0xffff;

inline constexpr uint32_t kPageShift = 12;
inline constexpr uint64_t kPageSize = uint64_t{1} << kPageShift;

}  // namespace hca
