#!/usr/bin/env bash
# Make Podman usable for gpuslice's integration tests on a build machine (root, no systemd, cgroup v1
# with named hierarchies or v2), idempotently:
#   - /etc/containers/containers.conf with `default_ulimits = []` (the machine's hard limits are
#     lower than Podman's defaults) and `runtime = "runc"`;
#   - a local image `gpuslice-busybox` made from busybox-static (no registry is reachable).
# Prints the image name. Exit 77 (skip) when podman, runc or busybox are not installed; 1 when the
# setup fails. Never touches an existing containers.conf that says something else (says so, exit 1).
set -euo pipefail
IMAGE=gpuslice-busybox
for tool in podman runc busybox; do
  command -v "$tool" >/dev/null || { echo "podman-setup: $tool not installed" >&2; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "podman-setup: needs root (rootless setups differ)" >&2; exit 77; }

conf=/etc/containers/containers.conf
if [ ! -e "$conf" ]; then
  mkdir -p /etc/containers
  tmp=$(mktemp /etc/containers/.containers.conf.XXXXXX)
  printf '# written by gpuslice tests/integration/podman-setup.sh\n[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' > "$tmp"
  chmod 644 "$tmp"
  mv "$tmp" "$conf"
elif ! grep -q '^default_ulimits *= *\[\]' "$conf" || ! grep -q '^runtime *= *"runc"' "$conf"; then
  echo "podman-setup: $conf exists without default_ulimits = [] and runtime = \"runc\"; add them" >&2
  exit 1
fi

if ! podman image exists "$IMAGE" 2>/dev/null; then
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root/bin" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/etc"
  cp "$(command -v busybox)" "$root/bin/busybox"
  for app in sh sleep cat ls echo true; do ln -s busybox "$root/bin/$app"; done
  tar -C "$root" -c . | podman import --quiet - "$IMAGE" >/dev/null
fi
echo "$IMAGE"
