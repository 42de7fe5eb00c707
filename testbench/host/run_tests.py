#!/usr/bin/env python3
"""Runs host-side Python tests (unittest) for CTest (testbench/CMakeLists.txt):

    run_tests.py test_trace.TraceSummary [more test names ...]

Exit status 0 when they pass, 1 when one fails, 77 (CTest's skip code)
when every test was skipped (a tool such as chromium is missing).
"""
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tools"))
sys.path.insert(0, str(HERE))


def main(names):
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    r = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
    if not r.wasSuccessful():
        return 1
    if r.testsRun and len(r.skipped) == r.testsRun:
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
