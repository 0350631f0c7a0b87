# SPDX-License-Identifier: Apache-2.0
"""Integration tests of GPU sharing in `gpuslice node` (docs/sharing.md) against the kubelet stand-in.

The real agent on the simulated seed node (8 x Tesla P40, 24 GiB) with a fractional profile; the
stand-in plays kubelet's part for one container at a time: for each resource, in the order the
test gives, GetPreferredAllocation over the IDs kubelet would consider available (healthy, not
handed out), then Allocate with the answer. Usage as test_agent.py:

    /usr/bin/python3 test_share.py --build DIR --source DIR --topology FILE TEST

`podman` runs the Allocate answer for real: mounts, environment and device specs become podman run
flags; the container runs gpuslice-sim-workload against the simulated CUDA driver with the
interposer preloaded, and must get CUDA_ERROR_OUT_OF_MEMORY past its limit. Exit 77 = skipped
(podman, runc or busybox not installed).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet_standin  # noqa: E402
import agent_fixture  # noqa: E402
import test_agent  # noqa: E402
from test_agent import check  # noqa: E402

TEST_TIMEOUT_S = 120
GIB = 1 << 30
MIB = 1 << 20
P40 = 24 * GIB

PROFILES = {
    # profile: (core resource, memory resource, memory unit)
    "gpuslice": ("gpuslice.io/gpu-core", "gpuslice.io/gpu-memory", 256 * MIB),
    "tencent": ("tencent.com/vcuda-core", "tencent.com/vcuda-memory", 256 * MIB),
    "aliyun": (None, "aliyun.com/gpu-mem", GIB),
}
ID_RE = re.compile(r"^(GPU-[0-9a-f-]{36})::(core|mem)-(0|[1-9][0-9]*)$")


Skip = agent_fixture.Skip


def endpoint(resource):
    return "gpuslice-%s.sock" % resource.replace("/", "-")


class Share(test_agent.Env):
    def __init__(self, args, stubs):
        super().__init__(args, stubs)
        self.taken = {}  # resource -> set of IDs handed out (kubelet's books)
        self.profile = None
        self.interposer = os.path.abspath(os.path.join(args.build, "libgpuslice-cuda.so"))

    def start_share(self, profile="gpuslice", *extra):
        self.profile = profile
        self.core, self.mem, self.unit = PROFILES[profile]
        self.start_agent("--resource-profile", profile, "--interposer", self.interposer, *extra)
        return self.registered_all()

    def resources(self):
        return ["nvidia.com/gpu"] + [r for r in (self.core, self.mem) if r]

    def registered_all(self, timeout=10):
        want = self.resources()
        k = self.kubelet
        k.wait_for(lambda: set(want) <= {r.request.resource_name for r in k.registrations}, timeout,
                   "registration of %s" % want)
        k.wait_for(lambda: all(k.last_ids(endpoint(r)) is not None for r in want), timeout,
                   "a ListAndWatch message from every resource")
        return {r.request.resource_name: r for r in k.registrations}

    def devices(self, resource):
        return self.kubelet.last_devices(endpoint(resource))

    def stub_of(self, resource):
        return self.kubelet.plugin_stub(endpoint(resource))[0]

    def prefer_r(self, resource, available, size, must=()):
        req = self.pb.PreferredAllocationRequest()
        req.container_requests.add(available_deviceIDs=available, must_include_deviceIDs=list(must),
                                   allocation_size=size)
        return list(self.stub_of(resource).GetPreferredAllocation(req, timeout=5).container_responses[0].deviceIDs)

    def allocate_r(self, resource, *containers):
        req = self.pb.AllocateRequest()
        for ids in containers:
            req.container_requests.add(devices_ids=ids)
        resp = self.stub_of(resource).Allocate(req, timeout=5)
        for ids in containers:
            self.taken.setdefault(resource, set()).update(ids)
        return resp

    def available(self, resource):
        devs = self.devices(resource)
        return [i for i, (h, _) in devs.items() if h == "Healthy" and i not in self.taken.get(resource, set())]

    def admit(self, *requests):
        """One container, as kubelet admits it: per (resource, size) in this order, the preferred
        allocation over what is available, then Allocate with it. Returns {resource: (ids, response)}."""
        out = {}
        for resource, size in requests:
            ids = self.prefer_r(resource, self.available(resource), size)
            check(len(ids) == size, "preferred %d IDs of %s, wanted %d" % (len(ids), resource, size))
            out[resource] = (ids, self.allocate_r(resource, ids).container_responses[0])
        return out

    def wait_health(self, resource, pred, what, timeout=10):
        self.kubelet.wait_for(lambda: pred(self.devices(resource) or {}), timeout, what)


def gpu_of(dev_id):
    m = ID_RE.match(dev_id)
    check(m is not None, "device ID %r does not name its GPU" % dev_id)
    return m.group(1)


def one_gpu(ids):
    gpus = {gpu_of(i) for i in ids}
    check(len(gpus) == 1, "IDs span GPUs %s" % sorted(gpus))
    return gpus.pop()


def parse_limits(text):
    """The limits file (src/interposer/limits.h, version 1) as a dict; strict about what we write."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    check(lines[0] == "gpuslice-limits 1", "first line %r" % lines[0])
    out = {"devices": []}
    for ln in lines[1:]:
        f = ln.split()
        if f[0] == "device":
            d = {"index": int(f[1])}
            for kv in f[2:]:
                k, v = kv.split("=", 1)
                d[k] = v if k == "uuid" else int(v)
            out["devices"].append(d)
        else:
            out[f[0]] = f[1]
    return out


