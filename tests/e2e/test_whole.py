# SPDX-License-Identifier: Apache-2.0
"""Whole GPUs on a real cluster: three simulated GPU nodes of different topologies, each with its own
kubelet, containerd and `gpuslice node`. Pods and a Deployment asking for nvidia.com/gpu must land on
exactly the GPUs `gpuslice alloc` predicts from what is already taken, with the device nodes in the
container; the agent's --dev-root (as the DaemonSet uses it) must still give containers their GPUs;
a CDI-only strategy warns at start (kubelet 1.20 drops cdi_devices); an Xid makes the node's
allocatable drop by one and come back.

    /usr/bin/python3 tests/e2e/test_whole.py [TEST ...]
"""

import re
import time
import sys

import e2e
from e2e import Fail, check, pod, wait_pod

NODES = [("gpu-pcie", "demo-8gpu-2socket.node", None),
         ("gpu-nvlink", "dgx1-v100-hybrid-cube-mesh.topo", None),
         ("gpu-p40", "seed004-7gpu-p40-mlx4.topo", None)]
SHOW = 'echo "VISIBLE=$NVIDIA_VISIBLE_DEVICES"; echo "DEV=$(ls /dev | grep "^nvidia[0-9]" | tr "\\n" " ")"; sleep 3600'


def setup():
    c = e2e.gpu_cluster(NODES)
    for g in c.gpu.values():
        g.start_agent()
    for name, g in c.gpu.items():
        c.wait("%s allocatable nvidia.com/gpu" % name, lambda g=g: g.allocatable() == g.node.gpus, timeout=120)
    return c


def seen(c, name):
    """(GPU indices from NVIDIA_VISIBLE_DEVICES, device-node minors) of a running GPU pod."""
    def out():
        text = e2e.logs(c, name)
        return text if "DEV=" in text else None
    text = c.wait("output of %s" % name, out, timeout=90)
    vis = re.search(r"VISIBLE=(.*)", text).group(1).strip()
    dev = re.search(r"DEV=(.*)", text).group(1).split()
    return vis, sorted(int(d[len("nvidia"):]) for d in dev)


def gpus_of(c, g, name):
    vis, minors = seen(c, name)
    idx = g.uuid_index()
    got = sorted(idx[u] for u in vis.split(",") if u)
    check(got, "%s: no NVIDIA_VISIBLE_DEVICES (%r)" % (name, vis))
    check(minors == got, "%s: device nodes %s in the container, NVIDIA_VISIBLE_DEVICES names GPUs %s" % (name, minors, got))
    return got


def test_pods_on_predicted_gpus(c):
    """On every node: 1-, 2- then 4-GPU pods, each on what `gpuslice alloc` picks given the earlier ones."""
    for name, g in c.gpu.items():
        busy = []
        for i, n in enumerate((1, 2, 4)):
            want = g.predict(n, busy)
            pn = "whole-%s-%d" % (name, i)
            c.apply(pod(pn, name, SHOW, limits={"nvidia.com/gpu": n}))
            wait_pod(c, pn)
            got = gpus_of(c, g, pn)
            check(got == want, "%s: %d-GPU pod got GPUs %s, gpuslice alloc --busy %s predicts %s" % (name, n, got, busy, want))
            busy += got
        check(g.allocatable() == g.node.gpus, "allocatable changed while pods run (it counts healthy GPUs)")
        for i in range(3):
            e2e.delete(c, "pod", "whole-%s-%d" % (name, i), wait=False)
    for name in c.gpu:
        for i in range(3):
            c.wait("pod whole-%s-%d gone" % (name, i), lambda n="whole-%s-%d" % (name, i): "code" in c.api(
                "GET", "/api/v1/namespaces/default/pods/" + n, check=False), timeout=90)


