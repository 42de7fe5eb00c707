#include "objects/psv.h"

#include "device.h"

namespace hca {

void PsvTable::reset() {
    psvs_.clear();
    ids_.reset();
}

Psv *PsvTable::find(uint32_t index) {
    auto it = psvs_.find(index);
    return it == psvs_.end() ? nullptr : &it->second;
}

const Psv *PsvTable::find(uint32_t index) const {
    auto it = psvs_.find(index);
    return it == psvs_.end() ? nullptr : &it->second;
}

// CREATE_PSV makes num_psv (1 to 4) PSVs of one PD: psv0_index to psv3_index.
void PsvTable::cmd_create_psv(CmdCtx &c) {
    const auto num = static_cast<uint32_t>(c.get(ifc::create_psv_in::num_psv));
    const auto pd = static_cast<uint32_t>(c.get(ifc::create_psv_in::pd));
    if (num == 0 || num > 4) {
        c.fail(Status::BadParam, "CREATE_PSV of {} PSVs (1 to 4)", num);
        return;
    }
    if (!dev_.pds.pd_used_by(c, pd, "PSV")) {
        return;
    }
    if (psvs_.size() + num > kMaxPsvs) {
        c.fail(Status::NoRes, "all {} PSVs are in use", kMaxPsvs);
        return;
    }
    static constexpr ifc::Field kOut[] = {ifc::create_psv_out::psv0_index, ifc::create_psv_out::psv1_index,
                                          ifc::create_psv_out::psv2_index, ifc::create_psv_out::psv3_index};
    uint32_t made[4];
    for (uint32_t i = 0; i < num; ++i) {
        const auto index = ids_.alloc();
        if (!index) {  // not below kMaxPsvs; give back what was taken
            for (uint32_t j = 0; j < i; ++j) {
                ids_.release(made[j]);
            }
            c.fail(Status::NoRes, "no PSV number free");
            return;
        }
        made[i] = *index;
    }
    for (uint32_t i = 0; i < num; ++i) {
        psvs_.emplace(made[i], Psv{pd, c.uid, 0});
        c.set(kOut[i], made[i]);
        HCA_TRACE(dev_, obj_create_psv, .psv = made[i], .pd = pd, .uid = c.uid);
    }
}

void PsvTable::cmd_destroy_psv(CmdCtx &c) {
    const auto index = static_cast<uint32_t>(c.get(ifc::destroy_psv_in::psvn));
    auto it = psvs_.find(index);
    if (it == psvs_.end()) {
        c.fail(Status::BadRes, "PSV 0x{:x} does not exist", index);
        return;
    }
    if (!c.may_touch(it->second.uid, "PSV", index)) {
        return;
    }
    psvs_.erase(it);
    ids_.release(index);
    HCA_TRACE(dev_, obj_destroy_psv, .psv = index);
}

}  // namespace hca
