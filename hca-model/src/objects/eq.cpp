#include "objects/eq.h"

#include <cstring>

#include <fmt/format.h>

#include "be.h"
#include "device.h"

namespace hca {

using ifc::create_eq_in;
using ifc::eqc;

void EqTable::reset() { eqs_.clear(); }

Eq *EqTable::find(uint32_t eqn) {
    auto it = eqs_.find(eqn);
    return it == eqs_.end() ? nullptr : &it->second;
}

const Eq *EqTable::subscriber(uint8_t type) const {
    for (const auto &[eqn, eq] : eqs_) {
        if (eq.events.test(type)) {
            return &eq;
        }
    }
    return nullptr;
}

void EqTable::cmd_create_eq(CmdCtx &c) {
    const ifc::Block ctx = create_eq_in::eq_context_entry;
    const uint32_t log_size = static_cast<uint32_t>(c.get(ifc::in(ctx, eqc::log_eq_size)));
    const uint32_t uar = static_cast<uint32_t>(c.get(ifc::in(ctx, eqc::uar_page)));
    const uint32_t intr = static_cast<uint32_t>(c.get(ifc::in(ctx, eqc::intr)));
    const uint32_t log_page_size = static_cast<uint32_t>(c.get(ifc::in(ctx, eqc::log_page_size)));
    const uint32_t page_offset = static_cast<uint32_t>(c.get(ifc::in(ctx, eqc::page_offset)));
    const uint64_t max_eqs = uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_eq);
    const uint64_t max_log_size = dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_eq_sz);

    if (log_size > max_log_size) {
        c.fail(Status::BadParam, "log_eq_size {} exceeds log_max_eq_sz {}", log_size, max_log_size);
        return;
    }
    if (!dev_.uars.allocated(uar)) {
        c.fail(Status::BadParam, "uar_page {} is not allocated", uar);
        return;
    }
    if (intr >= HCA_MODEL_MSIX_VECTORS) {
        c.fail(Status::BadParam, "intr {} is not an MSI-X vector (the device has {})", intr, HCA_MODEL_MSIX_VECTORS);
        return;
    }
    if (eqs_.size() >= max_eqs) {
        c.fail(Status::NoRes, "all {} EQs are in use", max_eqs);
        return;
    }
    Eq eq;
    eq.log_size = static_cast<uint8_t>(log_size);
    eq.uar = uar;
    eq.intr = static_cast<uint16_t>(intr);
    eq.log_page_size = static_cast<uint8_t>(log_page_size);
    const uint64_t bytes = uint64_t{sizeof(Eqe)} << log_size;
    // page_offset counts 1/64ths of a page (as for CQs and QPs).
    const uint64_t offset_bytes = PageList::offset_bytes(page_offset, log_page_size);
    const auto pas = c.in_block(create_eq_in::pas);
    const uint64_t npas = pas.size() / 8;
    if (!load_queue_buffer(c, dev_.budget, eq.buf, "EQ", pas, npas, log_page_size, offset_bytes, bytes)) {
        return;
    }
    const auto mask = c.in_block(create_eq_in::event_bitmask);
    for (unsigned w = 0; w < 4 && (w + 1) * 8 <= mask.size(); ++w) {
        const uint64_t bits = load_be64(mask.data() + w * 8);
        for (unsigned b = 0; b < 64; ++b) {
            if (bits >> b & 1) {
                eq.events.set(w * 64 + b);
            }
        }
    }
    // Completion events go to the EQ each CQ names; they are not subscribed.
    eq.events.reset(kEventComp);
    uint32_t eqn = 0;
    while (eqs_.count(eqn)) {
        ++eqn;
    }
    eq.eqn = eqn;
    // The command that creates the command EQ completes by polling: the
    // driver switches to events only after it returns (eq.c create_async_eqs()).
    if (eq.events.test(kEventCmd)) {
        c.suppress_eqe = true;
    }
    c.set(ifc::create_eq_out::eq_number, eqn);
    HCA_TRACE(dev_, eq_create, .eqn = eqn, .nent = eq.nent(), .uar = uar, .intr = intr, .log_page_size = log_page_size,
              .pages = eq.buf.npages(), .events = mask.first(std::min<size_t>(32, mask.size())));
    eqs_.emplace(eqn, std::move(eq));
}

