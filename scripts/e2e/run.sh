#!/usr/bin/env bash
# `make e2e`: gpuslice on real Kubernetes 1.20 (docs/e2e.md).
#
#   scripts/e2e/run.sh BUILD_DIR [test_whole.py[:test_name,...] ...]
#
# 1. makes sure the Kubernetes binaries are in the cache (scripts/e2e/k8s-build.sh: built once from
#    Debian's source package, ~9 min on 2 cores; later runs start at once);
# 2. runs every tests/e2e/test_*.py (or the files named) with /usr/bin/python3, each starting its own
#    cluster in a new /tmp/gpuslice-e2e-* directory that is removed at its end (also when it fails or
#    times out: GPUSLICE_E2E_TIMEOUT seconds per file, default 1500);
# 3. prints each test's line, the wall time, the peak memory of everything it started (RSS summed over
#    its processes, sampled every 2 s, in a memory cgroup of its own when cgroup v1 is there) and, last,
#    `N passed, N failed` alone on a line.
# GPUSLICE_E2E_KEEP=1 keeps the cluster of a one-test run up for debugging (see docs/e2e.md).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=$(cd "${1:-build}" && pwd) || { echo "run.sh: no build dir ${1:-build}"; echo "0 passed, 1 failed"; exit 1; }
shift || true
export GPUSLICE_E2E_BUILD=$BUILD
PY=/usr/bin/python3
T0=$SECONDS

if ! scripts/e2e/k8s-build.sh >/dev/null; then
	echo "e2e: the Kubernetes binaries could not be built (above: the step that failed)"
	echo "0 passed, 1 failed"
	exit 1
fi
echo "e2e: Kubernetes binaries ready after $((SECONDS - T0)) s"

# everything below runs in a memory cgroup of our own, to measure the cluster's peak
CG=""
if [[ -d /sys/fs/cgroup/memory && -w /sys/fs/cgroup/memory ]]; then
	CG=/sys/fs/cgroup/memory/gpuslice-e2e-$$
	mkdir -p "$CG" && echo $$ >"$CG/cgroup.procs" 2>/dev/null || CG=""
fi
PEAK_FILE=$(mktemp /tmp/gpuslice-e2e-peak.XXXXXX)
echo 0 >"$PEAK_FILE"
sample() {
	local peak=0 sum pid rss
	while sleep 2; do
		sum=0
		if [[ -n $CG ]]; then pids=$(cat "$CG/cgroup.procs" 2>/dev/null); else pids=$(pgrep -s 0 2>/dev/null); fi
		for pid in $pids; do
			{ read -r _ rss _ <"/proc/$pid/statm"; } 2>/dev/null || continue
			sum=$((sum + rss * 4))
		done
		((sum > peak)) && { peak=$sum; echo "$peak" >"$PEAK_FILE"; }
	done
}
sample &
SAMPLER=$!
cleanup() {
	kill "$SAMPLER" 2>/dev/null
	wait "$SAMPLER" 2>/dev/null
	rm -f "$PEAK_FILE"
	if [[ -n $CG ]]; then
		echo $$ >/sys/fs/cgroup/memory/cgroup.procs 2>/dev/null
		rmdir "$CG" 2>/dev/null
	fi
}
trap cleanup EXIT

files=()
if (($# > 0)); then
	for a in "$@"; do files+=("$a"); done
else
	for f in tests/e2e/test_*.py; do files+=("$(basename "$f")"); done
fi

passed=0
failed=0
for spec in "${files[@]}"; do
	f=${spec%%:*}
	names=()
	[[ $spec == *:* ]] && IFS=, read -r -a names <<<"${spec#*:}"
	[[ -f tests/e2e/$f ]] || { echo "FAIL $f: no such file in tests/e2e"; failed=$((failed + 1)); continue; }
	t1=$SECONDS
	echo "e2e: $f"
	out=$(mktemp /tmp/gpuslice-e2e-out.XXXXXX)
	timeout -k 30 "${GPUSLICE_E2E_TIMEOUT:-1500}" "$PY" "tests/e2e/$f" "${names[@]}" 2>&1 | tee "$out" |
		grep -E --line-buffered '^(ok|PASS|FAIL|SKIP) |cluster up|^GPUSLICE_E2E_KEEP'
	rc=${PIPESTATUS[0]}
	p=$(grep -cE '^(ok|PASS) ' "$out")
	n=$(grep -cE '^(FAIL|SKIP) ' "$out")
	if ((rc != 0 && n == 0)); then
		n=1
		echo "FAIL $f: exit $rc without a test result; last lines:"
		tail -n 25 "$out" | sed 's/^/    /'
	elif ((n > 0)); then
		echo "---- $f output (failures above) ----"
		grep -vE '^(ok|PASS|FAIL|SKIP) ' "$out" | tail -n 60 | sed 's/^/    /'
	fi
	# a run killed by the timeout cannot clean up after itself: remove what it left (unless asked to
	# keep it for reading the logs)
	[[ ${GPUSLICE_E2E_KEEP_DIR:-} == 1 ]] || grep -o '/tmp/gpuslice-e2e-[A-Za-z0-9_]*' "$out" | sort -u | while read -r d; do
		[[ -d $d ]] && "$PY" tests/e2e/cluster.py reap "$d"
	done
	rm -f "$out"
	passed=$((passed + p))
	failed=$((failed + n))
	echo "e2e: $f: $p passed, $n failed in $((SECONDS - t1)) s"
done
echo "e2e: wall time $((SECONDS - T0)) s; peak memory of the clusters (RSS summed) $(($(cat "$PEAK_FILE") / 1024)) MiB"
echo "$passed passed, $failed failed"
((failed == 0 && passed > 0))
