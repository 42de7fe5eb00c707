"""The fabric capture (run_dir/fabric.pcapng, fabric/src/capture.h) next to
the device traces: every record's comment is

    id=0x<packet id> port=<ingress port> <verdict>

(older captures: the id in decimal), and the devices print the same id on
their `pkt send`/`pkt recv` lines, so a packet of the trace is found in the
capture by its id. The capture is streamed block by block; matching records
are copied into a small pcapng of their own that tshark then decodes.
"""
import re
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SHB, IDB, EPB = 0x0A0D0D0A, 1, 6
OPT_COMMENT = 1
_ID_RE = re.compile(r"id=(0x[0-9a-fA-F]+|\d+)")


@dataclass
class Record:
    frame: int       # 1-based frame number in the capture (as tshark numbers it)
    packet_id: int
    comment: str
    ts_ns: int       # host wall clock of the fabric, ns since the epoch
    block: bytes     # the whole EPB, for copying


def comment_id(comment):
    m = _ID_RE.match(comment)
    return int(m.group(1), 0) if m else None


def _options(body, endian):
    """(code, value) of a block's options."""
    i = 0
    while i + 4 <= len(body):
        code, ln = struct.unpack_from(endian + "HH", body, i)
        if code == 0:
            return
        yield code, body[i + 4:i + 4 + ln]
        i += 4 + ((ln + 3) & ~3)


def records(path, want=None):
    """Records of the capture in order. want: a set of packet ids, or None
    for all. Yields (header_blocks, None) first: the SHB and IDBs, raw."""
    headers = []
    frame = 0
    endian = "<"
    sent_headers = False
    with open(path, "rb") as f:
        while True:
            head = f.read(8)
            if len(head) < 8:
                break
            btype = struct.unpack("<I", head[:4])[0]
            if btype == SHB:
                # The byte-order magic follows the length.
                rest = f.read(4)
                endian = "<" if rest == b"\x4d\x3c\x2b\x1a" else ">"
                blen = struct.unpack(endian + "I", head[4:])[0]
                body = rest + f.read(blen - 12)
                headers.append(head + body)
                continue
            btype, blen = struct.unpack(endian + "II", head)
            if blen < 12:
                break
            body = f.read(blen - 8)
            if len(body) < blen - 8:
                break  # a block cut by a capture still being written
            if btype == IDB:
                headers.append(head + body)
                continue
            if btype != EPB:
                continue
            frame += 1
            if not sent_headers:
                sent_headers = True
                yield tuple(headers), None
            _, ts_hi, ts_lo, caplen, _ = struct.unpack_from(endian + "IIIII", body, 0)
            opts = body[20 + ((caplen + 3) & ~3):-4]
            comment = ""
            for code, val in _options(opts, endian):
                if code == OPT_COMMENT:
                    comment = val.decode("utf-8", "replace")
                    break
            pid = comment_id(comment)
            if want is not None and pid not in want:
                continue
            yield None, Record(frame, pid, comment, (ts_hi << 32) | ts_lo, head + body)
    if not sent_headers:
        yield tuple(headers), None


def find(path, ids):
    """{packet id: [Record, ...]} for the ids (a packet recorded at every
    switch it entered; here one switch, so usually one record), and the
    header blocks."""
    want = set(ids)
    found = {}
    headers = ()
    for hdr, rec in records(path, want):
        if hdr is not None:
            headers = hdr
            continue
        found.setdefault(rec.packet_id, []).append(rec)
    return found, headers


def tshark_lines(headers, recs, timeout=120):
    """One tshark summary line per record (same order), decoded from a
    pcapng holding only these records. None when tshark is missing."""
    if not recs:
        return []
    if not shutil.which("tshark"):
        return None
    with tempfile.TemporaryDirectory(prefix="hcasim-wire-") as d:
        sub = Path(d) / "sub.pcapng"
        with open(sub, "wb") as f:
            for h in headers:
                f.write(h)
            for r in recs:
                f.write(r.block)
        cmd = ["tshark", "-r", str(sub), "-T", "fields", "-E", "separator=\t",
               "-e", "_ws.col.Source", "-e", "_ws.col.Destination", "-e", "_ws.col.Protocol",
               "-e", "frame.len", "-e", "_ws.col.Info"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    out = []
    for line in r.stdout.splitlines():
        src, dst, proto, ln, info = (line.split("\t") + [""] * 5)[:5]
        out.append(f"{src} -> {dst} {proto} {ln} {info}".strip())
    return out + [""] * (len(recs) - len(out))


def capture_of(run_dir):
    """run_dir/fabric.pcapng if there is one."""
    if run_dir is None:
        return None
    p = Path(run_dir) / "fabric.pcapng"
    return p if p.is_file() and p.stat().st_size > 0 else None


def write_subset(path, headers, recs):
    """A pcapng with the header blocks and these records (test fixtures)."""
    with open(path, "wb") as f:
        for h in headers:
            f.write(h)
        for r in recs:
            f.write(r.block)
