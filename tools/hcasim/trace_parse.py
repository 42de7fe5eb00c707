"""Reading device traces (docs/TRACING.md): one event per line,

    <seq> <time_us.ns> <category> <event> [key=value | word]... [: reason]

streamed from node<i>/hca.trace.1 + node<i>/hca.trace (the rotated half
first), never loaded whole. Lines that do not parse are counted and skipped.
Fields are split lazily: most consumers look at the category and event only.
"""
import re
from dataclasses import dataclass, field
from pathlib import Path

from hcasim import trace_events

# Every event, category and field comes from hca-model/trace-events.
SCHEMA = trace_events.load()
CATEGORIES = tuple(SCHEMA.categories)
FORMAT = SCHEMA.format
_FORMAT_RE = re.compile(r"# hcasim trace format (\d+)\s*\Z")

# Values that run over spaces up to a closing "(0x..)": the named values of
# the schema (type n: "syndrome=remote access error(0x13)", "status=bad
# parameter(0x3)"), or to the end of the line / the next key in traces of
# format 1 ("syndrome=WR flushed").
_SPACED_KEYS = frozenset(f.name for e in SCHEMA.events.values() for f in e.fields if f.type == "n")
# Quoted text (type q: driver_version version="mlx5 6.12") runs to its
# closing quote.
_QUOTED_KEYS = frozenset(f.name for e in SCHEMA.events.values() for f in e.fields if f.type == "q")
_KEY_RE = re.compile(r"[a-z_][a-z0-9_]*\Z")


def event_key(key):
    """KEY ("cat event") checked against the schema: a tool that names an
    event the table does not declare fails when it is loaded."""
    SCHEMA.require(key)
    return key


_WQE_REMOTE = event_key("wqe remote")


def line_marks(*names):
    """The text that finds NAMES in a raw trace line, for keep= filters that
    skip parsing: " cat " for a category, " cat event " for an event (a
    segment's with its indent, " wqe   data "), each checked against the
    schema."""
    out = []
    for n in names:
        if " " in n:
            d = SCHEMA.require(n)
            out.append(f" {d.cat}   {d.name} " if d.seg else f" {n} ")
        elif n in SCHEMA.categories:
            out.append(f" {n} ")
        else:
            raise trace_events.SchemaError(f"no trace category {n!r} in {trace_events.TABLE}")
    return tuple(out)


# IBA packet opcodes as the trace names them (`names iba_opcode` in
# hca-model/trace-events), and their classes by the spec's names: a
# responder sends the read responses and the acknowledges; FIRST, MIDDLE,
# LAST or ONLY places a packet in its message, and an opcode without one is
# a message of one packet (RDMA_READ_REQUEST, COMPARE_SWAP, ACKNOWLEDGE).
PACKET_OPCODES = frozenset(SCHEMA.names["iba_opcode"].values())


def _place(opcode):
    return next((w for w in opcode.split("_") if w in ("FIRST", "MIDDLE", "LAST", "ONLY")), "ONLY")


RESPONSE_OPCODES = frozenset(o for o in PACKET_OPCODES if "_RESPONSE_" in o or o.endswith("ACKNOWLEDGE"))
# The packets that end a response (the requester's WQE is answered).
LAST_RESPONSE_OPCODES = frozenset(o for o in RESPONSE_OPCODES if _place(o) in ("LAST", "ONLY"))


def table_names(table, *names):
    """NAMES checked against the schema's `names TABLE` (iba_opcode,
    wqe_opcode, ...): a tool that names a value the model does not fails
    when it is loaded."""
    known = SCHEMA.names[table].values()
    for n in names:
        if n not in known:
            raise trace_events.SchemaError(f"no {n!r} in `names {table}` of {trace_events.TABLE}")
    return names


PSN_MASK = 0xffffff


def psn_diff(a, b):
    """a - b in 24-bit PSN space, as a signed number (IBA 9.7.2)."""
    d = (a - b) & PSN_MASK
    return d - (1 << 24) if d & 0x800000 else d


def ival(v):
    """An integer from a trace value: 0x1f, 31, NAME(0x1f), 0x1f: -> 31;
    None when there is none."""
    if v is None:
        return None
    if v.endswith(")"):
        i = v.rfind("(")
        if i >= 0:
            v = v[i + 1:-1]
    v = v.rstrip(":,")
    try:
        return int(v, 0)
    except ValueError:
        try:
            return int(v, 16) if v.startswith(("0x", "0X")) else int(v)
        except ValueError:
            return None


