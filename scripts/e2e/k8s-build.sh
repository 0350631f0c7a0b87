#!/usr/bin/env bash
# Builds real Kubernetes 1.20 binaries for `make e2e` from Debian's own `kubernetes` source package:
# kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl.
#
#   scripts/e2e/k8s-build.sh            build (or find) the binaries; prints the bin directory last
#   scripts/e2e/k8s-build.sh --print    print the bin directory if it is complete, else exit 1
#
# Result: ${GPUSLICE_E2E_CACHE:-/var/cache/gpuslice-e2e}/k8s-v1.20.2/bin/, keyed by version and built only
# when missing. The build happens in a temporary directory that is renamed into place at the end, so a
# failed or interrupted build never leaves a half-filled cache. A lock serialises concurrent callers.
#
# Steps (each failure names its step):
#   1. source   apt-get source --download-only kubernetes, through a private deb-src apt directory made
#               from the machine's apt sources (the system's apt configuration is not touched)
#   2. unpack   into a GOPATH (Go 1.19 refuses -mod=vendor on this tree; GOPATH mode works)
#   3. reflect2 replace the vendored github.com/modern-go/reflect2 1.0.1 (crashes under Go >= 1.18) with
#               Debian's golang-github-modern-go-reflect2-dev 1.0.2
#   4. openapi  generate pkg/generated/openapi/zz_generated.openapi.go (upstream's make does it; the
#               tarball lacks it and kube-apiserver does not build without it)
#   5. build    the five binaries, CGO off, version stamped v1.20.2
# Needs: golang-go, dpkg-dev, golang-github-modern-go-reflect2-dev, apt access to deb.debian.org (or the
# machine's mirror). About 6-7 min on 2 idle cores from an empty Go cache; ~500 MB of binaries.
set -euo pipefail

K8S_VERSION=1.20.2
CACHE=${GPUSLICE_E2E_CACHE:-/var/cache/gpuslice-e2e}
OUT=$CACHE/k8s-v$K8S_VERSION
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kubectl)
REFLECT2=/usr/share/gocode/src/github.com/modern-go/reflect2

complete() {
	local b
	for b in "${BINS[@]}"; do [[ -x $OUT/bin/$b ]] || return 1; done
}

if [[ ${1:-} == --print ]]; then
	complete && { echo "$OUT/bin"; exit 0; }
	exit 1
fi

STEP=setup
REPORTED=0
fail() {
	echo "k8s-build: step '$STEP' failed: $*; nothing was written to $OUT" >&2
	REPORTED=1
	exit 1
}
TMP=""
on_exit() {
	local rc=$?
	[[ -n $TMP ]] && rm -rf "$TMP"
	[[ $rc -eq 0 || $REPORTED -eq 1 ]] || echo "k8s-build: step '$STEP' failed (exit $rc); nothing was written to $OUT" >&2
}
trap on_exit EXIT

mkdir -p "$CACHE" || fail "cannot create cache directory $CACHE"
exec 9>"$CACHE/k8s-v$K8S_VERSION.lock"
if ! flock -n 9; then
	echo "k8s-build: another build holds $CACHE/k8s-v$K8S_VERSION.lock; waiting" >&2
	flock 9
fi
if complete; then
	echo "$OUT/bin"
	exit 0
fi
[[ -e $OUT ]] && { echo "k8s-build: removing incomplete $OUT" >&2; rm -rf "$OUT"; }

for tool in go apt-get tar flock; do
	command -v "$tool" >/dev/null || fail "$tool not found (install golang-go, apt, tar, util-linux)"
done
[[ -f $REFLECT2/reflect2.go ]] || fail "$REFLECT2 missing (apt-get install golang-github-modern-go-reflect2-dev)"

T0=$SECONDS
log() { echo "k8s-build: [$((SECONDS - T0))s] $*" >&2; }

# --- 1. source ---------------------------------------------------------------------------------------
STEP=source
SRC=$CACHE/src
mkdir -p "$SRC"
tarball() { find "$SRC" -maxdepth 1 -name "kubernetes_*$K8S_VERSION.orig.tar.gz" | head -n1; }
if [[ -z $(tarball) ]]; then
	APT=$CACHE/apt
	rm -rf "$APT"
	mkdir -p "$APT/sources" "$APT/lists/partial" "$APT/cache/archives/partial"
	n=0
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		sed -E 's/^Types:.*/Types: deb-src/' "$f" >"$APT/sources/$(basename "$f")"
		n=$((n + 1))
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -f $f ]] || continue
		sed -nE 's/^[[:space:]]*deb([[:space:]])/deb-src\1/p' "$f" >"$APT/sources/$(basename "$f" .list)-src.list"
		n=$((n + 1))
	done
	((n > 0)) || fail "no apt sources found in /etc/apt to derive deb-src entries from"
	aptopts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$APT/sources"
		-o "Dir::State::Lists=$APT/lists" -o "Dir::Cache=$APT/cache" -o "APT::Sandbox::User=root")
	log "apt-get update (private deb-src lists in $APT)"
	apt-get -q "${aptopts[@]}" update >"$APT/update.log" 2>&1 ||
		fail "apt-get update with deb-src entries failed; see $APT/update.log"
	log "apt-get source --download-only kubernetes"
	(cd "$SRC" && apt-get -q "${aptopts[@]}" source --download-only kubernetes) >"$APT/source.log" 2>&1 ||
		fail "apt-get source kubernetes failed; see $APT/source.log"
	[[ -n $(tarball) ]] || fail "downloaded source is not Kubernetes $K8S_VERSION: $(ls "$SRC")"
