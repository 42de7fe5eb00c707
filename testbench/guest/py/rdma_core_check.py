#!/usr/bin/env python3
"""Checks the output of the rdma-core test suite (run_tests.py -v) against
the expected outcome of every test (rdma-core-expected.<image>.txt): pass, skip
with a named reason, or a known error with a named reason. Prints TAP lines
(one per test expected to pass, one per group of the others) and exits 1
on any failed check.

A test that changes outcome in either direction fails the check: a pass
that turns into a skip or an error is a regression; a skip or known error
that turns into a pass means the device (or the suite) changed and the
expectation file must say so, with the new outcome, in the same commit.

Usage: rdma_core_check.py [--only PATTERN,...] OUTPUT EXPECTED
       (--only: the run was limited with run_tests.py -k PATTERN; only the
       expected tests whose id contains one of the patterns must run)
       rdma_core_check.py --record OUTPUT EXPECTED   (prints a new
       expectation file from OUTPUT, reusing EXPECTED's reason table)"""
import ast
import os
import re
import sys

# "test_x (tests.test_m.Class.test_x)", or "setUpClass (tests.test_m.Class)"
# for a whole class; then " ... STATUS", possibly after a docstring line
# and after whatever the test printed.
HEADER = re.compile(r"^(\w+) \((?P<id>tests\.[\w.]+)\)")
STATUS = re.compile(r"(ok|skipped (?P<reason>.+)|ERROR|FAIL|expected failure|unexpected success)")
# (Newer unittest prints the test's docstring line under the header.)
BLOCK = re.compile(r"^(?:ERROR|FAIL): \w+ \((?P<id>tests\.[\w.]+)\)[^\n]*\n(?:[^\n-][^\n]*\n)?-+\n"
                   r"(?P<body>.*?)(?=^=+$|^-+\nRan )", re.M | re.S)


def norm(text):
    return " ".join(text.split())


def decode_reason(raw):
    """unittest prints repr(reason): quotes depend on the text."""
    try:
        return norm(str(ast.literal_eval(raw)))
    except (ValueError, SyntaxError):
        return norm(raw.strip("'\""))


def outcomes(out):
    """test id -> (outcome, reason): the -v status lines, then the error
    blocks' tracebacks as the reason of each error."""
    res = {}
    pending = None
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            pending, line = m.group("id"), line[m.end():]
            if " ... " not in line:
                continue
        if pending is None:
            continue
        s = STATUS.fullmatch(line.rsplit(" ... ", 1)[-1].strip())
        if s:
            word = s.group(1).split()[0]
            kind = {"ok": "pass", "skipped": "skip", "ERROR": "error", "FAIL": "error"}.get(word, word)
            res[pending] = (kind, decode_reason(s.group("reason")) if s.group("reason") else "")
            pending = None
    for m in BLOCK.finditer(out):
        res[m.group("id")] = ("error", norm(m.group("body")))
    return res


UNCONFIRMED = set()  # tests whose expected outcome no complete run has shown yet


def load(path):
    """(reasons: name -> (text, why), expected: test id -> (outcome, reason name))"""
    reasons, expected = {}, {}
    for n, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("reason "):
            name, text, why = (f.strip() for f in line[7:].split(" | ", 2))
            reasons[name] = (norm(text), why)
            continue
        parts = line.split()
        # "pass?" / "skip? NAME": not yet seen in a complete run. A different
        # outcome is printed as a diagnostic, not checked, until a run
        # confirms the line (drop the "?").
        unconfirmed = len(parts) >= 2 and parts[1].endswith("?")
        if unconfirmed:
            parts[1] = parts[1][:-1]
        if len(parts) < 2 or parts[1] not in ("pass", "skip", "error") or (parts[1] != "pass") != (len(parts) == 3):
            raise SystemExit(f"{path}:{n}: expected 'TEST pass' or 'TEST skip|error REASON': {line}")
        if unconfirmed:
            UNCONFIRMED.add(parts[0])
        expected[parts[0]] = (parts[1], parts[2] if len(parts) == 3 else "")
    for test, (kind, name) in expected.items():
        if kind != "pass" and name not in reasons:
            raise SystemExit(f"{path}: {test}: reason {name!r} is not in the reason table")
    return reasons, expected


