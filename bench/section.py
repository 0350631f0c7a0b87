#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The one reader and writer of docs/BENCHMARKS.md's generated sections (bench/run.sh calls it).

A section is the markdown a benchmark printed on stdout, between two marker lines:

    <!-- BEGIN NAME commit=SHA40 dirty=no paths=PATH,PATH,... -->
    ## Title
    _stamp: the command, the commit, the machine, the load at start and end, the wall time_
    ...the benchmark's stdout...
    <!-- END NAME -->

commit is HEAD when the run started; paths are the files and folders whose code the figures
measure; dirty=yes when any of them differed from HEAD during the run (the figures then belong to
no commit, and `check` refuses them).

    section.py write --doc FILE --name NAME --title TITLE --paths P,P,... --command TEXT -- CMD ARGS...
        run CMD (cwd: the repository root); on exit 0 replace section NAME in FILE (or append it), stamped;
        on failure leave FILE untouched and exit with CMD's status.
    section.py check [--root DIR] [--doc FILE]
        every section: its commit exists (git cat-file -e), nothing under its paths changed between
        that commit and HEAD (git diff --quiet COMMIT HEAD -- PATHS), dirty=no, BEGIN/END paired,
        no name twice. Exit 1 with one line per problem (make lint, kind `benchstamps`).
    section.py list [--doc FILE]
        NAME COMMIT PATHS of each section.

Nothing here passes or fails on a figure: the check is about where the figures come from.
"""

import argparse
import datetime
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DOC = os.path.join(ROOT, "docs", "BENCHMARKS.md")

BEGIN_RE = re.compile(r"^<!-- BEGIN (?P<name>[a-z0-9-]+)(?P<attrs>(?: [a-z]+=\S*)*) -->$")
END_RE = re.compile(r"^<!-- END (?P<name>[a-z0-9-]+) -->$")
ATTR_RE = re.compile(r" ([a-z]+)=(\S*)")

HEADER = """# Benchmarks

