# SPDX-License-Identifier: Apache-2.0
"""What the node agent's integration tests share (test_agent.py, test_share.py,
test_hostile_local.py, tests/interposer/test_podman_core.py):

- Env: the agent process fixture: temp plugin/state/dev dirs, the simulated node (LD_LIBRARY_PATH,
  GPUSLICE_SIM_NODE, a private GPUSLICE_SIM_STATE), the kubelet stand-in (kubelet_standin.py), the
  real `gpuslice node` started and killed, and the kubelet-side calls;
- run_main: tests/runner.py's main with this fixture (--build/--source/--topology, each test in its
  own process under its timeout, PASS/SKIP/FAIL lines, logs on failure, exit 0 / 77 skipped / 1);
- check, Skip (tests/runner.py's), free_port, scrape.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import kubelet_standin  # noqa: E402
import runner  # noqa: E402

# Reactions the spec wants within 1 s are checked as behaviour with this generous bound; how fast
# they are is measured by bench/agent-bench.py (docs/BENCHMARKS.md), never asserted here.
REACT_S = 10


# A peer the test needs is missing (exit 77: ctest reports it skipped, CI fails on it): the runner's one rule.
Skip = runner.Skip
check = runner.check


class Env:
    def __init__(self, args, stubs):
        self.args = args
        self.stubs = stubs
        self.pb = stubs["deviceplugin_pb2"]
        self.tmp = tempfile.mkdtemp(prefix="gpuslice-agent-")
        self.plugin_dir = os.path.join(self.tmp, "device-plugins")
        self.state_dir = os.path.join(self.tmp, "state")
        self.dev_root = os.path.join(self.tmp, "host")
        self.podres = os.path.join(self.tmp, "pod-resources.sock")
        os.makedirs(self.plugin_dir)
        os.makedirs(os.path.join(self.dev_root, "dev"))
        # The device nodes a host would have; uvm-tools and modeset deliberately absent.
        for n in ["nvidia%d" % i for i in range(16)] + ["nvidiactl", "nvidia-uvm"]:
            open(os.path.join(self.dev_root, "dev", n), "w").close()
        self.env = dict(os.environ)
        self.env["LD_LIBRARY_PATH"] = os.path.join(args.build, "sim")
        self.env["GPUSLICE_SIM_NODE"] = args.topology
        self.env["GPUSLICE_SIM_STATE"] = os.path.join(self.tmp, "sim.state")
        self.kubelet = kubelet_standin.Kubelet(stubs, self.plugin_dir, self.podres)
        self.kubelet.start()
        self.agent = None
        self.logs = []
        self.sim("reset")

    # ---- processes ----

    def sim(self, *argv):
        r = subprocess.run([os.path.join(self.args.build, "sim", "gpuslice-sim")] + list(argv), env=self.env,
                           capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise AssertionError("gpuslice-sim %s failed: %s" % (" ".join(argv), r.stderr))
        return r.stdout

    def start_agent(self, *extra, quiet="2s", podres_flag=True):
        """podres_flag False: no --pod-resources-socket (the config file's setting, which SIGHUP reloads)."""
        log = os.path.join(self.tmp, "agent-%d.log" % len(self.logs))
        self.logs.append(log)
        podres = ["--pod-resources-socket", self.podres] if podres_flag else []
        cmd = [os.path.join(self.args.build, "gpuslice"), "node", "--plugin-dir", self.plugin_dir, "--state-dir",
               self.state_dir] + podres + ["--dev-root", self.dev_root,
               "--health-quiet-period", quiet, "--log-level", "debug",
               # metrics off unless a test asks: agents of parallel tests would share a port
               "--metrics-address="] + list(extra)
        self.agent = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=open(log, "w"))
        return self.agent

    def registered(self, count=1, timeout=10):
        self.kubelet.wait_for(lambda: len(self.kubelet.registrations) >= count, timeout,
                              "registration #%d" % count)
        self.kubelet.wait_for(lambda: len(self.kubelet.law) > 0, timeout, "first ListAndWatch message")
        return self.kubelet.registrations[count - 1]

    def kill_agent(self, sig=signal.SIGKILL):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(sig)
            try:
                self.agent.wait(10)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(5)
        return self.agent.returncode if self.agent else None

    def status(self):
        r = subprocess.run([os.path.join(self.args.build, "gpuslice"), "status", "--state-dir", self.state_dir,
                            "--json"], capture_output=True, text=True, timeout=15)
        if r.returncode != 0:
            raise AssertionError("gpuslice status failed (%d): %s" % (r.returncode, r.stderr))
        return json.loads(r.stdout)

    def close(self, failed):
        try:
            self.kill_agent(signal.SIGKILL)
        finally:
            self.kubelet.close()
            if failed:
                dump_logs(self.logs)
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- kubelet-side calls ----

    def stub(self):
        return self.kubelet.plugin_stub()[0]

    def ids(self):
        """Device IDs in NVML index order (the order ListAndWatch lists them)."""
        resp = self.kubelet.law[-1][2]
        return [d.ID for d in resp.devices]

    def prefer(self, available, size, must=()):
        req = self.pb.PreferredAllocationRequest()
        req.container_requests.add(available_deviceIDs=available, must_include_deviceIDs=list(must),
                                   allocation_size=size)
        return list(self.stub().GetPreferredAllocation(req, timeout=5).container_responses[0].deviceIDs)

    def allocate(self, *containers):
        req = self.pb.AllocateRequest()
        for ids in containers:
            req.container_requests.add(devices_ids=ids)
        return self.stub().Allocate(req, timeout=5)

    def expect_error(self, fn, code, text=None):
        try:
            fn()
        except grpc.RpcError as e:
            if e.code() != code:
                raise AssertionError("expected %s, got %s: %s" % (code, e.code(), e.details()))
            if text and text not in (e.details() or ""):
                raise AssertionError("expected %r in the error message, got %r" % (text, e.details()))
            return e.details()
        raise AssertionError("expected %s, the call succeeded" % code)


