#!/usr/bin/env bash
# The layer rules of docs/architecture.md ("Layers") checked on the sources: a file may include its
# own folder's headers and headers of lower layers, never a higher layer's, never another folder's
# *-internal.h, never by a relative path. The build enforces the same through per-library include
# directories (src/CMakeLists.txt); this check also covers files the current configuration does not
# compile and names the rule that was broken.
#
#   scripts/lint-includes.sh [ROOT]     ROOT: the tree to check (default: this repository)
set -u
root=${1:-"$(dirname "$0")/.."}
cd "$root" || exit 2

# layer of an included header: by folder, except the two header-level libraries of layer 1
layer_of() { # HEADER (folder/name.h)
  case "$1" in
    interposer/limits.h | interposer/ldcache.h | interposer/cuda-abi.h | interposer/cupti-abi.h | nvml/nvml-abi.h) echo 1; return ;;
  esac
  case "${1%%/*}" in
    util) echo 0 ;;
    topo | alloc | compat | mig) echo 1 ;;
    nvml | config | state | rpc | http | metrics | engine | labels | cdi | cluster | kube) echo 2 ;;
    monitor | sched | migctl | nvconfig | dra) echo 3 ;;
    agent) echo 4 ;;
    cli) echo 5 ;;
    interposer) echo apart ;;
    sim) echo sim ;;
    *) echo unknown ;;
  esac
}

# parts that use another part of their own layer (the build links them: src/*/CMakeLists.txt)
same_layer_ok() { # FOLDER INCLUDED-FOLDER
  case "$1>$2" in
    "alloc>topo" | "topo>compat" | "labels>metrics" | "mig>topo" | "kube>cluster") return 0 ;;
  esac
  return 1
}

# Named exceptions to the layer rules (none today; docs/architecture.md).
exception() { # FILE HEADER
  return 1
}

bad=0
report() { echo "$1: $2"; bad=$((bad + 1)); }

# shellcheck disable=SC2094 # nothing in the loop writes "$f": report and exception only print
while IFS= read -r -d '' f; do
  folder=${f#*/}; folder=${folder%%/*}
  case "$f" in sim/*) folder=sim ;; esac
  mine=$(layer_of "$folder/x.h")
  case "$f" in src/interposer/limits.[ch] | src/interposer/ldcache.[ch]) mine=1 ;; esac
  n=0
  while IFS= read -r line; do
    n=$((n + 1))
    case "$line" in
      *'#'*include*'"'*) ;;
      *) continue ;;
    esac
    [[ $line =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]] || continue
    h=${BASH_REMATCH[1]}
    case "$h" in
      */*) ;;
      *.pb-c.h) continue ;; # generated protobuf-c messages (build tree)
      *) report "$f:$n" "include \"$h\" without its folder (write \"$folder/$h\")"; continue ;;
    esac
    case "$h" in
      ./* | ../* | */../*) report "$f:$n" "relative include \"$h\" (include \"folder/header.h\")"; continue ;;
    esac
    hf=${h%%/*}
    [ "$hf" = "$folder" ] && continue
    exception "$f" "$h" && continue
    case "$h" in
      *-internal.h) report "$f:$n" "\"$h\" is internal to src/$hf"; continue ;;
    esac
    theirs=$(layer_of "$h")
    case "$folder" in
      cli) continue ;; # layer 5: the executable may use every library
      interposer)
        [ "$h" = nvml/nvml-abi.h ] && continue
        report "$f:$n" "libgpuslice-cuda.so includes nothing of gpuslice but interposer/ and nvml/nvml-abi.h, not \"$h\""
        continue ;;
      sim)
        case "$theirs" in 0 | 1 | 2) continue ;; esac
        report "$f:$n" "sim/ may use layers 0-2 only, not \"$h\" (layer $theirs)"
        continue ;;
    esac
    if [ "$theirs" = unknown ] || [ "$theirs" = apart ] || [ "$theirs" = sim ]; then
      report "$f:$n" "\"$h\" is not a header $folder may include (see docs/architecture.md, Layers)"
      continue
    fi
    if [ "$theirs" -lt "$mine" ] || { [ "$theirs" -eq "$mine" ] && same_layer_ok "$folder" "$hf"; }; then
      continue
    fi
    report "$f:$n" "layer $mine ($folder) includes \"$h\" of layer $theirs: a lower layer must not use a higher or unrelated one"
  done <"$f"
done < <(find src sim -name '*.[ch]' -print0 | sort -z)

if [ "$bad" -gt 0 ]; then
  echo "lint-includes: $bad include(s) break the layer rules of docs/architecture.md"
  exit 1
fi
echo "lint-includes: ok"
