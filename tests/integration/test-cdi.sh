#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2181,SC2016 # `check && ok || bad` (ok only echoes); $? after $(...); sh -c '$VAR' for the container
# CDI spec generation, `gpuslice hook` and `gpuslice check` for real, on a fake GPU node built by
# cdi-fixture.sh (mknod device nodes, ELF libraries of a driver version, an ld cache from ldconfig)
# and the simulated NVML (535.104.05 / CUDA 12.2).
#   test-cdi.sh BUILD SOURCE local    generate (JSON parsed back, YAML, options, errors), check,
#                                     the hook's fail-closed paths driven directly (no engine)
#   test-cdi.sh BUILD SOURCE podman   real Podman: --device KIND=1 / =all / =UUID through a spec in
#                                     /var/run/cdi, and the hook through --hooks-dir (refused on
#                                     cuda>=13.0, started on cuda>=12.2 and with NVIDIA_DISABLE_REQUIRE,
#                                     nothing injected with NVIDIA_VISIBLE_DEVICES=void)
# Exit 77 (skipped) when not root, or for podman when podman/runc/busybox are missing.
set -uo pipefail
BUILD=$(cd "$1" && pwd) SOURCE=$(cd "$2" && pwd) MODE=$3
G=$BUILD/gpuslice
NVML=$BUILD/sim/libnvidia-ml.so.1
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (mknod, mounts)"; exit 77; }
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
tmp=$(mktemp -d /tmp/gpuslice-cdi-XXXXXX)
chmod 755 "$tmp"
spec_file="" hooks=""
cleanup() {
  [ -n "$spec_file" ] && rm -f "$spec_file"
  rm -rf "$tmp"
}
trap cleanup EXIT
"$SOURCE/tests/integration/cdi-fixture.sh" "$tmp/fx" 4 535.104.05 12.2 geforce || { echo "fixture failed"; exit 1; }
export GPUSLICE_SIM_NODE=$tmp/fx/node GPUSLICE_SIM_STATE=$tmp/sim.state
gen() { "$G" cdi generate --nvml-library "$NVML" --dev-root "$tmp/fx" --driver-root "$tmp/fx/driver" "$@"; }

py_spec() { # FILE PYTHON-EXPRESSIONS... : each must be true of `s` (the parsed JSON spec)
  /usr/bin/python3 - "$@" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
names = [d["name"] for d in s["devices"]]
mounts = [m["containerPath"] for m in s["containerEdits"].get("mounts", [])]
nodes = [n["path"] for n in s["containerEdits"].get("deviceNodes", [])]
hook = s["containerEdits"].get("hooks", [{}])[0]
for expr in sys.argv[2:]:
    if not eval(expr):
        print("false: %s\n  names=%s\n  mounts=%s\n  nodes=%s" % (expr, names, mounts, nodes))
        sys.exit(1)
EOF
}

