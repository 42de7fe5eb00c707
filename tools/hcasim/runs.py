"""Run directories: made one per run, kept while their run lives, pruned
oldest first when the runs together outgrow a budget.

A run directory holds up to ~1.2 GiB (a 512 MiB capture, rotated traces of
128 MiB per node); a day of `./hcasim test` leaves dozens of them. Without a
budget they fill the disk, and the next build dies of it. A run is live while
the harness process that made it holds an flock on `<run>.host/lock`: the
kernel drops the lock when that process ends, however it ends, so a crashed
run is never mistaken for a live one and a live one (another terminal's VM,
the other half of a parallel suite) is never removed.

HCASIM_RUNS_BUDGET (bytes, with K/M/G/T; default 16G; 0: never prune) caps
the finished runs' disk use; the newest finished run is always kept.
"""
import fcntl
import os
import re
import shutil
from datetime import datetime
from pathlib import Path

from hcasim import rundir
from hcasim.common import RUNS, die, say

DEFAULT_BUDGET = "16G"
_held = []  # lock files of this process's runs, open until it exits


def parse_size(text):
    """Bytes of '16G', '512M', '0', '1.5T'; ValueError otherwise."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"{text!r}: not a size (e.g. 16G, 512M, 0)")
    return int(float(m.group(1)) * 1024 ** " KMGT".index((m.group(2) or " ").upper()))


def budget():
    try:
        return parse_size(os.environ.get("HCASIM_RUNS_BUDGET", DEFAULT_BUDGET))
    except ValueError as e:
        die(f"HCASIM_RUNS_BUDGET: {e}")


def disk_bytes(path):
    """Bytes a directory tree occupies on disk (allocated blocks: the sparse
    parts of a file do not count); links are not followed."""
    total = 0
    for top, dirs, files in os.walk(path, followlinks=False):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except OSError:
                pass
    return total


def is_live(run):
    """True while the process that made run holds its lock."""
    try:
        fd = os.open(rundir.host_side(run) / "lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def runs(root=None):
    """The run directories under root (default RUNS), oldest first (their
    names begin with the time they were made)."""
    root = Path(root or RUNS)
    if not root.is_dir():
        return []
    return sorted((d for d in root.iterdir() if d.is_dir() and not d.is_symlink() and not d.name.endswith(".host")),
                  key=lambda d: d.name)


def remove(run):
    shutil.rmtree(run, ignore_errors=True)
    shutil.rmtree(rundir.host_side(run), ignore_errors=True)


def prune(limit, root=None, keep=()):
    """Removes finished runs, oldest first, until the finished runs left
    take at most limit bytes; never a live run, one in keep, or the newest
    finished run. Returns [(run, bytes)] removed."""
    finished = [d for d in runs(root) if d not in keep and not is_live(d)]
    sizes = [(d, disk_bytes(d) + disk_bytes(rundir.host_side(d))) for d in finished]
    total = sum(s for _, s in sizes)
    removed = []
    for d, s in sizes[:-1]:
        if total <= limit:
            break
        remove(d)
        removed.append((d, s))
        total -= s
    return removed


def new(name):
    """A new run directory RUNS/<time>-<name>, locked for this process's
    life; older finished runs beyond the budget are pruned first."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = RUNS / f"{stamp}-{name}"
    d = base
    n = 1
    while d.exists():
        n += 1
        d = Path(f"{base}-{n}")
    d.mkdir(parents=True)
    lock = open(rundir.host_side(d, create=True) / "lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    _held.append(lock)
    limit = budget()
    if limit:
        removed = prune(limit, keep=(d,))
        if removed:
            say(f"pruned {len(removed)} old run(s) of {RUNS} ({sum(s for _, s in removed) / 2**30:.1f} GiB; "
                f"HCASIM_RUNS_BUDGET={os.environ.get('HCASIM_RUNS_BUDGET', DEFAULT_BUDGET)})")
    return d
