#include "objects/srq.h"

#include <fmt/format.h>

#include "be.h"
#include "device.h"

namespace hca {

const char *srq_kind_name(Srq::Kind k) {
    switch (k) {
    case Srq::Kind::Srq: return "SRQ";
    case Srq::Kind::XrcSrq: return "XRC_SRQ";
    case Srq::Kind::Rmp: return "RMP";
    case Srq::Kind::Xrq:
        return "XRQ";
    }
    return "?";
}

void SrqTable::reset() {
    srqs_.clear();
    ids_.reset();
}

Srq *SrqTable::find(uint32_t srqn) {
    auto it = srqs_.find(srqn);
    return it == srqs_.end() ? nullptr : &it->second;
}

void SrqTable::give_back(Srq &s, uint16_t index) {
    s.head = index;
    --s.consumed;
    --s.received;
}

std::optional<uint16_t> SrqTable::take(Srq &s) {
    uint8_t db[4];
    if (!dev_.dma_read(s.dbr, db, 4)) {
        dev_.guest_error("SRQ 0x{:x} doorbell record 0x{:x} is not guest memory", s.srqn, s.dbr);
        return std::nullopt;
    }
    const uint16_t posted = static_cast<uint16_t>(load_be32(db));
    const uint16_t avail = static_cast<uint16_t>(posted - s.consumed);
    if (avail == 0) {
        return std::nullopt;
    }
    if (avail > s.nent()) {
        dev_.guest_error("SRQ 0x{:x}: {} WQEs posted for {} entries", s.srqn, avail, s.nent());
    }
    const uint16_t index = s.head;
    SrqNextSeg next;
    if (!dev_.dma_read(wqe_addr(s, index), &next, offsetof(SrqNextSeg, signature))) {
        return std::nullopt;
    }
    s.head = static_cast<uint16_t>(next.next_wqe_index.get() & (s.nent() - 1));
    ++s.consumed;
    ++s.received;
    // Limit event (IBA 10.2.9.2): armed once, fires when the WQEs left drop below the limit.
    if (s.lwm && static_cast<uint16_t>(avail - 1) < s.lwm) {
        s.lwm = 0;
        dev_.eqs.post_event(kEventSrqRqLimit, 0, EqeData::srq(s.srqn));
    }
    return index;
}

bool SrqTable::finish_create(CmdCtx &c, Srq &s, std::span<const uint8_t> pas, ifc::Field out_field,
                             std::optional<ifc::Block> wq) {
    const uint64_t max_log = dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_srq_sz);
    if (s.log_size > max_log) {
        c.fail(Status::BadParam, "SRQ log size {} exceeds log_max_srq_sz {}", s.log_size, max_log);
        return false;
    }
    if (s.stride < 16 || s.stride > dev_.fw.caps().gen(ifc::cmd_hca_cap::max_wqe_sz_rq)) {
        c.fail(Status::BadParam, "SRQ WQE stride {} outside 16..max_wqe_sz_rq", s.stride);
        return false;
    }
    if (!dev_.pds.pd_used_by(c, s.pd, "SRQ")) {
        return false;
    }
    if ((s.kind == Srq::Kind::Srq || s.kind == Srq::Kind::XrcSrq) && !dev_.pds.xrcd_exists(s.xrcd)) {
        c.fail(Status::BadParam, "SRQ XRCD {} does not exist", s.xrcd);
        return false;
    }
    Cq *cq = nullptr;
    if (s.kind == Srq::Kind::XrcSrq || s.kind == Srq::Kind::Xrq || (s.kind == Srq::Kind::Srq && s.cqn)) {
        cq = dev_.cqs.find_used_by(c, s.cqn, "SRQ");
        if (!cq) {
            return false;
        }
    }
    if (s.dbr & 3) {
        c.fail(Status::BadParam, "SRQ doorbell record 0x{:x} is not aligned", s.dbr);
        return false;
    }
    UmemTable::QueueMemory mem{
        .dbr_bytes = 4, .pas = pas, .log_page_size = s.log_page_size, .page_offset = s.page_offset};
    if (wq) {
        mem.dbr_umem = c.get(ifc::in(*wq, ifc::wq::dbr_umem_valid));
        mem.dbr_umem_id = static_cast<uint32_t>(c.get(ifc::in(*wq, ifc::wq::dbr_umem_id)));
        mem.buf_umem = c.get(ifc::in(*wq, ifc::wq::wq_umem_valid));
        mem.buf_umem_id = static_cast<uint32_t>(c.get(ifc::in(*wq, ifc::wq::wq_umem_id)));
        mem.buf_umem_offset = c.get(ifc::in(*wq, ifc::wq::wq_umem_offset));
    }
    if (!dev_.umems.queue(c, "SRQ", mem, uint64_t{s.stride} << s.log_size, s.dbr, s.buf, s.pins)) {
        return false;
    }
    auto srqn = ids_.alloc();
    if (!srqn || srqs_.size() >= (uint64_t{1} << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_srq))) {
        if (srqn) {
            ids_.release(*srqn);
        }
        c.fail(Status::NoRes, "all SRQs are in use");
        return false;
    }
    s.srqn = *srqn;
    if (cq) {
        ++cq->refs;
    }
    c.set(out_field, s.srqn);
    HCA_TRACE(dev_, obj_create_srq, .kind = srq_kind_name(s.kind), .srqn = s.srqn, .nent = s.nent(), .stride = s.stride,
              .pd = s.pd, .xrcd = s.xrcd, .cqn = s.cqn, .dbr = s.dbr, .lwm = s.lwm);
    srqs_.emplace(s.srqn, std::move(s));
    return true;
}