Today's figures of gpuslice's benchmarks, one generated section per part; earlier figures are in this
file's git history. Every section below is written by the command its stamp names (`bench/run.sh
--only NAME`; `make bench` runs them all) and stamped with the commit, the measured paths, the machine
and its load; `make lint` (kind `benchstamps`) fails when a section's commit does not exist or the code
it measures changed after it: re-run that section (`make test` leaves this kind out: a code change does not
wait for the benchmarks). Benchmarks are not tests: no figure passes or fails a build. Sections: `bench/run.sh --list`; how to add one: bench/run.sh's header.
"""


def git(root, *argv, check=True):
    r = subprocess.run(["git", "-C", root] + list(argv), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit("section.py: git %s: %s" % (" ".join(argv), r.stderr.strip()))
    return r


def parse(text):
    """-> (sections, problems): sections as dicts name/attrs/start/end (line indexes of the markers)."""
    sections, problems, open_ = [], [], None
    for i, line in enumerate(text.split("\n")):
        m = BEGIN_RE.match(line)
        if m:
            if open_:
                problems.append("line %d: BEGIN %s inside section %s" % (i + 1, m["name"], open_["name"]))
            open_ = {"name": m["name"], "attrs": dict(ATTR_RE.findall(m["attrs"])), "start": i}
            continue
        if line.startswith("<!-- BEGIN"):
            problems.append("line %d: a BEGIN marker that does not read '<!-- BEGIN NAME key=value... -->'" % (i + 1))
            continue
        m = END_RE.match(line)
        if m:
            if not open_ or open_["name"] != m["name"]:
                problems.append("line %d: END %s without its BEGIN" % (i + 1, m["name"]))
            else:
                open_["end"] = i
                sections.append(open_)
            open_ = None
    if open_:
        problems.append("line %d: section %s has no END" % (open_["start"] + 1, open_["name"]))
    return sections, problems


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return model or os.uname().machine, os.cpu_count() or 0


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def dirty_paths(root, paths):
    r = git(root, "status", "--porcelain", "--", *paths)
    return [line[3:] for line in r.stdout.splitlines() if line.strip()]


def cmd_write(a):
    paths = [p for p in a.paths.split(",") if p]
    if not paths:
        raise SystemExit("section.py: --paths is empty: name the code the figures measure")
    for p in paths:
        if not os.path.exists(os.path.join(ROOT, p)):
            raise SystemExit("section.py: --paths names %s, which does not exist" % p)
    if not re.fullmatch(r"[a-z0-9-]+", a.name):
        raise SystemExit("section.py: section names are [a-z0-9-]+: %r" % a.name)
    commit = git(ROOT, "rev-parse", "HEAD").stdout.strip()
    dirty_before = dirty_paths(ROOT, paths)
    model, cores = machine()
    load0 = loadavg()
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    r = subprocess.run(a.cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    secs = time.monotonic() - t0
    load1 = loadavg()
    if r.returncode != 0:
        sys.stdout.write(r.stdout)
        print("section.py: %s exited %d: section %s not written" % (" ".join(a.cmd), r.returncode, a.name),
              file=sys.stderr)
        return r.returncode
    dirty = sorted(set(dirty_before) | set(dirty_paths(ROOT, paths)))
    head = git(ROOT, "rev-parse", "HEAD").stdout.strip()
    if head != commit and git(ROOT, "diff", "--quiet", commit, head, "--", *paths, check=False).returncode != 0:
        print("section.py: the measured paths changed in a commit made during the run: section %s not written" %
              a.name, file=sys.stderr)
        return 1
    stamp = ("_Generated by `%s` at commit `%s`%s, %s, in %.0f s. Machine: %s, %d cores; load average "
             "(1/5/15 min) %s at the start, %s at the end. Measured code: %s._" % (
                 a.command, commit[:12],
                 " **with uncommitted changes in %s**" % ", ".join(dirty) if dirty else " (clean tree)",
                 started.strftime("%Y-%m-%d %H:%M UTC"), secs, model, cores, load0, load1,
                 ", ".join("`%s`" % p for p in paths)))
    body = r.stdout.strip("\n")
    block = ["<!-- BEGIN %s commit=%s dirty=%s paths=%s -->" % (a.name, commit, "yes" if dirty else "no",
                                                                 ",".join(paths)),
             "## %s" % a.title, "", stamp, "", body, "<!-- END %s -->" % a.name]
    text = open(a.doc).read() if os.path.exists(a.doc) else HEADER
    sections, problems = parse(text)
    if problems:
        raise SystemExit("section.py: %s is malformed, fix it first:\n  %s" % (a.doc, "\n  ".join(problems)))
    lines = text.split("\n")
    old = [s for s in sections if s["name"] == a.name]
    if old:
        lines[old[0]["start"]:old[0]["end"] + 1] = block
    else:
        while lines and lines[-1] == "":
            lines.pop()
        lines += [""] + block
    out = "\n".join(lines).rstrip("\n") + "\n"
    tmp = a.doc + ".tmp"
    with open(tmp, "w") as f:
        f.write(out)
    os.replace(tmp, a.doc)
    sys.stdout.write(r.stdout)
    print("section.py: wrote section %s of %s (%.0f s)" % (a.name, os.path.relpath(a.doc, ROOT), secs),
          file=sys.stderr)
    return 0


def problems_of(root, doc):
    """Every reason the sections of doc cannot be trusted, as lines."""
    text = open(doc).read()
    sections, problems = parse(text)
    head = git(root, "rev-parse", "HEAD").stdout.strip()
    seen = set()
    for s in sections:
        name, at = s["name"], s["attrs"]
        where = "%s:%d: section %s" % (os.path.relpath(doc, root), s["start"] + 1, name)
        if name in seen:
            problems.append("%s: appears twice" % where)
        seen.add(name)
        commit, paths = at.get("commit", ""), [p for p in at.get("paths", "").split(",") if p]
        if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
            problems.append("%s: no commit= stamp (hand-written? generate it: bench/run.sh --only %s)" % (where, name))
            continue
        if not paths:
            problems.append("%s: no paths= (the code its figures measure)" % where)
            continue
        if git(root, "cat-file", "-e", commit + "^{commit}", check=False).returncode != 0:
            problems.append("%s: commit %s does not exist here (re-run: bench/run.sh --only %s)" % (where, commit, name))
            continue
        if at.get("dirty", "no") != "no":
            problems.append("%s: measured with uncommitted changes (dirty=%s): re-run on a clean tree" %
                            (where, at.get("dirty")))
        if git(root, "merge-base", "--is-ancestor", commit, head, check=False).returncode != 0:
            problems.append("%s: commit %s is not an ancestor of HEAD" % (where, commit[:12]))
        changed = git(root, "diff", "--name-only", commit, head, "--", *paths).stdout.split()
        if changed:
            problems.append("%s: measured code changed after %s (%s): re-run bench/run.sh --only %s" % (
                where, commit[:12], ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else ""), name))
    return problems


def cmd_check(a):
    root = os.path.abspath(a.root)
    doc = a.doc or os.path.join(root, "docs", "BENCHMARKS.md")
    problems = problems_of(root, doc)
    for p in problems:
        print("benchstamps: %s" % p)
    return 1 if problems else 0


def cmd_list(a):
    sections, problems = parse(open(a.doc).read())
    for s in sections:
        print(s["name"], s["attrs"].get("commit", "-")[:12], s["attrs"].get("paths", "-"))
    for p in problems:
        print("section.py: %s" % p, file=sys.stderr)
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    w = sub.add_parser("write")
    w.add_argument("--doc", default=DOC)
    w.add_argument("--name", required=True)
    w.add_argument("--title", required=True)
    w.add_argument("--paths", required=True)
    w.add_argument("--command", required=True, help="the command a reader runs to regenerate it")
    w.add_argument("cmd", nargs="+")
    c = sub.add_parser("check")
    c.add_argument("--root", default=ROOT)
    c.add_argument("--doc")
    li = sub.add_parser("list")
    li.add_argument("--doc", default=DOC)
    a = ap.parse_args()
    return {"write": cmd_write, "check": cmd_check, "list": cmd_list}[a.what](a)


if __name__ == "__main__":
    sys.exit(main())
