# SPDX-License-Identifier: Apache-2.0
"""Pods bound per second by the real kube-scheduler 1.20 alone, and by it with `gpuslice scheduler` as
its extender (filter, prioritize and bind), measured in the same run on the same cluster; and the
extender's resident memory per node and per pod (docs/BENCHMARKS.md).

The control plane of the e2e harness (tests/e2e/cluster.py: etcd, kube-apiserver; binaries cached in
/var/cache/gpuslice-e2e) with kubelet-less GPU nodes: Node objects carrying the gpuslice.io/gpus
annotation (8 GPUs of 32 GiB, two NVLink quads), capacity and Ready set through the status
subresource (as tests/e2e/test_scheduler_extender.py makes them). Pods are bound, never run.

    flock /tmp/gpuslice-e2e.lock /usr/bin/python3 bench/sched-e2e.py [--build DIR] [--nodes N] [--pods P] [--load N]
    make bench-sched-e2e            (the same with the defaults; takes the e2e lock itself)

Per phase: P pods (one container, gpuslice.io/gpu-core 10 + gpuslice.io/gpu-memory 8, i.e. 10 % and
2 GiB of one GPU) are created while no scheduler runs, then kube-scheduler is started and a watch
records when each pod gets its node; the rate is (P - 1) / (last bind - first bind), so neither pod
creation nor the scheduler's start is counted. Phase "default": kube-scheduler without extenders.
Phase "extender": kube-scheduler with gpuslice's extender entry (nodeCacheCapable, filter,
prioritize, bind; ignorable false), as in deploy/kubernetes/scheduler. The extender runs in both
phases (it watches the cluster; in the first it is not called), so both pay for its watch.
kube-scheduler's client QPS/burst are raised (--qps, default 1000) in both phases: 1.20's default of
50 would make the default scheduler's binding POSTs the limit.

Memory: VmRSS of the extender with no nodes, after the N nodes are in its model (per node), after
the default phase's P pods (per watched pod: informer cache + model) and after the extender phase's
P pods (per scheduled pod); it includes the informers' caches. Also the extender's own mean time per
call by verb (its request-duration histogram), to tell its share of the time from kube-scheduler's,
and per phase kube-scheduler's own mean durations (its /metrics: a scheduling attempt, the algorithm,
binding, each framework extension point).

Under load: --load N (default 2) runs both phases again while N busy-loop processes (one per core on the
2-core build machine) compete for the CPUs, so the ratio is reported idle and under load, each side by
side in one run; every phase records the load averages at its start and end. --extender-arg ARG
(repeatable) passes ARG to `gpuslice scheduler` (e.g. `--filter-answer all`, the answer of every node
that fits, to measure the one-node answer's gain in the same harness).

Where a pod's time goes: --pprof DIR saves kube-scheduler's CPU profile of each phase
(DIR/PHASE.pprof, /debug/pprof/profile on its plain HTTP port; `go tool pprof -top FILE`), --perf DIR
records the extender with `perf record -g` during the extender phase (DIR/extender.perf.data).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import cluster  # noqa: E402
import test_scheduler_extender as tse  # noqa: E402

LIMITS = {"gpuslice.io/gpu-core": "10", "gpuslice.io/gpu-memory": "8"}


def log(msg):
    sys.stderr.write("%s sched-e2e: %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid):
    """User + system CPU seconds of process pid so far (0 if it is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def cpu_by_process(c):
    return {name: cpu_seconds(p.pid) for name, p in c.procs.items()}


def metric(port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.split()[-1])
    return None


def verb_latency(port):
    """Mean time the extender took per call, by verb (its request-duration histogram), in ms."""
    sums, counts = {}, {}
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        for line in r.read().decode().splitlines():
            for kind, d in (("_sum{", sums), ("_count{", counts)):
                head = "gpuslice_scheduler_request_duration_seconds" + kind
                if line.startswith(head):
                    verb = line.split('verb="', 1)[1].split('"', 1)[0]
                    d[verb] = float(line.split()[-1])
    return {v: {"calls": int(counts[v]), "mean_ms": round(1000 * sums[v] / counts[v], 3)}
            for v in counts if counts[v]}


# kube-scheduler 1.20's own histograms read per phase (mean ms and count, by their labels)
SCHED_METRICS = ("scheduler_e2e_scheduling_duration_seconds", "scheduler_scheduling_algorithm_duration_seconds",
                 "scheduler_binding_duration_seconds", "scheduler_framework_extension_point_duration_seconds")


def scheduler_durations(port):
    """kube-scheduler's mean time per observation of SCHED_METRICS, by label set, in ms."""
    sums, counts = {}, {}
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        for line in r.read().decode().splitlines():
            for name in SCHED_METRICS:
                for kind, d in (("_sum", sums), ("_count", counts)):
                    if line.startswith(name + kind):
                        head, value = line.rsplit(" ", 1)
                        labels = head[len(name + kind):].strip("{}")
                        # the profile label is always default-scheduler; result is kept
                        labels = ",".join(x for x in labels.split(",") if x and not x.startswith("profile="))
                        d[name[len("scheduler_"):] + ("{%s}" % labels if labels else "")] = float(value)
    return {k: {"count": int(counts[k]), "mean_ms": round(1000 * sums[k] / counts[k], 3)}
            for k in sorted(counts) if counts[k] and k in sums}


class Pprof(threading.Thread):
    """kube-scheduler's CPU profile over `seconds`, taken once its HTTP port answers, into path."""

    def __init__(self, port, seconds, path):
        super().__init__(daemon=True)
        self.port, self.seconds, self.path = port, seconds, path
        self.error = None

    def run(self):
        deadline = time.monotonic() + 30
        url = "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d" % (self.port, self.seconds)
        while True:
            try:
                with urllib.request.urlopen(url, timeout=self.seconds + 30) as r, open(self.path, "wb") as f:
                    f.write(r.read())
                return
            except OSError as e:
                if time.monotonic() > deadline:
                    self.error = e
                    return
                time.sleep(0.05)


def make_nodes(c, n, workers):
    mems = [32768] * 8
    links = tse.links_quads(8)

    def one(i):
        name = "bench-%04d" % i
        tse.make_node(c, name, mems, links)
        # room for every pod of both phases as far as kube-scheduler's own counting goes
        req = urllib.request.Request(c.server + "/api/v1/nodes/%s/status" % name, method="PATCH",
                                     data=json.dumps({"status": {"capacity": {"pods": "5000"},
                                                                 "allocatable": {"pods": "5000"}}}).encode(),
                                     headers={"Content-Type": "application/merge-patch+json"})
        with urllib.request.urlopen(req, context=c._ssl(), timeout=30) as r:
            r.read()
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, range(n)))


