# SPDX-License-Identifier: Apache-2.0
"""`gpuslice scheduler` behind the real kube-scheduler 1.20 and kube-apiserver (tests/e2e/cluster.py).

The control plane only: GPU nodes are Node objects (GPU annotation, capacity, Ready) with no kubelet,
so pods are bound but never run — what is checked is where kube-scheduler puts them through the
extender, and what bind writes on them. With a gpuslice built with the Kubernetes client the
extender watches the API and binds (bindVerb); otherwise it serves a snapshot of the same objects
and kube-scheduler binds (filter + prioritize only): the bind-side checks are left out there, and the
case that needs bind is reported SKIP and fails the run.

    /usr/bin/python3 tests/e2e/test_scheduler_extender.py [--build DIR] [TEST ...]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import traceback
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESOURCES = ["nvidia.com/gpu", "gpuslice.io/gpu-core", "gpuslice.io/gpu-memory", "tencent.com/vcuda-core",
             "tencent.com/vcuda-memory", "aliyun.com/gpu-mem"]


class Fail(Exception):
    pass


class Skip(Exception):
    """A case this build cannot run; reported as SKIP and counted as a failure (a skip is not a pass)."""


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def links_quads(n):
    """Two NVLink quads joined by SYS (row i: links from GPU i to i+1..n-1)."""
    return ";".join(",".join("NV4" if i // 4 == j // 4 else "SYS" for j in range(i + 1, n)) for i in range(n - 1))


def gpus_annotation(name, mems, links=None):
    a = {"v": 1, "gpus": [{"i": i, "uuid": "GPU-%s-%d" % (name, i), "model": "Tesla T4", "mem": m, "health": "ok"}
                          for i, m in enumerate(mems)]}
    if links:
        a["links"] = links
    return json.dumps(a)


# name, per-GPU MiB, links
NODES = [("two-6g", [6144, 6144], "PIX"), ("one-16g", [16384], None), ("share-2", [16384, 16384], "PIX"),
         ("ring", [32768] * 8, links_quads(8)), ("cross", [32768] * 8, links_quads(8))]
# GPUs already held whole (by pods placed directly on the node): ring keeps one free NVLink quad,
# cross has two free GPUs on each quad
HELD = {"ring": [0, 1, 2, 3], "cross": [0, 1, 4, 5]}


def make_node(c, name, mems, links):
    c.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"gpuslice.io/e2e": "extender", "gpuslice.io/e2e-node": name,
                 "gpuslice.io/e2e-group": "small" if name in ("two-6g", "one-16g") else "big"},
        "annotations": {"gpuslice.io/gpus": gpus_annotation(name, mems, links)}}})
    units = sum(m // 256 for m in mems)
    cap = {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(len(mems)),
           "gpuslice.io/gpu-core": str(100 * len(mems)), "gpuslice.io/gpu-memory": str(units),
           "tencent.com/vcuda-core": str(100 * len(mems)), "tencent.com/vcuda-memory": str(units)}
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {"status": {"capacity": cap, "allocatable": cap, "conditions": [
        {"type": "Ready", "status": "True", "reason": "E2E", "lastHeartbeatTime": now, "lastTransitionTime": now}]}}
    req = urllib.request.Request(c.server + "/api/v1/nodes/%s/status" % name, data=json.dumps(status).encode(),
                                 method="PATCH", headers={"Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(req, context=c._ssl(), timeout=30) as r:
        r.read()
    # the API server taints a new node not-ready; no node controller runs here to lift it
    req = urllib.request.Request(c.server + "/api/v1/nodes/%s" % name, data=b'{"spec":{"taints":null}}',
                                 method="PATCH", headers={"Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(req, context=c._ssl(), timeout=30) as r:
        r.read()


def pod_obj(name, limits, node=None, annotations=None, selector=None, scheduler="default-scheduler"):
    spec = {"schedulerName": scheduler, "containers": [{"name": "main", "image": cluster.BUSYBOX,
                                                        "command": ["sleep", "3600"],
                                                        "resources": {"limits": limits}}],
            "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False}
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}}, "spec": spec}


def holder_pods():
    out = []
    for node, gpus in HELD.items():
        asg = {"v": 1, "node": node, "time": 1, "containers": [{"name": "main", "gpus": gpus, "core": 100, "mem": 0}]}
        out.append(pod_obj("holder-" + node, {"nvidia.com/gpu": str(len(gpus))}, node=node,
                           annotations={"gpuslice.io/assignment": json.dumps(asg), "gpuslice.io/assigned": "true"}))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_pod(c, name):
    return c.api("GET", "/api/v1/namespaces/default/pods/" + name)


def bound_node(c, name, timeout=60):
    try:
        return c.wait("pod %s bound" % name, lambda: get_pod(c, name)["spec"].get("nodeName"), timeout=timeout)
    except cluster.E2EError as e:
        raise Fail("%s; events: %s" % (e, events_of(c, name)))


def events_of(c, name):
    ev = c.api("GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name=" + name)
    return " | ".join(e.get("message", "") for e in ev.get("items", []))


class Env:
    def __init__(self, build):
        self.build = build
        self.exe = os.path.join(build, "gpuslice")
        help_text = subprocess.run([self.exe, "scheduler", "--help"], capture_output=True, text=True).stdout
        self.api_mode = "--kubeconfig" in help_text
        self.c = cluster.Cluster().__enter__()
        c = self.c
        c.start_control_plane()
        if not c._exists("/api/v1/namespaces/default/serviceaccounts/default"):
            c.api("POST", "/api/v1/namespaces/default/serviceaccounts",
                  {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})
        for name, mems, links in NODES:
            make_node(c, name, mems, links)
        for p in holder_pods():
            c.api("POST", "/api/v1/namespaces/default/pods", p)
        self.port = free_port()
        argv = [self.exe, "scheduler", "--address", "127.0.0.1:%d" % self.port, "--log-level", "debug"]
        if self.api_mode:
            argv += ["--kubeconfig", c.kubeconfig]
        else:
            snap = {"nodes": c.api("GET", "/api/v1/nodes")["items"],
                    "pods": c.api("GET", "/api/v1/namespaces/default/pods")["items"]}
            path = c.path("extender-snapshot.json")
            with open(path, "w") as f:
                json.dump(snap, f)
            argv += ["--snapshot", path]
        self.argv = argv
        self.ext = c.spawn("gpuslice-scheduler", argv)
        self.wait_healthy()
        ext = {"urlPrefix": "http://127.0.0.1:%d" % self.port, "filterVerb": "filter",
               "prioritizeVerb": "prioritize", "weight": 5, "nodeCacheCapable": True, "ignorable": False,
               "httpTimeout": "5s", "managedResources": [{"name": r, "ignoredByScheduler": False} for r in RESOURCES]}
        if self.api_mode:
            ext["bindVerb"] = "bind"
        c.start_scheduler(extenders=[ext])

    def wait_healthy(self):
        def healthy():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % self.port, timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        self.c.wait("the extender synced", healthy, timeout=60)

    def restart_extender(self):
        self.ext.stop()
        self.ext = self.c.spawn("gpuslice-scheduler", self.argv)
        self.wait_healthy()

    def stop(self):
        self.c.__exit__(None, None, None)


SMALL = {"gpuslice.io/e2e-group": "small"}  # two-6g and one-16g


def test_8gib_not_on_two_6gib(env):
    """12 GiB free on two-6g in total, but no one GPU has 8: the pod goes to one-16g, never two-6g;
    with bind, a second one still fits one-16g and a third fits on neither node."""
    c = env.c
    c.api("POST", "/api/v1/namespaces/default/pods",
          pod_obj("want8", {"gpuslice.io/gpu-core": "30", "gpuslice.io/gpu-memory": "32"}, selector=SMALL))
    node = bound_node(c, "want8")
    check(node == "one-16g", "want8 bound to %s" % node)
    if env.api_mode:
        # the model assumed it at bind: a second 8 GiB pod still fits one-16g, a third fits nowhere
        c.api("POST", "/api/v1/namespaces/default/pods",
              pod_obj("want8b", {"gpuslice.io/gpu-core": "30", "gpuslice.io/gpu-memory": "32"}, selector=SMALL))
        check(bound_node(c, "want8b") == "one-16g", "want8b")
        c.api("POST", "/api/v1/namespaces/default/pods",
              pod_obj("want8c", {"gpuslice.io/gpu-core": "30", "gpuslice.io/gpu-memory": "32"}, selector=SMALL))
        msg = c.wait("want8c refused with the GPU-level reason",
                     lambda: (lambda e: e if "largest free GPU" in e else None)(events_of(c, "want8c")), timeout=60)
        check(not get_pod(c, "want8c")["spec"].get("nodeName"), "want8c was bound: %s" % msg)


def test_4gpu_ring(env):
    """4 whole GPUs: ring has a free NVLink quad, cross's 4 free GPUs straddle SYS: ring wins."""
    c = env.c
    c.api("POST", "/api/v1/namespaces/default/pods", pod_obj("want4", {"nvidia.com/gpu": "4"},
                                                              selector={"gpuslice.io/e2e": "extender"}))
    node = bound_node(c, "want4")
    check(node == "ring", "want4 bound to %s" % node)
    if env.api_mode:
        asg = json.loads(get_pod(c, "want4")["metadata"]["annotations"]["gpuslice.io/assignment"])
        check(asg["node"] == "ring" and sorted(asg["containers"][0]["gpus"]) == [4, 5, 6, 7], asg)


