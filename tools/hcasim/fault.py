"""./hcasim fault: inject faults into a running VM's HCA (docs/FAULTS.md).

  ./hcasim fault --list                     every fault kind, its arguments
  ./hcasim fault NODE KIND[:key=value,...]  arm a fault on node NODE now
  ./hcasim fault NODE --show                the faults armed there
  ./hcasim fault NODE --clear [ID]          clear one or all

The fault goes to the device's "fault" QOM property over QMP, the same
path as `--fault KIND[:...]` at boot (the device's fault= property) and
as `hca_fault` in a guest test (through the run's control relay). The
model checks the spec; the device trace ("fault" category) records every
fault armed, fired and cleared.
"""
import subprocess
import sys

from hcasim import inspect_hca
from hcasim.common import BUILD, die

FAULT_TOOL = BUILD / "hca-model" / "hcasim-fault"


def tool():
    if not FAULT_TOOL.exists():
        die(f"{FAULT_TOOL} is not built (./hcasim build)")
    return str(FAULT_TOOL)


def kinds():
    return subprocess.run([tool(), "kinds"], check=True, capture_output=True, text=True).stdout


def check_specs(specs, what="--fault"):
    """Dies with the model's message if a fault spec is bad (before any VM
    boots, or before QMP is asked)."""
    if not specs:
        return
    for s in specs:
        if ";" in s:
            die(f"{what} {s!r}: one fault at a time (';' separates them in the device property)")
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
        check_specs([a.spec], what="fault")
        command = a.spec
    else:
        die("say what to do: a fault KIND[:key=value,...], --show or --clear")
    run_dir, sock = inspect_hca.find_run(node, a.run, write=command != "list")
    try:
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
    return 0


def register(sub):
    s = sub.add_parser("fault", help="inject a fault into a running VM's HCA (command status, error CQE, "
                       "lost EQE, health syndrome, events ...); --list shows every kind")
    s.add_argument("node", nargs="?", help="node number (0, 1, ...) or node<N>")
    s.add_argument("spec", nargs="?", help="KIND[:key=value,...], e.g. cmd-status:opcode=CREATE_CQ,status=BAD_PARAM")
    s.add_argument("--list", action="store_true", help="every fault kind with its arguments and triggers")
    s.add_argument("--show", action="store_true", help="the faults armed on NODE, with matches and firings")
    s.add_argument("--clear", nargs="?", const="all", metavar="ID", help="clear fault ID (default: all)")
    s.add_argument("--run", help="run directory (default: the newest run where the node is running)")
    s.set_defaults(func=main)
