// Fault injection (docs/FAULTS.md): faults a user arms on purpose to reach
// the driver's error paths, through the C interface (hca_model_fault) from
// the CLI, QMP, the boot options or a guest test.
//
// A fault is written "KIND[:key=value,...]", e.g.
//   cmd-status:opcode=CREATE_CQ,status=BAD_PARAM,syndrome=0x1234
//   error-cqe:qpn=0x48,syndrome=0x4,every=3,count=2
// Two sorts of kinds:
//   - triggered faults wait at one point of the model (a command, a WQE, a
//     CQE, an EQE, an MSI-X message, a reset) and fire on the matches their
//     scope (opcode=, qpn=, cqn=, eqn=) and trigger (count=, every=,
//     prob= with seed=, for=MS) select;
//   - events act once, when armed or after=MS later (a health syndrome, a
//     page request, an affiliated or port event).
// Every arming, firing and clearing is a line of the "fault" trace
// category. Armed faults are the user's, not the guest's: they survive a
// device reset (an event still waiting for its after= time does not).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hca {

class Device;

enum class FaultKind : uint8_t {
    // Triggered.
    CmdStatus,    // a command completes with status= and syndrome=, not executed
    CmdDelivery,  // a command's delivery status (status_own) is delivery=, not executed
    CmdDelay,     // a command completes ms= later
    CmdDrop,      // a command never completes (the driver's timeout path)
    ErrorCqe,     // a send WQE completes with an error CQE of syndrome=; the QP goes to error
    WqeDmaError,  // fetching a send WQE fails as a DMA error would; the QP goes to error
    LostCqe,      // a CQE is not written
    LostEqe,      // an EQE is not written (scope eqn=, event= the EQE type, cqn= a completion EQE's CQ)
    LostMsix,     // an EQ's interrupt for a new EQE is not sent (the EQ is disarmed as if it had been)
    CqeDelay,     // a CQE (scope cqn=, qpn= its QP) and every later one of its CQ are written ms= later
    InitDelay,    // after a reset the device stays "initializing" for ms=
    // Events.
    HealthFatal,  // firmware dies with health syndrome= (rfr set): the fatal-error path
    HealthStall,  // the health counter stops, the device works on
    PageRequest,  // PAGE_REQUEST EQE: npages= more pages (negative: give back)
    QpEvent,      // an affiliated event type= on qpn= (error types move the QP to error)
    SrqEvent,     // SRQ limit or catastrophic error on srqn=
    CqError,      // a CQ error (syndrome= overrun or access) on cqn=: the CQ stops
    PortEvent,    // PORT_CHANGE EQE subtype= (lid, pkey, guid, client-rereg, ...)
    GeneralEvent, // GENERAL_EVENT EQE subtype= (pci-power with power= watts=, fw-live-patch, delay-drop)
    PciGone,      // the function falls off the bus (surprise removal); a new one ms= later
    Count
};

struct FaultInfo {
    FaultKind kind;
    const char *name;
    bool event;
    const char *keys;  // the arguments it takes
    const char *help;
};
const FaultInfo &fault_info(FaultKind k);

// Where a triggered fault is tested: what the model is doing.
struct FaultSite {
    int32_t opcode = -1;  // command opcode
    int64_t qpn = -1;
    int64_t cqn = -1;
    int64_t eqn = -1;
    int32_t event = -1;  // EQE type
};

struct Fault {
    uint32_t id = 0;
    FaultKind kind = FaultKind::CmdStatus;
    std::string text;  // as armed, for list and the trace
    // Trigger: fire on every `every`-th match, with probability prob, at
    // most `count` times (0: no limit), inside [from_ns, until_ns).
    uint32_t count = 1;
    uint32_t every = 1;
    double prob = 1.0;
    uint64_t rng = 0;
    int64_t after_ns = 0;
    int64_t window_ns = 0;  // for=: 0 none
    int64_t from_ns = 0;
    int64_t until_ns = INT64_MAX;
    // Scope (-1: any).
    FaultSite scope;
    int64_t srqn = -1;
    // Arguments.
    uint32_t status = 0;
    uint32_t syndrome = 0;
    uint32_t delivery = 0;
    int64_t ms = 0;
    int32_t npages = 0;
    uint8_t type = 0;
    uint8_t subtype = 0;
    uint8_t power = 1;     // general-event pci-power: MPEIN pwr_status
    uint16_t watts = 75;   // ... and pci_power
    // Counts.
    uint64_t matches = 0;
    uint64_t fired = 0;
};

struct FaultSpecError {
    std::string what;
};

// Parses "KIND[:key=value,...]" into f (not yet armed). Throws FaultSpecError.
Fault parse_fault(std::string_view spec);

class FaultTable {
  public:
    static constexpr size_t kMaxArmed = 64;

    explicit FaultTable(Device &dev) : dev_(dev) {}

    // The one entry point of every source: "KIND[:...]" arms a fault,
    // "list", "clear", "clear ID", "kinds". Returns "ok ..." or
    // "error ..." lines.
    std::string command(std::string_view line);
    // Arms spec; returns its id. Throws FaultSpecError.
    uint32_t arm(std::string_view spec);
    bool clear(uint32_t id);
    void clear_all();
    // Reset and teardown drop every timer: events still waiting for their
    // after= time go with them.
    void drop_waiting();
    std::string list() const;
    static std::string kinds();

    // Is a fault of kind armed at all? (The cheap test of the hot paths.)
    bool armed(FaultKind k) const { return (mask_ >> static_cast<unsigned>(k)) & 1; }
    // The fault of kind that fires at site now, or nullptr: one bit test
    // when no fault of kind is armed. A one-shot fault that fires is
    // retired (its firing is traced first).
    const Fault *hit(FaultKind k, const FaultSite &site) { return armed(k) ? match(k, site) : nullptr; }
    // Traces a fired fault's effect ("fault fired id=... what").
    void fired(const Fault &f, std::string_view what);

  private:
    const Fault *match(FaultKind k, const FaultSite &site);
    void act(uint32_t id);  // an event fault's action
    void update_mask();
    bool draw(Fault &f);

    Device &dev_;
    std::vector<Fault> faults_;
    uint32_t next_id_ = 1;
    uint32_t mask_ = 0;
    Fault last_;  // the fault hit() returned, kept while a retired one is used
    bool last_retired_ = false;  // ... and it fired for the last time
};

}  // namespace hca
