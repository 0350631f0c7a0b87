#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""CDI specs written in the DaemonSet's layout name the host's paths, and a real CDI consumer on the host uses them.

The agent (`gpuslice node`) runs INSIDE a privileged Podman container laid out as deploy/kubernetes lays out the
DaemonSet: the host's device tree at /host/dev (and /sys at /host/sys), the host's driver root read-only at
/driver-root, the simulated NVML where the DaemonSet mounts the driver's libnvidia-ml (/host-driver), its own binary
somewhere only it sees (/mnt/agent/gpuslice, so /proc/self/exe is no host path), and the hook binary (the static
gpuslice-cdi-hook, run once in a container with no library to prove it needs none) and the interposer that the
DaemonSet's init container installed on the host — the init container's own command, read from
deploy/kubernetes/gpuslice-node.yaml, is run in Podman to install them. The agent is given the flags of the
DaemonSet for the two views (--dev-root, --host-dev-root, --driver-root, --host-driver-root, --hook-path). The
kubelet stand-ins (tests/integration/kubelet_standin.py) drive it as in test_dra.py:

  dra     a claim prepared through the kubelet's DRA gRPC (NodePrepareResources), its CDI spec written into the
          host's /var/run/cdi;
  plugin  the device plugin with `--device-list-strategy cdi`: Allocate through the device-plugin kubelet
          stand-in, the node's spec written into the host's /var/run/cdi.

