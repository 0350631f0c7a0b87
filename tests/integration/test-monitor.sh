#!/usr/bin/env bash
# Monitoring end to end, through the real binaries: `gpuslice monitor` on the simulated node
# (build/sim/libnvidia-ml.so.1), `gpuslice ps`, `gpuslice labels`, `gpuslice alloc --engine`, with
# real peers: promtool, a prometheus server, podman containers and `podman system service`.
#
#   test-monitor.sh BUILD_DIR SOURCE_DIR CASE
#
# The seed 002 scenario (tests/data/scenarios/seed002-titanv-shared-processes.smi): 8 x TITAN V,
# processes with the seed's PIDs and sizes (gpuslice-sim proc add --keep), attributed through a
# prepared proc root to four pods of different layouts; GPU 2 runs two pods' processes, GPU 6 two
# processes of one container.
#
# Exit 0 pass, 1 fail, 77 skip (only when a tool the case needs is not installed).
# Every wait is bounded; a trap stops everything started here and removes what was created.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
CASE=$3
GS=$BUILD/gpuslice
SIM=$BUILD/sim/gpuslice-sim
TMP=$(mktemp -d /tmp/gpuslice-monitor.XXXXXX)
PIDS=()
CONTAINERS=()
DEVDIR=""

cleanup() {
  set +e
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  # A process wrapped in timeout(1) that outlives the wait is killed with its wrapper: an orphan
  # would keep ctest's output pipe open until its own timeout (seen with ASan builds, where
  # LeakSanitizer's exit-time check occasionally deadlocks in its ptrace stop-the-world).
  for p in "${PIDS[@]}"; do
    timeout 10 tail --pid="$p" -f /dev/null 2>/dev/null
    for c in $(pgrep -P "$p" 2>/dev/null); do kill -KILL "$c" 2>/dev/null; done
    kill -KILL "$p" 2>/dev/null
  done
  for c in "${CONTAINERS[@]}"; do timeout 30 podman rm -f -t 0 "$c" >/dev/null 2>&1; done
  [ -n "$DEVDIR" ] && rm -rf "$DEVDIR"
  rm -rf "$TMP"
}
trap cleanup EXIT

fail() { echo "FAIL [$CASE]: $*" >&2; exit 1; }
skip() { echo "SKIP [$CASE]: $*"; exit 77; }
need() { command -v "$1" >/dev/null || skip "$1 is not installed"; }

export LD_LIBRARY_PATH=$BUILD/sim
export GPUSLICE_SIM_NODE=$SRC/tests/integration/monitor-seed002.node
export GPUSLICE_SIM_STATE=$TMP/sim.state
MIB=1048576

# ---- the seed 002 scenario -------------------------------------------------------------------
UID_A=0a1b2c3d-0000-4000-8000-00000000000a; CID_A=$(printf 'a%.0s' {1..64})
UID_B=0a1b2c3d-0000-4000-8000-00000000000b; CID_B=$(printf 'b%.0s' {1..64})
UID_C=0a1b2c3d-0000-4000-8000-00000000000c; CID_C=$(printf 'c%.0s' {1..64})
UID_D=0a1b2c3d-0000-4000-8000-00000000000d; CID_D=$(printf 'd%.0s' {1..64})
PROC=$TMP/proc

mkproc() { # PID COMM CGROUP-TEXT
  mkdir -p "$PROC/$1"
  printf '%s\n' "$2" > "$PROC/$1/comm"
  printf '%b' "$3" > "$PROC/$1/cgroup"
}

