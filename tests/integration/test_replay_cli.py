#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`gpuslice replay` through the real binary on tests/data/replay: the JSON object (docs/scheduler.md), the
table with the failed pods by reason, no progress bar off a terminal, the exit codes of bad arguments and
of a malformed list (naming the line).

Usage: test_replay_cli.py --build BUILD_DIR --source SOURCE_DIR [replay] (tests/runner.py)."""
import json
import os
import re
import subprocess
import sys
import tempfile


def run(build, *args):
    r = subprocess.run([os.path.join(build, "gpuslice"), "replay"] + list(args), capture_output=True, text=True,
                       timeout=60)
    return r.returncode, r.stdout, r.stderr


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def test_replay(a):
    build, source = a.build, a.source
    data = os.path.join(source, "tests", "data", "replay")
    lists = ["--nodes", os.path.join(data, "nodes.csv"), "--pods", os.path.join(data, "pods.csv")]
    for policy in ["frag", "fgd", "bestfit", "random"]:
        rc, out, err = run(build, *lists, "--policy", policy, "--seed", "3", "--tune", "2", "--json")
        check(rc == 0, "%s: exit %d: %s" % (policy, rc, err))
        check(err == "", "%s: stderr off a terminal must be empty (no progress bar): %r" % (policy, err))
        j = json.loads(out)
        check(set(j) == {"policy", "seed", "gpus", "pods", "failed", "seconds", "curve"}, "keys %s" % sorted(j))
        check(j["policy"] == policy and j["seed"] == 3 and j["gpus"] == 15, "header %r" % j)
        check(j["failed"] >= 3 and j["failed"] <= j["pods"], "failed %d of %d" % (j["failed"], j["pods"]))
        check([p["arrived"] for p in j["curve"]] == list(range(201)), "one point per arrived percent 0..200")
        check(all(0 <= p["allocated"] <= 100 for p in j["curve"]), "allocated within 0..100")
        check(j["curve"][-1]["allocated"] > 50, "a 15-GPU cluster at 200 %% arrived is more than half full")
        again = json.loads(run(build, *lists, "--policy", policy, "--seed", "3", "--tune", "2", "--json")[1])
        check(again["curve"] == j["curve"], "%s: same seed, same curve" % policy)
    rc, out, err = run(build, *lists, "--gpu-pods-only", "--live-mix", "--json")
    check(rc == 0 and 0 < json.loads(out)["pods"] < 13, "--gpu-pods-only --live-mix (tuned down to 1.3 x): %d %s" % (rc, err))
    rc, out, err = run(build, *lists, "--tune", "0")
    check(rc == 0 and "policy frag, seed 42: 13 pods on 15 GPUs" in out, "table header: %s" % out)
    for reason in ["insufficient CPU", "insufficient memory", "no node of an accepted GPU model"]:
        check(reason in out, "table names '%s': %s" % (reason, out))
    check(run(build, "--pods", lists[3])[0] == 2, "--nodes missing: exit 2")
    check(run(build, *lists, "--policy", "nope")[0] == 2, "unknown policy: exit 2")
    check(run(build, *lists, "--tune", "x")[0] == 2, "bad --tune: exit 2")
    check(run(build, *lists, "extra")[0] == 2, "extra argument: exit 2")
    snap = os.path.join(source, "tests", "data", "replay-snapshot")
    for f in ["kubectl.json", "extender.json"]:
        rc, out, err = run(build, "--snapshot", os.path.join(snap, f), "--json")
        check(rc == 0, "--snapshot %s: exit %d: %s" % (f, rc, err))
        j = json.loads(out)
        check(j["gpus"] == 3 and j["pods"] == 7 and j["failed"] == 1, "--snapshot %s: %r" % (f, j))
        pl = j["placements"]
        check([p["pod"] for p in pl[:3]] == ["team/running-cpu", "team/running-a", "team/pend-1"], "order %r" % pl)
        check(pl[1] == {"pod": "team/running-a", "node": "gpu-a", "gpus": [1], "bound": True}, "bound %r" % pl[1])
        check(pl[3]["node"] is None and "no GPU room" in pl[3]["failed"], "failed %r" % pl[3])
    rc, out, err = run(build, "--snapshot", os.path.join(snap, "kubectl.json"))
    check(rc == 0 and "7 pods on 3 GPUs, 1 failed" in out and "1 x 2 GPU" in out, "snapshot table: %s" % out)
    check(re.search(r"team/running-a +gpu-a +1 \(bound\)", out) and re.search(r"team/pend-3 +- +failed: no GPU", out),
          "snapshot table lists the pods: %s" % out)
    check(run(build, "--snapshot", os.path.join(snap, "kubectl.json"), "--tune", "1.3")[0] == 2, "--snapshot --tune: exit 2")
    check(run(build, "--snapshot", os.path.join(snap, "kubectl.json"), *lists)[0] == 2, "--snapshot --nodes: exit 2")
    check(run(build, "--snapshot", os.path.join(snap, "kubectl.json"), "--memory-unit", "x=1")[0] == 2,
          "bad --memory-unit: exit 2")
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "snap.json")
        with open(bad, "w") as f:
            f.write('{"items":[{"kind":"Node","metadata":{"name":"a"},"status":{"allocatable":{"cpu":"4x"}}}]}')
        rc, out, err = run(build, "--snapshot", bad)
        check(rc == 3 and "snap.json: items[0] (Node a): status.allocatable.cpu: '4x' is not a quantity" in err,
              "malformed snapshot: %d %s" % (rc, err))
    with tempfile.TemporaryDirectory() as d:
        bad = os.path.join(d, "pods.csv")
        with open(bad, "w") as f:
            f.write("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,100\nq,1,1,2,300\n")
        rc, out, err = run(build, "--nodes", lists[1], "--pods", bad)
        check(rc == 3 and "pods.csv: line 3: num_gpu 2 with gpu_milli 300" in err, "malformed: %d %s" % (rc, err))
        rc, out, err = run(build, "--nodes", os.path.join(d, "missing.csv"), "--pods", bad)
        check(rc == 1 and "cannot read" in err, "missing file: %d %s" % (rc, err))


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import runner  # noqa: E402  (tests/runner.py)
    runner.main({"replay": test_replay}, timeout_s=100)
