"""Which traces and which events: the run and node sources a trace command
reads, their events merged by time, and the filters of `./hcasim trace list`
(shared by trace_cli, trace_follow and trace_export)."""
import heapq
import re
import sys
from pathlib import Path

from hcasim import trace_parse as tp
from hcasim.common import RUNS, die


def newest_run():
    """The newest run directory with a node trace."""
    if RUNS.is_dir():
        for d in sorted((d for d in RUNS.iterdir() if d.is_dir()), key=lambda d: d.name, reverse=True):
            if any(d.glob("node*/hca.trace")):
                return d
    die(f"no run with a trace in {RUNS}; give a run directory or a trace file")


def sources_of(a):
    paths = a.paths or [newest_run()]
    node = getattr(a, "node", None)
    try:
        srcs = tp.resolve(paths, node=node)
    except (FileNotFoundError, ValueError) as e:
        die(str(e))
    if not srcs:
        die(f"no trace in {' '.join(str(p) for p in paths)}")
    for s in srcs:
        note = tp.format_note(s.format())
        if note:
            print(f"{s.name}: {note}", file=sys.stderr)
    return srcs


def run_dir_of(srcs):
    for s in srcs:
        if s.run_dir is not None:
            return s.run_dir
    return None


def merged(srcs, keep=None, since=None):
    """Events of every source, merged by device time (each node's own
    clock; see follow for the offset between them)."""
    def gen(i, s):
        it = tp.find_time(s, since) if since is not None else s.events(keep=keep)
        for e in it:
            if since is not None and keep is not None and not keep(e.line):
                continue
            yield (e.t, i, e.seq), e
    if len(srcs) == 1:
        for _, e in gen(0, srcs[0]):
            yield e
        return
    for _, e in heapq.merge(*(gen(i, s) for i, s in enumerate(srcs)), key=lambda x: x[0]):
        yield e


def parse_int(text):
    try:
        return int(text, 0)
    except ValueError:
        try:
            return int(text, 16)
        except ValueError:
            die(f"not a number: {text!r}")


def int_list(text):
    return [parse_int(x) for x in text.split(",") if x] if text else []


def filters_of(a):
    """(keep_line, keep_event, since, until) for the list filters, the
    time window parsed."""
    since = tp.parse_time(a.since) if a.since else None
    until = tp.parse_time(a.until) if a.until else None
    return (*event_filter(a), since, until)


def event_filter(a):
    """(keep_line, keep_event) for the list filters."""
    a.seq_range = (None, None)
    if a.seq:
        lo, _, hi = a.seq.partition(":")
        a.seq_range = (parse_int(lo) if lo else None, parse_int(hi) if hi else None)
    qpns = int_list(a.qpn)
    cqns = int_list(a.cqn)
    eqns = int_list(a.eqn)
    cats = set(a.category.split(",")) if a.category else None
    evs = set(a.event.split(",")) if a.event else None
    for name in evs or ():
        if name not in tp.SCHEMA.events and not any(e.name == name for e in tp.SCHEMA.events.values()):
            die(f"--event {name}: no such event in hca-model/trace-events (`./hcasim trace schema` lists them)")
    ops = {o.upper() for o in a.opcode.split(",")} if a.opcode else None
    rx = re.compile(a.grep) if a.grep else None
    # (qpn=0x104 is a substring of dqpn=0x104: received packets pass.)
    subs = [f"qpn=0x{q:x}" for q in qpns] + [f"cqn=0x{c:x}" for c in cqns] + [f"eqn={q}" for q in eqns]
    lo, hi = a.seq_range

    def keep_line(line):
        """A cheap test on the raw line, before it is parsed."""
        if subs and not any(s in line for s in subs):
            return False
        if cats is not None:
            p = line.split(" ", 3)
            if len(p) < 3 or p[2] not in cats:
                return False
        return rx is None or rx.search(line) is not None

    def keep_event(e):
        if lo is not None and e.seq < lo or hi is not None and e.seq > hi:
            return False
        if cats is not None and e.cat not in cats:
            return False
        if evs is not None and e.ev not in evs and f"{e.cat} {e.ev}" not in evs:
            return False
        if qpns or cqns or eqns:
            hit = False
            if qpns:
                hit = e.int("qpn") in qpns or (e.is_("pkt recv") and e.int("dqpn") in qpns)
            if cqns and not hit:
                hit = e.int("cqn") in cqns
            if eqns and not hit:
                hit = e.int("eqn") in eqns
            if not hit:
                return False
        if ops is not None:
            names = {(tp.vname(e.get("opcode")) or "").upper(), (e.pkt_opcode() or "").upper()}
            if e.seg:
                names.add(e.ev.upper())
                names.add((e.wqe_opcode() or "").upper())
            if not names & ops:
                return False
        return True

    return keep_line, keep_event


def node_and_seq(text, srcs):
    """The source and seq named by SEQ or NODE:SEQ (srcs: the nodes --node
    left)."""
    text = str(text)
    node = None
    if ":" in text:
        node, _, text = text.partition(":")
    seq = parse_int(text)
    if node is not None:
        want = node if node.startswith("node") else f"node{node}"
        for s in srcs:
            if s.name == want:
                return s, seq
        die(f"no trace of {want}")
    if len(srcs) > 1:
        die(f"SEQ is per node: give --node N or N:{seq} ({', '.join(s.name for s in srcs)})")
    return srcs[0], seq


def split_args(a, what="SEQ"):
    """a.args: the existing paths (a.paths), and at most one other word
    (returned: a SEQ/NODE:SEQ, or follow's work request)."""
    paths, rest = [], []
    for x in a.args:
        (paths if Path(x).exists() else rest).append(x)
    if len(rest) > 1:
        die(f"one {what} at a time (not a path: {' '.join(rest)})")
    a.paths = paths
    return rest[0] if rest else None
