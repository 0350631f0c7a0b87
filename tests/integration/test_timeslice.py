# SPDX-License-Identifier: Apache-2.0
"""Integration tests of time-slicing from NVIDIA's device plugin config (`gpuslice node --nvidia-config`,
docs/sharing.md) against the kubelet stand-in: NVIDIA's own documented example configs advertise what NVIDIA's
plugin advertises for them (resource names, counts, device IDs <uuid>::<n>) and Allocate answers what NVIDIA's
plugin answers (NVIDIA_VISIBLE_DEVICES=<uuid>, the GPU's device nodes); a node mixing whole, time-sliced and
fractional GPUs never books one GPU two ways, also across an agent SIGKILL; refused configs stop the agent with
the key named. Usage as test_agent.py:

    /usr/bin/python3 test_timeslice.py --build DIR --source DIR --topology FILE TEST
"""

import os
import re
import signal
import subprocess
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kube_standin  # noqa: E402
import kubelet_standin  # noqa: E402,F401
import agent_fixture  # noqa: E402
from agent_fixture import Env, check, free_port, run_main, scrape  # noqa: E402

TEST_TIMEOUT_S = 120
REPLICA_RE = re.compile(r"^(GPU-[0-9a-f-]{36})::(0|[1-9][0-9]*)$")
UUID_RE = re.compile(r"^GPU-[0-9a-f-]{36}$")


def endpoint(resource):
    return "gpuslice-%s.sock" % resource.replace("/", "-")


class TS(Env):
    def example(self, name):
        return os.path.join(self.args.source, "tests", "data", "nvidia-config", name)

    def start(self, config, *extra):
        return self.start_agent("--nvidia-config", config, *extra)

    def wait_resources(self, want, timeout=10):
        k = self.kubelet
        k.wait_for(lambda: set(want) <= {r.request.resource_name for r in k.registrations}, timeout,
                   "registration of %s" % want)
        k.wait_for(lambda: all(k.last_ids(endpoint(r)) is not None for r in want), timeout,
                   "a ListAndWatch message from %s" % want)

    def devices(self, resource):
        return self.kubelet.last_devices(endpoint(resource))

    def stub_of(self, resource):
        return self.kubelet.plugin_stub(endpoint(resource))[0]

    def alloc(self, resource, *containers):
        req = self.pb.AllocateRequest()
        for ids in containers:
            req.container_requests.add(devices_ids=ids)
        return self.stub_of(resource).Allocate(req, timeout=5)

    def prefer_of(self, resource, available, size):
        req = self.pb.PreferredAllocationRequest()
        req.container_requests.add(available_deviceIDs=available, allocation_size=size)
        return list(self.stub_of(resource).GetPreferredAllocation(req, timeout=5).container_responses[0].deviceIDs)

    def log_text(self):
        with open(self.logs[-1]) as f:
            return f.read()


def replicas_by_gpu(ids):
    by = {}
    for i in ids:
        m = REPLICA_RE.match(i)
        check(m, "not a replica ID: %r" % i)
        by.setdefault(m.group(1), []).append(int(m.group(2)))
    return by


# ---- tests ----

def test_example(e):
    """NVIDIA's README example: replicas 10 on nvidia.com/gpu: 8 GPUs advertise 80 nvidia.com/gpu."""
    e.start(e.example("time-slicing.yaml"))
    e.wait_resources(["nvidia.com/gpu"])
    devs = e.devices("nvidia.com/gpu")
    check(len(devs) == 80, "advertised %d, NVIDIA's plugin advertises 80" % len(devs))
    by = replicas_by_gpu(devs)
    check(len(by) == 8 and all(sorted(v) == list(range(10)) for v in by.values()), "replicas per GPU %s" % by)
    check(all(h == "Healthy" for h, _ in devs.values()), "not all healthy")
    names = {r.request.resource_name for r in e.kubelet.registrations}
    check(names == {"nvidia.com/gpu"}, "registered %s" % names)
    ids = sorted(devs)
    uuid = REPLICA_RE.match(ids[0]).group(1)
    c = e.alloc("nvidia.com/gpu", [ids[0]]).container_responses[0]
    check(dict(c.envs) == {"NVIDIA_VISIBLE_DEVICES": uuid}, "env %s" % dict(c.envs))
    paths = sorted(d.container_path for d in c.devices)
    check("/dev/nvidiactl" in paths and "/dev/nvidia-uvm" in paths and len(paths) == 3, "device specs %s" % paths)
    # failRequestsGreaterThanOne is false by default: two replicas (of one GPU) are one GPU, no error
    same = [i for i in ids if i.startswith(uuid + "::")][1:3]
    c = e.alloc("nvidia.com/gpu", same).container_responses[0]
    check(c.envs["NVIDIA_VISIBLE_DEVICES"] == uuid, "two replicas of one GPU: env %s" % dict(c.envs))
    # the preferred allocation spreads over GPUs: 3 replicas from the 7 GPUs nobody holds
    taken = set([ids[0]] + same)
    got = e.prefer_of("nvidia.com/gpu", [i for i in ids if i not in taken], 3)
    gpus = {REPLICA_RE.match(i).group(1) for i in got}
    check(len(got) == 3 and len(gpus) == 3 and uuid not in gpus, "preferred %s" % got)


def test_rename(e):
    """renameByDefault: nvidia.com/gpu.shared, 80 of them, and no nvidia.com/gpu (NVIDIA's Capacity)."""
    e.start(e.example("time-slicing-rename.yaml"))
    e.wait_resources(["nvidia.com/gpu.shared"])
    devs = e.devices("nvidia.com/gpu.shared")
    check(len(devs) == 80 and len(replicas_by_gpu(devs)) == 8, "advertised %d" % len(devs))
    time.sleep(0.5)
    names = {r.request.resource_name for r in e.kubelet.registrations}
    check(names == {"nvidia.com/gpu.shared"}, "registered %s" % names)


def test_mixed(e):
    """GPUs 0-1 time-sliced (nvidia.com/gpu.shared, failRequestsGreaterThanOne), 2-7 whole and in fractions; one
    GPU in one mode, and after a SIGKILL and a config that time-slices a GPU held whole, that GPU's replicas are
    Unhealthy."""
    interposer = os.path.abspath(os.path.join(e.args.build, "libgpuslice-cuda.so"))
    e.start(e.example("mixed-gpus.yaml"), "--resource-profile", "gpuslice", "--interposer", interposer)
    e.wait_resources(["nvidia.com/gpu", "nvidia.com/gpu.shared", "gpuslice.io/gpu-core"])
    shared = e.devices("nvidia.com/gpu.shared")
    whole = e.devices("nvidia.com/gpu")
    core = e.devices("gpuslice.io/gpu-core")
    by = replicas_by_gpu(shared)
    check(len(shared) == 8 and len(by) == 2, "shared %d over %d GPUs" % (len(shared), len(by)))
    check(len(whole) == 6 and all(UUID_RE.match(i) for i in whole), "whole %s" % sorted(whole))
    check(not set(by) & set(whole), "a GPU both whole and time-sliced")
    core_gpus = {i.split("::")[0] for i in core}
    check(len(core) == 600 and not core_gpus & set(by), "fractions of a time-sliced GPU: %d IDs" % len(core))
    sh = sorted(shared)
    e.expect_error(lambda: e.alloc("nvidia.com/gpu.shared", sh[:2]), grpc.StatusCode.INVALID_ARGUMENT,
                   "request for 'nvidia.com/gpu.shared: 2' too large: maximum request size for shared resources is 1")
    e.alloc("nvidia.com/gpu.shared", [sh[0]], [sh[1]])  # two containers, a replica each
    w = sorted(whole)
    e.alloc("nvidia.com/gpu", [w[0]])
    e.expect_error(lambda: e.alloc("nvidia.com/gpu.shared", [w[0] + "::0"]), grpc.StatusCode.INVALID_ARGUMENT,
                   "unknown device ID")
    state = os.path.join(e.state_dir, "gpuslice.state")
    e.kubelet.wait_for(lambda: os.path.exists(state) and b"::1" in open(state, "rb").read(), 5, "replicas on record")
    e.kill_agent(signal.SIGKILL)
    e.kubelet.pods = [("default", "a", "c0", "nvidia.com/gpu.shared", [sh[0]]),
                      ("default", "a", "c1", "nvidia.com/gpu.shared", [sh[1]]),
                      ("default", "b", "main", "nvidia.com/gpu", [w[0]])]
    # the same node, now time-slicing GPU 2 too: it is held whole, so its replicas stay Unhealthy
    cfg = os.path.join(e.tmp, "three.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n"
                "    failRequestsGreaterThanOne: true\n    resources:\n    - name: nvidia.com/gpu\n"
                "      replicas: 4\n      devices: [0, 1, 2]\n")
    e.kubelet.restart()
    e.start(cfg, "--resource-profile", "gpuslice", "--interposer", interposer)
    k = e.kubelet
    k.wait_for(lambda: k.last_ids(endpoint("nvidia.com/gpu.shared")) is not None and
               len(k.last_devices(endpoint("nvidia.com/gpu.shared"))) == 12, 15, "12 replicas after the restart")
    devs = e.devices("nvidia.com/gpu.shared")
    held_whole = [i for i in devs if i.startswith(w[0] + "::")]
    check(len(held_whole) == 4, "replicas of the GPU held whole: %s" % held_whole)
    k.wait_for(lambda: all(e.devices("nvidia.com/gpu.shared")[i][0] == "Unhealthy" for i in held_whole), 10,
               "replicas of a GPU held whole listed Unhealthy")
    check(all(devs[i][0] == "Healthy" for i in devs if i not in held_whole), "other replicas unhealthy")
    e.expect_error(lambda: e.alloc("nvidia.com/gpu.shared", [held_whole[0]]), grpc.StatusCode.INVALID_ARGUMENT,
                   "held another way")


