# SPDX-License-Identifier: Apache-2.0
"""Integration tests of `gpuslice node` against the kubelet stand-in (kubelet_standin.py).

Each test runs the real binary on the simulated node (LD_LIBRARY_PATH=<build>/sim,
GPUSLICE_SIM_NODE, a private GPUSLICE_SIM_STATE) with temp plugin/state dirs and drives it over
the real gRPC protocols. Usage:

    /usr/bin/python3 test_agent.py --build DIR --source DIR --topology FILE TEST

Every test is bounded (an alarm ends a stuck test) and kills the agent on the way out.
Exit code 0 = pass.
"""

import os
import signal
import socket
import subprocess
import sys
import urllib.request
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet_standin  # noqa: E402,F401
from agent_fixture import REACT_S, Env, check, free_port, run_main, scrape  # noqa: E402,F401

TEST_TIMEOUT_S = 90


# ---- tests ----

def test_register(e):
    e.start_agent()
    reg = e.registered()
    r = reg.request
    check(r.version == "v1beta1", "version %r" % r.version)
    check(r.resource_name == "nvidia.com/gpu", "resource %r" % r.resource_name)
    check(r.endpoint == "gpuslice-nvidia.com-gpu.sock", "endpoint %r" % r.endpoint)
    check("/" not in r.endpoint, "endpoint must be a bare file name")
    check(r.options.get_preferred_allocation_available, "RegisterRequest options lack preferred allocation")
    # What kubelet asked during Register, on the plugin's socket:
    check(reg.options.get_preferred_allocation_available and not reg.options.pre_start_required,
          "GetDevicePluginOptions answered %s" % reg.options)
    devs = e.kubelet.last_devices()
    check(len(devs) == 8, "ListAndWatch listed %d devices" % len(devs))
    check(all(h == "Healthy" for h, _ in devs.values()), "not all healthy: %s" % devs)
    check(all(i.startswith("GPU-") for i in devs), "device IDs must be GPU UUIDs: %s" % list(devs))
    ids = e.ids()
    numa = [devs[i][1] for i in ids]
    check(all(len(n) == 1 for n in numa), "every device carries one NUMA node: %s" % numa)
    check(numa[0] == numa[1] == numa[2] == numa[3] and numa[4] == numa[5] == numa[6] == numa[7]
          and numa[0] != numa[4], "NUMA nodes do not follow the two sockets: %s" % numa)


def test_preferred(e):
    e.start_agent()
    e.registered()
    ids = e.ids()
    # The seed case: GPUs 0,1,3,4 taken, 2 wanted → the PIX pair 6,7.
    avail = [ids[i] for i in (2, 5, 6, 7)]
    got = e.prefer(avail, 2)
    check(sorted(got) == sorted([ids[6], ids[7]]), "preferred %s, want GPUs 6,7" % got)
    # must-include is honoured: GPU 5 must be in, its PIX partner is 4.
    got = e.prefer(ids, 2, must=[ids[5]])
    check(sorted(got) == sorted([ids[4], ids[5]]), "with must-include 5 got %s" % got)
    # Every container request of one message gets an answer, in order.
    req = e.pb.PreferredAllocationRequest()
    req.container_requests.add(available_deviceIDs=ids, allocation_size=4)
    req.container_requests.add(available_deviceIDs=[ids[0], ids[4]], allocation_size=1)
    resp = e.stub().GetPreferredAllocation(req, timeout=5)
    check(len(resp.container_responses) == 2, "answers: %d" % len(resp.container_responses))
    first = resp.container_responses[0].deviceIDs
    check(len(first) == 4 and set(first) <= set(ids), "4-GPU answer %s" % list(first))
    check(len(set(e.kubelet.last_devices()[i][1][0] for i in first)) == 1, "4 GPUs should share a socket")
    check(len(resp.container_responses[1].deviceIDs) == 1, "second answer %s" % resp.container_responses[1])


