#!/usr/bin/env python3
"""The HCA's Q counters as mlx5_ib shows them (port 1's hw_counters, `rdma
statistic`), against what this program makes happen on RC QPs of mlx5_0
connected through the port's own LID (pyverbs). One scenario per run:
  errors  the error completions of verbs_errors.py's cases: every count
          moves by exactly what happened;
  rnr     a SEND with no receive posted: RNR NAKs, then with no RNR
          retries left the retries exceeded;
  bound   a QP bound to a counter of its own (`rdma statistic qp bind`,
          an RTS2RTS with COUNTER_SET_ID): its requests count there and
          not in the port's set (hw_counters shows the port's set plus
          every bound counter, ib_core's rdma_counter_get_hwstat_value():
          counted in both, they would show twice); the counter goes with
          the QP and its counts stay in the port's history.
(Loss needs the fabric: loopback through the port's own LID stays in the
device; 27-counters drives it between two nodes.)
Prints TAP lines; exits with the number of failures.

Usage: counters.py errors|rnr|bound"""
import gc
import json
import os
import subprocess
import sys
import time

from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.wr import SGE, RecvWR, SendWR
from verbs_enums import e  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import verbs_errors  # noqa: E402
from verbs_errors import ACCESS, Pair, check, status_name  # noqa: E402

HW = "/sys/class/infiniband/mlx5_0/ports/1/hw_counters"


def counters():
    """The port's counts now. ib_core answers reads from a copy that is
    `lifespan` ms old at most (update_hw_stats()): wait that out first, or a
    read soon after the last one shows counts from before what just
    happened (seen on QEMU 10.2, whose guests get here sooner)."""
    with open(f"{HW}/lifespan") as f:
        time.sleep((int(f.read()) + 5) / 1000)
    return {name: int(open(f"{HW}/{name}").read()) for name in os.listdir(HW) if name != "lifespan"}


class Delta:
    """The port's counts since it was made."""

    def __init__(self):
        self.before = counters()

    def __call__(self):
        now = counters()
        d = {k: now[k] - self.before.get(k, 0) for k in now}
        moved = {k: v for k, v in sorted(d.items()) if v}
        print(f"# hw_counters moved: {moved}", flush=True)
        return d


def expect(d, name, want):
    if name not in d:  # 6.1's mlx5_ib lists fewer (no req_*_retries_exceeded)
        print(f"# {name}: not listed by this driver", flush=True)
        return
    check(f"{name} moved by {want} (got {d[name]})", d[name] == want)


def errors(ctx, pd, lid):
    delta = Delta()
    status = verbs_errors.main()  # its own TAP lines
    check("verbs_errors' cases ran as before", status == 0)
    d = delta()
    # 1: a good WRITE, a bad-rkey WRITE, the next SEND flushed; 2: a bad
    # lkey (never sent); 3: a READ past the remote MR; 4: a SEND longer
    # than the receive WQE.
    expect(d, "rx_write_requests", 2)
    expect(d, "rx_read_requests", 1)
    expect(d, "req_remote_access_errors", 2)
    expect(d, "resp_remote_access_errors", 2)
    expect(d, "req_remote_invalid_request", 1)
    expect(d, "resp_local_length_error", 1)
    expect(d, "req_cqe_error", 4)
    expect(d, "resp_cqe_error", 1)
    expect(d, "req_cqe_flush_error", 1)
    expect(d, "req_transport_retries_exceeded", 0)
    expect(d, "out_of_sequence", 0)


def send_one(p, mr, wr_id):
    p.a.post_send(SendWR(wr_id=wr_id, opcode=e.IBV_WR_SEND, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))


