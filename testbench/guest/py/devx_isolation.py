#!/usr/bin/env python3
"""DEVX ownership between processes (pyverbs, mlx5dv).

The owner process opens the device with DEVX (a user context: every command
of its objects carries its uid) and makes a PD, a UMEM and a CQ in it
through DEVX. Then an intruder process, with a user context of its
own, builds DEVX objects (the raw PRM commands UCX and DPDK send) that name
the owner's PD, CQ or UMEM by number: the firmware must refuse each one
(the kernel passes such commands through; a refusal comes back as
EREMOTEIO). The same command naming the intruder's own objects must succeed,
so each refusal is the ownership check and not a malformed command.

    devx_isolation.py            the owner: runs the intruder, prints TAP
    devx_isolation.py intruder PDN CQN UMEM_ID
Exit status 1 if a check failed."""
import errno
import subprocess
import sys

from pyverbs.providers.mlx5.mlx5dv import Mlx5Context, Mlx5DevxObj, Mlx5DVContextAttr, Mlx5UAR, Mlx5UMEM
from verbs_enums import e, mlx5dv_enums  # noqa: E402
from verbs_rc import Tap  # noqa: E402

dve = mlx5dv_enums()


def setf(buf, off, width, val):
    """Sets a PRM field: bit offset from the most significant bit of byte 0."""
    end = off + width
    first, last = off // 8, (end - 1) // 8
    shift = (last + 1) * 8 - end
    mask = ((1 << width) - 1) << shift
    cur = int.from_bytes(buf[first:last + 1], "big")
    buf[first:last + 1] = ((cur & ~mask) | ((val << shift) & mask)).to_bytes(last - first + 1, "big")


def open_devx():
    return Mlx5Context(Mlx5DVContextAttr(flags=dve.MLX5DV_CONTEXT_FLAGS_DEVX), name="mlx5_0")


def devx_pd(ctx):
    """ALLOC_PD through DEVX: (its number, the object to keep)."""
    b = bytearray(0x10)
    setf(b, 0x0, 16, 0x800)
    pd = Mlx5DevxObj(ctx, bytes(b), 0x10)
    return int.from_bytes(bytes(pd.out_view[8:12]), "big") & 0xffffff, pd


def uar_of(ctx):
    # MLX5DV_UAR_ALLOC_TYPE_NC (1): pyverbs exports it with a leading underscore.
    return Mlx5UAR(ctx, getattr(dve, "_MLX5DV_UAR_ALLOC_TYPE_NC", 1))


def devx_cq(ctx, uar):
    """A DEVX CQ in a fresh UMEM: (its number, the objects to keep)."""
    umem = Mlx5UMEM(ctx, 3 * 4096, access=e.IBV_ACCESS_LOCAL_WRITE)
    cq = Mlx5DevxObj(ctx, cq_cmd(umem.umem_id, ctx.devx_query_eqn(0), uar.page_id), 0x10)
    return int.from_bytes(bytes(cq.out_view[8:12]), "big") & 0xffffff, (umem, cq)


def mkey_cmd(pdn):
    """CREATE_MKEY as mlx5dv_create_mkey() sends it: a free KLM key of 4 entries."""
    b = bytearray(0x110)
    setf(b, 0x0, 16, 0x200)
    mkc = 0x80
    setf(b, mkc + 0x1, 1, 1)  # free
    setf(b, mkc + 0x10, 1, 1)  # umr_en
    setf(b, mkc + 0x15, 1, 1)  # lr
    setf(b, mkc + 0x16, 2, 2)  # access_mode_1_0: KLM
    setf(b, mkc + 0x20, 24, 0xffffff)  # qpn
    setf(b, mkc + 0x68, 24, pdn)
    setf(b, mkc + 0x1a0, 32, 4)  # translations_octword_size
    return bytes(b)


def cq_cmd(umem_id, eqn, uar):
    """CREATE_CQ of 64 CQEs at offset 0 of a UMEM, its doorbell record at 4 KiB."""
    b = bytearray(0x110)
    setf(b, 0x0, 16, 0x400)
    cqc = 0x80
    setf(b, cqc + 0x6, 1, 1)  # dbr_umem_valid
    setf(b, cqc + 0x20, 32, umem_id)  # dbr_umem_id
    setf(b, cqc + 0x63, 5, 6)  # log_cq_size
    setf(b, cqc + 0x68, 24, uar)
    setf(b, cqc + 0xa0, 32, eqn)
    setf(b, cqc + 0x1c0, 64, 4096)  # dbr_addr: an offset in the UMEM
    setf(b, 0x2c0, 32, umem_id)  # cq_umem_id
    setf(b, 0x2e0, 1, 1)  # cq_umem_valid
    return bytes(b)


