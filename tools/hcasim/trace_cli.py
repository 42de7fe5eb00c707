"""./hcasim trace: reading the device traces of a run (docs/TRACING.md).

  summary  counts per category/event, WQE opcode, packet opcode, QP, CQ, EQ;
           errors and anomalies
  list     the events, filtered (QPN, CQN, EQN, opcode, category, event,
           time window, seq range, node, regex), both nodes merged by time
  decode   one WQE, segment by segment (trace_wqe.py)
  follow   one work request through both nodes (trace_follow.py)
  export   Chrome/Perfetto trace-event JSON, self-contained HTML report
           (trace_export.py)
  wire     the fabric capture's records of traced packets (pcapng.py, tshark)

Traces are streamed (they reach hundreds of MB); only what a command keeps
(counters, one WQE's context) is held in memory. `./hcasim inspect` is
registered here too (inspect_hca.py).
"""
import argparse
import heapq
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

from hcasim import inspect_hca, pcapng, trace_wqe
from hcasim import trace_parse as tp
from hcasim.common import RUNS, die

ERROR_CQES = ("REQ_ERR", "RESP_ERR")


# -- sources -----------------------------------------------------------------

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


def table(rows, headers, right=()):
    """Aligned text table."""
    rows = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    out = []
    fmt = lambda r: "  ".join((c.rjust(widths[i]) if i in right else c.ljust(widths[i]))
                              for i, c in enumerate(r)).rstrip()
    out.append(fmt(headers))
    out.append(fmt(["-" * w for w in widths]))
    out += [fmt(r) for r in rows]
    return out


# -- summary -----------------------------------------------------------------

_NUM_RE = re.compile(r"0x[0-9a-fA-F]+|\b\d+\b")


def shape(text):
    """A message with its numbers replaced by #, to group similar ones."""
    return _NUM_RE.sub("#", text)


