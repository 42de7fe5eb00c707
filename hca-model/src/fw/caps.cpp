#include "fw/caps.h"

#include <fmt/format.h>
#include <span>

#include "ifc/mlx5_ifc_extra.h"
#include "objects/cq.h"
#include "objects/devmem.h"

namespace hca {

namespace {

#define GEN(f, max, cur, settable) CapEntry{ifc::cmd_hca_cap::f, #f, max, cur, settable}

// General device capabilities (cmd_hca_cap).  Anything not listed reads 0.
// Why each value: docs/CAPABILITIES.md.
const CapEntry kGeneralCaps[] = {
    // Queue and object limits.
    GEN(log_max_srq_sz, 15, 15, false),
    GEN(log_max_qp_sz, 15, 15, false),
    GEN(log_max_qp, 18, 18, true),  // prof_sel 2 writes min(18, max)
    GEN(log_max_srq, 16, 16, false),
    GEN(log_max_cq_sz, 22, 22, false),
    GEN(log_max_cq, 16, 16, false),
    GEN(log_max_eq_sz, 22, 22, false),
    GEN(log_max_mkey, 16, 16, false),
    GEN(log_max_eq, 4, 4, false),  // 16 EQs: 4 async + up to 12 completion
    GEN(log_max_mrw_sz, 64, 64, false),
    GEN(log_max_klm_list_size, 16, 16, false),
    GEN(log_max_ra_req_qp, 4, 4, false),
    GEN(log_max_ra_res_qp, 4, 4, false),
    GEN(log_max_ra_req_dc, 4, 4, false),
    GEN(log_max_ra_res_dc, 4, 4, false),
    GEN(log_max_msg, 30, 30, false),
    GEN(log_max_mcg, 12, 12, false),
    GEN(max_qp_mcg, 240, 240, false),
    GEN(log_max_pd, 16, 16, false),
    GEN(log_max_xrcd, 8, 8, false),
    GEN(log_max_rmp, 16, 16, false),
    GEN(log_max_rq, 16, 16, false),
    GEN(log_max_sq, 16, 16, false),  // SQ objects of local work (objects/sq.cpp)
    GEN(max_wqe_sz_sq, 1024, 1024, false),
    GEN(max_wqe_sz_rq, 512, 512, false),
    GEN(gid_table_size, 8, 8, false),
    GEN(pkey_table_size, 0, 0, true),  // encoded: 0 = 128 entries
    // Port and transport.
    GEN(port_type, 0, 0, false),  // InfiniBand
    GEN(num_ports, 1, 1, false),
    GEN(local_ca_ack_delay, 16, 16, false),
    GEN(xrc, 1, 1, false),
    GEN(ud, 1, 1, false),
    GEN(uc, 1, 1, false),
    GEN(rc, 1, 1, false),
    GEN(dct, 1, 1, true),  // DCI and DCT (objects/dct.cpp); set_caps() copies it from MAX
    GEN(cqe_version, 0, 0, false),
    // Tag matching on RC (datapath/tm.h): XRQs with a matching list of
    // 2^10 entries (1023 tags), rendezvous offload (the responder reads
    // the payload and sends the FIN itself).
    GEN(tag_matching, 1, 1, false),
    GEN(rndv_offload_rc, 1, 1, false),
    GEN(log_tag_matching_list_sz, 10, 10, false),
    // Memory registration through UMR WQEs (MR cache, fast registration,
    // IB_DEVICE_MEM_MGT_EXTENSIONS) of direct MTT keys and indirect KLM and
    // KSM keys (memory windows type 1 and 2 with imaicl; implicit on-demand
    // paging: a KSM key over the address space whose entries name 1 GiB MTT
    // children or the null mkey, fixed_buffer_size), with translation
    // offsets beyond 16 bits (umr_extended_translation_offset).
    GEN(umr_modify_entity_size_disabled, 0, 0, false),
    GEN(umr_modify_atomic_disabled, 0, 0, false),
    GEN(umr_indirect_mkey_disabled, 0, 0, false),
    GEN(umr_extended_translation_offset, 1, 1, false),
    GEN(fixed_buffer_size, 1, 1, false),
    GEN(null_mkey, 1, 1, false),  // QUERY_SPECIAL_CONTEXTS: MkeyTable::kNullMkey
    GEN(imaicl, 1, 1, false),
    GEN(log_pg_sz, 12, 12, false),
    // UAR and doorbells: 4 KiB UAR pages, BlueFlame with 2 x 256-byte
    // half-buffers per bfreg (the WQE in a BlueFlame write is executed).
    GEN(bf, 1, 1, false),
    GEN(log_bf_reg_size, 9, 9, false),
    GEN(log_uar_page_sz, 0, 0, true),
    GEN(uar_4k, 0, 0, true),
    GEN(num_of_uars_per_page, 1, 1, false),
    // Firmware interface.
    GEN(driver_version, 1, 1, false),
    GEN(cmdif_checksum, 0, 0, true),
    GEN(mcam_reg, 1, 1, false),                    // MCAM: MCQS/MCQI for devlink info
    GEN(general_notification_event, 1, 1, false),  // GENERAL_EVENT EQEs (eq.c gather_async_events_mask())
    GEN(atomic, 1, 1, false),
    GEN(block_lb_mc, 1, 1, false),    // IB_QP_CREATE_BLOCK_MULTICAST_LOOPBACK (qpc.block_lb_mc)
    GEN(cq_resize, 1, 1, false),      // MODIFY_CQ op_mod 1 (ibv_resize_cq)
    GEN(cq_moderation, 1, 1, false),  // MODIFY_CQ period/count (ib_modify_cq)
    // IPoIB checksum offload and LSO on UD QPs with ulp_stateless_offload_mode
    // 1 (IB_DEVICE_UD_IP_CSUM, IBK_UD_TSO; datapath/ipoib_offload.h).
    GEN(ipoib_basic_offloads, 1, 1, false),
    GEN(cqe_128_always, 1, 1, false),  // cqe_sz 2: 128-byte CQEs written whole (mlx5dv CQE 128B padding)
    // CQE compression (objects/cq.h): responder CQEs of a burst as a title
    // and mini CQE arrays, in the hash, checksum and checksum/stride index
    // formats, for 64- and 128-byte CQEs; the basic layout only.
    GEN(cqe_compression, 1, 1, false),
    GEN(cqe_compression_128, 1, 1, false),
    GEN(mini_cqe_resp_stride_index, 1, 1, false),
    GEN(cqe_compression_max_num, CqTable::kMaxSession, CqTable::kMaxSession, false),
    // Signature handover (objects/sig.h, datapath/sig_xfer.h): signature
    // keys with a BSF of T10-DIF (CRC or IP checksum guard) or CRC32 block
    // signatures of 512, 520, 4096 and 4160 bytes in the memory and wire
    // domains, PSVs, SET_PSV WQEs and SIGERR CQEs naming their domain.
    GEN(sho, 1, 1, false),
    GEN(sigerr_cqe, 1, 1, false),
    // Signature pipelining: a QP with qpc.drain_sigerr stops after a
    // signature error and drains to SQD (SQD2RTS resumes it).
    GEN(drain_sigerr, 1, 1, false),
    CapEntry{ifc::extra::sigerr_domain_and_sig_type, "sigerr_domain_and_sig_type", 1, 1, false},
    GEN(device_memory, 1, 1, false),                     // the device_mem_cap page (kDevMemCaps)
    GEN(device_frequency_khz, 1000000, 1000000, false),  // internal_timer counts ns
    // On-demand paging: MTT entries carry access bits, a missing one is a
    // page fault (datapath/odp.h); the odp_cap page (kOdpCaps).
    GEN(pg, 1, 1, false),
    // Q counters (objects/counters.h): mlx5_ib's hw_counters per port and
    // per bound rdma counter, moving a bound RTS QP with RTS2RTS.
    GEN(max_qp_cnt, 255, 255, false),
    GEN(out_of_seq_cnt, 1, 1, false),
    GEN(retransmission_q_counters, 1, 1, false),
    GEN(enhanced_error_q_counters, 1, 1, false),
    GEN(rts2rts_qp_counters_set_id, 1, 1, false),
    // DEVX (objects/devx.h): user contexts, whose uid every command of a
    // process carries, and UMEMs; no user context capabilities (RAW_TX,
    // INTERNAL_DEV_RES), no UMEM with uid 0.
    GEN(log_max_uctx, 10, 10, false),
    GEN(log_max_umem, 16, 16, false),
};

#undef GEN
#define ATOMIC(f, max, cur, settable) CapEntry{ifc::atomic_caps::f, #f, max, cur, settable}

// Atomic capabilities: 8-byte compare-and-swap and fetch-and-add on QPs, in
// host byte order once the driver selects it (core/main.c handle_hca_cap_atomic()).
const CapEntry kAtomicCaps[] = {
    ATOMIC(atomic_req_8B_endianness_mode, 1, 0, true),
    ATOMIC(supported_atomic_req_8B_endianness_mode_1, 1, 1, false),
    ATOMIC(atomic_operations, 0x3, 0x3, false),  // MLX5_ATOMIC_OPS_CMP_SWAP | FETCH_ADD
    ATOMIC(atomic_size_qp, 0x8, 0x8, false),     // 8 bytes
};

#undef ATOMIC

// On-demand paging, transport page-fault scheme (datapath/odp.h): RC and
// XRC in every role, UD sends, DC sends (a DCI's requester) and a DCT's
// receives into its SRQ; not a DCT's RDMA targets (an RDMA fault names its
// QP as the token, and a DCT's responder context has no 24-bit number).
// mlx5_core enables what it may set to the maximum (main.c
// handle_hca_cap_odp()); the memory page-fault scheme (mem_page_fault) is
// not offered.
constexpr ifc::Field odp_field(ifc::Block transport, ifc::Field f) {
    return ifc::in(ifc::in(ifc::odp_cap::transport_page_fault_scheme_cap, transport), f);
}
#define ODP(t, f, max, cur, settable)                                                                           \
    CapEntry {                                                                                                  \
        odp_field(ifc::odp_scheme_cap::t, ifc::odp_per_transport_service_cap::f), #t "." #f, max, cur, settable \
    }

const CapEntry kOdpCaps[] = {
    ODP(rc_odp_caps, send, 1, 1, false),        ODP(rc_odp_caps, receive, 1, 1, false),
    ODP(rc_odp_caps, write, 1, 1, false),       ODP(rc_odp_caps, read, 1, 1, false),
    ODP(rc_odp_caps, atomic, 1, 1, false),      ODP(rc_odp_caps, srq_receive, 1, 0, true),
    ODP(ud_odp_caps, send, 1, 1, false),        ODP(xrc_odp_caps, send, 1, 0, true),
    ODP(xrc_odp_caps, receive, 1, 0, true),     ODP(xrc_odp_caps, write, 1, 0, true),
    ODP(xrc_odp_caps, read, 1, 0, true),        ODP(xrc_odp_caps, atomic, 1, 0, true),
    ODP(xrc_odp_caps, srq_receive, 1, 0, true), ODP(dc_odp_caps, send, 1, 0, true),
    ODP(dc_odp_caps, srq_receive, 1, 0, true),
};

#undef ODP
#define DEVMEM(f, v)                            \
    CapEntry {                                  \
        ifc::device_mem_cap::f, #f, v, v, false \
    }

// Device memory (objects/devmem.h): MEMIC in BAR0, allocated in 64-byte
// granules, no MEMIC operations (atomic ops through the BAR are CX-6 on).
const CapEntry kDevMemCaps[] = {
    DEVMEM(memic, 1),
    DEVMEM(log_min_memic_alloc_size, DevMem::kLogMinAlloc),
    DEVMEM(log_max_memic_addr_alignment, DevMem::kLogMaxAlignment),
    DEVMEM(memic_bar_start_addr, DevMem::kBarOffset),
    DEVMEM(memic_bar_size, DevMem::kBytes),
    DEVMEM(max_memic_size, DevMem::kBytes),
};

#undef DEVMEM

void fill(Caps::Image &img, std::span<const CapEntry> table, bool max) {
    img.fill(0);
    for (const CapEntry &e : table) {
        ifc::set(img.data(), e.field, max ? e.max : e.cur);
    }
}

std::span<const CapEntry> table_of(uint16_t type) {
    switch (type) {
    case kCapGeneral:
        return kGeneralCaps;
    case kCapOdp:
        return kOdpCaps;
    case kCapAtomic:
        return kAtomicCaps;
    case kCapDevMem:
        return kDevMemCaps;
    default:
        return {};
    }
}

}  // namespace

Caps::Caps() {
    pages_[kCapGeneral];
    pages_[kCapOdp];
    pages_[kCapAtomic];
    pages_[kCapDevMem];
    // Queried through DEVX by programs that look for flow steering before
    // they use it (rdma-core's flow tests): there is none, every field 0.
    pages_[kCapNicFlowTable];
    reset();
}

void Caps::reset() {
    for (auto &[type, page] : pages_) {
        fill(page.max, table_of(type), true);
        fill(page.cur, table_of(type), false);
    }
}

const Caps::Image &Caps::image(uint16_t type, bool current) const {
    const Page &p = pages_.at(type);
    return current ? p.cur : p.max;
}

std::string Caps::set(uint16_t type, const uint8_t *img) {
    auto it = pages_.find(type);
    if (it == pages_.end()) {
        return fmt::format("capability type 0x{:x} is not supported", type);
    }
    // Check everything first so a refused SET changes nothing.
    for (const CapEntry &e : table_of(type)) {
        const uint64_t v = ifc::get(img, e.field);
        if (e.settable && v > e.max) {
            return fmt::format("{} = {} exceeds the maximum {}", e.name, v, e.max);
        }
    }
    for (const CapEntry &e : table_of(type)) {
        if (e.settable) {
            ifc::set(it->second.cur.data(), e.field, ifc::get(img, e.field));
        }
    }
    return {};
}

}  // namespace hca
