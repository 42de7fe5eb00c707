#include "fault/faults.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "device.h"

namespace hca {

namespace {

constexpr FaultInfo kInfo[] = {
    {FaultKind::CmdStatus, "cmd-status", false, "opcode= status= syndrome=",
     "the command completes with this status and syndrome without being executed"},
    {FaultKind::CmdDelivery, "cmd-delivery", false, "opcode= delivery=",
     "the command's delivery status (status_own bits 7:1) is set; it is not executed"},
    {FaultKind::CmdDelay, "cmd-delay", false, "opcode= ms=", "the command completes ms later"},
    {FaultKind::CmdDrop, "cmd-drop", false, "opcode=",
     "the command never completes: the slot stays owned by the device (the driver's timeout)"},
    {FaultKind::ErrorCqe, "error-cqe", false, "qpn= syndrome=",
     "a send WQE completes with an error CQE of this syndrome; the QP goes to error and flushes"},
    {FaultKind::WqeDmaError, "wqe-dma-error", false, "qpn=",
     "fetching a send WQE fails as a DMA error does; the QP goes to error"},
    {FaultKind::LostCqe, "lost-cqe", false, "cqn=", "a CQE is not written (its WQE is done)"},
    {FaultKind::LostEqe, "lost-eqe", false, "eqn= event= cqn=",
     "an EQE is not written (event=: its type, e.g. comp, cmd, page-request, port-change; cqn=: a "
     "completion EQE of that CQ)"},
    {FaultKind::LostMsix, "lost-msix", false, "eqn= event= cqn=",
     "the MSI-X message for a new EQE is not sent; the EQ is disarmed as if it had been (event=: the EQE's "
     "type; cqn=: a completion EQE of that CQ)"},
    {FaultKind::CqeDelay, "cqe-delay", false, "cqn= qpn= ms=",
     "a CQE (of CQ cqn=, or of QP qpn=) and every later CQE of its CQ are written ms later, in order: the "
     "work is done, its completion is late (at most 4096 CQEs wait: then the CQ catches up)"},
    {FaultKind::InitDelay, "init-delay", false, "ms=",
     "after the next reset the init segment says 'initializing' for ms"},
    {FaultKind::HealthFatal, "health-fatal", true, "syndrome=",
     "firmware dies: health syndrome with reset-for-recovery, counter stops, device stops until reset"},
    {FaultKind::HealthStall, "health-stall", true, "",
     "the health counter stops advancing; the device keeps working (until reset)"},
    {FaultKind::PageRequest, "page-request", true, "npages=",
     "a PAGE_REQUEST EQE: the firmware wants npages more pages (negative: returns them)"},
    {FaultKind::QpEvent, "qp-event", true, "qpn= type=",
     "an affiliated QP event: comm-est, sq-drained, last-wqe, path-mig, path-mig-failed, catastrophic, "
     "invalid-request, access-error (the last three move the QP to error)"},
    {FaultKind::SrqEvent, "srq-event", true, "srqn= type=", "an SRQ event: limit or catastrophic"},
    {FaultKind::CqError, "cq-error", true, "cqn= syndrome=",
     "a CQ error event (syndrome overrun or access); the CQ stops taking CQEs"},
    {FaultKind::PortEvent, "port-event", true, "subtype=",
     "a PORT_CHANGE EQE: down, active, initialized, lid, pkey, guid, client-rereg (the port itself "
     "does not change: the driver reacts to the event)"},
    {FaultKind::GeneralEvent, "general-event", true, "subtype= power= watts=",
     "a GENERAL_EVENT EQE: pci-power (the slot's power changed: MPEIN then reports power=sufficient|"
     "insufficient|unknown and watts=, default 75), fw-live-patch (firmware patched while running), "
     "delay-drop (a delay drop timeout; mlx5_ib acts on it only on Ethernet ports)"},
    {FaultKind::PciGone, "pci-gone", true, "ms=",
     "the function falls off the bus (a surprise removal): MMIO reads return all ones, writes, DMA, "
     "interrupts and packets stop; ms later a new function is in the slot (power-on state); without "
     "ms= until a reset"},
};
static_assert(std::size(kInfo) == static_cast<size_t>(FaultKind::Count));

struct Named {
    const char *name;
    uint32_t value;
};
constexpr Named kQpEvents[] = {
    {"path-mig", kEventPathMig},           {"comm-est", kEventCommEst},
    {"sq-drained", kEventSqDrained},       {"catastrophic", kEventWqCatastrophic},
    {"path-mig-failed", kEventPathMigFailed}, {"invalid-request", kEventWqInvalReq},
    {"access-error", kEventWqAccessErr},   {"last-wqe", kEventSrqLastWqe},
};
constexpr Named kSrqEvents[] = {{"limit", kEventSrqRqLimit}, {"catastrophic", kEventSrqCatastrophic}};
constexpr Named kPortEvents[] = {
    {"down", kPortEventDown}, {"active", kPortEventActive}, {"initialized", kPortEventInitialized},
    {"lid", kPortEventLid},   {"pkey", kPortEventPkey},     {"guid", kPortEventGuid},
    {"client-rereg", kPortEventClientRereg},
};
constexpr Named kGeneralEvents[] = {
    {"pci-power", kGeneralPciPowerChange},
    {"fw-live-patch", kGeneralFwLivePatch},
    {"delay-drop", kGeneralDelayDropTimeout},
};
constexpr Named kPowerStatus[] = {
    {"unknown", Registers::kPowerUnknown},
    {"sufficient", Registers::kPowerSufficient},
    {"insufficient", Registers::kPowerInsufficient},
};
constexpr Named kEqeTypes[] = {
    {"comp", kEventComp},         {"cmd", kEventCmd},           {"page-request", kEventPageRequest},
    {"port-change", kEventPortChange}, {"cq-error", kEventCqError}, {"comm-est", kEventCommEst},
    {"general", kEventGeneral},
};
constexpr Named kCqErrors[] = {{"overrun", CqTable::kCqErrOverrun}, {"access", CqTable::kCqErrAccess}};

bool iequal(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return (x | 0x20) == (y | 0x20) || (x == '-' && y == '_') || (x == '_' && y == '-');
           });
}