def limits_of(resp):
    """The host limits file an Allocate answer mounts, parsed, and the mounts by container path."""
    mounts = {m.container_path: (m.host_path, m.read_only) for m in resp.mounts}
    host, ro = mounts["/run/gpuslice/limits"]
    check(ro, "the limits file must be mounted read-only")
    with open(host) as f:
        return parse_limits(f.read()), mounts


# ---- tests ----

def registration(e, profile):
    regs = e.start_share(profile)
    check(sorted(regs) == sorted(e.resources()), "registered %s" % sorted(regs))
    whole = e.devices("nvidia.com/gpu")
    uuids = sorted(whole)
    check(len(uuids) == 8, "whole GPUs %d" % len(uuids))
    if e.core:
        devs = e.devices(e.core)
        check(len(devs) == 800, "%s: %d IDs, want 100 per GPU" % (e.core, len(devs)))
        for u in uuids:
            want = {"%s::core-%d" % (u, n) for n in range(100)}
            check(want <= set(devs), "core IDs of %s missing" % u)
            check({devs[i][1][0] for i in want} == {whole[u][1][0]}, "core IDs carry their GPU's NUMA node")
    devs = e.devices(e.mem)
    per_gpu = P40 // e.unit
    check(len(devs) == 8 * per_gpu, "%s: %d IDs, want %d per GPU" % (e.mem, len(devs), per_gpu))
    check("%s::mem-%d" % (uuids[0], per_gpu - 1) in devs and "%s::mem-%d" % (uuids[0], per_gpu) not in devs,
          "memory IDs are numbered 0..%d" % (per_gpu - 1))
    for resource in e.resources():
        for i, (h, _) in e.devices(resource).items():
            check(len(i) <= 63, "ID longer than 63 characters: %s" % i)
            check(h == "Healthy", "%s unhealthy at start" % i)
    st = e.status()
    check({r["resource"] for r in st["resources"]} == set(e.resources()), "status resources %s" % st["resources"])
    check(all(d["memory_ids"] == per_gpu for d in st["devices"]), "status memory_ids")


def test_share_register_gpuslice(e):
    registration(e, "gpuslice")


def test_share_register_tencent(e):
    registration(e, "tencent")


def test_share_register_aliyun(e):
    registration(e, "aliyun")
    # aliyun's gpushare pod specs ask for memory alone: it lands on one GPU, with no compute limit
    got = e.admit(("aliyun.com/gpu-mem", 3))
    ids, resp = got["aliyun.com/gpu-mem"]
    gpu = one_gpu(ids)
    lim, _ = limits_of(resp)
    check(lim["devices"] == [{"index": 0, "uuid": gpu, "memory": 3 * GIB, "core": 100}], "limits %s" % lim)
    check(resp.envs["NVIDIA_VISIBLE_DEVICES"] == gpu, "env %s" % dict(resp.envs))


def pair(e, first, second):
    sizes = {e.core: 30, e.mem: 16}  # 30 % and 4 GiB
    got = e.admit((first, sizes[first]), (second, sizes[second]))
    core_ids, core_resp = got[e.core]
    mem_ids, mem_resp = got[e.mem]
    gpu = one_gpu(core_ids)
    check(one_gpu(mem_ids) == gpu, "core on %s but memory on %s" % (gpu, one_gpu(mem_ids)))
    with e.kubelet.cond:  # kubelet lists a container's devices as soon as their Allocate answered
        pod = "pair-%d" % len(e.kubelet.pods)
        e.kubelet.pods = e.kubelet.pods + [("ml", pod, "main", e.core, core_ids), ("ml", pod, "main", e.mem, mem_ids)]
    # Both answers name the same limits dir, so kubelet's merge of the two is consistent.
    lim1, m1 = limits_of(core_resp)
    lim2, m2 = limits_of(mem_resp)
    check(m1 == m2, "mounts differ: %s vs %s" % (m1, m2))
    check(dict(core_resp.envs) == dict(mem_resp.envs), "envs differ: %s vs %s" % (dict(core_resp.envs),
                                                                                  dict(mem_resp.envs)))
    check(lim1 == lim2, "limits differ")
    check(lim1["devices"] == [{"index": 0, "uuid": gpu, "memory": 4 * GIB, "core": 30}], "limits %s" % lim1)
    check(lim1["core-policy"] == "hard" and lim1["region"] == "/run/gpuslice/shm/region", "limits %s" % lim1)
    env = dict(core_resp.envs)
    check(env["NVIDIA_VISIBLE_DEVICES"] == gpu, "NVIDIA_VISIBLE_DEVICES %s" % env)
    check(env["LD_PRELOAD"] == "/run/gpuslice/lib/libcuda.so.1", "LD_PRELOAD %s" % env)
    check(env["GPUSLICE_LIMITS"] == "/run/gpuslice/limits", "GPUSLICE_LIMITS %s" % env)
    check(m1["/run/gpuslice/lib/libcuda.so.1"] == (e.interposer, True), "interposer mount %s" % m1)
    pre, ro = m1["/etc/ld.so.preload"]
    check(ro and open(pre).read() == "/run/gpuslice/lib/libcuda.so.1\n", "ld.so.preload mount %s" % (m1["/etc/ld.so.preload"],))
    # no real NVML under the driver root (here the machine's /, no libnvidia-ml.so.<driver>): no stand-in, said once
    check("/run/gpuslice/lib/libnvidia-ml.so.1" not in m1 and "/run/gpuslice/driver/libnvidia-ml.so.1" not in m1,
          "a stand-in without its real NVML: %s" % m1)
    check(open(e.logs[-1]).read().count("limited containers get no NVML stand-in") == 1,
          "the missing NVML stand-in is not logged once")
    shm, ro = m1["/run/gpuslice/shm"]
    check(not ro and os.path.isdir(shm) and shm.startswith(os.path.join(e.state_dir, "containers") + "/"),
          "shm mount %s" % (m1["/run/gpuslice/shm"],))
    specs = sorted(d.container_path for d in core_resp.devices)
    st = {d["id"]: d for d in e.status()["devices"]}
    check("/dev/nvidia%d" % st[gpu]["minor"] in specs and "/dev/nvidiactl" in specs, "device specs %s" % specs)
    return gpu


