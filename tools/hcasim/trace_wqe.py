"""One send WQE out of a device trace, decoded like a disassembler: the
segments at their offsets in the WQE, every field with its meaning.

The device traces a WQE as a `wqe fetch` line (the control segment) and
one indented line per segment after it (docs/TRACING.md), e.g.

    33717 37248186.438 wqe fetch qpn=0x104 index=0x10 opcode=SEND(0xa) opmod=0x0 ds=5 fence=0 ce=2 se=0 imm=0x0
    33718 37248187.800 wqe   data qpn=0x104 lkey=0x17eeed addr=0x1cec81c len=88
    33719 37248194.981 wqe   datagram qpn=0x104 dlid=3 dqpn=0x104 qkey=0xb1b sl=0 grh=false

The segment lines come in the order the device parses them, not always the
order they sit in memory (a UD WQE's datagram segment is traced after its
gather list); the layout here is the PRM's (mlx5 send WQE: control
segment, then the transport segments of the QP type and opcode, then data
pointers or inline data), and the decode checks that the segments add up to
the DS count of the control segment. What the trace cannot say (bytes of a
WQE written by a plain doorbell, not BlueFlame) is shown as "-", never
guessed. A field the decoder does not know is printed as "unknown": the
tests require none for every WQE a pingpong/perftest run posts.
"""
from dataclasses import dataclass, field

from hcasim import trace_parse as tp

# mlx5 WQE opcodes as the model names them (hca-model/trace-events).
WQE_OPCODES = tp.SCHEMA.names["wqe_opcode"]
# The opcodes whose WQE has a remote address segment (RDMA_*), and those
# with an atomic segment after it (ATOMIC_*).
RDMA_OPS = frozenset(n for n in WQE_OPCODES.values() if n.startswith("RDMA_"))
ATOMIC_OPS = frozenset(n for n in WQE_OPCODES.values() if n.startswith("ATOMIC_"))
# The opcodes a UD QP sends, with a datagram segment.
UD_OPS = frozenset(tp.table_names("wqe_opcode", "SEND", "SEND_IMM", "LSO"))

FENCE_MODES = {0: "no fence", 1: "initiator small fence", 2: "fence (wait for outstanding reads/atomics)",
               3: "strong ordering", 4: "small fence + fence"}
CE_MODES = {0: "CQE only on error (unsignaled)", 1: "CQE on the first error", 2: "CQE always (signaled)",
            3: "CQE and EQE always"}

# The events of a WQE's segments (hca-model/trace-events); its other
# indented line is the summary of a connected QP's message (wqe remote).
WQE_FETCH = tp.event_key("wqe fetch")
WQE_DATA, WQE_INLINE = tp.event_key("wqe data"), tp.event_key("wqe inline")
WQE_DATAGRAM, WQE_ETH = tp.event_key("wqe datagram"), tp.event_key("wqe eth")
WQE_ATOMIC, WQE_UMR, WQE_MKEY = tp.event_key("wqe atomic"), tp.event_key("wqe umr"), tp.event_key("wqe mkey")
SEGMENT_EVENTS = (WQE_DATA, WQE_INLINE, WQE_DATAGRAM, WQE_ETH, WQE_ATOMIC, WQE_UMR, WQE_MKEY)
GATHER_EVENTS = (WQE_DATA, WQE_INLINE)
# The lines that may belong to the WQE fetched next (and the uar write that
# rang its doorbell).
UAR_WRITE, UAR_BLUEFLAME = tp.event_key("uar write"), tp.event_key("uar blueflame")
UAR_SQ_DOORBELL = tp.event_key("uar sq_doorbell")
WQE_DBR, WQE_BLUEFLAME = tp.event_key("wqe dbr"), tp.event_key("wqe blueflame")
WQE_BLOCKED = tp.event_key("wqe blocked")
OBJ_CREATE_QP = tp.event_key("obj create_qp")
_NOTED = (UAR_WRITE, UAR_SQ_DOORBELL, UAR_BLUEFLAME, WQE_FETCH, WQE_DBR, WQE_BLUEFLAME, WQE_BLOCKED, OBJ_CREATE_QP)
_NOTED_CATEGORIES = frozenset(k.partition(" ")[0] for k in _NOTED)
_CREATE_QP_MARK, = tp.line_marks(OBJ_CREATE_QP)