[[noreturn]] void bad(std::string what) { throw FaultSpecError{std::move(what)}; }

int64_t number(std::string_view key, std::string_view v, int64_t lo, int64_t hi) {
    const bool neg = !v.empty() && v[0] == '-';
    std::string_view d = neg ? v.substr(1) : v;
    int base = 10;
    if (d.size() > 2 && d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) {
        d.remove_prefix(2);
        base = 16;
    }
    uint64_t u = 0;
    const auto [p, ec] = std::from_chars(d.data(), d.data() + d.size(), u, base);
    if (d.empty() || ec != std::errc() || p != d.data() + d.size() || u > uint64_t{INT64_MAX}) {
        bad(fmt::format("{}={}: not a number", key, v));
    }
    const int64_t n = neg ? -static_cast<int64_t>(u) : static_cast<int64_t>(u);
    if (n < lo || n > hi) {
        bad(fmt::format("{}={}: must be between {} and {}", key, v, lo, hi));
    }
    return n;
}

template <size_t N>
uint32_t named(std::string_view key, std::string_view v, const Named (&table)[N]) {
    for (const Named &n : table) {
        if (iequal(v, n.name)) {
            return n.value;
        }
    }
    std::string names;
    for (const Named &n : table) {
        names += names.empty() ? "" : ", ";
        names += n.name;
    }
    bad(fmt::format("{}={}: one of {}", key, v, names));
}

uint32_t opcode_of(std::string_view v) {
    if (!v.empty() && v[0] >= '0' && v[0] <= '9') {
        return static_cast<uint32_t>(number("opcode", v, 0, 0xffff));
    }
    for (uint32_t op = 0; op <= 0xffff; ++op) {
        if (iequal(v, opcode_name(static_cast<uint16_t>(op)))) {
            return op;
        }
    }
    bad(fmt::format("opcode={}: no such command (a name such as CREATE_CQ, or a number)", v));
}

