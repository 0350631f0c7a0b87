# SPDX-License-Identifier: Apache-2.0
"""The e2e node set-up (cluster.py _NODE_SETUP) on a host that has its own NVIDIA device nodes, as any real
GPU host has: /dev/nvidia0..., nvidiactl, nvidia-uvm, nvidia-caps/. The set-up copies the host's /dev into
the node's and makes the simulated GPUs' nodes; it must neither fail on the host's ("mknod: /dev/nvidia0:
File exists") nor hand the node a host GPU the simulation does not have.

No cluster and no real device: the "host" is a private mount namespace (unshare -m) whose /dev is a tmpfs
with NVIDIA nodes made in it, so nothing of the machine's /dev changes and nothing is left behind. Root only
(unshare, mknod). Runs in `make e2e` (it needs no Kubernetes) and in ctest (e2e-node-setup).
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster  # noqa: E402
import e2e  # noqa: E402

# In the private namespace: a fake host /dev with the nodes a 8-GPU host has (and MIG capability nodes),
# private directories where the set-up binds kubelet's, then the set-up for a node of 2 simulated GPUs,
# then what the node's /dev holds. Every mount is the namespace's own and goes with it.
_FAKE_HOST = r'''
set -eu
W=$1
mount --make-rprivate /
mount -t tmpfs -o mode=755 gpuslice-fake-host-dev /dev
mknod -m 666 /dev/null c 1 3
mknod -m 666 /dev/zero c 1 5
mkdir /dev/pts /dev/shm
i=0
while [ "$i" -lt 8 ]; do mknod -m 666 "/dev/nvidia$i" c 195 "$i"; i=$((i + 1)); done
mknod -m 666 /dev/nvidiactl c 195 255
mknod -m 666 /dev/nvidia-modeset c 195 254
mknod -m 666 /dev/nvidia-uvm c 510 0
mknod -m 666 /dev/nvidia-uvm-tools c 510 1
mkdir /dev/nvidia-caps
mknod -m 400 /dev/nvidia-caps/nvidia-cap1 c 237 1
for d in /var/lib /var/log /run /usr/local/lib; do mount -t tmpfs gpuslice-fake-host "$d"; done
sh -c "$SETUP" node-setup "$W/node" 2
echo "--- node /dev"
for e in /dev/* /dev/nvidia-caps/*; do
    [ -e "$e" ] || continue
    if [ -c "$e" ]; then echo "$e c $(stat -c '%t:%T' "$e")"; elif [ -d "$e" ]; then echo "$e d"; else echo "$e f"; fi
done
'''


def node_dev():
    """{path: kind} of the node's /dev after the set-up on the fake host."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise e2e.Fail("needs root and unshare(1)")
    work = tempfile.mkdtemp(prefix="gpuslice-e2e-nodesetup-")
    try:
        env = dict(os.environ, SETUP=cluster._NODE_SETUP)
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", _FAKE_HOST, "fake-host", work],
                           env=env, capture_output=True, text=True, timeout=60)
        e2e.check(r.returncode == 0, "the node set-up failed on a host with /dev/nvidia* (exit %d): %s"
                  % (r.returncode, (r.stderr or r.stdout).strip()[-800:]))
        out = r.stdout.split("--- node /dev\n", 1)
        e2e.check(len(out) == 2 and "ready" in out[0], "the set-up did not say ready: %s" % r.stdout[-800:])
        seen = {}
        for line in out[1].splitlines():
            path, kind = line.split(" ", 1)
            seen[path] = kind
        return seen
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_host_nvidia_nodes(_):
    dev = node_dev()
    # the simulated GPUs' nodes, with their numbers (stat prints major:minor in hex)
    want = {"/dev/nvidia0": "c c3:0", "/dev/nvidia1": "c c3:1", "/dev/nvidiactl": "c c3:ff",
            "/dev/nvidia-modeset": "c c3:fe", "/dev/nvidia-uvm": "c 1fe:0", "/dev/nvidia-uvm-tools": "c 1fe:1"}
    for path, kind in want.items():
        e2e.check(dev.get(path) == kind, "%s: %s, want %s" % (path, dev.get(path), kind))
    # none of the host's: no GPU past the node's two, no host capability nodes
    extra = sorted(p for p in dev if p.startswith("/dev/nvidia") and p not in want)
    e2e.check(not extra, "the host's NVIDIA nodes reached the node: %s" % extra)
    # the rest of the host's /dev is there as before
    e2e.check(dev.get("/dev/null") == "c 1:3" and dev.get("/dev/zero") == "c 1:5", "host /dev not copied: %s" % dev)
    e2e.check(dev.get("/dev/pts") == "d" and dev.get("/dev/shm") == "d", "host /dev dirs not bound: %s" % dev)


if __name__ == "__main__":
    sys.exit(e2e.main([test_host_nvidia_nodes], lambda: None))
