# SPDX-License-Identifier: Apache-2.0
"""The reference docs agree with the built program (what a platform team reads before the code).

  cli      every command of `gpuslice --help` (and of src/cli/commands.h) has a `## gpuslice NAME`
           section in docs/cli.md and no section names a command that does not exist; the flags of a
           command's getopt table (src/cli/cmd-NAME.c) are those its --help prints; every flag --help prints
           is in its section (`gpuslice node`'s may be in docs/configuration.md instead, which
           documents each of them), every flag a section names exists, and a default a section
           states in backticks (`(default \\`X\\`)`) is the one `--help` prints.
  metrics  every family a scrape of the node agent (simulated node, kubelet stand-in, a fractional
           profile, the compat families, an allocation) and of `gpuslice scheduler` (a snapshot,
           one request of each verb) serves, and every family name the source registers, is in
           docs/metrics.md (the agent's, the extender's and a monitor's on a MIG node); every family docs/metrics.md names is in a scrape, or in CONDITIONAL
           below with the reason it was not produced here. Types and labels of the scrape match
           the docs' tables.
  architecture  docs/architecture.md's "Layers" table against the build: its libraries are the libraries the
           CMake files under src/ define (and the build made the non-header ones), each in the folder the
           table says, each folder of src/ in it, each folder's layer the one scripts/lint-includes.sh
           checks; its CLI table is `gpuslice --help`'s commands, each in the file it names; every path
           (src/…, sim/…, tests/…, bench/…, scripts/…, docs/…, proto/…) and every gpuslice_* library it
           names exists.
  install  docs/install.md's build line against scripts/install-deps.sh and the CMake files' pkg-config
           modules (their Debian packages, asked of dpkg); the paths README.md and install.md name
           exist; README's Layout lists the folders of src/ and tests/; README's first example prints
           what README shows.

Usage: test_docs.py --build DIR --source DIR {cli,metrics,install,architecture}. Exit 0 pass, 1 fail (the message names
each difference).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import runner  # noqa: E402  (tests/runner.py)

FLAG = r"--[a-z][a-z0-9-]*"

# Flags a cli.md section names that belong to another program, not to gpuslice.
FOREIGN = {
    "alloc": {"--gpus": "docker run's flag, printed for pasting"},
    "status": {"--unix-socket": "curl's flag, reading the status socket"},
}


def fail(problems, what):
    if problems:
        sys.stderr.write("%s: %d difference(s) between the program and the docs:\n" % (what, len(problems)))
        for p in problems:
            sys.stderr.write("  - %s\n" % p)
        sys.exit(1)


def gpuslice(build, *argv):
    r = subprocess.run([os.path.join(build, "gpuslice")] + list(argv), capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


# ---- cli ----

def help_commands(build):
    rc, out = gpuslice(build, "--help")
    if rc != 0:
        raise AssertionError("gpuslice --help exited %d" % rc)
    body = out.split("Commands:", 1)[1]
    return [m.group(1) for m in re.finditer(r"^  ([a-z]+) ", body, re.M)]


def help_flags(text):
    """Flags of a --help text: the leading flags of each option line and those of the Usage lines,
    with the default each option line states."""
    flags, defaults = set(), {}
    for line in text.splitlines():
        if re.match(r"^\s*(Usage:|gpuslice |kubectl )", line):
            flags.update(re.findall(r"(?<![\w-])" + FLAG, line))
            continue
        m = re.match(r"^\s+((?:-[A-Za-z], )?(?:--[a-z][a-z0-9-]*))(?:[ =]\S+)?\s{2,}(.*)$", line) or \
            re.match(r"^\s+((?:-[A-Za-z], )?(?:--[a-z][a-z0-9-]*))(?:\s+(\S.*))?$", line)
        if not m:
            continue
        names = [n.strip() for n in m.group(1).split(",")]
        for n in names:
            if n.startswith("--"):
                flags.add(n)
                d = re.search(r"\(default:? ([^) ]+)\)", m.group(2) or "")
                if d:
                    defaults[n] = d.group(1)
    flags -= {"--help"}
    return flags, defaults


def doc_sections(md):
    """{command: text} of the `## gpuslice NAME` sections of cli.md."""
    secs = {}
    parts = re.split(r"^## gpuslice ([a-z]+)[^\n]*\n", md, flags=re.M)
    for i in range(1, len(parts), 2):
        secs[parts[i]] = parts[i + 1]
    return secs


def test_cli(a):
    md = open(os.path.join(a.source, "docs", "cli.md")).read()
    conf_md = open(os.path.join(a.source, "docs", "configuration.md")).read()
    # the options every node-reading command shares, documented once at the top
    common = md.split("## Where the node comes from", 1)[1].split("\n## ", 1)[0]
    common_flags = set(re.findall(r"(?<![\w-])" + FLAG, common))
    secs = doc_sections(md)
    problems = []
    cmds = help_commands(a.build)
    if len(cmds) < 10:
        raise AssertionError("only %d commands parsed from gpuslice --help: %s" % (len(cmds), cmds))
    # every command commands.h declares is reachable (in main.c's table, which --help prints)
    declared = re.findall(r"^int cmd_([a-z]+)\(", open(os.path.join(a.source, "src/cli/commands.h")).read(), re.M)
    for c in declared:
        if c not in cmds:
            problems.append("src/cli/commands.h declares cmd_%s, which gpuslice --help does not list" % c)
    for c in cmds:
        if c not in secs:
            problems.append("command '%s' (gpuslice --help) has no '## gpuslice %s' section in docs/cli.md" % (c, c))
    for c in secs:
        if c not in cmds:
            problems.append("docs/cli.md has a section for 'gpuslice %s', a command gpuslice --help does not list" % c)
    for c in cmds:
        if c not in secs or c == "version":
            continue
        rc, out = gpuslice(a.build, c, "--help")
        if rc != 0:
            problems.append("gpuslice %s --help exited %d" % (c, rc))
            continue
        have, defaults = help_flags(out)
        # what the command accepts (its getopt_long table) is what --help lists
        srcf = os.path.join(a.source, "src/cli/cmd-%s.c" % c)
        # a command's parts kept apart: `hook cdi-links` is src/cli/hook-links.c (shared with gpuslice-cdi-hook)
        parts = {"hook": ["src/cli/hook-links.c"]}.get(c, [])
        if c != "node" and os.path.exists(srcf):
            text = "".join(open(os.path.join(a.source, f)).read() for f in ["src/cli/cmd-%s.c" % c] + parts)
            longs = {"--" + x for x in re.findall(r'\{\s*"([a-z][a-z0-9-]*)",\s*(?:no|required|optional)_argument',
                                                  text)} - {"--help"}
            for f in sorted(longs - have):
                problems.append("gpuslice %s accepts %s (src/cli/cmd-%s.c), which its --help does not list" % (c, f, c))
            for f in sorted(have - longs):
                problems.append("gpuslice %s --help lists %s, which src/cli/cmd-%s.c does not accept" % (c, f, c))
        sec = secs[c]
        doc = set(re.findall(r"(?<![\w-])" + FLAG, sec))
        # "the node source options" stands for the shared --topology/--nvml-library
        if re.search(r"node\s+source\s+options", sec):
            doc |= common_flags
        doc -= set(FOREIGN.get(c, {}))
        doc -= {"--help"}
        extra_doc = set()
        if c == "node":  # every node flag is a config key, documented in configuration.md
            extra_doc = set(re.findall(r"`(" + FLAG + r")`", conf_md))
        for f in sorted(have - doc - extra_doc):
            problems.append("gpuslice %s %s (in --help) is not documented in docs/cli.md%s" %
                            (c, f, " or docs/configuration.md" if c == "node" else ""))
        for f in sorted(doc - have):
            if c == "node" and f in extra_doc:
                continue
            problems.append("docs/cli.md documents gpuslice %s %s, which gpuslice %s --help does not list" % (c, f, c))
        if c == "node":
            for f in sorted(set(re.findall(r"^\| `[a-z-]+\.[a-z-]+` \| `(" + FLAG + ")`", conf_md, re.M)) - have):
                problems.append("docs/configuration.md documents gpuslice node %s, which --help does not list" % f)
        for f, want in defaults.items():
            for m in re.finditer(r"`" + re.escape(f) + r"(?: [^`]*)?`[^`|]{0,40}?\(default `([^`]+)`", sec):
                if m.group(1) != want:
                    problems.append("gpuslice %s %s: docs/cli.md says default %s, --help says %s" %
                                    (c, f, m.group(1), want))
    fail(problems, "docs/cli.md")


# ---- metrics ----

# Families the docs name that this test does not produce, and why. Each must still be named in src/.
CONDITIONAL = {
    "gpuslice_share_invariant_violations_total": "only when a check fails: must stay absent",
    "gpuslice_node_publish_failures_total": "only with API access (the node published): kube-publish-node-name",
    "gpuslice_gpu_xid_errors_total": "only after an Xid (tests/integration/test_monitoring.py injects one)",
    "gpuslice_agent_call_waits_total": "only when a kubelet call waited on PodResources or a pods LIST "
                                       "(tests/integration/test_assign.py assign-hang scrapes it)",
}
# Every gpuslice_assign_* family needs a node agent with API access and pods the scheduler extender
# assigned (tests/integration/test_assign.py, a kube-apiserver stand-in): none here.
# Every gpuslice_dra_* family needs `gpuslice node --dra` with an API server: tests/integration/test_dra.py
# scrapes them (prepare-shared).
CONDITIONAL_PREFIX = ("gpuslice_assign_", "gpuslice_dra_")


def conditional(f):
    return f in CONDITIONAL or f.startswith(CONDITIONAL_PREFIX)

SOURCE_FAMILY = re.compile(r'"((?:gpuslice_[a-z0-9_]+)|pod_used_gpu_mem_MB|container_(?:request_)?gpu_[a-z_]+)"')


def source_families(src):
    names = set()
    for root, _, files in os.walk(src):
        if "interposer" in root:
            continue
        for f in files:
            if f.endswith(".c"):
                names.update(SOURCE_FAMILY.findall(open(os.path.join(root, f), errors="replace").read()))
    return names


def doc_families(md):
    """{family: (type or None, labels or None)} from docs/metrics.md: table rows (`name{labels}` or
    `name` with the section's `Labels:` line), the compat table and the scheduler's list."""
    fams = {}
    labels = None
    for para in re.split(r"\n\s*\n", md):
        if para.startswith("#"):
            labels = None
        # "Labels: `a`, `b`, ..." (or "labels `a`, ...") in prose, possibly over several lines
        m = re.search(r"\b[Ll]abels:? ((?:`[a-z_]+`(?: \([^)]*\))?(?:,\s+|\s+and\s+)?)+)", para)
        if m and not para.lstrip().startswith("|"):
            labels = re.findall(r"`([a-z_]+)`", m.group(1))
        for line in para.splitlines():
            row = re.match(r"^\| `([A-Za-z_][A-Za-z0-9_]*)(?:\{([a-z_, ]*)\})?` \| ([a-z]+) \|", line)
            if row:
                # `name{a, b}`, else the section's Labels line, else none
                lab = [x.strip() for x in row.group(2).split(",")] if row.group(2) is not None else (labels or [])
                fams[row.group(1)] = (row.group(3), lab)
                continue
            crow = re.match(r"^\| `[a-z-]+` \| `([A-Za-z_][A-Za-z0-9_]*)`[^|]*\| ([^|]*) \|", line)
            if crow:
                lab = re.findall(r"`([a-z_]+)`", crow.group(2))
                fams[crow.group(1)] = ("gauge", lab or fams.get("container_gpu_utilization", (None, None))[1])
    return fams


def parse_scrape(text):
    """{family: (type, set of label names or None when it has no sample)}"""
    types, labels = {}, {}
    for line in text.splitlines():
        m = re.match(r"^# TYPE (\S+) (\S+)", line)
        if m:
            types[m.group(1)] = m.group(2)
            continue
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? ", line)
        if not m:
            continue
        name = m.group(1)
        fam = name
        if name not in types:
            for suf in ("_bucket", "_sum", "_count"):
                if name.endswith(suf) and name[: -len(suf)] in types:
                    fam = name[: -len(suf)]
        labs = set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2) or "")) - {"le"}
        labels.setdefault(fam, set()).update(labs)
    # labels None: a family with no sample to read them from
    return {f: (types.get(f), labels.get(f)) for f in set(types) | set(labels)}


def scrape_agent(a, tmp):
    """The node agent with the gpuslice profile and the compat families: one whole-GPU container and
    one fractional (core + memory) container admitted as kubelet would, then /metrics."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import test_share  # noqa: E402  (the sharing tests' fixture: simulated node, kubelet stand-in)
    from kubelet_standin import load_stubs  # noqa: E402
    args = argparse.Namespace(build=a.build, source=a.source,
                              topology=os.path.join(a.source, "tests/data/topologies/seed000-8gpu-pcie-2socket.topo"))
    e = test_share.Share(args, load_stubs(a.build))
    ok = False
    try:
        port = test_share.agent_fixture.free_port()
        # a GPU process of a pod's container: PID 4242 of a cgroup v2 / systemd / containerd proc root
        # fixture, held on GPU 0 by the simulator (--keep: no such host process needed)
        proc = os.path.join(tmp, "proc")
        shutil.copytree(os.path.join(a.source, "tests/data/proc-v2-systemd-containerd-guaranteed"), proc)
        with open(os.path.join(proc, "4242", "comm"), "w") as f:
            f.write("python3\n")
        e.sim("proc", "add", "--gpu", "0", "--pid", "4242", "--mem", "256MiB", "--sm", "10", "--keep")
        e.start_share("gpuslice", "--metrics-address", "127.0.0.1:%d" % port, "--sample-interval", "1s",
                      "--metrics-compat", "pod-used-gpu-mem,gpu-manager", "--proc-root", proc, "--cri-socket=")
        whole = e.admit(("nvidia.com/gpu", 2))
        try:  # a refused Allocate, for gpuslice_rpc_errors_total
            e.allocate_r("nvidia.com/gpu", ["GPU-not-a-gpu"])
        except test_share.grpc.RpcError:
            pass
        frac = e.admit(("gpuslice.io/gpu-core", 30), ("gpuslice.io/gpu-memory", 4))
        # PodResources names both containers: the limits and request families then have a pod
        e.kubelet.pods = [("ml", "train", "main", "nvidia.com/gpu", whole["nvidia.com/gpu"][0]),
                          ("ml", "infer", "main", e.core, frac[e.core][0]),
                          ("ml", "infer", "main", e.mem, frac[e.mem][0])]
        e.status()  # reconciles with PodResources now rather than in 10 s
        text = test_share.agent_fixture.scrape(
            port, lambda t: "gpuslice_container_gpu_core_share_ratio{" in t and "container_request_gpu_memory{" in t and
            "gpuslice_container_gpu_memory_used_bytes{" in t and "pod_used_gpu_mem_MB{" in t and "gpuslice_share_pairs_total" in t and "gpuslice_gpu_allocated_ratio" in t and
            "gpuslice_rpc_duration_seconds_bucket" in t and "gpuslice_share_journal_writes_total" in t,
            "the pairing and journal counters, the allocated ratio and the RPC histogram")
        ok = True
        return text
    finally:
        e.close(not ok)


def scrape_scheduler(a, tmp):
    node = {"metadata": {"name": "n1", "labels": {}, "annotations": {}},
            "status": {"allocatable": {"gpuslice.io/gpu-memory": "64", "gpuslice.io/gpu-core": "100"}}}
    snap = os.path.join(tmp, "snapshot.json")
    with open(snap, "w") as f:
        json.dump({"nodes": [node], "pods": []}, f)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from agent_fixture import free_port
    port = free_port()
    log = open(os.path.join(tmp, "scheduler.log"), "w+")
    p = subprocess.Popen([os.path.join(a.build, "gpuslice"), "scheduler", "--snapshot", snap, "--address",
                          "127.0.0.1:%d" % port], stdout=log, stderr=subprocess.STDOUT)
    try:
        base = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/healthz", timeout=5).read()
                break
            except OSError:
                if time.monotonic() > deadline or p.poll() is not None:
                    log.seek(0)
                    raise AssertionError("scheduler did not serve: " + log.read())
                time.sleep(0.1)
        pod = {"metadata": {"name": "p", "namespace": "default", "uid": "u1", "annotations": {}},
               "spec": {"containers": [{"name": "c", "resources": {"limits": {"gpuslice.io/gpu-memory": "4"}}}]}}
        for verb in ("filter", "prioritize", "preempt"):
            body = {"Pod": pod, "Nodes": None, "NodeNames": ["n1"]}
            if verb == "preempt":
                body = {"Pod": pod, "NodeNameToVictims": {}, "NodeNameToMetaVictims": {"n1": {"Pods": []}}}
            req = urllib.request.Request(base + "/" + verb, data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=10).read()
            except urllib.error.HTTPError:
                pass
        with urllib.request.urlopen(base + "/metrics", timeout=10) as r:
            return r.read().decode()
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(15)


def scrape_mig(a, tmp):
    """gpuslice monitor on the simulated MIG node (tests/data/mig/h100-mixed.node) with a process on a MIG
    device: the per-MIG-device families."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from agent_fixture import free_port
    env = dict(os.environ, GPUSLICE_SIM_NODE=os.path.join(a.source, "tests/data/mig/h100-mixed.node"),
               GPUSLICE_SIM_STATE=os.path.join(tmp, "mig.state"))
    subprocess.run([os.path.join(a.build, "sim", "gpuslice-sim"), "proc", "add", "--gpu", "0", "--pid", "4243",
                    "--mem", "256MiB", "--mig", "14:0", "--keep"], env=env, check=True, timeout=30)
    port = free_port()
    log = open(os.path.join(tmp, "monitor-mig.log"), "w+")
    p = subprocess.Popen([os.path.join(a.build, "gpuslice"), "monitor", "--nvml-library",
                          os.path.join(a.build, "sim", "libnvidia-ml.so.1"), "--metrics-address",
                          "127.0.0.1:%d" % port, "--sample-interval", "1s"], env=env, stdout=log,
                         stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                    text = r.read().decode()
                if "gpuslice_process_mig_device_info{" in text:
                    return text
            except OSError:
                pass
            if time.monotonic() > deadline or p.poll() is not None:
                log.seek(0)
                raise AssertionError("gpuslice monitor on the MIG node served no MIG families: " + log.read())
            time.sleep(0.2)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(15)


def promtool_check(text, what):
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    # promtool exits 1 for lint remarks too (the compat families' names, docs/metrics.md); only a parse
    # error ("error while linting") is fatal here
    if "error while linting" in r.stdout + r.stderr:
        raise AssertionError("promtool check metrics rejects the %s scrape: %s%s" % (what, r.stdout, r.stderr))


def test_metrics(a):
    md = open(os.path.join(a.source, "docs", "metrics.md")).read()
    docs = doc_families(md)
    if len(docs) < 20:
        raise AssertionError("only %d families parsed from docs/metrics.md: %s" % (len(docs), sorted(docs)))
    code = source_families(os.path.join(a.source, "src"))
    tmp = tempfile.mkdtemp(prefix="gpuslice-docs-")
    try:
        agent_text = scrape_agent(a, tmp)
        sched_text = scrape_scheduler(a, tmp)
        mig_text = scrape_mig(a, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    promtool_check(agent_text, "agent")
    promtool_check(sched_text, "scheduler")
    promtool_check(mig_text, "MIG node monitor")
    scraped = parse_scrape(agent_text)
    scraped.update(parse_scrape(sched_text))
    for f, v in parse_scrape(mig_text).items():
        if f.startswith(("gpuslice_mig_", "gpuslice_process_mig_")):
            scraped[f] = v
    problems = []
    for f in sorted(set(scraped) - set(docs)):
        problems.append("%s is served on /metrics but not in docs/metrics.md" % f)
    for f in sorted(code - set(docs)):
        if f not in scraped:
            problems.append("%s is named in src/ but not in docs/metrics.md" % f)
    for f in sorted(set(docs) - set(scraped)):
        if not conditional(f):
            problems.append("docs/metrics.md documents %s, which no scrape served (and it is not listed as "
                            "conditional in tests/integration/test_docs.py)" % f)
        elif f not in code:
            problems.append("docs/metrics.md documents %s, which src/ never names" % f)
    for f in sorted(scraped):
        if conditional(f):
            problems.append("%s is listed as conditional in test_docs.py but was served: drop it from CONDITIONAL(_PREFIX)" % f)
    for f, (typ, labs) in sorted(scraped.items()):
        if f not in docs:
            continue
        dtyp, dlabs = docs[f]
        if typ and dtyp and typ != dtyp and f not in ("container_gpu_utilization", "container_gpu_memory_total"):
            problems.append("%s: docs/metrics.md says %s, /metrics says %s" % (f, dtyp, typ))
        if labs is not None and set(dlabs) != labs:
            problems.append("%s: docs/metrics.md labels %s, /metrics labels %s" % (f, sorted(dlabs), sorted(labs)))
    fail(problems, "docs/metrics.md")


# ---- install ----

# ---- architecture ----

LAYER_NAMES = {"0": "0", "1": "1", "2": "2", "3": "3", "4": "4", "5": "5"}


def cmake_libraries(source):
    """{library: (folder, interface)} defined by the CMake files of src/ (gpuslice_library, add_library,
    add_executable of gpuslice)."""
    libs = {}
    for folder in sorted(os.listdir(os.path.join(source, "src"))):
        f = os.path.join(source, "src", folder, "CMakeLists.txt")
        if not os.path.exists(f):
            continue
        text = re.sub(r"#[^\n]*", "", open(f).read())
        for m in re.finditer(r"gpuslice_library\(\s*(\w+)([^)]*)\)", text, re.S):
            args = m.group(2).split()
            name = args[args.index("NAME") + 1] if "NAME" in args else m.group(1)
            libs["gpuslice_" + name] = ("src/" + m.group(1), "INTERFACE" in args)
        for m in re.finditer(r"add_library\(\s*(gpuslice_\w+)\s+(\w+)", text):
            libs[m.group(1)] = ("src/" + folder, m.group(2) == "INTERFACE")
        for m in re.finditer(r"add_executable\(\s*(gpuslice)\s", text):
            libs[m.group(1)] = ("src/" + folder, False)
    return libs


def lint_layers(source):
    """{folder: layer} as scripts/lint-includes.sh's layer_of maps them."""
    text = open(os.path.join(source, "scripts", "lint-includes.sh")).read()
    body = text.split('case "${1%%/*}" in', 1)[1].split("esac", 1)[0]
    layers = {}
    for m in re.finditer(r"^\s*([a-z |]+)\)\s*echo (\w+)\s*;;", body, re.M):
        for f in m.group(1).split("|"):
            layers[f.strip()] = m.group(2)
    return layers


def doc_layer_table(md):
    """[(layer, library, folder)] of the Layers table (library and folder: the first `...` of their cells)."""
    sec = md.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in sec.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not re.match(r"^(\d|apart)", cells[0]):
            continue
        lib = re.search(r"`([^`]+)`", cells[1])
        folder = re.search(r"`([^`]+)`", cells[2])
        rows.append((cells[0].split()[0], lib.group(1) if lib else "", folder.group(1) if folder else ""))
    return rows


def built_targets(build):
    r = subprocess.run(["ninja", "-C", build, "-t", "targets", "all"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        r = subprocess.run(["make", "-C", build, "help"], capture_output=True, text=True, timeout=60)
    return set(re.findall(r"^(?:\.\.\. )?(gpuslice\w*)\b", r.stdout, re.M))


def test_architecture(a):
    md = open(os.path.join(a.source, "docs", "architecture.md")).read()
    problems = []
    libs = cmake_libraries(a.source)
    if len(libs) < 15:
        raise AssertionError("only %d libraries parsed from src/*/CMakeLists.txt: %s" % (len(libs), sorted(libs)))
    rows = doc_layer_table(md)
    doc_libs = {lib: (layer, folder) for layer, lib, folder in rows if lib.startswith("gpuslice")}
    # the sim row stands for sim/'s libraries
    doc_libs.pop("gpuslice_sim_*", None)
    for lib, (folder, _) in sorted(libs.items()):
        if lib not in doc_libs:
            problems.append("%s (defined in %s/CMakeLists.txt) is not in docs/architecture.md's Layers table" %
                            (lib, folder))
        elif doc_libs[lib][1] != folder:
            problems.append("%s: docs/architecture.md says folder %s, the build defines it in %s" %
                            (lib, doc_libs[lib][1], folder))
    for lib in sorted(set(doc_libs) - set(libs)):
        problems.append("docs/architecture.md's Layers table names %s, which no CMake file under src/ defines" % lib)
    # the build made what the CMake files define (header-only libraries make no target)
    built = built_targets(a.build)
    for lib, (folder, interface) in sorted(libs.items()):
        if not interface and lib not in built:
            problems.append("%s is defined in %s/CMakeLists.txt but the build in %s has no such target" %
                            (lib, folder, a.build))
    # every folder of src/ is in the table; its layer is the one lint-includes.sh checks
    folders = sorted(d for d in os.listdir(os.path.join(a.source, "src"))
                     if os.path.isdir(os.path.join(a.source, "src", d)))
    lint = lint_layers(a.source)
    doc_folders = {}
    for layer, lib, folder in rows:
        doc_folders.setdefault(folder, set()).add(layer)
    for f in folders:
        if "src/" + f not in doc_folders:
            problems.append("src/%s is not in docs/architecture.md's Layers table" % f)
            continue
        want = lint.get(f)
        if want is None:
            problems.append("src/%s has no layer in scripts/lint-includes.sh" % f)
        elif want not in doc_folders["src/" + f]:
            problems.append("src/%s: docs/architecture.md puts its libraries in layer %s, scripts/lint-includes.sh "
                            "checks it as layer %s" % (f, sorted(doc_folders["src/" + f]), want))
    # the CLI table: gpuslice --help's commands, each in the file the table names
    cli = md.split("| command | file |", 1)
    if len(cli) < 2:
        problems.append("docs/architecture.md has no CLI table (| command | file | ...)")
        doc_cmds = {}
    else:
        doc_cmds = dict(re.findall(r"^\| `([a-z]+)` \| `([^`]+)` \|", cli[1].split("\n\n", 1)[0], re.M))
    cmds = help_commands(a.build)
    for c in cmds:
        if c not in doc_cmds:
            problems.append("command '%s' (gpuslice --help) is not in docs/architecture.md's CLI table" % c)
    for c, f in sorted(doc_cmds.items()):
        if c not in cmds:
            problems.append("docs/architecture.md's CLI table names '%s', which gpuslice --help does not list" % c)
        path = os.path.join(a.source, f)
        if not os.path.exists(path):
            problems.append("docs/architecture.md's CLI table names %s for '%s': no such file" % (f, c))
        elif c != "version" and ("cmd_%s" % c) not in open(path).read():
            problems.append("%s (docs/architecture.md's file for '%s') does not define cmd_%s" % (f, c, c))
    # every path and library named exists
    for m in sorted(set(re.findall(r"`((?:src|sim|tests|bench|scripts|docs|proto)/[A-Za-z0-9_./{},*<>-]*)`", md))):
        path = m.split(" ")[0]
        if any(ch in path for ch in "*<>"):
            continue
        alts = [path]
        brace = re.match(r"^(.*)\{([^}]*)\}(.*)$", path)
        if brace:
            alts = [brace.group(1) + x + brace.group(3) for x in brace.group(2).split(",")]
        for p in alts:
            if not os.path.exists(os.path.join(a.source, p.rstrip("/"))):
                problems.append("docs/architecture.md names %s, which does not exist" % p)
    for lib in sorted(set(re.findall(r"`(gpuslice_[a-z_]+)`", md)) - {"gpuslice_library", "gpuslice_unit_test"}):
        if lib not in libs and lib not in ("gpuslice_everything",) and not lib.startswith("gpuslice_sim_"):
            problems.append("docs/architecture.md names %s, which no CMake file under src/ defines" % lib)
    fail(problems, "docs/architecture.md")


def test_install(a):
    """docs/install.md's build line: every package in scripts/install-deps.sh (the one list), and
    every pkg-config module the CMake files require comes from a package it names (asked of dpkg);
    the repository paths README.md and docs/install.md name exist (build/ ones in the build tree)."""
    inst = open(os.path.join(a.source, "docs", "install.md")).read()
    readme = open(os.path.join(a.source, "README.md")).read()
    problems = []
    r = subprocess.run([os.path.join(a.source, "scripts", "install-deps.sh"), "--list"], capture_output=True,
                       text=True, timeout=30, check=True)
    listed = set(r.stdout.split())
    m = re.search(r"^apt-get install ((?:[^\n]*\\\n)*[^\n]*)", inst, re.M)
    if not m:
        raise AssertionError("docs/install.md has no 'apt-get install' build line")
    build_pkgs = set(m.group(1).replace("\\", " ").split())
    for p in sorted(build_pkgs - listed):
        problems.append("docs/install.md's build line names %s, which scripts/install-deps.sh does not list" % p)
    mods = set()
    for root, _, files in os.walk(a.source):
        if "/build" in root[len(a.source):] or "/." in root[len(a.source):]:
            continue
        for f in files:
            if f == "CMakeLists.txt" or f.endswith(".cmake"):
                mods.update(re.findall(r"pkg_check_modules\(\w+ REQUIRED IMPORTED_TARGET ([\w.+-]+)\)",
                                       open(os.path.join(root, f), errors="replace").read()))
    if len(mods) < 5:
        raise AssertionError("only %d pkg-config modules found in the CMake files: %s" % (len(mods), mods))
    for mod in sorted(mods):
        d = subprocess.run(["pkg-config", "--variable=pcfiledir", mod], capture_output=True, text=True).stdout.strip()
        q = subprocess.run(["dpkg", "-S", os.path.join(d, mod + ".pc")], capture_output=True, text=True)
        pkg = q.stdout.split(":")[0] if q.returncode == 0 else None
        if not pkg:
            problems.append("pkg-config module %s: no Debian package owns its .pc (%s)" % (mod, q.stderr.strip()))
        elif pkg not in build_pkgs:
            problems.append("the build needs pkg-config module %s (Debian %s), missing from docs/install.md's "
                            "build line" % (mod, pkg))
    for name, text in (("README.md", readme), ("docs/install.md", inst)):
        for path in sorted(set(re.findall(r"(?<![\w/.-])((?:build|docs|sim|tests|deploy|scripts|src|bench)/"
                                           r"[\w./-]*[\w])", text))):
            if "…" in path or path.endswith("/sim/libnvidia-ml.so") or "<" in path:
                continue
            base = a.build if path.startswith("build/") else a.source
            rel = path[len("build/"):] if path.startswith("build/") else path
            if not os.path.exists(os.path.join(base, rel)):
                problems.append("%s names %s, which does not exist" % (name, path))
    # README's Layout: the folders of src/ and tests/ it lists are the ones there are
    for top, pat in (("src", r"`src/` \(one folder per part: ([^)]*)\)"), ("tests", r"`tests/` \(([^)]*)\)")):
        m = re.search(pat, readme)
        if not m:
            problems.append("README.md's Layout does not list the folders of %s/" % top)
            continue
        said = set(re.findall(r"`([a-z0-9_-]+)/?`", m.group(1)))
        there = {d for d in os.listdir(os.path.join(a.source, top)) if os.path.isdir(os.path.join(a.source, top, d))}
        for d in sorted(there - said):
            problems.append("README.md's Layout does not list %s/%s" % (top, d))
        for d in sorted(said - there):
            problems.append("README.md's Layout lists %s/%s, which does not exist" % (top, d))
    # README's first example: the command prints exactly what the README shows
    m = re.search(r"^```\n\$ (build/gpuslice [^\n]*)\n(.*?)^```", readme, re.M | re.S)
    if not m:
        problems.append("README.md's first example (```, $ build/gpuslice ...) is not found")
    else:
        argv = m.group(1).split()
        r = subprocess.run([os.path.join(a.build, "gpuslice")] + argv[1:], cwd=a.source, capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0 or r.stdout != m.group(2):
            problems.append("README.md's example `%s` prints (exit %d):\n%s\n    but README.md shows:\n%s" %
                            (m.group(1), r.returncode, r.stdout + r.stderr, m.group(2)))
    fail(problems, "README.md / docs/install.md")


def fixture(a):
    a.build, a.source = os.path.abspath(a.build), os.path.abspath(a.source)
    return a


TESTS = {"cli": test_cli, "metrics": test_metrics, "install": test_install, "architecture": test_architecture}

if __name__ == "__main__":
    runner.main(TESTS, make_env=fixture, label="docs-", timeout_s=100)
