# SPDX-License-Identifier: Apache-2.0
"""Health within 1 s for every fault kind the simulator injects (issue 14, point 5): the real agent
under the kubelet stand-in, each fault injected with `gpuslice-sim` several times, and the time
from the injection to the ListAndWatch message listing the GPU Unhealthy (or Healthy again once
the quiet period is over) must be at most 1 s.

    /usr/bin/python3 test_health.py --build DIR --source DIR --topology FILE health-1s

The time runs from before `gpuslice-sim` is started (its own start-up counts against the agent)
to the stand-in's receipt of the message. Load: a sample over the bound is measured again (up to
twice, on another GPU); the test fails when a fault kind stays over 1 s, so a slow design fails
while one scheduling hiccup on a loaded CI machine does not.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_agent  # noqa: E402
from test_agent import check  # noqa: E402

BOUND_MS = 1000
QUIET_S = 1
SAMPLES = 3  # per fault kind
RETRIES = 2


def first_change(e, gpu_id, health, since):
    """Receipt time of the first ListAndWatch message after `since` listing gpu_id as `health`."""
    with e.kubelet.cond:
        for t, _, resp in e.kubelet.law:
            if t >= since and any(d.ID == gpu_id and d.health == health for d in resp.devices):
                return t
    return None


def measure(e, ids, gpu, inject, want, extra_ms=0):
    """ms from the injection to `want` listed for GPU `gpu` (minus extra_ms, e.g. the quiet period)."""
    t0 = time.monotonic()
    inject(gpu)
    e.kubelet.wait_for(lambda: first_change(e, ids[gpu], want, t0), 10, "GPU %d %s" % (gpu, want))
    return (first_change(e, ids[gpu], want, t0) - t0) * 1000 - extra_ms


def healthy(e, ids, gpu):
    e.kubelet.wait_for(lambda: (e.kubelet.last_devices() or {}).get(ids[gpu], ("",))[0] == "Healthy", 10,
                       "GPU %d healthy" % gpu)


def test_health_1s(e):
    e.start_agent(quiet="%ds" % QUIET_S)
    e.registered()
    ids = e.ids()
    n = len(ids)
    state = {"next": 0}

    def gpu_for_round():
        g = state["next"] % n
        state["next"] += 1
        return g

    def xid(g):
        e.sim("xid", str(g), "48")

    def lose(g):
        e.sim("lose", str(g))

    def deny(g):
        e.sim("deny", str(g))

    def restore(g):
        e.sim("restore", str(g))

    results = {}

    def run_kind(name, one):
        got = []
        for _ in range(SAMPLES):
            for attempt in range(RETRIES + 1):
                ms = one(gpu_for_round())
                got.append(ms)
                if ms <= BOUND_MS:
                    break
            else:
                results[name] = got
                check(False, "%s: over %d ms in %d tries in a row: %s" % (name, BOUND_MS, RETRIES + 1,
                                                                          ["%.0f" % v for v in got]))
        results[name] = got

    def fault(inject, cleanup):
        def one(g):
            healthy(e, ids, g)
            ms = measure(e, ids, g, inject, "Unhealthy")
            cleanup(g)
            return ms
        return one

    def reason(g):
        return {d["id"]: d.get("reason", "") for d in e.status()["devices"]}[ids[g]]

    def recovery(inject, probe_reason):
        def one(g):
            healthy(e, ids, g)
            inject(g)
            # a probe has seen the fault (not just the Xid a lost GPU also posts): the quiet
            # period starts only at the first normal answer after the restore
            deadline = time.monotonic() + 10
            while probe_reason not in reason(g):
                check(time.monotonic() < deadline, "GPU %d: reason %r" % (g, reason(g)))
                time.sleep(0.1)
            # Healthy again once the quiet period of normal answers is over: within 1 s after it
            return measure(e, ids, g, restore, "Healthy", extra_ms=QUIET_S * 1000)
        return one

    run_kind("Xid 48", fault(xid, lambda g: None))
    run_kind("lost GPU", fault(lose, restore))
    run_kind("NO_PERMISSION", fault(deny, restore))
    run_kind("recovery after lost", recovery(lose, "LOST"))
    run_kind("recovery after NO_PERMISSION", recovery(deny, "NO_PERMISSION"))
    for name, v in results.items():
        print("%-30s %s ms" % (name, " ".join("%.0f" % x for x in v)))
    check(e.agent.poll() is None, "agent died")


TESTS = {"health-1s": test_health_1s}

if __name__ == "__main__":
    test_agent.TESTS.clear()
    test_agent.TESTS.update(TESTS)
    test_agent.main()
