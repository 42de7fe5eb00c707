"""`./hcasim trace summary`: counts per category, event, WQE and packet
opcode, QP, CQ and EQ, and the errors and anomalies of a trace (also the
front page of the HTML report, trace_export)."""
import re
from collections import Counter, defaultdict
from pathlib import Path

from hcasim import trace_parse as tp


ERROR_CQES = ("REQ_ERR", "RESP_ERR")

# The events counted beyond their category (hca-model/trace-events).
WQE_FETCH = tp.event_key("wqe fetch")
PKT_SEND, PKT_RECV = tp.event_key("pkt send"), tp.event_key("pkt recv")
PKT_DROP, PKT_IGNORE = tp.event_key("pkt drop"), tp.event_key("pkt ignore")
PKT_DUPLICATE = tp.event_key("pkt duplicate")
PKT_NAKS = (tp.event_key("pkt nak_out"), tp.event_key("pkt rnr_nak_out"))
CQE_CQE, CQE_ARM = tp.event_key("cqe cqe"), tp.event_key("cqe arm")
EQ_EQE, EQ_DOORBELL = tp.event_key("eq eqe"), tp.event_key("eq doorbell")
IRQ_MSIX = tp.event_key("irq msix")
CMD_DONE = tp.event_key("cmd done")
QP_ERROR, QP_TRANSITION = tp.event_key("qp error"), tp.event_key("qp transition")
QP_RETRANSMIT = tp.event_key("qp retransmit")
QP_RECOVERIES = (QP_RETRANSMIT, tp.event_key("qp ack_timeout"), tp.event_key("qp nak"), tp.event_key("qp rnr_nak"))
MKEY_FAIL = tp.event_key("mkey fail")
OBJ_CREATE_QP, OBJ_DESTROY_QP = tp.event_key("obj create_qp"), tp.event_key("obj destroy_qp")
OBJ_CREATE_CQ = tp.event_key("obj create_cq")
FAULT_ARMED, FAULT_FIRED = tp.event_key("fault armed"), tp.event_key("fault fired")
FAULT_ENDS = (tp.event_key("fault retired"), tp.event_key("fault expired"), tp.event_key("fault cleared"),
              tp.event_key("fault dropped"))


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
        self.faults = {}                  # (node, id) -> dict: the injected faults
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
        key = f"{e.cat} {e.ev}"
        self.cats[(n, e.cat)] += 1
        self.events[(n, key if not e.seg else f"{e.cat}   {e.ev}")] += 1
        handler = self._BY_CATEGORY.get(e.cat)
        if handler is not None:
            handler(self, n, key, e)

    # -- one counter method per trace category: (node, "cat event", Event) ----

    def _wqe(self, n, key, e):
        if key == WQE_FETCH:
            op = e.wqe_opcode()
            self.wqe_ops[(n, op)] += 1
            q = self.qp(n, e.int("qpn"))
            q["wqes"][op] += 1
            self._touch(q, e)

    def _pkt(self, n, key, e):
        ev = e.ev
        if key == PKT_SEND or key == PKT_RECV:
            sent = key == PKT_SEND
            op = e.pkt_opcode()
            self.pkt[(n, ev, op)] += 1
            qpn = e.int("qpn") if sent else e.int("dqpn")
            if qpn is not None and qpn != 0xffffff:
                q = self.qp(n, qpn)
                q["tx" if sent else "rx"] += 1
                self._touch(q, e)
        elif key == PKT_DROP or key == PKT_IGNORE:
            self.error(f"packet {ev}", e.reason or e.body, e, anomaly=True)
        elif key == PKT_DUPLICATE:
            self.error("packet duplicate", "duplicate request (retransmitted by the peer)", e, anomaly=True)
        elif key in PKT_NAKS:
            self.error("packet " + ev, ev, e, anomaly=True)

    def _cqe(self, n, key, e):
        if key == CQE_CQE:
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
        elif key == CQE_ARM:
            self.cqs[(n, e.int("cqn"))]["arms"] += 1

    def _eq(self, n, key, e):
        if key == EQ_EQE:
            self.eqs[(n, e.int("eqn"))]["eqes"] += 1
            cqn = e.eqe_cqn()
            if cqn is not None and e.int("type") == 0:
                self.cqs[(n, cqn)]["eqes"] += 1
        elif key == EQ_DOORBELL:
            self.eqs[(n, e.int("eqn"))]["doorbells"] += 1

    def _irq(self, n, key, e):
        if key == IRQ_MSIX:
            self.eqs[(n, e.int("eqn"))]["irqs"] += 1

    def _guest_err(self, n, key, e):
        self.error("guest error", e.reason or f"{e.ev} {e.body}", e)

    def _cmd(self, n, key, e):
        if key == CMD_DONE:
            st = e.get("status", "")
            if st and not st.startswith("OK"):
                self.error("command failed", f"{e.get('opcode')} status={st}", e)

    def _qp(self, n, key, e):
        if key == QP_ERROR:
            q = self.qp(n, e.int("qpn"))
            q["state"] = "ERR"
            self.error("QP error", e.reason or e.body, e)
        elif key == QP_TRANSITION:
            q = self.qp(n, e.int("qpn"))
            q["type"] = e.get("type") or q["type"]
            if "->" in e.words:
                q["state"] = e.words[e.words.index("->") + 1]
        elif key in QP_RECOVERIES:
            if key == QP_RETRANSMIT:
                self.qp(n, e.int("qpn"))["retx"] += 1
            self.error(f"QP {e.ev}", e.ev, e, anomaly=True)

    def _mkey(self, n, key, e):
        if key == MKEY_FAIL:
            self.error("memory key", e.reason or e.body, e)

    def _obj(self, n, key, e):
        if key == OBJ_CREATE_QP:
            q = self.qp(n, e.int("qpn"))
            q["type"] = e.get("type")
            q["state"] = "RST"
        elif key == OBJ_DESTROY_QP:
            self.qp(n, e.int("qpn"))["state"] = "destroyed"
        elif key == OBJ_CREATE_CQ:
            self.cqs[(n, e.int("cqn"))]["eqn"] = e.int("eqn") or 0

    def _fault(self, n, key, e):
        fid = e.int("id")
        if fid is None:
            return
        f = self.faults.setdefault((n, fid), {"kind": e.get("kind", "?"), "spec": "", "armed": None, "fired": 0,
                                             "first": None, "last": None, "end": ""})
        if key == FAULT_ARMED:
            f["armed"] = e
            f["spec"] = e.words[-1] if e.words else ""
        elif key == FAULT_FIRED:
            f["fired"] += 1
            f["first"] = f["first"] or e
            f["last"] = e
        elif key in FAULT_ENDS:
            f["end"] = e.ev

    _BY_CATEGORY = {"wqe": _wqe, "pkt": _pkt, "cqe": _cqe, "eq": _eq, "irq": _irq, "guest_err": _guest_err,
                    "cmd": _cmd, "qp": _qp, "mkey": _mkey, "obj": _obj, "fault": _fault}

    # -- the report ------------------------------------------------------------

    def render(self, srcs):
        nodes = [s.name for s in srcs]
        L = self.sources(srcs)
        L.extend(self.per_node_tables(nodes))
        L.extend(self.qp_table())
        L.extend(self.cq_eq_tables())
        L.extend(self.fault_lines())
        L.extend(self.error_lines())
        return L

    @staticmethod
    def sources(srcs):
        """One line per node: its trace files, events, sequence numbers and time span."""
        L = []
        for s in srcs:
            st = s.stats
            span = (f"device time {tp.fmt_us(st.first_t)} .. {tp.fmt_us(st.last_t)} us"
                    if st.first_t is not None else "no events")
            L.append(f"{s.name}: {', '.join(Path(f).name for f in st.files)} ({s.size() / 1e6:.1f} MB), "
                     f"{st.events} events, seq {st.first_seq}..{st.last_seq}, {span}")
            for note in st.notes():
                L.append(f"  note: {note}")
        L.append("")
        return L

    def per_node_tables(self, nodes):
        """Events per category, WQEs per opcode, CQEs per kind, packets per opcode: a column per node."""
        L = []
        multi = len(nodes) > 1

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
        return L

    def qp_table(self):
        rows = []
        for (n, qpn), q in sorted(self.qps.items(), key=lambda x: (x[0][0], x[0][1] or 0)):
            if qpn is None:
                continue
            wq = ", ".join(f"{op} {k}" for op, k in q["wqes"].most_common(4))
            special = {0: "QP0 (SMI)", 1: "QP1 (GSI)"}.get(qpn, "?")
            rows.append([n, f"0x{qpn:x}", q["type"] or special, q["state"] or "-", sum(q["wqes"].values()), q["tx"],
                         q["rx"], q["req"], q["resp"], q["err"], q["retx"], wq])
        if not rows:
            return []
        L = ["QPs (WQEs fetched, packets sent/received, CQEs requester/responder/error)"]
        L.extend("  " + x for x in table(rows, ["node", "qpn", "type", "state", "WQEs", "pkt tx", "pkt rx",
                                                 "req CQEs", "resp CQEs", "err CQEs", "retransmits",
                                                 "opcodes"], right={4, 5, 6, 7, 8, 9, 10}))
        L.append("")
        return L

    def cq_eq_tables(self):
        L = []
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
        return L

    def fault_lines(self):
        """The injected faults (docs/FAULTS.md): what was armed, how often it
        fired and where first, so the errors below can be told from bugs."""
        if not self.faults:
            return []
        rows = []
        for (n, fid), f in sorted(self.faults.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            first = f["first"]
            rows.append([n, fid, f["kind"], f["fired"], f"seq {first.seq}" if first else "-",
                         f["end"] or ("fired" if f["fired"] else "armed" if f["armed"] else "?"), f["spec"]])
        L = [f"injected faults: {len(rows)}, fired {sum(f['fired'] for f in self.faults.values())} times"]
        L.extend("  " + x for x in table(rows, ["node", "id", "kind", "fired", "first fired", "state", "spec"],
                                         right={1, 3}))
        L.append("")
        return L

    def error_lines(self):
        """Errors, then anomalies: the 25 commonest shapes of each with their first occurrence."""
        L = []
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
