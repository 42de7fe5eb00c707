// DC targets: CREATE/DESTROY/DRAIN/QUERY_DCT, ARM_DCT_FOR_KEY_VIOLATION,
// and the responder contexts a DCT keeps for its initiators (qp.h DcState;
// docs/ARCHITECTURE.md "Dynamically connected").
#include <fmt/format.h>

#include "device.h"
#include "objects/qp.h"

namespace hca {

using ifc::dctc;

namespace {

// The DCT's fields of a dctc, as CREATE_DCT gives them.
Qp dct_of_create(CmdCtx &c) {
    const ifc::Block ctx = ifc::create_dct_in::dct_context_entry;
    auto f = [&](ifc::Field fld) { return c.get(ifc::in(ctx, fld)); };
    Qp d;
    d.st = kQpDct;
    d.state = QpState::Rtr;
    d.uid = static_cast<uint16_t>(c.get(ifc::create_dct_in::uid));
    d.user_index = static_cast<uint32_t>(f(dctc::user_index));
    d.cqn_rcv = static_cast<uint32_t>(f(dctc::cqn));
    d.counter_set = static_cast<uint8_t>(f(dctc::counter_set_id));
    d.atomic_mode = static_cast<uint8_t>(f(dctc::atomic_mode));
    d.rre = f(dctc::rre);
    d.rwe = f(dctc::rwe);
    d.rae = f(dctc::rae);
    d.dc.cs_res = static_cast<uint8_t>(f(dctc::cs_res));
    d.min_rnr_nak = static_cast<uint8_t>(f(dctc::min_rnr_nak));
    d.rq_type = kRqSrq;
    d.srqn = static_cast<uint32_t>(f(dctc::srqn_xrqn));
    d.pd = static_cast<uint32_t>(f(dctc::pd));
    d.path.tclass = static_cast<uint8_t>(f(dctc::tclass));
    d.path.flow_label = static_cast<uint32_t>(f(dctc::flow_label));
    d.dc.key = f(dctc::dc_access_key);
    d.mtu = static_cast<uint8_t>(f(dctc::mtu));
    d.path.port = static_cast<uint8_t>(f(dctc::port));
    d.path.pkey_index = static_cast<uint16_t>(f(dctc::pkey_index));
    d.path.src_addr_index = static_cast<uint8_t>(f(dctc::my_addr_index));
    d.path.hop_limit = static_cast<uint8_t>(f(dctc::hop_limit));
    d.no_sq = true;
    return d;
}

std::string access_str(const Qp &q) {
    return fmt::format("{}{}{}", q.rre ? "R" : "-", q.rwe ? "W" : "-", q.rae ? "A" : "-");
}

}  // namespace

void QpTable::cmd_create_dct(CmdCtx &c) {
    const auto &caps = dev_.fw.caps();
    if (!caps.gen(ifc::cmd_hca_cap::dct)) {
        c.fail(Status::BadOp, "DC is not enabled");
        return;
    }
    Qp d = dct_of_create(c);
    if (!dev_.pds.pd_used_by(c, d.pd, "DCT")) {
        return;
    }
    Srq *srq = dev_.srqs.find(d.srqn);
    if (!srq || srq->kind == Srq::Kind::XrcSrq) {
        c.fail(Status::BadParam, "SRQ 0x{:x} does not exist", d.srqn);
        return;
    }
    if (!c.may_use(srq->uid, "DCT SRQ", d.srqn)) {
        return;
    }
    Cq *cq = dev_.cqs.find_used_by(c, d.cqn_rcv, "DCT");
    if (!cq) {
        return;
    }
    if (d.path.port != 1 || d.mtu < 1 || d.mtu > 5) {
        c.fail(Status::BadParam, "DCT port {} / mtu {} are not valid", d.path.port, d.mtu);
        return;
    }
    d.qpn = alloc_qpn(c);
    if (!d.qpn) {
        return;
    }
    ++srq->refs;
    ++cq->refs;
    c.set(ifc::create_dct_out::dctn, d.qpn);
    HCA_TRACE(dev_, obj_create_dct, .dctn = d.qpn, .pd = d.pd, .srqn = d.srqn, .cqn = d.cqn_rcv, .key = d.dc.key,
              .access = access_str(d), .mtu = 128u << d.mtu, .uid = d.uid);
    qps_.emplace(d.qpn, std::move(d));
}

void QpTable::cmd_destroy_dct(CmdCtx &c) {
    Qp *d = find_of(c, static_cast<uint32_t>(c.get(ifc::destroy_dct_in::dctn)), kQpDct);
    if (!d) {
        return;
    }
    HCA_TRACE(dev_, obj_destroy_dct, .dctn = d->qpn, .contexts = d->dc.contexts.size(), .packets = d->received,
              .dropped = d->dropped, .key_violations = d->dc.key_violations);
    drop_dc_contexts(*d);
    if (Cq *cq = dev_.cqs.find(d->cqn_rcv); cq && cq->refs) {
        --cq->refs;
    }
    if (Srq *s = dev_.srqs.find(d->srqn); s && s->refs) {
        --s->refs;
    }
    const uint32_t dctn = d->qpn;
    qps_.erase(dctn);
    ids_.release(dctn);
}

// DRAIN_DCT: the DCT takes no new connection and, once its connections
// are done, reports DCT_DRAINED (mlx5_core waits for it before
// DESTROY_DCT). A context works on a packet only while the device takes
// it in, so every connection is done at once.
void QpTable::cmd_drain_dct(CmdCtx &c) {
    Qp *d = find_of(c, static_cast<uint32_t>(c.get(ifc::drain_dct_in::dctn)), kQpDct);
    if (!d) {
        return;
    }
    HCA_TRACE(dev_, obj_drain_dct, .dctn = d->qpn, .contexts = d->dc.contexts.size());
    drop_dc_contexts(*d);
    d->dc.state = DctState::Drained;
    d->state = QpState::Err;
    dev_.eqs.post_event(kEventDctDrained, 0, EqeData::dct(d->qpn));
}

void QpTable::cmd_query_dct(CmdCtx &c) {
    Qp *d = find_of(c, static_cast<uint32_t>(c.get(ifc::query_dct_in::dctn)), kQpDct);
    if (!d) {
        return;
    }
    const ifc::Block ctx = ifc::query_dct_out::dct_context_entry;
    auto s = [&](ifc::Field fld, uint64_t v) { c.set(ifc::in(ctx, fld), v); };
    s(dctc::state, static_cast<uint8_t>(d->dc.state));
    s(dctc::user_index, d->user_index);
    s(dctc::cqn, d->cqn_rcv);
    s(dctc::counter_set_id, d->counter_set);
    s(dctc::atomic_mode, d->atomic_mode);
    s(dctc::rre, d->rre);
    s(dctc::rwe, d->rwe);
    s(dctc::rae, d->rae);
    s(dctc::cs_res, d->dc.cs_res);
    s(dctc::min_rnr_nak, d->min_rnr_nak);
    s(dctc::srqn_xrqn, d->srqn);
    s(dctc::pd, d->pd);
    s(dctc::tclass, d->path.tclass);
    s(dctc::flow_label, d->path.flow_label);
    s(dctc::dc_access_key, d->dc.key);
    s(dctc::mtu, d->mtu);
    s(dctc::port, d->path.port);
    s(dctc::pkey_index, d->path.pkey_index);
    s(dctc::my_addr_index, d->path.src_addr_index);
    s(dctc::hop_limit, d->path.hop_limit);
    s(dctc::dc_access_key_violation_count, d->dc.key_violations);
}

// The next access key violation is reported once, as DCT_KEY_VIOLATION.
void QpTable::cmd_arm_dct(CmdCtx &c) {
    if (Qp *d = find_of(c, static_cast<uint32_t>(c.get(ifc::arm_dct_in::dct_number)), kQpDct)) {
        d->dc.armed = true;
    }
}

void QpTable::drop_dc_context(Qp &ctx) {
    if (Qp *d = find(ctx.dc.dct)) {
        d->dc.contexts.erase(ctx.dc.initiator);
    }
    rc_reset(ctx);
    const uint32_t key = ctx.qpn;
    qps_.erase(key);
    dc_ids_.release(key);
}

void QpTable::drop_dc_contexts(Qp &dct) {
    while (!dct.dc.contexts.empty()) {
        Qp *ctx = find(dct.dc.contexts.begin()->second);
        if (!ctx) {
            dct.dc.contexts.erase(dct.dc.contexts.begin());
            continue;
        }
        drop_dc_context(*ctx);
    }
}

// A context for a new initiator: a free key, or the least recently used
// idle context of this DCT. nullptr if every one is busy.
Qp *QpTable::new_dc_context(Qp &dct, uint64_t initiator) {
    std::optional<uint32_t> key;
    if (dct.dc.contexts.size() < kDcContextsPerDct) {
        key = dc_ids_.alloc();
    }
    if (!key) {
        Qp *lru = nullptr;
        for (const auto &[who, k] : dct.dc.contexts) {
            Qp *q = find(k);
            if (q && RcResponder::idle(q->rc) && (!lru || q->dc.last_used < lru->dc.last_used)) {
                lru = q;
            }
        }
        if (!lru) {
            return nullptr;
        }
        HCA_TRACE(dev_, qp_dc_context, .dctn = dct.qpn, .dci = lru->remote_qpn, .slid = lru->path.rlid,
                  .psn = lru->rc.epsn, .context = lru->qpn, .reason = "evicted: the least recently used idle one");
        drop_dc_context(*lru);
        key = dc_ids_.alloc();
        if (!key) {
            return nullptr;
        }
    }
    Qp ctx;
    ctx.qpn = *key;
    ctx.st = kQpDcContext;
    ctx.dc.dct = dct.qpn;
    ctx.dc.initiator = initiator;
    dct.dc.contexts[initiator] = *key;
    return &qps_.emplace(*key, std::move(ctx)).first->second;
}

Qp *QpTable::dc_context(Qp &dct, const Packet &pkt, const iba::PacketView &v) {
    auto drop = [&](const char *why) -> Qp * {
        ++dct.dropped;
        HCA_TRACE(dev_, pkt_drop, .id = pkt.id, .qpn = dct.qpn, .op = iba::opcode_name(v.opcode()), .psn = v.psn(),
                  .slid = v.slid(), .reason = why);
        return nullptr;
    };
    if ((v.opcode() & 0xe0) != iba::kDc || !v.dceth) {
        return drop("not a DC request");
    }
    if (dct.dc.state != DctState::Active) {
        return drop("the DCT is drained");
    }
    if (v.dceth->key.get() != dct.dc.key) {
        ++dct.dc.key_violations;
        if (dct.dc.armed) {
            dct.dc.armed = false;
            dev_.eqs.post_event(kEventDctKeyViolation, 0, EqeData::dct(dct.qpn));
        }
        return drop("DC access key violation");
    }
    const uint32_t dci = v.dceth->dci.get() & 0xffffff;
    const uint64_t initiator = uint64_t{v.slid()} << 24 | dci;
    auto it = dct.dc.contexts.find(initiator);
    Qp *ctx = it == dct.dc.contexts.end() ? nullptr : find(it->second);
    // A connect starts the context over at its PSN; the same connect again
    // (a retransmission) is a duplicate for the context as it stands.
    if ((v.dceth->dci.get() & iba::kDcConnect) && (!ctx || ctx->dc.conn_psn != v.psn())) {
        if (!ctx && !(ctx = new_dc_context(dct, initiator))) {
            return drop("every DC context of the DCT is busy");
        }
        start_dc_context(dct, *ctx, v, dci);
    } else if (!ctx) {
        return drop("no connection from this initiator");
    }
    ctx->dc.last_used = ++dc_clock_;
    return ctx;
}

// A connection from the initiator: the context answers it with the DCT's
// attributes, through the path the packet came on.
void QpTable::start_dc_context(Qp &dct, Qp &ctx, const iba::PacketView &v, uint32_t dci) {
    const bool fresh = ctx.state != QpState::Rts || ctx.remote_qpn != dci;
    rc_reset(ctx);
    ctx.state = QpState::Rts;
    ctx.pd = dct.pd;
    ctx.uid = dct.uid;
    ctx.user_index = dct.user_index;
    ctx.cqn_rcv = ctx.cqn_snd = dct.cqn_rcv;
    ctx.rq_type = kRqSrq;
    ctx.srqn = dct.srqn;
    ctx.no_sq = true;
    ctx.rre = dct.rre;
    ctx.rwe = dct.rwe;
    ctx.rae = dct.rae;
    ctx.atomic_mode = dct.atomic_mode;
    ctx.min_rnr_nak = dct.min_rnr_nak;
    ctx.mtu = dct.mtu;
    ctx.counter_set = dct.counter_set;
    ctx.log_rra_max = static_cast<uint8_t>(dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_ra_res_dc));
    ctx.path = dct.path;
    ctx.path.rlid = v.slid();
    ctx.path.sl = v.sl();
    ctx.path.grh = v.grh != nullptr;
    if (v.grh) {
        ctx.path.rgid = v.grh->sgid;
    }
    ctx.remote_qpn = dci;
    ctx.dc.key = dct.dc.key;
    ctx.dc.conn_psn = v.psn();
    RcResponder::expect(ctx, v.psn());
    dev_.qcounters.add(dct.counter_set, QCounter::RxDctConnect);
    HCA_TRACE(dev_, qp_dc_context, .dctn = dct.qpn, .dci = dci, .slid = v.slid(), .psn = v.psn(), .context = ctx.qpn,
              .reason = fresh ? "connected" : "connected again");
}

}  // namespace hca
