// What device tests of on-demand paging share: zapping and mapping pages
// of a node's MTT region, a page-fault EQ, PAGE_FAULT_RESUME.
#pragma once

#include <catch2/catch.hpp>

#include "be.h"
#include "pair.h"

namespace hcatest {

constexpr uint8_t kPageFault = 0x0c;

// Loads the MTT entries of [iova, iova + len) of n's region again with
// (map) or without (zap) their READ|WRITE bits, as mlx5_ib's UMR does on a
// fault and on an invalidation.
inline void set_pages(Node &n, uint64_t iova, uint32_t len, bool map) {
    const hca::Mkey *m = n.d.bench().dev.mkeys.find(n.mr.key);
    REQUIRE(m);
    const uint64_t first = (iova - (n.mr.iova & ~uint64_t{4095})) / 4096;
    const uint64_t last = (iova + len - 1 - (n.mr.iova & ~uint64_t{4095})) / 4096;
    hca::UmrOp op;
    op.key = n.mr.key;
    static const uint8_t kNoMkc[64] = {};
    op.mkc = kNoMkc;
    op.xlt_first = first;
    for (uint64_t i = first; i <= last; ++i) {
        op.xlt.push_back(m->page(i) | (map ? hca::kMttAccess : 0));
    }
    REQUIRE(n.d.bench().dev.mkeys.umr(op, nullptr) == hca::UmrError::None);
}

inline EqHandle pf_eq(Node &n) {
    return n.d.create_eq(6, 3, {uint64_t{1} << kPageFault, 0, 0, 0}, n.uar);
}

inline uint8_t resume(Node &n, uint8_t type, uint32_t wq, uint32_t token, bool error = false) {
    auto in = Driver::inbox(hca::kOpPageFaultResume, 0, hca::ifc::page_fault_resume_in::size_bytes);
    const auto info = hca::ifc::page_fault_resume_in::page_fault_info;
    hca::ifc::set(in.data(), hca::ifc::in(info, hca::ifc::trans_page_fault_info::error), error);
    hca::ifc::set(in.data(), hca::ifc::in(info, hca::ifc::trans_page_fault_info::page_fault_type), type);
    hca::ifc::set(in.data(), hca::ifc::in(info, hca::ifc::trans_page_fault_info::wq_number), wq);
    hca::ifc::set(in.data(), hca::ifc::in(info, hca::ifc::trans_page_fault_info::fault_token), token);
    return n.d.exec(in, hca::ifc::page_fault_resume_out::size_bytes).status;
}

// A field of a page-fault EQE's data.
inline uint32_t eqe32(const Eqe &e, size_t off) {
    return hca::load_be32(e.data() + 0x20 + off);
}

}  // namespace hcatest