def vname(v):
    """The name part of NAME(0x1f) (or the value itself)."""
    if v is None:
        return None
    i = v.find("(")
    return v[:i] if i > 0 and v.endswith(")") else v


def fmt_us(ns):
    """Device time (integer ns) as the trace writes it: microseconds, 3 decimals."""
    if ns is None:
        return "-"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def fmt_delta(ns):
    if ns is None:
        return ""
    return ("+" if ns >= 0 else "-") + fmt_us(abs(ns))


_TIME_UNITS = {"ns": 1, "us": 1000, "µs": 1000, "ms": 1000_000, "s": 1000_000_000}


def parse_time(text):
    """A time argument in device time: plain microseconds ("12531465.2") or
    with a unit ("12.5s", "300ms", "7us", "100ns"). Returns ns."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ns|us|µs|ms|s)?\s*", text)
    if not m:
        raise ValueError(f"not a time: {text!r} (microseconds, or with a unit: 12.5s, 300ms, 7us)")
    return int(round(float(m.group(1)) * _TIME_UNITS[m.group(2) or "us"]))


class Event:
    """One trace line. seq, t (device time in ns), cat, ev (event name),
    seg (a WQE segment line: the event is indented), body (the rest).
    kv/words/reason are parsed on first use."""

    __slots__ = ("seq", "t", "cat", "ev", "seg", "body", "line", "node", "_kv", "_words")

    def __init__(self, seq, t, cat, ev, seg, body, line, node=None):
        self.seq = seq
        self.t = t
        self.cat = cat
        self.ev = ev
        self.seg = seg
        self.body = body
        self.line = line
        self.node = node
        self._kv = None
        self._words = None

    def _split(self):
        kv = {}
        words = []
        toks = self.body.split()
        i = 0
        n = len(toks)
        while i < n:
            tok = toks[i]
            k, eq, v = tok.partition("=")
            if eq and _KEY_RE.match(k):
                if k in _QUOTED_KEYS and v.startswith('"') and (len(v) == 1 or not v.endswith('"')):
                    parts = [v]
                    while i + 1 < n and not (len(parts[-1]) > 1 and parts[-1].endswith('"')):
                        i += 1
                        parts.append(toks[i])
                    v = " ".join(parts)
                elif k in _SPACED_KEYS and not v.endswith(")") and "(0x" not in v:
                    parts = [v]
                    while i + 1 < n:
                        nxt = toks[i + 1]
                        nk, neq, _ = nxt.partition("=")
                        if neq and _KEY_RE.match(nk):
                            break
                        parts.append(nxt)
                        i += 1
                        if nxt.endswith(")"):
                            break
                    v = " ".join(parts)
                if v.endswith(":"):
                    v = v[:-1]
                kv.setdefault(k, v)
            else:
                words.append(tok)
            i += 1
        self._kv = kv
        self._words = words

    @property
    def kv(self):
        if self._kv is None:
            self._split()
        return self._kv

    @property
    def words(self):
        """Tokens that are not key=value, in order (e.g. the packet opcode,
        REQ/RESP_SEND of a CQE, the states of a transition)."""
        if self._words is None:
            self._split()
        return self._words

    @property
    def reason(self):
        """The free text after the first ": " (guest errors, drops, ...)."""
        i = self.body.find(": ")
        return self.body[i + 2:] if i >= 0 else ""

    def get(self, key, default=None):
        return self.kv.get(key, default)

    def int(self, key, default=None):
        v = ival(self.kv.get(key))
        return default if v is None else v

    @property
    def key(self):
        """"cat ev", the event's name in the schema."""
        return f"{self.cat} {self.ev}"

    def is_(self, *keys):
        """Whether this is one of the events KEYS ("cat event", each checked
        against the schema)."""
        key = self.key
        for k in keys:
            if _checked(k) == key:
                return True
        return False

    @property
    def name(self):
        """"cat ev", with the segment indent as in the trace."""
        return f"{self.cat}   {self.ev}" if self.seg else f"{self.cat} {self.ev}"

    # -- shapes that several tools need --------------------------------

    def pkt_opcode(self):
        """The IBA opcode of a pkt send/recv line."""
        for w in self.words:
            if w.isupper():
                return w
        return None

    def cqe_kind(self):
        """REQ, REQ_ERR, RESP_SEND, ... of a cqe line."""
        for w in self.words:
            if w.startswith(("REQ", "RESP")):
                return w
        return None

    def wqe_opcode(self):
        """The WQE opcode name: fetch opcode=SEND(0xa), cqe opcode=SEND,
        sq_doorbell opcode=SEND, or a segment line named after it."""
        v = self.kv.get("opcode")
        if v is not None:
            return vname(v)
        if self.seg and self.key == _WQE_REMOTE:  # its first word
            return self.words[0] if self.words else None
        return self.ev if self.seg and self.ev.isupper() else None  # format 1

    def eqe_cqn(self):
        """The CQ of a completion EQE: cqn= (new traces) or the data dword
        at 0x18 (eqe.data.comp.cqn; older traces dump the data)."""
        c = self.int("cqn")
        if c is not None:
            return c
        d = self.kv.get("data")
        if d and len(d) >= 56 and self.int("type") == 0:
            try:
                return int(d[48:56], 16) & 0xffffff
            except ValueError:
                return None
        return None

    def __repr__(self):
        return f"Event({self.line!r})"


