#!/usr/bin/env python3
"""The dynamically connected transport between two VMs (pyverbs, mlx5dv):
each node has a DCT on an SRQ and a DCI, and every round its DCI sends, in
turn, to the other node's DCT and to its own (so the DCI reconnects to
another DCT across the fabric at each step):
  SEND     a round pattern into the target's SRQ (checked by the target);
  WRITE    the pattern into the target's buffer (checked by the target);
  READ     the target's buffer back (checked here);
  FETCH_ADD  to a counter in the target's buffer (the value before, here;
           the total, by the target).
Both nodes' DCIs reach each DCT, so each DCT keeps a context per
initiator, and the port's rx_dct_connect counter counts the connections. Finally a DCI that names the wrong DC access key gets no
answer: its SEND completes with "retry exceeded" and the QP goes to error.

With "odp", the DCI's local buffer (SEND source, READ and FETCH_ADD
results) and the SRQ's receive buffers are on-demand-paged anonymous
memory: the receive pages are never touched before the device writes
them, and the local pages go back to the kernel (MADV_DONTNEED) at the
start of each of this node's turns, so the DCI's gathers and scatters and
the DCT's receives page-fault under traffic (dc_odp_caps send and
srq_receive); the DCT's RDMA target stays pinned.

    dc_across.py NODE PEER SHARED_DIR [ROUNDS] [odp]
Prints TAP lines; exit status 1 if a check failed."""
import ctypes
import mmap
import struct
import sys
import time

from pyverbs.addr import AH, AHAttr
from pyverbs.cq import CQ
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.providers.mlx5.mlx5dv import Mlx5Context, Mlx5DVContextAttr, Mlx5DVDCInitAttr, Mlx5DVQPInitAttr, Mlx5QP
from pyverbs.qp import QPAttr, QPCap, QPInitAttrEx
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR
from verbs_enums import e, mlx5dv_enums  # noqa: E402
from odp_across import madvise  # noqa: E402
from verbs_rc import Tap, publish, wait_for  # noqa: E402

dve = mlx5dv_enums()
KEY = 0x0dc0ffee
SIZE = 4096
RECVS = 64
ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC
ODP = len(sys.argv) > 5 and sys.argv[5] == "odp"
TAG = "dcodp" if ODP else "dc"  # names of the files the nodes meet through
tap = Tap()
check = tap.check


class OdpBuf:
    """Anonymous memory under an on-demand-paged MR, with the MR's read
    and write."""

    def __init__(self, pd, size):
        self.map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.buf = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.size = size
        self.mr = MR(pd, size, ACCESS | e.IBV_ACCESS_ON_DEMAND, address=self.buf)
        self.lkey, self.rkey = self.mr.lkey, self.mr.rkey

    def read(self, length, offset):
        return bytes(self.map[offset:offset + length])

    def write(self, data, length):
        self.map[0:length] = data[:length]


def dct_connects():
    """The port's Q counter of DCT connections, as mlx5_ib shows it (None
    before kernel 6.12: 6.1's mlx5_ib does not show it)."""
    try:
        with open("/sys/class/infiniband/mlx5_0/ports/1/hw_counters/rx_dct_connect") as f:
            return int(f.read())
    except FileNotFoundError:
        return None


def pattern(node, r):
    return bytes((i * 7 + node * 101 + r * 31 + 3) & 0xff for i in range(SIZE))