def test_allocate(e):
    e.start_agent()
    e.registered()
    ids = e.ids()
    resp = e.allocate([ids[7], ids[6]], [ids[0]])
    check(len(resp.container_responses) == 2, "responses: %d" % len(resp.container_responses))
    c0, c1 = resp.container_responses
    check(c0.envs["NVIDIA_VISIBLE_DEVICES"] == "%s,%s" % (ids[6], ids[7]), "env %s" % dict(c0.envs))
    check(c1.envs["NVIDIA_VISIBLE_DEVICES"] == ids[0], "env %s" % dict(c1.envs))
    specs = {d.container_path: (d.host_path, d.permissions) for d in c0.devices}
    want = ["/dev/nvidia6", "/dev/nvidia7", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    check(sorted(specs) == sorted(want), "device specs %s" % sorted(specs))
    for p in want:
        # the host's /dev, not where the agent looked (--dev-root): the runtime resolves it on the host
        check(specs[p][0] == p, "host path of %s: %s (dev root %s)" % (p, specs[p][0], e.dev_root))
        check(specs[p][1] == "rw", "permissions %s" % specs[p][1])
    check("/dev/nvidia0" in [d.container_path for d in c1.devices], "second container lacks /dev/nvidia0")
    check(len(c0.cdi_devices) == 0, "CDI names without the cdi list strategy")


def test_allocate_options(e):
    e.start_agent("--device-id-strategy", "index", "--device-list-strategy", "envvar,cdi", "--cdi-kind",
                  "example.com/gpu")
    e.registered()
    ids = e.ids()
    c = e.allocate([ids[2], ids[3]]).container_responses[0]
    check(c.envs["NVIDIA_VISIBLE_DEVICES"] == "2,3", "env %s" % dict(c.envs))
    check([d.name for d in c.cdi_devices] == ["example.com/gpu=2", "example.com/gpu=3"],
          "cdi %s" % [d.name for d in c.cdi_devices])


def test_cdi_only(e):
    e.start_agent("--device-list-strategy", "cdi")
    e.registered()
    ids = e.ids()
    c = e.allocate([ids[1]]).container_responses[0]
    check(len(c.envs) == 0 and len(c.devices) == 0, "cdi only, yet env %s devices %d" % (dict(c.envs), len(c.devices)))
    check(len(c.cdi_devices) == 1 and c.cdi_devices[0].name.endswith("=" + ids[1]), "cdi %s" % c.cdi_devices)


def test_hostile(e):
    e.start_agent()
    e.registered()
    ids = e.ids()
    INVALID = grpc.StatusCode.INVALID_ARGUMENT
    k = e.kubelet
    # Garbage bytes that are not a protobuf message.
    for m in ("Allocate", "GetPreferredAllocation", "GetDevicePluginOptions", "PreStartContainer"):
        code, details, _ = k.raw_call("/v1beta1.DevicePlugin/" + m, b"\xff\xff\xff\xff\x0f garbage")
        check(code == INVALID, "%s with garbage: %s %s" % (m, code, details))
    # Truncated message: a length prefix promising more than there is.
    code, details, _ = k.raw_call("/v1beta1.DevicePlugin/Allocate", b"\x0a\x40\x0a\x05GPU-1")
    check(code == INVALID, "truncated: %s %s" % (code, details))
    # Huge message: refused by the receive limit, the agent keeps serving.
    code, details, _ = k.raw_call("/v1beta1.DevicePlugin/Allocate", b"\x0a" + b"\x00" * (4 << 20))
    check(code == grpc.StatusCode.RESOURCE_EXHAUSTED, "huge: %s %s" % (code, details))
    code, details, _ = k.raw_call("/v1beta1.DevicePlugin/NoSuchMethod", b"")
    check(code == grpc.StatusCode.UNIMPLEMENTED, "unknown method: %s" % code)
    e.expect_error(lambda: e.allocate(["GPU-00000000-dead-beef-0000-000000000000"]), INVALID, "unknown device ID")
    e.expect_error(lambda: e.allocate([ids[1], ids[1]]), INVALID, "twice")
    e.expect_error(lambda: e.allocate([ids[1]], [ids[1]]), INVALID, "another container")
    e.expect_error(lambda: e.allocate([]), INVALID, "no device IDs")
    e.expect_error(lambda: e.stub().Allocate(e.pb.AllocateRequest(), timeout=5), INVALID, "no container requests")
    e.expect_error(lambda: e.prefer(ids, 0), INVALID, "allocation_size")
    e.expect_error(lambda: e.prefer(ids, 9), INVALID, "allocation_size")
    e.expect_error(lambda: e.prefer(ids[:2], 1, must=[ids[3]]), INVALID, "must_include")
    e.expect_error(lambda: e.prefer(ids, 1, must=[ids[0], ids[1]]), INVALID, "must-include")
    e.expect_error(lambda: e.prefer(ids[:1], 2), grpc.StatusCode.RESOURCE_EXHAUSTED)
    # Unknown fields (a newer kubelet) are skipped: field 15 varint and field 16 bytes appended.
    req = e.pb.AllocateRequest()
    req.container_requests.add(devices_ids=[ids[4]])
    code, details, raw = k.raw_call("/v1beta1.DevicePlugin/Allocate",
                                    req.SerializeToString() + b"\x78\x01\x82\x01\x03abc")
    check(code == grpc.StatusCode.OK, "unknown fields: %s %s" % (code, details))
    resp = e.pb.AllocateResponse.FromString(raw)
    check(resp.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == ids[4], "unknown-field answer %s" % resp)
    # Still alive and still streaming.
    check(e.agent.poll() is None, "agent died")
    check(len(k.law_ends) == 0, "ListAndWatch ended: %s" % k.law_ends)
    e.allocate([ids[5]])


def test_kubelet_restart(e):
    e.start_agent()
    e.registered()
    e.kubelet.restart()
    reg = e.registered(2, timeout=REACT_S)
    check(reg.at > e.kubelet.restarted_at, "registration predates the restart")
    n_law = len(e.kubelet.law)
    e.kubelet.wait_for(lambda: any(ep == reg.request.endpoint and t > reg.at for t, ep, _ in e.kubelet.law), 5,
                       "ListAndWatch after the restart")
    check(len(e.kubelet.last_devices()) == 8, "full list after restart")
    check(n_law >= 1, "no ListAndWatch messages")
    # Only our socket vanishes: serve and register again.
    sock = os.path.join(e.plugin_dir, reg.request.endpoint)
    time.sleep(0.2)  # let any registration still due to the restart land first
    n = len(e.kubelet.registrations)
    t0 = time.monotonic()
    os.unlink(sock)
    reg3 = e.registered(n + 1, timeout=REACT_S)
    check(os.path.exists(sock), "socket not re-created")
    check(reg3.at > t0, "registration predates the socket removal")
    ids = e.ids()
    e.allocate([ids[0]])


def test_kubelet_late(e):
    """The agent starts first and waits for kubelet.sock to appear."""
    e.kubelet.close()
    os.unlink(os.path.join(e.plugin_dir, "kubelet.sock")) if os.path.exists(
        os.path.join(e.plugin_dir, "kubelet.sock")) else None
    e.kubelet = kubelet_standin.Kubelet(e.stubs, e.plugin_dir, e.podres)
    e.start_agent()
    sock = os.path.join(e.plugin_dir, "gpuslice-nvidia.com-gpu.sock")
    deadline = time.monotonic() + 10
    while not os.path.exists(sock):
        check(time.monotonic() < deadline, "agent never served")
        time.sleep(0.05)
    check(e.agent.poll() is None, "agent exited without kubelet")
    e.kubelet.start()
    e.registered(1, timeout=REACT_S)


def test_register_retry(e):
    """Kubelet refuses the first registrations: the agent keeps trying and keeps serving."""
    e.kubelet.reject_register = True
    e.start_agent()
    e.kubelet.wait_for(lambda: "registration with kubelet failed" in open(e.logs[-1]).read(), 10,
                       "a failed registration")
    check(e.agent.poll() is None, "agent exited after a refused registration")
    e.kubelet.reject_register = False
    e.registered(1, timeout=5)
    ids = e.ids()
    e.allocate([ids[0]])


def test_register_hang(e):
    """Kubelet accepts Register, calls GetDevicePluginOptions back, then never answers: the agent's
    loop goes on (status, health probes, signals) and ListAndWatch still pushes changes."""
    HUNG_S = 5  # well below the 10 s Register deadline a blocking call would wait out
    e.kubelet.hang_register = True
    e.start_agent()
    e.kubelet.wait_for(lambda: e.kubelet.hung_calls >= 1, 10, "a Register call to hang")
    # The status socket is served by the same loop.
    st = e.status()
    check(st["registered"] is False, "registered while kubelet has not answered: %s" % st["registered"])
    check(len(st["devices"]) == 8, "status devices %d" % len(st["devices"]))
    # A ListAndWatch stream opened by kubelet on our socket: a GPU lost is pushed (the loop probes).
    endpoint = "gpuslice-nvidia.com-gpu.sock"
    stub, ch = e.kubelet.plugin_stub(endpoint)
    import threading
    threading.Thread(target=e.kubelet._watch, args=(ch, endpoint), daemon=True).start()
    first = e.kubelet.wait_for(lambda: e.kubelet.last_devices(endpoint), 5, "first ListAndWatch message")
    ids = sorted(first)
    check(all(h == "Healthy" for h, _ in first.values()), "not all healthy: %s" % first)
    e.sim("lose", "5")
    e.kubelet.wait_for(lambda: sum(1 for h, _ in e.kubelet.last_devices(endpoint).values() if h == "Unhealthy") == 1,
                       HUNG_S, "the lost GPU pushed Unhealthy while Register hangs")
    check(len(ids) == 8, "ids %s" % ids)
    # SIGTERM: out promptly, exit 0, sockets removed.
    t0 = time.monotonic()
    e.agent.send_signal(signal.SIGTERM)
    try:
        rc = e.agent.wait(HUNG_S)
    except subprocess.TimeoutExpired:
        raise AssertionError("agent still running %d s after SIGTERM with Register hung" % HUNG_S)
    check(rc == 0, "exit code %s after SIGTERM" % rc)
    check(not os.path.exists(os.path.join(e.plugin_dir, endpoint)), "plugin socket left behind")
    check(time.monotonic() - t0 < HUNG_S, "unreachable")


def test_register_backoff(e):
    """A kubelet that refuses Register is retried with a growing delay, and registers once it accepts."""
    e.kubelet.reject_register = True
    e.start_agent()
    e.kubelet.wait_for(lambda: open(e.logs[-1]).read().count("registration with kubelet failed") >= 2, 15,
                       "two failed registrations")
    check(e.agent.poll() is None, "agent exited after refused registrations")
    with open(e.logs[-1]) as f:
        delays = [int(l.split("retry_ms=")[1].split()[0]) for l in f if "registration with kubelet failed" in l]
    check(delays[:2] == [1000, 2000], "retry delays %s" % delays)
    e.kubelet.reject_register = False
    e.registered(1, timeout=15)
    e.allocate([e.ids()[0]])


def test_restart_state(e):
    e.start_agent()
    e.registered()
    ids = e.ids()
    e.allocate([ids[6], ids[7]])
    # Let the agent write its state file, then kill it hard.
    e.kubelet.wait_for(lambda: os.path.exists(os.path.join(e.state_dir, "gpuslice.state")), 5, "state file")
    time.sleep(0.3)
    e.kill_agent(signal.SIGKILL)
    # Kubelet knows who holds what: ours (6,7) and GPU 0 from before the state file existed.
    e.kubelet.pods = [("default", "train-a", "worker", "nvidia.com/gpu", [ids[6], ids[7]]),
                      ("ml", "infer-b", "main", "nvidia.com/gpu", [ids[0]]),
                      ("ml", "other", "main", "example.com/fpga", ["fpga-0"])]
    e.kubelet.restart()  # the agent's socket is stale after SIGKILL
    e.start_agent()
    e.registered(2)
    st = e.status()
    holders = {d["id"]: d["holder"] for d in st["devices"]}
    check(holders[ids[6]] and holders[ids[6]]["pod"] == "train-a" and holders[ids[6]]["container"] == "worker",
          "GPU 6 holder %s" % holders[ids[6]])
    check(holders[ids[7]] and holders[ids[7]]["namespace"] == "default", "GPU 7 holder %s" % holders[ids[7]])
    check(holders[ids[0]] and holders[ids[0]]["pod"] == "infer-b", "GPU 0 holder %s" % holders[ids[0]])
    free = [i for i in ids if not holders[i]]
    check(len(free) == 5, "free GPUs %s" % free)
    check("fpga-0" not in holders, "another resource's device leaked in")
    # No double booking: even if offered everything, the preferred answer avoids held GPUs.
    got = e.prefer(ids, 2)
    check(not set(got) & {ids[0], ids[6], ids[7]}, "preferred held GPUs: %s" % got)


def test_restart_state_file_only(e):
    """Without PodResources the state file alone carries the allocations across a SIGKILL."""
    e.kubelet.close()
    e.kubelet = kubelet_standin.Kubelet(e.stubs, e.plugin_dir, None)
    e.kubelet.start()
    e.start_agent()
    e.registered()
    ids = e.ids()
    e.allocate([ids[2], ids[3]])
    e.kubelet.wait_for(lambda: os.path.exists(os.path.join(e.state_dir, "gpuslice.state")), 5, "state file")
    time.sleep(0.3)
    e.kill_agent(signal.SIGKILL)
    e.start_agent()
    e.registered(2)
    holders = {d["id"]: d["holder"] for d in e.status()["devices"]}
    check(holders[ids[2]] is not None and holders[ids[3]] is not None, "allocations lost: %s" % holders)
    check(sum(1 for h in holders.values() if h) == 2, "unexpected holders: %s" % holders)


def test_corrupt_state(e):
    os.makedirs(e.state_dir)
    path = os.path.join(e.state_dir, "gpuslice.state")
    with open(path, "wb") as f:
        f.write(b"GPUSLICE-STATE garbage \x00\x01\x02 truncated")
    e.kubelet.pods = [("default", "p", "c", "nvidia.com/gpu", [])]
    e.start_agent()
    e.registered()
    ids = e.ids()
    e.kubelet.pods = [("default", "p", "c", "nvidia.com/gpu", [ids[1]])]
    st = e.status()
    check(all(d["health"] == "Healthy" for d in st["devices"]), "status %s" % st)
    holders = {d["id"]: d["holder"] for d in st["devices"]}
    check(holders[ids[1]] and holders[ids[1]]["pod"] == "p", "rebuilt from PodResources: %s" % holders)
    e.kubelet.wait_for(lambda: b"garbage" not in open(path, "rb").read(), 5, "state file rewritten")
    with open(e.logs[-1]) as f:
        check("state file unusable" in f.read(), "corruption not logged")


def test_health_xid(e):
    e.start_agent()
    e.registered()
    ids = e.ids()
    e.sim("xid", "1", "13")   # in the default ignore list
    e.sim("xid", "3", "48")   # double-bit ECC: critical
    e.kubelet.wait_for(lambda: (e.kubelet.last_devices() or {}).get(ids[3], ("",))[0] == "Unhealthy", REACT_S,
                       "GPU 3 unhealthy")
    devs = e.kubelet.last_devices()
    check(devs[ids[1]][0] == "Healthy", "ignored Xid 13 made GPU 1 unhealthy")
    check(sum(1 for h, _ in devs.values() if h == "Healthy") == 7, "other GPUs affected: %s" % devs)
    # Never offered, never handed out; the others still are.
    check(e.prefer([ids[2], ids[3]], 1) == [ids[2]], "preferred offered the unhealthy GPU")
    e.expect_error(lambda: e.prefer(ids, 2, must=[ids[3]]), grpc.StatusCode.INVALID_ARGUMENT, "unhealthy")
    e.expect_error(lambda: e.allocate([ids[3]]), grpc.StatusCode.INVALID_ARGUMENT, "unhealthy")
    e.allocate([ids[2]])
    st = {d["id"]: d for d in e.status()["devices"]}
    check(st[ids[3]]["health"] == "Unhealthy" and "48" in st[ids[3]]["reason"], "status %s" % st[ids[3]])
    # Quiet period (2 s) of normal answers → Healthy again, pushed.
    e.kubelet.wait_for(lambda: e.kubelet.last_devices()[ids[3]][0] == "Healthy", 10, "GPU 3 healthy again")
    e.allocate([ids[3]])


def test_health_lost(e):
    e.start_agent()
    e.registered()
    ids = e.ids()
    e.sim("lose", "5")
    e.kubelet.wait_for(lambda: e.kubelet.last_devices()[ids[5]][0] == "Unhealthy", REACT_S, "GPU 5 unhealthy")
    devs = e.kubelet.last_devices()
    check(sum(1 for h, _ in devs.values() if h == "Healthy") == 7, "other GPUs affected: %s" % devs)
    got = e.prefer([ids[4], ids[5], ids[6]], 2)
    check(ids[5] not in got, "lost GPU offered: %s" % got)
    e.allocate([ids[4]])
    time.sleep(2.5)  # lost for longer than the quiet period: must stay unhealthy
    check(e.kubelet.last_devices()[ids[5]][0] == "Unhealthy", "lost GPU turned healthy while still lost")
    e.sim("restore", "5")
    e.kubelet.wait_for(lambda: e.kubelet.last_devices()[ids[5]][0] == "Healthy", 10, "GPU 5 healthy again")


def test_sigterm(e):
    e.start_agent()
    reg = e.registered()
    sock = os.path.join(e.plugin_dir, reg.request.endpoint)
    status_sock = os.path.join(e.state_dir, "gpuslice.sock")
    check(os.path.exists(sock) and os.path.exists(status_sock), "sockets missing while running")
    rc = e.kill_agent(signal.SIGTERM)
    check(rc == 0, "exit code %s after SIGTERM" % rc)
    check(not os.path.exists(sock), "plugin socket left behind")
    check(not os.path.exists(status_sock), "status socket left behind")
    e.kubelet.wait_for(lambda: len(e.kubelet.law_ends) >= 1, 5, "ListAndWatch stream to end")


def test_status_cli(e):
    e.start_agent()
    e.registered()
    ids = e.ids()
    e.allocate([ids[0]])
    e.kubelet.pods = [("team", "job-1", "trainer", "nvidia.com/gpu", [ids[0]])]
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "status", "--state-dir", e.state_dir],
                       capture_output=True, text=True, timeout=15)
    check(r.returncode == 0, "status exit %d: %s" % (r.returncode, r.stderr))
    lines = r.stdout.splitlines()
    check(sum(1 for l in lines if "Healthy" in l) == 8, "status table:\n" + r.stdout)
    check(any(ids[0] in l and "team/job-1/trainer" in l for l in lines), "holder missing:\n" + r.stdout)
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "status", "--state-dir", e.tmp],
                       capture_output=True, text=True, timeout=15)
    check(r.returncode == 1 and "cannot reach" in r.stderr, "status without an agent: %d %s" % (r.returncode, r.stderr))


