"""./hcasim trace follow: one work request through its whole life, on both
nodes, with the latency of each step:

  doorbell write -> SQ doorbell -> doorbell record -> WQE fetch -> packet(s)
  sent -> [wire] -> packet(s) received by the peer -> the peer's receive CQE
  -> its EQE -> its interrupt -> (RC) the peer's ACK / read response ->
  received -> the requester's CQE -> its EQE -> its interrupt

Events are tied together by the ids the device prints: a packet keeps the
id its sender gave it (pkt send/recv id=, the fabric capture's comment),
a CQE names the packet that completed it (pkt=), a sent packet its WQE
(wqe=), a completion EQE its CQ (cqn=). Each node's times are its own
QEMU virtual clock; the offset between two nodes is estimated from the
packets that crossed in both directions near the work request (the
minimum one-way delays either way, NTP style), and the peer's steps are
shown on the requester's clock.
"""
import re
import shutil
import subprocess
from dataclasses import dataclass

from hcasim import pcapng, trace_wqe
from hcasim import trace_parse as tp
from hcasim.common import die
from hcasim.trace_select import node_and_seq, parse_int, run_dir_of, sources_of, split_args

# Raw-line filters (checked against hca-model/trace-events): the packets
# sent, the UD datagram segments, and what follows a WQE (packets, CQEs,
# EQEs, interrupts, QP events).
_SEND_MARK, _DATAGRAM_MARK = tp.line_marks("pkt send", "wqe datagram")
_RELEVANT = tp.line_marks("pkt", "cqe", "eq eqe", "eq doorbell", "irq msix", "qp")
ACKNOWLEDGE, SEND_ONLY = tp.table_names("iba_opcode", "ACKNOWLEDGE", "SEND_ONLY")
WIRE_AUTO_BYTES = 64 << 20  # read the capture unasked when it is smaller than this
SEC = 1_000_000_000


@dataclass
class Step:
    t: int            # on the requester's clock (ns)
    order: int
    node: str
    seq: int
    t_raw: int
    label: str
    detail: str
    wire: str = ""


def _psn_in(psn, first, last):
    return psn is not None and first is not None and tp.psn_diff(psn, first) >= 0 and tp.psn_diff(last, psn) >= 0


def window(source, t_from, t_to, keep):
    """Events of source within [t_from, t_to] whose line passes keep."""
    out = []
    for e in tp.find_time(source, max(0, t_from)):
        if e.t > t_to:
            break
        if keep(e.line):
            out.append(e)
    return out


def _relevant(line):
    return any(k in line for k in _RELEVANT)


def clock_offset(evs_a, evs_b):
    """(offset of b's clock minus a's in ns, one-way latency ns, pairs a->b,
    pairs b->a) from packets that crossed between a and b; offset None when
    packets did not cross both ways."""
    def index(evs):
        snd, rcv = {}, {}
        for e in evs:
            if e.is_("pkt send", "pkt recv"):
                i = e.int("id")
                if i is not None:
                    (snd if e.is_("pkt send") else rcv).setdefault(i, e.t)
        return snd, rcv
    sa, ra = index(evs_a)
    sb, rb = index(evs_b)
    ab = [rb[i] - t for i, t in sa.items() if i in rb]
    ba = [ra[i] - t for i, t in sb.items() if i in ra]
    if not ab or not ba:
        return None, None, len(ab), len(ba)
    d1, d2 = min(ab), min(ba)
    return (d1 - d2) // 2, (d1 + d2) // 2, len(ab), len(ba)


