# SPDX-License-Identifier: Apache-2.0
"""MIG on the Node object and declared layouts (docs/mig.md): the real `gpuslice node` with
--mig-strategy mixed and --mig-layouts on a simulated A100-80GB node, the kubelet stand-in
(kubelet_standin.py, real gRPC) and the API stand-in (kube_standin.py, real HTTP):

  publish  GFD's MIG labels and the node annotation's MIG devices with their holders, as `gpuslice
           inspect` shows them
  layout   the node label nvidia.com/mig.config selects a layout: applied on an idle GPU (state
           success, the agent starts again with the new MIG devices, the holders kept), refused on a
           GPU one of whose MIG devices a container holds (failed with the reason, nothing changed),
           refused when the GPU cannot hold it (failed, nothing changed); the busy one applied without a
           relabel once the container is gone, the one that cannot fit never tried again on a holder change

    /usr/bin/python3 test_mig_layout.py --build DIR --source DIR --topology tests/data/mig/a100-80gb-2gpu.node TEST
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kube_standin  # noqa: E402
from agent_fixture import REACT_S, Env, Skip, check, run_main  # noqa: E402

NODE = "mig-node"
RESTART_S = 3 * REACT_S  # a step that waits for the agent to start itself again (a loaded 2-core machine)


class MigEnv(Env):
    """The agent fixture with an API server: the Node object and a kubeconfig."""

    def __init__(self, args, stubs):
        super().__init__(args, stubs)
        self.api = kube_standin.StandIn().start()
        self.kubeconfig = self.api.kubeconfig(os.path.join(self.tmp, "kubeconfig"))
        self.env["NODE_NAME"] = NODE
        self.env.pop("KUBERNETES_SERVICE_HOST", None)
        self.layouts = os.path.join(args.source, "tests", "data", "mig", "layouts.yaml")
        if os.geteuid() != 0:
            raise Skip("gpuslice-sim caps makes device nodes (mknod): root only")
        self.sim("caps", self.dev_root)

    def close(self, failed):
        try:
            super().close(failed)
        finally:
            self.api.stop()

    def node(self, labels):
        old = self.api.store.get("nodes", NODE)
        meta = dict(old["metadata"]) if old else {"name": NODE}
        meta["labels"] = dict(meta.get("labels", {}), **labels)
        self.api.store.put("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": meta,
                                     "status": {"capacity": {"cpu": "8"}}})

    def labels(self):
        return (self.api.store.get("nodes", NODE) or {}).get("metadata", {}).get("labels", {})

    def annotations(self):
        return (self.api.store.get("nodes", NODE) or {}).get("metadata", {}).get("annotations", {})

    def gpus(self):
        a = self.annotations().get("gpuslice.io/gpus")
        return json.loads(a)["gpus"] if a else None

    def wait(self, pred, what, timeout=REACT_S):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            v = pred()
            if v:
                return v
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s; labels %s annotations %s" %
                             (what, self.labels(), self.annotations()))

    def start(self):
        return self.start_agent("--mig-strategy", "mixed", "--mig-layouts", self.layouts, "--kubeconfig",
                                self.kubeconfig)

    def topo_mig(self):
        r = subprocess.run([os.path.join(self.args.build, "gpuslice"), "topo", "--json"], env=self.env,
                           capture_output=True, text=True, timeout=15)
        check(r.returncode == 0, "gpuslice topo: %s" % r.stderr)
        return sorted(d["profile"] for d in json.loads(r.stdout)["mig"][0]["devices"])


def ep(resource):
    return "gpuslice-%s.sock" % resource.replace("/", "-")


def allocate_on(e, endpoint, ids):
    req = e.pb.AllocateRequest()
    req.container_requests.add(devices_ids=ids)
    return e.kubelet.plugin_stub(endpoint)[0].Allocate(req, timeout=5)


def test_publish(e):
    e.node({})
    e.start()
    e.registered(4)
    lab = e.wait(lambda: e.labels() if "nvidia.com/mig.strategy" in e.labels() else None, "MIG labels")
    check(lab["nvidia.com/mig.strategy"] == "mixed" and lab["nvidia.com/mig.capable"] == "true", lab)
    check(lab["nvidia.com/mig-1g.10gb.count"] == "2" and lab["nvidia.com/mig-3g.40gb.count"] == "1", lab)
    check(lab["nvidia.com/mig-3g.40gb.multiprocessors"] == "42", lab)
    check(lab["nvidia.com/mig-2g.20gb.slices.gi"] == "2", lab)
    check("nvidia.com/mig.config.state" not in lab, "a state without a layout asked: %s" % lab)
    gpus = e.gpus()
    check(len(gpus[0]["mig"]) == 4 and "mig" not in gpus[1], "annotation %s" % gpus)
    ann = json.loads(e.annotations()["gpuslice.io/gpus"])
    check(ann.get("mig_strategy") == "mixed", "the extender reads the strategy from the annotation: %s" % ann)
    small = ep("nvidia.com/mig-1g.10gb")
    one = e.kubelet.wait_for(lambda: e.kubelet.last_ids(small), REACT_S, "the 1g.10gb list")[0]
    allocate_on(e, small, [one])
    e.kubelet.pods = [("ml", "infer", "main", "nvidia.com/mig-1g.10gb", [one])]
    e.status()  # a PodResources sync names the holder
    e.wait(lambda: any(m.get("pod") == "ml/infer" and m["uuid"] == one for m in e.gpus()[0]["mig"]),
           "the holder in the annotation")
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "inspect", "--kubeconfig", e.kubeconfig],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "inspect: %s" % r.stderr)
    line = [x for x in r.stdout.splitlines() if one in x]
    check(len(line) == 1 and "1g.10gb" in line[0] and "ml/infer" in line[0], "inspect:\n%s" % r.stdout)
    check("(MIG)" in r.stdout, "inspect does not mark the GPU in MIG mode:\n%s" % r.stdout)
    # a pod waiting for MIG devices is listed as pending with what it asks
    e.api.store.put("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "ml", "name": "waiting"},
                             "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {
                                 "limits": {"nvidia.com/mig-1g.10gb": "2"}}}]}, "status": {"phase": "Pending"}})
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "inspect", "--kubeconfig", e.kubeconfig],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "ml/waiting  2 MIG device(s) 1g.10gb" in r.stdout, "inspect:\n%s" % r.stdout)
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "inspect", "--kubeconfig", e.kubeconfig, "--json"],
                       capture_output=True, text=True, timeout=60)
    pend = json.loads(r.stdout)["pending_pods"]
    check([(p["name"], p["mig_devices"]) for p in pend] == [("waiting", {"1g.10gb": 2})], "pending %s" % pend)


def try_status(e):
    """A status request (the agent syncs PodResources for it, at most every 250 ms); None while the agent
    starts itself again after a layout change."""
    try:
        return e.status()
    except (AssertionError, ValueError, subprocess.TimeoutExpired):
        return None


def held_by(e, pod):
    """Whether the agent's record names pod as a holder (then a sync without it drops the entry at once)."""
    return any((d.get("holder") or {}).get("pod") == pod for d in (try_status(e) or {}).get("devices", []))


