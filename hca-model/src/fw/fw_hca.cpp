// HCA-level firmware commands: enable/disable, ISSI, capabilities,
// init/teardown, adapter query, driver version, access registers.
#include <algorithm>
#include <cstring>

#include "be.h"
#include "device.h"

namespace hca {

// Like the firmware, TEARDOWN_HCA, DISABLE_HCA and a re-enable destroy
// whatever the driver left behind: once the command has completed nothing
// of the old function DMAs, interrupts or transmits.
void Firmware::drop_hca_objects() {
    const size_t objs = dev_.qps.count() + dev_.srqs.count() + dev_.cqs.count() + dev_.mkeys.count() +
                        dev_.pds.pds() + dev_.pds.xrcds() + dev_.eqs.count() + dev_.uars.in_use();
    if (objs) {
        HCA_TRACE(dev_, cmd_teardown_drops, .qps = dev_.qps.count(), .srqs = dev_.srqs.count(), .cqs = dev_.cqs.count(),
                  .mkeys = dev_.mkeys.count(), .pds = dev_.pds.pds(), .xrcds = dev_.pds.xrcds(),
                  .eqs = dev_.eqs.count(), .uars = dev_.uars.in_use());
    }
    dev_.drop_objects();
}

void Firmware::enable_hca(CmdCtx &c) {
    if (c.get(ifc::enable_hca_in::function_id) != 0 || c.get(ifc::enable_hca_in::embedded_cpu_function)) {
        c.fail(Status::BadParam, "function_id {} / embedded_cpu_function {}: only the PF (0) exists",
               c.get(ifc::enable_hca_in::function_id), c.get(ifc::enable_hca_in::embedded_cpu_function));
        return;
    }
    if (state_ != HcaState::Disabled) {
        // A driver that lost its state (crash, kexec) starts over: the
        // function is reset as a fresh enable would find it.
        HCA_TRACE(dev_, cmd_enable_hca_reset, .reason = "ENABLE_HCA on an enabled function: resetting it");
        drop_hca_objects();
        pages_.clear();
        caps_.reset();
    }
    state_ = HcaState::Enabled;
    issi_ = 0;
    pages_wanted_ = kBootPages;
}

void Firmware::disable_hca(CmdCtx &c) {
    if (c.get(ifc::disable_hca_in::function_id) != 0) {
        c.fail(Status::BadParam, "function_id {}: only the PF (0) exists", c.get(ifc::disable_hca_in::function_id));
        return;
    }
    if (!pages_.empty()) {
        dev_.guest_error("DISABLE_HCA while the device still holds {} pages (never reclaimed)", pages_.size());
    }
    drop_hca_objects();
    pages_.clear();
    pages_wanted_ = 0;
    caps_.reset();
    state_ = HcaState::Disabled;
}

void Firmware::query_issi(CmdCtx &c) {
    c.set(ifc::query_issi_out::current_issi, issi_);
    c.set(ifc::query_issi_out::supported_issi_dw0, kSupportedIssi);
}

void Firmware::set_issi(CmdCtx &c) {
    const uint32_t issi = static_cast<uint32_t>(c.get(ifc::set_issi_in::current_issi));
    if (state_ != HcaState::Enabled) {
        c.fail(Status::BadSysState, "SET_ISSI after INIT_HCA");
        return;
    }
    if (issi >= 16 || !(kSupportedIssi >> issi & 1)) {
        c.fail(Status::BadParam, "ISSI {} is not supported (mask 0x{:x})", issi, kSupportedIssi);
        return;
    }
    issi_ = static_cast<uint16_t>(issi);
}

void Firmware::query_hca_cap(CmdCtx &c) {
    const uint16_t type = c.op_mod >> 1;
    const bool current = c.op_mod & 1;
    if (!caps_.supported(type)) {
        c.fail(Status::BadParam, "capability type 0x{:x} is not supported", type);
        return;
    }
    const auto &img = caps_.image(type, current);
    auto out = c.out_block(ifc::query_hca_cap_out::capability);
    std::memcpy(out.data(), img.data(), std::min(out.size(), img.size()));
}

void Firmware::set_hca_cap(CmdCtx &c) {
    const uint16_t type = c.op_mod >> 1;
    if (state_ != HcaState::Enabled) {
        c.fail(Status::BadSysState, "SET_HCA_CAP after INIT_HCA");
        return;
    }
    auto in = c.in_block(ifc::set_hca_cap_in::capability);
    if (in.size() < Caps::kCapBytes) {
        c.fail(Status::BadInputLen, "capability image is {} bytes, not {}", in.size(), Caps::kCapBytes);
        return;
    }
    if (std::string why = caps_.set(type, in.data()); !why.empty()) {
        c.fail(Status::BadParam, "SET_HCA_CAP refused: {}", why);
        return;
    }
    HCA_TRACE(dev_, cmd_set_hca_cap, .type = type, .log_max_qp = caps_.gen(ifc::cmd_hca_cap::log_max_qp),
              .pkey_table_size = caps_.gen(ifc::cmd_hca_cap::pkey_table_size));
}

void Firmware::init_hca(CmdCtx &c) {
    if (state_ != HcaState::Enabled) {
        c.fail(Status::BadSysState, "INIT_HCA on an initialized HCA");
        return;
    }
    if (pages_.size() < static_cast<size_t>(kBootPages + kInitPages)) {
        c.fail(Status::BadSysState, "INIT_HCA needs {} pages, {} were given", kBootPages + kInitPages, pages_.size());
        return;
    }
    state_ = HcaState::Initialized;
}

void Firmware::teardown_hca(CmdCtx &c) {
    const uint32_t profile = static_cast<uint32_t>(c.get(ifc::teardown_hca_in::profile));
    // 1: force close (needs force_teardown), 2: prepare fast teardown (needs
    // fast_teardown); neither capability is advertised.
    if (profile != 0) {
        c.fail(Status::BadParam, "teardown profile {} is not supported", profile);
        return;
    }
    drop_hca_objects();
    state_ = HcaState::Enabled;
    pages_wanted_ = 0;
}

void Firmware::set_driver_version(CmdCtx &c) {
    auto in = c.in_block(ifc::set_driver_version_in::driver_version);
    const size_t n = std::min<size_t>(in.size(), ifc::set_driver_version_in::driver_version.bytes());
    driver_version_.assign(reinterpret_cast<const char *>(in.data()), strnlen(reinterpret_cast<const char *>(in.data()), n));
    HCA_TRACE(dev_, cmd_driver_version, .version = driver_version_);
}

void Firmware::query_adapter(CmdCtx &c) {
    const ifc::Block blk = ifc::query_adapter_out::query_adapter_struct;
    c.set(ifc::in(blk, ifc::query_adapter_param_block::ieee_vendor_id), 0x0002c9);
    c.set(ifc::in(blk, ifc::query_adapter_param_block::vsd_vendor_id), HCA_MODEL_PCI_VENDOR_ID);
    auto psid = c.out_block(ifc::in(blk, ifc::query_adapter_param_block::vsd_contd_psid));
    std::memcpy(psid.data(), kBoardId, std::min<size_t>(std::strlen(kBoardId), psid.size()));
}

void Firmware::access_reg(CmdCtx &c) { dev_.regs.access(c); }

void Firmware::nop(CmdCtx &) {}

}  // namespace hca