class Summary:
    """Counters over a stream of events (any number of nodes)."""

    def __init__(self, examples=3):
        self.events = Counter()           # (node, "cat ev")
        self.cats = Counter()             # (node, cat)
        self.wqe_ops = Counter()          # (node, opcode)
        self.cqe_kinds = Counter()        # (node, kind)
        self.pkt = Counter()              # (node, "send"/"recv", opcode)
        self.qps = {}                     # (node, qpn) -> dict
        self.cqs = defaultdict(Counter)   # (node, cqn) -> counts
        self.eqs = defaultdict(Counter)   # (node, eqn) -> counts
        self.errors = Counter()           # (kind, shape)
        self.anomalies = Counter()
        self.first = {}                   # (kind, shape) -> first Event
        self.examples = examples
        self.nodes = []

    def qp(self, node, qpn):
        q = self.qps.get((node, qpn))
        if q is None:
            q = self.qps[(node, qpn)] = {"type": "", "state": "", "wqes": Counter(), "tx": 0, "rx": 0,
                                          "req": 0, "resp": 0, "err": 0, "first": None, "last": None,
                                          "retx": 0}
        return q

    def _touch(self, q, e):
        if q["first"] is None:
            q["first"] = e.t
        q["last"] = e.t

    def error(self, kind, text, e, anomaly=False):
        key = (kind, shape(text))
        (self.anomalies if anomaly else self.errors)[key] += 1
        self.first.setdefault(key, e)

    def add(self, e):
        n = e.node
        c, ev = e.cat, e.ev
        self.cats[(n, c)] += 1
        self.events[(n, f"{c} {ev}" if not e.seg else f"{c}   {ev}")] += 1
        if c == "wqe":
            if ev == "fetch":
                op = e.wqe_opcode()
                self.wqe_ops[(n, op)] += 1
                q = self.qp(n, e.int("qpn"))
                q["wqes"][op] += 1
                self._touch(q, e)
        elif c == "pkt":
            if ev in ("send", "recv"):
                op = e.pkt_opcode()
                self.pkt[(n, ev, op)] += 1
                qpn = e.int("qpn") if ev == "send" else e.int("dqpn")
                if qpn is not None and qpn != 0xffffff:
                    q = self.qp(n, qpn)
                    q["tx" if ev == "send" else "rx"] += 1
                    self._touch(q, e)
            elif ev in ("drop", "ignore"):
                self.error(f"packet {ev}", e.reason or e.body, e, anomaly=True)
            elif ev == "duplicate":
                self.error("packet duplicate", "duplicate request (retransmitted by the peer)", e, anomaly=True)
            elif ev == "nak_out" or ev == "rnr_nak_out":
                self.error("packet " + ev, ev, e, anomaly=True)
        elif c == "cqe":
            if ev == "cqe":
                kind = e.cqe_kind()
                self.cqe_kinds[(n, kind)] += 1
                q = self.qp(n, e.int("qpn"))
                self._touch(q, e)
                if kind in ERROR_CQES:
                    q["err"] += 1
                    synd = e.get("syndrome", "?")
                    # Flushed WQEs of a QP moved to ERR (teardown, a QP
                    # error) are how the driver gets them back: not a
                    # fault by themselves.
                    self.error(f"{kind} CQE", f"syndrome={synd}", e, anomaly=synd.startswith("WR flushed"))
                elif kind and kind.startswith("REQ"):
                    q["req"] += 1
                else:
                    q["resp"] += 1
                self.cqs[(n, e.int("cqn"))]["cqes"] += 1
            elif ev == "arm":
                self.cqs[(n, e.int("cqn"))]["arms"] += 1
        elif c == "eq":
            if ev == "eqe":
                self.eqs[(n, e.int("eqn"))]["eqes"] += 1
                cqn = e.eqe_cqn()
                if cqn is not None and e.int("type") == 0:
                    self.cqs[(n, cqn)]["eqes"] += 1
            elif ev == "doorbell":
                self.eqs[(n, e.int("eqn"))]["doorbells"] += 1
        elif c == "irq" and ev == "msix":
            self.eqs[(n, e.int("eqn"))]["irqs"] += 1
        elif c == "guest_err":
            self.error("guest error", f"{e.ev} {e.body}", e)
        elif c == "cmd" and ev == "done":
            st = e.get("status", "")
            if st and not st.startswith("OK"):
                self.error("command failed", f"{e.get('opcode')} status={st}", e)
        elif c == "qp":
            if ev == "error":
                q = self.qp(n, e.int("qpn"))
                q["state"] = "ERR"
                self.error("QP error", e.reason or e.body, e)
            elif ev == "transition":
                q = self.qp(n, e.int("qpn"))
                q["type"] = e.get("type") or q["type"]
                if "->" in e.words:
                    q["state"] = e.words[e.words.index("->") + 1]
            elif ev in ("retransmit", "ack_timeout", "nak", "rnr_nak"):
                if ev == "retransmit":
                    self.qp(n, e.int("qpn"))["retx"] += 1
                self.error(f"QP {ev}", ev, e, anomaly=True)
        elif c == "mkey" and ev == "fail":
            self.error("memory key", e.reason or e.body, e)
        elif c == "obj":
            if ev == "create_qp":
                q = self.qp(n, e.int("qpn"))
                q["type"] = e.get("type")
                q["state"] = "RST"
            elif ev == "destroy_qp":
                self.qp(n, e.int("qpn"))["state"] = "destroyed"
            elif ev == "create_cq":
                self.cqs[(n, e.int("cqn"))]["eqn"] = e.int("eqn") or 0

    def render(self, srcs):
        L = []
        nodes = [s.name for s in srcs]
        multi = len(nodes) > 1
        for s in srcs:
            st = s.stats
            span = (f"device time {tp.fmt_us(st.first_t)} .. {tp.fmt_us(st.last_t)} us"
                    if st.first_t is not None else "no events")
            L.append(f"{s.name}: {', '.join(Path(f).name for f in st.files)} ({s.size() / 1e6:.1f} MB), "
                     f"{st.events} events, seq {st.first_seq}..{st.last_seq}, {span}")
            for note in st.notes():
                L.append(f"  note: {note}")
        L.append("")

        def per_node(counter, keys, title, key_header):
            rows = []
            for k in keys:
                vals = [counter.get((n,) + (k if isinstance(k, tuple) else (k,)), 0) for n in nodes]
                rows.append([" ".join(k) if isinstance(k, tuple) else k] + vals + ([sum(vals)] if multi else []))
            if not rows:
                return
            L.append(title)
            hdr = [key_header] + nodes + (["total"] if multi else [])
            L.extend("  " + x for x in table(rows, hdr, right=set(range(1, len(hdr)))))
            L.append("")

        cats = sorted({c for (_, c) in self.cats}, key=lambda c: (tp.CATEGORIES.index(c)
                                                                  if c in tp.CATEGORIES else 99, c))
        per_node(self.cats, cats, "events per category", "category")
        per_node(self.wqe_ops, sorted({o for (_, o) in self.wqe_ops}, key=str), "WQEs fetched per opcode", "opcode")
        per_node(self.cqe_kinds, sorted({k for (_, k) in self.cqe_kinds}, key=str), "CQEs per kind", "kind")
        pk = sorted({(d, o) for (_, d, o) in self.pkt}, key=lambda x: (x[0], str(x[1])))
        per_node(self.pkt, pk, "packets per opcode (send: leaving this port, recv: arriving)", "direction opcode")

        rows = []
        for (n, qpn), q in sorted(self.qps.items(), key=lambda x: (x[0][0], x[0][1] or 0)):
            if qpn is None:
                continue
            wq = ", ".join(f"{op} {k}" for op, k in q["wqes"].most_common(4))
            special = {0: "QP0 (SMI)", 1: "QP1 (GSI)"}.get(qpn, "?")
            rows.append([n, f"0x{qpn:x}", q["type"] or special, q["state"] or "-", sum(q["wqes"].values()), q["tx"],
                         q["rx"], q["req"], q["resp"], q["err"], q["retx"], wq])
        if rows:
            L.append("QPs (WQEs fetched, packets sent/received, CQEs requester/responder/error)")
            L.extend("  " + x for x in table(rows, ["node", "qpn", "type", "state", "WQEs", "pkt tx", "pkt rx",
                                                     "req CQEs", "resp CQEs", "err CQEs", "retransmits",
                                                     "opcodes"], right={4, 5, 6, 7, 8, 9, 10}))
            L.append("")
        rows = [[n, f"0x{cqn:x}", c.get("eqn", "-"), c["cqes"], c["arms"], c["eqes"]]
                for (n, cqn), c in sorted(self.cqs.items(), key=lambda x: (x[0][0], x[0][1] or 0)) if cqn is not None]
        if rows:
            L.append("CQs")
            L.extend("  " + x for x in table(rows, ["node", "cqn", "eqn", "CQEs", "arms", "EQEs"],
                                             right={2, 3, 4, 5}))
            L.append("")
        rows = [[n, eqn, c["eqes"], c["irqs"], c["doorbells"]]
                for (n, eqn), c in sorted(self.eqs.items(), key=lambda x: (x[0][0], x[0][1] or 0)) if eqn is not None]
        if rows:
            L.append("EQs")
            L.extend("  " + x for x in table(rows, ["node", "eqn", "EQEs", "interrupts", "doorbells"],
                                             right={1, 2, 3, 4}))
            L.append("")
        for title, counter in (("errors", self.errors), ("anomalies (drops, retransmissions: recovered)",
                                                        self.anomalies)):
            total = sum(counter.values())
            L.append(f"{title}: {total}")
            for (kind, sh), k in counter.most_common(25):
                e = self.first[(kind, sh)]
                L.append(f"  {k:6}  {kind}: {sh}")
                L.append(f"          first: {e.node} seq {e.seq} at {tp.fmt_us(e.t)} us")
            if len(counter) > 25:
                L.append(f"  ... {len(counter) - 25} more kinds")
            L.append("")
        return L


