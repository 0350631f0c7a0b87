# SPDX-License-Identifier: Apache-2.0
"""End to end compute limit: the node agent's Allocate answer for a 30 % core share, applied to a real
Podman container (as test_share.py's podman case applies it), running tests/interposer/cuda-workload
that launches kernels back to back against the simulated CUDA driver with libgpuslice-cuda.so preloaded.
From the host, the container's SM utilization is read through the simulated NVML (`gpuslice-sim show`,
which prints what nvmlDeviceGetProcessUtilization reports per process) while it runs.

Behaviour, not speed: unthrottled the workload keeps the GPU ~100 % busy; under `--core 30` its share
must stay well below that and above 0 (generous bounds: a shared 2-core machine). Bounded time (a 4 s
spin). Exit 77 = skipped (podman, runc or busybox not installed, not root, or nothing built).

    /usr/bin/python3 test_podman_core.py --build DIR --source DIR --topology FILE
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import agent_fixture  # noqa: E402
import test_share  # noqa: E402
from agent_fixture import check  # noqa: E402

TEST_TIMEOUT_S = 120
SPIN_S = 4
TARGET = 30


def sm_samples(e, stop):
    """SM utilization of every process, summed, from `gpuslice-sim show` every 0.2 s until stop()."""
    show = os.path.join(e.args.build, "sim", "gpuslice-sim")
    out = []
    while not stop():
        r = subprocess.run([show, "show"], capture_output=True, text=True, env=e.env, timeout=10)
        total, in_procs = 0, False
        for line in r.stdout.splitlines():
            f = line.split()
            if f[:2] == ["GPU", "PID"]:
                in_procs = True
            elif in_procs and len(f) >= 5 and f[0].isdigit() and f[4].rstrip("%").isdigit():
                total += int(f[4].rstrip("%"))
        out.append(total)
        time.sleep(0.2)
    return out


def test_podman_core(e):
    setup = os.path.join(e.args.source, "tests", "integration", "podman-setup.sh")
    r = subprocess.run([setup], capture_output=True, text=True, timeout=300)
    if r.returncode == 77:
        raise agent_fixture.Skip(r.stderr.strip())
    check(r.returncode == 0, "podman setup failed: %s" % r.stderr)
    image = r.stdout.strip()
    workload = os.path.abspath(os.path.join(e.args.build, "cuda-workload"))
    needed = [workload, os.path.join(e.args.build, "libgpuslice-cuda.so"), os.path.join(e.args.build, "sim", "gpuslice-sim")]
    check(all(os.path.exists(f) for f in needed), "not built (every build has them): %s" % needed)
    root = tempfile.mkdtemp(prefix="gpuslice-core-host-", dir="/dev")
    os.makedirs(os.path.join(root, "dev"))
    for minor in range(8):
        os.mknod(os.path.join(root, "dev", "nvidia%d" % minor), 0o666 | 0o020000, os.makedev(195, minor))
    os.mknod(os.path.join(root, "dev", "nvidiactl"), 0o666 | 0o020000, os.makedev(195, 255))
    name = "gpuslice-core-%d" % os.getpid()
    proc = None
    try:
        e.dev_root = root
        e.start_share()
        got = e.admit((e.core, TARGET), (e.mem, 8))
        resp = got[e.core][1]
        check(any("core=%d" % TARGET in line for line in open(
            [m.host_path for m in resp.mounts if m.container_path.endswith("limits")][0])),
            "the limits file does not say core=%d" % TARGET)
        sim = os.path.abspath(os.path.join(e.args.build, "sim"))
        state = e.env["GPUSLICE_SIM_STATE"]
        plumbing = ["-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro", "-v", "/usr/lib:/usr/lib:ro",
                    "-v", "%s:%s:ro" % (sim, sim), "-v", "%s:%s:ro" % (workload, workload),
                    "-v", "%s:%s:ro" % (e.args.topology, e.args.topology), "-v", "%s:%s" % (state, state),
                    "-e", "GPUSLICE_SIM_NODE=" + e.args.topology, "-e", "GPUSLICE_SIM_STATE=" + state,
                    "-e", "LD_LIBRARY_PATH=" + sim,
                    "-e", "CUDA_VISIBLE_DEVICES=" + resp.envs["NVIDIA_VISIBLE_DEVICES"]]
        flags = test_share.podman_flags(resp, e.args.build, e.dev_root)
        # kernels of 30 blocks x 1 ms: each launch fills the GPU (30 SMs) for 1 ms
        argv = ["timeout", "60", "podman", "run", "--rm", "--network", "none", "--name", name] + flags + \
            plumbing + [image, workload, "init", "spin", str(SPIN_S), "30", "1000"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        samples = sm_samples(e, lambda: proc.poll() is not None)
        out, err = proc.communicate(timeout=60)
        check(proc.returncode == 0 and "launched" in out, "workload in podman: rc %d\n%s\n%s" %
              (proc.returncode, out, err))
        busy = [s for s in samples if s > 0]
        settled = busy[5:]  # the first second: the controller learning the cost of a launch
        check(len(settled) >= 5, "too few utilization samples while it ran: %s" % samples)
        mean = sum(settled) / len(settled)
        print("podman --core %d: SM utilization through NVML %s, mean %.1f %%; %s" %
              (TARGET, settled, mean, out.strip()))
        check(5 <= mean <= 60, "container SM share %.1f %% is not near its %d %% target (samples %s)" %
              (mean, TARGET, settled))
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["timeout", "30", "podman", "rm", "-f", "-t", "0", name], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def nvml_totals(out):
    """The memory totals `cuda-workload nvml-private` printed, one per GPU asked."""
    return [int(line.split()[1]) for line in out.splitlines() if line.startswith("nvmlp ")]


def test_podman_nvml(e):
    """pynvml's view in a real container (issue 29, HAMi-core #181): with the agent's Allocate answer applied,
    NVML looked up on a private dlopen("libnvidia-ml.so.1") handle reads the container's memory limit on its
    GPU — the stand-in the answer mounts and preloads after the interposer, its real NVML the driver's (here the
    simulated one, found through the ld cache under --driver-root as on a node). The same container without the
    stand-in's mounts reads the whole GPU: the answer is what makes the difference."""
    setup = os.path.join(e.args.source, "tests", "integration", "podman-setup.sh")
    r = subprocess.run([setup], capture_output=True, text=True, timeout=300)
    if r.returncode == 77:
        raise agent_fixture.Skip(r.stderr.strip())
    check(r.returncode == 0, "podman setup failed: %s" % r.stderr)
    image = r.stdout.strip()
    workload = os.path.abspath(os.path.join(e.args.build, "cuda-workload"))
    sim = os.path.abspath(os.path.join(e.args.build, "sim"))
    standin = os.path.join(os.path.abspath(e.args.build), "libgpuslice-nvml.so")
    needed = [workload, standin, os.path.join(sim, "libnvidia-ml.so.1")]
    check(all(os.path.exists(f) for f in needed), "not built (every build has them): %s" % needed)
    root = tempfile.mkdtemp(prefix="gpuslice-nvml-host-", dir="/dev")
    os.makedirs(os.path.join(root, "dev"))
    for minor in range(8):
        os.mknod(os.path.join(root, "dev", "nvidia%d" % minor), 0o666 | 0o020000, os.makedev(195, minor))
    os.mknod(os.path.join(root, "dev", "nvidiactl"), 0o666 | 0o020000, os.makedev(195, 255))
    # the driver's files as a node has them: lib*.so.<driver version> in the ld cache (the simulator's NVML)
    driver_root, real = agent_fixture.nvml_driver_root(root, e.args.build)
    name = "gpuslice-nvml-%d" % os.getpid()
    try:
        e.dev_root = root
        e.start_share("gpuslice", "--driver-root", driver_root)
        got = e.admit((e.mem, 8))
        resp = got[e.mem][1]
        mounts = {m.container_path: m.host_path for m in resp.mounts}
        check(mounts.get("/run/gpuslice/lib/libnvidia-ml.so.1") == standin and
              mounts.get("/run/gpuslice/driver/libnvidia-ml.so.1") == real, "the NVML mounts: %s" % mounts)
        limit = [int(w.split("=")[1]) for line in open(mounts["/run/gpuslice/limits"]) for w in line.split()
                 if w.startswith("memory=")]
        check(len(limit) == 1 and limit[0] > 0, "the limits file's memory: %s" % limit)
        state = e.env["GPUSLICE_SIM_STATE"]
        # the simulator's libraries on LD_LIBRARY_PATH: without the stand-in, dlopen finds the real NVML by name
        plumbing = ["-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro", "-v", "/usr/lib:/usr/lib:ro",
                    "-v", "%s:%s:ro" % (sim, sim), "-v", "%s:%s:ro" % (workload, workload),
                    "-v", "%s:%s:ro" % (e.args.topology, e.args.topology), "-v", "%s:%s" % (state, state),
                    "-e", "GPUSLICE_SIM_NODE=" + e.args.topology, "-e", "GPUSLICE_SIM_STATE=" + state,
                    "-e", "LD_LIBRARY_PATH=" + sim,
                    "-e", "CUDA_VISIBLE_DEVICES=" + resp.envs["NVIDIA_VISIBLE_DEVICES"]]
        steps = ["init"] + [w for i in range(8) for w in ("nvml-private", str(i))]

        def run(flags, tag):
            argv = ["timeout", "60", "podman", "run", "--rm", "--network", "none", "--name", "%s-%s" % (name, tag)] + \
                flags + plumbing + [image, workload] + steps
            r = subprocess.run(argv, capture_output=True, text=True, timeout=90)
            check(r.returncode == 0, "%s workload in podman: rc %d\n%s\n%s" % (tag, r.returncode, r.stdout, r.stderr))
            totals = nvml_totals(r.stdout)
            check(len(totals) == 8, "%s: NVML totals %s\n%s" % (tag, totals, r.stdout))
            return totals

        flags = test_share.podman_flags(resp, e.args.build, e.dev_root)
        limited = run(flags, "answer")
        print("podman, the agent's answer: NVML totals on a private handle %s (limit %d)" % (limited, limit[0]))
        check(limited.count(limit[0]) == 1 and max(limited) > limit[0],
              "a private NVML handle does not read the limit %d on its GPU only: %s" % (limit[0], limited))
        # control: the same answer less the stand-in (what the agent answered before): the whole GPU
        bare = []
        for i in range(0, len(flags), 2):
            if "libnvidia-ml" in flags[i + 1]:
                continue
            v = flags[i + 1].replace(" /run/gpuslice/lib/libnvidia-ml.so.1", "")
            bare += [flags[i], v]
        with open(os.path.join(e.tmp, "ld.so.preload"), "w") as f:
            f.write("/run/gpuslice/lib/libcuda.so.1\n")
        bare = [v.replace(mounts["/etc/ld.so.preload"], os.path.join(e.tmp, "ld.so.preload")) for v in bare]
        whole = run(bare, "bare")
        print("podman, without the stand-in: NVML totals %s" % whole)
        check(limit[0] not in whole, "without the stand-in a private handle should read the whole GPU: %s" % whole)
    finally:
        for tag in ("answer", "bare"):
            subprocess.run(["timeout", "30", "podman", "rm", "-f", "-t", "0", "%s-%s" % (name, tag)],
                           capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    agent_fixture.run_main({"podman-core": test_podman_core, "podman-nvml": test_podman_nvml}, test_share.Share, "",
                           TEST_TIMEOUT_S)
