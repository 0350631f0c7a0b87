#!/usr/bin/env bash
# The node agent's image for `make e2e`, built by Podman from deploy/Containerfile with the binaries
# of a build tree (--build-arg BINARIES=tree), saved as a docker-archive for containerd.
#
#   scripts/e2e/agent-image.sh BUILD_DIR OUT.tar
#
# No registry is reachable on the build machines, so Containerfile's `FROM debian:12` is a local
# image made once from Debian's own packages (debootstrap --variant=minbase bookworm from the
# machine's apt mirror), cached as ${GPUSLICE_E2E_CACHE:-/var/cache/gpuslice-e2e}/debian-12-minbase.tar
# and imported into Podman as docker.io/library/debian:12 when that tag is missing. The build's
# `apt-get install` of the run-time libraries uses the host network (--network host).
set -euo pipefail
BUILD=$(cd "$1" && pwd)
OUT=$2
REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${GPUSLICE_E2E_CACHE:-/var/cache/gpuslice-e2e}
BASE_TAR=$CACHE/debian-12-minbase.tar
TAG=docker.io/library/gpuslice:0.1.0
fail() { echo "agent-image: $*" >&2; exit 1; }

for f in gpuslice libgpuslice-cuda.so libgpuslice-nvml.so gpuslice-cdi-hook; do
	[[ -f $BUILD/$f ]] || fail "$BUILD/$f missing (make build)"
done
command -v podman >/dev/null || fail "podman not installed"

if ! podman image exists docker.io/library/debian:12; then
	if [[ ! -s $BASE_TAR ]]; then
		command -v debootstrap >/dev/null || fail "debootstrap not installed (apt-get install debootstrap)"
		mkdir -p "$CACHE"
		exec 9>"$CACHE/debian-12-minbase.lock"
		flock 9
		if [[ ! -s $BASE_TAR ]]; then
			mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
			mirror=${mirror:-http://deb.debian.org/debian}
			root=$(mktemp -d "$CACHE/debian-12-root.XXXXXX")
			trap 'rm -rf "$root"' EXIT
			echo "agent-image: debootstrap --variant=minbase bookworm from $mirror (once; cached in $BASE_TAR)" >&2
			debootstrap --variant=minbase bookworm "$root" "$mirror" >"$CACHE/debootstrap.log" 2>&1 ||
				fail "debootstrap failed; see $CACHE/debootstrap.log"
			rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
			tar -C "$root" -cf "$BASE_TAR.tmp" . || fail "cannot write $BASE_TAR"
			mv "$BASE_TAR.tmp" "$BASE_TAR"
		fi
	fi
	podman import --quiet "$BASE_TAR" docker.io/library/debian:12 >/dev/null ||
		fail "podman import of $BASE_TAR failed"
fi

ctx=$(mktemp -d /tmp/gpuslice-e2e-image.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/build"
cp "$REPO/deploy/Containerfile" "$ctx/Containerfile"
cp "$BUILD/gpuslice" "$BUILD/libgpuslice-cuda.so" "$BUILD/libgpuslice-nvml.so" "$BUILD/gpuslice-cdi-hook" "$ctx/build/"
podman build --network host --build-arg BINARIES=tree -f "$ctx/Containerfile" -t "$TAG" "$ctx" >"$ctx/build.log" 2>&1 ||
	{ tail -n 30 "$ctx/build.log" >&2; fail "podman build -f deploy/Containerfile failed"; }
rm -f "$OUT"
podman save --quiet --format docker-archive -o "$OUT" "$TAG" >/dev/null || fail "podman save failed"
echo "$TAG"
