#!/usr/bin/env python3
"""Faults seen from a verbs application (pyverbs), armed on this node's HCA
through the run's control relay (docs/FAULTS.md):
 - cmd-status on CREATE_CQ: ibv_create_cq fails with the errno the driver
   maps the status to (cmd.c cmd_status_to_err()); the next one works;
 - cmd-delivery on CREATE_CQ: EIO;
 - cmd-delay on CREATE_QP: the QP is created that much later and works;
 - error-cqe on an RC QP: the WR completes with the syndrome's status, the
   next is flushed, the QP is in error;
 - qp-event comm-est and catastrophic, port-event client-rereg: the
   events reach the context that owns the QP (ibv_get_async_event), and
   a catastrophic error leaves the QP in error.
Prints TAP lines; exits with the number of failures (os._exit: a QP with
unacknowledged events would block its destruction).

Usage: fault_verbs.py NODE [--no-port-event] (the port event reaches
every user of the port, ib_ipoib too: 35-faults-busy leaves it out)"""
import errno
import os
import sys
import threading
import time

from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.wr import SGE, RecvWR, SendWR
from verbs_enums import e  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from verbs_errors import ACCESS, Pair, check, status_name  # noqa: E402

import verbs_errors  # noqa: E402

NODE = sys.argv[1] if len(sys.argv) > 1 else "0"
PORT_EVENT = "--no-port-event" not in sys.argv[2:]
REQUESTS = "/hcasim/fabric-requests"


def hca_fault(command):
    """Runs a fault command on this node's HCA; returns the reply."""
    name = f"node{NODE}-py-{time.time_ns()}"
    with open(f"{REQUESTS}/{name}.tmp", "w") as f:
        f.write(f"harness fault node{NODE} {command}\n")
    os.rename(f"{REQUESTS}/{name}.tmp", f"{REQUESTS}/{name}.req")
    for _ in range(300):
        try:
            with open(f"{REQUESTS}/{name}.rep") as f:
                reply = f.read()
            print("# fault " + command + " -> " + " | ".join(reply.strip().splitlines()), flush=True)
            return reply
        except FileNotFoundError:
            time.sleep(0.1)
    print(f"# fault {command}: no reply from the relay", flush=True)
    return "error no reply"


def armed(command):
    return not hca_fault(command).startswith("error")


def errno_of(fn):
    try:
        fn()
    except PyverbsRDMAError as ex:
        return ex.error_code
    return 0


def next_event(ctx, timeout=15.0):
    """The next async event of ctx (acknowledged), or None after timeout."""
    got = []

    def wait():
        ev = ctx.get_async_event()
        ev.ack()
        got.append(ev.event_type)
    t = threading.Thread(target=wait, daemon=True)
    t.start()
    t.join(timeout)
    return got[0] if got else None


def main():
    ctx = Context(name="mlx5_0")
    lid = ctx.query_port(1).lid
    pd = PD(ctx)
    mr = MR(pd, 8192, ACCESS)

    # Commands.
    check("armed cmd-status on CREATE_CQ",
          armed("cmd-status:opcode=CREATE_CQ,status=BAD_RES_STATE,syndrome=0xabc123"))
    err = errno_of(lambda: CQ(ctx, 16))
    check(f"ibv_create_cq fails with EINVAL for 'bad resource state' (errno {err})", err == errno.EINVAL)
    check("the fault was one-shot: the next CQ is created", errno_of(lambda: CQ(ctx, 16)) == 0)
    check("armed cmd-delivery on CREATE_CQ", armed("cmd-delivery:opcode=CREATE_CQ,delivery=FW_INTERNAL_ERR"))
    err = errno_of(lambda: CQ(ctx, 16))
    check(f"ibv_create_cq fails with EIO for a delivery error (errno {err})", err == errno.EIO)
    check("armed cmd-delay on CREATE_QP, 3000 ms", armed("cmd-delay:opcode=CREATE_QP,ms=3000"))
    t0 = time.monotonic()
    p = Pair(ctx, pd, lid)
    took = time.monotonic() - t0
    check(f"the QP pair took at least 3 s to create ({took:.1f} s)", took >= 2.9)
    p.b.post_recv(RecvWR(wr_id=20, num_sge=1, sg=[SGE(mr.buf + 4096, 64, mr.lkey)]))
    p.a.post_send(SendWR(wr_id=21, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 32, mr.lkey)]))
    wc = p.poll(2)
    check("the delayed QP works: SEND and receive complete",
          sorted((w.wr_id, w.status) for w in wc) == [(20, e.IBV_WC_SUCCESS), (21, e.IBV_WC_SUCCESS)])

    # An error CQE on the next WR of QP a.
    p = Pair(ctx, pd, lid)
    p.b.post_recv(RecvWR(wr_id=30, num_sge=1, sg=[SGE(mr.buf + 4096, 64, mr.lkey)]))
    check(f"armed error-cqe on QPN 0x{p.a.qp_num:x}", armed(f"error-cqe:qpn={p.a.qp_num},syndrome=0x4"))
    for i in (31, 32):
        p.a.post_send(SendWR(wr_id=i, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 32, mr.lkey)]))
    wc = p.poll(2)
    st = [(w.wr_id, w.status) for w in wc]
    print(f"# error-cqe completions: {[(i, status_name(s)) for i, s in st]}")
    check("the WR completes with IBV_WC_LOC_PROT_ERR (syndrome 0x4)", st[:1] == [(31, e.IBV_WC_LOC_PROT_ERR)])
    check("the next WR is flushed", st[1:] == [(32, e.IBV_WC_WR_FLUSH_ERR)])
    # libmlx5 hands the CQE's vendor_err_synd byte to the application as
    # wc.vendor_err: a ConnectX-5's codes, not 0.
    vend = [hex(w.vendor_err) for w in wc]
    print(f"# error-cqe vendor syndromes: {vend}")
    check("the error WC carries the vendor syndrome 0x52", vend[:1] == ["0x52"])
    check("the flushed WC carries the vendor syndrome 0xf9", vend[1:] == ["0xf9"])
    check("the QP is in the error state", p.a.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_ERR)
    check("no list entry is left (a one-shot fault retires)", hca_fault("list").strip() == "ok")

    # Events to the owner of the QP, and a port event to every context.
    p = Pair(ctx, pd, lid)
    check("armed qp-event comm-est", armed(f"qp-event:qpn={p.b.qp_num},type=comm-est"))
    ev = next_event(ctx)
    check(f"IBV_EVENT_COMM_EST reached the QP's owner (event {ev})", ev == e.IBV_EVENT_COMM_EST)
    check("armed qp-event catastrophic", armed(f"qp-event:qpn={p.a.qp_num},type=catastrophic"))
    ev = next_event(ctx)
    check(f"IBV_EVENT_QP_FATAL reached the QP's owner (event {ev})", ev == e.IBV_EVENT_QP_FATAL)
    check("the QP is in the error state after the catastrophic error",
          p.a.query(e.IBV_QP_STATE)[0].qp_state == e.IBV_QPS_ERR)
    if PORT_EVENT:
        check("armed port-event client-rereg", armed("port-event:subtype=client-rereg"))
        ev = next_event(ctx)
        check(f"IBV_EVENT_CLIENT_REREGISTER reached the context (event {ev})", ev == e.IBV_EVENT_CLIENT_REREGISTER)
    print("# fault_verbs.py: done", flush=True)
    return verbs_errors.tap.failed


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