local_tests() {
  # JSON, parsed back
  gen --format json -o "$tmp/spec.json" || bad "generate json"
  uuid1=$("$G" topo --nvml-library "$NVML" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["gpus"][1]["uuid"])')
  if py_spec "$tmp/spec.json" \
      's["cdiVersion"] == "0.5.0" and s["kind"] == "nvidia.com/gpu"' \
      'names[:2] == ["0", names[1]] and names[1].startswith("GPU-") and "all" in names and "3" in names' \
      "\"$uuid1\" in names" \
      'len([n for n in names if not n.endswith("-shared")]) == 9 and not any(n.endswith("-shared") for n in names)' \
      'nodes == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"]' \
      's["containerEdits"]["deviceNodes"][2]["major"] == 511 and s["containerEdits"]["deviceNodes"][2]["minor"] == 1' \
      '[d for d in s["devices"] if d["name"] == "2"][0]["containerEdits"]["deviceNodes"][0]["minor"] == 2' \
      'all(m.endswith(".so.535.104.05") for m in mounts if "/lib" in m)' \
      '"/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05" in mounts and "/usr/bin/nvidia-smi" in mounts' \
      '"/run/nvidia-persistenced/socket" in mounts and not any("470" in m or "libz" in m for m in mounts)' \
      'hook["hookName"] == "createContainer" and hook["args"][:3] == ["gpuslice", "hook", "cdi-links"]' \
      '"libcuda.so.535.104.05::/usr/lib/x86_64-linux-gnu/libcuda.so.1" in hook["args"]' \
      '"NVIDIA_VISIBLE_DEVICES=void" in s["containerEdits"]["env"]'; then ok "JSON spec parsed back"; else bad "JSON spec content"; fi
  # capabilities, roots as the host sees them, kind, shared devices
  gen --format json -o "$tmp/u.json" --capabilities utility --host-dev-root /host --host-driver-root /host/drv \
    --kind example.com/gpu --interposer /opt/libgpuslice-cuda.so || bad "generate with options"
  if py_spec "$tmp/u.json" 's["kind"] == "example.com/gpu"' \
      'sorted(m for m in mounts if "/lib" in m) == ["/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05"]' \
      's["containerEdits"]["deviceNodes"][0]["hostPath"] == "/host/dev/nvidiactl"' \
      's["containerEdits"]["mounts"][0]["hostPath"].startswith("/host/drv/usr/lib/")' \
      '"0-shared" in names and "LD_PRELOAD=/run/gpuslice/lib/libcuda.so.1" in [d for d in s["devices"] if d["name"] == "0-shared"][0]["containerEdits"]["env"]'; then
    ok "options: capabilities, host roots, kind, shared devices"; else bad "options"; fi
  # YAML by default, to the file name engines expect (here in a temp dir)
  gen -o "$tmp/cdi/nvidia.com-gpu.yaml" || bad "generate yaml"
  head -3 "$tmp/cdi/nvidia.com-gpu.yaml" | tr '\n' '|' | grep -q '^cdiVersion: "0.5.0"|kind: "nvidia.com/gpu"|devices:|$' \
    && ok "YAML header" || bad "YAML header: $(head -3 "$tmp/cdi/nvidia.com-gpu.yaml")"
  out=$(gen -o -) && grep -q '^  - name: "all"$' <<<"$out" && ok "YAML to stdout" || bad "YAML to stdout"
  # errors: exit codes and one line
  out=$(gen --kind nope -o - 2>&1); [ $? = 2 ] && grep -q 'VENDOR/CLASS' <<<"$out" && ok "bad kind" || bad "bad kind: $out"
  out=$(gen --capabilities compute,sound -o - 2>&1); [ $? = 2 ] && grep -q "unknown 'sound'" <<<"$out" && ok "bad capability" || bad "bad capability: $out"
  mkdir -p "$tmp/broken/etc"; head -c 100 "$tmp/fx/driver/etc/ld.so.cache" > "$tmp/broken/etc/ld.so.cache"
  out=$(gen --driver-root "$tmp/broken" -o - 2>&1); [ $? = 3 ] && grep -q 'not a well-formed ld.so.cache' <<<"$out" \
    && ok "truncated ld cache refused" || bad "truncated ld cache: $out"
  out=$(gen --driver-root "$tmp/nowhere" -o - 2>&1); [ $? = 1 ] && grep -q 'cannot read the driver root' <<<"$out" \
    && ok "missing ld cache" || bad "missing ld cache: $out"
  out=$(gen --dev-root "$tmp/fx/driver" -o - 2>&1); [ $? = 1 ] && grep -q 'no GPU device node' <<<"$out" \
    && ok "no device nodes under the dev root" || bad "no device nodes: $out"
  mkdir -p "$tmp/other/etc"; cp /etc/ld.so.cache "$tmp/other/etc/"
  out=$(gen --driver-root "$tmp/other" -o - 2>&1); [ $? = 1 ] && grep -q 'no library of driver 535.104.05' <<<"$out" \
    && ok "no library of this driver" || bad "no driver libraries: $out"

  # check: the table for this node
  out=$("$G" check --nvml-library "$NVML") || bad "check failed"
  grep -q '^driver: *535.104.05$' <<<"$out" && grep -q '^12.2  .* native$' <<<"$out" \
    && grep -q '^12.4  .* minor-version compatibility$' <<<"$out" \
    && grep -q '^13.0  .*no (forward compatibility needs a data-center GPU)$' <<<"$out" \
    && ok "check on a GeForce 535" || bad "check: $out"
  out=$(sed 's/default brand=geforce/default brand=tesla/' "$tmp/fx/node" > "$tmp/tesla.node" &&
        GPUSLICE_SIM_NODE=$tmp/tesla.node GPUSLICE_SIM_STATE=$tmp/tesla.state "$G" check --nvml-library "$NVML" --json)
  /usr/bin/python3 -c 'import json,sys; j=json.loads(sys.argv[1]); t={x["cuda"]: x["mode"] for x in j["toolkits"]};
assert j["forward_compatibility_possible"] and t["13.0"].startswith("forward compatibility only"), j' "$out" \
    && ok "check on a Tesla 535 (JSON)" || bad "check json: $out"

  # the hook, driven directly: fail closed on bad input, nothing for non-GPU containers
  mkdir -p "$tmp/bundle/rootfs"
  hook() { "$G" hook createContainer --nvml-library "$NVML" --dev-root "$tmp/fx" --driver-root "$tmp/fx/driver"; }
  state="{\"ociVersion\":\"1.0.2\",\"id\":\"x\",\"status\":\"creating\",\"pid\":0,\"bundle\":\"$tmp/bundle\"}"
  out=$(echo 'not json' | hook 2>&1); [ $? = 1 ] && grep -q '^gpuslice hook: container refused: OCI state: not JSON' <<<"$out" \
    && ok "hook: bad state refused" || bad "hook bad state: $out"
  out=$(echo "$state" | hook 2>&1); [ $? = 1 ] && grep -q "cannot read $tmp/bundle/config.json" <<<"$out" \
    && ok "hook: missing config.json refused" || bad "hook missing config: $out"
  echo '{"root": {"path": "rootfs"}, "process": {"env": ["A=1", 7]}}' > "$tmp/bundle/config.json"
  out=$(echo "$state" | hook 2>&1); [ $? = 1 ] && grep -q 'process.env\[1\] is not a string' <<<"$out" \
    && ok "hook: bad config.json refused" || bad "hook bad config: $out"
  echo '{"root": {"path": "rootfs"}, "process": {"env": ["NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_REQUIRE_CUDA=cuda>=99"]}}' > "$tmp/bundle/config.json"
  out=$(echo "$state" | hook 2>&1); [ $? = 0 ] && [ -z "$(ls -A "$tmp/bundle/rootfs")" ] \
    && ok "hook: void is left alone" || bad "hook void: $out"
  echo '{"root": {"path": "rootfs"}, "process": {"env": ["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=cuda>>1"]}}' > "$tmp/bundle/config.json"
  out=$(echo "$state" | hook 2>&1); [ $? = 1 ] && grep -q 'NVIDIA_REQUIRE_CUDA: malformed requirement' <<<"$out" \
    && ok "hook: malformed requirement refused" || bad "hook malformed requirement: $out"
  # a real image string: GPU brand comes from NVML; a GeForce on 535 is refused, a Tesla may use
  # the image's forward-compatibility branch
  req=$(cat "$SOURCE/tests/data/compat/cuda-12.4.env")
  printf '{"root": {"path": "rootfs"}, "process": {"env": ["NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_REQUIRE_CUDA=%s"]}}' "$req" > "$tmp/bundle/config.json"
  out=$(echo "$state" | hook 2>&1); [ $? = 1 ] && grep -q 'cuda>=12.4: needs driver ≥ 550.54.14 for CUDA 12.4, node has 535.104.05 (CUDA 12.2) (and none of the 2 other alternatives holds)' <<<"$out" \
    && ok "hook: CUDA 12.4 image refused on a GeForce 535" || bad "hook 12.4 geforce: $out"
  out=$(echo "$state" | GPUSLICE_SIM_NODE=$tmp/tesla.node GPUSLICE_SIM_STATE=$tmp/tesla.state unshare -m bash -c \
        "mount --make-rprivate / && $G hook createContainer --nvml-library $NVML --dev-root $tmp/fx --driver-root $tmp/fx/driver" 2>&1)
  [ $? = 0 ] && ok "hook: CUDA 12.4 image allowed on a Tesla 535 (forward-compatibility branch)" || bad "hook 12.4 tesla: $out"
  rm -rf "$tmp/bundle/rootfs" && mkdir "$tmp/bundle/rootfs"
  # an allowed container, injected into a plain directory root (no engine): nodes, libraries, links
  echo '{"root": {"path": "rootfs"}, "process": {"env": ["NVIDIA_VISIBLE_DEVICES=2", "NVIDIA_DRIVER_CAPABILITIES=utility"]}}' > "$tmp/bundle/config.json"
  # an image whose /usr/lib is a symlink to / must not make the hook write on the host
  ln -s / "$tmp/bundle/rootfs/usr"
  out=$(unshare -m bash -c "mount --make-rprivate / && echo '$state' | $G hook createContainer --nvml-library $NVML --dev-root $tmp/fx --driver-root $tmp/fx/driver && ls -l $tmp/bundle/rootfs/dev $tmp/bundle/rootfs/lib/x86_64-linux-gnu" 2>&1)
  if [ $? = 0 ] && grep -q 'nvidia2$' <<<"$out" && ! grep -q 'nvidia1$' <<<"$out" && grep -q 'nvidiactl$' <<<"$out" \
     && grep -q 'libnvidia-ml.so.1 -> libnvidia-ml.so.535.104.05' <<<"$out" && ! grep -q 'libcuda' <<<"$out" \
     && [ ! -e /lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05 ]; then
    ok "hook: injection stays inside the root"; [ -n "${CDI_DEBUG:-}" ] && echo "$out"; else bad "hook injection: $out"; fi
}