def test_share_pair_core_first(e):
    e.start_share()
    gpu = pair(e, e.core, e.mem)
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "status", "--state-dir", e.state_dir],
                       capture_output=True, text=True, timeout=15)
    check(r.returncode == 0 and any(gpu in ln and "shared: core 30 %, memory 4096 MiB" in ln
                                    for ln in r.stdout.splitlines()), "status table:\n" + r.stdout)
    check("resource gpuslice.io/gpu-memory  registered yes" in r.stdout, "status table:\n" + r.stdout)
    # a second container, memory first this time, joins nobody else's record
    pair(e, e.mem, e.core)
    check(len(os.listdir(os.path.join(e.state_dir, "containers"))) == 2, "one limits dir per container")


def test_share_pair_memory_first(e):
    e.start_share()
    pair(e, e.mem, e.core)


def test_share_binpack(e):
    e.start_share("gpuslice", "--allocation-policy", "binpack")  # frag is the default
    g1 = pair(e, e.core, e.mem)
    g2 = pair(e, e.mem, e.core)
    check(g1 == g2, "binpack put the second container on %s, not with the first on %s" % (g2, g1))
    # 30+30+50 > 100: the third goes elsewhere
    got = e.admit((e.core, 50), (e.mem, 8))
    check(one_gpu(got[e.core][0]) != g1, "a GPU was overcommitted")


def test_share_spread(e):
    e.start_share("gpuslice", "--allocation-policy", "spread")
    gpus = [pair(e, e.core, e.mem) for _ in range(3)]
    check(len(set(gpus)) == 3, "spread put containers on %s" % gpus)


def test_share_frag(e):
    # sharing.policy frag: the extender's GPU choice (sched_pack_share_gpu) against the shares placed here
    # (all 30 %): two on the first GPU, then a third would leave 10 % no 30 % share can use there, so it
    # goes to a fresh GPU, where binpack (test_share_binpack) fills the first GPU to 90 %.
    e.start_share("gpuslice", "--allocation-policy", "frag")
    gpus = [pair(e, e.core, e.mem) for _ in range(3)]
    check(gpus[0] == gpus[1] and gpus[2] != gpus[0], "frag put 30 %% shares on %s" % gpus)


def test_share_whole_cores(e):
    e.start_share()
    got = e.admit((e.core, 200))
    ids, resp = got[e.core]
    gpus = sorted({gpu_of(i) for i in ids})
    check(len(gpus) == 2 and all(sum(1 for i in ids if gpu_of(i) == g) == 100 for g in gpus),
          "200 %% must be two whole GPUs: %s" % gpus)
    # topology-aware: the pair shares a PCIe switch (same NUMA node at least)
    numa = e.devices("nvidia.com/gpu")
    check(numa[gpus[0]][1] == numa[gpus[1]][1], "whole-GPU pair crosses sockets")
    lim, _ = limits_of(resp)
    check(sorted(d["uuid"] for d in lim["devices"]) == gpus and all(d["core"] == 100 for d in lim["devices"]),
          "limits %s" % lim)
    check(set(resp.envs["NVIDIA_VISIBLE_DEVICES"].split(",")) == set(gpus), "env %s" % dict(resp.envs))


