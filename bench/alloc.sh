#!/usr/bin/env bash
# Run the benchmarks of an already built tree and write their results into docs/BENCHMARKS.md.
#
#   bench/alloc.sh [BUILD_DIR]      (default: build; `make bench` runs it through bench/run.sh)
#   BENCH_QUICK=1 bench/alloc.sh ... a short run for trying things out (fewer samples and events)
#
# Each benchmark owns one section of docs/BENCHMARKS.md, between the lines
#   <!-- BEGIN bench:NAME -->  and  <!-- END bench:NAME -->
# A run replaces only the sections it produced; other text and sections stay as they are.
# The tables also go to stdout.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
doc="$root/docs/BENCHMARKS.md"
quick=()
[ "${BENCH_QUICK:-0}" = 1 ] && quick=(--quick)

bin="$build/alloc-bench"
if [ ! -x "$bin" ]; then
        echo "bench/alloc.sh: $bin not found; build first (make bench, or cmake --build $build --target alloc-bench)" >&2
        exit 1
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cpu="$(sed -n 's/^model name[[:space:]]*:[[:space:]]*//p' /proc/cpuinfo | head -n1)"
[ -n "$cpu" ] || cpu="$(uname -m)"
cc="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n1)"
cc_version="$("${cc:-cc}" --version 2>/dev/null | head -n1 || true)"
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n1)"
[ -n "$build_type" ] || build_type="RelWithDebInfo (the project's default)"
cflags="$(sed -n 's/^CMAKE_C_FLAGS_RELWITHDEBINFO:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n1)"
cmd="make bench"
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty=""
git -C "$root" diff --quiet -- src/alloc bench 2>/dev/null || dirty=" (with uncommitted changes in src/alloc or bench)"

echo "bench/alloc.sh: allocator benchmark (${quick[*]:-full run}) ..." >&2
start=$(date +%s)
"$bin" "${quick[@]}" >"$tmp/alloc.md"
secs=$(( $(date +%s) - start ))
cat "$tmp/alloc.md"

{
        echo "## Allocator"
        echo
        echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') at commit \`$commit\`$dirty by"
        echo "\`${cmd}\` (bench/run.sh → bench/alloc.sh), which ran"
        echo "\`$(basename "$build")/alloc-bench${quick[*]:+ ${quick[*]}}\` for ${secs} s."
        echo
        echo "- Machine: $(nproc) CPUs online, model name \"${cpu}\" (/proc/cpuinfo); $(uname -sr)."
        echo "- Build: ${build_type}${cflags:+, flags \`${cflags}\`}; ${cc_version:-unknown compiler}."
        echo "- All ratios compare policies measured in this same run, on the same requests and job sequences."
        echo "- Other work may have shared the machine during the run: timings are the calling thread's CPU time"
        echo "  (the \"max wall\" column shows wall-clock outliers)."
        echo "- Topologies: the five files of tests/data/topologies/ and six synthetic nodes built in the bench"
        echo "  (16 and 64 GPUs: PCIe trees, NVSwitch boards on a PCIe tree, DGX-1 hybrid cube meshes side by side)."
        echo "- Baselines: random, first-fit, greedy best-now, NVIDIA's partition-based best-effort (capped: it"
        echo "  enumerates (n-1)!! partitions; when it gives up it uses the best partition seen so far, and the"
        echo "  tables say how often), and an exhaustive myopic best-now up to 16 GPUs. How gpuslice decides:"
        echo "  [allocator.md](allocator.md)."
        echo
        cat "$tmp/alloc.md"
} >"$tmp/section.md"

# Splice the section into docs/BENCHMARKS.md.
mkdir -p "$(dirname "$doc")"
if [ ! -f "$doc" ]; then
        cat >"$doc" <<'EOF'
# Benchmarks

Numbers measured by `make bench` (`bench/run.sh`). Each section below is rewritten by the benchmark that
owns it; text outside the `BEGIN`/`END` markers is kept. To add a benchmark, give it its own section
markers and let `bench/run.sh` fill them.

EOF
fi
begin="<!-- BEGIN bench:alloc -->"
end="<!-- END bench:alloc -->"
if grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc"; then
        awk -v begin="$begin" -v end="$end" -v section="$tmp/section.md" '
                $0 == begin { print; while ((getline line < section) > 0) print line; skip = 1; next }
                $0 == end   { skip = 0 }
                !skip       { print }
        ' "$doc" >"$tmp/doc.md"
else
        { cat "$doc"; echo; echo "$begin"; cat "$tmp/section.md"; echo "$end"; } >"$tmp/doc.md"
fi
cat "$tmp/doc.md" >"$doc"
echo "bench/alloc.sh: wrote the allocator section of ${doc#"$root"/}" >&2
