#!/usr/bin/env bash
# `make bench`: every benchmark of gpuslice on an already built tree, each writing its own section of
# docs/BENCHMARKS.md through bench/section.py (stamped with the commit, the measured paths, the machine
# and the load at start and end; `make lint`'s `benchstamps` kind refuses a stale or unknown stamp).
#
#   bench/run.sh [--only NAME[,NAME...]] [--list] [BUILD_DIR]     (default: build, every section)
#   --list: each section, its command, the commit its figures in docs/BENCHMARKS.md are from (or "missing")
#   BENCH_QUICK=1 bench/run.sh ...   shorter runs, for trying things out (the stamp's command says so)
#
# A section is one line of the table below: NAME|TITLE|PATHS|COMMAND. PATHS (comma-separated, relative to
# the repository root) are the code its figures measure: change any of them after the stamped commit and
# the check asks for a re-run. COMMAND is run from the repository root with $build set; it prints the
# section's markdown body on stdout (progress on stderr) and exits 0, or nothing is written.
# To add a section (the replay benchmark, say): one more line here, a script that prints markdown, then
# `bench/run.sh --only NAME` and commit the result with the code it measured already committed.
# Measure on a clean tree (at least under PATHS): a dirty run is stamped dirty=yes and the check refuses it.
# Not tests: nothing here passes or fails on a number.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
only=""
list=0
build=build
while [ $# -gt 0 ]; do
        case "$1" in
        --only) only=$2; shift 2 ;;
        --only=*) only=${1#--only=}; shift ;;
        --list) list=1; shift ;;
        -*) echo "usage: $0 [--only NAME[,NAME...]] [--list] [BUILD_DIR]" >&2; exit 2 ;;
        *) build=$1; shift ;;
        esac
done
case "$build" in /*) ;; *) build="$root/$build" ;; esac
export build root here
quick=0
[ "${BENCH_QUICK:-0}" = 1 ] && quick=1
export quick

# shellcheck disable=SC2016 # the commands are expanded by bash -c below, with $build and $quick exported
sections=(
'alloc|Allocator|src/alloc,src/topo,bench/alloc-bench.c,bench/alloc.sh,tests/data/topologies|bench/alloc.sh "$build"'
'interposer|CUDA interposer (`libgpuslice-cuda.so`)|src/interposer,src/cli/cmd-run.c,sim,bench/interposer.sh,bench/interposer,bench/interposer-memacc.c,tests/interposer/cuda-workload.c|bench/interposer.sh "$build"'
'agent|Node agent (`gpuslice node`)|src/agent,src/rpc,src/util,src/nvml,src/alloc,src/topo,src/state,sim,bench/agent-bench.py,tests/integration/kubelet_standin.py|/usr/bin/python3 bench/agent-bench.py --build "$build" --source . --topologies tests/data/topologies --markdown $( [ "$quick" = 1 ] && echo --wakeup-seconds 10 --iterations 300 --rounds 3)'
'assign|Node agent honouring the scheduler'"'"'s assignment|src/agent,src/kube,src/rpc,src/util,sim,bench/assign-bench.py,tests/integration/agent_fixture.py,tests/integration/kube_standin.py,tests/integration/kubelet_standin.py|/usr/bin/python3 bench/assign-bench.py --build "$build" --source .'
'monitor|Monitor (`/metrics`, `gpuslice monitor`)|src/monitor,src/metrics,src/util,sim,bench/monitor-bench.c,tests/unit/monitor-format-ref.c,tests/integration/monitor-seed002.node|bench/monitor.sh "$build"'
'inspect|Cluster view (`gpuslice inspect`, the Kubernetes client)|src/kube,src/cluster,src/cli,src/util,bench/inspect.sh,bench/inspect-kube-bench.c,bench/inspect_bench.py|bench/inspect.sh "$build"'
'sched|Scheduler extender (`gpuslice scheduler`)|src/sched,src/alloc,src/topo,src/util,bench/sched-bench.c|"$build/sched-bench" --markdown'
'ui|Operator page at 1,000 nodes (`gpuslice scheduler`'"'"'s `/ui`)|src/sched,src/http,bench/ui-bench.py,tests/integration/browser.py,tests/integration/test_ui.py|/usr/bin/python3 bench/ui-bench.py --build "$build" --markdown $( [ "$quick" = 1 ] && echo --loads 2)'
'dra|DRA: the scheduler'"'"'s pick of a multi-GPU claim|src/dra,src/alloc,src/topo,bench/dra-pick.c,tests/data/topologies|"$build/dra-pick"'
'faults|Reliability: SIGKILL on the fractional path (`make faults`)|src/agent,src/state,src/util,src/rpc,sim,bench/faults.sh,tests/faults/faults.py,tests/integration/agent_fixture.py,tests/integration/test_share.py,tests/integration/kubelet_standin.py|bench/faults.sh "$build"'
'sched-e2e|Scheduler extender end to end: pods bound per second on kube-scheduler 1.20|src/sched,src/http,src/kube,bench/sched-e2e.py,tests/e2e/cluster.py,tests/e2e/test_scheduler_extender.py|flock /tmp/gpuslice-e2e.lock /usr/bin/python3 bench/sched-e2e.py --build "$build"'
'replay|Cluster packing: `gpuslice replay` of the openb trace|src/sched,src/cluster,src/cli/cmd-replay.c,bench/replay.sh,bench/replay-report.py,bench/replay-sample.py|bench/replay.sh "$build" "${TRACE:?replay: TRACE=DIR, the openb trace (make bench passes ../shared/data/openb)}"'
)

names=()
for s in "${sections[@]}"; do names+=("${s%%|*}"); done
if [ "$list" = 1 ]; then
        # NAME, the command, in docs/BENCHMARKS.md at which commit (or "missing"), the measured paths
        present=$(/usr/bin/python3 "$here/section.py" list 2>/dev/null || true)
        for s in "${sections[@]}"; do
                IFS='|' read -r name _ paths _ <<<"$s"
                at=$(awk -v n="$name" '$1 == n { print $2 }' <<<"$present")
                printf '%-11s bench/run.sh --only %-11s %-14s measures %s\n' "$name" "$name" "${at:-missing}" "$paths"
        done
        exit 0
fi
if [ -n "$only" ]; then
        IFS=',' read -r -a want <<<"$only"
        [ ${#want[@]} -gt 0 ] || { echo "bench/run.sh: --only names no section" >&2; exit 2; }
        for w in "${want[@]}"; do
                case " ${names[*]} " in *" $w "*) ;; *)
                        echo "bench/run.sh: no section '$w' (sections: ${names[*]})" >&2
                        exit 2
                        ;;
                esac
        done
else
        want=("${names[@]}")
fi

failed=()
for s in "${sections[@]}"; do
        IFS='|' read -r name title paths cmd <<<"$s"
        case " ${want[*]} " in *" $name "*) ;; *) continue ;; esac
        shown="bench/run.sh --only $name"
        [ "$quick" = 1 ] && shown="BENCH_QUICK=1 $shown"
        echo "== $name: $cmd" >&2
        if ! /usr/bin/python3 "$here/section.py" write --name "$name" --title "$title" --paths "$paths" \
                --command "$shown" -- bash -c "cd \"\$root\" && $cmd"; then
                failed+=("$name")
        fi
done
if [ ${#failed[@]} -gt 0 ]; then
        echo "bench/run.sh: not written (their command failed): ${failed[*]}" >&2
        exit 1
fi
echo "bench/run.sh: done: ${want[*]}" >&2