void EqTable::cmd_destroy_eq(CmdCtx &c) {
    const uint32_t eqn = static_cast<uint32_t>(c.get(ifc::destroy_eq_in::eq_number));
    auto it = eqs_.find(eqn);
    if (it == eqs_.end()) {
        c.fail(Status::BadRes, "EQ {} does not exist", eqn);
        return;
    }
    HCA_TRACE(dev_, eq_destroy, .eqn = eqn, .eqes = it->second.eqes, .interrupts = it->second.interrupts);
    eqs_.erase(it);
}

void EqTable::cmd_query_eq(CmdCtx &c) {
    const uint32_t eqn = static_cast<uint32_t>(c.get(ifc::query_eq_in::eq_number));
    const Eq *eq = find(eqn);
    if (!eq) {
        c.fail(Status::BadRes, "EQ {} does not exist", eqn);
        return;
    }
    const ifc::Block ctx = ifc::query_eq_out::eq_context_entry;
    c.set(ifc::in(ctx, eqc::status), eq->status);
    c.set(ifc::in(ctx, eqc::st), eq->armed ? kStArmed : kStFired);
    c.set(ifc::in(ctx, eqc::log_eq_size), eq->log_size);
    c.set(ifc::in(ctx, eqc::uar_page), eq->uar);
    c.set(ifc::in(ctx, eqc::intr), eq->intr);
    c.set(ifc::in(ctx, eqc::log_page_size), eq->log_page_size);
    c.set(ifc::in(ctx, eqc::consumer_counter), eq->ci);
    c.set(ifc::in(ctx, eqc::producer_counter), eq->pi & 0xffffff);
    // The outbox carries the first 64 event types (the ones the driver uses).
    uint64_t bits = 0;
    for (unsigned b = 0; b < 64; ++b) {
        bits |= uint64_t{eq->events.test(b)} << b;
    }
    c.set(ifc::query_eq_out::event_bitmask, bits);
}

void EqTable::fire(Eq &eq, int32_t type, int64_t cqn) {
    eq.armed = false;
    if (const Fault *f = type >= 0 ? dev_.faults.hit(FaultKind::LostMsix, {.cqn = cqn, .eqn = eq.eqn, .event = type})
                                   : nullptr) {
        dev_.faults.fired(*f, fmt::format("eqn={} msix vector={} for an EQE of type 0x{:x} not sent", eq.eqn,
                                          eq.intr, type));
        return;
    }
    ++eq.interrupts;
    HCA_TRACE(dev_, irq_msix, .vector = eq.intr, .eqn = eq.eqn);
    dev_.msix(eq.intr);
}

void EqTable::doorbell(uint32_t uar, bool arm, uint32_t value) {
    const uint32_t eqn = value >> 24;
    const uint32_t ci = value & 0xffffff;
    Eq *eq = find(eqn);
    if (!eq) {
        dev_.guest_error("EQ doorbell uar={} for EQ {} that does not exist (value=0x{:08x})", uar, eqn, value);
        return;
    }
    if (eq->uar != uar) {
        dev_.guest_error("EQ doorbell for eqn={} through uar={}, but the EQ belongs to uar={}: ignored", eqn, uar,
                         eq->uar);
        return;
    }
    // The consumer may not pass the producer.
    if (((eq->pi - ci) & 0xffffff) > eq->nent()) {
        dev_.guest_error("EQ doorbell eqn={} consumer counter 0x{:x} is beyond the producer 0x{:x}", eqn, ci,
                         eq->pi & 0xffffff);
    }
    eq->ci = ci;
    HCA_TRACE(dev_, eq_doorbell, .eqn = eqn, .ci = ci, .arm = arm, .outstanding = eq->outstanding());
    if (arm) {
        eq->armed = true;
        // EQEs the driver has not consumed yet: interrupt right away.
        if (eq->outstanding() != 0) {
            fire(*eq);
        }
    }
}

EqeData EqeData::completion(uint32_t cqn) {
    EqeData d;
    d.comp.cqn.set(cqn);
    return d;
}

EqeData EqeData::dct(uint32_t dctn) {
    EqeData d;
    d.dct_ev.dctn.set(dctn & 0xffffff);
    return d;
}

EqeData EqeData::page_request(int32_t npages) {
    EqeData d;
    d.page_req.num_pages.set(static_cast<uint32_t>(npages));
    return d;
}

EqeData EqeData::affiliated(uint8_t type, uint32_t n) {
    EqeData d;
    d.qp_srq.type = type;
    d.qp_srq.qp_srq_n.set(n);
    return d;
}