// The PRM names of command statuses and delivery statuses (prm.h).
constexpr Named kStatuses[] = {
    {"INT_ERR", 0x01},       {"BAD_OP", 0x02},         {"BAD_PARAM", 0x03},      {"BAD_SYS_STATE", 0x04},
    {"BAD_RES", 0x05},       {"RES_BUSY", 0x06},       {"LIM", 0x08},            {"BAD_RES_STATE", 0x09},
    {"BAD_INDEX", 0x0a},     {"NO_RES", 0x0f},         {"BAD_QP_STATE", 0x10},   {"BAD_PKT", 0x30},
    {"BAD_SIZE", 0x40},      {"BAD_INPUT_LEN", 0x50},  {"BAD_OUTPUT_LEN", 0x51},
};
constexpr Named kDeliveries[] = {
    {"SIGNATURE_ERR", 0x01},          {"TOKEN_ERR", 0x02},
    {"BAD_BLOCK_NUMBER", 0x03},       {"OUTPUT_POINTER_NOT_ALIGNED", 0x04},
    {"INPUT_POINTER_NOT_ALIGNED", 0x05}, {"FW_INTERNAL_ERR", 0x06},
    {"INPUT_LEN_ERR", 0x07},          {"OUTPUT_LEN_ERR", 0x08},
    {"RESERVED_NOT_ZERO", 0x09},      {"BAD_COMMAND_DESCRIPTOR", 0x10},
};

uint32_t status_of(std::string_view v) {
    if (!v.empty() && v[0] >= '0' && v[0] <= '9') {
        return static_cast<uint32_t>(number("status", v, 1, 0xff));
    }
    return named("status", v, kStatuses);
}

uint32_t delivery_of(std::string_view v) {
    if (!v.empty() && v[0] >= '0' && v[0] <= '9') {
        return static_cast<uint32_t>(number("delivery", v, 1, 0x7f));
    }
    return named("delivery", v, kDeliveries);
}

// splitmix64: the seeded draws of prob=.
uint64_t next_random(uint64_t &s) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

}  // namespace

const FaultInfo &fault_info(FaultKind k) { return kInfo[static_cast<size_t>(k)]; }

