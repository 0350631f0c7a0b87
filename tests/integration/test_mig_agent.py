# SPDX-License-Identifier: Apache-2.0
"""MIG through the device plugin (docs/mig.md): the real `gpuslice node` with --mig-strategy on a
simulated MIG node (tests/data/mig/*.node), driven over real gRPC by the kubelet stand-in.

    /usr/bin/python3 test_mig_agent.py --build DIR --source DIR --topology tests/data/mig/a100-80gb-2gpu.node TEST

The capability nodes and mig-minors come from `gpuslice-sim caps` under the agent's --dev-root (mknod:
root only; the tests skip otherwise). Expected values are read from the simulator (`gpuslice topo --json`)
and the mig-minors file, never written into the test.
"""

import json
import os
import signal
import subprocess
import sys
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_fixture import REACT_S, Skip, check, run_main  # noqa: E402
import test_cdi_agent  # noqa: E402
from test_share import limits_of  # noqa: E402

PLAIN = "gpuslice-nvidia.com-gpu.sock"


def ep(resource):
    return "gpuslice-%s.sock" % resource.replace("/", "-")


def use_node(e, name):
    """Switch the simulated node (a fresh simulator state) and make its capabilities under the dev root."""
    e.env["GPUSLICE_SIM_NODE"] = os.path.join(e.args.source, "tests", "data", "mig", name)
    e.sim("reset")
    if os.geteuid() != 0:
        raise Skip("gpuslice-sim caps makes device nodes (mknod): root only")
    e.sim("caps", e.dev_root)


def mig_devices(e):
    """{MIG UUID: device} from `gpuslice topo --json` on the simulated node (gpu, index, gi, ci, profile)."""
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "topo", "--json"], env=e.env, capture_output=True,
                       text=True, timeout=15)
    check(r.returncode == 0, "gpuslice topo failed: %s" % r.stderr)
    out = {}
    for g in json.loads(r.stdout)["mig"]:
        for d in g["devices"]:
            out[d["uuid"]] = dict(d, gpu=g["gpu"], gi=d["gpu_instance"], ci=d["compute_instance"])
    return out


def minors(e):
    """mig-minors as {name: minor}."""
    with open(os.path.join(e.dev_root, "proc", "driver", "nvidia-caps", "mig-minors")) as f:
        return {k: int(v) for k, v in (line.split() for line in f if line.strip())}


def expect_specs(e, resp, dev):
    """The device specs of an Allocate answer for one MIG device: its parent's node, the control nodes the
    dev root has, and exactly its two capability nodes."""
    m = minors(e)
    gi = m["gpu%d/gi%d/access" % (dev["gpu"], dev["gi"])]
    ci = m["gpu%d/gi%d/ci%d/access" % (dev["gpu"], dev["gi"], dev["ci"])]
    want = sorted(["/dev/nvidia%d" % dev["gpu"], "/dev/nvidiactl", "/dev/nvidia-uvm",
                   "/dev/nvidia-caps/nvidia-cap%d" % gi, "/dev/nvidia-caps/nvidia-cap%d" % ci])
    got = sorted(d.container_path for d in resp.devices)
    check(got == want, "device specs %s, want %s" % (got, want))
    check(all(d.host_path == d.container_path and d.permissions == "rw" for d in resp.devices),
          "host paths / permissions: %s" % resp.devices)


def registered_resources(e, n):
    e.kubelet.wait_for(lambda: len(e.kubelet.registrations) >= n, REACT_S, "%d registrations" % n)
    e.kubelet.wait_for(lambda: all(e.kubelet.last_ids(r.request.endpoint) is not None
                                   for r in e.kubelet.registrations), REACT_S, "a list on every endpoint")
    return sorted(r.request.resource_name for r in e.kubelet.registrations)


def allocate_on(e, endpoint, *containers):
    req = e.pb.AllocateRequest()
    for ids in containers:
        req.container_requests.add(devices_ids=ids)
    return e.kubelet.plugin_stub(endpoint)[0].Allocate(req, timeout=5)


def prefer_on(e, endpoint, available, size, must=()):
    req = e.pb.PreferredAllocationRequest()
    req.container_requests.add(available_deviceIDs=available, must_include_deviceIDs=list(must),
                               allocation_size=size)
    resp = e.kubelet.plugin_stub(endpoint)[0].GetPreferredAllocation(req, timeout=5)
    return list(resp.container_responses[0].deviceIDs)


