#!/usr/bin/env python3
"""gpuslice hardware kit — every real-GPU check of docs/hardware.md, each with its pass rule, in one run.

Run through run.sh (`run.sh --out DIR`). Each check prints one line (PASS / FAIL / SKIP / INFO, its figures,
its rule) and the report in DIR (report.json, report.md; node.txt, the node as `gpuslice sim record` saw it;
logs.tar.gz, every command's output) is rewritten after every check, so a run cut short still reports what it
did. Never changes the GPU's settings (it checks at the end that MIG mode, compute mode and persistence are
what they were), takes device memory with plain allocations only, installs and downloads nothing.

Modes: real (default) — the machine's NVIDIA driver; every check that needs one is skipped with the reason
when there is none. --simulate [NODE] — the kit's simulated driver and NVML with a node description: the
checks that need no NVIDIA runtime (no PyTorch, JAX, CuPy, nvidia-smi, timing) run against it; `make test`
runs this so the kit cannot rot between GPU days.
"""
import argparse
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
import urllib.request

# tests/runner.py, the one rule set of gpuslice's test runners (selection, exit 0 / 77 / 1): next to this file
# in an assembled kit (hwkit/assemble.sh copies it), in tests/ in the source tree
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_here, os.path.join(_here, "..", "tests")]
import runner  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
CHECKS = []  # (id, title, rule, modes, needs, fn), in run order


def check(cid, title, rule, modes=("real", "sim"), needs=()):
    """Register a check. fn(kit) returns (status, figures, detail); status pass|fail|skip|info."""
    def wrap(fn):
        CHECKS.append((cid, title, rule, modes, needs, fn))
        return fn
    return wrap


def verdict(ok, figures, detail=""):
    return ("pass" if ok else "fail", figures, detail)


def skip(reason, figures=None):
    return ("skip", figures or {}, reason)


def mib(b):
    return None if b is None else round(b / MiB, 1)


class Proc:
    def __init__(self, rc, out, err, secs):
        self.rc, self.out, self.err, self.secs = rc, out, err, secs

    def json_lines(self, prefix=""):
        objs = []
        for line in self.out.splitlines():
            if line.startswith(prefix + "{"):
                try:
                    objs.append(json.loads(line[len(prefix):]))
                except ValueError:
                    pass
        return objs

    def last_json(self, prefix=""):
        objs = self.json_lines(prefix)
        return objs[-1] if objs else None


