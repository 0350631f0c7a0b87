#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Dynamic MIG partitioning in the DRA driver (docs/dra.md "Dynamic MIG"), with the harness of test_dra.py (the
kubelet and API stand-ins, the simulated node under a private --dev-root):

- dynamic: on a GPU marked with --dra-mig-dynamic the pool has one device per profile and placement NVIDIA
  documents for it (checked against tables written here, not read from the code), consuming its memory slices and
  compute slices; a claim's instance is made at prepare (NVML lists it, the CDI spec has its capability nodes,
  status.devices its MIG UUID) and destroyed at unprepare; what the hardware cannot place is refused with the
  reason; a static layout on the other GPU keeps working beside it. Run on an A100 40GB node and on the H100 node.
- dynamic-kills: 20 SIGKILLs of the agent at every step of a dynamic claim's prepare and unprepare; after each
  restart NVML lists exactly the instances of the prepared claims plus the static ones, and every prepared claim's
  instance exists.
"""
import os
import signal
import subprocess
import sys
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_fixture  # noqa: E402
import dra_validation  # noqa: E402
from agent_fixture import check  # noqa: E402
from test_dra import DRIVER, DraEnv, claim_obj, mig_minors, ok, up  # noqa: E402

# NVIDIA's MIG user guide: the placements (first memory slice) of each GPU instance profile, and its memory and
# compute slices. A100 40GB and H100 80GB have the same geometry under other names.
GEOMETRY = [("1g", 1, 1, range(7)), ("1g+me", 1, 1, range(7)), ("1g2", 2, 1, (0, 2, 4, 6)), ("2g", 2, 2, (0, 2, 4)),
            ("3g", 4, 3, (0, 4)), ("4g", 4, 4, (0,)), ("7g", 8, 7, (0,))]
NAMES = {"A100-SXM4-40GB": {"1g": "1g.5gb", "1g+me": "1g.5gb+me", "1g2": "1g.10gb", "2g": "2g.10gb",
                            "3g": "3g.20gb", "4g": "4g.20gb", "7g": "7g.40gb"},
         "H100 80GB HBM3": {"1g": "1g.10gb", "1g+me": "1g.10gb+me", "1g2": "1g.20gb", "2g": "2g.20gb",
                            "3g": "3g.40gb", "4g": "4g.40gb", "7g": "7g.80gb"}}
CRASH_POINTS = ["dra-prepare-journaled", "dra-prepare-mig-made", "dra-prepare-mig-journaled", "dra-prepare-cdi",
                "dra-prepare-done", "dra-unprepare-journaled", "dra-unprepare-cdi", "dra-unprepare-limits",
                "dra-unprepare-mig", "dra-unprepare-done"]


def label(profile):
    return profile.replace(".", "-").replace("+", "-")


def expected(e, gpu):
    """name -> (profile, memory slices, compute slices) of every placement of an empty GPU."""
    model = next(n for n in NAMES if n in next(g["name"] for g in e.topo["gpus"] if g["index"] == gpu))
    out = {}
    for key, mem, comp, starts in GEOMETRY:
        p = NAMES[model][key]
        for s in starts:
            out["gpu-%d-mig-%s-%d" % (gpu, label(p), s)] = (p, set(range(s, s + mem)), comp)
    return out


def nvml(e):
    """GPU -> {(gi id, profile, start, size): [ci ids]} and MIG UUID -> (gpu, gi), as `gpuslice topo --json` reads
    them through the simulated NVML."""
    r = subprocess.run([os.path.join(e.args.build, "gpuslice"), "topo", "--json"], env=e.env, capture_output=True,
                       text=True, timeout=30, check=True)
    out, uuids = {}, {}
    for m in json.loads(r.stdout)["mig"]:
        out[m["gpu"]] = {(g["id"], g["profile"], g["start"], g["size"]): [c["id"] for c in g["compute_instances"]]
                         for g in m.get("gpu_instances") or []}
        for d in m["devices"]:
            uuids[d["uuid"]] = (m["gpu"], d["gpu_instance"])
    return out, uuids


def dynamic_of(devs, gpu):
    return {n: d for n, d in devs.items() if n.startswith("gpu-%d-mig-" % gpu) and "dynamic" in d["attributes"]}


def consumed(d):
    c = d["consumesCounters"][0]["counters"]
    return ({int(k.rsplit("-", 1)[1]) for k in c if k.startswith("memory-slice-")},
            int(c["compute-slices"]["value"]))


def check_pool(e, gpu, taken=()):
    """The dynamic devices of GPU gpu are exactly the placements no instance in taken (memory slices) covers."""
    _, slices = e.wait_pool(lambda d: len(dynamic_of(d, gpu)) > 0, "dynamic MIG devices of GPU %d" % gpu)
    check(dra_validation.validate_pool(slices) == [], "pool invalid: %s" % dra_validation.validate_pool(slices))
    devs = dynamic_of(e.devices(), gpu)
    want = {n: v for n, v in expected(e, gpu).items() if not v[1] & set(taken)}
    check(sorted(devs) == sorted(want), "GPU %d dynamic devices %s, NVIDIA's placements %s" %
          (gpu, sorted(devs), sorted(want)))
    for n, d in devs.items():
        a = d["attributes"]
        check(a["type"]["string"] == "mig" and a["profile"]["string"] == want[n][0] and "uuid" not in a and
              a["parentIndex"]["int"] == gpu, "attributes of %s: %s" % (n, a))
        check(consumed(d) == (want[n][1], want[n][2]), "%s consumes %s, wanted %s" % (n, consumed(d), want[n][1:]))
    return devs


def refused(e, name, device, reason):
    c = e.claim(name, [("mig", device)])
    err = e.kubelet.prepare(c)[c[1]].error
    check(reason in err, "%s: %r, wanted %r" % (device, err, reason))


def prepare_dynamic(e, gpu, device, profile, start):
    """Prepare a claim for a dynamic device: its instance is made, its CDI spec has the instance's nodes, its
    status.devices the MIG UUID. The claim and its (gi, ci)."""
    before, _ = nvml(e)
    c = e.claim("dyn-%s" % device, [("mig", device)])
    a = ok(e.kubelet.prepare(c), c[1])
    check([d.device_name for d in a.devices] == [device], "devices %s" % a.devices)
    now, uuids = nvml(e)
    made = [k for k in now[gpu] if k not in before[gpu]]
    check(len(made) == 1 and made[0][1:3] == (profile, start) and len(now[gpu][made[0]]) == 1,
          "GPU %d: made %s, wanted one %s at %d" % (gpu, made, profile, start))
    gi, ci = made[0][0], now[gpu][made[0]][0]
    with open(os.path.join(e.cdi, "%s-claim_%s.json" % (DRIVER, c[1]))) as f:
        spec = json.load(f)
    minors, minor = mig_minors(e), next(g["minor"] for g in e.topo["gpus"] if g["index"] == gpu)
    nodes = spec["devices"][0]["containerEdits"]["deviceNodes"]
    want = ["/dev/nvidia%d" % minor, "/dev/nvidia-caps/nvidia-cap%d" % minors["gpu%d/gi%d/access" % (minor, gi)],
            "/dev/nvidia-caps/nvidia-cap%d" % minors["gpu%d/gi%d/ci%d/access" % (minor, gi, ci)]]
    check([n["path"] for n in nodes] == want, "nodes %s, wanted %s" % ([n["path"] for n in nodes], want))
    check(all(os.path.exists(n["hostPath"]) for n in nodes), "host nodes missing: %s" % nodes)
    st = e.status()["dra"]["claims"]
    u = next(d["uuid"] for x in st if x["uid"] == c[1] for d in x["devices"])
    check(uuids.get(u) == (gpu, gi), "status says %s, NVML has %s" % (u, uuids))
    e.kubelet.wait_for(lambda: (claim_obj(e, c).get("status") or {}).get("devices"), 20, "status.devices")
    data = claim_obj(e, c)["status"]["devices"][0].get("data") or {}
    check(u in json.dumps(data), "status.devices data %s lacks the MIG UUID %s" % (data, u))
    return c, gi, ci


def test_dynamic(e):
    """A dynamic GPU beside static ones: the pool, a claim's instance made and destroyed, the refusals."""
    mig_gpus = [g["index"] for g in e.topo["gpus"] if g.get("mig_mode") == 1]
    instances, _ = nvml(e)
    dyn = next(g for g in mig_gpus if not instances[g])  # MIG on, empty
    # the H100 node: also a GPU with instances made outside the driver marked dynamic (GPU 1, not full)
    mixed = [g for g in mig_gpus if instances[g] and g != dyn and len(instances[g]) < 7 and len(mig_gpus) > 2]
    unmarked = next(g for g in mig_gpus if g != dyn and g not in mixed)  # a static layout beside
    off = [g["index"] for g in e.topo["gpus"] if g.get("mig_mode") != 1 and "H100" in g["name"]]
    up(e, "--dra-mig-dynamic", ",".join(str(g) for g in [dyn] + mixed + off))
    devs = check_pool(e, dyn)
    check(not [n for n in e.devices() if n.startswith("gpu-%d-mig-" % dyn) and n not in devs],
          "a static MIG device published on the dynamic GPU")
    want = expected(e, dyn)
    three = next(n for n, v in want.items() if v[2] == 3 and min(v[1]) == 4)
    seven = next(n for n, v in want.items() if v[2] == 7)
    profile = want[three][0]
    c, gi, ci = prepare_dynamic(e, dyn, three, profile, 4)
    check(sorted(dynamic_of(e.devices(), dyn)) == sorted(devs), "the pool changed with a claim's instance")
    # what the hardware cannot place, each with its reason
    refused(e, "over", seven, "is taken by GPU instance %d (%s at 4:4), another claim's" % (gi, profile))
    refused(e, "unknown", "gpu-%d-mig-9g-99gb-0" % dyn, "has no MIG profile 9g-99gb")
    refused(e, "start", "gpu-%d-mig-%s-2" % (dyn, label(profile)),
            "profile %s cannot start at memory slice 2 (its placements start at 0,4)" % profile)
    refused(e, "whole", "gpu-%d" % dyn, "already prepared")
    # one +me instance per GPU (its instance count), though its placements do not overlap: counters and prepare
    me = [n for n, v in want.items() if v[0].endswith("+me") and min(v[1]) < 4]
    check(devs[me[0]]["consumesCounters"][0]["counters"].get("profile-20-instances", {}).get("value") == "1",
          "%s does not consume its profile's instance counter: %s" % (me[0], devs[me[0]]))
    m, _, _ = prepare_dynamic(e, dyn, me[0], want[me[0]][0], min(want[me[0]][1]))
    refused(e, "me", me[1], "holds at most 1 %s instance, prepared for other claims" % want[me[0]][0])
    check(e.kubelet.unprepare(m) == {m[1]: ""}, "unprepare +me")
    refused(e, "unmarked", "gpu-%d-mig-%s-0" % (unmarked, label(profile)), "not partitioned dynamically")
    for g in off:
        refused(e, "off", "gpu-%d-mig-%s-0" % (g, label(profile)), "GPU %d is not in MIG mode" % g)
    for g in mixed:  # GPU instances made outside the driver take their placements on a dynamic GPU
        taken = {s for (i, p, start, size) in instances[g] for s in range(start, start + size)}
        check_pool(e, g, taken)
        (i, p, start, size) = sorted(instances[g])[0]
        inside = next(n for n, v in expected(e, g).items() if start in v[1])
        refused(e, "static", inside, "taken by GPU instance %d (%s at %d:%d), not made by this driver" %
                (i, p, start, size))
    # the static layout beside: its MIG devices prepared as before
    (i, cis) = sorted((k[0], v) for k, v in instances[unmarked].items() if v)[0]
    s = e.claim("static", [("mig", "gpu-%d-mig-%d-%d" % (unmarked, i, cis[0]))])
    ok(e.kubelet.prepare(s), s[1])
    check(e.kubelet.unprepare(s) == {s[1]: ""}, "static unprepare")
    # unprepare destroys it; the whole GPU's placement fits again
    check(e.kubelet.unprepare(c) == {c[1]: ""}, "unprepare")
    now, _ = nvml(e)
    check(now[dyn] == {}, "GPU %d after the unprepare: %s" % (dyn, now[dyn]))
    check(e.cdi_specs() == [], "specs left: %s" % e.cdi_specs())
    w, _, _ = prepare_dynamic(e, dyn, seven, want[seven][0], 0)
    check(e.kubelet.unprepare(w) == {w[1]: ""}, "unprepare 7g")
    check(nvml(e)[0][dyn] == {}, "GPU %d not empty at the end" % dyn)
    check(nvml(e)[0] == {**instances, dyn: {}}, "static instances changed")


