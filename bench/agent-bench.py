# SPDX-License-Identifier: Apache-2.0
"""Node agent benchmark. First, before/after: the idle agent's wake-ups per second over all its
threads (voluntary + involuntary context switches from /proc/PID/task/*/status, summed over a
window of --wakeup-seconds, default 60) with the kubelet stand-in connected and the three
resources of the gpuslice profile streaming — on a node without pods, then with a pod holding two
GPUs (PodResources then names it, and the agent keeps reconciling) — plus RPC latency and memory,
for this build and for --base (default 3de4a59, the last commit before the event loop) built in a
temporary git worktree. Then: Allocate and GetPreferredAllocation latency over the real unix socket,
the agent's memory (VmRSS, RssAnon) with 8 and 64 simulated GPUs, and its idle CPU use; how fast
it reacts (re-registration after a kubelet restart or a removed socket, registration when kubelet
comes late, Unhealthy pushed after a critical Xid or a lost GPU — the spec wants 1 s; the
integration tests check only that it happens); and with the gpuslice sharing profile, the
fractional services' latency (also Allocate on a node with 32 live containers, the fractional
journal holding them) and ListAndWatch message sizes.

    /usr/bin/python3 bench/agent-bench.py --build build --source . --topologies tests/data/topologies [--markdown]
        [--wakeup-seconds 60] [--base COMMIT] [--only-wakeups]
    /usr/bin/python3 bench/agent-bench.py --build build --source . --topologies tests/data/topologies \
        --only-sharing --iterations 500   # the fractional calls alone (the journal's cost), no base build

Latency is measured from a Python grpcio client on one persistent channel, so it includes the
client's own per-call cost (an upper bound for the agent). Idle CPU is measured over 10 s with
one ListAndWatch stream open, as under kubelet.
"""

import argparse
import contextlib
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


def latency(fn, req, warmup, iterations):
    """(median, p99) in microseconds of the unary call fn(req), after `warmup` unmeasured calls."""
    for _ in range(warmup):
        fn(req, timeout=5)
    lat = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn(req, timeout=5)
        lat.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(lat), pct(lat, 99)


def run(args, stubs, topo_path, n_gpus, iterations):
    res = {"gpus": n_gpus}
    with agent_on_node(args, stubs, topo_path) as (k, agent, env, tmp):
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
            res[name] = latency(fn, req, 50, iterations)
        res["mem"] = proc_status(agent.pid)
        hz = os.sysconf("SC_CLK_TCK")
        c0, t0 = cpu_ticks(agent.pid), time.monotonic()
        time.sleep(args.idle_seconds)
        c1, t1 = cpu_ticks(agent.pid), time.monotonic()
        res["idle_cpu_pct"] = 100.0 * (c1 - c0) / hz / (t1 - t0)
    return res


@contextlib.contextmanager
def agent_on_node(args, stubs, topo_path, flags=lambda tmp: [], build=None, setup=None):
    """The kubelet stand-in and `gpuslice node` (from build, default args.build, with flags(tmp) added)
    on a simulated node in a temporary directory: yields (kubelet, agent process, env, tmp); at the end
    stops both and removes the directory. setup(env), if given, runs before either starts."""
    build = build or args.build
    tmp = tempfile.mkdtemp(prefix="gpuslice-bench-")
    plugin_dir = os.path.join(tmp, "dp")
    os.makedirs(plugin_dir)
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(build, "sim"), GPUSLICE_SIM_NODE=topo_path,
               GPUSLICE_SIM_STATE=os.path.join(tmp, "sim.state"))
    k = agent = None
    try:
        if setup:
            setup(env)
        k = kubelet_standin.Kubelet(stubs, plugin_dir, os.path.join(tmp, "podres.sock"))
        k.start()
        agent = subprocess.Popen([os.path.join(build, "gpuslice"), "node", "--plugin-dir", plugin_dir,
                                  "--state-dir", os.path.join(tmp, "state"), "--pod-resources-socket",
                                  os.path.join(tmp, "podres.sock"), "--log-level", "warn"] + flags(tmp),
                                 env=env, stderr=open(os.path.join(tmp, "agent.log"), "w"))
        yield k, agent, env, tmp
    finally:
        if agent:
            agent.terminate()
            try:
                agent.wait(10)
            except subprocess.TimeoutExpired:
                agent.kill()
        if k:
            k.close()
        shutil.rmtree(tmp, ignore_errors=True)