def test_refused(e):
    """What gpuslice does not support stops the agent with the key named."""
    cases = [("version: v1\nflags:\n  plugin:\n    deviceListStrategy: volume-mounts\n",
              "flags.plugin.deviceListStrategy"),
             ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n", "no replicas"),
             ("version: v1\nsharing:\n  mps:\n    resources:\n    - name: nvidia.com/mig-1g.10gb\n      replicas: 2\n",
              "sharing.mps.resources[0].name")]
    for text, key in cases:
        path = os.path.join(e.tmp, "bad.yaml")
        with open(path, "w") as f:
            f.write(text)
        p = e.start(path)
        rc = p.wait(15)
        check(rc != 0, "agent started with %s" % key)
        check(key in e.log_text(), "the log does not name %s:\n%s" % (key, e.log_text()[-2000:]))


def test_configmap_dir(e):
    """A mounted ConfigMap directory: without the node label (no API server here) the default entry is used."""
    d = os.path.join(e.tmp, "configs")
    os.makedirs(d)
    for name in ("time-slicing.yaml", "config0.yaml"):
        with open(e.example(name)) as f, open(os.path.join(d, name.split(".")[0]), "w") as g:
            g.write(f.read())
    os.symlink("..2026", os.path.join(d, "..data"))  # a ConfigMap mount's own entry
    p = e.start(d)
    check(p.wait(15) != 0 and "nvidia.com/device-plugin.config" in e.log_text(), "two entries and no choice")
    e.start(d, "--nvidia-config-default", "time-slicing")
    e.wait_resources(["nvidia.com/gpu"])
    check(len(e.devices("nvidia.com/gpu")) == 80, "the default entry's replicas")


def test_metrics(e):
    """Per replica holder: the GPU's allocated ratio is the replicas held of its N, and each holder is a
    container of that GPU with the whole GPU granted (time-slicing sets no limit)."""
    port = free_port()
    e.start(e.example("time-slicing.yaml"), "--metrics-address", "127.0.0.1:%d" % port, "--sample-interval", "1s")
    e.wait_resources(["nvidia.com/gpu"])
    by = replicas_by_gpu(e.devices("nvidia.com/gpu"))
    g0 = sorted(by)[0]
    mine = ["%s::%d" % (g0, j) for j in (0, 1, 2)]
    e.kubelet.pods = [("ml", "nb-%d" % j, "main", "nvidia.com/gpu", [mine[j]]) for j in range(3)]
    for i in mine:
        e.alloc("nvidia.com/gpu", [i])
    e.status()  # a status request syncs PodResources: the holders are named

    def ok(t):
        ratios = [ln for ln in t.splitlines() if ln.startswith("gpuslice_gpu_allocated_ratio{") and g0 in ln]
        holders = [ln for ln in t.splitlines() if ln.startswith("gpuslice_container_gpu_core_share_ratio{")
                   and 'pod="nb-' in ln]
        return ratios and float(ratios[0].rsplit(" ", 1)[1]) == 0.3 and len(holders) == 3

    text = scrape(port, ok, "allocated ratio 0.3 on %s and 3 replica holders" % g0)
    check("gpuslice_gpu_allocated_ratio" in text, "no allocated ratio")


def test_label(e):
    """The node label nvidia.com/device-plugin.config picks the ConfigMap entry (read from the API server at start),
    and the agent publishes GFD's sharing labels: replicas, sharing-strategy, the -SHARED product when the replicas
    keep the GPU's name."""
    api = kube_standin.StandIn().start()
    try:
        kubeconfig = api.kubeconfig(os.path.join(e.tmp, "kubeconfig"))
        e.env["NODE_NAME"] = "ts-node"
        e.env.pop("KUBERNETES_SERVICE_HOST", None)

        def label(value):
            api.store.put("nodes", {"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": "ts-node", "labels": {"nvidia.com/device-plugin.config": value}},
                                    "status": {"capacity": {"cpu": "8"}}})

        def labels():
            return (api.store.get("nodes", "ts-node") or {}).get("metadata", {}).get("labels", {})

        d = os.path.join(e.tmp, "configs")
        os.makedirs(d)
        for src, name in (("config0.yaml", "plain"), ("time-slicing-rename.yaml", "shared"),
                          ("time-slicing.yaml", "sliced")):
            with open(e.example(src)) as f, open(os.path.join(d, name), "w") as g:
                g.write(f.read())
        label("shared")
        e.start(d, "--nvidia-config-default", "plain", "--kubeconfig", kubeconfig)
        e.wait_resources(["nvidia.com/gpu.shared"])
        check(len(e.devices("nvidia.com/gpu.shared")) == 80, "the labelled entry's 80 replicas")
        e.kubelet.wait_for(lambda: labels().get("nvidia.com/gpu.replicas") == "10", 15, "gpu.replicas published")
        lb = labels()
        check(lb.get("nvidia.com/gpu.sharing-strategy") == "time-slicing", "labels %s" % lb)
        check(not lb.get("nvidia.com/gpu.product", "").endswith("-SHARED"), "renamed, yet %s" % lb)
        e.kill_agent(signal.SIGTERM)
        label("sliced")
        e.kubelet.restart()
        e.start(d, "--nvidia-config-default", "plain", "--kubeconfig", kubeconfig)
        e.wait_resources(["nvidia.com/gpu"])
        e.kubelet.wait_for(lambda: labels().get("nvidia.com/gpu.product", "").endswith("-SHARED"), 15,
                           "the -SHARED product (labels %s)" % labels())
        check(len(e.devices("nvidia.com/gpu")) == 80, "80 nvidia.com/gpu")
    finally:
        api.stop()


def ts_entry(replicas):
    return ("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
            "      replicas: %d\n" % replicas)