CONNECTED_TYPES = {"RC", "UC", "XRC"}
UD_TYPES = {"UD", "QP0", "QP1", "GSI", "SMI"}

UNKNOWN = "unknown"


@dataclass
class Field:
    name: str
    value: str
    meaning: str = ""


@dataclass
class Segment:
    offset: int
    size: int
    kind: str            # ctrl, datagram, eth_pad, eth, xrc, raddr, atomic, data, inline, umr_ctrl, mkey_ctx, xlt, unknown
    fields: list
    event: object = None  # the trace line it comes from
    raw: bytes = None     # the segment's bytes when the trace has them (BlueFlame)
    note: str = ""


@dataclass
class Wqe:
    node: str
    fetch: object                              # the `wqe fetch` Event
    segs: list = field(default_factory=list)   # indented segment Events, in trace order
    summary: object = None                     # RC/UC/XRC "  OPCODE qpn= index= len= ..." line
    doorbell: object = None                    # `uar sq_doorbell` for this QP before the fetch
    doorbell_write: object = None              # the `uar write` that rang it
    dbr: object = None                         # `wqe dbr` read before the fetch
    blueflame: object = None                   # `uar blueflame` carrying this WQE's bytes
    bf_exec: object = None                     # `wqe blueflame ...: executing`
    blocked: list = field(default_factory=list)
    after: list = field(default_factory=list)  # packets sent for it, its CQE
    qp_type: str = None
    qp_type_from: str = ""                     # "create_qp seq N" or "inferred from the segments"
    qp_create: object = None

    @property
    def qpn(self):
        return self.fetch.int("qpn")

    @property
    def index(self):
        return self.fetch.int("index")

    @property
    def opcode(self):
        return tp.vname(self.fetch.get("opcode"))

    @property
    def raw(self):
        """The WQE bytes from a BlueFlame copy, if there is one."""
        if self.blueflame is None:
            return None
        try:
            return bytes.fromhex(self.blueflame.get("data", ""))
        except ValueError:
            return None


def qp_types(source, qpns, before_seq=None):
    """{qpn: create_qp Event} of the last create_qp of each QP before
    before_seq (a prefiltered scan of the trace)."""
    want = {f"{_CREATE_QP_MARK}qpn=0x{q:x} " for q in qpns}
    out = {}
    for e in source.events(keep=lambda line: _CREATE_QP_MARK in line and any(w in line for w in want),
                           stats=tp.ParseStats()):
        if before_seq is not None and e.seq > before_seq:
            break
        out[e.int("qpn")] = e
    return out