EqeData EqeData::cq_error(uint32_t cqn, uint8_t syndrome) {
    EqeData d;
    d.cq_err.cqn.set(cqn);
    d.cq_err.syndrome = syndrome;
    return d;
}

EqeData EqeData::port_state(uint8_t port) {
    EqeData d;
    d.port.port = static_cast<uint8_t>(port << 4);
    return d;
}

EqeData EqeData::command(uint32_t slots) {
    EqeData d;
    d.cmd.vector.set(slots);
    return d;
}

bool EqTable::post(uint32_t eqn, uint8_t type, uint8_t sub_type, const EqeData &data) {
    Eq *eq = find(eqn);
    if (!eq) {
        dev_.guest_error("EQE type=0x{:x} for EQ {} that does not exist: dropped", type, eqn);
        return false;
    }
    if (eq->status != kStatusOk) {
        return false;
    }
    if (eq->outstanding() >= eq->nent()) {
        eq->status = kStatusWriteFailure;
        dev_.guest_error("EQ overflow eqn={} pi=0x{:x} ci=0x{:x}: EQE type=0x{:x} dropped, EQ in error", eqn,
                         eq->pi & 0xffffff, eq->ci, type);
        return false;
    }
    const int64_t cqn = type == kEventComp ? int64_t{data.comp.cqn.get() & 0xffffff} : -1;
    if (const Fault *f = dev_.faults.hit(FaultKind::LostEqe, {.cqn = cqn, .eqn = eqn, .event = type})) {
        dev_.faults.fired(*f, fmt::format("eqn={} EQE type=0x{:x} sub_type=0x{:x} not written", eqn, type, sub_type));
        return true;
    }
    Eqe eqe{};
    eqe.type = type;
    eqe.sub_type = sub_type;
    eqe.data = data;
    // Owner bit: 0 on the first lap (the driver initialises owner = 1).
    eqe.owner = static_cast<uint8_t>((eq->pi >> eq->log_size) & 1);
    const uint64_t addr = eq->buf.addr(uint64_t{eq->pi & (eq->nent() - 1)} * sizeof(Eqe));
    // Body first, owner byte last, so the driver never sees a torn EQE.
    const auto *raw = reinterpret_cast<const uint8_t *>(&eqe);
    if (!dev_.dma_write(addr, raw, offsetof(Eqe, owner)) || !dev_.dma_write(addr + offsetof(Eqe, owner), &eqe.owner, 1)) {
        eq->status = kStatusWriteFailure;
        dev_.guest_error("EQ eqn={} entry at 0x{:x} is not guest memory: EQ in error", eqn, addr);
        return false;
    }
    if (type == kEventComp) {
        HCA_TRACE(dev_, eq_eqe, .eqn = eqn, .index = eq->pi & 0xffffff, .type = type, .sub_type = sub_type,
                  .cqn = data.comp.cqn.get() & 0xffffff);
    } else {
        HCA_TRACE(dev_, eq_eqe, .eqn = eqn, .index = eq->pi & 0xffffff, .type = type, .sub_type = sub_type,
                  .data = data.raw);
    }
    ++eq->pi;
    ++eq->eqes;
    ++dev_.counters.eqes;
    if (eq->armed) {
        fire(*eq, type, cqn);
    }
    return true;
}

bool EqTable::post_event(uint8_t type, uint8_t sub_type, const EqeData &data) {
    const Eq *eq = subscriber(type);
    if (!eq) {
        return false;
    }
    return post(eq->eqn, type, sub_type, data);
}

void EqTable::post_cmd_completion(uint32_t slots) { post_event(kEventCmd, 0, EqeData::command(slots)); }

std::string EqTable::info() const {
    std::string s = fmt::format("EQs: {}\n", eqs_.size());
    for (const auto &[eqn, eq] : eqs_) {
        std::string ev;
        for (unsigned t = 0; t < 256; ++t) {
            if (eq.events.test(t)) {
                fmt::format_to(std::back_inserter(ev), "{}0x{:x}", ev.empty() ? "" : ",", t);
            }
        }
        fmt::format_to(std::back_inserter(s),
                       "  eqn={} nent={} uar={} intr={} pi=0x{:x} ci=0x{:x} armed={} status=0x{:x} eqes={} "
                       "interrupts={} events={}\n",
                       eqn, eq.nent(), eq.uar, eq.intr, eq.pi & 0xffffff, eq.ci, eq.armed, eq.status, eq.eqes,
                       eq.interrupts, ev.empty() ? "completion" : ev);
    }
    return s;
}

}  // namespace hca
