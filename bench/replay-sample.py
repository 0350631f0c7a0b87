#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Workloads of our own sampled from the openb trace's default pod list, to check that a packing policy
generalises beyond the three public ones (bench/replay.sh): written into OUT_DIR as
openb_pod_list_NAME.csv, with a fixed seed so every run samples the same pods.

  cpuheavy    the default list plus three times as many CPU-only pods again (drawn from its CPU-only pods)
  gpushare40  40 % of the GPU pods are shares (drawn from its shares), the rest whole and multi-GPU pods
  multigpu20  its CPU-only pods and shares, 20 % of the GPU pods multi-GPU (drawn), the rest 1-GPU pods
  gpuspec33   the default list with a third of the GPU pods constrained to a GPU model family

Usage: replay-sample.py TRACE_DIR OUT_DIR"""
import csv
import os
import random
import sys

SPECS = ["V100M16|V100M32", "T4", "G2", "P100|T4", "G3", "A10|T4|P100"]


def main():
    trace, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(trace, "openb_pod_list_default.csv"), newline="") as f:
        rows = list(csv.reader(f))
    hdr, pods = rows[0], rows[1:]
    rnd = random.Random(7)

    def write(name, ps):
        with open(os.path.join(out, "openb_pod_list_%s.csv" % name), "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(hdr)
            for i, p in enumerate(ps):
                w.writerow(["openb-pod-%05d" % i] + list(p[1:]))

    cpu = [p for p in pods if p[3] == "0"]
    share = [p for p in pods if p[3] == "1" and p[4] != "1000"]
    whole1 = [p for p in pods if p[3] == "1" and p[4] == "1000"]
    multi = [p for p in pods if int(p[3]) >= 2]
    gpu = len(share) + len(whole1) + len(multi)
    write("cpuheavy", pods + [rnd.choice(cpu) for _ in range(3 * len(cpu))])
    n = int(0.4 * gpu)
    write("gpushare40", cpu + [rnd.choice(share) for _ in range(n)] + [rnd.choice(whole1 + multi) for _ in range(gpu - n)])
    n = int(0.2 * gpu)
    write("multigpu20", cpu + share + [rnd.choice(multi) for _ in range(n)] + whole1[:gpu - len(share) - n])
    ps = []
    for p in pods:
        q = list(p)
        if q[3] != "0" and rnd.random() < 0.33:
            q[5] = rnd.choice(SPECS)
        ps.append(q)
    write("gpuspec33", ps)


if __name__ == "__main__":
    main()
