#!/usr/bin/env bash
# libgpuslice-cuda.so must export every symbol the CUDA driver exports, plus the NVML queries
# it virtualises (GS_NVML_HOOKS in hooks.h), and nothing else. The driver's list is the repository's (tests/data/cuda/); where a CUDA
# toolkit is present, its link stub is compared with that list too (a stale list fails).
#   check-exports.sh LIBGPUSLICE_CUDA DRIVER_EXPORTS_LIST [STUB_LIBCUDA]
set -euo pipefail
lib=$1 list=$2 stub=${3:-}
driver=$(grep -v '^#' "$list" | sort -u)
if [ -n "$stub" ]; then
        from_stub=$(nm -D --defined-only "$stub" | awk '$2 == "T" { print $3 }' | sort -u)
        if [ "$driver" != "$from_stub" ]; then
                echo "$list differs from $stub (a new CUDA? regenerate the list, then passthrough.h):"
                diff <(echo "$driver") <(echo "$from_stub") || true
                exit 1
        fi
fi
# the NVML queries it virtualises: GS_NVML_HOOKS in hooks.h
hooks=$(dirname "$0")/../../src/interposer/hooks.h
nvml=$(sed -n '/^#define GS_NVML_HOOKS(X)/,/^$/p' "$hooks" | grep -oE 'X\(nvml[A-Za-z0-9_]+\)' | sed -E 's/X\((.*)\)/\1/')
[ -n "$nvml" ] || { echo "no GS_NVML_HOOKS in $hooks"; exit 1; }
want=$( (echo "$driver"; echo "$nvml") | sort -u)
have=$(nm -D --defined-only "$lib" | awk '$2 == "T" || $2 == "i" { print $3 }' | sort -u)
if [ "$want" != "$have" ]; then
        echo "missing:"; comm -23 <(echo "$want") <(echo "$have")
        echo "extra:"; comm -13 <(echo "$want") <(echo "$have")
        exit 1
fi
echo "exports: $(echo "$have" | wc -l) symbols, as the driver plus the NVML queries of GS_NVML_HOOKS${stub:+ (list checked against $stub)}"
