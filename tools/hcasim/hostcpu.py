"""Where a run's host CPU time went, per packet the devices handled.

Taken when a node's script ends (before its guest shuts down): each
node's QEMU threads split into the main loop (the HCA model's bottom
halves and timers, its link to the fabric, the management network), the
vCPUs (the guest itself, under TCG) and the rest (I/O workers), with the
device's packet counters read through QMP; and the fabric daemon's CPU
with the packets it forwarded. Written to host-cpu.txt of the run
directory. The main loop's time is an upper bound of the device's: it
also carries the management network and the 9p share; the fabric's
seconds include its management Ethernet hub."""
import os
import re

from hcasim import inspect_hca, postmortem
from hcasim.fabric_ctl import fabric_command

HZ = os.sysconf("SC_CLK_TCK")


def qemu_sample(pid, sock):
    """{main, vcpu, other: CPU seconds; tx, rx, looped: device packets}."""
    s = {"main": 0.0, "vcpu": 0.0, "other": 0.0, "tx": None, "rx": None, "looped": None}
    for tid, (name, ticks) in postmortem.thread_ticks(pid).items():
        part = "main" if int(tid) == pid else "vcpu" if name.startswith("CPU ") else "other"
        s[part] += ticks / HZ
    try:
        with inspect_hca.Qmp(sock, timeout=postmortem.QMP_SECONDS) as q:
            info = str(q.execute("qom-get", path=inspect_hca.DEVICE_PATH, property="info"))
        for key, field in (("tx", "packets_tx"), ("rx", "packets_rx"), ("looped", "packets_looped")):
            m = re.search(rf"\b{field}=(\d+)", info)
            s[key] = int(m.group(1)) if m else None
    except (OSError, inspect_hca.QmpError, ValueError):
        pass
    return s


def fabric_sample(pid, control_socket):
    """(CPU seconds of the fabric daemon, packets it forwarded or None)."""
    ticks = sum(t for _, t in postmortem.thread_ticks(pid).values())
    try:
        m = re.search(r"\bforwarded=(\d+)", fabric_command(control_socket, "stats", timeout=3.0))
    except OSError:
        m = None
    return ticks / HZ, int(m.group(1)) if m else None


def report(nodes, fabric_cpu, fabric_forwarded):
    """The text of host-cpu.txt: nodes is {i: qemu_sample}."""
    lines = ["# host CPU seconds of the whole run until each node's script ended (boot included),",
             "# and per packet the device sent or received (tx + rx, loopback counted once)"]
    total_pkts = 0
    for i in sorted(nodes):
        s = nodes[i]
        pkts = (s["tx"] or 0) + (s["rx"] or 0)
        total_pkts += pkts
        per = f"{1e6 * s['main'] / pkts:.1f} us/packet in the main loop" if pkts else "no packets"
        lines.append(f"node{i}: main loop (device, links) {s['main']:.1f} s, vCPUs (the guest) {s['vcpu']:.1f} s, "
                     f"other {s['other']:.1f} s; device packets tx={s['tx']} rx={s['rx']} looped={s['looped']}: "
                     f"{per}; the guest's vCPUs {1e6 * s['vcpu'] / pkts if pkts else 0:.1f} us/packet")
    if fabric_cpu is not None:
        n = fabric_forwarded
        per = f"{1e6 * fabric_cpu / n:.1f} us/packet" if n else "no packets"
        lines.append(f"fabric: {fabric_cpu:.1f} s for {n} forwarded packets: {per} "
                     "(its management Ethernet hub's frames included in the seconds)")
    return "\n".join(lines) + "\n"
