#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""No cycle between the .c files of one folder (docs/style.md, "No file cycle in a folder").

The graph: its nodes are the .c files of the folder; file A *uses* file B (an edge A -> B) when A's
code, with comments and string and character literals removed, names a function or variable that
B defines with external linkage (not `static`; universal-ctags finds the definitions). Headers are
not nodes: a header only declares, and a declaration is not a use. The folder passes when the graph
has no cycle: every file can be read, tested and replaced knowing only the files below it. A cycle
is reported as a path of files, each step with the symbol that makes it.

    scripts/lint-cycles.py [--root DIR] [--allow FOLDER:A.c:B.c] FOLDER...     (default FOLDER: src/agent)

--allow names one known cycle to pass over for now (a temporary exclusion: the edge A.c -> B.c is
left out of FOLDER's graph, and the run says so); a cycle through any other edge still fails.

Exit 0 when no folder has a cycle, 1 when one has (or a folder has no .c file), 2 when ctags is
missing.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def strip(text):
    """The text with comments and string/character literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def ctags_binary():
    for name in ("ctags-universal", "universal-ctags", "ctags"):
        path = shutil.which(name)
        if path:
            return path
    return None


def static_after_brace(path, lineno, cache):
    """Whether the definition that ends on line `lineno` with `} name;` (a variable of an unnamed struct,
    which ctags does not mark as file scope) is declared `static`: the text from the statement before it
    to the brace that opens the struct."""
    if path not in cache:
        with open(path, encoding="utf-8") as fh:
            cache[path] = strip(fh.read())
    text = cache[path]
    at = 0
    for _ in range(lineno - 1):
        at = text.find("\n", at) + 1
    close = text.find("}", at)
    depth = 0
    for i in range(close, -1, -1):
        depth += {"}": 1, "{": -1}.get(text[i], 0)
        if depth == 0:
            start = max(text.rfind(";", 0, i), text.rfind("}", 0, i)) + 1
            return re.search(r"\bstatic\b", text[start:i]) is not None
    return False


def definitions(ctags, files):
    """{symbol: file} for every function and variable a file defines with external linkage."""
    out = subprocess.run([ctags, "--output-format=u-ctags", "--language-force=C", "--c-kinds=fv", "--fields=+fn",
                          "-o", "-"] + files, capture_output=True, text=True, check=True).stdout
    defs, cache = {}, {}
    for line in out.splitlines():
        if line.startswith("!_"):
            continue
        fields = line.split("\t")
        if len(fields) < 4 or any(f == "file:" for f in fields[3:]):
            continue  # static: file scope
        lineno = next((int(f[5:]) for f in fields[3:] if f.startswith("line:")), 0)
        if fields[2].startswith("/^}") and lineno and static_after_brace(fields[1], lineno, cache):
            continue  # static struct { ... } name;
        defs.setdefault(fields[0], fields[1])
    return defs


# `__typeof__(&name)` takes a declaration's type (dlopen'd functions keep their prototypes: docs/style.md),
# it calls nothing: not a use.
TYPEOF = re.compile(r"\b__typeof__\s*\(\s*&?\s*[A-Za-z_][A-Za-z0-9_]*\s*\)")


def graph(files, defs):
    """{file: {used file: first symbol that uses it}}."""
    edges = {f: {} for f in files}
    for f in files:
        with open(f, encoding="utf-8") as fh:
            text = TYPEOF.sub(" ", strip(fh.read()))
        for m in IDENT.finditer(text):
            g = defs.get(m.group(0))
            if g and g != f and g not in edges[f]:
                edges[f][g] = m.group(0)
    return edges


def find_cycle(edges):
    """One cycle as a list of files [a, b, ..., a], or None (depth-first search, colours)."""
    colour = {f: 0 for f in edges}
    stack = []

    def visit(f):
        colour[f] = 1
        stack.append(f)
        for g in sorted(edges[f]):
            if colour[g] == 1:
                return stack[stack.index(g):] + [g]
            if colour[g] == 0:
                found = visit(g)
                if found:
                    return found
        stack.pop()
        colour[f] = 2
        return None

    for f in sorted(edges):
        if colour[f] == 0:
            found = visit(f)
            if found:
                return found
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--allow", action="append", default=[], metavar="FOLDER:A.c:B.c",
                    help="leave the edge A.c -> B.c of FOLDER out (a known cycle, excluded for now)")
    ap.add_argument("folders", nargs="*", default=["src/agent"])
    args = ap.parse_args()
    allowed = {}
    for spec in args.allow:
        parts = spec.split(":")
        if len(parts) != 3:
            print("lint-cycles: --allow %s: not FOLDER:A.c:B.c" % spec)
            return 2
        allowed.setdefault(os.path.normpath(parts[0]), []).append((parts[1], parts[2]))
    ctags = ctags_binary()
    if not ctags:
        print("lint-cycles: universal-ctags is missing (scripts/install-deps.sh)")
        return 2
    os.chdir(args.root)
    bad = 0
    for folder in args.folders:
        files = sorted(glob.glob(os.path.join(folder, "*.c")))
        if not files:
            print("lint-cycles: %s: no .c files" % folder)
            bad += 1
            continue
        edges = graph(files, definitions(ctags, files))
        for a, b in allowed.get(os.path.normpath(folder), []):
            pa, pb = os.path.join(folder, a), os.path.join(folder, b)
            if pb not in edges.get(pa, {}):
                print("lint-cycles: %s: --allow %s -> %s: no such use (drop the exclusion)" % (folder, a, b))
                bad += 1
                continue
            print("lint-cycles: %s: %s -> %s (%s) left out: a known cycle, excluded for now" %
                  (folder, a, b, edges[pa][pb]))
            del edges[pa][pb]
        cycle = find_cycle(edges)
        if cycle:
            steps = [os.path.basename(cycle[0])]
            for a, b in zip(cycle, cycle[1:]):
                steps.append("-> %s (%s)" % (os.path.basename(b), edges[a][b]))
            print("lint-cycles: %s: files call each other in a cycle: %s" % (folder, " ".join(steps)))
            bad += 1
    if bad:
        return 1
    print("lint-cycles: ok (%s)" % " ".join(args.folders))
    return 0


if __name__ == "__main__":
    sys.exit(main())
