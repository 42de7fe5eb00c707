"""./hcasim fault: inject faults into a running VM's HCA or its link (docs/FAULTS.md).

  ./hcasim fault --list                     every fault kind, its arguments
  ./hcasim fault NODE KIND[:key=value,...]  arm a fault on node NODE now
  ./hcasim fault NODE --show                the faults armed there
  ./hcasim fault NODE --clear [ID]          clear one or all

A device fault goes to the device's "fault" QOM property over QMP, the
same path as `--fault KIND[:...]` at boot (the device's fault= property)
and as `hca_fault` in a guest test (through the run's control relay). The
model checks the spec; the device trace ("fault" category) records every
fault armed, fired and cleared.

A PCI fault (pci_fault.PCI_KINDS: the HCA unplugged from its slot and
plugged in again) is QMP device_del/device_add on the node's QEMU.

A link fault (LINK_KINDS: the node's link, the subnet manager, loss and
partitions on the fabric) becomes a command on the fabric's control
socket for the node's switch port (node N is on port N+1; <run>.host/
fabric-control names the socket); the fabric log
records it and `ports`/`stats` show its counters.
"""
import subprocess
import sys
from pathlib import Path

from hcasim import inspect_hca, pci_fault, rundir
from hcasim.fabric_ctl import fabric_command
from hcasim.common import BUILD, die

FAULT_TOOL = BUILD / "hca-model" / "hcasim-fault"


def tool():
    if not FAULT_TOOL.exists():
        die(f"{FAULT_TOOL} is not built (./hcasim build)")
    return str(FAULT_TOOL)


# Link kinds: KIND -> (arguments with their defaults, None if required;
# the fabric command; what it does). {port} is the node's switch port.
LINK_KINDS = {
    "link-down": ({}, "link {port} down",
                  "the switch port of the node disabled: the HCA's port goes Down (Polling) until link-up"),
    "link-up": ({}, "link {port} up", "the node's link enabled again: LinkUp, Init, the SM makes it Active"),
    "link-flap": ({"ms": "2000"}, "link {port} flap {ms}", "link-down now, link-up ms later"),
    "link-retrain": ({}, "link {port} retrain",
                     "the link retrains (LinkDown, Polling, LinkUp): the port goes Down, Init, Active"),
    "client-rereg": ({}, "sm rereg {port}",
                     "the SM sets ClientReregister in the port's PortInfo (IBA 14.4.11): clients join again"),
    "lid-change": ({}, "sm lid {port}",
                   "the SM gives the port its other LID (switch port + 1, or that + the number of ports): the old "
                   "LID is no longer routed"),
    "pkey-change": ({"pkeys": None}, "sm pkeys {port} {pkeys}",
                    "the SM sets the port's P_Key table: pkeys=0x8001+0xffff in index order (IPoIB's ib0 takes index 0)"),
    "sm-down": ({}, "sm stop", "the subnet manager is gone (fabric-wide): no sweeps, no SA answers, ports stay up"),
    "sm-up": ({}, "sm start", "a subnet manager again (fabric-wide): it sweeps, every port reregisters"),
    "drop": ({"pct": None, "scope": "all"}, "drop {port} {pct} {scope}",
             "pct% of the packets on the node's link are lost (scope=requests: ACKs and responses spared)"),
    "corrupt": ({"pct": None}, "corrupt {port} {pct}", "pct% of the packets get a flipped bit (their CRC drops them)"),
    "delay": ({"us": None}, "delay {port} {us}", "packets towards the node wait us microseconds (in order)"),
    "duplicate": ({"pct": None}, "duplicate {port} {pct}", "pct% of the packets towards the node arrive twice"),
    "reorder": ({"pct": None}, "reorder {port} {pct}",
                "pct% of the packets towards the node are overtaken by the next one"),
    "partition": ({"with": None}, "partition {port} {with}",
                  "the node and the nodes with=N[+M...] cannot reach each other; links and SM unaffected"),
    "link-clear": ({}, None, "every link fault of the node off (loss, delay, duplicates, reordering), its link up, "
                   "no partition"),
}


