#!/usr/bin/env bash
# The CUDA interposer's section of docs/BENCHMARKS.md, on stdout (bench/run.sh --only interposer writes
# it), measured against the simulated driver of an already built tree:
#   1. added cost per hooked call (valgrind --tool=callgrind instruction counts, hooked vs direct) for
#      cuLaunchKernel, cuMemAlloc, cuMemGetInfo, cuCtxSetLimit, a module load and context creation, and
#      the once-per-process cost of cuInit + the first context (the NVML queries of a first context);
#   2. memory-limit accuracy over randomized allocation sequences (bench/interposer-memacc.c);
#   3. compute-share accuracy: targets 10…90 % alone, and pairs 10:90 and 30:70 of two containers on
#      one GPU, on simulated GPUs with 20 and 132 SMs, repeated RUNS times (default 3): every run's
#      figure is reported (median and range per cell; min/median/max deviation over all of them).
#
#   bench/interposer.sh [BUILD_DIR] [--quick] [--runs N]
#     --quick  shorter runs (fewer targets, 2 s instead of 4 s per run, 2 repetitions); also BENCH_QUICK=1
# Needs valgrind for part 1 (the section says so when it is missing).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="build"
quick=0
[ "${BENCH_QUICK:-0}" = 1 ] && quick=1
runs=""
while [ $# -gt 0 ]; do
        case "$1" in
        --quick) quick=1; shift ;;
        --runs) runs=$2; shift 2 ;;
        *) build="$1"; shift ;;
        esac