def test_deployment_on_predicted_gpus(c):
    """A Deployment of 2-GPU replicas on the NVLink node, scaled 1 → 2 → 3: each new replica on the prediction."""
    g = c.gpu["gpu-nvlink"]
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "trainer"}},
                    "template": {"metadata": {"labels": {"app": "trainer"}}, "spec": pod(
                        "x", "gpu-nvlink", SHOW, limits={"nvidia.com/gpu": 2})["spec"]}}}
    dep["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    busy, known = [], set()
    try:
        for replicas in (1, 2, 3):
            dep["spec"]["replicas"] = replicas
            c.apply(dep)

            def running():
                items = c.api("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dtrainer")["items"]
                run = [p["metadata"]["name"] for p in items if p["status"].get("phase") == "Running"]
                return run if len(run) == replicas else None
            names = c.wait("%d trainer replicas running" % replicas, running, timeout=120)
            new = [n for n in names if n not in known]
            check(len(new) == 1, "expected one new replica, got %s" % new)
            want = g.predict(2, busy)
            got = gpus_of(c, g, new[0])
            check(got == want, "replica %d got GPUs %s; gpuslice alloc --busy %s predicts %s" % (replicas, got, busy, want))
            busy += got
            known.add(new[0])
    finally:
        e2e.delete(c, "deployment", "trainer")
        c.wait("trainer pods gone", lambda: not c.api(
            "GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Dtrainer")["items"], timeout=120)


def test_dev_root_host_paths(c):
    """The agent looking at the host's /dev through --dev-root (as the DaemonSet does: host /dev at /host/dev)
    must still name the host's /dev/nvidiaN in device specs, or the runtime cannot create the container."""
    g = c.gpu["gpu-p40"]
    g.stop_agent()
    root = "/run/gpuslice-e2e/devroot"
    g.node.run(["mkdir", "-p", root + "/dev"])
    script = 'mount --bind /dev %s/dev && exec "$@"' % root
    argv_agent = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "agent-ns"]
    g.start_agent("--dev-root", root, prefix=argv_agent)
    try:
        c.apply(pod("devroot", "gpu-p40", SHOW, limits={"nvidia.com/gpu": 2}))
        wait_pod(c, "devroot", timeout=120)
        got = gpus_of(c, g, "devroot")
        check(len(got) == 2, "devroot pod sees GPUs %s" % got)
    finally:
        e2e.delete(c, "pod", "devroot")
        g.stop_agent()
        g.start_agent()


def test_cdi_only_warns(c):
    """--device-list-strategy cdi: the agent warns at start; kubelet 1.20 drops cdi_devices, so the
    container indeed gets no GPU (what the warning says)."""
    g = c.gpu["gpu-pcie"]
    g.stop_agent()
    g.start_agent("--device-list-strategy", "cdi")
    try:
        log = open(g.agent.log).read().split("==== ")[-1]
        check(re.search(r"level=warn.*cdi", log, re.I),
              "no warning about the CDI-only strategy in the agent's log:\n%s" % log[-1500:])
        c.apply(pod("cdi", "gpu-pcie", SHOW, limits={"nvidia.com/gpu": 1}))
        wait_pod(c, "cdi")
        vis, minors = seen(c, "cdi")
        check(not vis and not minors, "kubelet 1.20 passed a GPU with CDI only? VISIBLE=%r devices %s" % (vis, minors))
    finally:
        e2e.delete(c, "pod", "cdi")
        g.stop_agent()
        g.start_agent()


def test_xid_allocatable(c):
    """A critical Xid on one GPU: the agent marks it unhealthy, the node's allocatable nvidia.com/gpu drops
    by one, and is back after the agent's quiet period — through the real kubelet and API server. The
    quiet period is 30 s here (the other cases' 5 s is as short as kubelet's 5 s node status period, so
    the dip could end before either the API or this test saw it)."""
    g = c.gpu["gpu-p40"]
    n = g.node.gpus
    g.stop_agent()
    g.start_agent("--health-quiet-period", "30s")  # the last of a repeated flag wins
    try:
        c.wait("allocatable %d" % n, lambda: g.allocatable() == n, timeout=120)
        g.sim("xid", 3, 48)
        t0 = time.monotonic()

        def unhealthy():
            st = [d for d in g.status()["devices"] if d["index"] == 3 and "::" not in d["id"]][0]
            return st.get("health") != "Healthy" and st
        c.wait("gpuslice status marking GPU 3 unhealthy after Xid 48", unhealthy, timeout=30)
        c.wait("allocatable %d after Xid 48 on GPU 3" % (n - 1), lambda: g.allocatable() == n - 1, timeout=90)
        c.wait("allocatable back to %d" % n, lambda: g.allocatable() == n, timeout=150)
        check(time.monotonic() - t0 >= 25, "GPU 3 back after %.0f s, before its 30 s quiet period ended" %
              (time.monotonic() - t0))
    finally:
        g.stop_agent()
        g.start_agent()


TESTS = [test_pods_on_predicted_gpus, test_deployment_on_predicted_gpus, test_dev_root_host_paths,
         test_cdi_only_warns, test_xid_allocatable]

if __name__ == "__main__":
    try:
        sys.exit(e2e.main(TESTS, setup))
    except Fail as exc:
        print(exc)
        sys.exit(1)