def test_share_reject(e):
    e.start_share()
    INVALID = grpc.StatusCode.INVALID_ARGUMENT
    uuids = sorted(e.devices("nvidia.com/gpu"))
    a, b = uuids[0], uuids[1]
    # preferred: more than a GPU and not whole GPUs; more memory than a GPU has
    e.expect_error(lambda: e.prefer_r(e.core, e.available(e.core), 150), INVALID, "multiple of 100")
    e.expect_error(lambda: e.prefer_r(e.mem, e.available(e.mem), 97), INVALID, "exceeds one GPU")
    # Allocate: core IDs spanning two GPUs; more than 100 that are not whole GPUs; memory spanning
    span = ["%s::core-%d" % (a, n) for n in range(10)] + ["%s::core-%d" % (b, n) for n in range(10)]
    msg = e.expect_error(lambda: e.allocate_r(e.core, span), INVALID, "span 2 GPUs")
    check(a in msg and b in msg, "the error names both GPUs: %s" % msg)
    odd = ["%s::core-%d" % (a, n) for n in range(100)] + ["%s::core-%d" % (b, n) for n in range(50)]
    e.expect_error(lambda: e.allocate_r(e.core, odd), INVALID, "not a multiple of 100")
    big = ["%s::mem-%d" % (u, n) for u in (a, b) for n in range(96)]
    e.expect_error(lambda: e.allocate_r(e.mem, big), INVALID, "exceeds one GPU")
    e.expect_error(lambda: e.allocate_r(e.core, ["%s::core-100" % a]), INVALID, "unknown")
    e.expect_error(lambda: e.allocate_r(e.core, ["%s::core-07" % a]), INVALID, "unknown")
    e.expect_error(lambda: e.allocate_r(e.core, ["%s::mem-1" % a]), INVALID, "unknown")
    e.expect_error(lambda: e.allocate_r(e.core, ["%s::core-1" % a, "%s::core-1" % a]), INVALID, "twice")
    e.expect_error(lambda: e.allocate_r(e.core, []), INVALID, "no device IDs")
    # a container's second resource on another GPU than its first: refused, naming both
    held = ["%s::core-%d" % (a, n) for n in range(20)]
    e.allocate_r(e.core, held)
    with e.kubelet.cond:  # kubelet lists it as soon as the Allocate answered
        e.kubelet.pods = [("ml", "first", "main", e.core, held)]
    msg = e.expect_error(lambda: e.allocate_r(e.mem, ["%s::mem-%d" % (b, n) for n in range(4)]), INVALID,
                         "must be on one GPU")
    check(a in msg, "error names the first GPU: %s" % msg)
    # nothing was recorded for the refused calls; the agent still serves
    check(e.agent.poll() is None, "agent died")
    st = {d["id"]: d for d in e.status()["devices"]}
    check(st[a]["core_used"] == 20 and st[a]["memory_used_bytes"] == 0 and st[b]["core_used"] == 0,
          "status after refusals: %s %s" % (st[a], st[b]))


def test_share_exclusion(e):
    e.start_share()
    whole = "nvidia.com/gpu"
    uuids = sorted(e.devices(whole))
    a, b = uuids[2], uuids[3]
    INVALID = grpc.StatusCode.INVALID_ARGUMENT
    # A whole GPU handed out: its core and memory IDs turn Unhealthy, the others' stay Healthy.
    e.allocate_r(whole, [a])
    for res in (e.core, e.mem):
        e.wait_health(res, lambda d: all(h == "Unhealthy" for i, (h, _) in d.items() if gpu_of(i) == a),
                      "%s IDs of the whole GPU unhealthy" % res)
        d = e.devices(res)
        check(all(h == "Healthy" for i, (h, _) in d.items() if gpu_of(i) != a), "other GPUs' %s IDs" % res)
    check(all(gpu_of(i) != a for i in e.prefer_r(e.core, [i for i in e.devices(e.core)], 10)),
          "preferred offered a GPU held whole")
    e.expect_error(lambda: e.allocate_r(e.core, ["%s::core-0" % a]), INVALID, "allocated whole")
    # A fraction handed out: the whole GPU turns Unhealthy; whole allocation of it is refused.
    e.allocate_r(e.core, ["%s::core-%d" % (b, n) for n in range(10)])
    e.wait_health(whole, lambda d: d[b][0] == "Unhealthy", "GPU with a fraction out unhealthy as a whole")
    d = e.devices(whole)
    # (a, handed out whole, stays Healthy: kubelet knows it holds it)
    check(sum(1 for h, _ in d.values() if h == "Healthy") == 7 and d[a][0] == "Healthy", "whole list %s" % d)
    e.expect_error(lambda: e.allocate_r(whole, [b]), INVALID, "is shared")
    got = e.stub_of(whole).GetPreferredAllocation(
        e.pb.PreferredAllocationRequest(container_requests=[e.pb.ContainerPreferredAllocationRequest(
            available_deviceIDs=[b, uuids[4]], allocation_size=1)]), timeout=5)
    check(list(got.container_responses[0].deviceIDs) == [uuids[4]], "preferred offered the shared GPU")
    # the fractional side still serves b
    e.allocate_r(e.mem, ["%s::mem-%d" % (b, n) for n in range(4)])


