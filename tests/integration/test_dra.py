#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The DRA driver (`gpuslice node --dra`, src/dra) against stand-ins of a kubelet and an API server
(no kubelet or kube-apiserver new enough for DRA, >= 1.32, can be built here; docs/dra.md says what this
does and does not prove):

- the kubelet stand-in (kubelet_standin.DraKubelet, real gRPC on Debian's python3-grpcio) registers the
  driver as kubelet 1.36 does, in v1 or in v1beta1, calls NodePrepareResources / NodeUnprepareResources
  and subscribes to the health stream;
- the API stand-in (kube_standin.py) validates every ResourceSlice as kube-apiserver 1.36 does (after
  dropping the fields of disabled feature gates: dra_validation.py) and serves the claims a test writes
  as the scheduler would have allocated them.

The agent runs on the simulated node (sim/) with character device nodes made with mknod under a private
--dev-root and a fake sysfs that gives every GPU a PCIe root complex; on a node with MIG GPUs
(tests/data/mig/h100-mixed.node) also the driver's mig-minors and the capability nodes (`gpuslice-sim caps`);
exit 77 when not root.
"""
import copy
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_fixture  # noqa: E402
import dra_validation  # noqa: E402
import kube_standin  # noqa: E402
import kubelet_standin  # noqa: E402
from agent_fixture import Skip, check  # noqa: E402

NODE = "gpu-node"
DRIVER = "gpu.gpuslice.io"
GIB = 1 << 30
HEALTHY, UNHEALTHY = 1, 2  # dra-health HealthStatus


def topo_json(build, topology, env):
    r = subprocess.run([os.path.join(build, "gpuslice"), "topo", "--json", "--topology", topology], env=env,
                       capture_output=True, text=True, timeout=30, check=True)
    return json.loads(r.stdout)


def pcie_roots(t):
    """Root complexes from the topology, independently of the C code: GPUs joined by PIX/PXB/PHB share
    one (a host bridge); every group gets pci0000:<bus>."""
    n = len(t["gpus"])
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i
    for a in range(n):
        for b in range(n):
            if t["links"][a][b] in ("PIX", "PXB", "PHB") and find(a) != find(b):
                parent[max(find(a), find(b))] = min(find(a), find(b))
    roots, out = {}, []
    for i in range(n):
        roots.setdefault(find(i), "pci0000:%02x" % (0x10 * len(roots)))
        out.append(roots[find(i)])
    return out


class DraEnv:
    def __init__(self, args, stubs, services=("v1.DRAPlugin", "v1beta1.DRAPlugin")):
        if os.geteuid() != 0:
            raise Skip("mknod of the GPU device nodes needs root")
        self.args = args
        self.stubs = stubs = kubelet_standin.load_stubs(
            args.build, names=("deviceplugin", "podresources") + kubelet_standin.DRA_STUBS)
        self.tmp = tempfile.mkdtemp(prefix="gpuslice-dra-")
        p = lambda *a: os.path.join(self.tmp, *a)  # noqa: E731
        self.registry, self.plugins, self.state_dir = p("plugins_registry"), p("plugins"), p("state")
        self.cdi, self.host, self.dp = p("cdi"), p("host"), p("device-plugins")
        self.podres = p("podres.sock")
        for d in (self.registry, self.plugins, self.dp, os.path.join(self.host, "dev")):
            os.makedirs(d)
        self.env = dict(os.environ)
        self.env.update({"LD_LIBRARY_PATH": os.path.join(args.build, "sim"), "GPUSLICE_SIM_NODE": args.topology,
                         "GPUSLICE_SIM_STATE": p("sim.state"), "NODE_NAME": NODE})
        self.env.pop("KUBERNETES_SERVICE_HOST", None)
        self.env.pop("GPUSLICE_CRASH_AT", None)
        self.topo = topo_json(args.build, args.topology, self.env)
        self.roots = pcie_roots(self.topo)
        self._host_tree()
        self.api = kube_standin.StandIn().start()
        self.kubeconfig = self.api.kubeconfig(p("kubeconfig"))
        self.api.store.put("nodes", {"apiVersion": "v1", "kind": "Node",
                                     "metadata": {"name": NODE, "uid": str(uuid.uuid4()), "labels": {}},
                                     "status": {"capacity": {"cpu": "64"}}})
        self.dp_kubelet = kubelet_standin.Kubelet(stubs, self.dp, self.podres)
        self.dp_kubelet.start()
        self.kubelet = kubelet_standin.DraKubelet(stubs, self.registry, services=services, wipe=self.wipe)
        self.agent, self.logs = None, []
        self.interposer = os.path.abspath(os.path.join(args.build, "libgpuslice-cuda.so"))
        self.sim("reset")
        self.mig = any(g.get("mig_mode") == 1 for g in self.topo["gpus"])
        if self.mig:  # mig-minors and /dev/nvidia-caps as the driver and nvidia-modprobe make them
            self.sim("caps", self.host)

    def _host_tree(self):
        """/dev/nvidia<minor> and nvidiactl as character devices; /sys/bus/pci/devices/<bdf> links into
        /sys/devices/pci<root>/... as Linux has them."""
        dev = os.path.join(self.host, "dev")
        for g in self.topo["gpus"]:
            os.mknod(os.path.join(dev, "nvidia%d" % g["minor"]), 0o666 | stat.S_IFCHR, os.makedev(195, g["minor"]))
        os.mknod(os.path.join(dev, "nvidiactl"), 0o666 | stat.S_IFCHR, os.makedev(195, 255))
        bus = os.path.join(self.host, "sys", "bus", "pci", "devices")
        os.makedirs(bus)
        for g, root in zip(self.topo["gpus"], self.roots):
            bdf = self.bdf(g)
            target = os.path.join(self.host, "sys", "devices", root, "0000:00:01.0", bdf)
            os.makedirs(target)
            os.symlink(os.path.relpath(target, bus), os.path.join(bus, bdf))

    @staticmethod
    def bdf(g):
        d, rest = g["bus_id"].split(":", 1)
        return (d[-4:] + ":" + rest).lower()

    def sim(self, *argv):
        r = subprocess.run([os.path.join(self.args.build, "sim", "gpuslice-sim")] + list(argv), env=self.env,
                           capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise AssertionError("gpuslice-sim %s failed: %s" % (" ".join(argv), r.stderr))

    # ---- the agent ----

    def start_agent(self, *extra, crash=None):
        log = os.path.join(self.tmp, "agent-%d.log" % len(self.logs))
        self.logs.append(log)
        env = dict(self.env)
        if crash:
            env["GPUSLICE_CRASH_AT"] = crash
        cmd = [os.path.join(self.args.build, "gpuslice"), "node", "--dra", "--plugin-dir", self.dp, "--state-dir",
               self.state_dir, "--pod-resources-socket", self.podres, "--dev-root", self.host, "--kubeconfig",
               self.kubeconfig, "--dra-registry-dir", self.registry, "--dra-plugin-dir", self.plugins,
               "--dra-cdi-dir", self.cdi, "--interposer", self.interposer, "--health-quiet-period", "2s",
               "--log-level", "debug", "--metrics-address="] + list(extra)
        self.agent = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        return self.agent

    kill_agent = agent_fixture.Env.kill_agent
    status = agent_fixture.Env.status

    def log(self):
        with open(self.logs[-1]) as f:
            return f.read()

    # ---- the API's side ----

    def slices(self):
        with self.api.store.lock:
            return [dict(o) for o in self.api.store.objs["resourceslices"].values()
                    if o["spec"].get("nodeName") == NODE and o["spec"].get("driver") == DRIVER]

    def devices(self):
        return {d["name"]: d for s in self.slices() for d in s["spec"].get("devices") or []}

    def wait_pool(self, pred, what, timeout=20):
        """Until the pool is complete (every slice of one generation, as many as it says) and pred(devices)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.slices()
            gens = {x["spec"]["pool"]["generation"] for x in s}
            if s and len(gens) == 1 and all(x["spec"]["pool"]["resourceSliceCount"] == len(s) for x in s):
                devs = {d["name"]: d for x in s for d in x["spec"].get("devices") or []}
                if pred(devs):
                    return gens.pop(), s
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s; slices: %s; rejected: %s" %
                             (what, json.dumps(self.slices())[:3000], self.api.store.rejected[-3:]))

    def wipe(self):
        """What a starting kubelet does: delete the node's ResourceSlices."""
        with self.api.store.lock:
            for k in [k for k, o in self.api.store.objs["resourceslices"].items() if o["spec"].get("nodeName") == NODE]:
                self.api.store.delete("resourceslices", k)

    def claim(self, name, results, config=None, ns="default", allocated=True):
        """A ResourceClaim as the scheduler leaves it; results: (request, device[, memory, cores])."""
        uid = str(uuid.uuid4())
        res = []
        for r in results:
            e = {"request": r[0], "driver": DRIVER, "pool": r[4] if len(r) > 4 else NODE, "device": r[1]}
            if len(r) > 2:
                e["shareID"] = str(uuid.uuid4())
                # as the real 1.36 scheduler writes them: memory "4Gi", cores "30"
                e["consumedCapacity"] = {"memory": kube_standin.binary_quantity(r[2]), "cores": str(r[3])}
            res.append(e)
        obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": name, "namespace": ns, "uid": uid},
               "spec": {"devices": {"requests": [{"name": r[0], "exactly": {"deviceClassName": "gpu.gpuslice.io"}}
                                                 for r in results]}}}
        kube_standin.claim_defaults(obj)
        if allocated:
            obj["status"] = {"allocation": {"devices": {"results": res, "config": config or []}}}
            kube_standin.allocated(obj, NODE)
        self.api.store.put("resourceclaims", obj)
        return (ns, uid, name)

    # ---- what is on disk ----

    def cdi_specs(self):
        return sorted(n for n in os.listdir(self.cdi)) if os.path.isdir(self.cdi) else []

    def limits_dirs(self):
        d = os.path.join(self.state_dir, "dra-containers")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []

    def limits(self, claim_uid):
        path = os.path.join(self.state_dir, "dra-containers", "dra-" + claim_uid, "limits")
        out = {}
        with open(path) as f:
            for line in f:
                w = line.split()
                if w and w[0] == "device":
                    kv = dict(x.split("=", 1) for x in w[2:])
                    out[kv["uuid"]] = (int(kv.get("memory", 0)), int(kv.get("core", 100)))
                elif w and w[0] == "core-policy":
                    out["policy"] = w[1]
        return out

    def close(self, failed):
        try:
            self.kill_agent()
        finally:
            self.kubelet.close()
            self.dp_kubelet.close()
            self.api.stop()
            if failed:
                agent_fixture.dump_logs(self.logs)
            shutil.rmtree(self.tmp, ignore_errors=True)


