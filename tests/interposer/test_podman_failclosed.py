# SPDX-License-Identifier: Apache-2.0
"""Fail closed in a real Podman container: a container given a memory limit by the node agent's Allocate
answer cannot allocate past it, nor use CUDA unlimited, however its environment or its loader is changed.
tests/interposer/cuda-workload runs in the container against the simulated driver (build/sim/libcuda.so.1).

  1. the agent's answer as is: LD_PRELOAD + /etc/ld.so.preload name the interposer (mounted as
     /run/gpuslice/lib/libcuda.so.1): 2 GiB fits, one byte more is refused;
  2. the environment cleared (no LD_PRELOAD, no GPUSLICE_LIMITS): /etc/ld.so.preload still loads it and it
     reads the limits at their fixed path: still refused;
  3. the control: the same container without the agent's mounts gets 3 GiB (so the refusals are the limiter's);
  4. the interposer at the driver's place (over the driver found by name, the real one moved to
     /run/gpuslice/driver), no preload of any kind, no environment: limited, by name (dlopen, dlsym and
     cuGetProcAddress);
  5. the same with a file the loader cannot load at the driver's place: no CUDA at all;
  6. the same with the limits file missing: every call refused, with the reason on stderr.

Exit 77 = skipped (podman, runc or busybox missing, not root, or nothing built).
    /usr/bin/python3 test_podman_failclosed.py --build DIR --source DIR --topology FILE
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import agent_fixture  # noqa: E402
import test_share  # noqa: E402
from test_agent import check  # noqa: E402

TEST_TIMEOUT_S = 140
GIB = 1 << 30


def test_podman_failclosed(e):
    setup = os.path.join(e.args.source, "tests", "integration", "podman-setup.sh")
    r = subprocess.run([setup], capture_output=True, text=True, timeout=300)
    if r.returncode == 77:
        raise test_share.Skip(r.stderr.strip())
    check(r.returncode == 0, "podman setup failed: %s" % r.stderr)
    image = r.stdout.strip()
    build = os.path.abspath(e.args.build)
    workload = os.path.join(build, "cuda-workload")
    interposer = os.path.join(build, "libgpuslice-cuda.so")
    sim = os.path.join(build, "sim")
    if not all(os.path.exists(f) for f in (workload, interposer, os.path.join(sim, "libcuda.so.1"))):
        raise test_share.Skip("cuda-workload, libgpuslice-cuda.so or the simulated driver not built")
    root = tempfile.mkdtemp(prefix="gpuslice-fc-host-", dir="/dev")
    os.makedirs(os.path.join(root, "dev"))
    for minor in range(8):
        os.mknod(os.path.join(root, "dev", "nvidia%d" % minor), 0o666 | 0o020000, os.makedev(195, minor))
    os.mknod(os.path.join(root, "dev", "nvidiactl"), 0o666 | 0o020000, os.makedev(195, 255))
    name = "gpuslice-fc-%d" % os.getpid()
    broken = os.path.join(root, "not-a-library.so")
    with open(broken, "w") as f:
        f.write("this is not an ELF object\n")
    try:
        e.dev_root = root
        e.start_share()
        got = e.admit((e.core, 50), (e.mem, 8))  # 50 %, 8 x 256 MiB = 2 GiB
        resp = got[e.mem][1]
        state = e.env["GPUSLICE_SIM_STATE"]
        # device specs name the host's /dev; this test's "host /dev" is the agent's dev root
        devices = [f for d in resp.devices for f in ("--device", "%s%s:%s:%s" % (root.rstrip("/"), d.host_path,
                                                                                   d.container_path, d.permissions))]
        plumbing = ["-v", "/lib:/lib:ro", "-v", "/lib64:/lib64:ro", "-v", "/usr/lib:/usr/lib:ro",
                    "-v", "%s:%s:ro" % (sim, sim), "-v", "%s:%s:ro" % (workload, workload),
                    "-v", "%s:%s:ro" % (e.args.topology, e.args.topology), "-v", "%s:%s" % (state, state),
                    "-e", "GPUSLICE_SIM_NODE=" + e.args.topology, "-e", "GPUSLICE_SIM_STATE=" + state,
                    "-e", "CUDA_VISIBLE_DEVICES=" + resp.envs["NVIDIA_VISIBLE_DEVICES"]]
        libpath = ["-e", "LD_LIBRARY_PATH=" + sim]  # the simulated driver, found by name

        def run(flags, *argv):
            argv = ["timeout", "60", "podman", "run", "--rm", "--network", "none", "--name", name] + flags + \
                [image, workload] + list(argv)
            r = subprocess.run(argv, capture_output=True, text=True, timeout=90)
            subprocess.run(["timeout", "30", "podman", "rm", "-f", "-t", "0", name], capture_output=True)
            return r

        limits_host = [m.host_path for m in resp.mounts if m.container_path == "/run/gpuslice/limits"][0]
        shm_host = [m.host_path for m in resp.mounts if m.container_path == "/run/gpuslice/shm"][0]
        at_limit = ["init", "alloc", "2G", "alloc!", "1", "info", "expect-free", "0"]

        # 1. the agent's answer
        agent = test_share.podman_flags(resp, e.args.build, root) + plumbing + libpath
        r = run(agent, *at_limit)
        check(r.returncode == 0, "1. agent wiring: rc %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        # 2. environment cleared: podman's own -e flags of the answer left out
        flags = test_share.podman_flags(resp, e.args.build, root)
        no_env = []
        for flag, value in zip(flags[::2], flags[1::2]):  # podman_flags gives (flag, value) pairs
            if not (flag == "-e" and value.startswith(("LD_PRELOAD=", "GPUSLICE_LIMITS="))):
                no_env += [flag, value]
        check(len(no_env) == len(flags) - 4 and "/etc/ld.so.preload" in " ".join(no_env), "flags %s" % no_env)
        r = run(no_env + plumbing + libpath, "--load=dlsym", *at_limit)
        check(r.returncode == 0, "2. environment cleared: rc %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        # 3. control: no mounts, no environment of the agent's
        r = run(devices + plumbing + libpath, "init", "alloc", "3G")
        check(r.returncode == 0, "3. control without the limiter: rc %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        # 4. at the driver's place: over <sim>/libcuda.so.1, the real one at /run/gpuslice/driver
        place = ["--mount", "type=bind,src=%s,dst=%s/libcuda.so.1,ro" % (interposer, sim),
                 "--mount", "type=bind,src=%s/libcuda.so.1,dst=/run/gpuslice/driver/libcuda.so.1,ro" % sim,
                 "--mount", "type=bind,src=%s,dst=/run/gpuslice/shm" % shm_host]
        with_limits = ["--mount", "type=bind,src=%s,dst=/run/gpuslice/limits,ro" % limits_host]
        for how in ("--load=dlsym", "--load=procaddr", "--load=procaddr-legacy"):
            r = run(devices + plumbing + libpath + place + with_limits, how, *at_limit)
            check(r.returncode == 0, "4. at the driver's place (%s): rc %d\n%s\n%s" % (how, r.returncode, r.stdout,
                                                                                      r.stderr))
        # 5. a file the loader cannot load at the driver's place: CUDA is not usable at all
        bad_place = ["--mount", "type=bind,src=%s,dst=%s/libcuda.so.1,ro" % (broken, sim)]
        r = run(devices + plumbing + libpath + bad_place + with_limits, "--load=dlsym", "init", "alloc", "3G")
        check(r.returncode == 4 and "dlopen libcuda.so.1" in r.stderr,
              "5. unloadable interposer: rc %d, want 4 (no driver)\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        # 6. the limits file missing: every call refused, and stderr says why
        r = run(devices + plumbing + libpath + place, "--load=dlsym", "unhooked", "init", "alloc", "3G")
        check(r.returncode == 1 and "unhooked 3" in r.stdout and "cannot open limits file /run/gpuslice/limits"
              in r.stderr, "6. no limits file: rc %d\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        print("podman fail-closed: agent wiring, cleared environment and the driver's place limit 2 GiB; an "
              "unloadable interposer or a missing limits file leaves no CUDA; without the limiter 3 GiB")
    finally:
        subprocess.run(["timeout", "30", "podman", "rm", "-f", "-t", "0", name], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    agent_fixture.run_main({"podman-failclosed": test_podman_failclosed}, test_share.Share, "", TEST_TIMEOUT_S)