Srq *SrqTable::lookup(CmdCtx &c, uint32_t srqn, Srq::Kind kind) {
    Srq *s = find(srqn);
    if (!s || s->kind != kind) {
        c.fail(Status::BadRes, "{} 0x{:x} does not exist", srq_kind_name(kind), srqn);
        return nullptr;
    }
    if (!c.may_touch(s->uid, srq_kind_name(kind), srqn)) {
        return nullptr;
    }
    return s;
}

void SrqTable::destroy(CmdCtx &c, uint32_t srqn, Srq::Kind kind) {
    Srq *s = lookup(c, srqn, kind);
    if (!s) {
        return;
    }
    if (s->refs) {
        c.fail(Status::ResBusy, "{} 0x{:x} is used by {} QPs", srq_kind_name(kind), srqn, s->refs);
        return;
    }
    if (Cq *cq = s->cqn ? dev_.cqs.find(s->cqn) : nullptr; cq && s->kind != Srq::Kind::Rmp && cq->refs) {
        --cq->refs;
    }
    HCA_TRACE(dev_, obj_destroy_srq, .kind = srq_kind_name(kind), .srqn = srqn, .received = s->received);
    srqs_.erase(srqn);
    ids_.release(srqn);
}

void SrqTable::arm(CmdCtx &c, uint32_t srqn, Srq::Kind kind, uint16_t lwm) {
    Srq *s = lookup(c, srqn, kind);
    if (!s) {
        return;
    }
    if (lwm >= s->nent()) {
        c.fail(Status::BadParam, "limit {} is not below the SRQ size {}", lwm, s->nent());
        return;
    }
    s->lwm = lwm;
    HCA_TRACE(dev_, obj_arm_srq, .kind = srq_kind_name(kind), .srqn = srqn, .lwm = lwm);
}

