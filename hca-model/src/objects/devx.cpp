#include "objects/devx.h"

#include <fmt/format.h>

#include "device.h"

namespace hca {

void UctxTable::cmd_create_uctx(CmdCtx &c) {
    const uint32_t cap = static_cast<uint32_t>(c.get(ifc::in(ifc::create_uctx_in::uctx, ifc::uctx::cap)));
    const uint64_t offered = dev_.fw.caps().gen(ifc::cmd_hca_cap::uctx_cap);
    if (cap & ~offered) {
        c.fail(Status::BadParam, "user context capabilities 0x{:x} are not offered (uctx_cap 0x{:x})", cap, offered);
        return;
    }
    if (uids_.count() >= (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_uctx))) {
        c.fail(Status::NoRes, "all {} user contexts are in use", uids_.count());
        return;
    }
    auto uid = uids_.alloc();
    if (!uid) {
        c.fail(Status::NoRes, "no uid left");
        return;
    }
    c.set(ifc::create_uctx_out::uid, *uid);
    HCA_TRACE(dev_, obj_create_uctx, .uid = *uid, .cap = cap);
}

void UctxTable::cmd_destroy_uctx(CmdCtx &c) {
    const auto uid = static_cast<uint16_t>(c.get(ifc::destroy_uctx_in::uid));
    if (!uids_.used(uid)) {
        c.fail(Status::BadRes, "uid {} is not a user context", uid);
        return;
    }
    if (const size_t n = dev_.umems.owned_by(uid)) {
        c.fail(Status::ResBusy, "user context {} still has {} UMEMs", uid, n);
        return;
    }
    uids_.release(uid);
    HCA_TRACE(dev_, obj_destroy_uctx, .uid = uid);
}

void UmemTable::cmd_create_umem(CmdCtx &c) {
    const ifc::Block u = ifc::create_umem_in::umem;
    if (c.uid == 0 || c.uid == kSharedUid) {
        c.fail(Status::BadParam, "a UMEM needs a user context, uid is {}", c.uid);
        return;
    }
    if (c.get(ifc::in(u, ifc::umem::ats))) {
        c.fail(Status::BadParam, "ATS is not offered (ats 0)");
        return;
    }
    const auto log_page_size = static_cast<unsigned>(c.get(ifc::in(u, ifc::umem::log_page_size)));
    const uint64_t page_offset = c.get(ifc::in(u, ifc::umem::page_offset));
    const uint64_t npages = c.get(ifc::in(u, ifc::umem::num_of_mtt));
    const auto mtt = c.in_block(ifc::in(u, ifc::umem::mtt));
    if (npages == 0 || npages > mtt.size() / 8) {
        c.fail(Status::BadParam, "num_of_mtt {} is not between 1 and the {} entries in the inbox", npages,
               mtt.size() / 8);
        return;
    }
    if (log_page_size > PageList::kMaxLogPageSize || page_offset >> (12 + log_page_size)) {
        c.fail(Status::BadParam, "log_page_size {} / page_offset 0x{:x} do not describe a page", log_page_size,
               page_offset);
        return;
    }
    if (umems_.size() >= (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_umem))) {
        c.fail(Status::NoRes, "all UMEMs are in use");
        return;
    }
    Umem m;
    m.uid = c.uid;
    const uint64_t bytes = (npages << (12 + log_page_size)) - page_offset;
    if (!load_queue_buffer(c, dev_.budget, m.pages, "UMEM", mtt, npages, log_page_size, page_offset, bytes)) {
        return;
    }
    auto id = ids_.alloc();
    if (!id) {
        c.fail(Status::NoRes, "no UMEM number left");
        return;
    }
    c.set(ifc::create_umem_out::umem_id, *id);
    HCA_TRACE(dev_, obj_create_umem, .umem = *id, .uid = c.uid, .pages = npages, .page = log_page_size,
              .offset = page_offset, .bytes = bytes);
    umems_.emplace(*id, std::move(m));
}