def layout_lines(e, name, what):
    return sum(open(p).read().count("layout=%s %s" % (name, what)) for p in e.logs)


def test_layout(e):
    e.node({"nvidia.com/mig.config": "all-1g.10gb"})
    e.start()
    e.wait(lambda: e.labels().get("nvidia.com/mig.config.state") == "success", "state success", RESTART_S)
    # the agent started again on the new MIG devices: seven 1g.10gb, one resource
    e.wait(lambda: len(e.gpus()[0]["mig"]) == 7, "7 MIG devices in the annotation", RESTART_S)
    check(e.topo_mig() == ["1g.10gb"] * 7, "GPU 0 holds %s" % e.topo_mig())
    small = ep("nvidia.com/mig-1g.10gb")
    e.kubelet.wait_for(lambda: len(e.kubelet.last_ids(small) or []) == 7, RESTART_S, "7 devices listed")
    check(e.agent.poll() is None, "the agent ended instead of starting again")
    log = open(e.logs[-1]).read()
    check("MIG layout changed the GPUs: starting again" in log and log.count("msg=\"inventory\"") == 2,
          "the agent did not start again after the change")
    check("gpuslice.io/mig.config.reason" not in e.annotations(), e.annotations())
    # busy: a container holds one of GPU 0's MIG devices (Allocate recorded it: held by the agent's record
    # before any PodResources sync) → failed, with the holder named, nothing changed
    e.sim("caps", e.dev_root)
    one = e.kubelet.last_ids(small)[0]
    allocate_on(e, small, [one])
    e.kubelet.pods = [("ml", "train", "main", "nvidia.com/mig-1g.10gb", [one])]
    e.wait(lambda: held_by(e, "train"), "the holder named by PodResources")
    e.node({"nvidia.com/mig.config": "gpu0-halves"})
    e.wait(lambda: e.labels().get("nvidia.com/mig.config.state") == "failed", "state failed")
    reason = e.wait(lambda: e.annotations().get("gpuslice.io/mig.config.reason"), "a reason")
    check("in use" in reason and "ml/train" in reason, "reason %r" % reason)
    check(e.topo_mig() == ["1g.10gb"] * 7, "a busy GPU changed: %s" % e.topo_mig())
    check("retried_when_idle=yes" in open(e.logs[-1]).read(), "the busy failure is not marked for a retry")
    # the container goes: once a PodResources sync sees it gone, the same name is tried again — no relabel
    e.kubelet.pods = []
    e.wait(lambda: try_status(e) is not None and e.topo_mig() == ["3g.40gb"] * 2, "GPU 0 in halves (the retry)",
           RESTART_S)
    e.wait(lambda: e.labels().get("nvidia.com/mig.config.state") == "success", "state success again", RESTART_S)
    e.wait(lambda: "gpuslice.io/mig.config.reason" not in e.annotations(), "the reason removed")
    e.wait(lambda: len(e.gpus()[0]["mig"]) == 2, "2 MIG devices in the annotation", RESTART_S)
    check(e.labels().get("nvidia.com/mig.config") == "gpu0-halves", "the label was changed: %s" % e.labels())
    # a layout the GPU cannot hold: failed before anything changes, with the GPU free ...
    e.node({"nvidia.com/mig.config": "too-big"})
    e.wait(lambda: "cannot hold" in e.annotations().get("gpuslice.io/mig.config.reason", ""),
           "the reason of too-big")
    check(e.labels()["nvidia.com/mig.config.state"] == "failed", e.labels())
    check(e.topo_mig() == ["3g.40gb"] * 2, "a refused layout changed GPU 0: %s" % e.topo_mig())
    # ... and not tried again when the devices' holders change (only a busy failure is): a holder comes and goes
    e.sim("caps", e.dev_root)
    half = ep("nvidia.com/mig-3g.40gb")
    h = e.kubelet.wait_for(lambda: e.kubelet.last_ids(half), RESTART_S, "the 3g.40gb list")[0]
    allocate_on(e, half, [h])
    e.kubelet.pods = [("ml", "probe", "main", "nvidia.com/mig-3g.40gb", [h])]
    e.wait(lambda: held_by(e, "probe"), "the probe holder named by PodResources")
    e.kubelet.pods = []
    e.wait(lambda: not any(d.get("holder") for d in (try_status(e) or {"devices": [{"holder": 1}]})["devices"]),
           "the probe holder released")
    try_status(e)  # one more request after the release: the loop has run its "devices changed" hook by its answer
    check(layout_lines(e, "too-big", "reason=") == 1, "too-big was tried again on a holder change")
    check(e.labels()["nvidia.com/mig.config.state"] == "failed" and e.topo_mig() == ["3g.40gb"] * 2,
          "%s, GPU 0 %s" % (e.labels(), e.topo_mig()))