def test_sighup(e):
    conf = os.path.join(e.tmp, "node.conf")
    with open(conf, "w") as f:
        f.write("[devices]\nid-strategy = uuid\n")
    e.start_agent("--config", conf)
    e.registered()
    ids = e.ids()
    check(e.allocate([ids[1]]).container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == ids[1], "uuid strategy")
    with open(conf, "w") as f:
        f.write("[devices]\nid-strategy = index\n")
    e.agent.send_signal(signal.SIGHUP)
    e.kubelet.wait_for(lambda: "config reloaded" in open(e.logs[-1]).read(), 5, "reload")
    check(e.allocate([ids[1]]).container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == "1", "index after SIGHUP")
    # A broken file keeps the old config.
    with open(conf, "w") as f:
        f.write("[devices]\nid-strategy = sideways\n")
    e.agent.send_signal(signal.SIGHUP)
    e.kubelet.wait_for(lambda: "config reload failed" in open(e.logs[-1]).read(), 5, "failed reload")
    check(e.allocate([ids[1]]).container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == "1", "config kept")
    check(e.agent.poll() is None, "agent died on a bad reload")


def allocated_ratios(text):
    alloc = {}
    for line in text.splitlines():
        if line.startswith("gpuslice_gpu_allocated_ratio{"):
            idx = line.split('gpu_index="')[1].split('"')[0]
            alloc[int(idx)] = float(line.rsplit(" ", 1)[1])
    return alloc