class WqeReader:
    """Turns a stream of events (one node, in order) into Wqe objects, each
    complete with what preceded it (doorbell, doorbell record, BlueFlame
    copy) and its segment lines; packets and CQEs that follow are not
    attached here (collect() does that for one WQE)."""

    def __init__(self, node):
        self.node = node
        self.doorbell = {}     # qpn -> last sq_doorbell
        self.dbr = {}          # qpn -> last wqe dbr
        self.bf = {}           # (qpn, index) -> uar blueflame
        self.bf_exec = {}      # (qpn, index) -> wqe blueflame
        self.blocked = {}      # (qpn, index) -> [wqe blocked]
        self.uar_write = {}    # (uar, offset) -> last uar write
        self.db_write = {}     # sq_doorbell seq -> the uar write before it
        self.create = {}       # qpn -> create_qp
        self.cur = None

    def feed(self, e):
        """Returns a finished Wqe when e ends one, else None."""
        cur = self.cur
        if cur is not None:
            if e.seg and e.cat == "wqe" and e.int("qpn") == cur.qpn:
                if e.key in SEGMENT_EVENTS:
                    cur.segs.append(e)
                else:
                    cur.summary = e
                return None
            self.cur = None
            self._note(e)
            return self._finish(cur)
        self._note(e)
        return None

    def close(self):
        cur, self.cur = self.cur, None
        return self._finish(cur) if cur is not None else None

    def _note(self, e):
        if e.cat not in _NOTED_CATEGORIES:
            return
        key = f"{e.cat} {e.ev}"
        if key == UAR_WRITE:
            self.uar_write[(e.int("uar"), e.int("offset"))] = e
        elif key == UAR_SQ_DOORBELL:
            q = e.int("qpn")
            self.doorbell[q] = e
            wr = self.uar_write.get((e.int("uar"), e.int("offset")))
            if wr is not None:
                self.db_write[e.seq] = wr
        elif key == UAR_BLUEFLAME:
            self.bf[(e.int("qpn"), e.int("wqe_index"))] = e
        elif key == WQE_FETCH:
            self.cur = Wqe(self.node, e)
        elif key == WQE_DBR:
            self.dbr[e.int("qpn")] = e
        elif key == WQE_BLUEFLAME:
            self.bf_exec[(e.int("qpn"), e.int("index"))] = e
        elif key == WQE_BLOCKED:
            self.blocked.setdefault((e.int("qpn"), e.int("index")), []).append(e)
        elif key == OBJ_CREATE_QP:
            self.create[e.int("qpn")] = e

    def _finish(self, w):
        q, i = w.qpn, w.index
        w.doorbell = self.doorbell.get(q)
        if w.doorbell is not None:
            w.doorbell_write = self.db_write.get(w.doorbell.seq)
        w.dbr = self.dbr.get(q)
        w.blueflame = self.bf.pop((q, i), None)
        w.bf_exec = self.bf_exec.pop((q, i), None)
        w.blocked = self.blocked.pop((q, i), [])
        c = self.create.get(q)
        if c is not None:
            w.qp_create = c
            w.qp_type = c.get("type")
            w.qp_type_from = f"create_qp seq {c.seq}"
        return w


def wqes(source, keep=None):
    """Every WQE of a node's trace, streamed."""
    r = WqeReader(source.name)
    for e in source.events(stats=tp.ParseStats()):
        w = r.feed(e)
        if w is not None:
            if w.qp_type is None:
                _infer_type(w)
            if keep is None or keep(w):
                yield w
    w = r.close()
    if w is not None:
        if w.qp_type is None:
            _infer_type(w)
        if keep is None or keep(w):
            yield w


def nth_wqe(sources, qpn, index, nth=1):
    """(source, fetch seq) of the nth WQE at SQ index `index` of QP `qpn`
    (the index wraps, so it recurs), searching sources in order; None if
    there is none."""
    for s in sources:
        k = nth
        for w in wqes(s, keep=lambda w: w.qpn == qpn and w.index == index):
            k -= 1
            if k == 0:
                return s, w.fetch.seq
    return None


def add_selector_args(p, seq_help, node_help):
    """The arguments that name one WQE, shared by `trace decode` and
    `trace follow`: [RUN|TRACE] [SEQ], --node, --qpn/--index/--nth."""
    p.add_argument("args", nargs="*", metavar="[RUN|TRACE] [SEQ]",
                   help=f"run directory or trace files, and {seq_help} (or NODE:SEQ)")
    p.add_argument("--node", help=node_help)
    p.add_argument("--qpn", help="with --index: the WQE at this SQ index of this QP")
    p.add_argument("--index", help="SQ index (wqe_index) of the WQE")
    p.add_argument("--nth", type=int, default=1, help="with --qpn/--index: the Nth such WQE (the index wraps)")


def collect(source, seq, lookback=400, lookahead=3000):
    """The Wqe whose `wqe fetch` line is seq (or, when seq is a segment,
    doorbell, doorbell-record or BlueFlame line of a WQE, the fetch it
    belongs to), with the packets it sent and its CQE. None when there is
    no WQE there."""
    r = WqeReader(source.name)
    it = tp.find_seq(source, max(1, seq - lookback))
    w = None
    ender = None
    for e in it:
        if e.seq == seq and not (e.cat == "wqe" or e.is_(UAR_SQ_DOORBELL, UAR_BLUEFLAME, UAR_WRITE)):
            return None
        done = r.feed(e)
        if done is not None and _last_seq(done) >= seq:
            w = done
            ender = e  # the first event after the WQE's lines
            break
        if e.seq > seq + 50 and r.cur is None:
            return None
    else:
        w = r.close()
        if w is None or _last_seq(w) < seq:
            return None
    if ender is not None and _belongs(w, ender):
        w.after.append(ender)
    # What it caused: its packets, its CQE (a later WQE of the QP ends the
    # search: an unsignaled WQE has no CQE of its own).
    for e in it:
        if e.is_(WQE_FETCH) and e.int("qpn") == w.qpn:
            break
        if _belongs(w, e):
            w.after.append(e)
            if e.is_("cqe cqe"):
                break
        if e.seq > w.fetch.seq + lookahead:
            break
    if w.qp_type is None:
        c = qp_types(source, [w.qpn], before_seq=w.fetch.seq).get(w.qpn)
        if c is not None:
            w.qp_create = c
            w.qp_type = c.get("type")
            w.qp_type_from = f"create_qp seq {c.seq}"
        else:
            _infer_type(w)
    return w