_CHECKED = set()


def _checked(key):
    if key not in _CHECKED:
        event_key(key)
        _CHECKED.add(key)
    return key


def parse_line(line, node=None):
    """An Event, or None when the line is not a trace event."""
    line = line.rstrip("\r\n")
    parts = line.split(" ", 3)
    if len(parts) < 4:
        return None
    s, ts, cat, rest = parts
    try:
        seq = int(s)
        a, dot, b = ts.partition(".")
        t = int(a) * 1000 + (int(b[:3].ljust(3, "0")) if dot else 0)
    except ValueError:
        return None
    if not cat or not rest:
        return None
    seg = rest.startswith(" ")
    if seg:
        rest = rest.lstrip(" ")
    ev, _, body = rest.partition(" ")
    if ev.endswith(":"):  # an event with a reason and no fields: "halted: why"
        ev, body = ev[:-1], ": " + body
    if not ev:
        return None
    return Event(seq, t, cat, ev, seg, body, line, node)


@dataclass
class ParseStats:
    """What reading a node's trace found besides the events."""
    files: list = field(default_factory=list)
    lines: int = 0
    events: int = 0
    comments: int = 0
    malformed: int = 0
    malformed_examples: list = field(default_factory=list)
    first_seq: int | None = None
    last_seq: int | None = None
    first_t: int | None = None
    last_t: int | None = None
    gaps: int = 0            # places where seq jumps forward
    missing: int = 0         # events skipped by those jumps
    backwards: int = 0       # places where seq does not increase
    file_boundaries: list = field(default_factory=list)  # (file, first seq, last seq)
    format: int | None = None  # from the "# hcasim trace format N" line

    def notes(self):
        """Human-readable remarks about the trace's completeness."""
        out = []
        note = format_note(self.format if self.format is not None else (1 if self.events else FORMAT))
        if note:
            out.append(note)
        if self.first_seq is not None and self.first_seq > 1:
            out.append(f"the trace starts at seq {self.first_seq}: {self.first_seq - 1} earlier events were "
                       f"rotated away (trace-max-bytes) or not recorded")
        if self.gaps:
            out.append(f"{self.gaps} gap(s) in seq ({self.missing} events missing: rotated away, or an excerpt)")
        if self.backwards:
            out.append(f"seq went backwards {self.backwards} time(s) (concatenated traces?)")
        if self.malformed:
            out.append(f"{self.malformed} malformed line(s) skipped, e.g. {self.malformed_examples[0]!r}")
        return out