def cmd_summary(a):
    srcs = sources_of(a)
    s = Summary()
    for e in merged(srcs):
        s.add(e)
    print("\n".join(s.render(srcs)).rstrip())
    return 0


# -- list --------------------------------------------------------------------

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
                hit = e.int("qpn") in qpns or (e.cat == "pkt" and e.ev == "recv" and e.int("dqpn") in qpns)
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
            if not names & ops:
                return False
        return True

    return keep_line, keep_event


def cmd_list(a):
    srcs = sources_of(a)
    keep_line, keep_event, since, until = filters_of(a)
    multi = len(srcs) > 1
    n = 0
    try:
        for e in merged(srcs, keep=keep_line, since=since):
            if until is not None and e.t > until:
                if not multi:
                    break
                continue
            if since is not None and e.t < since:
                continue
            if not keep_event(e):
                continue
            print(f"{e.node} {e.line}" if multi else e.line)
            n += 1
            if a.limit and n >= a.limit:
                break
    except BrokenPipeError:
        sys.stderr.close()
        return 0
    if n == 0:
        print("(no event matches)", file=sys.stderr)
    return 0


# -- decode ------------------------------------------------------------------

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


def cmd_decode(a):
    a.seq = split_args(a)
    if a.seq is not None and ":" in a.seq:
        a.node = None  # NODE:SEQ names the node
    srcs = sources_of(a)
    if a.seq is None:
        # --qpn/--index: the first such WQE (after --since).
        if a.qpn is None or a.index is None:
            die("decode SEQ, or --qpn Q --index I (with --node)")
        if len(srcs) > 1:
            die("give --node with --qpn/--index")
        q, i = parse_int(a.qpn), parse_int(a.index)
        found = trace_wqe.nth_wqe(srcs, q, i, a.nth)
        if found is None:
            die(f"no WQE 0x{i:x} of qpn=0x{q:x} (--nth {a.nth}) in {srcs[0].name}'s trace")
        src, seq = found
    else:
        src, seq = node_and_seq(a.seq, srcs)
    w = trace_wqe.collect(src, seq)
    if w is None:
        die(f"{src.name} seq {seq} is not a WQE (decode takes the seq of a `wqe fetch` line, or of one of its "
            f"segment, doorbell or doorbell-record lines)")
    print("\n".join(trace_wqe.render(w, raw=not a.no_bytes)))
    return 0


