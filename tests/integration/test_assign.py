# SPDX-License-Identifier: Apache-2.0
"""The node agent honours the scheduler's assignment (docs/scheduler.md, "On the node"): the real agent
on the simulated seed node (8 x P40), the kubelet stand-in (kubelet_standin.py: the device plugin calls,
PodResources List) and the API stand-in (kube_standin.py: pods with their assignment annotations, watch,
merge patch with a resourceVersion precondition). The stand-ins play what the real ones do: kubelet's
pod manager lists the pod it is admitting (without devices) before it calls the plugin, and its
devices right after the Allocate answered. tests/e2e/test_scheduler_extender.py runs the same against
the real kube-scheduler, kube-apiserver and kubelets.

    /usr/bin/python3 test_assign.py --build DIR --source DIR --topology FILE TEST
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_fixture  # noqa: E402
import kube_standin  # noqa: E402
from agent_fixture import check  # noqa: E402

NODE = "gpu-int"


def endpoint(resource):
    return "gpuslice-%s.sock" % resource.replace("/", "-")

CORE, MEM = "gpuslice.io/gpu-core", "gpuslice.io/gpu-memory"


class Env(agent_fixture.Env):
    def __init__(self, args, stubs):
        super().__init__(args, stubs)
        self.api = kube_standin.StandIn().start()
        self.kubeconfig = self.api.kubeconfig(os.path.join(self.tmp, "kubeconfig"))
        self.env["NODE_NAME"] = NODE

    def close(self, failed):
        try:
            super().close(failed)
        finally:
            self.api.stop()

    def put_pod(self, name, limits, gpus, created="2026-11-23T10:00:00Z", extra_ann=None):
        asg = {"v": 1, "node": NODE, "time": 1000,
               "containers": [{"name": "main", "gpus": gpus, "core": 100, "mem": 0}]}
        ann = {"gpuslice.io/assignment": json.dumps(asg), "gpuslice.io/assigned": "false"}
        ann.update(extra_ann or {})
        self.api.store.put("pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": "uid-" + name, "creationTimestamp": created,
                         "annotations": ann},
            "spec": {"nodeName": NODE, "containers": [{"name": "main", "resources": {
                "limits": {k: str(v) for k, v in limits.items()}}}]},
            "status": {"phase": "Pending"}})

    def start(self, *extra, conf=None, metrics_port=None):
        """conf: a config file (its PodResources socket, no flag: SIGHUP may change it); metrics_port: /metrics."""
        interposer = os.path.join(self.tmp, "libgpuslice-cuda.so")  # the protocol only: any file will do
        open(interposer, "w").close()
        more = (["--config", conf] if conf else []) + \
            (["--metrics-address", "127.0.0.1:%d" % metrics_port] if metrics_port else [])
        self.start_agent("--kubeconfig", self.kubeconfig, "--interposer", interposer, *(more + list(extra)),
                         podres_flag=conf is None)
        want = ["nvidia.com/gpu"] + ([CORE, MEM] if extra else [])
        k = self.kubelet
        k.wait_for(lambda: all(k.last_ids(endpoint(r)) is not None for r in want), 15, "ListAndWatch of %s" % want)
        # the pods informer has listed and watches
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if any(m == "GET" and p.startswith("/api/v1/pods") and "watch=" in p for m, p in self.api.store.requests):
                return
            time.sleep(0.05)
        raise AssertionError("the agent never watched its pods: %s" % self.api.store.requests[-10:])

    def kubelet_lists(self, *entries):
        """PodResources: (pod, resource, ids) — resource None = listed without devices (being admitted)."""
        with self.kubelet.cond:
            self.kubelet.pods = [("default", pod, "main", res or "", list(ids or [])) for pod, res, ids in entries]

    def ann(self, name):
        return self.api.store.get("pods", "default/" + name)["metadata"]["annotations"]

    def wait_assigned(self, name, key="gpuslice.io/assigned", timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ann(name).get(key) == "true":
                return self.ann(name)
            time.sleep(0.1)
        raise AssertionError("%s never marked %s: %s" % (name, key, self.ann(name)))

    def ids(self):
        return self.kubelet.last_ids(endpoint("nvidia.com/gpu"))

    def stub(self):
        return self.kubelet.plugin_stub(endpoint("nvidia.com/gpu"))[0]

    def law_ids(self, resource_kind):
        """Every ID kubelet would list for a fractional resource (kind: core/mem), GPU index order."""
        uuids = self.ids()
        n = 100 if resource_kind == "core" else 96
        return ["%s::%s-%d" % (u, resource_kind, i) for u in uuids for i in range(n)]

    def fstub(self, resource):
        return self.kubelet.plugin_stub(endpoint(resource))[0]

    def fprefer(self, resource, kind, size):
        req = self.pb.PreferredAllocationRequest()
        req.container_requests.add(available_deviceIDs=self.law_ids(kind), allocation_size=size)
        return list(self.fstub(resource).GetPreferredAllocation(req, timeout=10).container_responses[0].deviceIDs)

    def fallocate(self, resource, ids):
        req = self.pb.AllocateRequest()
        req.container_requests.add(devices_ids=ids)
        return self.fstub(resource).Allocate(req, timeout=10)


def gpu_of(e, ids):
    uuids = e.ids()
    return sorted({uuids.index(i.split("::")[0]) for i in ids})


def test_assign_twins(e):
    """Two identical fractional pods (30 % + 8 units), twin-a on GPU 3, twin-b on GPU 5: kubelet admits
    twin-b first (its pod manager lists it): it gets GPU 5 although the order alone would pick twin-a;
    then twin-a gets GPU 3; IDs on another GPU are refused; both end assigned=true, with the
    resourceVersion precondition in the patch."""
    e.put_pod("twin-a", {CORE: 30, MEM: 8}, [3])
    e.put_pod("twin-b", {CORE: 30, MEM: 8}, [5])
    e.start("--resource-profile", "gpuslice")
    e.kubelet_lists(("twin-b", None, None), ("other", "nvidia.com/gpu", []))
    core_b = e.fprefer(CORE, "core", 30)
    check(gpu_of(e, core_b) == [5], "twin-b's core offered on GPU %s" % gpu_of(e, core_b))
    e.fallocate(CORE, core_b)
    e.kubelet_lists(("twin-b", CORE, core_b))
    mem_b = e.fprefer(MEM, "mem", 8)
    check(gpu_of(e, mem_b) == [5], "twin-b's memory offered on GPU %s" % gpu_of(e, mem_b))
    e.fallocate(MEM, mem_b)
    e.kubelet_lists(("twin-b", CORE, core_b), ("twin-b", MEM, mem_b), ("twin-a", None, None))
    ann_b = e.wait_assigned("twin-b")
    check(json.loads(ann_b["gpuslice.io/assignment"])["containers"][0]["gpus"] == [5], ann_b)
    # twin-a: kubelet's IDs on GPU 4 contradict its assignment → refused, nothing handed out
    core_a = e.fprefer(CORE, "core", 30)
    check(gpu_of(e, core_a) == [3], "twin-a's core offered on GPU %s" % gpu_of(e, core_a))
    wrong = ["%s::core-%d" % (e.ids()[4], i) for i in range(30)]
    msg = e.expect_error(lambda: e.fallocate(CORE, wrong), grpc.StatusCode.FAILED_PRECONDITION,
                         "was assigned GPU 3")
    check("twin-a" in msg and "GPU 4" in msg, msg)
    e.fallocate(CORE, core_a)
    e.kubelet_lists(("twin-b", CORE, core_b), ("twin-b", MEM, mem_b), ("twin-a", CORE, core_a))
    mem_a = e.fprefer(MEM, "mem", 8)
    check(gpu_of(e, mem_a) == [3], "twin-a's memory offered on GPU %s" % gpu_of(e, mem_a))
    e.fallocate(MEM, mem_a)
    e.kubelet_lists(("twin-b", CORE, core_b), ("twin-b", MEM, mem_b), ("twin-a", CORE, core_a),
                    ("twin-a", MEM, mem_a))
    e.wait_assigned("twin-a")
    patches = [b for p, b in e.api.store.patches if p.endswith("/twin-a") or p.endswith("/twin-b")]
    check(patches and all(b["metadata"].get("resourceVersion") and b["metadata"].get("uid") for b in patches),
          "patches without their precondition: %s" % patches)
    check(all(set(b["metadata"]["annotations"]) == {"gpuslice.io/assigned"} for b in patches),
          "a patch touched more than the flag: %s" % patches)


def test_assign_whole(e):
    """A 2-GPU pod assigned GPUs 6 and 7 (the allocator alone would pick others first): preferred
    answers exactly those; Allocate of other IDs is refused; a gpu-manager flag rides along; a call
    no pod with an assignment fits stays node-local."""
    e.put_pod("whole", {"nvidia.com/gpu": 2}, [6, 7], extra_ann={"tencent.com/gpu-assigned": "false"})
    e.start()
    e.kubelet_lists(("whole", None, None))
    uuids = e.ids()
    got = e.prefer(uuids, 2)
    check(sorted(uuids.index(i) for i in got) == [6, 7], "preferred %s" % got)
    e.expect_error(lambda: e.allocate(uuids[0:2]), grpc.StatusCode.FAILED_PRECONDITION, "was assigned GPU 6,7")
    # must-include off the assignment is refused too
    e.expect_error(lambda: e.prefer(uuids, 2, must=[uuids[0]]), grpc.StatusCode.FAILED_PRECONDITION,
                   "must-include")
    e.allocate(got)
    e.kubelet_lists(("whole", "nvidia.com/gpu", got))
    ann = e.wait_assigned("whole")
    check(ann.get("tencent.com/gpu-assigned") == "true", ann)
    # nothing pending any more: a 1-GPU call is node-local (the allocator's choice, no refusal)
    e.kubelet_lists(("whole", "nvidia.com/gpu", got), ("plain", None, None))
    one = e.prefer(uuids, 1)
    e.allocate(one)
    check(uuids.index(one[0]) not in (6, 7), "node-local call got an assigned GPU: %s" % one)


def test_assign_repair(e):
    """PodResources shows the pod holding other GPUs than its annotation says (a swap the agent could not
    see, e.g. kubelet skipped GetPreferredAllocation and the annotation was edited meanwhile): the
    patcher rewrites the assignment to what kubelet lists, and marks it assigned."""
    e.put_pod("moved", {"nvidia.com/gpu": 1}, [2])
    e.start()
    uuids = e.ids()
    e.kubelet_lists(("moved", None, None))
    e.allocate([uuids[2]])
    e.kubelet_lists(("moved", "nvidia.com/gpu", [uuids[4]]))
    ann = e.wait_assigned("moved")
    check(json.loads(ann["gpuslice.io/assignment"])["containers"][0]["gpus"] == [4], ann)


def test_assign_sweep(e):
    """The agent died between an Allocate and its patch: after the restart kubelet lists the pod holding
    its assigned GPU; the agent (which answered no Allocate for it) finds it and marks it; a pod that
    holds nothing is never marked."""
    e.put_pod("held", {"nvidia.com/gpu": 1}, [3])
    e.put_pod("failed", {"nvidia.com/gpu": 1}, [4])
    e.kubelet_lists(("failed", None, None))
    e.start()
    e.kubelet_lists(("held", "nvidia.com/gpu", [e.ids()[3]]), ("failed", None, None))
    ann = e.wait_assigned("held", timeout=45)
    check(json.loads(ann["gpuslice.io/assignment"])["containers"][0]["gpus"] == [3], ann)
    check(e.ann("failed").get("gpuslice.io/assigned") == "false", e.ann("failed"))


def pod_lists(e):
    """The LISTs of the node's pods the agent sent (not its watches)."""
    return [p for m, p in e.api.store.requests if m == "GET" and p.startswith("/api/v1/pods?") and "watch=" not in p]