def up(e, *extra, crash=None):
    """Agent started, registered, the pool published."""
    e.start_agent(*extra, crash=crash)
    info = e.kubelet.register()
    e.wait_pool(lambda d: len(d) > 0, "the first pool")
    return info


def uuid_of(e, index):
    return next(g["uuid"] for g in e.topo["gpus"] if g["index"] == index)


def sim_mig(e):
    """The MIG devices as `gpuslice topo --json` reads them through the simulated NVML: (gpu, gi, ci) -> device."""
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "topo", "--json"], env=e.env, capture_output=True,
                       text=True, timeout=30, check=True)
    return {(m["gpu"], d["gpu_instance"], d["compute_instance"]): d
            for m in json.loads(r.stdout)["mig"] for d in m["devices"] if m["mode"] == "on"}


def mig_minors(e):
    """The capability minors of mig-minors ("gpu0/gi7/access 66"), read here independently of the C code."""
    out = {}
    with open(os.path.join(e.host, "proc", "driver", "nvidia-caps", "mig-minors")) as f:
        for line in f:
            w = line.split()
            if len(w) == 2 and w[0].startswith("gpu"):
                out[w[0]] = int(w[1])
    return out


def mig_name(gpu, gi, ci):
    return "gpu-%d-mig-%d-%d" % (gpu, gi, ci)


def ok(answer, uid):
    a = answer[uid]
    check(not a.error, "claim %s failed: %s" % (uid, a.error))
    return a


# ---- registration ----

def test_register(e):
    info = up(e)
    check(info.type == "DRAPlugin" and info.name == DRIVER, "PluginInfo %s" % info)
    check(info.endpoint == os.path.join(e.plugins, DRIVER, "dra.sock"), "endpoint %s" % info.endpoint)
    check(list(info.supported_versions)[:2] == ["v1.DRAPlugin", "v1beta1.DRAPlugin"],
          "supported versions %s" % list(info.supported_versions))
    check(e.kubelet.chosen == "v1.DRAPlugin", "a 1.36 kubelet chooses v1, chose %s" % e.kubelet.chosen)
    c = e.claim("one", [("gpu", "gpu-1")])
    a = ok(e.kubelet.prepare(c), c[1])
    check(len(a.devices) == 1 and a.devices[0].device_name == "gpu-1", "devices %s" % a.devices)
    st = e.status()["dra"]
    check(st["registered"] and st["driver"] == DRIVER and len(st["claims"]) == 1, "status %s" % st)
    check("migError" not in st and "registrationError" not in st, "docs/dra.md: absent when none: %s" % st)
    # an older kubelet speaks v1beta1 only: the same driver, the same answers
    old = kubelet_standin.DraKubelet(e.stubs, e.registry, services=("v1beta1.DRAPlugin",))
    try:
        old.register()
        check(old.chosen == "v1beta1.DRAPlugin", "chose %s" % old.chosen)
        a2 = ok(old.prepare(c), c[1])
        check(list(a2.devices[0].cdi_device_ids) == list(a.devices[0].cdi_device_ids), "v1beta1 answer differs")
        check(old.unprepare(c) == {c[1]: ""}, "v1beta1 unprepare")
    finally:
        old.close()
    # a kubelet that speaks neither refuses the plugin (and says why)
    future = kubelet_standin.DraKubelet(e.stubs, e.registry, services=("v2.DRAPlugin",))
    try:
        future.register()
        raise AssertionError("a kubelet without a common version registered the plugin")
    except AssertionError as x:
        check("none of" in str(x), "unexpected: %s" % x)
    finally:
        future.close()
    e.kubelet.wait_for(lambda: "kubelet refused the registration" in e.log(), 10, "the refusal in the log")


# ---- ResourceSlices ----

def test_slices(e):
    up(e)
    gen, slices = e.wait_pool(lambda d: len(d) == 2 * len(e.topo["gpus"]), "whole and shared devices")
    check(not e.api.store.rejected, "the stand-in refused slices: %s" % e.api.store.rejected)
    check(dra_validation.validate_pool(slices) == [], "pool invalid: %s" % dra_validation.validate_pool(slices))
    for s in slices:
        check(dra_validation.validate_slice(s) == [], "slice invalid: %s" % dra_validation.validate_slice(s))
        check(s["spec"]["pool"]["name"] == NODE and s["spec"]["nodeName"] == NODE, "pool %s" % s["spec"])
        owners = s["metadata"].get("ownerReferences") or []
        check(owners and owners[0]["kind"] == "Node" and owners[0]["name"] == NODE, "owner %s" % owners)
    counters = [c for s in slices for c in s["spec"].get("sharedCounters") or []]
    check(len(counters) == len(e.topo["gpus"]), "one counter set per GPU: %s" % counters)
    devs = e.devices()
    for g, root in zip(e.topo["gpus"], e.roots):
        whole, shared = devs["gpu-%d" % g["index"]], devs["gpu-%d-shared" % g["index"]]
        a = whole["attributes"]
        check(a["uuid"]["string"] == g["uuid"] and a["index"]["int"] == g["index"], "identity %s" % a)
        check(a["resource.kubernetes.io/pcieRoot"]["string"] == root, "pcieRoot %s, sysfs says %s" %
              (a["resource.kubernetes.io/pcieRoot"], root))
        check(a["resource.kubernetes.io/pciBusID"]["string"] == e.bdf(g), "pciBusID %s" % a)
        check(dra_validation.SEMVER.match(a["driverVersion"]["version"]), "driverVersion %s" % a["driverVersion"])
        check(a["type"]["string"] == "gpu" and shared["attributes"]["type"]["string"] == "shared", "types")
        check(dra_validation.quantity(whole["capacity"]["memory"]["value"]) == g["memory_total_bytes"], "memory")
        check(len(a) + len(whole["capacity"]) <= 32, "too many attributes and capacities")
        check(shared["allowMultipleAllocations"] is True and "requestPolicy" in shared["capacity"]["cores"],
              "shared device %s" % shared)
        set_w = whole["consumesCounters"][0]
        set_s = shared["consumesCounters"][0]
        check(set_w["counterSet"] == set_s["counterSet"] == "gpu-%d" % g["index"], "counter sets")
        check(dra_validation.quantity(set_w["counters"]["memory"]["value"]) == g["memory_total_bytes"],
              "the whole device consumes the whole counter")
    # a GPU turns unhealthy: a 1.36 server keeps device taints, so the pool's next generation has it tainted
    # NoSchedule (whole and shared), the time the server stamped kept (no rewrite for it)
    e.sim("lose", "3")
    gen2, _ = e.wait_pool(lambda d: d.get("gpu-3", {}).get("taints") and d.get("gpu-3-shared", {}).get("taints"),
                          "gpu-3 tainted")
    check(gen2 > gen, "generation %d after %d" % (gen2, gen))
    t = e.devices()["gpu-3"]["taints"]
    check(len(t) == 1 and t[0]["key"] == DRIVER + "/unhealthy" and t[0]["effect"] == "NoSchedule" and
          t[0].get("timeAdded"), "taint %s" % t)
    check(not any(d.get("taints") for n, d in e.devices().items() if not n.startswith("gpu-3")), "others tainted")
    check(e.status()["dra"]["taints"] is True, "status: taints %s" % e.status()["dra"])
    wait_quiet(e, quiet=1.0)
    rv = {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in e.slices()}
    time.sleep(1)
    check(rv == {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in e.slices()},
          "rewritten for the server's timeAdded")
    e.sim("restore", "3")
    gen3, _ = e.wait_pool(lambda d: "gpu-3" in d and not d["gpu-3"].get("taints"), "gpu-3 back", timeout=30)
    check(gen3 > gen2, "generation %d after %d" % (gen3, gen2))
    # a restarting kubelet wipes the node's slices: they come back
    e.kubelet.restart()
    gen4, _ = e.wait_pool(lambda d: len(d) == 2 * len(e.topo["gpus"]), "slices published again after a wipe")
    check(gen4 > gen3, "generation %d after a wipe (was %d)" % (gen4, gen3))
    # nothing changes: nothing is written (the stand-in's resourceVersion stays)
    before = {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in e.slices()}
    time.sleep(2)
    after = {s["metadata"]["name"]: s["metadata"]["resourceVersion"] for s in e.slices()}
    check(before == after, "slices rewritten without a change: %s → %s" % (before, after))


def slice_writes(e, since=0):
    """The POST/PUT/DELETE requests of ResourceSlices the stand-in got since request number `since`."""
    with e.api.store.lock:
        reqs = list(e.api.store.requests[since:])
    return [r for r in reqs if r[0] in ("POST", "PUT", "DELETE") and "/resourceslices" in r[1]]


