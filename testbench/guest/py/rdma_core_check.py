#!/usr/bin/env python3
"""Checks the output of the rdma-core test suite (run_tests.py -v) against a
baseline: pass floor, allowed skip reasons, known errors. Prints TAP lines
and a summary; exit status 1 on any failed check.

Usage: rdma_core_check.py OUTPUT BASELINE"""
import re
import sys


def main(out_path, base_path):
    out = open(out_path, errors="replace").read()
    floor = 0
    skips = {}
    known = {}
    for line in open(base_path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        kind, _, rest = line.partition(" ")
        if kind == "pass-floor":
            floor = int(rest)
        elif kind == "skip":
            reason, _, why = rest.partition(" | ")
            skips[reason.strip()] = why.strip()
        elif kind == "known-error":
            test, _, why = rest.partition(" | ")
            known[test.strip()] = why.strip()
    ran = re.search(r"^Ran (\d+) tests? in", out, re.M)
    total = int(ran.group(1)) if ran else 0
    reasons = re.findall(r"skipped '(.*?)'", out)
    errors = re.findall(r"^(ERROR|FAIL): (\w+) \(", out, re.M)
    summary = re.search(r"^(OK|FAILED)(?: \((.*)\))?$", out, re.M)
    counts = dict(kv.split("=") for kv in summary.group(2).split(", ")) if summary and summary.group(2) else {}
    skipped = int(counts.get("skipped", len(reasons)))
    bad = int(counts.get("errors", 0)) + int(counts.get("failures", 0))
    passed = total - skipped - bad - int(counts.get("expected failures", 0))
    n = 0
    failed = 0

    def check(desc, ok):
        nonlocal n, failed
        n += 1
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {n} - {desc}")

    print(f"# rdma-core suite: {total} run, {passed} passed, {skipped} skipped, {bad} errors/failures")
    check(f"the suite ran to its summary ({total} tests)", total > 0 and summary is not None)
    check(f"every error/failure is listed ({len(errors)} of {bad})", len(errors) == bad)
    check(f"{passed} passed, floor {floor}", passed >= floor)
    for kind, test in errors:
        if test in known:
            print(f"# known {kind} {test}: {known[test]}")
        check(f"{kind} {test} is a documented suite defect", test in known)
    unknown = sorted({r for r in reasons if r not in skips})
    for r in unknown:
        print(f"# skip reason not in the baseline: {r!r} ({reasons.count(r)} tests)")
    check("every skip is for a documented reason", not unknown)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
