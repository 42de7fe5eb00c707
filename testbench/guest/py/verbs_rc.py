"""What the pyverbs guest programs share: TAP output, an RC QP taken
from RESET to RTS towards a peer QP (on our own LID or another node's),
values exchanged between nodes through the run directory, and waiting for
a completion."""
import json
import os
import time

from pyverbs.addr import AHAttr
from pyverbs.qp import QPAttr

from verbs_enums import e


class Tap:
    """Numbered TAP lines; failed counts the checks that did not hold."""

    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, desc, ok):
        self.n += 1
        print(f"{'ok' if ok else 'not ok'} {self.n} - {desc}", flush=True)
        self.failed += not ok


def connect_rc(qp, dest_qpn, dlid, access, rnr_retry=7):
    """RESET -> INIT -> RTR -> RTS: port 1, MTU 1024, one outstanding read
    or atomic each way, timeout 14, 7 retries."""
    at = QPAttr()
    at.qp_state = e.IBV_QPS_INIT
    at.pkey_index = 0
    at.port_num = 1
    at.qp_access_flags = access
    qp.modify(at, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT | e.IBV_QP_ACCESS_FLAGS)
    at = QPAttr()
    at.qp_state = e.IBV_QPS_RTR
    at.path_mtu = e.IBV_MTU_1024
    at.dest_qp_num = dest_qpn
    at.rq_psn = 0
    at.max_dest_rd_atomic = 1
    at.min_rnr_timer = 1
    at.ah_attr = AHAttr(dlid=dlid, port_num=1)
    qp.modify(at, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU | e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
              e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
    at = QPAttr()
    at.qp_state = e.IBV_QPS_RTS
    at.timeout = 14
    at.retry_cnt = 7
    at.rnr_retry = rnr_retry
    at.sq_psn = 0
    at.max_rd_atomic = 1
    qp.modify(at, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT | e.IBV_QP_RNR_RETRY |
              e.IBV_QP_SQ_PSN | e.IBV_QP_MAX_QP_RD_ATOMIC)


def publish(shared, me, name, value):
    """Makes value (JSON) visible to the other nodes as name."""
    os.makedirs(shared, exist_ok=True)
    tmp = os.path.join(shared, f"{name}.node{me}.tmp")
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.rename(tmp, os.path.join(shared, f"{name}.node{me}"))


def wait_for(shared, node, name, timeout=60):
    """What node published as name; exits the program if it never does."""
    path = os.path.join(shared, f"{name}.node{node}")
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        time.sleep(0.05)
    raise SystemExit(f"not ok - node {node} never published {name}")


def complete(tap, cq, what, timeout=20.0):
    """Polls cq for one completion and checks it succeeded; returns it."""
    end = time.time() + timeout
    while time.time() < end:
        nc, wcs = cq.poll(1)
        if nc:
            tap.check(f"{what} completes successfully (status {wcs[0].status})", wcs[0].status == e.IBV_WC_SUCCESS)
            return wcs[0]
        time.sleep(0.001)
    tap.check(f"{what} completes within {timeout:.0f} s", False)
    return None