def test_label_watch(e):
    """The agent watches the node label nvidia.com/device-plugin.config and the ConfigMap directory, as NVIDIA's
    config-manager does: a label naming another entry restarts the agent (same process, re-executed) on it and the
    kubelet sees the new replicas, an allocation made before still held; a label naming a missing or a refused entry
    is logged (entry and key named) and the current config keeps serving; the ConfigMap's entry edited (the mount's
    ..data link swapped, as the kubelet updates it) is applied; the label removed falls back to the default entry."""
    label_key = "nvidia.com/device-plugin.config"
    api = kube_standin.StandIn().start()
    try:
        kubeconfig = api.kubeconfig(os.path.join(e.tmp, "kubeconfig"))
        e.env["NODE_NAME"] = "ts-node"
        e.env.pop("KUBERNETES_SERVICE_HOST", None)
        api.store.put("nodes", {"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": "ts-node", "labels": {label_key: "four"}},
                                "status": {"capacity": {"cpu": "8"}}})

        def relabel(value):  # read, modify, write: the labels the agent published stay
            node = api.store.get("nodes", "ts-node")
            labels = node["metadata"].setdefault("labels", {})
            if value is None:
                labels.pop(label_key, None)
            else:
                labels[label_key] = value
            api.store.put("nodes", node)

        d = os.path.join(e.tmp, "configs")
        os.makedirs(d)

        def configmap(gen, entries):  # as the kubelet updates a ConfigMap mount: a new dir, ..data swapped
            g = os.path.join(d, "..gen%d" % gen)
            os.makedirs(g)
            for name, text in entries.items():
                with open(os.path.join(g, name), "w") as f:
                    f.write(text)
                if not os.path.islink(os.path.join(d, name)):
                    os.symlink(os.path.join("..data", name), os.path.join(d, name))
            os.symlink("..gen%d" % gen, os.path.join(d, "..data_tmp"))
            os.rename(os.path.join(d, "..data_tmp"), os.path.join(d, "..data"))

        entries = {"four": ts_entry(4), "two": ts_entry(2), "broken": ts_entry(0)}
        configmap(1, entries)
        p = e.start(d, "--nvidia-config-default", "four", "--kubeconfig", kubeconfig)
        e.wait_resources(["nvidia.com/gpu"])
        check(len(e.devices("nvidia.com/gpu")) == 32, "label four: %d IDs" % len(e.devices("nvidia.com/gpu")))
        by = replicas_by_gpu(e.devices("nvidia.com/gpu"))
        g0 = sorted(by)[0]
        keep = "%s::1" % g0
        e.kubelet.pods = [("ml", "keep", "main", "nvidia.com/gpu", [keep])]
        e.alloc("nvidia.com/gpu", [keep])
        state = os.path.join(e.state_dir, "gpuslice.state")
        e.kubelet.wait_for(lambda: os.path.exists(state) and keep.encode() in open(state, "rb").read(), 5,
                           "the replica on record")

        def count(n):
            e.kubelet.wait_for(lambda: len(e.devices("nvidia.com/gpu") or {}) == n, 30,
                               "%d nvidia.com/gpu (log %s)" % (n, e.log_text()[-3000:]))
            check(p.poll() is None and e.agent is p, "the agent exited instead of starting again")

        def held():
            st = e.status()
            g = [x for x in st["devices"] if x["id"] == g0][0]
            return [r for r in g.get("replicas", []) if r["id"] == keep and r["holder"]["pod"] == "keep"]

        relabel("two")
        count(16)
        check(e.log_text().count("NVIDIA config entry changed: starting again") == 1, "one restart")
        check(not any(i.endswith("::3") for i in e.devices("nvidia.com/gpu")), "replicas of four left over")
        e.kubelet.wait_for(held, 10, "the replica allocated before the restart still held")

        relabel("nosuch")
        e.kubelet.wait_for(lambda: "entry=nosuch" in e.log_text(), 10, "the missing entry logged")
        line = [ln for ln in e.log_text().splitlines() if "entry=nosuch" in ln][0]
        check("refused" in line and "key=" + label_key in line and "no config named 'nosuch'" in line, line)
        relabel("broken")
        e.kubelet.wait_for(lambda: "entry=broken" in e.log_text(), 10, "the refused entry logged")
        line = [ln for ln in e.log_text().splitlines() if "entry=broken" in ln][0]
        check("sharing.timeSlicing.resources[0].replicas" in line, "the refused key not named: " + line)
        time.sleep(1)  # nothing else follows: the old config keeps serving
        check(p.poll() is None and "starting again" not in e.log_text().split("entry=nosuch")[1], "restarted")
        check(len(e.devices("nvidia.com/gpu")) == 16, "the current config no longer served")
        other = "%s::0" % sorted(by)[1]
        e.alloc("nvidia.com/gpu", [other])  # still serving Allocate
        check(e.log_text().count("entry=broken") == 1, "a refusal logged at every change of the Node")

        relabel("two")  # the entry in use again: no restart
        e.kubelet.wait_for(lambda: "names the entry in use again" in e.log_text(), 10, "back to the entry in use")
        entries["two"] = ts_entry(3)  # the ConfigMap edited: the kubelet swaps the mount's files
        configmap(2, entries)
        count(24)
        relabel(None)  # the default rule: --nvidia-config-default four
        count(32)
        check(e.log_text().count("NVIDIA config entry changed: starting again") == 3, "three restarts")
        e.kubelet.wait_for(held, 10, "the replica allocated first still held after three restarts")
    finally:
        api.stop()


def start_mps(e, *extra, ctl=None):
    """The agent started on NVIDIA's MPS example with the simulated control daemon (ctl: another control program;
    extra: more arguments), back once every replica is Healthy (the daemon serves, configured). Its arguments, for
    a restart."""
    ctl = ctl or os.path.abspath(os.path.join(e.args.build, "sim", "nvidia-cuda-mps-control"))
    args = (e.example("mps.yaml"), "--mps-control", ctl) + extra
    e.start(*args)
    e.wait_resources(["nvidia.com/gpu"])
    e.kubelet.wait_for(lambda: all(h == "Healthy" for h, _ in e.devices("nvidia.com/gpu").values()), 15,
                       "replicas Healthy once the daemon serves")
    return args


