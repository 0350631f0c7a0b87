#!/usr/bin/env bash
# No CUDA toolkit needed: configures a second build tree of SOURCE with the toolkit hidden and checks
# that it registers exactly as many tests as BUILD (same compiler and options, read from BUILD's
# CMakeCache.txt). The toolkit is hidden by an empty tmpfs over GPUSLICE_CUDA_TOOLKIT in a private mount
# namespace (unshare, as root), else by configuring with GPUSLICE_CUDA_TOOLKIT empty.
#   no-toolkit.sh SOURCE BUILD
set -euo pipefail
src=$1 build=$2
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
toolkit=$(cache GPUSLICE_CUDA_TOOLKIT)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=(-S "$src" -B "$tmp/b" -G "$(cache CMAKE_GENERATOR)" -DCMAKE_C_COMPILER="$(cache CMAKE_C_COMPILER)"
      -DCMAKE_BUILD_TYPE="$(cache CMAKE_BUILD_TYPE)" -DGPUSLICE_WERROR="$(cache GPUSLICE_WERROR)"
      -DGPUSLICE_SANITIZE="$(cache GPUSLICE_SANITIZE)" -DGPUSLICE_FUZZ="$(cache GPUSLICE_FUZZ)")
count() { (cd "$1" && ctest -N | sed -n 's/^Total Tests: //p'); }

how="GPUSLICE_CUDA_TOOLKIT empty"
if [ -n "$toolkit" ] && [ -d "$toolkit" ] && [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
        how="$toolkit hidden by an empty tmpfs"
        # shellcheck disable=SC2016 # expanded by the inner shell
        unshare -m sh -c 'mount -t tmpfs none "$1" && shift && test ! -e "$1/include/cuda.h" && exec cmake "$@"' \
                sh "$toolkit" "$toolkit" "${args[@]}" -DGPUSLICE_CUDA_TOOLKIT="$toolkit" > "$tmp/configure.log" 2>&1 ||
                { cat "$tmp/configure.log"; exit 1; }
else
        cmake "${args[@]}" -DGPUSLICE_CUDA_TOOLKIT= > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; exit 1; }
fi
grep -q "no cuda.h in GPUSLICE_CUDA_TOOLKIT" "$tmp/configure.log" || { echo "the toolkit was not hidden"; exit 1; }
with=$(count "$build") without=$(count "$tmp/b")
echo "tests registered: $with with the toolkit ($build), $without without ($how)"
[ -n "$with" ] && [ "$with" = "$without" ]