# ---- mixed ----

def test_mixed(e):
    """An A100-80GB with all-balanced (2 x 1g.10gb, 2g.20gb, 3g.40gb) and one GPU with MIG off."""
    use_node(e, "a100-80gb-2gpu.node")
    devs = mig_devices(e)
    e.start_agent("--mig-strategy", "mixed", "--device-list-strategy", "envvar,cdi")
    res = registered_resources(e, 4)
    check(res == ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"],
          "resources %s" % res)
    whole = e.kubelet.last_ids(PLAIN)
    check(len(whole) == 1 and whole[0].startswith("GPU-"), "the GPU in MIG mode offered whole: %s" % whole)
    by_profile = {}
    for u, d in devs.items():
        by_profile.setdefault(d["profile"], []).append(u)
    for prof, uuids in by_profile.items():
        listed = e.kubelet.last_devices(ep("nvidia.com/mig-" + prof))
        check(sorted(listed) == sorted(uuids), "%s lists %s, want %s" % (prof, sorted(listed), sorted(uuids)))
        check(all(h == "Healthy" for h, _ in listed.values()), "%s health %s" % (prof, listed))
    one = by_profile["1g.10gb"][0]
    c = allocate_on(e, ep("nvidia.com/mig-1g.10gb"), [one]).container_responses[0]
    check(c.envs["NVIDIA_VISIBLE_DEVICES"] == one, "env %s" % dict(c.envs))
    check([d.name for d in c.cdi_devices] == ["gpuslice.io/gpu=" + one], "cdi %s" % c.cdi_devices)
    expect_specs(e, c, devs[one])
    # another profile, on its own resource
    two = by_profile["2g.20gb"][0]
    c = allocate_on(e, ep("nvidia.com/mig-2g.20gb"), [two]).container_responses[0]
    check(c.envs["NVIDIA_VISIBLE_DEVICES"] == two, "env %s" % dict(c.envs))
    expect_specs(e, c, devs[two])
    # a MIG device of another profile, a GPU in MIG mode on the whole resource: refused
    INVALID = grpc.StatusCode.INVALID_ARGUMENT
    e.expect_error(lambda: allocate_on(e, ep("nvidia.com/mig-1g.10gb"), [two]), INVALID, "unknown device ID")
    e.kubelet.pods = [("ml", "a", "main", "nvidia.com/mig-1g.10gb", [one]),
                      ("ml", "b", "main", "nvidia.com/mig-2g.20gb", [two])]
    st = e.status()
    gpu0 = [d["id"] for d in st["devices"] if d.get("mig_mode")]
    check(len(gpu0) == 1, "status: GPU in MIG mode %s" % gpu0)
    e.expect_error(lambda: allocate_on(e, PLAIN, gpu0), INVALID, "MIG")
    held = {d["id"]: d["holder"] for d in st["devices"]}
    check(held[one]["pod"] == "a" and held[two]["pod"] == "b", "holders after Allocate: %s" % held)
    check(st["mig_strategy"] == "mixed" and "mig_error" not in st, "status %s" % st.get("mig_strategy"))


def test_mixed_index(e):
    """--device-id-strategy index: a MIG device is <GPU index>:<MIG index>, in env and CDI names."""
    use_node(e, "a100-80gb-2gpu.node")
    devs = mig_devices(e)
    e.start_agent("--mig-strategy", "mixed", "--device-id-strategy", "index", "--device-list-strategy",
                  "envvar,cdi")
    registered_resources(e, 4)
    three = [u for u, d in devs.items() if d["profile"] == "3g.40gb"][0]
    c = allocate_on(e, ep("nvidia.com/mig-3g.40gb"), [three]).container_responses[0]
    want = "%d:%d" % (devs[three]["gpu"], devs[three]["index"])
    check(c.envs["NVIDIA_VISIBLE_DEVICES"] == want, "env %s, want %s" % (dict(c.envs), want))
    check([d.name for d in c.cdi_devices] == ["gpuslice.io/gpu=" + want], "cdi %s" % c.cdi_devices)


