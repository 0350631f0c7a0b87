# SPDX-License-Identifier: Apache-2.0
"""The simulated MPS control daemon (build/sim/nvidia-cuda-mps-control, sim/mps.h) as NVIDIA documents it: started
with its pipe and log directories, set_default_device_pinned_mem_limit sent through the client, and a CUDA client
(gpuslice-sim-workload with CUDA_MPS_PIPE_DIRECTORY) that gets CUDA_ERROR_OUT_OF_MEMORY past its pinned limit,
while a process that is no MPS client, or a client of a daemon that is gone, is not limited. Usage:

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
        end = time.monotonic() + 10
        while not os.path.exists(state) and time.monotonic() < end:
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


if __name__ == "__main__":
    run_main({"pinned-limit": test_pinned_limit}, Env, "sim-mps-", 90)