class BindWatch(threading.Thread):
    """Watches one namespace's pods from resourceVersion rv; records when each pod first has a node."""

    def __init__(self, c, ns, rv, want):
        super().__init__(daemon=True)
        self.c, self.ns, self.rv, self.want = c, ns, rv, want
        self.bound = {}
        self.done = threading.Event()
        self.error = None

    def run(self):
        try:
            while not self.done.is_set():
                url = "%s/api/v1/namespaces/%s/pods?watch=1&resourceVersion=%s&timeoutSeconds=600" % (
                    self.c.server, self.ns, self.rv)
                with urllib.request.urlopen(url, context=self.c._ssl(), timeout=620) as r:
                    for line in r:
                        ev = json.loads(line)
                        obj = ev.get("object", {})
                        self.rv = obj.get("metadata", {}).get("resourceVersion", self.rv)
                        name = obj.get("metadata", {}).get("name")
                        if obj.get("spec", {}).get("nodeName") and name not in self.bound:
                            self.bound[name] = time.monotonic()
                            if len(self.bound) >= self.want:
                                self.done.set()
                                return
        except Exception as e:  # reported by the caller
            self.error = e
            self.done.set()


def create_pods(c, ns, n, workers):
    c.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    # no controller-manager runs here to make the namespace's default ServiceAccount
    c.api("POST", "/api/v1/namespaces/%s/serviceaccounts" % ns,
          {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})

    def one(i):
        p = tse.pod_obj("p%05d" % i, LIMITS)
        p["metadata"]["namespace"] = ns
        c.api("POST", "/api/v1/namespaces/%s/pods" % ns, p)
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(one, range(n)))
    return c.api("GET", "/api/v1/namespaces/%s/pods?limit=1" % ns)["metadata"]["resourceVersion"]


