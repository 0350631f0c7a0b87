#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Kubernetes client tests against the API stand-in (kube_standin.py): the informer (through
kube-informer-probe) recovering from a watch cut mid-event, 410, 429/500 bursts and a hung
response; paged LIST with an expired continue token; three `gpuslice node` agents on simulated
nodes publishing their labels and annotation, recovering from failed patches, cut watches and
compaction; `gpuslice inspect` (table, --json, -d, --node, kubectl-gpuslice) and its errors.

Usage: test_kube.py --build DIR --source DIR TEST
"""
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kube_standin  # noqa: E402
from agent_fixture import free_port, scrape  # noqa: E402
import runner  # noqa: E402  (tests/runner.py, on the path through agent_fixture)

TOPOS = {"gpu-a": "dgx1-v100-hybrid-cube-mesh.topo", "gpu-b": "dgx-a100-nvswitch.topo",
         "gpu-c": "pcie-8gpu-pix-phb-sys.topo"}
MANAGED_NVIDIA = {"nvidia-gpu-name"}


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out after %ds waiting for %s" % (timeout, what))


class Probe:
    def __init__(self, env, *args):
        self.lines = []
        self.q = queue.Queue()
        self.p = subprocess.Popen([os.path.join(env.args.build, "kube-informer-probe"), "--kubeconfig",
                                   env.kubeconfig] + list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.t = threading.Thread(target=self.read, daemon=True)
        self.t.start()

    def read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def stats(self):
        for line in reversed(self.lines):
            if line.startswith("STATS "):
                kv = dict(x.split("=", 1) for x in line.split(" ")[1:7])
                return {k: int(v) for k, v in kv.items()}
        return {}

    def has(self, prefix):
        return any(line.startswith(prefix) for line in self.lines)

    def wait(self, prefix, timeout=30):
        wait_for(lambda: self.has(prefix), timeout, "probe line '%s' (have: %s)" % (prefix, self.lines[-8:]))

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(20)
        except Exception:
            self.p.kill()
        return self.p.returncode


class Env:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="gpuslice-kube-")
        self.api = kube_standin.StandIn().start()
        self.kubeconfig = self.api.kubeconfig(os.path.join(self.tmp, "kubeconfig"))
        self.agents = {}
        self.procs = []

    def pod(self, ns, name, node, limits, annotations=None, phase="Running"):
        spec = {"containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits}}]}
        if node:
            spec["nodeName"] = node
        return self.api.store.put("pods", {"apiVersion": "v1", "kind": "Pod",
                                           "metadata": {"namespace": ns, "name": name,
                                                        "annotations": annotations or {}},
                                           "spec": spec, "status": {"phase": phase}})

    def node(self, name, labels=None):
        return self.api.store.put("nodes", {"apiVersion": "v1", "kind": "Node",
                                            "metadata": {"name": name, "labels": labels or {}},
                                            "status": {"capacity": {"cpu": "64"}}})

    def start_agent(self, name, node_name_env=None, extra=()):
        """The agent of simulated node `name`; NODE_NAME is `name` unless node_name_env says otherwise
        (None: `name`). extra: more flags."""
        d = os.path.join(self.tmp, name)
        os.makedirs(os.path.join(d, "plugins"), exist_ok=True)
        os.makedirs(os.path.join(d, "host", "dev"), exist_ok=True)
        for n in ["nvidia%d" % i for i in range(8)] + ["nvidiactl", "nvidia-uvm"]:
            open(os.path.join(d, "host", "dev", n), "w").close()
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.path.join(self.args.build, "sim")
        env["GPUSLICE_SIM_NODE"] = os.path.join(self.args.source, "tests", "data", "kube", TOPOS[name])
        env["GPUSLICE_SIM_STATE"] = os.path.join(d, "sim.state")
        env["NODE_NAME"] = name if node_name_env is None else node_name_env
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self.sim(name, "reset")
        log = open(os.path.join(d, "agent.log"), "w")
        p = subprocess.Popen([os.path.join(self.args.build, "gpuslice"), "node", "--plugin-dir",
                              os.path.join(d, "plugins"), "--state-dir", os.path.join(d, "state"),
                              "--pod-resources-socket", os.path.join(d, "podres.sock"), "--dev-root",
                              os.path.join(d, "host"), "--health-quiet-period", "2s", "--metrics-address=",
                              "--log-level", "debug", "--kubeconfig", self.kubeconfig] + list(extra),
                             env=env, stdout=subprocess.DEVNULL, stderr=log)
        self.agents[name] = (p, env, os.path.join(d, "agent.log"))
        return p

    def sim(self, name, *argv):
        env = dict(os.environ)
        env["GPUSLICE_SIM_NODE"] = os.path.join(self.args.source, "tests", "data", "kube", TOPOS[name])
        env["GPUSLICE_SIM_STATE"] = os.path.join(self.tmp, name, "sim.state")
        r = subprocess.run([os.path.join(self.args.build, "sim", "gpuslice-sim")] + list(argv), env=env,
                           capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise AssertionError("gpuslice-sim %s failed: %s" % (" ".join(argv), r.stderr))

    def annotation(self, name):
        o = self.api.store.get("nodes", name)
        a = (o or {}).get("metadata", {}).get("annotations", {}).get("gpuslice.io/gpus")
        return json.loads(a) if a else None

    def labels(self, name):
        return (self.api.store.get("nodes", name) or {}).get("metadata", {}).get("labels", {})

    def inspect(self, *argv, exe="gpuslice", rc=0):
        r = subprocess.run([os.path.join(self.args.build, exe), "inspect"] + list(argv), capture_output=True,
                           text=True, timeout=60)
        if r.returncode != rc:
            raise AssertionError("inspect %s: exit %d (want %d): %s%s" % (argv, r.returncode, rc, r.stdout, r.stderr))
        return r

    def close(self, failed):
        for p, _, log in self.agents.values():
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
            if failed:
                sys.stderr.write("---- %s ----\n%s\n" % (log, open(log).read()[-4000:]))
        if not failed and any(p.returncode not in (0, -15) for p, _, _ in self.agents.values()):
            raise AssertionError("an agent exited with %s" % [p.returncode for p, _, _ in self.agents.values()])
        self.api.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---- informer ----

def test_informer_cut(e):
    e.pod("d", "p1", "n1", {"nvidia.com/gpu": "1"})
    pr = Probe(e, "--backoff-ms", "100")
    try:
        pr.wait("SYNC")
        pr.wait("ADD d/p1")
        wait_for(lambda: pr.stats().get("watches", 0) >= 1, 10, "a watch")
        e.api.store.cut_next_watch = 1
        e.pod("d", "p2", "n1", {"nvidia.com/gpu": "1"})  # delivered half, then the stream drops
        e.pod("d", "p3", "n1", {"nvidia.com/gpu": "1"})
        pr.wait("ADD d/p2")
        pr.wait("ADD d/p3")
        assert e.api.store.cut_next_watch == 0, "the stream was not cut"
        assert pr.stats()["lists"] == 1, "a cut stream must resume from its version, not relist: %s" % pr.stats()
        assert sum(1 for line in pr.lines if line.startswith("ADD d/p2")) == 1, pr.lines
        # a delete and a modification after the reconnect
        e.api.store.delete("pods", "d/p1")
        pr.wait("DEL d/p1")
        assert pr.close() == 0
    finally:
        pr.close()


def test_informer_410(e):
    e.pod("d", "p1", "n1", {"nvidia.com/gpu": "1"})
    pr = Probe(e, "--backoff-ms", "100")
    try:
        pr.wait("SYNC")
        wait_for(lambda: pr.stats().get("watches", 0) >= 1, 10, "a watch")
        # compaction while watching: an ERROR 410 event in the stream, then a relist
        e.api.store.compact()
        e.pod("d", "p2", "n1", {"nvidia.com/gpu": "1"})
        pr.wait("ADD d/p2")
        wait_for(lambda: pr.stats().get("relists410", 0) >= 1 and pr.stats().get("lists", 0) >= 2, 10,
                 "a relist after 410")
        # an object deleted while the history was gone is noticed by the relist
        e.api.store.gone_next_watch = 1
        e.api.store.compact()
        with e.api.store.lock:
            del e.api.store.objs["pods"]["d/p1"]  # gone without an event anybody could see
        e.pod("d", "p3", "n1", {"nvidia.com/gpu": "1"})
        pr.wait("DEL d/p1", 20)
        pr.wait("ADD d/p3", 20)
    finally:
        pr.close()


def test_informer_burst(e):
    e.pod("d", "p1", "n1", {"nvidia.com/gpu": "1"})
    # the first list fails: 5 x 500 then 3 x 429
    e.api.store.fail.append([None, "/api/v1/pods", 500, 5])
    e.api.store.fail.append([None, "/api/v1/pods", 429, 3])
    pr = Probe(e, "--backoff-ms", "50")
    try:
        pr.wait("SYNC", 60)
        pr.wait("ADD d/p1")
        st = pr.stats() or {}
        wait_for(lambda: pr.stats().get("errors", 0) >= 8, 10, "8 errors counted (%s)" % st)
        assert "injected" in pr.lines[-1] or any("injected 429" in line for line in pr.lines), pr.lines[-3:]
        # a burst on the re-watch after a cut
        e.api.store.fail.append([None, "/api/v1/pods", 500, 4])
        e.api.store.cut_next_watch = 1
        e.pod("d", "p2", "n1", {"nvidia.com/gpu": "1"})
        e.pod("d", "p3", "n1", {"nvidia.com/gpu": "1"})
        pr.wait("ADD d/p3", 60)
        pr.wait("ADD d/p2")
        # backoff: 8 failures took at least the sum of the smallest jittered delays
        ts = [t for m, t in e.api.store.requests if m == "GET"]
        assert len(ts) >= 9
    finally:
        pr.close()


def test_informer_hang(e):
    e.pod("d", "p1", "n1", {"nvidia.com/gpu": "1"})
    # the first LIST never answers: the request timeout gives up, the retry succeeds
    e.api.store.hang_next = 1
    t0 = time.time()
    pr = Probe(e, "--backoff-ms", "100", "--request-timeout-ms", "2000", "--idle", "3", "--watch-timeout", "60")
    try:
        pr.wait("SYNC", 30)
        assert time.time() - t0 >= 1.5, "the hung list was not waited for"
        wait_for(lambda: pr.stats().get("watches", 0) >= 1, 10, "a watch")
        # a watch that connects but never sends a byte: the idle timeout reconnects
        e.api.store.hang_next = 1
        e.api.store.cut_next_watch = 1
        e.pod("d", "p2", "n1", {"nvidia.com/gpu": "1"})   # cuts the live watch; the re-watch hangs
        e.pod("d", "p3", "n1", {"nvidia.com/gpu": "1"})
        pr.wait("ADD d/p3", 40)
        pr.wait("ADD d/p2")
        assert e.api.store.hang_next == 0
    finally:
        pr.close()


def test_informer_paging(e):
    for i in range(1200):
        e.pod("d", "p%04d" % i, "n%d" % (i % 7), {"gpuslice.io/gpu-core": "10"})
    # the continue token of the second page has expired: the list starts over, once
    e.api.store.fail.append(["GET", "/api/v1/pods?limit=500&continue=1000", 410, 1])
    pr = Probe(e, "--slim", "pod")
    try:
        pr.wait("SYNC", 60)
        wait_for(lambda: pr.stats().get("objects") == 1200, 10, "1200 cached pods (%s)" % pr.stats())
        gets = [p for m, p in e.api.store.requests if m == "GET" and "watch" not in p]
        assert sum(1 for p in gets if "continue=" in p) >= 3, gets
        assert gets[0].startswith("/api/v1/pods?limit=500"), gets[0]
        assert sum(1 for line in pr.lines if line.startswith("ADD ")) == 1200
    finally:
        pr.close()


# ---- agents publishing, inspect ----

def publish_three(e):
    for n in TOPOS:
        e.node(n, {"kubernetes.io/hostname": n, "gpuslice.io/stale": "x", "nvidia.com/gpu.machine": "keep"})
    for n in TOPOS:
        e.start_agent(n)
    for n in TOPOS:
        wait_for(lambda: e.annotation(n) and e.labels(n).get("nvidia.com/gpu.count") == "8", 60,
                 "%s published (log: %s)" % (n, open(e.agents[n][2]).read()[-2000:]))


def test_publish_inspect(e):
    publish_three(e)
    # what is published
    a = e.annotation("gpu-a")
    assert a["v"] == 1 and len(a["gpus"]) == 8, a
    assert a["gpus"][0]["model"].startswith("Tesla V100"), a["gpus"][0]
    assert a["links"].split(";")[0].startswith("NV1"), a["links"]
    assert len(a["links"].split(";")) == 7
    b = e.annotation("gpu-b")
    assert b["nvswitch"] is True and "A100" in b["gpus"][0]["model"], b
    c = e.annotation("gpu-c")
    assert "NV" not in c["links"] and "PIX" in c["links"], c["links"]
    for n in TOPOS:
        lab = e.labels(n)
        assert lab["nvidia.com/gpu.present"] == "true"
        assert lab["nvidia.com/gpu.memory"] == str(e.annotation(n)["gpus"][0]["mem"]), lab
        assert lab["kubernetes.io/hostname"] == n and lab["nvidia.com/gpu.machine"] == "keep", lab
        assert "gpuslice.io/stale" not in lab, lab
        assert lab["gpuslice.io/gpu.healthy"] == "8"
        for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.family", "nvidia.com/gpu.compute.major",
                  "nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor"):
            assert k in lab, (k, lab)
    assert e.labels("gpu-a")["gpuslice.io/nvlink"] == "true"
    assert e.labels("gpu-c")["gpuslice.io/nvlink"] == "false"
    # every patch touched only gpuslice's keys
    for path, patch in e.api.store.patches:
        assert set(patch) == {"metadata"} and set(patch["metadata"]) <= {"labels", "annotations"}, patch
        for k in patch["metadata"].get("labels", {}):
            assert k.startswith("gpuslice.io/") or k.startswith("nvidia.com/gpu.") or \
                k.startswith("nvidia.com/cuda.") or k in MANAGED_NVIDIA, k
            assert k != "nvidia.com/gpu.machine"
        assert set(patch["metadata"].get("annotations", {})) <= {"gpuslice.io/gpus"}
    # updated on change only: nothing more while nothing changes
    n_patches = len(e.api.store.patches)
    time.sleep(4)
    assert len(e.api.store.patches) == n_patches, e.api.store.patches[n_patches:]
    assert n_patches == 3, "one patch per node expected, got %d" % n_patches

    # pods: gpuslice assignment, gpushare, gpu-manager, a pending fractional pod, a finished one
    e.pod("team", "frac1", "gpu-a", {"gpuslice.io/gpu-core": "30", "gpuslice.io/gpu-memory": "16"},
          {"gpuslice.io/assignment": json.dumps({"v": 1, "node": "gpu-a", "time": 1, "containers": [
              {"name": "main", "gpus": [1], "core": 30, "mem": 4096}]}), "gpuslice.io/assigned": "true"})
    e.pod("team", "share", "gpu-a", {"aliyun.com/gpu-mem": "2"},
          {"ALIYUN_COM_GPU_MEM_IDX": "1", "ALIYUN_COM_GPU_MEM_POD": "2", "ALIYUN_COM_GPU_MEM_ASSIGNED": "true"})
    e.pod("ml", "train", "gpu-b", {"tencent.com/vcuda-core": "200", "tencent.com/vcuda-memory": "10"},
          {"tencent.com/predicate-gpu-idx-0": "0,1", "tencent.com/gpu-assigned": "false"})
    e.pod("ml", "wait", None, {"gpuslice.io/gpu-core": "50", "gpuslice.io/gpu-memory": "48"}, phase="Pending")
    e.pod("ml", "old", "gpu-c", {"nvidia.com/gpu": "8"}, {"tencent.com/predicate-gpu-idx-0": "0,1,2,3,4,5,6,7"},
          phase="Succeeded")
    e.pod("web", "cpu", "gpu-c", {"cpu": "2"})

    r = e.inspect("--kubeconfig", e.kubeconfig, "--json", "--page-size", "2")
    j = json.loads(r.stdout)
    # indented as jansson's JSON_INDENT(2) (Python's indent=2 is the same layout), though written as a stream
    assert r.stdout == json.dumps(j, indent=2, ensure_ascii=False) + "\n", r.stdout[:2000]
    assert [n["name"] for n in j["nodes"]] == ["gpu-a", "gpu-b", "gpu-c"]
    ga = j["nodes"][0]["gpus"]
    assert len(ga) == 8 and ga[1]["index"] == 1
    assert ga[1]["memory_allocated_mib"] == 4096 + 2048, ga[1]
    assert ga[1]["core_allocated_percent"] == 30
    assert ga[1]["memory_total_mib"] == a["gpus"][1]["mem"] and ga[1]["uuid"] == a["gpus"][1]["uuid"]
    assert sorted((p["namespace"], p["name"], p["memory_mib"], p["core_percent"]) for p in ga[1]["pods"]) == \
        [("team", "frac1", 4096, 30), ("team", "share", 2048, 0)], ga[1]["pods"]
    assert ga[0]["pods"] == [] and ga[0]["memory_allocated_mib"] == 0
    gb = j["nodes"][1]["gpus"]
    for i in (0, 1):
        assert gb[i]["whole_holder"] == {"namespace": "ml", "name": "train"}, gb[i]
        assert gb[i]["memory_allocated_mib"] == gb[i]["memory_total_mib"] and gb[i]["core_allocated_percent"] == 100
        assert gb[i]["pods"][0]["confirmed"] is False and gb[i]["pods"][0]["source"] == "gpu-manager"
    assert gb[2]["whole_holder"] is None
    assert all(g["pods"] == [] for g in j["nodes"][2]["gpus"]), "a finished pod holds nothing"
    assert j["pending_pods"] == [{"namespace": "ml", "name": "wait", "memory_mib": 48 * 256, "core_percent": 50,
                                  "whole_gpus": 0, "mig_devices": {}}], j["pending_pods"]

    r = e.inspect("--kubeconfig", e.kubeconfig)
    out = r.stdout
    assert "NODE" in out.splitlines()[0] and "MEMORY(MiB)" in out.splitlines()[0]
    row = [line for line in out.splitlines() if line.startswith("gpu-a ")][0]
    assert "Tesla V100" in row and "0/" in row, row
    row1 = out.splitlines()[2]
    assert " 1 " in row1 and "6144/" in row1 and "30/100" in row1, row1
    assert "ml/train" in out and "PENDING" in out and "ml/wait" in out and "GPU not assigned" in out, out
    assert "team/frac1" not in out  # only with -d
    d = e.inspect("--kubeconfig", e.kubeconfig, "-d").stdout
    assert "team/frac1  memory 4096 MiB  core 30%" in d and "[gpushare]" in d, d
    one = e.inspect("--kubeconfig", e.kubeconfig, "--node", "gpu-b", "--json").stdout
    jo = json.loads(one)
    assert [n["name"] for n in jo["nodes"]] == ["gpu-b"] and len(jo["pending_pods"]) == 1, jo
    # as a kubectl plugin
    k = e.inspect("--kubeconfig", e.kubeconfig, "--json", "--page-size", "2", exe="kubectl-gpuslice")
    assert json.loads(k.stdout) == j
    env_k = subprocess.run([os.path.join(e.args.build, "kubectl-gpuslice"), "inspect", "--json"],
                           env=dict(os.environ, KUBECONFIG=e.kubeconfig), capture_output=True, text=True, timeout=60)
    assert env_k.returncode == 0 and json.loads(env_k.stdout) == j, env_k.stderr


def test_publish_recover(e):
    e.node("gpu-a", {"kubernetes.io/hostname": "gpu-a"})
    e.start_agent("gpu-a")
    wait_for(lambda: e.annotation("gpu-a"), 60, "published")
    n0 = len(e.api.store.patches)
    # a GPU falls off the bus while PATCH answers 500 three times and the watch is cut
    e.api.store.fail.append(["PATCH", "/api/v1/nodes/gpu-a", 500, 3])
    e.api.store.cut_next_watch = 1
    e.sim("gpu-a", "lose", "3")
    wait_for(lambda: e.annotation("gpu-a")["gpus"][3]["health"] != "ok", 60,
             "GPU 3 unhealthy in the annotation (%s)" % (e.annotation("gpu-a")["gpus"][3],))
    assert e.api.store.fail[0][3] == 0, "the 500s were not hit"
    assert e.labels("gpu-a")["gpuslice.io/gpu.healthy"] == "7"
    log = open(e.agents["gpu-a"][2]).read()
    assert log.count("cannot publish the node") == 1, "the error is logged once per change, not per retry"
    assert len(e.api.store.patches) == n0 + 1
    # history compacted, then someone removes our label: the agent relists and puts it back
    e.api.store.compact()
    o = e.api.store.get("nodes", "gpu-a")
    del o["metadata"]["labels"]["nvidia.com/gpu.product"]
    o["metadata"]["labels"]["team"] = "ml"
    e.api.store.put("nodes", o)
    wait_for(lambda: "nvidia.com/gpu.product" in e.labels("gpu-a"), 60, "the label restored")
    assert e.labels("gpu-a")["team"] == "ml"
    # the GPU comes back
    e.sim("gpu-a", "restore", "3")
    wait_for(lambda: e.annotation("gpu-a")["gpus"][3]["health"] == "ok", 60, "GPU 3 healthy again")
    # stop while a PATCH hangs on the server: SIGTERM ends the publisher at once, not after the
    # 30 s request timeout
    n_req = len(e.api.store.requests)
    e.api.store.hang_next = 10
    e.sim("gpu-a", "lose", "4")
    wait_for(lambda: any(m == "PATCH" for m, _ in e.api.store.requests[n_req:]), 30, "a PATCH in flight")
    p = e.agents["gpu-a"][0]
    t0 = time.time()
    p.terminate()
    assert p.wait(20) == 0
    assert time.time() - t0 < 8, "SIGTERM waited %.1f s for a hung request" % (time.time() - t0)


def test_publish_node_name(e):
    """An agent whose host (NODE_NAME here) is not its Node's name publishes nothing, says so, and
    counts every failed attempt (gpuslice_node_publish_failures_total{reason="no-node"}); the same
    agent with --node-name, NODE_NAME still wrong, publishes on the Node it names (issue 19, point 6)."""
    e.node("gpu-b", {"kubernetes.io/hostname": "gpu-b"})
    port = free_port()
    p = e.start_agent("gpu-b", node_name_env="gpu-b.example.org", extra=["--metrics-address=127.0.0.1:%d" % port])

    def failures(text):
        m = re.search(r'^gpuslice_node_publish_failures_total\{reason="no-node"\} (\d+)', text, re.M)
        return int(m.group(1)) if m else 0

    text = scrape(port, lambda t: failures(t) >= 2, "two failed publications (no-node)", timeout=60)
    for reason in ("watch", "patch"):  # every reason is a series from the start
        assert 'gpuslice_node_publish_failures_total{reason="%s"} 0' % reason in text, text
    assert e.annotation("gpu-b") is None, "published on a Node the agent was not told of"
    log = open(e.agents["gpu-b"][2]).read()
    assert log.count("--node-name") == 1, "the failure is logged once and points at --node-name"
    p.terminate()
    assert p.wait(20) == 0
    port = free_port()
    e.start_agent("gpu-b", node_name_env="gpu-b.example.org",
                  extra=["--node-name", "gpu-b", "--metrics-address=127.0.0.1:%d" % port])
    wait_for(lambda: e.annotation("gpu-b"), 60, "published on gpu-b")
    assert e.labels("gpu-b").get("nvidia.com/gpu.count") == "8", e.labels("gpu-b")
    assert failures(scrape(port, lambda t: "gpuslice_node_publish_failures_total" in t, "the family")) == 0
    # a name that is no Kubernetes name is refused before anything starts
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "node", "--node-name", "Not_A_Name"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "--node-name" in r.stderr, (r.returncode, r.stderr)


def test_inspect_errors(e):
    r = e.inspect("--kubeconfig", os.path.join(e.tmp, "nope"), rc=3)
    assert "nope" in r.stderr, r.stderr
    bad = os.path.join(e.tmp, "bad")
    with open(bad, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts:\n- name: x\n  context: {user: u}\n")
    r = e.inspect("--kubeconfig", bad, rc=3)
    assert bad in r.stderr and "contexts[name=x].context.cluster: missing" in r.stderr, r.stderr
    e.api.store.fail.append([None, "/api/v1/nodes", 403, 1])
    r = e.inspect("--kubeconfig", e.kubeconfig, rc=1)
    assert "stand-in: injected 403" in r.stderr and "Permission denied" in r.stderr, r.stderr
    dead = kube_standin.StandIn()
    url = dead.url
    dead.httpd.server_close()
    with open(os.path.join(e.tmp, "dead"), "w") as f:
        json.dump({"kind": "Config", "current-context": "d", "contexts": [{"name": "d", "context": {"cluster": "d"}}],
                   "clusters": [{"name": "d", "cluster": {"server": url}}]}, f)
    r = e.inspect("--kubeconfig", os.path.join(e.tmp, "dead"), rc=1)
    assert "Connection refused" in r.stderr, r.stderr
    r = e.inspect("--bogus", rc=2)
    # a burst of 500/429 is retried; a server that keeps failing fails the command, with its message
    e.node("burst")
    e.api.store.fail.append([None, "/api/v1/pods", 500, 2])
    e.api.store.fail.append([None, "/api/v1/pods", 429, 1])
    r = e.inspect("--kubeconfig", e.kubeconfig, "--json")
    assert [n["name"] for n in json.loads(r.stdout)["nodes"]] == ["burst"], r.stdout
    assert r.stderr.count("retrying") == 3, r.stderr
    e.api.store.fail.append([None, "/api/v1/nodes", 503, 100])
    r = e.inspect("--kubeconfig", e.kubeconfig, rc=1)
    assert r.stderr.count("retrying") == 4 and "injected 503" in r.stderr, r.stderr
    e.api.store.fail[-1][3] = 0
    # a node that is not published is shown as such
    r = e.inspect("--kubeconfig", e.kubeconfig)
    assert "burst" in r.stdout and "not published" in r.stdout, r.stdout


def write(e, *argv):
    r = subprocess.run([os.path.join(e.args.build, "kube-write-probe"), e.kubeconfig] + list(argv),
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout.strip()


def test_writes(e):
    p = e.pod("d", "w", "n1", {"nvidia.com/gpu": "1"}, {"keep": "1", "drop": "x"})
    rv = p["metadata"]["resourceVersion"]
    rc, out = write(e, "annotate", "d", "w", rv, "gpuslice.io/assigned=true", "drop-")
    assert rc == 0 and out == "ok", out
    ann = e.api.store.get("pods", "d/w")["metadata"]["annotations"]
    assert ann == {"keep": "1", "gpuslice.io/assigned": "true"}, ann
    # the same precondition again: the pod changed since → Conflict with the API's message
    rc, out = write(e, "annotate", "d", "w", rv, "gpuslice.io/assigned=false")
    assert rc == 1 and out.startswith("error ESTALE http=409 reason=Conflict") and "modified" in out, out
    assert e.api.store.get("pods", "d/w")["metadata"]["annotations"]["gpuslice.io/assigned"] == "true"
    rc, out = write(e, "annotate", "d", "nope", "-", "a=b")
    assert rc == 1 and out.startswith("error ENOENT http=404 reason=NotFound"), out
    # the stand-in speaks merge patch only: a JSON patch gets its 415 Status back
    rc, out = write(e, "jsonpatch", "/api/v1/namespaces/d/pods/w", '[{"op":"test","path":"/x","value":1}]')
    assert rc == 1 and "http=415" in out and "merge patch only" in out, out


TESTS = {
    "informer-cut": test_informer_cut,
    "informer-410": test_informer_410,
    "informer-burst": test_informer_burst,
    "informer-hang": test_informer_hang,
    "informer-paging": test_informer_paging,
    "publish-inspect": test_publish_inspect,
    "publish-recover": test_publish_recover,
    "publish-node-name": test_publish_node_name,
    "inspect-errors": test_inspect_errors,
    "writes": test_writes,
}


if __name__ == "__main__":
    runner.main(TESTS, make_env=Env, label="kube-", timeout_s=130)