def kinds():
    out = subprocess.run([tool(), "kinds"], check=True, capture_output=True, text=True).stdout
    out += "\nlink kinds (the fabric, for the node's switch port; not at boot):\n"
    for kind, (args, _, what) in LINK_KINDS.items():
        a = " ".join(f"{k}=" if v is None else f"[{k}={v}]" for k, v in args.items())
        out += f"{kind:<14} link   {a:<18} {what}\n"
    out += "\npci kinds (QEMU's PCI Express hot-plug of the node's slot; not at boot):\n" + pci_fault.describe()
    return out


def link_kind(spec):
    """The link kind spec names, or None for a device kind."""
    kind = spec.split(":", 1)[0]
    return kind if kind in LINK_KINDS else None


def fabric_lines(node, spec):
    """The fabric commands a link fault spec becomes for node (ValueError on
    a bad spec)."""
    kind, _, rest = spec.partition(":")
    want, template, _ = LINK_KINDS[kind]
    got = {}
    for kv in filter(None, rest.split(",")):
        k, eq, v = kv.partition("=")
        if not eq or k not in want or not v or not all(c.isalnum() or c in ".+-" for c in v):
            raise ValueError(f"{kind}: bad argument {kv!r} (takes {', '.join(want) or 'none'})")
        got[k] = v
    args = {k: got.get(k, d) for k, d in want.items()}
    missing = [k for k, v in args.items() if v is None]
    if missing:
        raise ValueError(f"{kind}: needs {', '.join(k + '=' for k in missing)}")
    port = node + 1
    if kind == "link-clear":
        return ([f"{k} {port} 0" for k in ("drop", "corrupt", "delay", "duplicate", "reorder")] +
                [f"link {port} up", "partition clear"])
    if "with" in args:
        peers = args["with"].split("+")
        if not all(p.isdigit() for p in peers) or str(node) in peers:
            raise ValueError(f"partition: with= names other nodes, e.g. with=1 or with=1+2")
        args["with"] = ",".join(str(int(p) + 1) for p in peers)
    if "pkeys" in args:
        args["pkeys"] = args["pkeys"].replace("+", ",")
    return [template.format(port=port, **args)]


def fabric_fault(node, spec, send):
    """Runs a link fault on the fabric through send(line) -> reply; returns
    (ok, text)."""
    try:
        lines = fabric_lines(node, spec)
    except ValueError as e:
        return False, str(e)
    for line in lines:
        reply = send(line)
        if not reply.rstrip().endswith("ok"):
            return False, f"fabric: {line}: {reply.strip()}"
    return True, f"link fault {spec} on node{node} (switch port {node + 1}): {'; '.join(lines)}\n"


def fabric_socket(run_dir):
    """The fabric control socket of a running run (vm.py records it on the
    run's host-only side), or None."""
    f = rundir.host_side(run_dir) / "fabric-control"
    p = Path(f.read_text().strip()) if f.is_file() else None
    return p if p and p.exists() else None