def test_share_grace(e):
    """Issue 10: a fraction is free as soon as PodResources stops listing its container (no 120 s
    grace). An allocation PodResources never listed keeps its grace only while its answer may still be
    on its way to kubelet's books: once kubelet calls the agent again (it records an Allocate answer
    before its next call), an unlisted allocation is freed at the next sync (before: held 120 s)."""
    e.start_share()
    whole = "nvidia.com/gpu"
    got = e.admit((e.core, 30), (e.mem, 8))
    gpu = one_gpu(got[e.core][0])
    e.wait_health(whole, lambda d: d[gpu][0] == "Unhealthy", "the shared GPU unhealthy as a whole")
    with e.kubelet.cond:
        e.kubelet.pods = [("ml", "job", "main", e.core, got[e.core][0]), ("ml", "job", "main", e.mem, got[e.mem][0])]
    e.status()  # a status request makes the agent ask PodResources now: the entries are seen
    other = e.admit((e.core, 80), (e.mem, 8))  # never listed (80 % does not fit beside 30 %)
    gpu2 = one_gpu(other[e.core][0])
    check(gpu2 != gpu, "the second container on the first one's GPU")
    with e.kubelet.cond:
        e.kubelet.pods = []  # the job ended; kubelet has not listed the other container (yet)
    e.status()
    e.wait_health(whole, lambda d: d[gpu][0] == "Healthy", "the GPU of the ended container free again at once",
                  timeout=test_agent.REACT_S)
    # its memory half, the last answer, may not be in kubelet's books yet: it keeps its grace
    d = e.devices(whole)
    check(d[gpu2][0] == "Unhealthy", "the last answer lost its grace before kubelet called again: %s" % d[gpu2][0])
    st = {x["id"]: x for x in e.status()["devices"]}
    check(st[gpu2]["core_used"] == 0 and st[gpu2]["memory_used_bytes"] == 2 * GIB,
          "only the answer kubelet has not moved past is kept: %s" % st[gpu2])
    # kubelet calls again (the next container's GetPreferredAllocation): it has recorded every earlier
    # answer, so what PodResources does not list is not held
    e.prefer_r(whole, sorted(e.available(whole)), 1)
    e.status()
    e.wait_health(whole, lambda d: d[gpu2][0] == "Healthy",
                  "an allocation kubelet moved past without listing it freed at the next sync",
                  timeout=test_agent.REACT_S)


def test_share_restart(e):
    """Agent SIGKILLed and its state file lost: PodResources alone brings the fractions back."""
    e.start_share("gpuslice", "--allocation-policy", "binpack")
    got = e.admit((e.core, 40), (e.mem, 8))
    core_ids, resp = got[e.core]
    mem_ids = got[e.mem][0]
    gpu = one_gpu(core_ids)
    _, mounts = limits_of(resp)
    limits_dir = os.path.dirname(mounts["/run/gpuslice/limits"][0])
    state = os.path.join(e.state_dir, "gpuslice.state")
    e.kubelet.wait_for(lambda: os.path.exists(state), 5, "state file")
    e.kill_agent(signal.SIGKILL)
    os.unlink(state)
    e.kubelet.pods = [("ml", "infer", "main", e.core, core_ids), ("ml", "infer", "main", e.mem, mem_ids)]
    e.kubelet.restart()
    n = len(e.kubelet.registrations)
    e.start_agent("--resource-profile", "gpuslice", "--interposer", e.interposer, "--allocation-policy", "binpack")
    e.kubelet.wait_for(lambda: len(e.kubelet.registrations) >= n + 3, 10, "three registrations after restart")
    st = {d["id"]: d for d in e.status()["devices"]}
    check(st[gpu]["core_used"] == 40 and st[gpu]["memory_used_bytes"] == 2 * GIB, "status %s" % st[gpu])
    e.wait_health("nvidia.com/gpu", lambda d: d.get(gpu, ("",))[0] == "Unhealthy",
                  "the shared GPU stays out of the whole-GPU list")
    check(os.path.isdir(limits_dir), "the limits dir of a live allocation was removed")
    # binpack still knows the GPU is in use: a new container of the same shape joins it (a shape the
    # agent has not seen keeps a whole GPU's room for its partner instead: docs/sharing.md "Placement")
    e.taken = {e.core: set(core_ids), e.mem: set(mem_ids)}
    got = e.admit((e.core, 40), (e.mem, 8))
    check(one_gpu(got[e.core][0]) == gpu, "binpack after restart went elsewhere")


LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def samples(text, name):
    """Every sample of one family as [(labels dict, value)]."""
    out = []
    for ln in text.splitlines():
        if ln.startswith(name + "{"):
            labels, value = ln[len(name) + 1:].rsplit("} ", 1)
            out.append((dict(LABEL_RE.findall(labels)), float(value)))
    return out


def sample_of(text, name, **want):
    got = [v for labels, v in samples(text, name) if all(labels.get(k) == w for k, w in want.items())]
    check(len(got) <= 1, "%s %s: %d samples" % (name, want, len(got)))
    return got[0] if got else None


