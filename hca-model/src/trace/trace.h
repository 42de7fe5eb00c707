// Device trace: one text line per event, with a monotonic sequence number,
// the host time and the guest's own identifiers (slot, opcode, EQN, ...).
//
//   <seq> <time_us> <category> <event> key=value ... [: reason]
//
// Every event is declared once, in hca-model/trace-events; the model emits
// one through HCA_TRACE(dev, <category>_<event>, .field = value, ...)
// (device.h) and the generated tev::<category>_<event>::emit().  Each file
// starts with "# hcasim trace format N".
//
// Categories are selected at start (HcaModelConfig.trace_filter) and at run
// time.  A disabled category costs one load and branch.  The file is capped:
// when it reaches half the cap it is rotated to <path>.1, so at most the cap
// is kept on disk and the guest never waits for the trace.
#pragma once

#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "trace_cats.gen.h"

namespace hca {

// The categories and the format number come from hca-model/trace-events,
// the table of every event (tools/gen-trace.py writes trace_cats.gen.h and,
// for the emitters, trace_events.gen.h).

const char *trace_cat_name(uint32_t cat);

// Bytes as contiguous lower-case hex, for payload dumps.
std::string to_hex(std::span<const uint8_t> bytes);

// The same as a trace argument: formatted only when the line is written, so
// a call whose category is off costs no string (trace(..., HexBytes{b})).
struct HexBytes {
    std::span<const uint8_t> bytes;
};

// A number field of an event: any integer or enum, widened (an event's
// fields are filled with braces, where int -> uint64_t would not compile).
struct TraceInt {
    uint64_t v = 0;
    TraceInt() = default;
    template <typename T>
    requires(std::is_integral_v<T> || std::is_enum_v<T>) constexpr TraceInt(T x) : v(static_cast<uint64_t>(x)) {}
};
struct TraceSInt {
    int64_t v = 0;
    TraceSInt() = default;
    template <typename T>
    requires(std::is_integral_v<T> || std::is_enum_v<T>) constexpr TraceSInt(T x) : v(static_cast<int64_t>(x)) {}
};

// An optional field's value: present only when the condition holds (or the
// pointer is set).
template <typename T>
std::optional<T> trace_opt(bool present, const T &v) {
    return present ? std::optional<T>(v) : std::nullopt;
}
template <typename T>
std::optional<T> trace_opt(const T *v) {
    return v ? std::optional<T>(*v) : std::nullopt;
}

// A value with its name, written NAME(0xVALUE): opcodes, statuses,
// syndromes (a type "n" field of trace-events).
struct TraceNamed {
    std::string_view name;
    TraceInt value;
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

    // For the generated emitters (trace_events.gen.cpp) only: whether an
    // event naming this QPN / CQN passes the trace-filter's scope, then the
    // line's start ("<seq> <time> <category> "), its text, and commit().
    bool in_scope(std::optional<uint64_t> qpn, std::optional<uint64_t> cqn) const;
    std::back_insert_iterator<fmt::memory_buffer> begin(uint32_t cat, int64_t now_ns);
    void commit();

    uint64_t seq() const { return seq_; }
    // Makes everything emitted so far visible to readers of the file.
    void flush() {
        if (file_) {
            std::fflush(file_);
        }
    }

  private:
    void write(std::string_view line);
    void header();
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
