# SPDX-License-Identifier: Apache-2.0
"""Node agent benchmark: Allocate and GetPreferredAllocation latency over the real unix socket,
the agent's memory (VmRSS, RssAnon) with 8 and 64 simulated GPUs, and its idle CPU use.

    /usr/bin/python3 bench/agent-bench.py --build build --source . --shared ../shared [--markdown]

Latency is measured from a Python grpcio client on one persistent channel, so it includes the
client's own per-call cost (an upper bound for the agent). Idle CPU is measured over 10 s with
one ListAndWatch stream open, as under kubelet.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import kubelet_standin  # noqa: E402


def big_node(n=64, per_switch=8):
    """A 64-GPU node: PIX inside a switch of 8, NODE within a socket, SYS across the 2 sockets."""
    half = n // 2
    lines = ["      " + "".join("GPU%-3d" % i for i in range(n))]
    for a in range(n):
        row = []
        for b in range(n):
            if a == b:
                row.append("X")
            elif a // per_switch == b // per_switch:
                row.append("PIX")
            elif a // half == b // half:
                row.append("NODE")
            else:
                row.append("SYS")
        lines.append("GPU%-3d" % a + "".join("%-6s" % x for x in row))
    return "\n".join(lines) + "\n"


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                out[k] = v.strip()
    return out


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def pct(values, p):
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100.0 * len(values) + 0.5)) - 1))
    return values[k]


def run(args, stubs, topo_path, n_gpus, iterations):
    tmp = tempfile.mkdtemp(prefix="gpuslice-bench-")
    plugin_dir = os.path.join(tmp, "dp")
    os.makedirs(plugin_dir)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(args.build, "sim"), GPUSLICE_SIM_NODE=topo_path,
               GPUSLICE_SIM_STATE=os.path.join(tmp, "sim.state"))
    k = kubelet_standin.Kubelet(stubs, plugin_dir, os.path.join(tmp, "podres.sock"))
    k.start()
    agent = subprocess.Popen([os.path.join(args.build, "gpuslice"), "node", "--plugin-dir", plugin_dir,
                              "--state-dir", os.path.join(tmp, "state"), "--pod-resources-socket",
                              os.path.join(tmp, "podres.sock"), "--log-level", "warn"],
                             env=env, stderr=open(os.path.join(tmp, "agent.log"), "w"))
    res = {"gpus": n_gpus}
    try:
        k.wait_for(lambda: k.registrations and k.law, 20, "registration")
        pb = stubs["deviceplugin_pb2"]
        ids = [d.ID for d in k.law[-1][2].devices]
        stub, _ = k.plugin_stub()
        half = ids[: len(ids) // 2 + 1]
        preq = pb.PreferredAllocationRequest()
        preq.container_requests.add(available_deviceIDs=half, allocation_size=2)
        areq = pb.AllocateRequest()
        areq.container_requests.add(devices_ids=ids[:2])
        for name, fn, req in (("preferred", stub.GetPreferredAllocation, preq), ("allocate", stub.Allocate, areq)):
            for _ in range(50):
                fn(req, timeout=5)  # warm up
            lat = []
            for _ in range(iterations):
                t0 = time.perf_counter()
                fn(req, timeout=5)
                lat.append((time.perf_counter() - t0) * 1e6)
            res[name] = (statistics.median(lat), pct(lat, 99))
        res["mem"] = proc_status(agent.pid)
        hz = os.sysconf("SC_CLK_TCK")
        c0, t0 = cpu_ticks(agent.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        c1, t1 = cpu_ticks(agent.pid), time.monotonic()
        res["idle_cpu_pct"] = 100.0 * (c1 - c0) / hz / (t1 - t0)
    finally:
        agent.terminate()
        try:
            agent.wait(10)
        except subprocess.TimeoutExpired:
            agent.kill()
        k.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--shared", required=True)
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--idle-seconds", type=float, default=10)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    stubdir = tempfile.mkdtemp(prefix="gpuslice-stubs-")
    work = tempfile.mkdtemp(prefix="gpuslice-bench-topo-")
    try:
        stubs = kubelet_standin.generate_stubs(os.path.join(args.source, "proto"), stubdir)
        big = os.path.join(work, "64gpu.topo")
        with open(big, "w") as f:
            f.write(big_node())
        results = [run(args, stubs, os.path.join(args.shared, "topologies", "seed000-8gpu-pcie-2socket.topo"), 8,
                       args.iterations),
                   run(args, stubs, big, 64, args.iterations)]
    finally:
        shutil.rmtree(stubdir, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    if args.markdown:
        print("| GPUs | GetPreferredAllocation p50 / p99 | Allocate p50 / p99 | VmRSS | RssAnon | threads | idle CPU |")
        print("|---|---|---|---|---|---|---|")
    for r in results:
        m = r["mem"]
        if args.markdown:
            print("| %d | %.0f µs / %.0f µs | %.0f µs / %.0f µs | %s | %s | %s | %.2f %% |" % (
                r["gpus"], r["preferred"][0], r["preferred"][1], r["allocate"][0], r["allocate"][1],
                m.get("VmRSS"), m.get("RssAnon"), m.get("Threads"), r["idle_cpu_pct"]))
        else:
            print("%d GPUs: preferred p50 %.0f us p99 %.0f us; allocate p50 %.0f us p99 %.0f us; %s; idle CPU %.2f%%"
                  % (r["gpus"], r["preferred"][0], r["preferred"][1], r["allocate"][0], r["allocate"][1], m,
                     r["idle_cpu_pct"]))


if __name__ == "__main__":
    main()
