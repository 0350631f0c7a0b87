#!/usr/bin/env bash
# hwkit/test-hwkit.sh MODE SOURCE BUILD — the hardware kit in `make test` (hwkit/CMakeLists.txt), so it cannot
# rot between GPU days. The kit is assembled from BUILD exactly as `make hwkit` does, into a temporary folder.
#
#   simulate    run.sh --simulate: every check that needs no NVIDIA runtime runs against the simulated node
#               and passes; the real-GPU-only checks are skipped as such; none fails; every check is
#               described in docs/hardware.md
#   no-driver   run.sh on this machine as it is, without an NVIDIA driver: every check that needs one is
#               skipped with "no NVIDIA driver", none passes in its place, none fails (exit 77 where a driver
#               is installed: nothing to prove there)
set -euo pipefail
mode=$1 src=$2 build=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$src/hwkit/assemble.sh" "$build" "$tmp/kit" >"$tmp/assemble.log" 2>&1 || { cat "$tmp/assemble.log"; exit 1; }
cat "$tmp/assemble.log"

if [ "$mode" = no-driver ]; then
  if /usr/bin/python3 -c 'import ctypes; ctypes.CDLL("libnvidia-ml.so.1")' 2>/dev/null; then
    echo "an NVIDIA driver is installed here: the no-driver run has nothing to prove"
    exit 77
  fi
  rc=0
  env -u LD_LIBRARY_PATH -u GPUSLICE_SIM_NODE "$tmp/kit/run.sh" --out "$tmp/out" || rc=$?
else
  rc=0
  "$tmp/kit/run.sh" --out "$tmp/out" --simulate || rc=$?
fi

/usr/bin/python3 - "$mode" "$tmp/out" "$rc" "$src" <<'EOF'
import json, os, sys
mode, out, rc, src = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rep = json.load(open(os.path.join(out, "report.json")))
checks = {c["id"]: c for c in rep["checks"]}
problems = []
docs = open(os.path.join(src, "docs", "hardware.md")).read()
for cid in checks:  # docs/hardware.md says what each check does and its pass rule
    if "`%s`" % cid not in docs:
        problems.append("check %s is not described in docs/hardware.md" % cid)
for name in ("report.json", "report.md", "logs.tar.gz"):
    if not os.path.exists(os.path.join(out, name)):
        problems.append("%s was not written" % name)
if not rep["finished"]:
    problems.append("the report says the run did not finish")
for c in rep["checks"]:
    if c["status"] == "fail":
        problems.append("%s failed: %s %s" % (c["id"], c["figures"], c["detail"]))
if mode == "simulate":
    # every check that can run on the simulated node ran and passed (the loader-cache one needs root)
    must_pass = ["kit-binaries", "sim-record", "limit-driver-api", "limit-vs-driver", "shared-limit",
                 "compute-share", "compute-share-pair", "compute-share-long-graphs", "startup-256",
                 "kill-safety", "attribution", "cuda-check", "host-pid", "procaddr-variants",
                 "module-load-neighbour", "ipc-import", "fork-slots", "free-after-many-cycles",
                 "nvml-view-pynvml", "vllm-start", "graph-capture-alloc"]
    if os.geteuid() == 0:
        must_pass.append("driver-by-loader-cache")
    for cid in must_pass:
        st = checks.get(cid, {}).get("status")
        if st != "pass":
            problems.append("%s: %s, expected pass on the simulated node" % (cid, st))
    for c in rep["checks"]:
        if c["status"] == "skip" and c["id"] not in must_pass and "simulated node" not in c["detail"] \
                and c["id"] != "driver-by-loader-cache":
            problems.append("%s skipped for another reason than the simulated node: %s" % (c["id"], c["detail"]))
    # tests/runner.py's skip rule: the real-GPU checks are skipped here, so the run exits 77, never 0
    want = 77 if any(c["status"] == "skip" for c in rep["checks"]) else 0
    if rc != want:
        problems.append("run.sh exited %d, expected %d" % (rc, want))
else:
    for c in rep["checks"]:
        if c["id"] in ("environment", "kit-binaries"):
            continue  # needs no driver: information, and the binaries loading here
        if c["status"] != "skip" or "no NVIDIA driver" not in c["detail"]:
            problems.append("%s: %s (%s), expected skipped: no NVIDIA driver" % (c["id"], c["status"], c["detail"]))
    if rc != 77:
        problems.append("run.sh exited %d without a driver, expected 77 (checks skipped)" % rc)
print("hwkit %s: %d checks, %s" % (mode, len(rep["checks"]), rep["summary"]))
for p in problems:
    print("FAIL " + p)
sys.exit(1 if problems else 0)
EOF