def test_assign_cache(e):
    """Issue 11's weak point: with API access and no pod with an assignment, kubelet's calls are answered
    from the informer's cache, not a LIST each (the cache is synced and knows every pod kubelet lists).
    A pod kubelet lists that the watch has not delivered costs one LIST (kubelet saw it first): a pod
    with an assignment found that way is honoured; one without is not listed for again."""
    e.put_pod("known", {"nvidia.com/gpu": 1}, [1])
    e.start()
    uuids = e.ids()
    e.kubelet_lists(("known", None, None))
    e.allocate([uuids[1]])
    e.kubelet_lists(("known", "nvidia.com/gpu", [uuids[1]]))
    e.wait_assigned("known")
    before = len(pod_lists(e))
    for i in range(3):  # kubelet admits pods without assignments: its pod manager lists only known pods
        got = e.prefer([u for j, u in enumerate(uuids) if j not in (1, 2, 3, 4)][i:], 1)
        e.allocate(got)
    check(len(pod_lists(e)) == before, "calls the cache could answer listed the pods: %s" % pod_lists(e)[before:])
    # a pod kubelet lists that neither the cache nor the API server has as a candidate (a static pod, a
    # pod without GPUs): one LIST, then remembered while kubelet lists it
    e.kubelet_lists(("known", "nvidia.com/gpu", [uuids[1]]), ("static-web", None, None))
    for _ in range(2):
        e.prefer(uuids[5:], 1)
    check(len(pod_lists(e)) == before + 1, "a pod kubelet lists, unknown to the API server: %d LISTs, wanted 1" %
          (len(pod_lists(e)) - before))
    # the watch lags: the API server has the pod (and its assignment, GPU 3) but the watch never delivered
    # it; kubelet lists it being admitted → the agent lists the pods and honours the assignment
    lag = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "lagging", "namespace": "default", "uid": "uid-lagging",
                        "creationTimestamp": "2026-11-23T10:00:00Z", "resourceVersion": "1",
                        "annotations": {"gpuslice.io/assignment": json.dumps({"v": 1, "node": NODE, "time": 1000,
                                                                               "containers": [{"name": "main",
                                                                                               "gpus": [3]}]}),
                                        "gpuslice.io/assigned": "false"}},
           "spec": {"nodeName": NODE, "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
           "status": {"phase": "Pending"}}
    with e.api.store.lock:
        e.api.store.objs["pods"]["default/lagging"] = lag  # no watch event
    e.kubelet_lists(("known", "nvidia.com/gpu", [uuids[1]]), ("static-web", None, None), ("lagging", None, None))
    got = e.prefer([u for j, u in enumerate(uuids) if j not in (1,)], 1)
    check(got == [uuids[3]], "the pod the watch had not delivered was not honoured: preferred %s" % got)
    check(len(pod_lists(e)) == before + 2, "%d LISTs for the lagging pod, wanted 1" % (len(pod_lists(e)) - before - 1))