def test_two_identical_fractional_pods(env):
    """Two identical 10 GiB pods submitted together on share-2 (2 x 16 GiB): distinct GPUs."""
    c = env.c
    if not env.api_mode:
        raise Skip("needs gpuslice built with the Kubernetes client (src/kube): the extender must bind")
    for n in ("twin-a", "twin-b"):
        c.api("POST", "/api/v1/namespaces/default/pods",
              pod_obj(n, {"gpuslice.io/gpu-core": "40", "gpuslice.io/gpu-memory": "40"},
                      selector={"gpuslice.io/e2e-node": "share-2"}))
    got = {}
    for n in ("twin-a", "twin-b"):
        node = bound_node(c, n)
        ann = get_pod(c, n)["metadata"].get("annotations", {})
        asg = json.loads(ann["gpuslice.io/assignment"])
        check(asg["node"] == node and ann.get("gpuslice.io/assigned") == "false", ann)
        got[n] = (node, tuple(asg["containers"][0]["gpus"]))
    check(got["twin-a"] != got["twin-b"], "both twins on the same GPU: %s" % got)


def test_gpu_manager_spec(env):
    """A gpu-manager pod spec (vcuda-core/vcuda-memory) unchanged: placed, and gpu-manager's annotations written."""
    c = env.c
    c.api("POST", "/api/v1/namespaces/default/pods",
          pod_obj("tencent", {"tencent.com/vcuda-core": "20", "tencent.com/vcuda-memory": "8"}, selector=SMALL))
    node = bound_node(c, "tencent")
    if env.api_mode:
        ann = get_pod(c, "tencent")["metadata"]["annotations"]
        check(ann.get("tencent.com/predicate-node") == node and ann.get("tencent.com/gpu-assigned") == "false", ann)
        check("tencent.com/predicate-gpu-idx-0" in ann, ann)