namespace {

// The keys a spec gave that change what the defaults mean.
struct Seen {
    bool seed = false;
    bool count = false;
    bool syndrome = false;
};

// count=, every=, prob=, seed=, for=, after=: every kind's trigger keys.
bool trigger_key(Fault &f, std::string_view k, std::string_view v, Seen &seen) {
    if (k == "count") {
        f.count = static_cast<uint32_t>(number(k, v, 0, UINT32_MAX));
        seen.count = true;
    } else if (k == "every") {
        f.every = static_cast<uint32_t>(number(k, v, 1, UINT32_MAX));
    } else if (k == "prob") {
        char *end = nullptr;
        const std::string s(v);
        f.prob = std::strtod(s.c_str(), &end);
        if (s.empty() || *end || !(f.prob > 0.0 && f.prob <= 1.0)) {
            bad(fmt::format("prob={}: a probability in (0, 1]", v.substr(0, 40)));
        }
    } else if (k == "seed") {
        f.rng = static_cast<uint64_t>(number(k, v, 0, INT64_MAX));
        seen.seed = true;
    } else if (k == "for") {
        f.window_ns = number(k, v, 1, 86'400'000) * 1'000'000;
    } else if (k == "after") {
        f.after_ns = number(k, v, 0, 86'400'000) * 1'000'000;
    } else {
        return false;
    }
    return true;
}

// The scope and arguments a kind takes (FaultInfo::keys).
void argument_key(Fault &f, const FaultInfo &info, std::string_view k, std::string_view v, Seen &seen) {
    if (std::string_view(info.keys).find(std::string(k) + "=") == std::string_view::npos) {
        bad(fmt::format("{} takes no '{}' (it takes: {}count= every= prob= seed= for= after=)", info.name,
                        k.substr(0, 40), info.keys[0] ? std::string(info.keys) + " " : ""));
    }
    if (k == "opcode") {
        f.scope.opcode = static_cast<int32_t>(opcode_of(v));
    } else if (k == "qpn") {
        f.scope.qpn = number(k, v, 0, 0xffffff);
    } else if (k == "cqn") {
        f.scope.cqn = number(k, v, 0, 0xffffff);
    } else if (k == "eqn") {
        f.scope.eqn = number(k, v, 0, 0xff);
    } else if (k == "event") {
        f.scope.event = !v.empty() && v[0] >= '0' && v[0] <= '9' ? static_cast<int32_t>(number(k, v, 0, 0xff))
                                                                   : static_cast<int32_t>(named(k, v, kEqeTypes));
    } else if (k == "srqn") {
        f.srqn = number(k, v, 0, 0xffffff);
    } else if (k == "status") {
        f.status = status_of(v);
    } else if (k == "delivery") {
        f.delivery = delivery_of(v);
    } else if (k == "syndrome") {
        seen.syndrome = true;
        if (f.kind == FaultKind::CqError) {
            f.syndrome = named(k, v, kCqErrors);
        } else if (f.kind == FaultKind::ErrorCqe || f.kind == FaultKind::HealthFatal) {
            f.syndrome = static_cast<uint32_t>(number(k, v, 1, 0xff));
        } else {
            f.syndrome = static_cast<uint32_t>(number(k, v, 0, UINT32_MAX));
        }
    } else if (k == "ms") {
        f.ms = number(k, v, 0, 600'000);
    } else if (k == "npages") {
        f.npages = static_cast<int32_t>(number(k, v, -65536, 65536));
        if (f.npages == 0) {
            bad("npages=0 asks for nothing");
        }
    } else if (k == "type") {
        f.type = static_cast<uint8_t>(f.kind == FaultKind::QpEvent ? named(k, v, kQpEvents) : named(k, v, kSrqEvents));
    } else if (k == "subtype") {
        f.subtype = static_cast<uint8_t>(f.kind == FaultKind::GeneralEvent ? named(k, v, kGeneralEvents)
                                                                            : named(k, v, kPortEvents));
    } else if (k == "power") {
        f.power = static_cast<uint8_t>(named(k, v, kPowerStatus));
    } else if (k == "watts") {
        f.watts = static_cast<uint16_t>(number(k, v, 0, 0xfff));
    }
}

// What each kind cannot do without, and what an event cannot have.
void check_needs(Fault &f, const FaultInfo &info, const Seen &seen) {
    const auto need = [&](bool ok, const char *what) {
        if (!ok) {
            bad(fmt::format("{} needs {}", info.name, what));
        }
    };
    switch (f.kind) {
    case FaultKind::CmdStatus: need(f.status != 0, "status="); break;
    case FaultKind::CmdDelivery: need(f.delivery != 0, "delivery="); break;
    case FaultKind::CmdDelay: need(f.ms > 0, "ms="); break;
    case FaultKind::InitDelay: need(f.ms > 0, "ms="); break;
    case FaultKind::ErrorCqe: need(seen.syndrome, "syndrome="); break;
    case FaultKind::PageRequest: need(f.npages != 0, "npages="); break;
    case FaultKind::QpEvent: need(f.scope.qpn >= 0 && f.type != 0, "qpn= and type="); break;
    case FaultKind::SrqEvent: need(f.srqn >= 0 && f.type != 0, "srqn= and type="); break;
    case FaultKind::CqError: need(f.scope.cqn >= 0 && seen.syndrome, "cqn= and syndrome="); break;
    case FaultKind::PortEvent: need(f.subtype != 0, "subtype="); break;
    case FaultKind::GeneralEvent: need(f.subtype != 0, "subtype="); break;
    case FaultKind::CqeDelay: need(f.ms > 0, "ms="); break;
    case FaultKind::HealthFatal:
        if (!seen.syndrome) {
            f.syndrome = InitSeg::kSyndFwInternalErr;
        }
        break;
    default: break;
    }
    if (info.event && (seen.count || f.every != 1 || f.prob != 1.0 || f.window_ns)) {
        bad(fmt::format("{} is an event: it happens once (after= delays it)", info.name));
    }
}

}  // namespace

Fault parse_fault(std::string_view spec) {
    Fault f;
    const size_t colon = spec.find(':');
    const std::string_view kind = spec.substr(0, colon);
    const FaultInfo *info = nullptr;
    for (const FaultInfo &i : kInfo) {
        if (iequal(kind, i.name)) {
            info = &i;
        }
    }
    if (!info) {
        bad(fmt::format("no fault kind '{}' (./hcasim fault --list)", kind.substr(0, 40)));
    }
    f.kind = info->kind;
    Seen seen;
    std::string_view rest = colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
    while (!rest.empty()) {
        const size_t comma = rest.find(',');
        const std::string_view kv = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        const size_t eq = kv.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            bad(fmt::format("'{}': expected key=value", kv.substr(0, 40)));
        }
        const std::string_view k = kv.substr(0, eq), v = kv.substr(eq + 1);
        if (!trigger_key(f, k, v, seen)) {
            argument_key(f, *info, k, v, seen);
        }
    }
    check_needs(f, *info, seen);
    if (f.window_ns && !seen.count) {
        f.count = 0;  // a window without a count: every match inside it
    }
    if (!seen.seed) {
        f.rng = 0x68636173696dull;  // a fixed default: runs repeat
    }
    f.text = std::string(spec.substr(0, 400));
    return f;
}