namespace {

// The wq context of an RMP or XRQ (a linked list of receive WQEs).
void read_wq(CmdCtx &c, ifc::Block wq, Srq &s) {
    s.log_size = static_cast<uint8_t>(c.get(ifc::in(wq, ifc::wq::log_wq_sz)));
    s.stride = 1u << c.get(ifc::in(wq, ifc::wq::log_wq_stride));
    s.pd = static_cast<uint32_t>(c.get(ifc::in(wq, ifc::wq::pd)));
    s.dbr = c.get(ifc::in(wq, ifc::wq::dbr_addr));
    s.log_page_size = static_cast<uint8_t>(c.get(ifc::in(wq, ifc::wq::log_wq_pg_sz)));
    s.page_offset = static_cast<uint32_t>(c.get(ifc::in(wq, ifc::wq::page_offset)));
    s.lwm = static_cast<uint16_t>(c.get(ifc::in(wq, ifc::wq::lwm)));
}

void write_wq(CmdCtx &c, ifc::Block wq, const Srq &s) {
    c.set(ifc::in(wq, ifc::wq::log_wq_sz), s.log_size);
    c.set(ifc::in(wq, ifc::wq::log_wq_stride), __builtin_ctz(s.stride));
    c.set(ifc::in(wq, ifc::wq::pd), s.pd);
    c.set(ifc::in(wq, ifc::wq::dbr_addr), s.dbr);
    c.set(ifc::in(wq, ifc::wq::lwm), s.lwm);
    c.set(ifc::in(wq, ifc::wq::log_wq_pg_sz), s.log_page_size);
    c.set(ifc::in(wq, ifc::wq::page_offset), s.page_offset);
    c.set(ifc::in(wq, ifc::wq::hw_counter), s.consumed);
}

}  // namespace

// RMP (ISSI 1 basic SRQ): rmpc + wq at create_rmp_in.ctx.
void SrqTable::cmd_create_rmp(CmdCtx &c) {
    const ifc::Block rmpc = ifc::create_rmp_in::ctx;
    const ifc::Block wq = ifc::in(rmpc, ifc::rmpc::wq);
    Srq s;
    s.kind = Srq::Kind::Rmp;
    if (c.get(ifc::in(wq, ifc::wq::wq_type)) != 0) {
        c.fail(Status::BadParam, "RMP wq_type {} is not a linked list", c.get(ifc::in(wq, ifc::wq::wq_type)));
        return;
    }
    read_wq(c, wq, s);
    s.uid = static_cast<uint16_t>(c.get(ifc::create_rmp_in::uid));
    finish_create(c, s, c.in_block(ifc::in(wq, ifc::wq::pas)), ifc::create_rmp_out::rmpn, wq);
}

void SrqTable::cmd_destroy_rmp(CmdCtx &c) {
    destroy(c, static_cast<uint32_t>(c.get(ifc::destroy_rmp_in::rmpn)), Srq::Kind::Rmp);
}

void SrqTable::cmd_query_rmp(CmdCtx &c) {
    Srq *s = lookup(c, static_cast<uint32_t>(c.get(ifc::query_rmp_in::rmpn)), Srq::Kind::Rmp);
    if (!s) {
        return;
    }
    const ifc::Block rmpc = ifc::query_rmp_out::rmp_context;
    const ifc::Block wq = ifc::in(rmpc, ifc::rmpc::wq);
    c.set(ifc::in(rmpc, ifc::rmpc::state), s->error ? 3 : 1);
    write_wq(c, wq, *s);
}

void SrqTable::cmd_modify_rmp(CmdCtx &c) {
    const uint32_t rmpn = static_cast<uint32_t>(c.get(ifc::modify_rmp_in::rmpn));
    const ifc::Block wq = ifc::in(ifc::modify_rmp_in::ctx, ifc::rmpc::wq);
    if (!c.get(ifc::in(ifc::modify_rmp_in::bitmask, ifc::rmp_bitmask::lwm))) {
        if (lookup(c, rmpn, Srq::Kind::Rmp)) {
            HCA_TRACE(dev_, obj_modify_rmp_nothing, .rmpn = rmpn);
        }
        return;
    }
    arm(c, rmpn, Srq::Kind::Rmp, static_cast<uint16_t>(c.get(ifc::in(wq, ifc::wq::lwm))));
}