def rnr(ctx, pd, lid):
    mr = MR(pd, 4096, ACCESS)
    delta = Delta()
    p = Pair(ctx, pd, lid, rnr_retry=0)
    send_one(p, mr, 1)
    wc = p.poll(1)
    st = [status_name(w.status) for w in wc]
    check(f"no receive and no RNR retry: IBV_WC_RNR_RETRY_EXC_ERR ({st})",
          len(wc) == 1 and wc[0].status == e.IBV_WC_RNR_RETRY_EXC_ERR)
    d = delta()
    expect(d, "req_rnr_retries_exceeded", 1)
    expect(d, "rnr_nak_retry_err", 0)
    expect(d, "req_cqe_error", 1)
    check(f"out_of_buffer moved (got {d['out_of_buffer']})", d["out_of_buffer"] >= 1)

    delta = Delta()
    p = Pair(ctx, pd, lid)  # RNR retries without end
    send_one(p, mr, 2)
    time.sleep(0.3)
    p.b.post_recv(RecvWR(wr_id=3, num_sge=1, sg=[SGE(mr.buf + 2048, 64, mr.lkey)]))
    wc = p.poll(2)
    check("the SEND completes once a receive is posted",
          sorted((w.wr_id, w.status) for w in wc) == [(2, e.IBV_WC_SUCCESS), (3, e.IBV_WC_SUCCESS)])
    d = delta()
    check(f"rnr_nak_retry_err moved (got {d['rnr_nak_retry_err']})", d["rnr_nak_retry_err"] >= 1)
    check("out_of_buffer moved at least as much (an RNR NAK for each message without a receive)",
          d["out_of_buffer"] >= d["rnr_nak_retry_err"])
    expect(d, "req_rnr_retries_exceeded", 0)
    expect(d, "req_cqe_error", 0)


def rdma_json(*args):
    r = subprocess.run(["rdma", "-j", *args], capture_output=True, text=True)
    print(f"# rdma {' '.join(args)} -> {r.returncode} {(r.stdout + r.stderr).strip()[:600]}", flush=True)
    return r.returncode, json.loads(r.stdout) if r.stdout.strip() else []


def find(obj, key):
    """Every value of key anywhere in a JSON document."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key:
                yield v
            yield from find(v, key)
    elif isinstance(obj, list):
        for v in obj:
            yield from find(v, key)


def counter_of(qpn):
    _, doc = rdma_json("statistic", "qp", "show", "link", "mlx5_0/1")
    for c in doc if isinstance(doc, list) else [doc]:
        lqpns = [x for v in find(c, "lqpn") for x in (v if isinstance(v, list) else [v])]
        if qpn in lqpns or any(isinstance(x, dict) and x.get("lqpn") == qpn for x in lqpns):
            return c
    return None


def bound(ctx, pd, lid, count=20):
    mr = MR(pd, 8192, ACCESS)
    p = Pair(ctx, pd, lid)
    qpn = p.b.qp_num
    rc = subprocess.run(["rdma", "statistic", "qp", "bind", "link", "mlx5_0/1", "lqpn", str(qpn)],
                        capture_output=True, text=True)
    check(f"rdma statistic qp bind lqpn {qpn} (an RTS QP): exit {rc.returncode} {rc.stderr.strip()}",
          rc.returncode == 0)
    delta = Delta()
    for i in range(count):
        wr = SendWR(wr_id=i, opcode=e.IBV_WR_RDMA_WRITE, num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
        wr.set_wr_rdma(mr.rkey, mr.buf + 4096)
        p.a.post_send(wr)
        check(f"WRITE {i} completed", [w.status for w in p.poll(1)] == [e.IBV_WC_SUCCESS])
    c = counter_of(qpn)
    check(f"the QP's own counter is listed ({c and c.get('cntn')})", c is not None)
    got = next(find(c, "rx_write_requests"), None) if c else None
    check(f"its counter has the QP's {count} WRITEs (got {got})", got == count)
    expect(delta(), "rx_write_requests", count)
    del p
    gc.collect()
    time.sleep(0.2)
    check("the counter went with the QP", counter_of(qpn) is None)
    expect(delta(), "rx_write_requests", count)


def main():
    ctx = Context(name="mlx5_0")
    lid = ctx.query_port(1).lid
    pd = PD(ctx)
    {"errors": errors, "rnr": rnr, "bound": bound}[sys.argv[1]](ctx, pd, lid)
    return verbs_errors.tap.failed


if __name__ == "__main__":
    sys.exit(main())
