# SPDX-License-Identifier: Apache-2.0
"""NVIDIA's device plugin configs on a real cluster (docs/sharing.md, "Time-slicing and NVIDIA's device plugin
config"): one node runs the agent with NVIDIA's README time-slicing example, one with its MPS example
(tests/data/nvidia-config/time-slicing.yaml, mps.yaml: replicas 10 of nvidia.com/gpu), both with API access
(--kubeconfig) so that they publish GFD's labels.

- The node's capacity and allocatable `nvidia.com/gpu` are GPUs × replicas (8 × 10 = 80), its labels
  `nvidia.com/gpu.replicas=10`, `nvidia.com/gpu.sharing-strategy` and the `-SHARED` product.
- A pod asking `nvidia.com/gpu: 1` on the time-sliced node runs with what NVIDIA's plugin gives it:
  `NVIDIA_VISIBLE_DEVICES=<uuid>` and that GPU's `/dev/nvidiaN`, no MPS environment; a second pod gets a replica
  of another GPU (gpuslice's spread rule).
- A pod asking `nvidia.com/gpu: 1` on the MPS node runs with NVIDIA's MPS client environment and mounts:
  `CUDA_MPS_PIPE_DIRECTORY=/mps/nvidia.com/gpu/pipe` with the daemon's pipe dir mounted there and the daemon's
  shm tmpfs at `/dev/shm` (a file written there is in the node's <state-dir>/mps/shm); the simulated driver
  mounted from the host (the daemon the agent runs is the simulator's nvidia-cuda-mps-control) reports the pinned
  limit (24 GiB / 10) as the device's memory and refuses an allocation past it.

    /usr/bin/python3 tests/e2e/test_sharing.py [TEST ...]
"""

import os
import re
import sys

import e2e
from e2e import check, pod, wait_pod

NODES = [("ts-node", "demo-8gpu-2socket.node", None), ("mps-node", "demo-8gpu-2socket.node", None)]
CONFIGS = {"ts-node": "time-slicing.yaml", "mps-node": "mps.yaml"}
GPUS, REPLICAS = 8, 10
P40 = 24 << 30
PINNED = P40 // REPLICAS >> 20 << 20  # the agent's set_default_device_pinned_mem_limit, in whole MiB
MPS_PIPE = "/mps/nvidia.com/gpu/pipe"

PROBE = r'''
echo "VISIBLE=$NVIDIA_VISIBLE_DEVICES"
echo "MPSPIPE=${CUDA_MPS_PIPE_DIRECTORY:-none}"
echo "DEVS=$(ls /dev | grep '^nvidia' | tr '\n' ' ')"
echo "MOUNTS:"; grep -E ' (/mps/[^ ]*|/dev/shm) ' /proc/self/mounts; echo "END-MOUNTS"
%s
echo DONE
sleep 3600
'''

MPS_CLIENT = r'''
export CUDA_VISIBLE_DEVICES="$NVIDIA_VISIBLE_DEVICES"
ls "$CUDA_MPS_PIPE_DIRECTORY" | tr '\n' ' '; echo
echo from-the-container >/dev/shm/gpuslice-e2e-mark; echo "SHMRC=$?"
cuda-workload init info alloc 2G alloc! 1G; echo "MPSRC=$?"
'''


def setup():
    c = e2e.gpu_cluster(NODES, images=[])
    img = e2e.cuda_image(c)
    ctl = os.path.join(e2e.BUILD, "sim", "nvidia-cuda-mps-control")
    e2e.built("sim/nvidia-cuda-mps-control")
    for name, g in c.gpu.items():
        if name == "mps-node":
            g.node.import_image(img)
        g.start_agent("--nvidia-config", os.path.join(e2e.REPO, "tests", "data", "nvidia-config", CONFIGS[name]),
                      "--mps-control", ctl, "--kubeconfig", c.kubeconfig, env={"NODE_NAME": name})
    return c


def node(c, name):
    return c.api("GET", "/api/v1/nodes/" + name)


def advertised(c, name):
    """Capacity and allocatable nvidia.com/gpu of the node once kubelet shows all replicas."""
    def full():
        st = node(c, name)["status"]
        cap = int(st.get("capacity", {}).get("nvidia.com/gpu", "0"))
        alloc = int(st.get("allocatable", {}).get("nvidia.com/gpu", "0"))
        return (cap, alloc) if cap == alloc == GPUS * REPLICAS else None
    try:
        return c.wait("%s to advertise %d nvidia.com/gpu" % (name, GPUS * REPLICAS), full, timeout=60)
    except e2e.E2EError:
        st = node(c, name)["status"]
        raise e2e.Fail("%s: capacity %s, allocatable %s, want %d of nvidia.com/gpu (GPUs x replicas)" % (
            name, st.get("capacity", {}).get("nvidia.com/gpu"), st.get("allocatable", {}).get("nvidia.com/gpu"),
            GPUS * REPLICAS))


def check_labels(c, name, strategy):
    def labelled():
        lab = node(c, name)["metadata"].get("labels", {})
        return lab if lab.get("nvidia.com/gpu.sharing-strategy") else None
    lab = c.wait("%s's GFD labels" % name, labelled, timeout=60)
    check(lab.get("nvidia.com/gpu.replicas") == str(REPLICAS), "%s: nvidia.com/gpu.replicas=%s" % (
        name, lab.get("nvidia.com/gpu.replicas")))
    check(lab.get("nvidia.com/gpu.sharing-strategy") == strategy, "%s: sharing-strategy %s, want %s" % (
        name, lab.get("nvidia.com/gpu.sharing-strategy"), strategy))
    check(lab.get("nvidia.com/gpu.product", "").endswith("-SHARED"), "%s: product %s without -SHARED" % (
        name, lab.get("nvidia.com/gpu.product")))


