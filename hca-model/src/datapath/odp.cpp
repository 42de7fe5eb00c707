#include "datapath/odp.h"

#include "datapath/rc_req.h"
#include "device.h"
#include "objects/qp.h"

namespace hca {

namespace {

const char *pf_type_name(PfType t) {
    switch (t) {
        case PfType::Rmp:
            return "rmp";
        case PfType::ReqSendOrWrite:
            return "req-send-write";
        case PfType::Resp:
            return "resp";
        case PfType::ReqReadOrAtomic:
            return "req-read-atomic";
    }
    return "?";
}

// MLX5_PFAULT_SUBTYPE_*
constexpr uint8_t kSubtypeWqe = 0;
constexpr uint8_t kSubtypeRdma = 1;

}  // namespace

void PageFaults::reset() {
    pending_.clear();
    next_token_ = 1;
    rdma_faults_ = 0;
}

bool PageFaults::can_fault() const {
    return dev_.eqs.subscriber(kEventPageFault) != nullptr;
}

// Records a WQE fault under a new token and writes its EQE. A side of a
// QP has one fault at a time: an older one of the same side is replaced.
uint32_t PageFaults::post_wqe(Qp &qp, const Pending &p, EqeData &data) {
    uint32_t &slot = p.requester ? qp.pf.req_token : qp.pf.resp_token;
    if (slot) {
        pending_.erase(slot);
    }
    const uint32_t token = next_token_;
    next_token_ = next_token_ == 0xffffff ? 1 : next_token_ + 1;
    pending_[token] = p;
    slot = token;
    data.pf_wqe.token.set(token);
    data.pf_wqe.pftype_wq.set(uint32_t{static_cast<uint8_t>(p.type)} << 24 | (p.wq & 0xffffff));
    dev_.eqs.post_event(kEventPageFault, kSubtypeWqe, data);
    return token;
}

bool PageFaults::requester(Qp &qp, PfType type, uint16_t index, uint8_t opcode, uint32_t bytes_committed,
                           uint16_t next) {
    if (!can_fault()) {  // (a DCI too: dc_odp_caps.send)
        return false;
    }
    EqeData d;
    d.pf_wqe.bytes_committed.set(bytes_committed);
    d.pf_wqe.wqe_index.set(index);
    const uint32_t token = post_wqe(
        qp,
        {.qpn = qp.qpn, .wq = qp.qpn, .type = type, .requester = true, .opcode = opcode, .index = index, .next = next},
        d);
    HCA_TRACE(dev_, mkey_page_fault, .qpn = qp.qpn, .kind = pf_type_name(type), .wq = qp.qpn, .token = token,
              .wqe_index = index, .bytes_committed = bytes_committed);
    return true;
}

// A responder fault can be raised unless no EQ takes them or the driver
// failed the last one (that flag is taken: the fault at hand is final).
bool PageFaults::responder_may_fault(Qp &qp) const {
    const bool failed = qp.pf.resp_failed;
    qp.pf.resp_failed = false;
    return !failed && can_fault();
}

bool PageFaults::receive(Qp &qp, uint16_t index, uint32_t srqn, uint16_t packet_len) {
    // A DCT's responder context faults on its SRQ's WQEs only
    // (dc_odp_caps.srq_receive): the fault names the SRQ, not the context.
    if (!responder_may_fault(qp) || (qp.is_dc() && !srqn)) {
        return false;
    }
    if (qp.pf.responder_busy()) {
        return true;  // the driver is at it already: the requester retries
    }
    const PfType type = srqn ? PfType::Rmp : PfType::Resp;
    const uint32_t wq = srqn ? srqn : qp.qpn;
    EqeData d;
    d.pf_wqe.wqe_index.set(index);
    d.pf_wqe.packet_length.set(packet_len);
    const uint32_t token = post_wqe(qp, {.qpn = qp.qpn, .wq = wq, .type = type, .requester = false, .index = index}, d);
    HCA_TRACE(dev_, mkey_page_fault, .qpn = qp.qpn, .kind = pf_type_name(type), .wq = wq, .token = token,
              .wqe_index = index);
    return true;
}

bool PageFaults::rdma(Qp &qp, uint32_t rkey, uint64_t va, uint32_t len, uint16_t packet_len) {
    // Not on a DCT (dc_odp_caps.write/read/atomic 0): the token would be
    // the responder context's number, which has more than 24 bits.
    if (!responder_may_fault(qp) || qp.is_dc()) {
        return false;
    }
    if (qp.pf.responder_busy()) {
        return true;
    }
    // The token of an RDMA fault is the QP: the driver resumes it with
    // wq_number = fault_token = the QPN.
    EqeData d;
    d.pf_rdma.r_key.set(rkey);
    d.pf_rdma.packet_length.set(packet_len);
    d.pf_rdma.rdma_op_len.set(len);
    d.pf_rdma.rdma_va.set(va);
    d.pf_rdma.pftype_token.set(uint32_t{static_cast<uint8_t>(PfType::Resp)} << 24 | (qp.qpn & 0xffffff));
    qp.pf.resp_rdma = true;
    ++rdma_faults_;
    dev_.eqs.post_event(kEventPageFault, kSubtypeRdma, d);
    HCA_TRACE(dev_, mkey_page_fault, .qpn = qp.qpn, .kind = "rdma", .wq = qp.qpn, .token = qp.qpn, .rkey = rkey,
              .va = va, .len = len);
    return true;
}

void PageFaults::forget(Qp &qp) {
    for (const uint32_t t : {qp.pf.req_token, qp.pf.resp_token}) {
        if (t) {
            pending_.erase(t);
        }
    }
    rdma_faults_ -= qp.pf.resp_rdma;
    qp.pf = {};
}

void PageFaults::forget_requester(Qp &qp) {
    if (qp.pf.req_token) {
        pending_.erase(qp.pf.req_token);
        qp.pf.req_token = 0;
    }
}

// PAGE_FAULT_RESUME: the fault named by its token (an RDMA fault: by its
// QP), work queue and type is resolved, or with error, failed.
void PageFaults::cmd_page_fault_resume(CmdCtx &c) {
    const auto info = ifc::page_fault_resume_in::page_fault_info;
    const bool error = c.get(ifc::in(info, ifc::trans_page_fault_info::error));
    const auto type = static_cast<uint8_t>(c.get(ifc::in(info, ifc::trans_page_fault_info::page_fault_type)));
    const auto wq = static_cast<uint32_t>(c.get(ifc::in(info, ifc::trans_page_fault_info::wq_number)));
    const auto token = static_cast<uint32_t>(c.get(ifc::in(info, ifc::trans_page_fault_info::fault_token)));
    if (Qp *qp = dev_.qps.find(wq);
        qp && qp->pf.resp_rdma && token == wq && type == static_cast<uint8_t>(PfType::Resp)) {
        qp->pf.resp_rdma = false;
        --rdma_faults_;
        qp->pf.resp_failed = error;
        HCA_TRACE(dev_, mkey_page_fault_resume, .qpn = qp->qpn, .wq = wq, .token = token, .type = type, .error = error,
                  .outcome = "resumed");
        return;
    }
    auto it = pending_.find(token);
    if (it == pending_.end() || it->second.wq != wq || static_cast<uint8_t>(it->second.type) != type) {
        // The work queue may be gone or reset since the fault: nothing
        // waits for this resume.
        const bool known = dev_.qps.find(wq) != nullptr || dev_.srqs.find(wq) != nullptr;
        HCA_TRACE(dev_, mkey_page_fault_resume, .wq = wq, .token = token, .type = type, .error = error,
                  .outcome = known ? "stale" : "unknown");
        if (!known) {
            c.fail(Status::BadParam, "PAGE_FAULT_RESUME for work queue 0x{:x}, which does not exist", wq);
        }
        return;
    }
    const Pending p = it->second;
    pending_.erase(it);
    HCA_TRACE(dev_, mkey_page_fault_resume, .qpn = p.qpn, .wq = wq, .token = token, .type = type, .error = error,
              .outcome = "resumed");
    resumed(p, error);
}

void PageFaults::resumed(const Pending &p, bool error) {
    Qp *qp = dev_.qps.find(p.qpn);
    if (!qp) {
        return;
    }
    if (!p.requester) {
        qp->pf.resp_token = 0;
        qp->pf.resp_failed = error;
        return;
    }
    qp->pf.req_token = 0;
    if (qp->connected()) {
        dev_.qps.requester().resume(*qp, error);
    } else if (error) {
        dev_.qps.sq().fail_at(*qp, p.index, p.next, p.opcode, kSyndLocalProt, "page fault resumed with error");
    } else {
        dev_.qps.sq().defer(*qp);
    }
}

}  // namespace hca