def limits_dir(resp):
    return [m.host_path for m in resp.container_responses[0].mounts if m.container_path == "/run/gpuslice/limits"][0]


def decisions(e, text):
    with open(e.logs[-1], errors="replace") as f:
        return sum(1 for ln in f if "fraction decision" in ln and text in ln)


def test_assign_pairs(e):
    """Fractional pairing uses the assignment's evidence instead of the call order (docs/sharing.md):
    (1) a node-local memory-only container, then the core half of a pod assigned another GPU: before,
    the core call was taken for the open record's partner and refused ("the container is refused rather
    than split"); now the assignment says it is the first half of its own container. (2) A container
    whose second half comes without a GetPreferredAllocation (kubelet may skip it): the join is known,
    not guessed. (3) A memory-only pod with an assignment followed at once by a core-only pod on the same
    GPU: two containers, two limits files (before: summed into one, docs/sharing.md "What stays
    ambiguous")."""
    e.put_pod("y", {CORE: 30, MEM: 8}, [2])
    e.put_pod("solo", {MEM: 8}, [5])
    e.put_pod("next", {CORE: 30}, [5])
    e.start("--resource-profile", "gpuslice")
    uuids = e.ids()
    # (1) node-local memory-only container x (no assignment) on some GPU, its record left open
    e.kubelet_lists(("x", None, None))
    mem_x = e.fprefer(MEM, "mem", 8)
    e.fallocate(MEM, mem_x)
    check(gpu_of(e, mem_x) != [2], "x landed on y's GPU: %s" % gpu_of(e, mem_x))
    e.kubelet_lists(("x", MEM, mem_x), ("y", None, None))
    core_y = e.fprefer(CORE, "core", 30)
    check(gpu_of(e, core_y) == [2], "y's core offered on GPU %s" % gpu_of(e, core_y))
    ry = e.fallocate(CORE, core_y)
    e.kubelet_lists(("x", MEM, mem_x), ("y", CORE, core_y))
    # (2) y's memory half straight to Allocate (no GetPreferredAllocation, as kubelet may do)
    mem_y = ["%s::mem-%d" % (uuids[2], i) for i in range(8)]
    ry2 = e.fallocate(MEM, mem_y)
    check(limits_dir(ry) == limits_dir(ry2), "y's halves in two limits dirs: %s %s" % (limits_dir(ry), limits_dir(ry2)))
    check(decisions(e, "joined its partner (the scheduler's assignment)") == 1, "y's join was not known")
    check(decisions(e, "joined its partner (guessed)") == 0, "a join was guessed")
    e.kubelet_lists(("x", MEM, mem_x), ("y", CORE, core_y), ("y", MEM, mem_y))
    e.wait_assigned("y")
    # (3) two one-resource pods back to back on GPU 5
    e.kubelet_lists(("x", MEM, mem_x), ("y", CORE, core_y), ("y", MEM, mem_y), ("solo", None, None))
    mem_s = e.fprefer(MEM, "mem", 8)
    rs = e.fallocate(MEM, mem_s)
    e.kubelet_lists(("x", MEM, mem_x), ("y", CORE, core_y), ("y", MEM, mem_y), ("solo", MEM, mem_s),
                    ("next", None, None))
    core_n = e.fprefer(CORE, "core", 30)
    rn = e.fallocate(CORE, core_n)
    check(gpu_of(e, mem_s) == [5] and gpu_of(e, core_n) == [5], "solo/next not on GPU 5")
    check(limits_dir(rs) != limits_dir(rn), "two one-resource containers share one limits file: %s" % limits_dir(rs))


