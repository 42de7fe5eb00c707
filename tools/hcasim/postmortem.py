"""What a guest that ran out of time was doing when the harness stopped it.

Written before the harness kills a timed-out QEMU, into the host-only
<run>.host/nodeN-timeout.txt, and printed by the runner as clues: which
QEMU threads were burning CPU (a spinning main loop or vCPU, or an idle
guest waiting for something), whether the main loop still answers QMP,
the guest's run state and vCPUs, the device's own state, and the last
lines of the guest's output, kernel log and device trace."""
import os
import time
from collections import deque

from hcasim import inspect_hca, rundir

SAMPLE_SECONDS = 2.0
QMP_SECONDS = 3.0


def thread_ticks(pid):
    """{tid: (thread name, user+system clock ticks)} of a live process."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # "tid (comm) state ...": comm may hold spaces and parentheses.
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, int(fields[11]) + int(fields[12]))
    return out


def cpu_use(pid, seconds=SAMPLE_SECONDS):
    """Each thread's CPU use over a few seconds, busiest first:
    [(name, percent)]."""
    hz = os.sysconf("SC_CLK_TCK")
    before = thread_ticks(pid)
    time.sleep(seconds)
    after = thread_ticks(pid)
    use = [(name, 100.0 * (ticks - before[tid][1]) / hz / seconds)
           for tid, (name, ticks) in after.items() if tid in before]
    return sorted(use, key=lambda u: -u[1])


def qmp_state(sock):
    """The guest's run state, vCPUs and the device's state through QMP, or
    why QMP did not answer (a main loop that never returns does not)."""
    lines = []
    try:
        with inspect_hca.Qmp(sock, timeout=QMP_SECONDS) as q:
            status = q.execute("query-status")
            lines.append(f"run state: {status.get('status')} (running={status.get('running')})")
            cpus = q.execute("human-monitor-command", **{"command-line": "info cpus"})
            lines += [f"vcpu: {l.strip()}" for l in cpus.splitlines() if l.strip()]
            info = q.execute("qom-get", path=inspect_hca.DEVICE_PATH, property="info")
            lines += [f"device: {l}" for l in str(info).splitlines()[:40]]
    except (OSError, inspect_hca.QmpError, ValueError) as e:
        lines.append(f"QMP did not answer within {QMP_SECONDS:.0f} s ({e.__class__.__name__}: {e}): "
                     "QEMU's main loop is not returning (the device or a hung I/O holds it)")
    return lines


def tail(run_fd, rel, n, nbytes=64 << 10):
    """The last n lines of a guest-written file of the run directory (read
    from its last nbytes however large it grew)."""
    try:
        text = rundir.read_path_tail(run_fd, rel, nbytes).decode(errors="replace")
    except OSError:
        return []
    return list(deque(text.splitlines(), maxlen=n))


def snapshot(pid, sock, run_dir, node):
    """The post-mortem of node's QEMU (pid, QMP at sock): a text."""
    lines = [f"node{node} ran out of time; QEMU pid {pid} at {time.strftime('%H:%M:%S')}"]
    use = cpu_use(pid)
    busy = ", ".join(f"{name} {pct:.0f}%" for name, pct in use[:6])
    lines.append(f"QEMU threads' CPU over {SAMPLE_SECONDS:.0f} s: {busy or 'none (gone?)'}")
    lines += qmp_state(sock)
    run_fd = rundir.open_dir(run_dir)
    try:
        for rel, n in ((f"node{node}/output.log", 6), (f"node{node}/dmesg.txt", 15),
                       (f"node{node}/console.log", 8), (f"node{node}/hca.trace", 5)):
            got = tail(run_fd, rel, n)
            lines.append(f"last {len(got)} line(s) of {rel}:" if got else f"{rel}: empty or missing")
            lines += [f"  {l[:200]}" for l in got]
    finally:
        os.close(run_fd)
    return "\n".join(lines) + "\n"


def record(pid, sock, run_dir, node):
    """Writes the post-mortem to <run>.host/nodeN-timeout.txt; never raises
    (the harness stops the VM whatever this finds)."""
    try:
        text = snapshot(pid, sock, run_dir, node)
    except Exception as e:  # noqa: BLE001 -- a diagnostic must not stop the teardown
        text = f"node{node}: post-mortem failed: {e.__class__.__name__}: {e}\n"
    try:
        (rundir.host_side(run_dir, create=True) / f"node{node}-timeout.txt").write_text(text)
    except OSError:
        pass


def summary(run_dir, node):
    """The lines of a recorded post-mortem worth printing as clues."""
    path = rundir.host_side(run_dir) / f"node{node}-timeout.txt"
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    keep = []
    for line in text.splitlines():
        if line.startswith(("QEMU threads", "run state", "vcpu:", "QMP did not", "device: HCA:", "device: port",
                            "last ", "  ")):
            keep.append(line.strip())
    return keep[:44] + [f"the whole post-mortem (every EQ, CQ and QP of the device): {path}"]
