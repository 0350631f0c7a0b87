#!/usr/bin/env bash
# The allocator benchmark's section of docs/BENCHMARKS.md, on stdout (bench/run.sh --only alloc writes it).
#
#   bench/alloc.sh [BUILD_DIR]      (default: build)
#   BENCH_QUICK=1 bench/alloc.sh    a short run for trying things out (fewer samples and events)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
quick=()
[ "${BENCH_QUICK:-0}" = 1 ] && quick=(--quick)

bin="$build/alloc-bench"
if [ ! -x "$bin" ]; then
        echo "bench/alloc.sh: $bin not found; build first (cmake --build $build --target alloc-bench)" >&2
        exit 1
fi
cc="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n1)"
cc_version="$("${cc:-cc}" --version 2>/dev/null | head -n1 || true)"
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n1)"
cflags="$(sed -n 's/^CMAKE_C_FLAGS_RELWITHDEBINFO:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n1)"

echo "- Ran \`$(basename "$build")/alloc-bench${quick[*]:+ ${quick[*]}}\`; build: ${build_type:-unknown}${cflags:+, flags \`${cflags}\`}; ${cc_version:-unknown compiler}; $(uname -sr)."
echo "- All ratios compare policies measured in this same run, on the same requests and job sequences."
echo "- Timings are the calling thread's CPU time (the \"max wall\" column shows wall-clock outliers, which"
echo "  other work on the machine makes)."
echo "- Topologies: the five files of tests/data/topologies/ and six synthetic nodes built in the bench"
echo "  (16 and 64 GPUs: PCIe trees, NVSwitch boards on a PCIe tree, DGX-1 hybrid cube meshes side by side)."
echo "- Baselines: random, first-fit, greedy best-now, NVIDIA's partition-based best-effort (capped: it"
echo "  enumerates (n-1)!! partitions; when it gives up it uses the best partition seen so far, and the"
echo "  tables say how often), and an exhaustive myopic best-now up to 16 GPUs. How gpuslice decides:"
echo "  [allocator.md](allocator.md)."
echo
"$bin" "${quick[@]}"