def wait_quiet(e, quiet=1.5, timeout=30):
    """Until the stand-in has heard no ResourceSlice write for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    n, since = len(slice_writes(e)), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.1)
        m = len(slice_writes(e))
        if m != n:
            n, since = m, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise AssertionError("the driver never stopped writing ResourceSlices")


def test_slices_writes(e):
    """No write while the published slices match (the real 1.36 saw redundant writes in 3 of 10 starts: the
    publisher compared with its lagging informer cache and its own writes' events started new passes). With
    the stand-in's watch lagging the answers as the real server's watch cache does: 20 fresh starts, every
    other one on an empty pool (exactly one POST per slice) and the others on the pool the last one left (no
    write at all), then a kubelet's wipe while running (exactly one POST per slice again)."""
    e.api.store.watch_delay = 0.05
    want = None
    for i in range(20):
        if i % 2 == 0:
            e.wipe()
        before = len(e.api.store.requests)
        e.start_agent()
        _, slices = e.wait_pool(lambda d: len(d) == 2 * len(e.topo["gpus"]), "the pool, start %d" % i)
        wait_quiet(e)
        writes = slice_writes(e, before)
        if want is None:
            want = len(slices)
        expected = [("POST", "/apis/resource.k8s.io/v1/resourceslices")] * want if i % 2 == 0 else []
        check(writes == expected, "start %d: %d writes, %d needed: %s" % (i, len(writes), len(expected), writes))
        gens = {(s["spec"]["pool"]["generation"], s["metadata"]["generation"]) for s in e.slices()}
        check(gens == {(1, 1)}, "start %d: pool and object generations %s (a rewrite)" % (i, gens))
        check(not e.api.store.rejected, "refused: %s" % e.api.store.rejected)
        if i < 19:
            e.kill_agent(signal.SIGTERM)
    before = len(e.api.store.requests)
    e.wipe()
    e.wait_pool(lambda d: len(d) == 2 * len(e.topo["gpus"]), "the pool after a wipe")
    wait_quiet(e)
    writes = slice_writes(e, before)
    check([w[0] for w in writes] == ["POST"] * want, "after a wipe: %s, %d POSTs needed" % (writes, want))
    # someone else's edit of one slice: the pool written again under its next generation, one PUT per slice
    before = len(e.api.store.requests)
    with e.api.store.lock:
        name, obj = sorted(e.api.store.objs["resourceslices"].items())[0]
        obj = copy.deepcopy(obj)
        obj["spec"]["devices"][0]["attributes"]["productName"] = {"string": "edited"}
        e.api.store.put("resourceslices", obj)
    e.wait_pool(lambda d: all(x["attributes"]["productName"]["string"] != "edited" for x in d.values()),
                "the edit undone")
    wait_quiet(e)
    writes = slice_writes(e, before)
    check(sorted(writes) == sorted(("PUT", "/apis/resource.k8s.io/v1/resourceslices/" + s["metadata"]["name"])
                                   for s in e.slices()), "after an edit: %s" % writes)
    check("cannot publish" not in e.log(), "a failed write: %s" % e.log()[-2000:])


RECORDED_NODE = "gpunode"  # the node of the recorded objects


def recorded(e, name):
    """An object the real kube-apiserver 1.36.3 stored (tests/data/dra/real-1.36, copied from the run the
    facts file describes), its node renamed to this test's."""
    import yaml
    with open(os.path.join(e.args.source, "tests", "data", "dra", "real-1.36", name)) as f:
        text = json.dumps(yaml.safe_load(f))
    return json.loads(text.replace('"%s' % RECORDED_NODE, '"%s' % NODE))


SERVER_SET = ("uid", "resourceVersion", "creationTimestamp")  # differ from run to run


def test_recorded(e):
    """The stand-in against what the real 1.36 stored: (1) the recorded slices of the 8-GPU node and of the
    H100 MIG node pass the stand-in's validation, and posted to it come back in the stored form the real
    server answered (metadata generation and all); (2) the recorded claim's spec, as a template controller
    writes it, is stored with the real server's defaults; (3) on the same simulated node
    (tests/data/dra/nvlink-pairs.topo) the driver publishes, through the stand-in, exactly the slices the real
    server stored; (4) the recorded claim, as stored, is prepared."""
    for name in ("resourceslices-8gpu.yaml", "resourceslices-mig.yaml"):
        items = recorded(e, name)["items"]
        check(dra_validation.validate_pool(items) == [], "%s: %s" % (name, dra_validation.validate_pool(items)))
        api = kube_standin.StandIn().start()
        try:
            for rec in items:
                check(dra_validation.validate_slice(rec) == [], "%s: %s" % (name, dra_validation.validate_slice(rec)))
                sent = copy.deepcopy(rec)
                for k in SERVER_SET + ("generation",):
                    sent["metadata"].pop(k, None)
                got = http_json(api.url, "POST", "/apis/resource.k8s.io/v1/resourceslices", sent)
                check(not api.store.rejected, "%s refused: %s" % (name, api.store.rejected))
                check(got["metadata"].get("generation") == 1, "a created slice's generation: %s" % got["metadata"])
                for o in (got, rec):
                    for k in SERVER_SET + ("generation",):  # the MIG node's were written 4 times
                        o["metadata"].pop(k, None)
                check(got == rec, "%s: stored as\n%s\nthe real server stored\n%s" %
                      (name, json.dumps(got, sort_keys=True)[:1500], json.dumps(rec, sort_keys=True)[:1500]))
        finally:
            api.stop()
    claim = recorded(e, "claim-one-gpu.yaml")
    template = {"apiVersion": claim["apiVersion"], "kind": claim["kind"],
                "metadata": {"name": claim["metadata"]["name"], "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}}}
    api = kube_standin.StandIn().start()
    try:
        got = http_json(api.url, "POST", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", template)
        check(got["spec"] == claim["spec"], "claim spec stored as %s, the real server: %s" %
              (got["spec"], claim["spec"]))
    finally:
        api.stop()
    up(e)
    _, slices = e.wait_pool(lambda d: len(d) == 2 * len(e.topo["gpus"]), "the pool")
    wait_quiet(e, quiet=1.0)
    mine = {s["metadata"]["name"]: copy.deepcopy(s) for s in e.slices()}
    real = {s["metadata"]["name"]: s for s in recorded(e, "resourceslices-8gpu.yaml")["items"]}
    check(sorted(mine) == sorted(real), "slices %s, the real server had %s" % (sorted(mine), sorted(real)))
    for n, rec in real.items():
        got = mine[n]
        for o in (got, rec):
            for k in SERVER_SET:
                o["metadata"].pop(k, None)
            for ref in o["metadata"].get("ownerReferences") or []:
                ref.pop("uid", None)
            o.pop("apiVersion"), o.pop("kind")
        check(got == rec, "%s published as\n%s\nthe real server stored\n%s" %
              (n, json.dumps(got, sort_keys=True)[:3000], json.dumps(rec, sort_keys=True)[:3000]))
    with e.api.store.lock:
        e.api.store.objs["resourceclaims"]["default/" + claim["metadata"]["name"]] = claim
    c = ("default", claim["metadata"]["uid"], claim["metadata"]["name"])
    a = ok(e.kubelet.prepare(c), c[1])
    check([d.device_name for d in a.devices] == ["gpu-0"], "devices %s" % a.devices)
    check(e.kubelet.unprepare(c) == {c[1]: ""}, "unprepare")


def http_json(url, method, path, body=None):
    import urllib.request
    req = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body else None,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_extended(e):
    """A pod asking `nvidia.com/gpu: 1` with no claim (the class's extendedResourceName): the real 1.36
    scheduler made a claim "<pod>-extended-resources-<suffix>" and the driver prepared it like any other."""
    up(e)
    pod = {"name": "ext", "namespace": "default", "uid": str(uuid.uuid4())}
    obj = kube_standin.extended_resource_claim(pod, NODE, DRIVER, "gpu.gpuslice.io", ["gpu-5"])
    check("-extended-resources-" in obj["metadata"]["name"], "name %s" % obj["metadata"]["name"])
    e.api.store.put("resourceclaims", obj)
    c = ("default", obj["metadata"]["uid"], obj["metadata"]["name"])
    a = ok(e.kubelet.prepare(c), c[1])
    check([d.device_name for d in a.devices] == ["gpu-5"] and
          list(a.devices[0].request_names) == ["container-0-request-0"], "devices %s" % a.devices)
    check(e.cdi_specs() == ["%s-claim_%s.json" % (DRIVER, c[1])], "specs %s" % e.cdi_specs())
    st = [d["device"] for d in claim_obj(e, c)["status"].get("devices") or []]
    check(st == ["gpu-5"], "status.devices %s" % st)
    check(e.kubelet.unprepare(c) == {c[1]: ""}, "unprepare")


def test_slices_v1beta1(e):
    """A 1.32 server serves v1beta1 only: the driver publishes there, devices wrapped in "basic"."""
    e.api.store.resource_versions = ["v1beta1"]
    e.api.store.gates = dict(dra_validation.GATES_1_34)
    up(e)
    posted = [p for p in e.api.store.requests if p[0] == "POST" and "resourceslices" in p[1]]
    check(posted and all("/v1beta1/" in p[1] for p in posted), "wrote %s" % posted)
    _, slices = e.wait_pool(lambda d: len(d) == len(e.topo["gpus"]), "whole GPUs only (no consumable capacity)")
    check(all("shared" not in n for n in e.devices()), "shared devices published on a server without the gate")
    check("does not keep shared devices" in e.log() or "refused" in e.log(), "no word of the withdrawn sharing")
    c = e.claim("v1b1", [("gpu", "gpu-0")])
    ok(e.kubelet.prepare(c), c[1])


def test_slices_gates(e):
    """A v1 server with 1.34's defaults (consumable capacity and partitionable devices off) drops the shared
    devices' fields: the driver notices and publishes whole GPUs only, 128 to a slice."""
    e.api.store.gates = dict(dra_validation.GATES_1_34)
    up(e)
    e.wait_pool(lambda d: len(d) == len(e.topo["gpus"]) and not any("shared" in n for n in d), "whole only")
    check(all(not s["spec"].get("sharedCounters") for s in e.slices()), "counter slices left behind")
    check(len(e.slices()) == 1, "one slice: %d" % len(e.slices()))
    # device taints are dropped too (DRADeviceTaints off): an unhealthy GPU is left out of the pool instead
    e.sim("lose", "3")
    e.wait_pool(lambda d: "gpu-3" not in d and "gpu-2" in d, "gpu-3 withdrawn")
    check(not any(d.get("taints") for d in e.devices().values()), "taints published: %s" % e.devices())
    check("does not keep device taints" in e.log(), "no word of the dropped taints")
    check(e.status()["dra"]["taints"] is False, "status: taints %s" % e.status()["dra"])
    e.sim("restore", "3")
    e.wait_pool(lambda d: "gpu-3" in d, "gpu-3 back", timeout=30)


# ---- prepare / unprepare ----

def test_prepare_whole(e):
    up(e)
    c = e.claim("pair", [("gpus", "gpu-0"), ("gpus", "gpu-1")])
    a = ok(e.kubelet.prepare(c), c[1])
    names = [d.device_name for d in a.devices]
    check(names == ["gpu-0", "gpu-1"] and all(d.pool_name == NODE for d in a.devices), "devices %s" % names)
    ids = [i for d in a.devices for i in d.cdi_device_ids]
    check(ids == ["%s/claim=%s-gpu-0" % (DRIVER, c[1]), "%s/claim=%s-gpu-1" % (DRIVER, c[1])], "CDI IDs %s" % ids)
    specs = e.cdi_specs()
    check(specs == ["%s-claim_%s.json" % (DRIVER, c[1])], "specs %s" % specs)
    with open(os.path.join(e.cdi, specs[0])) as f:
        spec = json.load(f)
    check(spec["kind"] == DRIVER + "/claim", "kind %s" % spec["kind"])
    nodes = {d["name"]: d["containerEdits"]["deviceNodes"][0]["path"] for d in spec["devices"]}
    check(nodes == {c[1] + "-gpu-0": "/dev/nvidia0", c[1] + "-gpu-1": "/dev/nvidia1"}, "nodes %s" % nodes)
    check(not e.limits_dirs(), "whole GPUs need no limits dir: %s" % e.limits_dirs())
    # the same claim again: the same answer, nothing new on disk
    a2 = ok(e.kubelet.prepare(c), c[1])
    check([list(d.cdi_device_ids) for d in a2.devices] == [list(d.cdi_device_ids) for d in a.devices], "idempotent")
    # another claim for a GPU already prepared: refused
    other = e.claim("again", [("gpu", "gpu-1")])
    err = e.kubelet.prepare(other)[other[1]].error
    check("already prepared" in err, "double prepare answered %r" % err)
    check(e.kubelet.unprepare(c) == {c[1]: ""}, "unprepare")
    check(e.cdi_specs() == [], "spec left behind: %s" % e.cdi_specs())
    check(e.kubelet.unprepare(c) == {c[1]: ""}, "a second unprepare is not an error")
    ok(e.kubelet.prepare(other), other[1])


def test_prepare_shared(e):
    port = agent_fixture.free_port()
    driver_root, real = agent_fixture.nvml_driver_root(e.tmp, e.args.build)
    up(e, "--metrics-address", "127.0.0.1:%d" % port, "--driver-root", driver_root)
    g0 = uuid_of(e, 0)
    a = e.claim("a", [("share", "gpu-0-shared", 4 * GIB, 30)])
    b = e.claim("b", [("share", "gpu-0-shared", 2 * GIB, 20)],
                config=[{"source": "FromClaim", "requests": [],
                         "opaque": {"driver": DRIVER, "parameters": {"apiVersion": "gpu.gpuslice.io/v1alpha1",
                                                                    "kind": "GpuConfig", "corePolicy": "elastic"}}}])
    ans = e.kubelet.prepare(a, b)
    ok(ans, a[1])
    ok(ans, b[1])
    check(ans[a[1]].devices[0].share_id, "share ID not returned")
    la, lb = e.limits(a[1]), e.limits(b[1])
    check(la[g0] == (4 * GIB, 30) and la["policy"] == "hard", "claim a limits %s" % la)
    check(lb[g0] == (2 * GIB, 20) and lb["policy"] == "elastic", "claim b limits %s" % lb)
    with open(os.path.join(e.cdi, "%s-claim_%s.json" % (DRIVER, a[1]))) as f:
        spec = json.load(f)
    edits = spec["containerEdits"]
    check("GPUSLICE_LIMITS=/run/gpuslice/limits" in edits["env"] and
          "LD_PRELOAD=/run/gpuslice/lib/libcuda.so.1 /run/gpuslice/lib/libnvidia-ml.so.1" in edits["env"],
          "env %s" % edits["env"])
    mounts = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
    check(mounts["/run/gpuslice/limits"].endswith("dra-%s/limits" % a[1]) and
          mounts["/run/gpuslice/lib/libcuda.so.1"] == e.interposer and "/etc/ld.so.preload" in mounts,
          "mounts %s" % mounts)
    # the NVML stand-in next to the interposer, its real NVML the driver root's (docs/interposer.md "NVML")
    check(mounts.get("/run/gpuslice/lib/libnvidia-ml.so.1") ==
          os.path.join(os.path.dirname(e.interposer), "libgpuslice-nvml.so") and
          mounts.get("/run/gpuslice/driver/libnvidia-ml.so.1") == real, "NVML mounts %s" % mounts)
    with open(mounts["/etc/ld.so.preload"]) as f:
        pre = f.read()
    check(pre == "/run/gpuslice/lib/libcuda.so.1 /run/gpuslice/lib/libnvidia-ml.so.1\n", "ld.so.preload %r" % pre)
    # more than the GPU has: refused; the whole GPU while shares hold it: refused
    big = e.claim("big", [("share", "gpu-0-shared", 1 * GIB, 60)])
    check("exceed" in e.kubelet.prepare(big)[big[1]].error, "cores past 100 %% prepared")
    whole = e.claim("whole", [("gpu", "gpu-0")])
    check("already prepared" in e.kubelet.prepare(whole)[whole[1]].error, "whole GPU prepared beside shares")
    text = agent_fixture.scrape(port, lambda t: "gpuslice_dra_prepared_claims 2" in t, "2 prepared claims")
    check('gpuslice_dra_claim_errors_total{operation="prepare"} 2' in text, "errors not counted:\n%s" %
          "\n".join(x for x in text.splitlines() if "gpuslice_dra" in x))
    check("gpuslice_dra_prepare_seconds_count 4" in text and 'gpuslice_dra_slice_writes_total{outcome="created"}' in text,
          "DRA families missing")
    check(e.kubelet.unprepare(a, b) == {a[1]: "", b[1]: ""}, "unprepare")
    check(e.limits_dirs() == [] and e.cdi_specs() == [], "left behind: %s %s" % (e.limits_dirs(), e.cdi_specs()))
    ok(e.kubelet.prepare(whole), whole[1])
    agent_fixture.scrape(port, lambda t: "gpuslice_dra_prepared_claims 1" in t and
                         "gpuslice_dra_unprepare_seconds_count 2" in t, "1 prepared claim after the unprepare")


def claim_obj(e, c):
    with e.api.store.lock:
        return copy.deepcopy(e.api.store.objs["resourceclaims"]["%s/%s" % (c[0], c[2])])


def test_claim_status(e):
    """status.devices (ResourceClaimDeviceStatus, beta and on in 1.36; the real server showed the driver never
    wrote it): per prepared device its driver, pool, device, shareID and data (UUID, PCI bus id, a share's
    limits), written by server-side apply under the driver's field manager — another driver's entry of the
    same claim stays — and cleared at unprepare."""
    up(e)
    g1 = next(g for g in e.topo["gpus"] if g["index"] == 1)
    c = e.claim("st", [("gpu", "gpu-1"), ("share", "gpu-2-shared", 4 * GIB, 30)])
    with e.api.store.lock:  # a NIC of another driver in the same claim, with its own status entry
        o = e.api.store.objs["resourceclaims"]["default/st"]
        o["status"]["allocation"]["devices"]["results"].append(
            {"request": "nic", "driver": "nic.example.com", "pool": NODE, "device": "eth0"})
        o["status"]["devices"] = [{"driver": "nic.example.com", "pool": NODE, "device": "eth0",
                                   "data": {"mac": "02:00:00:00:00:01"}}]
    ok(e.kubelet.prepare(c), c[1])
    check(not e.api.store.rejected, "refused: %s" % e.api.store.rejected)
    devs = {d["device"]: d for d in claim_obj(e, c)["status"].get("devices") or []}
    check(sorted(devs) == ["eth0", "gpu-1", "gpu-2-shared"], "status.devices %s" % devs)
    check(devs["eth0"]["data"] == {"mac": "02:00:00:00:00:01"}, "the other driver's entry changed: %s" % devs["eth0"])
    w, sh = devs["gpu-1"], devs["gpu-2-shared"]
    check(w["driver"] == DRIVER and w["pool"] == NODE and "shareID" not in w, "whole entry %s" % w)
    check(w["data"]["uuid"] == g1["uuid"] and w["data"]["pciBusID"] == e.bdf(g1) and w["data"]["index"] == 1,
          "whole data %s" % w["data"])
    share_id = claim_obj(e, c)["status"]["allocation"]["devices"]["results"][1]["shareID"]
    check(sh["shareID"] == share_id, "shareID %s, allocated %s" % (sh.get("shareID"), share_id))
    check(sh["data"]["uuid"] == uuid_of(e, 2) and dra_validation.quantity(sh["data"]["memory"]) == 4 * GIB and
          sh["data"]["cores"] == 30 and sh["data"]["corePolicy"] in ("hard", "elastic"), "share data %s" % sh["data"])
    applies = [p for p in e.api.store.patches if p[0].split("?")[0].endswith("/resourceclaims/st/status")]
    check(applies and "fieldManager=%s" % DRIVER in applies[-1][0], "not applied as the driver: %s" % applies)
    check(e.kubelet.unprepare(c) == {c[1]: ""}, "unprepare")
    devs = [d["device"] for d in claim_obj(e, c)["status"].get("devices") or []]
    check(devs == ["eth0"], "after unprepare: %s" % devs)
    # a claim deleted before its unprepare: nothing to clear, no error
    d = e.claim("gone", [("gpu", "gpu-3")])
    ok(e.kubelet.prepare(d), d[1])
    with e.api.store.lock:
        e.api.store.delete("resourceclaims", "default/gone")
    check(e.kubelet.unprepare(d) == {d[1]: ""}, "unprepare of a deleted claim")
    check("cannot write the claim's device status" not in e.log(), "a status write failed:\n%s" % e.log()[-2000:])


def test_prepare_errors(e):
    up(e)
    foreign = e.claim("foreign", [("gpu", "gpu-0")])
    with e.api.store.lock:
        e.api.store.objs["resourceclaims"]["default/foreign"]["status"]["allocation"]["devices"]["results"][0][
            "pool"] = "other-node"
    checks = [
        (foreign, "not this node's"),
        (e.claim("nodev", [("gpu", "gpu-99")]), "not one of this node's"),
        (e.claim("odd", [("gpu", "tpu-0")]), "not one of this node's"),
        (e.claim("noshare", [("share", "gpu-1-shared")]), "no consumed memory and cores"),
        (e.claim("pending", [("gpu", "gpu-1")], allocated=False), "not allocated"),
        (e.claim("params", [("gpu", "gpu-1")], config=[{"source": "FromClaim", "opaque": {
            "driver": DRIVER, "parameters": {"apiVersion": "gpu.gpuslice.io/v1alpha1", "kind": "GpuConfig",
                                             "corePolicy": "turbo"}}}]), "corePolicy"),
        (e.claim("params2", [("gpu", "gpu-1")], config=[{"source": "FromClass", "opaque": {
            "driver": DRIVER, "parameters": {"apiVersion": "gpu.gpuslice.io/v1alpha1", "kind": "GpuConfig",
                                             "shared": {}}}}]), "unknown field"),
    ]
    stale = e.claim("stale", [("gpu", "gpu-1")])
    checks.append(((stale[0], str(uuid.uuid4()), stale[2]), "kubelet asked for"))
    checks.append((("default", str(uuid.uuid4()), "missing"), "cannot read claim"))
    ans = e.kubelet.prepare(*[c for c, _ in checks])
    for c, want in checks:
        err = ans[c[1]].error
        check(want in err, "claim %s: wanted %r in the error, got %r" % (c[2], want, err))
    e.sim("lose", "2")
    e.wait_pool(lambda d: d["gpu-2"].get("taints"), "gpu-2 tainted")
    sick = e.claim("sick", [("gpu", "gpu-2")])  # a claim tolerating the taint: still refused
    check("unhealthy" in e.kubelet.prepare(sick)[sick[1]].error, "an unhealthy GPU was prepared")
    check(e.cdi_specs() == [] and e.limits_dirs() == [], "a failed prepare left files")
    check(e.status()["dra"]["claims"] == [], "a failed prepare left a record")


def test_prepare_restart(e):
    up(e)
    a = e.claim("a", [("share", "gpu-4-shared", 3 * GIB, 25)])
    w = e.claim("w", [("gpu", "gpu-5")])
    first = e.kubelet.prepare(a, w)
    ok(first, a[1])
    ok(first, w[1])
    e.kill_agent(signal.SIGTERM)
    e.start_agent()
    e.kubelet.restart()
    again = e.kubelet.prepare(a, w)
    for c in (a, w):
        check([list(d.cdi_device_ids) for d in again[c[1]].devices] ==
              [list(d.cdi_device_ids) for d in first[c[1]].devices], "answer changed after a restart")
    check(e.limits(a[1])[uuid_of(e, 4)] == (3 * GIB, 25), "limits after a restart")
    # the held GPU is not offered twice: a new claim for gpu-5 is refused after the restart too
    x = e.claim("x", [("gpu", "gpu-5")])
    check("already prepared" in e.kubelet.prepare(x)[x[1]].error, "gpu-5 prepared twice after a restart")
    # a spec removed behind the driver's back comes back at the next prepare
    os.unlink(os.path.join(e.cdi, "%s-claim_%s.json" % (DRIVER, w[1])))
    ok(e.kubelet.prepare(w), w[1])
    check(os.path.exists(os.path.join(e.cdi, "%s-claim_%s.json" % (DRIVER, w[1]))), "spec not rewritten")
    check(e.kubelet.unprepare(a, w) == {a[1]: "", w[1]: ""}, "unprepare after restart")
    check(e.cdi_specs() == [] and e.limits_dirs() == [], "left behind")


MIG_LAYOUTS = """version: v1
mig-configs:
  balanced:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
"""


def test_prepare_mig(e):
    """A node with MIG GPUs (tests/data/mig/h100-mixed.node): the MIG devices are published as the simulated
    NVML has them, the pool holds together (every consumed counter in it), a MIG claim's spec has exactly the
    instance's three nodes (the minors as mig-minors says), a MIG device and its whole GPU exclude each other
    at prepare, and after a layout change (gpuslice mig apply) a claim for a gone instance is refused and the
    new instances are published."""
    if not e.mig:
        raise Skip("needs a topology with MIG GPUs")
    up(e)
    mig = sim_mig(e)
    names = {mig_name(*k): d for k, d in mig.items()}
    _, slices = e.wait_pool(lambda d: set(names) <= set(d), "the MIG devices")
    check(dra_validation.validate_pool(slices) == [], "pool invalid: %s" % dra_validation.validate_pool(slices))
    check(not e.api.store.rejected, "the stand-in refused slices: %s" % e.api.store.rejected[-1:])
    devs = e.devices()
    migs = sorted(n for n in devs if "-mig-" in n and not n.endswith("-shared"))
    check(migs == sorted(names), "MIG devices %s, NVML has %s" % (migs, sorted(names)))
    check(sorted(n for n in devs if "-mig-" in n and n.endswith("-shared")) == sorted(n + "-shared" for n in names),
          "shared MIG devices")
    for n, d in names.items():
        a = devs[n]["attributes"]
        check(a["type"]["string"] == "mig" and a["uuid"]["string"] == d["uuid"] and
              a["profile"]["string"] == d["profile"], "%s attributes %s" % (n, a))
        check(dra_validation.quantity(devs[n]["capacity"]["memory"]["value"]) == d["memory_total_bytes"], "memory")
    for g in e.topo["gpus"]:
        shared = "gpu-%d-shared" % g["index"] in devs
        check(shared == (g.get("mig_mode") != 1), "GPU %d (MIG %s): shared device %s" % (g["index"], g.get("mig_mode"), shared))
    minors = mig_minors(e)
    (g0, gi, ci) = sorted(k for k in mig if k[0] == 0)[0]
    first = mig_name(g0, gi, ci)
    c = e.claim("mig", [("mig", first)])
    a = ok(e.kubelet.prepare(c), c[1])
    check([d.device_name for d in a.devices] == [first], "devices %s" % a.devices)
    with open(os.path.join(e.cdi, "%s-claim_%s.json" % (DRIVER, c[1]))) as f:
        spec = json.load(f)
    check(len(spec["devices"]) == 1, "spec devices %s" % spec["devices"])
    nodes = spec["devices"][0]["containerEdits"]["deviceNodes"]
    want = ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap%d" % minors["gpu0/gi%d/access" % gi],
            "/dev/nvidia-caps/nvidia-cap%d" % minors["gpu0/gi%d/ci%d/access" % (gi, ci)]]
    check([n["path"] for n in nodes] == want, "nodes %s, wanted %s" % ([n["path"] for n in nodes], want))
    check(all(n["hostPath"].startswith(e.host) for n in nodes), "host paths %s" % nodes)
    check(not e.limits_dirs(), "a MIG claim has no limits dir")
    # inspect shows the MIG claim on its GPU, beside (not as) the GPU's holder
    e.kubelet.wait_for(lambda: (e.api.store.get("nodes", NODE) or {}).get("metadata", {}).get(
        "annotations", {}).get("gpuslice.io/gpus"), 20, "the node annotation")
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "inspect", "--kubeconfig", e.kubeconfig, "--json"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "inspect failed: %s" % r.stderr)
    gpus = json.loads(r.stdout)["nodes"][0]["gpus"]
    check([(x["name"], x["device"], x["mig"], x["whole"]) for x in gpus[0]["claims"]] == [("mig", first, True, False)]
          and gpus[0]["whole_holder"] is None, "inspect GPU 0: %s" % gpus[0])
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "inspect", "--kubeconfig", e.kubeconfig, "-d"],
                       capture_output=True, text=True, timeout=60)
    check("claim default/mig  MIG device %s  [dra: mig]" % first in r.stdout, "inspect -d: %s" % r.stdout)
    # the whole GPU and the same MIG device are refused; another MIG device of the GPU and both compute
    # instances of GPU 1's split GPU instance are not
    whole = e.claim("whole", [("gpu", "gpu-0")])
    check("already prepared" in e.kubelet.prepare(whole)[whole[1]].error, "whole GPU beside its MIG device")
    again = e.claim("again", [("mig", first)])
    check("already prepared" in e.kubelet.prepare(again)[again[1]].error, "one MIG device in two claims")
    split = [mig_name(*k) for k, d in sorted(mig.items()) if k[0] == 1 and d["profile"].count(".") == 2
             and "c." in d["profile"]]
    others = [e.claim("o%d" % i, [("mig", n)]) for i, n in enumerate(split + [mig_name(*sorted(mig)[1])])]
    ans = e.kubelet.prepare(*others)
    for o in others:
        ok(ans, o[1])
    check(len(split) == 2, "GPU 1's split GPU instance: %s" % split)
    check(e.kubelet.unprepare(c, *others) == dict((x[1], "") for x in [c] + others), "unprepare")
    ok(e.kubelet.prepare(whole), whole[1])
    check("already prepared" in e.kubelet.prepare(again)[again[1]].error, "MIG device beside its whole GPU")
    e.kubelet.unprepare(whole)
    # a new layout on GPU 0: the old instances are gone (refused), the new ones published and preparable
    layouts = os.path.join(e.tmp, "layouts.yaml")
    with open(layouts, "w") as f:
        f.write(MIG_LAYOUTS)
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "mig", "apply", "-c", layouts, "-l", "balanced",
                        "--state-dir", os.path.join(e.tmp, "migstate")], env=e.env, capture_output=True, text=True,
                       timeout=60)
    check(r.returncode == 0, "mig apply: %s" % r.stderr)
    e.sim("caps", e.host)
    now = {mig_name(*k): d for k, d in sim_mig(e).items()}
    gone = sorted(n for n in names if n.startswith("gpu-0-") and n not in now or
                  (n in now and now[n]["uuid"] != names[n]["uuid"]))
    check(gone, "the layout change left every instance of GPU 0")
    old = e.claim("old", [("mig", gone[0])])
    err = e.kubelet.prepare(old)[old[1]].error
    check("gone" in err, "a gone instance answered %r" % err)
    e.wait_pool(lambda d: set(now) <= set(d) and not (set(gone) - set(now)) & set(d), "the new layout published")
    new = sorted(n for n in now if n.startswith("gpu-0-"))[-1]
    n = e.claim("new", [("mig", new)])
    ok(e.kubelet.prepare(n), n[1])
    check(e.kubelet.unprepare(n) == {n[1]: ""} and e.cdi_specs() == [], "left behind: %s" % e.cdi_specs())