def test_metrics(e):
    port = free_port()
    e.start_agent("--metrics-address", "127.0.0.1:%d" % port, "--sample-interval", "1s")
    e.registered()
    ids = e.ids()
    e.allocate([ids[6], ids[7]])
    e.prefer(ids, 2)
    try:
        e.allocate(["GPU-not-a-gpu"])
    except Exception:  # the refusal is the point: it is counted as an error
        pass
    want = ['gpuslice_rpc_requests_total{method="Allocate"} 2',
            'gpuslice_rpc_errors_total{method="Allocate"} 1',
            'gpuslice_rpc_requests_total{method="GetPreferredAllocation"} 1']
    text = scrape(port, lambda t: all(w in t for w in want) and allocated_ratios(t).get(6) == 1.0,
                  "RPC counters %s and GPU6 allocated" % want)
    alloc = allocated_ratios(text)
    check(alloc.get(6) == 1.0 and alloc.get(7) == 1.0, "GPUs 6,7 allocated whole: %s" % alloc)
    check(all(alloc.get(i) == 0.0 for i in range(6)), "GPUs 0-5 free: %s" % alloc)
    check("gpuslice_rpc_duration_seconds_bucket{" in text, "no RPC latency histogram")
    with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=5) as r:
        check(r.status == 200, "healthz %d" % r.status)
    # SIGTERM still exits cleanly with the metrics server running
    check(e.kill_agent(signal.SIGTERM) == 0, "exit status after SIGTERM")


