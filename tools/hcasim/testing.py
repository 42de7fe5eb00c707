"""./hcasim test: every level of tests, one closing line.

1. unit and device-level tests (Catch2 through CTest) in the main tree;
2. the same plus the fuzz runs under ASan/UBSan (clang tree);
3. guest tests: testbench/guest/*.sh booted with `run`, each printing TAP
   lines ("ok N - ..." / "not ok N - ...") that are counted here.
"""
import os
import re
import shlex
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from hcasim import build, clues, kernels, postmortem, vm
from hcasim.common import BUILD, ROOT, SAN_BUILD, capture, run, say

GUEST_DIR = ROOT / "testbench" / "guest"
TAP_RE = re.compile(r"^(ok|not ok) \d+ - (.*)$")


@dataclass
class Outcome:
    suite: str
    name: str
    passed: bool
    detail: str = ""


def ctest(tree, label):
    junit = tree / "ctest-junit.xml"
    # --timeout: a test without its own limit (the Catch2 cases) fails
    # after 5 minutes instead of holding the run (and a core) forever.
    run(["ctest", "--test-dir", tree, "--output-on-failure", "-j", "2", "--timeout", "300",
         "--output-junit", junit], check=False)
    outcomes = []
    if not junit.exists():
        return [Outcome(label, "ctest", False, "no JUnit output")]
    for tc in ET.parse(junit).getroot().iter("testcase"):
        status = tc.get("status", "run")
        failed = tc.find("failure") is not None or tc.find("error") is not None or status == "fail"
        skipped = tc.find("skipped") is not None or status in ("notrun", "disabled")
        # A skipped test is not counted as a pass.
        outcomes.append(Outcome(label, tc.get("name"), not failed and not skipped,
                                "skipped" if skipped else ""))
    return outcomes


CHECKPATCH_FILES = 5  # build-qemu.sh's checkpatch.pl list


def qtest(line):
    """The device's qtest (qemu-device/qtest/mlx5-hca-test.c), built in the
    QEMU line's own tree and run against its emulator: one outcome per test
    case of its TAP output."""
    suite = f"qtest-{line}"
    r = build.qemu(line, qtest=True)
    tap = build.qemu_dir(line) / "qtest.tap"
    outcomes = []
    for l in (tap.read_text(errors="replace").splitlines() if tap.exists() else []):
        m = re.match(r"(not )?ok \d+ (\S+)", l)
        if m:
            outcomes.append(Outcome(suite, m.group(2), m.group(1) is None and "# SKIP" not in l, str(tap)))
    if r.returncode != 0 and all(o.passed for o in outcomes):
        outcomes.append(Outcome(suite, "mlx5-hca-test", False, f"exit {r.returncode}; {tap}"))
    # The line's checkpatch.pl over the device's files (build-qemu.sh: the
    # device, its compat header, trace.h, the qtest, the rst): no error (warnings
    # are shown, not counted).
    cp = build.qemu_dir(line) / "checkpatch.txt"
    totals = re.findall(r"^total: (\d+) errors, (\d+) warnings", cp.read_text() if cp.exists() else "", re.M)
    outcomes.append(Outcome(suite, f"checkpatch.pl: {len(totals)} files, "
                                   f"{sum(int(e) for e, _ in totals)} errors, {sum(int(w) for _, w in totals)} warnings",
                            len(totals) == CHECKPATCH_FILES and all(e == "0" for e, _ in totals), str(cp)))
    return outcomes


