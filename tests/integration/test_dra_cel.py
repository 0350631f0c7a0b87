#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The DeviceClasses and example claims of deploy/dra select what docs/dra.md says they
select, evaluated with a real CEL implementation (@bufbuild/cel under Debian's nodejs, vendored in
tests/integration/cel/vendor) against the ResourceSlices `gpuslice node --dra` publishes on simulated
nodes of several topologies (the harness of test_dra.py). Expectations come from the topology (links,
the fake sysfs's PCIe roots) and the published attributes read here in Python, not from the C code:

- gpu.gpuslice.io selects every whole GPU not in MIG mode and nothing else, gpu-shared.gpuslice.io every
  shared device (none of a GPU in MIG mode), mig.gpuslice.io every MIG device the simulated NVML has and nothing else, mig-shared.gpuslice.io their shared twins;
- big-gpu picks a GPU with >= 40 GiB and compute capability > 7.9, or none where no GPU has them;
- two-gpus-nvlink picks two NVLink-connected GPUs, or none on a machine without NVLink;
- two-gpus-one-switch two GPUs whose link is PIX, four-gpus-one-root four on one root complex;
- gpu-fraction one shared device, consuming the claim's memory rounded up to the memory unit and its
  cores;
- mig-1g a MIG device of profile 1g.10gb, mig-20g one of at least 20 GiB on a Hopper GPU, or none where the
  node has no such MIG device (the H100 MIG node, tests/data/mig/h100-mixed.node, has both).

Exit 77 when node is missing (scripts/install-deps.sh installs Debian's nodejs) or not root.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_fixture  # noqa: E402
import test_dra  # noqa: E402
from agent_fixture import Skip, check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VENDOR = os.path.join(HERE, "cel", "vendor")
PACKAGES = {"bufbuild-cel-0.6.1.tgz": "cel", "bufbuild-cel-spec-0.6.1.tgz": "cel-spec",
            "bufbuild-re2-0.6.1.tgz": "re2", "bufbuild-protobuf-2.17.0.tgz": "protobuf"}
GIB = 1 << 30


def node_modules(dest):
    """Unpack the vendored packages (checked against SHA256SUMS) into dest/node_modules/@bufbuild."""
    sums = dict(reversed(line.split()) for line in open(os.path.join(VENDOR, "SHA256SUMS")) if line.strip())
    for tgz, name in PACKAGES.items():
        path = os.path.join(VENDOR, tgz)
        with open(path, "rb") as f:
            check(hashlib.sha256(f.read()).hexdigest() == sums[tgz], "%s does not match SHA256SUMS" % tgz)
        out = os.path.join(dest, "node_modules", "@bufbuild", name)
        os.makedirs(out)
        with tarfile.open(path) as t:
            for m in t.getmembers():
                if not m.name.startswith("package/") or ".." in m.name or not (m.isfile() or m.isdir()):
                    continue
                m.name = m.name[len("package/"):]
                t.extract(m, out)


def manifests(source):
    """The DeviceClasses' expressions and the example claims (templates) as the docs show them."""
    docs = []
    d = os.path.join(source, "deploy", "dra")
    for f in ["deviceclasses.yaml"] + sorted("examples/" + n for n in os.listdir(os.path.join(d, "examples"))):
        with open(os.path.join(d, f)) as fh:
            docs += [x for x in yaml.safe_load_all(fh) if x]
    classes = {x["metadata"]["name"]: [s["cel"]["expression"] for s in x["spec"]["selectors"]]
               for x in docs if x["kind"] == "DeviceClass"}
    claims = []
    for x in docs:
        if x["kind"] != "ResourceClaimTemplate":
            continue
        dev = x["spec"]["spec"]["devices"]
        reqs = [{"name": r["name"], "deviceClassName": r["exactly"]["deviceClassName"],
                 "selectors": [s["cel"]["expression"] for s in r["exactly"].get("selectors", [])],
                 "count": r["exactly"].get("count", 1),
                 "capacity": (r["exactly"].get("capacity") or {}).get("requests")} for r in dev["requests"]]
        claims.append({"name": x["metadata"]["name"], "requests": reqs, "constraints": dev.get("constraints", [])})
    return classes, claims


def evaluate(e, classes, claims, work):
    devices = []
    for s in sorted(e.slices(), key=lambda s: s["metadata"]["name"]):
        for d in s["spec"].get("devices") or []:
            devices.append(dict(d, driver=s["spec"]["driver"]))
    r = subprocess.run(["node", os.path.join(work, "dra_cel.mjs")], input=json.dumps(
        {"devices": devices, "classes": classes, "claims": claims}), capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "node failed: %s" % r.stderr[-3000:])
    return json.loads(r.stdout), {d["name"]: d for d in devices}


def nv_connected(t, a, b):
    """Are GPUs a and b joined by NVLink, through any path (the topology's own words)?"""
    seen, todo = {a}, [a]
    while todo:
        i = todo.pop()
        for j, link in enumerate(t["links"][i]):
            if link.startswith("NV") and j not in seen:
                seen.add(j)
                todo.append(j)
    return b in seen


def check_node(e, out, devs):
    t = e.topo
    whole = sorted("gpu-%d" % g["index"] for g in t["gpus"] if g.get("mig_mode") != 1)
    check(sorted(out["classes"]["gpu.gpuslice.io"]) == whole, "whole class (no GPU in MIG mode): %s" % out["classes"])
    check(sorted(out["classes"]["gpu-shared.gpuslice.io"]) ==
          sorted("gpu-%d-shared" % g["index"] for g in t["gpus"] if g.get("mig_mode") != 1),
          "shared class: %s" % out["classes"])
    mig = {test_dra.mig_name(*k): d for k, d in test_dra.sim_mig(e).items()} if e.mig else {}
    check(sorted(out["classes"]["mig.gpuslice.io"]) == sorted(mig), "MIG class: %s, NVML has %s" %
          (out["classes"]["mig.gpuslice.io"], sorted(mig)))
    check(sorted(out["classes"]["mig-shared.gpuslice.io"]) == sorted(n + "-shared" for n in mig),
          "MIG shared class: %s, NVML has %s" % (out["classes"]["mig-shared.gpuslice.io"], sorted(mig)))
    c = out["claims"]
    hopper = lambda n: devs[n]["attributes"]["architecture"]["string"] == "Hopper"  # noqa: E731
    for claim, fits in (("mig-1g", lambda n, d: d["profile"] == "1g.10gb"),
                        ("mig-20g", lambda n, d: d["memory_total_bytes"] >= 20 * GIB and hopper(n))):
        want = sorted(n for n, d in mig.items() if fits(n, d))
        check((c[claim] is None) == (not want), "%s: %s, eligible %s" % (claim, c[claim], want))
        if want:
            check(c[claim][0]["device"] in want, "%s chose %s, eligible %s" % (claim, c[claim], want))
    idx = lambda name: int(name.split("-")[1])  # noqa: E731
    # big-gpu: memory and compute capability as published, compared here
    big = [w for w in whole if int(devs[w]["capacity"]["memory"]["value"]) >= 40 * GIB and
           tuple(map(int, devs[w]["attributes"]["cudaComputeCapability"]["version"].split("."))) > (7, 9, 0)]
    check((c["big-gpu"] is None) == (not big), "big-gpu: %s, eligible %s" % (c["big-gpu"], big))
    if big:
        check(c["big-gpu"][0]["device"] in big, "big-gpu chose %s" % c["big-gpu"])
    # two on one NVLink island
    elig = [g["index"] for g in t["gpus"] if g.get("mig_mode") != 1]  # what the whole-GPU class can give
    any_nv = any(nv_connected(t, a, b) for a in elig for b in elig if a < b)
    pair = c["two-gpus-nvlink"]
    check((pair is None) == (not any_nv), "nvlink claim %s on a node %s NVLink" % (pair, "with" if any_nv else "without"))
    if pair:
        a, b = [idx(x["device"]) for x in pair]
        check(a != b and nv_connected(t, a, b), "the NVLink claim got %d and %d, not NVLink-connected" % (a, b))
    # two behind one switch; four on one root complex
    sw = c["two-gpus-one-switch"]
    has_pix = any(t["links"][a][b] == "PIX" for a in elig for b in elig)
    check((sw is None) == (not has_pix), "switch claim %s" % sw)
    if sw:
        a, b = [idx(x["device"]) for x in sw]
        check(t["links"][a][b] == "PIX", "the switch claim got %d-%d: %s" % (a, b, t["links"][a][b]))
    four = c["four-gpus-one-root"]
    roots = e.roots
    fits = any([roots[i] for i in elig].count(r) >= 4 for r in roots)
    check((four is None) == (not fits), "root claim %s with roots %s" % (four, roots))
    if four:
        got = {roots[idx(x["device"])] for x in four}
        check(len(got) == 1 and len(four) == 4, "four-gpus-one-root spans %s" % got)
    # a fraction: the shared device, the memory rounded up to the unit (256 MiB), the cores as asked
    f = c["gpu-fraction"]
    check(f and f[0]["device"].endswith("-shared"), "fraction got %s" % f)
    unit = 256 << 20
    check(int(f[0]["consumed"]["memory"]) == -(-4 * GIB // unit) * unit and f[0]["consumed"]["cores"] == "30",
          "fraction consumed %s" % f[0]["consumed"])


def run(args):
    if shutil.which("node") is None:
        raise Skip("node (Debian's nodejs, scripts/install-deps.sh) is not installed")
    work = tempfile.mkdtemp(prefix="gpuslice-cel-")
    try:
        node_modules(work)
        shutil.copy(os.path.join(HERE, "cel", "dra_cel.mjs"), work)
        classes, claims = manifests(args.source)
        check({"gpu.gpuslice.io", "gpu-shared.gpuslice.io", "mig.gpuslice.io", "mig-shared.gpuslice.io"} <= set(classes),
          "classes %s" % classes)
        topos = [os.path.join(args.source, "tests", "data", "topologies", n) for n in
                 ("seed000-8gpu-pcie-2socket.topo", "dgx1-v100-hybrid-cube-mesh.topo", "dgx-a100-nvswitch.topo")]
        topos.append(os.path.join(args.source, "tests", "data", "dra", "nvlink-pairs.topo"))
        topos.append(os.path.join(args.source, "tests", "data", "mig", "h100-mixed.node"))
        for topo in topos:
            a = type(args)(**dict(vars(args), topology=topo))
            e = test_dra.DraEnv(a, None)
            failed = True
            try:
                test_dra.up(e)
                mig = [test_dra.mig_name(*k) for k in test_dra.sim_mig(e)] if e.mig else []
                n = len(e.topo["gpus"])
                e.wait_pool(lambda d: len(d) == 2 * n - sum(g.get("mig_mode") == 1 for g in e.topo["gpus"]) +
                            2 * len(mig), "the pool (a MIG device with its shared twin)")
                out, devs = evaluate(e, classes, claims, work)
                check(not out["errors"], "CEL errors: %s" % out["errors"][:5])
                check_node(e, out, devs)
                print("ok %s: %s" % (os.path.basename(topo), json.dumps(
                    {k: [x["device"] for x in v] if v else None for k, v in out["claims"].items()})))
                failed = False
            finally:
                e.close(failed)
    finally:
        shutil.rmtree(work, ignore_errors=True)


class Harness:
    """run_main's fixture: each topology gets its own DraEnv inside run()."""
    def __init__(self, args):
        self.args = args

    def close(self, failed):
        pass


if __name__ == "__main__":
    agent_fixture.run_main({"cel": lambda h: run(h.args)}, make_env=lambda a, s: Harness(a), label="dra-",
                           timeout_s=280)
