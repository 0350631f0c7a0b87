# SPDX-License-Identifier: Apache-2.0
"""The disk cost under the fractional journal (docs/sharing.md, "Crash safety"): the two ways of making
one decision durable, timed on the same file system, alternated so load affects both alike.

  rewrite  the whole journal replaced by the atomic writer: temp file, write, fsync, rename, fsync of
           the dir (what every GetPreferredAllocation and Allocate did before)
  append   one line appended to the log and fdatasync'ed (what they do now; a snapshot as above every
           few dozen decisions)

    /usr/bin/python3 bench/journal-io.py [--dir DIR] [--iterations 300] [--journal-bytes 70000] [--line-bytes 2300]

Defaults: a journal of 32 live containers of ~40 IDs (about 70 kB) and a line of one changed record
(~2.3 kB). DIR defaults to a temporary dir under /var/tmp (a disk, not tmpfs).
"""

import argparse
import os
import statistics
import tempfile
import time


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))]


def rewrite(d, data):
    tmp = os.path.join(d, ".j.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.write(fd, data)
    os.fsync(fd)
    os.close(fd)
    os.rename(tmp, os.path.join(d, "j"))
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(dfd)
    os.close(dfd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None)
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--journal-bytes", type=int, default=70000)
    ap.add_argument("--line-bytes", type=int, default=2300)
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="gpuslice-journal-io-", dir=args.dir or "/var/tmp")
    journal = b"x" * args.journal_bytes
    line = b"y" * (args.line_bytes - 1) + b"\n"
    log = os.open(os.path.join(d, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    t = {"rewrite": [], "append": []}
    try:
        for i in range(args.iterations):
            for name in (("rewrite", "append") if i % 2 else ("append", "rewrite")):
                t0 = time.perf_counter()
                if name == "rewrite":
                    rewrite(d, journal)
                else:
                    os.write(log, line)
                    os.fdatasync(log)
                t[name].append((time.perf_counter() - t0) * 1e6)
            if i % 50 == 49:
                os.ftruncate(log, 0)
    finally:
        os.close(log)
        for n in os.listdir(d):
            os.unlink(os.path.join(d, n))
        os.rmdir(d)
    for name, v in t.items():
        print("%-8s p50 %6.0f us  p90 %6.0f us  p99 %6.0f us  (%d)" % (name, statistics.median(v), pct(v, 90),
                                                                     pct(v, 99), len(v)))


if __name__ == "__main__":
    main()
