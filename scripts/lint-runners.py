#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""make lint, kind `runners`: every Python test runner in tests/, bench/ and hwkit/ is tests/runner.py.

A Python file there with a `if __name__ == "__main__":` block must call the runner (runner.main,
runner.run_suites, agent_fixture's run_main or e2e.main, which are the runner's), or be named in
scripts/lint-runners.allow with the reason it is not a test runner (a benchmark, a stand-in, a tool).
Outside tests/runner.py no file may write a verdict or a skip of its own: print a PASS/SKIP/FAIL or
"ok NAME" line, or exit / return 77. A line of the allow file that names no file is an error too.

    scripts/lint-runners.py [--root DIR]
"""

import argparse
import os
import re
import sys

DIRS = ("tests", "bench", "hwkit")
ENTRY = re.compile(r"\b(runner\.main|runner\.run_suites|run_main|e2e\.main)\(")
MAIN = re.compile(r'^if __name__ == "__main__":', re.M)
OWN = [
    (re.compile(r'print\(\s*"(PASS|SKIP|FAIL)\b'), "prints its own verdict line"),
    (re.compile(r'print\(\s*"ok"\s*,'), "prints its own verdict line"),
    (re.compile(r"(sys\.exit|exit|return)\s*\(?\s*77\b"), "exits 77 itself (the runner's skip: raise runner.Skip)"),
]


def code_only(text):
    """text without comments, docstrings and other string literals' contents (kept: the quotes)."""
    out = re.sub(r'("""|\'\'\')(?:.|\n)*?\1', '""', text)
    return "\n".join(line.split(" #", 1)[0] if not line.lstrip().startswith("#") else "" for line in out.split("\n"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    allow = {}
    allow_file = os.path.join(root, "scripts", "lint-runners.allow")
    problems = []
    if os.path.exists(allow_file):
        for n, line in enumerate(open(allow_file), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            path, _, reason = line.partition(" ")
            if not reason.strip():
                problems.append("scripts/lint-runners.allow:%d: %s has no reason" % (n, path))
            if not os.path.isfile(os.path.join(root, path)):
                problems.append("scripts/lint-runners.allow:%d: %s does not exist" % (n, path))
            allow[path] = reason.strip()
    files = []
    for d in DIRS:
        for dirpath, dirnames, names in os.walk(os.path.join(root, d)):
            dirnames[:] = sorted(x for x in dirnames if x not in ("__pycache__", "corpus"))
            files += [os.path.join(dirpath, x) for x in sorted(names) if x.endswith(".py")]
    for f in files:
        rel = os.path.relpath(f, root)
        if rel == "tests/runner.py":
            continue
        text = open(f, errors="replace").read()
        if MAIN.search(text) and not ENTRY.search(text) and rel not in allow:
            problems.append("%s: a main of its own, not tests/runner.py's (runner.main / runner.run_suites; or say "
                            "why it is no test runner in scripts/lint-runners.allow)" % rel)
        if rel in allow:
            continue
        code = code_only(text)
        for n, line in enumerate(code.split("\n"), 1):
            for pat, why in OWN:
                if pat.search(line):
                    problems.append("%s:%d: %s, outside tests/runner.py" % (rel, n, why))
    for p in problems:
        print("lint: runners: %s" % p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
