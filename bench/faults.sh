#!/usr/bin/env bash
# The reliability section of docs/BENCHMARKS.md, on stdout (bench/run.sh --only faults writes it): `make faults`
# (tests/faults/faults.py: SIGKILL of the real agent at the named points of docs/sharing.md, "Crash safety",
# restart on the same state dir, the kubelet stand-in's books checked after every restart) with fixed seeds,
# every seed's summary lines as faults.py printed them.
#   bench/faults.sh [BUILD_DIR]      FAULTS_SEEDS="20261123 7 424242" KILLS=120 (BENCH_QUICK=1: one seed, 30 kills)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-build}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
seeds=${FAULTS_SEEDS:-20261123 7 424242}
kills=${KILLS:-120}
if [ "${BENCH_QUICK:-0}" = 1 ]; then seeds=${FAULTS_SEEDS:-20261123}; kills=${KILLS:-30}; fi
topo="$root/tests/data/topologies/seed000-8gpu-pcie-2socket.topo"
echo "The real agent on the simulated seed node (8 × P40), the grpcio kubelet stand-in admitting a stream of pods"
echo "(ten core+memory shapes in random order, 15 % whole GPUs, following the agent's preferences, pods ending at"
echo "random), SIGKILL at the named points, restart on the same state dir. Over-committed GPUs, limits files looser"
echo "than their grant, split containers and the agent's invariant violations fail the run; refused pairs are"
echo "reported. Each seed: \`make faults KILLS=$kills SEED=<seed>\`."
echo
status=0
for seed in $seeds; do
        echo "Seed $seed:"
        echo
        echo '```'
        /usr/bin/python3 "$root/tests/faults/faults.py" --build "$build" --source "$root" --topology "$topo" \
                --kills "$kills" --max-seconds 900 --seed "$seed" 2>/dev/null | grep -E '^(faults:|PASS|FAIL|runner:)' ||
                status=1
        echo '```'
        echo
done
exit $status
