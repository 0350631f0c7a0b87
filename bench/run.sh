#!/usr/bin/env bash
# `make bench`: every benchmark of gpuslice, one after the other, on an already built tree.
#
#   bench/run.sh [BUILD_DIR]     (default: build)
#   BENCH_QUICK=1 bench/run.sh   shorter runs, for trying things out
#
# The allocator and interposer benchmarks rewrite their own sections of docs/BENCHMARKS.md
# (between BEGIN/END markers); the node agent and monitor benchmarks print their tables, which
# are also kept in BUILD_DIR/bench/, and their sections of docs/BENCHMARKS.md carry the numbers
# with the reading of them. Not tests: nothing here passes or fails on a number.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
out="$build/bench"
mkdir -p "$out"
quick=()
[ "${BENCH_QUICK:-0}" = 1 ] && quick=(--quick)

echo "== machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n1); load $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== allocator (bench/alloc.sh)"
"$here/alloc.sh" "$build"

if [ -f "$build/libgpuslice-cuda.so" ]; then
        echo "== CUDA interposer (bench/interposer.sh)"
        "$here/interposer.sh" "$build" "${quick[@]}" --write
fi

echo "== node agent (bench/agent-bench.py)"
agent_quick=()
[ "${BENCH_QUICK:-0}" = 1 ] && agent_quick=(--wakeup-seconds 10 --iterations 300 --rounds 3)
/usr/bin/python3 "$here/agent-bench.py" --build "$build" --source "$root" --topologies "$root/tests/data/topologies" --markdown \
        "${agent_quick[@]}" | tee "$out/agent.md"

echo "== node agent honouring the scheduler's assignment (bench/assign-bench.py)"
/usr/bin/python3 "$here/assign-bench.py" --build "$build" --source "$root" | tee "$out/assign.md"

echo "== monitor (bench/monitor-bench.c)"
env LD_LIBRARY_PATH="$build/sim" GPUSLICE_SIM_NODE="$root/tests/integration/monitor-seed002.node" \
        GPUSLICE_SIM_STATE="$out/monitor-bench.state" GPUSLICE_BENCH_SIM_CLI="$build/sim/gpuslice-sim" \
        "$build/monitor-bench" --markdown | tee "$out/monitor.md"

echo "== cluster view (bench/inspect.sh)"
"$here/inspect.sh" "$build" | tee "$out/inspect.md"
echo "== scheduler extender (bench/sched-bench.c)"
"$build/sched-bench" --markdown | tee "$out/sched.md"

echo "== operator page at 1,000 nodes (bench/ui-bench.py, headless Chromium)"
ui_quick=()
[ "${BENCH_QUICK:-0}" = 1 ] && ui_quick=(--loads 2)
/usr/bin/python3 "$here/ui-bench.py" --build "$build" --markdown "${ui_quick[@]}" | tee "$out/ui.md"

echo "== cluster packing on the openb trace (bench/replay.sh)"
trace="${TRACE:-}"
if [ -n "$trace" ] && [ -f "$trace/openb_node_list_gpu_node.csv" ]; then
        "$here/replay.sh" "$build" "$trace"
else
        echo "bench/run.sh: no openb trace (TRACE=DIR, make bench passes ../shared/data/openb): replay benchmark not run"
fi

echo "bench/run.sh: done; tables in ${out#"$root"/}/, allocator and interposer sections in docs/BENCHMARKS.md"