uint32_t FaultTable::arm(std::string_view spec) {
    Fault f = parse_fault(spec);
    if (faults_.size() >= kMaxArmed) {
        bad(fmt::format("{} faults are armed already (clear some)", kMaxArmed));
    }
    f.id = next_id_++;
    const int64_t t = dev_.now();
    f.from_ns = t + f.after_ns;
    f.until_ns = f.window_ns ? f.from_ns + f.window_ns : INT64_MAX;
    HCA_TRACE(dev_, fault_armed, .id = f.id, .kind = fault_info(f.kind).name, .spec = f.text);
    const uint32_t id = f.id;
    if (fault_info(f.kind).event) {
        if (f.after_ns == 0) {
            faults_.push_back(std::move(f));
            act(id);
            return id;
        }
        faults_.push_back(std::move(f));
        dev_.add_timer(faults_.back().after_ns, [this, id] { act(id); });
        return id;
    }
    faults_.push_back(std::move(f));
    update_mask();
    return id;
}

bool FaultTable::clear(uint32_t id) {
    const auto it = std::find_if(faults_.begin(), faults_.end(), [id](const Fault &f) { return f.id == id; });
    if (it == faults_.end()) {
        return false;
    }
    HCA_TRACE(dev_, fault_cleared, .id = it->id, .kind = fault_info(it->kind).name, .matches = it->matches,
              .fired = it->fired);
    faults_.erase(it);
    update_mask();
    return true;
}

void FaultTable::clear_all() {
    while (!faults_.empty()) {
        clear(faults_.front().id);
    }
}

void FaultTable::drop_waiting() {
    std::erase_if(faults_, [this](const Fault &f) {
        if (!fault_info(f.kind).event) {
            return false;
        }
        HCA_TRACE(dev_, fault_dropped, .id = f.id, .kind = fault_info(f.kind).name,
                  .reason = "reset before its after= time");
        return true;
    });
}

void FaultTable::update_mask() {
    mask_ = 0;
    for (const Fault &f : faults_) {
        if (!fault_info(f.kind).event) {
            mask_ |= 1u << static_cast<unsigned>(f.kind);
        }
    }
}

std::string FaultTable::list() const {
    std::string s;
    for (const Fault &f : faults_) {
        s += fmt::format("{} {} matches={} fired={}{}\n", f.id, f.text, f.matches, f.fired,
                         fault_info(f.kind).event ? " (event, waiting for after=)" : "");
    }
    return s;
}

