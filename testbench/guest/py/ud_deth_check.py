#!/usr/bin/env python3
"""Host side of 05-fabric-ud: the DETH of the captured UD packets, as
tshark decoded it, against what the guests used. Prints TAP lines.

The guests' ibv_ud_pingpong runs print the peer's LID and QPN ("remote
address: LID 0x0002, QPN 0x000123, ..."); ibv_ud_pingpong sets Q_Key
0x11111111 on its QP and in every send. So every packet of a run must
carry the sender's QPN as DETH source QP, that Q_Key, and go to the
peer's QPN; and each direction of each run carries its 10000 sends. GMPs
(to QP1) carry source QP 1 and the GSI Q_Key 0x80010000 (IBA 13.4.6.3).

Usage: ud_deth_check.py RUN_DIR DETH_FIELDS
  DETH_FIELDS: tshark -Y infiniband.deth -T fields -e infiniband.lrh.slid
  -e infiniband.lrh.dlid -e infiniband.bth.destqp -e infiniband.deth.q_key
  -e infiniband.deth.srcqp"""
import re
import sys
from collections import Counter
from pathlib import Path

PINGPONG_QKEY = 0x11111111
GSI_QKEY = 0x80010000
ITERS = 10000
RUNS = 3  # ud-plain, ud-grh, ud-events


def remote_addresses(run_dir, node):
    text = (Path(run_dir) / f"node{node}" / "output.log").read_text(errors="replace")
    return [(int(lid, 16), int(qpn, 16))
            for lid, qpn in re.findall(r"remote address: LID 0x([0-9a-f]+), QPN 0x([0-9a-f]+)", text)]


def main(run_dir, fields_path):
    n = 0
    failed = 0

    def check(desc, ok, notes=()):
        nonlocal n, failed
        for note in notes:
            print(f"#   {note}")
        n += 1
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {n} - {desc}")

    # node0 printed node1's QP of each run and node1 node0's.
    qp0, qp1 = remote_addresses(run_dir, 1), remote_addresses(run_dir, 0)
    check(f"both guests printed the peer QP of each pingpong run ({len(qp0)} and {len(qp1)} of {RUNS})",
          len(qp0) == RUNS and len(qp1) == RUNS)
    pairs = list(zip(qp0, qp1))
    # A QPN may come back in a later run: a QP's peers are a set.
    peers = {}
    for a, b in pairs:
        peers.setdefault(a, set()).add(b)
        peers.setdefault(b, set()).add(a)
    rows = []
    for line in open(fields_path):
        f = line.split()
        if len(f) == 5:
            rows.append(tuple(int(x, 0) for x in f))
    print(f"# {len(rows)} packets with a DETH")
    sent = Counter()
    bad_qkey, bad_dest = [], []
    gmp = gmp_bad = 0
    for slid, dlid, destqp, qkey, srcqp in rows:
        src = (slid, srcqp & 0xffffff)
        if src in peers:
            sent[src, (dlid, destqp)] += 1
            if qkey != PINGPONG_QKEY:
                bad_qkey.append(f"from LID {slid} QP {src[1]:#x}: Q_Key {qkey:#x}")
            if (dlid, destqp) not in peers[src]:
                bad_dest.append(f"from LID {slid} QP {src[1]:#x} to LID {dlid} QP {destqp:#x}")
        if destqp == 1:
            gmp += 1
            gmp_bad += qkey != GSI_QKEY or srcqp & 0xffffff != 1
    for k, (a, b) in enumerate(pairs):
        for src, dst in ((a, b), (b, a)):
            got = sent[src, dst]
            check(f"run {k + 1}: {got} packets from LID {src[0]} QP {src[1]:#x} to QP {dst[1]:#x} carry it as "
                  f"DETH source QP (>= {ITERS})", got >= ITERS)
    check(f"every pingpong packet carries Q_Key {PINGPONG_QKEY:#x}", not bad_qkey and sum(sent.values()) > 0,
          bad_qkey[:5])
    check("every pingpong packet goes to the peer QP of its run", not bad_dest and sum(sent.values()) > 0,
          bad_dest[:5])
    check(f"GMPs to QP1 ({gmp}) carry source QP 1 and Q_Key {GSI_QKEY:#x}", gmp > 0 and gmp_bad == 0,
          [f"{gmp_bad} do not"] if gmp_bad else [])
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