fi
TARBALL=$(tarball)
log "source: $TARBALL"

# --- 2. unpack ---------------------------------------------------------------------------------------
STEP=unpack
TMP=$(mktemp -d "$CACHE/k8s-v$K8S_VERSION.tmp.XXXXXX")
export GOPATH=$TMP/gopath GO111MODULE=off CGO_ENABLED=0 GOFLAGS='' GOCACHE=$CACHE/go-build
K=$GOPATH/src/k8s.io/kubernetes
mkdir -p "$K"
tar -xzf "$TARBALL" -C "$K" --strip-components=1 || fail "cannot unpack $TARBALL"
[[ -d $K/cmd/kube-apiserver && -d $K/vendor ]] || fail "$TARBALL does not look like a Kubernetes tree with vendor/"
log "unpacked into $K"

# --- 3. reflect2 -------------------------------------------------------------------------------------
STEP=reflect2
rm -rf "$K/vendor/github.com/modern-go/reflect2"
mkdir -p "$K/vendor/github.com/modern-go/reflect2"
cp -a "$REFLECT2/." "$K/vendor/github.com/modern-go/reflect2/"
find "$K/vendor/github.com/modern-go/reflect2" -name '*_test.go' -delete

# --- 4. openapi --------------------------------------------------------------------------------------
STEP=openapi
cd "$K"
log "building openapi-gen"
go build -o "$TMP/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen || fail "go build openapi-gen"
pkgs=$(grep -rl --include='*.go' -e '+k8s:openapi-gen=' --exclude-dir=vendor --exclude-dir=_output . |
	xargs -n1 dirname | sort -u |
	grep -v -e code-generator -e sample-apiserver |
	sed -E 's#^\./staging/src/#vendor/#; s#^\./##; s#^#k8s.io/kubernetes/#' | paste -sd, -)
[[ -n $pkgs ]] || fail "no package carries a +k8s:openapi-gen tag"
log "openapi-gen over $(tr , '\n' <<<"$pkgs" | wc -l) packages"
"$TMP/openapi-gen" -i "$pkgs" -p k8s.io/kubernetes/pkg/generated/openapi -O zz_generated.openapi \
	-h vendor/k8s.io/code-generator/hack/boilerplate.go.txt -o "$GOPATH/src" \
	--report-filename "$TMP/openapi-violations.txt" || fail "openapi-gen"
[[ -s pkg/generated/openapi/zz_generated.openapi.go ]] || fail "openapi-gen wrote no zz_generated.openapi.go"

# --- 5. build ----------------------------------------------------------------------------------------
STEP=build
minor=${K8S_VERSION#*.}
minor=${minor%%.*}
ld=""
for p in k8s.io/kubernetes/vendor/k8s.io/component-base/version k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
	ld+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=${K8S_VERSION%%.*} -X $p.gitMinor=$minor"
	ld+=" -X $p.gitTreeState=clean -X $p.gitCommit=debian-$K8S_VERSION"
done
mkdir -p "$TMP/out/bin"
for b in "${BINS[@]}"; do
	STEP="build $b"
	log "go build ./cmd/$b"
	go build -trimpath -ldflags "-s -w $ld" -o "$TMP/out/bin/$b" "./cmd/$b" || fail "go build ./cmd/$b"
done
STEP=verify
"$TMP/out/bin/kubectl" version --client --short 2>/dev/null | grep -q "v$K8S_VERSION" ||
	fail "kubectl does not report v$K8S_VERSION"
"$TMP/out/bin/kubelet" --version | grep -q "v$K8S_VERSION" || fail "kubelet does not report v$K8S_VERSION"
echo "v$K8S_VERSION from $(basename "$TARBALL"), Go $(go env GOVERSION), reflect2 from $REFLECT2" >"$TMP/out/BUILD-INFO"
mv -T "$TMP/out" "$OUT" || fail "cannot rename the build into $OUT"
log "done: $OUT/bin"
echo "$OUT/bin"