done
[ -n "$runs" ] || { [ $quick = 1 ] && runs=2 || runs=3; }
case "$build" in /*) ;; *) build="$root/$build" ;; esac
WL="$build/cuda-workload"
IP="$build/libgpuslice-cuda.so"
GS="$build/gpuslice"
MA="$build/interposer-memacc"
for f in "$WL" "$IP" "$GS" "$MA" "$build/sim/libcuda.so.1"; do
        if [ ! -e "$f" ]; then
                echo "bench/interposer.sh: $f not found; build first (cmake --build $build --target bench-interposer)" >&2
                exit 1
        fi
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH="$build/sim"
node30="$root/tests/data/topologies/dgx-a100-nvswitch.topo"
out="$tmp/report.md"

limits() { # limits FILE MEMORY CORE
        printf 'gpuslice-limits 1\ncontainer bench\nregion %s/region\ndevice 0 memory=%s core=%s\n' "$tmp" "$2" "$3" >"$1"
}

echo "Against the simulated driver (\`build/sim/libcuda.so.1\`)." >"$out"
echo >>"$out"

# ---- 1. instructions per call ----
echo "### Interposer: added cost per call (instructions, callgrind)" >>"$out"
echo >>"$out"
if command -v valgrind >/dev/null; then
        limits "$tmp/limits-mem" 17179869184 100 # limits set, none near: the fast path
        limits "$tmp/limits-core" 17179869184 50 # a compute share: the throttle path
        # As in a container: the process sees its one GPU.
        export GPUSLICE_SIM_NODE="$node30" GPUSLICE_SIM_STATE="$tmp/sim-state-30" CUDA_VISIBLE_DEVICES=0
        ir() { # ir [VAR=VALUE...] PROGRAM ARGS...: total instructions of one run under callgrind
                local vars=()
                while [[ "$1" == *=* ]]; do vars+=("$1"); shift; done
                env "${vars[@]}" valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
                        sed -n 's/.*Collected : \([0-9]*\).*/\1/p' | tail -n1
        }
        per_call() { # per_call MODE STEP...: (Ir(N2) - Ir(N1)) / (N2 - N1)
                local mode="$1"
                shift
                local env=()
                case "$mode" in
                direct) env=() ;;
                nolimits) env=(LD_PRELOAD="$IP") ;;
                mem) env=(LD_PRELOAD="$IP" GPUSLICE_LIMITS="$tmp/limits-mem") ;;
                core) env=(LD_PRELOAD="$IP" GPUSLICE_LIMITS="$tmp/limits-core") ;;
                esac
                local n1=1000 n2=6000 a b
                a=$(ir "${env[@]}" "$WL" init "${@//N/$n1}")
                b=$(ir "${env[@]}" "$WL" init "${@//N/$n2}")
                echo $(((b - a) / (n2 - n1)))
        }
        echo "| call | direct | hooked, no limits file | hooked, memory limit not near | hooked, 50 % core share | added (limits set) |" >>"$out"
        echo "|---|---:|---:|---:|---:|---:|" >>"$out"
        for call in launch alloc info limit module ctx; do
                case "$call" in
                launch) name="cuLaunchKernel (1 block, 0 µs)"; step=(launch N 1 0) ;;
                alloc) name="cuMemAlloc (4 KiB, kept)"; step=(allocn N 4096) ;;
                info) name="cuMemGetInfo"; step=(infoloop N) ;;
                limit) name="cuCtxSetLimit (malloc heap, 16/24 MiB in turn)"; step=(limitloop N) ;;
                module) name="cuModuleLoadData + cuModuleUnload (measured load)"; step=(moduleloop N) ;;
                ctx) name="cuCtxCreate + cuCtxDestroy (context cost measured at creation)"; step=(ctxloop N) ;;
                esac
                d=$(per_call direct "${step[@]}")
                p=$(per_call nolimits "${step[@]}")
                m=$(per_call mem "${step[@]}")
                if [ "$call" = launch ]; then c=$(per_call core "${step[@]}"); else c="—"; fi
                echo "| $name | $d | $p | $m | $c | +$((m - d)) |" >>"$out"
        done
        echo >>"$out"
        echo "Once per process (whole process: loader, \`cuInit\`, the first context made current; instructions):" >>"$out"
        echo >>"$out"
        echo "| run | direct | hooked, no limits file | hooked, memory limit not near | hooked, 50 % core share | added (limits set) |" >>"$out"
        echo "|---|---:|---:|---:|---:|---:|" >>"$out"
        d=$(ir "$WL" init)
        p=$(ir LD_PRELOAD="$IP" "$WL" init)
        m=$(ir LD_PRELOAD="$IP" GPUSLICE_LIMITS="$tmp/limits-mem" "$WL" init)
        c=$(ir LD_PRELOAD="$IP" GPUSLICE_LIMITS="$tmp/limits-core" "$WL" init)
        echo "| cuInit + first context | $d | $p | $m | $c | +$((m - d)) |" >>"$out"
        echo >>"$out"
        echo "Each figure is (Ir(6000 calls) − Ir(1000 calls)) / 5000 for the whole process, so it includes" \
             "the simulated driver's own work (the \"direct\" column); the interposer's cost is the difference." \
             "The 50 % column includes the throttle's clock read and CAS (kernels of 0 µs never make it wait)" \
             "and the controller thread's periodic work spread over the calls. The once-per-process row is one" \
             "run of \`cuda-workload init\`: the interposer's constructor, its limits file and region, and" \
             "what it asks NVML at the first context." >>"$out"
        unset CUDA_VISIBLE_DEVICES
else
        echo "valgrind not installed: skipped." >>"$out"
fi
echo >>"$out"