CRASH_POINTS = ["dra-prepare-journaled", "dra-prepare-limits", "dra-prepare-cdi", "dra-prepare-done",
                "dra-unprepare-journaled", "dra-unprepare-cdi", "dra-unprepare-limits", "dra-unprepare-done"]


def test_prepare_kills(e):
    """20 SIGKILLs of the agent, at every step of prepare and of unprepare in turn (crash points), with whole,
    shared and (on a node with MIG GPUs) MIG claims: after each, a restarted agent holds exactly the claims
    kubelet got an answer for once it retried, no CDI spec or limits dir of any other claim is on disk, every
    limits file equals the claim's consumed capacity, and no device is prepared twice (a whole GPU never beside
    a share or a MIG device of it)."""
    held = {}  # uid -> (claim, gpu, kind, device, cores) of the claims prepared so far

    def pick(i, kind, cores):
        """A device of this kind that the scheduler could allocate now, rotating over the pool."""
        devs = e.devices()
        cands = sorted((d["attributes"].get("parentIndex", d["attributes"].get("index"))["int"], n)
                       for n, d in devs.items() if d["attributes"]["type"]["string"] == kind)
        for k in range(len(cands)):
            gpu, name = cands[(i + k) % len(cands)]
            on = [v for v in held.values() if v[1] == gpu]
            if any(v[2] == "gpu" for v in on) or any(v[3] == name for v in on):
                continue
            if kind == "gpu" and on:
                continue
            if kind == "shared" and sum(v[4] for v in on) + cores > 100:
                continue
            return gpu, name
        raise AssertionError("no %s device left for claim %d" % (kind, i))

    up(e)
    kinds = ["shared", "gpu", "mig"] if e.mig else ["shared", "gpu"]
    kills = mig_kills = 0
    for i in range(20):
        point = CRASH_POINTS[i % len(CRASH_POINTS)]
        unprep = "unprepare" in point and bool(held)
        if "unprepare" in point and not held:
            point = CRASH_POINTS[i % 4]
        e.kill_agent(signal.SIGTERM)
        e.start_agent(crash=point)
        e.kubelet.restart()
        if unprep:
            victim = held[sorted(held)[0]][0]
            call = lambda: e.kubelet.unprepare(victim)  # noqa: E731
        else:
            kind, cores = kinds[i % len(kinds)], 10 + i
            e.wait_pool(lambda d: len(d) > 0, "the pool")
            gpu, dev = pick(i, kind, cores)
            c = e.claim("k%d" % i, [("r", dev, (i % 3 + 1) * GIB, cores)] if kind == "shared" else [("r", dev)])
            call = lambda: e.kubelet.prepare(c)  # noqa: E731
        try:
            call()
            answered = True
        except Exception:  # noqa: B902 — the agent died in the call: kubelet sees UNAVAILABLE
            answered = False
        e.agent.wait(15)
        check(not answered and e.agent.returncode == -signal.SIGKILL,
              "the agent did not die at %s (answered %s, exit %s)" % (point, answered, e.agent.returncode))
        kills += 1
        e.start_agent()
        e.kubelet.restart()
        # kubelet calls again what it got no answer for
        if unprep:
            check(e.kubelet.unprepare(victim) == {victim[1]: ""}, "unprepare retried after %s" % point)
            del held[victim[1]]
        else:
            ok(e.kubelet.prepare(c), c[1])
            held[c[1]] = (c, gpu, kind, dev, cores if kind == "shared" else 0)
            mig_kills += kind == "mig"
        st = e.status()["dra"]["claims"]
        check(sorted(x["uid"] for x in st) == sorted(held) and all(x["state"] == "prepared" for x in st),
              "after %s the driver holds %s, kubelet was answered %s" % (point, st, sorted(held)))
        want_specs = sorted("%s-claim_%s.json" % (DRIVER, u) for u in held)
        check(e.cdi_specs() == want_specs, "after %s: specs %s, wanted %s" % (point, e.cdi_specs(), want_specs))
        want_dirs = sorted("dra-" + u for u, v in held.items() if v[2] == "shared")
        check(e.limits_dirs() == want_dirs, "after %s: limits dirs %s, wanted %s" % (point, e.limits_dirs(), want_dirs))
        whole, parts, cores_on = [], {}, {}
        for x in st:
            for d in x["devices"]:
                gpu = int(d["device"].split("-")[1])
                if d["device"].endswith("-shared"):
                    lim = e.limits(x["uid"])[d["uuid"]]
                    check(lim == (d["memory"], d["cores"]), "limits %s != consumed %s" % (lim, d))
                    cores_on[gpu] = cores_on.get(gpu, 0) + d["cores"]
                elif "-mig-" in d["device"]:
                    parts.setdefault(gpu, []).append(d["device"])
                else:
                    whole.append(gpu)
        migs = [n for v in parts.values() for n in v]
        check(len(whole) == len(set(whole)) and not set(whole) & (set(cores_on) | set(parts)) and
              len(migs) == len(set(migs)), "a device prepared twice: %s" % st)
        check(all(v <= 100 for v in cores_on.values()), "cores past 100 %%: %s" % cores_on)
    check(kills == 20, "%d kills" % kills)
    check(not e.mig or mig_kills >= 3, "only %d kills in a MIG claim's prepare" % mig_kills)
    for uid, v in list(held.items()):
        check(e.kubelet.unprepare(v[0]) == {uid: ""}, "final unprepare")
    check(e.cdi_specs() == [] and e.limits_dirs() == [], "left behind at the end")


