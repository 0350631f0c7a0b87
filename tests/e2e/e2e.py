# SPDX-License-Identifier: Apache-2.0
"""gpuslice on the real cluster of cluster.py: simulated GPU nodes, the agent, pods, and a tiny runner.

    import e2e
    c = e2e.gpu_cluster([("gpu-a", "demo-8gpu-2socket.node", {...agent options}), ...])
        a started Cluster with one kubelet node per entry; each node gets its simulated GPU node
        (tests/e2e/nodes/FILE or sim/nodes/FILE), /dev/nvidia* for its GPUs, the label
        nvidia.com/gpu.present=true, and no agent yet.
    g = e2e.GPUNode(c, node, topology)   (gpu_cluster makes them: c.gpu[name])
    g.start_agent(*extra_args, env=None) -> Proc   `gpuslice node` from the build tree in the node's
        namespace: kubelet's real plugin dir, PodResources socket, /var/lib/gpuslice, the simulator
    g.stop_agent(sig) / g.status() (the agent's `gpuslice status --json`) / g.sim(*args) (gpuslice-sim)
    g.predict(count, busy) -> [indices]   what `gpuslice alloc` picks on this topology
    g.uuid_index() -> {uuid: index}
    e2e.pod(name, node, command, limits=None, image=BUSYBOX, **spec) -> dict   a Pod manifest
    e2e.wait_pod(c, name, phase="Running") / e2e.pod_env(c, name) / e2e.delete(c, kind, name)
    e2e.main(tests, setup)   runs every test (or those named in argv / $GPUSLICE_E2E_ONLY) on the cluster
        setup() returns, with tests/runner.py's rules: an unknown or empty selection fails; prints
        "PASS NAME (Ns)", "SKIP NAME (Ns): why" or "FAIL NAME (Ns): why" per test and a summary;
        exit status 0 when all passed, 77 when one was skipped (not a pass), 1 when one failed.
"""

import json
import os
import shlex
import shutil
import signal
import sys
import time

import cluster
from cluster import BUSYBOX, E2EError  # noqa: F401 (re-exported for tests)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import runner  # noqa: E402  (tests/runner.py: the one rule set)

HERE = cluster.HERE
REPO = cluster.REPO
BUILD = os.path.abspath(os.environ.get("GPUSLICE_E2E_BUILD", os.path.join(REPO, "build")))
CUDA_IMAGE = "gpuslice.local/cuda-workload:1"


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def topology_path(name):
    for d in (os.path.join(HERE, "nodes"), os.path.join(REPO, "sim", "nodes"), os.path.join(REPO, "tests", "data", "mig")):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    raise E2EError("no node description %s in tests/e2e/nodes, sim/nodes or tests/data/mig" % name)


def built(*names):
    for n in names:
        p = os.path.join(BUILD, n)
        if not os.path.exists(p):
            raise E2EError("%s not built (make build)" % p)
    return True