void UmemTable::cmd_destroy_umem(CmdCtx &c) {
    const auto id = static_cast<uint32_t>(c.get(ifc::destroy_umem_in::umem_id));
    auto it = umems_.find(id);
    if (it == umems_.end()) {
        c.fail(Status::BadRes, "UMEM {} does not exist", id);
        return;
    }
    if (!c.may_touch(it->second.uid, "UMEM", id)) {
        return;
    }
    if (it->second.pin.use_count() > 1) {
        c.fail(Status::ResBusy, "UMEM {} is in use by {} objects", id, it->second.pin.use_count() - 1);
        return;
    }
    umems_.erase(it);
    ids_.release(id);
    HCA_TRACE(dev_, obj_destroy_umem, .umem = id);
}

size_t UmemTable::owned_by(uint16_t uid) const {
    size_t n = 0;
    for (const auto &[id, m] : umems_) {
        n += m.uid == uid;
    }
    return n;
}

UmemTable::Umem *UmemTable::find_for(CmdCtx &c, uint32_t id, const char *what) {
    auto it = umems_.find(id);
    if (it == umems_.end()) {
        c.fail(Status::BadParam, "{}: UMEM {} does not exist", what, id);
        return nullptr;
    }
    if (!c.may_touch(it->second.uid, "UMEM", id, what)) {
        return nullptr;
    }
    return &it->second;
}

bool UmemTable::buffer(CmdCtx &c, uint32_t id, uint64_t offset, uint64_t bytes, const char *what, PageList &out,
                       UmemPin &pin) {
    Umem *m = find_for(c, id, what);
    if (!m) {
        return false;
    }
    if (std::string why = out.slice(m->pages, offset, bytes); !why.empty()) {
        c.fail(Status::BadParam, "{} buffer in UMEM {}: {}", what, id, why);
        return false;
    }
    if (!out.charge(dev_.budget)) {
        c.fail(Status::ExceedLim, "{} buffer: {} page entries exceed the translation budget", what, out.npages());
        return false;
    }
    pin = m->pin;
    return true;
}

bool UmemTable::doorbell(CmdCtx &c, uint32_t id, uint64_t offset, unsigned bytes, const char *what, uint64_t &addr,
                         UmemPin &pin) {
    Umem *m = find_for(c, id, what);
    if (!m) {
        return false;
    }
    if (offset % bytes || offset >= m->pages.bytes() || m->pages.bytes() - offset < bytes ||
        m->pages.run(offset) < bytes) {
        c.fail(Status::BadParam,
               "{} doorbell record at offset 0x{:x} of UMEM {} ({} bytes) is not {} aligned bytes in it", what, offset,
               id, m->pages.bytes(), bytes);
        return false;
    }
    addr = m->pages.addr(offset);
    pin = m->pin;
    return true;
}

bool UmemTable::queue(CmdCtx &c, const char *what, const QueueMemory &m, uint64_t bytes, uint64_t &dbr, PageList &buf,
                      UmemPin (&pins)[2]) {
    if (m.dbr_umem && !doorbell(c, m.dbr_umem_id, dbr, m.dbr_bytes, what, dbr, pins[0])) {
        return false;
    }
    if (!bytes) {
        return true;
    }
    if (m.buf_umem) {
        return buffer(c, m.buf_umem_id, m.buf_umem_offset, bytes, what, buf, pins[1]);
    }
    return load_queue_buffer(c, dev_.budget, buf, what, m.pas, m.pas.size() / 8, m.log_page_size,
                             PageList::offset_bytes(m.page_offset, m.log_page_size), bytes);
}

std::string UmemTable::info() const {
    std::string s = fmt::format("UMEMs: {}\n", umems_.size());
    for (const auto &[id, m] : umems_) {
        fmt::format_to(std::back_inserter(s), "  umem={} uid={} bytes=0x{:x} pages={} users={}\n", id, m.uid,
                       m.pages.bytes(), m.pages.npages(), m.pin.use_count() - 1);
    }
    return s;
}

}  // namespace hca