def test_mps(e):
    """NVIDIA's MPS example: the agent runs the (simulated) control daemon with its pipe and log dirs, sets each
    GPU's pinned memory limit (24 GiB / 10) and thread percentage (10); Allocate hands the client the pipe dir and
    CUDA_MPS_PIPE_DIRECTORY and the daemon's shm tmpfs at /dev/shm, as NVIDIA's plugin; a client past its limit gets out of memory; the daemon killed makes the replicas
    Unhealthy until the agent has it serving again; SIGTERM stops it."""
    start_mps(e)
    k = e.kubelet
    devs = e.devices("nvidia.com/gpu")
    check(len(devs) == 80 and len(replicas_by_gpu(devs)) == 8, "advertised %d" % len(devs))
    pipe = os.path.join(e.state_dir, "mps", "pipe")
    state = os.path.join(pipe, "gpuslice-sim-mps")
    text = open(state).read()
    check("thread-percentage 10\n" in text, "thread percentage: %r" % text)
    check("pinned 0 %d\n" % ((24 << 30) // 10 >> 20 << 20) in text, "pinned limit of GPU 0: %r" % text)
    check(os.path.exists(os.path.join(e.state_dir, "mps", "log", "control.log")), "no control.log")
    ids = sorted(devs)
    e.expect_error(lambda: e.alloc("nvidia.com/gpu", ids[:2]), grpc.StatusCode.INVALID_ARGUMENT,
                   "maximum request size for shared resources is 1")  # MPS: true unless said otherwise
    c = e.alloc("nvidia.com/gpu", [ids[0]]).container_responses[0]
    ctr_pipe = "/mps/nvidia.com/gpu/pipe"  # NVIDIA's: /mps/<resource>/pipe, its shm dir at /dev/shm
    check(c.envs.get("CUDA_MPS_PIPE_DIRECTORY") == ctr_pipe, "env %s" % dict(c.envs))
    mounts = {m.container_path: (m.host_path, m.read_only) for m in c.mounts}
    shm = os.path.join(e.state_dir, "mps", "shm")
    check(mounts == {ctr_pipe: (pipe, False), "/dev/shm": (shm, False)}, "mounts %s" % mounts)
    check_daemon_shm(state, shm)
    work = os.path.join(e.args.build, "sim", "gpuslice-sim-workload")
    env = dict(e.env, CUDA_MPS_PIPE_DIRECTORY=pipe)
    run = [work, "--gpu", "0", "--seconds", "0", "--mem"]
    check(subprocess.run(run + ["2G"], env=env, timeout=20).returncode == 0, "2 GiB under the 2.4 GiB limit")
    check(subprocess.run(run + ["3G"], env=env, timeout=20).returncode == 3, "3 GiB past the limit: out of memory")
    pid = int(open(state).read().split("pid ")[1].split()[0])
    os.kill(pid, signal.SIGKILL)
    k.wait_for(lambda: any(h == "Unhealthy" for h, _ in e.devices("nvidia.com/gpu").values()), 10,
               "replicas Unhealthy while the daemon is down")
    k.wait_for(lambda: all(h == "Healthy" for h, _ in e.devices("nvidia.com/gpu").values()), 15,
               "replicas Healthy again after the restart")
    text = open(state).read()
    check("pid %d\n" % pid not in text and "pinned 0 " in text, "restarted and configured: %r" % text)
    check_daemon_shm(state, shm)  # the restarted daemon too
    check(e.kill_agent(signal.SIGTERM) == 0, "SIGTERM")
    check(not os.path.exists(state), "the daemon still runs after the agent stopped")
    check(os.stat(shm).st_dev == os.stat(os.path.dirname(shm)).st_dev, "the shm tmpfs is still mounted after SIGTERM")


MASK_WRAPPER = """#!%(python)s
import os, subprocess, sys
SIM = %(sim)r
mask = [line.split()[1] for line in open("/proc/self/status") if line.startswith("SigBlk:")][0]
if sys.argv[1:]:  # the daemon: exec'ed, the agent's child itself
    what, data = " ".join(sys.argv[1:]), None
else:  # a client: the first word of the commands on its stdin
    data = sys.stdin.buffer.read()
    what = (data.split() or [b"-"])[0].decode()
with open(%(log)r, "a") as f:
    f.write("%%s %%s\\n" %% (what, mask))
if data is None:
    os.execv(SIM, [SIM] + sys.argv[1:])
sys.exit(subprocess.run([SIM], input=data).returncode)
"""


def test_mps_child_signals(e):
    """Every child the agent runs for MPS — the daemon, the client that configures it, the client that probes it —
    starts with no signal blocked, though the agent blocks SIGTERM, SIGINT and SIGHUP for its signalfd: a control
    client must die of the SIGTERM it is sent. The control program is a wrapper that notes its blocked mask."""
    log = os.path.join(e.tmp, "masks")
    wrapper = os.path.join(e.tmp, "bin", "nvidia-cuda-mps-control")
    os.makedirs(os.path.dirname(wrapper))
    with open(wrapper, "w") as f:
        f.write(MASK_WRAPPER % {"python": sys.executable, "log": log,
                                "sim": os.path.abspath(os.path.join(e.args.build, "sim", "nvidia-cuda-mps-control"))})
    os.chmod(wrapper, 0o755)
    start_mps(e, ctl=wrapper)

    def masks():
        return {w: m for w, m in (line.split() for line in open(log))} if os.path.exists(log) else {}
    e.kubelet.wait_for(lambda: "get_default_active_thread_percentage" in masks(), 10, "the first probe")
    m = masks()
    check(set(m) == {"-f", "set_default_active_thread_percentage", "get_default_active_thread_percentage"},
          "children %s" % m)
    check(all(int(v, 16) == 0 for v in m.values()), "a child of the agent with signals blocked: %s" % m)
    check(e.kill_agent(signal.SIGTERM) == 0, "SIGTERM")


def daemon_pid(state):
    return int(open(state).read().split("pid ")[1].split()[0])


def test_mps_hung(e):
    """The daemon alive but not answering (the simulator's hang hook, a file in the pipe dir naming it): the agent's
    probe (get_default_active_thread_percentage through the control client, on its loop) gets no answer, so the
    replicas go Unhealthy; once the daemon answers again they are Healthy, the same daemon still serving. Hung for
    good, the daemon is killed and started anew by the agent: a new pid, configured, the replicas Healthy."""
    start_mps(e)
    k = e.kubelet

    def health():
        return {h for h, _ in e.devices("nvidia.com/gpu").values()}
    pipe = os.path.join(e.state_dir, "mps", "pipe")
    state, hang = os.path.join(pipe, "gpuslice-sim-mps"), os.path.join(pipe, "gpuslice-sim-mps.hang")
    pid = daemon_pid(state)
    with open(hang, "w") as f:
        f.write("%d\n" % pid)
    k.wait_for(lambda: health() == {"Unhealthy"}, 10, "replicas Unhealthy while the daemon does not answer")
    check("MPS control daemon does not answer" in e.log_text(), "no warning of the hung daemon in the log")
    os.unlink(hang)
    k.wait_for(lambda: health() == {"Healthy"}, 10, "replicas Healthy once the daemon answers again")
    check(daemon_pid(state) == pid and os.path.exists("/proc/%d" % pid), "the daemon was replaced: it only hung")
    check("MPS control daemon answers again" in e.log_text(), "no note of the daemon answering again")
    with open(hang, "w") as f:  # hung for good: the hook names this daemon only, a new one serves
        f.write("%d\n" % pid)
    k.wait_for(lambda: health() == {"Unhealthy"}, 10, "replicas Unhealthy while the daemon hangs again")
    k.wait_for(lambda: os.path.exists(state) and daemon_pid(state) != pid, 30, "the hung daemon started anew")
    k.wait_for(lambda: health() == {"Healthy"}, 15, "replicas Healthy with the new daemon")
    check(not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z",
          "the hung daemon still runs")
    check("pinned 0 " in open(state).read(), "the new daemon not configured: %r" % open(state).read())
    check("MPS control daemon hung: killed" in e.log_text(), "no note of the restart in the log")
    os.unlink(hang)
    check(e.kill_agent(signal.SIGTERM) == 0, "SIGTERM")


def compute_modes(e, *set_gpu_mode):
    """Every GPU's compute mode in the simulated node's state (what the simulated NVML's nvmlDeviceGetComputeMode
    and libcuda read), after setting GPU set_gpu_mode[0]'s to set_gpu_mode[1] when given (as nvidia-smi -c
    would). Through gpuslice-sim, not a ctypes load of the simulated NVML: that cannot load into Python in the
    sanitizer build."""
    return [int(x) for x in e.sim("compute-mode", *[str(x) for x in set_gpu_mode]).splitlines()[0].split()]


def gpu_uuids(e):
    return e.sim("compute-mode").splitlines()[1].split()


def test_mps_compute_mode(e):
    """NVIDIA's plugin sets the MPS GPUs EXCLUSIVE_PROCESS (3) while its daemon runs: so does the agent, each GPU's
    mode before (DEFAULT, 0) saved under <state-dir>/mps/compute-mode; there an MPS client shares its GPU with other
    clients, a process that is no client gets CUDA_ERROR_DEVICE_UNAVAILABLE (the simulator's libcuda honours the
    mode); an agent restarted after a SIGKILL finds the mode set and keeps what it saved; SIGTERM sets it back — the mode each had before, not always DEFAULT: GPU 7 was PROHIBITED (2)."""
    before = [0] * 7 + [2]
    check(compute_modes(e, 7, 2) == before, "the node before the agent: %s" % compute_modes(e))
    args = start_mps(e)
    k = e.kubelet
    check(compute_modes(e) == [3] * 8, "MPS GPUs not EXCLUSIVE_PROCESS: %s" % compute_modes(e))
    saved = os.path.join(e.state_dir, "mps", "compute-mode")
    uuids = sorted(replicas_by_gpu(e.devices("nvidia.com/gpu")))
    check(sorted(os.listdir(saved)) == uuids, "saved modes %s" % os.listdir(saved))
    uuid_of = gpu_uuids(e)

    def saved_modes():
        return [open(os.path.join(saved, uuid_of[g])).read() for g in range(8)]
    check(saved_modes() == ["%d\n" % m for m in before], "saved modes %s" % saved_modes())
    pipe = os.path.join(e.state_dir, "mps", "pipe")
    work = os.path.join(e.args.build, "sim", "gpuslice-sim-workload")
    client_env = dict(e.env, CUDA_MPS_PIPE_DIRECTORY=pipe)
    holder = subprocess.Popen([work, "--gpu", "0", "--mem", "64M", "--seconds", "30"], env=client_env,
                              stdout=subprocess.PIPE, text=True)
    try:
        check(holder.stdout.readline().startswith("ready "), "the first MPS client did not start")
        run = [work, "--gpu", "0", "--mem", "64M", "--seconds", "0"]
        r = subprocess.run(run, env=client_env, capture_output=True, text=True, timeout=20)
        check(r.returncode == 0, "a second MPS client is kept off the GPU: %s" % r.stderr)
        r = subprocess.run(run, env=e.env, capture_output=True, text=True, timeout=20)
        check(r.returncode == 1 and "CUDA_ERROR_DEVICE_UNAVAILABLE" in r.stderr,
              "a process that is no MPS client on an EXCLUSIVE_PROCESS GPU held by the MPS clients: %d %s" %
              (r.returncode, r.stderr))
        r = subprocess.run(run[:2] + ["1"] + run[3:], env=e.env, capture_output=True, text=True, timeout=20)
        check(r.returncode == 0, "GPU 1, no process on it, takes a process that is no client: %s" % r.stderr)
    finally:
        holder.terminate()
        holder.wait(10)
    e.kill_agent(signal.SIGKILL)
    e.start(*args)
    k.wait_for(lambda: "MPS control daemon left running by the agent before: adopted" in e.log_text(), 15,
               "the restarted agent adopting the daemon")
    k.wait_for(lambda: "MPS control daemon serving" in e.log_text(), 15, "the adopted daemon configured")
    check(compute_modes(e) == [3] * 8, "after the restart: %s" % compute_modes(e))
    check(saved_modes() == ["%d\n" % m for m in before],
          "the restarted agent saved its own EXCLUSIVE_PROCESS as the mode before: %s" % saved_modes())
    check(e.kill_agent(signal.SIGTERM) == 0, "SIGTERM")
    check(compute_modes(e) == before, "the compute modes not set back at SIGTERM: %s" % compute_modes(e))
    check(not os.path.exists(saved), "saved modes left after they were set back")


def test_mps_compute_mode_denied(e):
    """NVML refusing the compute mode (NO_PERMISSION: the simulator's GPUSLICE_SIM_UNPRIVILEGED takes the agent for a
    caller without root) is logged, not fatal: the daemon serves, the replicas are Healthy, the modes stay DEFAULT
    and nothing is saved to set back."""
    e.env["GPUSLICE_SIM_UNPRIVILEGED"] = "1"
    start_mps(e)  # Healthy, the compute mode refused
    del e.env["GPUSLICE_SIM_UNPRIVILEGED"]
    text = e.log_text()
    check(text.count("cannot set an MPS GPU's compute mode to EXCLUSIVE_PROCESS") == 8 and
          text.count("func=nvmlDeviceSetComputeMode") == 8, "the refusal is not logged per GPU with NVML's function")
    check(compute_modes(e) == [0] * 8, "modes %s" % compute_modes(e))
    saved = os.path.join(e.state_dir, "mps", "compute-mode")
    check(os.listdir(saved) == [], "modes saved that were never changed: %s" % os.listdir(saved))
    check(e.kill_agent(signal.SIGTERM) == 0, "SIGTERM")
    check("cannot set an MPS GPU's compute mode back" not in e.log_text(), "set back what was never set")


def check_daemon_shm(state, shm):
    """The daemon's /dev/shm is the agent's shm dir, a tmpfs (NVIDIA's /run/nvidia/mps/shm): a file made there is in
    the daemon's /dev/shm (its own mount namespace), and not in the agent's."""
    check(os.stat(shm).st_dev != os.stat(os.path.dirname(shm)).st_dev, "%s is not a mount point" % shm)
    with open("/proc/self/mountinfo") as f:
        check(any(line.split()[4] == shm and " - tmpfs " in line for line in f), "%s is no tmpfs" % shm)
    pid = int(open(state).read().split("pid ")[1].split()[0])
    mark = "gpuslice-test-%d" % os.getpid()
    with open(os.path.join(shm, mark), "w"):
        pass
    try:
        check(os.path.exists("/proc/%d/root/dev/shm/%s" % (pid, mark)), "the daemon's /dev/shm is not %s" % shm)
        check(not os.path.exists("/dev/shm/" + mark), "the host's /dev/shm is the shm dir")
    finally:
        os.unlink(os.path.join(shm, mark))


def kill_and_adopt(e, k, args, text, state, pods, names, mps_res, held_marks):
    """SIGKILL the agent (its MPS daemon, pid in the agent's log text, left running), restart kubelet with
    pods as PodResources and the agent with args; wait for the new agent's lists of names, mps_res's replicas
    Healthy (the daemon adopted), held_marks still true, the daemon's pid in state. Returns fresh(res) (the
    new agent's latest list of res, {ID: health}) and the daemon's pid."""
    pid = int(text.split("pid ")[1].split()[0])
    e.kill_agent(signal.SIGKILL)
    check(os.path.exists("/proc/%d" % pid), "the daemon died with the agent: the test needs it left running")
    k.pods = pods
    k.restart()
    t0 = time.monotonic()
    e.start(*args)

    def fresh(res):
        msgs = [m for m in list(k.law) if m[1] == endpoint(res) and m[0] > t0]
        return {d.ID: d.health for d in msgs[-1][2].devices} if msgs else {}
    k.wait_for(lambda: all(fresh(r) for r in names), 15, "the restarted agent's lists")
    k.wait_for(lambda: set(fresh(mps_res).values()) == {"Healthy"}, 15,
               "MPS replicas Healthy after the restart (the daemon left running adopted)")
    k.wait_for(lambda: held_marks(fresh), 15, "the whole GPU and the fraction still held after the SIGKILL")
    check("pid %d\n" % pid in open(state).read(), "the daemon was not adopted: %r" % open(state).read())
    return fresh, pid


def test_mixed_mps(e):
    """GPUs 0-1 MPS (nvidia.com/gpu.shared, 4 replicas), 2-7 whole and in fractions: one replica, one whole GPU and
    one fraction handed out, no GPU in two modes; after an agent SIGKILL (its daemon left running, as a crashed
    agent leaves it) the restarted agent adopts the daemon, its replicas are Healthy again, and the whole GPU and
    the fraction are still held (PodResources)."""
    interposer = os.path.abspath(os.path.join(e.args.build, "libgpuslice-cuda.so"))
    ctl = os.path.abspath(os.path.join(e.args.build, "sim", "nvidia-cuda-mps-control"))
    cfg = os.path.join(e.tmp, "mps-two.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
                "    - name: nvidia.com/gpu\n      replicas: 4\n      devices: [0, 1]\n")
    args = (cfg, "--resource-profile", "gpuslice", "--interposer", interposer, "--mps-control", ctl)
    e.start(*args)
    names = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "gpuslice.io/gpu-core"]
    e.wait_resources(names)
    k = e.kubelet
    k.wait_for(lambda: all(h == "Healthy" for h, _ in e.devices("nvidia.com/gpu.shared").values()), 15,
               "MPS replicas Healthy once the daemon serves")
    whole, shared, core = (e.devices(r) for r in names)
    by = replicas_by_gpu(shared)
    core_gpus = {i.split("::")[0] for i in core}
    check(len(shared) == 8 and len(by) == 2 and len(whole) == 6, "shared %d, whole %d" % (len(shared), len(whole)))
    check(not set(by) & set(whole) and not core_gpus & set(by), "an MPS GPU also whole or in fractions")
    state = os.path.join(e.state_dir, "mps", "pipe", "gpuslice-sim-mps")
    text = open(state).read()
    check("pinned 0 " in text and "pinned 1 " in text and "pinned 2 " not in text, "pinned limits: %r" % text)
    sh, w = sorted(shared), sorted(whole)
    c = e.alloc("nvidia.com/gpu.shared", [sh[0]]).container_responses[0]
    check(c.envs.get("CUDA_MPS_PIPE_DIRECTORY") == "/mps/nvidia.com/gpu.shared/pipe", "env %s" % dict(c.envs))
    e.alloc("nvidia.com/gpu", [w[0]])
    cores = sorted((i for i in core if i.startswith(w[1] + "::")), key=lambda i: int(i.split("-")[-1]))[:30]
    e.alloc("gpuslice.io/gpu-core", cores)
    for bad, res in ((by and sorted(by)[0], "nvidia.com/gpu"), (sorted(by)[0] + "::core-0", "gpuslice.io/gpu-core")):
        e.expect_error(lambda: e.alloc(res, [bad]), grpc.StatusCode.INVALID_ARGUMENT, "")

    def held_marks(lists=lambda r: {i: h for i, (h, _) in e.devices(r).items()}):
        return (lists("nvidia.com/gpu").get(w[1]) == "Unhealthy" and  # fractions of it are out
                all(h == "Unhealthy" for i, h in lists("gpuslice.io/gpu-core").items()
                    if i.startswith(w[0] + "::")))  # held whole
    k.wait_for(held_marks, 10, "the whole GPU's fractions and the fractional GPU's whole ID Unhealthy")
    rec = os.path.join(e.state_dir, "gpuslice.state")
    k.wait_for(lambda: os.path.exists(rec) and sh[0].encode() in open(rec, "rb").read(), 5, "the replica on record")
    fresh, pid = kill_and_adopt(e, k, args, text, state, [("default", "a", "main", "nvidia.com/gpu.shared", [sh[0]]),
                                                     ("default", "b", "main", "nvidia.com/gpu", [w[0]]),
                                                     ("default", "c", "main", "gpuslice.io/gpu-core", cores)],
                           names, "nvidia.com/gpu.shared", held_marks)
    # gpuslice status names the replica's holder (PodResources), on its GPU's entry
    gpu = REPLICA_RE.match(sh[0]).group(1)

    def replica_holders():
        dev = [d for d in e.status()["devices"] if d["id"] == gpu][0]
        return [(r["id"], r["holder"]["pod"]) for r in dev.get("replicas", []) if r["holder"].get("pod")]
    k.wait_for(lambda: replica_holders() == [(sh[0], "a")], 15, "status: replica %s held by pod a" % sh[0])
    table = subprocess.run([os.path.join(e.args.build, "gpuslice"), "status", "--state-dir", e.state_dir],
                           capture_output=True, text=True, timeout=15).stdout
    check(re.search(r"^\d+\s+%s .*replicas: 1 held \(default/a/main\)$" % re.escape(gpu), table, re.M),
          "the status table does not name the replica's holder:\n%s" % table)
    check(e.kill_agent(signal.SIGTERM) == 0, "SIGTERM")
    check(not os.path.exists("/proc/%d" % pid) or open("/proc/%d/stat" % pid).read().split()[2] == "Z",
          "the adopted daemon still runs after SIGTERM")


def test_mixed_modes(e):
    """All four modes on one node (tests/data/nvidia-config/mixed-modes.yaml, both of NVIDIA's strategies): GPUs 0-1
    time-sliced (nvidia.com/gpu.shared, 4 each), 2-3 MPS clients (nvidia.com/gpu.mps, 2 each), 4-7 whole and in
    fractions. One of each handed out; no GPU is listed or handed out two ways; the daemon serves the MPS GPUs only
    (their pinned limits, 100/2 %); a time-sliced replica gets no MPS env or mounts. After an agent SIGKILL (its
    daemon left running) the restarted agent adopts the daemon and every holder still holds, nothing two ways."""
    interposer = os.path.abspath(os.path.join(e.args.build, "libgpuslice-cuda.so"))
    ctl = os.path.abspath(os.path.join(e.args.build, "sim", "nvidia-cuda-mps-control"))
    args = (e.example("mixed-modes.yaml"), "--resource-profile", "gpuslice", "--interposer", interposer,
            "--mps-control", ctl)
    e.start(*args)
    names = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/gpu.mps", "gpuslice.io/gpu-core"]
    e.wait_resources(names)
    k = e.kubelet
    k.wait_for(lambda: all(h == "Healthy" for h, _ in e.devices("nvidia.com/gpu.mps").values()), 15,
               "MPS replicas Healthy once the daemon serves")
    whole, ts, mps, core = (e.devices(r) for r in names)
    ts_by, mps_by = replicas_by_gpu(ts), replicas_by_gpu(mps)
    core_gpus = {i.split("::")[0] for i in core}

    def disjoint(whole, ts_by, mps_by, core_gpus):
        sets = [set(whole), set(ts_by), set(mps_by)]
        check(not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2]), "a GPU listed in two modes")
        check(not core_gpus & (sets[1] | sets[2]), "a replicated GPU also in fractions")
    check(len(ts) == 8 and len(ts_by) == 2 and all(len(v) == 4 for v in ts_by.values()), "time-sliced %s" % ts_by)
    check(len(mps) == 4 and len(mps_by) == 2 and all(len(v) == 2 for v in mps_by.values()), "MPS %s" % mps_by)
    check(len(whole) == 4 and all(UUID_RE.match(i) for i in whole), "whole %s" % sorted(whole))
    disjoint(whole, ts_by, mps_by, core_gpus)
    state = os.path.join(e.state_dir, "mps", "pipe", "gpuslice-sim-mps")
    text = open(state).read()
    check("thread-percentage 50\n" in text, "the MPS set's thread percentage (100/2): %r" % text)
    pinned = set(re.findall(r"^pinned (\d+) ", text, re.M))
    check(pinned == {"2", "3"}, "pinned limits for the MPS GPUs only: %r" % text)
    tsl, ml, w = sorted(ts), sorted(mps), sorted(whole)
    c = e.alloc("nvidia.com/gpu.shared", [tsl[0]]).container_responses[0]
    check(not any(k_.startswith("CUDA_MPS") for k_ in c.envs) and len(c.mounts) == 0,
          "a time-sliced replica got MPS env or mounts: %s %s" % (dict(c.envs), list(c.mounts)))
    check(c.envs.get("NVIDIA_VISIBLE_DEVICES") == tsl[0].split("::")[0], "env %s" % dict(c.envs))
    c = e.alloc("nvidia.com/gpu.mps", [ml[0]]).container_responses[0]
    check(c.envs.get("CUDA_MPS_PIPE_DIRECTORY") == "/mps/nvidia.com/gpu.mps/pipe", "env %s" % dict(c.envs))
    e.alloc("nvidia.com/gpu", [w[0]])
    cores = sorted((i for i in core if i.startswith(w[1] + "::")), key=lambda i: int(i.split("-")[-1]))[:30]
    e.alloc("gpuslice.io/gpu-core", cores)
    ts_gpu, mps_gpu = sorted(ts_by)[0], sorted(mps_by)[0]

    def refused_two_ways():  # every way of handing a GPU out a second way is refused
        for res, bad in (("nvidia.com/gpu", [ts_gpu]), ("nvidia.com/gpu", [mps_gpu]),
                         ("gpuslice.io/gpu-core", [ts_gpu + "::core-0"]), ("gpuslice.io/gpu-core", [mps_gpu + "::core-0"]),
                         ("nvidia.com/gpu.shared", [ml[1]]), ("nvidia.com/gpu.mps", [tsl[1]]),
                         ("nvidia.com/gpu.shared", [w[0] + "::0"]), ("nvidia.com/gpu.mps", [w[1] + "::0"])):
            e.expect_error(lambda: e.alloc(res, bad), grpc.StatusCode.INVALID_ARGUMENT, "")
    refused_two_ways()

    def held_marks(lists=lambda r: {i: h for i, (h, _) in e.devices(r).items()}):
        return (lists("nvidia.com/gpu").get(w[1]) == "Unhealthy" and
                all(h == "Unhealthy" for i, h in lists("gpuslice.io/gpu-core").items() if i.startswith(w[0] + "::")))
    k.wait_for(held_marks, 10, "the whole GPU's fractions and the fractional GPU's whole ID Unhealthy")
    rec = os.path.join(e.state_dir, "gpuslice.state")
    k.wait_for(lambda: os.path.exists(rec) and ml[0].encode() in open(rec, "rb").read() and
               tsl[0].encode() in open(rec, "rb").read(), 5, "both replicas on record")
    fresh, pid = kill_and_adopt(e, k, args, text, state, [("default", "a", "main", "nvidia.com/gpu.shared", [tsl[0]]),
                                                     ("default", "m", "main", "nvidia.com/gpu.mps", [ml[0]]),
                                                     ("default", "b", "main", "nvidia.com/gpu", [w[0]]),
                                                     ("default", "c", "main", "gpuslice.io/gpu-core", cores)],
                           names, "nvidia.com/gpu.mps", held_marks)
    disjoint(fresh("nvidia.com/gpu"), replicas_by_gpu(fresh("nvidia.com/gpu.shared")),
             replicas_by_gpu(fresh("nvidia.com/gpu.mps")), {i.split("::")[0] for i in fresh("gpuslice.io/gpu-core")})
    refused_two_ways()

    def holders():
        out = {}
        for d in e.status()["devices"]:
            for r in d.get("replicas", []):
                if r["holder"].get("pod"):
                    out[r["id"]] = r["holder"]["pod"]
        return out
    k.wait_for(lambda: holders() == {tsl[0]: "a", ml[0]: "m"}, 15, "status: each replica's holder")
    check(e.kill_agent(signal.SIGTERM) == 0, "SIGTERM")


