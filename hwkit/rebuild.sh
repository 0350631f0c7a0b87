#!/bin/sh
# hwkit/rebuild.sh KIT — rebuild, with the machine's own C compiler and libc, the parts of the kit that need
# nothing else: the interposer (bin/libgpuslice-cuda.so) and the C probes (probes/cuda-workload,
# procaddr-replay, hwkit-region), from the sources the kit carries (src/). kit.py runs it when a carried binary
# cannot run here (an older glibc than the one it was built against); gpuslice itself links libraries the kit
# carries prebuilt and is not rebuilt. Writes into KIT/rebuilt/ (same layout); prints what it did; exit 1 when
# no compiler works.
set -eu
kit=$(cd "${1:?usage: rebuild.sh KIT}" && pwd)
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || cc=gcc
command -v "$cc" >/dev/null 2>&1 || { echo "rebuild: no C compiler (cc, gcc)" >&2; exit 1; }
out="$kit/rebuilt"
mkdir -p "$out/bin" "$out/probes"
s="$kit/src"
flags="-std=gnu17 -O2 -D_GNU_SOURCE -I$s"
set -x
# shellcheck disable=SC2086 # $flags is a list of flags
"$cc" $flags -shared -fPIC -fvisibility=hidden -DGPUSLICE_GLIBC_FLOOR -o "$out/bin/libgpuslice-cuda.so" \
  "$s"/interposer/*.c -Wl,-soname,libcuda.so.1 -Wl,--version-script="$s/interposer/libgpuslice-cuda.map" \
  -Wl,--no-as-needed -ldl -lpthread
# shellcheck disable=SC2086
"$cc" $flags -o "$out/probes/cuda-workload" "$s/probes/cuda-workload.c" -ldl -lpthread
# shellcheck disable=SC2086
"$cc" $flags -o "$out/probes/procaddr-replay" "$s/probes/procaddr-replay.c" -ldl
# shellcheck disable=SC2086
"$cc" $flags -o "$out/probes/hwkit-region" "$s/probes/region-tool.c" "$s/interposer/limits.c"