class GPUNode:
    def __init__(self, c, node, topology):
        self.c, self.node, self.name = c, node, node.name
        self.simdir = os.path.join(node.dir, "sim")
        os.makedirs(self.simdir, exist_ok=True)
        self.topology = os.path.join(self.simdir, "node.topo")
        shutil.copyfile(topology_path(topology), self.topology)
        self.state = os.path.join(self.simdir, "state")
        self.agent = None

    def sim_env(self):
        return {"LD_LIBRARY_PATH": os.path.join(BUILD, "sim"), "GPUSLICE_SIM_NODE": self.topology,
                "GPUSLICE_SIM_STATE": self.state}

    def gpu_count(self):
        r = cluster.run([os.path.join(BUILD, "gpuslice"), "topo", "--json"], env=dict(os.environ, **self.sim_env()))
        return len(json.loads(r.stdout)["gpus"])

    def start_agent(self, *extra, env=None, wait=True, prefix=()):
        argv = [os.path.join(BUILD, "gpuslice"), "node", "--plugin-dir", self.node.plugin_dir,
                "--pod-resources-socket", self.node.pod_resources_socket, "--state-dir", "/var/lib/gpuslice",
                "--metrics-address", "", "--health-quiet-period", "5s",
                "--interposer", os.path.join(BUILD, "libgpuslice-cuda.so")] + list(extra)
        e = self.sim_env()
        # a CDI spec (strategy cdi) goes to the node's private /run/gpuslice-e2e, not the host's /var/run/cdi
        e["GPUSLICE_CDI_SPEC"] = "/run/gpuslice-e2e/cdi/gpuslice.io-gpu.yaml"
        e.update(env or {})
        self.agent = self.node.spawn("agent", argv, env=e, prefix=prefix)
        if wait:
            self.c.wait("the agent of %s registered" % self.name, self._registered, timeout=60)
        return self.agent

    def _registered(self):
        if self.agent and not self.agent.alive():
            raise cluster.ProcessDied("agent of %s exited:\n%s" % (self.name, self.agent.tail()))
        try:
            s = self.status()
        except E2EError:
            return False
        return s.get("registered") and all(r.get("registered") for r in s.get("resources", []))

    def stop_agent(self, sig=signal.SIGTERM):
        return self.agent.stop(sig)

    def status(self):
        r = self.node.run([os.path.join(BUILD, "gpuslice"), "status", "--state-dir", "/var/lib/gpuslice", "--json"],
                          check=False, timeout=20)
        if r.returncode != 0:
            raise E2EError("gpuslice status on %s: %s" % (self.name, r.stderr.strip()))
        return json.loads(r.stdout)

    def sim(self, *args):
        return cluster.run([os.path.join(BUILD, "sim", "gpuslice-sim")] + [str(a) for a in args],
                           env=dict(os.environ, **self.sim_env())).stdout

    def predict(self, count, busy=()):
        argv = [os.path.join(BUILD, "gpuslice"), "alloc", "--count", str(count), "--json"]
        if busy:
            argv += ["--busy", ",".join(str(b) for b in sorted(busy))]
        r = cluster.run(argv, env=dict(os.environ, **self.sim_env()))
        return sorted(json.loads(r.stdout)["gpus"])

    def uuid_index(self):
        return {d["id"]: d["index"] for d in self.status()["devices"] if "::" not in d["id"]}

    def allocatable(self, resource="nvidia.com/gpu"):
        n = self.c.api("GET", "/api/v1/nodes/" + self.name)
        return int(n["status"].get("allocatable", {}).get(resource, "0"))


def gpu_cluster(nodes, images=()):
    """nodes: [(name, topology file, labels or None)]. Returns a started Cluster with c.gpu[name]."""
    built("gpuslice", "sim/libnvidia-ml.so.1", "sim/gpuslice-sim")
    c = cluster.Cluster()
    c.start()
    c.gpu = {}
    for name, topo, labels in nodes:
        lab = {"nvidia.com/gpu.present": "true"}
        lab.update(labels or {})
        n = c.add_node(name, gpus=_count(topo), labels=lab, images=images)
        g = GPUNode(c, n, topo)
        c.gpu[name] = g
    return c


def _count(topo):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(BUILD, "sim"), GPUSLICE_SIM_NODE=topology_path(topo),
               GPUSLICE_SIM_STATE="/dev/null")
    r = cluster.run([os.path.join(BUILD, "gpuslice"), "topo", "--topology", topology_path(topo), "--json"], env=env)
    return len(json.loads(r.stdout)["gpus"])


def cuda_image(c):
    """The CUDA workload image (busybox + cuda-workload and the libraries it and the interposer need);
    the simulated driver itself is mounted from the host."""
    built("cuda-workload", "libgpuslice-cuda.so", "sim/libcuda.so.1")
    path = c.path("images", "cuda-workload.tar")
    if not os.path.exists(path):
        cluster.image_tar(path, CUDA_IMAGE, files={
            "/usr/bin/cuda-workload": os.path.join(BUILD, "cuda-workload"),
            # only so that their shared libraries come along (the real files are mounted at run time)
            "/opt/gpuslice-e2e/deps/libgpuslice-cuda.so": os.path.join(BUILD, "libgpuslice-cuda.so"),
            "/opt/gpuslice-e2e/deps/libcuda.so.1": os.path.join(BUILD, "sim", "libcuda.so.1"),
        })
    return path