std::string FaultTable::kinds() {
    std::string s;
    for (const FaultInfo &i : kInfo) {
        s += fmt::format("{:<14} {:<6} {:<26} {}\n", i.name, i.event ? "event" : "trig", i.keys, i.help);
    }
    s += "triggers of the triggered kinds: count=N (fire at most N times; default 1, 0 no limit), every=N, "
         "prob=P seed=S, for=MS (a window), after=MS (start later)\n";
    return s;
}

std::string FaultTable::command(std::string_view line) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\n')) {
        line.remove_suffix(1);
    }
    while (!line.empty() && line.front() == ' ') {
        line.remove_prefix(1);
    }
    try {
        if (line == "list") {
            return "ok\n" + list();
        }
        if (line == "kinds") {
            return "ok\n" + kinds();
        }
        if (line == "clear") {
            const size_t n = faults_.size();
            clear_all();
            return fmt::format("ok cleared {}\n", n);
        }
        if (line.starts_with("clear ")) {
            const auto id = static_cast<uint32_t>(number("id", line.substr(6), 1, UINT32_MAX));
            return clear(id) ? fmt::format("ok cleared {}\n", id) : fmt::format("error no fault {}\n", id);
        }
        const uint32_t id = arm(line);
        return fmt::format("ok armed {}\n", id);
    } catch (const FaultSpecError &e) {
        return "error " + e.what + "\n";
    }
}

bool FaultTable::draw(Fault &f) {
    if (f.prob >= 1.0) {
        return true;
    }
    return static_cast<double>(next_random(f.rng) >> 11) * 0x1.0p-53 < f.prob;
}

const Fault *FaultTable::match(FaultKind k, const FaultSite &site) {
    const int64_t t = dev_.now();
    for (size_t i = 0; i < faults_.size(); ++i) {
        Fault &f = faults_[i];
        if (f.kind != k || t < f.from_ns) {
            continue;
        }
        if (t >= f.until_ns) {
            HCA_TRACE(dev_, fault_expired, .id = f.id, .kind = fault_info(k).name, .matches = f.matches,
                      .fired = f.fired);
            faults_.erase(faults_.begin() + static_cast<ptrdiff_t>(i));
            update_mask();
            --i;
            continue;
        }
        const FaultSite &s = f.scope;
        if ((s.opcode >= 0 && s.opcode != site.opcode) || (s.qpn >= 0 && s.qpn != site.qpn) ||
            (s.cqn >= 0 && s.cqn != site.cqn) || (s.eqn >= 0 && s.eqn != site.eqn) ||
            (s.event >= 0 && s.event != site.event)) {
            continue;
        }
        ++f.matches;
        if (f.matches % f.every != 0 || !draw(f)) {
            continue;
        }
        ++f.fired;
        last_ = f;
        last_retired_ = f.count != 0 && f.fired >= f.count;
        if (last_retired_) {
            faults_.erase(faults_.begin() + static_cast<ptrdiff_t>(i));
            update_mask();
        }
        return &last_;
    }
    return nullptr;
}

void FaultTable::fired(const Fault &f, std::string_view what) {
    HCA_TRACE(dev_, fault_fired, .id = f.id, .kind = fault_info(f.kind).name, .n = f.fired, .what = what);
    if (&f == &last_ && last_retired_) {
        HCA_TRACE(dev_, fault_retired, .id = f.id, .kind = fault_info(f.kind).name, .firings = f.fired);
        last_retired_ = false;
    }
}

