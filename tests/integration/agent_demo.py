# SPDX-License-Identifier: Apache-2.0
"""The node agent part of `make demo`: `gpuslice node` on a simulated node, driven by the kubelet
stand-in exactly as kubelet would — registration, a 2-GPU and a 4-GPU topology-aware allocation,
an injected Xid turning a GPU unhealthy and back, a clean SIGTERM.

    LD_LIBRARY_PATH=build/sim GPUSLICE_SIM_NODE=FILE \\
        /usr/bin/python3 tests/integration/agent_demo.py --build build --source .

Exit code 0 when every step behaved as shown.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet_standin  # noqa: E402


def say(msg):
    print("\n\033[1m== %s\033[0m" % msg, flush=True)


def claim(text, cond):
    """The demo is also a test (ctest `demo`): every claim it prints is checked."""
    if not cond:
        raise AssertionError("FAILED: " + text)
    print("checked: " + text)


def cli_pick(build, env, count, busy):
    """The whole-GPU allocator's answer through the CLI (`gpuslice alloc --json`), for comparison."""
    cmd = [os.path.join(build, "gpuslice"), "alloc", "--count", str(count), "--json"]
    if busy:
        cmd += ["--busy", ",".join(map(str, busy))]
    return json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)["gpus"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--quiet-period", default="3s")
    args = ap.parse_args()
    if not os.environ.get("GPUSLICE_SIM_NODE"):
        sys.exit("agent_demo: set GPUSLICE_SIM_NODE (and LD_LIBRARY_PATH=<build>/sim)")
    tmp = tempfile.mkdtemp(prefix="gpuslice-demo-")
    env = dict(os.environ)
    env.setdefault("GPUSLICE_SIM_STATE", os.path.join(tmp, "sim.state"))
    plugin_dir = os.path.join(tmp, "device-plugins")
    os.makedirs(plugin_dir)
    agent = None
    k = None
    try:
        stubs = kubelet_standin.load_stubs(args.build)
        pb = stubs["deviceplugin_pb2"]
        sim = os.path.join(args.build, "sim", "gpuslice-sim")
        subprocess.run([sim, "reset"], env=env, check=True, capture_output=True)
        k = kubelet_standin.Kubelet(stubs, plugin_dir, os.path.join(tmp, "pod-resources.sock"))
        k.start()

        say("kubelet (stand-in) is up; start the node agent")
        cmd = [os.path.join(args.build, "gpuslice"), "node", "--plugin-dir", plugin_dir, "--state-dir",
               os.path.join(tmp, "state"), "--pod-resources-socket", os.path.join(tmp, "pod-resources.sock"),
               "--health-quiet-period", args.quiet_period, "--log-level", "warn"]
        print("$ " + " ".join(cmd))
        agent = subprocess.Popen(cmd, env=env)
        k.wait_for(lambda: k.registrations and k.law, 10, "registration")
        r = k.registrations[0]
        print("Register: resource %s, endpoint %s; kubelet called GetDevicePluginOptions back during it: %s"
              % (r.request.resource_name, r.request.endpoint,
                 "preferred allocation available" if r.options.get_preferred_allocation_available else "?"))
        devs = k.law[-1][2].devices
        print("ListAndWatch: %d devices" % len(devs))
        for i, d in enumerate(devs):
            print("  GPU%d %s %s NUMA %s" % (i, d.ID, d.health, ",".join(str(n.ID) for n in d.topology.nodes)))
        ids = [d.ID for d in devs]
        stub, _ = k.plugin_stub()

        def prefer_and_allocate(avail, size, label):
            req = pb.PreferredAllocationRequest()
            req.container_requests.add(available_deviceIDs=avail, allocation_size=size)
            got = list(stub.GetPreferredAllocation(req, timeout=5).container_responses[0].deviceIDs)
            print("%s: GetPreferredAllocation → GPUs %s" % (label, ",".join(str(ids.index(g)) for g in got)))
            areq = pb.AllocateRequest()
            areq.container_requests.add(devices_ids=got)
            c = stub.Allocate(areq, timeout=5).container_responses[0]
            print("  Allocate → NVIDIA_VISIBLE_DEVICES=%s" % c.envs["NVIDIA_VISIBLE_DEVICES"])
            return got

        say("A 2-GPU pod while GPUs 0,1,3,4 are taken")
        free = [ids[i] for i in range(len(ids)) if i not in (0, 1, 3, 4)]
        got = prefer_and_allocate(free, 2, "2 GPUs")
        claim("kubelet is offered the allocator's pick (gpuslice alloc --count 2 --busy 0,1,3,4)",
              sorted(ids.index(g) for g in got) == cli_pick(args.build, env, 2, (0, 1, 3, 4)))
        say("A 4-GPU pod on the empty node")
        got = prefer_and_allocate(ids, min(4, len(ids)), "4 GPUs")
        claim("the same for 4 GPUs on the empty node",
              sorted(ids.index(g) for g in got) == cli_pick(args.build, env, min(4, len(ids)), ()))

        say("Inject Xid 48 (double-bit ECC error) on GPU 2 through the simulator")
        subprocess.run([sim, "xid", "2", "48"], env=env, check=True, capture_output=True)
        t0 = time.monotonic()
        k.wait_for(lambda: k.last_devices()[ids[2]][0] == "Unhealthy", 5, "GPU 2 unhealthy")
        print("ListAndWatch pushed GPU2 Unhealthy after %.0f ms" % ((time.monotonic() - t0) * 1000))
        claim("the other GPUs stay Healthy",
              sum(1 for h, _ in k.last_devices().values() if h == "Healthy") == len(ids) - 1)
        req = pb.PreferredAllocationRequest()
        req.container_requests.add(available_deviceIDs=ids[:4], allocation_size=2)
        got = list(stub.GetPreferredAllocation(req, timeout=5).container_responses[0].deviceIDs)
        print("GetPreferredAllocation among GPUs 0-3 now → GPUs %s" % ",".join(str(ids.index(g)) for g in got))
        claim("never the unhealthy GPU 2", len(got) == 2 and ids[2] not in got)
        print("status:")
        subprocess.run([os.path.join(args.build, "gpuslice"), "status", "--state-dir", os.path.join(tmp, "state")])
        k.wait_for(lambda: k.last_devices()[ids[2]][0] == "Healthy", 30, "GPU 2 healthy again")
        print("After %s of normal NVML answers GPU2 is Healthy again (no restart): %.1f s after the Xid"
              % (args.quiet_period, time.monotonic() - t0))

        say("SIGTERM")
        agent.send_signal(signal.SIGTERM)
        rc = agent.wait(10)
        left = [n for n in os.listdir(plugin_dir) if n != "kubelet.sock"]
        print("agent exited with %d; sockets left in the plugin dir besides kubelet.sock: %s" % (rc, left or "none"))
        claim("a clean exit (status 0, its socket removed)", rc == 0 and not left)
        return 0
    except AssertionError as e:
        print(e, file=sys.stderr)
        return 1
    finally:
        if agent and agent.poll() is None:
            agent.kill()
            agent.wait()
        if k:
            k.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