# -- wire --------------------------------------------------------------------

def cmd_wire(a):
    srcs = sources_of(a)
    run = run_dir_of(srcs)
    cap = Path(a.capture) if a.capture else pcapng.capture_of(run)
    if cap is None or not cap.is_file():
        die("no fabric capture (fabric.pcapng in the run directory; --capture FILE)")
    ids = []
    if a.id:
        ids = int_list(a.id)
    else:
        # Packets of the traced events chosen like `list` does.
        keep_line, keep_event, since, until = filters_of(a)
        for e in merged(srcs, keep=lambda line: " pkt send " in line and keep_line(line), since=since):
            if until is not None and e.t > until:
                break
            if e.ev == "send" and keep_event(e) and e.int("id") is not None:
                ids.append(e.int("id"))
                if len(ids) >= a.limit:
                    break
    if not ids:
        die("no packet selected (--id, or list-style filters that match `pkt send` lines)")
    found, headers = pcapng.find(cap, ids)
    recs = [r for i in ids for r in found.get(i, [])]
    lines = pcapng.tshark_lines(headers, recs)
    if lines is None:
        lines = [""] * len(recs)
        print("(tshark is not installed: comments only)")
    print(f"{cap}: {len(recs)} record(s) for {len(ids)} packet id(s)")
    for r, t in zip(recs, lines):
        print(f"  frame {r.frame:<7} id=0x{r.packet_id:x}  [{r.comment.partition(' ')[2]}]  {t}")
    missing = [i for i in ids if i not in found]
    if missing:
        print(f"  not in the capture: {', '.join(f'0x{i:x}' for i in missing[:10])}"
              f"{' ...' if len(missing) > 10 else ''} (loopback or local packets never reach the switch)")
    return 0