void SrqTable::cmd_create_xrc_srq(CmdCtx &c) {
    const ifc::Block ctx = ifc::create_xrc_srq_in::xrc_srq_context_entry;
    using ifc::xrc_srqc;
    Srq s;
    s.kind = Srq::Kind::XrcSrq;
    s.log_size = static_cast<uint8_t>(c.get(ifc::in(ctx, xrc_srqc::log_xrc_srq_size)));
    s.stride = 16u << c.get(ifc::in(ctx, xrc_srqc::log_rq_stride));
    s.xrcd = static_cast<uint32_t>(c.get(ifc::in(ctx, xrc_srqc::xrcd)));
    s.cqn = static_cast<uint32_t>(c.get(ifc::in(ctx, xrc_srqc::cqn)));
    s.pd = static_cast<uint32_t>(c.get(ifc::in(ctx, xrc_srqc::pd)));
    s.lwm = static_cast<uint16_t>(c.get(ifc::in(ctx, xrc_srqc::lwm)));
    s.user_index = static_cast<uint32_t>(c.get(ifc::in(ctx, xrc_srqc::user_index)));
    s.log_page_size = static_cast<uint8_t>(c.get(ifc::in(ctx, xrc_srqc::log_page_size)));
    s.page_offset = static_cast<uint32_t>(c.get(ifc::in(ctx, xrc_srqc::page_offset)));
    s.dbr = c.get(ifc::in(ctx, xrc_srqc::db_record_addr_h)) << 32 |
            c.get(ifc::in(ctx, xrc_srqc::db_record_addr_l)) << 2;
    s.uid = static_cast<uint16_t>(c.get(ifc::create_xrc_srq_in::uid));
    if (c.get(ifc::create_xrc_srq_in::xrc_srq_umem_valid)) {
        c.fail(Status::BadParam, "an XRC SRQ in a UMEM is not supported");
        return;
    }
    finish_create(c, s, c.in_block(ifc::create_xrc_srq_in::pas), ifc::create_xrc_srq_out::xrc_srqn);
}

void SrqTable::cmd_destroy_xrc_srq(CmdCtx &c) {
    destroy(c, static_cast<uint32_t>(c.get(ifc::destroy_xrc_srq_in::xrc_srqn)), Srq::Kind::XrcSrq);
}

void SrqTable::cmd_query_xrc_srq(CmdCtx &c) {
    Srq *s = lookup(c, static_cast<uint32_t>(c.get(ifc::query_xrc_srq_in::xrc_srqn)), Srq::Kind::XrcSrq);
    if (!s) {
        return;
    }
    const ifc::Block ctx = ifc::query_xrc_srq_out::xrc_srq_context_entry;
    using ifc::xrc_srqc;
    c.set(ifc::in(ctx, xrc_srqc::state), s->error ? 1 : 0);
    c.set(ifc::in(ctx, xrc_srqc::log_xrc_srq_size), s->log_size);
    c.set(ifc::in(ctx, xrc_srqc::log_rq_stride), __builtin_ctz(s->stride) - 4);
    c.set(ifc::in(ctx, xrc_srqc::xrcd), s->xrcd);
    c.set(ifc::in(ctx, xrc_srqc::cqn), s->cqn);
    c.set(ifc::in(ctx, xrc_srqc::pd), s->pd);
    c.set(ifc::in(ctx, xrc_srqc::lwm), s->lwm);
    c.set(ifc::in(ctx, xrc_srqc::wqe_cnt), s->consumed);
    c.set(ifc::in(ctx, xrc_srqc::user_index), s->user_index);
    c.set(ifc::in(ctx, xrc_srqc::db_record_addr_h), s->dbr >> 32);
    c.set(ifc::in(ctx, xrc_srqc::db_record_addr_l), (s->dbr & 0xffffffff) >> 2);
}

void SrqTable::cmd_arm_xrc_srq(CmdCtx &c) {
    arm(c, static_cast<uint32_t>(c.get(ifc::arm_xrc_srq_in::xrc_srqn)), Srq::Kind::XrcSrq,
        static_cast<uint16_t>(c.get(ifc::arm_xrc_srq_in::lwm)));
}