class Node:
    def __init__(self):
        self.ctx = Mlx5Context(Mlx5DVContextAttr(), name="mlx5_0")
        self.lid = self.ctx.query_port(1).lid
        self.pd = PD(self.ctx)
        self.cq = CQ(self.ctx, 256)
        self.srq = SRQ(self.pd, SrqInitAttr(SrqAttr(max_wr=RECVS)))
        # target: WRITE lands at 0, the counter at SIZE; local: READ
        # results, atomic results; recv: the SRQ's buffers.
        self.target = MR(self.pd, SIZE + 8, ACCESS)
        self.local = OdpBuf(self.pd, 2 * SIZE) if ODP else MR(self.pd, SIZE + 8, ACCESS)
        self.recv = OdpBuf(self.pd, SIZE * RECVS) if ODP else MR(self.pd, SIZE * RECVS, ACCESS)
        for i in range(RECVS):
            self.srq.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(self.recv.buf + i * SIZE, SIZE, self.recv.lkey)]))
        self.recvs = self.good = 0
        self.dct = self.make_qp(dve.MLX5DV_DCTYPE_DCT)
        self.dci = self.make_qp(dve.MLX5DV_DCTYPE_DCI)

    def make_qp(self, kind):
        if kind == dve.MLX5DV_DCTYPE_DCT:
            init = QPInitAttrEx(cap=QPCap(RECVS, 0, 1, 0), pd=self.pd, scq=self.cq, rcq=self.cq, srq=self.srq,
                                qp_type=e.IBV_QPT_DRIVER, comp_mask=e.IBV_QP_INIT_ATTR_PD)
            dc = Mlx5DVDCInitAttr(dc_type=kind, dct_access_key=KEY)
        else:
            ops = (e.IBV_QP_EX_WITH_SEND | e.IBV_QP_EX_WITH_RDMA_WRITE | e.IBV_QP_EX_WITH_RDMA_READ |
                   e.IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
            init = QPInitAttrEx(cap=QPCap(64, 0, 1, 0), pd=self.pd, scq=self.cq, rcq=self.cq, srq=self.srq,
                                qp_type=e.IBV_QPT_DRIVER, send_ops_flags=ops,
                                comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, sq_sig_all=1)
            dc = Mlx5DVDCInitAttr(dc_type=kind)
        qp = Mlx5QP(self.ctx, init, Mlx5DVQPInitAttr(comp_mask=dve.MLX5DV_QP_INIT_ATTR_MASK_DC, dc_init_attr=dc))
        at = QPAttr()
        at.qp_state = e.IBV_QPS_INIT
        at.pkey_index = 0
        at.port_num = 1
        mask = e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT
        if kind == dve.MLX5DV_DCTYPE_DCT:
            at.qp_access_flags = ACCESS
            mask |= e.IBV_QP_ACCESS_FLAGS
        qp.modify(at, mask)
        at = QPAttr()
        at.qp_state = e.IBV_QPS_RTR
        at.path_mtu = e.IBV_MTU_1024
        mask = e.IBV_QP_STATE | e.IBV_QP_PATH_MTU
        if kind == dve.MLX5DV_DCTYPE_DCT:
            at.min_rnr_timer = 1
            at.ah_attr = AHAttr(dlid=self.lid, port_num=1)
            mask |= e.IBV_QP_MIN_RNR_TIMER | e.IBV_QP_AV
        qp.modify(at, mask)
        if kind == dve.MLX5DV_DCTYPE_DCI:
            at = QPAttr()
            at.qp_state = e.IBV_QPS_RTS
            at.timeout = 14
            at.retry_cnt = 7
            at.rnr_retry = 7
            at.sq_psn = 0
            at.max_rd_atomic = 1
            qp.modify(at, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
                      e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)
        return qp

    def post(self, dci, peer, op, mr, offset, length, key=KEY, add=0):
        ah = AH(self.pd, attr=AHAttr(dlid=peer["lid"], port_num=1))
        dci.wr_start()
        dci.wr_id = op
        dci.wr_flags = e.IBV_SEND_SIGNALED
        if op == e.IBV_WR_SEND:
            dci.wr_send()
        elif op == e.IBV_WR_RDMA_WRITE:
            dci.wr_rdma_write(peer["rkey"], peer["addr"])
        elif op == e.IBV_WR_RDMA_READ:
            dci.wr_rdma_read(peer["rkey"], peer["addr"])
        else:
            dci.wr_atomic_fetch_add(peer["rkey"], peer["addr"] + SIZE, add)
        dci.wr_set_dc_addr(ah, peer["dctn"], key)
        dci.wr_set_sge(SGE(mr.buf + offset, length, mr.lkey))
        dci.wr_complete()

    def take_recv(self, wc, patterns):
        """A SEND that landed on this node's DCT: a whole pattern?"""
        self.recvs += 1
        got = self.recv.read(SIZE, (wc.wr_id % RECVS) * SIZE)
        self.good += wc.status == e.IBV_WC_SUCCESS and wc.byte_len == SIZE and got in patterns

    def poll(self, what, want=e.IBV_WC_SUCCESS, timeout=30.0):
        end = time.time() + timeout
        while time.time() < end:
            nc, wcs = self.cq.poll(1)
            if nc:
                return wcs[0]
            time.sleep(0.001)
        check(f"{what}: a completion within {timeout:.0f} s", False)
        return None


def run_turn(n, me, r, targets, patterns):
    """This node's DCI, in turn, to each DCT: SEND, WRITE, READ back,
    FETCH_ADD. SENDs that land on this node meanwhile are counted."""
    data = pattern(me, r)
    if ODP:
        madvise(n.local.buf, n.local.size)  # the DCI's gathers and scatters fault again
    for name, t in targets:
        n.local.write(data, SIZE)
        for op, what in ((e.IBV_WR_SEND, "SEND"), (e.IBV_WR_RDMA_WRITE, "RDMA WRITE"),
                         (e.IBV_WR_RDMA_READ, "RDMA READ"), (e.IBV_WR_ATOMIC_FETCH_AND_ADD, "FETCH_ADD")):
            atomic = op == e.IBV_WR_ATOMIC_FETCH_AND_ADD
            if op == e.IBV_WR_RDMA_READ:
                n.local.write(bytes(SIZE), SIZE)
            n.post(n.dci, t, op, n.local, SIZE if atomic else 0, 8 if atomic else SIZE, add=1)
            while True:
                wc = n.poll(f"round {r}: {what} to {name}")
                if wc is None:
                    return False
                if wc.opcode != e.IBV_WC_RECV:
                    break
                n.take_recv(wc, patterns)
            ok = wc.status == e.IBV_WC_SUCCESS and wc.wr_id == op
            if op == e.IBV_WR_RDMA_READ:
                ok = ok and n.local.read(SIZE, 0) == data  # what the WRITE just before put there
            check(f"round {r}: node {me}'s DCI, {what} to {name}: completes"
                  f"{', the data read back is what it wrote' if op == e.IBV_WR_RDMA_READ else ''}", ok)
    return True


def main():
    me, peer_no, shared = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    n = Node()
    connects = dct_connects()
    check(f"a DCT (0x{n.dct.qp_num:x}) on an SRQ and a DCI (0x{n.dci.qp_num:x}){' (ODP buffers)' if ODP else ''}", True)
    n.target.write(bytes(SIZE + 8), SIZE + 8)
    mine = {"lid": n.lid, "dctn": n.dct.qp_num, "rkey": n.target.rkey, "addr": n.target.buf}
    publish(shared, me, TAG, mine)
    peer = wait_for(shared, peer_no, TAG)
    targets = [("the other node's DCT", peer), ("its own DCT", mine)]
    patterns = {pattern(x, r) for x in (0, 1) for r in range(rounds)}
    # The nodes take turns, so that no WRITE races the READ that checks it.
    for r in range(rounds):
        for turn in (0, 1):
            if turn == me:
                if not run_turn(n, me, r, targets, patterns):
                    return
                publish(shared, me, f"{TAG}-r{r}", 1)
            else:
                wait_for(shared, turn, f"{TAG}-r{r}", 120)
    while n.recvs < 2 * rounds:  # the SENDs of the peer's turns
        wc = n.poll("the SENDs of the other node")
        if wc is None:
            break
        n.take_recv(wc, patterns)
    check(f"the DCT took {n.good} whole SENDs of {2 * rounds}, {rounds} from each node's DCI", n.good == 2 * rounds)
    # Each work request went out on a connection of its own (the DCI polls
    # it before the next, and a DCI with nothing outstanding disconnects):
    # 4 per DCT per round from each DCI.
    if connects is None:
        print("# this kernel's mlx5_ib shows no rx_dct_connect counter")
    elif ODP:
        # (A request sent again after a page fault's RNR NAK opens its
        # connection again: more than 4 per round.)
        got = dct_connects() - connects
        check(f"the port's rx_dct_connect counter rose by {got}: at least 4 connections per round from each DCI",
              got >= 8 * rounds)
    else:
        got = dct_connects() - connects
        check(f"the port's rx_dct_connect counter rose by {got}: 4 connections per round from each DCI",
              got == 8 * rounds)
    count = struct.unpack("<Q", n.target.read(8, SIZE))[0]
    check(f"the counter in this node's buffer is {count}: one FETCH_ADD per round from each DCI",
          count == 2 * rounds)
    # The wrong key: the DCT drops the requests; the DCI retries, then fails.
    bad = n.make_qp(dve.MLX5DV_DCTYPE_DCI)
    n.post(bad, peer, e.IBV_WR_SEND, n.local, 0, 64, key=KEY ^ 0xff)
    wc = n.poll("a SEND with the wrong access key", timeout=60)
    check(f"a SEND with the wrong DC access key fails with retry exceeded (status {wc.status if wc else None})",
          wc is not None and wc.status == e.IBV_WC_RETRY_EXC_ERR)
    publish(shared, me, f"{TAG}-end", 1)
    wait_for(shared, peer_no, f"{TAG}-end", 120)


main()
print(f"1..{tap.n}")
sys.exit(1 if tap.failed else 0)
