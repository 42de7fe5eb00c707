"""./hcasim trace export: the device traces as pictures.

--perfetto FILE  Chrome/Perfetto trace-event JSON (ui.perfetto.dev, or
                 chrome://tracing): one process per node, one track (thread)
                 per QP and per EQ, plus "commands" and "port". A WQE is a
                 slice from its doorbell to its CQE; packets are short
                 slices joined by flow arrows from sender to receiver; CQEs,
                 EQEs and interrupts are instants.
--html FILE      one self-contained HTML file (inline CSS and JavaScript, no
                 network): run facts, the summary tables, the error list and
                 a per-QP timeline the page draws itself (SVG), with zoom.

The nodes' clocks are aligned on node0's: each other node's offset is
estimated from the packets that crossed between them (trace_follow). The
export streams the traces; --max-events bounds the output.
"""
import html
import json
from collections import Counter
from pathlib import Path

from hcasim import trace_follow
from hcasim import trace_parse as tp
from hcasim.common import die, say
from hcasim.trace_select import filters_of, merged, run_dir_of, sources_of
from hcasim.trace_summary import Summary

TID_EQ = 0x1000000
TID_CMD = 0x2000000
TID_PORT = 0x2000001
PKT_DUR_NS = 500

# The events that make timeline items (hca-model/trace-events), and the
# categories all of whose events are marks.
OBJ_CREATE_QP = tp.event_key("obj create_qp")
UAR_SQ_DOORBELL = tp.event_key("uar sq_doorbell")
WQE_FETCH = tp.event_key("wqe fetch")
PKT_SEND, PKT_RECV = tp.event_key("pkt send"), tp.event_key("pkt recv")
CQE_CQE = tp.event_key("cqe cqe")
EQ_EQE = tp.event_key("eq eqe")
IRQ_MSIX = tp.event_key("irq msix")
CMD_DOORBELL, CMD_DONE = tp.event_key("cmd doorbell"), tp.event_key("cmd done")
QP_ERROR, QP_TRANSITION = tp.event_key("qp error"), tp.event_key("qp transition")
MARK_CATEGORIES = ("port", "guest_err")
# Raw-line filter of the packets the clock alignment uses.
_SEND_MARK, _RECV_MARK = tp.line_marks(PKT_SEND, PKT_RECV)


def node_index(name):
    return int(name[4:]) if name.startswith("node") and name[4:].isdigit() else 0


def estimate_offsets(srcs):
    """{node name: ns to subtract from its times to put them on the first
    node's clock} from every packet that crossed (whole traces)."""
    if len(srcs) < 2:
        return {s.name: 0 for s in srcs}
    evs = {}
    for s in srcs:
        evs[s.name] = [e for e in s.events(keep=lambda line: _SEND_MARK in line or _RECV_MARK in line,
                                            stats=tp.ParseStats())]
    ref = srcs[0].name
    out = {ref: 0}
    for s in srcs[1:]:
        off, _, _, _ = trace_follow.clock_offset(evs[ref], evs[s.name])
        out[s.name] = off or 0
    return out