def _last_seq(w):
    """The seq of the WQE's last line (its fetch or last segment)."""
    last = w.fetch.seq
    for e in w.segs + ([w.summary] if w.summary is not None else []):
        last = max(last, e.seq)
    return last


def _belongs(w, e):
    if e.is_("pkt send"):
        return e.int("qpn") == w.qpn and e.int("wqe") == w.index
    if e.is_("cqe cqe"):
        return e.int("qpn") == w.qpn and e.cqe_kind() in ("REQ", "REQ_ERR") and e.int("wqe_counter") == w.index
    if e.is_("mkey umr", "mkey fail", "mkey invalidate"):
        return e.int("qpn") in (None, w.qpn)
    return False


def _infer_type(w):
    evs = {s.key for s in w.segs}
    if WQE_DATAGRAM in evs:
        w.qp_type = "UD"
    elif WQE_UMR in evs or w.opcode == "UMR":
        w.qp_type = "REG_UMR"
    elif w.summary is not None:
        w.qp_type = "XRC" if w.summary.get("xrc_srqn") else "RC"
    w.qp_type_from = "inferred from the segments (its create_qp is not in the trace)" if w.qp_type else ""


# -- layout ------------------------------------------------------------------

def _hexval(v):
    return v if v is not None else UNKNOWN


def ctrl_segment(w):
    f = w.fetch
    op = w.opcode
    opnum = tp.ival(f.get("opcode"))
    known = op in WQE_OPCODES.values() and WQE_OPCODES.get(opnum) == op
    fm = f.int("fence")
    ce = f.int("ce")
    se = f.int("se")
    imm = f.get("imm")
    ds = f.int("ds")
    if op in ("SEND_IMM", "RDMA_WRITE_IMM"):
        imm_meaning = "immediate data (in the receiver's CQE)"
    elif op == "SEND_INVAL":
        imm_meaning = "rkey the receiver invalidates"
    elif op == "UMR":
        imm_meaning = "the memory key the UMR modifies"
    else:
        imm_meaning = f"not used by {op}"
    fields = [
        Field("opcode", f"{op}(0x{opnum:02x})" if opnum is not None else _hexval(op),
              "" if known else UNKNOWN + " opcode"),
        Field("opmod", f.get("opmod", "-"), "opcode modifier" if f.get("opmod") is not None
              else "(not traced for connected QPs)"),
        Field("wqe_index", f"0x{w.index:04x}", "producer counter of the SQ in WQEBBs (64 B)"),
        Field("qpn", f"0x{w.qpn:06x}", ""),
        Field("ds", str(ds) if ds is not None else UNKNOWN, f"{ds * 16} bytes in 16-byte units" if ds else UNKNOWN),
        Field("fm", str(fm) if fm is not None else UNKNOWN, FENCE_MODES.get(fm, UNKNOWN)),
        Field("ce", str(ce) if ce is not None else UNKNOWN, CE_MODES.get(ce, UNKNOWN)),
        Field("se", str(se) if se is not None else UNKNOWN,
              {0: "no solicited event", 1: "solicited event at the receiver"}.get(se, UNKNOWN)),
        Field("imm", imm if imm is not None else UNKNOWN, imm_meaning),
    ]
    return Segment(0, 16, "ctrl", fields, f)