def pod(name, node, command, limits=None, image=BUSYBOX, namespace="default", labels=None, sim=None, env=None,
        volumes=None, mounts=None, **spec):
    """A Pod manifest pinned to node. sim: a GPUNode whose simulated driver and state are mounted
    (/gpuslice-sim/lib, /gpuslice-sim/node) with LD_LIBRARY_PATH and GPUSLICE_SIM_* set."""
    ctr = {"name": "main", "image": image, "imagePullPolicy": "Never", "command": ["sh", "-c", command],
           "env": [{"name": k, "value": v} for k, v in (env or {}).items()], "volumeMounts": list(mounts or [])}
    vols = list(volumes or [])
    if limits:
        ctr["resources"] = {"limits": {k: str(v) for k, v in limits.items()}}
    if sim:
        vols += [{"name": "sim-lib", "hostPath": {"path": os.path.join(BUILD, "sim")}},
                 {"name": "sim-node", "hostPath": {"path": sim.simdir}}]
        ctr["volumeMounts"] += [{"name": "sim-lib", "mountPath": "/gpuslice-sim/lib", "readOnly": True},
                                {"name": "sim-node", "mountPath": "/gpuslice-sim/node"}]
        ctr["env"] += [{"name": "LD_LIBRARY_PATH", "value": "/gpuslice-sim/lib"},
                       {"name": "GPUSLICE_SIM_NODE", "value": "/gpuslice-sim/node/node.topo"},
                       {"name": "GPUSLICE_SIM_STATE", "value": "/gpuslice-sim/node/state"}]
    s = {"nodeSelector": {"kubernetes.io/hostname": node}, "terminationGracePeriodSeconds": 1,
         "restartPolicy": "Never", "containers": [ctr], "volumes": vols}
    s.update(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {"e2e": name}}, "spec": s}


def get_pod(c, name, namespace="default"):
    return c.api("GET", "/api/v1/namespaces/%s/pods/%s" % (namespace, name))


def wait_pod(c, name, phase="Running", namespace="default", timeout=150):
    def done():
        p = get_pod(c, name, namespace)
        st = p.get("status", {})
        ph = st.get("phase")
        if ph == phase:
            return p
        if ph == "Failed" and phase != "Failed":
            raise Fail("pod %s failed: %s %s %s" % (name, st.get("reason"), st.get("message"), c.kubectl(
                "logs", "-n", namespace, name, check=False).stdout[-1500:]))
        for cs in st.get("containerStatuses", []):
            w = cs.get("state", {}).get("waiting", {})
            if w.get("reason") in ("CreateContainerError", "CreateContainerConfigError", "ErrImageNeverPull",
                                   "RunContainerError"):
                raise Fail("pod %s: %s: %s" % (name, w.get("reason"), w.get("message")))
        return False
    return c.wait("pod %s %s" % (name, phase), done, timeout=timeout)


def logs(c, name, namespace="default"):
    return c.kubectl("logs", "-n", namespace, name)


def delete(c, kind, name, namespace="default", wait=True):
    c.kubectl("delete", kind, name, "-n", namespace, "--ignore-not-found", "--wait=%s" % ("true" if wait else "false"),
              "--grace-period=1", timeout=120)


def main(tests, setup):
    """Run tests (functions taking the cluster) on setup()'s cluster with tests/runner.py's rules: the names in
    argv or $GPUSLICE_E2E_ONLY (an unknown or empty selection fails), PASS/SKIP/FAIL per test, each under
    $GPUSLICE_E2E_TEST_TIMEOUT seconds (default 900); -> exit status 0 / 77 (a skip) / 1."""
    def timed_setup():
        t0 = time.monotonic()
        c = setup()
        cluster._default_log("e2e: cluster up in %.0f s" % (time.monotonic() - t0))
        return c

    return runner.run_suites([(timed_setup, tests)], names=runner.e2e_names(),
                             timeout_s=int(os.environ.get("GPUSLICE_E2E_TEST_TIMEOUT", "900")))


def sh(*argv):
    return " ".join(shlex.quote(str(a)) for a in argv)