def placeholder_interposer(tmp):
    """--interposer needs a file; the protocol measurements never load it."""
    lib = os.path.join(tmp, "libgpuslice-cuda.so")
    open(lib, "w").close()
    return ["--resource-profile", "gpuslice", "--interposer", lib]


def reactions(args, stubs, topo_path, rounds):
    """Milliseconds from the trigger to what kubelet sees, per kind of event, over `rounds` rounds."""
    sim = os.path.join(args.build, "sim", "gpuslice-sim")
    out = {"kubelet restart -> registered": [], "plugin socket removed -> registered": [],
           "critical Xid -> Unhealthy pushed": [], "GPU lost -> Unhealthy pushed": []}
    with agent_on_node(args, stubs, topo_path, lambda tmp: ["--health-quiet-period", "1s"],
                       setup=lambda env: subprocess.run([sim, "reset"], env=env, check=True,
                                                        capture_output=True)) as (k, agent, env, tmp):
        k.wait_for(lambda: k.registrations and k.law, 20, "registration")
        ids = [d.ID for d in k.law[-1][2].devices]

        def health(i):
            return (k.last_devices() or {}).get(ids[i], ("",))[0]

        for r in range(rounds):
            n = len(k.registrations)
            k.restart()
            reg = k.wait_for(lambda: len(k.registrations) > n and k.registrations[n], 20, "re-registration")
            out["kubelet restart -> registered"].append((reg.at - k.restarted_at) * 1000)
            time.sleep(0.3)
            n = len(k.registrations)
            t0 = time.monotonic()
            os.unlink(os.path.join(k.plugin_dir, reg.request.endpoint))
            reg = k.wait_for(lambda: len(k.registrations) > n and k.registrations[n], 20, "re-registration")
            out["plugin socket removed -> registered"].append((reg.at - t0) * 1000)
            gpu = r % len(ids)
            k.wait_for(lambda: health(gpu) == "Healthy", 20, "healthy")
            t0 = time.monotonic()
            subprocess.run([sim, "xid", str(gpu), "48"], env=env, check=True, capture_output=True)
            k.wait_for(lambda: health(gpu) == "Unhealthy", 20, "unhealthy after Xid")
            out["critical Xid -> Unhealthy pushed"].append((time.monotonic() - t0) * 1000)
            gpu2 = (gpu + 1) % len(ids)
            k.wait_for(lambda: health(gpu2) == "Healthy", 20, "healthy")
            t0 = time.monotonic()
            subprocess.run([sim, "lose", str(gpu2)], env=env, check=True, capture_output=True)
            k.wait_for(lambda: health(gpu2) == "Unhealthy", 20, "unhealthy after loss")
            out["GPU lost -> Unhealthy pushed"].append((time.monotonic() - t0) * 1000)
            subprocess.run([sim, "restore", str(gpu2)], env=env, check=True, capture_output=True)
    return out


