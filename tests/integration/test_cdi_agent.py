#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The node agent's CDI device names exist in the CDI spec it writes at start.

The real `gpuslice node` runs on the simulated node with the kubelet stand-in (the harness of
test_agent.py), device nodes made with mknod under its --dev-root and a fake driver root with an
ld cache (cdi-fixture.sh), given as --driver-root (devices.driver-root in a config file for the reload case). The
agent writes the spec (GPUSLICE_CDI_SPEC, JSON); the test reads it
and every name the agent's Allocate answers carry (by UUID, then by index) must be a device of it,
under the kind the agent was configured with; after a SIGHUP that changes the kind, the spec
follows; a cdi-only strategy warns. Skipped (exit 77) when not root (mknod needs it).
"""
import json
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet_standin  # noqa: E402
import test_agent  # noqa: E402
import runner  # noqa: E402  (tests/runner.py: agent_fixture put tests/ on the path)

DRIVER = "550.54.15"  # the node description's default driver (docs/node-description.md)


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def spec_names(path, timeout=10):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise AssertionError("the agent wrote no CDI spec at %s" % path)
        time.sleep(0.1)
    with open(path) as f:
        spec = json.load(f)
    return spec, {d["name"] for d in spec["devices"]}


def cdi_node(e, args, name):
    """A fake driver root (cdi-fixture.sh, its path in e.driver_root), character devices under the agent's dev
    root (the harness made plain files) and the spec path GPUSLICE_CDI_SPEC names; returns that path."""
    fx = os.path.join(e.tmp, "fx")
    subprocess.run([os.path.join(args.source, "tests", "integration", "cdi-fixture.sh"), fx, "1", DRIVER, "12.4",
                    "tesla"], check=True, timeout=120)
    for i in range(8):
        p = os.path.join(e.dev_root, "dev", "nvidia%d" % i)
        os.unlink(p)
        os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(195, i))
    spec_path = os.path.join(e.tmp, "cdi", "agent-%s.json" % name)
    e.env["GPUSLICE_CDI_SPEC"] = spec_path
    e.driver_root = os.path.join(fx, "driver")
    return spec_path


def run(e, args, strategy_id):
    spec_path = cdi_node(e, args, strategy_id)
    kind = "example.com/gpu%s" % strategy_id.replace("-", "")
    e.start_agent("--device-list-strategy", "cdi", "--cdi-kind", kind, "--device-id-strategy", strategy_id,
                  "--driver-root", e.driver_root)
    e.registered()
    spec, names = spec_names(spec_path)
    check(spec["kind"] == kind, "spec kind %r, agent kind %r" % (spec["kind"], kind))
    ids = e.ids()
    resp = e.allocate([ids[1]], [ids[5], ids[6]])
    got = []
    for c in resp.container_responses:
        for d in c.cdi_devices:
            k, _, name = d.name.partition("=")
            check(k == kind, "Allocate named kind %r, spec has %r" % (k, kind))
            check(name in names, "Allocate named %r, the spec has no such device (%s)" % (d.name, sorted(names)))
            got.append(name)
    check(len(got) == 3, "three CDI names expected, got %s" % got)
    # the spec's device for a name carries that GPU's node
    by_name = {d["name"]: d for d in spec["devices"]}
    node = by_name[got[0]]["containerEdits"]["deviceNodes"][0]
    check(node["path"] == "/dev/nvidia1" and node["major"] == 195 and node["minor"] == 1,
          "device %s has node %s" % (got[0], node))
    libs = [m["containerPath"] for m in spec["containerEdits"]["mounts"]]
    check(any(p.endswith("libcuda.so." + DRIVER) for p in libs), "no libcuda in the spec mounts: %s" % libs)
    # on the host (no host view given): the mounts' sources are the driver root's files, the hook this binary
    for m in spec["containerEdits"]["mounts"]:
        check(m["hostPath"].startswith(e.driver_root + "/"),
              "mount source %s is not under the driver root %s" % (m["hostPath"], e.driver_root))
    hooks = [h["path"] for h in spec["containerEdits"].get("hooks", [])]
    check(hooks == [os.path.realpath(os.path.join(args.build, "gpuslice"))], "hook paths %s" % hooks)


def run_reload(e, args):
    """A SIGHUP that changes the CDI kind rewrites the spec: the new names exist, under the new kind."""
    spec_path = cdi_node(e, args, "reload")
    conf = os.path.join(e.tmp, "node.conf")
    with open(conf, "w") as f:
        f.write("[devices]\nlist-strategy = envvar, cdi\ncdi-kind = example.com/before\ndriver-root = %s\n"
                % e.driver_root)
    e.start_agent("--config", conf)
    e.registered()
    spec, names = spec_names(spec_path)
    check(spec["kind"] == "example.com/before", "first kind %r" % spec["kind"])
    srcs = [m["hostPath"] for m in spec["containerEdits"].get("mounts", [])]
    check(any(p.startswith(e.driver_root + "/") and "libcuda.so." in p for p in srcs),
          "devices.driver-root of the config file: no libcuda mounted from it: %s" % srcs)
    with open(conf, "w") as f:
        f.write("[devices]\nlist-strategy = envvar, cdi\ncdi-kind = example.com/after\nid-strategy = index\n"
                "driver-root = %s\n" % e.driver_root)
    e.agent.send_signal(signal.SIGHUP)
    e.kubelet.wait_for(lambda: "config reloaded" in open(e.logs[-1]).read(), 10, "reload")
    spec, names = spec_names(spec_path)
    check(spec["kind"] == "example.com/after", "kind after SIGHUP %r" % spec["kind"])
    ids = e.ids()
    c = e.allocate([ids[2]]).container_responses[0]
    check([d.name for d in c.cdi_devices] == ["example.com/after=2"], "names after SIGHUP %s" % c.cdi_devices)
    check("2" in names, "the rewritten spec lacks device 2: %s" % sorted(names))
    log = open(e.logs[-1]).read()
    check("cdi only" not in log, "warned about cdi-only with envvar,cdi")


def run_shared(e, args):
    """Fractional containers are named <id>-shared, a device of the spec that mounts the interposer."""
    import test_share  # noqa: E402 — imported here: only this case needs the sharing harness
    spec_path = cdi_node(e, args, "shared")
    e.start_share("gpuslice", "--device-list-strategy", "envvar,cdi", "--cdi-kind", "example.com/gpu",
                  "--driver-root", e.driver_root)
    spec, names = spec_names(spec_path)
    got = e.admit((e.core, 30), (e.mem, 2))
    for res, (ids, c) in got.items():
        cdi = [d.name for d in c.cdi_devices]
        check(len(cdi) == 1 and cdi[0].startswith("example.com/gpu=") and cdi[0].endswith("-shared"),
              "%s: CDI names %s" % (res, cdi))
        name = cdi[0].partition("=")[2]
        check(name in names, "Allocate named %r, the spec has no such device" % name)
        dev = [d for d in spec["devices"] if d["name"] == name][0]["containerEdits"]
        check(dev["mounts"][0]["hostPath"] == e.interposer and
              dev["mounts"][0]["containerPath"] == "/run/gpuslice/lib/libcuda.so.1",
              "%s mounts %s" % (name, dev["mounts"]))
        # the NVML stand-in next to the interposer and the driver root's NVML (its libnvidia-ml.so.<driver>),
        # in the spec's device and in the Allocate answer alike, preloaded after the interposer
        standin = os.path.join(os.path.dirname(e.interposer), "libgpuslice-nvml.so")
        for what, mounts, env in (
                ("spec", {m["containerPath"]: m["hostPath"] for m in dev["mounts"]}, dev["env"]),
                ("answer", {m.container_path: m.host_path for m in c.mounts},
                 ["%s=%s" % kv for kv in c.envs.items()])):
            real = mounts.get("/run/gpuslice/driver/libnvidia-ml.so.1", "")
            check(mounts.get("/run/gpuslice/lib/libnvidia-ml.so.1") == standin and
                  real.startswith(e.driver_root + "/") and "/libnvidia-ml.so." in real,
                  "%s %s: NVML mounts %s" % (name, what, mounts))
            check("LD_PRELOAD=/run/gpuslice/lib/libcuda.so.1 /run/gpuslice/lib/libnvidia-ml.so.1" in env,
                  "%s %s: env %s" % (name, what, env))
        uuid = name[:-len("-shared")]
        check(uuid == test_share.gpu_of(ids[0]), "%s is not the GPU of %s" % (name, ids[0]))


def run_cdi_only_warns(e):
    e.env["GPUSLICE_CDI_SPEC"] = "none"
    e.start_agent("--device-list-strategy", "cdi")
    e.registered()
    e.kubelet.wait_for(lambda: "kubelets before 1.28 drop cdi_devices" in open(e.logs[-1]).read(), 10,
                       "the cdi-only warning")


def fixture(args):
    if os.getuid() != 0:
        raise runner.Skip("needs root for mknod")
    stubs = kubelet_standin.load_stubs(args.build)
    if args.test_name == "shared":
        import test_share  # noqa: E402
        return test_share.Share(args, stubs)
    return test_agent.Env(args, stubs)


TESTS = {
    "uuid": lambda e: run(e, e.args, "uuid"),
    "index": lambda e: run(e, e.args, "index"),
    "reload": lambda e: run_reload(e, e.args),
    "warn": run_cdi_only_warns,
    "shared": lambda e: run_shared(e, e.args),
}


if __name__ == "__main__":
    runner.main(TESTS, make_env=fixture, label="cdi-agent-", timeout_s=test_agent.TEST_TIMEOUT_S,
                arguments=runner.WITH_TOPOLOGY)