# ---- health ----

def test_health(e):
    up(e)
    e.kubelet.watch_health()
    e.kubelet.wait_for(lambda: (e.kubelet.last_health() or {}).get("gpu-2", (0,))[0] == HEALTHY, 10, "gpu-2 healthy")
    h = e.kubelet.last_health()
    check(set(h) == {"gpu-%d" % g["index"] for g in e.topo["gpus"]} |
          {"gpu-%d-shared" % g["index"] for g in e.topo["gpus"]}, "health lists %s" % sorted(h))
    e.sim("xid", "2", "79")
    e.kubelet.wait_for(lambda: e.kubelet.last_health()["gpu-2"][0] == UNHEALTHY, agent_fixture.REACT_S,
                       "gpu-2 unhealthy on the stream")
    check("79" in e.kubelet.last_health()["gpu-2"][1], "message %r" % (e.kubelet.last_health()["gpu-2"],))
    check(e.kubelet.last_health()["gpu-1"][0] == HEALTHY, "another GPU's health changed")
    # the v1 stream (kubelet 1.37+) says the same
    k2 = kubelet_standin.DraKubelet(e.stubs, e.registry, health="v1")
    try:
        k2.register()
        k2.watch_health()
        k2.wait_for(lambda: (k2.last_health() or {}).get("gpu-2", (0,))[0] == UNHEALTHY, 10, "v1 stream")
    finally:
        k2.close()


