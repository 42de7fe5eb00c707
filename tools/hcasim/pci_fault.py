"""PCI fault kinds that act on the VM, not on the model: the HCA unplugged
from its PCI Express slot and plugged in again, through QEMU's native
hot-plug (QMP device_del / device_add on the pcie-root-port rp0 it sits
behind; QEMU 7.2's q35 manages the slot through ACPI, the guest's
acpiphp): the guest ejects the device after the driver's remove(); on a
re-plug it enumerates the new function and the driver probes it. pci-aer
injects an AER error through the monitor's pcie_aer_inject_error.

vm.py records the device's QEMU options on the run's host-only side
(<run>.host/node<i>.hca-device) when it starts a node; pci-replug adds the
device back with those options (less the boot faults: a new card has none),
after moving the old device trace aside (node<i>/hca-unplugged-<k>.trace),
since the new device starts its trace afresh.
"""
from hcasim import inspect_hca, rundir

DEVICE_ID = "hca0"
# QMP's device_add takes typed values (QEMU 7.2): these are integers.
INT_PROPERTIES = ("node-guid", "trace-max-bytes")
# Each re-plug keeps the old device's trace (up to its size cap): a guest
# test asking for re-plugs in a loop must not fill the disk.
MAX_REPLUGS = 8

# pci-aer: severity -> QEMU's error name (hw/pci/pcie_aer.c; the default
# Uncorrectable Error Severity register makes MALF_TLP fatal and
# COMP_TIME non-fatal). A correctable one is given by its status bit
# (Bad TLP, PCI_ERR_COR_BAD_TLP): QEMU 10 takes only a number with -c.
AER_ERRORS = {"correctable": "-c hca0 0x40", "nonfatal": "hca0 COMP_TIME", "fatal": "hca0 MALF_TLP"}

PCI_KINDS = {
    "pci-aer": ("[severity=nonfatal]", "an AER error of the function (the monitor's pcie_aer_inject_error): "
                "correctable (a bad TLP), nonfatal (a completion timeout) or fatal (a malformed TLP); the guest's "
                "AER driver and mlx5_core's pci_error_handlers react"),
    "pci-unplug": ("", "the HCA's hot-unplug request (QMP device_del; on QEMU 7.2's q35 an ACPI eject, acpiphp): the "
                  "driver's remove() runs, then QEMU removes the device"),
    "pci-replug": ("", "a new HCA in the slot (QMP device_add with the node's options): presence detect, link up, "
                  "the driver's probe"),
}


def pci_kind(spec):
    kind = spec.split(":", 1)[0]
    return kind if kind in PCI_KINDS else None


def record_device(run_dir, node, options):
    """Keeps the node's -device option string for pci-replug."""
    f = rundir.host_side(run_dir, create=True) / f"node{node}.hca-device"
    f.write_text(options + "\n")


def parse_options(text):
    """QEMU's -device option syntax: 'driver,k=v,...', ',,' a literal comma."""
    parts, cur, i = [], "", 0
    while i < len(text):
        if text[i] == ",":
            if text[i + 1:i + 2] == ",":
                cur += ","
                i += 2
                continue
            parts.append(cur)
            cur = ""
        else:
            cur += text[i]
        i += 1
    parts.append(cur)
    args = {"driver": parts[0]}
    for p in parts[1:]:
        k, _, v = p.partition("=")
        args[k] = v
    return args


def replug_args(run_dir, node):
    f = rundir.host_side(run_dir) / f"node{node}.hca-device"
    if not f.is_file():
        raise ValueError(f"no device options recorded for node{node} ({f})")
    args = parse_options(f.read_text().strip())
    args.pop("fault", None)
    for k in INT_PROPERTIES:
        if k in args:
            args[k] = int(args[k], 0)
    return args


def move_trace(args, run_dir, node):
    """The old device's trace file moves aside; the new device writes a fresh one."""
    trace = args.get("trace")
    if not trace:
        return ""
    node_dir = run_dir / f"node{node}"
    old = node_dir / "hca.trace"
    k = 1
    while (node_dir / f"hca-unplugged-{k}.trace").exists():
        k += 1
    rotated = node_dir / "hca.trace.1"
    if rotated.is_file() and not rotated.is_symlink():
        rotated.rename(node_dir / f"hca-unplugged-{k}.trace.1")
    if old.is_file() and not old.is_symlink():
        old.rename(node_dir / f"hca-unplugged-{k}.trace")
        return f"; the old trace is node{node}/hca-unplugged-{k}.trace"
    return ""


def pci_fault(sock, run_dir, node, spec):
    """Runs a PCI kind on node; returns (ok, text)."""
    kind, _, rest = spec.partition(":")
    if kind == "pci-aer":
        severity = rest.removeprefix("severity=") if rest else "nonfatal"
        if severity not in AER_ERRORS or (rest and not rest.startswith("severity=")):
            return False, f"pci-aer takes severity={'|'.join(AER_ERRORS)}"
        with inspect_hca.Qmp(sock) as q:
            out = q.execute("human-monitor-command", **{"command-line": f"pcie_aer_inject_error {AER_ERRORS[severity]}"})
        if not str(out).startswith("OK"):
            return False, f"pcie_aer_inject_error: {str(out).strip()}"
        return True, f"node{node}: AER {severity} error injected ({AER_ERRORS[severity].split()[-1]})\n"
    if rest:
        return False, f"{kind} takes no arguments"
    with inspect_hca.Qmp(sock) as q:
        if kind == "pci-unplug":
            try:
                q.execute("device_del", id=DEVICE_ID)
            except inspect_hca.QmpError as e:
                return False, str(e)
            return True, f"node{node}: {DEVICE_ID} unplug requested (the guest ejects it)\n"
        try:
            args = replug_args(run_dir, node)
        except ValueError as e:
            return False, str(e)
        devices = q.execute("qom-list", path="/machine/peripheral")
        if any(d.get("name") == DEVICE_ID for d in devices or []):
            return False, f"{DEVICE_ID} is still in its slot (pci-unplug first; the guest takes ~5 s to let it go)"
        if len(list((run_dir / f"node{node}").glob("hca-unplugged-*.trace"))) >= MAX_REPLUGS:
            return False, f"at most {MAX_REPLUGS} re-plugs a node and run"
        moved = move_trace(args, run_dir, node)
        try:
            q.execute("device_add", **args)
        except inspect_hca.QmpError as e:
            return False, str(e)
        return True, f"node{node}: a new {args['driver']} in {args.get('bus', '?')}{moved}\n"


def describe():
    return "".join(f"{k:<14} pci    {a:<18} {v}\n" for k, (a, v) in PCI_KINDS.items())
