# SPDX-License-Identifier: Apache-2.0
"""`gpuslice scheduler`'s preempt verb behind the real kube-scheduler 1.20 (tests/e2e/cluster.py).

Two kubelet-less GPU nodes of 2 GPUs each, full of low-priority pods: on `held` both GPUs are held
whole (nvidia.com/gpu pods), on `shared` both carry a 60 % share (gpuslice.io/gpu-core pods). A
high-priority pod asks for one whole GPU. The extender's filter refuses both nodes (no GPU free
whole). kube-scheduler's own preemption, which counts extended resources per node, sees `shared`
as fitting with no victim at all (its nvidia.com/gpu is unused) and `held` as fitting after evicting
one holder; the extender's preempt keeps only `held` (evicting a holder frees a whole GPU there,
evicting nothing on `shared` frees none). So the pod must be bound to `held`, one holder evicted,
and the shares left alone. Without the preempt verb kube-scheduler would nominate `shared`, where
the pod can never fit, and leave it pending.

    /usr/bin/python3 tests/e2e/test_scheduler_preempt.py [--build DIR] [TEST ...]
"""

import argparse
import json
import os
import subprocess
import sys
import traceback
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402
import test_scheduler_extender as tse  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def low_pod(name, node, limits, gpus, whole):
    asg = {"v": 1, "node": node, "time": 1,
           "containers": [{"name": "main", "gpus": gpus, "core": 100 if whole else 60, "mem": 0}]}
    p = tse.pod_obj(name, limits, node=node, annotations={"gpuslice.io/assignment": json.dumps(asg),
                                                          "gpuslice.io/assigned": "true"})
    p["spec"]["priorityClassName"] = "gpuslice-e2e-low"
    return p


def pods_on(c, node):
    items = c.api("GET", "/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName=" + node)["items"]
    return sorted(p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp"))


class Env:
    def __init__(self, build):
        self.exe = os.path.join(build, "gpuslice")
        help_text = subprocess.run([self.exe, "scheduler", "--help"], capture_output=True, text=True).stdout
        self.api_mode = "--kubeconfig" in help_text
        self.c = c = cluster.Cluster().__enter__()
        c.start_control_plane()
        if not c._exists("/api/v1/namespaces/default/serviceaccounts/default"):
            c.api("POST", "/api/v1/namespaces/default/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        for name, value in (("gpuslice-e2e-low", 0), ("gpuslice-e2e-high", 1000)):
            c.api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                  {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                   "value": value, "preemptionPolicy": "PreemptLowerPriority"})
        for name in ("held", "shared"):
            tse.make_node(c, name, [16384, 16384], "PIX")
        for g in (0, 1):
            c.api("POST", "/api/v1/namespaces/default/pods",
                  low_pod("holder-%d" % g, "held", {"nvidia.com/gpu": "1"}, [g], True))
            c.api("POST", "/api/v1/namespaces/default/pods",
                  low_pod("sharer-%d" % g, "shared", {"gpuslice.io/gpu-core": "60"}, [g], False))
        self.port = tse.free_port()
        self.ext = c.spawn("gpuslice-scheduler", [self.exe, "scheduler", "--address", "127.0.0.1:%d" % self.port,
                                                  "--kubeconfig", c.kubeconfig, "--log-level", "debug"])

        def healthy():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.port, timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        c.wait("the extender synced", healthy, timeout=60)
        c.start_scheduler(extenders=[{
            "urlPrefix": "http://127.0.0.1:%d" % self.port, "filterVerb": "filter", "prioritizeVerb": "prioritize",
            "bindVerb": "bind", "preemptVerb": "preempt", "weight": 5, "nodeCacheCapable": True,
            "ignorable": False, "httpTimeout": "5s",
            "managedResources": [{"name": r, "ignoredByScheduler": False} for r in tse.RESOURCES]}])

    def metric(self, name):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port, timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[-1])
        return 0.0

    def stop(self):
        self.c.__exit__(None, None, None)


def test_preempt_frees_a_whole_gpu(env):
    c = env.c
    check(env.api_mode, "this build has no Kubernetes client: the extender cannot bind")
    p = tse.pod_obj("urgent", {"nvidia.com/gpu": "1"})
    p["spec"]["priorityClassName"] = "gpuslice-e2e-high"
    c.api("POST", "/api/v1/namespaces/default/pods", p)
    try:
        node = c.wait("urgent bound", lambda: tse.get_pod(c, "urgent")["spec"].get("nodeName"), timeout=120)
    except cluster.E2EError as e:
        raise Fail("%s; nominated %s; events: %s" % (
            e, tse.get_pod(c, "urgent").get("status", {}).get("nominatedNodeName"), tse.events_of(c, "urgent")))
    check(node == "held", "urgent bound to %s" % node)
    check(env.metric('gpuslice_scheduler_requests_total{verb="preempt"}') >= 1, "the preempt verb was not called")
    left = pods_on(c, "held")
    check("urgent" in left and len([n for n in left if n.startswith("holder-")]) == 1,
          "one holder evicted on held: %s" % left)
    check(pods_on(c, "shared") == ["sharer-0", "sharer-1"], "the shares were touched: %s" % pods_on(c, "shared"))
    asg = json.loads(tse.get_pod(c, "urgent")["metadata"]["annotations"]["gpuslice.io/assignment"])
    gone = [g for g in (0, 1) if "holder-%d" % g not in left]
    check(asg["containers"][0]["gpus"] == gone, "urgent got GPU %s, the evicted holder had %s" % (
        asg["containers"][0]["gpus"], gone))


TESTS = [test_preempt_frees_a_whole_gpu]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("GPUSLICE_E2E_BUILD",
                                                      os.environ.get("GPUSLICE_BUILD", os.path.join(ROOT, "build"))))
    ap.add_argument("tests", nargs="*")
    a = ap.parse_args()
    env = Env(a.build)
    failed = 0
    try:
        for t in TESTS:
            if a.tests and t.__name__ not in a.tests:
                continue
            try:
                t(env)
                print("PASS", t.__name__)
            except Exception:
                failed += 1
                print("FAIL", t.__name__)
                traceback.print_exc()
                print(env.ext.tail(60))
                print(env.c.procs["kube-scheduler"].tail(40))
    finally:
        env.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
