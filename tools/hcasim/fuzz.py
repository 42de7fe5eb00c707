"""./hcasim fuzz: a libFuzzer campaign over the sanitizer tree's fuzz targets
(testbench/fuzz/, fabric/fuzz/) with random seeds and a corpus kept in the
cache (~/.cache/hcasim/fuzz/<target>/corpus), seeded from the checked-in
corpus.  Memory and time per input are capped; a crash, leak, timeout or
out-of-memory input is saved, with the command that reproduces it, and the
command fails.  docs/RELIABILITY.md has the figures of a campaign."""
import os
import random
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hcasim import build
from hcasim.common import CACHE, ROOT, SAN_BUILD, die, say

# name -> (binary under build/san, checked-in seed corpus)
TARGETS = {
    "objects": ("testbench/fuzz-objects", "testbench/fuzz/corpus/objects"),
    "cmdif": ("testbench/fuzz-cmdif", "testbench/fuzz/corpus/cmdif"),
    "wire": ("testbench/fuzz-wire", "testbench/fuzz/corpus/wire"),
    "send": ("testbench/fuzz-send", "testbench/fuzz/corpus/send"),
    "datapath": ("testbench/fuzz-datapath", "testbench/fuzz/corpus/datapath"),
    "mad": ("testbench/fuzz-mad", "testbench/fuzz/corpus/mad"),
    "link": ("testbench/fuzz-link", "testbench/fuzz/corpus/link"),
    "fault": ("testbench/fuzz-fault", "testbench/fuzz/corpus/fault"),
    "fabric_mad": ("testbench/fuzz-fabric_mad", "testbench/fuzz/corpus/fabric_mad"),
    "control": ("testbench/fuzz-control", "testbench/fuzz/corpus/control"),
    "topology": ("testbench/fuzz-topology", "testbench/fuzz/corpus/topology"),
    "switch": ("fabric/fuzz-fabric-switch", "fabric/fuzz/corpus/switch"),
}
FUZZ_CACHE = CACHE / "fuzz"
ARTIFACT_KINDS = ("crash", "leak", "timeout", "oom", "slow-unit")


@dataclass
class Result:
    target: str
    seed: int
    execs: int = 0
    exec_per_s: int = 0
    cov: int = 0
    features: int = 0
    corpus: int = 0
    seconds: float = 0.0
    rss_mb: int = 0
    artifacts: list = field(default_factory=list)
    rc: int = 0


def register(sub):
    s = sub.add_parser("fuzz", help="a libFuzzer campaign (random seeds, corpus in the cache, memory limit); "
                       "fails on any crash, leak or hang")
    s.add_argument("targets", nargs="*", metavar="TARGET",
                   help=f"targets to run (default all): {', '.join(TARGETS)}")
    s.add_argument("--time", type=float, help="seconds per target (default 60, or no limit with --runs)")
    s.add_argument("--runs", type=int, help="stop each target after this many executions")
    s.add_argument("--jobs", type=int, default=1, help="fuzzer processes per target (libFuzzer -fork; default 1)")
    s.add_argument("--seed", type=int, help="libFuzzer seed (default random)")
    s.add_argument("--rss-limit-mb", type=int, default=2048, help="memory limit of the fuzzer (default 2048)")
    s.add_argument("--malloc-limit-mb", type=int, default=512,
                   help="largest single allocation before it counts as a bug (default 512)")
    s.add_argument("--timeout", type=int, default=10, help="seconds one input may take (default 10)")
    s.add_argument("--max-len", type=int, default=4096, help="longest input (default 4096)")
    s.add_argument("--no-build", action="store_true", help="do not build the fuzz tree first")
    s.set_defaults(func=main)


def command(target, a, seed, corpus, artifacts):
    binary, seeds = TARGETS[target]
    cmd = [SAN_BUILD / binary, f"-seed={seed}", f"-max_len={a.max_len}",
           f"-rss_limit_mb={a.rss_limit_mb}", f"-malloc_limit_mb={a.malloc_limit_mb}", f"-timeout={a.timeout}",
           f"-artifact_prefix={artifacts}/", "-print_final_stats=1", "-print_pcs=0"]
    if a.time:
        cmd.append(f"-max_total_time={int(a.time)}")
    if a.runs:
        cmd.append(f"-runs={a.runs}")
    if a.jobs > 1:
        cmd.append(f"-fork={a.jobs}")
    cmd += [corpus]
    if (ROOT / seeds).is_dir():
        cmd.append(ROOT / seeds)
    return [str(c) for c in cmd]


