"""Paths, progress output and subprocess helpers shared by the commands."""
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
SAN_BUILD = BUILD / "san"
CACHE = Path(os.environ.get("HCASIM_CACHE",
                            Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "hcasim"))
# The compiler cache (CMakeLists.txt uses ccache when it is installed) lives
# with the other caches; paths under the clone are hashed relative to it, so
# another clone or worktree of the same sources hits. NOHASHDIR: with -g,
# ccache would otherwise hash the build directory too (a 6 % hit rate
# across worktrees, measured).
os.environ.setdefault("CCACHE_DIR", str(CACHE / "ccache"))
os.environ.setdefault("CCACHE_BASEDIR", str(ROOT))
os.environ.setdefault("CCACHE_NOHASHDIR", "1")
os.environ.setdefault("CCACHE_MAXSIZE", "4G")
RUNS = Path(os.environ.get("HCASIM_RUNS", BUILD / "runs"))

_t0 = time.monotonic()


def say(msg):
    """One progress line, with the time since the command started."""
    print(f"[hcasim {time.monotonic() - _t0:6.1f}s] {msg}", flush=True)


def die(msg, code=1):
    print(f"hcasim: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def run(cmd, check=True, quiet=False, **kw):
    """Runs a command, echoing it; output goes to the terminal unless quiet."""
    if not quiet:
        say("$ " + " ".join(shlex.quote(str(c)) for c in cmd))
    if quiet:
        kw.setdefault("stdout", subprocess.DEVNULL)
    r = subprocess.run([str(c) for c in cmd], **kw)
    if check and r.returncode != 0:
        die(f"command failed ({r.returncode}): {' '.join(str(c) for c in cmd)}")
    return r


def capture(cmd, check=False):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if check and r.returncode != 0:
        die(f"command failed: {' '.join(str(c) for c in cmd)}\n{r.stderr}")
    return r
