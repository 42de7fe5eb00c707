#!/usr/bin/env python3
"""The house rule for enums (docs/ARCHITECTURE.md): a scoped enum (enum
class) names its values in CamelCase (QpState::Rts, Status::BadParam); a
plain enum is a set of named constants, each kCamelCase (kWqeSend).

Usage: tools/check-enums.py ROOT   (exit 1 and one line per violation)
"""
import re
import sys
from pathlib import Path

FOLDERS = ("hca-model/src", "hca-model/iba", "hca-model/cli", "fabric/src", "testbench")
ENUM = re.compile(r"\benum\s+(class\s+)?(\w+)?\s*(?::\s*[\w:]+)?\s*\{([^}]*)\}")
CAMEL = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*\Z|[A-Z][a-z0-9]*\Z")
CONSTANT = re.compile(r"k[A-Z0-9]\w*\Z")


def violations(root):
    for folder in FOLDERS:
        for f in sorted((Path(root) / folder).rglob("*")):
            if f.suffix not in (".h", ".cpp") or ".gen." in f.name:
                continue
            text = f.read_text(errors="replace")
            for m in ENUM.finditer(text):
                scoped, name = bool(m.group(1)), m.group(2) or "(anonymous)"
                body = re.sub(r"//[^\n]*", "", m.group(3))
                for item in body.split(","):
                    value = item.split("=")[0].strip()
                    if not value:
                        continue
                    rule = CAMEL if scoped else CONSTANT
                    if not rule.match(value) or (scoped and value.isupper() and len(value) > 1):
                        want = "CamelCase" if scoped else "kCamelCase"
                        line = text.count("\n", 0, m.start()) + 1
                        yield f"{f.relative_to(root)}:{line}: enum {name}: {value} is not {want}"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = list(violations(root))
    for v in bad:
        print(v)
    print(f"{len(bad)} enum naming violation(s)" if bad else "enum names follow the house rule")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