@dataclass
class Header:
    """A guest test's "# hcasim-test: k=v ..." line (among its first ten):
    nodes, smp (vCPUs per VM), mem (per VM, e.g. 512M), timeout, reboot=1, sm=0 (no built-in SM: opensm in a guest),
    fabric=0, fabric-arg=OPT (repeatable, e.g. fabric-arg=--drop=1),
    include=FILE (a file of testbench/guest/ prepended after lib.sh),
    env=K=V (repeatable, exported before the script), append=ARG
    (repeatable: added to the guest kernel's command line), quick-timeout=
    SECONDS (the budget of ./hcasim test's quick depth, when the full
    depth's would waste CI time on a hung guest), kernel=LINE (boot the
    current Debian kernel package of LINE, bookworm, trixie or sid, through
    --kernel/--modules: tools/hcasim/kernels.py), images=NAME,... (the guest
    images the test applies to, default all: build.IMAGES), topology=NAME[,NAME]
    (the fabric is testbench/guest/topologies/NAME.topo; a second name, a
    second daemon: docs/FABRIC.md), ci=0 (a long
    test: ./hcasim suite runs it, ./hcasim test does not)."""
    nodes: int = 1
    smp: int = 0  # vm.auto_smp()
    mem: str = "1536M"
    timeout: float = 300
    quick_timeout: float | None = None
    reboot: bool = False
    sm: bool = True
    fabric: bool = True
    fabric_args: list = field(default_factory=list)
    includes: list = field(default_factory=list)
    env: list = field(default_factory=list)
    append: list = field(default_factory=list)
    kernel: str = ""
    topology: str = ""
    images: list | None = None
    ci: bool = True


def header(script):
    """The script's Header; an unknown key is an error (a typo would
    otherwise change nothing, silently)."""
    h = Header()
    lists = {"fabric-arg": h.fabric_args, "include": h.includes, "env": h.env, "append": h.append}
    for line in script.read_text().splitlines()[:10]:
        m = re.match(r"#\s*hcasim-test:\s*(.*)", line)
        if not m:
            continue
        for kv in m.group(1).split():
            k, _, v = kv.partition("=")
            if k in lists:
                lists[k].append(v)
            elif k in ("nodes", "smp"):
                setattr(h, k, int(v))
            elif k == "mem":
                h.mem = v
            elif k in ("timeout", "quick-timeout"):
                setattr(h, k.replace("-", "_"), float(v))
            elif k in ("reboot", "sm", "fabric", "ci"):
                setattr(h, k, v == "1")
            elif k == "kernel":
                h.kernel = v
            elif k == "topology":
                h.topology = ",".join(str(GUEST_DIR / "topologies" / f"{n}.topo") for n in v.split(","))
            elif k == "images":
                h.images = v.split(",")
            else:
                raise ValueError(f"{script.name}: unknown hcasim-test key {k!r}")
    return h


def guest_header(script, depth="full"):
    """(VmOptions, includes, env) of the script's header at the depth."""
    h = header(script)
    timeout = h.quick_timeout if depth == "quick" and h.quick_timeout else h.timeout
    vmo = vm.VmOptions(nodes=h.nodes, smp=h.smp, mem=h.mem, timeout=timeout, allow_reboot=h.reboot, builtin_sm=h.sm,
                       fabric=h.fabric, fabric_args=list(h.fabric_args), extra_append=" ".join(h.append),
                       kernel_line=h.kernel, topology=h.topology)
    return vmo, list(h.includes), list(h.env)


def applies(script, image):
    """Whether the test runs on the guest image (its header's images=)."""
    images = header(script).images
    return images is None or image in images


# The guest test every image runs in ./hcasim test (the others run the
# whole set on the default image only).
IMAGE_SMOKE = "26-image-smoke"


def label_of(script, image):
    """A guest test's name in results and timings: its stem, with @IMAGE
    off the default image and @qemu-LINE off the default QEMU line."""
    label = script.stem if image == build.DEFAULT_IMAGE else f"{script.stem}@{image}"
    line = build.qemu_line()
    return label if line == build.DEFAULT_QEMU else f"{label}@qemu-{line}"


def smoke_columns(image, others, line, other_lines):
    """Where ./hcasim test runs the image smoke test besides IMAGE on LINE
    (where every test runs): each other image and each other QEMU line at
    least once. With both, an image runs on its own Debian release's QEMU
    (Debian 12's 7.2, 13's 10.0, unstable's 10.2), the stacks users of
    those releases have; ./hcasim suite --image all --qemu all runs the
    whole matrix."""
    lines = [line, *other_lines]

    def own(img):
        return next((q for q, d in build.QEMU_LINES.items() if f"({build.IMAGES[img][0]})" in d), None)

    if not (others and other_lines):
        return [(i, line) for i in others] + [(image, q) for q in other_lines]
    cols = [(i, own(i)) for i in (image, *others) if own(i) in lines and (i, own(i)) != (image, line)]
    cols += [(i, line) for i in others if all(c[0] != i for c in cols)]
    cols += [(image, q) for q in other_lines if all(c[1] != q for c in cols)]
    return cols