seed_setup() {
  "$SIM" reset >/dev/null
  # guaranteed pod, cgroup v2, systemd driver, containerd
  mkproc 159584 main "0::/kubepods.slice/kubepods-pod${UID_A//-/_}.slice/cri-containerd-$CID_A.scope\n"
  # burstable pod, cgroup v1 with named hierarchies, cgroupfs driver
  mkproc 41728 python "12:name=systemd:/kubepods/burstable/pod$UID_B/$CID_B\n4:memory:/kubepods/burstable/pod$UID_B/$CID_B\n0::/\n"
  # besteffort pod, cgroup v2, systemd driver, CRI-O
  mkproc 152095 main "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID_C//-/_}.slice/crio-$CID_C.scope\n"
  # two processes of one container
  for pid in 3148 11020; do
    mkproc $pid python3.6 "9:name=systemd:/kubepods/pod$UID_D/$CID_D\n4:memory:/kubepods/pod$UID_D/$CID_D\n"
  done
  "$SIM" proc add --gpu 0 --pid 159584 --mem 2635MiB --sm 0 --keep
  "$SIM" proc add --gpu 2 --pid 41728 --mem 5133MiB --sm 1 --keep
  "$SIM" proc add --gpu 2 --pid 152095 --mem 3565MiB --sm 0 --keep
  "$SIM" proc add --gpu 6 --pid 3148 --mem 3887MiB --sm 8 --keep
  "$SIM" proc add --gpu 6 --pid 11020 --mem 3887MiB --sm 8 --keep
}

start_monitor() { # extra args...
  : > "$TMP/monitor.log"
  timeout 300 "$GS" monitor --metrics-address 127.0.0.1:0 --sample-interval 1s "$@" 2> "$TMP/monitor.log" &
  MON_PID=$!
  PIDS+=("$MON_PID")
  for _ in $(seq 100); do
    MON_PORT=$(sed -n 's/.*msg="monitor serving".* port=\([0-9]*\).*/\1/p' "$TMP/monitor.log" || true)
    [ -n "$MON_PORT" ] && return 0
    kill -0 "$MON_PID" 2>/dev/null || { cat "$TMP/monitor.log" >&2; fail "gpuslice monitor exited early"; }
    sleep 0.1
  done
  cat "$TMP/monitor.log" >&2
  fail "gpuslice monitor did not start"
}

scrape() { curl -sf --max-time 10 "http://127.0.0.1:$MON_PORT/metrics"; }

# expect_series FILE NAME LABELS-REGEX VALUE — exactly one sample matches
expect_series() {
  local n
  n=$(grep -cE "^$2\{$3\} $4\$" "$1" || true)
  [ "$n" = 1 ] || { grep -E "^$2[{ ]" "$1" >&2 || true; fail "$2{$3} $4: $n matching samples, expected 1"; }
}

GPU='gpu_uuid="GPU-[0-9a-f-]+",gpu_model="TITAN V"'

