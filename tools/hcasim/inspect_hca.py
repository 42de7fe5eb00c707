"""./hcasim inspect NODE: the live state of a running VM's HCA, read over
QMP from the mlx5-hca device's QOM properties (docs/TRACING.md):

  info           read-only: EQs, CQs, QPs (type, state, PSNs, indices,
                 outstanding WQEs), SRQs, mkeys, port, counters
  trace-filter   read/write: trace categories and scope (qpn=, cqn=)

vm.py writes the QMP socket's path to <run>.host/node<i>.qmp-socket (the
host-only side of the run, which no guest can rewrite) when it starts the
node; the socket itself lives while QEMU runs.
"""
import json
import socket
import sys
import time
from pathlib import Path

from hcasim import rundir
from hcasim.common import RUNS, die

DEVICE_PATH = "/machine/peripheral/hca0"  # -device mlx5-hca,id=hca0 (vm.py)


class QmpError(Exception):
    pass


class Qmp:
    """A minimal QMP client: one unix socket, line-delimited JSON."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        try:
            self.sock.connect(str(path))
        except OSError:
            self.sock.close()
            raise
        self.buf = b""
        greeting = self._read()
        if "QMP" not in greeting:
            raise QmpError(f"not a QMP greeting: {greeting}")
        self.execute("qmp_capabilities")

    def _read(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise QmpError("QMP connection closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return json.loads(line)

    def execute(self, cmd, **args):
        msg = {"execute": cmd}
        if args:
            msg["arguments"] = args
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            r = self._read()
            if "event" in r:
                continue  # asynchronous events are not replies
            if "error" in r:
                raise QmpError(f"{cmd}: {r['error'].get('desc', r['error'])}")
            return r.get("return")

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def socket_of(run_dir, node):
    """The QMP socket path recorded for node of run_dir, if it exists."""
    f = rundir.host_side(run_dir) / f"node{node}.qmp-socket"
    if not f.is_file():
        return None
    p = Path(f.read_text().strip())
    return p if p.exists() else None


def live_runs(node):
    """[(run dir, socket)] of the runs whose node<NODE> is running, newest
    first."""
    name = f"node{node}"
    runs = sorted((d for d in RUNS.iterdir() if d.is_dir() and not d.name.endswith(".host")),
                  key=lambda d: d.name, reverse=True) if RUNS.is_dir() else []
    out = []
    for d in runs:
        sock = socket_of(d, node)
        if sock:
            out.append((d, sock))
    return out


def find_run(node, run=None, write=False):
    """The run directory and QMP socket of NODE: in RUN, or in the newest
    run whose node<NODE> is still running. A change (write) needs the run
    to be unambiguous: other people's VMs may be running too."""
    name = f"node{node}"
    if run:
        d = Path(run)
        if not d.is_dir():
            die(f"{d}: no such run directory")
        sock = socket_of(d, node)
        if not sock:
            die(f"{d / name}: not running (no live QMP socket; {rundir.host_side(d) / (name + '.qmp-socket')} "
                f"names the socket while QEMU runs)")
        return d, sock
    live = live_runs(node)
    if not live:
        die(f"no running {name}: no run in {RUNS} has a live {name}.qmp-socket (start one with ./hcasim run or "
            f"boot)")
    if write and len(live) > 1:
        die(f"{len(live)} runs have a running {name} ({', '.join(d.name for d, _ in live)}): say which with --run "
            f"before changing its trace filter")
    if len(live) > 1:
        print(f"# {len(live) - 1} other run(s) with a running {name}: "
              f"{', '.join(d.name for d, _ in live[1:])} (--run DIR picks one)", file=sys.stderr)
    return live[0]


def parse_node(text):
    t = text[4:] if text.startswith("node") else text
    if not t.isdigit():
        die(f"not a node: {text!r} (0, 1, ... or node0, node1, ...)")
    return int(t)


def main(a):
    node = parse_node(a.node)
    run_dir, sock = find_run(node, a.run, write=a.trace_filter is not None)
    try:
        with Qmp(sock) as q:
            if a.trace_filter is not None:
                old = q.execute("qom-get", path=DEVICE_PATH, property="trace-filter")
                q.execute("qom-set", path=DEVICE_PATH, property="trace-filter", value=a.trace_filter)
                new = q.execute("qom-get", path=DEVICE_PATH, property="trace-filter")
                print(f"node{node} ({run_dir.name}): trace-filter {old!r} -> {new!r}")
                if not a.info:
                    return 0
            while True:
                filt = q.execute("qom-get", path=DEVICE_PATH, property="trace-filter")
                info = q.execute("qom-get", path=DEVICE_PATH, property="info")
                print(f"# node{node} of {run_dir}  {time.strftime('%H:%M:%S')}  trace-filter={filt}")
                sys.stdout.write(info if info.endswith("\n") else info + "\n")
                sys.stdout.flush()
                if not a.watch:
                    return 0
                time.sleep(a.watch)
                print()
    except (OSError, QmpError) as e:
        die(f"node{node}: QMP {sock}: {e}")


def register(sub):
    s = sub.add_parser("inspect", help="live state of a running VM's HCA (EQs, CQs, QPs, SRQs, mkeys, counters); "
                       "change its trace filter")
    s.add_argument("node", help="node number (0, 1, ...) or node<N>")
    s.add_argument("--run", help="run directory (default: the newest run where the node is running)")
    s.add_argument("--trace-filter", metavar="F",
                   help="set the device trace filter now, e.g. 'all,-uar', 'wqe,cqe,pkt,qpn=0x104,cqn=0x7', 'none'")
    s.add_argument("--info", action="store_true", help="with --trace-filter: print the state as well")
    s.add_argument("--watch", type=float, metavar="S", help="print again every S seconds (Ctrl-C stops)")
    s.set_defaults(func=main)