def test_podsync_periodic(e):
    """The periodic PodResources reconcile (every 10 s) runs while anything of ours is on record: its
    timer stays off on a node without allocations and the first Allocate starts it, so the holder of
    a GPU is learnt and an ended pod dropped without any status request (which would sync at once)."""
    e.start_agent()
    e.registered()
    ids = e.ids()
    path = os.path.join(e.state_dir, "gpuslice.state")

    def pod_recorded():
        try:
            with open(path, "rb") as f:
                return b'"job-p"' in f.read()
        except FileNotFoundError:
            return False

    check(not pod_recorded(), "a holder on record before any Allocate")
    with e.kubelet.cond:
        e.kubelet.pods = [("default", "job-p", "main", "nvidia.com/gpu", [ids[3]])]
    e.allocate([ids[3]])
    e.kubelet.wait_for(pod_recorded, 25, "the holder learnt by a periodic sync (within 10 s of the Allocate)")
    with e.kubelet.cond:
        e.kubelet.pods = []  # the pod ended
    e.kubelet.wait_for(lambda: not pod_recorded(), 25, "the ended pod dropped by the next periodic sync")


TESTS = {name[5:].replace("_", "-"): fn for name, fn in globals().items() if name.startswith("test_")}


if __name__ == "__main__":
    run_main(TESTS, Env, "agent-", TEST_TIMEOUT_S)
