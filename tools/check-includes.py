#!/usr/bin/env python3
"""The rules of the house for #include (docs/ARCHITECTURE.md, "What may
include what"), checked over the source tree.

Every C/C++ file belongs to a part; every quoted #include must resolve, from
the including file's folder or one of its part's include roots, to a header
of a part it may use:

  link library   hca-model/iba         its own include root only
  model          hca-model/src, cli    its src/, its C interface, the link library
  fabric         fabric/src, bench     fabric/src and the link library
  fabric tests   fabric/tests, fuzz    + fabric/tests
  QEMU device    qemu-device/src       its own files, the model's C interface,
                                       QEMU's headers (not in this tree)

So the model never includes the fabric, the QEMU device or the test bench,
and the fabric never includes the model's private headers. Inside the
model, trace/ and ifc/ are the base: they include no other part of src/.
The test bench (testbench/) may use everything and is not checked.

Usage: tools/check-includes.py [ROOT]   (exit 1 and one line per violation)
       tools/check-includes.py --self-test
"""

import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SOURCE_EXT = (".c", ".h", ".cpp", ".inc")

IBA = "hca-model/iba/include"
MODEL_SRC = "hca-model/src"
MODEL_API = "hca-model/include"

# part: (folders it covers, include roots it may use, folders it may reach)
PARTS = {
    "link library": (["hca-model/iba"], [IBA], ["hca-model/iba"]),
    "model": (["hca-model/src", "hca-model/cli"], [MODEL_SRC, MODEL_API, IBA], [MODEL_SRC, MODEL_API, "hca-model/iba"]),
    "fabric": (["fabric/src", "fabric/bench"], ["fabric/src", IBA], ["fabric/src", "hca-model/iba"]),
    "fabric tests": (["fabric/tests", "fabric/fuzz"], ["fabric/tests", "fabric/src", IBA],
                     ["fabric/tests", "fabric/src", "hca-model/iba"]),
    "QEMU device": (["qemu-device/src"], ["qemu-device/src", MODEL_API + "/hcasim"],
                    ["qemu-device/src", MODEL_API]),
}
# Headers the build generates into the model's include path (tools/gen-trace.py
# from hca-model/trace-events); only the model includes them.
GENERATED = {"model": ("trace_cats.gen.h", "trace_events.gen.h")}
# Folders of src/ that are the model's base layer.
MODEL_BASE = ("hca-model/src/trace", "hca-model/src/ifc")
# The QEMU device's other includes come from QEMU's tree.
QEMU_PREFIXES = ("qemu/", "hw/", "qapi/", "qom/", "migration/", "sysemu/", "exec/", "net/", "chardev/", "trace/")
# Folders whose headers no product code may include by angle brackets either.
OURS = ("hca-model", "fabric", "qemu-device", "testbench", "guest-driver")


def part_of(rel):
    for name, (folders, _, _) in PARTS.items():
        if any(rel == f or rel.startswith(f + "/") for f in folders):
            return name
    return None


def under(rel, folders):
    return any(rel == f or rel.startswith(f + "/") for f in folders)


def resolve(root, rel_file, target, roots):
    here = os.path.dirname(rel_file)
    for base in [here] + roots:
        cand = os.path.normpath(os.path.join(base, target))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def anywhere(root, target):
    """Where a header of that name lives in our tree (first match)."""
    for top in OURS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in ("build", ".git", "corpus")]
            cand = os.path.join(dirpath, target)
            if os.path.isfile(cand):
                return os.path.relpath(cand, root)
    return None


def check_file(root, rel, part):
    _, roots, reach = PARTS[part]
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        text = f.read()
    for kind, target in INCLUDE.findall(text):
        if kind == "<":
            if target.startswith(("hcasim/", "iba/")) or target == "be.h":
                yield f"{rel}: #include <{target}>: our headers are included with quotes"
            continue
        if target in GENERATED.get(part, ()):
            continue
        found = resolve(root, rel, target, roots)
        if found is None:
            other = anywhere(root, target)
            if part == "QEMU device" and target.startswith(QEMU_PREFIXES) and other is None:
                continue
            where = f" (it is {other}, outside what the {part} may include)" if other else ""
            yield f"{rel}: #include \"{target}\" does not resolve in the {part}'s include roots{where}"
            continue
        if not under(found, reach):
            yield f"{rel}: #include \"{target}\" reaches {found}, outside the {part}"
        elif part == "model" and under(rel, MODEL_BASE) and not under(found, [os.path.dirname(rel)]) \
                and under(found, [MODEL_SRC]):
            yield f"{rel}: #include \"{target}\": {os.path.dirname(rel)}/ is the model's base and includes no other part of src/"