# ---- beside the device plugin ----

def test_coexist(e):
    """--dra --dra-device-plugin: one table, two drivers; a GPU one holds is never the other's."""
    up(e, "--dra-device-plugin")
    e.dp_kubelet.wait_for(lambda: len(e.dp_kubelet.registrations) >= 1, 10, "device plugin registered")
    e.dp_kubelet.wait_for(lambda: len(e.dp_kubelet.law) > 0, 10, "ListAndWatch")
    ids = [d.ID for d in e.dp_kubelet.law[-1][2].devices]
    stub = e.dp_kubelet.plugin_stub()[0]
    pb = e.stubs["deviceplugin_pb2"]
    req = pb.AllocateRequest()
    req.container_requests.add(devices_ids=[ids[0]])
    stub.Allocate(req, timeout=5)
    e.wait_pool(lambda d: "gpu-0" not in d and "gpu-1" in d, "gpu-0 (device plugin) withdrawn from the pool")
    c = e.claim("dp", [("gpu", "gpu-0")])
    check("device plugin" in e.kubelet.prepare(c)[c[1]].error, "DRA prepared a GPU the device plugin holds")
    d = e.claim("dra", [("gpu", "gpu-1")])
    ok(e.kubelet.prepare(d), d[1])
    e.dp_kubelet.wait_for(lambda: dict((x.ID, x.health) for x in e.dp_kubelet.law[-1][2].devices).get(ids[1]) ==
                          "Unhealthy", 10, "the DRA-held GPU listed Unhealthy to the device plugin's kubelet")
    req = pb.AllocateRequest()
    req.container_requests.add(devices_ids=[ids[1]])
    e.dp_kubelet.plugin_stub()  # a fresh channel
    try:
        stub.Allocate(req, timeout=5)
        raise AssertionError("the device plugin handed out a GPU a DRA claim holds")
    except Exception as x:  # noqa: B902
        check("INVALID_ARGUMENT" in str(x) or "held" in str(x), "unexpected %s" % x)
    e.kubelet.unprepare(d)
    e.dp_kubelet.wait_for(lambda: dict((x.ID, x.health) for x in e.dp_kubelet.law[-1][2].devices).get(ids[1]) ==
                          "Healthy", 10, "released to the device plugin")


def test_prepare_mig_shared(e):
    """Fractions of a MIG device through DRA: its shared twin gpu-<i>-mig-<gi>-<ci>-shared (consumable memory of
    the instance, cores) serves two claims with their own limits (the limits file's line is the MIG UUID, the
    CDI device has the instance's nodes and the interposer's mounts); a share past the instance, and the MIG
    device whole while shared, are refused; after the unprepare the MIG device is one claim's again."""
    if not e.mig:
        raise Skip("needs a topology with MIG GPUs")
    up(e)
    mig = sim_mig(e)
    (g0, gi, ci) = sorted(k for k in mig if k[0] == 0)[0]
    md, name = mig[(g0, gi, ci)], mig_name(g0, gi, ci)
    _, slices = e.wait_pool(lambda d: name + "-shared" in d, "the shared MIG device")
    check(dra_validation.validate_pool(slices) == [] and not e.api.store.rejected,
          "pool invalid: %s %s" % (dra_validation.validate_pool(slices), e.api.store.rejected[-1:]))
    dev = e.devices()[name + "-shared"]
    check(dev["attributes"]["type"]["string"] == "mig-shared" and dev["attributes"]["uuid"]["string"] == md["uuid"] and
          dev.get("allowMultipleAllocations") is True and
          dra_validation.quantity(dev["capacity"]["memory"]["value"]) == md["memory_total_bytes"], "device %s" % dev)
    a = e.claim("ma", [("share", name + "-shared", 2 * GIB, 50)])
    b = e.claim("mb", [("share", name + "-shared", 3 * GIB, 30)])
    ans = e.kubelet.prepare(a, b)
    ok(ans, a[1])
    ok(ans, b[1])
    check(e.limits(a[1]) == {md["uuid"]: (2 * GIB, 50), "policy": e.limits(a[1])["policy"]},
          "claim a limits %s" % e.limits(a[1]))
    check(e.limits(b[1])[md["uuid"]] == (3 * GIB, 30), "claim b limits %s" % e.limits(b[1]))
    with open(os.path.join(e.cdi, "%s-claim_%s.json" % (DRIVER, a[1]))) as f:
        spec = json.load(f)
    nodes = sorted(n["path"] for d in spec["devices"] for n in d["containerEdits"].get("deviceNodes") or [])
    check(len([n for n in nodes if "nvidia-cap" in n]) == 2, "capability nodes %s" % nodes)
    mounts = {m["containerPath"] for m in spec["containerEdits"]["mounts"]}
    check("/run/gpuslice/limits" in mounts, "no limits mount: %s" % mounts)
    big = e.claim("mbig", [("share", name + "-shared", 1 * GIB, 30)])
    check("exceed" in e.kubelet.prepare(big)[big[1]].error, "cores past 100 %% of a MIG device prepared")
    toomuch = e.claim("mmem", [("share", name + "-shared", md["memory_total_bytes"] + GIB, 10)])
    check("out of range" in e.kubelet.prepare(toomuch)[toomuch[1]].error, "more memory than the instance's")
    whole = e.claim("mwhole", [("mig", name)])
    check("already prepared" in e.kubelet.prepare(whole)[whole[1]].error, "the MIG device prepared beside its shares")
    gpu = e.claim("mgpu", [("gpu", "gpu-%d" % g0)])
    check("already prepared" in e.kubelet.prepare(gpu)[gpu[1]].error, "the whole GPU prepared beside MIG shares")
    st = {d["device"]: d for d in claim_obj(e, a)["status"]["devices"]}
    check(st[name + "-shared"]["data"]["uuid"] == md["uuid"] and st[name + "-shared"]["data"]["cores"] == 50,
          "status.devices %s" % st)
    check(e.kubelet.unprepare(a, b) == {a[1]: "", b[1]: ""}, "unprepare")
    check(e.limits_dirs() == [] and e.cdi_specs() == [], "left behind")
    ok(e.kubelet.prepare(whole), whole[1])