def test_mps_cdi(e):
    """deviceListStrategy cdi (NVIDIA's cdi-cri): the MPS client's environment and mounts come with the CDI names
    in the Allocate answer, as NVIDIA's plugin answers in its CDI modes (the CDI spec carries the devices only)."""
    e.env["GPUSLICE_CDI_SPEC"] = os.path.join(e.tmp, "cdi", "gpuslice.json")
    start_mps(e, "--device-list-strategy", "cdi")
    ids = sorted(e.devices("nvidia.com/gpu"))
    c = e.alloc("nvidia.com/gpu", [ids[0]]).container_responses[0]
    uuid = REPLICA_RE.match(ids[0]).group(1)
    check([d.name for d in c.cdi_devices] == ["gpuslice.io/gpu=" + uuid], "CDI names %s" % list(c.cdi_devices))
    check(dict(c.envs) == {"CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe"}, "env %s" % dict(c.envs))
    mounts = {m.container_path: m.host_path for m in c.mounts}
    check(mounts == {"/mps/nvidia.com/gpu/pipe": os.path.join(e.state_dir, "mps", "pipe"),
                     "/dev/shm": os.path.join(e.state_dir, "mps", "shm")}, "mounts %s" % mounts)


def test_mps_podman(e):
    """The Allocate answer of an MPS replica run by Podman (test_share.podman_flags: -e, --mount, --device): the
    container is a client of the agent's daemon through the mounted pipe dir — from its own PID namespace — so
    the simulated driver holds it to the pinned limit (2 GiB fits, 3 GiB is out of memory), its /dev/shm is the
    daemon's shm tmpfs (a file written there is in <state-dir>/mps/shm); the same container without the answer's
    environment and mounts gets its 3 GiB."""
    import shutil
    import tempfile
    import test_share
    setup = os.path.join(e.args.source, "tests", "integration", "podman-setup.sh")
    r = subprocess.run([setup], capture_output=True, text=True, timeout=300)
    if r.returncode == 77:
        raise agent_fixture.Skip(r.stderr.strip())
    check(r.returncode == 0, "podman setup failed: %s" % r.stderr)
    image = r.stdout.strip()
    workload = os.path.join(e.args.build, "sim", "gpuslice-sim-workload")
    root = tempfile.mkdtemp(prefix="gpuslice-mps-host-", dir="/dev")
    os.makedirs(os.path.join(root, "dev"))
    for minor in range(8):
        os.mknod(os.path.join(root, "dev", "nvidia%d" % minor), 0o666 | 0o020000, os.makedev(195, minor))
    for n, minor in (("nvidiactl", 255), ("nvidia-uvm", 0)):
        os.mknod(os.path.join(root, "dev", n), 0o666 | 0o020000, os.makedev(195 if minor else 510, minor))
    name = "gpuslice-mps-%d" % os.getpid()
    try:
        e.dev_root = root
        start_mps(e)
        ids = sorted(e.devices("nvidia.com/gpu"))
        resp = e.alloc("nvidia.com/gpu", [ids[0]]).container_responses[0]
        flags = test_share.podman_flags(resp, e.args.build, e.dev_root)
        sim = os.path.join(e.args.build, "sim")
        state = e.env["GPUSLICE_SIM_STATE"]
        plumbing = ["-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro", "-v", "/usr/lib:/usr/lib:ro",
                    "-v", "%s:%s:ro" % (sim, sim), "-v", "%s:%s:ro" % (e.args.topology, e.args.topology),
                    "-v", "%s:%s" % (state, state), "-e", "GPUSLICE_SIM_NODE=" + e.args.topology,
                    "-e", "GPUSLICE_SIM_STATE=" + state, "-e", "LD_LIBRARY_PATH=" + sim,
                    "-e", "CUDA_VISIBLE_DEVICES=" + resp.envs["NVIDIA_VISIBLE_DEVICES"]]

        def run(argv, with_answer=True):
            base = ["timeout", "60", "podman", "run", "--rm", "--network", "none", "--name", name]
            base += flags if with_answer else [f for d in resp.devices for f in (
                "--device", "%s%s:%s:%s" % (root, d.host_path, d.container_path, d.permissions))]
            return subprocess.run(base + plumbing + [image] + argv, capture_output=True, text=True, timeout=90)

        wl = [workload, "--gpu", "0", "--seconds", "0", "--mem"]
        r = run(wl + ["2GiB"])
        check(r.returncode == 0, "2 GiB under the 2.4 GiB pinned limit: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
        r = run(wl + ["3GiB"])
        check(r.returncode == 3, "3 GiB past the pinned limit: rc %d, want 3\n%s%s" % (r.returncode, r.stdout, r.stderr))
        r = run(["sh", "-c", "echo in-podman >/dev/shm/gpuslice-mark && grep ' /dev/shm ' /proc/self/mounts"])
        shm = os.path.join(e.state_dir, "mps", "shm")
        check(r.returncode == 0 and " tmpfs " in r.stdout, "/dev/shm in the container: %s %s" % (r.stdout, r.stderr))
        with open(os.path.join(shm, "gpuslice-mark")) as f:
            check(f.read().strip() == "in-podman", "the container's /dev/shm is not the daemon's shm dir")
        r = run(wl + ["3GiB"], with_answer=False)
        check(r.returncode == 0, "control without the answer's env and mounts: rc %d\n%s%s" % (
            r.returncode, r.stdout, r.stderr))
        print("podman: an MPS client in a container, 2 GiB fits, 3 GiB refused under the 2.4 GiB pinned limit")
    finally:
        subprocess.run(["timeout", "30", "podman", "rm", "-f", "-t", "0", name], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def scheduler_filter(e, snapshot, pods):
    """`gpuslice scheduler --snapshot` on what the stand-in holds: the filter's answer to each pod for node
    ts-node, and the cluster JSON."""
    import json
    import socket
    import urllib.request
    snap = os.path.join(e.tmp, "snapshot.json")
    with open(snap, "w") as f:
        json.dump(snapshot, f)
    port = free_port()
    log = open(os.path.join(e.tmp, "scheduler.log"), "w+")
    proc = subprocess.Popen([os.path.join(e.args.build, "gpuslice"), "scheduler", "--snapshot", snap,
                             "--address", "127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)

    def post(path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=data,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=20) as r:
            return json.loads(r.read().decode())
    try:
        deadline = time.time() + 30
        while True:
            check(proc.poll() is None, "scheduler exited early")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                check(time.time() < deadline, "scheduler did not listen")
                time.sleep(0.1)
        answers = [post("/filter", {"Pod": p, "Nodes": None, "NodeNames": ["ts-node"]}) for p in pods]
        return answers, post("/api/v1/cluster")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.seek(0)
        print(log.read()[-2000:])


def whole_pod(name, n):
    return {"metadata": {"name": name, "namespace": "default", "uid": "uid-" + name, "resourceVersion": "1"},
            "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(n)}}}]}}


def test_annotation(e):
    """The node annotation gpuslice.io/gpus names each time-sliced GPU's mode, replicas and replicas held (a
    replica allocated shows as held), and the scheduler extender on that annotation never offers a time-sliced
    GPU whole: of 8 GPUs, 2 time-sliced, a pod of 6 whole GPUs fits, one of 7 is refused with the GPU named."""
    import json
    api = kube_standin.StandIn().start()
    try:
        kubeconfig = api.kubeconfig(os.path.join(e.tmp, "kubeconfig"))
        e.env["NODE_NAME"] = "ts-node"
        e.env.pop("KUBERNETES_SERVICE_HOST", None)
        api.store.put("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ts-node"},
                                "status": {"capacity": {"cpu": "8"}}})

        def gpus():
            node = api.store.get("nodes", "ts-node") or {}
            ann = node.get("metadata", {}).get("annotations", {}).get("gpuslice.io/gpus")
            return json.loads(ann)["gpus"] if ann else None

        e.start(e.example("mixed-gpus.yaml"), "--kubeconfig", kubeconfig)
        e.wait_resources(["nvidia.com/gpu", "nvidia.com/gpu.shared"])
        e.kubelet.wait_for(lambda: gpus() is not None, 15, "the annotation published")
        g = gpus()
        sliced = [x for x in g if "sharing" in x]
        check(len(g) == 8 and len(sliced) == 2, "annotation GPUs %s" % g)
        check(all(x["sharing"] == "time-slicing" and x["replicas"] == 4 and x["held"] == 0 for x in sliced),
              "sliced %s" % sliced)
        check(all(x["health"] == "ok" for x in g), "health %s" % g)
        check(not any("replicas" in x or "held" in x for x in g if x not in sliced), "whole GPUs %s" % g)
        by = replicas_by_gpu(e.devices("nvidia.com/gpu.shared"))
        check({x["uuid"] for x in sliced} == set(by), "the annotation's sliced GPUs %s, the replicas' %s" % (
            [x["uuid"] for x in sliced], sorted(by)))
        # a replica allocated: held 1 on its GPU (Allocate records it; the publisher sees the record change)
        first = sorted(by)[0]
        e.alloc("nvidia.com/gpu.shared", ["%s::%d" % (first, by[first][0])])
        e.kubelet.wait_for(lambda: [x.get("held") for x in gpus() if x["uuid"] == first] == [1], 15,
                           "held 1 published (%s)" % gpus())
        node = api.store.get("nodes", "ts-node")
        top = json.loads(node["metadata"]["annotations"]["gpuslice.io/gpus"])
        check(top.get("replica_resource") == "nvidia.com/gpu.shared", "replica_resource %s" % top.get("replica_resource"))
        print("annotation: %s" % node["metadata"]["annotations"]["gpuslice.io/gpus"][:400])
        # the extender on this node: 6 whole GPUs fit (the untouched ones), 7 never (2 are replicas')
        (six, seven), cluster = scheduler_filter(e, {"nodes": [node], "pods": []},
                                                 [whole_pod("six", 6), whole_pod("seven", 7)])
        check(six["NodeNames"] == ["ts-node"] and six["Error"] == "", "6 whole GPUs: %s" % six)
        why = seven["FailedNodes"].get("ts-node", "")
        check(seven["NodeNames"] == [] and "6 of 8 GPUs free whole" in why and "time-sliced (replicas)" in why
              and "ts-node" in seven["FailedAndUnresolvableNodes"], "7 whole GPUs: %s" % seven)
        held = [x for n in cluster["nodes"] for x in n["gpus"] if x["uuid"] == first]
        check(len(held) == 1 and held[0].get("sharing") == "time-slicing" and held[0].get("replicas") == 4 and
              held[0].get("replicas_held") == 1 and "time-slicing: 1 of 4 replicas held" in held[0]["health"],
              "cluster JSON GPU %s" % held)
        print("extender: 6 whole GPUs fit; 7: %s" % why)
    finally:
        api.stop()


def test_annotation_both(e):
    """Both strategies on one node, the time-sliced set keeping nvidia.com/gpu (GPUs 0-1, 4 replicas each), the MPS set
    as nvidia.com/gpu.mps (GPUs 2-3, 2 each): the annotation names the node's replica resource nvidia.com/gpu and
    each MPS GPU its own; the extender counts an nvidia.com/gpu request against the 4 GPUs free whole and the 8
    time-sliced replicas only (12 fit, 13 do not: kubelet never gives an MPS replica for nvidia.com/gpu)."""
    import json
    api = kube_standin.StandIn().start()
    try:
        kubeconfig = api.kubeconfig(os.path.join(e.tmp, "kubeconfig"))
        e.env["NODE_NAME"] = "ts-node"
        e.env.pop("KUBERNETES_SERVICE_HOST", None)
        api.store.put("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ts-node"},
                                "status": {"capacity": {"cpu": "8"}}})

        def ann():
            node = api.store.get("nodes", "ts-node") or {}
            a = node.get("metadata", {}).get("annotations", {}).get("gpuslice.io/gpus")
            return json.loads(a) if a else None

        cfg = os.path.join(e.tmp, "both.yaml")
        with open(cfg, "w") as f:
            f.write("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n"
                    "      replicas: 4\n      devices: [0, 1]\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n"
                    "      rename: nvidia.com/gpu.mps\n      replicas: 2\n      devices: [2, 3]\n")
        ctl = os.path.join(e.args.build, "sim", "nvidia-cuda-mps-control")
        e.start(cfg, "--mps-control", ctl, "--kubeconfig", kubeconfig)
        e.wait_resources(["nvidia.com/gpu", "nvidia.com/gpu.mps"])
        e.kubelet.wait_for(lambda: ann() is not None and sum("sharing" in g for g in ann()["gpus"]) == 4, 15,
                           "the annotation published (%s)" % ann())
        a = ann()
        check(a.get("replica_resource") == "nvidia.com/gpu", "replica_resource %s" % a.get("replica_resource"))
        own = {g["i"]: g.get("replica_resource") for g in a["gpus"] if "sharing" in g}
        check(own == {0: None, 1: None, 2: "nvidia.com/gpu.mps", 3: "nvidia.com/gpu.mps"}, "per GPU %s" % own)
        node = api.store.get("nodes", "ts-node")
        (fit, over), _ = scheduler_filter(e, {"nodes": [node], "pods": []}, [whole_pod("fit", 12), whole_pod("over", 13)])
        check(fit["NodeNames"] == ["ts-node"], "12 nvidia.com/gpu on 4 whole GPUs and 8 replicas: %s" % fit)
        why = over["FailedNodes"].get("ts-node", "")
        check(over["NodeNames"] == [] and "8 free nvidia.com/gpu replicas" in why and "4 GPUs free whole" in why,
              "13: %s" % over)
        print("extender: 12 fit; 13: %s" % why)
    finally:
        api.stop()


def test_annotation_mps(e):
    """NVIDIA's MPS example (every GPU, 10 replicas as nvidia.com/gpu): the annotation names each GPU's mode mps and
    the replicas' resource nvidia.com/gpu and the replicas held; the extender counts nvidia.com/gpu against the free
    replicas (of 80, 21 held: 59 fit, 60 do not) and refuses a share, naming the MPS GPUs."""
    import json
    api = kube_standin.StandIn().start()
    try:
        kubeconfig = api.kubeconfig(os.path.join(e.tmp, "kubeconfig"))
        e.env["NODE_NAME"] = "ts-node"
        e.env.pop("KUBERNETES_SERVICE_HOST", None)
        api.store.put("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ts-node"},
                                "status": {"capacity": {"cpu": "8"}}})

        def ann():
            node = api.store.get("nodes", "ts-node") or {}
            a = node.get("metadata", {}).get("annotations", {}).get("gpuslice.io/gpus")
            return json.loads(a) if a else None

        start_mps(e, "--kubeconfig", kubeconfig)
        k = e.kubelet
        ids = sorted(e.devices("nvidia.com/gpu"))
        for at in range(0, 21, 7):  # 21 containers, a replica each (at most 8 containers a call)
            e.alloc("nvidia.com/gpu", *[[i] for i in ids[at:at + 7]])
        k.wait_for(lambda: ann() and sum(g.get("held", 0) for g in ann()["gpus"]) == 21, 15,
                   "21 held published (%s)" % ann())
        a = ann()
        check(a.get("replica_resource") == "nvidia.com/gpu", "replica_resource %s" % a.get("replica_resource"))
        check(all(g.get("sharing") == "mps" and g.get("replicas") == 10 for g in a["gpus"]), "gpus %s" % a["gpus"])
        node = api.store.get("nodes", "ts-node")
        share = {"metadata": {"name": "share", "namespace": "default", "uid": "uid-share", "resourceVersion": "1"},
                 "spec": {"containers": [{"name": "main",
                                          "resources": {"limits": {"gpuslice.io/gpu-memory": "4"}}}]}}
        (eight, many, sh), _ = scheduler_filter(e, {"nodes": [node], "pods": []},
                                                [whole_pod("fit", 59), whole_pod("many", 60), share])
        check(eight["NodeNames"] == ["ts-node"], "59 nvidia.com/gpu on 59 free replicas: %s" % eight)
        why = many["FailedNodes"].get("ts-node", "")
        check(many["NodeNames"] == [] and "59 free nvidia.com/gpu replicas" in why, "60: %s" % many)
        why = sh["FailedNodes"].get("ts-node", "")
        check(sh["NodeNames"] == [] and "MPS-shared (replicas)" in why, "a share: %s" % sh)
        print("extender: 59 fit on 59 free replicas; 60: %s; a share: %s" % (many["FailedNodes"]["ts-node"], why))
    finally:
        api.stop()


def test_sighup(e):
    """SIGHUP builds the config again with the NVIDIA file's flags on top: its deviceIDStrategy still holds."""
    cfg = os.path.join(e.tmp, "index.yaml")
    with open(cfg, "w") as f:
        f.write("version: v1\nflags:\n  plugin:\n    deviceIDStrategy: index\nsharing:\n  timeSlicing:\n"
                "    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n")
    e.start(cfg)
    e.wait_resources(["nvidia.com/gpu"])
    ids = sorted(e.devices("nvidia.com/gpu"))
    before = e.alloc("nvidia.com/gpu", [ids[0]]).container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"]
    check(before.isdigit(), "index strategy: %s" % before)
    e.agent.send_signal(signal.SIGHUP)
    e.kubelet.wait_for(lambda: "config reloaded" in e.log_text(), 10, "the reload")
    after = e.alloc("nvidia.com/gpu", [ids[1]]).container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"]
    check(after.isdigit(), "after SIGHUP the NVIDIA file's deviceIDStrategy is lost: %s" % after)


TESTS = {name[5:].replace("_", "-"): fn for name, fn in globals().items() if name.startswith("test_")}


if __name__ == "__main__":
    run_main(TESTS, TS, "timeslice-", TEST_TIMEOUT_S)
