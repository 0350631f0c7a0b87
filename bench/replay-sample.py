#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Workloads of our own sampled from the openb trace's default pod list, to check that a packing policy
generalises beyond the three public ones (bench/replay.sh): written into OUT_DIR as
openb_pod_list_NAME.csv, with a fixed seed so every run samples the same pods.

  cpuheavy    the default list plus three times as many CPU-only pods again (drawn from its CPU-only pods)
  gpushare40  40 % of the GPU pods are shares (drawn from its shares), the rest whole and multi-GPU pods
  multigpu20  its CPU-only pods and shares, 20 % of the GPU pods multi-GPU (drawn), the rest 1-GPU pods
  gpuspec33   the default list with a third of the GPU pods constrained to a GPU model family
  cpuheavy1   the default list plus as many CPU-only pods again (a milder CPU-heavy mix)
  gpushare60  as gpushare40 with 60 % shares; gpushare80 80 %
  multigpu30  as multigpu20 with 30 % of the GPU pods multi-GPU
  gpuspec20   the default list with a fifth of the GPU pods constrained to one GPU model among those whose
              nodes could host the pod (GPUs per node and CPU), drawn in proportion to those nodes' GPUs:
              constraints a user would write, not random ones

The first four come first from one stream, so they stay the pods they were before the others were added;
the others have a stream each. Every list is tuned to 1.3 x the cluster's capacity by the replay itself
(cluster-trace.md section 2.1: copies drawn below it, pods removed above it).

Usage: replay-sample.py TRACE_DIR OUT_DIR"""
import csv
import os
import random
import sys

SPECS = ["V100M16|V100M32", "T4", "G2", "P100|T4", "G3", "A10|T4|P100"]


def read_nodes(trace):
    """Per node kind (model, GPUs per node, CPU milli) the GPUs of the cluster's nodes of that kind."""
    kinds = {}
    with open(os.path.join(trace, "openb_node_list_gpu_node.csv"), newline="") as f:
        for n in csv.DictReader(f):
            k = (n["model"], int(n["gpu"]), int(n["cpu_milli"]))
            kinds[k] = kinds.get(k, 0) + int(n["gpu"])
    return sorted(kinds.items())


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

    # the variants, each from its own stream
    r2 = random.Random(11)
    write("cpuheavy1", pods + [r2.choice(cpu) for _ in range(len(cpu))])
    for pct in (60, 80):
        r2 = random.Random(pct)
        n = int(pct / 100 * gpu)
        write("gpushare%d" % pct,
              cpu + [r2.choice(share) for _ in range(n)] + [r2.choice(whole1 + multi) for _ in range(gpu - n)])
    r2 = random.Random(30)
    n = int(0.3 * gpu)
    write("multigpu30", cpu + share + [r2.choice(multi) for _ in range(n)] + whole1[:gpu - len(share) - n])
    kinds = read_nodes(trace)
    r2 = random.Random(20)
    ps = []
    for p in pods:
        q = list(p)
        if q[3] != "0" and r2.random() < 0.2:
            ok = {}
            for (m, g, c), n in kinds:
                if g >= int(q[3]) and c >= int(q[1]):
                    ok[m] = ok.get(m, 0) + n
            if ok:
                q[5] = r2.choices(sorted(ok), weights=[ok[m] for m in sorted(ok)])[0]
        ps.append(q)
    write("gpuspec20", ps)


if __name__ == "__main__":
    main()
