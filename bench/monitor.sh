#!/usr/bin/env bash
# The monitor benchmark's section of docs/BENCHMARKS.md, on stdout (bench/run.sh --only monitor writes it):
# bench/monitor-bench.c on the simulated seed node of tests/integration/monitor-seed002.node.
#   bench/monitor.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
env LD_LIBRARY_PATH="$build/sim" GPUSLICE_SIM_NODE="$root/tests/integration/monitor-seed002.node" \
        GPUSLICE_SIM_STATE="$tmp/monitor-bench.state" GPUSLICE_BENCH_SIM_CLI="$build/sim/gpuslice-sim" \
        "$build/monitor-bench" --markdown