case_seed_metrics() {
  seed_setup
  start_monitor --proc-root "$PROC" --nfd-features-file "$TMP/features"
  scrape > "$TMP/m"
  grep -qxF 'nvidia.com/gpu.count=8' "$TMP/features" || fail "the monitor did not write the NFD features file"
  # per process: the seed's PIDs, sizes, names, pods (uids: no runtime to name them) and containers
  expect_series "$TMP/m" gpuslice_process_gpu_memory_used_bytes \
    "pid=\"159584\",process=\"main\",namespace=\"\",pod=\"$UID_A\",container=\"${CID_A:0:12}\",gpu_index=\"0\",$GPU" $((2635 * MIB))
  expect_series "$TMP/m" gpuslice_process_gpu_memory_used_bytes \
    "pid=\"41728\",process=\"python\",namespace=\"\",pod=\"$UID_B\",container=\"${CID_B:0:12}\",gpu_index=\"2\",$GPU" $((5133 * MIB))
  expect_series "$TMP/m" gpuslice_process_gpu_memory_used_bytes \
    "pid=\"152095\",process=\"main\",namespace=\"\",pod=\"$UID_C\",container=\"${CID_C:0:12}\",gpu_index=\"2\",$GPU" $((3565 * MIB))
  for pid in 3148 11020; do
    expect_series "$TMP/m" gpuslice_process_gpu_memory_used_bytes \
      "pid=\"$pid\",process=\"python3.6\",namespace=\"\",pod=\"$UID_D\",container=\"${CID_D:0:12}\",gpu_index=\"6\",$GPU" $((3887 * MIB))
    expect_series "$TMP/m" gpuslice_process_sm_utilization_ratio "pid=\"$pid\",.*,gpu_index=\"6\",$GPU" 0.08
  done
  [ "$(grep -c '^gpuslice_process_gpu_memory_used_bytes{' "$TMP/m")" = 5 ] || fail "expected 5 process series"
  # per container: GPU 2 split between two pods; GPU 6's two processes summed into one container
  expect_series "$TMP/m" gpuslice_container_gpu_memory_used_bytes \
    "namespace=\"\",pod=\"$UID_B\",container=\"${CID_B:0:12}\",container_id=\"$CID_B\",gpu_index=\"2\",$GPU" $((5133 * MIB))
  expect_series "$TMP/m" gpuslice_container_gpu_memory_used_bytes \
    "namespace=\"\",pod=\"$UID_C\",container=\"${CID_C:0:12}\",container_id=\"$CID_C\",gpu_index=\"2\",$GPU" $((3565 * MIB))
  expect_series "$TMP/m" gpuslice_container_gpu_memory_used_bytes \
    "namespace=\"\",pod=\"$UID_D\",container=\"${CID_D:0:12}\",container_id=\"$CID_D\",gpu_index=\"6\",$GPU" $((7774 * MIB))
  expect_series "$TMP/m" gpuslice_container_sm_utilization_ratio "namespace=\"\",pod=\"$UID_D\",.*,gpu_index=\"6\",$GPU" 0.16
  [ "$(grep -c '^gpuslice_container_gpu_memory_used_bytes{' "$TMP/m")" = 4 ] || fail "expected 4 container series"
  # per GPU: what the processes hold, over the idle baseline of GPU 1
  local idle used2 used6
  idle=$(sed -n 's/^gpuslice_gpu_memory_used_bytes{gpu_index="1",.*} //p' "$TMP/m")
  used2=$(sed -n 's/^gpuslice_gpu_memory_used_bytes{gpu_index="2",.*} //p' "$TMP/m")
  used6=$(sed -n 's/^gpuslice_gpu_memory_used_bytes{gpu_index="6",.*} //p' "$TMP/m")
  [ $((used2 - idle)) = $(((5133 + 3565) * MIB)) ] || fail "GPU 2 used $used2 (idle $idle)"
  [ $((used6 - idle)) = $((7774 * MIB)) ] || fail "GPU 6 used $used6 (idle $idle)"
  expect_series "$TMP/m" gpuslice_gpu_memory_total_bytes "gpu_index=\"3\",$GPU" $((12066 * MIB))
  [ "$(grep -c '^gpuslice_gpu_healthy{.*} 1$' "$TMP/m")" = 8 ] || fail "expected 8 healthy GPUs"
  grep -q '^# TYPE gpuslice_monitor_samples_total counter$' "$TMP/m" || fail "agent's own counters missing"
  # compatibility families are off by default
  if grep -q '^pod_used_gpu_mem_MB' "$TMP/m"; then fail "compat family without the option"; fi
  # health, unknown paths, SIGTERM → exit 0
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$MON_PORT/healthz")" = 200 ] || fail "/healthz"
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$MON_PORT/nope")" = 404 ] || fail "404"
  kill -TERM "$MON_PID"
  local rc=0
  timeout 20 tail --pid="$MON_PID" -f /dev/null || fail "gpuslice monitor still running 20 s after SIGTERM"
  wait "$MON_PID" || rc=$?
  [ "$rc" = 0 ] || fail "gpuslice monitor exited $rc on SIGTERM"
}

