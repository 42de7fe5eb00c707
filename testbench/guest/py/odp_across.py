#!/usr/bin/env python3
"""On-demand paging between two VMs (pyverbs): each node registers
anonymous memory with IBV_ACCESS_ON_DEMAND and gives it back to the kernel
(madvise MADV_DONTNEED) between rounds, so every round faults the pages in
again under traffic, on both sides of the fabric:
  node 0  writes a new pattern into A (its pages freed just before: the
          RDMA WRITE's gather faults), RDMA-WRITEs A into node 1's B (freed
          by node 1: the responder faults), READs B back into C (freed: the
          READ response's scatter faults), SENDs A into node 1's receive
          buffer R (freed: the receive WQE faults) and adds to a counter in
          node 1's B (an atomic on a freed page after node 1's check);
  node 1  checks B and R against the round's pattern, then frees them.
Every transfer and every byte is checked. With "implicit", each node
reaches all its buffers through one implicit ODP MR (ibv_reg_mr of the
whole address space): the device finds no translation for a buffer's GiB
until the driver has made one (mlx5_ib's KSM key and its 1 GiB children).

    odp_across.py NODE PEER SHARED_DIR [ROUNDS [explicit|implicit]]
Prints TAP lines; exit status 1 if a check failed."""
import ctypes
import mmap
import sys

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
from verbs_enums import e  # noqa: E402
from verbs_rc import Tap, complete, connect_rc, publish, wait_for  # noqa: E402

SIZE = 16384  # four pages
ODP = (e.IBV_ACCESS_ON_DEMAND | e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ |
       e.IBV_ACCESS_REMOTE_ATOMIC)
tap = Tap()
check = tap.check


def pattern(r):
    return bytes((i * 13 + r * 29 + 1) & 0xff for i in range(SIZE))


# Anonymous memory and madvise() from Python itself: rdma-core 44's pyverbs
# has no madvise.
_libc = ctypes.CDLL(None, use_errno=True)
TAG = "odp"  # names of the files the nodes meet through ("iodp": implicit)


class Buf:
    """SIZE bytes of anonymous memory and the keys the device reaches them
    with: an explicit ODP MR of the buffer, or the node's implicit MR."""

    def __init__(self, pd, implicit_mr=None):
        self.map = mmap.mmap(-1, SIZE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.buf = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.mr = implicit_mr or MR(pd, SIZE, ODP, address=self.buf)
        self.lkey, self.rkey = self.mr.lkey, self.mr.rkey

    def read(self, length, offset):
        return self.map[offset:offset + length]

    def write(self, data, length):
        self.map[0:length] = data[:length]


def madvise(addr, length):
    """Gives the pages back to the kernel (MADV_DONTNEED): the next touch,
    by the CPU or the device, faults in zeroed pages."""
    if _libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(length), mmap.MADV_DONTNEED) != 0:
        raise OSError(ctypes.get_errno(), "madvise")


def rdma(qp, cq, opcode, mr, peer, what):
    wr = SendWR(wr_id=opcode, opcode=opcode, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)])
    wr.set_wr_rdma(peer["b_rkey"], peer["b_addr"])
    qp.post_send(wr)
    complete(tap, cq, what)


def post_recv(qp, mr):
    qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)]))


