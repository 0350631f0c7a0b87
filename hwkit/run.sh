#!/bin/sh
# The hardware kit's entry script (docs/hardware.md): proves gpuslice's NVML, limiter and runtime parts on
# the NVIDIA GPU of the machine it runs on, in one unattended run, and writes a report into a directory.
#
#   run.sh --out DIR [--simulate [NODE]] [--only ID,...] [--budget SECONDS] [--gpu N]
#
# Run it as root on any machine with an NVIDIA driver (copy the folder there, nothing is installed or
# downloaded). Without a driver every real-GPU check reports "skipped: no NVIDIA driver". --simulate runs the
# checks that need no NVIDIA runtime against the simulated node (what `make test` does). Needs python3 ≥ 3.6
# (the checks are kit.py; the probes that exercise PyTorch, JAX or CuPy use the same python3).
kit=$(cd "$(dirname "$0")" && pwd)
py=
for p in python3 /usr/bin/python3 /usr/local/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 6))' 2>/dev/null; then
    py=$p
    break
  fi
done
if [ -z "$py" ]; then
  out=
  while [ $# -gt 0 ]; do
    [ "$1" = --out ] && [ $# -gt 1 ] && out=$2
    shift
  done
  echo "hwkit: no python3 (3.6 or newer) on this machine: no check was run" >&2
  if [ -n "$out" ] && mkdir -p "$out"; then
    printf '{"kit": "gpuslice hardware kit", "ran": false, "reason": "no python3 3.6+ on this machine", "checks": []}\n' \
      >"$out/report.json"
    printf '# gpuslice hardware kit\n\nNot run: no python3 (3.6 or newer) on this machine.\n' >"$out/report.md"
  fi
  exit 1
fi
exec "$py" "$kit/kit.py" --kit "$kit" "$@"