# ---- 2. memory-limit accuracy ----
echo "### Interposer: memory-limit accuracy (randomized sequences)" >>"$out"
echo >>"$out"
export GPUSLICE_SIM_NODE="$node30" GPUSLICE_SIM_STATE="$tmp/sim-state-30"
seeds=20
steps=2000
[ $quick = 1 ] && seeds=5 && steps=500
echo "| limit | sequences × steps | granted | refused | exact-fit requests | bytes over the limit | false OOM | wrong cuMemGetInfo |" >>"$out"
echo "|---|---:|---:|---:|---:|---:|---:|---:|" >>"$out"
for lim in 268435456 67108865; do
        limits "$tmp/limits-acc" "$lim" 100
        tot=(0 0 0 0 0 0 0)
        for seed in $(seq 1 $seeds); do
                line=$(env LD_PRELOAD="$IP" GPUSLICE_LIMITS="$tmp/limits-acc" "$MA" "$lim" "$seed" $steps | tail -n1) || true
                read -r _ _ _ _ _ al _ oo _ ex _ ov _ fo _ ie <<<"$line"
                tot=($((tot[0] + 1)) $((tot[1] + al)) $((tot[2] + oo)) $((tot[3] + ex)) $((tot[4] + ov)) $((tot[5] + fo)) $((tot[6] + ie)))
        done
        echo "| $lim B | ${tot[0]} × $steps | ${tot[1]} | ${tot[2]} | ${tot[3]} | ${tot[4]} | ${tot[5]} | ${tot[6]} |" >>"$out"
done
echo >>"$out"
echo "Sizes are log-uniform from 1 B to a quarter of the limit; half the requests ask for exactly the last free" \
     "byte, 5 % for one byte more. Every answer is checked against an exact model of the container's usage." >>"$out"
echo >>"$out"

# ---- 3. compute-share accuracy ----
echo "### Interposer: compute-share accuracy" >>"$out"
echo >>"$out"
dur=4
targets=(10 20 30 40 50 60 70 80 90)
if [ $quick = 1 ]; then dur=2; targets=(10 50 90); fi
share() { # share NODE SMS CORE BLOCKS US -> measured utilization (percent, 1 decimal) of the second half
        local line late
        line=$(GPUSLICE_SIM_NODE="$1" GPUSLICE_SIM_STATE="$tmp/sim-state-$2" "$GS" run --gpu 0 --core "$3" -- "$WL" init spin "$dur" "$4" "$5" | tail -n1)
        late=$(sed -n 's/.*late \([0-9]*\).*/\1/p' <<<"$line")
        awk -v l="$late" -v b="$4" -v us="$5" -v s="$2" -v d="$dur" 'BEGIN { printf "%.1f", l * b * us / (s * d / 2 * 1e6) * 100 }'
}
echo "Kernels of one full wave (blocks = SMs, 1 ms each), or a fixed grid of 660 blocks of 100 µs (33 waves" \
     "on 20 SMs, 5 on 132: one launch costs 6.6 times more GPU on the small GPU); utilization = SM-busy time of the" \
     "container's kernels / (SMs × time), over the second half of a ${dur} s run (the controller's settling" \
     "excluded). Hard policy: the share holds even with the GPU otherwise idle. Every cell was measured" \
     "$runs times in this run, one after the other: the cell shows the median and, in brackets, the lowest" \
     "and highest of the $runs." >>"$out"
echo >>"$out"
# every measurement: "KIND CELL RUN TARGET MEASURED" in $tmp/shares
: >"$tmp/shares"
for run in $(seq 1 "$runs"); do
        echo "bench/interposer.sh: compute shares, run $run of $runs ..." >&2
        for t in "${targets[@]}"; do
                echo "alone $t-20 $run $t $(share "$here/interposer/gpu20.node" 20 "$t" 20 1000)" >>"$tmp/shares"
                echo "alone $t-132 $run $t $(share "$here/interposer/gpu132.node" 132 "$t" 132 1000)" >>"$tmp/shares"
                echo "alone $t-20g $run $t $(share "$here/interposer/gpu20.node" 20 "$t" 660 100)" >>"$tmp/shares"
                echo "alone $t-132g $run $t $(share "$here/interposer/gpu132.node" 132 "$t" 660 100)" >>"$tmp/shares"
        done
        for pair in "10 90" "30 70"; do
                read -r x y <<<"$pair"
                for n in 20 132; do
                        node="$here/interposer/gpu$n.node"
                        sx="$tmp/pair-$x-$n" sy="$tmp/pair-$y-$n"
                        GPUSLICE_SIM_NODE="$node" GPUSLICE_SIM_STATE="$tmp/sim-state-$n" "$GS" run --gpu 0 --core "$x" -- "$WL" init spin "$dur" "$n" 1000 >"$sx" &
                        GPUSLICE_SIM_NODE="$node" GPUSLICE_SIM_STATE="$tmp/sim-state-$n" "$GS" run --gpu 0 --core "$y" -- "$WL" init spin "$dur" "$n" 1000 >"$sy" &
                        wait
                        ux=$(awk -v s="$n" -v d="$dur" '/late/ { printf "%.1f", $4 * s * 1000 / (s * d / 2 * 1e6) * 100 }' "$sx")
                        uy=$(awk -v s="$n" -v d="$dur" '/late/ { printf "%.1f", $4 * s * 1000 / (s * d / 2 * 1e6) * 100 }' "$sy")
                        echo "pair $x:$y-$n-a $run $x ${ux:-0}" >>"$tmp/shares"
                        echo "pair $x:$y-$n-b $run $y ${uy:-0}" >>"$tmp/shares"
                done
        done
