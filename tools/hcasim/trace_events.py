"""The device trace's schema: hca-model/trace-events, the one table of every
event (category, name, typed fields), read here for the Python tools and by
tools/gen-trace.py for the model's emitters. docs/TRACING.md describes it.
"""
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).resolve().parents[2] / "hca-model" / "trace-events"

# type -> (C++ member type, how the value looks)
TYPES = {
    "u": ("TraceInt", "unsigned decimal"),
    "i": ("TraceSInt", "signed decimal"),
    "x": ("TraceInt", "hex, 0x prefix"),
    "x2": ("TraceInt", "hex, 2 digits"),
    "x8": ("TraceInt", "hex, 8 digits"),
    "x16": ("TraceInt", "hex, 16 digits"),
    "b": ("bool", "true or false"),
    "s": ("std::string_view", "a name without spaces"),
    "w": ("std::string_view", "a bare word (no key=)"),
    "q": ("std::string_view", "quoted text"),
    "n": ("TraceNamed", "NAME(0xVALUE); the name may hold spaces"),
    "hex": ("std::span<const uint8_t>", "bytes in hex"),
    "gid": ("iba::Gid", "a GID, IPv6 notation"),
    "kv": ("std::string_view", "key=value pairs written in place (a variable set, e.g. the QPC fields a modify applied)"),
}
SCOPE_FIELDS = ("qpn", "cqn")


class SchemaError(Exception):
    pass


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    optional: bool = False

    @property
    def numeric(self):
        return self.type in ("u", "i", "x", "x2", "x8", "x16")


@dataclass(frozen=True)
class Category:
    name: str
    bit: int
    scoped: bool
    help: str


@dataclass(frozen=True)
class EventDef:
    cat: str
    name: str
    seg: bool
    fields: tuple
    reason: bool
    line: int

    @property
    def key(self):
        return f"{self.cat} {self.name}"

    @property
    def ident(self):
        """The C++ name: tev::<cat>_<event>."""
        return f"{self.cat}_{self.name}"

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        return None


@dataclass
class Schema:
    format: int
    categories: dict = field(default_factory=dict)   # name -> Category
    events: dict = field(default_factory=dict)       # "cat event" -> EventDef
    names: dict = field(default_factory=dict)        # table -> {value: name}

    def event(self, cat, name):
        return self.events.get(f"{cat} {name}")

    def require(self, key):
        """The event named "cat event"; a tool that names an event the table
        does not declare fails here, not silently."""
        try:
            return self.events[key]
        except KeyError:
            raise SchemaError(f"no trace event {key!r} in {TABLE}") from None

    def to_json(self):
        return {
            "format": self.format,
            "categories": [{"name": c.name, "bit": c.bit, "scoped": c.scoped, "help": c.help}
                           for c in self.categories.values()],
            "types": {t: d for t, (_, d) in TYPES.items()},
            "names": {t: {f"0x{v:x}": n for v, n in vals.items()} for t, vals in self.names.items()},
            "events": [{"category": e.cat, "event": e.name, "segment": e.seg, "reason": e.reason,
                        "fields": [{"name": f.name, "type": f.type, "optional": f.optional} for f in e.fields]}
                       for e in self.events.values()],
        }


_IDENT = re.compile(r"[a-z][a-z0-9_]*\Z")


def parse(text, where="trace-events"):
    """A Schema from the table's text; SchemaError names the bad line."""
    fmt = None
    cats = {}
    events = {}
    names = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue

        def bad(msg):
            return SchemaError(f"{where}:{n}: {msg}: {raw.strip()!r}")

        words = line.split()
        if words[0] == "format":
            fmt = int(words[1])
            continue
        if words[0] == "names":
            # names TABLE VALUE=NAME ...: the names the model gives the
            # values of a named field (generated as trace_name_TABLE()).
            if len(words) < 3 or not _IDENT.match(words[1]) or words[1] in names:
                raise bad("expected: names TABLE VALUE=NAME ...")
            table = {}
            for w in words[2:]:
                v, eq, nm = w.partition("=")
                try:
                    table[int(v, 0)] = nm
                except ValueError:
                    raise bad(f"bad value {w!r}") from None
                if not eq or not nm:
                    raise bad(f"bad VALUE=NAME {w!r}")
            names[words[1]] = table
            continue
        if words[0] == "category":
            m = re.fullmatch(r'category\s+(\S+)\s+(\d+)\s+(scoped\s+)?"([^"]*)"', line)
            if not m or not _IDENT.match(m.group(1)):
                raise bad("expected: category NAME BIT [scoped] \"help\"")
            bit = int(m.group(2))
            if bit > 31 or any(c.bit == bit for c in cats.values()):
                raise bad("category bit taken or too large")
            cats[m.group(1)] = Category(m.group(1), bit, bool(m.group(3)), m.group(4))
            continue
        reason = False
        if words[-2:] == [":", "reason"]:
            reason = True
            words = words[:-2]
        if len(words) < 2:
            raise bad("expected: CATEGORY EVENT FIELD:TYPE ...")
        cat, name, rest = words[0], words[1], words[2:]
        if cat not in cats:
            raise bad(f"unknown category {cat!r}")
        if not _IDENT.match(name):
            raise bad("event names are lower-case identifiers")
        seg = bool(rest) and rest[0] == "seg"
        if seg:
            rest = rest[1:]
        fields = []
        for spec in rest:
            fname, colon, ftype = spec.partition(":")
            opt = ftype.endswith("?")
            ftype = ftype.rstrip("?")
            if not colon or not _IDENT.match(fname) or ftype not in TYPES:
                raise bad(f"bad field {spec!r} (NAME:TYPE, types {' '.join(TYPES)})")
            if any(f.name == fname for f in fields) or fname == "reason" and reason:
                raise bad(f"field {fname!r} twice")
            fields.append(Field(fname, ftype, opt))
        key = f"{cat} {name}"
        if key in events:
            raise bad(f"event {key!r} declared twice")
        events[key] = EventDef(cat, name, seg, tuple(fields), reason, n)
    if fmt is None:
        raise SchemaError(f"{where}: no 'format N' line")
    return Schema(fmt, cats, events, names)


@lru_cache(maxsize=1)
def load():
    """The schema of this checkout's model."""
    return parse(TABLE.read_text(), str(TABLE))


def main(argv=None):
    print(json.dumps(load().to_json(), indent=1))


if __name__ == "__main__":
    main()
