"""Host-side tests of ./hcasim trace and ./hcasim inspect (tools/hcasim),
over testbench/fixtures/trace-run: an excerpt of a real two-node run (IPoIB
ping, ibv_*_pingpong, perftest; cut by fixtures/cut-trace-fixture.py) with
the fabric capture's records of its packets.

Run by CTest, one test per class ("host: TraceSummary", ...), through
run_tests.py; by hand: testbench/host/run_tests.py test_trace.
"""
import contextlib
import io
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import tracemalloc
import unittest
import zlib
from pathlib import Path

from hcasim import cli, pcapng, trace_wqe
from hcasim import trace_parse as tp

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "testbench" / "fixtures" / "trace-run"
# The same cut of a run with typed events (trace format 2): guest test 07-ipoib.
FIXTURE2 = ROOT / "testbench" / "fixtures" / "trace-run-f2"
CAPTURE = FIXTURE / "fabric.pcapng"

# The fixture's work requests (fixtures/trace-run/README): node0 sends.
PING = {"node": "node0", "qpn": 0x104, "index": 0x10, "pkt": 0x10000000017}


def hcasim(*args):
    """Runs ./hcasim in process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    rc = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main([str(a) for a in args]) or 0
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 1
    return rc, out.getvalue(), err.getvalue()


def fetches(node):
    src = tp.resolve([FIXTURE], node=node)[0]
    return src, [e for e in src.events() if e.cat == "wqe" and e.ev == "fetch"]


SAMPLES_BIN = os.environ.get("HCASIM_TRACE_SAMPLES") or str(ROOT / "build" / "hca-model" / "hcasim-trace-samples")

# What a value of each schema type looks like in the trace.
VALUE_RE = {
    "u": r"\d+", "i": r"-?\d+", "x": r"0x[0-9a-f]+", "x2": r"0x[0-9a-f]{2,}", "x8": r"0x[0-9a-f]{8,}",
    "x16": r"0x[0-9a-f]{16}", "b": r"true|false", "s": r"\S+", "q": r'".*"', "n": r".+\(0x[0-9a-f]+\)",
    "hex": r"[0-9a-f]*", "gid": r"[0-9a-f:]+",
}


class TraceSchema(unittest.TestCase):
    """hca-model/trace-events is the one declaration of the trace: the
    model's generated emitters write exactly what it says, the Python parser
    reads it back field by field, and every event a tool names exists."""

    def test_emitters_write_the_schema(self):
        from hcasim import trace_events
        schema = trace_events.load()
        self.assertTrue(Path(SAMPLES_BIN).is_file(), f"{SAMPLES_BIN} not built")
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "hca.trace"
            subprocess.run([SAMPLES_BIN, str(path)], check=True)
            text = path.read_text()
        lines = text.splitlines()
        self.assertEqual(lines[0], f"# hcasim trace format {schema.format}")
        seen = []
        for line in lines[1:]:
            e = tp.parse_line(line)
            self.assertIsNotNone(e, line)
            d = schema.event(e.cat, e.ev)
            self.assertIsNotNone(d, f"not in the schema: {line}")
            self.assertEqual(e.seg, d.seg, line)
            seen.append(d.key)
            words = iter(e.words)
            for f in d.fields:
                if f.type == "w":
                    self.assertRegex(next(words), r"WORD_\d+", f"{d.key} {f.name}: {line}")
                elif f.type == "kv":
                    self.assertIsNotNone(e.get("k1"), f"{d.key} {f.name}: {line}")
                else:
                    self.assertIn(f.name, e.kv, f"{d.key}: field {f.name} missing: {line}")
                    self.assertRegex(e.get(f.name), rf"\A(?:{VALUE_RE[f.type]})\Z", f"{d.key} {f.name}: {line}")
            keys = [k for k in e.kv if k not in ("k1", "k2")]
            self.assertEqual(keys, [f.name for f in d.fields if f.type not in ("w", "kv")], line)
            self.assertEqual(e.reason, "sample reason" if d.reason else "", line)
        self.assertEqual(sorted(seen), sorted(schema.events), "every event exactly once")

    def test_tools_name_only_declared_events(self):
        """Each event name the tools compare against or filter lines by is
        declared (a renamed event breaks this test, not a tool silently)."""
        import ast
        from hcasim import trace_events
        schema = trace_events.load()
        names = {e.name for e in schema.events.values()}
        legacy = set()  # format 1 names a reader still accepts
        bad = []
        for py in sorted((ROOT / "tools" / "hcasim").glob("*.py")):
            tree = ast.parse(py.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Compare):
                    left = node.left
                    is_ev = (isinstance(left, ast.Name) and left.id == "ev") or (
                        isinstance(left, ast.Attribute) and left.attr == "ev")
                    if not is_ev:
                        continue
                    for c in node.comparators:
                        consts = c.elts if isinstance(c, (ast.Tuple, ast.Set, ast.List)) else [c]
                        for k in consts:
                            if isinstance(k, ast.Constant) and isinstance(k.value, str) and k.value not in names \
                                    and k.value not in legacy:
                                bad.append(f"{py.name}:{node.lineno}: {k.value!r}")
                elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("is_", "event_key"):
                    for k in node.args:
                        if isinstance(k, ast.Constant) and k.value not in schema.events:
                            bad.append(f"{py.name}:{node.lineno}: {k.value!r}")
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    # raw-line filters: " pkt send ", " eq eqe "
                    m = re.fullmatch(r" ([a-z_]+) ([a-z_]+) ", node.value)
                    if m and m.group(1) in schema.categories and m.group(0).strip() not in schema.events:
                        bad.append(f"{py.name}:{node.lineno}: {m.group(0)!r}")
        self.assertEqual(bad, [])

    def test_a_real_run_matches_the_schema(self):
        """Every line the model wrote in a real guest run (fixtures/trace-run-f2)
        is an event of the schema, with its fields as declared."""
        from hcasim import trace_events
        schema = trace_events.load()
        n = 0
        for src in tp.resolve([FIXTURE2]):
            self.assertEqual(src.format(), schema.format)
            for e in src.events():
                d = schema.event(e.cat, e.ev)
                self.assertIsNotNone(d, f"not in the schema: {e.line}")
                for f in d.fields:
                    if f.type in ("w", "kv") or (f.optional and f.name not in e.kv):
                        continue
                    self.assertRegex(e.get(f.name) or "", rf"\A(?:{VALUE_RE[f.type]})\Z", f"{d.key} {f.name}: {e.line}")
                n += 1
        self.assertGreater(n, 150)

    def test_format2_run_reads(self):
        """summary, follow and decode on the format-2 cut: no format note, the
        first ping followed across both nodes, its WQE decoded."""
        rc, out, err = hcasim("trace", "summary", FIXTURE2)
        self.assertEqual(rc, 0)
        self.assertNotIn("trace format", err + out)
        self.assertRegex(out, r"LSO|SEND")
        rc, out, _ = hcasim("trace", "follow", FIXTURE2, "--first-ping")
        self.assertEqual(rc, 0, out)
        for step in ("doorbell write", "WQE fetch", "packet sent", "send CQE", "packet received", "receive CQE"):
            self.assertIn(step, out)
        rc, out, _ = hcasim("trace", "decode", FIXTURE2, "0:54626")
        self.assertEqual(rc, 0, out)
        self.assertIn("datagram", out)
        self.assertIn("dqpn", out)
        rc, out, _ = hcasim("trace", "list", FIXTURE2, "--event", "wqe fetch", "--qpn", "0x102")
        self.assertEqual(rc, 0)
        self.assertIn("54626", out)
        rc, _, err = hcasim("trace", "list", FIXTURE2, "--event", "fetchh")
        self.assertNotEqual(rc, 0)

    def test_old_format_is_named(self):
        """A trace without the format line (an older hcasim's) is read, and
        the commands say its format is older."""
        rc, out, err = hcasim("trace", "summary", FIXTURE)
        self.assertEqual(rc, 0)
        self.assertIn("trace format 1 is older than this hcasim's", err + out)

    def test_schema_command(self):
        rc, out, _ = hcasim("trace", "schema", "--json")
        self.assertEqual(rc, 0)
        j = json.loads(out)
        self.assertTrue(any(e["category"] == "wqe" and e["event"] == "fetch" for e in j["events"]))
        self.assertEqual(j["names"]["wqe_opcode"]["0x25"], "UMR")
        self.assertNotIn("0xf", j["names"]["wqe_opcode"])  # no opcode the model lacks (WAIT)
        rc, out, _ = hcasim("trace", "schema")
        self.assertIn("fetch qpn:x index:x opcode:n", out)


class TraceParse(unittest.TestCase):
    def test_line(self):
        e = tp.parse_line("36001 24328093.910 wqe   data qpn=0x104 lkey=0x17e2e1 addr=0x562e1348e000 len=4096\n")
        self.assertEqual((e.seq, e.t, e.cat, e.ev, e.seg), (36001, 24328093910, "wqe", "data", True))
        self.assertEqual(e.int("len"), 4096)
        self.assertEqual(e.int("lkey"), 0x17e2e1)
        e = tp.parse_line("40 19120301.475 cmd done slot=0 opcode=ENABLE_HCA(0x104) status=OK(0x0) ns=6229")
        self.assertEqual(e.int("opcode"), 0x104)
        self.assertEqual(tp.vname(e.get("opcode")), "ENABLE_HCA")
        e = tp.parse_line("6 226.128 pkt drop id=0x800000000000001d: no QP 0x0")
        self.assertEqual(e.reason, "no QP 0x0")
        self.assertEqual(e.int("id"), 0x800000000000001d)
        self.assertIsNone(tp.parse_line("garbage"))
        self.assertIsNone(tp.parse_line("12 notatime cmd done"))

    def test_numbers(self):
        self.assertEqual(tp.psn_diff(0x000001, 0xffffff), 2)
        self.assertEqual(tp.psn_diff(0xffffff, 0x000001), -2)
        self.assertEqual(tp.parse_time("12.5s"), 12_500_000_000)
        self.assertEqual(tp.parse_time("37248180.479"), 37248180479)
        self.assertEqual(pcapng.comment_id("id=0x10000000018 port=1 fwd=2"), 0x10000000018)
        self.assertEqual(pcapng.comment_id("id=1099511627800 port=1 fwd=2"), 0x10000000018)  # older captures

    def test_sources_and_seek(self):
        srcs = tp.resolve([FIXTURE])
        self.assertEqual([s.name for s in srcs], ["node0", "node1"])
        s = srcs[0]
        evs = list(s.events())
        self.assertGreater(len(evs), 100)
        self.assertTrue(s.stats.gaps > 0, "an excerpt has seq gaps")
        self.assertTrue(any("gap" in n for n in s.stats.notes()))
        mid = evs[len(evs) // 2]
        self.assertEqual(next(tp.find_seq(s, mid.seq)).seq, mid.seq)
        self.assertEqual(next(tp.find_time(s, mid.t)).t, mid.t)
        self.assertEqual(tp.resolve([FIXTURE / "node1" / "hca.trace"])[0].name, "node1")

    def test_unplugged_devices_come_first(self):
        with tempfile.TemporaryDirectory() as d:
            nd = Path(d) / "node0"
            nd.mkdir()
            names = ["hca-unplugged-10.trace", "hca-unplugged-2.trace", "hca-unplugged-2.trace.1", "hca.trace.1",
                     "hca.trace"]
            for n in names:
                (nd / n).write_text(f"1 0.001 cmd done {n}\n")
            src = tp.resolve([Path(d)])[0]
            self.assertEqual([f.name for f in src.files],
                             ["hca-unplugged-2.trace.1", "hca-unplugged-2.trace", "hca-unplugged-10.trace",
                              "hca.trace.1", "hca.trace"])


class TraceSummary(unittest.TestCase):
    def test_fixture(self):
        rc, out, _ = hcasim("trace", "summary", FIXTURE)
        self.assertEqual(rc, 0)
        # Counted from the fixture by hand (grep -c): WQEs per opcode,
        # node0 / node1 / total.
        for row in EXPECTED_WQE_ROWS:
            self.assertRegex(out, row)
        self.assertIn("QPs (WQEs fetched", out)
        self.assertRegex(out, r"node0\s+0x104\s+UD\s")
        self.assertRegex(out, r"node1\s+0x104\s+UD\s")
        self.assertIn("EQs", out)
        self.assertRegex(out, r"errors: \d+")
        self.assertIn("gap(s) in seq", out)

    def test_faults(self):
        """Injected faults get their own table: kind, firings, the first
        firing's seq, how each ended, the spec as armed."""
        lines = [
            "1 10.000 fault armed id=1 kind=cmd-status cmd-status:opcode=CREATE_CQ,status=BAD_PARAM",
            "2 11.000 fault fired id=1 kind=cmd-status n=1 slot=0 opcode=CREATE_CQ(0x400) status=bad parameter(0x3)",
            "3 11.001 fault retired id=1 kind=cmd-status after 1 firing(s)",
            "4 11.002 cmd done slot=0 opcode=CREATE_CQ(0x400) op_mod=0x0 status=bad parameter(0x3) ns=1",
            "5 12.000 fault armed id=2 kind=lost-eqe lost-eqe:eqn=3,count=0",
            "6 13.000 fault fired id=2 kind=lost-eqe n=1 eqn=3 EQE type=0x0 sub_type=0x0 not written",
            "7 14.000 fault fired id=2 kind=lost-eqe n=2 eqn=3 EQE type=0x0 sub_type=0x0 not written",
            "8 15.000 fault cleared id=2 kind=lost-eqe matches=2 fired=2",
            "9 16.000 fault armed id=3 kind=health-stall health-stall",
            "10 16.001 fault fired id=3 kind=health-stall n=1 health counter stopped",
            "11 17.000 fault armed id=4 kind=cmd-drop cmd-drop:opcode=NOP",
        ]
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "node0" / "hca.trace"
            p.parent.mkdir()
            p.write_text("\n".join(lines) + "\n")
            rc, out, _ = hcasim("trace", "summary", d)
        self.assertEqual(rc, 0)
        self.assertIn("injected faults: 4, fired 4 times", out)
        self.assertRegex(out, r"node0\s+1\s+cmd-status\s+1\s+seq 2\s+retired\s+cmd-status:opcode=CREATE_CQ,status=BAD_PARAM")
        self.assertRegex(out, r"node0\s+2\s+lost-eqe\s+2\s+seq 6\s+cleared\s+lost-eqe:eqn=3,count=0")
        self.assertRegex(out, r"node0\s+3\s+health-stall\s+1\s+seq 10\s+fired\s+health-stall")
        self.assertRegex(out, r"node0\s+4\s+cmd-drop\s+0\s+-\s+armed\s+cmd-drop:opcode=NOP")
        self.assertRegex(out, r"command failed: CREATE_CQ")

    def test_streams(self):
        """A large trace is summarised without holding it in memory."""
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "node0" / "hca.trace"
            p.parent.mkdir()
            lines = (FIXTURE / "node0" / "hca.trace").read_text().splitlines()
            with open(p, "w") as f:
                seq = 1
                for rep in range(120):
                    for line in lines:
                        parts = line.split(" ", 1)
                        f.write(f"{seq} {parts[1]}\n")
                        seq += 1
            size = p.stat().st_size
            self.assertGreater(size, 2_000_000)
            tracemalloc.start()
            rc, out, _ = hcasim("trace", "summary", d)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            self.assertEqual(rc, 0)
            self.assertIn(f"{seq - 1} events", out)
            self.assertLess(peak, size / 2, f"summary held {peak} bytes for a {size}-byte trace")


class TraceList(unittest.TestCase):
    def test_filters(self):
        rc, out, _ = hcasim("trace", "list", FIXTURE, "--node", "0", "--qpn", "0x104")
        self.assertEqual(rc, 0)
        lines = out.splitlines()
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, r"\b(d)?qpn=0x104\b")
        rc, out, _ = hcasim("trace", "list", FIXTURE, "--opcode", "RDMA_READ")
        self.assertTrue(all(line.startswith(("node0 ", "node1 ")) for line in out.splitlines()))
        self.assertTrue(any(" wqe fetch " in line for line in out.splitlines()))
        self.assertTrue(all("RDMA_READ" in line for line in out.splitlines()))
        rc, out, _ = hcasim("trace", "list", FIXTURE, "--category", "cqe", "--node", "1")
        self.assertTrue(out and all(line.split()[2] == "cqe" for line in out.splitlines()))
        src, fs = fetches(0)
        t = fs[len(fs) // 2].t
        rc, out, _ = hcasim("trace", "list", FIXTURE, "--node", "0", "--since", tp.fmt_us(t - 20000), "--until",
                            tp.fmt_us(t + 20000))
        ts = [int(line.split()[1].replace(".", "")) for line in out.splitlines()]
        self.assertTrue(ts and min(ts) >= t - 20000 and max(ts) <= t + 20000, out)
        self.assertIn(fs[len(fs) // 2].line, out)
        rc, out, _ = hcasim("trace", "list", FIXTURE, "--node", "0", "--event", "pkt send", "-n", "2")
        self.assertEqual(len(out.splitlines()), 2)
        rc, out, _ = hcasim("trace", "list", FIXTURE, "--node", "0", "--cqn", "0x7", "--category", "eq")
        self.assertTrue(out and all("cqn=0x7" in line for line in out.splitlines()))


class TraceDecode(unittest.TestCase):
    def test_ping_wqe(self):
        rc, out, _ = hcasim("trace", "decode", FIXTURE, "--node", "0", "--qpn", "0x104", "--index", "0x10")
        self.assertEqual(rc, 0, out)
        self.assertIn("WQE SEND on qpn=0x104 (UD", out)
        self.assertRegex(out, r"\+0x000\s+ctrl\s+0000100a 00010405\s+opcode=SEND\(0x0a\)")
        self.assertRegex(out, r"\+0x010\s+datagram\s+-\s+dlid=3\s+unicast LID")
        self.assertIn("qkey=0xb1b", out)
        self.assertIn("IPoIB broadcast group Q_Key", out)
        self.assertRegex(out, r"\+0x040\s+data\s+-\s+byte_count=88")
        self.assertIn("= 5 DS = 80 bytes, every byte accounted for (2 WQEBBs)", out)
        self.assertIn(f"pkt send id=0x{PING['pkt']:x}", out)
        self.assertNotIn("unknown", out)

    def test_ipoib_offload_lso(self):
        """An IPoIB offload QP's large send, as the model traces it: the
        pad and the Ethernet segment with its inline header sit between
        the datagram segment and the gather list."""
        hdr = "0800000045000000123440004006" + "00" * 42
        lines = [
            "1 100.000 obj create_qp qpn=0x104 type=UD pd=2 sq=64x64B rq=16x64B rq_type=0 srqn=0x0 cqn_snd=0x2 "
            "cqn_rcv=0x2 uar=4 dbr=0x4996100 pages=4 uid=0",
            "2 100.100 wqe fetch qpn=0x104 index=0x10 opcode=LSO(0xe) opmod=0x0 ds=11 fence=0 ce=2 se=0 "
            "imm=0x00000000",
            f"3 100.101 wqe   eth qpn=0x104 cs_flags=0xc0 mss=1988 inline_hdr_sz=56 hdr={hdr}",
            "4 100.102 wqe   data qpn=0x104 lkey=0x1 addr=0x1000 len=5000",
            "5 100.103 wqe   datagram qpn=0x104 dlid=3 dqpn=0x104 qkey=0xb1b sl=0 grh=false",
            "6 100.104 wqe   lso qpn=0x104 index=0x10 segments=3 mss=1988 hdr_len=56 data=5000",
        ]
        with tempfile.TemporaryDirectory() as d:
            node = Path(d) / "node0"
            node.mkdir()
            (node / "hca.trace").write_text("\n".join(lines) + "\n")
            rc, out, _ = hcasim("trace", "decode", str(node / "hca.trace"), "2")
        self.assertEqual(rc, 0, out)
        self.assertIn("WQE LSO on qpn=0x104 (UD", out)
        self.assertRegex(out, r"\+0x010\s+datagram\s")
        self.assertRegex(out, r"\+0x040\s+eth_pad\s")
        self.assertRegex(out, r"\+0x050\s+eth\s+-\s+cs_flags=0xc0\s+checksums to compute: IPv4 header and TCP/UDP")
        self.assertIn("inline_hdr_sz=56", out)
        self.assertRegex(out, r"\+0x0a0\s+data\s+-\s+byte_count=5000")
        self.assertIn("= 11 DS = 176 bytes, every byte accounted for (3 WQEBBs)", out)
        self.assertNotIn("unknown", out)

    def test_atomic_and_read(self):
        src, fs = fetches(0)
        fa = next(f for f in fs if "ATOMIC_FA" in f.line)
        rc, out, _ = hcasim("trace", "decode", FIXTURE, f"0:{fa.seq}")
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"\+0x010\s+raddr\s")
        self.assertRegex(out, r"\+0x020\s+atomic\s+\S+\s+swap_add=0x1\s")
        self.assertRegex(out, r"\+0x030\s+data\s")
        rd = next(f for f in fs if "RDMA_READ" in f.line)
        rc, out, _ = hcasim("trace", "decode", FIXTURE, "--node", "0", str(rd.seq))
        self.assertRegex(out, r"\+0x010\s+raddr\s+-\s+raddr=0x[0-9a-f]+\s+remote virtual address")
        # A WQE written through BlueFlame: its bytes are in the trace.
        bf = next(e for e in src.events() if e.cat == "wqe" and e.ev == "blueflame" and e.int("qpn") != 0x100)
        rc, out, _ = hcasim("trace", "decode", FIXTURE, "--node", "0", str(bf.seq + 1))
        self.assertIn("posted: BlueFlame copy", out)
        self.assertIn("executed from the BlueFlame write", out)
        self.assertRegex(out, r"\+0x010\s+data\s+[0-9a-f]{8} [0-9a-f]{8} [0-9a-f]{8} [0-9a-f]{8}\s+byte_count=")

    def test_every_wqe_decodes(self):
        """Every WQE the pingpongs and perftest posted decodes completely:
        no unknown field, every DS byte accounted for."""
        n = 0
        kinds = set()
        for node in (0, 1):
            src = tp.resolve([FIXTURE], node=node)[0]
            for w in trace_wqe.wqes(src):
                self.assertEqual(trace_wqe.unknowns(w), [], f"{w.node} seq {w.fetch.seq}")
                full = trace_wqe.collect(src, w.fetch.seq)
                text = "\n".join(trace_wqe.render(full))
                self.assertNotIn("unknown", text, text)
                kinds.add((w.qp_type, w.opcode))
                n += 1
        self.assertGreater(n, 10)
        for k in (("UD", "SEND"), ("RC", "SEND"), ("RC", "RDMA_WRITE"), ("RC", "RDMA_READ"), ("RC", "ATOMIC_FA"),
                  ("RC", "ATOMIC_CS"), ("REG_UMR", "UMR"), ("UC", "SEND")):
            self.assertIn(k, kinds)

    def test_not_a_wqe(self):
        src, fs = fetches(0)
        rc, _, err = hcasim("trace", "decode", FIXTURE, f"0:{fs[0].seq}", "--node", "0")
        self.assertEqual(rc, 0)
        first = next(tp.find_seq(src, 1))
        rc, _, err = hcasim("trace", "decode", FIXTURE, f"0:{first.seq}")
        self.assertEqual(rc, 1)
        self.assertIn("is not a WQE", err)
        rc, _, err = hcasim("trace", "decode", FIXTURE, str(fs[0].seq))
        self.assertIn("SEQ is per node", err)


def steps(out):
    """(label, node) of the follow table, in order."""
    rows = []
    for line in out.splitlines():
        m = re.match(r"\s*\d+\s{2}(.+?)\s{2,}(node\d)\s+\d+\s", line)
        if m:
            rows.append((m.group(1).strip(), m.group(2)))
    return rows


class TraceFollow(unittest.TestCase):
    def test_first_ping(self):
        rc, out, _ = hcasim("trace", "follow", FIXTURE, "--first-ping")
        self.assertEqual(rc, 0, out)
        self.assertIn(f"follow: node0 qpn=0x{PING['qpn']:x} (UD) WQE 0x{PING['index']:x} SEND", out)
        got = steps(out)
        want = [("doorbell write", "node0"), ("SQ doorbell", "node0"), ("doorbell record", "node0"),
                ("WQE fetch", "node0"), ("packet sent", "node0"), ("send CQE", "node0"), ("EQE", "node0"),
                ("interrupt", "node0"), ("packet received", "node1"), ("receive CQE", "node1"), ("EQE", "node1"),
                ("interrupt", "node1")]
        self.assertEqual(sorted(got), sorted(want), out)
        # In time order, each node's own steps keep their order.
        for node in ("node0", "node1"):
            self.assertEqual([s for s in got if s[1] == node], [s for s in want if s[1] == node])
        self.assertRegex(out, r"clock: node1 = node0 [+-] \d+\.\d{3} us")
        self.assertRegex(out, r"from the doorbell write: first packet sent \+\d+\.\d{3} us")
        # Step latencies: same-node steps never go back in time.
        for line in out.splitlines():
            m = re.match(r"\s*\d+\s{2}.+?\s{2,}node0\s+\d+\s+\d+\.\d+\s+(\S+)", line)
            if m and m.group(1).startswith(("+", "-")):
                self.assertTrue(m.group(1).startswith("+"), line)
        if shutil.which("tshark"):
            self.assertRegex(out, r"wire: fabric\.pcapng frame \d+ \[port=\d fwd=\d\] 192\.168\.77\.1 -> "
                                  r"192\.168\.77\.2 ICMP \d+ Echo \(ping\) request")
            self.assertIn("ICMP echo request #1 in fabric.pcapng", out)

    def test_rc_send_with_ack(self):
        src, fs = fetches(0)
        f = next(x for x in fs if "SEND(0xa)" in x.line and " ds=2 " in x.line
                 and trace_wqe.collect(src, x.seq).qp_type == "RC")
        rc, out, _ = hcasim("trace", "follow", FIXTURE, f"0:{f.seq}", "--no-wire")
        self.assertEqual(rc, 0, out)
        labels = [s[0] for s in steps(out)]
        for label in ("WQE fetch", "packet sent", "packet received", "receive CQE", "ACK scheduled", "response sent",
                      "response received", "ACK processed", "send CQE"):
            self.assertIn(label, labels, out)
        self.assertLess(labels.index("packet sent"), labels.index("response received"))
        self.assertLess(labels.index("ACK processed"), labels.index("send CQE"))

    def test_read(self):
        src, fs = fetches(0)
        f = next(x for x in fs if "RDMA_READ" in x.line)
        rc, out, _ = hcasim("trace", "follow", FIXTURE, "--node", "0", str(f.seq), "--no-wire")
        self.assertIn("RDMA_READ_REQUEST", out)
        self.assertIn("RDMA_READ_RESPONSE", out)
        labels = [s[0] for s in steps(out)]
        self.assertEqual(labels[-1] if labels[-1] != "CQ armed" else labels[-2], "send CQE")

    def test_by_packet(self):
        rc, out, _ = hcasim("trace", "follow", FIXTURE, "--pkt", hex(PING["pkt"]), "--no-wire")
        self.assertEqual(rc, 0, out)
        self.assertIn(f"WQE 0x{PING['index']:x} SEND", out)


@unittest.skipUnless(shutil.which("tshark"), "tshark is not installed")
class TraceWire(unittest.TestCase):
    def test_capture(self):
        found, headers = pcapng.find(CAPTURE, [PING["pkt"]])
        self.assertEqual(len(found[PING["pkt"]]), 1)
        self.assertTrue(found[PING["pkt"]][0].comment.startswith(f"id=0x{PING['pkt']:x} "))
        lines = pcapng.tshark_lines(headers, found[PING["pkt"]])
        self.assertIn("Echo (ping) request", lines[0])
        rc, out, _ = hcasim("trace", "wire", FIXTURE, "--id", hex(PING["pkt"]))
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, rf"frame \d+\s+id=0x{PING['pkt']:x} .*ICMP.*Echo \(ping\) request")
        rc, out, _ = hcasim("trace", "wire", FIXTURE, "--node", "0", "--qpn", "0x104")
        self.assertRegex(out, r"\d+ record\(s\)")

    def test_every_traced_packet_is_in_the_capture(self):
        """Packets that crossed the fabric carry the same id in both device
        traces and in the capture."""
        ids = set()
        for s in tp.resolve([FIXTURE]):
            for e in s.events():
                if e.cat == "pkt" and e.ev == "send" and e.int("dlid") and e.int("dlid") < 0xc000 \
                        and (e.int("id") >> 63) == 0:
                    ids.add(e.int("id"))
        found, _ = pcapng.find(CAPTURE, ids)
        self.assertTrue(ids)
        self.assertEqual(ids - set(found), set())


class TracePerfetto(unittest.TestCase):
    def test_json(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "t.json"
            rc, _, err = hcasim("trace", "export", FIXTURE, "--perfetto", out)
            self.assertEqual(rc, 0, err)
            data = json.loads(out.read_text())
        ev = data["traceEvents"]
        procs = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
        self.assertEqual(sorted(procs.values()), ["node0", "node1"])
        threads = {(procs[e["pid"]], e["args"]["name"]) for e in ev if e.get("name") == "thread_name"}
        for t in (("node0", "QP 0x104 UD"), ("node1", "QP 0x104 UD"), ("node0", "QP 0x105 RC"), ("node0", "EQ 4"),
                  ("node1", "EQ 3")):
            self.assertIn(t, threads)
        wqes = [e for e in ev if e.get("cat") == "wqe"]
        self.assertTrue(wqes and all(e["ph"] == "X" and e["dur"] > 0 for e in wqes))
        for e in ev:
            if e["ph"] != "M":
                self.assertIsInstance(e["ts"], float)
        starts = {e["id"]: e["pid"] for e in ev if e["ph"] == "s"}
        ends = {e["id"]: e["pid"] for e in ev if e["ph"] == "f"}
        crossing = [i for i in starts if i in ends and starts[i] != ends[i]]
        self.assertIn(f"0x{PING['pkt']:x}", crossing)
        self.assertIn("node1", data["otherData"]["clock_offsets_ns"])


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*args, timeout=120):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           "--virtual-time-budget=10000", "--window-size=1400,1000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def rendered(dom):
    """What the test asserts of the rendered report: the JavaScript drew
    the timeline into the DOM. An empty list when it did."""
    problems = []
    if 'data-rendered="ok"' not in dom:
        problems.append("body has no data-rendered=ok (the script did not finish)")
    lanes = re.findall(r'<g class="lane" data-lane="([^"]+)" data-node="(node\d)"', dom)
    if len(lanes) < 4:
        problems.append(f"{len(lanes)} lanes drawn")
    if not re.search(r'<rect class="wqe[ "]', dom):
        problems.append("no WQE drawn")
    if not re.search(r'<rect class="pkt send"', dom) or not re.search(r'<rect class="pkt recv"', dom):
        problems.append("no packets drawn")
    if not re.search(r'<line class="flow"', dom):
        problems.append("no packet flow between the nodes")
    m = re.search(r'id="timeline-status"[^>]*>(\d+) items in (\d+) lanes', dom)
    if not m or int(m.group(1)) == 0:
        problems.append("status line not written")
    return problems


def png_info(path):
    """(width, height, distinct byte values of the decompressed image)."""
    b = Path(path).read_bytes()
    if b[:8] != b"\x89PNG\r\n\x1a\n":
        raise AssertionError("not a PNG")
    i, idat = 8, b""
    w = h = 0
    while i < len(b):
        ln, kind = struct.unpack(">I4s", b[i:i + 8])
        data = b[i + 8:i + 8 + ln]
        if kind == b"IHDR":
            w, h = struct.unpack(">II", data[:8])
        elif kind == b"IDAT":
            idat += data
        i += 12 + ln
    raw = zlib.decompress(idat)
    return w, h, len(set(raw[: 1 << 20]))


@unittest.skipUnless(CHROMIUM, "chromium is not installed (apt-get install chromium)")
class TraceHtml(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.html = Path(cls.dir.name) / "report.html"
        rc, _, err = hcasim("trace", "export", FIXTURE, "--html", cls.html)
        assert rc == 0, err

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_self_contained(self):
        text = self.html.read_text()
        self.assertNotRegex(text, r"<script[^>]+src=|<link[^>]+href=|@import|url\(http")
        self.assertNotRegex(text.replace("http://www.w3.org/2000/svg", ""), r"https?://")
        self.assertIn("<h3>QPs", text)
        self.assertIn("Errors and anomalies", text)

    def test_renders(self):
        r = chromium("--dump-dom", self.html.as_uri())
        self.assertEqual(rendered(r.stdout), [], r.stderr[-2000:])
        dom = r.stdout
        lanes = re.findall(r'<g class="lane" data-lane="([^"]+)" data-node="(node\d)"', dom)
        self.assertIn(("QP 0x104 UD", "node0"), lanes)
        self.assertIn(("QP 0x104 UD", "node1"), lanes)

    def test_screenshot(self):
        png = Path(self.dir.name) / "report.png"
        r = chromium(f"--screenshot={png}", self.html.as_uri())
        self.assertTrue(png.is_file(), r.stderr[-2000:])
        w, h, distinct = png_info(png)
        self.assertEqual((w, h), (1400, 1000))
        self.assertGreater(distinct, 20, "the screenshot is blank")

    def test_broken_page_fails(self):
        """The check is not vacuous: the same report with its script broken
        fails it."""
        bad = Path(self.dir.name) / "broken.html"
        bad.write_text(self.html.read_text().replace("JSON.parse(document", "JSON.parse(undefinedVariable, document"))
        r = chromium("--dump-dom", bad.as_uri())
        self.assertTrue(r.stdout)
        self.assertNotEqual(rendered(r.stdout), [])


class FakeQmp(threading.Thread):
    """A QMP server with an mlx5-hca at /machine/peripheral/hca0."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.filter = "all"
        self.commands = []

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                f = c.makefile("rwb")
                f.write(b'{"QMP": {"version": {"qemu": {"major": 7}}, "capabilities": []}}\n')
                f.flush()
                for line in f:
                    m = json.loads(line)
                    self.commands.append(m)
                    cmd, args = m["execute"], m.get("arguments", {})
                    # An asynchronous event first: the client must skip it.
                    f.write(b'{"event": "RTC_CHANGE", "data": {"offset": 0}}\n')
                    if cmd == "qom-get" and args.get("path") == "/machine/peripheral/hca0":
                        v = self.filter if args["property"] == "trace-filter" else \
                            "mlx5-hca node_guid=0x0002c90300a00001\nQPs: 1\n  qpn=0x104 UD RTS\n"
                        r = {"return": v}
                    elif cmd == "qom-set" and args.get("property") == "trace-filter":
                        if "bogus" in args["value"]:
                            r = {"error": {"class": "GenericError", "desc": "mlx5-hca: bad trace filter"}}
                        else:
                            self.filter = args["value"]
                            r = {"return": {}}
                    elif cmd == "qmp_capabilities":
                        r = {"return": {}}
                    else:
                        r = {"error": {"class": "CommandNotFound", "desc": cmd}}
                    f.write(json.dumps(r).encode() + b"\n")
                    f.flush()


class Inspect(unittest.TestCase):
    def test_inspect(self):
        with tempfile.TemporaryDirectory() as d:
            run = Path(d) / "20990101-000000-run"
            (run / "node0").mkdir(parents=True)
            sock = Path(d) / "node0.qmp"
            srv = FakeQmp(sock)
            srv.start()
            # What a guest can write (the shared run tree) names nothing;
            # only the host-only side does.
            (run / "node0" / "qmp-socket").write_text("/nonexistent/planted.qmp\n")
            rc, _, err = hcasim("inspect", "0", "--run", run)
            self.assertEqual(rc, 1)
            self.assertIn("not running", err)
            (Path(d) / "20990101-000000-run.host").mkdir()
            (Path(d) / "20990101-000000-run.host" / "node0.qmp-socket").write_text(f"{sock}\n")
            rc, out, err = hcasim("inspect", "0", "--run", run)
            self.assertEqual(rc, 0, err)
            self.assertIn("trace-filter=all", out)
            self.assertIn("qpn=0x104 UD RTS", out)
            rc, out, err = hcasim("inspect", "node0", "--run", run, "--trace-filter", "wqe,cqe,qpn=0x104")
            self.assertEqual(rc, 0, err)
            self.assertIn("trace-filter 'all' -> 'wqe,cqe,qpn=0x104'", out)
            self.assertEqual(srv.filter, "wqe,cqe,qpn=0x104")
            rc, _, err = hcasim("inspect", "0", "--run", run, "--trace-filter", "bogus")
            self.assertEqual(rc, 1)
            self.assertIn("bad trace filter", err)
            self.assertTrue(all(c["execute"] != "quit" for c in srv.commands))
            srv.sock.close()
            # Not running: the socket is gone.
            os.unlink(sock)
            rc, _, err = hcasim("inspect", "0", "--run", run)
            self.assertEqual(rc, 1)
            self.assertIn("not running", err)


# Rows of the summary's "WQEs fetched per opcode" table for the fixture
# (opcode, node0, node1, total).
EXPECTED_WQE_ROWS = [r"\n  ATOMIC_CS\s+1\s+0\s+1\n", r"\n  ATOMIC_FA\s+1\s+0\s+1\n", r"\n  NOP\s+1\s+0\s+1\n",
                     r"\n  RDMA_READ\s+1\s+0\s+1\n", r"\n  RDMA_WRITE\s+1\s+1\s+2\n", r"\n  SEND\s+6\s+1\s+7\n",
                     r"\n  UMR\s+1\s+0\s+1\n"]