def phase(c, name, ns, pods, workers, qps, extenders, timeout, pprof=None):
    log("%s: creating %d pods in %s (no scheduler running)" % (name, pods, ns))
    if "kube-scheduler" in c.procs:
        c.procs["kube-scheduler"].stop()
        del c.procs["kube-scheduler"]
    rv = create_pods(c, ns, pods, workers)
    load0 = [round(x, 2) for x in os.getloadavg()]
    w = BindWatch(c, ns, rv, pods)
    w.start()
    t0 = time.monotonic()
    c.start_scheduler(extenders, qps=qps)
    cpu0 = cpu_by_process(c)
    prof = None
    if pprof:
        prof = Pprof(c.scheduler_http_port, pprof[1], os.path.join(pprof[0], name + ".pprof"))
        prof.start()
    if not w.done.wait(timeout) or w.error:
        raise cluster.E2EError("%s: %d of %d pods bound after %ss (%s); kube-scheduler log: %s" % (
            name, len(w.bound), pods, timeout, w.error, c.procs["kube-scheduler"].tail(20)))
    times = sorted(w.bound.values())
    span = times[-1] - times[0]
    rate = (len(times) - 1) / span if span > 0 else float("inf")
    log("%s: %d pods bound, first %.2f s after the scheduler started, last %.2f s: %.1f pods/s" % (
        name, len(times), times[0] - t0, times[-1] - t0, rate))
    durations = scheduler_durations(c.scheduler_http_port)
    # CPU each process of the cluster spent per pod bound in this phase (from the scheduler's start)
    cpu1 = cpu_by_process(c)
    cpu_ms = {n: round(1000 * (cpu1[n] - cpu0.get(n, 0.0)) / len(times), 3) for n in sorted(cpu1)}
    if prof:
        prof.join()
        if prof.error:
            log("%s: no CPU profile: %s" % (name, prof.error))
    c.procs["kube-scheduler"].stop()
    del c.procs["kube-scheduler"]
    return {"pods": len(times), "first_s": round(times[0] - t0, 3), "last_s": round(times[-1] - t0, 3),
            "pods_per_s": round(rate, 1), "load_average": load0,
            "load_average_end": [round(x, 2) for x in os.getloadavg()], "cpu_ms_per_pod": cpu_ms,
            "kube_scheduler_ms": durations}


