#!/usr/bin/env bash
# hwkit/assemble.sh BUILD DEST — the hardware kit (docs/hardware.md) as one self-contained folder, from a
# built tree (`make hwkit` runs it with build/ and build/gpuslice-hwkit):
#
#   run.sh kit.py rebuild.sh      the entry script, the checks, the compiler-only rebuild
#   runner.py                     tests/runner.py: the selection and exit rules kit.py shares with every test runner
#   bin/gpuslice                  with the non-glibc libraries it links in lib/ (found through its RPATH)
#   bin/libgpuslice-cuda.so       the interposer (where `gpuslice run` looks for it: next to gpuslice)
#   bin/libgpuslice-nvml.so       the NVML stand-in (`gpuslice run` preloads it after the interposer beside it)
#   sim/                          the simulated driver and NVML (simulated runs, `gpuslice sim record`'s diff)
#   probes/                       cuda-workload, procaddr-replay, hwkit-region, the Python probes
#   data/                         the lookups to replay, the CUDA requirement to check, node descriptions
#   src/                          the sources rebuild.sh compiles when the carried binaries cannot run
#   kit.json                      what was built, from which commit, and the glibc each binary needs
#
# It never downloads anything; the kit never installs anything. Prints the kit's size; fails above 48 MiB.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BUILD DEST" >&2; exit 2; }
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
dest=$2
max_bytes=$((48 * 1024 * 1024))

for f in gpuslice libgpuslice-cuda.so libgpuslice-nvml.so cuda-workload procaddr-replay hwkit-region sim/libcuda.so.1 \
  sim/libnvidia-ml.so.1 sim/gpuslice-sim sim/nvidia-cuda-mps-control; do
  [ -e "$build/$f" ] || { echo "hwkit: $build/$f is missing: build first (make build)" >&2; exit 1; }
done
command -v patchelf >/dev/null || { echo "hwkit: patchelf is missing (scripts/install-deps.sh)" >&2; exit 1; }

rm -rf "$dest"
mkdir -p "$dest"/{bin,lib,sim,probes,data/nodes,src}
cp "$src"/hwkit/run.sh "$src"/hwkit/kit.py "$src"/hwkit/rebuild.sh "$src"/tests/runner.py "$dest/"
cp "$src"/hwkit/probes/*.py "$dest/probes/"
cp "$build/gpuslice" "$build/libgpuslice-cuda.so" "$build/libgpuslice-nvml.so" "$dest/bin/"
cp "$build"/sim/libcuda.so.1 "$build"/sim/libnvidia-ml.so.1 "$build"/sim/gpuslice-sim "$build"/sim/nvidia-cuda-mps-control \
  "$dest/sim/"
cp "$build"/cuda-workload "$build"/procaddr-replay "$build"/hwkit-region "$dest/probes/"
cp "$src"/tests/interposer/cudart-13.0-lookups.txt "$src"/tests/interposer/cuda-13.0-variants.txt "$dest/data/"
cp "$src"/hwkit/nodes/*.node "$dest/data/nodes/"
if compgen -G "$src/tests/data/nodes/*.node" >/dev/null; then
  cp "$src"/tests/data/nodes/*.node "$dest/data/nodes/" # nodes recorded on real GPUs
fi

# The libraries gpuslice needs beyond glibc (gRPC, protobuf-c, microhttpd, jansson, curl, yaml, gnutls, …):
# a bare GPU machine has none of them. glibc's own libraries stay (the kit needs the machine's glibc).
glibc_lib='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale|ld-linux-x86-64)\.so'
ldd "$build/gpuslice" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r name path; do
  [[ $name =~ $glibc_lib ]] && continue
  cp -L "$path" "$dest/lib/$name"
done
strip --strip-unneeded "$dest"/lib/*.so* "$dest"/bin/gpuslice "$dest"/bin/libgpuslice-cuda.so "$dest"/sim/* \
  "$dest"/probes/cuda-workload "$dest"/probes/procaddr-replay "$dest"/probes/hwkit-region 2>/dev/null || true
# DT_RPATH (not RUNPATH) so the carried libraries' own dependencies are found in lib/ as well; nothing else
# in the machine's environment changes (a child of `gpuslice run` keeps its own libraries).
# shellcheck disable=SC2016 # $ORIGIN is for the loader, not the shell
patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$dest/bin/gpuslice"

# Sources for rebuild.sh: what needs only a C compiler and libc.
mkdir -p "$dest"/src/interposer "$dest"/src/nvml "$dest"/src/probes
cp "$src"/src/interposer/*.c "$src"/src/interposer/*.h "$src"/src/interposer/libgpuslice-cuda.map "$dest/src/interposer/"
rm -f "$dest/src/interposer/cuda-abi-check.c" # needs a CUDA toolkit's cuda.h
cp "$src"/src/nvml/nvml-abi.h "$dest/src/nvml/"
cp "$src"/tests/interposer/cuda-workload.c "$src"/tests/interposer/procaddr-replay.c "$src"/hwkit/region-tool.c \
  "$dest/src/probes/"

# kit.json: the commit, and the newest glibc symbol version each carried binary needs.
needs() { objdump -T "$1" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -u | tail -1; }
commit=$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$src" status --porcelain 2>/dev/null | grep -qv '^??' && echo true || echo false)
{
  echo "{"
  echo "  \"commit\": \"$commit\", \"dirty\": $dirty, \"built\": \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\","
  echo "  \"built_on_glibc\": \"$(getconf GNU_LIBC_VERSION | awk '{print $2}')\","
  echo "  \"glibc_needed\": {"
  first=1
  for f in bin/gpuslice bin/libgpuslice-cuda.so sim/libcuda.so.1 sim/libnvidia-ml.so.1 sim/gpuslice-sim sim/nvidia-cuda-mps-control \
    probes/cuda-workload probes/procaddr-replay probes/hwkit-region $(cd "$dest" && ls lib/*); do
    [ $first = 1 ] || echo ","
    first=0
    printf '    "%s": "%s"' "$f" "$(needs "$dest/$f")"
  done
  echo
  echo "  }"
  echo "}"
} >"$dest/kit.json"

size=$(du -sb "$dest" | awk '{print $1}')
echo "hwkit: $dest: $((size / 1024 / 1024)) MiB ($size bytes; limit 48 MiB), commit $commit"
[ "$size" -le "$max_bytes" ] || { echo "hwkit: the kit is larger than 48 MiB" >&2; exit 1; }