def test_publish_share(e):
    """A MIG device shared in fractions (--resource-profile gpuslice) is published as held ("(shared)"), so the
    extender does not count it free for nvidia.com/mig-* requests; its sibling stays free."""
    e.node({})
    e.start_agent("--mig-strategy", "mixed", "--resource-profile", "gpuslice", "--interposer",
                  os.path.abspath(os.path.join(e.args.build, "libgpuslice-cuda.so")), "--kubeconfig", e.kubeconfig)
    core = ep("gpuslice.io/gpu-core")
    small = [m["uuid"] for m in e.wait(lambda: (e.gpus() or [{}])[0].get("mig"), "the MIG devices")
             if m["profile"] == "1g.10gb"]
    check(len(small) == 2, "1g.10gb devices %s" % small)
    e.kubelet.wait_for(lambda: e.kubelet.last_ids(core), REACT_S, "the core list")
    ids = ["%s::core-%d" % (small[0], i) for i in range(30)]
    allocate_on(e, core, ids)
    e.kubelet.pods = [("ml", "notebook", "main", "gpuslice.io/gpu-core", ids)]
    e.status()  # a PodResources sync records the share
    mig = e.wait(lambda: [m for m in e.gpus()[0]["mig"] if m.get("pod") == "(shared)"] and e.gpus()[0]["mig"],
                 "the shared MIG device held in the annotation")
    held = {m["uuid"]: m.get("pod") for m in mig}
    check(held[small[0]] == "(shared)" and not held[small[1]], "holders %s" % held)


TESTS = {"publish": test_publish, "publish-share": test_publish_share, "layout": test_layout}

if __name__ == "__main__":
    run_main(TESTS, make_env=MigEnv, label="agent-mig-", timeout_s=240)
