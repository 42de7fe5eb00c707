// The device firmware: the command table and the HCA-level state (enable,
// ISSI, init, pages, capabilities, registers).  Each object family keeps its
// own command handlers in its own file (eq.cpp, uar.cpp, ...); this file
// dispatches to them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "fw/caps.h"
#include "fw/prm.h"
#include "ifc/field.h"

namespace hca {

class Device;

// One command in flight: the gathered inbox and the outbox being built.
struct CmdCtx {
    std::span<const uint8_t> in;  // inlen bytes (at least 16)
    std::vector<uint8_t> &out;    // outlen bytes (at least 16), zeroed
    uint16_t opcode = 0;
    uint16_t op_mod = 0;
    uint16_t uid = 0;  // the user context the command acts for (0: the kernel)
    unsigned slot = 0;
    Status status = Status::Ok;
    uint32_t syndrome = 0;
    std::string error;            // why status != OK, for the trace
    bool suppress_eqe = false;    // completion must not be signalled by an EQE

    uint64_t get(ifc::Field f) const { return f.end_byte() <= in.size() ? ifc::get(in.data(), f) : 0; }
    void set(ifc::Field f, uint64_t v) {
        if (f.end_byte() <= out.size()) {
            ifc::set(out.data(), f, v);
        }
    }
    // Byte access to a Block of the inbox / outbox, bounded by their lengths.
    std::span<const uint8_t> in_block(ifc::Block b) const {
        return b.byte() >= in.size() ? std::span<const uint8_t>{} : in.subspan(b.byte());
    }
    std::span<uint8_t> out_block(ifc::Block b) {
        return b.byte() >= out.size() ? std::span<uint8_t>{} : std::span<uint8_t>(out).subspan(b.byte());
    }

    // Fails the command with a PRM status.  The syndrome identifies the check
    // (a hash of its reason), as firmware syndromes do; the reason goes to the
    // trace.
    template <typename... Args>
    void fail(Status s, fmt::format_string<Args...> f, Args &&...args) {
        status = s;
        error = fmt::format(f, std::forward<Args>(args)...);
        syndrome = syndrome_of(fmt::string_view(f));
    }
    bool ok() const { return status == Status::Ok; }

    // The command may act on (destroy, modify, query, arm) object n of kind
    // what, created with obj_uid: its own, or any when it comes from the
    // kernel (uid 0). If not, the command fails (BAD_PARAM, the owner named).
    // role, if any, says which of the object's references it is ("send" CQ).
    bool may_touch(uint16_t obj_uid, std::string_view what, uint32_t n, std::string_view role = {}) {
        return owner_ok(uid == 0 || uid == obj_uid, obj_uid, what, n, role);
    }
    // The object it creates may name (use) it: also the kernel's (0) and the
    // shared ones (0xffff), as mlx5_ib's own XRC domains and SRQs under a
    // user's XRC QP, or the completion EQs.
    bool may_use(uint16_t obj_uid, std::string_view what, uint32_t n, std::string_view role = {}) {
        return owner_ok(uid == 0 || uid == obj_uid || obj_uid == 0 || obj_uid == kSharedUid, obj_uid, what, n, role);
    }

    bool owner_ok(bool ok, uint16_t obj_uid, std::string_view what, uint32_t n, std::string_view role) {
        if (!ok) {
            fail(Status::BadParam, "{}{}{} 0x{:x} belongs to user context {}, not {}", role, role.empty() ? "" : " ",
                 what, n, obj_uid, uid);
        }
        return ok;
    }

    static uint32_t syndrome_of(fmt::string_view reason) {
        uint32_t h = 2166136261u;  // FNV-1a of the check's message template
        for (char c : reason) {
            h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
        }
        return h;
    }
};

enum class HcaState : uint8_t { Disabled, Enabled, Initialized };

class Firmware {
  public:
    explicit Firmware(Device &dev);
    void reset();
    // Runs one command; fills ctx.status/out.
    void execute(CmdCtx &ctx);

    HcaState state() const { return state_; }
    Caps &caps() { return caps_; }
    const Caps &caps() const { return caps_; }
    uint16_t issi() const { return issi_; }
    size_t pages_held() const { return pages_.size(); }
    // The firmware asks for npages more pages (negative: gives them back)
    // with a PAGE_REQUEST EQE (a fault, fault/faults.h).
    void page_request(int32_t npages);
    std::string info() const;

    // Command handlers of the HCA level (fw_hca.cpp, fw_pages.cpp).
    void enable_hca(CmdCtx &c);
    void disable_hca(CmdCtx &c);
    void query_issi(CmdCtx &c);
    void set_issi(CmdCtx &c);
    void query_hca_cap(CmdCtx &c);
    void set_hca_cap(CmdCtx &c);
    void init_hca(CmdCtx &c);
    void teardown_hca(CmdCtx &c);
    void set_driver_version(CmdCtx &c);
    void query_adapter(CmdCtx &c);
    void access_reg(CmdCtx &c);
    void nop(CmdCtx &c);
    void query_pages(CmdCtx &c);
    void manage_pages(CmdCtx &c);

    // Pages the device asks for at boot and at INIT_HCA (QUERY_PAGES).
    static constexpr int32_t kBootPages = 8;
    static constexpr int32_t kInitPages = 32;
    static constexpr uint16_t kSupportedIssi = 0x3;  // ISSI 0 and 1

  private:
    void drop_hca_objects();

    Device &dev_;
    Caps caps_;
    HcaState state_ = HcaState::Disabled;
    uint16_t issi_ = 0;
    std::vector<uint64_t> pages_;  // given by MANAGE_PAGES, in order
    int32_t pages_wanted_ = 0;     // requested through QUERY_PAGES, not yet given
    std::string driver_version_;
};

}  // namespace hca
