#!/usr/bin/env bash
# `make demo`: gpuslice on the built-in simulated node. The product binary is the same one that
# runs on a real node; only the library path (LD_LIBRARY_PATH=build/sim) and the node
# description (GPUSLICE_SIM_NODE) make it talk to the simulator.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
export LD_LIBRARY_PATH="$BUILD/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export GPUSLICE_SIM_NODE="$PWD/sim/nodes/demo-8gpu-2socket.node"
export GPUSLICE_SIM_STATE="$tmp/sim-state"
G="$BUILD/gpuslice"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
# The demo is also a test (ctest `demo`): every claim it prints is checked, and a false one fails it.
claim() { # claim TEXT COMMAND...
  if "${@:2}"; then printf 'checked: %s\n' "$1"; else printf 'FAILED: %s\n' "$1" >&2; exit 1; fi
}
field() { # field JSON-TEXT KEY: one top-level value of gpuslice's --json output
  /usr/bin/python3 -c 'import json,sys; v=json.loads(sys.argv[1])[sys.argv[2]]; print(",".join(map(str, v)) if isinstance(v, list) else v)' "$1" "$2"
}

say "The node, read through NVML (simulated: $GPUSLICE_SIM_NODE)"
run "$G" topo

say "The classic failure: GPUs 0,1,3,4 are busy and a job asks for 2"
echo "Without a preference kubelet may hand out any two free IDs, e.g. GPU2 + GPU7 across the socket link:"
run "$G" alloc --count 2 --busy 0,1,3,4 --must-include 2,7
echo "gpuslice's pick from the same free set:"
run "$G" alloc --count 2 --busy 0,1,3,4
naive=$("$G" alloc --count 2 --busy 0,1,3,4 --must-include 2,7 --json)
pick=$("$G" alloc --count 2 --busy 0,1,3,4 --json)
claim "the pick ($(field "$pick" gpus), $(field "$pick" ring_bandwidth_gbps) GB/s) is faster than GPU2 + GPU7 ($(field "$naive" ring_bandwidth_gbps) GB/s across $(field "$naive" worst_link))" \
  test "$(field "$pick" ring_bandwidth_gbps)" -gt "$(field "$naive" ring_bandwidth_gbps)"

say "A 4-GPU job on an empty node stays on one socket"
run "$G" alloc --count 4
four=$("$G" alloc --count 4 --json)
claim "GPUs $(field "$four" gpus) never cross the socket link (worst link $(field "$four" worst_link))" \
  test "$(field "$four" worst_link)" != SYS

say "A 1-GPU job is taken where it breaks up the least (GPUs 0,1 busy: socket 1 keeps 4 GPUs together)"
run "$G" alloc --count 1 --busy 0,1

say "Must-include GPU 5 (kubelet's must_include_deviceIDs), 2 GPUs"
run "$G" alloc --count 2 --must-include 5 --json

say "The same question on other machines, from pasted \`nvidia-smi topo -m\` text"
for f in tests/data/topologies/dgx1-v100-hybrid-cube-mesh.topo tests/data/topologies/seed004-7gpu-p40-mlx4.topo; do
  run "$G" alloc --topology "$f" --count 4
done

say "Who uses which GPU: two workloads share GPU 2 through the simulated CUDA driver"
W="$BUILD/sim/gpuslice-sim-workload"
"$W" --gpu 2 --mem 5GiB --seconds 60 >/dev/null & w1=$!
"$W" --gpu 2 --mem 3584MiB --seconds 60 >/dev/null & w2=$!
"$W" --gpu 0 --mem 2600MiB --seconds 60 >/dev/null & w3=$!
trap 'kill $w1 $w2 $w3 ${mon:-} 2>/dev/null || true; rm -rf "$tmp"' EXIT
nprocs() { "$G" ps --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["processes"]))' 2>/dev/null; }
for _ in $(seq 50); do [ "$(nprocs)" = 3 ] && break; sleep 0.1; done
run "$G" ps
on_gpu2() { "$G" ps --json | /usr/bin/python3 -c 'import json,sys; print(sum(1 for p in json.load(sys.stdin)["processes"] if p["gpu"] == 2))'; }
claim "gpuslice ps shows the 3 workloads, 2 of them on GPU 2" test "$(nprocs)/$(on_gpu2)" = 3/2

say "The same as Prometheus metrics: gpuslice monitor (a few lines of /metrics)"
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$G" monitor --metrics-address "127.0.0.1:$port" --sample-interval 1s 2>/dev/null & mon=$!
/usr/bin/python3 - "$port" <<'PY'
import sys, time, urllib.request
url = "http://127.0.0.1:%s/metrics" % sys.argv[1]
for _ in range(100):
    try:
        text = urllib.request.urlopen(url, timeout=2).read().decode()
        if "gpuslice_process_gpu_memory_used_bytes{" in text:
            break
    except OSError:
        pass
    time.sleep(0.1)
print("$ curl -s %s | grep ..." % url)
procs = 0
for line in text.splitlines():
    if line.startswith(("gpuslice_process_gpu_memory_used_bytes{", "gpuslice_container_gpu_memory_used_bytes{")) or \
       (line.startswith("gpuslice_gpu_memory_used_bytes{") and 'gpu_index="2"' in line) or \
       line.startswith("# HELP gpuslice_process_gpu_memory_used_bytes"):
        print(line)
    procs += line.startswith("gpuslice_process_gpu_memory_used_bytes{")
if procs != 3:
    sys.exit("FAILED: /metrics shows %d GPU processes, not the 3 workloads" % procs)
print("checked: /metrics has one gpuslice_process_gpu_memory_used_bytes series per workload")
PY
kill $mon $w1 $w2 $w3 2>/dev/null; wait $mon $w1 $w2 $w3 2>/dev/null || true
mon=

say "The node agent: gpuslice node registered with a kubelet stand-in (real gRPC), as kubelet drives it"
/usr/bin/python3 tests/integration/agent_demo.py --build "$BUILD" --source .