case_seed_follows_changes() {
  seed_setup
  start_monitor --proc-root "$PROC"
  "$SIM" proc del --pid 41728 >/dev/null
  # the next samples no longer have it (sampling every second; bounded wait)
  for _ in $(seq 50); do
    scrape > "$TMP/m"
    grep -q 'pid="41728"' "$TMP/m" || return 0
    sleep 0.2
  done
  fail "a process that left GPU 2 is still reported"
}

case_seed_compat() {
  seed_setup
  start_monitor --proc-root "$PROC" --metrics-compat pod-used-gpu-mem,gpu-manager --node-name node-7
  scrape > "$TMP/m"
  expect_series "$TMP/m" pod_used_gpu_mem_MB \
    "pod_name=\"$UID_B\",pod_namespace=\"\",gpu_uuid=\"GPU-[0-9a-f-]+\",gpu_name=\"TITAN V\",app_pid=\"41728\"" 5133
  [ "$(grep -c '^pod_used_gpu_mem_MB{' "$TMP/m")" = 5 ] || fail "expected 5 pod_used_gpu_mem_MB series"
  expect_series "$TMP/m" container_gpu_memory_total \
    "pod_name=\"$UID_D\",namespace=\"\",node=\"node-7\",container_name=\"${CID_D:0:12}\"" 7774
  expect_series "$TMP/m" container_gpu_utilization \
    "pod_name=\"$UID_D\",namespace=\"\",node=\"node-7\",container_name=\"${CID_D:0:12}\"" 16
}

case_seed_ps() {
  seed_setup
  "$GS" ps --proc-root "$PROC" > "$TMP/ps"
  head -1 "$TMP/ps" | grep -qE '^GPU +PID +MEMORY +SM% +PROCESS +NAMESPACE +POD +CONTAINER$' || fail "ps header: $(head -1 "$TMP/ps")"
  grep -qE "^2 +41728 +5133MiB +1 +python +- +$UID_B +${CID_B:0:12}\$" "$TMP/ps" || { cat "$TMP/ps" >&2; fail "ps row for 41728"; }
  [ "$(wc -l < "$TMP/ps")" = 6 ] || fail "ps: expected a header and 5 rows"
  # --watch redraws in place until SIGINT, then exits 0
  local rc=0
  timeout --preserve-status -s INT 3 "$GS" ps --proc-root "$PROC" --watch --interval 1s > "$TMP/watch" || rc=$?
  [ "$rc" = 0 ] || fail "ps --watch exited $rc on SIGINT"
  [ "$(grep -c $'\e\[H\e\[2J' "$TMP/watch")" -ge 2 ] || fail "ps --watch did not redraw"
  [ "$(grep -c '^2 \+41728 ' "$TMP/watch")" -ge 2 ] || fail "ps --watch rows"
  "$GS" ps --proc-root "$PROC" --json > "$TMP/ps.json"
  /usr/bin/python3 - "$TMP/ps.json" "$UID_D" "$CID_D" <<'EOF'
import json, sys
procs = json.load(open(sys.argv[1]))["processes"]
assert len(procs) == 5, procs
d = [p for p in procs if p["pod_uid"] == sys.argv[2]]
assert sorted(p["pid"] for p in d) == [3148, 11020], d
assert all(p["container_id"] == sys.argv[3] and p["gpu"] == 6 and p["memory_bytes"] == 3887 << 20 for p in d), d
assert all(p["qos"] == "guaranteed" and p["runtime"] == "unknown" for p in d), d
c = [p for p in procs if p["pid"] == 152095][0]
assert (c["qos"], c["runtime"], c["sm_percent"]) == ("besteffort", "cri-o", 0), c
EOF
}

