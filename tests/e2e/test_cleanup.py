# SPDX-License-Identifier: Apache-2.0
"""The harness leaves nothing behind: a cluster (`cluster.py up`, one node, a pod running) ended by
SIGTERM — as the per-file timeout ends a test — removes every process, its bridge and its directory;
ended by SIGKILL, its components die with it (PR_SET_PDEATHSIG) and `cluster.py reap` (what run.sh does
after a file) removes the containers, the bridge and the directory.

    /usr/bin/python3 tests/e2e/test_cleanup.py [TEST ...]
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import cluster
import e2e
from e2e import check

PY = "/usr/bin/python3"


def leftovers(workdir):
    """Processes whose command line names workdir."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if workdir in cmd:
            found.append("%s %s" % (pid, cmd[:150]))
    return found


def bridge_exists(name):
    return subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0


def start_up(workdir):
    p = subprocess.Popen([PY, os.path.join(cluster.HERE, "cluster.py"), "up", "--nodes", "1", "--gpus", "2",
                          "--workdir", workdir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    lines = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        line = p.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("up;"):
            break
    check(lines and lines[-1].startswith("up;"), "cluster.py up did not come up:\n%s" % "".join(lines[-30:]))
    kubeconfig = os.path.join(workdir, "admin.kubeconfig")
    kubectl = os.path.join(cluster.k8s_bin_dir(), "kubectl")
    manifest = e2e.pod("sleeper", "node1", "sleep 3600")
    subprocess.run([kubectl, "--kubeconfig", kubeconfig, "apply", "-f", "-"], input=json.dumps(manifest), text=True,
                   check=True, capture_output=True)

    def running():
        r = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get", "pod", "sleeper", "-o",
                            "jsonpath={.status.phase}"], capture_output=True, text=True)
        return r.stdout == "Running"
    deadline = time.monotonic() + 90
    while not running():
        check(time.monotonic() < deadline, "the pod did not start")
        time.sleep(1)
    with open(os.path.join(workdir, "nodes", "node1", "cni", "10-e2e.conflist")) as f:
        bridge = json.load(f)["plugins"][0]["bridge"]
    check(bridge_exists(bridge), "no bridge %s while the pod runs" % bridge)
    return p, bridge


def wait_clean(workdir, bridge, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = leftovers(workdir)
        if not left and not os.path.exists(workdir) and not bridge_exists(bridge):
            return
        time.sleep(1)
    raise e2e.Fail("left behind: processes %s, dir exists %s, bridge %s" % (
        leftovers(workdir), os.path.exists(workdir), bridge_exists(bridge)))


def test_sigterm_removes_everything(_c):
    workdir = tempfile.mkdtemp(prefix="gpuslice-e2e-cleanup-")
    p, bridge = start_up(workdir)
    os.kill(p.pid, signal.SIGTERM)
    p.wait(120)
    wait_clean(workdir, bridge)


def test_sigkill_then_reap(_c):
    workdir = tempfile.mkdtemp(prefix="gpuslice-e2e-cleanup-")
    p, bridge = start_up(workdir)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(30)
    deadline = time.monotonic() + 30
    while True:  # the components die with the harness; only the container and its shim may be left
        left = [x for x in leftovers(workdir) if "containerd-shim" not in x]
        if not left:
            break
        check(time.monotonic() < deadline, "still running after the harness was SIGKILLed: %s" % left)
        time.sleep(1)
    subprocess.run([PY, os.path.join(cluster.HERE, "cluster.py"), "reap", workdir], check=True, capture_output=True)
    wait_clean(workdir, bridge, timeout=30)


TESTS = [test_sigterm_removes_everything, test_sigkill_then_reap]

if __name__ == "__main__":
    sys.exit(e2e.main(TESTS, lambda: None))