// ISSI 0 SRQs.
void SrqTable::cmd_create_srq(CmdCtx &c) {
    const ifc::Block ctx = ifc::create_srq_in::srq_context_entry;
    using ifc::srqc;
    Srq s;
    s.kind = Srq::Kind::Srq;
    s.log_size = static_cast<uint8_t>(c.get(ifc::in(ctx, srqc::log_srq_size)));
    s.stride = 16u << c.get(ifc::in(ctx, srqc::log_rq_stride));
    s.xrcd = static_cast<uint32_t>(c.get(ifc::in(ctx, srqc::xrcd)));
    s.cqn = static_cast<uint32_t>(c.get(ifc::in(ctx, srqc::cqn)));
    s.pd = static_cast<uint32_t>(c.get(ifc::in(ctx, srqc::pd)));
    s.lwm = static_cast<uint16_t>(c.get(ifc::in(ctx, srqc::lwm)));
    s.log_page_size = static_cast<uint8_t>(c.get(ifc::in(ctx, srqc::log_page_size)));
    s.page_offset = static_cast<uint32_t>(c.get(ifc::in(ctx, srqc::page_offset)));
    s.dbr = c.get(ifc::in(ctx, srqc::dbr_addr));
    s.uid = static_cast<uint16_t>(c.get(ifc::create_srq_in::uid));
    finish_create(c, s, c.in_block(ifc::create_srq_in::pas), ifc::create_srq_out::srqn);
}

void SrqTable::cmd_destroy_srq(CmdCtx &c) {
    destroy(c, static_cast<uint32_t>(c.get(ifc::destroy_srq_in::srqn)), Srq::Kind::Srq);
}

void SrqTable::cmd_query_srq(CmdCtx &c) {
    Srq *s = lookup(c, static_cast<uint32_t>(c.get(ifc::query_srq_in::srqn)), Srq::Kind::Srq);
    if (!s) {
        return;
    }
    const ifc::Block ctx = ifc::query_srq_out::srq_context_entry;
    using ifc::srqc;
    c.set(ifc::in(ctx, srqc::state), s->error ? 1 : 0);
    c.set(ifc::in(ctx, srqc::log_srq_size), s->log_size);
    c.set(ifc::in(ctx, srqc::log_rq_stride), __builtin_ctz(s->stride) - 4);
    c.set(ifc::in(ctx, srqc::xrcd), s->xrcd);
    c.set(ifc::in(ctx, srqc::cqn), s->cqn);
    c.set(ifc::in(ctx, srqc::pd), s->pd);
    c.set(ifc::in(ctx, srqc::lwm), s->lwm);
    c.set(ifc::in(ctx, srqc::wqe_cnt), s->consumed);
    c.set(ifc::in(ctx, srqc::dbr_addr), s->dbr);
}

void SrqTable::cmd_arm_rq(CmdCtx &c) {
    const uint32_t n = static_cast<uint32_t>(c.get(ifc::arm_rq_in::srq_number));
    Srq *s = find(n);
    if (!s) {
        c.fail(Status::BadRes, "SRQ 0x{:x} does not exist", n);
        return;
    }
    arm(c, n, s->kind, static_cast<uint16_t>(c.get(ifc::arm_rq_in::lwm)));
}