def task_switches(pid):
    """{tid: (name, voluntary + involuntary context switches)} of every thread of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                v, name = 0, "?"
                for line in f:
                    if line.startswith("Name:"):
                        name = line.split(None, 1)[1].strip()
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        v += int(line.split()[1])
                out[tid] = (name, v)
        except OSError:
            pass  # the thread ended
    return out


def wakeups(args, stubs, topo_path, build, seconds):
    """Idle wake-ups per second of all the agent's threads (context switches, voluntary and
    involuntary, summed over /proc/PID/task/*/status) with the kubelet stand-in connected and the
    three resources of the gpuslice profile streaming; also RPC latency and memory of that agent."""
    res = {}
    with agent_on_node(args, stubs, topo_path, placeholder_interposer, build=build) as (k, agent, env, tmp):
        eps = ["gpuslice-nvidia.com-gpu.sock", "gpuslice-gpuslice.io-gpu-core.sock", "gpuslice-gpuslice.io-gpu-memory.sock"]
        k.wait_for(lambda: all(k.last_ids(ep) for ep in eps), 30, "three registrations and streams")
        time.sleep(3)  # let start-up settle

        def window(key):
            with k.cond:
                n_law = len(k.law)
            a = task_switches(agent.pid)
            t0 = time.monotonic()
            time.sleep(seconds)
            b = task_switches(agent.pid)
            t1 = time.monotonic()
            with k.cond:
                res[key + "law_messages"] = len(k.law) - n_law
            # a thread that started during the window counts from 0
            per = [((b[t][1] - a.get(t, ("", 0))[1]) / (t1 - t0), b[t][0]) for t in b]
            res[key + "threads"] = len(b)
            res[key + "wakeups"] = sum(v for v, _ in per)
            res[key + "per_thread"] = sorted(per, reverse=True)

        window("")  # a node without pods
        pb = stubs["deviceplugin_pb2"]
        ids = k.last_ids(eps[0])
        stub, _ = k.plugin_stub(eps[0])
        preq = pb.PreferredAllocationRequest()
        preq.container_requests.add(available_deviceIDs=ids[: len(ids) // 2 + 1], allocation_size=2)
        areq = pb.AllocateRequest()
        areq.container_requests.add(devices_ids=ids[:2])
        for name, fn, req in (("preferred", stub.GetPreferredAllocation, preq), ("allocate", stub.Allocate, areq)):
            for _ in range(50):
                fn(req, timeout=5)
            lat = []
            for _ in range(args.iterations):
                t0 = time.perf_counter()
                fn(req, timeout=5)
                lat.append((time.perf_counter() - t0) * 1e6)
            res[name] = (statistics.median(lat), pct(lat, 99))
        # a pod holds the two GPUs (PodResources names it): the agent keeps reconciling every 10 s. The
        # window starts once a sync has named the pod (the agent then writes its state file once, a
        # dozen context switches of fsync), so that it measures the steady state with a pod on record
        with k.cond:
            calls = k.podres_calls
            k.pods = [("bench", "pod-0", "main", "nvidia.com/gpu", ids[:2])]
        k.wait_for(lambda: k.podres_calls > calls, 30, "a PodResources sync naming the pod")
        time.sleep(3)
        window("pods ")
        res["mem"] = proc_status(agent.pid)
    return res


def build_base(args, work):
    """The base commit built in a temporary worktree (only the gpuslice program and the simulator)."""
    wt = os.path.join(work, "base")
    subprocess.run(["git", "-C", args.source, "worktree", "add", "--detach", wt, args.base], check=True,
                   capture_output=True)
    bdir = os.path.join(wt, "build")
    subprocess.run(["cmake", "-S", wt, "-B", bdir, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"], check=True,
                   capture_output=True)
    subprocess.run(["cmake", "--build", bdir, "-j2", "--target", "gpuslice", "gpuslice_sim_nvml"], check=True,
                   capture_output=True)
    return wt, bdir


def sharing(args, stubs, topo_path, iterations):
    """The gpuslice profile: fractional preferred/allocate latency and ListAndWatch sizes."""
    res = {}
    with agent_on_node(args, stubs, topo_path, placeholder_interposer) as (k, agent, env, tmp):
        eps = {"gpuslice.io/gpu-core": "gpuslice-gpuslice.io-gpu-core.sock",
               "gpuslice.io/gpu-memory": "gpuslice-gpuslice.io-gpu-memory.sock"}
        k.wait_for(lambda: all(k.last_ids(ep) for ep in eps.values()), 20, "fractional registrations")
        pb = stubs["deviceplugin_pb2"]
        with k.cond:
            for res_name, ep in eps.items():
                msg = [m for m in k.law if m[1] == ep][-1][2]
                res["law " + res_name] = (len(msg.devices), len(msg.SerializeToString()))
        core_ids = k.last_ids(eps["gpuslice.io/gpu-core"])
        stub, _ = k.plugin_stub(eps["gpuslice.io/gpu-core"])
        preq = pb.PreferredAllocationRequest()
        preq.container_requests.add(available_deviceIDs=core_ids, allocation_size=30)
        areq = pb.AllocateRequest()
        areq.container_requests.add(devices_ids=core_ids[:30])
        for name, fn, req in (("core preferred", stub.GetPreferredAllocation, preq),
                              ("core allocate", stub.Allocate, areq)):
            res[name] = latency(fn, req, 20, iterations)
        # A node with live containers: 32 pairs (20 % + 20 units each, 4 per GPU: 40 IDs a container),
        # each iteration one container replaced by a new one on the same IDs (its core, then its memory
        # Allocate), so the journal holds ~32 records (~70 kB) throughout; every call is one durable
        # journal write.
        mstub, _ = k.plugin_stub(eps["gpuslice.io/gpu-memory"])
        gpus = sorted({i.split("::")[0] for i in core_ids})
        lat = []
        for it in range(32 + iterations):
            slot = it % 32
            g = gpus[slot % len(gpus)]
            j = slot // len(gpus)
            for fn, ids in ((stub.Allocate, ["%s::core-%d" % (g, 20 * j + n) for n in range(20)]),
                            (mstub.Allocate, ["%s::mem-%d" % (g, 20 * j + n) for n in range(20)])):
                req = pb.AllocateRequest()
                req.container_requests.add(devices_ids=ids)
                t0 = time.perf_counter()
                fn(req, timeout=5)
                if it >= 32:
                    lat.append((time.perf_counter() - t0) * 1e6)
        res["pair allocate, 32 live containers"] = (statistics.median(lat), pct(lat, 99))
        res["mem"] = proc_status(agent.pid)
    return res


def print_wakeups(args, wake):
    if args.markdown:
        print("| idle, kubelet connected, 3 resources streaming (%.0f s) | before (%s) | after |" % (
            args.wakeup_seconds, args.base))
        print("|---|---|---|")
    def busiest(per):
        return ", ".join("%s %.1f" % (name, v) for v, name in per[:5])

    def grpc_timers(per):
        # gRPC 1.51's two timer threads: the iomgr one wakes once a second per timer shard whose window is
        # out of step with the others' (1 to 2 x cores a second, set by what gRPC did earlier, not by us)
        return sum(v for v, name in per if name in ("timer_manager", "grpc_global_tim"))

    rows = (("wake-ups per second, all threads (no pods)", "%.1f", lambda r: r["wakeups"]),
            ("… gRPC's timer threads / all others (no pods)", "%s",
             lambda r: "%.1f / %.1f" % (grpc_timers(r["per_thread"]), r["wakeups"] - grpc_timers(r["per_thread"]))),
            ("busiest threads (no pods)", "%s", lambda r: busiest(r["per_thread"])),
            ("wake-ups per second, all threads (a pod holding 2 GPUs)", "%.1f", lambda r: r["pods wakeups"]),
            ("… gRPC's timer threads / all others (a pod holding 2 GPUs)", "%s",
             lambda r: "%.1f / %.1f" % (grpc_timers(r["pods per_thread"]),
                                        r["pods wakeups"] - grpc_timers(r["pods per_thread"]))),
            ("busiest threads (a pod holding 2 GPUs)", "%s", lambda r: busiest(r["pods per_thread"])),
            ("threads", "%d", lambda r: r["threads"]),
            ("ListAndWatch messages while idle", "%d", lambda r: r["law_messages"] + r["pods law_messages"]),
            ("GetPreferredAllocation p50 / p99", "%s", lambda r: "%.0f µs / %.0f µs" % r["preferred"]),
            ("Allocate p50 / p99", "%s", lambda r: "%.0f µs / %.0f µs" % r["allocate"]),
            ("VmRSS / RssAnon", "%s", lambda r: "%s / %s" % (r["mem"].get("VmRSS"), r["mem"].get("RssAnon"))))
    for name, fmt, get in rows:
        b, a = fmt % get(wake["before"]), fmt % get(wake["after"])
        print(("| %s | %s | %s |" if args.markdown else "%s: before %s, after %s") % (name, b, a))
    print()
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--topologies", required=True, help="directory of reference .topo files")
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--idle-seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=10, help="rounds of each reaction measured")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--wakeup-seconds", type=float, default=60, help="idle wake-up measurement window")
    ap.add_argument("--base", default="3de4a59", help="commit measured as 'before' (built in a temporary worktree)")
    ap.add_argument("--only-wakeups", action="store_true", help="only the before/after wake-up comparison")
    ap.add_argument("--only-sharing", action="store_true",
                    help="only the fractional latencies (journal cost), of --build; no base build")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="gpuslice-bench-topo-")
    if args.only_sharing:
        try:
            stubs = kubelet_standin.load_stubs(args.build)
            share = sharing(args, stubs, os.path.join(args.topologies, "seed000-8gpu-pcie-2socket.topo"),
                            args.iterations)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        for name in ("core preferred", "core allocate", "pair allocate, 32 live containers"):
            print("%s p50 %.0f us p99 %.0f us" % (name, share[name][0], share[name][1]))
        return
    try:
        stubs = kubelet_standin.load_stubs(args.build)
        big = os.path.join(work, "64gpu.topo")
        with open(big, "w") as f:
            f.write(big_node())
        seed = os.path.join(args.topologies, "seed000-8gpu-pcie-2socket.topo")
        wt, base_build = build_base(args, work)
        try:
            wake = {"after": wakeups(args, stubs, seed, args.build, args.wakeup_seconds),
                    "before": wakeups(args, stubs, seed, base_build, args.wakeup_seconds)}
        finally:
            subprocess.run(["git", "-C", args.source, "worktree", "remove", "--force", wt], capture_output=True)
        print_wakeups(args, wake)
        if args.only_wakeups:
            return
        results = [run(args, stubs, seed, 8, args.iterations), run(args, stubs, big, 64, args.iterations)]
        react = reactions(args, stubs, seed, args.rounds)
        share = sharing(args, stubs, seed, min(args.iterations, 500))
    finally:
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
    print()
    if args.markdown:
        print("| reaction (8 GPUs, %d rounds) | median | max |" % args.rounds)
        print("|---|---|---|")
    for name, v in react.items():
        print(("| %s | %.0f ms | %.0f ms |" if args.markdown else "%s: median %.0f ms, max %.0f ms")
              % (name, statistics.median(v), max(v)))
    print()
    if args.markdown:
        print("| sharing (gpuslice profile, 8 GPUs) | value |")
        print("|---|---|")
    for name in ("core preferred", "core allocate", "pair allocate, 32 live containers"):
        print(("| %s p50 / p99 | %.0f µs / %.0f µs |" if args.markdown else "%s p50 %.0f us p99 %.0f us")
              % (name, share[name][0], share[name][1]))
    for name, v in share.items():
        if name.startswith("law "):
            print(("| ListAndWatch %s | %d IDs, %d bytes |" if args.markdown else "ListAndWatch %s: %d IDs, %d bytes")
                  % (name[4:], v[0], v[1]))
    print(("| RssAnon / VmRSS | %s / %s |" if args.markdown else "RssAnon %s VmRSS %s")
          % (share["mem"].get("RssAnon"), share["mem"].get("VmRSS")))


if __name__ == "__main__":
    main()