class Collector:
    """Turns events into timeline items: WQE spans, packets, CQEs, EQEs,
    interrupts, commands, with their tracks."""

    def __init__(self, offsets):
        self.offsets = offsets
        self.tracks = {}          # (node, tid) -> name
        self.qp_types = {}        # (node, qpn) -> type
        self.open = {}            # (node, qpn) -> {index: (t, seq, opcode, fetch_seen)}
        self.cmd_open = {}        # (node, slot) -> t
        self.count = Counter()

    def t(self, e):
        return e.t - self.offsets.get(e.node, 0)

    def qp_track(self, node, qpn):
        key = (node, qpn)
        if key not in self.tracks:
            ty = self.qp_types.get((node, qpn), "") or {0: "QP0 (SMI)", 1: "QP1 (GSI)"}.get(qpn, "")
            self.tracks[key] = f"QP 0x{qpn:x}" + (f" {ty}" if ty else "")
        return key

    def eq_track(self, node, eqn):
        key = (node, TID_EQ + eqn)
        self.tracks.setdefault(key, f"EQ {eqn}")
        return key

    def items(self, e):
        """Timeline items of one event: dicts with kind, node, tid, t, dur,
        name, args."""
        key = f"{e.cat} {e.ev}"
        make = self._BY_EVENT.get(key)
        if make is None and e.cat in MARK_CATEGORIES:
            make = Collector._mark
        out = make(self, key, e) if make is not None else []
        for it in out:
            self.count[it["kind"]] += 1
        return out

    # -- one method per event: the items it makes -----------------------------

    def _create_qp(self, key, e):
        n, q = e.node, e.int("qpn")
        self.qp_types[(n, q)] = e.get("type")
        self.tracks[(n, q)] = f"QP 0x{q:x} {e.get('type')}"
        return []

    def _sq_doorbell(self, key, e):
        """A WQE's span starts at its doorbell..."""
        q, i = e.int("qpn"), e.int("wqe_index")
        if q is not None and i is not None:
            self.open.setdefault((e.node, q), {})[i] = [self.t(e), e.seq, e.get("opcode"), False]
        return []

    def _fetch(self, key, e):
        """... or at its fetch when no doorbell named it."""
        n, q, i = e.node, e.int("qpn"), e.int("index")
        d = self.open.setdefault((n, q), {})
        if i in d:
            d[i][3] = True
            d[i][2] = e.wqe_opcode()
        else:
            d[i] = [self.t(e), e.seq, e.wqe_opcode(), True]
        self.qp_track(n, q)
        return []

    def _packet(self, key, e):
        n, ev, sent = e.node, e.ev, key == PKT_SEND
        q = e.int("qpn") if sent else e.int("dqpn")
        if q is None or q == 0xffffff:
            q = 0xffffff
        track = self.qp_track(n, q) if q != 0xffffff else self.multicast_track(n)
        return [{"kind": "pkt", "dir": ev, "node": n, "tid": track[1], "t": self.t(e), "dur": PKT_DUR_NS,
                 "name": f"{'>' if sent else '<'} {e.pkt_opcode()}",
                 "id": e.get("id"), "args": {"seq": e.seq, "line": e.body}}]

    def _cqe(self, key, e):
        n, q = e.node, e.int("qpn")
        track = self.qp_track(n, q)
        kind = e.cqe_kind() or "?"
        out = [{"kind": "cqe", "node": n, "tid": track[1], "t": self.t(e), "dur": 0,
                "name": f"CQE {kind}", "err": kind.endswith("ERR"),
                "args": {"seq": e.seq, "line": e.body}}]
        if kind.startswith("REQ"):
            out.extend(self._completed_wqes(e, q, track[1], kind))
        return out

    def _completed_wqes(self, e, q, tid, kind):
        """The spans of the WQEs a requester CQE completes: its own and the
        unsignaled ones before it."""
        n = e.node
        d = self.open.get((n, q), {})
        cnt = e.int("wqe_counter")
        out = []
        for i in sorted(d, key=lambda i: d[i][1]):
            t0, seq, op, _ = d[i]
            done = i == cnt or (cnt is not None and ((cnt - i) & 0xffff) < 0x8000)
            if not done:
                continue
            out.append({"kind": "wqe", "node": n, "tid": tid, "t": t0, "dur": max(self.t(e) - t0, 1),
                        "name": f"{op} 0x{i:x}", "err": kind.endswith("ERR") and i == cnt,
                        "args": {"doorbell_seq": seq, "cqe_seq": e.seq, "cqe": e.body}})
            del d[i]
        return out

    def _eqe(self, key, e):
        track = self.eq_track(e.node, e.int("eqn"))
        cqn = e.eqe_cqn()
        return [{"kind": "eqe", "node": e.node, "tid": track[1], "t": self.t(e), "dur": 0,
                 "name": f"EQE cqn 0x{cqn:x}" if cqn is not None and e.int("type") == 0
                 else f"EQE type {e.get('type')}", "args": {"seq": e.seq, "line": e.body}}]

    def _msix(self, key, e):
        track = self.eq_track(e.node, e.int("eqn"))
        return [{"kind": "irq", "node": e.node, "tid": track[1], "t": self.t(e), "dur": 0,
                 "name": f"MSI-X {e.get('vector')}", "args": {"seq": e.seq}}]

    def _cmd_doorbell(self, key, e):
        self.cmd_open[(e.node, "db")] = self.t(e)
        return []

    def _cmd_done(self, key, e):
        """A command's span: from the doorbell before it, or its own time."""
        n = e.node
        self.tracks.setdefault((n, TID_CMD), "commands")
        t1 = self.t(e)
        t0 = self.cmd_open.pop((n, "db"), None)
        if t0 is None or t1 - t0 > 10 * 1000 * 1000:
            t0 = t1 - (e.int("ns") or 1)
        return [{"kind": "cmd", "node": n, "tid": TID_CMD, "t": t0, "dur": max(t1 - t0, 1),
                 "name": tp.vname(e.get("opcode")) or "?",
                 "err": not (e.get("status") or "OK").startswith("OK"),
                 "args": {"seq": e.seq, "status": e.get("status")}}]

    def _mark(self, key, e):
        """An instant on the QP's track (its state) or the node's "port" or
        "events" track."""
        n, c = e.node, e.cat
        tid = TID_PORT
        name = "port" if c == "port" else "events"
        if c == "qp":
            tid = self.qp_track(n, e.int("qpn"))[1]
        self.tracks.setdefault((n, tid), name)
        return [{"kind": "mark", "node": n, "tid": tid, "t": self.t(e), "dur": 0,
                 "name": key, "err": c == "guest_err" or key == QP_ERROR,
                 "args": {"seq": e.seq, "line": e.body}}]

    _BY_EVENT = {OBJ_CREATE_QP: _create_qp, UAR_SQ_DOORBELL: _sq_doorbell, WQE_FETCH: _fetch,
                 PKT_SEND: _packet, PKT_RECV: _packet, CQE_CQE: _cqe, EQ_EQE: _eqe, IRQ_MSIX: _msix,
                 CMD_DOORBELL: _cmd_doorbell, CMD_DONE: _cmd_done, QP_ERROR: _mark, QP_TRANSITION: _mark}

    def multicast_track(self, node):
        key = (node, 0xffffff)
        self.tracks.setdefault(key, "multicast")
        return key