class TraceSource:
    """One node's trace: its files in order (hca.trace.1 before hca.trace)."""

    def __init__(self, name, files, run_dir=None):
        self.name = name
        self.files = [Path(f) for f in files]
        self.run_dir = Path(run_dir) if run_dir else None
        self.stats = ParseStats(files=[str(f) for f in self.files])

    @property
    def node(self):
        """The node number when the name is node<N>, else None."""
        m = re.fullmatch(r"node(\d+)", self.name)
        return int(m.group(1)) if m else None

    def size(self):
        return sum(f.stat().st_size for f in self.files if f.exists())

    def lines(self):
        """Raw lines of all files in order."""
        for f in self.files:
            with open(f, "r", encoding="utf-8", errors="replace", newline="\n") as fh:
                yield from fh

    def events(self, keep=None, stats=None):
        """Events in order. keep(line) -> bool filters raw lines before they
        are parsed (cheap substring tests). stats: a ParseStats to fill
        (default: self.stats, reset)."""
        st = stats if stats is not None else self.stats
        if stats is None:
            self.stats = st = ParseStats(files=[str(f) for f in self.files])
        prev = None
        node = self.name
        for f in self.files:
            first_in_file = None
            last_in_file = None
            with open(f, "r", encoding="utf-8", errors="replace", newline="\n") as fh:
                for line in fh:
                    st.lines += 1
                    wanted = keep is None or keep(line)
                    if not wanted:
                        # Skipped unparsed; the seq (first word) still
                        # tells about gaps.
                        sp = line.find(" ")
                        if 0 < sp < 21 and line[:sp].isdigit():
                            seq = int(line[:sp])
                            if first_in_file is None:
                                first_in_file = seq
                            last_in_file = seq
                            prev = _track_seq(st, prev, seq)
                            st.events += 1
                            continue
                    if line.startswith("#"):
                        st.comments += 1
                        m = _FORMAT_RE.match(line)
                        if m:
                            st.format = int(m.group(1))
                        continue
                    e = parse_line(line, node)
                    if e is None:
                        if line.strip():
                            st.malformed += 1
                            if len(st.malformed_examples) < 5:
                                st.malformed_examples.append(line.rstrip("\n")[:200])
                        continue
                    st.events += 1
                    if first_in_file is None:
                        first_in_file = e.seq
                    last_in_file = e.seq
                    if st.first_t is None:
                        st.first_t = e.t
                    st.last_t = e.t
                    prev = _track_seq(st, prev, e.seq)
                    if wanted:
                        yield e
            st.file_boundaries.append((str(f), first_in_file, last_in_file))

    def format(self):
        """The trace format of this source (its first line), 1 for a trace
        from before the format line, None when it has no line yet."""
        for f in self.files:
            try:
                with open(f, "r", encoding="utf-8", errors="replace") as fh:
                    first = fh.readline()
            except OSError:
                continue
            if not first:
                continue
            m = _FORMAT_RE.match(first)
            return int(m.group(1)) if m else 1
        return None

    def __repr__(self):
        return f"TraceSource({self.name!r}, {[str(f) for f in self.files]})"


def format_note(fmt):
    """What a reader should know about a trace of format FMT, or ""."""
    if fmt is None or fmt == FORMAT:
        return ""
    if fmt < FORMAT:
        return (f"trace format {fmt} is older than this hcasim's ({FORMAT}: typed events from "
                f"hca-model/trace-events); events renamed since are counted but not recognized, "
                f"so some tables may be incomplete")
    return f"trace format {fmt} is newer than this hcasim's ({FORMAT}): update the checkout to read it fully"


def _track_seq(st, prev, seq):
    if st.first_seq is None:
        st.first_seq = seq
    elif seq != prev + 1:
        if seq > prev:
            st.gaps += 1
            st.missing += seq - prev - 1
        else:
            st.backwards += 1
    st.last_seq = seq
    return seq


def _trace_files(path):
    """hca.trace given: [hca.trace.1, hca.trace] (those that exist), after
    the traces of devices unplugged before it (hca-unplugged-<k>.trace[.1],
    pci_fault.py) when path is a node's hca.trace."""
    path = Path(path)
    base = path.with_suffix("") if path.suffix == ".1" else path
    earlier = []
    if base.name == "hca.trace":
        old = [(int(m.group(1)), f) for f in base.parent.glob("hca-unplugged-*.trace")
               if (m := re.fullmatch(r"hca-unplugged-(\d+)\.trace", f.name))]
        for _, f in sorted(old):
            earlier += [Path(str(f) + ".1"), f]
    rotated = Path(str(base) + ".1")
    files = [f for f in (*earlier, rotated, base) if f.is_file()]
    return files or [path]