Then Podman on the HOST runs a container with the CDI device the kubelet was answered: every hostPath, mount source
and hook path of the spec must exist on the host (and none is an agent-only path), and the container must run the
fake driver's `nvidia-smi -L`, see the driver's libraries with their soname links (made by the spec's hook) and
the GPU's device node. Exit 77 when not root or Podman is missing (CI counts that as a failure).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_fixture  # noqa: E402
import test_dra as dra  # noqa: E402
from agent_fixture import Skip, check  # noqa: E402

DRIVER_VERSION = "550.54.15"  # the driver of tests/data/topologies' nodes (docs/node-description.md)
CDI_DIR = "/var/run/cdi"      # the host's: Podman 4.3 reads only this and /etc/cdi
AGENT_ONLY = ("/host/", "/driver-root", "/host-driver", "/mnt/agent")  # paths that exist only inside the agent


def podman(*argv, timeout=120, check_rc=True):
    r = subprocess.run(["podman"] + list(argv), capture_output=True, text=True, timeout=timeout)
    if check_rc and r.returncode != 0:
        raise AssertionError("podman %s failed (%d): %s%s" % (" ".join(argv[:3]), r.returncode, r.stdout, r.stderr))
    return r


def daemonset(source):
    with open(os.path.join(source, "deploy", "kubernetes", "gpuslice-node.yaml")) as f:
        ds = [d for d in yaml.safe_load_all(f) if d and d["kind"] == "DaemonSet"][0]
    return ds["spec"]["template"]["spec"]


def sanitized(build):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        return "GPUSLICE_SANITIZE:BOOL=ON" in f.read()


class HostLayoutEnv(dra.DraEnv):
    def __init__(self, args, stubs):
        try:
            self.image = subprocess.run(["bash", os.path.join(args.source, "tests", "integration", "podman-setup.sh")],
                                        capture_output=True, text=True, timeout=300)
        except FileNotFoundError:
            raise Skip("bash missing")
        if self.image.returncode == 77:
            raise Skip(self.image.stderr.strip())
        check(self.image.returncode == 0, "podman-setup failed: %s" % self.image.stderr)
        self.image = self.image.stdout.strip()
        self.tag = "t%d-%s" % (os.getpid(), uuid.uuid4().hex[:6])
        dra.DRIVER = self.tag + ".gpuslice.io"  # unique claim kind and spec names in the shared /var/run/cdi
        self.written = []                           # spec files to remove at close
        os.makedirs(CDI_DIR, exist_ok=True)
        self.name = "gpuslice-cdihost-" + self.tag
        super().__init__(args, stubs)
        # the host's driver install (ld cache, libraries, nvidia-smi, the persistenced socket)
        self.fx = os.path.join(self.tmp, "fx")
        subprocess.run([os.path.join(args.source, "tests", "integration", "cdi-fixture.sh"), self.fx, "1",
                        DRIVER_VERSION, "12.4", "tesla"], check=True, timeout=120, capture_output=True)
        self.host_driver = os.path.join(self.fx, "driver")
        self.hostlib = os.path.join(self.tmp, "usr-local-lib-gpuslice")  # the host's /usr/local/lib/gpuslice
        os.makedirs(self.hostlib)
        self.install()

    def install(self):
        """The DaemonSet's init container, its command as deploy/kubernetes writes it, in Podman: the image's
        gpuslice-cdi-hook and interposer (here the build's) copied into the host directory it mounts. Outside the
        sanitizer build the hook is static: it runs in a container that has no library at all."""
        spec = daemonset(self.args.source)
        init = [c for c in spec["initContainers"] if c["name"] == "install-interposer"][0]
        mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
        check(set(mounts) == {"interposer"}, "the init container mounts %s" % mounts)
        vol = [v for v in spec["volumes"] if v["name"] == "interposer"][0]
        self.host_lib_dir = vol["hostPath"]["path"]  # /usr/local/lib/gpuslice on a real node
        build = os.path.abspath(self.args.build)
        busybox = os.path.realpath(shutil.which("busybox"))  # podman-setup.sh checked it is installed
        r = podman("run", "--rm", "--network", "none", "--name", self.name + "-init",
                   "-v", "%s:%s" % (self.hostlib, mounts["interposer"]),
                   "-v", "%s/gpuslice-cdi-hook:/usr/local/lib/gpuslice/gpuslice-cdi-hook:ro" % build,
                   "-v", "%s/libgpuslice-cuda.so:/usr/local/lib/gpuslice/libgpuslice-cuda.so:ro" % build,
                   "-v", "%s/libgpuslice-nvml.so:/usr/local/lib/gpuslice/libgpuslice-nvml.so:ro" % build,
                   "-v", "%s:/bin/cp:ro" % busybox, "-v", "%s:/bin/mv:ro" % busybox,  # not in the test image
                   self.image, *init["command"], check_rc=False)
        check(r.returncode == 0, "the init container failed: %s" % r.stderr)
        for f in ("gpuslice-cdi-hook", "libgpuslice-cuda.so", "libgpuslice-nvml.so"):
            check(os.access(os.path.join(self.hostlib, f), os.R_OK), "the init container installed no %s" % f)
        if not sanitized(self.args.build):
            hook = os.path.join(self.hostlib, "gpuslice-cdi-hook")
            r = podman("run", "--rm", "--network", "none", "--name", self.name + "-bare", "-v", hook + ":/hook:ro",
                       self.image, "/hook", check_rc=False)
            check(r.returncode == 2 and "Usage: gpuslice-cdi-hook" in r.stderr,
                  "the installed hook does not run without the host's libraries (%d): %s" % (r.returncode, r.stderr))

    def host_of(self, path):
        """A path of a real node's host (the DaemonSet's flags name those) → this test's stand-in for it."""
        check(path.startswith(self.host_lib_dir + "/"), "%s is not under %s" % (path, self.host_lib_dir))
        return os.path.join(self.hostlib, path[len(self.host_lib_dir) + 1:])

    def start_agent(self, *extra, crash=None):
        """The agent in Podman, the DaemonSet's mounts and flags; the rest of test_dra's flags as they are (its
        state, kubelet and API paths are mounted at the same paths inside: the DaemonSet's hostPath volumes)."""
        check(crash is None, "no crash points here")
        log = os.path.join(self.tmp, "agent-%d.log" % len(self.logs))
        self.logs.append(log)
        spec = daemonset(self.args.source)
        agent = [c for c in spec["containers"] if c["name"] == "agent"][0]
        flags = dict(a[2:].split("=", 1) for a in agent["command"] if a.startswith("--") and "=" in a)
        for f in ("dev-root", "host-dev-root", "driver-root", "host-driver-root", "hook-path", "interposer"):
            check(f in flags, "the DaemonSet sets no --%s" % f)
        check(flags["host-dev-root"] == "/" and flags["host-driver-root"] == "/",
              "the DaemonSet's host roots: %s" % flags)
        build = os.path.abspath(self.args.build)
        src = os.path.abspath(self.args.source)
        cmd = ["podman", "run", "--rm", "--name", self.name, "--privileged", "--network", "host",
               # the host's libraries for the build's dynamically linked binary (the image's, in a DaemonSet)
               "-v", "/usr/lib:/usr/lib:ro", "-v", "/usr/lib:/lib:ro", "-v", "/usr/lib64:/lib64:ro",
               "-v", "%s:/mnt/agent:ro" % build,
               "-v", "%s:%s:ro" % (src, src),
               "-v", "%s:%s" % (self.tmp, self.tmp),
               # the DaemonSet's views of the host (deploy/kubernetes/gpuslice-node.yaml)
               "-v", "%s/dev:%s/dev:ro" % (self.host, flags["dev-root"]),
               "-v", "%s/sys:%s/sys:ro" % (self.host, flags["dev-root"]),
               "-v", "%s:%s:ro" % (self.host_driver, flags["driver-root"]),
               "-v", "%s/sim:/host-driver:ro" % build,
               "-v", "%s:%s:ro" % (self.hostlib, self.host_lib_dir),
               "-v", "%s:%s" % (CDI_DIR, CDI_DIR),
               "-e", "LD_LIBRARY_PATH=/host-driver", "-e", "NODE_NAME=" + dra.NODE,
               "-e", "GPUSLICE_SIM_NODE=" + os.path.abspath(self.env["GPUSLICE_SIM_NODE"]),
               "-e", "GPUSLICE_SIM_STATE=" + self.env["GPUSLICE_SIM_STATE"],
               "-e", "ASAN_OPTIONS=detect_leaks=0"]
        if self.plugin_spec:
            cmd += ["-e", "GPUSLICE_CDI_SPEC=" + self.plugin_spec]
        cmd += [self.image, "/mnt/agent/gpuslice", "node", "--dra", "--dra-driver-name", dra.DRIVER,
                "--plugin-dir", self.dp, "--state-dir", self.state_dir, "--pod-resources-socket", self.podres,
                "--kubeconfig", self.kubeconfig, "--dra-registry-dir", self.registry, "--dra-plugin-dir",
                self.plugins, "--dra-cdi-dir", CDI_DIR, "--health-quiet-period", "2s", "--log-level", "debug",
                "--metrics-address=",
                "--dev-root", flags["dev-root"], "--driver-root", flags["driver-root"],
                # the host's views: where this test's host keeps what a real host has at / and /usr/local/lib
                "--host-dev-root", self.host, "--host-driver-root", self.host_driver,
                "--hook-path", self.host_of(flags["hook-path"]), "--interposer", self.host_of(flags["interposer"])]
        self.agent = subprocess.Popen(cmd + list(extra), stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        return self.agent

    plugin_spec = None

    def kill_agent(self, sig=signal.SIGKILL):
        if self.agent and self.agent.poll() is None:
            podman("kill", "--signal", "KILL", self.name, check_rc=False, timeout=30)
            try:
                self.agent.wait(30)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(5)
        podman("rm", "--force", "--ignore", self.name, check_rc=False, timeout=60)
        return self.agent.returncode if self.agent else None

    def close(self, failed):
        try:
            super().close(failed)
        finally:
            left = [os.path.join(CDI_DIR, n) for n in os.listdir(CDI_DIR) if n.startswith(dra.DRIVER + "-")]
            for p in self.written + left:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass

    # ---- the consumer ----

    def check_spec_paths(self, spec_path):
        """Every hostPath, mount source and hook path of the spec exists on the host; none is an agent-only path.
        Returns the spec."""
        with open(spec_path) as f:
            spec = json.load(f)
        paths = []
        for edits in [spec.get("containerEdits", {})] + [d["containerEdits"] for d in spec["devices"]]:
            paths += [("device node", n.get("hostPath", n["path"])) for n in edits.get("deviceNodes", [])]
            paths += [("mount", m["hostPath"]) for m in edits.get("mounts", [])]
            paths += [("hook", h["path"]) for h in edits.get("hooks", [])]
        kinds = {k for k, _ in paths}
        check(kinds == {"device node", "mount", "hook"}, "the spec lacks some of its parts: %s" % sorted(kinds))
        for what, p in paths:
            check(not any(p.startswith(a) for a in AGENT_ONLY), "%s %s is a path only the agent sees" % (what, p))
            check(os.path.lexists(p), "%s %s of %s does not exist on the host" % (what, p, spec_path))
        hooks = {p for k, p in paths if k == "hook"}
        check(hooks == {os.path.join(self.hostlib, "gpuslice-cdi-hook")}, "hook paths %s" % hooks)
        check(any(p.endswith("/usr/bin/nvidia-smi") for k, p in paths if k == "mount"), "no nvidia-smi mount")
        # a shared device's real NVML (the NVML stand-in's, docs/interposer.md) is the host's, under its driver root
        for edits in [spec.get("containerEdits", {})] + [d["containerEdits"] for d in spec["devices"]]:
            mounts = {m["containerPath"]: m["hostPath"] for m in edits.get("mounts", [])}
            if "/run/gpuslice/lib/libcuda.so.1" in mounts:
                real = mounts.get("/run/gpuslice/driver/libnvidia-ml.so.1", "")
                check(real.startswith(self.host_driver + "/") and
                      mounts.get("/run/gpuslice/lib/libnvidia-ml.so.1") ==
                      os.path.join(self.hostlib, "libgpuslice-nvml.so"), "a shared device's NVML mounts %s" % mounts)
        return spec

    def run_consumer(self, device, gpu_minor):
        """Podman on the host, the CDI device as the kubelet would hand it to the runtime."""
        script = ("nvidia-smi -L; ls /dev | grep nvidia | tr '\\n' ' '; echo; "
                  "ls -l /usr/lib/x86_64-linux-gnu/; grep -c ' /usr/lib/x86_64-linux-gnu/libcuda.so.%s ro,' "
                  "/proc/self/mountinfo" % DRIVER_VERSION)
        r = podman("run", "--rm", "--network", "none", "--name", self.name + "-use", "--device", device,
                   self.image, "sh", "-c", script, check_rc=False)
        out = r.stdout + r.stderr
        check(r.returncode == 0, "the CDI consumer failed (%d): %s" % (r.returncode, out))
        lines = out.splitlines()
        check(lines[0] == "fake nvidia-smi", "nvidia-smi -L printed %r: %s" % (lines[0], out))
        check(lines[1].split() == ["nvidia%d" % gpu_minor, "nvidiactl"], "device nodes %r" % lines[1])
        for want in ("libcuda.so.1 -> libcuda.so.%s" % DRIVER_VERSION, "libcuda.so -> libcuda.so.1",
                     "libnvidia-ml.so.1 -> libnvidia-ml.so.%s" % DRIVER_VERSION):
            check(want in out, "the container does not see %s: %s" % (want, out))
        check(lines[-1] == "1", "libcuda is not a read-only bind mount: %s" % out)


def test_dra(e):
    dra.up(e)
    c = e.claim("one", [("gpu", "gpu-1")])
    a = dra.ok(e.kubelet.prepare(c), c[1])
    ids = [i for d in a.devices for i in d.cdi_device_ids]
    check(ids == ["%s/claim=%s-gpu-1" % (dra.DRIVER, c[1])], "CDI IDs %s" % ids)
    spec_path = os.path.join(CDI_DIR, "%s-claim_%s.json" % (dra.DRIVER, c[1]))
    e.written.append(spec_path)
    e.check_spec_paths(spec_path)
    minor = next(g["minor"] for g in e.topo["gpus"] if g["index"] == 1)
    e.run_consumer(ids[0], minor)
    check(e.kubelet.unprepare(c) == {c[1]: ""}, "unprepare")
    check(not os.path.exists(spec_path), "the claim's spec outlived its unprepare")


def test_plugin(e):
    kind = e.tag.replace("-", "") + ".gpuslice.io/gpu"
    e.plugin_spec = os.path.join(CDI_DIR, "%s.json" % e.tag)
    e.written.append(e.plugin_spec)
    e.start_agent("--dra-device-plugin", "--device-list-strategy", "cdi", "--cdi-kind", kind)
    e.kubelet.register()
    e.dp_kubelet.wait_for(lambda: len(e.dp_kubelet.registrations) >= 1, 20, "device plugin registered")
    e.dp_kubelet.wait_for(lambda: len(e.dp_kubelet.law) > 0, 10, "ListAndWatch")
    deadline = time.monotonic() + 20
    while not os.path.exists(e.plugin_spec):
        check(time.monotonic() < deadline, "the agent wrote no CDI spec at %s" % e.plugin_spec)
        time.sleep(0.2)
    ids = [d.ID for d in e.dp_kubelet.law[-1][2].devices]
    pb = e.stubs["deviceplugin_pb2"]
    req = pb.AllocateRequest()
    req.container_requests.add(devices_ids=[ids[2]])
    resp = e.dp_kubelet.plugin_stub()[0].Allocate(req, timeout=10)
    names = [d.name for c in resp.container_responses for d in c.cdi_devices]
    check(len(names) == 1 and names[0].startswith(kind + "="), "Allocate's CDI devices %s" % names)
    e.check_spec_paths(e.plugin_spec)
    gpu = next(g for g in e.topo["gpus"] if g["uuid"] == names[0].split("=", 1)[1] or str(g["index"]) == names[0])
    e.run_consumer(names[0], gpu["minor"])


TESTS = {"dra": test_dra, "plugin": test_plugin}

if __name__ == "__main__":
    agent_fixture.run_main(TESTS, make_env=lambda a, s: HostLayoutEnv(a, s), label="cdi-host-", timeout_s=280)