def run_probe(c, name, pn, extra="", image=e2e.BUSYBOX, sim=None):
    c.apply(pod(pn, name, PROBE % extra, limits={"nvidia.com/gpu": 1}, image=image, sim=sim))
    wait_pod(c, pn)
    return c.wait("%s to finish its checks" % pn,
                  lambda: (lambda t: t if "DONE" in t else None)(e2e.logs(c, pn)), timeout=90)


def field(out, key):
    m = re.search(r"^%s=(.*)$" % key, out, re.M)
    return m.group(1).strip() if m else None


def mounts_of(out):
    body = out.split("MOUNTS:", 1)[1].split("END-MOUNTS", 1)[0]
    return {f[1]: (f[2], f[3].split(",")) for f in (ln.split() for ln in body.splitlines()) if len(f) >= 4}


def test_time_slicing(c):
    """NVIDIA's time-slicing example: 80 nvidia.com/gpu on 8 GPUs, GFD's labels; two pods of one replica run with
    NVIDIA_VISIBLE_DEVICES=<uuid> and that GPU's device node, on two GPUs, without MPS."""
    name = "ts-node"
    g = c.gpu[name]
    advertised(c, name)
    check_labels(c, name, "time-slicing")
    index = g.uuid_index()
    seen = []
    try:
        for pn in ("ts-a", "ts-b"):
            out = run_probe(c, name, pn)
            uuid = field(out, "VISIBLE")
            check(uuid in index, "%s: NVIDIA_VISIBLE_DEVICES=%s is not one GPU's UUID of %s:\n%s" % (
                pn, uuid, sorted(index), out))
            devs = set((field(out, "DEVS") or "").split())
            want = {"nvidia%d" % index[uuid], "nvidiactl", "nvidia-uvm"}
            check(want <= devs and not {d for d in devs if re.match(r"^nvidia\d+$", d)} - want,
                  "%s: device nodes %s, want %s (its GPU's only)" % (pn, sorted(devs), sorted(want)))
            check(field(out, "MPSPIPE") == "none" and not mounts_of(out).get(MPS_PIPE),
                  "%s: MPS environment on a time-sliced node:\n%s" % (pn, out))
            seen.append(uuid)
        check(seen[0] != seen[1], "the second replica is on the first one's GPU %s (spread rule)" % seen[0])
        cap, alloc = (lambda st: (st["capacity"]["nvidia.com/gpu"], st["allocatable"]["nvidia.com/gpu"]))(
            node(c, name)["status"])
        check(int(cap) == int(alloc) == GPUS * REPLICAS, "capacity %s / allocatable %s changed" % (cap, alloc))
    finally:
        for pn in ("ts-a", "ts-b"):
            e2e.delete(c, "pod", pn, wait=False)


def test_mps(c):
    """NVIDIA's MPS example: 80 nvidia.com/gpu once the daemon serves, GFD's labels; a pod of one replica runs with
    CUDA_MPS_PIPE_DIRECTORY=/mps/nvidia.com/gpu/pipe, the daemon's pipe dir there and its shm tmpfs at /dev/shm,
    and the simulated driver holds it to the pinned limit (24 GiB / 10)."""
    name = "mps-node"
    g = c.gpu[name]
    advertised(c, name)
    check_labels(c, name, "mps")
    index = g.uuid_index()
    pn = "mps-a"
    try:
        out = run_probe(c, name, pn, MPS_CLIENT, image=e2e.CUDA_IMAGE, sim=g)
        check(field(out, "VISIBLE") in index, "NVIDIA_VISIBLE_DEVICES=%s:\n%s" % (field(out, "VISIBLE"), out))
        check(field(out, "MPSPIPE") == MPS_PIPE, "CUDA_MPS_PIPE_DIRECTORY=%s, NVIDIA's is %s:\n%s" % (
            field(out, "MPSPIPE"), MPS_PIPE, out))
        m = mounts_of(out)
        check(MPS_PIPE in m and "rw" in m[MPS_PIPE][1], "the pipe dir not mounted read-write at %s: %s" % (
            MPS_PIPE, m))
        check("/dev/shm" in m and m["/dev/shm"][0] == "tmpfs" and "rw" in m["/dev/shm"][1],
              "/dev/shm is not the daemon's tmpfs, read-write: %s" % m)
        check("control" in out, "the daemon's control pipe is not in the container's pipe dir:\n%s" % out)
        check("SHMRC=0" in out, "cannot write the container's /dev/shm:\n%s" % out)
        r = g.node.run(["cat", "/var/lib/gpuslice/mps/shm/gpuslice-e2e-mark"], check=False)
        check(r.returncode == 0 and "from-the-container" in r.stdout,
              "the container's /dev/shm is not the node's MPS shm dir: %s" % r.stderr.strip())
        infos = re.findall(r"^info (\d+) (\d+)$", out, re.M)
        check(infos and int(infos[0][1]) == PINNED, "cuMemGetInfo total %s, want the pinned limit %d:\n%s" % (
            infos, PINNED, out))
        check("MPSRC=0" in out, "2 GiB allowed and 1 GiB more refused (past the pinned limit): not so:\n%s" % out)
    finally:
        e2e.delete(c, "pod", pn, wait=False)


TESTS = [test_time_slicing, test_mps]

if __name__ == "__main__":
    sys.exit(e2e.main(TESTS, setup))