def test_mixed_cdi(e):
    """The CDI spec the agent writes defines the MIG devices' names its Allocate answers carry."""
    use_node(e, "a100-80gb-2gpu.node")
    spec_path = test_cdi_agent.cdi_node(e, e.args, "mig")
    e.start_agent("--mig-strategy", "mixed", "--device-list-strategy", "cdi", "--driver-root", e.driver_root)
    registered_resources(e, 4)
    spec, names = test_cdi_agent.spec_names(spec_path)
    for prof in ("1g.10gb", "2g.20gb", "3g.40gb"):
        ids = e.kubelet.last_ids(ep("nvidia.com/mig-" + prof))
        c = allocate_on(e, ep("nvidia.com/mig-" + prof), [ids[0]]).container_responses[0]
        got = [d.name for d in c.cdi_devices]
        check(got == ["gpuslice.io/gpu=" + ids[0]], "cdi %s" % got)
        kind, name = got[0].split("=", 1)
        check(kind == spec["kind"] and name in names, "%s is not in the spec (%s)" % (got[0], sorted(names)))


def test_mixed_health(e):
    """An Xid on the parent GPU makes every one of its MIG devices Unhealthy; the other GPU is untouched."""
    use_node(e, "a100-80gb-2gpu.node")
    e.start_agent("--mig-strategy", "mixed")
    registered_resources(e, 4)
    e.sim("xid", "0", "48")
    small = ep("nvidia.com/mig-1g.10gb")
    e.kubelet.wait_for(lambda: all(h == "Unhealthy" for h, _ in e.kubelet.last_devices(small).values()), REACT_S,
                       "MIG devices of GPU 0 unhealthy")
    for prof in ("2g.20gb", "3g.40gb"):
        e.kubelet.wait_for(lambda: all(h == "Unhealthy" for h, _ in
                                       e.kubelet.last_devices(ep("nvidia.com/mig-" + prof)).values()),
                           REACT_S, "%s unhealthy" % prof)
    check(all(h == "Healthy" for h, _ in e.kubelet.last_devices(PLAIN).values()), "GPU 1 affected")
    ids = e.kubelet.last_ids(small)
    e.expect_error(lambda: allocate_on(e, small, [ids[0]]), grpc.StatusCode.INVALID_ARGUMENT, "xid 48")
    st = {d["id"]: d for d in e.status()["devices"]}
    check(st[ids[0]]["health"] == "Unhealthy" and "48" in st[ids[0]]["reason"], "status %s" % st[ids[0]])
    # the quiet period (2 s) → Healthy again with the GPU
    e.kubelet.wait_for(lambda: all(h == "Healthy" for h, _ in e.kubelet.last_devices(small).values()), REACT_S,
                       "MIG devices healthy again")
    allocate_on(e, small, [ids[0]])


def test_restart(e):
    """Holders of MIG devices survive a SIGKILL of the agent and a kubelet restart (state + PodResources)."""
    use_node(e, "a100-80gb-2gpu.node")
    e.start_agent("--mig-strategy", "mixed")
    registered_resources(e, 4)
    small = ep("nvidia.com/mig-1g.10gb")
    ids = e.kubelet.last_ids(small)
    allocate_on(e, small, [ids[0]])
    e.kubelet.wait_for(lambda: os.path.exists(os.path.join(e.state_dir, "gpuslice.state")), 5, "state file")
    time.sleep(0.3)
    e.kill_agent(signal.SIGKILL)
    e.kubelet.pods = [("ml", "infer-a", "main", "nvidia.com/mig-1g.10gb", [ids[0]])]
    n = len(e.kubelet.registrations)
    e.kubelet.restart()
    e.start_agent("--mig-strategy", "mixed")
    registered_resources(e, n + 4)
    holders = {d["id"]: d["holder"] for d in e.status()["devices"]}
    check(holders[ids[0]] and holders[ids[0]]["pod"] == "infer-a", "MIG holder after restart: %s" % holders[ids[0]])
    check(holders[ids[1]] is None, "the other 1g.10gb held: %s" % holders[ids[1]])
    got = prefer_on(e, small, ids, 1)
    check(got == [ids[1]], "preferred the held MIG device: %s" % got)
    # the holder ends: PodResources no longer lists it → dropped at the next sync
    e.kubelet.pods = []
    deadline = time.monotonic() + REACT_S
    while {d["id"]: d["holder"] for d in e.status()["devices"]}[ids[0]] is not None:
        check(time.monotonic() < deadline, "holder never dropped")
        time.sleep(0.3)


# ---- single ----

