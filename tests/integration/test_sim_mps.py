# SPDX-License-Identifier: Apache-2.0
"""The simulated MPS control daemon (build/sim/nvidia-cuda-mps-control, sim/mps.h) as NVIDIA documents it: started
with its pipe and log directories, set_default_device_pinned_mem_limit sent through the client, and a CUDA client
(gpuslice-sim-workload with CUDA_MPS_PIPE_DIRECTORY) that gets CUDA_ERROR_OUT_OF_MEMORY past its pinned limit,
while a process that is no MPS client, or a client of a daemon that is gone, is not limited; and the active thread
percentage in the kernel rate: a client at 50 % runs simulated kernels at about half the rate of a process that is no
client, two such clients side by side each at about half rate, a client's own CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25 at
about a quarter. Usage:

    /usr/bin/python3 test_sim_mps.py --build DIR --source DIR --topology FILE
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_fixture import Env, check, run_main  # noqa: E402

OOM = 3  # gpuslice-sim-workload's exit code for out of memory


def test_pinned_limit(e):
    ctl = os.path.join(e.args.build, "sim", "nvidia-cuda-mps-control")
    work = os.path.join(e.args.build, "sim", "gpuslice-sim-workload")
    pipe, logd = os.path.join(e.tmp, "mps-pipe"), os.path.join(e.tmp, "mps-log")
    env = dict(e.env, CUDA_MPS_PIPE_DIRECTORY=pipe, CUDA_MPS_LOG_DIRECTORY=logd)

    def client(text):
        return subprocess.run([ctl], input=text, env=env, capture_output=True, text=True, timeout=10)

    r = client("set_default_active_thread_percentage 50\n")
    check(r.returncode != 0 and "Cannot find MPS control daemon" in r.stderr, "a client without a daemon: %s" % r)
    daemon = subprocess.Popen([ctl, "-f"], env=env)
    try:
        state = os.path.join(pipe, "gpuslice-sim-mps")
        end = time.monotonic() + 10  # the control FIFO appears last, once the daemon serves
        while not os.path.exists(os.path.join(pipe, "control")) and time.monotonic() < end:
            time.sleep(0.05)
        check(os.path.exists(state), "the daemon wrote no state")
        r = client("set_default_active_thread_percentage 50\nset_default_device_pinned_mem_limit 0 2G\n")
        check(r.returncode == 0, "client: %s" % r.stderr)
        end = time.monotonic() + 10
        while "pinned 0" not in open(state).read() and time.monotonic() < end:
            time.sleep(0.05)
        check("pinned 0 2147483648" in open(state).read() and "thread-percentage 50" in open(state).read(),
              "state %r" % open(state).read())

        def run(mem, gpu=0, with_env=env):
            return subprocess.run([work, "--gpu", str(gpu), "--mem", mem, "--seconds", "0"], env=with_env,
                                  capture_output=True, text=True, timeout=20).returncode

        check(run("1G") == 0, "1 GiB under a 2 GiB pinned limit")
        check(run("3G") == OOM, "3 GiB past the 2 GiB pinned limit must be out of memory")
        check(run("3G", gpu=1) == 0, "GPU 1 has no pinned limit")
        check(run("3G", with_env=e.env) == 0, "a process that is no MPS client is not limited")
        with open(os.path.join(logd, "control.log")) as f:
            check("set_default_device_pinned_mem_limit 0 2G" in f.read(), "the command is not in control.log")
        client("quit\n")
        check(daemon.wait(10) == 0, "quit")
        check(not os.path.exists(state), "state left behind after quit")
        check(run("3G") == 0, "the daemon is gone: no limit")
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(5)


SPIN = ["init", "spin", "2", "4000", "25"]  # 2 s of kernels of 4000 blocks × 25 µs: rounding over SMs negligible


def launched(out):
    for line in out.splitlines():
        if line.startswith("launched "):
            return int(line.split()[1])
    raise AssertionError("no 'launched' line in %r" % out)


def test_thread_rate(e):
    ctl = os.path.join(e.args.build, "sim", "nvidia-cuda-mps-control")
    work = os.path.join(e.args.build, "cuda-workload")
    pipe, logd = os.path.join(e.tmp, "mps-pipe"), os.path.join(e.tmp, "mps-log")
    env = dict(e.env, CUDA_MPS_PIPE_DIRECTORY=pipe, CUDA_MPS_LOG_DIRECTORY=logd)

    def spin(*envs):
        ps = [subprocess.Popen([work] + SPIN, env=x, stdout=subprocess.PIPE, text=True) for x in envs]
        outs = [p.communicate(timeout=30)[0] for p in ps]
        check(all(p.returncode == 0 for p in ps), "cuda-workload failed: %s" % outs)
        return [launched(o) for o in outs]

    daemon = subprocess.Popen([ctl, "-f"], env=env)
    try:
        state = os.path.join(pipe, "gpuslice-sim-mps")
        end = time.monotonic() + 10  # the control FIFO appears last, once the daemon serves
        while not os.path.exists(os.path.join(pipe, "control")) and time.monotonic() < end:
            time.sleep(0.05)
        r = subprocess.run([ctl], input="set_default_active_thread_percentage 50\n", env=env, capture_output=True,
                           text=True, timeout=10)
        check(r.returncode == 0, "client: %s" % r.stderr)
        end = time.monotonic() + 10
        while "thread-percentage 50" not in open(state).read() and time.monotonic() < end:
            time.sleep(0.05)
        full = spin(e.env)[0]
        half = spin(env)[0]
        pair = spin(env, env)
        quarter = spin(dict(env, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="25"))[0]
        print("launches in 2 s: no client %d, one client at 50 %% %d, two at 50 %% %s, one at 25 %% %d" %
              (full, half, pair, quarter))
        check(full > 200, "too few launches to measure: %d" % full)
        check(0.4 <= half / full <= 0.6, "a client at 50 %%: %d launches of %d" % (half, full))
        check(all(0.4 <= n / full <= 0.6 for n in pair), "two clients at 50 %%: %s of %d" % (pair, full))
        check(0.18 <= quarter / full <= 0.32, "a client at 25 %%: %d launches of %d" % (quarter, full))
    finally:
        daemon.terminate()
        daemon.wait(5)


if __name__ == "__main__":
    run_main({"pinned-limit": test_pinned_limit, "thread-rate": test_thread_rate}, Env, "sim-mps-", 90)