def extender_call(port, verb, body):
    req = urllib.request.Request("http://127.0.0.1:%d/%s" % (port, verb), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read().decode())


def test_assign_sixteen(e):
    """Issue 19: a container asking 16 whole GPUs on a 16-GPU node (DGX-2 class, NVSwitch) is honoured end
    to end: the agent publishes the node's 16 GPUs, the real extender (`gpuslice scheduler`, on the API
    stand-in) filters and binds the pod with its assignment in the Binding, the agent steers kubelet's
    calls to the 16 assigned GPUs and marks the pod assigned. Before one codec the agent refused
    assignments of more than 8 GPUs per container (and fell back to node-local placement)."""
    e.api.store.put("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    e.start()
    uuids = e.ids()
    check(len(uuids) == 16, "the node has %d GPUs" % len(uuids))
    deadline = time.monotonic() + 20
    while "gpuslice.io/gpus" not in e.api.store.get("nodes", NODE)["metadata"].get("annotations", {}):
        check(time.monotonic() < deadline, "the agent never published its GPUs")
        time.sleep(0.1)
    port = agent_fixture.free_port()
    log = open(os.path.join(e.tmp, "extender.log"), "w")
    ext = subprocess.Popen([os.path.join(e.args.build, "gpuslice"), "scheduler", "--kubeconfig", e.kubeconfig,
                            "--address", "127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            check(time.monotonic() < deadline and ext.poll() is None, "the extender never became ready")
            time.sleep(0.1)
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "sixteen", "namespace": "default", "uid": "uid-sixteen",
                            "creationTimestamp": "2026-11-23T10:00:00Z"},
               "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "16"}}}]},
               "status": {"phase": "Pending"}}
        pod = e.api.store.put("pods", pod)
        res = extender_call(port, "filter", {"Pod": pod, "NodeNames": [NODE], "Nodes": None})
        check(res.get("NodeNames") == [NODE], "filter: %s" % res)
        res = extender_call(port, "bind", {"PodName": "sixteen", "PodNamespace": "default", "PodUID": "uid-sixteen",
                                           "Node": NODE})
        check(res.get("Error") == "", "bind: %s" % res)
    finally:
        ext.send_signal(signal.SIGTERM)
        ext.wait(timeout=20)
        log.close()
    # one API call: the Binding carried the assignment (no annotation patch before it)
    check(len(e.api.store.bindings) == 1 and not [p for p, _ in e.api.store.patches if p.endswith("/sixteen")],
          "bind was not one Binding: %s %s" % (e.api.store.bindings, e.api.store.patches))
    ann = e.ann("sixteen")
    asg = json.loads(ann["gpuslice.io/assignment"])["containers"][0]
    check(asg["gpus"] == list(range(16)) and asg["uuids"] == uuids, "assignment %s, node %s" % (asg, uuids))
    check(e.api.store.get("pods", "default/sixteen")["spec"]["nodeName"] == NODE, "not bound")
    e.kubelet_lists(("sixteen", None, None))
    got = e.prefer(uuids, 16)
    check(sorted(got) == sorted(uuids), "preferred %s" % got)
    e.allocate(got)
    e.kubelet_lists(("sixteen", "nvidia.com/gpu", got))
    ann = e.wait_assigned("sixteen")
    check(json.loads(ann["gpuslice.io/assignment"])["containers"][0]["gpus"] == list(range(16)), ann)


def test_assign_record(e):
    """One truth about who holds which GPU (issue 19): pods placed node-locally (no assignment of any
    system) are recorded on the pod once kubelet lists what they hold — gpuslice.io/assignment with
    "by":"agent" and their GPUs, gpuslice.io/assigned "true" — in one patch with the uid and
    resourceVersion as preconditions; a pod of another system's scheduler is left alone."""
    def plain(name, limits, ann=None):
        e.api.store.put("pods", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": "uid-" + name,
                         "creationTimestamp": "2026-11-23T10:00:00Z", "annotations": ann or {}},
            "spec": {"nodeName": NODE, "containers": [{"name": "main", "resources": {
                "limits": {k: str(v) for k, v in limits.items()}}}]},
            "status": {"phase": "Pending"}})
    plain("local", {"nvidia.com/gpu": 2})
    plain("frac", {CORE: 30, MEM: 8})
    e.start("--resource-profile", "gpuslice")
    uuids = e.ids()
    e.kubelet_lists(("local", None, None))
    got = e.prefer(uuids, 2)
    e.allocate(got)
    e.kubelet_lists(("local", "nvidia.com/gpu", got), ("frac", None, None))
    core = e.fprefer(CORE, "core", 30)
    e.fallocate(CORE, core)
    e.kubelet_lists(("local", "nvidia.com/gpu", got), ("frac", CORE, core))
    mem = e.fprefer(MEM, "mem", 8)
    e.fallocate(MEM, mem)
    e.kubelet_lists(("local", "nvidia.com/gpu", got), ("frac", CORE, core), ("frac", MEM, mem))
    ann = e.wait_assigned("local")
    asg = json.loads(ann["gpuslice.io/assignment"])
    check(asg["by"] == "agent" and asg["node"] == NODE, asg)
    check(asg["containers"][0]["gpus"] == sorted(uuids.index(i) for i in got), "recorded %s, holds %s" % (asg, got))
    check(asg["containers"][0]["uuids"] == [uuids[i] for i in asg["containers"][0]["gpus"]], asg)
    ann = e.wait_assigned("frac")
    c0 = json.loads(ann["gpuslice.io/assignment"])["containers"][0]
    check(c0["gpus"] == gpu_of(e, core) == gpu_of(e, mem) and c0["core"] == 30 and c0["mem"] == 8 * 256, c0)
    patches = [b for p, b in e.api.store.patches if p.endswith("/local") or p.endswith("/frac")]
    check(len(patches) == 2 and all(b["metadata"].get("uid") and b["metadata"].get("resourceVersion")
                                    for b in patches), "one patch per pod, with preconditions: %s" % patches)
    # a pod gpushare's scheduler placed (its own annotation, read by the agent but not ours to record)
    plain("foreign", {"nvidia.com/gpu": 1}, {"ALIYUN_COM_GPU_MEM_IDX": "7"})
    e.kubelet_lists(("local", "nvidia.com/gpu", got), ("frac", CORE, core), ("frac", MEM, mem),
                    ("foreign", None, None))
    one = e.prefer([u for u in uuids if u not in got], 1)
    e.allocate(one)
    e.kubelet_lists(("local", "nvidia.com/gpu", got), ("frac", CORE, core), ("frac", MEM, mem),
                    ("foreign", "nvidia.com/gpu", one))
    time.sleep(3)
    check("gpuslice.io/assignment" not in e.ann("foreign"), e.ann("foreign"))