def suite_only(script):
    """A test whose header says ci=0: too long for ./hcasim test."""
    return not header(script).ci


def tap_outcomes(suite, label, output, run_dir):
    outcomes = []
    for line in output.splitlines():
        m = TAP_RE.match(line.strip())
        if m:
            outcomes.append(Outcome(suite, f"{label}: {m.group(2)}", m.group(1) == "ok",
                                    "" if m.group(1) == "ok" else str(run_dir)))
    return outcomes


TIME_RE = re.compile(r"^# hcasim-time (start|active|end) ([0-9.]+)$", re.M)


def time_split(output, wall):
    """Where a test's wall time went, from node 0's "# hcasim-time" lines
    (guest uptime): boot (kernel start to the script), driver (script start
    to the port's first ACTIVE), workload (the rest of the script) and
    outside (QEMU start, firmware, shutdown, host checks)."""
    found = TIME_RE.findall(output)
    marks = {kind: float(t) for kind, t in found}
    if [k for k, _ in found].count("start") != 1 or "end" not in marks or marks["end"] < marks["start"]:
        return None  # no marks, or a reboot in between
    start, end = marks["start"], marks["end"]
    active = min(max(marks.get("active", start), start), end)
    return {"boot": start, "driver": active - start, "workload": end - active, "outside": max(wall - end, 0.0)}


def boot_panics(run_dir, results):
    """The nodes without a result whose kernel panicked, or whose QEMU ended
    on a signal (the harness's nodeN-qemu-died.txt), before the image's init
    said it was ready (console.log)."""
    dead = []
    for r in results:
        console = Path(run_dir) / f"node{r.node}" / "console.log"
        text = console.read_text(errors="replace") if console.exists() else ""
        qemu_died = (Path(run_dir) / f"node{r.node}-qemu-died.txt").exists()
        if r.exit_code is None and ("Kernel panic" in text or qemu_died) and "ready after" not in text:
            dead.append(r.node)
    return dead


