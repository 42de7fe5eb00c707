"""What a failing guest run's artifacts say (the runner prints these under
each failure): the failing checks with the diagnostics above them, the
programs' complaints, kernel warnings and the device's guest errors."""
import re

from hcasim import postmortem
from hcasim import trace_parse as tp


_GUEST_ERR_MARK, = tp.line_marks("guest_err")  # the category, checked against the schema
BAD_DMESG = re.compile(r"mlx5.*(error|fail|timeout|WARN)|WARNING:|Call Trace|BUG:|Oops|ib.*(error|fail|timed out)")


GUEST_COMPLAINT = re.compile(r"unknown wr_id|invalid data|[Ff]ailed status|mismatch|[Cc]ouldn't|error|"
                             r"[Ff]ailed to|Unexpected|Traceback")


def clues(run_dir, limit=4):
    """What a failing run's artifacts say: what the failing programs printed,
    kernel warnings, and the device's own complaints (guest errors, test
    faults), the first few of each per node."""
    out = []
    for nd in sorted(d for d in run_dir.glob("node*") if re.fullmatch(r"node\d+", d.name)):
        # A node the harness stopped at its deadline: what it was doing.
        out += [f"{nd.name} at the deadline: {l[:200]}" for l in postmortem.summary(run_dir, int(nd.name[4:]))]
        log = nd / "output.log"
        if log.exists():
            lines = log.read_text(errors="replace").splitlines()
            # The first failing checks with the diagnostic line just above
            # each (what the program said), then other complaints.
            first = []
            failing = [i for i, l in enumerate(lines) if re.match(r"(# )?not ok ", l)]
            # Prefer failures that carry a diagnostic (KTAP relayed as "# ..."
            # lines, or a tool's output just above the check).
            failing.sort(key=lambda i: not (i and lines[i - 1].startswith("#")
                                            and not re.match(r"# (not )?ok ", lines[i - 1])))
            for i in sorted(failing[:2]):
                for j in (i - 2, i - 1):
                    if j >= 0 and lines[j].startswith("#") and not re.search(r"(^|# )(not )?ok ", lines[j]):
                        first.append(lines[j].strip())
                first.append(lines[i].strip())
            hits = [l.strip() for l in lines
                    if GUEST_COMPLAINT.search(l) and not l.startswith(("ok ", "not ok ")) and l.strip() not in first]
            out += [f"{nd.name} output: {l[:160]}" for l in first + hits[:limit]]
        console = nd / "console.log"
        text = console.read_text(errors="replace") if console.exists() else ""
        if re.search(r"VFS: Unable to mount root fs|Cannot open root device", text):
            out.append(f"{nd.name} console: the kernel cannot mount the root disk: a user kernel needs "
                       "virtio_pci, virtio_blk and ext4 built in, or --modules with its module tree")
        out += [f"{nd.name} console: {m.group(0)[:200]}"
                for m in re.finditer(r"hcasim: cannot mount the run directory.*", text)][:1]
        dmesg = nd / "dmesg.txt"
        if dmesg.exists():
            hits = [l.strip() for l in dmesg.read_text(errors="replace").splitlines()
                    if BAD_DMESG.search(l) and "calibrate_delay" not in l]
            out += [f"{nd.name} dmesg: {l[:160]}" for l in hits[:limit]]
        n = 0
        for trace in (nd / "hca.trace.1", nd / "hca.trace"):
            if not trace.exists() or n >= limit:
                continue
            with trace.open(errors="replace") as f:
                for line in f:
                    if _GUEST_ERR_MARK in line:
                        out.append(f"{nd.name} device: {line.strip()[:160]}")
                        n += 1
                        if n >= limit:
                            break
    return out
