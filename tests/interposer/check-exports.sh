#!/usr/bin/env bash
# libgpuslice-cuda.so must export every symbol the CUDA driver exports (stub's dynamic symbols), plus
# the two NVML memory queries, and nothing else.  check-exports.sh LIBGPUSLICE_CUDA STUB_LIBCUDA
set -euo pipefail
lib=$1 stub=$2
want=$( (nm -D --defined-only "$stub" | awk '$2 == "T" { print $3 }'; printf 'nvmlDeviceGetMemoryInfo\nnvmlDeviceGetMemoryInfo_v2\n') | sort -u)
have=$(nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "i" { print $3 }' | sort -u)
if [ "$want" != "$have" ]; then
        echo "missing:"; comm -23 <(echo "$want") <(echo "$have")
        echo "extra:"; comm -13 <(echo "$want") <(echo "$have")
        exit 1
fi
echo "exports: $(echo "$have" | wc -l) symbols, as the driver plus the NVML memory queries"