def _seg(kind, e, size):
    g = e.get
    if kind == "data":
        ln = e.int("len")
        fields = [Field("byte_count", str(ln) if ln is not None else UNKNOWN,
                        "empty entry" if ln == 0 else "bytes"),
                  Field("lkey", _hexval(g("lkey")), "local memory key"),
                  Field("addr", _hexval(g("addr")), "virtual address in the key's range")]
    elif kind == "inline":
        ln = e.int("len")
        size = (4 + (ln or 0) + 15) & ~15
        fields = [Field("byte_count", f"0x8000_0000 | {ln}" if ln is not None else UNKNOWN,
                        "inline data follows the segment header"),
                  Field("data", g("bytes", "") or "-", f"first {min(ln or 0, 32)} of {ln} bytes")]
    elif kind == "datagram":
        dlid = e.int("dlid")
        dqpn = e.int("dqpn")
        qkey = e.int("qkey")
        if dlid is None:
            dl = UNKNOWN
        elif dlid == 0xffff:
            dl = "permissive LID"
        elif dlid >= 0xc000:
            dl = "multicast LID"
        else:
            dl = "unicast LID"
        if qkey is None:
            qk = UNKNOWN
        elif qkey == 0x80010000:
            qk = "GSI well-known Q_Key"
        elif qkey == 0xb1b:
            qk = "IPoIB broadcast group Q_Key"
        else:
            qk = "Q_Key (after the 'use the QP's own' high-bit rule)"
        fields = [Field("dlid", _hexval(g("dlid")), dl),
                  Field("dqpn", _hexval(g("dqpn")),
                        "multicast QPN" if dqpn == 0xffffff else ("QP0 (SMI)" if dqpn == 0 else
                                                                 "QP1 (GSI)" if dqpn == 1 else "remote QP")),
                  Field("qkey", f"0x{qkey:x}" if qkey is not None else UNKNOWN, qk),
                  Field("sl", _hexval(g("sl")), "service level"),
                  Field("grh", _hexval(g("grh")), "global route header present" if g("grh") == "true"
                        else "no GRH" if g("grh") == "false" else UNKNOWN)]
        if g("dgid"):
            fields.append(Field("dgid", g("dgid"), "destination GID"))
    elif kind == "eth":
        cs = e.int("cs_flags")
        sz = e.int("inline_hdr_sz")
        size = (14 + (sz or 0) + 15) & ~15
        what = [n for bit, n in ((0x40, "IPv4 header"), (0x80, "TCP/UDP")) if cs is not None and cs & bit]
        fields = [Field("cs_flags", _hexval(g("cs_flags")),
                        "checksums to compute: " + (" and ".join(what) if what else "none") if cs is not None
                        else UNKNOWN),
                  Field("mss", _hexval(g("mss")), "large send: data bytes per datagram"),
                  Field("inline_hdr_sz", _hexval(g("inline_hdr_sz")),
                        "bytes of packet header inline (a large send's TCP/IP header)"),
                  Field("inline_hdr", g("hdr", "") or "-", "the header, from its first byte")]
    elif kind == "atomic":
        fields = [Field("swap_add", _hexval(g("swap_add")), "swap value (CAS) or addend (FAA)"),
                  Field("compare", _hexval(g("compare")), "compare value (CAS); unused by FAA")]
    elif kind == "umr_ctrl":
        fields = [Field("flags", _hexval(g("flags")), "translation inline or by pointer, free checks"),
                  Field("xlt_octowords", _hexval(g("xlt_octowords")), "translation entries / 2"),
                  Field("xlt_offset", _hexval(g("xlt_offset")), "first translation entry"),
                  Field("mkey_mask", _hexval(g("mask")), "mkey context fields to apply"),
                  Field("mkey", _hexval(g("key")), "from the control segment's imm")]
    elif kind == "mkey_ctx":
        fields = [Field(k, _hexval(g(k)), m) for k, m in (
            ("free", "1: the key is free"), ("access", "r/w local, R/W remote, A atomic"), ("umr_en", "UMR may modify"),
            ("mode", "access mode"), ("variant", "key variant byte"), ("pd", "protection domain"),
            ("start", "start address"), ("len", "length"), ("page", "log2 page size"),
            ("xlt_oct_size", "translation octowords"))]
    else:
        fields = [Field(kind, e.body, UNKNOWN + " segment")]
        kind = UNKNOWN
    return Segment(0, size, kind, fields, e)