def guest_test(script, modules="", kernel="", test_fault="", expect_dmesg="", depth="full", timing=None,
               image=build.DEFAULT_IMAGE):
    """Runs one guest test on the guest image; its outcomes. depth "quick"
    (./hcasim test) shortens the stress loops and subsets (lib.sh's reps);
    timing, a dict, gets {label: (wall seconds, time_split)}, the label
    being the script's stem (with "@image" off the default image)."""
    t0 = time.monotonic()
    opts, includes, env = guest_header(script, depth)
    env = env + [f"HCASIM_DEPTH={depth}"]
    if expect_dmesg:
        env = env + [f"HCASIM_EXPECT_DMESG={expect_dmesg}"]
    opts.modules, opts.kernel, opts.test_fault, opts.image = modules, kernel, test_fault, image
    label = label_of(script, image)
    if opts.kernel_line and not kernel:
        k, m = kernels.fetch(opts.kernel_line)
        opts.kernel, opts.modules = str(k), str(m)
    run_dir_parent = BUILD / "guest-tests"
    run_dir_parent.mkdir(parents=True, exist_ok=True)
    combined = run_dir_parent / script.name
    parts = ([(GUEST_DIR / "lib.sh").read_text()] + [f"export {shlex.quote(e)}" for e in env] +
             [(GUEST_DIR / inc).read_text() for inc in includes])
    combined.write_text("\n".join(parts + [script.read_text()]))
    say(f"guest test {script.name} ({opts.nodes} node(s), image {image}, budget {opts.timeout:.0f}s)")
    run_dir, results = vm.run_script(combined, opts, name=f"test-{label.replace('@', '-')}", quiet=True)
    panicked = boot_panics(run_dir, results)
    if panicked:
        # Once, and said: a guest kernel that died before its init ran
        # never reached the device's driver (QEMU 7.2's TCG and 6.12's
        # int3 text patching, seen once), nor did a QEMU that aborted then
        # (msix.c's table assertion while the kernel enumerated PCI, seen
        # twice in 11-rdmacm: a TCG race that qemu-device/patches fixes
        # since, STATUS "Open findings"). Both runs are kept.
        say(f"  node(s) {', '.join(map(str, panicked))} died while booting (a kernel panic or QEMU ending on a "
            f"signal), before the test script and the driver: {run_dir}; running the test once more")
        run_dir, results = vm.run_script(combined, opts, name=f"test-{label.replace('@', '-')}-again", quiet=True)
    outcomes = []
    for r in results:
        got = tap_outcomes(label, f"node{r.node}", r.output, run_dir)
        outcomes += got
        if r.exit_code != 0:
            why = "timed out" if r.timed_out else (
                "no result (guest crashed?)" if r.exit_code is None else f"exit code {r.exit_code}")
            if r.timed_out:
                # The post-mortem's gist, where a log read from its end shows it.
                why += f" ({postmortem.digest(Path(run_dir), r.node)})"
            outcomes.append(Outcome(label, f"node{r.node}: script {why}", False, str(run_dir)))
        elif not got:
            outcomes.append(Outcome(label, f"node{r.node}: no TAP lines", False, str(run_dir)))
    # NN-name.host: checks on the host side of the run (capture, traces),
    # run with the run directory as $1; its TAP lines count too.
    host = script.with_suffix(".host")
    if host.exists():
        r = capture(["bash", "-c", (GUEST_DIR / "lib.sh").read_text() + "\n" + host.read_text(), "host-check",
                     str(run_dir)])
        (run_dir / "host-check.log").write_text(r.stdout + r.stderr)
        got = tap_outcomes(label, "host", r.stdout, run_dir)
        outcomes += got
        if r.returncode != 0 or not got:
            outcomes.append(Outcome(label, f"host: check script exit code {r.returncode}", False, str(run_dir)))
    wall = time.monotonic() - t0
    split = time_split(next((r.output for r in results if r.node == 0), ""), wall)
    if timing is not None:
        timing[label] = (wall, split)
    where = "" if not split else " (" + ", ".join(f"{k} {v:.0f}s" for k, v in split.items()) + ")"
    say(f"  {sum(o.passed for o in outcomes)} passed, {sum(not o.passed for o in outcomes)} failed in "
        f"{wall:.0f}s{where}; artifacts in {run_dir}")
    if not all(o.passed for o in outcomes) and not test_fault:
        # What the artifacts say, in the log itself: a CI run's run
        # directory is gone by the time anyone reads it.
        for h in clues.clues(Path(run_dir)):
            say(f"  clue: {h}")
    return outcomes


BASELINE = GUEST_DIR / "baseline.txt"


def load_baseline(depth="full"):
    """testbench/guest/baseline.txt: "<test> <checks that pass> [quick=<n>]"
    per line; the quick count is for ./hcasim test's shorter runs of tests
    whose subset changes the number of checks."""
    base = {}
    if BASELINE.exists():
        for line in BASELINE.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                name, n, *rest = line.split()
                quick = [int(r[6:]) for r in rest if r.startswith("quick=")]
                base[name] = quick[0] if depth == "quick" and quick else int(n)
    return base


def apply_baseline(name, outcomes, base):
    """A guest test whose passing checks dropped below its baseline fails,
    even if nothing printed "not ok" (it silently stopped checking things).
    NAME is a test's stem or its label off the defaults (TEST[@IMAGE]
    [@qemu-LINE]). The count depends on the image, not on the QEMU line:
    TEST@IMAGE's line if it has one, else the test's."""
    passed = sum(o.passed for o in outcomes)
    name = re.sub(r"@qemu-[^@]*$", "", name)
    name = name if name in base else name.split("@")[0]
    if name in base and passed < base[name]:
        where = next((o.detail for o in outcomes if o.detail), "")
        outcomes.append(Outcome(name, f"baseline: {passed} checks passed, {base[name]} expected "
                                      f"({BASELINE.relative_to(ROOT)})", False, where))


# The guest test that the runner self-test breaks on purpose: quick, and
# its checks look at every completion's opcode.
FAULT_PROBE = "12-kverbs"