def podres_conf(e, socket):
    conf = os.path.join(e.tmp, "node.conf")
    with open(conf, "w") as f:
        f.write("[kubelet]\npod-resources-socket = %s\n" % socket)
    return conf


def test_assign_reload(e):
    """Issue 31: a SIGHUP that changes the PodResources socket is followed by every reader of the agent's one
    PodResources service: a kubelet call's evidence (the cache answers: kubelet lists only known pods, so no
    LIST), the patcher's verification (a repair only kubelet's new socket can show) and podsync (the record
    `gpuslice status` shows)."""
    conf = podres_conf(e, e.podres)
    e.put_pod("moved", {"nvidia.com/gpu": 1}, [2])
    e.start(conf=conf)
    uuids = e.ids()
    moved = os.path.join(e.tmp, "pod-resources-2.sock")
    e.kubelet.move_podres(moved)
    podres_conf(e, moved)
    e.agent.send_signal(signal.SIGHUP)
    e.kubelet.wait_for(lambda: "config reloaded" in open(e.logs[-1]).read(), 10, "reload")
    check("PodResources socket changed" in open(e.logs[-1]).read(), "the reload did not see the new socket")
    # a kubelet call: the pod being admitted, listed by kubelet on the new socket only
    e.kubelet_lists(("moved", None, None))
    lists, calls = len(pod_lists(e)), e.kubelet.podres_calls
    got = e.prefer(uuids, 1)
    check(got == [uuids[2]], "preferred %s" % got)
    check(e.kubelet.podres_calls > calls, "the call did not ask PodResources on the new socket")
    check(len(pod_lists(e)) == lists, "no PodResources answer after the reload: the call listed the pods %s" %
          pod_lists(e)[lists:])
    # the patcher: kubelet (new socket) lists the pod holding GPU 4: repaired to it
    e.allocate([uuids[2]])
    e.kubelet_lists(("moved", "nvidia.com/gpu", [uuids[4]]))
    ann = e.wait_assigned("moved")
    check(json.loads(ann["gpuslice.io/assignment"])["containers"][0]["gpus"] == [4], ann)
    # podsync: the record reconciled with what the new socket lists
    holders = {d["id"]: d["holder"] for d in e.status()["devices"]}
    check(holders[uuids[4]] and holders[uuids[4]]["pod"] == "moved", "GPU 4 holder %s" % holders[uuids[4]])