def layout(w):
    """The segments in memory order with their offsets, and the number of
    DS bytes not accounted for (0 when every byte is decoded)."""
    segs = [ctrl_segment(w)]
    by = {}
    for e in w.segs:
        by.setdefault(e.key, []).append(e)
    gather = [e for e in w.segs if e.key in GATHER_EVENTS]
    op = w.opcode
    t = w.qp_type
    if WQE_DATAGRAM in by or (t in UD_TYPES and op in UD_OPS):
        for e in by.get(WQE_DATAGRAM, []):
            segs.append(_seg("datagram", e, 48))
        for e in by.get(WQE_ETH, []):  # an IPoIB offload QP: a 16-byte pad, then the Ethernet segment
            segs.append(Segment(0, 16, "eth_pad", [Field("pad", "-", "mlx5_wqe_eth_pad, zeros")], e))
            segs.append(_seg("eth", e, 16))
        segs += [_seg(e.ev, e, 16) for e in gather]
    elif WQE_UMR in by or op == "UMR":
        for e in by.get(WQE_UMR, []):
            segs.append(_seg("umr_ctrl", e, 48))
        for e in by.get(WQE_MKEY, []):
            segs.append(_seg("mkey_ctx", e, 64))
        umr = by.get(WQE_UMR, [None])[0]
        octo = umr.int("xlt_octowords", 0) if umr is not None else 0
        if umr is not None and "inline" in (umr.get("flags") or "") and octo:
            segs.append(Segment(0, octo * 16, "xlt", [Field("entries", str(octo * 2),
                                                               "translation entries (8 bytes each), inline")], umr))
        segs += [_seg("data", e, 16) for e in by.get(WQE_DATA, [])]
    elif w.summary is not None or t in CONNECTED_TYPES:
        s = w.summary
        if s is not None and s.get("xrc_srqn"):
            segs.append(Segment(0, 16, "xrc", [Field("xrc_srqn", s.get("xrc_srqn"), "the remote XRC SRQ")], s))
        if op in RDMA_OPS or op in ATOMIC_OPS:
            segs.append(Segment(0, 16, "raddr", [
                Field("raddr", _hexval(s.get("raddr") if s else None), "remote virtual address"),
                Field("rkey", _hexval(s.get("rkey") if s else None), "remote memory key")], s))
        if op in ATOMIC_OPS:
            at = by.get(WQE_ATOMIC)
            if at:
                segs.append(_seg("atomic", at[0], 32 if op == "ATOMIC_MASKED_CS" else 16))
            else:
                segs.append(Segment(0, 32 if op == "ATOMIC_MASKED_CS" else 16, "atomic", [
                    Field("operands", "-", "not traced (a trace from before the `atomic` segment line)")], None))
        segs += [_seg(e.ev, e, 16) for e in gather]
    elif op == "NOP":
        pass
    else:
        segs += [_seg(e.ev, e, 16) for e in w.segs]
    for e in w.segs:
        if e.key not in SEGMENT_EVENTS:
            segs.append(_seg(e.ev, e, 0))
    off = 0
    raw = w.raw
    for s in segs:
        s.offset = off
        if raw is not None and off + s.size <= len(raw):
            s.raw = raw[off:off + s.size]
        off += s.size
    ds = w.fetch.int("ds")
    left = (ds * 16 - off) if ds is not None else None
    if w.doorbell_write is not None and segs[0].raw is None:
        try:
            b = bytes.fromhex(w.doorbell_write.get("data", ""))
            if len(b) == 8:
                segs[0].raw = b
                segs[0].note = "first 8 bytes, copied by the doorbell write"
        except ValueError:
            pass
    return segs, left


def unknowns(w):
    """The fields and segments of the decode that are unknown (empty when
    the WQE decodes completely)."""
    segs, left = layout(w)
    out = []
    for s in segs:
        if s.kind == UNKNOWN:
            out.append(f"segment {s.fields[0].name}")
        for f in s.fields:
            if f.value == UNKNOWN or f.meaning.startswith(UNKNOWN):
                out.append(f"{s.kind}.{f.name}")
    if left is None:
        out.append("ds")
    elif left != 0:
        out.append(f"{left} bytes of the {w.fetch.int('ds')} DS not accounted for")
    if w.qp_type is None:
        out.append("qp type")
    return out