def test_share_metrics(e):
    """The shares the agent handed out, per container and GPU, on its real /metrics — ours and
    gpu-manager's container_request_gpu_* — named through PodResources."""
    port = test_agent.free_port()
    e.start_share("gpuslice", "--metrics-address", "127.0.0.1:%d" % port, "--sample-interval", "1s",
                  "--metrics-compat", "gpu-manager")
    a = e.admit((e.core, 30), (e.mem, 8))              # 30 %, 2 GiB
    gpu_a = one_gpu(a[e.core][0])
    c = e.admit((e.mem, 4))                            # memory only: 1 GiB, no compute limit
    gpu_c = one_gpu(c[e.mem][0])
    whole = sorted(u for u, (h, _) in e.devices("nvidia.com/gpu").items() if h == "Healthy" and u not in (gpu_a, gpu_c))[0]
    e.allocate_r("nvidia.com/gpu", [whole])
    e.kubelet.pods = [("ml", "infer", "main", e.core, a[e.core][0]), ("ml", "infer", "main", e.mem, a[e.mem][0]),
                      ("web", "cache", "redis", e.mem, c[e.mem][0]),
                      ("ml", "train", "worker", "nvidia.com/gpu", [whole])]
    e.status()  # reconciles with PodResources now rather than in 10 s
    lim = "gpuslice_container_gpu_memory_limit_bytes"
    text = test_agent.scrape(port, lambda t: len(samples(t, lim)) == 3, "three containers' memory limits")
    total = {labels["gpu_uuid"]: v for labels, v in samples(text, "gpuslice_gpu_memory_total_bytes")}
    check(sample_of(text, lim, namespace="ml", pod="infer", container="main", gpu_uuid=gpu_a) == 2 * GIB,
          "infer memory limit:\n" + text)
    check(sample_of(text, lim, namespace="web", pod="cache", container="redis", gpu_uuid=gpu_c) == GIB,
          "cache memory limit:\n" + text)
    check(sample_of(text, lim, namespace="ml", pod="train", container="worker", gpu_uuid=whole) == total[whole],
          "a whole GPU's limit is its memory")
    core = "gpuslice_container_gpu_core_share_ratio"
    check(sample_of(text, core, pod="infer", gpu_uuid=gpu_a) == 0.3, "infer core share:\n" + text)
    check(sample_of(text, core, pod="train", gpu_uuid=whole) == 1.0, "train core share:\n" + text)
    check(sample_of(text, core, pod="cache") is None, "memory-only container has no core share series")
    labels = samples(text, lim)[0][0]
    check(sorted(labels) == ["container", "gpu_index", "gpu_model", "gpu_uuid", "namespace", "pod"],
          "labels %s" % sorted(labels))
    # gpu-manager: per container over its GPUs, vcuda-core percent and MiB
    ru, rm = "container_request_gpu_utilization", "container_request_gpu_memory"
    check(sample_of(text, ru, pod_name="infer", namespace="ml", container_name="main") == 30, "request util")
    check(sample_of(text, rm, pod_name="infer", namespace="ml", container_name="main") == 2048, "request memory")
    check(sample_of(text, ru, pod_name="cache", container_name="redis") == 0, "memory-only request util")
    check(sample_of(text, rm, pod_name="cache", container_name="redis") == 1024, "memory-only request memory")
    check(sample_of(text, ru, pod_name="train", container_name="worker") == 100, "whole-GPU request util")
    check(sample_of(text, rm, pod_name="train", container_name="worker") == total[whole] // MIB, "whole memory")
    check(all(l["node"] for l, _ in samples(text, ru)), "node label empty")
    # PodResources no longer lists the cache pod: after the grace period its series go; not waited
    # for here (120 s). Without the option, no compatibility family.
    check(e.kill_agent(signal.SIGTERM) == 0, "exit status after SIGTERM")


def test_share_metrics_no_compat(e):
    port = test_agent.free_port()
    e.start_share("gpuslice", "--metrics-address", "127.0.0.1:%d" % port, "--sample-interval", "1s")
    a = e.admit((e.core, 25), (e.mem, 4))
    e.kubelet.pods = [("ml", "infer", "main", e.core, a[e.core][0]), ("ml", "infer", "main", e.mem, a[e.mem][0])]
    e.status()
    text = test_agent.scrape(port, lambda t: samples(t, "gpuslice_container_gpu_core_share_ratio"),
                             "a core share series")
    check(sample_of(text, "gpuslice_container_gpu_core_share_ratio", pod="infer") == 0.25, "core share")
    check("container_request_gpu" not in text, "compatibility families without --metrics-compat")


def test_share_restart_no_record(e):
    """Restart with neither a state file nor PodResources: no limits dir is removed until kubelet
    answers; then only the dirs of allocations kubelet no longer reports go."""
    e.kubelet.close()
    e.kubelet = kubelet_standin.Kubelet(e.stubs, e.plugin_dir, None)
    e.kubelet.start()
    e.start_share()
    a = e.admit((e.core, 10), (e.mem, 4))
    b = e.admit((e.core, 20), (e.mem, 4))
    dir_a = os.path.dirname(limits_of(a[e.core][1])[1]["/run/gpuslice/limits"][0])
    dir_b = os.path.dirname(limits_of(b[e.core][1])[1]["/run/gpuslice/limits"][0])
    check(dir_a != dir_b, "two containers, one dir")
    state = os.path.join(e.state_dir, "gpuslice.state")
    e.kubelet.wait_for(lambda: os.path.exists(state), 5, "state file")
    e.kill_agent(signal.SIGKILL)
    os.unlink(state)
    os.unlink(os.path.join(e.state_dir, "gpuslice.fractions"))  # no fractional journal either
    e.kubelet.restart()
    n = len(e.kubelet.registrations)
    e.start_agent("--resource-profile", "gpuslice", "--interposer", e.interposer)
    e.kubelet.wait_for(lambda: len(e.kubelet.registrations) >= n + 3, 10, "three registrations after restart")
    e.kubelet.wait_for(lambda: "keeping every limits dir" in open(e.logs[-1]).read(), 10, "the agent's decision")
    check(os.path.isdir(dir_a) and os.path.isdir(dir_b), "a limits dir was removed without a trusted record")
    # PodResources comes up and reports container a only
    side = os.path.join(e.tmp, "podres-kubelet")
    os.makedirs(side)
    pr = kubelet_standin.Kubelet(e.stubs, side, e.podres)
    pr.pods = [("ml", "a", "main", e.core, a[e.core][0]), ("ml", "a", "main", e.mem, a[e.mem][0])]
    pr.start()
    try:
        e.status()  # a status request makes the agent ask PodResources now
        e.kubelet.wait_for(lambda: not os.path.exists(dir_b), 10, "the dir of the unreported container removed")
        check(os.path.isdir(dir_a), "the dir of the reported container was removed")
    finally:
        pr.close()


# ---- podman end to end ----

def podman_flags(resp, build, dev_root=None):
    """An Allocate answer as `podman run` flags, the way a CRI runtime applies it. Device specs name the
    host's /dev; a test whose "host /dev" is the agent's --dev-root (fake nodes) maps them there."""
    flags = []
    for k, v in sorted(resp.envs.items()):
        flags += ["-e", "%s=%s" % (k, v)]
    for m in resp.mounts:
        opt = "ro" if m.read_only else "rw"
        flags += ["--mount", "type=bind,src=%s,dst=%s,%s" % (m.host_path, m.container_path, opt)]
    for d in resp.devices:
        check(d.host_path.startswith("/dev/"), "device spec host path %s is not the host's /dev" % d.host_path)
        host = (dev_root.rstrip("/") + d.host_path) if dev_root else d.host_path
        flags += ["--device", "%s:%s:%s" % (host, d.container_path, d.permissions)]
    return flags


def test_share_podman(e):
    setup = os.path.join(e.args.source, "tests", "integration", "podman-setup.sh")
    r = subprocess.run([setup], capture_output=True, text=True, timeout=300)
    if r.returncode == 77:
        raise Skip(r.stderr.strip())
    check(r.returncode == 0, "podman setup failed: %s" % r.stderr)
    image = r.stdout.strip()
    workload = os.path.join(e.args.build, "sim", "gpuslice-sim-workload")
    check(os.path.exists(workload) and os.path.exists(os.path.join(e.args.build, "libgpuslice-cuda.so")),
          "gpuslice-sim-workload or libgpuslice-cuda.so not built (every build has them)")
    # Real device nodes for the runtime to create: NVIDIA's major, the GPU's minor; /dev/nvidiactl.
    root = tempfile.mkdtemp(prefix="gpuslice-share-host-", dir="/dev")
    os.makedirs(os.path.join(root, "dev"))
    for minor in range(8):
        os.mknod(os.path.join(root, "dev", "nvidia%d" % minor), 0o666 | 0o020000, os.makedev(195, minor))
    os.mknod(os.path.join(root, "dev", "nvidiactl"), 0o666 | 0o020000, os.makedev(195, 255))
    name = "gpuslice-share-%d" % os.getpid()
    try:
        e.dev_root = root
        port = agent_fixture.free_port()
        e.start_share("gpuslice", "--metrics-address", "127.0.0.1:%d" % port, "--sample-interval", "1s")
        got = e.admit((e.core, 50), (e.mem, 8))  # 50 %, 2 GiB
        resp = got[e.mem][1]
        gpu = one_gpu(got[e.core][0])
        flags = podman_flags(resp, e.args.build, e.dev_root)
        check("/dev/nvidiactl" in [d.container_path for d in resp.devices], "device specs %s" % resp.devices)
        # The test's own plumbing: the simulator's libraries, state and node file, the host's libc.
        sim = os.path.join(e.args.build, "sim")
        plumbing = ["-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro", "-v", "/usr/lib:/usr/lib:ro",
                    "-v", "%s:%s:ro" % (sim, sim), "-v", "%s:%s:ro" % (e.args.topology, e.args.topology),
                    "-v", "%s:%s" % (e.env["GPUSLICE_SIM_STATE"], e.env["GPUSLICE_SIM_STATE"]),
                    "-e", "GPUSLICE_SIM_NODE=" + e.args.topology, "-e", "GPUSLICE_SIM_STATE=" + e.env["GPUSLICE_SIM_STATE"],
                    "-e", "LD_LIBRARY_PATH=" + sim,
                    # without nvidia-container-runtime nothing narrows the simulated driver to the GPU
                    # named by NVIDIA_VISIBLE_DEVICES; CUDA_VISIBLE_DEVICES does it here
                    "-e", "CUDA_VISIBLE_DEVICES=" + resp.envs["NVIDIA_VISIBLE_DEVICES"]]
        base = ["timeout", "60", "podman", "run", "--rm", "--network", "none", "--name", name] + flags + plumbing + [image]

        def run(*argv):
            return subprocess.run(base + list(argv), capture_output=True, text=True, timeout=90)

        # under the limit: 1.5 GiB in 3 chunks fits in 2 GiB
        r = run(workload, "--gpu", "0", "--mem", "1536MiB", "--chunks", "3", "--seconds", "0")
        check(r.returncode == 0 and "ready" in r.stdout, "1.5 GiB under a 2 GiB limit: rc %d\n%s\n%s" %
              (r.returncode, r.stdout, r.stderr))
        # exactly the limit fits
        r = run(workload, "--gpu", "0", "--mem", "2GiB", "--chunks", "4", "--seconds", "0")
        check(r.returncode == 0, "exactly 2 GiB under a 2 GiB limit: rc %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        shm = [m.host_path for m in resp.mounts if m.container_path == "/run/gpuslice/shm"][0]
        check(os.path.exists(os.path.join(shm, "region")), "no shared region in the host dir %s" % shm)
        # past the limit: CUDA_ERROR_OUT_OF_MEMORY (exit 3), though the GPU has 24 GiB free
        r = run(workload, "--gpu", "0", "--mem", "3GiB", "--chunks", "3", "--seconds", "0")
        check(r.returncode == 3, "3 GiB past a 2 GiB limit: rc %d, want 3 (out of memory)\n%s\n%s" %
              (r.returncode, r.stdout, r.stderr))
        check("OUT_OF_MEMORY" in r.stdout + r.stderr, "no CUDA_ERROR_OUT_OF_MEMORY:\n%s\n%s" % (r.stdout, r.stderr))
        # two processes of the container share the one limit: 1.5 GiB held by one leaves 0.5 GiB
        script = ("%s --gpu 0 --mem 1536MiB --seconds 30 > /tmp/first & "
                  "i=0; until grep -q ready /tmp/first; do i=$((i+1)); [ $i -gt 200 ] && exit 9; sleep 0.1; done; "
                  "%s --gpu 0 --mem 1GiB --seconds 0; rc=$?; kill $!; wait; exit $rc") % (workload, workload)
        r = run("sh", "-c", script)
        check(r.returncode == 3, "a second process past the shared limit: rc %d, want 3\n%s\n%s" %
              (r.returncode, r.stdout, r.stderr))
        # the interposer's environment cleared: still limited (/etc/ld.so.preload names it, and it reads
        # the limits at their fixed path), docs/sharing.md
        r = run("sh", "-c", "unset LD_PRELOAD GPUSLICE_LIMITS; exec %s --gpu 0 --mem 3GiB --seconds 0" % workload)
        check(r.returncode == 3, "environment cleared: rc %d, want 3\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        # control: the same container without the agent's mounts and environment gets its 3 GiB — so the
        # refusals above are the limiter's doing
        bare = ["timeout", "60", "podman", "run", "--rm", "--network", "none", "--name", name + "-bare"] + \
            [f for d in resp.devices for f in ("--device", "%s%s:%s:%s" % (e.dev_root.rstrip("/"), d.host_path,
                                                                            d.container_path, d.permissions))] + \
            plumbing + [image]
        r = subprocess.run(bare + [workload, "--gpu", "0", "--mem", "3GiB", "--seconds", "0"], capture_output=True,
                           text=True, timeout=90)
        check(r.returncode == 0, "control without the interposer: rc %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        # the limits file is read-only inside, even for root
        r = run("sh", "-c", "cat /run/gpuslice/limits && echo x >> /run/gpuslice/limits")
        check(r.returncode != 0 and gpu in r.stdout and "memory=%d" % (2 * GIB) in r.stdout,
              "limits file inside: rc %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        # the agent reads the three refusals above from the container's shared region (/metrics, once
        # PodResources has named the container)
        e.kubelet.pods = [("ml", "infer", "main", e.core, got[e.core][0]), ("ml", "infer", "main", e.mem, got[e.mem][0])]
        e.status()
        series = 'gpuslice_container_gpu_memory_refusals_total{namespace="ml",pod="infer",container="main"'
        text = agent_fixture.scrape(port, lambda t: re.search(re.escape(series) + r'[^}]*\} 3\n', t),
                                    "three refusals counted for ml/infer")
        check(re.search(re.escape(series) + r',gpu_index="\d+",gpu_uuid="%s"' % re.escape(gpu), text), text)
        print("podman: 1.5 GiB fits, 3 GiB refused with CUDA_ERROR_OUT_OF_MEMORY under a 2 GiB share of %s" % gpu)
    finally:
        subprocess.run(["timeout", "30", "podman", "rm", "-f", "-t", "0", name], capture_output=True)
        subprocess.run(["timeout", "30", "podman", "rm", "-f", "-t", "0", name + "-bare"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


TESTS = {name[5:].replace("_", "-"): fn for name, fn in globals().items() if name.startswith("test_share")}


if __name__ == "__main__":
    agent_fixture.run_main(TESTS, Share, "", TEST_TIMEOUT_S)