def test_dynamic_kills(e):
    """20 SIGKILLs across a dynamic claim's prepare and unprepare (crash points, each step twice): after each
    restart and kubelet's retry, NVML has exactly the static instances and one per prepared claim, at its
    placement, with the MIG UUID the driver reports."""
    instances, _ = nvml(e)
    dyn = next(g["index"] for g in e.topo["gpus"] if g.get("mig_mode") == 1 and not instances[g["index"]])
    static = {g: v for g, v in instances.items() if g != dyn}
    held = {}  # uid -> (claim, device, memory slices, exclusive counters)
    flag = ("--dra-mig-dynamic", str(dyn))

    def exclusive(d):
        """The counters a device takes that no other prepared one may share: its memory slices and, for a +me
        profile (one instance per GPU), its profile's instance counter."""
        c = d["consumesCounters"][0]["counters"]
        return {k for k in c if k.startswith("memory-slice-") or k.startswith("profile-")}

    def free_device(i):
        devs = sorted(dynamic_of(e.devices(), dyn).items())
        used = set().union(*[v[3] for v in held.values()]) if held else set()
        for k in range(len(devs)):
            n, d = devs[(i * 5 + k) % len(devs)]
            if not exclusive(d) & used and consumed(d)[1] <= 3:
                return n, consumed(d)[0], exclusive(d)
        raise AssertionError("no free placement left: %s" % held)

    def verify(point):
        now, uuids = nvml(e)
        check({g: v for g, v in now.items() if g != dyn} == static, "after %s static instances changed" % point)
        st = e.status()["dra"]["claims"]
        check(sorted(x["uid"] for x in st) == sorted(held) and all(x["state"] == "prepared" for x in st),
              "after %s the driver holds %s, kubelet %s" % (point, st, sorted(held)))
        got = sorted(uuids[d["uuid"]][1] for x in st for d in x["devices"] if d["uuid"] in uuids)
        check(len(got) == len(held) and got == sorted(k[0] for k in now[dyn]),
              "after %s: NVML has %s on GPU %d, the claims %s" % (point, now[dyn], dyn, st))
        want = sorted(min(v[2]) for v in held.values())
        check(sorted(k[2] for k in now[dyn]) == want, "after %s placements %s, wanted %s" % (point, now[dyn], want))
        specs = sorted("%s-claim_%s.json" % (DRIVER, u) for u in held)
        check(e.cdi_specs() == specs, "after %s: specs %s, wanted %s" % (point, e.cdi_specs(), specs))

    up(e, *flag)
    kills = 0
    for i in range(20):
        point = CRASH_POINTS[i % len(CRASH_POINTS)]
        unprep = "unprepare" in point
        if unprep and not held:  # something to unprepare
            dev, sl, ex = free_device(i)
            c = e.claim("pre%d" % i, [("mig", dev)])
            ok(e.kubelet.prepare(c), c[1])
            held[c[1]] = (c, dev, sl, ex)
        e.kill_agent(signal.SIGTERM)
        e.start_agent(*flag, crash=point)
        e.kubelet.restart()
        e.wait_pool(lambda d: len(dynamic_of(d, dyn)) > 0, "the pool")
        if unprep:
            victim = held[sorted(held)[0]][0]
            call = lambda: e.kubelet.unprepare(victim)  # noqa: E731
        else:
            dev, sl, ex = free_device(i)
            c = e.claim("k%d" % i, [("mig", dev)])
            call = lambda: e.kubelet.prepare(c)  # noqa: E731
        try:
            call()
            answered = True
        except Exception:  # noqa: B902 — the agent died in the call
            answered = False
        e.agent.wait(15)
        check(not answered and e.agent.returncode == -signal.SIGKILL,
              "the agent did not die at %s (answered %s, exit %s)" % (point, answered, e.agent.returncode))
        kills += 1
        e.start_agent(*flag)
        e.kubelet.restart()
        e.wait_pool(lambda d: len(dynamic_of(d, dyn)) > 0, "the pool after the restart")
        # before kubelet's retry: recovery rolled the prepare back / finished the unprepare, no orphan left
        if unprep:
            del held[victim[1]]
        elif point == "dra-prepare-done":  # journaled as prepared before the kill: held, its instance there
            held[c[1]] = (c, dev, sl, ex)
        verify(point + " (restarted)")
        if unprep:
            check(e.kubelet.unprepare(victim) == {victim[1]: ""}, "unprepare retried after %s" % point)
        else:
            ok(e.kubelet.prepare(c), c[1])
            held[c[1]] = (c, dev, sl, ex)
        verify(point)
    check(kills == 20, "%d kills" % kills)
    for uid, v in list(held.items()):
        check(e.kubelet.unprepare(v[0]) == {uid: ""}, "final unprepare")
    del_all = nvml(e)[0][dyn]
    check(del_all == {}, "instances left at the end: %s" % del_all)


TESTS = {"dynamic": test_dynamic, "dynamic-kills": test_dynamic_kills}

if __name__ == "__main__":
    agent_fixture.run_main(TESTS, make_env=lambda a, s: DraEnv(a, s), label="dra-mig-", timeout_s=280)