class Kit:
    def __init__(self, a):
        self.kit = os.path.abspath(a.kit)
        self.out = os.path.abspath(a.out)
        os.makedirs(self.out, exist_ok=True)
        self.work = tempfile.mkdtemp(prefix="gpuslice-hwkit-")
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs)
        self.simulate = a.simulate is not None
        self.mode = "sim" if self.simulate else "real"
        self.only = set(a.only) if a.only is not None else None
        self.budget = a.budget
        self.gpu = a.gpu
        self.t0 = time.monotonic()
        self.started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.seq = 0
        self.results = []
        self.machine = {}
        self.py = sys.executable
        self.bins = {
            "gpuslice": os.path.join(self.kit, "bin", "gpuslice"),
            "interposer": os.path.join(self.kit, "bin", "libgpuslice-cuda.so"),
            "cuda-workload": os.path.join(self.kit, "probes", "cuda-workload"),
            "procaddr-replay": os.path.join(self.kit, "probes", "procaddr-replay"),
            "hwkit-region": os.path.join(self.kit, "probes", "hwkit-region"),
        }
        self.env = dict(os.environ)
        self.env.pop("LD_PRELOAD", None)
        self.env.pop("GPUSLICE_LIMITS", None)
        self.env["PYTHONUNBUFFERED"] = "1"
        self.env["XDG_RUNTIME_DIR"] = self.work  # where `gpuslice run` makes its containers: removed at the end
        if self.simulate:
            nodes = os.path.join(self.kit, "data", "nodes")
            self.node = os.path.abspath(a.simulate) if a.simulate else default_node(nodes)
            self.env["GPUSLICE_SIM_NODE"] = self.node
            self.env["GPUSLICE_SIM_STATE"] = os.path.join(self.work, "sim-state")
            self.env["LD_LIBRARY_PATH"] = os.path.join(self.kit, "sim") + (
                ":" + self.env["LD_LIBRARY_PATH"] if self.env.get("LD_LIBRARY_PATH") else "")
        self.smi = None if self.simulate else shutil.which("nvidia-smi")
        self.driver_ok, self.driver_reason = self.find_driver()
        self.gpuslice_ok, self.gpuslice_reason = True, ""
        self.clients = {}
        self.uuid = ""
        self.gpu_memory = 0
        self.start_settings = None
        self.start_xids = None
        self.context_cost = None  # what one context took, measured by the driver-probe check

    # ---- environment ----

    def find_driver(self):
        if self.simulate:
            return True, ""
        try:
            import ctypes
            nvml = ctypes.CDLL("libnvidia-ml.so.1")
            rc = nvml.nvmlInit_v2()
            if rc != 0:
                return False, "no NVIDIA driver (nvmlInit_v2 returned %d)" % rc
            nvml.nvmlShutdown()
        except OSError as e:
            return False, "no NVIDIA driver (libnvidia-ml.so.1: %s)" % e
        if not os.path.exists("/dev/nvidiactl"):
            return False, "no NVIDIA driver (/dev/nvidiactl is missing)"
        return True, ""

    def elapsed(self):
        return time.monotonic() - self.t0

    # ---- running things ----

    def log(self, name, text):
        self.seq += 1
        path = os.path.join(self.logs, "%03d-%s.log" % (self.seq, re.sub(r"[^A-Za-z0-9._-]", "_", name)[:60]))
        with open(path, "w", errors="replace") as f:
            f.write(text)

    def run(self, name, argv, env=None, timeout=60, stdin=None):
        t = time.monotonic()
        try:
            p = subprocess.run(argv, env=env or self.env, timeout=timeout, stdin=subprocess.DEVNULL if stdin is None
                               else None, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, errors="replace")
            r = Proc(p.returncode, p.stdout, p.stderr, time.monotonic() - t)
        except subprocess.TimeoutExpired as e:
            r = Proc(124, e.stdout or "", (e.stderr or "") + "\n[timed out after %ss]" % timeout, time.monotonic() - t)
            if isinstance(r.out, bytes):
                r.out = r.out.decode(errors="replace")
            if isinstance(r.err, bytes):
                r.err = r.err.decode(errors="replace")
        except OSError as e:
            r = Proc(127, "", str(e), time.monotonic() - t)
        self.log(name, "$ %s\n[exit %s, %.2f s]\n--- stdout\n%s\n--- stderr\n%s\n" %
                 (" ".join(argv), r.rc, r.secs, r.out, r.err))
        return r

    def start(self, name, argv, env=None):
        """A background process with its stdout piped (read line by line with wait_line); finish() collects and
        logs it. Its stdin takes lines from send()."""
        f = open(os.path.join(self.work, "bg-%d.err" % self.seq_bg()), "w+")
        p = subprocess.Popen(argv, env=env or self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=f,
                             bufsize=0, start_new_session=True)
        p.kit_name, p.kit_err, p.kit_argv, p.kit_out, p.kit_buf = name, f, argv, [], b""
        return p

    def seq_bg(self):
        self.bg_count = getattr(self, "bg_count", 0) + 1
        return self.bg_count

    def wait_line(self, p, prefix, timeout=120):
        """Lines of p until one starts with prefix (returned) or p ends / the time is up (None)."""
        import select
        end = time.monotonic() + timeout
        while True:
            while b"\n" in p.kit_buf:
                raw, p.kit_buf = p.kit_buf.split(b"\n", 1)
                line = raw.decode(errors="replace") + "\n"
                p.kit_out.append(line)
                if line.startswith(prefix):
                    return line
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([p.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                return None
            p.kit_buf += chunk

    @staticmethod
    def send(p, line):
        try:
            p.stdin.write(line.encode())
            p.stdin.flush()
        except OSError:
            pass

    def finish(self, p, kill=False, timeout=60):
        if kill:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            rest, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rest, _ = p.communicate()
        out = "".join(p.kit_out) + (p.kit_buf + (rest or b"")).decode(errors="replace")
        p.kit_err.seek(0)
        err = p.kit_err.read()
        p.kit_err.close()
        self.log(p.kit_name, "$ %s\n[exit %s]\n--- stdout\n%s\n--- stderr\n%s\n" % (" ".join(p.kit_argv), p.returncode,
                                                                                  out, err))
        return Proc(p.returncode, out, err, 0)

    def gs(self, *args, **kw):
        return self.run("gpuslice-" + (args[0] if args else ""), [self.bins["gpuslice"]] + list(args), **kw)

    def limited(self, memory=None, core=None, keep=False):
        """`gpuslice run` on the kit's GPU with these limits: the product's own path into a "container"."""
        argv = [self.bins["gpuslice"], "run", "--gpu", str(self.gpu), "--interposer", self.bins["interposer"]]
        if memory:
            argv += ["--memory", str(memory)]
        if core:
            argv += ["--core", str(core)]
        if keep:
            argv += ["--keep"]
        return argv + ["--"]

    def workload(self, *steps):
        return [self.bins["cuda-workload"]] + [str(s) for s in steps]

    def smi_query(self, fields, what="--query-gpu"):
        r = self.run("nvidia-smi-" + what.strip("-"), [self.smi, "%s=%s" % (what, fields), "--format=csv,noheader,nounits"])
        if r.rc != 0:
            return None
        return [[x.strip() for x in line.split(",")] for line in r.out.splitlines() if line.strip()]

    def processes(self):
        """{pid: used bytes} of the kit's GPU as the driver reports it (nvidia-smi, or the simulated NVML)."""
        if self.smi:
            rows = self.smi_query("pid,used_memory,gpu_uuid", "--query-compute-apps") or []
            return {int(r[0]): int(float(r[1])) * MiB for r in rows
                    if len(r) >= 3 and r[0].isdigit() and r[2].lower() == self.uuid.lower()}
        r = self.gs("ps", "--json")
        if r.rc != 0:
            return {}
        return {p["pid"]: p.get("memory_bytes") or 0 for p in json.loads(r.out).get("processes", [])
                if p.get("gpu_uuid", "").lower() == self.uuid.lower()}


class Container:
    """A kit-made container: its own limits file and region (hwkit-region writes the limits as the agent does),
    the interposer preloaded. For the checks that add processes to one container one at a time."""

    def __init__(self, kit, memory=None, core=None, name="kit"):
        self.kit = kit
        self.dir = tempfile.mkdtemp(prefix="c-", dir=kit.work)
        self.limits = os.path.join(self.dir, "limits")
        self.region = os.path.join(self.dir, "region")
        argv = [kit.bins["hwkit-region"], "limits", self.limits, "--container", name, "--region", self.region]
        if kit.uuid:
            argv += ["--uuid", kit.uuid]
        if memory:
            argv += ["--memory", str(memory)]
        if core:
            argv += ["--core", str(core)]
        r = kit.run("limits", argv)
        if r.rc != 0:
            raise RuntimeError("hwkit-region limits: %s" % r.err.strip())

    def env(self, extra=None):
        e = dict(self.kit.env)
        e["LD_PRELOAD"] = self.kit.bins["interposer"]
        e["GPUSLICE_LIMITS"] = self.limits
        if self.kit.uuid and not self.kit.simulate:
            e["CUDA_VISIBLE_DEVICES"] = self.kit.uuid
        e.update(extra or {})
        return e

    def dump(self):
        return Container.dump_path(self.kit, self.region)

    @staticmethod
    def dump_path(kit, region):
        """The region as hwkit-region dump prints it (devices, live slots), None when it cannot be read."""
        r = kit.run("region-dump", [kit.bins["hwkit-region"], "dump", region])
        return json.loads(r.out) if r.rc == 0 else None


def default_node(nodes):
    """A node recorded on a real GPU (tests/data/nodes) when the kit carries one, else the spec node."""
    files = sorted(f for f in os.listdir(nodes) if f.endswith(".node"))
    recorded = [f for f in files if f != "h100-spec.node"]
    return os.path.join(nodes, (recorded or files)[0])


def limits_of(stderr):
    """The limits file `gpuslice run --keep` named on stderr, and the region it names."""
    m = re.search(r"limits in (\S+)", stderr)
    if not m:
        return None, None
    try:
        text = open(m.group(1)).read()
    except OSError:
        return m.group(1), None
    r = re.search(r"^region (\S+)", text, re.M)
    return m.group(1), r.group(1) if r else None


def parse_kv(text, key):
    """Numbers after `key` on the first line that starts with it ("filled 123" → [123])."""
    for line in text.splitlines():
        if line.startswith(key + " "):
            return [int(x) for x in line.split()[1:] if re.fullmatch(r"-?\d+", x)]
    return None


# ================================================================== the checks, in run order

@check("environment", "the machine: OS, kernel, glibc, runtime, driver, GPUs, Python and its GPU clients",
       "information only")
def c_environment(k):
    return ("info", dict(k.machine), "")


@check("kit-binaries", "the carried binaries run here (else what needs only a compiler is rebuilt)",
       "gpuslice, the interposer and the C probes load and run on this machine's glibc; a C probe or the "
       "interposer that cannot is rebuilt with the machine's compiler (rebuild.sh) and then runs")
def c_binaries(k):
    def loads(name):
        if name == "interposer":
            r = k.run("load-interposer", [k.py, "-c", "import ctypes,sys; ctypes.CDLL(sys.argv[1])", k.bins[name]])
            return r.rc == 0, (r.err.strip().splitlines() or [""])[-1]
        args = {"gpuslice": ["version"]}.get(name, [])
        r = k.run("load-" + name, [k.bins[name]] + args)
        # the dynamic loader's own complaints (the program's, e.g. no driver to dlopen, are not a load failure)
        bad = re.search(r"(version `GLIBC_[0-9.]+' not found[^\n]*|error while loading shared libraries[^\n]*)", r.err)
        if bad or (r.rc == 127 and not r.out):
            return False, bad.group(1) if bad else r.err.strip()[:200]
        return True, ""

    fig, failed = {"glibc": k.machine.get("glibc")}, {}
    for name in ("gpuslice", "interposer", "cuda-workload", "procaddr-replay", "hwkit-region"):
        ok, why = loads(name)
        if not ok:
            failed[name] = why
    rebuilt = []
    c_parts = [n for n in failed if n != "gpuslice"]
    if c_parts:
        r = k.run("rebuild", ["sh", os.path.join(k.kit, "rebuild.sh"), k.kit], timeout=300)
        if r.rc == 0:
            for n in c_parts:
                sub = "bin" if n == "interposer" else "probes"
                base = os.path.basename(k.bins[n])
                k.bins[n] = os.path.join(k.kit, "rebuilt", sub, base)
                ok, why = loads(n)
                if ok:
                    rebuilt.append(n)
                    failed.pop(n)
                else:
                    failed[n] = "rebuilt, still: " + why
        else:
            for n in c_parts:
                failed[n] += "; rebuild failed: " + (r.err.strip().splitlines() or ["?"])[-1]
    if "gpuslice" in failed:
        k.gpuslice_ok, k.gpuslice_reason = False, "gpuslice cannot run here: " + failed["gpuslice"]
    fig["rebuilt"] = rebuilt
    fig["cannot_run"] = failed
    return verdict(not failed, fig, "; ".join("%s: %s" % i for i in failed.items()))


@check("nvml-inventory", "gpuslice's GPU table (NVML) against nvidia-smi --query-gpu",
       "for every GPU: UUID, name, PCI bus id, memory total (±1 MiB) and MIG mode equal nvidia-smi's",
       modes=("real",), needs=("driver", "smi", "gpuslice"))
def c_inventory(k):
    r = k.gs("topo", "--json")
    rows = k.smi_query("index,uuid,name,pci.bus_id,memory.total,mig.mode.current")
    if r.rc != 0 or rows is None:
        return ("fail", {}, "gpuslice topo --json exit %d; nvidia-smi %s" % (r.rc, "ok" if rows else "failed"))
    gpus = json.loads(r.out)["gpus"]
    diffs = []
    mig_name = {1: "enabled", 0: "disabled", -1: "[n/a]"}
    for row in rows:
        i = int(row[0])
        g = gpus[i] if i < len(gpus) else None
        if not g:
            diffs.append("GPU %d: missing in gpuslice" % i)
            continue
        want = {"uuid": row[1].lower(), "name": row[2], "bus": row[3].upper(), "mem": int(float(row[4])),
                "mig": row[5].lower()}
        have = {"uuid": g["uuid"].lower(), "name": g["name"], "bus": g["bus_id"].upper(),
                "mem": g["memory_total_bytes"] // MiB, "mig": mig_name.get(g["mig_mode"], "?")}
        for key in want:
            same = abs(want[key] - have[key]) <= 1 if key == "mem" else want[key] == have[key]
            if key == "mig" and want[key] in ("[n/a]", "n/a", "[not supported]") and have[key] == "[n/a]":
                same = True
            if not same:
                diffs.append("GPU %d %s: nvidia-smi %r, gpuslice %r" % (i, key, want[key], have[key]))
    fig = {"gpus": len(rows), "nvidia_smi": rows, "differences": diffs}
    return verdict(not diffs and len(rows) == len(gpus), fig, "; ".join(diffs))


@check("nvml-topology", "gpuslice topo's link matrix against nvidia-smi topo -m",
       "every GPU pair's link (X, NV#, PIX, PXB, PHB, NODE, SYS) equals nvidia-smi's",
       modes=("real",), needs=("driver", "smi", "gpuslice"))
def c_topology(k):
    def gpu_rows(text):
        rows = {}
        for line in text.splitlines():
            t = line.split()
            if t and re.fullmatch(r"GPU\d+", t[0]):
                rows[t[0]] = t[1:]
        n = len(rows)
        return {name: vals[:n] for name, vals in rows.items()}
    smi = k.run("nvidia-smi-topo", [k.smi, "topo", "-m"])
    ours = k.gs("topo", "--matrix")
    if smi.rc != 0 or ours.rc != 0:
        return ("fail", {}, "nvidia-smi topo -m exit %d, gpuslice topo --matrix exit %d" % (smi.rc, ours.rc))
    a, b = gpu_rows(smi.out), gpu_rows(ours.out)
    return verdict(a == b and a, {"nvidia_smi": a, "gpuslice": b}, "" if a == b else "matrices differ")


@check("versions", "driver and CUDA versions: gpuslice (NVML) against nvidia-smi",
       "the driver version and the CUDA driver version equal nvidia-smi's header",
       modes=("real",), needs=("driver", "smi", "gpuslice"))
def c_versions(k):
    r = k.gs("topo", "--json")
    smi = k.run("nvidia-smi", [k.smi])
    m = re.search(r"Driver Version:\s*(\S+).*?CUDA Version:\s*(\S+)", smi.out)
    if r.rc != 0 or not m:
        return ("fail", {}, "gpuslice topo --json exit %d; nvidia-smi header %s" % (r.rc, "found" if m else "missing"))
    t = json.loads(r.out)
    fig = {"driver": [t.get("driver_version"), m.group(1)], "cuda": [t.get("cuda_version"), m.group(2)]}
    return verdict(t.get("driver_version") == m.group(1) and str(t.get("cuda_version")) == m.group(2), fig)


@check("sim-record", "gpuslice sim record, and the simulator loaded with the recording",
       "`gpuslice topo --json` through the simulator loaded with the recorded node equals the node's own "
       "(all but the memory in use); the recording is kept as node.txt", needs=("driver", "gpuslice"))
def c_sim_record(k):
    node = os.path.join(k.work, "recorded.node")
    r = k.gs("sim", "record", "-o", node, timeout=120)
    if r.rc != 0:
        return ("fail", {}, "gpuslice sim record exit %d: %s" % (r.rc, r.err.strip()[-300:]))
    shutil.copy(node, os.path.join(k.out, "node.txt"))
    text = open(node).read()
    k.recorded = text
    orig = k.gs("topo", "--json")
    env = dict(k.env)
    env.update({"GPUSLICE_SIM_NODE": node, "GPUSLICE_SIM_STATE": os.path.join(k.work, "sim-record-state"),
                "LD_LIBRARY_PATH": os.path.join(k.kit, "sim") + ":" + env.get("LD_LIBRARY_PATH", "")})
    sim = k.run("gpuslice-topo-sim", [k.bins["gpuslice"], "topo", "--json"], env=env)
    if orig.rc != 0 or sim.rc != 0:
        return ("fail", {}, "topo --json: node exit %d, simulator exit %d" % (orig.rc, sim.rc))
    a, b = json.loads(orig.out), json.loads(sim.out)
    for t in (a, b):
        for g in t.get("gpus", []):
            g.pop("memory_used_bytes", None)
    diffs = [key for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]
    ctx = re.search(r"^cuda context=(\S+)", text, re.M)
    fig = {"context": ctx.group(1) if ctx else None, "lines": len(text.splitlines()),
           "process_utilization": "unsupported" not in text, "differences": diffs}
    return verdict(not diffs, fig, ("differs in " + ", ".join(diffs)) if diffs else "")


@check("limit-driver-api", "the memory limit with the driver-API probe (gpuslice run --memory)",
       "cuMemGetInfo's total is the limit; allocations succeed up to what it reports free (within one 64 MiB "
       "chunk) and the next one is refused with CUDA_ERROR_OUT_OF_MEMORY", needs=("driver", "gpuslice"))
def c_limit_driver(k):
    limit = 2 * GiB
    r = k.run("limit-driver", k.limited(memory=limit) + k.workload("init", "info", "fill", "64M", "alloc!", "64M"),
              timeout=120)
    info, filled = parse_kv(r.out, "info"), parse_kv(r.out, "filled")
    if r.rc != 0 or not info or not filled:
        return ("fail", {}, "exit %d: %s" % (r.rc, r.err.strip()[-300:]))
    free, total = info
    fig = {"limit_mib": mib(limit), "total_mib": mib(total), "free_at_start_mib": mib(free),
           "context_charged_mib": mib(total - free), "filled_mib": mib(filled[0])}
    return verdict(total == limit and free - 64 * MiB <= filled[0] <= free, fig)


@check("limit-vs-driver", "what the limit includes, checked where the host sees it (NVML per process)",
       "a process that filled its limit holds (NVML's per-process used memory: context, code and heap) at most "
       "the limit, and the limiter counts at least what the driver holds for it (within 2 MiB)",
       needs=("driver", "gpuslice"))
def c_limit_vs_driver(k):
    limit = 2 * GiB
    p = k.start("hold-filled", k.limited(memory=limit, keep=True) + k.workload("init", "fill", "64M", "ready", "hold"))
    try:
        if not k.wait_line(p, "ready"):
            return ("fail", {}, "the probe did not get ready")
        time.sleep(0.5)
        procs = k.processes()
        _, region = limits_of(open(p.kit_err.name).read())
        dump = Container.dump_path(k, region) if region else None
    finally:
        done = k.finish(p, kill=True)
    filled = (parse_kv(done.out, "filled") or [0])[0]
    if not dump or not dump["slots"]:
        return ("fail", {}, "no region to read")
    slot = dump["slots"][0]
    drv = procs.get(slot["host_pid"] or slot["pid"])
    if drv is None:
        return ("fail", {"processes": procs}, "NVML does not list the probe (PID %d)" % slot["pid"])
    counted = dump["devices"][0]["used"]
    k.context_cost = max(0, drv - filled)
    fig = {"limit_mib": mib(limit), "driver_holds_mib": mib(drv), "limiter_counts_mib": mib(counted),
           "filled_mib": mib(filled), "driver_beyond_allocations_mib": mib(drv - filled)}
    return verdict(drv <= limit and counted + 2 * MiB >= drv, fig)


@check("shared-limit", "two processes of one container share one limit",
       "the second process can take only what the first leaves: both processes' charges sum to at most the "
       "limit and within one 64 MiB chunk of it", needs=("driver", "gpuslice"))
def c_shared_limit(k):
    limit = 2 * GiB
    argv = k.limited(memory=limit, keep=True) + k.workload("init", "alloc", "1G", "bg", "3", "init", "ready", "hold",
                                                          "fill", "64M", "ready", "hold")
    p = k.start("shared-limit", argv)
    try:
        if not k.wait_line(p, "ready", timeout=120):
            return ("fail", {}, "the processes did not get ready")
        _, region = limits_of(open(p.kit_err.name).read())
        dump = Container.dump_path(k, region) if region else None
    finally:
        done = k.finish(p, kill=True)
    filled = (parse_kv(done.out, "filled") or [None])[0]
    if not dump or len(dump["slots"]) != 2 or filled is None:
        return ("fail", {}, "expected two live slots and a fill (slots %s)" % (dump and len(dump["slots"])))
    used = [s["used"][0] for s in dump["slots"]]
    total = sum(used)
    fig = {"limit_mib": mib(limit), "slots_mib": [mib(u) for u in used], "second_filled_mib": mib(filled)}
    return verdict(limit - 64 * MiB <= total <= limit, fig)


@check("limit-pytorch", "the memory limit as PyTorch sees it",
       "torch.cuda.mem_get_info() reports the limit as total; allocating up to it works (all but the context "
       "and at most 512 MiB); beyond it PyTorch raises its out-of-memory error and the process lives on",
       modes=("real",), needs=("driver", "gpuslice", "torch"))
def c_limit_torch(k):
    limit = 4 * GiB
    p = k.start("torch-limit", k.limited(memory=limit, keep=True) +
                [k.py, os.path.join(k.kit, "probes", "client_probe.py"), "limit"])
    hold = None
    try:
        line = k.wait_line(p, "HOLD ", timeout=180)
        if line:
            hold = json.loads(line[5:])
            time.sleep(0.5)
            procs = k.processes()
            _, region = limits_of(open(p.kit_err.name).read())
            dump = Container.dump_path(k, region) if region else None
            k.torch_hold = {"hold": hold, "procs": procs, "dump": dump}
            k.send(p, "go\n")
    finally:
        done = k.finish(p, kill=hold is None, timeout=60)
    if not hold:
        err = done.last_json()
        return ("fail", {}, "the probe did not reach its hold point: %s" % (err or done.err.strip()[-300:]))
    alive = any(o.get("alive") for o in done.json_lines())
    ctx = hold["total"] - hold["free_start"]
    fig = {"limit_mib": mib(limit), "total_mib": mib(hold["total"]), "context_mib": mib(ctx),
           "allocated_mib": mib(hold["allocated"]), "oom": hold["oom"], "oom_again": hold["oom_again"],
           "alive_after": alive}
    ok = (hold["total"] == limit and hold["oom"] and "OutOfMemory" in hold["oom"] and hold["oom_again"] and
          hold["allocated"] >= limit - ctx - 512 * MiB and alive and done.rc == 0)
    return verdict(ok, fig)


@check("limit-includes-lazy-code", "what PyTorch's runtime loads around the hooks is counted",
       "after a cuBLAS matmul (kernels the CUDA runtime loads lazily, through no hooked call) and one memory "
       "query, the limiter counts at least what NVML says the process holds (within 2 MiB)",
       modes=("real",), needs=("driver", "gpuslice", "torch"))
def c_lazy(k):
    t = getattr(k, "torch_hold", None)
    if not t or not t.get("dump"):
        return skip("limit-pytorch did not reach its hold point")
    pid = t["hold"]["pid"]
    slot = next((s for s in t["dump"]["slots"] if s["pid"] == pid or s["host_pid"] == pid), None)
    drv = t["procs"].get(pid)
    if slot is None or drv is None:
        return ("fail", {"processes": t["procs"]}, "the probe's slot or NVML entry is missing (PID %d)" % pid)
    fig = {"driver_holds_mib": mib(drv), "limiter_counts_mib": mib(slot["used"][0]),
           "torch_reserved_mib": mib(t["hold"]["reserved"])}
    return verdict(slot["used"][0] + 2 * MiB >= drv, fig)


@check("limit-jax", "JAX with its default preallocation under the limit",
       "JAX starts, runs a 4096² matmul, and XLA's preallocated pool (bytes_limit) fits the limit",
       modes=("real",), needs=("driver", "gpuslice", "jax"))
def c_jax(k):
    limit = 4 * GiB
    r = k.run("jax", k.limited(memory=limit) + [k.py, os.path.join(k.kit, "probes", "client_probe.py"), "jax"],
              timeout=240)
    o = r.last_json() or {}
    fig = {"limit_mib": mib(limit), "bytes_limit_mib": mib(o.get("bytes_limit")), "platform": o.get("platform")}
    if r.rc != 0 or not o.get("ok"):
        return ("fail", fig, o.get("error") or r.err.strip()[-300:])
    return verdict(o.get("bytes_limit") is not None and o["bytes_limit"] <= limit, fig)


@check("limit-cupy", "CuPy under the limit",
       "Device().mem_info's total is the limit; CuPy allocates up to it (all but the context and one 256 MiB "
       "block) and then raises its OutOfMemoryError", modes=("real",), needs=("driver", "gpuslice", "cupy"))
def c_cupy(k):
    limit = 3 * GiB
    r = k.run("cupy", k.limited(memory=limit) + [k.py, os.path.join(k.kit, "probes", "client_probe.py"), "cupy"],
              timeout=180)
    o = r.last_json() or {}
    if r.rc != 0 or "total" not in o:
        return ("fail", {}, o.get("error") or r.err.strip()[-300:])
    ctx = o["total"] - o["free_start"]
    fig = {"limit_mib": mib(limit), "total_mib": mib(o["total"]), "context_mib": mib(ctx),
           "allocated_mib": mib(o["allocated"]), "oom": o["oom"]}
    return verdict(o["total"] == limit and o["oom"] == "OutOfMemoryError" and
                   limit - ctx - 256 * MiB <= o["allocated"] <= limit, fig)


def probe(k):
    return os.path.join(k.kit, "probes", "client_probe.py")


@check("nvml-view-pynvml", "NVML as pynvml reads it (its own dlopen handle) under the limit, against cuMemGetInfo",
       "under `gpuslice run --memory 2GiB`: NVML's total (nvmlDeviceGetMemoryInfo through pynvml, or through "
       "ctypes.CDLL as pynvml loads it) is the limit and cuMemGetInfo's; NVML's free is cuMemGetInfo's (± 2 MiB) "
       "before and after a 512 MiB allocation, which both show (± 2 MiB)", needs=("driver", "gpuslice"))
def c_nvml_view(k):
    limit = 2 * GiB
    r = k.run("nvml-view", k.limited(memory=limit) + [k.py, probe(k), "nvml-view", str(k.gpu)], timeout=120)
    o = r.last_json() or {}
    if r.rc != 0 or "before" not in o:
        return ("fail", {}, o.get("error") or r.err.strip()[-300:])
    (cf0, ct0), (nt0, nf0, _) = o["before"]["cuda"], o["before"]["nvml"]
    (cf1, ct1), (nt1, nf1, _) = o["after"]["cuda"], o["after"]["nvml"]
    fig = {"via": o["via"], "limit_mib": mib(limit), "nvml_total_mib": mib(nt0), "cuda_total_mib": mib(ct0),
           "nvml_free_mib": [mib(nf0), mib(nf1)], "cuda_free_mib": [mib(cf0), mib(cf1)]}
    near = lambda a, b: abs(a - b) <= 2 * MiB  # noqa: E731
    return verdict(o["allocated"] and nt0 == ct0 == nt1 == ct1 == limit and near(nf0, cf0) and near(nf1, cf1) and
                   near(cf0 - cf1, 512 * MiB) and near(nf0 - nf1, 512 * MiB), fig)


@check("vllm-start", "a vLLM-style start under the limit: gpu_memory_utilization 0.9 of what PyTorch and NVML say",
       "under `gpuslice run --memory 4GiB`: torch.cuda.mem_get_info's total and NVML's are the limit; vLLM's start "
       "check (free ≥ 0.9 × total) passes; the weights (0.3 × total) and the KV cache (the rest of 0.9 × total) "
       "are allocated; the process then holds at most the limit (NVML per process, the host's view) and the limiter "
       "counts at most the limit (simulated node: the same through the driver API, no PyTorch)",
       needs=("driver", "gpuslice", "torch"))
def c_vllm(k):
    limit = 4 * GiB
    argv = [k.py, probe(k), "vllm-start", str(k.gpu)] + (["driver"] if k.simulate else [])
    p = k.start("vllm-start", k.limited(memory=limit, keep=True) + argv)
    hold, procs, dump = None, {}, None
    try:
        line = k.wait_line(p, "HOLD ", timeout=180)
        if line:
            hold = json.loads(line[5:])
            time.sleep(0.5)
            procs = k.processes()
            _, region = limits_of(open(p.kit_err.name).read())
            dump = Container.dump_path(k, region) if region else None
            k.send(p, "go\n")
    finally:
        done = k.finish(p, kill=hold is None, timeout=60)
    if not hold:
        err = done.last_json()
        return ("fail", {}, "the probe did not reach its hold point: %s" % (err or done.err.strip()[-300:]))
    pid = hold["pid"]  # NVML speaks host PIDs: the slot's learnt one where the probe runs in a PID namespace
    slot = next((x for x in (dump or {}).get("slots", []) if x["pid"] == pid or x["host_pid"] == pid), None)
    drv = procs.get((slot["host_pid"] or slot["pid"]) if slot else pid)
    counted = dump["devices"][0]["used"] if dump and dump.get("devices") else None
    fig = {"via": hold["via"], "limit_mib": mib(limit), "total_mib": mib(hold["total"]),
           "nvml_total_mib": mib(hold["nvml_total"]), "free_start_mib": mib(hold["free_start"]),
           "start_check": hold["start_check"], "kv_cache_mib": mib(hold.get("kv_cache")),
           "kv_allocated": hold.get("kv_allocated"), "driver_holds_mib": mib(drv), "limiter_counts_mib": mib(counted)}
    ok = (hold["total"] == limit and hold["nvml_total"] == limit and hold["start_check"] and hold.get("weights") and
          hold.get("kv_allocated") and drv is not None and drv <= limit and counted is not None and counted <= limit
          and done.rc == 0)
    return verdict(ok, fig)


def info_lines(out):
    return [[int(x) for x in line.split()[1:3]] for line in out.splitlines() if line.startswith("info ")]


@check("graph-capture-alloc", "a captured cuMemAllocAsync (a CUDA graph's memory node) under the limit",
       "under `gpuslice run --memory 3GiB`: capturing, instantiating and launching a graph that allocates 1800 MiB "
       "(not freed in the graph) succeeds — charged at capture and again at instantiation it would not fit — and "
       "cuMemGetInfo's free after the launch is its free before the capture less 1800 MiB (+ at most 64 MiB)",
       needs=("driver", "gpuslice"))
def c_graph_capture(k):
    limit, size = 3 * GiB, 1800 * MiB
    r = k.run("graph-capture", k.limited(memory=limit) + k.workload("init", "info", "capture-keep", "1800M", "info",
                                                                    "graph-run", "info"), timeout=120)
    infos = info_lines(r.out)
    if r.rc != 0 or len(infos) != 3:
        return ("fail", {}, "exit %d: %s" % (r.rc, r.err.strip()[-300:]))
    free = [f for f, _ in infos]
    fig = {"limit_mib": mib(limit), "captured_mib": mib(size), "free_mib": [mib(f) for f in free],
           "charged_mib": mib(free[0] - free[2])}
    return verdict(all(t == limit for _, t in infos) and size <= free[0] - free[2] <= size + 64 * MiB, fig)


@check("graph-capture-torch", "a PyTorch CUDA graph with an allocation inside (cudaMallocAsync backend)",
       "under `gpuslice run --memory 4GiB` with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync: a graph whose "
       "capture allocates 0.6 × total (a graph memory node) is captured, instantiated and replayed twice (charged "
       "twice it would not fit); free after the replays is free at start less the allocation (+ at most 256 MiB); "
       "the second replay takes nothing more (± 2 MiB)", modes=("real",), needs=("driver", "gpuslice", "torch"))
def c_graph_torch(k):
    limit = 4 * GiB
    env = dict(k.env, PYTORCH_CUDA_ALLOC_CONF="backend:cudaMallocAsync")
    r = k.run("graph-torch", k.limited(memory=limit) + [k.py, probe(k), "graph-alloc"], env=env, timeout=180)
    o = r.last_json() or {}
    if r.rc != 0 or not o.get("ok"):
        return ("fail", {}, o.get("error") or r.err.strip()[-300:])
    took = o["free_start"] - o["free_after_second_replay"]
    fig = {"backend": o["backend"], "limit_mib": mib(limit), "total_mib": mib(o["total"]),
           "captured_mib": mib(o["captured"]), "charged_mib": mib(took),
           "free_mib": [mib(o[x]) for x in ("free_start", "free_after_capture", "free_after_replay",
                                            "free_after_second_replay")]}
    return verdict(o["total"] == limit and o["captured"] <= took <= o["captured"] + 256 * MiB and
                   abs(o["free_after_second_replay"] - o["free_after_replay"]) <= 2 * MiB, fig)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@check("nccl-one-rank", "NCCL under the limiter: torch.distributed, world size 1",
       "init_process_group('nccl') and an all_reduce finish, with the right sum, within 120 s",
       modes=("real",), needs=("driver", "gpuslice", "torch"))
def c_nccl1(k):
    probe = os.path.join(k.kit, "probes", "client_probe.py")
    r = k.run("nccl-1", k.limited(memory=8 * GiB) + [k.py, probe, "nccl", "0", "1", str(free_port())], timeout=120)
    o = r.last_json() or {}
    return verdict(r.rc == 0 and o.get("ok"), {"seconds": round(r.secs, 1), "sum": o.get("sum")},
                   o.get("error") or ("timed out (a hang)" if r.rc == 124 else ""))


@check("nccl-two-ranks", "NCCL with two processes on the one GPU, in one container",
       "where NCCL allows two ranks on one GPU (checked first without gpuslice), both ranks initialise and "
       "all-reduce within 120 s under the limiter", modes=("real",), needs=("driver", "gpuslice", "torch"))
def c_nccl2(k):
    probe = os.path.join(k.kit, "probes", "client_probe.py")

    def pair(prefix, name):
        port = str(free_port())
        script = '"$0" "$1" nccl 0 2 "$2" & "$0" "$1" nccl 1 2 "$2"; r=$?; wait $! && exit $r'
        return k.run(name, prefix + ["sh", "-c", script, k.py, probe, port], timeout=120)
    control = pair([], "nccl-2-control")
    if control.rc != 0:
        text = control.out + control.err
        if re.search(r"[Dd]uplicate GPU", text):
            return skip("NCCL refuses two ranks on one GPU here (control run without gpuslice: Duplicate GPU)")
        return skip("the control run without gpuslice failed too (exit %d)" % control.rc)
    r = pair(k.limited(memory=16 * GiB), "nccl-2")
    oks = [o.get("ok") for o in r.json_lines()]
    return verdict(r.rc == 0 and oks.count(True) == 2, {"seconds": round(r.secs, 1), "control_seconds":
                                                         round(control.secs, 1)},
                   "timed out (a hang)" if r.rc == 124 else "")


# ---- the compute share ----

def rate_argv(k, core, seconds, kind):
    """A run of steps at `core` %: PyTorch matmuls (real GPU) or the simulator's full-GPU spin kernels. kind:
    "rate" (one kernel per step) or "graph" (one CUDA graph of many per step)."""
    if k.simulate:
        step, us = ("spin", 1000) if kind == "rate" else ("spin-graph", 100000)
        return k.limited(core=core) + k.workload("init", step, seconds, sim_sms(k), us)
    return k.limited(core=core) + [k.py, os.path.join(k.kit, "probes", "client_probe.py"), kind, str(seconds)]


def rate_of(k, r, seconds):
    """Steps per second in the second half of the run (None, and why, when it gave none)."""
    if k.simulate:
        v = parse_kv(r.out, "launched")
        got = v[1] / (seconds / 2) if v and len(v) >= 2 else None
        return got, (r.err.strip()[-200:] if got is None else "")
    o = r.last_json() or {}
    return o.get("rate"), o.get("error") or (r.err.strip()[-200:] if r.rc else "")


def sim_sms(k):
    m = re.search(r"sms=(\d+)", open(k.node).read())
    return int(m.group(1)) if m else 30


def share_rule(k):
    return 0.05 if not k.simulate else 0.15  # the simulator's SMs are CPU time on a shared build machine


def share_ratio(k, kind, seconds):
    """The rate at 30 % over the rate at 100 %, judged against 0.30."""
    runs = {}
    for core in (100, 30):
        r = k.run("%s-%d" % (kind, core), rate_argv(k, core, seconds, kind), timeout=seconds + 120)
        runs[core], why = rate_of(k, r, seconds)
        if runs[core] is None:
            return ("fail", {}, why or "no rate")
    if not runs[100]:
        return ("fail", {}, "nothing ran at 100 %")
    ratio = runs[30] / runs[100]
    return verdict(abs(ratio - 0.30) <= share_rule(k), {"rate_100": round(runs[100], 3),
                                                        "rate_30": round(runs[30], 3), "ratio": round(ratio, 3)})


@check("compute-share", "the compute share: a matmul loop at --core 30 against --core 100",
       "the rate at 30 % is 0.30 ± 0.05 of the rate at 100 % (simulated node: ± 0.15, its GPU is CPU time)",
       needs=("driver", "gpuslice", "torch"))
def c_compute(k):
    return share_ratio(k, "rate", 4 if k.simulate else 12)


@check("compute-share-pair", "two containers at 30 % and 70 % on the one GPU at once",
       "the 30 % container gets 0.30 ± 0.05 of the two containers' steps (simulated node: ± 0.15)",
       needs=("driver", "gpuslice", "torch"))
def c_compute_pair(k):
    seconds = 4 if k.simulate else 12
    a, b = k.start("pair-30", rate_argv(k, 30, seconds, "rate")), k.start("pair-70", rate_argv(k, 70, seconds, "rate"))
    (x, why_a), (y, why_b) = (rate_of(k, k.finish(p, timeout=seconds + 120), seconds) for p in (a, b))
    if not x or not y:
        return ("fail", {}, "a run gave no rate: %s" % (why_a or why_b))
    share = x / (x + y)
    return verdict(abs(share - 0.30) <= share_rule(k), {"steps_30": round(x, 2), "steps_70": round(y, 2),
                                                         "share_30": round(share, 3)})


@check("compute-share-long-graphs", "a whole-step CUDA graph (one launch, long GPU time) at --core 30",
       "the graph replays at 30 % run at 0.30 ± 0.05 of their rate at 100 % (simulated node: 100 ms kernels; "
       "± 0.15)", needs=("driver", "gpuslice", "torch"))
def c_long_graphs(k):
    return share_ratio(k, "graph", 6 if k.simulate else 16)


@check("compute-share-small-kernels", "many small kernels at --core 50 (the throttle's sleep slack)",
       "1-block 10 µs kernels at 50 % run at 0.50 ± 0.05 of their rate at 100 % (not starved below the share)",
       modes=("real",), needs=("driver", "gpuslice"))
def c_small_kernels(k):
    def run(core):
        r = k.run("small-%d" % core, k.limited(core=core) + k.workload("init", "spin", 8, 1, 10), timeout=90)
        v = parse_kv(r.out, "launched")
        return v[1] / 4.0 if v and len(v) >= 2 else None
    full, half = run(100), run(50)
    if not full or half is None:
        return ("fail", {}, "no rate")
    ratio = half / full
    return verdict(abs(ratio - 0.5) <= 0.05, {"launches_per_s_100": round(full), "launches_per_s_50": round(half),
                                              "ratio": round(ratio, 3)})


@check("interposer-overhead", "the interposer's cost on a launch-bound loop (no limit set)",
       "200000 empty-kernel launches take at most 1 % longer under the interposer (--core 100) than without "
       "(median of three each; the goal of docs/BENCHMARKS.md)", modes=("real",), needs=("driver", "gpuslice"))
def c_overhead(k):
    plain, limited = [], []
    for _ in range(3):
        for prefix, into in (([], plain), (k.limited(), limited)):
            r = k.run("launchtime", prefix + k.workload("init", "launchtime", 200000), timeout=120)
            v = parse_kv(r.out, "launchtime")
            if r.rc != 0 or not v:
                return ("fail", {}, "launchtime failed: %s" % r.err.strip()[-200:])
            into.append(v[1])
    a, b = sorted(plain)[1], sorted(limited)[1]
    over = (b - a) / a
    return verdict(over <= 0.01, {"ns_per_launch_plain": a, "ns_per_launch_interposer": b,
                                  "overhead_pct": round(100 * over, 2)})


@check("startup-256", "start-up of 256 processes under the interposer on one GPU",
       "256 processes that each initialise CUDA (cuInit, cuDeviceGetCount) start together at most 2 s slower "
       "in one container than without gpuslice", needs=("driver", "gpuslice"))
def c_startup(k):
    script = 'for i in $(seq 256); do "$0" devices >/dev/null & done; wait'
    base = k.run("startup-plain", ["sh", "-c", script, k.bins["cuda-workload"]], timeout=240)
    lim = k.run("startup-limited", k.limited(memory=GiB) + ["sh", "-c", script, k.bins["cuda-workload"]],
                timeout=240)
    fig = {"seconds_plain": round(base.secs, 2), "seconds_interposer": round(lim.secs, 2),
           "added_seconds": round(lim.secs - base.secs, 2)}
    if base.rc != 0 or lim.rc != 0:
        return ("fail", fig, "exit %d / %d" % (base.rc, lim.rc))
    if k.simulate:  # the simulator's times say nothing about a GPU's: that all 256 started is the check
        return ("pass", fig, "simulated node: timing not judged")
    return verdict(lim.secs - base.secs <= 2.0, fig)


@check("kill-safety", "SIGKILL of limited processes mid-allocation and mid-launch-throttle, 20 times",
       "another process of the container never waits more than 1 s for an allocation, launch and "
       "synchronisation, and after the kills the container counts only its live processes' memory",
       needs=("driver",))
def c_kill_safety(k):
    c = Container(k, memory=4 * GiB, core=30, name="kill-safety")
    watcher = k.start("kill-watcher", k.workload("init", "watch", 16 if k.simulate else 20, "64M"), env=c.env())
    rnd = random.Random(20)
    kills = []
    for i in range(20):
        victim = k.workload("init", "cycles", 100000000, "64M") if i % 2 == 0 else \
            k.workload("init", "spin", 60, sim_sms(k) if k.simulate else 132, 1000)
        v = k.start("kill-victim-%d" % i, victim, env=c.env())
        time.sleep(0.15 + rnd.random() * 0.45)
        k.finish(v, kill=True, timeout=30)
        kills.append(v.returncode)
    done = k.finish(watcher, timeout=120)
    w = parse_kv(done.out, "watch")
    q = k.start("kill-query", k.workload("init", "info", "ready", "hold"), env=c.env())
    try:
        ready = k.wait_line(q, "ready", timeout=60)
        dump = c.dump() if ready else None
    finally:
        k.finish(q, kill=True)
    if not w or not dump:
        return ("fail", {}, "the watcher (exit %s) or the query gave nothing" % done.rc)
    live = dump["slots"]
    counted = dump["devices"][0]["used"]
    own = sum(s["used"][0] for s in live if s["pid"] == q.pid)
    fig = {"kills": len(kills), "watcher_rounds": w[0], "worst_wait_ms": round(w[1] / 1000, 1),
           "live_slots_after": len(live), "counted_after_mib": mib(counted), "query_process_mib": mib(own),
           "dead_slots_reclaimed": dump["reclaims"]}
    return verdict(w[1] < 1000000 and counted == own and len(live) == 1, fig)


@check("attribution", "gpuslice ps and /metrics attribute the kit's process with NVML's numbers",
       "`gpuslice ps` and the `/metrics` of `gpuslice monitor` list the probe's PID with the GPU memory NVML "
       "(nvidia-smi) reports for it (± 1 MiB)", needs=("driver", "gpuslice"))
def c_attribution(k):
    port = free_port()
    mon = k.start("monitor", [k.bins["gpuslice"], "monitor", "--metrics-address", "127.0.0.1:%d" % port,
                              "--sample-interval", "1s"])
    p = k.start("attributed", k.limited(memory=2 * GiB) + k.workload("init", "alloc", "512M", "ready", "hold"))
    try:
        if not k.wait_line(p, "ready", timeout=60):
            return ("fail", {}, "the probe did not get ready")
        time.sleep(2.5)  # a few of the monitor's samples (every second)
        drv = k.processes()
        ps = k.gs("ps", "--json")
        metrics = ""
        for _ in range(20):
            try:
                metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.5)
    finally:
        k.finish(p, kill=True)
        k.finish(mon, kill=True)
    k.log("metrics", metrics)
    kids = [pid for pid in drv if ppid(pid) == p.pid] or [pid for pid in drv if pid != p.pid]
    if not kids:
        return ("fail", {"nvml": drv}, "NVML lists no process of the probe")
    pid = kids[0]
    mine = [x for x in (json.loads(ps.out).get("processes", []) if ps.rc == 0 else []) if x.get("pid") == pid]
    m = re.search(r'^gpuslice_process_gpu_memory_used_bytes\{[^}]*pid="%d"[^}]*\} (\S+)' % pid, metrics, re.M)
    fig = {"pid": pid, "nvml_mib": mib(drv[pid]), "ps_mib": mib(mine[0]["memory_bytes"]) if mine else None,
           "metrics_mib": mib(float(m.group(1))) if m else None}
    ok = mine and m and abs(mine[0]["memory_bytes"] - drv[pid]) <= MiB and abs(float(m.group(1)) - drv[pid]) <= MiB
    return verdict(bool(ok), fig)


def ppid(pid):
    try:
        return int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


@check("cdi", "gpuslice cdi generate finds the real driver's libraries and control nodes",
       "the spec mounts the libcuda.so.1 and libnvidia-ml.so.1 that `ldconfig -p` resolves, and every NVIDIA "
       "control node present (/dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools)",
       modes=("real",), needs=("driver", "gpuslice"))
def c_cdi(k):
    r = k.gs("cdi", "generate", "-o", "-", "--format", "json")
    ld = k.run("ldconfig", ["ldconfig", "-p"]) if shutil.which("ldconfig") else Proc(127, "", "", 0)
    if r.rc != 0:
        return ("fail", {}, "cdi generate exit %d: %s" % (r.rc, r.err.strip()[-300:]))
    spec = json.loads(r.out)
    paths = set()

    def walk(o):
        if isinstance(o, dict):
            for key, val in o.items():
                if key in ("hostPath", "path") and isinstance(val, str):
                    paths.add(os.path.realpath(val))
                walk(val)
        elif isinstance(o, list):
            for x in o:
                walk(x)
    walk(spec)
    want, missing = [], []
    for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
        m = re.search(r"^\s*%s \(libc6,x86-64[^)]*\) => (\S+)" % re.escape(lib), ld.out, re.M)
        if m:
            want.append(os.path.realpath(m.group(1)))
    nodes = [n for n in ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools") if os.path.exists(n)]
    missing = [w for w in want + nodes if os.path.realpath(w) not in paths and w not in paths]
    fig = {"ldconfig": want, "control_nodes": nodes, "spec_paths": len(paths), "missing": missing}
    if not want:
        return ("fail", fig, "ldconfig -p lists no NVIDIA driver library")
    return verdict(not missing, fig)


@check("cuda-check", "gpuslice check decides a real image's CUDA requirement against the real driver",
       "gpuslice check's verdict for the CUDA version PyTorch was built for (else 13.0) says it runs exactly "
       "when it does: PyTorch sees the GPU (simulated node: the verdict follows the node's CUDA version)",
       needs=("driver", "gpuslice"))
def c_cuda_check(k):
    r = k.gs("check", "--json")
    if r.rc != 0:
        return ("fail", {}, "exit %d" % r.rc)
    t = json.loads(r.out)
    want = (k.clients.get("torch_cuda") if not k.simulate else None) or "13.0"
    row = next((x for x in t.get("toolkits", []) if x.get("cuda") == want), None)
    if not row:
        return ("fail", {"cuda": want}, "no row for CUDA %s" % want)
    runs_by_gpuslice = row.get("mode") in ("native", "minor-version")
    if k.simulate or "torch" not in k.clients:
        drv = tuple(int(x) for x in str(t.get("cuda", "0.0")).split(".")[:2])
        truth = drv >= tuple(int(x) for x in want.split("."))
        source = "the node's CUDA version %s" % t.get("cuda")
    else:
        truth = bool(k.clients.get("torch_gpu"))
        source = "torch.cuda.is_available()"
    fig = {"cuda": want, "mode": row.get("mode"), "min_driver": row.get("min_driver"), "driver": t.get("driver"),
           "truth": truth, "truth_from": source}
    return verdict(runs_by_gpuslice == truth, fig)


@check("host-pid", "the PID NVML shows for a container process is learnt",
       "the region's host_pid of a process with a memory limit is a PID NVML lists on the GPU",
       needs=("driver",))
def c_host_pid(k):
    c = Container(k, memory=GiB, name="host-pid")
    p = k.start("host-pid", k.workload("init", "alloc", "64M", "ready", "hold"), env=c.env())
    try:
        if not k.wait_line(p, "ready", timeout=60):
            return ("fail", {}, "the probe did not get ready")
        dump, procs = c.dump(), k.processes()
    finally:
        k.finish(p, kill=True)
    slot = dump["slots"][0] if dump and dump["slots"] else None
    fig = {"pid": p.pid, "host_pid": slot and slot["host_pid"], "nvml_pids": sorted(procs)}
    return verdict(bool(slot and slot["host_pid"] and slot["host_pid"] in procs), fig)


@check("process-utilization", "NVML's per-process utilization, which the compute share reads",
       "information: whether nvmlDeviceGetProcessUtilization is supported here (else the device's "
       "utilization stands in, docs/interposer.md)", modes=("real",), needs=("driver",))
def c_process_util(k):
    text = getattr(k, "recorded", None)
    if text is None:
        return skip("sim-record did not run")
    return ("info", {"per_process_samples": "unsupported process-utilization" not in text}, "")


@check("procaddr-variants", "cuGetProcAddress hands out the interposer's wrapper of the right prototype",
       "every hooked name at every version boundary (data/cuda-13.0-variants.txt, from cuda.h/cudaTypedefs.h) "
       "comes back as the interposer's wrapper of that variant; on a real driver every one resolves",
       needs=("driver",))
def c_procaddr(k):
    c = Container(k, memory=GiB, name="procaddr")
    env = c.env({"GPUSLICE_SIM_PROC": "internal"} if k.simulate else None)
    r = k.run("procaddr-replay", [k.bins["procaddr-replay"], "--lib", "libgpuslice-cuda.so",
                                  os.path.join(k.kit, "data", "cuda-13.0-variants.txt")], env=env)
    ok, none, bad = r.out.count(" ok\n"), r.out.count(" none "), r.out.count(" MISMATCH ")
    mism = [line for line in r.out.splitlines() if "MISMATCH" in line][:5]
    fig = {"ok": ok, "not_resolved": none, "mismatched": bad, "first_mismatches": mism}
    return verdict(r.rc == 0 and bad == 0 and ok > 0 and (k.simulate or none == 0), fig)


@check("module-load-neighbour", "module loads are billed what the driver took for the loader only",
       "ten 256 MiB-global module loads while another process allocates and frees 1 GiB over and over: the "
       "limiter counts what NVML says the loader holds (within 64 MiB)", needs=("driver",))
def c_neighbour(k):
    c = Container(k, memory=8 * GiB, name="loader")
    loads = []
    for _ in range(10):
        loads += ["module-global", "256M"]
    p = k.start("loader", k.workload("init", "ready", *loads, "info", "ready", "hold"), env=c.env())
    n = None
    try:
        if not k.wait_line(p, "ready", timeout=60):
            return ("fail", {}, "the loader did not get ready")
        n = k.start("neighbour", k.workload("init", "cycles", 100000000, "1G"))
        ok = k.wait_line(p, "ready", timeout=240)
        if n:
            k.finish(n, kill=True)
        n = None
        dump, procs = (c.dump(), k.processes()) if ok else (None, {})
    finally:
        if n:
            k.finish(n, kill=True)
        k.finish(p, kill=True)
    slot = dump["slots"][0] if dump and dump["slots"] else None
    drv = procs.get(slot["host_pid"] or slot["pid"]) if slot else None
    if slot is None or drv is None:
        return ("fail", {}, "no slot or NVML entry for the loader")
    fig = {"limiter_counts_mib": mib(slot["used"][0]), "driver_holds_mib": mib(drv)}
    return verdict(abs(slot["used"][0] - drv) <= 64 * MiB, fig)


@check("ipc-import", "memory imported from another process of the container is not charged twice",
       "a process that opens another's 1 GiB IPC allocation is charged no more than the exporter's charge "
       "without that 1 GiB (its context; + 64 MiB): the container counts the buffer once", needs=("driver",))
def c_ipc(k):
    c = Container(k, memory=4 * GiB, name="ipc")
    e = k.start("ipc-exporter", k.workload("init", "alloc", "1G", "ipc-export", "ready", "hold"), env=c.env())
    i = None
    try:
        line = k.wait_line(e, "share ", timeout=60)
        if not line or not k.wait_line(e, "ready", timeout=30):
            return ("fail", {}, "the exporter did not export")
        i = k.start("ipc-importer", k.workload("init", "ipc-open", line.split()[1], "ready", "hold"), env=c.env())
        ok = k.wait_line(i, "ready", timeout=60)
        dump, procs = (c.dump(), k.processes()) if ok else (None, {})
    finally:
        if i:
            k.finish(i, kill=True)
        k.finish(e, kill=True)
    if not dump or len(dump["slots"]) != 2:
        return ("fail", {}, "the importer could not open the handle (slots %s)" % (dump and len(dump["slots"])))
    used = {s["pid"]: s["used"][0] for s in dump["slots"]}
    imp, exp = used.get(i.pid), used.get(e.pid)
    if imp is None or exp is None:
        return ("fail", {"slots": used}, "a slot is missing")
    # the exporter holds 1 GiB and its context; the importer its context only (contexts cost alike)
    fig = {"exporter_mib": mib(exp), "importer_mib": mib(imp), "exporter_context_mib": mib(exp - GiB)}
    return verdict(imp <= exp - GiB + 64 * MiB, fig)


@check("driver-by-loader-cache", "the interposer finds the real driver where the loader would",
       "with neither LD_LIBRARY_PATH nor GPUSLICE_REAL_LIBCUDA set, a limited process runs (the driver is "
       "found through the loader's cache or the driver directories); simulated node: through a loader cache "
       "built by ldconfig, mounted in a private namespace", needs=("driver",))
def c_loader_cache(k):
    c = Container(k, memory=GiB, name="ldcache")
    env = c.env()
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("GPUSLICE_REAL_LIBCUDA", None)
    argv = k.workload("init", "alloc", "64M")
    fig = {}
    if k.simulate:
        if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ldconfig"):
            return skip("needs root, unshare(1) and ldconfig(8) for a private loader cache")
        conf, cache = os.path.join(k.work, "ld.so.conf"), os.path.join(k.work, "ld.so.cache")
        open(conf, "w").write(os.path.join(k.kit, "sim") + "\n")
        r = k.run("ldconfig-C", ["ldconfig", "-X", "-C", cache, "-f", conf])
        if r.rc != 0:
            return skip("ldconfig -C failed: %s" % r.err.strip()[-200:])
        argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount --bind "$1" /etc/ld.so.cache && shift && exec "$@"', "sh", cache] + argv
    else:
        ld = k.run("ldconfig", ["ldconfig", "-p"]) if shutil.which("ldconfig") else Proc(1, "", "", 0)
        m = re.search(r"libcuda\.so\.1 \(libc6,x86-64[^)]*\) => (\S+)", ld.out)
        fig["ldconfig_libcuda"] = m.group(1) if m else None
    r = k.run("ldcache-run", argv, env=env, timeout=60)
    if k.simulate and r.rc != 0 and "mount" in r.err and "denied" in r.err.lower():
        return skip("no private mount namespace here: %s" % r.err.strip()[-200:])
    return verdict(r.rc == 0, fig, r.err.strip()[-300:] if r.rc else "")


@check("fork-slots", "forked children that never use CUDA take no process slot",
       "a process with 300 forked workers that never use CUDA leaves the container's 256 slots free: another "
       "process of the container allocates, and only the two CUDA processes hold slots", needs=("driver",))
def c_fork_slots(k):
    c = Container(k, memory=GiB, name="fork")
    a = k.start("forker", k.workload("init", "alloc", "16M", "fork-idle", "300", "ready", "hold"), env=c.env())
    try:
        if not k.wait_line(a, "ready", timeout=120):
            return ("fail", {}, "the forking process did not get ready")
        b = k.start("fork-second", k.workload("init", "alloc", "16M", "ready", "hold"), env=c.env())
        ok = k.wait_line(b, "ready", timeout=60)
        dump = c.dump() if ok else None
        rb = k.finish(b, kill=True)
    finally:
        k.finish(a, kill=True)
    slots = len(dump["slots"]) if dump else None
    return verdict(bool(ok) and slots == 2, {"live_slots": slots}, "" if ok else rb.err.strip()[-300:])


@check("free-after-many-cycles", "allocation bookkeeping stays fast after many alloc/free cycles",
       "cuMemAllocAsync + cuMemFreeAsync cost at most 1.5× (+ 2 µs) after 300000 cuMemAlloc/cuMemFree cycles "
       "of what they cost before (a missing key must not scan the allocation table's tombstones)",
       needs=("driver",))
def c_tombstones(k):
    c = Container(k, memory=2 * GiB, name="cycles")
    r = k.run("cycles", k.workload("init", "asyncloop", 20000, "1M", "cycles", 300000, 512, "asyncloop", 20000,
                                   "1M"), env=c.env(), timeout=240)
    loops = [[int(x) for x in line.split()[1:]] for line in r.out.splitlines() if line.startswith("asyncloop ")]
    cyc = parse_kv(r.out, "cycles")
    if r.rc != 0 or len(loops) != 2:
        return ("fail", {}, "exit %d: %s" % (r.rc, r.err.strip()[-300:]))
    before, after = loops[0][1], loops[1][1]
    fig = {"ns_per_async_pair_before": before, "ns_per_async_pair_after": after,
           "ns_per_alloc_free_cycle": cyc[1] if cyc else None}
    return verdict(after <= 1.5 * before + 2000, fig)


# ---- MPS and time-slicing (docs/sharing.md): what the agent's sharing.mps relies on the driver for ----

MPS_SPIN = ("init", "spin", 3, 8000, 25)  # 3 s of kernels of 8000 blocks × 25 µs: several waves on any GPU


class MPSDaemon:
    """nvidia-cuda-mps-control -d with the kit's own pipe and log directories (another daemon of the machine, on
    /tmp/nvidia-mps, is left alone), told what the agent tells it; quit at the end."""
    def __init__(self, k):
        self.k = k
        self.ctl = os.path.join(k.kit, "sim", "nvidia-cuda-mps-control") if k.simulate else \
            shutil.which("nvidia-cuda-mps-control")
        d = os.path.join(k.work, "mps")
        self.env = dict(k.env, CUDA_MPS_PIPE_DIRECTORY=os.path.join(d, "pipe"),
                        CUDA_MPS_LOG_DIRECTORY=os.path.join(d, "log"))
        self.up = False

    def start(self, pct, pinned=None):
        for sub in ("pipe", "log"):
            os.makedirs(self.env["CUDA_MPS_%s_DIRECTORY" % sub.upper()], exist_ok=True)
        log = os.path.join(self.k.work, "mps-start.log")
        with open(log, "w") as f:  # not a pipe: the daemon keeps what it inherits open
            try:
                rc = subprocess.run([self.ctl, "-d"], env=self.env, stdin=subprocess.DEVNULL, stdout=f, stderr=f,
                                    timeout=30).returncode
            except subprocess.TimeoutExpired:
                rc = 124
        with open(log, errors="replace") as f:
            text = f.read()
        self.k.log("mps-start", "$ %s -d\n[exit %d]\n%s" % (self.ctl, rc, text))
        r = Proc(rc, text, text, 0)
        self.up = r.rc == 0
        if not self.up:
            return r
        text = "set_default_active_thread_percentage %d\n" % pct
        if pinned:
            text += "set_default_device_pinned_mem_limit %d %dM\n" % (self.k.gpu, pinned // MiB)
        return self.command(text)

    def command(self, text):
        return self.k.run("mps-control", [self.ctl], env=self.env, stdin=text, timeout=30)

    def client_env(self, **extra):
        """A client on the kit's GPU: CUDA's ordinal in PCI order, so that it is NVML's index."""
        e = dict(self.env, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=str(self.k.gpu))
        e.update(extra)
        return e

    def stop(self):
        if self.up:
            self.command("quit\n")
            self.up = False


def mps_check(k, fn):
    m = MPSDaemon(k)
    if not m.ctl:
        return skip("nvidia-cuda-mps-control is not on PATH")
    rows = k.smi_query("compute_mode") if k.smi and not k.simulate else None
    mode = rows[k.gpu][0] if rows and len(rows) > k.gpu else "Default"
    if mode not in ("Default", "Exclusive_Process"):
        return skip("compute mode %s: MPS cannot serve this GPU (the kit never changes it)" % mode)
    try:
        return fn(k, m)
    finally:
        m.stop()


def spin_rates(k, envs, name):
    """Launches per second of MPS_SPIN in each env, all at once (one process each)."""
    ps = [k.start("%s-%d" % (name, i), k.workload(*MPS_SPIN), env=e) for i, e in enumerate(envs)]
    done = [k.finish(p, timeout=60) for p in ps]
    rates = []
    for d in done:
        v = parse_kv(d.out, "launched")
        rates.append(v[0] / float(MPS_SPIN[2]) if d.rc == 0 and v else None)
    return rates


@check("mps-daemon", "the MPS control daemon starts with its pipe and log directories and takes the agent's commands",
       "nvidia-cuda-mps-control -d starts, set_default_active_thread_percentage and "
       "set_default_device_pinned_mem_limit <NVML index> <M> are accepted (exit 0), control.log is written, and "
       "quit stops it", needs=("driver",))
def c_mps_daemon(k):
    def run(k, m):
        r = m.start(50, 2 * GiB)
        if r.rc != 0:
            return ("fail", {}, "exit %d: %s" % (r.rc, (r.err or r.out).strip()[-300:]))
        log = os.path.join(m.env["CUDA_MPS_LOG_DIRECTORY"], "control.log")
        m.stop()
        time.sleep(0.5)
        gone = m.command("get_server_list\n").rc != 0
        return verdict(os.path.exists(log) and gone, {"control_log": os.path.exists(log), "quit_stops_it": gone})
    return mps_check(k, run)


@check("mps-pinned-limit", "an MPS client is held to the daemon's pinned device memory limit (2 GiB)",
       "a client allocates 1 GiB, and 1.5 GiB more is refused with CUDA_ERROR_OUT_OF_MEMORY; cuMemGetInfo's total "
       "is reported (the simulator: the limit)", needs=("driver",))
def c_mps_pinned(k):
    def run(k, m):
        r = m.start(100, 2 * GiB)
        if r.rc != 0:
            return ("fail", {}, "the daemon: exit %d: %s" % (r.rc, (r.err or r.out).strip()[-300:]))
        p = k.run("mps-client-limit", k.workload("init", "info", "alloc", "1G", "alloc!", "1536M"),
                  env=m.client_env(), timeout=120)
        info = parse_kv(p.out, "info")
        fig = {"pinned_limit_mib": mib(2 * GiB), "client_total_mib": mib(info[1]) if info else None,
               "client_free_mib": mib(info[0]) if info else None}
        return verdict(p.rc == 0, fig, "" if p.rc == 0 else "exit %d: %s" % (p.rc, p.err.strip()[-300:]))
    return mps_check(k, run)


@check("mps-thread-share", "two MPS clients at 50 % active threads each run at about half rate",
       "kernels of 8000 blocks × 25 µs: one client at 50 % runs at 0.50 ± 0.10 of a process that is no client, "
       "and two at 50 % side by side each at 0.50 ± 0.10", needs=("driver",))
def c_mps_threads(k):
    def run(k, m):
        solo = spin_rates(k, [dict(k.env, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=str(k.gpu))],
                          "spin-plain")[0]
        r = m.start(50)
        if r.rc != 0 or not solo:
            return ("fail", {}, "no rate without MPS (%s) or the daemon: exit %d" % (solo, r.rc))
        one = spin_rates(k, [m.client_env()], "spin-mps-one")[0]
        two = spin_rates(k, [m.client_env(), m.client_env()], "spin-mps-two")
        if one is None or None in two:
            return ("fail", {"solo": solo, "one": one, "two": two}, "a client failed")
        ratios = [one / solo] + [t / solo for t in two]
        fig = {"launches_per_s_no_client": round(solo, 1), "one_client_50": round(one, 1),
               "two_clients_50": [round(t, 1) for t in two], "ratios": [round(x, 3) for x in ratios]}
        return verdict(all(abs(x - 0.5) <= 0.10 for x in ratios), fig)
    return mps_check(k, run)


@check("timeslice-replicas", "two processes on one GPU without MPS (what time-sliced replicas are) both run",
       "kernels of 8000 blocks × 25 µs in two processes at once: both finish, each at ≥ 0.25 of the rate of one "
       "alone (neither starved), together at ≥ 0.8 of it", needs=("driver",))
def c_timeslice(k):
    env = dict(k.env, CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=str(k.gpu))
    solo = spin_rates(k, [env], "spin-ts-solo")[0]
    two = spin_rates(k, [env, env], "spin-ts-two")
    if not solo or None in two:
        return ("fail", {"solo": solo, "two": two}, "a process failed")
    ratios = [t / solo for t in two]
    fig = {"launches_per_s_alone": round(solo, 1), "two_at_once": [round(t, 1) for t in two],
           "ratios": [round(x, 3) for x in ratios], "sum": round(sum(ratios), 3)}
    return verdict(all(x >= 0.25 for x in ratios) and sum(ratios) >= 0.8, fig)


@check("no-xid", "no Xid error during the run",
       "the kernel log shows no new NVIDIA Xid line since the kit started", modes=("real",), needs=("driver",))
def c_xid(k):
    now = xid_count(k)
    if k.start_xids is None or now is None:
        return skip("the kernel log cannot be read here (dmesg)")
    return verdict(now == k.start_xids, {"xid_lines_before": k.start_xids, "xid_lines_after": now})


@check("settings-unchanged", "the GPU's settings are what they were (MIG mode read, never changed)",
       "MIG mode, compute mode, persistence mode and power limit equal their values before the run, and "
       "gpuslice read the same MIG mode", modes=("real",), needs=("driver", "smi"))
def c_settings(k):
    now = settings(k)
    if k.start_settings is None or now is None:
        return ("fail", {}, "nvidia-smi could not be asked")
    return verdict(now == k.start_settings, {"before": k.start_settings, "after": now})


def settings(k):
    if not k.smi:
        return None
    return k.smi_query("index,mig.mode.current,compute_mode,persistence_mode,power.limit")


def xid_count(k):
    r = k.run("dmesg", ["dmesg"]) if shutil.which("dmesg") else None
    if not r or r.rc != 0 or not r.out.strip():
        return None
    return len(re.findall(r"NVRM: Xid", r.out))


# ================================================================== the run

CLIENT_NAMES = {"torch": "PyTorch", "jax": "JAX", "cupy": "CuPy"}


def prepare(k):
    """What every check relies on: the machine, the GPU's UUID, the Python clients, the settings at start."""
    m = k.machine
    m["mode"] = "simulated node %s" % os.path.basename(k.node) if k.simulate else "real"
    m["kernel"] = platform.release()
    m["gvisor"] = platform.release() == "4.4.0"  # gVisor reports Linux 4.4.0
    try:
        m["os"] = re.search(r'^PRETTY_NAME="?([^"\n]*)', open("/etc/os-release").read(), re.M).group(1)
    except (OSError, AttributeError):
        m["os"] = None
    try:
        m["glibc"] = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    except (ValueError, OSError, AttributeError):
        m["glibc"] = None
    m["cpus"] = os.cpu_count()
    m["python"] = sys.version.split()[0]
    m["root"] = os.geteuid() == 0
    try:
        m["kit"] = json.load(open(os.path.join(k.kit, "kit.json")))
    except (OSError, ValueError):
        m["kit"] = None
    m["driver"] = k.driver_reason or "present"
    if not k.driver_ok:
        return
    if k.smi:
        r = k.run("nvidia-smi-L", [k.smi, "-L"])
        m["nvidia_smi_L"] = r.out.strip().splitlines()
        head = re.search(r"Driver Version:\s*(\S+).*?CUDA Version:\s*(\S+)", k.run("nvidia-smi", [k.smi]).out)
        if head:
            m["driver"], m["cuda"] = head.group(1), head.group(2)
    r = k.gs("topo", "--json")
    if r.rc == 0:
        t = json.loads(r.out)
        if k.gpu < len(t["gpus"]):
            g = t["gpus"][k.gpu]
            k.uuid, k.gpu_memory = g["uuid"], g["memory_total_bytes"]
            m["gpu"] = "%s (%s, %d MiB)" % (g["name"], g["uuid"], g["memory_total_bytes"] // MiB)
        m.setdefault("driver_nvml", t.get("driver_version"))
    if not k.simulate:
        code = ("import json, importlib.util as u\n"
                "o = {}\n"
                "for n in ('torch', 'jax', 'cupy', 'numpy'):\n"
                "    if u.find_spec(n) is None: continue\n"
                "    try:\n"
                "        import importlib.metadata as md\n"
                "        o[n] = md.version({'cupy': 'cupy-cuda13x'}.get(n, n)) if n != 'cupy' else None\n"
                "    except Exception: o[n] = '?'\n"
                "if 'cupy' in o:\n"
                "    import cupy; o['cupy'] = cupy.__version__\n"
                "if 'torch' in o:\n"
                "    import torch; o['torch'] = torch.__version__; o['torch_cuda'] = torch.version.cuda\n"
                "    o['torch_gpu'] = torch.cuda.is_available()\n"
                "print(json.dumps(o))\n")
        r = k.run("python-clients", [k.py, "-c", code], timeout=180)
        try:
            k.clients = json.loads(r.out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            k.clients = {}
        m["python_clients"] = k.clients
        k.start_settings = settings(k)
        k.start_xids = xid_count(k)


def why_skip(k, modes, needs):
    if k.mode not in modes:
        return "simulated node: needs the NVIDIA runtime and a real GPU"
    if "driver" in needs and not k.driver_ok:
        return k.driver_reason
    if "gpuslice" in needs and not k.gpuslice_ok:
        return k.gpuslice_reason
    if not k.simulate:
        if "smi" in needs and not k.smi:
            return "nvidia-smi not found"
        for n in ("torch", "jax", "cupy"):
            if n in needs and n not in k.clients:
                return "%s is not installed for %s (import %s fails)" % (CLIENT_NAMES[n], k.py, n)
        if "torch" in needs and not k.clients.get("torch_gpu"):
            return "PyTorch does not see a GPU (torch.cuda.is_available() is False)"
    return None


def write_report(k, finished=False):
    summary = {s: sum(1 for r in k.results if r["status"] == s) for s in ("pass", "fail", "skip", "info")}
    doc = {"kit": "gpuslice hardware kit", "docs": "docs/hardware.md", "mode": k.mode, "started": k.started,
           "finished": finished, "seconds": round(k.elapsed(), 1), "machine": k.machine, "summary": summary,
           "checks": k.results}
    tmp = os.path.join(k.out, ".report.json.tmp")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False, default=str)
    os.replace(tmp, os.path.join(k.out, "report.json"))
    lines = ["# gpuslice hardware kit — %s" % ("simulated node" if k.simulate else "real GPU"), "",
             "%s, %.0f s%s: **%d passed, %d failed, %d skipped** (%d information)." % (
                 k.started, k.elapsed(), "" if finished else " (still running, or cut short)", summary["pass"],
                 summary["fail"], summary["skip"], summary["info"]), "",
             "| machine | |", "|---|---|"]
    for key, val in k.machine.items():
        if key not in ("kit", "python_clients", "nvidia_smi_L"):
            lines.append("| %s | %s |" % (key, val))
    if k.machine.get("python_clients") is not None:
        lines.append("| python clients | %s |" % json.dumps(k.machine["python_clients"]))
    if k.machine.get("kit"):
        lines.append("| kit | commit %s%s, built %s |" % (k.machine["kit"].get("commit"),
                                                           " (dirty)" if k.machine["kit"].get("dirty") else "",
                                                           k.machine["kit"].get("built")))
    lines += ["", "| result | check | figures | pass rule |", "|---|---|---|---|"]
    for r in k.results:
        figs = json.dumps(r["figures"], default=str)
        if len(figs) > 400:
            figs = figs[:400] + "…"
        detail = (" — " + r["detail"].replace("|", "/")) if r["detail"] else ""
        lines.append("| %s | `%s` %s | %s%s | %s |" % (r["status"].upper(), r["id"], r["title"],
                                                      figs.replace("|", "/"), detail[:400], r["rule"]))
    tmp = os.path.join(k.out, ".report.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, os.path.join(k.out, "report.md"))


def pack_logs(k):
    path = os.path.join(k.out, "logs.tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for name in sorted(os.listdir(k.logs)):
            full = os.path.join(k.logs, name)
            if os.path.getsize(full) > 512 * 1024:  # keep the archive small: the ends of a long log
                with open(full, errors="replace") as f:
                    text = f.read()
                with open(full, "w") as f:
                    f.write(text[:256 * 1024] + "\n[… cut …]\n" + text[-256 * 1024:])
            tar.add(full, arcname="logs/" + name)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kit", required=True, help="the kit folder (run.sh passes it)")
    ap.add_argument("--out", required=True, help="directory for report.json, report.md, node.txt, logs.tar.gz")
    ap.add_argument("--simulate", nargs="?", const="", default=None, metavar="NODE",
                    help="run against the simulated node (default: a recorded node, else data/nodes/h100-spec.node)")
    ap.add_argument("--only", help="comma-separated check ids")
    ap.add_argument("--budget", type=float, default=450, help="seconds; checks not started by then are skipped")
    ap.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU to use (default 0)")
    ap.add_argument("--list", action="store_true", help="list the checks and their pass rules")
    a = ap.parse_args()
    if a.list:
        for cid, title, rule, modes, needs, _ in CHECKS:
            print("%-28s %s\n%28s %s [%s]" % (cid, title, "", rule, "/".join(modes)))
        return 0
    if a.only is not None:  # the runner's rule: an empty or unknown selection fails, before anything runs
        try:
            a.only = runner.select([c[0] for c in CHECKS], a.only.split(","))
        except runner.SelectionError as e:
            print("FAIL selection: %s" % e, flush=True)
            return 1
    k = Kit(a)
    print("gpuslice hardware kit: %s, report in %s" % ("simulated node" if k.simulate else "real GPU", k.out),
          flush=True)
    try:
        prepare(k)
    except Exception:  # a kit bug must not hide the rest: every check then says why it could not run
        k.machine["prepare_error"] = traceback.format_exc().splitlines()[-1]
    for cid, title, rule, modes, needs, fn in CHECKS:
        t = time.monotonic()
        reason = why_skip(k, modes, needs)
        if k.only and cid not in k.only:
            reason = "not selected (--only)"
        elif reason is None and k.elapsed() > k.budget:
            reason = "the time budget (%.0f s) was used up" % k.budget
        if reason is not None:
            status, figures, detail = "skip", {}, reason
        else:
            try:
                status, figures, detail = fn(k)
            except Exception:
                status, figures, detail = "fail", {}, "kit error: " + traceback.format_exc().splitlines()[-1]
                k.log("error-" + cid, traceback.format_exc())
        k.results.append({"id": cid, "title": title, "status": status, "figures": figures, "detail": detail,
                          "rule": rule, "seconds": round(time.monotonic() - t, 1)})
        figs = json.dumps(figures, default=str)
        print("%-4s %-27s %5.1fs %s%s" % (status.upper(), cid, time.monotonic() - t, figs[:160],
                                         (" — " + detail[:200]) if detail else ""), flush=True)
        write_report(k)
    write_report(k, finished=True)
    pack_logs(k)
    s = {x: sum(1 for r in k.results if r["status"] == x) for x in ("pass", "fail", "skip", "info")}
    print("hwkit: %d passed, %d failed, %d skipped, %d information, %.0f s" % (s["pass"], s["fail"], s["skip"],
                                                                             s["info"], k.elapsed()), flush=True)
    shutil.rmtree(k.work, ignore_errors=True)
    # the runner's one skip rule: a run with a skipped check is not a pass (exit 77); checks left out by
    # --only are not counted
    skipped = sum(1 for r in k.results if r["status"] == "skip" and r["detail"] != "not selected (--only)")
    return 1 if s["fail"] else runner.SKIP_EXIT if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
