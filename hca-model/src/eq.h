// Event queues: CREATE/DESTROY/QUERY_EQ, the EQE ring with its owner bit,
// arming and consumer-index doorbells at UAR +0x40/+0x48, and one MSI-X
// message (eqc.intr) per armed EQ that receives an EQE.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <map>
#include <string>

#include "pages.h"

namespace hca {

struct CmdCtx;
class Device;

struct Eq {
    uint32_t eqn = 0;
    uint8_t log_size = 0;
    uint32_t uar = 0;
    uint16_t intr = 0;
    uint8_t log_page_size = 0;
    PageList buf;
    std::bitset<256> events;  // event types this EQ receives
    uint32_t pi = 0;          // EQEs produced (the driver sees it mod 2^24)
    uint32_t ci = 0;          // consumer counter from the last doorbell (24 bits)
    bool armed = false;
    uint8_t status = 0;       // eqc.status: 0 OK, 0xa write failure / overflow
    uint64_t eqes = 0;
    uint64_t interrupts = 0;

    uint32_t nent() const { return 1u << log_size; }
    uint32_t outstanding() const { return (pi - ci) & 0xffffff; }
};

class EqTable {
  public:
    static constexpr unsigned kEqeSize = 64;
    static constexpr unsigned kEqeData = 0x20;  // 28 bytes of per-type data
    static constexpr uint8_t kStatusOk = 0x0;
    static constexpr uint8_t kStatusWriteFailure = 0xa;
    // eqc.st
    static constexpr uint8_t kStArmed = 0x9;
    static constexpr uint8_t kStFired = 0xa;

    explicit EqTable(Device &dev) : dev_(dev) {}
    void reset();

    void cmd_create_eq(CmdCtx &c);
    void cmd_destroy_eq(CmdCtx &c);
    void cmd_query_eq(CmdCtx &c);

    // EQ doorbell: value = eqn << 24 | consumer counter; arm at +0x40 only.
    void doorbell(uint32_t uar, bool arm, uint32_t value);

    // Writes an EQE to EQ eqn; false if it was dropped (no EQ, overflow).
    bool post(uint32_t eqn, uint8_t type, uint8_t sub_type, const uint8_t *data, size_t len);
    // Writes an EQE to the EQ subscribed to type (async events).
    bool post_event(uint8_t type, uint8_t sub_type, const uint8_t *data, size_t len);
    // Command completion EQE (type 0x0a) with the bitmask of slots.
    void post_cmd_completion(uint32_t slots);
    const Eq *subscriber(uint8_t type) const;
    Eq *find(uint32_t eqn);
    size_t count() const { return eqs_.size(); }
    std::string info() const;

  private:
    void fire(Eq &eq);

    Device &dev_;
    std::map<uint32_t, Eq> eqs_;
};

}  // namespace hca
