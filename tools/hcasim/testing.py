"""./hcasim test: every level of tests, one closing line.

1. unit and device-level tests (Catch2 through CTest) in the main tree;
2. the same plus the fuzz runs under ASan/UBSan (clang tree);
3. guest tests: testbench/guest/*.sh booted with `run`, each printing TAP
   lines ("ok N - ..." / "not ok N - ...") that are counted here.
"""
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from hcasim import build, vm
from hcasim.common import BUILD, ROOT, SAN_BUILD, run, say

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
    run(["ctest", "--test-dir", tree, "--output-on-failure", "-j", "2", "--output-junit", junit], check=False)
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


def guest_header(script):
    opts = {"nodes": "1", "timeout": "300", "reboot": "0"}
    for line in script.read_text().splitlines()[:10]:
        m = re.match(r"#\s*hcasim-test:\s*(.*)", line)
        if m:
            for kv in m.group(1).split():
                k, _, v = kv.partition("=")
                opts[k] = v
    return int(opts["nodes"]), float(opts["timeout"]), opts["reboot"] == "1"


def guest_test(script):
    nodes, timeout, reboot = guest_header(script)
    combined = script.with_suffix(".run.sh")
    run_dir_parent = BUILD / "guest-tests"
    run_dir_parent.mkdir(parents=True, exist_ok=True)
    combined = run_dir_parent / script.name
    combined.write_text((GUEST_DIR / "lib.sh").read_text() + "\n" + script.read_text())
    opts = vm.VmOptions(nodes=nodes, timeout=timeout, allow_reboot=reboot)
    say(f"guest test {script.name} ({nodes} node(s), budget {timeout:.0f}s)")
    run_dir, results = vm.run_script(combined, opts, name=f"test-{script.stem}", quiet=True)
    outcomes = []
    for r in results:
        seen = 0
        for line in r.output.splitlines():
            m = TAP_RE.match(line.strip())
            if m:
                seen += 1
                outcomes.append(Outcome(script.stem, f"node{r.node}: {m.group(2)}", m.group(1) == "ok",
                                        "" if m.group(1) == "ok" else str(run_dir)))
        if r.exit_code != 0:
            why = "timed out" if r.timed_out else (
                "no result (guest crashed?)" if r.exit_code is None else f"exit code {r.exit_code}")
            outcomes.append(Outcome(script.stem, f"node{r.node}: script {why}", False, str(run_dir)))
        elif seen == 0:
            outcomes.append(Outcome(script.stem, f"node{r.node}: no TAP lines", False, str(run_dir)))
    say(f"  {sum(o.passed for o in outcomes)} passed, {sum(not o.passed for o in outcomes)} failed; "
        f"artifacts in {run_dir}")
    return outcomes


def main(args):
    build.everything(sanitizers=True)
    outcomes = []
    say("unit and device-level tests")
    outcomes += ctest(BUILD, "unit/device")
    say("unit, device-level and fuzz tests under ASan/UBSan")
    outcomes += ctest(SAN_BUILD, "asan+ubsan")
    scripts = sorted(GUEST_DIR.glob("[0-9]*.sh"))
    if args.only:
        scripts = [s for s in scripts if any(o in s.name for o in args.only)]
    if not args.no_guest:
        for s in scripts:
            outcomes += guest_test(s)
    failed = [o for o in outcomes if not o.passed]
    if failed:
        print("\nFailures:")
        for o in failed:
            print(f"  [{o.suite}] {o.name} {o.detail}")
    passed = len(outcomes) - len(failed)
    print(f"\n{passed} passed, {len(failed)} failed")
    return 0 if not failed and outcomes else 1