def qp_cmd(pdn, cqn, umem_id, uar):
    """CREATE_QP of an RC QP with 16 receive WQEs and 16 WQEBBs in a UMEM."""
    b = bytearray(0x110)
    setf(b, 0x0, 16, 0x500)
    qpc = 0xc0
    setf(b, qpc + 0x8, 8, 0)  # st: RC
    setf(b, qpc + 0x13, 2, 3)  # pm_state: migrated
    setf(b, qpc + 0x28, 24, pdn)
    setf(b, qpc + 0x49, 4, 4)  # log_rq_size
    setf(b, qpc + 0x4d, 3, 2)  # log_rq_stride: 64 bytes
    setf(b, qpc + 0x51, 4, 4)  # log_sq_size
    setf(b, qpc + 0x68, 24, uar)
    setf(b, qpc + 0x3e8, 24, cqn)
    setf(b, qpc + 0x4e8, 24, cqn)
    setf(b, qpc + 0x500, 64, 4096 + 64)  # dbr_addr: an offset in the UMEM
    setf(b, qpc + 0x683, 1, 1)  # dbr_umem_valid
    setf(b, qpc + 0x720, 32, umem_id)  # dbr_umem_id
    setf(b, 0x840, 32, umem_id)  # wq_umem_id
    setf(b, 0x860, 1, 1)  # wq_umem_valid
    return bytes(b)


def attempt(ctx, cmd):
    """Creates the DEVX object: None when it was made, else the errno."""
    try:
        obj = Mlx5DevxObj(ctx, cmd, 0x10)
    except Exception as ex:  # PyverbsRDMAError: errno in error_code
        return getattr(ex, "error_code", -1) or -1
    obj.close()
    return None


def intruder(pdn, cqn, umem_id):
    tap = Tap()
    ctx = open_devx()
    own_pdn, pd = devx_pd(ctx)
    uar_obj = uar_of(ctx)
    uar = uar_obj.page_id
    own_cqn, keep = devx_cq(ctx, uar_obj)
    eqn = ctx.devx_query_eqn(0)
    umem = Mlx5UMEM(ctx, 3 * 4096, access=e.IBV_ACCESS_LOCAL_WRITE)
    umem2 = Mlx5UMEM(ctx, 3 * 4096, access=e.IBV_ACCESS_LOCAL_WRITE)
    refused = errno.EREMOTEIO
    err = attempt(ctx, mkey_cmd(pdn))
    tap.check(f"a memory key on the other process's PD {pdn} is refused by the device (errno {err})", err == refused)
    tap.check("the same memory key on this process's own PD is made", attempt(ctx, mkey_cmd(own_pdn)) is None)
    tap.check(f"a QP on the other process's CQ 0x{cqn:x} is refused by the device",
              attempt(ctx, qp_cmd(own_pdn, cqn, umem.umem_id, uar)) == refused)
    tap.check(f"a QP on the other process's PD {pdn} is refused by the device",
              attempt(ctx, qp_cmd(pdn, own_cqn, umem.umem_id, uar)) == refused)
    tap.check("the same QP on this process's own PD and CQ is made",
              attempt(ctx, qp_cmd(own_pdn, own_cqn, umem.umem_id, uar)) is None)
    tap.check(f"a CQ in the other process's UMEM {umem_id} is refused by the device",
              attempt(ctx, cq_cmd(umem_id, eqn, uar)) == refused)
    tap.check("the same CQ in this process's own UMEM is made", attempt(ctx, cq_cmd(umem2.umem_id, eqn, uar)) is None)
    # The CQ before its UMEM (the device keeps that busy until then), then
    # everything else in order.
    for obj in (keep[1], keep[0], umem, umem2, pd, uar_obj, ctx):
        obj.close()
    return tap.failed


def owner():
    tap = Tap()
    ctx = open_devx()
    pdn, pd = devx_pd(ctx)
    uar = uar_of(ctx)
    cqn, (umem, cq) = devx_cq(ctx, uar)
    print(f"# owner: PD {pdn}, CQ 0x{cqn:x}, UMEM {umem.umem_id}", flush=True)
    # The owner's own DEVX key on its PD works: the refusals below are about the intruder.
    tap.check("the owner makes a memory key on its own PD", attempt(ctx, mkey_cmd(pdn)) is None)
    out = subprocess.run([sys.executable, __file__, "intruder", str(pdn), str(cqn), str(umem.umem_id)],
                         capture_output=True, text=True, timeout=120)
    for line in out.stdout.splitlines():
        print(f"# intruder: {line}")
    if out.stderr:
        print("# intruder stderr: " + out.stderr.strip().replace("\n", "\n# "))
    tap.check(f"the intruder process passed every check (exit {out.returncode})", out.returncode == 0)
    tap.check("the owner's PD still takes its memory keys after the intruder's attempts",
              attempt(ctx, mkey_cmd(pdn)) is None)
    # Everything closed in order: rdma-core 56's pyverbs crashes at exit
    # when the interpreter frees a UAR after its context.
    for obj in (cq, umem, pd, uar, ctx):
        obj.close()
    return tap.failed


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "intruder":
        sys.exit(1 if intruder(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])) else 0)
    sys.exit(1 if owner() else 0)
