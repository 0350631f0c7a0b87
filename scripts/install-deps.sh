#!/usr/bin/env bash
# The one list of Debian 12 packages gpuslice's build, tests, demo and lint need, and the check that
# they are installed. `make demo`, `make test` and CI (.ci/run) call this first.
#
#   scripts/install-deps.sh          nothing to do when every package is installed (one dpkg-query);
#                                    otherwise install the missing ones as root, or print the exact
#                                    `sudo apt-get install` line and exit 1
#   scripts/install-deps.sh --list   print the package list, one per line
set -euo pipefail

packages=(
  # build: gcc -Werror and the clang ASan/UBSan + libFuzzer configuration
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev llvm
  # libraries: gRPC C core + protobuf-c (kubelet APIs), HTTP server, JSON, HTTP client
  libgrpc-dev protobuf-c-compiler libprotobuf-c-dev protobuf-compiler
  libmicrohttpd-dev libgnutls28-dev libjansson-dev libcurl4-openssl-dev libyaml-dev
  # tests: cmocka, the Python kubelet stand-in (real grpcio), valgrind; node for the DRA CEL test (its CEL
  # package is vendored: tests/integration/cel/vendor)
  libcmocka-dev valgrind python3-grpcio python3-grpc-tools python3-protobuf python3-yaml nodejs
  # the operator page's browser test and render benchmark (headless, over the DevTools pipe)
  chromium
  # real peers of the integration tests: containers and Prometheus
  podman runc busybox-static prometheus openssl
  # make hwkit (docs/hardware.md): the carried binaries find the kit's own libraries (patchelf)
  patchelf
  # make lint (pmccabe: function size and cyclomatic complexity; universal-ctags: the file-cycle check)
  clang-format clang-tidy shellcheck pmccabe universal-ctags
  # make e2e (docs/e2e.md): Kubernetes 1.20 built from Debian's source, etcd, containerd, CNI, the
  # Python client, debootstrap for the agent image's Debian base; ip (the nodes' bridges) and pgrep
  # (run.sh's memory sampler without cgroup v1), absent from a minimal Debian
  golang-go dpkg-dev golang-github-modern-go-reflect2-dev etcd-server containerd containernetworking-plugins
  python3-kubernetes debootstrap iproute2 procps
)

if [ "${1:-}" = --list ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

# One dpkg-query for the whole list; a package dpkg has never heard of prints no line (and makes
# dpkg-query exit 1, which says nothing more than the missing line).
installed=" $(dpkg-query -W -f='${Package}=${db:Status-Status} ' "${packages[@]}" 2>/dev/null || true)"
missing=()
for p in "${packages[@]}"; do
  case "$installed" in *" $p=installed "*) ;; *) missing+=("$p") ;; esac
done

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi

echo "install-deps: these Debian packages are missing; install them with:" >&2
echo "sudo apt-get install -y ${missing[*]}" >&2
exit 1