def find_ping(srcs, nth, run_dir):
    """(source, pkt send Event) of the nth ICMP echo request: found in the
    fabric capture by tshark when there is one (exact), else the nth
    unicast IPoIB datagram (Q_Key 0xb1b) of at least 88 payload bytes
    (IPv4 + ICMP echo with ping's default 56 data bytes + the 4-byte IPoIB
    header), which is what a default ping sends."""
    cap = pcapng.capture_of(run_dir)
    how = None
    pid = None
    if cap is not None and shutil.which("tshark"):
        # (-c counts the records read, not those shown: stop reading instead.)
        p = subprocess.Popen(["tshark", "-r", str(cap), "-Y", "icmp.type == 8", "-T", "fields", "-e",
                              "frame.comment"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ids = []
        for line in p.stdout:
            if line.strip():
                ids.append(pcapng.comment_id(line.strip()))
                if len(ids) >= nth:
                    break
        p.kill()
        p.wait()
        if len(ids) >= nth and ids[nth - 1] is not None:
            pid = ids[nth - 1]
            how = f"ICMP echo request #{nth} in {cap.name} (found by tshark)"
    if pid is not None:
        key = f"id=0x{pid:x} "
        for s in srcs:
            for e in s.events(keep=lambda line: _SEND_MARK in line and key in line, stats=tp.ParseStats()):
                return s, e, how
    # The heuristic: UD SEND_ONLY from an IPoIB QP, unicast, >= 122 bytes.
    best = []
    for s in srcs:
        qk = {}
        k = 0
        for e in s.events(keep=lambda line: _DATAGRAM_MARK in line or _SEND_MARK in line, stats=tp.ParseStats()):
            if e.is_("wqe datagram"):
                qk[e.int("qpn")] = e.int("qkey")
                continue
            if not e.is_("pkt send") or e.pkt_opcode() != SEND_ONLY:
                continue
            q = e.int("qpn")
            if qk.get(q) != 0xb1b or (e.int("dlid") or 0) >= 0xc000 or (e.int("len") or 0) < 122:
                continue
            k += 1
            best.append((e.t, s, e))
            if k >= nth:
                break
    if not best:
        return None, None, None
    best.sort(key=lambda x: x[0])
    if len(best) < nth:
        return None, None, None
    _, s, e = best[nth - 1]
    return s, e, (f"unicast IPoIB datagram #{nth} of >= 88 payload bytes (no capture/tshark to find the ICMP "
                  f"echo request itself)")


def wqe_of_packet(source, pkt):
    """The fetch Event of the WQE that sent pkt (its wqe= index, same QP,
    the last fetch before it)."""
    q, i = pkt.int("qpn"), pkt.int("wqe")
    if q is None:
        return None
    last = None
    for e in tp.find_seq(source, max(1, pkt.seq - 5000)):
        if e.seq >= pkt.seq:
            break
        # (Traces from before packets named their WQE: the QP's last fetch.)
        if e.is_("wqe fetch") and e.int("qpn") == q and (i is None or e.int("index") == i):
            last = e
    return last


class Follow:
    def __init__(self, srcs, a_src, w, window_ns):
        self.srcs = srcs
        self.a = a_src
        self.w = w
        self.window = window_ns
        self.steps = []
        self.notes = []
        self.order = 0
        self.offsets = {}   # node -> (offset ns, latency ns, pairs)

    def add(self, node, e, label, detail, t_adj=None):
        self.order += 1
        self.steps.append(Step(e.t if t_adj is None else t_adj, self.order, node, e.seq, e.t, label, detail))

    def run(self):
        """The requester's steps, then each peer that received its packets."""
        self.before_fetch()
        evs_a = [e for e in window(self.a, self.w.fetch.t, self.w.fetch.t + self.window, _relevant)
                 if e.seq >= self.w.fetch.seq]
        sent, cqe = self.sent_and_cqe(evs_a)
        resp_ids = self.requester(evs_a, sent, cqe)
        self.peers(evs_a, sent, resp_ids)

    def before_fetch(self):
        """Doorbell write, BlueFlame copy, SQ doorbell, doorbell record, waits, and the fetch."""
        w, name, q = self.w, self.a.name, self.w.qpn
        if w.doorbell_write is not None:
            d = w.doorbell_write
            self.add(name, d, "doorbell write", f"UAR {d.get('uar')} +{d.get('offset')} {d.get('size')} bytes "
                     f"data={d.get('data')}")
        if w.blueflame is not None:
            b = w.blueflame
            self.add(name, b, "BlueFlame copy", f"{b.get('bytes')} bytes of the WQE written through UAR "
                     f"{b.get('uar')} +{b.get('offset')}")
        if w.doorbell is not None:
            d = w.doorbell
            self.add(name, d, "SQ doorbell", f"qpn=0x{q:x} names WQE {d.get('wqe_index')} {d.get('opcode')} "
                     f"ds={d.get('ds')}")
        if w.dbr is not None:
            d = w.dbr
            self.add(name, d, "doorbell record", f"sq_pi={d.get('sq_pi')} sq_ci={d.get('sq_ci')} "
                     f"({d.get('posted')} WQEBBs posted)")
        for b in w.blocked:
            self.add(name, b, "blocked", b.body)
        segs, _ = trace_wqe.layout(w)
        self.add(name, w.fetch, "WQE fetch", "; ".join(_seg_summary(s) for s in segs))

    def sent_and_cqe(self, evs_a):
        """The WQE's packets and its send CQE (or the later CQE that completed it)."""
        f, q, idx = self.w.fetch, self.w.qpn, self.w.index
        sent = []
        next_fetch = None
        for e in evs_a:
            if e.is_("pkt send") and e.int("qpn") == q and (
                    e.int("wqe") == idx or (e.get("wqe") is None and next_fetch is None)):
                # (No wqe= in traces from before packets named their WQE:
                # the QP's packets up to its next fetch.)
                sent.append(e)
            elif e.is_("cqe cqe") and e.int("qpn") == q and e.cqe_kind() in ("REQ", "REQ_ERR"):
                if e.int("wqe_counter") == idx:
                    return sent, e
                ahead = (e.int("wqe_counter", idx) - idx) & 0xffff
                if sent and 0 < ahead < 0x8000:
                    self.notes.append(f"no CQE of its own (ce={f.get('ce')}, unsignaled): completed with WQE "
                                      f"{e.get('wqe_counter')}'s CQE (seq {e.seq})")
                    return sent, e
            elif e.is_("wqe fetch") and e.int("qpn") == q and e.seq > f.seq:
                next_fetch = e
        return sent, None

    def requester(self, evs_a, sent, cqe):
        """Packets sent, responses and ACKs back, QP events, the send CQE and
        its event path; returns the ids of the responses."""
        name, f, q = self.a.name, self.w.fetch, self.w.qpn
        psns = [e.int("psn") for e in sent]
        first_psn, last_psn = (psns[0], psns[-1]) if psns else (None, None)
        resp_ids = {cqe.int("pkt")} if cqe is not None and cqe.int("pkt") is not None else set()
        seen_psn = set()
        for e in sent:
            retx = e.int("psn") in seen_psn
            seen_psn.add(e.int("psn"))
            self.add(name, e, "packet resent" if retx else "packet sent",
                     f"id={e.get('id')} {e.pkt_opcode()} psn={e.get('psn')} len={e.get('len')} "
                     f"dlid={e.get('dlid')} dqpn={e.get('dqpn')}")
        stop = cqe.seq if cqe is not None else None
        for e in evs_a:
            if stop is not None and e.seq > stop:
                break
            if e.seq <= f.seq:
                continue
            if e.is_("pkt recv") and e.int("dqpn") == q and e.pkt_opcode() in tp.RESPONSE_OPCODES \
                    and (e.int("id") in resp_ids or _psn_in(e.int("psn"), first_psn, last_psn)
                         or (e.pkt_opcode() == ACKNOWLEDGE and sent and e.seq > sent[-1].seq
                             and tp.psn_diff(e.int("psn"), last_psn) >= 0)):
                resp_ids.add(e.int("id"))
                self.add(name, e, "response received", f"id={e.get('id')} {e.pkt_opcode()} psn={e.get('psn')}")
            elif e.is_("pkt ack") and e.int("qpn") == q and e.int("id") in resp_ids:
                self.add(name, e, "ACK processed", f"psn={e.get('psn')} msn={e.get('msn')}")
            elif e.is_("qp ack_timeout", "qp retransmit", "qp nak", "qp rnr_nak", "qp requester", "qp error") \
                    and e.int("qpn") == q:
                self.add(name, e, f"QP {e.ev}", e.body)
            elif e.is_("pkt drop", "pkt ignore") and e.int("id") in resp_ids:
                self.add(name, e, f"response {e.ev}", e.reason)
        if cqe is not None:
            self.add(name, cqe, "send CQE" if cqe.cqe_kind() == "REQ" else "send CQE (error)",
                     f"cqn={cqe.get('cqn')} {cqe.cqe_kind()} {cqe.get('opcode')} wqe_counter={cqe.get('wqe_counter')}"
                     + (f" byte_cnt={cqe.get('byte_cnt')}" if cqe.get('byte_cnt') else "")
                     + (f" syndrome={cqe.get('syndrome')}" if cqe.get('syndrome') else "")
                     + (f" (completed by packet {cqe.get('pkt')})" if cqe.get('pkt') else ""))
            self.event_path(name, evs_a, cqe)
        else:
            self.notes.append(f"no send CQE within {tp.fmt_us(self.window)} us of the fetch "
                              f"(unsignaled, still outstanding, or past the end of the trace)")
        return resp_ids

    def peers(self, evs_a, sent, resp_ids):
        """Every other node that received one of the WQE's packets, on this node's clock."""
        ids = {e.int("id") for e in sent}
        if not ids:
            return
        a, f = self.a, self.w.fetch
        t0 = sent[0].t
        for b in self.srcs:
            if b is a:
                continue
            lo, hi = t0 - SEC, t0 + self.window + SEC
            evs_b = window(b, lo, hi, _relevant)
            if not any(e.is_("pkt recv") and e.int("id") in ids for e in evs_b):
                continue
            off, lat, n1, n2 = clock_offset(evs_a + window(a, lo, f.t, _relevant), evs_b)
            self.offsets[b.name] = (off, lat, n1, n2)
            adj = (lambda t: t - off) if off is not None else (lambda t: t)
            self.peer(b, evs_b, ids, resp_ids, adj, self.w.qpn)

    def event_path(self, node, evs, cqe, adj=lambda t: t):
        """The EQE of cqe's CQ after it and the interrupt of that EQ."""
        cqn = cqe.int("cqn")
        eqe = None
        for e in evs:
            if e.seq <= cqe.seq:
                continue
            if e.is_("eq eqe") and e.eqe_cqn() == cqn and e.int("type") == 0:
                eqe = e
                break
            if e.is_("cqe arm") and e.int("cqn") == cqn and e.int("pending") == 0:
                self.add(node, e, "CQ armed", f"cqn={e.get('cqn')} ci={e.get('ci')} pending=0: the driver polled "
                         f"this CQE without an event (the CQ was not armed when it was written)", adj(e.t))
                return
        if eqe is None:
            self.notes.append(f"{node}: no EQE for cqn={cqe.get('cqn')} in the window (CQ not armed: polled)")
            return
        self.add(node, eqe, "EQE", f"eqn={eqe.get('eqn')} index={eqe.get('index')} cqn=0x{eqe.eqe_cqn():x}",
                 adj(eqe.t))
        eqn = eqe.int("eqn")
        for e in evs:
            if e.seq <= eqe.seq:
                continue
            if e.is_("irq msix") and e.int("eqn") == eqn:
                self.add(node, e, "interrupt", f"MSI-X vector={e.get('vector')} eqn={eqn}", adj(e.t))
                return
        self.notes.append(f"{node}: no interrupt for eqn={eqn} in the window (EQ not re-armed)")

    def peer(self, b, evs, ids, resp_ids, adj, rq):
        n = b.name
        got = []
        last_recv = None
        qb = None
        for e in evs:
            if e.is_("pkt recv") and e.int("id") in ids:
                got.append(e.int("id"))
                last_recv = e
                qb = e.int("dqpn")
                self.add(n, e, "packet received", f"id={e.get('id')} {e.pkt_opcode()} psn={e.get('psn')} "
                         f"dqpn={e.get('dqpn')}", adj(e.t))
            elif e.is_("pkt drop", "pkt ignore") and e.int("id") in ids:
                self.add(n, e, f"packet {e.ev}ped" if e.is_("pkt drop") else "packet ignored", e.reason, adj(e.t))
            elif e.is_("pkt duplicate") and qb is not None and e.int("qpn") == qb:
                self.add(n, e, "duplicate", e.body, adj(e.t))
        if last_recv is None:
            return
        cqe = None
        for e in evs:
            if e.seq < last_recv.seq - 50:
                continue
            if e.is_("cqe cqe") and (e.int("pkt") in ids or (
                    # (CQEs from before they named their packet: the QP's
                    # next responder CQE.)
                    e.get("pkt") is None and 0 < e.seq - last_recv.seq < 20 and e.int("qpn") == qb
                    and (e.cqe_kind() or "").startswith("RESP"))):
                cqe = e
                self.add(n, e, "receive CQE" if not e.cqe_kind().endswith("ERR") else "receive CQE (error)",
                         f"cqn={e.get('cqn')} qpn={e.get('qpn')} {e.cqe_kind()} wqe_counter={e.get('wqe_counter')} "
                         f"byte_cnt={e.get('byte_cnt')}", adj(e.t))
                break
        if cqe is not None:
            self.event_path(n, evs, cqe, adj)
        # Responses the peer sent (ACK, read response, atomic ACK).
        for e in evs:
            if e.seq <= last_recv.seq:
                continue
            if e.is_("pkt ack_out", "pkt nak_out", "pkt rnr_nak_out") and e.int("qpn") == qb:
                if resp_ids and not any(x.is_("pkt send") and x.int("id") in resp_ids
                                        for x in evs if x.seq > e.seq):
                    continue
                self.add(n, e, "ACK scheduled" if e.is_("pkt ack_out") else e.ev.replace("_", " "),
                         f"psn={e.get('psn')} syndrome={e.get('syndrome')} msn={e.get('msn')}", adj(e.t))
            elif e.is_("pkt send") and e.int("id") in resp_ids:
                self.add(n, e, "response sent", f"id={e.get('id')} {e.pkt_opcode()} psn={e.get('psn')} "
                         f"dqpn={e.get('dqpn')}", adj(e.t))
                if e.pkt_opcode() in tp.LAST_RESPONSE_OPCODES:
                    break

    def wire(self, run_dir, force):
        cap = pcapng.capture_of(run_dir)
        if cap is None:
            return None
        if not force and cap.stat().st_size > WIRE_AUTO_BYTES:
            return f"{cap.name} is {cap.stat().st_size >> 20} MB: --wire to look the packets up in it"
        ids = {}
        for s in self.steps:
            if s.label in ("packet sent", "packet resent", "response sent"):
                m = re.search(r"id=(0x[0-9a-f]+)", s.detail)
                if m:
                    ids.setdefault(int(m.group(1), 16), []).append(s)
        found, headers = pcapng.find(cap, list(ids))
        recs = [r for i in ids for r in found.get(i, [])]
        lines = pcapng.tshark_lines(headers, recs) or [""] * len(recs)
        for r, line in zip(recs, lines):
            for s in ids.get(r.packet_id, []):
                s.wire = f"{cap.name} frame {r.frame} [{r.comment.partition(' ')[2]}] {line}".rstrip()
        return None

    def render(self, how):
        w = self.w
        L = [f"follow: {self.a.name} qpn=0x{w.qpn:x} ({w.qp_type or '?'}) WQE 0x{w.index:x} {w.opcode}"
             f" (fetch seq {w.fetch.seq}){'  — ' + how if how else ''}"]
        L.extend(self.clock_lines())
        L.append("")
        steps = sorted(self.steps, key=lambda s: (s.t, s.order))
        L.extend(self.table_lines(steps))
        if self.notes:
            L.append("")
            L.extend(f"note: {n}" for n in self.notes)
        L.append("")
        L.extend(self.headline(steps))
        return L

    def clock_lines(self):
        """How each peer's clock was put on this node's."""
        me = self.a.name
        for node, (off, lat, n1, n2) in self.offsets.items():
            if off is None:
                yield (f"clock: {node}'s times are its own (packets crossed only one way near this WQE: "
                       f"{n1} {me}->{node}, {n2} back); deltas across nodes are not exact")
            else:
                yield (f"clock: {node} = {me} {'+' if off >= 0 else '-'} {tp.fmt_us(abs(off))} us "
                       f"(estimated from {n1} + {n2} packets crossing both ways); one-way delay "
                       f"{tp.fmt_us(lat)} us; {node}'s steps are shown on {me}'s clock")

    @staticmethod
    def table_lines(steps):
        """The steps as a table, with the wire line under a step that has one."""
        t0 = steps[0].t if steps else 0
        rows = []
        prev = None
        for i, s in enumerate(steps, 1):
            d = "" if prev is None else tp.fmt_delta(s.t - prev)
            raw = "" if s.t == s.t_raw else f" ({s.node} clock {tp.fmt_us(s.t_raw)})"
            rows.append([str(i), s.label, s.node, str(s.seq), tp.fmt_us(s.t), d, tp.fmt_us(s.t - t0), s.detail + raw])
            prev = s.t
        hdr = ["#", "step", "node", "seq", "time (us)", "+step", "+total", "details"]
        widths = [max(len(hdr[k]), *(len(r[k]) for r in rows)) if rows else len(hdr[k]) for k in range(7)]
        right = {0, 3, 4, 5, 6}

        def fmt(r):
            return "  ".join((c.rjust(widths[k]) if k in right else c.ljust(widths[k])) for k, c in
                             enumerate(r[:7])) + "  " + r[7]
        L = [fmt(hdr), fmt(["-" * x for x in widths] + ["-------"])]
        for r, s in zip(rows, steps):
            L.append(fmt(r).rstrip())
            if s.wire:
                L.append(" " * (sum(widths) + 14) + "wire: " + s.wire)
        return L

    def headline(self, steps):
        """Latencies from the first step to the CQEs and interrupts of both ends."""
        first = steps[0] if steps else None

        def at(label, node=None):
            for s in steps:
                if s.label == label and (node is None or s.node == node):
                    return s
            return None
        parts = []
        me = self.a.name
        peer = next((s.node for s in steps if s.node != me), None)
        for label, node, name in (("packet sent", me, "first packet sent"), ("send CQE", me, "send CQE"),
                                  ("interrupt", me, f"{me}'s interrupt"),
                                  ("receive CQE", peer, f"{peer}'s receive CQE"),
                                  ("interrupt", peer, f"{peer}'s interrupt")):
            s = at(label, node) if node else None
            if s is not None and first is not None:
                parts.append(f"{name} +{tp.fmt_us(s.t - first.t)} us")
        return [f"from the {first.label}: " + ", ".join(parts)] if parts else []


def _seg_summary(s):
    keep = {"ctrl": ("opcode", "ds", "ce"), "datagram": ("dlid", "dqpn", "qkey"), "data": ("byte_count", "lkey"),
            "inline": ("byte_count",), "raddr": ("raddr", "rkey"), "atomic": ("swap_add", "compare"),
            "umr_ctrl": ("mkey", "flags"), "mkey_ctx": ("pd", "start", "len"), "xrc": ("xrc_srqn",)}
    names = keep.get(s.kind)
    fields = [x for x in s.fields if names is None or x.name in names]
    return s.kind + " " + " ".join(f"{x.name}={x.value}" for x in fields)


def select(a, srcs, run_dir):
    """(source, fetch seq, how) of the WQE the options name."""
    if a.first_ping is not None:
        s, pkt, how = find_ping(srcs, a.first_ping, run_dir)
        if pkt is None:
            die("no ping in the trace (an ICMP echo request in the capture, or a unicast IPoIB datagram)")
        f = wqe_of_packet(s, pkt)
        if f is None:
            die(f"{s.name}: the WQE of packet {pkt.get('id')} (seq {pkt.seq}) is not in the trace")
        return s, f.seq, how + f"; packet {pkt.get('id')}"
    if a.pkt is not None:
        pid = parse_int(a.pkt)
        key = f"id=0x{pid:x} "
        for s in srcs:
            for e in s.events(keep=lambda line: _SEND_MARK in line and key in line, stats=tp.ParseStats()):
                f = wqe_of_packet(s, e)
                if f is None:
                    die(f"packet 0x{pid:x} (seq {e.seq}) was not sent by a WQE (an ACK or a response?)")
                return s, f.seq, f"the WQE that sent packet 0x{pid:x}"
        die(f"no `pkt send id=0x{pid:x}` in the traces")
    if a.target:
        s, seq = node_and_seq(a.target, srcs)
        return s, seq, ""
    if a.qpn is None or a.index is None:
        die("follow SEQ (with --node), --qpn Q --index I (with --node), --pkt ID, or --first-ping [N]")
    q, i = parse_int(a.qpn), parse_int(a.index)
    found = trace_wqe.nth_wqe(srcs, q, i, a.nth)
    if found is None:
        die(f"no WQE 0x{i:x} of qpn=0x{q:x} (--nth {a.nth}) in {', '.join(s.name for s in srcs)}")
    return found[0], found[1], ""


def cmd_follow(a):
    a.target = split_args(a, "work request")
    node = a.node
    a.node = None
    srcs = sources_of(a)  # all nodes: the peer is needed
    if node is not None:
        want = node if str(node).startswith("node") else f"node{node}"
        mine = [s for s in srcs if s.name == want]
        if not mine:
            die(f"no trace of {want}")
        if a.target and ":" not in a.target:
            a.target = f"{want}:{a.target}"
        pick = mine
    else:
        pick = srcs
    run_dir = run_dir_of(srcs)
    s, seq, how = select(a, pick, run_dir)
    w = trace_wqe.collect(s, seq)
    if w is None:
        die(f"{s.name} seq {seq} is not a WQE")
    fl = Follow(srcs, s, w, tp.parse_time(a.window))
    fl.run()
    if not a.no_wire:
        msg = fl.wire(run_dir, a.wire)
        if msg:
            fl.notes.append(msg)
    print("\n".join(fl.render(how)))
    return 0


def register(ts, add_paths):
    s = ts.add_parser("follow", help="one work request through both nodes, step by step with latencies")
    trace_wqe.add_selector_args(s, "the seq of the WQE's fetch line", "the requester's node (0, 1, ...)")
    s.add_argument("--pkt", help="the WQE that sent this packet id (id=0x... of a pkt send line)")
    s.add_argument("--first-ping", nargs="?", type=int, const=1, metavar="N",
                   help="the WQE that sent the (Nth) ICMP echo request: ping over IPoIB")
    s.add_argument("--window", default="2s", help="how far after the fetch to look (device time, default 2s)")
    s.add_argument("--wire", action="store_true", help="look the packets up in the fabric capture even when it "
                   "is large (by default only captures under 64 MB are read)")
    s.add_argument("--no-wire", action="store_true", help="do not read the fabric capture")
    s.set_defaults(func=cmd_follow)