def test_coexist_mig(e):
    """--dra-device-plugin with --mig-strategy mixed: a MIG device the device plugin hands out takes its whole GPU
    out of DRA's reach (a claim of the GPU would take the container's instance), its other GPUs stay DRA's."""
    if not e.mig:
        raise Skip("needs a topology with MIG GPUs")
    up(e, "--dra-device-plugin", "--mig-strategy", "mixed")
    e.dp_kubelet.wait_for(lambda: any(r.request.resource_name.startswith("nvidia.com/mig-")
                                      for r in e.dp_kubelet.registrations), 10, "a MIG resource registered")
    mig = sim_mig(e)
    (g0, gi, ci) = sorted(k for k in mig if k[0] == 0)[0]
    reg = next(r for r in e.dp_kubelet.registrations
               if r.request.resource_name == "nvidia.com/mig-" + mig[(g0, gi, ci)]["profile"].replace("+", "."))
    endpoint = reg.request.endpoint
    e.dp_kubelet.wait_for(lambda: any(x[1] == endpoint for x in e.dp_kubelet.law), 10, "ListAndWatch of the MIG resource")
    stub = e.dp_kubelet.plugin_stub(endpoint)[0]
    req = e.stubs["deviceplugin_pb2"].AllocateRequest()
    req.container_requests.add(devices_ids=[mig[(g0, gi, ci)]["uuid"]])
    stub.Allocate(req, timeout=5)
    whole = [g["index"] for g in e.topo["gpus"] if g.get("mig_mode") != 1]
    c = e.claim("dp-mig", [("gpu", "gpu-%d" % g0)])
    check("device plugin" in e.kubelet.prepare(c)[c[1]].error,
          "DRA prepared GPU %d while the device plugin holds one of its MIG devices" % g0)
    if whole:
        d = e.claim("dra", [("gpu", "gpu-%d" % whole[0])])
        ok(e.kubelet.prepare(d), d[1])


def test_inspect(e):
    """`gpuslice inspect` shows the claims of the driver beside the pods, on their GPUs."""
    up(e)
    w = e.claim("train", [("gpu", "gpu-2")], ns="ml")
    sh = e.claim("notebook", [("share", "gpu-3-shared", 6 * GIB, 40)], ns="ml")
    with e.api.store.lock:
        o = e.api.store.objs["resourceclaims"]["ml/train"]
        o["status"]["reservedFor"] = [{"resource": "pods", "name": "trainer-0", "uid": str(uuid.uuid4())}]
    ans = e.kubelet.prepare(w, sh)
    ok(ans, w[1])
    ok(ans, sh[1])
    e.kubelet.wait_for(lambda: (e.api.store.get("nodes", NODE) or {}).get("metadata", {}).get(
        "annotations", {}).get("gpuslice.io/gpus"), 20, "the node annotation")

    def inspect(*argv):
        r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "inspect", "--kubeconfig", e.kubeconfig] +
                           list(argv), capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "inspect failed: %s" % r.stderr)
        return r.stdout
    j = json.loads(inspect("--json"))
    gpus = j["nodes"][0]["gpus"]
    check(gpus[2]["claims"] == [{"namespace": "ml", "name": "train", "request": "gpu", "device": "gpu-2", "whole": True,
                                 "mig": False, "memory_mib": 0, "core_percent": 0, "reserved_for": "ml/trainer-0"}],
          "gpu 2: %s" % gpus[2]["claims"])
    check(gpus[3]["claims"][0]["memory_mib"] == 6 * 1024 and gpus[3]["claims"][0]["core_percent"] == 40 and
          not gpus[3]["claims"][0]["whole"], "gpu 3: %s" % gpus[3]["claims"])
    check(all(g["claims"] == [] for i, g in enumerate(gpus) if i not in (2, 3)), "claims elsewhere")
    table = inspect()
    row = [x for x in table.splitlines() if x.split()[:1] == ["2"] or " 2    " in x[24:30]][0]
    check("claim ml/train" in row and "(+1 DRA claim)" in row, "table row %r" % row)
    d = inspect("-d")
    check("claim ml/notebook  memory 6144 MiB  core 40%  [dra: share]" in d and
          "claim ml/train  whole GPU  [dra: gpu, pods ml/trainer-0]" in d, d)



# ---- the sharing modes as opaque configuration (NVIDIA's GpuConfig.sharing, docs/dra.md "Sharing modes") ----

OOM = 3  # gpuslice-sim-workload's exit code for out of memory


def sharing_config(sharing, api="resource.nvidia.com/v1beta1", requests=None):
    return [{"source": "FromClaim", "requests": requests or [],
             "opaque": {"driver": DRIVER, "parameters": {"apiVersion": api, "kind": "GpuConfig", "sharing": sharing}}}]


def example_config(e, name):
    """The opaque config of a ResourceClaimTemplate of deploy/dra/examples/sharing.yaml, as the allocation has it."""
    with open(os.path.join(e.args.source, "deploy", "dra", "examples", "sharing.yaml")) as f:
        t = next(x for x in yaml.safe_load_all(f) if x and x["kind"] == "ResourceClaimTemplate" and
                 x["metadata"]["name"] == name)
    return [dict(c, source="FromClaim") for c in t["spec"]["spec"]["devices"]["config"]]


def claim_spec(e, uid):
    with open(os.path.join(e.cdi, "%s-claim_%s.json" % (DRIVER, uid))) as f:
        return json.load(f)


def mps_dir(e, uid):
    return os.path.join(e.state_dir, "dra-mps", uid)


def alive(pid):
    """Running (not a zombie its parent has not reaped yet)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def mps_state(e, uid, want, timeout=10, not_pid=None):
    """The simulated daemon's state (sim/mps.h) once it has `want` in it and its daemon runs; its pid."""
    path = os.path.join(mps_dir(e, uid), "pipe", "gpuslice-sim-mps")
    end, text = time.monotonic() + timeout, ""
    while time.monotonic() < end:
        try:
            with open(path) as f:
                text = f.read()
        except FileNotFoundError:
            text = ""
        if all(w in text for w in want):
            pid = int(next(x.split()[1] for x in text.splitlines() if x.startswith("pid ")))
            if pid != not_pid and alive(pid):
                return pid
        time.sleep(0.05)
    raise AssertionError("MPS daemon state %r never had %s" % (text, want))


def check_daemon_shm(pid, shm):
    """The daemon's /dev/shm is the claim's shm dir, a tmpfs in the daemon's own mount namespace (the device plugin's
    daemon's, test_timeslice.py): a file made there is in the daemon's /dev/shm, and not in the agent's."""
    check(os.stat(shm).st_dev != os.stat(os.path.dirname(shm)).st_dev, "%s is not a mount point" % shm)
    with open("/proc/self/mountinfo") as f:
        check(any(line.split()[4] == shm and " - tmpfs " in line for line in f), "%s is no tmpfs" % shm)
    mark = "gpuslice-test-%d" % os.getpid()
    with open(os.path.join(shm, mark), "w"):
        pass
    try:
        check(os.path.exists("/proc/%d/root/dev/shm/%s" % (pid, mark)), "the daemon's /dev/shm is not %s" % shm)
        check(not os.path.exists("/dev/shm/" + mark), "the host's /dev/shm is the shm dir")
    finally:
        os.unlink(os.path.join(shm, mark))


def test_prepare_timeslice(e):
    up(e)
    ts = e.claim("ts", [("gpu", "gpu-2")], config=example_config(e, "timesliced-gpu"))
    a = ok(e.kubelet.prepare(ts), ts[1])
    check([d.device_name for d in a.devices] == ["gpu-2"], "devices %s" % a.devices)
    env = claim_spec(e, ts[1])["containerEdits"].get("env") or []
    check(not any(x.startswith("CUDA_MPS") for x in env), "a time-sliced claim got MPS env: %s" % env)
    claims = {c["uid"]: c for c in e.status()["dra"]["claims"]}
    check(claims[ts[1]].get("sharing") == "TimeSlicing", "status %s" % claims)
    # the pods of the claim share its GPU (reservedFor); another claim for it is still refused
    other = e.claim("other", [("gpu", "gpu-2")])
    check("already prepared" in e.kubelet.prepare(other)[other[1]].error, "a time-sliced GPU given to a second claim")
    # an interval NVML cannot set: refused naming the key, nothing left of it
    short = e.claim("short", [("gpu", "gpu-3")], config=sharing_config(
        {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}))
    err = e.kubelet.prepare(short)[short[1]].error
    check("timeSlicingConfig.interval: Short cannot be applied" in err, "interval Short answered %r" % err)
    check(e.cdi_specs() == ["%s-claim_%s.json" % (DRIVER, ts[1])], "specs %s" % e.cdi_specs())
    plain = e.claim("plain", [("gpu", "gpu-3")])
    ok(e.kubelet.prepare(plain), plain[1])  # gpu-3 was not held by the refused claim
    check(e.kubelet.unprepare(ts, plain) == {ts[1]: "", plain[1]: ""}, "unprepare")
    check(e.cdi_specs() == [], "left behind: %s" % e.cdi_specs())


