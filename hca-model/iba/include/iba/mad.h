// Management datagrams (IBA Vol. 1 ch. 13-16): the common MAD header, SMPs
// (LID-routed and directed-route), SA records, and the attributes the SMA,
// the switch and the subnet manager use.  Offsets are bytes in the 256-byte
// MAD; fields are big-endian.
#pragma once

#include <array>
#include <cstdint>

#include "be.h"

namespace iba::mad {

inline constexpr size_t kSize = 256;
using Mad = std::array<uint8_t, kSize>;

// Common MAD header (IBA 13.4.3).
inline constexpr size_t kBaseVersion = 0;
inline constexpr size_t kMgmtClass = 1;
inline constexpr size_t kClassVersion = 2;
inline constexpr size_t kMethod = 3;        // R bit 7
inline constexpr size_t kStatus = 4;        // BE16; for DR SMPs bit 15 = D, 14:0 status
inline constexpr size_t kClassSpecific = 6; // BE16; DR SMP: hop pointer (6), hop count (7)
inline constexpr size_t kTid = 8;           // BE64
inline constexpr size_t kAttrId = 16;       // BE16
inline constexpr size_t kAttrMod = 20;      // BE32

// Management classes.
enum Class : uint8_t {
    kClassSubnLid = 0x01,
    kClassSubnAdm = 0x03,
    kClassPerf = 0x04,
    kClassBm = 0x05,
    kClassDevMgt = 0x06,
    kClassCm = 0x07,
    kClassSubnDr = 0x81,
};

// Methods.
enum Method : uint8_t {
    kGet = 0x01,
    kSet = 0x02,
    kSend = 0x03,
    kTrap = 0x05,
    kReport = 0x06,
    kTrapRepress = 0x07,
    kGetTable = 0x12,
    kGetTraceTable = 0x13,
    kGetMulti = 0x14,
    kDelete = 0x15,
    kResp = 0x80,
};

// MAD status (IBA 13.4.7): bits 4:2 invalid-field code.
enum Status : uint16_t {
    kStatusOk = 0x0000,
    kStatusBusy = 0x0001,
    kStatusRedirect = 0x0002,
    kStatusBadVersion = 0x0004,
    kStatusUnsupportedMethod = 0x0008,
    kStatusUnsupportedMethodAttr = 0x000c,
    kStatusInvalidField = 0x001c,
    // SA class-specific (IBA 15.2.1.1), bits 15:8.
    kSaNoResources = 0x0100,
    kSaReqInvalid = 0x0200,
    kSaNoRecords = 0x0300,
    kSaTooManyRecords = 0x0400,
    kSaInvalidGid = 0x0500,
    kSaInsufficientComponents = 0x0600,
};

// SMP (IBA 14.2.1): after the 24-byte header.
namespace smp {
inline constexpr size_t kMkey = 24;         // BE64
inline constexpr size_t kDrSlid = 32;       // BE16 (DR only)
inline constexpr size_t kDrDlid = 34;       // BE16
inline constexpr size_t kData = 64;         // 64 bytes
inline constexpr size_t kDataSize = 64;
inline constexpr size_t kInitialPath = 128; // 64 bytes (DR)
inline constexpr size_t kReturnPath = 192;  // 64 bytes (DR)
inline constexpr size_t kHopPtr = 6;
inline constexpr size_t kHopCnt = 7;
inline constexpr uint16_t kDirectionBit = 0x8000;  // in the status word of DR SMPs
}  // namespace smp

// Subnet management attributes.
enum Attr : uint16_t {
    kAttrClassPortInfo = 0x0001,
    kAttrNotice = 0x0002,
    kAttrInformInfo = 0x0003,
    kAttrNodeDescription = 0x0010,
    kAttrNodeInfo = 0x0011,
    kAttrSwitchInfo = 0x0012,
    kAttrGuidInfo = 0x0014,
    kAttrPortInfo = 0x0015,
    kAttrPKeyTable = 0x0016,
    kAttrSlToVlTable = 0x0017,
    kAttrVlArbitration = 0x0018,
    kAttrLinearForwardingTable = 0x0019,
    kAttrRandomForwardingTable = 0x001a,
    kAttrMulticastForwardingTable = 0x001b,
    kAttrSmInfo = 0x0020,
    kAttrLedInfo = 0x0031,
    kAttrPortInfoExtended = 0x0033,
    kAttrMlnxExtPortInfo = 0xff90,
    // hcasim's own (vendor-specific range, IBA 14.2.5): a switch's ports
    // cabled to another switch, bit k of byte k / 8 for port k.  The
    // built-in SM asks a switch before it believes that the node behind one
    // of its ports is a switch (a guest can answer NodeInfo as one).
    kAttrHcasimSwitchLinks = 0xff70,
};

// NodeInfo (IBA 14.2.5.3), offsets inside the SMP data.
namespace node_info {
inline constexpr size_t kBaseVersion = 0;
inline constexpr size_t kClassVersion = 1;
inline constexpr size_t kNodeType = 2;       // 1 CA, 2 switch, 3 router
inline constexpr size_t kNumPorts = 3;
inline constexpr size_t kSystemImageGuid = 4;
inline constexpr size_t kNodeGuid = 12;
inline constexpr size_t kPortGuid = 20;
inline constexpr size_t kPartitionCap = 28;  // BE16
inline constexpr size_t kDeviceId = 30;      // BE16
inline constexpr size_t kRevision = 32;      // BE32
inline constexpr size_t kLocalPortNum = 36;
inline constexpr size_t kVendorId = 37;      // 24 bits
inline constexpr uint8_t kTypeCa = 1;
inline constexpr uint8_t kTypeSwitch = 2;
}  // namespace node_info

// PortInfo (IBA 14.2.5.6), offsets inside the SMP data (ib_smi.h ib_port_info).
namespace port_info {
inline constexpr size_t kMkey = 0;             // BE64
inline constexpr size_t kGidPrefix = 8;        // BE64
inline constexpr size_t kLid = 16;             // BE16
inline constexpr size_t kMasterSmLid = 18;     // BE16
inline constexpr size_t kCapMask = 20;         // BE32
inline constexpr size_t kDiagCode = 24;        // BE16
inline constexpr size_t kMkeyLeasePeriod = 26; // BE16
inline constexpr size_t kLocalPortNum = 28;
inline constexpr size_t kLinkWidthEnabled = 29;
inline constexpr size_t kLinkWidthSupported = 30;
inline constexpr size_t kLinkWidthActive = 31;
inline constexpr size_t kLinkSpeedSupportedPortState = 32;  // 7:4 speed supported, 3:0 port state
inline constexpr size_t kPortPhysStateLinkDown = 33;        // 7:4 phys state, 3:0 link down default
inline constexpr size_t kMkeyProtLmc = 34;                  // 7:6 M_KeyProtect, 2:0 LMC
inline constexpr size_t kLinkSpeedActiveEnabled = 35;       // 7:4 active, 3:0 enabled
inline constexpr size_t kNeighborMtuMasterSmSl = 36;        // 7:4 NeighborMTU, 3:0 MasterSMSL
inline constexpr size_t kVlCapInitType = 37;                // 7:4 VLCap, 3:0 InitType
inline constexpr size_t kVlHighLimit = 38;
inline constexpr size_t kVlArbHighCap = 39;
inline constexpr size_t kVlArbLowCap = 40;
inline constexpr size_t kInitTypeReplyMtuCap = 41;          // 7:4 InitTypeReply, 3:0 MTUCap
inline constexpr size_t kVlStallHoqLife = 42;
inline constexpr size_t kOperVlFilters = 43;                // 7:4 OperationalVLs
inline constexpr size_t kMkeyViolations = 44;
inline constexpr size_t kPkeyViolations = 46;
inline constexpr size_t kQkeyViolations = 48;
inline constexpr size_t kGuidCap = 50;
inline constexpr size_t kClientReregSubnetTimeout = 51;     // 7 ClientReregister, 4:0 SubnetTimeOut
inline constexpr size_t kRespTimeValue = 52;
inline constexpr size_t kLocalPhyOverrunErrors = 53;
inline constexpr size_t kMaxCreditHint = 54;
inline constexpr size_t kLinkRoundTripLatency = 57;  // 24 bits
// Port states and physical states.
enum State : uint8_t { kNop = 0, kDown = 1, kInit = 2, kArmed = 3, kActive = 4 };
enum PhysState : uint8_t { kPhysSleep = 1, kPhysPolling = 2, kPhysDisabled = 3, kPhysTraining = 4, kPhysLinkUp = 5 };
// CapabilityMask bits (include/rdma/ib_mad.h IB_PORT_*).
inline constexpr uint32_t kCapIsSm = 1u << 1;
inline constexpr uint32_t kCapIsNoticeSup = 1u << 2;
inline constexpr uint32_t kCapIsTrapSup = 1u << 3;
inline constexpr uint32_t kCapIsAutoMigrationSup = 1u << 5;
inline constexpr uint32_t kCapIsSlMappingSup = 1u << 6;
inline constexpr uint32_t kCapIsMkeyNvram = 1u << 7;
inline constexpr uint32_t kCapIsPkeyNvram = 1u << 8;
inline constexpr uint32_t kCapIsLedInfoSup = 1u << 9;
inline constexpr uint32_t kCapIsSmDisabled = 1u << 10;
inline constexpr uint32_t kCapIsSysImageGuidSup = 1u << 11;
inline constexpr uint32_t kCapIsPkeySwExtPortTrapSup = 1u << 12;
inline constexpr uint32_t kCapIsCmSup = 1u << 16;
inline constexpr uint32_t kCapIsSnmpTunnelSup = 1u << 17;
inline constexpr uint32_t kCapIsDeviceManagementSup = 1u << 19;
inline constexpr uint32_t kCapIsVendorClassSup = 1u << 20;
inline constexpr uint32_t kCapIsDrNoticeSup = 1u << 21;
inline constexpr uint32_t kCapIsCapMaskNoticeSup = 1u << 22;
inline constexpr uint32_t kCapIsBootMgmtSup = 1u << 23;
inline constexpr uint32_t kCapIsLinkRoundTripLatencySup = 1u << 24;
inline constexpr uint32_t kCapIsClientReregSup = 1u << 25;
}  // namespace port_info

// SwitchInfo (IBA 14.2.5.4).
namespace switch_info {
inline constexpr size_t kLinearFdbCap = 0;        // BE16
inline constexpr size_t kRandomFdbCap = 2;        // BE16
inline constexpr size_t kMulticastFdbCap = 4;     // BE16
inline constexpr size_t kLinearFdbTop = 6;        // BE16
inline constexpr size_t kDefaultPort = 8;
inline constexpr size_t kDefaultMcastPrimaryPort = 9;
inline constexpr size_t kDefaultMcastNotPrimaryPort = 10;
inline constexpr size_t kLifeTimeValuePortStateChange = 11;  // 7:3 LifeTimeValue, 2 PortStateChange
inline constexpr size_t kLidsPerPort = 12;        // BE16
inline constexpr size_t kPartitionEnforcementCap = 14;  // BE16
inline constexpr size_t kFlags = 16;              // InboundEnf, OutboundEnf, FilterRaw..., EnhancedPort0 bit 3
inline constexpr size_t kMulticastFdbTop = 18;    // BE16
}  // namespace switch_info

// Performance management: PortCounters (IBA 16.1.3.5).
namespace perf {
inline constexpr size_t kData = 64;  // after the 40 reserved bytes of the PMA header
enum Attr : uint16_t {
    kClassPortInfo = 0x0001,
    kPortSamplesControl = 0x0010,
    kPortCounters = 0x0012,
    kPortCountersExtended = 0x001d,
};
}  // namespace perf

// Subnet administration (IBA 15.2).
namespace sa {
inline constexpr size_t kRmppHeader = 24;   // 12 bytes
inline constexpr size_t kSmKey = 36;        // BE64
inline constexpr size_t kAttrOffset = 44;   // BE16, in 8-byte units
inline constexpr size_t kCompMask = 48;     // BE64
inline constexpr size_t kData = 56;         // 200 bytes per packet
inline constexpr size_t kDataSize = 200;
enum Attr : uint16_t {
    kClassPortInfo = 0x0001,
    kNotice = 0x0002,
    kInformInfo = 0x0003,
    kNodeRecord = 0x0011,
    kPortInfoRecord = 0x0012,
    kSwitchInfoRecord = 0x0014,
    kLinearFdbRecord = 0x0015,
    kSmInfoRecord = 0x0018,
    kLinkRecord = 0x0020,
    kGuidInfoRecord = 0x0030,
    kServiceRecord = 0x0031,
    kPKeyTableRecord = 0x0033,
    kPathRecord = 0x0035,
    kMcMemberRecord = 0x0038,
    kMultiPathRecord = 0x003a,
};
// RMPP header fields (IBA 13.6.2), relative to kRmppHeader.
inline constexpr size_t kRmppVersion = 0;
inline constexpr size_t kRmppType = 1;       // 1 DATA, 2 ACK, 3 STOP, 4 ABORT
inline constexpr size_t kRmppRespTimeFlags = 2;  // 7:3 RRespTime, 2:0 flags (Active 0x1, First 0x2, Last 0x4)
inline constexpr size_t kRmppStatus = 3;
inline constexpr size_t kRmppSegment = 4;    // BE32 (DATA: segment number; ACK: segment number)
inline constexpr size_t kRmppPayloadLen = 8; // BE32 (DATA first: total length; last: length)
}  // namespace sa

// Well-known Q_Key of QP1 (IBA 13.5.3.3).
inline constexpr uint32_t kQp1Qkey = 0x80010000;

}  // namespace iba::mad