def parse(out, r):
    """Figures from libFuzzer's status lines ("#N NEW cov: ...", and with
    -fork "#N: cov: ..." from the parent) and -print_final_stats."""
    for m in re.finditer(r"#(\d+)(?::|\s+\w+)\s+cov: (\d+) ft: (\d+) corp: (\d+)", out):
        r.execs, r.cov, r.features, r.corpus = (int(g) for g in m.groups())
    stats = dict(re.findall(r"stat::(\w+):\s+(\d+)", out))
    if "number_of_executed_units" in stats:
        r.execs = int(stats["number_of_executed_units"])
    r.exec_per_s = int(stats.get("average_exec_per_sec", 0)) or (int(r.execs / r.seconds) if r.seconds else 0)
    r.rss_mb = int(stats.get("peak_rss_mb", 0))


def fuzz_env():
    """ASan with a 64 MiB quarantine instead of 256: libFuzzer runs a leak
    check after every input whose mallocs and frees do not pair up, and the
    check walks every chunk, freed ones in quarantine too (with 256 MiB it
    took most of the `objects` target's time).  A use after free is still
    caught while the freed memory is among the last 64 MiB freed, many
    inputs back.  A caller's own ASAN_OPTIONS still wins."""
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(o for o in ("quarantine_size_mb=64", env.get("ASAN_OPTIONS")) if o)
    return env


def run_fuzzer(cmd, log, home):
    """The fuzzer in a session of its own, whose scheduler autogroup gets
    our nice value: with autogroups on (the Debian default) each session's
    group gets an equal share of the CPUs whatever its members' nice
    values, so `nice -n 19 ./hcasim fuzz` still took a third of a 2-core
    machine from guest tests when the nice value stopped at the process."""
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=home, env=fuzz_env(),
                            start_new_session=True)
    level = os.nice(0)
    if level > 0:
        try:
            Path(f"/proc/{proc.pid}/autogroup").write_text(f"{level}\n")
        except OSError:
            pass
    try:
        return proc.wait()
    except BaseException:
        # Its own session, so Ctrl-C does not reach it: stop the whole
        # group, the jobs of -fork too (killing the parent left them running).
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        raise


def run_target(target, a):
    seed = a.seed if a.seed is not None else random.randrange(1, 2**31)
    home = FUZZ_CACHE / target
    corpus = home / "corpus"
    artifacts = home / "artifacts"
    corpus.mkdir(parents=True, exist_ok=True)
    artifacts.mkdir(parents=True, exist_ok=True)
    before = {p.name for p in artifacts.iterdir()}
    cmd = command(target, a, seed, corpus, artifacts)
    limit = " and ".join(x for x in (a.time and f"{a.time:.0f}s", a.runs and f"{a.runs} runs") if x)
    say(f"fuzz {target}: {limit}, seed {seed}, corpus {corpus}")
    log = home / "last.log"
    t0 = time.monotonic()
    with open(log, "w") as f:
        f.write(" ".join(shlex.quote(c) for c in cmd) + "\n")
        f.flush()
        rc = run_fuzzer(cmd, f, home)
    r = Result(target, seed, seconds=time.monotonic() - t0, rc=rc)
    out = log.read_text(errors="replace")
    parse(out, r)
    r.artifacts = sorted(artifacts / n for n in {p.name for p in artifacts.iterdir()} - before
                         if n.startswith(ARTIFACT_KINDS))
    say(f"fuzz {target}: {r.execs} executions, {r.exec_per_s} exec/s, cov {r.cov}, ft {r.features}, "
        f"corpus {r.corpus}, peak RSS {r.rss_mb} MB, exit {rc}, log {log}")
    return r


def main(a):
    if a.time is None and a.runs is None:
        a.time = 60
    targets = a.targets or list(TARGETS)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        die(f"unknown fuzz target(s) {', '.join(unknown)}; targets: {', '.join(TARGETS)}")
    if not a.no_build:
        build.san_tree(targets=[f"fuzz-{t}" if t != "switch" else "fuzz-fabric-switch" for t in targets])
    results = [run_target(t, a) for t in targets]
    print(f"\n{'target':12} {'executions':>12} {'exec/s':>8} {'cov':>6} {'ft':>7} {'corpus':>7}  result")
    failed = []
    for r in results:
        bad = r.artifacts or r.rc != 0
        print(f"{r.target:12} {r.execs:12} {r.exec_per_s:8} {r.cov:6} {r.features:7} {r.corpus:7}  "
              f"{'FAILED' if bad else 'ok'}")
        if bad:
            failed.append(r)
    for r in failed:
        binary = SAN_BUILD / TARGETS[r.target][0]
        print(f"\n{r.target}: exit {r.rc}, seed {r.seed}; log {FUZZ_CACHE / r.target / 'last.log'}")
        for p in r.artifacts:
            print(f"  {p.name.split('-')[0]}: {p}\n  reproduce: {binary} -rss_limit_mb={a.rss_limit_mb} "
                  f"-malloc_limit_mb={a.malloc_limit_mb} -timeout={a.timeout} {p}")
        if not r.artifacts:
            print("  no input was saved (the fuzzer itself failed); see the log")
    total = sum(r.execs for r in results)
    print(f"\n{total} executions, {len(failed)} target(s) failed")
    return 1 if failed else 0
