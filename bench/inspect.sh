#!/usr/bin/env bash
# Kubernetes client benchmarks (docs/BENCHMARKS.md, "Cluster view"): watch decoding and informer
# cache memory (inspect-kube-bench), then `gpuslice inspect` over 1,000 nodes x 8 GPUs and 20,000
# pods served by bench/inspect_bench.py.   bench/inspect.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
"$build/inspect-kube-bench" --markdown
echo
/usr/bin/python3 "$here/inspect_bench.py" --build "$build" --markdown