done
# cell text: median [min–max] of one cell's runs
cell() {
        awk -v c="$1" '$2 == c { v[n++] = $5 } END {
                for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
                med = n % 2 ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
                if (n > 1) printf "%.1f [%.1f–%.1f]", med, v[0], v[n - 1]; else printf "%.1f", med }' "$tmp/shares"
}
echo "| target | 20 SMs | 132 SMs | 20 SMs, 660 × 100 µs blocks | 132 SMs, 660 × 100 µs blocks |" >>"$out"
echo "|---:|---:|---:|---:|---:|" >>"$out"
for t in "${targets[@]}"; do
        echo "| $t % | $(cell "$t-20") % | $(cell "$t-132") % | $(cell "$t-20g") % | $(cell "$t-132g") % |" >>"$out"
done
echo >>"$out"
echo "| pair (two containers, one GPU) | 20 SMs | 132 SMs |" >>"$out"
echo "|---|---:|---:|" >>"$out"
for pair in "10 90" "30 70"; do
        read -r x y <<<"$pair"
        echo "| $x : $y | $(cell "$x:$y-20-a") : $(cell "$x:$y-20-b") | $(cell "$x:$y-132-a") : $(cell "$x:$y-132-b") |" >>"$out"
done
echo >>"$out"
awk -v runs="$runs" 'function abs(x) { return x < 0 ? -x : x }
        { d[n++] = abs($5 - $4); if (abs($5 - $4) > 5) over++ }
        END {
                for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (d[j] < d[i]) { t = d[i]; d[i] = d[j]; d[j] = t }
                med = n % 2 ? d[(n - 1) / 2] : (d[n / 2 - 1] + d[n / 2]) / 2
                printf "Deviation from the target over all %d measurements (%d runs, every cell, alone and in pairs): " \
                       "min %.1f, median %.1f, max %.1f points; %d beyond the goal of ±5.\n", n, runs, d[0], med, d[n - 1], over
        }' "$tmp/shares" >>"$out"
echo >>"$out"
echo "The controller is a thread of the container's process: on a machine whose load average exceeds its" \
     "cores (the stamp above says what it was), it is starved of CPU and the shares drift; that is the" \
     "machine, not the code, but the figures above are what this run measured." >>"$out"
echo >>"$out"
echo "Read with care: these are measurements against the simulator, whose utilization signal is exact and" \
     "noise-free (per-process SM-busy time over 100 ms, published every 20 ms) and whose kernels all take the" \
     "same time. On real GPUs NVML's samples are coarser and kernel durations vary, so expect the controller to" \
     "settle more slowly and less precisely; the design (cost per launch learned from measured utilization," \
     "independent of SM count) is what these numbers check. Instruction counts include the simulated driver's" \
     "work; the interposer's own cost is the difference column." >>"$out"

cat "$out"