class BusyLoad:
    """n processes spinning on the CPU (the load of --load), stopped on exit."""

    def __init__(self, n):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("GPUSLICE_BUILD", os.path.join(ROOT, "build")))
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=1000, help="pods per phase")
    ap.add_argument("--qps", type=int, default=1000, help="kube-scheduler client QPS and burst")
    ap.add_argument("--workers", type=int, default=8, help="parallel API calls creating nodes and pods")
    ap.add_argument("--timeout", type=int, default=600, help="seconds for one phase's pods to be bound")
    ap.add_argument("--json", help="also write the result here")
    ap.add_argument("--pprof", metavar="DIR", help="save kube-scheduler's CPU profile of each phase here")
    ap.add_argument("--pprof-seconds", type=int, default=4, help="length of each CPU profile")
    ap.add_argument("--perf", metavar="DIR", help="perf record the extender during the extender phase here")
    ap.add_argument("--load", type=int, default=2, metavar="N",
                    help="run both phases again with N busy-loop processes (0: idle phases only)")
    ap.add_argument("--extender-arg", action="append", default=[], metavar="ARG",
                    help="an extra argument of gpuslice scheduler (repeatable)")
    a = ap.parse_args()
    exe = os.path.join(a.build, "gpuslice")
    if "--kubeconfig" not in subprocess.run([exe, "scheduler", "--help"], capture_output=True, text=True).stdout:
        sys.exit("sched-e2e: %s was built without the Kubernetes client: the extender cannot bind" % exe)
    result = {"machine": machine(), "nodes": a.nodes, "pods_per_phase": a.pods, "qps": a.qps,
              "pod_limits": LIMITS, "extender_args": a.extender_arg, "load_processes": a.load}
    with cluster.Cluster(log=log) as c:
        c.start_control_plane()
        port = cluster.free_port()
        ext_proc = c.spawn("gpuslice-scheduler", [exe, "scheduler", "--address", "127.0.0.1:%d" % port,
                                                  "--kubeconfig", c.kubeconfig, "--log-level", "warn",
                                                  *a.extender_arg])

        def healthy():
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        c.wait("the extender synced", healthy, timeout=60)
        time.sleep(1)
        rss0 = rss_kib(ext_proc.pid)
        log("creating %d GPU nodes" % a.nodes)
        make_nodes(c, a.nodes, a.workers)
        c.wait("%d nodes in the extender's model" % a.nodes,
               lambda: metric(port, "gpuslice_scheduler_model_nodes") == a.nodes, timeout=120)
        time.sleep(1)
        rss1 = rss_kib(ext_proc.pid)
        pprof = (a.pprof, a.pprof_seconds) if a.pprof else None
        for d in (a.pprof, a.perf):
            if d:
                os.makedirs(d, exist_ok=True)
        result["default"] = phase(c, "default", "bench-default", a.pods, a.workers, a.qps, None, a.timeout, pprof)
        c.wait("the default phase's pods in the extender's model",
               lambda: metric(port, "gpuslice_scheduler_model_pods") == a.pods, timeout=120)
        time.sleep(1)
        rss2 = rss_kib(ext_proc.pid)
        ext = {"urlPrefix": "http://127.0.0.1:%d" % port, "filterVerb": "filter", "prioritizeVerb": "prioritize",
               "bindVerb": "bind", "weight": 5, "nodeCacheCapable": True, "ignorable": False, "httpTimeout": "5s",
               "managedResources": [{"name": r, "ignoredByScheduler": False} for r in tse.RESOURCES]}
        perf = None
        if a.perf:
            perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-g", "-F", "999", "-p", str(ext_proc.pid), "-o",
                                     os.path.join(a.perf, "extender.perf.data")], stdin=subprocess.DEVNULL)
        result["extender"] = phase(c, "extender", "bench-extender", a.pods, a.workers, a.qps, [ext], a.timeout,
                                   pprof)
        if perf:
            perf.send_signal(2)  # SIGINT: perf writes its file and exits
            perf.wait(timeout=60)
        c.wait("the extender phase's pods in the extender's model",
               lambda: metric(port, "gpuslice_scheduler_model_pods") == 2 * a.pods, timeout=120)
        time.sleep(1)
        rss3 = rss_kib(ext_proc.pid)
        binds = metric(port, "gpuslice_scheduler_binds_total{result=\"ok\"}")
        result["extender"]["binds_ok"] = binds
        # every pod of the extender phase carries the assignment it was bound with
        items = c.api("GET", "/api/v1/namespaces/bench-extender/pods")["items"]
        assigned = sum(1 for p in items if "gpuslice.io/assignment" in p["metadata"].get("annotations", {}))
        result["extender"]["pods_with_assignment"] = assigned
        result["extender"]["extender_calls"] = verb_latency(port)
        result["ratio_extender_to_default"] = round(result["extender"]["pods_per_s"] /
                                                    result["default"]["pods_per_s"], 3)
        if a.load > 0:
            log("both phases again with %d busy-loop processes" % a.load)
            with BusyLoad(a.load):
                time.sleep(5)  # let the load averages see them
                result["default_load"] = phase(c, "default_load", "bench-default-load", a.pods, a.workers, a.qps,
                                               None, a.timeout)
                result["extender_load"] = phase(c, "extender_load", "bench-extender-load", a.pods, a.workers, a.qps,
                                                [ext], a.timeout)
            result["ratio_extender_to_default_load"] = round(result["extender_load"]["pods_per_s"] /
                                                             result["default_load"]["pods_per_s"], 3)
        result["memory"] = {"rss_kib_empty": rss0, "rss_kib_nodes": rss1, "rss_kib_default_pods": rss2,
                            "rss_kib_all_pods": rss3,
                            "per_node_bytes": round((rss1 - rss0) * 1024 / a.nodes),
                            # a pod the extender only watches (bound by the default scheduler):
                            # informer cache + model
                            "per_watched_pod_bytes": round((rss2 - rss1) * 1024 / a.pods),
                            # a pod scheduled through the extender: the same plus what filter and
                            # bind keep or touch (pending cache until bound, the HTTP threads'
                            # first use of their stacks and malloc arenas)
                            "per_scheduled_pod_bytes": round((rss3 - rss2) * 1024 / a.pods)}
        result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    print("```json\n%s\n```" % json.dumps(result, indent=1))
    m = result["memory"]
    print("\n| nodes × GPUs | pods per phase | default scheduler alone | with gpuslice extender | ratio | "
          "extender RSS per node | per watched pod | per scheduled pod |")
    print("|---|---|---|---|---|---|---|---|")
    print("| %d × 8 | %d | %.1f pods/s | %.1f pods/s | %.2f | %.1f KiB | %.1f KiB | %.1f KiB |" % (
        a.nodes, a.pods, result["default"]["pods_per_s"], result["extender"]["pods_per_s"],
        result["ratio_extender_to_default"], m["per_node_bytes"] / 1024, m["per_watched_pod_bytes"] / 1024,
        m["per_scheduled_pod_bytes"] / 1024))
    print("\n| phase | load average (1/5/15 min) at the start | at the end | default scheduler alone | "
          "with gpuslice extender | ratio |")
    print("|---|---|---|---|---|---|")
    for tag, label in (("", "idle"), ("_load", "%d busy-loop processes" % a.load)):
        if "default" + tag not in result:
            continue
        d, e = result["default" + tag], result["extender" + tag]
        print("| %s | %s / %s | %s / %s | %.1f pods/s | %.1f pods/s | %.2f |" % (
            label, " ".join("%.2f" % x for x in d["load_average"]), " ".join("%.2f" % x for x in e["load_average"]),
            " ".join("%.2f" % x for x in d["load_average_end"]), " ".join("%.2f" % x for x in e["load_average_end"]),
            d["pods_per_s"], e["pods_per_s"], result["ratio_extender_to_default" + tag]))
    print("\nextender: `gpuslice scheduler %s`; its time per call (idle phases): %s" % (
        " ".join(a.extender_arg) or "(default options)",
        ", ".join("%s %.2f ms (%d calls)" % (v, x["mean_ms"], x["calls"])
                  for v, x in sorted(result["extender"]["extender_calls"].items()))))
    for ph in ("default", "extender", "default_load", "extender_load"):
        if ph not in result:
            continue
        print("CPU ms per pod bound, %s phase: %s" % (ph, ", ".join(
            "%s %.2f" % (k, v) for k, v in result[ph]["cpu_ms_per_pod"].items())))
        d = result[ph]["kube_scheduler_ms"]
        print("kube-scheduler, %s phase, mean ms: %s" % (ph, ", ".join(
            "%s %.2f (%d)" % (k, v["mean_ms"], v["count"]) for k, v in d.items())))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if assigned != a.pods:
        sys.exit("sched-e2e: only %d of %d extender-phase pods carry an assignment" % (assigned, a.pods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