void FaultTable::act(uint32_t id) {
    const auto it = std::find_if(faults_.begin(), faults_.end(), [id](const Fault &f) { return f.id == id; });
    if (it == faults_.end()) {
        return;  // cleared before its time
    }
    Fault f = std::move(*it);
    faults_.erase(it);
    f.fired = 1;
    switch (f.kind) {
    case FaultKind::HealthFatal:
        fired(f, fmt::format("health syndrome=0x{:02x}", f.syndrome));
        dev_.fail_firmware(static_cast<uint8_t>(f.syndrome), fmt::format("injected fault id={}", f.id));
        return;
    case FaultKind::HealthStall:
        fired(f, "health counter stopped");
        dev_.iseg.stall_health();
        return;
    case FaultKind::PageRequest: {
        fired(f, fmt::format("page request npages={}", f.npages));
        dev_.fw.page_request(f.npages);
        if (!dev_.eqs.post_event(kEventPageRequest, 0, EqeData::page_request(f.npages))) {
            HCA_TRACE(dev_, fault_not_delivered, .id = f.id, .reason = "no EQ takes page requests");
        }
        return;
    }
    case FaultKind::QpEvent: {
        const uint32_t qpn = static_cast<uint32_t>(f.scope.qpn);
        Qp *qp = dev_.qps.find(qpn);
        if (!qp) {
            HCA_TRACE(dev_, fault_not_delivered, .id = f.id, .qpn = qpn, .reason = "no such QP");
            return;
        }
        fired(f, fmt::format("qp event type=0x{:x} qpn=0x{:x}", f.type, qpn));
        if (f.type == kEventWqCatastrophic || f.type == kEventWqInvalReq || f.type == kEventWqAccessErr) {
            dev_.qps.to_error(*qp, "injected fault");
        }
        dev_.eqs.post_event(f.type, 0, EqeData::qp(qpn));
        return;
    }
    case FaultKind::SrqEvent: {
        const uint32_t srqn = static_cast<uint32_t>(f.srqn);
        if (!dev_.srqs.find(srqn)) {
            HCA_TRACE(dev_, fault_not_delivered, .id = f.id, .srqn = srqn, .reason = "no such SRQ");
            return;
        }
        fired(f, fmt::format("srq event type=0x{:x} srqn=0x{:x}", f.type, srqn));
        dev_.eqs.post_event(f.type, 0, EqeData::srq(srqn));
        return;
    }
    case FaultKind::CqError: {
        const uint32_t cqn = static_cast<uint32_t>(f.scope.cqn);
        Cq *cq = dev_.cqs.find(cqn);
        if (!cq) {
            HCA_TRACE(dev_, fault_not_delivered, .id = f.id, .cqn = cqn, .reason = "no such CQ");
            return;
        }
        fired(f, fmt::format("cq error syndrome={} cqn=0x{:x}", f.syndrome, cqn));
        cq->status = f.syndrome == CqTable::kCqErrOverrun ? CqTable::kStatusOverflow : CqTable::kStatusWriteFail;
        dev_.eqs.post_event(kEventCqError, 0, EqeData::cq_error(cqn, static_cast<uint8_t>(f.syndrome)));
        return;
    }
    case FaultKind::PciGone:
        fired(f, f.ms ? fmt::format("off the bus, a new function in {} ms", f.ms) : "off the bus until a reset");
        dev_.leave_bus(f.ms ? f.ms * 1'000'000 : -1);
        return;
    case FaultKind::PortEvent:
        fired(f, fmt::format("port event subtype={}", f.subtype));
        dev_.port(1).event(f.subtype);
        return;
    case FaultKind::GeneralEvent: {
        if (f.subtype == kGeneralPciPowerChange) {
            dev_.regs.set_slot_power(f.power, f.watts);
        }
        fired(f, f.subtype == kGeneralPciPowerChange
                     ? fmt::format("general event subtype=0x{:x} MPEIN pwr_status={} pci_power={}", f.subtype,
                                   f.power, f.watts)
                     : fmt::format("general event subtype=0x{:x}", f.subtype));
        if (!dev_.eqs.post_event(kEventGeneral, f.subtype, EqeData::port_state(1))) {
            HCA_TRACE(dev_, fault_not_delivered, .id = f.id, .reason = "no EQ takes general events");
        }
        return;
    }
    default:
        return;
    }
}

}  // namespace hca