podman_tests() {
  image=$(bash "$SOURCE/tests/integration/podman-setup.sh") || exit $?
  vendor="t$$-$RANDOM.nvidia.com" # unique: other runs' specs must not clash with ours
  spec_file=/var/run/cdi/${vendor}-gpu.yaml
  gen --kind "$vendor/gpu" || { bad "generate into /var/run/cdi"; return; }
  [ -f "$spec_file" ] || { bad "no $spec_file"; return; }
  prun() { timeout 120 podman run --rm --network none "$@"; }
  # parsed back by the engine itself: exactly /dev/nvidia1 plus the control nodes, libraries mounted
  out=$(prun --device "$vendor/gpu=1" "$image" sh -c 'ls /dev | grep nvidia | tr "\n" " "; echo; ls -l /usr/lib/x86_64-linux-gnu /usr/bin/nvidia-smi; cat /proc/self/mountinfo; echo NVD=$NVIDIA_VISIBLE_DEVICES' 2>&1)
  if [ "$(head -1 <<<"$out")" = "nvidia-modeset nvidia-uvm nvidia-uvm-tools nvidia1 nvidiactl " ] &&
     grep -q 'libcuda.so.1 -> libcuda.so.535.104.05' <<<"$out" && grep -q 'libcuda.so -> libcuda.so.1' <<<"$out" &&
     grep -q ' /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05 ro,' <<<"$out" &&
     grep -q ' /usr/bin/nvidia-smi ' <<<"$out" && grep -q 'NVD=void' <<<"$out"; then
    ok "podman --device KIND=1: nvidia1 + control nodes + driver libraries"; else bad "podman =1: $out"; fi
  out=$(prun --device "$vendor/gpu=all" "$image" sh -c 'ls /dev | grep nvidia | tr "\n" " "' 2>&1)
  [ "$out" = "nvidia-modeset nvidia-uvm nvidia-uvm-tools nvidia0 nvidia1 nvidia2 nvidia3 nvidiactl " ] \
    && ok "podman --device KIND=all" || bad "podman =all: $out"
  uuid3=$("$G" topo --nvml-library "$NVML" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["gpus"][3]["uuid"])')
  out=$(prun --device "$vendor/gpu=$uuid3" "$image" sh -c 'ls /dev | grep "nvidia[0-9]"' 2>&1)
  [ "$out" = "nvidia3" ] && ok "podman --device KIND=UUID" || bad "podman =uuid: $out"
  rm -f "$spec_file"

  # the legacy hook through --hooks-dir
  hooks=$tmp/hooks.d
  mkdir -p "$hooks"
  cat > "$hooks/gpuslice.json" <<EOF
{"version": "1.0.0",
 "hook": {"path": "$G", "args": ["gpuslice", "hook", "createContainer", "--nvml-library", "$NVML",
          "--dev-root", "$tmp/fx", "--driver-root", "$tmp/fx/driver"],
          "env": ["GPUSLICE_SIM_NODE=$GPUSLICE_SIM_NODE", "GPUSLICE_SIM_STATE=$GPUSLICE_SIM_STATE", "ASAN_OPTIONS=detect_leaks=0"]},
 "when": {"always": true}, "stages": ["createContainer"]}
EOF
  look='ls /dev | grep nvidia | tr "\n" " "; ls /usr/lib/x86_64-linux-gnu 2>/dev/null | grep -c libcuda'
  out=$(prun --hooks-dir "$hooks" -e NVIDIA_VISIBLE_DEVICES=all -e 'NVIDIA_REQUIRE_CUDA=cuda>=13.0' "$image" true 2>&1)
  [ $? != 0 ] && grep -q 'gpuslice hook: container refused: NVIDIA_REQUIRE_CUDA: cuda>=13.0: needs driver ≥ 580.65.06 for CUDA 13.0, node has 535.104.05 (CUDA 12.2)' <<<"$out" \
    && ok "hook: cuda>=13.0 on 535 refused with the clear line" || bad "hook cuda>=13.0: $out"
  out=$(prun --hooks-dir "$hooks" -e NVIDIA_VISIBLE_DEVICES=1 -e 'NVIDIA_REQUIRE_CUDA=cuda>=12.2' "$image" sh -c "$look" 2>&1)
  [ "$out" = "nvidia-modeset nvidia-uvm nvidia-uvm-tools nvidia1 nvidiactl 3" ] \
    && ok "hook: cuda>=12.2 starts with GPU 1 injected" || bad "hook cuda>=12.2: $out"
  out=$(prun --hooks-dir "$hooks" -e NVIDIA_VISIBLE_DEVICES=all -e 'NVIDIA_REQUIRE_CUDA=cuda>=13.0' -e NVIDIA_DISABLE_REQUIRE=true "$image" sh -c "$look" 2>&1)
  [ "$out" = "nvidia-modeset nvidia-uvm nvidia-uvm-tools nvidia0 nvidia1 nvidia2 nvidia3 nvidiactl 3" ] \
    && ok "hook: NVIDIA_DISABLE_REQUIRE=true starts" || bad "hook disable require: $out"
  out=$(prun --hooks-dir "$hooks" -e NVIDIA_VISIBLE_DEVICES=void -e 'NVIDIA_REQUIRE_CUDA=cuda>=13.0' "$image" sh -c "$look" 2>&1)
  [ "$out" = "0" ] && ok "hook: void gets nothing" || bad "hook void: $out"
  out=$(prun --hooks-dir "$hooks" -e NVIDIA_VISIBLE_DEVICES=none "$image" sh -c "$look" 2>&1)
  [ "$out" = "nvidia-modeset nvidia-uvm nvidia-uvm-tools nvidiactl 3" ] \
    && ok "hook: none gets the driver but no GPU" || bad "hook none: $out"
  # prestart runs in the runtime's namespaces: the hook joins the container's mount namespace
  mkdir -p "$tmp/hooks-prestart"
  sed 's/createContainer/prestart/g' "$hooks/gpuslice.json" > "$tmp/hooks-prestart/gpuslice.json"
  out=$(prun --hooks-dir "$tmp/hooks-prestart" -e NVIDIA_VISIBLE_DEVICES="$uuid3,0" "$image" sh -c "$look" 2>&1)
  [ "$out" = "nvidia-modeset nvidia-uvm nvidia-uvm-tools nvidia0 nvidia3 nvidiactl 3" ] \
    && ok "hook: prestart stage, GPUs by UUID and index" || bad "hook prestart: $out"
  out=$(prun --hooks-dir "$hooks" -e NVIDIA_VISIBLE_DEVICES=9 "$image" true 2>&1)
  [ $? != 0 ] && grep -q "no GPU '9' on this node" <<<"$out" && ok "hook: unknown GPU refused" || bad "hook unknown GPU: $out"
}

case $MODE in
  local) local_tests ;;
  podman) podman_tests ;;
  *) echo "usage: $0 BUILD SOURCE local|podman"; exit 2 ;;
esac
[ "$fails" = 0 ] && echo "PASS cdi-$MODE" || { echo "FAIL cdi-$MODE ($fails)"; exit 1; }
