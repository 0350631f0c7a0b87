#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What honouring the scheduler's assignment costs a kubelet call (docs/scheduler.md, "On the node").

The real agent on the simulated seed node (8 GPUs), the kubelet stand-in (device plugin calls,
PodResources) and the API stand-in (tests/integration/), one whole GPU per "pod", GetPreferredAllocation
then Allocate as kubelet does, timed from the grpcio client, in three modes:

  node-local   no API access: the hooks are no-ops
  fallback     API access, no pod with an assignment: each call asks PodResources whether kubelet lists a pod
               the informer's cache does not know (it knows every one here: no LIST of the node's pods;
               before commit "answered from the informer's cache", each call LISTed them)
  honoured     API access, every call's pod carries an assignment: the informer's candidates,
               a PodResources List per call, the narrowing and the check (and the patch, off the call)

    /usr/bin/python3 bench/assign-bench.py --build build --source . [--iterations 200]

Not a test: it prints a table (markdown), nothing passes or fails on a number.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import agent_fixture  # noqa: E402
import kube_standin  # noqa: E402
import kubelet_standin  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def run(args, stubs, mode):
    e = agent_fixture.Env(args, stubs)
    api = None
    try:
        extra = []
        if mode != "node-local":
            api = kube_standin.StandIn().start()
            extra = ["--kubeconfig", api.kubeconfig(os.path.join(e.tmp, "kubeconfig"))]
            e.env["NODE_NAME"] = "bench"
        e.start_agent(*extra, "--log-level", "info")
        e.registered()
        time.sleep(1.0)
        uuids = e.ids()
        pre, alloc = [], []
        for i in range(args.iterations):
            g = i % len(uuids)
            if mode == "honoured":
                name = "p%d" % i
                api.store.put("pods", {
                    "metadata": {"name": name, "namespace": "default", "uid": "u%d" % i,
                                 "creationTimestamp": "2026-11-24T00:00:00Z", "annotations": {
                                     "gpuslice.io/assignment": json.dumps({"v": 1, "node": "bench", "time": i,
                                                                           "containers": [{"name": "main",
                                                                                           "gpus": [g]}]}),
                                     "gpuslice.io/assigned": "false"}},
                    "spec": {"nodeName": "bench", "containers": [{"name": "main", "resources": {
                        "limits": {"nvidia.com/gpu": "1"}}}]}})
                with e.kubelet.cond:
                    e.kubelet.pods = [("default", name, "main", "", [])]
                time.sleep(0.02)  # the watch event reaches the informer (as kubelet's would)
            t0 = time.perf_counter()
            got = e.prefer(uuids, 1)
            t1 = time.perf_counter()
            e.allocate(got)
            t2 = time.perf_counter()
            if mode == "honoured" and got != [uuids[g]]:
                raise AssertionError("call %d: preferred %s, assigned %s" % (i, got, uuids[g]))
            pre.append((t1 - t0) * 1e6)
            alloc.append((t2 - t1) * 1e6)
        return pre, alloc
    finally:
        e.close(False)
        if api:
            api.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--topology", default=None)
    ap.add_argument("--iterations", type=int, default=200)
    args = ap.parse_args()
    if not args.topology:
        args.topology = os.path.join(args.source, "tests", "data", "topologies", "seed000-8gpu-pcie-2socket.topo")
    stubs = kubelet_standin.load_stubs(args.build)
    print("| whole GPU, %d calls each (µs, grpcio client) | GetPreferredAllocation p50 / p99 | Allocate p50 / p99 |"
          % args.iterations)
    print("|---|---|---|")
    for mode in ("node-local", "fallback", "honoured"):
        pre, alloc = run(args, stubs, mode)
        print("| %s | %.0f / %.0f | %.0f / %.0f |" % (mode, pct(pre, 50), pct(pre, 99), pct(alloc, 50),
                                                    pct(alloc, 99)), flush=True)


if __name__ == "__main__":
    main()