def check_specs(specs, what="--fault"):
    """Dies with the model's message if a fault spec is bad (before any VM
    boots, or before QMP is asked)."""
    if not specs:
        return
    for s in specs:
        if ";" in s:
            die(f"{what} {s!r}: one fault at a time (';' separates them in the device property)")
        if pci_fault.pci_kind(s) and what == "--fault":
            die(f"--fault {s!r}: a PCI kind acts on a running VM: ./hcasim fault NODE {s}")
        if link_kind(s) and what == "--fault":
            die(f"--fault {s!r}: a link kind acts on a running fabric: ./hcasim fault NODE {s}, or hca_fault in a "
                f"guest test (the fabric's --drop-pct/--corrupt-pct/--delay-us set loss from the start)")
    r = subprocess.run([tool(), "check", *specs], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{what}: {r.stderr.strip()}")


def device_property(specs):
    """The device's fault= value for QEMU's -device option: faults joined by
    ';', commas doubled (QEMU's option escaping)."""
    return ";".join(specs).replace(",", ",,")


def qmp_fault(sock, command):
    """Runs one fault command on the node behind sock; returns (ok, text)."""
    with inspect_hca.Qmp(sock) as q:
        if command == "list":
            return True, _strip_ok(q.execute("qom-get", path=inspect_hca.DEVICE_PATH, property="fault"))
        try:
            q.execute("qom-set", path=inspect_hca.DEVICE_PATH, property="fault", value=command)
        except inspect_hca.QmpError as e:
            return False, str(e)
        listed = q.execute("qom-get", path=inspect_hca.DEVICE_PATH, property="fault")
        return True, _strip_ok(listed)


def _strip_ok(text):
    return text[3:] if text.startswith("ok\n") else text


def main(a):
    if a.list:
        sys.stdout.write(kinds())
        return 0
    if a.node is None:
        die("name a node (./hcasim fault NODE KIND[:...]), or --list")
    node = inspect_hca.parse_node(a.node)
    if a.show:
        command = "list"
    elif a.clear is not None:
        command = "clear" if a.clear == "all" else f"clear {a.clear}"
    elif a.spec:
        if not link_kind(a.spec) and not pci_fault.pci_kind(a.spec):
            check_specs([a.spec], what="fault")
        command = a.spec
    else:
        die("say what to do: a fault KIND[:key=value,...], --show or --clear")
    run_dir, sock = inspect_hca.find_run(node, a.run, write=command != "list")
    if link_kind(command):
        ctl = fabric_socket(run_dir)
        if not ctl:
            die(f"{run_dir}: no running fabric (no live socket named by "
                f"{rundir.host_side(run_dir) / 'fabric-control'})")
        ok, text = fabric_fault(node, command, lambda line: fabric_command(ctl, line))
        if not ok:
            die(f"node{node}: {text}")
        sys.stdout.write(text)
        return 0
    try:
        if pci_fault.pci_kind(command):
            ok, text = pci_fault.pci_fault(sock, run_dir, node, command)
        else:
            ok, text = qmp_fault(sock, command)
    except (OSError, inspect_hca.QmpError) as e:
        die(f"node{node}: QMP {sock}: {e}")
    if not ok:
        die(f"node{node}: {text}")
    if command != "list":
        print(f"node{node} ({run_dir.name}): {command}")
    if not text.strip():
        text = "(no fault armed)"
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if command == "list":
        sys.stdout.write(link_state(run_dir, node))
    return 0


def link_state(run_dir, node):
    """The fault knobs and counters of the node's switch port, and the
    partitions, as the fabric reports them ("" without a fabric)."""
    ctl = fabric_socket(run_dir)
    if not ctl:
        return ""
    try:
        ports = fabric_command(ctl, "ports")
    except OSError:
        return ""
    out = ""
    for line in ports.splitlines():
        if line.startswith(f"port {node + 1}:"):
            keep = ("phys=", "state=", "link_downed=", "fault_", "partition_", "drop=", "corrupt=", "delay=",
                    "duplicate=", "reorder=")
            out += f"link (switch port {node + 1}): " + " ".join(w for w in line.split()[2:] if w.startswith(keep))
            out += "\n"
        elif line.startswith("partition:"):
            out += line + "\n"
    return out


def register(sub):
    s = sub.add_parser("fault", help="inject a fault into a running VM's HCA (command status, error CQE, "
                       "lost EQE, health syndrome, events ...) or its link (down, flap, SM gone, loss, "
                       "partition ...); --list shows every kind")
    s.add_argument("node", nargs="?", help="node number (0, 1, ...) or node<N>")
    s.add_argument("spec", nargs="?", help="KIND[:key=value,...], e.g. cmd-status:opcode=CREATE_CQ,status=BAD_PARAM")
    s.add_argument("--list", action="store_true", help="every fault kind with its arguments and triggers")
    s.add_argument("--show", action="store_true", help="the faults armed on NODE, with matches and firings")
    s.add_argument("--clear", nargs="?", const="all", metavar="ID", help="clear fault ID (default: all)")
    s.add_argument("--run", help="run directory (default: the newest run where the node is running)")
    s.set_defaults(func=main)
