#!/usr/bin/env bash
# Record which entry points NVIDIA's CUDA runtime looks up through cuGetProcAddress, by running a tiny
# cudaGetDeviceCount program (shared and static cudart) against the simulated driver behind
# lookup-recorder.c. Needs the CUDA toolkit (cuda_runtime_api.h, libcudart) and a build dir; not run in CI.
#   GPUSLICE_NODE=NODE_FILE tests/interposer/record-cudart-lookups.sh BUILD_DIR [CUDA_DIR] \
#     > tests/interposer/cudart-13.0-lookups.txt  (then put the header comment back)
# Also prints (stderr) what cudaGetDeviceCount returned, without and with a cuGetExportTable on offer.
set -euo pipefail
build=$(cd "$1" && pwd)
cuda=${2:-/usr/local/cuda}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -shared -fPIC -O1 -o "$work/libcuda.so.1" -Wl,-soname,libcuda.so.1 "$here/lookup-recorder.c" -ldl
printf '#include <cuda_runtime_api.h>\n#include <stdio.h>\nint main(void) { int n = -1; cudaError_t e = cudaGetDeviceCount(&n);\n printf("cudaGetDeviceCount: %%d %%s\\n", (int)e, cudaGetErrorName(e)); return 0; }\n' > "$work/app.c"
gcc -I"$cuda/include" -o "$work/app" "$work/app.c" -L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64"
gcc -I"$cuda/include" -o "$work/app-static" "$work/app.c" "$cuda/lib64/libcudart_static.a" -ldl -lpthread -lrt
# A node whose driver speaks CUDA 13.0 (the simulator reports the node's CUDA version): any node
# description ($GPUSLICE_NODE) with that directive added.
cp "${GPUSLICE_NODE:?set GPUSLICE_NODE to a node description (docs/node-description.md)}" "$work/node.topo"
echo "node driver=580.65.06 cuda=13.0" >> "$work/node.topo"
run() {
  LOOKUP_RECORD="$work/$1.txt" LOOKUP_REAL_LIBCUDA="$build/sim/libcuda.so.1" LD_LIBRARY_PATH="$work" \
    GPUSLICE_SIM_NODE="$work/node.topo" GPUSLICE_SIM_STATE="$work/state" "$work/${1%%-offer}" >&2
}
run app
run app-static
LOOKUP_OFFER_EXPORT_TABLE=1 run app-offer
cmp -s "$work/app.txt" "$work/app-static.txt" || echo "note: shared and static cudart differ" >&2
grep '^#' "$work/app-offer.txt" >&2 || true
cat "$work/app.txt"