def _raw_words(b):
    return " ".join(b[i:i + 4].hex() for i in range(0, len(b), 4))


def render(w, raw=True):
    """The decode as text lines."""
    f = w.fetch
    segs, left = layout(w)
    L = []
    qt = w.qp_type or UNKNOWN
    L.append(f"{w.node} seq {f.seq}  t={tp.fmt_us(f.t)} us  WQE {w.opcode} on qpn=0x{w.qpn:x} ({qt}"
             f"{', ' + w.qp_type_from if w.qp_type_from else ''})  SQ index 0x{w.index:x}")
    if w.qp_create is not None:
        c = w.qp_create
        L.append(f"  QP: type={c.get('type')} pd={c.get('pd')} sq={c.get('sq')} cqn_snd={c.get('cqn_snd')} "
                 f"uar={c.get('uar')}")
    if w.doorbell is not None:
        d = w.doorbell
        how = "BlueFlame copy" if w.blueflame is not None else "doorbell"
        L.append(f"  posted: {how} seq {d.seq} at {tp.fmt_us(d.t)} us (uar={d.get('uar')} offset={d.get('offset')}, "
                 f"names WQE {d.get('wqe_index')} {d.get('opcode')})")
    if w.dbr is not None:
        b = w.dbr
        L.append(f"  doorbell record seq {b.seq}: sq_pi={b.get('sq_pi')} sq_ci={b.get('sq_ci')} "
                 f"({b.get('posted')} WQEBBs posted)")
    for b in w.blocked:
        L.append(f"  blocked seq {b.seq} at {tp.fmt_us(b.t)} us: {b.body}")
    if w.bf_exec is not None:
        L.append(f"  executed from the BlueFlame write (seq {w.bf_exec.seq}), not read from the SQ buffer")
    L.append("")
    L.append(f"  {'offset':>6}  {'segment':<9} {'bytes' if raw else '':<36} fields")
    for s in segs:
        first = True
        rawtxt = _raw_words(s.raw) if (raw and s.raw is not None) else "-"
        rawlines = [rawtxt[i:i + 35] for i in range(0, len(rawtxt), 36)] if rawtxt != "-" else ["-"]
        width = max((len(x.name) + len(x.value) + 1 for x in s.fields), default=0)
        for i, fl in enumerate(s.fields):
            rb = rawlines[i] if i < len(rawlines) else ""
            kv = f"{fl.name}={fl.value}"
            meaning = f"  {fl.meaning}" if fl.meaning else ""
            if first:
                L.append(f"  +0x{s.offset:03x}  {s.kind:<9} {rb if raw else '':<36} {kv:<{width}}{meaning}".rstrip())
                first = False
            else:
                L.append(f"  {'':>6}  {'':<9} {rb if raw else '':<36} {kv:<{width}}{meaning}".rstrip())
        for rb in rawlines[len(s.fields):]:
            L.append(f"  {'':>6}  {'':<9} {rb}")
        if s.note:
            L.append(f"  {'':>6}  {'':<9} {'':<36} ({s.note})")
    ds = f.int("ds")
    if left == 0:
        L.append(f"  = {ds} DS = {ds * 16} bytes, every byte accounted for "
                 f"({(ds * 16 + 63) // 64} WQEBB{'s' if ds * 16 > 64 else ''})")
    elif left is not None:
        L.append(f"  = {ds} DS = {ds * 16} bytes; {left} bytes {UNKNOWN} (not in the trace)")
    if w.summary is not None:
        s = w.summary
        L.append(f"  message: {s.ev} of {s.get('len')} bytes in {s.get('pkts')} packet(s)"
                 + (f" to raddr={s.get('raddr')} rkey={s.get('rkey')}" if w.opcode in RDMA_OPS | ATOMIC_OPS else ""))
    if w.after:
        L.append("")
        L.append("  then:")
        for e in w.after:
            L.append(f"    seq {e.seq:<8} {tp.fmt_us(e.t):>16} {e.cat} {e.ev} {e.body}")
    return L