def dump_logs(logs):
    """The tail of each log on stderr, for a failed test."""
    for log in logs:
        sys.stderr.write("---- %s ----\n" % log)
        with open(log) as f:
            sys.stderr.write(f.read()[-20000:])


def free_port():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def scrape(port, until, what, timeout=REACT_S):
    """GET /metrics until `until(text)` holds (the sampler is periodic)."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                text = r.read().decode()
            if until(text):
                return text
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError("metrics never showed %s; last scrape:\n%s" % (what, text[-3000:]))


def run_main(tests, make_env=None, label="", timeout_s=90):
    """tests/runner.py's main with this fixture: --build/--source/--topology and the test names (all when
    none is named), each test in its own process with a fresh (make_env or Env)(args, stubs) under
    timeout_s; PASS/SKIP/FAIL <label><name>; exit 0 / 77 / 1."""
    factory = make_env or Env

    def fixture(args):
        return factory(args, kubelet_standin.load_stubs(args.build))

    runner.main(tests, make_env=fixture, label=label, timeout_s=timeout_s, arguments=runner.WITH_TOPOLOGY)


def nvml_driver_root(root, build, driver="550.54.15"):
    """ROOT/driver as a node's driver root holds NVML: the simulator's libnvidia-ml.so.1 as
    libnvidia-ml.so.<DRIVER> (the topologies' default driver) in an ld cache made by `ldconfig -r`. Returns
    (the driver root, the library's path)."""
    drv = os.path.join(root, "driver")
    lib = os.path.join(drv, "usr", "lib", "x86_64-linux-gnu")
    os.makedirs(lib, exist_ok=True)
    os.makedirs(os.path.join(drv, "etc"), exist_ok=True)
    real = os.path.join(lib, "libnvidia-ml.so." + driver)
    shutil.copy(os.path.join(build, "sim", "libnvidia-ml.so.1"), real)
    with open(os.path.join(drv, "etc", "ld.so.conf"), "w") as f:
        f.write("/usr/lib/x86_64-linux-gnu\n")
    subprocess.run(["ldconfig", "-r", drv], check=True, timeout=30)
    return drv, real