def check(root):
    problems = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in (".git", "build") and not d.startswith("build"))
        for name in sorted(filenames):
            if not name.endswith(SOURCE_EXT):
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), root)
            part = part_of(rel)
            if part:
                problems.extend(check_file(root, rel, part))
    return problems


def self_test():
    """The checker fails on each kind of violation and passes a clean tree."""
    files = {
        "hca-model/iba/include/iba/link.h": "",
        "hca-model/iba/include/be.h": "",
        "hca-model/include/hcasim/hca_model.h": "",
        "hca-model/src/device.h": '#include "objects/qp.h"\n#include "iba/link.h"\n#include "hcasim/hca_model.h"\n',
        "hca-model/src/objects/qp.h": '#include "trace/trace.h"\n',
        "hca-model/src/trace/trace.h": '#include <cstdint>\n',
        "fabric/src/switch.h": '#include "iba/link.h"\n#include "be.h"\n',
        "fabric/tests/fake_ca.h": '#include "switch.h"\n',
        "qemu-device/src/mlx5_hca.c": '#include "qemu/osdep.h"\n#include "trace.h"\n#include "hca_model.h"\n',
        "qemu-device/src/trace.h": "",
        "testbench/device/pair.h": '#include "device.h"\n',
    }
    bad = {
        "the model includes the fabric": ("hca-model/src/objects/cq.cpp", '#include "switch.h"\n'),
        "the model includes the fabric by path": ("hca-model/src/objects/cq.cpp", '#include "../../../fabric/src/switch.h"\n'),
        "the model includes the QEMU device": ("hca-model/src/device.cpp", '#include "trace.h"\n'),
        "the model includes the test bench": ("hca-model/src/device.cpp", '#include "pair.h"\n'),
        "the fabric includes the model": ("fabric/src/sa.cpp", '#include "device.h"\n'),
        "the fabric includes the model by path": ("fabric/src/sa.cpp", '#include "../../hca-model/src/objects/qp.h"\n'),
        "the fabric includes the C interface": ("fabric/src/sa.cpp", '#include "hcasim/hca_model.h"\n'),
        "the link library includes the model": ("hca-model/iba/src/link.cpp", '#include "device.h"\n'),
        "the QEMU device includes the model's src": ("qemu-device/src/mlx5_hca.c", '#include "device.h"\n'),
        "the QEMU device includes the link library": ("qemu-device/src/mlx5_hca.c", '#include "iba/link.h"\n'),
        "the QEMU device includes the model's trace": ("qemu-device/src/mlx5_hca.c", '#include "trace/trace.h"\n'),
        "the base includes another part": ("hca-model/src/trace/trace.cpp", '#include "objects/qp.h"\n'),
        "our header by angle brackets": ("hca-model/src/device.cpp", '#include <iba/link.h>\n'),
    }

    top = tempfile.TemporaryDirectory(prefix="hcasim-includes-")

    def tree(extra):
        d = tempfile.mkdtemp(dir=top.name)
        for rel, text in {**files, **extra}.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w") as f:
                f.write(text)
        return d

    failures = []
    clean = check(tree({}))
    if clean:
        failures.append(f"a clean tree reported: {clean}")
    for what, (rel, text) in bad.items():
        got = check(tree({rel: text}))
        if not got:
            failures.append(f"not caught: {what}")
    top.cleanup()
    for f in failures:
        print("self-test:", f)
    print(f"self-test: {len(bad) + 1 - len(failures)} of {len(bad) + 1} cases behave")
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    print(f"{len(problems)} include rule violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