def test_restart(env):
    """The extender restarts: its model comes back from the API (the pods bound earlier hold their
    GPUs: a further 8 GiB pod fits neither small node)."""
    c = env.c
    if not env.api_mode:
        raise Skip("needs gpuslice built with the Kubernetes client (src/kube): the model comes from the API")
    env.restart_extender()
    c.api("POST", "/api/v1/namespaces/default/pods",
          pod_obj("want8d", {"gpuslice.io/gpu-core": "30", "gpuslice.io/gpu-memory": "32"}, selector=SMALL))
    msg = c.wait("want8d refused after the restart",
                 lambda: (lambda e: e if "largest free GPU" in e else None)(events_of(c, "want8d")), timeout=60)
    check(not get_pod(c, "want8d")["spec"].get("nodeName"), "want8d was bound: %s" % msg)
    c.api("DELETE", "/api/v1/namespaces/default/pods/want8d")


TESTS = [test_8gib_not_on_two_6gib, test_4gpu_ring, test_two_identical_fractional_pods, test_gpu_manager_spec,
         test_restart]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.environ.get("GPUSLICE_BUILD", os.path.join(ROOT, "build")))
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
                print("PASS", t.__name__, "(api)" if env.api_mode else "(snapshot)")
            except Skip as e:
                failed += 1
                print("SKIP", t.__name__, "-", e, "(counted as a failure)")
            except Exception:
                failed += 1
                print("FAIL", t.__name__)
                traceback.print_exc()
                print(env.ext.tail(40) if hasattr(env.ext, "tail") else "")
    finally:
        env.stop()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