# -- registration ------------------------------------------------------------

def add_paths(p):
    p.add_argument("paths", nargs="*", help="run directory (all its nodes), node directory or trace file "
                   "(default: the newest run)")
    p.add_argument("--node", help="only this node (0, 1, ... or node<N>)")


def add_filters(p):
    p.add_argument("--qpn", help="QP number(s), comma-separated (matches qpn=, and dqpn= of received packets)")
    p.add_argument("--cqn", help="CQ number(s)")
    p.add_argument("--eqn", help="EQ number(s)")
    p.add_argument("--opcode", help="WQE/CQE opcode (SEND, RDMA_WRITE, ...), packet opcode (SEND_ONLY, "
                   "ACKNOWLEDGE, ...) or command opcode (CREATE_QP, ...), comma-separated")
    p.add_argument("--category", help="categories, comma-separated (wqe,cqe,pkt,...)")
    p.add_argument("--event", help="events, comma-separated ('fetch', 'pkt send', ...)")
    p.add_argument("--since", help="device time from (microseconds, or 12.5s, 300ms, ...)")
    p.add_argument("--until", help="device time up to")
    p.add_argument("--seq", help="seq range A:B (per node)")
    p.add_argument("--grep", help="regular expression over the line")


def _pipe_safe(fn):
    """A command whose output may go into `head`: a closed pipe ends it
    quietly."""
    def run(a):
        try:
            return fn(a)
        except BrokenPipeError:
            try:
                sys.stdout = None
            finally:
                return 0
    return run


class _Intermixed(argparse.ArgumentParser):
    """Positionals and options in any order: `decode RUN --node 0 1234`."""

    def parse_known_args(self, args=None, namespace=None):
        if getattr(self, "_mixing", False):
            return super().parse_known_args(args, namespace)
        self._mixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False


def register(sub):
    """The `trace` and `inspect` commands of ./hcasim."""
    from hcasim import trace_export, trace_follow
    t = sub.add_parser("trace", help="read device traces: summary, list, decode a WQE, follow a work request, "
                       "export (Perfetto JSON, HTML), wire capture")
    ts = t.add_subparsers(dest="trace_cmd", required=True, parser_class=_Intermixed)

    s = ts.add_parser("summary", help="counts per category, opcode, QP, CQ, EQ; errors")
    add_paths(s)
    s.set_defaults(func=cmd_summary)

    s = ts.add_parser("list", help="events, filtered; both nodes merged by time")
    add_paths(s)
    add_filters(s)
    s.add_argument("-n", "--limit", type=int, default=0, help="at most N events")
    s.set_defaults(func=cmd_list)

    s = ts.add_parser("decode", help="one WQE segment by segment, like a disassembler")
    trace_wqe.add_selector_args(s, "the seq of the WQE's `wqe fetch` line", "the node of SEQ (0, 1, ...)")
    s.add_argument("--no-bytes", action="store_true", help="no raw bytes column")
    s.set_defaults(func=cmd_decode)

    trace_follow.register(ts, add_paths)
    trace_export.register(ts, add_paths, add_filters)
    for p in ts.choices.values():
        p.set_defaults(func=_pipe_safe(p.get_default("func")))

    s = ts.add_parser("wire", help="the fabric capture's records (decoded by tshark) of traced packets")
    add_paths(s)
    add_filters(s)
    s.add_argument("--id", help="packet id(s) as the trace prints them (id=0x...), comma-separated")
    s.add_argument("--capture", help="the pcapng (default: fabric.pcapng of the run)")
    s.add_argument("-n", "--limit", type=int, default=50, help="at most N packets (default 50)")
    s.set_defaults(func=cmd_wire)

    inspect_hca.register(sub)
