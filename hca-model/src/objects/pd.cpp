#include "objects/pd.h"

#include "device.h"

namespace hca {

void PdTable::reset() {
    pds_.reset();
    pd_uids_.clear();
    xrcds_.reset();
}

void PdTable::cmd_alloc_pd(CmdCtx &c) {
    pds_.set_limit(1u + (1u << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_pd)));
    auto pdn = pds_.alloc();
    if (!pdn) {
        c.fail(Status::NoRes, "all protection domains are in use");
        return;
    }
    pd_uids_[*pdn] = c.uid;
    c.set(ifc::alloc_pd_out::pd, *pdn);
    HCA_TRACE(dev_, obj_alloc_pd, .pd = *pdn, .uid = c.get(ifc::alloc_pd_in::uid));
}

void PdTable::cmd_dealloc_pd(CmdCtx &c) {
    const uint32_t pdn = static_cast<uint32_t>(c.get(ifc::dealloc_pd_in::pd));
    auto it = pd_uids_.find(pdn);
    if (it == pd_uids_.end()) {
        c.fail(Status::BadRes, "PD {} does not exist", pdn);
        return;
    }
    if (!c.may_touch(it->second, "PD", pdn)) {
        return;
    }
    pd_uids_.erase(it);
    pds_.release(pdn);
    HCA_TRACE(dev_, obj_dealloc_pd, .pd = pdn);
}

bool PdTable::pd_used_by(CmdCtx &c, uint32_t pdn, const char *what) {
    auto it = pd_uids_.find(pdn);
    if (it == pd_uids_.end()) {
        c.fail(Status::BadParam, "{} PD {} does not exist", what, pdn);
        return false;
    }
    return c.may_use(it->second, "PD", pdn, what);
}

void PdTable::cmd_alloc_xrcd(CmdCtx &c) {
    xrcds_.set_limit(1u + (1u << dev_.fw.caps().gen(ifc::cmd_hca_cap::log_max_xrcd)));
    auto x = xrcds_.alloc();
    if (!x) {
        c.fail(Status::NoRes, "all XRC domains are in use");
        return;
    }
    c.set(ifc::alloc_xrcd_out::xrcd, *x);
    HCA_TRACE(dev_, obj_alloc_xrcd, .xrcd = *x);
}

void PdTable::cmd_dealloc_xrcd(CmdCtx &c) {
    const uint32_t x = static_cast<uint32_t>(c.get(ifc::dealloc_xrcd_in::xrcd));
    if (!xrcds_.release(x)) {
        c.fail(Status::BadRes, "XRCD {} does not exist", x);
        return;
    }
    HCA_TRACE(dev_, obj_dealloc_xrcd, .xrcd = x);
}

}  // namespace hca
