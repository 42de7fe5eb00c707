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
import json
import sys
from pathlib import Path

from hcasim import inspect_hca, pcapng, trace_wqe
from hcasim import trace_parse as tp
from hcasim.common import die
from hcasim.trace_select import filters_of, int_list, merged, node_and_seq, parse_int, run_dir_of, sources_of, split_args
from hcasim.trace_summary import Summary

_SEND_MARK, = tp.line_marks("pkt send")


# -- summary -----------------------------------------------------------------


def cmd_summary(a):
    srcs = sources_of(a)
    s = Summary()
    for e in merged(srcs):
        s.add(e)
    print("\n".join(s.render(srcs)).rstrip())
    return 0


# -- list --------------------------------------------------------------------


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
        for e in merged(srcs, keep=lambda line: _SEND_MARK in line and keep_line(line), since=since):
            if until is not None and e.t > until:
                break
            if e.is_("pkt send") and keep_event(e) and e.int("id") is not None:
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

def cmd_schema(a):
    """The trace schema (hca-model/trace-events) as JSON, or as a table."""
    schema = tp.SCHEMA
    if a.json:
        print(json.dumps(schema.to_json(), indent=1))
        return 0
    print(f"trace format {schema.format}; events declared in hca-model/trace-events")
    for c in schema.categories.values():
        print(f"\n{c.name}: {c.help}{' (narrowed by trace-filter qpn=/cqn=)' if c.scoped else ''}")
        for e in schema.events.values():
            if e.cat == c.name:
                fields = " ".join(f"{f.name}:{f.type}{'?' if f.optional else ''}" for f in e.fields)
                print("  " + " ".join(x for x in (('  ' if e.seg else '') + e.name, fields, ': reason' if e.reason else '') if x))
    return 0


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

    s = ts.add_parser("schema", help="every event the device traces, with its typed fields (--json: machine-readable)")
    s.add_argument("--json", action="store_true", help="the schema as JSON")
    s.set_defaults(func=cmd_schema)

    s = ts.add_parser("wire", help="the fabric capture's records (decoded by tshark) of traced packets")
    add_paths(s)
    add_filters(s)
    s.add_argument("--id", help="packet id(s) as the trace prints them (id=0x...), comma-separated")
    s.add_argument("--capture", help="the pcapng (default: fabric.pcapng of the run)")
    s.add_argument("-n", "--limit", type=int, default=50, help="at most N packets (default 50)")
    s.set_defaults(func=cmd_wire)

    inspect_hca.register(sub)
