"""What a guest that ran out of time was doing when the harness stopped it.

Written before the harness kills a timed-out QEMU, into the host-only
<run>.host/nodeN-timeout.txt, and printed by the runner as clues: which
QEMU threads were burning CPU (a spinning main loop or vCPU, or an idle
guest waiting for something), whether the main loop still answers QMP,
the guest's run state and vCPUs (where each one's instruction pointer is,
as an offset from the kernel's text, whether it halted and whether it takes
interrupts), the guest kernel's own stacks (SysRq w and l through the
keyboard: what is blocked, what every CPU runs), the device's own state,
and the last lines of the guest's output, kernel log and device trace."""
import os
import re
import time
from collections import deque

from hcasim import inspect_hca, rundir

SAMPLE_SECONDS = 2.0
QMP_SECONDS = 3.0
# How long the guest kernel gets to print the stacks SysRq asked for.
SYSRQ_SECONDS = 3.0
# testbench/guest/lib.sh prints where the kernel's text begins (KASLR).
KTEXT_MARK = "# hcasim-ktext "
SYSRQ_LINES = 200


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


def guest_text(run_fd, node):
    """Where the guest kernel's text began in the last boot (KASLR), as the
    test printed it; None if it did not (a run that never began)."""
    try:
        out = rundir.read_path(run_fd, f"node{node}/output.log", 1 << 20).decode(errors="replace")
    except OSError:
        return None
    # The last boot's (a test that reboots prints it again; KASLR moved it).
    text = re.findall("^" + re.escape(KTEXT_MARK) + r"([0-9a-f]{16})$", out, re.M)
    return int(text[-1], 16) if text else None


def vcpu_registers(dump, text=None):
    """One line per vCPU from HMP 'info registers -a': where it is (RIP,
    and in the kernel as an offset from _text, which names the function
    with the kernel's debug symbols: Debian's System.map is a placeholder),
    whether it halted (HLT) and whether it takes interrupts (RFL's IF)."""
    lines = []
    for m in re.finditer(r"CPU#(\d+).*?RIP=([0-9a-f]+) RFL=([0-9a-f]+).*?CPL=(\d).*?HLT=(\d)", dump, re.S):
        cpu, rip, rfl, cpl, hlt = m[1], int(m[2], 16), int(m[3], 16), m[4], m[5]
        where = f" (_text+0x{rip - text:x})" if text and cpl == "0" and 0 <= rip - text < 1 << 32 else ""
        lines.append(f"vcpu {cpu}: RIP={rip:016x}{where} CPL={cpl} halted={hlt} "
                     f"interrupts={'on' if rfl & 0x200 else 'off'}")
    return lines


def ask_guest_stacks(sock):
    """SysRq w (blocked tasks) and l (a backtrace of every CPU) through the
    keyboard; lib.sh enabled SysRq. Nothing appears if no CPU takes the
    keyboard's interrupt, and that says something too."""
    try:
        with inspect_hca.Qmp(sock, timeout=QMP_SECONDS) as q:
            for key in ("w", "l"):
                q.execute("send-key", keys=[{"type": "qcode", "data": k} for k in ("alt", "sysrq", key)])
    except (OSError, inspect_hca.QmpError, ValueError):
        pass


def qmp_state(sock, text=None):
    """The guest's run state, vCPUs and the device's state through QMP, or
    why QMP did not answer (a main loop that never returns does not)."""
    lines = []
    try:
        with inspect_hca.Qmp(sock, timeout=QMP_SECONDS) as q:
            status = q.execute("query-status")
            lines.append(f"run state: {status.get('status')} (running={status.get('running')})")
            cpus = q.execute("human-monitor-command", **{"command-line": "info cpus"})
            lines += [f"vcpu: {l.strip()}" for l in cpus.splitlines() if l.strip()]
            regs = q.execute("human-monitor-command", **{"command-line": "info registers -a"})
            lines += vcpu_registers(str(regs), text)
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


def sysrq_output(run_fd, node):
    """What the guest kernel printed for the SysRq asked for: the console
    from the last 'Show Blocked State' on."""
    got = tail(run_fd, f"node{node}/console.log", 2000, nbytes=256 << 10)
    start = max((i for i, l in enumerate(got) if "sysrq: Show Blocked State" in l), default=None)
    # Without the frames the unwinder only guessed ("? name+0x..").
    got = [] if start is None else [l for l in got[start:] if not re.search(r"\]\s+\? ", l)]
    return got[:SYSRQ_LINES]


def snapshot(pid, sock, run_dir, node):
    """The post-mortem of node's QEMU (pid, QMP at sock): a text."""
    lines = [f"node{node} ran out of time; QEMU pid {pid} at {time.strftime('%H:%M:%S')}"]
    use = cpu_use(pid)
    busy = ", ".join(f"{name} {pct:.0f}%" for name, pct in use[:6])
    lines.append(f"QEMU threads' CPU over {SAMPLE_SECONDS:.0f} s: {busy or 'none (gone?)'}")
    run_fd = rundir.open_dir(run_dir)
    try:
        lines += qmp_state(sock, guest_text(run_fd, node))
        for rel, n in ((f"node{node}/output.log", 6), (f"node{node}/dmesg.txt", 15),
                       (f"node{node}/console.log", 8), (f"node{node}/hca.trace", 5)):
            got = tail(run_fd, rel, n)
            lines.append(f"last {len(got)} line(s) of {rel}:" if got else f"{rel}: empty or missing")
            lines += [f"  {l[:200]}" for l in got]
        # Then the guest's stacks, which reach the serial console.
        ask_guest_stacks(sock)
        time.sleep(SYSRQ_SECONDS)
        got = sysrq_output(run_fd, node)
        lines.append(f"what SysRq w and l printed ({len(got)} line(s)):" if got else
                     f"SysRq printed nothing within {SYSRQ_SECONDS:.0f} s (no vCPU took the keyboard's "
                     "interrupt, SysRq was off, or QMP did not answer)")
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


def _recorded(run_dir, node):
    path = rundir.host_side(run_dir) / f"node{node}-timeout.txt"
    try:
        return path, path.read_text(errors="replace").splitlines()
    except OSError:
        return path, []


def summary(run_dir, node):
    """The lines of a recorded post-mortem worth printing as clues: the
    state lines, the tails of the logs, and the guest's stacks."""
    path, text = _recorded(run_dir, node)
    if not text:
        return []
    keep, skip = [], False
    for line in text:
        if not line.startswith("  "):
            # The kernel log's tail: the console says the same, and first.
            skip = "dmesg.txt" in line
        if skip:
            continue
        if line.startswith(("QEMU threads", "run state", "vcpu", "QMP did not", "device: HCA:", "device: port",
                            "last ", "what SysRq", "SysRq printed", "  ")):
            keep.append(line.strip())
    return keep[:90] + [f"the whole post-mortem (every EQ, CQ and QP of the device): {path}"]


def digest(run_dir, node):
    """One line for the runner's list of failures (a CI log is often read
    from its end): the threads' CPU use and each vCPU's state."""
    _, text = _recorded(run_dir, node)
    parts = [l.split(": ", 1)[1] for l in text if l.startswith("QEMU threads")]
    parts += [l for l in text if l.startswith(("vcpu ", "QMP did not", "SysRq printed"))]
    return "; ".join(parts)