def events_for(a, srcs):
    """Merged events within the export's filters."""
    keep_line, keep_event, since, until = filters_of(a)
    for e in merged(srcs, since=since):
        if until is not None and e.t > until:
            continue
        if e.is_(OBJ_CREATE_QP) or (keep_line(e.line) and keep_event(e)):
            yield e


def write_perfetto(path, srcs, evs, offsets, max_events):
    col = Collector(offsets)
    n = 0
    truncated = False
    pids = {s.name: node_index(s.name) for s in srcs}
    with open(path, "w") as f:
        f.write('{"displayTimeUnit": "ns", "otherData": ')
        json.dump({"source": "hcasim device trace", "nodes": [s.name for s in srcs],
                   "clock_offsets_ns": offsets}, f)
        f.write(', "traceEvents": [\n')
        first = True

        def put(obj):
            nonlocal first
            if not first:
                f.write(",\n")
            first = False
            f.write(json.dumps(obj, separators=(",", ":")))

        for s in srcs:
            put({"ph": "M", "name": "process_name", "pid": pids[s.name], "args": {"name": s.name}})
            put({"ph": "M", "name": "process_sort_index", "pid": pids[s.name], "args": {"sort_index": pids[s.name]}})
        for e in evs:
            for it in col.items(e):
                if n >= max_events:
                    truncated = True
                    break
                pid = pids.get(it["node"], 0)
                ts = it["t"] / 1000.0
                base = {"name": it["name"], "cat": it["kind"], "pid": pid, "tid": it["tid"], "ts": ts,
                        "args": it["args"]}
                if it["dur"]:
                    base.update(ph="X", dur=it["dur"] / 1000.0)
                else:
                    base.update(ph="i", s="t")
                put(base)
                n += 1
                if it["kind"] == "pkt" and it.get("id") and not int(it["id"], 16) >> 63:
                    # Flow arrow from the sending node's packet to the
                    # receiving node's (the same id on both).
                    put({"ph": "s" if it["dir"] == "send" else "f", "bp": "e", "id": it["id"], "name": "packet",
                         "cat": "flow", "pid": pid, "tid": it["tid"], "ts": ts + 0.0001})
            if truncated:
                break
        for (node, tid), name in sorted(col.tracks.items(), key=lambda x: (x[0][0], x[0][1])):
            pid = pids.get(node, 0)
            put({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            put({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
        f.write("\n]}\n")
    return n, truncated, col


# -- HTML --------------------------------------------------------------------

# The page's style and script live beside this file; the export inlines
# them so the HTML stays one self-contained file.
_HERE = Path(__file__).resolve().parent
CSS = (_HERE / "report.css").read_text()
JS = (_HERE / "report.js").read_text()


def _html_table(rows, headers, numeric=()):
    out = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in headers) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(
            f"<td class=\"n\">{html.escape(str(c))}</td>" if i in numeric else f"<td>{html.escape(str(c))}</td>"
            for i, c in enumerate(r)) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _tables_from_text(lines):
    """Summary.render()'s text tables as HTML: a title line, a header row,
    a dashes row, rows; columns split on two or more spaces."""
    import re
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 2 < len(lines) and lines[i + 2].strip().startswith("-") and set(lines[i + 2].strip()) <= {"-", " "}:
            title = line.strip()
            hdr = re.split(r"\s{2,}", lines[i + 1].strip())
            j = i + 3
            rows = []
            while j < len(lines) and lines[j].startswith("  ") and lines[j].strip():
                rows.append(re.split(r"\s{2,}", lines[j].strip()))
                j += 1
            num = {k for k in range(len(hdr)) if rows and all(r[k].replace(",", "").isdigit() for r in rows
                                                              if k < len(r))}
            out.append(f"<h3>{html.escape(title)}</h3>")
            out.append(_html_table(rows, hdr, numeric=num))
            i = j
            continue
        i += 1
    return "\n".join(out)


def write_html(path, srcs, evs, offsets, max_items, summary, run_dir):
    col = Collector(offsets)
    items = []
    truncated = False
    lanes = {}
    for e in evs:
        summary.add(e)
        if truncated:
            continue
        for it in col.items(e):
            if len(items) >= max_items:
                truncated = True
                break
            key = f"{it['node']}/{it['tid']}"
            lanes[key] = (it["node"], it["tid"])
            items.append({"k": it["kind"], "lane": key, "t": it["t"], "d": it["dur"], "n": it["name"],
                          "e": bool(it.get("err")), "dir": it.get("dir"), "id": it.get("id"),
                          "s": (it["args"].get("line") or it["args"].get("cqe") or "")[:200]})
    lane_list = []
    for key, (node, tid) in sorted(lanes.items(), key=lambda x: (node_index(x[1][0]), x[1][1])):
        lane_list.append({"key": key, "node": node, "name": col.tracks.get((node, tid), f"track {tid}")})
    t0 = min((it["t"] for it in items), default=0)
    t1 = max((it["t"] + it["d"] for it in items), default=1)
    data = {"nodes": [s.name for s in srcs], "lanes": lane_list, "items": items, "t0": t0, "t1": t1,
            "truncated": truncated, "zoomFirst": False, "offsets": offsets}
    text = summary.render(srcs)
    facts = []
    if run_dir is not None:
        facts.append(("run", str(run_dir)))
    for s in srcs:
        st = s.stats
        facts.append((s.name, f"{', '.join(str(f) for f in st.files)}: {st.events} events, seq "
                              f"{st.first_seq}..{st.last_seq}, device time {tp.fmt_us(st.first_t)} .. "
                              f"{tp.fmt_us(st.last_t)} us"))
    for n, off in offsets.items():
        if off:
            facts.append((f"{n} clock", f"{n} = {srcs[0].name} {'+' if off >= 0 else '-'} {tp.fmt_us(abs(off))} us "
                                        f"(estimated from packets both ways; the timeline uses {srcs[0].name}'s)"))
    errs = []
    for title, counter in (("error", summary.errors), ("anomaly", summary.anomalies)):
        for (kind, sh), k in counter.most_common(200):
            e = summary.first[(kind, sh)]
            errs.append([title, k, kind, sh, f"{e.node} seq {e.seq}", tp.fmt_us(e.t)])
    body = [
        "<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>hcasim trace report{' — ' + html.escape(run_dir.name) if run_dir else ''}</title>",
        f"<style>{CSS}</style></head><body>",
        "<h1>hcasim device trace report</h1>",
        "<table class=\"facts\">" + "".join(f"<tr><td><b>{html.escape(k)}</b></td><td class=\"mono\">"
                                          f"{html.escape(v)}</td></tr>" for k, v in facts) + "</table>",
        "<h2>Timeline</h2>",
        "<div id=\"controls\">node <select id=\"node-filter\"><option value=\"all\">all</option></select>"
        "<button id=\"zoom-in\">zoom in</button><button id=\"zoom-out\">zoom out</button>"
        "<button id=\"pan-left\">&larr;</button><button id=\"pan-right\">&rarr;</button>"
        "<button id=\"first-wqe\">first WQE</button><button id=\"reset\">whole trace</button>"
        "<label><input type=\"checkbox\" id=\"hide-empty\" checked> hide idle lanes</label>"
        "<span class=\"note\"> drag to zoom into a range, double-click for the whole trace</span></div>",
        "<div class=\"legend\"><span><i style=\"background:#4c7bd9\"></i>WQE (doorbell to CQE)</span>"
        "<span><i style=\"background:#2e9e62\"></i>packet sent</span><span><i style=\"background:#e0952b\"></i>"
        "packet received</span><span><i style=\"background:#111\"></i>CQE</span><span><i style=\"background:#9a4dc9"
        "\"></i>EQE</span><span><i style=\"background:#d9534f\"></i>interrupt / error</span><span><i style=\""
        "background:#8a6fd1\"></i>command</span></div>",
        "<div id=\"timeline-status\" class=\"note\">(the timeline needs JavaScript)</div>",
        "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"40\"></svg>",
        "<div id=\"tip\"></div>",
        f"<h2>Errors and anomalies ({sum(summary.errors.values())} errors, {sum(summary.anomalies.values())} "
        f"anomalies)</h2>",
        "<div id=\"errors\" class=\"err-list\">" + (_html_table(errs, ["", "count", "kind", "message", "first",
                                                                        "time (us)"], numeric={1})
                                                    if errs else "<p>none</p>") + "</div>",
        "<h2>Summary</h2>", "<div id=\"summary\">", _tables_from_text(text), "</div>",
        "<script type=\"application/json\" id=\"timeline-data\">"
        + json.dumps(data, separators=(",", ":")).replace("</", "<\\/") + "</script>",
        f"<script>{JS}</script>", "</body></html>",
    ]
    with open(path, "w") as f:
        f.write("\n".join(body))
    return len(items), truncated


def cmd_export(a):
    if not a.perfetto and not a.html:
        die("export needs --perfetto FILE and/or --html FILE")
    srcs = sources_of(a)
    offsets = {s.name: 0 for s in srcs} if a.no_align else estimate_offsets(srcs)
    if a.perfetto:
        n, trunc, col = write_perfetto(a.perfetto, srcs, events_for(a, srcs), offsets, a.max_events)
        tracks = len(col.tracks)
        say(f"{a.perfetto}: {n} events on {tracks} tracks{' (truncated: --max-events)' if trunc else ''}; "
            f"open it in https://ui.perfetto.dev or chrome://tracing")
    if a.html:
        n, trunc = write_html(a.html, srcs, events_for(a, srcs), offsets, min(a.max_events, a.html_max_items),
                              Summary(), run_dir_of(srcs))
        say(f"{a.html}: self-contained report, {n} timeline items{' (truncated: --max-events)' if trunc else ''}")
    return 0


def register(ts, add_paths, add_filters):
    s = ts.add_parser("export", help="Chrome/Perfetto trace-event JSON and/or a self-contained HTML report")
    add_paths(s)
    add_filters(s)
    s.add_argument("--perfetto", metavar="FILE", help="write trace-event JSON (ui.perfetto.dev, chrome://tracing)")
    s.add_argument("--html", metavar="FILE", help="write the HTML report (offline: everything inline)")
    s.add_argument("--max-events", type=int, default=300000, help="at most this many timeline events (default "
                   "300000)")
    s.add_argument("--html-max-items", type=int, default=100000, help="at most this many items in the HTML "
                   "timeline (default 100000: a report of a few MB; the summary tables count everything)")
    s.add_argument("--no-align", action="store_true", help="keep each node's own clock")
    s.set_defaults(func=cmd_export)
