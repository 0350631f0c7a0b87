#!/usr/bin/env bash
# MIG through the real gpuslice binary on the simulated node (build/sim, tests/data/mig/*.node):
#   test-mig.sh BUILD SOURCE cli   gpuslice topo (MIG tables, JSON), gpuslice mig status/plan/apply/recover
#                                  with a layout file (exit codes, refusals, a killed apply recovered), ps with
#                                  a CUDA workload on a MIG device (gpuslice-sim-workload, CUDA_VISIBLE_DEVICES)
#   test-mig.sh BUILD SOURCE cdi   gpuslice cdi generate with MIG devices on a fake node (mknod device nodes,
#                                  gpuslice-sim caps: mig-minors and /dev/nvidia-caps), the missing-caps error
# Prints one line per check; exit 1 when one failed, 77 (skipped) for cdi when not root.
set -uo pipefail
BUILD=$(cd "$1" && pwd) SOURCE=$(cd "$2" && pwd) MODE=$3
G=$BUILD/gpuslice SIM=$BUILD/sim/gpuslice-sim
tmp=$(mktemp -d /tmp/gpuslice-mig-XXXXXX)
chmod 755 "$tmp"
workload_pid=""
cleanup() {
  [ -n "$workload_pid" ] && kill "$workload_pid" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
expect_exit() { # CODE NAME CMD...
  local want=$1 name=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [ "$got" -eq "$want" ]; then ok "$name (exit $got)"; else bad "$name: exit $got, want $want; $(cat "$tmp/err")"; fi
}
J() { /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); $1"; }
export LD_LIBRARY_PATH=$BUILD/sim

cli_tests() {
  export GPUSLICE_SIM_NODE=$SOURCE/tests/data/mig/h100-mixed.node GPUSLICE_SIM_STATE=$tmp/sim.state
  out=$("$G" topo --mig)
  check "topo --mig: GPU 3 off with on pending" grep -qE '^3 +off +on$' <<<"$out"
  check "topo --mig: GPU instances as nvidia-smi mig -lgi (name, profile id, id, placement)" \
    grep -qE '^1 +MIG 3g\.40gb +9 +1 +4:4 +2$' <<<"$out"
  check "topo --mig: the 2c.3g.40gb MIG device with its SMs" grep -qE '^1 +1 +0 +0 +2c\.3g\.40gb .* 40 +3 ' <<<"$out"
  check "topo --mig: no MIG line for the V100" test "$(grep -cE '^4 ' <<<"$out")" = 0
  n=$("$G" topo --json | J 'print(sum(len(g["devices"]) for g in d["mig"]))')
  check "topo --json: 10 MIG devices" test "$n" = 10
  check "topo --json: MIG UUIDs" test "$("$G" topo --json | J 'print(d["mig"][0]["devices"][0]["uuid"][:4])')" = "MIG-"

  cat >"$tmp/layouts.yaml" <<'EOF'
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-balanced:
    - device-filter: ["0x233010DE"]
      devices: [0, 2]
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  gpu3-on:
    - devices: [3]
      mig-enabled: true
  too-big:
    - devices: [2]
      mig-enabled: true
      mig-devices: {"3g.40gb": 3}
  ambiguous:
    - {devices: all, mig-enabled: false}
    - {devices: [1], mig-enabled: true}
EOF
  expect_exit 0 "mig plan all-balanced" "$G" mig plan -c "$tmp/layouts.yaml" -l all-balanced
  check "plan: GPU 4 (V100) left as it is" grep -q "GPU 4: not in layout all-balanced" "$tmp/out"
  expect_exit 0 "mig plan all-balanced --gpu 2" "$G" mig plan -c "$tmp/layouts.yaml" -l all-balanced --gpu 2
  check "plan: GPU 2 (empty) would create 4 GPU instances" test "$(grep -c 'create GPU instance' "$tmp/out")" = 4
  expect_exit 4 "mig plan too-big: refused" "$G" mig plan -c "$tmp/layouts.yaml" -l too-big
  check "too-big: the reason" grep -q "holds at most 2" "$tmp/err"
  expect_exit 3 "mig plan ambiguous: two entries for GPU 1" "$G" mig plan -c "$tmp/layouts.yaml" -l ambiguous
  expect_exit 3 "unknown layout" "$G" mig plan -c "$tmp/layouts.yaml" -l nope
  printf 'version: v1\nmig-configs: {a: [{devices: all}]}\n' >"$tmp/bad.yaml"
  expect_exit 3 "malformed layout file" "$G" mig plan -c "$tmp/bad.yaml" -l a
  expect_exit 2 "plan without --layout" "$G" mig plan -c "$tmp/layouts.yaml"
  expect_exit 2 "unknown subcommand" "$G" mig frobnicate

  # a process on GPU 0's MIG device: apply refuses GPU 0, changes GPU 2
  "$SIM" proc add --gpu 0 --pid $$ --mem 64MiB --mig 14:0 --keep
  expect_exit 4 "apply: GPU 0 busy" "$G" mig apply -c "$tmp/layouts.yaml" -l all-balanced --state-dir "$tmp/state"
  check "busy: the reason" grep -q "GPU 0 is in use" "$tmp/err"
  check "busy GPU 0 unchanged (7 devices)" test "$("$G" topo --json | J 'print(len(d["mig"][0]["devices"]))')" = 7
  check "GPU 2 reached the layout" test "$("$G" topo --json | J 'print(len(d["mig"][2]["devices"]))')" = 4
  "$SIM" proc del --pid $$

  # killed after its 3rd change, then recovered
  "$SIM" mig-fault kill 3
  expect_exit 137 "apply killed after its third change" "$G" mig apply -c "$tmp/layouts.yaml" -l all-balanced \
    --gpu 0 --state-dir "$tmp/state"
  expect_exit 0 "status names the interrupted change" "$G" mig status --state-dir "$tmp/state"
  check "status: interrupted, recover completes it" grep -q "GPU 0: layout all-balanced, interrupted" "$tmp/out"
  expect_exit 0 "recover" "$G" mig recover --state-dir "$tmp/state"
  check "recover: GPU 0 recovered" grep -q "GPU 0: recovered" "$tmp/out"
  check "GPU 0 holds the layout" test "$("$G" topo --json | J 'print(sorted(x["profile"] for x in d["mig"][0]["devices"]))')" = "['1g.10gb', '1g.10gb', '2g.20gb', '3g.40gb']"
  expect_exit 0 "apply again: unchanged" "$G" mig apply -c "$tmp/layouts.yaml" -l all-balanced --gpu 0 --state-dir "$tmp/state"
  check "unchanged" grep -q "GPU 0: unchanged (0 changes)" "$tmp/out"

  # GPU 3 needs a reset to turn MIG on
  expect_exit 4 "apply on GPU 3: waits for a reset" "$G" mig apply -c "$tmp/layouts.yaml" -l gpu3-on --state-dir "$tmp/state"
  check "MIG on for GPU 3: pending reset" grep -q "GPU 3 waits for a reset" "$tmp/err"
  "$SIM" gpu-reset 3
  expect_exit 0 "after the reset, recover completes it" "$G" mig recover --state-dir "$tmp/state"
  check "GPU 3 on" grep -qE '^3 +on +on$' <<<"$("$G" topo --mig)"

  # a CUDA program on a MIG device: ps attributes it
  mig_uuid=$("$G" topo --json | J 'print(d["mig"][2]["devices"][0]["uuid"])')
  CUDA_VISIBLE_DEVICES=$mig_uuid "$BUILD/sim/gpuslice-sim-workload" --gpu 0 --mem 512MiB --seconds 60 >"$tmp/wl" 2>&1 &
  workload_pid=$!
  for _ in $(seq 100); do grep -q ready "$tmp/wl" && break; sleep 0.1; done
  check "workload on a MIG device is ready" grep -q ready "$tmp/wl"
  "$G" ps >"$tmp/ps"
  check "ps: MIG column" grep -qE '^GPU +MIG +PID' "$tmp/ps"
  gi=$("$G" topo --json | J 'print(d["mig"][2]["devices"][0]["gpu_instance"])')
  check "ps: the workload on GPU 2, GI $gi CI 0, 512MiB, no SM%" grep -qE "^2 +$gi:0 +$workload_pid +512MiB +- " "$tmp/ps"
  check "ps --json: the MIG device" test "$("$G" ps --json | J 'print([p["mig"]["uuid"] for p in d["processes"] if p["mig"]][0])')" = "$mig_uuid"
  expect_exit 4 "apply all-disabled: GPU 2 busy" "$G" mig apply -c "$tmp/layouts.yaml" -l all-disabled --gpu 2 --state-dir "$tmp/state"
  kill "$workload_pid" 2>/dev/null; wait "$workload_pid" 2>/dev/null; workload_pid=""
}

cdi_tests() {
  [ "$(id -u)" = 0 ] || { echo "SKIP: needs root (mknod)"; exit 77; }
  "$SOURCE/tests/integration/cdi-fixture.sh" "$tmp/fx" 2 535.104.05 12.2 tesla >/dev/null || { echo "fixture failed"; exit 1; }
  cat >"$tmp/node" <<'EOF'
        GPU0    GPU1
GPU0     X      NV18
GPU1    NV18     X
node driver=535.104.05 cuda=12.2
default name="NVIDIA H100 80GB HBM3" memory=80GiB
gpu 0 mig=on
gpu 1 mig=off
mig 0 devices=3g.40gb:1,1g.10gb:2
EOF
  export GPUSLICE_SIM_NODE=$tmp/node GPUSLICE_SIM_STATE=$tmp/sim.state
  gen() { "$G" cdi generate --dev-root "$tmp/fx" --driver-root "$tmp/fx/driver" "$@"; }
  expect_exit 1 "no mig-minors: refused" gen --mig-minors "$tmp/fx/proc/driver/nvidia-caps/mig-minors" -o -
  check "the reason names the file" grep -q "mig-minors" "$tmp/err"
  "$SIM" caps "$tmp/fx" || bad "gpuslice-sim caps"
  check "mig-minors as the driver writes it" grep -qx 'gpu31/gi14/ci7/access 4322' "$tmp/fx/proc/driver/nvidia-caps/mig-minors"
  gi=$("$G" topo --json | J 'print([x["gpu_instance"] for x in d["mig"][0]["devices"] if x["profile"] == "3g.40gb"][0])')
  check "the GI's proc capability file" grep -qx "DeviceFileMinor: $((3 + gi * 9))" \
    "$tmp/fx/proc/driver/nvidia/capabilities/gpu0/mig/gi$gi/access"
  expect_exit 0 "generate with MIG devices" gen --mig-minors "$tmp/fx/proc/driver/nvidia-caps/mig-minors" --format json -o "$tmp/spec.json"
  uuid=$("$G" topo --json | J 'print([x["uuid"] for x in d["mig"][0]["devices"] if x["profile"] == "3g.40gb"][0])')
  idx=$("$G" topo --json | J 'print([x["index"] for x in d["mig"][0]["devices"] if x["profile"] == "3g.40gb"][0])')
  if /usr/bin/python3 - "$tmp/spec.json" "$uuid" "0:$idx" "$gi" <<'EOF'; then
import json, sys
s = json.load(open(sys.argv[1]))
uuid, name, gi = sys.argv[2], sys.argv[3], int(sys.argv[4])
devs = {d["name"]: d["containerEdits"]["deviceNodes"] for d in s["devices"]}
assert s["cdiVersion"] == "0.5.0"
for n in (name, uuid):
    nodes = devs[n]
    assert [x["path"] for x in nodes[:1]] == ["/dev/nvidia0"], nodes
    assert nodes[1]["path"] == "/dev/nvidia-caps/nvidia-cap%d" % (3 + gi * 9), nodes
    assert nodes[2]["path"] == "/dev/nvidia-caps/nvidia-cap%d" % (3 + gi * 9 + 1), nodes
    assert nodes[1]["major"] == 508 and nodes[1]["minor"] == 3 + gi * 9, nodes
mig_names = [n for n in devs if n.startswith("0:")]
assert len(mig_names) == 3, mig_names
assert sum(1 for n in devs if n.startswith("MIG-")) == 3
assert "1:0" not in devs
EOF
    ok "spec: MIG devices by index and UUID, parent + GI + CI cap nodes"
  else
    bad "spec MIG devices"
  fi
  rm -f "$tmp/fx/dev/nvidia-caps/nvidia-cap$((3 + gi * 9 + 1))"
  expect_exit 1 "a missing capability node: refused" gen --mig-minors "$tmp/fx/proc/driver/nvidia-caps/mig-minors" -o -
  check "the reason names the MIG device" grep -q "no capability nodes" "$tmp/err"
}

case $MODE in
  cli) cli_tests ;;
  cdi) cdi_tests ;;
  *) echo "usage: test-mig.sh BUILD SOURCE cli|cdi"; exit 2 ;;
esac
[ "$fails" -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