case_promtool() {
  need promtool
  seed_setup
  # a process name that needs escaping in a label value
  printf 'a"b\\c\n' > "$PROC/41728/comm"
  start_monitor --proc-root "$PROC" --metrics-compat pod-used-gpu-mem,gpu-manager
  scrape > "$TMP/m"
  grep -qF 'process="a\"b\\c"' "$TMP/m" || fail "label value not escaped"
  # gpuslice's own families: no complaint at all
  grep -vE '^(# (HELP|TYPE) )?(pod_used_gpu_mem_MB|container_gpu_)' "$TMP/m" > "$TMP/own"
  promtool check metrics < "$TMP/own" || fail "promtool check metrics"
  # the compatibility families keep their historical names, which promtool's naming lint dislikes;
  # anything else it says (a parse error above all) fails
  promtool check metrics < "$TMP/m" > "$TMP/lint" 2>&1 || true
  if grep -vE '^(container_gpu_memory_total non-counter metrics should not have "_total" suffix|pod_used_gpu_mem_MB metric names should not contain abbreviated units)$' "$TMP/lint"; then
    fail "promtool on the compatibility families"
  fi
}

case_cri_names() {
  if ! { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import grpc, grpc_tools' 2>/dev/null; }; then
    skip "python3-grpcio / python3-grpc-tools not installed"
  fi
  seed_setup
  local sock=$TMP/cri.sock
  timeout 300 /usr/bin/python3 "$SRC/tests/integration/cri_standin.py" --build "$BUILD" --socket "$sock" \
    --container "$CID_B,running,ml,trainer-0,$UID_B,worker" \
    --container "$CID_D,running,research,eval-3,$UID_D,main" \
    --container "$CID_C,exited,old,gone-1,$UID_C,stale" > "$TMP/cri.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 300); do grep -q ready "$TMP/cri.log" && break; sleep 0.1; done
  grep -q ready "$TMP/cri.log" || { cat "$TMP/cri.log" >&2; fail "CRI stand-in did not start"; }
  start_monitor --proc-root "$PROC" --cri-socket "$sock"
  scrape > "$TMP/m"
  expect_series "$TMP/m" gpuslice_container_gpu_memory_used_bytes \
    "namespace=\"ml\",pod=\"trainer-0\",container=\"worker\",container_id=\"$CID_B\",gpu_index=\"2\",$GPU" $((5133 * MIB))
  expect_series "$TMP/m" gpuslice_container_gpu_memory_used_bytes \
    "namespace=\"research\",pod=\"eval-3\",container=\"main\",container_id=\"$CID_D\",gpu_index=\"6\",$GPU" $((7774 * MIB))
  # an exited container does not name anything; unknown ones fall back to ids
  expect_series "$TMP/m" gpuslice_container_gpu_memory_used_bytes \
    "namespace=\"\",pod=\"$UID_C\",container=\"${CID_C:0:12}\",container_id=\"$CID_C\",gpu_index=\"2\",$GPU" $((3565 * MIB))
  [ "$(cat "$sock.calls")" -ge 1 ] || fail "the monitor never asked the CRI runtime"
}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# A real prometheus server scrapes TARGET (host:port); PromQL must return pod B's GPU memory.
prometheus_pod_memory() {
  local target=$1 port
  port=$(free_port)
  cat > "$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gpuslice
    static_configs:
      - targets: ['$target']
EOF
  timeout 300 prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$port" > "$TMP/prometheus.log" 2>&1 &
  PIDS+=($!)
  local q='gpuslice_container_gpu_memory_used_bytes{pod="'$UID_B'"}'
  for _ in $(seq 300); do
    if curl -sf --max-time 2 -G "http://127.0.0.1:$port/api/v1/query" --data-urlencode "query=$q" > "$TMP/q.json" 2>/dev/null &&
       /usr/bin/python3 - "$TMP/q.json" $((5133 * MIB)) <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
res = r["data"]["result"]
if not res:
    sys.exit(1)
assert r["status"] == "success" and len(res) == 1, r
assert res[0]["metric"]["gpu_index"] == "2", res
assert int(float(res[0]["value"][1])) == int(sys.argv[2]), res
EOF
    then
      return 0
    fi
    sleep 0.2
  done
  tail -20 "$TMP/prometheus.log" >&2
  cat "$TMP/q.json" >&2 || true
  fail "prometheus never answered the pod's memory"
}

case_prometheus() {
  need prometheus
  seed_setup
  start_monitor --proc-root "$PROC"
  prometheus_pod_memory "127.0.0.1:$MON_PORT"
}

# The same through the node agent, which runs the monitor service in-process (--metrics-address).
# No kubelet here: the agent keeps serving metrics while it waits for kubelet.sock.
case_prometheus_agent() {
  need prometheus
  seed_setup
  local aport
  aport=$(free_port)
  mkdir -p "$TMP/device-plugins"
  timeout 300 "$GS" node --plugin-dir "$TMP/device-plugins" --state-dir "$TMP/agent-state" \
    --pod-resources-socket "$TMP/no-kubelet.sock" --metrics-address "127.0.0.1:$aport" \
    --sample-interval 1s --proc-root "$PROC" 2> "$TMP/agent.log" &
  PIDS+=($!)
  prometheus_pod_memory "127.0.0.1:$aport"
  grep -q 'msg="serving metrics"' "$TMP/agent.log" || { cat "$TMP/agent.log" >&2; fail "the agent did not log its metrics listener"; }
}

case_labels() {
  "$GS" labels --output "$TMP/features" || fail "gpuslice labels"
  for l in 'nvidia-gpu-name=TITAN-V' 'nvidia.com/gpu.product=TITAN-V' 'nvidia.com/gpu.memory=12066' \
           'nvidia.com/gpu.count=8' 'nvidia.com/gpu.family=volta' 'nvidia.com/cuda.driver-version.full=450.57' \
           'nvidia.com/cuda.runtime-version.full=11.0' 'nvidia.com/cuda.runtime-version.major=11'; do
    grep -qxF "$l" "$TMP/features" || { cat "$TMP/features" >&2; fail "label $l"; }
  done
  [ "$(stat -c %a "$TMP/features")" = 644 ] || fail "features file mode"
  if ls "$TMP"/features.tmp* >/dev/null 2>&1; then fail "temporary file left behind"; fi
}

# ---- podman ------------------------------------------------------------------------------------
podman_setup() {
  need podman
  local rc=0
  IMAGE=$("$SRC/tests/integration/podman-setup.sh") || rc=$?
  [ "$rc" = 77 ] && skip "podman setup: a tool is missing"
  [ "$rc" = 0 ] || fail "podman setup failed"
  ENGINE_SOCK=$TMP/podman.sock
  timeout 300 podman system service --time=0 "unix://$ENGINE_SOCK" > "$TMP/podman-service.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do
    curl -sf --max-time 2 --unix-socket "$ENGINE_SOCK" http://d/_ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  cat "$TMP/podman-service.log" >&2
  fail "podman system service did not come up"
}

# run_container NAME ARGS... — detached, no network, removed by the trap; the name is in $RUN_NAME.
# (Not meant for $(...): the trap's list must be filled in this shell, not in a subshell.)
run_container() {
  RUN_NAME=$1-$$
  shift
  CONTAINERS+=("$RUN_NAME")
  timeout 60 podman run -d --network none --name "$RUN_NAME" "$@" > /dev/null || fail "podman run $RUN_NAME"
}

case_podman_names() {
  podman_setup
  "$SIM" reset >/dev/null
  local plain k8s
  run_container mon-plain "$IMAGE" sleep 300
  plain=$RUN_NAME
  run_container mon-k8s --label io.kubernetes.pod.name=trainer-0 --label io.kubernetes.pod.namespace=ml \
    --label io.kubernetes.container.name=worker --label io.kubernetes.pod.uid=$UID_A "$IMAGE" sleep 300
  k8s=$RUN_NAME
  "$SIM" proc add --gpu 1 --pid "$(podman inspect "$plain" --format '{{.State.Pid}}')" --mem 1GiB --sm 20
  "$SIM" proc add --gpu 5 --pid "$(podman inspect "$k8s" --format '{{.State.Pid}}')" --mem 2GiB --sm 40
  "$GS" ps --engine "unix://$ENGINE_SOCK" > "$TMP/ps"
  grep -qE "^1 +[0-9]+ +1024MiB +20 +sleep +- +- +$plain\$" "$TMP/ps" || { cat "$TMP/ps" >&2; fail "plain container by name"; }
  grep -qE "^5 +[0-9]+ +2048MiB +40 +sleep +ml +trainer-0 +worker\$" "$TMP/ps" || { cat "$TMP/ps" >&2; fail "pod names from labels"; }
  start_monitor --engine "unix://$ENGINE_SOCK"
  scrape > "$TMP/m"
  expect_series "$TMP/m" gpuslice_container_gpu_memory_used_bytes \
    "namespace=\"\",pod=\"\",container=\"$plain\",container_id=\"[0-9a-f]{64}\",gpu_index=\"1\",$GPU" $((1024 * MIB))
  expect_series "$TMP/m" gpuslice_container_gpu_memory_used_bytes \
    "namespace=\"ml\",pod=\"trainer-0\",container=\"worker\",container_id=\"[0-9a-f]{64}\",gpu_index=\"5\",$GPU" $((2048 * MIB))
}

workload_in_container() { # GPU SIZE EXTRA-PODMAN-ARGS... — returns once ready; the name is in $RUN_NAME
  local gpu=$1 size=$2 name
  shift 2
  # The workload allocates through the simulated libcuda.so.1 inside the container; the host's
  # libraries and the build are bind-mounted read-only into the busybox image.
  run_container "mon-workload-$gpu" "$@" -v /lib:/lib:ro -v /lib64:/lib64:ro -v /usr/lib:/usr/lib:ro \
    -v "$BUILD/sim:$BUILD/sim:ro" -v "$SRC/tests/integration:$SRC/tests/integration:ro" -v "$TMP:$TMP" \
    -e GPUSLICE_SIM_NODE -e GPUSLICE_SIM_STATE -e LD_LIBRARY_PATH="$BUILD/sim" \
    "$IMAGE" "$BUILD/sim/gpuslice-sim-workload" --gpu "$gpu" --mem "$size" --seconds 120
  name=$RUN_NAME
  for _ in $(seq 100); do
    podman logs "$name" 2>/dev/null | grep -q '^ready' && break
    sleep 0.1
  done
  podman logs "$name" 2>/dev/null | grep -q '^ready' || { podman logs "$name" >&2; fail "workload not ready"; }
}

case_podman_workload() {
  podman_setup
  [ -x "$BUILD/sim/gpuslice-sim-workload" ] || skip "gpuslice-sim-workload not built (no cuda.h)"
  "$SIM" reset >/dev/null
  # --pid host: the workload knows its host PID itself
  local name
  workload_in_container 3 1536MiB --pid host
  name=$RUN_NAME
  "$GS" ps --engine "unix://$ENGINE_SOCK" > "$TMP/ps"
  grep -qE "^3 +[0-9]+ +1536MiB +[0-9]+ +gpuslice-sim-wo +$name\$" "$TMP/ps" || { cat "$TMP/ps" >&2; fail "workload attributed by name"; }
}

case_podman_workload_pidns() {
  podman_setup
  [ -x "$BUILD/sim/gpuslice-sim-workload" ] || skip "gpuslice-sim-workload not built (no cuda.h)"
  "$SIM" reset >/dev/null
  # its own PID namespace: it sees itself as PID 1; NVML (the simulator, like the driver) must
  # still report the host PID, which is what the monitor finds in the host's /proc
  local name hostpid
  workload_in_container 4 1GiB
  name=$RUN_NAME
  podman logs "$name" | grep -q '^ready pid=1 ' || { podman logs "$name" >&2; fail "expected PID 1 inside"; }
  hostpid=$(podman inspect "$name" --format '{{.State.Pid}}')
  "$GS" ps --engine "unix://$ENGINE_SOCK" > "$TMP/ps"
  grep -qE "^4 +$hostpid +1024MiB +[0-9]+ +gpuslice-sim-wo +$name\$" "$TMP/ps" || { cat "$TMP/ps" >&2; fail "host PID $hostpid attributed by name"; }
}

case_podman_alloc() {
  podman_setup
  "$SIM" reset >/dev/null
  # Device nodes with NVIDIA's major and the minors of GPUs 6 and 7. Podman's inspect finds a
  # device only under /dev, so they live in a directory of their own there, removed by the trap.
  DEVDIR=/dev/gpuslice-test-$$
  mkdir -p "$DEVDIR"
  mknod "$DEVDIR/nvidia6" c 195 6
  mknod "$DEVDIR/nvidia7" c 195 7
  run_container mon-dev --device "$DEVDIR/nvidia6:/dev/nvidia6" --device "$DEVDIR/nvidia7:/dev/nvidia7" "$IMAGE" sleep 300
  run_container mon-env -e NVIDIA_VISIBLE_DEVICES=2 "$IMAGE" sleep 300
  local uuid4
  uuid4=$("$GS" topo --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["gpus"][4]["uuid"])')
  run_container mon-uuid -e NVIDIA_VISIBLE_DEVICES="$uuid4" "$IMAGE" sleep 300
  # a stopped container holds nothing
  CONTAINERS+=("mon-stopped-$$")
  timeout 60 podman create --network none --name "mon-stopped-$$" -e NVIDIA_VISIBLE_DEVICES=all "$IMAGE" sleep 300 >/dev/null
  "$GS" alloc --engine "unix://$ENGINE_SOCK" --count 4 > "$TMP/alloc" 2> "$TMP/alloc.err" || { cat "$TMP/alloc.err" >&2; fail "alloc --engine"; }
  grep -qE "^busy: +6,7 \(container mon-dev-$$\)\$" "$TMP/alloc.err" || { cat "$TMP/alloc.err" >&2; fail "device nodes"; }
  grep -qE "^busy: +2 \(container mon-env-$$\)\$" "$TMP/alloc.err" || { cat "$TMP/alloc.err" >&2; fail "NVIDIA_VISIBLE_DEVICES index"; }
  grep -qE "^busy: +4 \(container mon-uuid-$$\)\$" "$TMP/alloc.err" || { cat "$TMP/alloc.err" >&2; fail "NVIDIA_VISIBLE_DEVICES uuid"; }
  if grep -q "mon-stopped" "$TMP/alloc.err"; then fail "a stopped container holds GPUs"; fi
  # free: 0 1 3 5 — all four of them, printed ready to paste
  grep -qxF "docker:          --gpus '\"device=0,1,3,5\"'" "$TMP/alloc" || { cat "$TMP/alloc" >&2; fail "alloc answer"; }
  # one more than is free: not satisfiable (exit 4)
  local rc=0
  "$GS" alloc --engine "unix://$ENGINE_SOCK" --count 5 > /dev/null 2>&1 || rc=$?
  [ "$rc" = 4 ] || fail "alloc --count 5 exited $rc, expected 4"
}

case_engine_down() {
  local rc=0
  "$GS" alloc --engine "unix://$TMP/no-such.sock" --count 1 > /dev/null 2> "$TMP/err" || rc=$?
  [ "$rc" = 1 ] || fail "alloc with an absent engine exited $rc"
  grep -q "Connection refused\|No such file" "$TMP/err" || { cat "$TMP/err" >&2; fail "error message"; }
}

"case_${CASE//-/_}"
echo "PASS [$CASE]"