def resolve(paths, node=None):
    """TraceSources for command-line arguments: a run directory (every
    node<i>/), a node directory, or a trace file (with its rotated .1).
    node: keep only that node (number or "node<N>")."""
    want = None
    if node is not None:
        want = node if str(node).startswith("node") else f"node{int(node)}"
    out = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            nodes = sorted((d for d in p.iterdir() if d.is_dir() and re.fullmatch(r"node\d+", d.name)),
                           key=lambda d: int(d.name[4:]))
            if nodes:
                for d in nodes:
                    files = _trace_files(d / "hca.trace")
                    if all(f.is_file() for f in files):
                        out.append(TraceSource(d.name, files, run_dir=p))
                continue
            if (p / "hca.trace").is_file() or (p / "hca.trace.1").is_file():
                run = p.parent if re.fullmatch(r"node\d+", p.name) else None
                out.append(TraceSource(p.name, _trace_files(p / "hca.trace"), run_dir=run))
                continue
            raise FileNotFoundError(f"{p}: no node*/hca.trace and no hca.trace in it")
        if not p.is_file():
            raise FileNotFoundError(f"{p}: no such trace file or run directory")
        parent = p.parent
        name = parent.name if re.fullmatch(r"node\d+", parent.name) else p.name
        run = parent.parent if re.fullmatch(r"node\d+", parent.name) else None
        files = _trace_files(p) if p.name.startswith("hca.trace") else [p]
        out.append(TraceSource(name, files, run_dir=run))
    if want is not None:
        out = [s for s in out if s.name == want]
        if not out:
            raise FileNotFoundError(f"no trace of {want} in {', '.join(str(p) for p in paths)}")
    return out


def find_seq(source, seq):
    """Events of source from seq on, found by bisection over the files
    (seq increases through a trace), so a jump into a 250 MB trace reads
    only a few blocks before streaming from there."""
    files = source.files
    start_file = 0
    for i, f in enumerate(files):
        first = _first_event_of(f)
        if first is not None and first.seq <= seq:
            start_file = i
    f = files[start_file]
    offset = _bisect_offset(f, seq)
    for i, fname in enumerate(files[start_file:]):
        with open(fname, "rb") as fh:
            if i == 0:
                fh.seek(offset)
                if offset:
                    fh.readline()  # the rest of a line cut by the seek
            for raw in fh:
                e = parse_line(raw.decode("utf-8", "replace"), source.name)
                if e is not None and e.seq >= seq:
                    yield e


def find_time(source, t_ns):
    """Events of source from device time t_ns on (bisection like find_seq:
    time never decreases within a node's trace)."""
    files = source.files
    start_file = 0
    for i, f in enumerate(files):
        first = _first_event_of(f)
        if first is not None and first.t <= t_ns:
            start_file = i
    for i, fname in enumerate(files[start_file:]):
        with open(fname, "rb") as fh:
            if i == 0:
                offset = _bisect(fname, lambda e: e.t >= t_ns)
                fh.seek(offset)
                if offset:
                    fh.readline()
            for raw in fh:
                e = parse_line(raw.decode("utf-8", "replace"), source.name)
                if e is not None and e.t >= t_ns:
                    yield e


def _first_event_of(path):
    with open(path, "rb") as fh:
        for raw in fh:
            e = parse_line(raw.decode("utf-8", "replace"))
            if e is not None:
                return e
    return None




def _event_at(fh, offset):
    """The first whole event at or after offset."""
    fh.seek(offset)
    if offset:
        fh.readline()
    for _ in range(64):
        raw = fh.readline()
        if not raw:
            return None
        e = parse_line(raw.decode("utf-8", "replace"))
        if e is not None:
            return e
    return None


def _bisect(path, past):
    """A byte offset (a line start or 0) before the first event for which
    past(event) holds, assuming it holds for every later event too."""
    size = Path(path).stat().st_size
    lo, hi = 0, size
    with open(path, "rb") as fh:
        while hi - lo > 65536:
            mid = (lo + hi) // 2
            e = _event_at(fh, mid)
            if e is None or past(e):
                hi = mid
            else:
                lo = mid
    return lo


def _bisect_offset(path, seq):
    """A byte offset before the line of seq (a line start or 0)."""
    return _bisect(path, lambda e: e.seq >= seq)
