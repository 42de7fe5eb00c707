#!/usr/bin/env python3
"""Device memory between two VMs (pyverbs): each node allocates 4 KiB of
its HCA's device memory (ibv_alloc_dm) and registers it (ibv_reg_dm_mr,
zero based, remote read/write/atomic); the nodes exchange QP number, LID
and the key through the run directory and connect an RC QP pair across the
fabric. Node 0 RDMA-WRITEs a pattern from host memory into node 1's device
memory, READs it back into its own device memory, and adds to a counter in
node 1's device memory; node 1 checks what arrived with ibv_memcpy_from_dm.

    dm_across.py NODE PEER SHARED_DIR
Prints TAP lines; exit status 1 if a check failed."""
import sys

from pyverbs.cq import CQ
from pyverbs.device import DM, AllocDmAttr, Context
from pyverbs.mr import DMMR, MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR
from verbs_enums import e  # noqa: E402
from verbs_rc import Tap, complete, connect_rc, publish, wait_for  # noqa: E402

SIZE = 4096
ACCESS = (e.IBV_ACCESS_ZERO_BASED | e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
          e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)
PATTERN = bytes((i * 7 + 3) & 0xff for i in range(SIZE - 64))
tap = Tap()
check = tap.check


def main(me, peer_node, shared):
    ctx = Context(name="mlx5_0")
    check(f"the device offers device memory (max_dm_size {ctx.query_device_ex().max_dm_size})",
          ctx.query_device_ex().max_dm_size >= SIZE)
    pd = PD(ctx)
    cq = CQ(ctx, 16)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)))
    dm = DM(ctx, AllocDmAttr(length=SIZE))
    dm.copy_to_dm(0, bytes(SIZE), SIZE)
    dmmr = DMMR(pd, SIZE, ACCESS, dm, 0)
    publish(shared, me, "dm-qp", {"qpn": qp.qp_num, "lid": ctx.query_port(1).lid, "rkey": dmmr.rkey})
    peer = wait_for(shared, peer_node, "dm-qp")
    connect_rc(qp, peer["qpn"], peer["lid"], e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
               e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)
    publish(shared, me, "dm-ready", {})
    wait_for(shared, peer_node, "dm-ready")

    if me == 0:
        host = MR(pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE)
        host.write(PATTERN, len(PATTERN))
        wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(host.buf, len(PATTERN), host.lkey)])
        wr.set_wr_rdma(peer["rkey"], 64)  # zero based: offset 64 of the peer's device memory
        qp.post_send(wr)
        complete(tap, cq, "RDMA WRITE from host memory into the peer's device memory")
        wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(0, len(PATTERN), dmmr.lkey)])
        wr.set_wr_rdma(peer["rkey"], 64)
        qp.post_send(wr)
        complete(tap, cq, "RDMA READ from the peer's device memory into our own")
        got = dm.copy_from_dm(0, len(PATTERN))
        check("what came back into our device memory is the pattern", bytes(got) == PATTERN)
        for i in range(3):
            wr = SendWR(wr_id=3 + i, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1, sg=[SGE(host.buf, 8, host.lkey)])
            wr.set_wr_atomic(peer["rkey"], 0, 5, 0)  # the counter at offset 0 of the peer's device memory
            qp.post_send(wr)
            complete(tap, cq, f"fetch-and-add {i + 1} on the peer's device memory")
        old = int.from_bytes(bytes(host.read(8, 0)), sys.byteorder)
        check(f"the last fetch-and-add returned the counter before it ({old}, expected 10)", old == 10)
        publish(shared, me, "dm-done", {})
    else:
        wait_for(shared, peer_node, "dm-done", timeout=120)
        got = bytes(dm.copy_from_dm(64, len(PATTERN)))
        check("the peer's RDMA WRITE landed in our device memory", got == PATTERN)
        counter = int.from_bytes(bytes(dm.copy_from_dm(0, 8)), sys.byteorder)
        check(f"three fetch-and-adds of 5 left 15 in our device memory ({counter})", counter == 15)
    # The key before the memory it registers (pyverbs' own teardown order
    # would free the memory first, which the kernel refuses: EBUSY).
    dmmr.close()
    dm.close()
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
