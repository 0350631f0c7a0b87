# SPDX-License-Identifier: Apache-2.0
"""MIG on a real cluster (docs/mig.md): two simulated MIG nodes with their own kubelet, containerd and
`gpuslice node` — an A100-80GB in MIG mode beside one with MIG off under --mig-strategy mixed, and two
H100s of seven 1g.10gb each under --mig-strategy single. The capability nodes /dev/nvidia-caps/* are
made in each node's /dev and mig-minors under the agent's --dev-root by `gpuslice-sim caps` (the
agent sees the node's /dev there, as the DaemonSet sees the host's under /host). A pod asking for
nvidia.com/mig-1g.10gb (and one for another profile) starts with exactly its MIG device's nodes (the
parent's /dev/nvidiaN and the two capability nodes mig-minors gives its GPU and compute instance) and
its MIG UUID; under single, nvidia.com/gpu serves one MIG device per unit; the agent SIGKILLed and
started again, and kubelet restarted, keep every holder. Declared layouts (last, it changes gpu-mixed's GPU
0): the agent started again with --kubeconfig and --mig-layouts; the node label nvidia.com/mig.config
applied on the idle GPU (state success, the node's nvidia.com/mig-* allocatable follows), refused while a pod
holds one of its MIG devices (failed with the reason, nothing changed), applied once the pod is deleted (the
agent's retry of a busy failure, no relabel). The extender (`test_extender`, before the layouts): kube-scheduler
restarted with `gpuslice scheduler` managing nvidia.com/mig-1g.10gb, the agent publishing its annotation; a pod
that fits is bound and runs on its MIG device, one asking more than the node has free stays Pending with the
extender's reason.

    /usr/bin/python3 tests/e2e/test_mig.py [TEST ...]
"""

import os
import re
import signal
import sys

import e2e
from e2e import BUILD, check, pod, wait_pod
from test_scheduler_extender import RESOURCES, ExtenderEnv, events_of, free_port

NODES = [("gpu-mixed", "a100-80gb-2gpu.node", None), ("gpu-single", "h100-single.node", None)]
ROOT = "/run/gpuslice-e2e/migroot"
SHOW = ('echo "VISIBLE=$NVIDIA_VISIBLE_DEVICES"; echo "DEV=$(ls /dev | grep "^nvidia[0-9]" | tr "\\n" " ")"; '
        'echo "CAPS=$(ls /dev/nvidia-caps 2>/dev/null | tr "\\n" " ")"; sleep 3600')
STRATEGY = {"gpu-mixed": "mixed", "gpu-single": "single"}
BIND = ["unshare", "-m", "--propagation", "private", "sh", "-c",
        'mkdir -p %s/dev && mount --bind /dev %s/dev && exec "$@"' % (ROOT, ROOT), "mig-root"]




def start(g, *extra, env=None):
    g.start_agent("--mig-strategy", STRATEGY[g.name], "--dev-root", ROOT, *extra, env=env, prefix=BIND)


def caps(g):
    """mig-minors under the dev root, the capability nodes in the node's /dev (through the bind), for the MIG
    devices the simulated GPUs hold now."""
    g.node.run(BIND + [os.path.join(BUILD, "sim", "gpuslice-sim"), "caps", ROOT], env=g.sim_env())


def setup():
    c = e2e.gpu_cluster(NODES)
    for g in c.gpu.values():
        caps(g)
        start(g)
    c.wait("gpu-mixed allocatable nvidia.com/mig-1g.10gb",
           lambda: c.gpu["gpu-mixed"].allocatable("nvidia.com/mig-1g.10gb") == 2, timeout=120)
    c.wait("gpu-single allocatable nvidia.com/gpu", lambda: c.gpu["gpu-single"].allocatable() == 14, timeout=120)
    return c


def seen(c, name):
    """(NVIDIA_VISIBLE_DEVICES, GPU device-node minors, capability-node minors) of a running pod."""
    text = c.wait("output of %s" % name, lambda: (lambda t: t if "CAPS=" in t else None)(e2e.logs(c, name)),
                  timeout=90)
    vis = re.search(r"VISIBLE=(.*)", text).group(1).strip()
    dev = sorted(int(d[len("nvidia"):]) for d in re.search(r"DEV=(.*)", text).group(1).split())
    caps = sorted(int(d[len("nvidia-cap"):]) for d in re.search(r"CAPS=(.*)", text).group(1).split())
    return vis, dev, caps


def mig_devices(g):
    """{MIG UUID: status device} of the agent."""
    return {d["id"]: d for d in g.status()["devices"] if d.get("kind") == "mig"}