def node0(qp, cq, peer, rounds, shared, new_buf):
    a, c, res = new_buf(), new_buf(), new_buf()
    for r in range(rounds):
        wait_for(shared, 1, f"{TAG}-freed-{r}", timeout=120)
        madvise(a.buf, SIZE)
        madvise(c.buf, SIZE)
        a.write(pattern(r), SIZE)
        rdma(qp, cq, e.IBV_WR_RDMA_WRITE, a, peer, f"round {r}: RDMA WRITE from freed pages into the peer's freed pages")
        madvise(a.buf, SIZE)
        a.write(pattern(r), SIZE)
        rdma(qp, cq, e.IBV_WR_RDMA_READ, c, peer, f"round {r}: RDMA READ into freed pages")
        check(f"round {r}: what the READ brought back is the pattern", bytes(c.read(SIZE, 0)) == pattern(r))
        qp.post_send(SendWR(wr_id=3, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(a.buf, SIZE, a.lkey)]))
        complete(tap, cq, f"round {r}: SEND into the peer's freed receive buffer")
        publish(shared, 0, f"{TAG}-sent-{r}", {})
        wait_for(shared, 1, f"{TAG}-checked-{r}", timeout=120)
        madvise(res.buf, SIZE)
        wr = SendWR(wr_id=4, opcode=e.IBV_WR_ATOMIC_FETCH_AND_ADD, num_sge=1, sg=[SGE(res.buf, 8, res.lkey)])
        wr.set_wr_atomic(peer["b_rkey"], peer["b_addr"], 1, 0)
        qp.post_send(wr)
        complete(tap, cq, f"round {r}: fetch-and-add on a freed page, the result into a freed page")
        old = int.from_bytes(bytes(res.read(8, 0)), sys.byteorder)
        check(f"round {r}: the fetch-and-add found 0 (the freed page reads as zeros), got {old}", old == 0)
        publish(shared, 0, f"{TAG}-added-{r}", {})


def main(me, peer_node, shared, rounds, implicit):
    global TAG
    ctx = Context(name="mlx5_0")
    caps = ctx.query_device_ex().odp_caps
    check(f"the device offers on-demand paging for RC (general {caps.general_caps:#x}, rc {caps.rc_odp_caps:#x})",
          bool(caps.general_caps & e.IBV_ODP_SUPPORT) and
          (caps.rc_odp_caps & (e.IBV_ODP_SUPPORT_SEND | e.IBV_ODP_SUPPORT_RECV | e.IBV_ODP_SUPPORT_WRITE |
                               e.IBV_ODP_SUPPORT_READ | e.IBV_ODP_SUPPORT_ATOMIC)) == 0x1f)
    pd = PD(ctx)
    implicit_mr = None
    if implicit:
        TAG = "iodp"
        check("the device offers implicit on-demand paging", bool(caps.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT))
        implicit_mr = MR(pd, SIZE, ODP, implicit=True)
        check(f"one implicit MR for every buffer (lkey {implicit_mr.lkey:#x})", implicit_mr.lkey != 0)

    def new_buf():
        return Buf(pd, implicit_mr)

    cq = CQ(ctx, 16)
    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=8, max_recv_wr=8, max_send_sge=1, max_recv_sge=1)))
    mine = {"qpn": qp.qp_num, "lid": ctx.query_port(1).lid}
    if me == 1:
        b, rbuf = new_buf(), new_buf()
        mine.update(b_rkey=b.rkey, b_addr=b.buf)
    publish(shared, me, f"{TAG}-qp", mine)
    peer = wait_for(shared, peer_node, f"{TAG}-qp")
    connect_rc(qp, peer["qpn"], peer["lid"], e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE |
               e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC)
    if me == 0:
        node0(qp, cq, peer, rounds, shared, new_buf)
        return 1 if tap.failed else 0
    for r in range(rounds):
        madvise(b.buf, SIZE)
        madvise(rbuf.buf, SIZE)
        post_recv(qp, rbuf)
        publish(shared, 1, f"{TAG}-freed-{r}", {})
        wait_for(shared, 0, f"{TAG}-sent-{r}", timeout=120)
        wc = complete(tap, cq, f"round {r}: the SEND arrived in the freed receive buffer")
        check(f"round {r}: the SEND carried {SIZE} bytes", wc is not None and wc.byte_len == SIZE)
        check(f"round {r}: the RDMA WRITE landed in the freed pages", bytes(b.read(SIZE, 0)) == pattern(r))
        check(f"round {r}: the SEND landed in the freed receive buffer", bytes(rbuf.read(SIZE, 0)) == pattern(r))
        madvise(b.buf, SIZE)
        publish(shared, 1, f"{TAG}-checked-{r}", {})
        wait_for(shared, 0, f"{TAG}-added-{r}", timeout=120)
        counter = int.from_bytes(bytes(b.read(8, 0)), sys.byteorder)
        check(f"round {r}: the peer's fetch-and-add left 1 in the freed page ({counter})", counter == 1)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 4,
                  len(sys.argv) > 5 and sys.argv[5] == "implicit"))