def fault_self_test():
    """Testing the tests: with the device's test-only fault (requester CQEs
    carry a receive opcode) the probe test must fail, and the runner's clues
    must name the fault. Passes when both hold."""
    say(f"runner self-test: {FAULT_PROBE} with --test-fault cqe-opcode must fail and say why")
    got = guest_test(GUEST_DIR / f"{FAULT_PROBE}.sh", test_fault="cqe-opcode", depth="quick")
    failed = [o for o in got if not o.passed]
    run_dir = next((o.detail for o in failed if o.detail), "")
    hints = clues.clues(Path(run_dir)) if run_dir else []
    for h in hints:
        say(f"  clue: {h}")
    return [Outcome("fault-self-test", f"{FAULT_PROBE} fails with the CQE opcode fault ({len(failed)} checks failed)",
                    bool(failed), run_dir),
            Outcome("fault-self-test", "the runner's clues name the fault",
                    any("TEST FAULT ACTIVE" in h for h in hints), run_dir)]


def print_timing(timing):
    """Where ./hcasim test's guest time went, per test."""
    if not timing:
        return
    n = max(24, *(len(name) for name in timing))
    print(f"\n{'guest test':{n}} {'wall':>6} {'boot':>6} {'driver':>7} {'workload':>9} {'outside':>8}  (seconds)")
    for name, (wall, split) in timing.items():
        cols = "".join(f" {split[k]:{w}.0f}" for k, w in (("boot", 6), ("driver", 7), ("workload", 9),
                                                          ("outside", 8))) if split else "  (no time marks)"
        print(f"{name:{n}} {wall:6.0f}{cols}")
    print(f"{'total':{n}} {sum(w for w, _ in timing.values()):6.0f}")


def main(args):
    guest_only = getattr(args, "guest_only", False)
    image = args.image or build.DEFAULT_IMAGE
    # Without --image: every test on the default image, the image smoke
    # test on the others as well.
    others = [] if args.image else [i for i in build.IMAGES if i != image]
    # Without --qemu: the qtest and the image smoke test on the other QEMU
    # lines as well.
    line = build.qemu_line()
    other_lines = [] if args.qemu else [q for q in build.QEMU_LINES if q != line]
    build.everything(sanitizers=not guest_only, images=[image, *others], qemus=[line, *other_lines])
    outcomes = []
    if not guest_only:
        say("unit and device-level tests")
        outcomes += ctest(BUILD, "unit/device")
        say("unit, device-level and fuzz tests under ASan/UBSan")
        outcomes += ctest(SAN_BUILD, "asan+ubsan")
        for q in [line, *other_lines]:
            say(f"the device's qtest in QEMU {q}'s tree")
            outcomes += qtest(q)
    scripts = sorted(GUEST_DIR.glob("[0-9]*.sh"))
    if args.only:
        scripts = [s for s in scripts if any(o in s.name for o in args.only)]
    else:
        # Long tests (header "ci=0") belong to ./hcasim suite; CI keeps the
        # quick, representative set. Named with --only, they run here too.
        long = [s for s in scripts if suite_only(s)]
        if long:
            say("suite-only guest tests, not run here (./hcasim suite runs them): "
                + " ".join(s.stem for s in long))
        scripts = [s for s in scripts if s not in long]
    elsewhere = [s for s in scripts if not applies(s, image)]
    if elsewhere:
        say(f"guest tests for other images, not run on {image}: " + " ".join(s.stem for s in elsewhere))
    runs = [(s, image, line) for s in scripts if s not in elsewhere]
    runs += [(s, i, q) for i, q in smoke_columns(image, others, line, other_lines)
             for s in scripts if s.stem == IMAGE_SMOKE and applies(s, i)]
    timing = {}
    if not args.no_guest:
        base = load_baseline("quick")
        for s, i, q in runs:
            os.environ["HCASIM_QEMU_LINE"] = q
            got = guest_test(s, depth="quick", timing=timing, image=i)
            apply_baseline(label_of(s, i), got, base)
            outcomes += got
        os.environ["HCASIM_QEMU_LINE"] = line
        if not args.only or any(o in "fault-self-test" for o in args.only):
            outcomes += fault_self_test()
        print_timing(timing)
    failed = [o for o in outcomes if not o.passed]
    if failed:
        print("\nFailures:")
        for o in failed:
            print(f"  [{o.suite}] {o.name} {o.detail}")
    passed = len(outcomes) - len(failed)
    print(f"\n{passed} passed, {len(failed)} failed")
    return 0 if not failed and outcomes else 1
