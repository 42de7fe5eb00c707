#include "device.h"

#include <cstring>

#include "be.h"

namespace hca {

namespace {

uint64_t default_guid(const void *instance) {
    // Mellanox OUI 00:02:c9, then bytes that differ per instance.
    const uint64_t x = reinterpret_cast<uintptr_t>(instance) >> 4;
    return (uint64_t{0x0002c903} << 32) | (x & 0xffffffffu);
}

}  // namespace

Device::Device(Host &host, const DeviceConfig &cfg)
    : host_(host),
      cfg_(cfg),
      node_guid_(cfg.node_guid ? cfg.node_guid : default_guid(this)),
      iseg(*this),
      fw(*this),
      regs(*this),
      uars(*this, HCA_MODEL_BAR0_SIZE >> kPageShift),
      eqs(*this),
      cmdif(*this) {
    uint32_t mask = 0;
    if (!parse_trace_filter(cfg.trace_filter, &mask)) {
        throw ConfigError(fmt::format("bad trace filter '{}' (categories: all, none, {})", cfg.trace_filter,
                                      [] {
                                          std::string s;
                                          for (const auto &c : kTraceCats) {
                                              s += s.empty() ? "" : ", ";
                                              s += c.name;
                                          }
                                          return s;
                                      }()));
    }
    std::string err;
    if (!tracer_.open(cfg.trace_path, cfg.trace_max_bytes, &err)) {
        throw ConfigError(err);
    }
    tracer_.set_mask(mask);
    reset();
}

void Device::reset() {
    trace(kTrIseg, "reset node_guid=0x{:016x}", node_guid_);
    timers_.clear();
    sync_timer();
    doorbells_.clear();
    iseg.reset();
    fw.reset();
    regs.reset();
    uars.reset();
    eqs.reset();
    cmdif.reset();
}

bool Device::set_trace_filter(std::string_view filter) {
    uint32_t mask = 0;
    if (!parse_trace_filter(filter, &mask)) {
        return false;
    }
    tracer_.set_mask(mask);
    return true;
}

bool Device::dma_read(uint64_t addr, void *buf, size_t len) { return host_.dma_read(addr, buf, len); }

bool Device::dma_write(uint64_t addr, const void *buf, size_t len) { return host_.dma_write(addr, buf, len); }

void Device::msix(unsigned vector) {
    ++counters.msix;
    host_.msix_notify(vector);
}

void Device::schedule() {
    if (!scheduled_) {
        scheduled_ = true;
        host_.schedule();
    }
}

Timers::Id Device::add_timer(int64_t delay_ns, std::function<void()> fn) {
    const Timers::Id id = timers_.add(now() + delay_ns, std::move(fn));
    sync_timer();
    return id;
}

void Device::cancel_timer(Timers::Id id) {
    timers_.cancel(id);
    sync_timer();
}

void Device::sync_timer() {
    const int64_t next = timers_.next_deadline();
    if (next != timer_armed_at_) {
        timer_armed_at_ = next;
        host_.timer_mod(next);
    }
}

void Device::on_timer() {
    timer_armed_at_ = -1;
    timers_.run_expired(now());
    sync_timer();
    tracer_.flush();
}

bool Device::guest_error_budget() {
    // At most 100 lines per second of device time.
    const int64_t t = now();
    if (t - guest_error_window_ >= 1'000'000'000) {
        if (guest_errors_in_window_ > 100) {
            tracer_.emit(kTrGuestErr, t, "suppressed {} guest error lines", guest_errors_in_window_ - 100);
        }
        guest_error_window_ = t;
        guest_errors_in_window_ = 0;
    }
    return ++guest_errors_in_window_ <= 100;
}

void Device::mmio_read(uint64_t offset, uint8_t *data, unsigned size) {
    if (offset < InitSeg::kSize) {
        iseg.read(static_cast<uint32_t>(offset), data, size);
        return;
    }
    // UAR pages are write-only doorbells; reads return zeros.
    std::memset(data, 0, size);
}

void Device::mmio_write(uint64_t offset, const uint8_t *data, unsigned size) {
    if (offset + size > HCA_MODEL_BAR0_SIZE || size == 0 || size > 8) {
        guest_error("BAR0 write of {} bytes at 0x{:x} is outside the BAR", size, offset);
        return;
    }
    const uint32_t page = static_cast<uint32_t>(offset >> kPageShift);
    if (page < UarTable::kFirst) {
        // The command doorbell is handled off this path (CommandInterface::process).
        iseg.write(static_cast<uint32_t>(offset), data, size);
        return;
    }
    // Doorbells are only recorded here; they execute in run().
    Doorbell db{.uar = page, .offset = static_cast<uint16_t>(offset & (kPageSize - 1)),
                .size = static_cast<uint8_t>(size), .data = {}};
    std::memcpy(db.data, data, size);
    doorbells_.push_back(db);
    ++counters.doorbells;
    schedule();
}

void Device::run() {
    scheduled_ = false;
    // Commands first: a doorbell may refer to an object a command creates
    // only if the driver waited for that command, so order is preserved.
    if (cmdif.pending()) {
        cmdif.process();
    }
    while (!doorbells_.empty()) {
        const Doorbell db = doorbells_.front();
        doorbells_.pop_front();
        uar_doorbell(db.uar, db.offset, db.data, db.size);
    }
    tracer_.flush();
}

void Device::uar_doorbell(uint32_t uar, uint32_t off, const uint8_t *data, unsigned size) {
    if (!uars.allocated(uar)) {
        guest_error("doorbell write to UAR {} +0x{:x} that is not allocated: ignored", uar, off);
        return;
    }
    trace(kTrUar, "write uar={} offset=0x{:x} size={} data={}", uar, off, size, to_hex({data, size}));
    switch (off) {
    case UarTable::kEqArmDoorbell:
    case UarTable::kEqCiDoorbell:
        if (size != 4) {
            guest_error("EQ doorbell uar={} +0x{:x} of {} bytes (must be 4)", uar, off, size);
            return;
        }
        eqs.doorbell(uar, off == UarTable::kEqArmDoorbell, load_be32(data));
        return;
    default:
        guest_error("write to UAR {} at unknown offset 0x{:x} ({} bytes)", uar, off, size);
        return;
    }
}

std::string Device::info() {
    std::string s = fmt::format("mlx5-hca node_guid=0x{:016x} fw={}.{}.{} board_id={}\n", node_guid_, kFwMajor,
                                kFwMinor, kFwSubMinor, kBoardId);
    s += fw.info();
    s += fmt::format("UARs in use: {}\n", uars.in_use());
    s += eqs.info();
    s += fmt::format("counters: commands={} command_errors={} eqes={} msix={} doorbells={} guest_errors={}\n",
                     counters.commands, counters.command_errors, counters.eqes, counters.msix, counters.doorbells,
                     counters.guest_errors);
    return s;
}

}  // namespace hca