def waits(text, what):
    for line in text.splitlines():
        if line.startswith('gpuslice_agent_call_waits_total{wait="%s"}' % what):
            return float(line.rsplit(" ", 1)[1])
    return 0


def timed(fn):
    t0 = time.monotonic()
    out = fn()
    return out, time.monotonic() - t0


def test_assign_hang(e):
    """Issue 31: a kubelet call answers within its own bound while PodResources hangs (the patcher's call in
    flight too) and while the API server hangs on the LIST a lagging watch asks for; each wait is counted."""
    port = agent_fixture.free_port()
    e.put_pod("known", {"nvidia.com/gpu": 1}, [1])
    e.start(metrics_port=port)
    uuids = e.ids()
    e.kubelet_lists(("known", None, None))
    e.kubelet.podres_hang_s = 8
    got, took = timed(lambda: e.prefer(uuids, 1))
    check(took < 2, "GetPreferredAllocation took %.1f s while PodResources hung" % took)
    check(got == [uuids[1]], "preferred %s" % got)
    _, took = timed(lambda: e.allocate([uuids[1]]))
    check(took < 2, "Allocate took %.1f s while PodResources hung" % took)
    agent_fixture.scrape(port, lambda t: waits(t, "podresources-late") >= 2, "podresources-late waits")
    e.kubelet.podres_hang_s = 0
    e.kubelet_lists(("known", "nvidia.com/gpu", [uuids[1]]))
    e.wait_assigned("known")  # the calls left hanging timed out; the patcher's next one answered
    # the API server hangs on the LIST a pod the watch has not delivered asks for
    lag = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "lagging", "namespace": "default", "uid": "uid-lagging",
                        "creationTimestamp": "2026-11-23T10:00:00Z", "resourceVersion": "1",
                        "annotations": {"gpuslice.io/assignment": json.dumps({"v": 1, "node": NODE, "time": 1000,
                                                                               "containers": [{"name": "main",
                                                                                               "gpus": [3]}]}),
                                        "gpuslice.io/assigned": "false"}},
           "spec": {"nodeName": NODE, "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
           "status": {"phase": "Pending"}}
    with e.api.store.lock:
        e.api.store.objs["pods"]["default/lagging"] = lag  # no watch event
        e.api.store.hang_paths.append(["/api/v1/pods?", 1])
    e.kubelet_lists(("known", "nvidia.com/gpu", [uuids[1]]), ("lagging", None, None))
    lists = len(pod_lists(e))
    _, took = timed(lambda: e.prefer([u for j, u in enumerate(uuids) if j != 1], 1))
    check(len(pod_lists(e)) == lists + 1, "the call did not list the pods: %s" % pod_lists(e)[lists:])
    check(took < 2.5, "GetPreferredAllocation took %.1f s while the API server hung" % took)
    agent_fixture.scrape(port, lambda t: waits(t, "pods-list-late") >= 1, "a pods-list-late wait")


TESTS = {"assign-reload": test_assign_reload, "assign-hang": test_assign_hang, "assign-cache": test_assign_cache, "assign-pairs": test_assign_pairs, "assign-twins": test_assign_twins, "assign-whole": test_assign_whole, "assign-repair": test_assign_repair,
         "assign-sweep": test_assign_sweep, "assign-sixteen": test_assign_sixteen,
         "assign-record": test_assign_record}

if __name__ == "__main__":
    agent_fixture.run_main(TESTS, make_env=Env, timeout_s=120)