def matches(kind, got, text):
    """A skip's reason is the whole text; an error's is a line of its traceback."""
    return got == text if kind == "skip" else text in got


def record(out_path, exp_path):
    reasons, old = load(exp_path)
    print(open(exp_path).read().split("\n# Tests\n")[0].rstrip() + "\n\n# Tests")
    for test, (kind, got) in sorted(outcomes(open(out_path, errors="replace").read()).items()):
        names = [n for n, (text, _) in reasons.items() if kind != "pass" and matches(kind, got, text)]
        print(f"{test} {kind}" + (f" {names[0]}" if names else " UNKNOWN" if kind != "pass" else ""))
    return 0


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, desc, ok, notes=()):
        for note in notes:
            print(f"#   {note}")
        self.n += 1
        self.failed += not ok
        print(f"{'ok' if ok else 'not ok'} {self.n} - {desc}")


def main(out_path, exp_path, only=()):
    out = open(out_path, errors="replace").read()
    if not os.path.exists(exp_path):
        # An image whose rdma-core has no expectations recorded yet.
        print(f"not ok 1 - expected outcomes of this image's rdma-core suite: no {os.path.basename(exp_path)} "
              f"(record one: rdma_core_check.py --record)")
        return 1
    reasons, expected = load(exp_path)
    if only:
        expected = {t: v for t, v in expected.items() if any(p in t for p in only)}
        print(f"# a subset of the suite: tests matching {', '.join(only)}")
    got = outcomes(out)
    tap = Tap()
    ran = re.search(r"^Ran (\d+) tests? in", out, re.M)
    total = int(ran.group(1)) if ran else 0
    summary = re.search(r"^(OK|FAILED)(?: \((.*)\))?$", out, re.M)
    count = {k: sum(1 for v in got.values() if v[0] == k) for k in ("pass", "skip", "error")}
    print(f"# rdma-core suite: {total} run, {count['pass']} passed, {count['skip']} skipped, "
          f"{count['error']} errors/failures; {len(expected)} tests expected")
    tap.check(f"the suite ran to its summary ({total} tests)", total > 0 and summary is not None)
    methods = sum(1 for t in got if t.count(".") == 3)  # not the setUpClass entries
    tap.check(f"every test that ran has an outcome in the output ({methods} of {total})", methods == total)
    tap.check("every test that ran has an expected outcome", not set(got) - set(expected),
              [f"not in the expectation file: {t} {got[t][0]}" for t in sorted(set(got) - set(expected))])
    tap.check("every test of the expectation file ran", not set(expected) - set(got),
              [f"did not run: {t}" for t in sorted(set(expected) - set(got))])
    for test in sorted(UNCONFIRMED & set(got)):
        kind, name = expected[test]
        k, why = got[test]
        same = k == kind and (kind == "pass" or matches(kind, why, reasons[name][0]))
        print(f"# unconfirmed expectation {test} {kind}: {'seen' if same else f'got {k}: {why[:200]}'}")
    for test, (kind, name) in sorted(expected.items()):
        if test in UNCONFIRMED:
            continue
        if kind == "pass" and test in got:
            k, why = got[test]
            tap.check(f"{test} passes", k == "pass", [f"{k}: {why[:300]}"] if k != "pass" else [])
    for kind in ("skip", "error"):
        tests = sorted(t for t, (k, _) in expected.items() if k == kind and t in got and t not in UNCONFIRMED)
        bad = []
        for test in tests:
            k, why = got[test]
            text = reasons[expected[test][1]][0]
            if k != kind or not matches(kind, why, text):
                hint = " (now passes: update rdma-core-expected.<image>.txt)" if k == "pass" else ""
                bad.append(f"{test}: expected {kind} '{text}', got {k} '{why[:300]}'{hint}")
        used = sorted({expected[t][1] for t in tests})
        tap.check(f"{len(tests)} tests {'skip' if kind == 'skip' else 'fail'} as expected, "
                  f"for {len(used)} named reasons", not bad, bad)
    return 1 if tap.failed else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--record":
        sys.exit(record(sys.argv[2], sys.argv[3]))
    args = sys.argv[1:]
    only = ()
    if len(args) == 4 and args[0] == "--only":
        only, args = tuple(p for p in args[1].split(",") if p), args[2:]
    if len(args) != 2:
        raise SystemExit(__doc__)
    sys.exit(main(args[0], args[1], only))