def test_single(e):
    """Two H100s with seven 1g.10gb each: nvidia.com/gpu lists 14 MIG devices."""
    use_node(e, "h100-single.node")
    devs = mig_devices(e)
    e.start_agent("--mig-strategy", "single")
    res = registered_resources(e, 1)
    check(res == ["nvidia.com/gpu"], "resources %s" % res)
    ids = e.kubelet.last_ids(PLAIN)
    check(sorted(ids) == sorted(devs), "nvidia.com/gpu lists %s, want the 14 MIG devices" % ids)
    # a two-instance request stays on one parent GPU; must-include pulls it to its parent
    got = prefer_on(e, PLAIN, ids, 2)
    check(len(got) == 2 and devs[got[0]]["gpu"] == devs[got[1]]["gpu"], "two instances on two GPUs: %s" % got)
    on1 = [u for u in ids if devs[u]["gpu"] == 1]
    got = prefer_on(e, PLAIN, ids, 3, must=[on1[2]])
    check(on1[2] in got and all(devs[u]["gpu"] == 1 for u in got), "must-include on GPU 1, got %s" % got)
    # GPU 0 has 2 free, GPU 1 all 7: three instances go to GPU 1 (one parent where it can)
    on0 = [u for u in ids if devs[u]["gpu"] == 0]
    got = prefer_on(e, PLAIN, on0[:2] + on1, 3)
    check(all(devs[u]["gpu"] == 1 for u in got), "3 instances split: %s" % got)
    c = allocate_on(e, PLAIN, [on1[0]]).container_responses[0]
    check(c.envs["NVIDIA_VISIBLE_DEVICES"] == on1[0], "env %s" % dict(c.envs))
    expect_specs(e, c, devs[on1[0]])
    st = e.status()
    check(st["mig_strategy"] == "single" and "mig_error" not in st, "status %s" % st)


def test_single_mismatch(e):
    """`single` on a node with one GPU not in MIG mode: nvidia.com/gpu lists nothing, and the agent says why."""
    use_node(e, "a100-80gb-2gpu.node")
    e.start_agent("--mig-strategy", "single")
    res = registered_resources(e, 1)
    check(res == ["nvidia.com/gpu"], "resources %s" % res)
    check(e.kubelet.last_ids(PLAIN) == [], "a node that does not fit single serves %s" % e.kubelet.last_ids(PLAIN))
    st = e.status()
    check("not in MIG mode" in st.get("mig_error", ""), "status mig_error %r" % st.get("mig_error"))
    log = open(e.logs[-1]).read()
    check("does not fit the MIG strategy single" in log, "no log line saying so")


# ---- fractions of a MIG device (the gpuslice profile) ----

CORE, MEM, UNIT = "gpuslice.io/gpu-core", "gpuslice.io/gpu-memory", 256 << 20
GIB = 1 << 30


def ids_of(listed, uuid):
    """The IDs of one device (a GPU or a MIG device) among a fractional resource's list."""
    return sorted((i for i in listed if i.split("::")[0] == uuid), key=lambda i: int(i.rsplit("-", 1)[1]))


def share_on(e, uuid, core, mem, pod):
    """One container of `core` % and `mem` units, as kubelet admits it with only `uuid`'s free IDs of the
    first resource available: core's preferred allocation and Allocate, then memory's over every free
    memory ID (the pairing must steer it to the same MIG device). Kubelet lists it then."""
    free_core = [i for i in ids_of(e.kubelet.last_ids(ep(CORE)), uuid) if i not in e.taken]
    got = prefer_on(e, ep(CORE), free_core, core)
    c = allocate_on(e, ep(CORE), got).container_responses[0]
    free_mem = [i for i in e.kubelet.last_ids(ep(MEM)) if i not in e.taken]
    mids = prefer_on(e, ep(MEM), free_mem, mem)
    check(all(i.split("::")[0] == uuid for i in got + mids), "a share off %s: %s %s" % (uuid, got, mids))
    m = allocate_on(e, ep(MEM), mids).container_responses[0]
    e.taken.update(got + mids)
    with e.kubelet.cond:
        e.kubelet.pods = e.kubelet.pods + [("ml", pod, "main", CORE, got), ("ml", pod, "main", MEM, mids)]
    return c, m


