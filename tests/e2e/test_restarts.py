# SPDX-License-Identifier: Apache-2.0
"""Restarts with pods running on a real kubelet: the agent stopped with SIGTERM, killed with SIGKILL
(state file kept, then also lost), kubelet restarted, and the API server restarted. Each time a 2-GPU pod and a fractional pod
keep running, the agent's books name their GPUs again, and a pod asking for every other GPU gets
exactly those — nothing lost, nothing handed out twice — while one more GPU is refused.

    /usr/bin/python3 tests/e2e/test_restarts.py [TEST ...]
"""

import signal
import sys

import e2e
from e2e import check, pod, wait_pod

NODE = "gpu-restart"
SHOW = 'echo "VISIBLE=$NVIDIA_VISIBLE_DEVICES"; echo "DEV=x"; sleep 3600'
FRAC = {"gpuslice.io/gpu-core": 30, "gpuslice.io/gpu-memory": 8}


def setup():
    c = e2e.gpu_cluster([(NODE, "demo-8gpu-2socket.node", None)])
    g = c.gpu[NODE]
    g.start_agent("--resource-profile", "gpuslice")
    c.wait("allocatable", lambda: g.allocatable() == g.node.gpus, timeout=120)
    c.apply(pod("hold-whole", NODE, SHOW, limits={"nvidia.com/gpu": 2}))
    c.apply(pod("hold-frac", NODE, SHOW, limits=FRAC))
    wait_pod(c, "hold-whole")
    wait_pod(c, "hold-frac")
    return c


def visible(c, g, name):
    text = c.wait("output of %s" % name, lambda: (lambda t: t if "DEV=" in t else None)(e2e.logs(c, name)), timeout=90)
    vis = [v for v in text.split("VISIBLE=")[1].split()[0].split(",") if v] if "VISIBLE=" in text else []
    idx = g.uuid_index()
    return sorted(idx[u] for u in vis)


def restarts(c, name):
    st = e2e.get_pod(c, name)["status"]
    check(st.get("phase") == "Running", "%s is %s after the restart" % (name, st.get("phase")))
    return st["containerStatuses"][0]["restartCount"]


def books(c, g):
    """Check the agent's record after a restart, then that the rest of the node is exactly what is free."""
    c.wait("the agent registered again", g._registered, timeout=120)
    whole = visible(c, g, "hold-whole")
    frac = visible(c, g, "hold-frac")
    check(len(whole) == 2 and len(frac) == 1, "holders see GPUs %s and %s" % (whole, frac))

    def named():
        devs = {d["index"]: d for d in g.status()["devices"] if "::" not in d["id"]}
        held = sorted(i for i, d in devs.items() if (d.get("holder") or {}).get("pod") == "hold-whole")
        return held == whole and devs[frac[0]].get("core_used") == 30 and devs
    c.wait("gpuslice status naming hold-whole on GPUs %s and 30 %% of GPU %d in use" % (whole, frac[0]), named,
           timeout=90)
    for p in ("hold-whole", "hold-frac"):
        check(restarts(c, p) == 0, "%s restarted" % p)
    n = g.node.gpus
    rest = n - 3
    c.wait("allocatable nvidia.com/gpu %d" % (n - 1), lambda: g.allocatable() == n - 1, timeout=120)
    c.apply(pod("take-rest", NODE, SHOW, limits={"nvidia.com/gpu": rest}))
    try:  # deleted also when a check fails: the next case needs the node as its setup left it
        wait_pod(c, "take-rest", timeout=120)
        got = visible(c, g, "take-rest")
        check(sorted(set(got) | set(whole) | set(frac)) == list(range(n)) and len(got) == rest,
              "take-rest got %s next to %s (whole) and %s (fraction): not the %d free GPUs" % (got, whole, frac, rest))
        c.apply(pod("one-more", NODE, SHOW, limits={"nvidia.com/gpu": 1}))
        wait_pod(c, "one-more", phase="Pending", timeout=30)
    finally:
        e2e.delete(c, "pod", "one-more")
        e2e.delete(c, "pod", "take-rest")


def test_agent_sigterm(c):
    g = c.gpu[NODE]
    check(g.stop_agent(signal.SIGTERM) == 0, "agent did not exit 0 on SIGTERM")
    g.start_agent("--resource-profile", "gpuslice")
    books(c, g)


def test_agent_sigkill(c):
    g = c.gpu[NODE]
    g.stop_agent(signal.SIGKILL)
    g.start_agent("--resource-profile", "gpuslice")
    books(c, g)


def test_agent_sigkill_without_state_file(c):
    """SIGKILL and the state file gone: PodResources alone must rebuild the books."""
    g = c.gpu[NODE]
    g.stop_agent(signal.SIGKILL)
    g.node.run(["rm", "-f", "/var/lib/gpuslice/gpuslice.state"])
    g.start_agent("--resource-profile", "gpuslice")
    books(c, g)


def test_kubelet_restart(c):
    g = c.gpu[NODE]
    g.node.restart_kubelet()
    books(c, g)


def test_apiserver_restart(c):
    """The API server restarted (cluster.restart_apiserver): the node stays Ready and the books hold."""
    c.restart_apiserver()
    g = c.gpu[NODE]
    g.node.wait_ready(timeout=90)
    books(c, g)


TESTS = [test_agent_sigterm, test_agent_sigkill, test_agent_sigkill_without_state_file, test_kubelet_restart,
         test_apiserver_restart]

if __name__ == "__main__":
    sys.exit(e2e.main(TESTS, setup))
