// Data-path layouts (include/linux/mlx5/qp.h, device.h, cq.h): WQE
// segments, the 64-byte CQE and the error CQE, as packed structures of
// big-endian fields with their sizes and key offsets asserted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "be.h"

namespace hca {

inline constexpr uint32_t kWqeBb = 64;      // send WQE basic block
inline constexpr uint32_t kInvalidLkey = 0x100;  // MLX5_INVALID_LKEY: end of a scatter list
inline constexpr uint32_t kInlineSeg = 0x80000000;

// mlx5_wqe_ctrl_seg
struct CtrlSeg {
    be32 opmod_idx_opcode;  // 31:24 opmod, 23:8 WQE index, 7:0 opcode
    be32 qpn_ds;            // 31:8 QPN, 5:0 DS (16-byte units)
    uint8_t signature;
    uint8_t rsvd[2];
    uint8_t fm_ce_se;       // 7:5 fence, 3:2 CE, 1 SE
    be32 imm;               // immediate / invalidate rkey / UMR mkey
};
static_assert(sizeof(CtrlSeg) == 16 && offsetof(CtrlSeg, qpn_ds) == 4);
// The DS (16-byte units) of the control segment a WQE starts with.
inline uint32_t wqe_ds(const uint8_t *wqe) {
    be32 qpn_ds;
    std::memcpy(&qpn_ds, wqe + offsetof(CtrlSeg, qpn_ds), sizeof(qpn_ds));
    return qpn_ds.get() & 0x3f;
}

// Send opcodes (device.h MLX5_OPCODE_*).
enum WqeOpcode : uint8_t {
    kWqeNop = 0x00,
    kWqeSendInval = 0x01,
    kWqeRdmaWrite = 0x08,
    kWqeRdmaWriteImm = 0x09,
    kWqeSend = 0x0a,
    kWqeSendImm = 0x0b,
    kWqeLso = 0x0e,
    kWqeRdmaRead = 0x10,
    kWqeAtomicCs = 0x11,
    kWqeAtomicFa = 0x12,
    kWqeAtomicMaskedCs = 0x14,
    kWqeAtomicMaskedFa = 0x15,
    kWqeBindMw = 0x18,
    kWqeConfigCmd = 0x1f,
    kWqeSetPsv = 0x20,  // datapath/sig_xfer.h
    kWqeUmr = 0x25,
    kWqeTagMatching = 0x28,  // a tag list operation (datapath/tm.h)
};
const char *wqe_opcode_name(uint8_t op);
// RDMA READ and the atomics: the operations that use a read credit.
inline bool wqe_reads_remote(uint8_t op) {
    return op == kWqeRdmaRead || op == kWqeAtomicCs || op == kWqeAtomicFa || op == kWqeAtomicMaskedCs ||
           op == kWqeAtomicMaskedFa;
}

inline constexpr uint8_t kCeCqUpdate = 2 << 2;  // MLX5_WQE_CTRL_CQ_UPDATE
inline constexpr uint8_t kCtrlSolicited = 1 << 1;

// A send WQE as the send queue fetched it: its control segment decoded and
// its ds * 16 bytes (which stay valid until the next fetch).
struct SqWqe {
    uint16_t index = 0;      // the slot it was fetched from
    uint16_t wqe_index = 0;  // the index the WQE itself carries
    uint8_t opcode = 0;
    uint8_t opmod = 0;
    uint32_t qpn = 0;        // the QPN the WQE names
    uint8_t fence = 0;
    uint8_t ce = 0;
    bool signaled = false;   // a CQE is asked for
    bool solicited = false;
    uint32_t imm = 0;
    std::span<const uint8_t> bytes;
    static SqWqe decode(uint16_t index, std::span<const uint8_t> bytes);
};

// One piece of a message: a data pointer (read or written through a memory
// key) or, in a gather list, inline bytes.
struct Sge {
    uint32_t lkey;
    uint64_t addr;  // for inline pieces: offset into GatherList::inline_data
    uint32_t len;   // a signature key's: the wire bytes (datapath/sig_xfer.h)
    bool inl = false;
    bool sig = false;  // through a signature key
};

// Most work requests carry one or two entries: those stay inside the list,
// no heap allocation per WQE.
using SgeList = boost::container::small_vector<Sge, 2>;

// The bytes a send message is made of, in WQE order.
struct GatherList {
    SgeList sges;
    std::vector<uint8_t> inline_data;
    uint64_t length() const;
    void clear() {
        sges.clear();
        inline_data.clear();
    }
};

// mlx5_av, the UD datagram segment.
struct AvSeg {
    be32 qkey;
    be32 reserved;
    be32 dqp_dct;        // 31 extended AV, 23:0 remote QPN
    uint8_t stat_rate_sl;  // 7:4 static rate, 3:0 SL
    uint8_t fl_mlid;       // 7 force loopback, 6:0 source path bits
    be16 rlid;
    uint8_t reserved0[4];
    uint8_t rmac[6];
    uint8_t tclass;
    uint8_t hop_limit;
    be32 grh_gid_fl;     // 30 GRH, 27:20 source GID index, 19:0 flow label
    uint8_t rgid[16];
};
static_assert(sizeof(AvSeg) == 48 && offsetof(AvSeg, rlid) == 0x0e && offsetof(AvSeg, grh_gid_fl) == 0x1c);

// mlx5_wqe_eth_seg: after the datagram segment and a 16-byte pad
// (mlx5_wqe_eth_pad) on an IPoIB offload QP. The inline header starts at
// inline_hdr_start and runs on past the segment, padded to 16 bytes.
struct EthSeg {
    uint8_t swp_offsets[4];
    uint8_t cs_flags;
    uint8_t swp_flags;
    be16 mss;
    be32 flow_table_metadata;
    be16 inline_hdr_sz;
    uint8_t inline_hdr_start[2];
};
static_assert(sizeof(EthSeg) == 16 && offsetof(EthSeg, inline_hdr_sz) == 12);
inline constexpr size_t kEthPadLen = 16;

struct DataSeg {
    be32 byte_count;
    be32 lkey;
    be64 addr;
};
static_assert(sizeof(DataSeg) == 16);

struct RaddrSeg {
    be64 raddr;
    be32 rkey;
    be32 reserved;
};
struct AtomicSeg {
    be64 swap_add;
    be64 compare;
};
struct XrcSeg {
    be32 xrc_srqn;
    uint8_t rsvd[12];
};
// SRQ WQE header (mlx5_wqe_srq_next_seg).
struct SrqNextSeg {
    uint8_t rsvd0[2];
    be16 next_wqe_index;
    uint8_t signature;
    uint8_t rsvd1[11];
};
static_assert(sizeof(RaddrSeg) == 16 && sizeof(AtomicSeg) == 16 && sizeof(XrcSeg) == 16 && sizeof(SrqNextSeg) == 16);

// mlx5_cqe64 (the fields the driver reads).
struct Cqe64 {
    uint8_t rsvd0[17];  // a tag-matching CQE: mlx5_tm_cqe, or the TMH (datapath/tm.h)
    uint8_t ml_path;
    uint8_t rsvd20[4];
    be16 slid;
    be32 flags_rqpn;   // 29:28 g (GRH), 27:24 SL, 23:0 source QPN
    uint8_t hds_ip_ext;
    uint8_t l4_l3_hdr_type;
    be16 vlan_info;
    be32 srqn;
    be32 imm_inval_pkey;
    uint8_t app;  // 1: tag matching (datapath/tm.h)
    uint8_t app_op;
    be16 app_info;
    be32 byte_cnt;
    be32 timestamp_h;
    be32 timestamp_l;
    be32 sop_drop_qpn;  // 31:24 WQE opcode (requester), 23:0 QPN
    be16 wqe_counter;
    uint8_t signature;
    uint8_t op_own;     // 7:4 CQE opcode, 3:2 format, 1 se, 0 owner
};
static_assert(sizeof(Cqe64) == 64 && offsetof(Cqe64, slid) == 0x16 && offsetof(Cqe64, srqn) == 0x20 &&
              offsetof(Cqe64, app) == 0x28 && offsetof(Cqe64, byte_cnt) == 0x2c &&
              offsetof(Cqe64, sop_drop_qpn) == 0x38);

struct ErrCqe {
    uint8_t rsvd0[32];
    be32 srqn;
    uint8_t rsvd1[18];
    uint8_t vendor_err_synd;
    uint8_t syndrome;
    be32 s_wqe_opcode_qpn;
    be16 wqe_counter;
    uint8_t signature;
    uint8_t op_own;
};
static_assert(sizeof(ErrCqe) == 64 && offsetof(ErrCqe, syndrome) == 0x37);

// A block signature error (mlx5_sig_err_cqe; rdma-core's mlx5_sigerr_cqe
// names sig_type and domain).
struct SigErrCqe {
    uint8_t rsvd0[16];
    be32 expected_trans_sig;
    be32 actual_trans_sig;
    be32 expected_reftag;
    be32 actual_reftag;
    be16 syndrome;
    uint8_t sig_type;  // 0: block
    uint8_t domain;    // 0: wire, 1: memory
    be32 mkey;
    be64 err_offset;
    uint8_t rsvd1[8];
    be32 qpn;
    uint8_t rsvd2[2];
    uint8_t signature;
    uint8_t op_own;
};
static_assert(sizeof(SigErrCqe) == 64 && offsetof(SigErrCqe, mkey) == 0x24 && offsetof(SigErrCqe, qpn) == 0x38);

// CQE opcodes (cq.h).
enum CqeOpcode : uint8_t {
    kCqeReq = 0,
    kCqeRespWrImm = 1,
    kCqeRespSend = 2,
    kCqeRespSendImm = 3,
    kCqeRespSendInv = 4,
    kCqeResizeCq = 5,
    kCqeSigErr = 12,
    kCqeReqErr = 13,
    kCqeRespErr = 14,
    kCqeInvalid = 15,
};

// Error CQE syndromes (cq.h MLX5_CQE_SYNDROME_*).
enum CqeSyndrome : uint8_t {
    kSyndLocalLength = 0x01,
    kSyndLocalQpOp = 0x02,
    kSyndLocalProt = 0x04,
    kSyndWrFlush = 0x05,
    kSyndMwBind = 0x06,
    kSyndBadResp = 0x10,
    kSyndLocalAccess = 0x11,
    kSyndRemoteInvalReq = 0x12,
    kSyndRemoteAccess = 0x13,
    kSyndRemoteOp = 0x14,
    kSyndTransportRetryExc = 0x15,
    kSyndRnrRetryExc = 0x16,
    kSyndRemoteAborted = 0x22,
    // Not a CQE syndrome: gather() or scatter() met a page that is not
    // present; the caller raises a page fault (datapath/odp.h) instead.
    kSyndPageFault = 0xfe,
};
const char *cqe_syndrome_name(uint8_t s);
// A page fault that could not be raised fails as a local protection error.
inline uint8_t fault_as_prot(uint8_t synd) {
    return synd == kSyndPageFault ? static_cast<uint8_t>(kSyndLocalProt) : synd;
}
// The vendor_err_synd byte a ConnectX puts next to a syndrome in an error
// CQE (requester: a REQ_ERR CQE; responder: RESP_ERR). The firmware's own
// code, not the PRM's; docs/FAULTS.md "Vendor syndromes" gives each value's
// source.
uint8_t cqe_vendor_syndrome(uint8_t syndrome, bool requester);

}  // namespace hca