def expected_caps(g, d):
    """The capability minors of MIG device d (status entry) from the node's mig-minors."""
    text = g.node.run(["cat", ROOT + "/proc/driver/nvidia-caps/mig-minors"]).stdout
    m = dict(line.split() for line in text.splitlines() if line.strip())
    gpu = int(d["index"])
    gi, ci = int(m["gpu%d/gi%d/access" % (gpu, d["gpu_instance"])]), \
        int(m["gpu%d/gi%d/ci%d/access" % (gpu, d["gpu_instance"], d["compute_instance"])])
    return sorted([gi, ci])


def check_pod(c, g, name, resource):
    vis, dev, caps = seen(c, name)
    migs = mig_devices(g)
    check(vis in migs, "%s: NVIDIA_VISIBLE_DEVICES=%r is not one MIG device of %s" % (name, vis, sorted(migs)))
    d = migs[vis]
    check(resource == "nvidia.com/gpu" or resource == "nvidia.com/mig-" + d["profile"],
          "%s: asked %s, got a %s" % (name, resource, d["profile"]))
    check(dev == [d["index"]], "%s: GPU device nodes %s in the container, its MIG device is on GPU %d" %
          (name, dev, d["index"]))
    want = expected_caps(g, d)
    check(caps == want, "%s: capability nodes %s in the container, mig-minors says %s" % (name, caps, want))
    holder = d.get("holder") or {}
    check(holder.get("pod") == name, "%s: the agent names %s as holder of %s" % (name, holder, vis))
    return vis


def test_mixed_pods(c):
    """Pods asking for nvidia.com/mig-1g.10gb and nvidia.com/mig-3g.40gb get exactly their MIG device."""
    g = c.gpu["gpu-mixed"]
    try:
        for name, res in (("mig-small", "nvidia.com/mig-1g.10gb"), ("mig-big", "nvidia.com/mig-3g.40gb")):
            c.apply(pod(name, g.name, SHOW, limits={res: 1}))
            wait_pod(c, name)
            check_pod(c, g, name, res)
        check(g.allocatable("nvidia.com/gpu") == 1, "the GPU in MIG mode is offered whole")
    finally:
        for name in ("mig-small", "mig-big"):
            e2e.delete(c, "pod", name)


def test_single_pods(c):
    """single: two pods of nvidia.com/gpu each get one MIG device; restarts keep both holders."""
    g = c.gpu["gpu-single"]
    try:
        held = {}
        for name in ("single-a", "single-b"):
            c.apply(pod(name, g.name, SHOW, limits={"nvidia.com/gpu": 1}))
            wait_pod(c, name)
            held[name] = check_pod(c, g, name, "nvidia.com/gpu")
        check(held["single-a"] != held["single-b"], "two pods on one MIG device: %s" % held)
        # the agent SIGKILLed and started again, then kubelet restarted: both holders kept
        g.stop_agent(signal.SIGKILL)
        start(g)
        g.node.restart_kubelet()
        c.wait("the agent registered again", lambda: g.status().get("registered"), timeout=60)

        def holders():
            m = mig_devices(g)
            return all((m[u].get("holder") or {}).get("pod") == n for n, u in held.items())
        c.wait("both holders named again", holders, timeout=60)
        for name in held:
            check(e2e.get_pod(c, name)["status"]["phase"] == "Running", "%s stopped" % name)
    finally:
        for name in ("single-a", "single-b"):
            e2e.delete(c, "pod", name)


