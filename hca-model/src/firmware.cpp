#include "firmware.h"

#include <algorithm>

#include "device.h"

namespace hca {

namespace {

using Handler = void (*)(Device &, CmdCtx &);

struct CommandDesc {
    uint16_t opcode;
    Handler handler;
    uint32_t min_in;   // bytes the inbox must have (flexible arrays excluded)
    uint32_t min_out;  // bytes the outbox must have
    HcaState state;    // lowest HCA state the command is valid in
};

#define CMD(op, in, out, state, call) \
    CommandDesc { op, [](Device &d, CmdCtx &c) { call; }, ifc::in::size_bytes, ifc::out::size_bytes, state }

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
    CMD(kOpQueryHcaCap, query_hca_cap_in, query_hca_cap_out, E, d.fw.query_hca_cap(c)),
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
};

#undef CMD

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
        c.fail(Status::BAD_OP, "opcode 0x{:x} is not implemented by this device", c.opcode);
        return;
    }
    if (c.in.size() < desc->min_in) {
        c.fail(Status::BAD_INPUT_LEN, "inlen {} is shorter than the {} bytes of the inbox", c.in.size(),
               desc->min_in);
        return;
    }
    if (c.out.size() < desc->min_out) {
        c.fail(Status::BAD_OUTPUT_LEN, "outlen {} is shorter than the {} bytes of the outbox", c.out.size(),
               desc->min_out);
        return;
    }
    if (state_ < desc->state) {
        c.fail(Status::BAD_SYS_STATE, "the HCA is {}, the command needs it {}", state_name(state_),
               state_name(desc->state));
        return;
    }
    desc->handler(dev_, c);
}

std::string Firmware::info() const {
    return fmt::format("HCA: state={} issi={} pages_held={} pages_wanted={} driver_version=\"{}\"\n",
                       state_name(state_), issi_, pages_.size(), pages_wanted_, driver_version_);
}

}  // namespace hca
