#include "fw/registers.h"

#include <algorithm>
#include <cstring>

#include "device.h"

namespace hca {

namespace {

struct RegisterDesc {
    uint16_t id;
    const char *name;
    uint32_t size;  // bytes the driver passes for this register
    void (Registers::*handler)(RegAccess &);
    bool writable;
};

const RegisterDesc kRegisters[] = {
    {kRegHostEndianness, "HOST_ENDIANNESS", 16, &Registers::host_endianness, true},
    {kRegMcam, "MCAM", ifc::mcam_reg::size_bytes, &Registers::mcam, false},
    {kRegMcqs, "MCQS", ifc::mcqs_reg::size_bytes, &Registers::mcqs, false},
    {kRegMcqi, "MCQI", ifc::mcqi_reg::size_bytes, &Registers::mcqi, false},
    {kRegPcap, "PCAP", ifc::pcap_reg::size_bytes, &Registers::pcap, true},
    {kRegNodeDesc, "NODE_DESC", 64, &Registers::node_desc, true},
    {kRegMpein, "MPEIN", ifc::mpein_reg::size_bytes, &Registers::mpein, false},
    {kRegMfrl, "MFRL", ifc::mfrl_reg::size_bytes, &Registers::mfrl, true},
};

// MFRL reset levels (driver.h MLX5_MFRL_REG_RESET_LEVEL*): level 0 is a
// live patch of a staged image, level 3 a reset with a PCI link toggle.
constexpr uint8_t kMfrlLevelLivePatch = 1 << 0;

// Firmware components (MCQS identifier): one boot image, fw.c MCQS_IDENTIFIER_BOOT_IMG.
constexpr uint16_t kComponentBootImg = 0x1;
constexpr uint8_t kMcqsUpdateIdle = 0x0;
constexpr uint8_t kMcqiInfoVersion = 0x1;

}  // namespace

void Registers::reset() { host_endianness_.fill(0); }

void Registers::access(CmdCtx &c) {
    const uint16_t id = static_cast<uint16_t>(c.get(ifc::access_register_in::register_id));
    const bool write = c.op_mod == 0;  // op_mod = !write
    const RegisterDesc *desc = nullptr;
    for (const RegisterDesc &d : kRegisters) {
        if (d.id == id) {
            desc = &d;
        }
    }
    if (!desc) {
        c.fail(Status::BadParam, "access register 0x{:x} ({}) is not implemented", id, write ? "write" : "read");
        return;
    }
    auto in = c.in_block(ifc::access_register_in::register_data);
    auto out = c.out_block(ifc::access_register_out::register_data);
    if (in.size() < desc->size && write) {
        c.fail(Status::BadInputLen, "{} write carries {} bytes, the register has {}", desc->name, in.size(),
               desc->size);
        return;
    }
    if (write && !desc->writable) {
        c.fail(Status::BadParam, "{} is read-only", desc->name);
        return;
    }
    // The reply of a read or a write is the whole register: an outbox that
    // cannot hold it is BAD_OUTPUT_LEN, for every register here, so no
    // handler writes past what the driver gave.
    if (out.size() < desc->size) {
        c.fail(Status::BadOutputLen, "{} needs {} bytes of register data, the outbox has {}", desc->name, desc->size,
               out.size());
        return;
    }
    // A read may carry less than the whole register (only its index
    // fields matter): the handlers see it zero-extended to the register's
    // size, so none reads past what the driver sent.
    std::span<const uint8_t> req = in;
    if (in.size() < desc->size) {
        request_.assign(desc->size, 0);
        std::copy(in.begin(), in.end(), request_.begin());
        req = request_;
    }
    // The reply starts as the request: index fields come back as given.
    std::copy_n(req.begin(), std::min(req.size(), out.size()), out.begin());
    RegAccess r{c, write, static_cast<uint32_t>(c.get(ifc::access_register_in::argument)), req, out};
    (this->*desc->handler)(r);
    if (c.ok()) {
        HCA_TRACE(dev_, cmd_access_reg, .reg = desc->name, .dir = write ? "write" : "read", .argument = r.argument);
    }
}

void Registers::host_endianness(RegAccess &r) {
    // byte 0: he (0 on little-endian hosts, core/main.c set_hca_ctrl())
    if (r.write) {
        std::copy_n(r.in.begin(), std::min(r.in.size(), host_endianness_.size()), host_endianness_.begin());
    }
    std::copy_n(host_endianness_.begin(), std::min(r.out.size(), host_endianness_.size()), r.out.begin());
}

void Registers::mcam(RegAccess &r) {
    const uint64_t group = ifc::get(r.out.data(), ifc::mcam_reg::access_reg_group);
    std::fill(r.out.begin() + ifc::mcam_reg::mng_access_reg_cap_mask.byte(), r.out.begin() + ifc::mcam_reg::size_bytes,
              0);
    if (group == 0) {
        // Registers 0x9000-0x907f: firmware component query (devlink info).
        uint8_t *mask = r.out.data() + ifc::mcam_reg::mng_access_reg_cap_mask.byte();
        ifc::set(mask, ifc::mcam_access_reg::mcqi, 1);
        ifc::set(mask, ifc::mcam_access_reg::mcqs, 1);
        // MFRL: the firmware reset levels. Since 6.12 mlx5_core sets up
        // its firmware-reset events (the live patch notice among them)
        // only when this bit is set (fw_reset.c mlx5_fw_reset_init()).
        ifc::set(mask, ifc::mcam_access_reg::mfrl, 1);
    }
    if (ifc::get(r.out.data(), ifc::mcam_reg::feature_group) == 0) {
        // Enhanced features: MPEIN answers the PCI power change event
        // (events.c mlx5_pcie_event()).
        uint8_t *features = r.out.data() + ifc::mcam_reg::mng_feature_cap_mask.byte();
        ifc::set(features, ifc::mcam_enhanced_features::pci_status_and_power, 1);
    }
}

void Registers::mcqs(RegAccess &r) {
    const uint64_t index = ifc::get(r.out.data(), ifc::mcqs_reg::component_index);
    if (index != 0) {
        r.cmd.fail(Status::BadParam, "MCQS component index {} does not exist (one component)", index);
        return;
    }
    ifc::set(r.out.data(), ifc::mcqs_reg::last_index_flag, 1);
    ifc::set(r.out.data(), ifc::mcqs_reg::identifier, kComponentBootImg);
    ifc::set(r.out.data(), ifc::mcqs_reg::component_status, 0);
    ifc::set(r.out.data(), ifc::mcqs_reg::component_update_state, kMcqsUpdateIdle);
}

void Registers::mcqi(RegAccess &r) {
    const uint64_t index = ifc::get(r.in.data(), ifc::mcqi_reg::component_index);
    const uint64_t type = ifc::get(r.in.data(), ifc::mcqi_reg::info_type);
    if (index != 0 || type != kMcqiInfoVersion) {
        r.cmd.fail(Status::BadParam, "MCQI component {} info type {} is not available", index, type);
        return;
    }
    const uint32_t data_off = ifc::mcqi_reg::data.byte();
    if (r.out.size() < data_off + ifc::mcqi_version::size_bytes) {
        r.cmd.fail(Status::BadOutputLen, "MCQI version needs {} bytes", data_off + ifc::mcqi_version::size_bytes);
        return;
    }
    uint8_t *v = r.out.data() + data_off;
    std::fill(v, v + ifc::mcqi_version::size_bytes, 0);
    // devlink prints running fw.version as %d.%d.%04d of bits 31:24, 23:16, 15:0.
    ifc::set(v, ifc::mcqi_version::version,
             uint32_t{kFwMajor} << 24 | uint32_t{kFwMinor} << 16 | kFwSubMinor);
    const std::string s = fmt::format("{}.{}.{}", kFwMajor, kFwMinor, kFwSubMinor);
    ifc::set(v, ifc::mcqi_version::version_string_length, s.size());
    std::memcpy(v + ifc::mcqi_version::version_string.byte(), s.data(), s.size());
    ifc::set(r.out.data(), ifc::mcqi_reg::info_size, ifc::mcqi_version::size_bytes);
    ifc::set(r.out.data(), ifc::mcqi_reg::data_size, ifc::mcqi_version::size_bytes);
}

// Port capability mask (core/port.c mlx5_set_port_caps(); ib_cm sets IsCM):
// the PortInfo CapabilityMask is the first word of port_capability_mask.
void Registers::pcap(RegAccess &r) {
    constexpr ifc::Field kCaps{ifc::pcap_reg::port_capability_mask.off, 32};
    const uint64_t port = ifc::get(r.in.data(), ifc::pcap_reg::local_port);
    if (port != 1) {
        r.cmd.fail(Status::BadParam, "PCAP for port {}", port);
        return;
    }
    if (r.write) {
        dev_.port1.set_cap_mask(static_cast<uint32_t>(ifc::get(r.in.data(), kCaps)));
    }
    ifc::set(r.out.data(), kCaps, dev_.port1.cap_mask());
}

// Node description (hw/main.c mlx5_ib_modify_device(), rdma-ndd).
void Registers::node_desc(RegAccess &r) {
    if (r.write) {
        dev_.port1.set_node_desc(r.in.data());
    }
    std::copy_n(dev_.port1.node_desc().begin(), std::min<size_t>(64, r.out.size()), r.out.begin());
}

// PCIe status of the function (MPEIN): the slot's power (pwr_status,
// pci_power) and the x16 link of the QEMU device's Link Capabilities.
void Registers::mpein(RegAccess &r) {
    const uint64_t index = ifc::get(r.in.data(), ifc::mpein_reg::pcie_index);
    const uint64_t depth = ifc::get(r.in.data(), ifc::mpein_reg::depth);
    if (index != 0 || depth != 0) {
        r.cmd.fail(Status::BadParam, "MPEIN pcie_index {} depth {}: one endpoint, at depth 0", index, depth);
        return;
    }
    ifc::set(r.out.data(), ifc::mpein_reg::link_width_enabled, 16);
    ifc::set(r.out.data(), ifc::mpein_reg::link_width_active, 16);
    ifc::set(r.out.data(), ifc::mpein_reg::num_of_pfs, 1);
    ifc::set(r.out.data(), ifc::mpein_reg::pwr_status, slot_power_status_);
    ifc::set(r.out.data(), ifc::mpein_reg::pci_power, slot_power_watts_);
}

void Registers::mfrl(RegAccess &r) {
    // Only a live patch is offered: a reset with a PCI link toggle (level 3)
    // needs the sync-reset handshake, which the device does not model, so
    // mlx5_core answers "devlink dev reload action fw_activate" with "FW
    // activate requires reboot" as it does for such a device.
    if (r.write) {
        const uint64_t level = ifc::get(r.in.data(), ifc::mfrl_reg::reset_level);
        if (level != kMfrlLevelLivePatch || ifc::get(r.in.data(), ifc::mfrl_reg::pci_sync_for_fw_update_start) ||
            ifc::get(r.in.data(), ifc::mfrl_reg::pci_sync_for_fw_update_resp)) {
            r.cmd.fail(Status::BadParam, "MFRL: reset level 0x{:x} (sync start {}, response {}) is not offered", level,
                       ifc::get(r.in.data(), ifc::mfrl_reg::pci_sync_for_fw_update_start),
                       ifc::get(r.in.data(), ifc::mfrl_reg::pci_sync_for_fw_update_resp));
            return;
        }
        // A live patch with no staged image: nothing to apply, no event.
    }
    std::fill(r.out.begin(), r.out.end(), 0);
    ifc::set(r.out.data(), ifc::mfrl_reg::reset_level, kMfrlLevelLivePatch);
}

}  // namespace hca
