// Fields that the kernel's mlx5_ifc.h leaves reserved because mlx5_ib never
// writes them, while user space does through DEVX: the UMEM that holds a
// CQ's or QP's buffer, doorbell record or memory key translation.  Offsets
// and names as the PRM gives them (rdma-core's providers/mlx5/mlx5_ifc.h);
// tools/gen-ifc.py does not write this file.
#pragma once

#include "ifc/field.h"

namespace hca::ifc::extra {

// create_cq_in (the kernel names only cq_umem_valid, at 0x2e0).
inline constexpr Field cq_umem_offset{0x280, 64};
inline constexpr Field cq_umem_id{0x2c0, 32};
// cqc (dbr_umem_valid is named, at 0x6).
inline constexpr Field cqc_dbr_umem_id{0x20, 32};
// qpc (dbr_umem_valid is named, at 0x683); create_qp_in names wq_umem_*.
inline constexpr Field qpc_dbr_umem_id{0x720, 32};
// create_mkey_in (mkey_umem_valid is named, at 0x61).
inline constexpr Field mkey_umem_id{0x320, 32};
inline constexpr Field mkey_umem_offset{0x340, 64};

// cmd_hca_cap: the kernel's reserved_at_480 (rdma-core's mlx5_ifc.h names it):
// signature errors report their domain and type (libmlx5 offers signature
// offload only with it and sho).
inline constexpr Field sigerr_domain_and_sig_type{0x480, 1};

}  // namespace hca::ifc::extra
