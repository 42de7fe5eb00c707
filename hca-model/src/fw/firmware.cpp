#include "fw/firmware.h"

#include <algorithm>

#include "device.h"

namespace hca {

namespace {

using Handler = void (*)(Device &, CmdCtx &);

struct CommandDesc {
    uint16_t opcode;
    Handler handler;
    uint32_t min_in;   // bytes the inbox must have: its fixed part, arrays of unknown length excluded
    uint32_t min_out;  // bytes the outbox must have, the same way
    HcaState state;    // lowest HCA state the command is valid in
};

#define CMD_OUT(op, in, min_out, state, call)                                        \
    CommandDesc {                                                                    \
        op, [](Device &d, CmdCtx &c) { call; }, ifc::in::fixed_bytes, min_out, state \
    }
#define CMD(op, in, out, state, call) CMD_OUT(op, in, ifc::out::fixed_bytes, state, call)

constexpr auto E = HcaState::Enabled;
constexpr auto I = HcaState::Initialized;

// Every command the device implements; anything else answers BAD_OP.
const CommandDesc kCommands[] = {
    CMD(kOpEnableHca, enable_hca_in, enable_hca_out, HcaState::Disabled, d.fw.enable_hca(c)),
    CMD(kOpDisableHca, disable_hca_in, disable_hca_out, HcaState::Disabled, d.fw.disable_hca(c)),
    CMD(kOpQueryIssi, query_issi_in, query_issi_out, E, d.fw.query_issi(c)),
    CMD(kOpSetIssi, set_issi_in, set_issi_out, E, d.fw.set_issi(c)),
    CMD(kOpQueryPages, query_pages_in, query_pages_out, E, d.fw.query_pages(c)),
    CMD(kOpManagePages, manage_pages_in, manage_pages_out, E, d.fw.manage_pages(c)),
    // The kernel reads the whole 4 KiB union; DEVX programs (rdma-core's
    // tests) ask for as much as they read, at least a capability layout.
    CMD_OUT(kOpQueryHcaCap, query_hca_cap_in, 16 + ifc::cmd_hca_cap::size_bytes, E, d.fw.query_hca_cap(c)),
    CMD(kOpSetHcaCap, set_hca_cap_in, set_hca_cap_out, E, d.fw.set_hca_cap(c)),
    CMD(kOpInitHca, init_hca_in, init_hca_out, E, d.fw.init_hca(c)),
    CMD(kOpTeardownHca, teardown_hca_in, teardown_hca_out, I, d.fw.teardown_hca(c)),
    CMD(kOpSetDriverVersion, set_driver_version_in, set_driver_version_out, I, d.fw.set_driver_version(c)),
    CMD(kOpQueryAdapter, query_adapter_in, query_adapter_out, E, d.fw.query_adapter(c)),
    CMD(kOpAccessReg, access_register_in, access_register_out, E, d.fw.access_reg(c)),
    CMD(kOpNop, nop_in, nop_out, E, d.fw.nop(c)),
    CMD(kOpAllocUar, alloc_uar_in, alloc_uar_out, I, d.uars.cmd_alloc_uar(c)),
    CMD(kOpDeallocUar, dealloc_uar_in, dealloc_uar_out, I, d.uars.cmd_dealloc_uar(c)),
    CMD(kOpCreateEq, create_eq_in, create_eq_out, I, d.eqs.cmd_create_eq(c)),
    CMD(kOpDestroyEq, destroy_eq_in, destroy_eq_out, I, d.eqs.cmd_destroy_eq(c)),
    CMD(kOpQueryEq, query_eq_in, query_eq_out, I, d.eqs.cmd_query_eq(c)),
    CMD(kOpAllocPd, alloc_pd_in, alloc_pd_out, I, d.pds.cmd_alloc_pd(c)),
    CMD(kOpDeallocPd, dealloc_pd_in, dealloc_pd_out, I, d.pds.cmd_dealloc_pd(c)),
    CMD(kOpAllocQCounter, alloc_q_counter_in, alloc_q_counter_out, I, d.qcounters.cmd_alloc(c)),
    CMD(kOpDeallocQCounter, dealloc_q_counter_in, dealloc_q_counter_out, I, d.qcounters.cmd_dealloc(c)),
    CMD(kOpQueryQCounter, query_q_counter_in, query_q_counter_out, I, d.qcounters.cmd_query(c)),
    CMD(kOpAllocXrcd, alloc_xrcd_in, alloc_xrcd_out, I, d.pds.cmd_alloc_xrcd(c)),
    CMD(kOpDeallocXrcd, dealloc_xrcd_in, dealloc_xrcd_out, I, d.pds.cmd_dealloc_xrcd(c)),
    CMD(kOpPageFaultResume, page_fault_resume_in, page_fault_resume_out, I, d.odp.cmd_page_fault_resume(c)),
    CMD(kOpAllocMemic, alloc_memic_in, alloc_memic_out, I, d.devmem.cmd_alloc_memic(c)),
    CMD(kOpDeallocMemic, dealloc_memic_in, dealloc_memic_out, I, d.devmem.cmd_dealloc_memic(c)),
    CMD(kOpCreateMkey, create_mkey_in, create_mkey_out, I, d.mkeys.cmd_create_mkey(c)),
    CMD(kOpDestroyMkey, destroy_mkey_in, destroy_mkey_out, I, d.mkeys.cmd_destroy_mkey(c)),
    CMD(kOpQueryMkey, query_mkey_in, query_mkey_out, I, d.mkeys.cmd_query_mkey(c)),
    CMD(kOpCreatePsv, create_psv_in, create_psv_out, I, d.psvs.cmd_create_psv(c)),
    CMD(kOpDestroyPsv, destroy_psv_in, destroy_psv_out, I, d.psvs.cmd_destroy_psv(c)),
    CMD(kOpQuerySpecialContexts, query_special_contexts_in, query_special_contexts_out, I,
        d.mkeys.cmd_query_special_contexts(c)),
    CMD(kOpCreateCq, create_cq_in, create_cq_out, I, d.cqs.cmd_create_cq(c)),
    CMD(kOpDestroyCq, destroy_cq_in, destroy_cq_out, I, d.cqs.cmd_destroy_cq(c)),
    CMD(kOpQueryCq, query_cq_in, query_cq_out, I, d.cqs.cmd_query_cq(c)),
    CMD(kOpModifyCq, modify_cq_in, modify_cq_out, I, d.cqs.cmd_modify_cq(c)),
    CMD(kOpCreateQp, create_qp_in, create_qp_out, I, d.qps.cmd_create_qp(c)),
    CMD(kOpDestroyQp, destroy_qp_in, destroy_qp_out, I, d.qps.cmd_destroy_qp(c)),
    CMD(kOpQueryQp, query_qp_in, query_qp_out, I, d.qps.cmd_query_qp(c)),
    CMD(kOpRst2InitQp, rst2init_qp_in, rst2init_qp_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOpInit2InitQp, init2init_qp_in, init2init_qp_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOpInit2RtrQp, init2rtr_qp_in, init2rtr_qp_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOpRtr2RtsQp, rtr2rts_qp_in, rtr2rts_qp_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOpRts2RtsQp, rts2rts_qp_in, rts2rts_qp_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOpSqerr2RtsQp, sqerr2rts_qp_in, sqerr2rts_qp_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOpSqd2RtsQp, sqd2rts_qp_in, sqd2rts_qp_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOp2ErrQp, qp_2err_in, qp_2err_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOp2RstQp, qp_2rst_in, qp_2rst_out, I, d.qps.cmd_modify_qp(c)),
    CMD(kOpAttachToMcg, attach_to_mcg_in, attach_to_mcg_out, I, d.qps.cmd_attach_mcg(c)),
    CMD(kOpDetachFromMcg, detach_from_mcg_in, detach_from_mcg_out, I, d.qps.cmd_detach_mcg(c)),
    CMD(kOpCreateDct, create_dct_in, create_dct_out, I, d.qps.cmd_create_dct(c)),
    CMD(kOpDestroyDct, destroy_dct_in, destroy_dct_out, I, d.qps.cmd_destroy_dct(c)),
    CMD(kOpDrainDct, drain_dct_in, drain_dct_out, I, d.qps.cmd_drain_dct(c)),
    CMD(kOpQueryDct, query_dct_in, query_dct_out, I, d.qps.cmd_query_dct(c)),
    CMD(kOpArmDctForKeyViolation, arm_dct_in, arm_dct_out, I, d.qps.cmd_arm_dct(c)),
    CMD(kOpCreateSq, create_sq_in, create_sq_out, I, d.qps.cmd_create_sq(c)),
    CMD(kOpModifySq, modify_sq_in, modify_sq_out, I, d.qps.cmd_modify_sq(c)),
    CMD(kOpDestroySq, destroy_sq_in, destroy_sq_out, I, d.qps.cmd_destroy_sq(c)),
    CMD(kOpQuerySq, query_sq_in, query_sq_out, I, d.qps.cmd_query_sq(c)),
    CMD(kOpCreateRmp, create_rmp_in, create_rmp_out, I, d.srqs.cmd_create_rmp(c)),
    CMD(kOpDestroyRmp, destroy_rmp_in, destroy_rmp_out, I, d.srqs.cmd_destroy_rmp(c)),
    CMD(kOpQueryRmp, query_rmp_in, query_rmp_out, I, d.srqs.cmd_query_rmp(c)),
    CMD(kOpModifyRmp, modify_rmp_in, modify_rmp_out, I, d.srqs.cmd_modify_rmp(c)),
    CMD(kOpCreateXrcSrq, create_xrc_srq_in, create_xrc_srq_out, I, d.srqs.cmd_create_xrc_srq(c)),
    CMD(kOpDestroyXrcSrq, destroy_xrc_srq_in, destroy_xrc_srq_out, I, d.srqs.cmd_destroy_xrc_srq(c)),
    CMD(kOpQueryXrcSrq, query_xrc_srq_in, query_xrc_srq_out, I, d.srqs.cmd_query_xrc_srq(c)),
    CMD(kOpArmXrcSrq, arm_xrc_srq_in, arm_xrc_srq_out, I, d.srqs.cmd_arm_xrc_srq(c)),
    CMD(kOpCreateSrq, create_srq_in, create_srq_out, I, d.srqs.cmd_create_srq(c)),
    CMD(kOpDestroySrq, destroy_srq_in, destroy_srq_out, I, d.srqs.cmd_destroy_srq(c)),
    CMD(kOpQuerySrq, query_srq_in, query_srq_out, I, d.srqs.cmd_query_srq(c)),
    CMD(kOpArmRq, arm_rq_in, arm_rq_out, I, d.srqs.cmd_arm_rq(c)),
    CMD(kOpCreateXrq, create_xrq_in, create_xrq_out, I, d.srqs.cmd_create_xrq(c)),
    CMD(kOpDestroyXrq, destroy_xrq_in, destroy_xrq_out, I, d.srqs.cmd_destroy_xrq(c)),
    CMD(kOpQueryXrq, query_xrq_in, query_xrq_out, I, d.srqs.cmd_query_xrq(c)),
    CMD(kOpCreateUctx, create_uctx_in, create_uctx_out, I, d.uctxs.cmd_create_uctx(c)),
    CMD(kOpDestroyUctx, destroy_uctx_in, destroy_uctx_out, I, d.uctxs.cmd_destroy_uctx(c)),
    CMD(kOpCreateUmem, create_umem_in, create_umem_out, I, d.umems.cmd_create_umem(c)),
    CMD(kOpDestroyUmem, destroy_umem_in, destroy_umem_out, I, d.umems.cmd_destroy_umem(c)),
    CMD(kOpMadIfc, mad_ifc_in, mad_ifc_out, I, d.port1.cmd_mad_ifc(c)),
    CMD(kOpQueryHcaVportContext, query_hca_vport_context_in, query_hca_vport_context_out, I,
        d.port1.cmd_query_hca_vport_context(c)),
};

#undef CMD
#undef CMD_OUT

const char *state_name(HcaState s) {
    switch (s) {
    case HcaState::Disabled: return "disabled";
    case HcaState::Enabled: return "enabled";
    case HcaState::Initialized: return "initialized";
    }
    return "?";
}

}  // namespace

Firmware::Firmware(Device &dev) : dev_(dev) {}

void Firmware::reset() {
    caps_.reset();
    state_ = HcaState::Disabled;
    issi_ = 0;
    pages_.clear();
    pages_wanted_ = 0;
    driver_version_.clear();
}

void Firmware::execute(CmdCtx &c) {
    const CommandDesc *desc = nullptr;
    for (const CommandDesc &d : kCommands) {
        if (d.opcode == c.opcode) {
            desc = &d;
            break;
        }
    }
    if (!desc) {
        c.fail(Status::BadOp, "opcode 0x{:x} is not implemented by this device", c.opcode);
        return;
    }
    if (c.in.size() < desc->min_in) {
        c.fail(Status::BadInputLen, "inlen {} is shorter than the {} bytes of the inbox", c.in.size(), desc->min_in);
        return;
    }
    if (c.out.size() < desc->min_out) {
        c.fail(Status::BadOutputLen, "outlen {} is shorter than the {} bytes of the outbox", c.out.size(),
               desc->min_out);
        return;
    }
    if (state_ < desc->state) {
        c.fail(Status::BadSysState, "the HCA is {}, the command needs it {}", state_name(state_),
               state_name(desc->state));
        return;
    }
    // Every command's first dword holds its uid (reserved, so 0, in the few
    // that have none): the kernel (0), the shared resources (0xffff) or a
    // user context that exists.
    c.uid = static_cast<uint16_t>(c.in[2] << 8 | c.in[3]);
    if (c.uid != 0 && c.uid != kSharedUid && !dev_.uctxs.live(c.uid)) {
        c.fail(Status::BadParam, "uid {} is not a user context", c.uid);
        return;
    }
    desc->handler(dev_, c);
}

std::string Firmware::info() const {
    return fmt::format("HCA: state={} issi={} pages_held={} pages_wanted={} driver_version=\"{}\"\n",
                       state_name(state_), issi_, pages_.size(), pages_wanted_, driver_version_);
}

}  // namespace hca