def test_prepare_mps(e):
    real_ctl = os.path.join(e.args.build, "sim", "nvidia-cuda-mps-control")
    broken = os.path.join(e.tmp, "mps-control-broken")  # while it exists the program fails: no daemon starts
    ctl = os.path.join(e.tmp, "mps-control")
    slow = os.path.join(e.tmp, "mps-control-slow")  # while it exists the daemon takes 3 s to start serving
    with open(ctl, "w") as f:
        f.write("#!/bin/sh\n[ -e '%s' ] && exit 1\n[ -e '%s' ] && [ \"$1\" = -f ] && sleep 3\nexec '%s' \"$@\"\n" %
                (broken, slow, real_ctl))
    os.chmod(ctl, 0o755)
    work = os.path.join(e.args.build, "sim", "gpuslice-sim-workload")
    up(e, "--mps-control", ctl)
    g1 = uuid_of(e, 1)
    c = e.claim("mps", [("gpus", "gpu-0"), ("gpus", "gpu-1")], config=sharing_config(
        {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50, "defaultPinnedDeviceMemoryLimit": "2Gi",
                                          "defaultPerDevicePinnedMemoryLimit": {g1: "1Gi"}}}))
    ok(e.kubelet.prepare(c), c[1])
    pid = mps_state(e, c[1], ["thread-percentage 50", "pinned 0 2147483648", "pinned 1 1073741824"])
    edits = claim_spec(e, c[1])["containerEdits"]
    env = edits["env"]
    for want in ("CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50",
                 "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M,1=1024M"):
        check(want in env, "%s not in the spec's env %s" % (want, env))
    # the device plugin's MPS client edits (util/mps-client.h): the pipe dir and the daemon's shm tmpfs at /dev/shm
    mounts = {m["containerPath"]: (m["hostPath"], m["options"]) for m in edits["mounts"]}
    rw = ["nosuid", "nodev", "bind"]
    shm = os.path.join(mps_dir(e, c[1]), "shm")
    check(mounts == {"/tmp/nvidia-mps": (os.path.join(mps_dir(e, c[1]), "pipe"), rw), "/dev/shm": (shm, rw)},
          "mounts %s" % mounts)
    mounts = {k: v[0] for k, v in mounts.items()}
    check_daemon_shm(pid, shm)

    def client(gpu, mem):
        """A container's process: the spec's env, its pipe dir where the bind mount puts the host's."""
        cenv = dict(e.env)
        cenv.update(x.split("=", 1) for x in env)
        cenv["CUDA_MPS_PIPE_DIRECTORY"] = mounts["/tmp/nvidia-mps"]
        return subprocess.run([work, "--gpu", str(gpu), "--mem", mem, "--seconds", "0"], env=cenv,
                              capture_output=True, text=True, timeout=20).returncode

    check(client(0, "1536M") == 0, "1.5 GiB under GPU 0's 2 GiB pinned limit")
    check(client(0, "3G") == OOM, "3 GiB past GPU 0's 2 GiB pinned limit must be out of memory")
    check(client(1, "1536M") == OOM, "1.5 GiB past GPU 1's 1 GiB pinned limit must be out of memory")
    # the daemon killed: the agent starts it again, configured again
    os.kill(pid, signal.SIGKILL)
    pid2 = mps_state(e, c[1], ["thread-percentage 50", "pinned 1 1073741824"], timeout=15, not_pid=pid)
    check(client(0, "3G") == OOM, "the restarted daemon does not limit")
    check_daemon_shm(pid2, shm)  # the restarted daemon too
    # a daemon that cannot be started again: the claim's GPUs unhealthy (tainted) until it serves
    open(broken, "w").close()
    os.kill(pid2, signal.SIGKILL)
    e.wait_pool(lambda d: d["gpu-0"].get("taints") and d["gpu-1"].get("taints") and not d["gpu-2"].get("taints"),
                "the claim's GPUs tainted while its daemon is down", timeout=15)
    os.unlink(broken)
    e.wait_pool(lambda d: not d["gpu-0"].get("taints") and not d["gpu-1"].get("taints"),
                "the taints gone once the daemon serves again", timeout=15)
    pid2 = mps_state(e, c[1], ["thread-percentage 50", "pinned 1 1073741824"], not_pid=pid2)
    # the agent SIGKILLed: the next one quits the daemon it left and starts its own for the prepared claim
    e.kill_agent(signal.SIGKILL)
    e.start_agent("--mps-control", ctl)
    e.kubelet.restart()
    mps_state(e, c[1], ["pinned 0 2147483648"], timeout=15, not_pid=pid2)
    end = time.monotonic() + 5
    while time.monotonic() < end and alive(pid2):
        time.sleep(0.05)
    check(not alive(pid2), "the old agent's daemon still runs")
    check(client(0, "3G") == OOM, "after the agent's restart the claim is not limited")
    check_daemon_shm(mps_state(e, c[1], ["pinned 0 2147483648"]), shm)  # the tmpfs kept, the new daemon's /dev/shm
    check(e.kubelet.unprepare(c) == {c[1]: ""}, "unprepare")
    with open("/proc/self/mountinfo") as f:
        check(not any(line.split()[4] == shm for line in f), "the claim's shm tmpfs is still mounted")
    check(not os.path.exists(mps_dir(e, c[1])) and e.cdi_specs() == [], "MPS dir or spec left: %s" %
          os.listdir(os.path.join(e.state_dir, "dra-mps")))
    check(client(0, "3G") == 0, "the daemon still limits after the unprepare")
    # the example of deploy/dra/examples/sharing.yaml: 50 % and 4 GiB
    x = e.claim("example", [("gpu", "gpu-4")], config=example_config(e, "mps-gpu"))
    ok(e.kubelet.prepare(x), x[1])
    mps_state(e, x[1], ["thread-percentage 50", "pinned 4 4294967296"])
    check("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M" in claim_spec(e, x[1])["containerEdits"]["env"], "example env")
    check(e.kubelet.unprepare(x) == {x[1]: ""}, "unprepare the example")
    # the daemon starts without the driver's lock: while it takes 3 s, the driver's state answers at once, the claim
    # journaled as preparing
    open(slow, "w").close()
    w = e.claim("slow", [("gpu", "gpu-4")], config=sharing_config({"strategy": "MPS"}))
    answers = []
    t = threading.Thread(target=lambda: answers.append(e.kubelet.prepare(w)))
    t.start()
    end, seen = time.monotonic() + 10, None
    while time.monotonic() < end and seen is None:
        t0 = time.monotonic()
        claims = {x["uid"]: x for x in e.status()["dra"]["claims"]}
        took = time.monotonic() - t0
        if w[1] in claims:
            seen = (claims[w[1]]["state"], took)
        time.sleep(0.05)
    t.join(30)
    os.unlink(slow)
    check(seen is not None and seen[0] == "preparing" and seen[1] < 1.5,
          "the driver's state while the daemon started: %s (state, seconds)" % (seen,))
    ok(answers[0], w[1])
    mps_state(e, w[1], ["thread-percentage 100"])
    check(e.kubelet.unprepare(w) == {w[1]: ""}, "unprepare the slow one")
    # killed between the daemon's start and the CDI spec: the next agent rolls the claim back, daemon included
    e.kill_agent(signal.SIGTERM)
    e.start_agent("--mps-control", ctl, crash="dra-prepare-cdi:1")
    e.kubelet.restart()
    e.wait_pool(lambda d: len(d) > 0, "the pool")
    k = e.claim("killed", [("gpus", "gpu-3")], config=sharing_config({"strategy": "MPS"}))
    try:
        e.kubelet.prepare(k)
        answered = True
    except Exception:  # noqa: B902 — the agent died in the call: kubelet sees UNAVAILABLE
        answered = False
    e.agent.wait(15)
    check(not answered and e.agent.returncode == -signal.SIGKILL, "the agent did not die at dra-prepare-cdi")
    orphan = mps_state(e, k[1], ["thread-percentage 100"])  # the daemon outlived its agent
    e.start_agent("--mps-control", ctl)
    e.kubelet.restart()
    end = time.monotonic() + 10
    while time.monotonic() < end and (alive(orphan) or os.path.exists(mps_dir(e, k[1]))):
        time.sleep(0.05)
    check(not alive(orphan) and not os.path.exists(mps_dir(e, k[1])), "the rolled-back claim's daemon or dir stayed")
    check(e.status()["dra"]["claims"] == [] and e.cdi_specs() == [], "the rolled-back claim stayed")
    ok(e.kubelet.prepare(k), k[1])  # kubelet prepares again: now whole
    mps_state(e, k[1], ["thread-percentage 100"], not_pid=orphan)
    check(e.kubelet.unprepare(k) == {k[1]: ""}, "unprepare")


def test_prepare_sharing_errors(e):
    up(e)  # the default nvidia-cuda-mps-control is not on this PATH: an MPS claim's daemon cannot start
    mps = lambda cfg: {"strategy": "MPS", "mpsConfig": cfg}  # noqa: E731
    checks = [
        (e.claim("key", [("gpu", "gpu-1")], config=sharing_config(mps({"pinnedLimit": "1Gi"}))),
         'mpsConfig: unknown field "pinnedLimit"'),
        (e.claim("strategy", [("gpu", "gpu-1")], config=sharing_config({"strategy": "Exclusive"})),
         'sharing.strategy: "Exclusive"'),
        (e.claim("pct", [("gpu", "gpu-1")], config=sharing_config(mps({"defaultActiveThreadPercentage": 150}))),
         "defaultActiveThreadPercentage: not an integer 1..100"),
        (e.claim("dev", [("gpu", "gpu-1")], config=sharing_config(mps({"defaultPerDevicePinnedMemoryLimit":
                                                                         {"7": "1Gi"}}))),
         "defaultPerDevicePinnedMemoryLimit.7: not a GPU of this claim"),
        (e.claim("big", [("gpu", "gpu-1")], config=sharing_config(mps({"defaultPinnedDeviceMemoryLimit": "64Ti"}))),
         "is more than its"),
        (e.claim("share", [("share", "gpu-1-shared", 2 * GIB, 20)], config=sharing_config(mps({}))),
         "applies to whole GPUs"),
        (e.claim("ours", [("gpu", "gpu-1")], config=sharing_config(mps({}), api="gpu.gpuslice.io/v1alpha1") +
                 sharing_config({"strategy": "TimeSlicing"}, requests=["other"])), "did not start"),
        (e.claim("nodaemon", [("gpu", "gpu-1")], config=sharing_config(mps({"defaultActiveThreadPercentage": 10}))),
         "MPS control daemon: "),
    ]
    ans = e.kubelet.prepare(*[c for c, _ in checks])
    for c, want in checks:
        err = ans[c[1]].error
        check(want in err, "claim %s: wanted %r in the error, got %r" % (c[2], want, err))
    check(e.cdi_specs() == [] and e.limits_dirs() == [], "a refused claim left files")
    mroot = os.path.join(e.state_dir, "dra-mps")
    check(not os.path.isdir(mroot) or os.listdir(mroot) == [], "a refused claim left its MPS dir")
    check(e.status()["dra"]["claims"] == [], "a refused claim left a record")
    after = e.claim("after", [("gpu", "gpu-1")])
    ok(e.kubelet.prepare(after), after[1])  # gpu-1 is free: nothing half-prepared held it

TESTS = {
    "register": test_register,
    "slices": test_slices,
    "slices-writes": test_slices_writes,
    "recorded": test_recorded,
    "extended": test_extended,
    "slices-v1beta1": test_slices_v1beta1,
    "slices-gates": test_slices_gates,
    "prepare-whole": test_prepare_whole,
    "prepare-shared": test_prepare_shared,
    "prepare-errors": test_prepare_errors,
    "claim-status": test_claim_status,
    "prepare-restart": test_prepare_restart,
    "prepare-mig": test_prepare_mig,
    "prepare-mig-shared": test_prepare_mig_shared,
    "prepare-kills": test_prepare_kills,
    "health": test_health,
    "coexist": test_coexist,
    "coexist-mig": test_coexist_mig,
    "inspect": test_inspect,
    "prepare-timeslice": test_prepare_timeslice,
    "prepare-mps": test_prepare_mps,
    "prepare-sharing-errors": test_prepare_sharing_errors,
}

if __name__ == "__main__":
    agent_fixture.run_main(TESTS, make_env=lambda a, s: DraEnv(a, s), label="dra-", timeout_s=240)