def test_extender(c):
    """kube-scheduler 1.20 with the extender (filter, prioritize, bind) and gpu-mixed's agent publishing its
    annotation (--kubeconfig): a pod of one nvidia.com/mig-1g.10gb is bound by the extender and runs on exactly
    its MIG device; then one asking 2 (1 free left) stays Pending with the extender's reason. The MIG resource
    is managed with ignoredByScheduler: true here, so that kube-scheduler's own fit (allocatable minus requests
    would refuse it first, with "Insufficient") leaves the decision to the extender being tested. kube-scheduler
    is started again without the extender at the end."""
    g = c.gpu["gpu-mixed"]
    g.stop_agent()
    start(g, "--kubeconfig", c.kubeconfig, env={"NODE_NAME": g.name})
    c.wait("gpu-mixed's MIG devices published", lambda: "1g.10gb" in c.api("GET", "/api/v1/nodes/" + g.name)[
        "metadata"].get("annotations", {}).get("gpuslice.io/gpus", ""), timeout=60)
    port = free_port()
    ext = c.spawn("gpuslice-scheduler", [os.path.join(BUILD, "gpuslice"), "scheduler", "--address",
                                         "127.0.0.1:%d" % port, "--log-level", "debug", "--kubeconfig", c.kubeconfig])
    env = ExtenderEnv()  # its wait_healthy: /healthz answers once the extender's model is synced
    env.c, env.port = c, port
    env.wait_healthy()
    managed = [{"name": r, "ignoredByScheduler": False} for r in RESOURCES]
    managed.append({"name": "nvidia.com/mig-1g.10gb", "ignoredByScheduler": True})
    c.start_scheduler(extenders=[{
        "urlPrefix": "http://127.0.0.1:%d" % port, "filterVerb": "filter", "prioritizeVerb": "prioritize",
        "bindVerb": "bind", "weight": 5, "nodeCacheCapable": True, "ignorable": False, "httpTimeout": "5s",
        "managedResources": managed}])
    try:
        c.apply(pod("ext-fit", g.name, SHOW, limits={"nvidia.com/mig-1g.10gb": 1}))
        wait_pod(c, "ext-fit")
        check_pod(c, g, "ext-fit", "nvidia.com/mig-1g.10gb")
        c.apply(pod("ext-big", g.name, SHOW, limits={"nvidia.com/mig-1g.10gb": 2}))
        want = "1 free MIG devices 1g.10gb, pod needs 2"
        try:
            msg = c.wait("ext-big refused with the extender's reason",
                         lambda: (lambda e: e if want in e else None)(events_of(c, "ext-big")), timeout=60)
        except e2e.E2EError as exc:
            raise e2e.Fail("%s; events: %s" % (exc, events_of(c, "ext-big")))
        p = e2e.get_pod(c, "ext-big")
        check(not p["spec"].get("nodeName") and p["status"].get("phase") == "Pending", "ext-big placed: %s" % msg)
        cond = [x for x in p["status"].get("conditions", []) if x.get("type") == "PodScheduled"]
        check(cond and cond[0].get("status") == "False" and want in cond[0].get("message", ""),
              "ext-big's PodScheduled condition: %s" % cond)
    finally:
        for name in ("ext-fit", "ext-big"):
            e2e.delete(c, "pod", name)
        c.start_scheduler()  # the cases after this one place their pods without the extender, as before
        ext.stop()


def test_layout(c):
    """nvidia.com/mig.config: success on the idle GPU 0 of gpu-mixed (allocatable follows), failed while a pod
    holds one of its MIG devices (nothing changed), success once the pod is deleted (no relabel)."""
    g = c.gpu["gpu-mixed"]
    layouts = e2e.topology_path("layouts.yaml")  # tests/data/mig/layouts.yaml
    g.stop_agent()
    start(g, "--kubeconfig", c.kubeconfig, "--mig-layouts", layouts, env={"NODE_NAME": g.name})

    def node():
        return c.api("GET", "/api/v1/nodes/" + g.name)["metadata"]

    def state():
        return node().get("labels", {}).get("nvidia.com/mig.config.state")

    def label(name):
        c.kubectl("label", "node", g.name, "nvidia.com/mig.config=%s" % name, "--overwrite")

    def mig_alloc():
        n = c.api("GET", "/api/v1/nodes/" + g.name)["status"].get("allocatable", {})
        return {k: int(v) for k, v in n.items() if k.startswith("nvidia.com/mig-") and int(v) > 0}

    label("all-1g.10gb")
    c.wait("state success", lambda: state() == "success", timeout=90)
    c.wait("allocatable of seven 1g.10gb", lambda: mig_alloc() == {"nvidia.com/mig-1g.10gb": 7}, timeout=90)
    caps(g)  # the new MIG devices' capability nodes (the simulator's stand-in for the driver's)
    try:
        c.apply(pod("mig-holder", g.name, SHOW, limits={"nvidia.com/mig-1g.10gb": 1}))
        wait_pod(c, "mig-holder")
        c.wait("the holder named", lambda: any((d.get("holder") or {}).get("pod") == "mig-holder"
                                                for d in mig_devices(g).values()), timeout=60)
        label("gpu0-halves")
        c.wait("state failed", lambda: state() == "failed", timeout=60)
        reason = node().get("annotations", {}).get("gpuslice.io/mig.config.reason", "")
        check("in use" in reason and "mig-holder" in reason, "reason %r" % reason)
        check(mig_alloc() == {"nvidia.com/mig-1g.10gb": 7}, "a busy GPU changed: %s" % mig_alloc())
        check(e2e.get_pod(c, "mig-holder")["status"]["phase"] == "Running", "the holder stopped")
    finally:
        e2e.delete(c, "pod", "mig-holder")
    c.wait("state success after the pod went", lambda: state() == "success", timeout=120)
    c.wait("allocatable of two 3g.40gb", lambda: mig_alloc() == {"nvidia.com/mig-3g.40gb": 2}, timeout=90)
    check("gpuslice.io/mig.config.reason" not in node().get("annotations", {}), "the reason kept")


TESTS = [test_mixed_pods, test_single_pods, test_extender, test_layout]

if __name__ == "__main__":
    try:
        sys.exit(e2e.main(TESTS, setup))
    except e2e.Fail as exc:
        print(exc)
        sys.exit(1)
