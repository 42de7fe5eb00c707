#!/usr/bin/env python3
"""Error semantics of the virtual HCA seen from user space (pyverbs): two RC
QPs of mlx5_0 connected to each other through the port's own LID.
 - RDMA WRITE with a bad rkey: remote access error on the requester, the QP
   goes to error, a later WR is flushed;
 - SEND with a bad lkey: local protection error;
 - RDMA READ past the end of the remote MR: remote access error;
 - SEND longer than the posted receive: remote invalid request on the
   requester, local length error on the responder.
Prints TAP lines."""
import sys
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
from verbs_enums import e  # noqa: E402
from verbs_rc import Tap, connect_rc  # noqa: E402

tap = Tap()
check = tap.check


ACCESS = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ


class Pair:
    def __init__(self, ctx, pd, lid, cq=None, srq=None, rnr_retry=7):
        self.cq = cq or CQ(ctx, 64)
        cap = QPCap(max_send_wr=16, max_recv_wr=0 if srq else 16, max_send_sge=2, max_recv_sge=2)
        ia = QPInitAttr(qp_type=e.IBV_QPT_RC, scq=self.cq, rcq=self.cq, cap=cap, srq=srq)
        self.a = QP(pd, ia)
        self.b = QP(pd, ia)
        for q, r in ((self.a, self.b), (self.b, self.a)):
            connect_rc(q, r.qp_num, lid, ACCESS, rnr_retry)

    def poll(self, want, timeout=5.0):
        got = []
        end = time.time() + timeout
        while len(got) < want and time.time() < end:
            nc, wcs = self.cq.poll(want - len(got))
            got += wcs[:nc]
            if not nc:
                time.sleep(0.001)
        return got


STATUS_NAMES = ["SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
                "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
                "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
                "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR"]


def status_name(s):
    return "IBV_WC_" + STATUS_NAMES[s] if 0 <= s < len(STATUS_NAMES) else str(s)


def main():
    ctx = Context(name="mlx5_0")
    lid = ctx.query_port(1).lid
    pd = PD(ctx)
    mr = MR(pd, 8192, ACCESS)

    # 1. A good write, then a bad rkey.
    p = Pair(ctx, pd, lid)
    wr = SendWR(wr_id=1, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
    wr.set_wr_rdma(mr.rkey, mr.buf + 4096)
    p.a.post_send(wr)
    wc = p.poll(1)
    check("RDMA WRITE with a valid rkey succeeds", len(wc) == 1 and wc[0].status == e.IBV_WC_SUCCESS)
    wr = SendWR(wr_id=2, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
    wr.set_wr_rdma(mr.rkey ^ 0x80, mr.buf)
    p.a.post_send(wr)
    wr = SendWR(wr_id=3, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)])
    p.a.post_send(wr)
    wc = p.poll(2)
    st = [(w.wr_id, w.status) for w in wc]
    print(f"# bad rkey completions: {[(i, status_name(s)) for i, s in st]}")
    check("bad rkey: IBV_WC_REM_ACCESS_ERR on the requester", len(st) >= 1 and st[0] == (2, e.IBV_WC_REM_ACCESS_ERR))
    check("the next WR is flushed (IBV_WC_WR_FLUSH_ERR)", len(st) == 2 and st[1] == (3, e.IBV_WC_WR_FLUSH_ERR))
    check("the requester QP is in the error state", p.a.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_ERR)

    # 2. A bad lkey.
    p = Pair(ctx, pd, lid)
    wr = SendWR(wr_id=4, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey ^ 0x80)])
    wr.set_wr_rdma(mr.rkey, mr.buf)
    p.a.post_send(wr)
    wc = p.poll(1)
    print(f"# bad lkey completion: {[(w.wr_id, status_name(w.status)) for w in wc]}")
    check("bad lkey: IBV_WC_LOC_PROT_ERR", len(wc) == 1 and wc[0].status == e.IBV_WC_LOC_PROT_ERR)

    # 3. A read beyond the remote MR.
    p = Pair(ctx, pd, lid)
    wr = SendWR(wr_id=5, opcode=e.IBV_WR_RDMA_READ, num_sge=1, sg=[SGE(mr.buf, 128, mr.lkey)])
    wr.set_wr_rdma(mr.rkey, mr.buf + 8192 - 64)
    p.a.post_send(wr)
    wc = p.poll(1)
    print(f"# out-of-bounds read completion: {[(w.wr_id, status_name(w.status)) for w in wc]}")
    check("RDMA READ past the remote MR: IBV_WC_REM_ACCESS_ERR", len(wc) == 1 and wc[0].status == e.IBV_WC_REM_ACCESS_ERR)

    # 4. A SEND longer than the receive buffer.
    p = Pair(ctx, pd, lid)
    p.b.post_recv(RecvWR(wr_id=10, num_sge=1, sg=[SGE(mr.buf + 4096, 16, mr.lkey)]))
    wr = SendWR(wr_id=6, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 100, mr.lkey)])
    p.a.post_send(wr)
    wc = p.poll(2)
    byid = {w.wr_id: w.status for w in wc}
    print(f"# long send completions: {[(i, status_name(s)) for i, s in byid.items()]}")
    check("responder: IBV_WC_LOC_LEN_ERR", byid.get(10) == e.IBV_WC_LOC_LEN_ERR)
    check("requester: IBV_WC_REM_INV_REQ_ERR", byid.get(6) == e.IBV_WC_REM_INV_REQ_ERR)
    return tap.failed


if __name__ == "__main__":
    sys.exit(main())
