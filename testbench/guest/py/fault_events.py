#!/usr/bin/env python3
"""Device faults a verbs application sees as work that vanished or an
object that failed, armed on this node's HCA through the run's relay
(docs/FAULTS.md):
 - lost-cqe on the application's CQ: of two signalled SENDs only the
   second completes (the first WQE is done, its CQE never written);
 - lost-eqe on the CQ's completion EQE: the CQE is there for ibv_poll_cq,
   but no completion event reaches the channel; the next one does;
 - cqe-delay on an RC QP: its SEND's completion arrives 2 s late (the
   receive at the other QP on time);
 - wqe-dma-error on an RC QP: IBV_EVENT_QP_FATAL (a local work queue
   catastrophic error), the WR it could not read and the next one are
   flushed, the QP is in error;
 - cq-error overrun: IBV_EVENT_CQ_ERR to the CQ's owner (the shell checks
   mlx5_core's dmesg line);
 - the SRQ limit (armed with ibv_modify_srq, a real event, no fault):
   IBV_EVENT_SRQ_LIMIT_REACHED when the receives left drop below it;
   srq-event catastrophic: IBV_EVENT_SRQ_ERR.
A CQ's number is the one mlx5_core's debugfs (CQs/0x<cqn>) gained when
it was created (rdma-core 44's Mlx5DvObj cannot take a plain pyverbs CQ);
an SRQ's is ibv_get_srq_num()'s. A blocking wait is bounded by SIGALRM: ibv_get_cq_event() and
ibv_get_async_event() are plain read()s that return EINTR.
Prints TAP lines and "# cqn=..." lines; exits with the number of
failures.

Usage: fault_events.py NODE"""
import os
import signal
import sys
import time

from pyverbs.cq import CQ, CompChannel
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR
from verbs_enums import e  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fault_verbs import armed  # noqa: E402
from verbs_errors import ACCESS, Pair, check, status_name  # noqa: E402

import verbs_errors  # noqa: E402

NODE = sys.argv[1] if len(sys.argv) > 1 else "0"


def bounded(fn, seconds):
    """fn() or None if it blocks longer than seconds."""
    signal.signal(signal.SIGALRM, lambda *_: None)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return fn()
    except PyverbsError:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def async_event(ctx, seconds=15.0):
    def get():
        ev = ctx.get_async_event()
        ev.ack()
        return ev.event_type
    return bounded(get, seconds)


def cq_event(cc, cq, seconds):
    def get():
        cc.get_cq_event(cq)
        cq.ack_events(1)
        return True
    return bounded(get, seconds) is True


CQ_DIR = f"/sys/kernel/debug/mlx5/{os.path.basename(os.path.realpath('/sys/class/infiniband/mlx5_0/device'))}/CQs"


def with_cqn(make):
    """make() -> (obj, the CQN of the one CQ it created)."""
    before = set(os.listdir(CQ_DIR))
    obj = make()
    new = set(os.listdir(CQ_DIR)) - before
    if len(new) != 1:
        raise RuntimeError(f"expected one new CQ in {CQ_DIR}, found {sorted(new)}")
    return obj, int(new.pop(), 16)


def send(p, mr, wr_id):
    p.a.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 32, mr.lkey)]))


def recv(q, mr, wr_id):
    q.post_recv(RecvWR(wr_id=wr_id, num_sge=1, sg=[SGE(mr.buf + 4096, 64, mr.lkey)]))


def lost_cqe(ctx, pd, mr, lid):
    p, cqn = with_cqn(lambda: Pair(ctx, pd, lid))
    print(f"# cqn=0x{cqn:x} (lost-cqe)")
    for i in (40, 41):
        recv(p.b, mr, 140 + i)
    check(f"armed lost-cqe on CQ 0x{cqn:x}", armed(f"lost-cqe:cqn={cqn}"))
    send(p, mr, 40)
    send(p, mr, 41)
    wc = p.poll(4, timeout=3)
    ids = sorted(w.wr_id for w in wc)
    print(f"# completions: {ids}")
    check("one CQE of four is missing: 3 completions in 3 s", len(wc) == 3)
    check("every CQE that was written says success", all(w.status == e.IBV_WC_SUCCESS for w in wc))


def lost_eqe(ctx, pd, mr, lid):
    cc = CompChannel(ctx)
    cq, cqn = with_cqn(lambda: CQ(ctx, 64, None, cc, 0))
    p = Pair(ctx, pd, lid, cq=cq)
    print(f"# cqn=0x{cqn:x} (lost-eqe)")
    for i in range(2):
        recv(p.b, mr, 150 + i)
    check(f"armed lost-eqe event=comp on CQ 0x{cqn:x}", armed(f"lost-eqe:event=comp,cqn={cqn}"))
    cq.req_notify()
    send(p, mr, 50)
    got = cq_event(cc, cq, 3.0)
    check("no completion event reaches the channel in 3 s", not got)
    wc = p.poll(2, timeout=3)
    check(f"ibv_poll_cq finds the completions all the same ({len(wc)} of 2)", len(wc) == 2)
    cq.req_notify()
    send(p, mr, 51)
    check("the next completion's event reaches the channel", cq_event(cc, cq, 10.0))
    p.poll(2, timeout=3)