// XRQ: xrqc + wq at create_xrq_in.xrq_context; the tag-matching topology
// gets its matching list (datapath/tm.h).
void SrqTable::cmd_create_xrq(CmdCtx &c) {
    const ifc::Block xrqc = ifc::create_xrq_in::xrq_context;
    const ifc::Block wq = ifc::in(xrqc, ifc::xrqc::wq);
    const ifc::Block tmc = ifc::in(xrqc, ifc::xrqc::tag_matching_topology_context);
    Srq s;
    s.kind = Srq::Kind::Xrq;
    if (c.get(ifc::in(wq, ifc::wq::wq_type)) != 0) {
        c.fail(Status::BadParam, "XRQ wq_type {} is not a linked list", c.get(ifc::in(wq, ifc::wq::wq_type)));
        return;
    }
    const uint64_t topology = c.get(ifc::in(xrqc, ifc::xrqc::topology));
    const uint64_t offload = c.get(ifc::in(xrqc, ifc::xrqc::offload));
    if (topology > kXrqTagMatching || offload > kXrqOffloadRndv || (offload && topology != kXrqTagMatching)) {
        c.fail(Status::BadParam, "XRQ topology {} offload {} is not supported", topology, offload);
        return;
    }
    if (topology == kXrqTagMatching) {
        const unsigned log_list =
            static_cast<unsigned>(c.get(ifc::in(tmc, ifc::tag_matching_topology_context::log_matching_list_sz)));
        const uint64_t max = dev_.fw.caps().gen(ifc::cmd_hca_cap::log_tag_matching_list_sz);
        if (!dev_.fw.caps().gen(ifc::cmd_hca_cap::tag_matching) || log_list == 0 || log_list > max) {
            c.fail(Status::BadParam, "XRQ matching list of 2^{} entries (log_tag_matching_list_sz {})", log_list, max);
            return;
        }
        s.tm = TagList::make(dev_.budget, log_list, offload == kXrqOffloadRndv);
        if (!s.tm) {
            c.fail(Status::ExceedLim, "the device's translation budget cannot hold a 2^{}-entry matching list",
                   log_list);
            return;
        }
    }
    read_wq(c, wq, s);
    s.cqn = static_cast<uint32_t>(c.get(ifc::in(xrqc, ifc::xrqc::cqn)));
    s.user_index = static_cast<uint32_t>(c.get(ifc::in(xrqc, ifc::xrqc::user_index)));
    s.uid = static_cast<uint16_t>(c.get(ifc::create_xrq_in::uid));
    const unsigned log_list = s.tm ? s.tm->log_size : 0;
    const bool rndv = s.tm && s.tm->rndv;
    if (finish_create(c, s, c.in_block(ifc::in(wq, ifc::wq::pas)), ifc::create_xrq_out::xrqn, wq) && log_list) {
        HCA_TRACE(dev_, obj_xrq_tag_matching, .xrqn = static_cast<uint32_t>(c.get(ifc::create_xrq_out::xrqn)),
                  .list = 1u << log_list, .rndv = rndv);
    }
}

void SrqTable::cmd_destroy_xrq(CmdCtx &c) {
    destroy(c, static_cast<uint32_t>(c.get(ifc::destroy_xrq_in::xrqn)), Srq::Kind::Xrq);
}

void SrqTable::cmd_query_xrq(CmdCtx &c) {
    Srq *s = lookup(c, static_cast<uint32_t>(c.get(ifc::query_xrq_in::xrqn)), Srq::Kind::Xrq);
    if (!s) {
        return;
    }
    const ifc::Block xrqc = ifc::query_xrq_out::xrq_context;
    const ifc::Block wq = ifc::in(xrqc, ifc::xrqc::wq);
    const ifc::Block tmc = ifc::in(xrqc, ifc::xrqc::tag_matching_topology_context);
    c.set(ifc::in(xrqc, ifc::xrqc::state), s->error ? 1 : 0);
    c.set(ifc::in(xrqc, ifc::xrqc::cqn), s->cqn);
    c.set(ifc::in(xrqc, ifc::xrqc::user_index), s->user_index);
    write_wq(c, wq, *s);
    if (const TagList *t = s->tm.get()) {
        using ifc::tag_matching_topology_context;
        c.set(ifc::in(xrqc, ifc::xrqc::topology), kXrqTagMatching);
        c.set(ifc::in(xrqc, ifc::xrqc::offload), t->rndv ? kXrqOffloadRndv : 0);
        c.set(ifc::in(tmc, tag_matching_topology_context::log_matching_list_sz), t->log_size);
        c.set(ifc::in(tmc, tag_matching_topology_context::append_next_index), t->append_next);
        c.set(ifc::in(tmc, tag_matching_topology_context::sw_phase_cnt), t->sw_phase);
        c.set(ifc::in(tmc, tag_matching_topology_context::hw_phase_cnt), t->hw_phase);
    }
}

std::string SrqTable::info() const {
    std::string s = fmt::format("SRQs: {}\n", srqs_.size());
    for (const auto &[srqn, q] : srqs_) {
        fmt::format_to(std::back_inserter(s),
                       "  srqn=0x{:x} {} nent={} stride={} pd={} xrcd={} cqn=0x{:x} head={} consumed={} lwm={} qps={}\n",
                       srqn, srq_kind_name(q.kind), q.nent(), q.stride, q.pd, q.xrcd, q.cqn, q.head, q.consumed, q.lwm,
                       q.refs);
    }
    return s;
}

}  // namespace hca
