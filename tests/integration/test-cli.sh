#!/usr/bin/env bash
# CLI behaviour through the real binary. Prints one line per check and "N passed, N failed".
set -u
BUILD=$1
TOPO=$2 # tests/data/topologies
G="$BUILD/gpuslice"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass+1)); }
bad() { echo "FAIL $1"; fail=$((fail+1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# expect_exit CODE NAME CMD... : the command exits with CODE
expect_exit() {
  local want=$1 name=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?
  if [ "$got" -eq "$want" ]; then ok "$name (exit $got)"; else bad "$name: exit $got, want $want; stderr: $(cat "$tmp/err")"; fi
}
J() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }

# the seed scenario of the foundation issue
out=$("$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 2 --busy 0,1,3,4 --json)
check "seed000: busy 0,1,3,4, count 2 -> 6,7" test "$(J 'print(d["gpus"])' <<<"$out")" = "[6, 7]"
check "seed000: worst link of the pick is PIX" test "$(J 'print(d["worst_link"])' <<<"$out")" = "PIX"
out=$("$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 2 --busy 0,1,3,4)
check "text output names the GPUs" grep -q '^GPUs: *6,7$' <<<"$out"
check "text output gives the docker flag" grep -qF -- "--gpus '\"device=6,7\"'" <<<"$out"

# must-include and the floor
out=$("$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 2 --must-include 5 --json)
check "must-include 5 -> 4,5 (its switch peer)" test "$(J 'print(d["gpus"])' <<<"$out")" = "[4, 5]"
expect_exit 4 "floor PIX with no free PIX pair" "$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 2 --busy 0,2,4,6 --min-link PIX
expect_exit 4 "more GPUs than free" "$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 5 --busy 0,1,2,3
check "not-enough message is clear" grep -qi "only 4 are available" "$tmp/err"

# usage and data errors
expect_exit 2 "missing --count" "$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo"
expect_exit 2 "--count 0" "$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 0
expect_exit 2 "--busy garbage" "$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 1 --busy 1,,x
expect_exit 2 "--busy out of range" "$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 1 --busy 9
expect_exit 2 "--must-include a busy GPU" "$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 2 --busy 1 --must-include 1
expect_exit 2 "--min-link garbage" "$G" alloc --topology "$TOPO/seed000-8gpu-pcie-2socket.topo" --count 1 --min-link FAST
expect_exit 2 "unknown command" "$G" frobnicate
expect_exit 2 "unknown option" "$G" topo --frobnicate
printf 'GPU0 GPU1\nGPU0 X BAD\nGPU1 BAD X\n' > "$tmp/bad.topo"
expect_exit 3 "malformed topology" "$G" topo --topology "$tmp/bad.topo"
check "malformed topology names the line" grep -q "line 2" "$tmp/err"
expect_exit 1 "missing topology file" "$G" topo --topology "$tmp/nope.topo"
for c in topo alloc version; do expect_exit 0 "$c --help" "$G" $c --help; done
expect_exit 0 "--help" "$G" --help

# the printed matrix reads back as the same links, for every reference topology
for f in "$TOPO"/*.topo; do
  n=$(basename "$f")
  "$G" topo --topology "$f" --matrix > "$tmp/m.txt" || { bad "$n: topo --matrix"; continue; }
  a=$("$G" topo --topology "$f" --json | J 'print(d["links"], [g["numa_node"] for g in d["gpus"]])')
  b=$("$G" topo --topology "$tmp/m.txt" --json | J 'print(d["links"], [g["numa_node"] for g in d["gpus"]])')
  check "$n: matrix round trip" test "$a" = "$b"
done
"$G" topo --topology - --json < "$TOPO/dgx-a100-nvswitch.topo" > "$tmp/stdin.json"
check "topology from stdin" test "$(J 'print(len(d["gpus"]))' < "$tmp/stdin.json")" = 8

# the same node through NVML (the simulator, chosen by library path only) agrees with the file
if [ -f "$BUILD/sim/libnvidia-ml.so.1" ]; then
  for f in "$TOPO"/*.topo; do
    n=$(basename "$f")
    export GPUSLICE_SIM_STATE="$tmp/state-$n"
    a=$(LD_LIBRARY_PATH="$BUILD/sim" GPUSLICE_SIM_NODE="$f" "$G" topo --json) || { bad "$n: topo via NVML failed"; continue; }
    b=$("$G" topo --topology "$f" --json)
    ka=$(J 'print(d["links"], [(g["uuid"], g["bus_id"], g["numa_node"], g["minor"], g["name"], g["memory_total_bytes"]) for g in d["gpus"]], d["driver_version"], d["cuda_version"])' <<<"$a")
    kb=$(J 'print(d["links"], [(g["uuid"], g["bus_id"], g["numa_node"], g["minor"], g["name"], g["memory_total_bytes"]) for g in d["gpus"]], d["driver_version"], d["cuda_version"])' <<<"$b")
    check "$n: NVML inventory equals the parsed file" test "$ka" = "$kb"
    if [ "$ka" != "$kb" ]; then diff <(echo "$ka" | tr '(' '\n') <(echo "$kb" | tr '(' '\n') | head -10; fi
  done
  export GPUSLICE_SIM_STATE="$tmp/state-seed"
  out=$(LD_LIBRARY_PATH="$BUILD/sim" GPUSLICE_SIM_NODE="$TOPO/seed000-8gpu-pcie-2socket.topo" "$G" alloc --count 2 --busy 0,1,3,4 --json)
  check "seed000 through NVML -> 6,7" test "$(J 'print(d["gpus"])' <<<"$out")" = "[6, 7]"
  # a lost GPU is shown as lost and never picked
  if [ -x "$BUILD/sim/gpuslice-sim" ]; then
    export GPUSLICE_SIM_NODE="$TOPO/seed000-8gpu-pcie-2socket.topo"
    "$BUILD/sim/gpuslice-sim" lose 7 >/dev/null
    out=$(LD_LIBRARY_PATH="$BUILD/sim" "$G" topo --json)
    check "lost GPU7 reported as lost" test "$(J 'print(d["gpus"][7]["state"])' <<<"$out")" = lost
    out=$(LD_LIBRARY_PATH="$BUILD/sim" "$G" alloc --count 2 --busy 0,1,3,4 --json)
    check "lost GPU7 is not picked" test "$(J 'print(7 in d["gpus"])' <<<"$out")" = False
    "$BUILD/sim/gpuslice-sim" restore 7 >/dev/null
    unset GPUSLICE_SIM_NODE
  else
    bad "gpuslice-sim not built"
  fi
  expect_exit 1 "NVML without a node description" env -u GPUSLICE_SIM_NODE LD_LIBRARY_PATH="$BUILD/sim" "$G" topo
  # gpuslice sim record: the node read back through the simulator loaded with the recording answers the same
  { cat "$TOPO/dgx-a100-nvswitch.topo"; echo; echo "cuda context=504MiB"; echo "unsupported process-utilization"; \
    echo 'default name="NVIDIA H100 80GB HBM3" memory=80GiB sms=132 cc=9.0'; echo "gpu 3 mig=on"; } >"$tmp/orig.node"
  sim() { GPUSLICE_SIM_NODE=$1 GPUSLICE_SIM_STATE="$tmp/state-$2" LD_LIBRARY_PATH="$BUILD/sim" "${@:3}"; }
  expect_exit 0 "sim record" sim "$tmp/orig.node" a "$G" sim record -o "$tmp/rec.node"
  check "sim record: a context's cost measured through NVML" grep -qx "cuda context=504MiB" "$tmp/rec.node"
  check "sim record: unsupported process utilization" grep -qx "unsupported process-utilization" "$tmp/rec.node"
  check "sim record: MIG mode read" grep -q "^gpu 3 .* mig=on" "$tmp/rec.node"
  check "sim record: SM counts from the CUDA driver" grep -q "^gpu 0 .* sms=" "$tmp/rec.node"
  sim "$tmp/orig.node" a "$G" topo --json >"$tmp/orig.json"
  sim "$tmp/rec.node" b "$G" topo --json >"$tmp/rec.json"
  check "sim record: topo --json of the recording equals the original's" cmp -s "$tmp/orig.json" "$tmp/rec.json"
  expect_exit 0 "sim record --no-cuda" sim "$tmp/orig.node" a "$G" sim record --no-cuda
  if grep -q "^cuda" "$tmp/out"; then bad "sim record --no-cuda: recorded a context cost"; else ok "sim record --no-cuda: no context cost"; fi
  expect_exit 2 "sim without record" "$G" sim
  rm -f "$tmp"/state-* "$tmp"/state-*.launch
else
  bad "simulator not built ($BUILD/sim/libnvidia-ml.so.1)"
fi
expect_exit 1 "NVML library that does not exist" "$G" topo --nvml-library "$tmp/libnvidia-ml.so.1"
check "NVML failure message suggests --topology" grep -q -- "--topology" "$tmp/err"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
