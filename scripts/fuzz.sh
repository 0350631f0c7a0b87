#!/usr/bin/env bash
# Long libFuzzer campaigns: runs every fuzz target of a clang build made with GPUSLICE_FUZZ=ON
# (normally build-asan: ASan + UBSan + libFuzzer) for SECONDS each, one after the other.
#
#   scripts/fuzz.sh BUILD_DIR [SECONDS] [TARGET...]      (make fuzz FUZZ_SECONDS=N)
#
# New inputs go to a scratch corpus in the build dir (BUILD_DIR/fuzz-campaign/corpus-NAME, first
# directory, the one libFuzzer writes); the committed seeds tests/fuzz/corpus/NAME come second and
# are only read. Crashes, leaks and timeouts land in BUILD_DIR/fuzz-campaign/artifacts-NAME/ and the
# log of each run in BUILD_DIR/fuzz-campaign/NAME.log. The last line is a summary; exit 1 if any
# target found something. FUZZ_JOBS (default 1) and FUZZ_ARGS (extra libFuzzer flags) are honoured.
set -u
build=${1:?usage: scripts/fuzz.sh BUILD_DIR [SECONDS] [TARGET...]}
build=$(cd "$build" 2>/dev/null && pwd) || { echo "no build dir ${1}" >&2; exit 2; }
secs=${2:-300}
shift $(( $# >= 2 ? 2 : 1 ))
src=$(cd "$(dirname "$0")/.." && pwd)
seeds=$src/tests/fuzz/corpus
bin=$build   # CMAKE_RUNTIME_OUTPUT_DIRECTORY is the build root
out=$build/fuzz-campaign

if ! grep -q '^GPUSLICE_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "$build is not a GPUSLICE_FUZZ=ON build (try: make asan)" >&2
  exit 2
fi
if [ $# -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in "$bin"/fuzz-*; do
    [ -x "$f" ] && [ -f "$f" ] && targets+=("${f##*/fuzz-}")
  done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "no fuzz targets in $bin (build first: make asan)" >&2
  exit 2
fi

mkdir -p "$out"
failed=0
printf '%-20s %8s %12s %8s %s\n' target seconds execs corpus result
for t in "${targets[@]}"; do
  exe=$bin/fuzz-$t
  if [ ! -x "$exe" ]; then echo "$t: no $exe" >&2; failed=$((failed+1)); continue; fi
  corpus=$out/corpus-$t
  arts=$out/artifacts-$t
  mkdir -p "$corpus" "$arts"
  dirs=("$corpus")
  [ -d "$seeds/$t" ] && dirs+=("$seeds/$t")
  log=$out/$t.log
  # -jobs=1 forks one worker that writes fuzz-0.log in the cwd: run from the output dir.
  # FUZZ_ARGS is a list of libFuzzer flags: split on purpose.
  # shellcheck disable=SC2086
  (cd "$out" && "$exe" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$arts/" ${FUZZ_JOBS:+-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS"} ${FUZZ_ARGS:-} \
      "${dirs[@]}") >"$log" 2>&1
  rc=$?
  [ -n "${FUZZ_JOBS:-}" ] && cat "$out"/fuzz-*.log >>"$log" 2>/dev/null && rm -f "$out"/fuzz-*.log
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{s+=$2} END {print s+0}')
  n=$(find "$corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then res=ok; else res="FOUND (rc=$rc, see $log and $arts)"; failed=$((failed+1)); fi
  printf '%-20s %8s %12s %8s %s\n' "$t" "$secs" "$execs" "$n" "$res"
done
echo "${#targets[@]} targets, $failed with findings"
[ $failed -eq 0 ]