def cqe_delay(ctx, pd, mr, lid):
    p = Pair(ctx, pd, lid)
    recv(p.b, mr, 180)
    check(f"armed cqe-delay of 2 s on QPN 0x{p.a.qp_num:x}", armed(f"cqe-delay:qpn={p.a.qp_num},ms=2000"))
    t0 = time.monotonic()
    send(p, mr, 80)
    early = p.poll(2, timeout=1.0)
    check(f"in the first second only the receive completes ({[w.wr_id for w in early]})",
          [w.wr_id for w in early] == [180])
    late = p.poll(1, timeout=10.0)
    dt = time.monotonic() - t0
    print(f"# the held send completed {dt:.2f} s after its post")
    check(f"the send completes, successfully, 2 s late ({dt:.2f} s after the post)",
          [(w.wr_id, w.status) for w in late] == [(80, e.IBV_WC_SUCCESS)] and 1.9 <= dt < 10.0)


def wqe_dma_error(ctx, pd, mr, lid):
    p = Pair(ctx, pd, lid)
    recv(p.b, mr, 160)
    check(f"armed wqe-dma-error on QPN 0x{p.a.qp_num:x}", armed(f"wqe-dma-error:qpn={p.a.qp_num}"))
    send(p, mr, 60)
    send(p, mr, 61)
    ev = async_event(ctx)
    check(f"IBV_EVENT_QP_FATAL reached the QP's owner (event {ev})", ev == e.IBV_EVENT_QP_FATAL)
    wc = p.poll(2, timeout=3)
    st = [(w.wr_id, w.status) for w in wc]
    print(f"# wqe-dma-error completions: {[(i, status_name(s)) for i, s in st]}")
    check("both WRs are flushed", st == [(60, e.IBV_WC_WR_FLUSH_ERR), (61, e.IBV_WC_WR_FLUSH_ERR)])
    check("the QP is in the error state", p.a.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_ERR)


def cq_error(ctx):
    cq, cqn = with_cqn(lambda: CQ(ctx, 16))
    print(f"# cqn=0x{cqn:x} (cq-error)")
    check(f"armed cq-error overrun on CQ 0x{cqn:x}", armed(f"cq-error:cqn={cqn},syndrome=overrun"))
    ev = async_event(ctx)
    check(f"IBV_EVENT_CQ_ERR reached the CQ's owner (event {ev})", ev == e.IBV_EVENT_CQ_ERR)


def srq_events(ctx, pd, mr, lid):
    srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=16, max_sge=1)))
    srqn = srq.get_srq_num()
    print(f"# srqn=0x{srqn:x}")
    p = Pair(ctx, pd, lid, srq=srq)
    for i in range(8):
        recv(srq, mr, 170 + i)
    srq.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
    for i in range(3):
        send(p, mr, 70 + i)
    p.poll(6, timeout=3)
    check("no limit event with 5 receives left of 8, limit 4", async_event(ctx, 2.0) is None)
    for i in (73, 74):
        send(p, mr, i)
    p.poll(4, timeout=3)
    ev = async_event(ctx)
    check(f"IBV_EVENT_SRQ_LIMIT_REACHED with 3 receives left (event {ev})", ev == e.IBV_EVENT_SRQ_LIMIT_REACHED)
    check(f"armed srq-event catastrophic on SRQ 0x{srqn:x}", armed(f"srq-event:srqn={srqn},type=catastrophic"))
    ev = async_event(ctx)
    check(f"IBV_EVENT_SRQ_ERR reached the SRQ's owner (event {ev})", ev == e.IBV_EVENT_SRQ_ERR)


def main():
    check(f"mlx5_core's debugfs lists the CQs ({CQ_DIR})", os.path.isdir(CQ_DIR))
    ctx = Context(name="mlx5_0")
    lid = ctx.query_port(1).lid
    pd = PD(ctx)
    mr = MR(pd, 8192, ACCESS)
    t0 = time.monotonic()
    lost_cqe(ctx, pd, mr, lid)
    lost_eqe(ctx, pd, mr, lid)
    cqe_delay(ctx, pd, mr, lid)
    wqe_dma_error(ctx, pd, mr, lid)
    cq_error(ctx)
    srq_events(ctx, pd, mr, lid)
    print(f"# fault_events.py took {time.monotonic() - t0:.1f} s", flush=True)
    return verbs_errors.tap.failed


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
