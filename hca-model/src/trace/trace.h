// Device trace: one text line per event, with a monotonic sequence number,
// the host time and the guest's own identifiers (slot, opcode, EQN, ...).
//
//   <seq> <time_us> <category> <event> key=value ...
//
// Categories are selected at start (HcaModelConfig.trace_filter) and at run
// time.  A disabled category costs one load and branch.  The file is capped:
// when it reaches half the cap it is rotated to <path>.1, so at most the cap
// is kept on disk and the guest never waits for the trace.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace hca {

enum TraceCat : uint32_t {
    kTrIseg = 1u << 0,      // initialization segment accesses that change state
    kTrCmd = 1u << 1,       // firmware commands
    kTrEq = 1u << 2,        // EQ doorbells and EQEs
    kTrIrq = 1u << 3,       // MSI-X
    kTrUar = 1u << 4,       // UAR page writes (doorbells)
    kTrPages = 1u << 5,     // firmware page management
    kTrGuestErr = 1u << 6,  // guest errors the device detected
    kTrCmdData = 1u << 7,   // command payload dumps (verbose)
    kTrObj = 1u << 8,       // object creation, modification, destruction
    kTrQp = 1u << 9,        // QP state transitions
    kTrMad = 1u << 10,      // MAD_IFC: the SMA, PMA
    kTrPort = 1u << 11,     // port state, link, events
    kTrWqe = 1u << 12,      // WQE fetch, decoded segment by segment
    kTrCqe = 1u << 13,      // CQEs written
    kTrPkt = 1u << 14,      // packets sent and received
    kTrMkey = 1u << 15,     // memory key translations and their failures
    kTrFault = 1u << 16,    // faults armed, fired and cleared (fault/faults.h)
};

struct TraceCatInfo {
    uint32_t cat;
    const char *name;
    const char *help;
};

inline constexpr TraceCatInfo kTraceCats[] = {
    {kTrIseg, "iseg", "initialization segment writes"},
    {kTrCmd, "cmd", "firmware commands: opcode, status, syndrome, time"},
    {kTrEq, "eq", "EQ creation, doorbells, arming and EQEs"},
    {kTrIrq, "irq", "MSI-X messages"},
    {kTrUar, "uar", "writes to UAR pages"},
    {kTrPages, "pages", "pages given to and taken from the device"},
    {kTrGuestErr, "guest_err", "guest errors detected by the device"},
    {kTrCmdData, "cmd_data", "command input/output payloads (verbose)"},
    {kTrObj, "obj", "PD, XRCD, mkey, CQ, SRQ, QP creation and destruction"},
    {kTrQp, "qp", "QP state transitions with the fields applied"},
    {kTrMad, "mad", "MAD_IFC: SMA and PMA requests and replies"},
    {kTrPort, "port", "port and link state, port events"},
    {kTrWqe, "wqe", "WQEs fetched, decoded segment by segment"},
    {kTrCqe, "cqe", "CQEs written (decoded)"},
    {kTrPkt, "pkt", "packets sent and received (header summary)"},
    {kTrMkey, "mkey", "memory key translations and failures"},
    {kTrFault, "fault", "injected faults: armed, fired, cleared"},
};

const char *trace_cat_name(uint32_t cat);

// Bytes as contiguous lower-case hex, for payload dumps.
std::string to_hex(std::span<const uint8_t> bytes);

// The same as a trace argument: formatted only when the line is written, so
// a call whose category is off costs no string (trace(..., HexBytes{b})).
struct HexBytes {
    std::span<const uint8_t> bytes;
};

// Parses "all", "none", "cmd,eq", "all,-uar" into a category mask, and
// "qpn=0x104", "cqn=7" words into a scope: then events of the QP-level
// categories (wqe, cqe, pkt, qp, mkey, uar) that name a QPN or CQN are kept
// only for the listed QPs/CQs.
struct TraceScope {
    std::vector<uint32_t> qpns;
    std::vector<uint32_t> cqns;
    bool empty() const { return qpns.empty() && cqns.empty(); }
};
bool parse_trace_filter(std::string_view filter, uint32_t *mask, TraceScope *scope = nullptr);

// Built with HCASIM_TRACE_COMPILED_OUT (the data-path benchmark's baseline
// only): every category is off at compile time, so the trace calls and
// their arguments compile to nothing.
#ifdef HCASIM_TRACE_COMPILED_OUT
inline constexpr bool kTraceCompiled = false;
#else
inline constexpr bool kTraceCompiled = true;
#endif

class Tracer {
  public:
    Tracer() = default;
    ~Tracer();
    Tracer(const Tracer &) = delete;
    Tracer &operator=(const Tracer &) = delete;

    // Opens path (empty: tracing to a file is off).
    bool open(const std::string &path, uint64_t max_bytes, std::string *err);
    void set_mask(uint32_t mask) { mask_ = file_ ? mask : 0; wanted_ = mask; }
    void set_scope(TraceScope scope) { scope_ = std::move(scope); }
    uint32_t mask() const { return wanted_; }

    bool on(uint32_t cat) const { return kTraceCompiled && (mask_ & cat) != 0; }

    // Out of line: the formatting code stays out of the functions that
    // trace, so a disabled category costs them only the test of on().
    template <typename... Args>
    [[gnu::noinline]] void emit(uint32_t cat, int64_t now_ns, fmt::format_string<Args...> f, Args &&...args) {
        if (!on(cat)) {
            return;
        }
        buf_.clear();
        fmt::format_to(std::back_inserter(buf_), "{} {}.{:03} {} ", ++seq_, now_ns / 1000,
                       (now_ns % 1000 + 1000) % 1000, trace_cat_name(cat));
        fmt::format_to(std::back_inserter(buf_), f, std::forward<Args>(args)...);
        if (!scope_.empty() && (cat & kScopedCats) && !in_scope()) {
            return;
        }
        buf_.push_back('\n');
        write(std::string_view(buf_.data(), buf_.size()));
    }

    uint64_t seq() const { return seq_; }
    // Makes everything emitted so far visible to readers of the file.
    void flush() {
        if (file_) {
            std::fflush(file_);
        }
    }

  private:
    static constexpr uint32_t kScopedCats = 1u << 12 | 1u << 13 | 1u << 14 | 1u << 9 | 1u << 15 | 1u << 4;
    void write(std::string_view line);
    bool in_scope() const;
    TraceScope scope_;

    FILE *file_ = nullptr;
    std::string path_;
    uint64_t max_bytes_ = 0;
    uint64_t written_ = 0;
    uint64_t seq_ = 0;
    uint32_t mask_ = 0;
    uint32_t wanted_ = 0;
    fmt::memory_buffer buf_;
};

}  // namespace hca

template <>
struct fmt::formatter<hca::HexBytes> : fmt::formatter<std::string_view> {
    auto format(hca::HexBytes h, fmt::format_context &ctx) const {
        static constexpr char kDigits[] = "0123456789abcdef";
        auto out = ctx.out();
        for (uint8_t b : h.bytes) {
            *out++ = kDigits[b >> 4];
            *out++ = kDigits[b & 15];
        }
        return out;
    }
};