def test_share(e):
    """--resource-profile gpuslice with mixed: a 1g.10gb instance shared by two containers (50 % + 4 GiB
    each) like a small GPU, a third that does not fit refused, the instance never also handed out whole,
    and both shares kept across an agent restart."""
    use_node(e, "a100-80gb-2gpu.node")
    devs = mig_devices(e)
    args = ("--mig-strategy", "mixed", "--resource-profile", "gpuslice", "--interposer",
            os.path.abspath(os.path.join(e.args.build, "libgpuslice-cuda.so")))
    e.start_agent(*args)
    res = registered_resources(e, 6)
    check(res == [CORE, MEM, "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb",
                  "nvidia.com/mig-3g.40gb"], "resources %s" % res)
    st = e.status()
    gpu0 = [d["id"] for d in st["devices"] if d.get("mig_mode")][0]
    gpu1 = [d["id"] for d in st["devices"] if d["id"].startswith("GPU-") and d["id"] != gpu0][0]
    # every MIG device and the GPU with MIG off are shared; the GPU in MIG mode never
    core_ids, mem_ids = e.kubelet.last_ids(ep(CORE)), e.kubelet.last_ids(ep(MEM))
    check(sorted({i.split("::")[0] for i in core_ids}) == sorted(list(devs) + [gpu1]), "core lists %s" %
          sorted({i.split("::")[0] for i in core_ids}))
    check(max(len(i) for i in core_ids + mem_ids) <= 50, "an ID over 50 characters")
    for u, d in devs.items():
        check(len(ids_of(core_ids, u)) == 100, "core IDs of %s" % u)
        want = min(d["memory_total_bytes"] // UNIT, 1024)
        check(len(ids_of(mem_ids, u)) == want, "memory IDs of %s: %d, want %d" % (u, len(ids_of(mem_ids, u)), want))
    one, other = sorted(u for u, d in devs.items() if d["profile"] == "1g.10gb")
    e.taken = set()
    a = share_on(e, one, 50, 16, "share-a")
    b = share_on(e, one, 50, 16, "share-b")
    for (c, m), name in ((a, "a"), (b, "b")):
        lim, mounts = limits_of(c)
        check(limits_of(m) == (lim, mounts), "container %s: the halves' limits differ" % name)
        check(lim["devices"] == [{"index": 0, "uuid": one, "memory": 4 * GIB, "core": 50}],
              "container %s limits %s" % (name, lim))
        check(c.envs["NVIDIA_VISIBLE_DEVICES"] == one, "env %s" % dict(c.envs))
        check(c.envs["LD_PRELOAD"] == "/run/gpuslice/lib/libcuda.so.1", "env %s" % dict(c.envs))
        expect_specs(e, c, devs[one])
    # the instance is full in compute: a third container's core cannot join its memory there
    INVALID = grpc.StatusCode.INVALID_ARGUMENT
    free = [i for i in ids_of(e.kubelet.last_ids(ep(MEM)), one) if i not in e.taken]
    m3 = prefer_on(e, ep(MEM), free, 2)
    allocate_on(e, ep(MEM), m3)
    free_core = [i for i in e.kubelet.last_ids(ep(CORE)) if i not in e.taken]
    e.expect_error(lambda: prefer_on(e, ep(CORE), free_core, 10), grpc.StatusCode.RESOURCE_EXHAUSTED,
                   "must be on one GPU")
    # shared: listed Unhealthy on its MIG resource and refused there; the other 1g.10gb whole is fine, and then
    # its fractions are refused
    small = ep("nvidia.com/mig-1g.10gb")
    e.kubelet.wait_for(lambda: e.kubelet.last_devices(small)[one][0] == "Unhealthy", REACT_S,
                       "the shared MIG device Unhealthy on its whole resource")
    e.expect_error(lambda: allocate_on(e, small, [one]), INVALID, "shared in fractions")
    allocate_on(e, small, [other])
    with e.kubelet.cond:
        e.kubelet.pods = e.kubelet.pods + [("ml", "whole", "main", "nvidia.com/mig-1g.10gb", [other])]
    e.expect_error(lambda: allocate_on(e, ep(CORE), ids_of(e.kubelet.last_ids(ep(CORE)), other)[:10]), INVALID,
                   "allocated whole")
    # more than 100 % of MIG devices is no "whole GPUs" request
    two = [u for u, d in devs.items() if d["profile"] == "2g.20gb"][0]
    three = [u for u, d in devs.items() if d["profile"] == "3g.40gb"][0]
    e.expect_error(lambda: allocate_on(e, ep(CORE), ids_of(core_ids, two) + ids_of(core_ids, three)), INVALID,
                   "MIG device")
    # the GPU in MIG mode has no IDs
    e.expect_error(lambda: allocate_on(e, ep(CORE), [gpu0 + "::core-0"]), INVALID, "unknown")
    st = {d["id"]: d for d in e.status()["devices"]}
    # the two shares, and the refused container's memory half until the agent learns kubelet dropped it
    # (docs/sharing.md "Ending"); after the restart below kubelet lists the two only
    check(st[one]["core_used"] == 100 and st[one]["memory_used_bytes"] in (8 * GIB, 8 * GIB + 2 * UNIT),
          "status %s" % st[one])
    # restart: SIGKILL, kubelet restarts listing the two containers and the whole MIG device
    e.kubelet.wait_for(lambda: os.path.exists(os.path.join(e.state_dir, "gpuslice.state")), 5, "state file")
    time.sleep(0.3)
    e.kill_agent(signal.SIGKILL)
    e.kubelet.pods = [p for p in e.kubelet.pods if p[1] in ("share-a", "share-b", "whole")]
    n = len(e.kubelet.registrations)
    e.kubelet.restart()
    e.start_agent(*args)
    registered_resources(e, n + 6)
    deadline = time.monotonic() + REACT_S
    while True:
        st = {d["id"]: d for d in e.status()["devices"]}
        if st[one]["core_used"] == 100 and st[one]["memory_used_bytes"] == 8 * GIB:
            break
        check(time.monotonic() < deadline, "shares after restart: %s" % st[one])
        time.sleep(0.3)
    e.kubelet.wait_for(lambda: e.kubelet.last_devices(small)[one][0] == "Unhealthy", REACT_S,
                       "the shared MIG device still out of its whole resource after the restart")
    e.expect_error(lambda: allocate_on(e, small, [one]), INVALID, "shared in fractions")


def test_share_single(e):
    """`single` with the gpuslice profile on two H100s of seven 1g.10gb: the 14 MIG devices are shared on
    the fractional resources and whole on nvidia.com/gpu, one use excluding the other per MIG device."""
    use_node(e, "h100-single.node")
    devs = mig_devices(e)
    e.start_agent("--mig-strategy", "single", "--resource-profile", "gpuslice", "--interposer",
                  os.path.abspath(os.path.join(e.args.build, "libgpuslice-cuda.so")))
    res = registered_resources(e, 3)
    check(res == [CORE, MEM, "nvidia.com/gpu"], "resources %s" % res)
    core_ids = e.kubelet.last_ids(ep(CORE))
    check(sorted({i.split("::")[0] for i in core_ids}) == sorted(devs), "core lists %s" %
          sorted({i.split("::")[0] for i in core_ids}))
    one, two = sorted(devs)[:2]
    e.taken = set()
    c, _ = share_on(e, one, 30, 8, "share-a")
    check(c.envs["NVIDIA_VISIBLE_DEVICES"] == one, "env %s" % dict(c.envs))
    check(limits_of(c)[0]["devices"] == [{"index": 0, "uuid": one, "memory": 2 * GIB, "core": 30}],
          "limits %s" % limits_of(c)[0])
    expect_specs(e, c, devs[one])
    e.kubelet.wait_for(lambda: e.kubelet.last_devices(PLAIN)[one][0] == "Unhealthy", REACT_S,
                       "the shared MIG device Unhealthy on nvidia.com/gpu")
    e.expect_error(lambda: allocate_on(e, PLAIN, [one]), grpc.StatusCode.INVALID_ARGUMENT, "shared in fractions")
    allocate_on(e, PLAIN, [two])
    # pushed at once (a change kubelet must see; before, only the streams' periodic resend ~10 s later told)
    e.kubelet.wait_for(lambda: all(h == "Unhealthy" for i, (h, _) in e.kubelet.last_devices(ep(CORE)).items()
                                   if i.startswith(two + "::")), 5, "the whole MIG device's IDs Unhealthy")


TESTS = {
    "mixed": test_mixed,
    "mixed-index": test_mixed_index,
    "mixed-health": test_mixed_health,
    "mixed-cdi": test_mixed_cdi,
    "restart": test_restart,
    "single": test_single,
    "single-mismatch": test_single_mismatch,
    "share": test_share,
    "share-single": test_share_single,
}

if __name__ == "__main__":
    run_main(TESTS, label="agent-mig-", timeout_s=90)
