# SPDX-License-Identifier: Apache-2.0
"""The operator page (docs/ui.md) in a real browser: the real `gpuslice scheduler` watching a simulated
cluster in the API stand-in (kube_standin.py: three 8-GPU nodes — an L4 PCIe box, two A100 NVLink boxes,
one with a GPU lost to Xid 79 — and pods of every kind of holder), driven as kube-scheduler drives it
(POST /filter for a pod that fits nowhere), and headless Chromium over the DevTools protocol
(browser.py) opening /ui. Checked in the DOM: the grid, a GPU's holders, a whole-GPU holder, an unhealthy
GPU, the pending pod with the extender's reason, the three filters and a refused one, the topology view,
a change in the cluster showing up without a reload; over HTTP: the API's 400s, 404s, 405s and the
unchanged answer. No console error, no CSP violation.

    /usr/bin/python3 test_ui.py --build DIR --source DIR [--screenshot FILE] browser|api

Exit 77 (skipped) when chromium is missing (scripts/install-deps.sh installs it; CI's
GPUSLICE_REQUIRE_ALL=1 turns a skip into a failure).
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kube_standin  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import runner  # noqa: E402  (tests/runner.py)

TIMEOUT_S = 60


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


# ---- a simulated cluster ----

def links(n, link):
    """The node annotation's upper-triangle link rows (docs/cluster.md) from link(a, b)."""
    return ";".join(",".join(link(a, b) for b in range(a + 1, n)) for a in range(n - 1))


def pcie_2socket(a, b):
    return "PIX" if a // 2 == b // 2 else "PHB" if a // 4 == b // 4 else "SYS"


def nvlink_cube(a, b):
    return "NV2" if a // 4 == b // 4 else "NV1" if a % 4 == b % 4 else "SYS"


def node_obj(name, model, mem_mib, link, n=8, health=None):
    ann = {"v": 1, "driver": "535.104.05", "cuda": 12020,
           "gpus": [{"i": i, "uuid": "GPU-%s-%d" % (name, i), "model": model, "mem": mem_mib, "cc": "8.0",
                     "health": (health or {}).get(i, "ok")} for i in range(n)],
           "links": links(n, link)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"gpuslice.io/gpus": json.dumps(ann, separators=(",", ":"))}},
            "status": {"capacity": {"cpu": "64"}}}


def pod_obj(ns, name, limits, node=None, gpus=None, core=100, mem=0, confirmed=True):
    ann = {}
    if gpus is not None:
        ann["gpuslice.io/assignment"] = json.dumps({"v": 1, "node": node, "time": 1, "containers": [
            {"name": "main", "gpus": gpus, "core": core, "mem": mem}]})
        ann["gpuslice.io/assigned"] = "true" if confirmed else "false"
    spec = {"containers": [{"name": "main", "image": "busybox",
                            "resources": {"limits": {k: str(v) for k, v in limits.items()}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": ns, "name": name, "uid": "uid-%s-%s" % (ns, name), "annotations": ann},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}


CORE, MEM = "gpuslice.io/gpu-core", "gpuslice.io/gpu-memory"  # memory in 256 MiB units


def small_cluster(store):
    store.put("nodes", node_obj("gpu-a", "NVIDIA L4", 23034, pcie_2socket))
    store.put("nodes", node_obj("gpu-b", "NVIDIA A100-SXM4-40GB", 40960, nvlink_cube))
    store.put("nodes", node_obj("gpu-c", "NVIDIA A100-SXM4-40GB", 40960, nvlink_cube, health={3: "xid 79"}))
    store.put("pods", pod_obj("team", "frac1", {CORE: 30, MEM: 16}, "gpu-a", [1], 30, 4096))
    store.put("pods", pod_obj("team", "frac2", {CORE: 20, MEM: 8}, "gpu-a", [1], 20, 2048, confirmed=False))
    store.put("pods", pod_obj("ml", "train", {"nvidia.com/gpu": 2}, "gpu-b", [0, 1]))
    store.put("pods", pod_obj("ml", "eval", {CORE: 50, MEM: 40}, "gpu-c", [0], 50, 10240))
    store.put("pods", pod_obj("ml", "big", {"nvidia.com/gpu": 8}))  # pending: 8 whole GPUs, none has them


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(url, body=None, method=None):
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Extender:
    """`gpuslice scheduler` watching the stand-in."""

    def __init__(self, build, tmp, api):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.log = open(os.path.join(tmp, "scheduler.log"), "w+")
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
        self.proc = subprocess.Popen([os.path.join(build, "gpuslice"), "scheduler", "--kubeconfig",
                                      api.kubeconfig(os.path.join(tmp, "kubeconfig")),
                                      "--address", "127.0.0.1:%d" % self.port],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + TIMEOUT_S
        while time.time() < deadline:
            check(self.proc.poll() is None, "scheduler exited early: " + self.output())
            try:
                if request(self.base + "/healthz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError("scheduler not ready: " + self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def filter(self, pod, nodes):
        st, text = request(self.base + "/filter", {"Pod": pod, "Nodes": None, "NodeNames": nodes})
        check(st == 200, "filter: %d %s" % (st, text))
        return json.loads(text)

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=TIMEOUT_S)
        check(rc == 0, "scheduler exit %d after SIGTERM: %s" % (rc, self.output()))


class Env:
    def __init__(self, a):
        self.a = a
        self.started = None
        if a.test_name == "browser":  # Chromium starts (seconds) while the cluster and the extender come up
            import threading
            import browser
            box = {}

            def start():
                try:
                    box["b"] = browser.Browser(width=1280, height=760)
                except Exception as ex:  # noqa: BLE001 — handed to the test thread
                    box["e"] = ex
            self.started = (threading.Thread(target=start, daemon=True), box)
            self.started[0].start()
        self.tmp = tempfile.mkdtemp(prefix="gpuslice-ui-")
        self.api = kube_standin.StandIn().start()
        small_cluster(self.api.store)
        self.ext = Extender(a.build, self.tmp, self.api)
        big = self.api.store.get("pods", "ml/big")
        r = self.ext.filter(big, ["gpu-a", "gpu-b", "gpu-c"])  # as kube-scheduler would
        check(r["NodeNames"] == [] and len(r["FailedNodes"]) == 3, "filter of ml/big: %s" % r)
        self.reasons = r["FailedNodes"]

    def browser(self):
        t, box = self.started
        t.join()
        if "e" in box:
            raise box["e"]
        return box.pop("b")

    def close(self, failed):
        if self.started:  # a browser the test did not take
            self.started[0].join()
            if "b" in self.started[1]:
                self.started[1].pop("b").close()
        try:
            self.ext.stop()
        finally:
            if failed:
                sys.stderr.write("---- scheduler log ----\n" + self.ext.output())
            self.api.stop()


# ---- the page in the browser ----

def q(sel):
    return json.dumps(sel)


def text_of(b, sel):
    return b.eval("(() => { const e = document.querySelector(%s); return e ? e.textContent : null; })()" % q(sel))


def wait_text(b, sel, want, what):
    return b.wait("(() => { const e = document.querySelector(%s); return e && e.textContent.includes(%s); })()"
                  % (q(sel), q(want)), timeout=15, what=what)


def nodes_shown(b):
    return b.eval("[...document.querySelectorAll('[data-node]')].map(e => e.dataset.node)")


def test_browser(a, e):
    with e.browser() as b:
        b.send("Log.enable")
        b.open(e.ext.base + "/ui")
        b.wait("document.body.dataset.rendered === '1'", what="the first render")
        # the grid: every node, every GPU
        check(nodes_shown(b) == ["gpu-a", "gpu-b", "gpu-c"], "rows: %s" % nodes_shown(b))
        check(b.eval("document.querySelectorAll('[data-gpu]').length") == 24, "24 GPU cells")
        # a whole-GPU holder, an unhealthy GPU, a shared GPU's holders in its cell
        check(b.eval("document.querySelector('[data-gpu=\"gpu-b/0\"]').classList.contains('whole')"), "gpu-b/0 whole")
        check("ml/train" in text_of(b, '[data-gpu="gpu-b/0"] .who'), text_of(b, '[data-gpu="gpu-b/0"]'))
        check(b.eval("document.querySelector('[data-gpu=\"gpu-c/3\"]').classList.contains('bad')"), "gpu-c/3 bad")
        check("xid 79" in text_of(b, '[data-gpu="gpu-c/3"] .who'), text_of(b, '[data-gpu="gpu-c/3"]'))
        check("2 holders" in text_of(b, '[data-gpu="gpu-a/1"] .who'), text_of(b, '[data-gpu="gpu-a/1"]'))
        check(b.eval("[...document.querySelectorAll('[data-gpu=\"gpu-a/1\"] em')].map(e => e.textContent)") ==
              ["50%", "27%"], "gpu-a/1: compute 50 %, memory 6 of 22.5 GiB")
        # a GPU's holders: click it
        b.click('[data-gpu="gpu-a/1"]')
        b.wait("document.querySelectorAll('[data-holders=\"gpu-a/1\"] [data-holder]').length === 2", what="holders")
        rows = b.eval("[...document.querySelectorAll('[data-holders=\"gpu-a/1\"] [data-holder]')].map(e => "
                      "[e.dataset.holder, e.dataset.kind, e.children[1].textContent, e.children[2].textContent])")
        check(rows == [["team/frac1", "share", "30 % \u00b7 4 GiB", "running"],
                       ["team/frac2", "share", "20 % \u00b7 2 GiB", "assigned, not started"]], rows)
        b.click('[data-gpu="gpu-b/1"]')
        wait_text(b, '[data-holders="gpu-b/1"] [data-holder="ml/train"]', "whole GPU", "gpu-b/1's whole holder")
        b.click('[data-gpu="gpu-a/1"]')  # the screenshot shows this one
        b.wait("document.querySelector('[data-holders=\"gpu-a/1\"]')", what="gpu-a/1's detail")
        shot = b.screenshot()
        check(shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 5000, "a PNG screenshot")
        if a.screenshot:
            with open(a.screenshot, "wb") as f:
                f.write(shot)
        # the pending pod and the extender's reason
        b.click('nav a[data-view="pending"]')
        # the first distinct reason of the filter call (node order: gpu-a's), as the extender gave it
        first = json.loads(request(e.ext.base + "/api/v1/cluster")[1])["pending_pods"][0]["reasons"][0]
        check(first["example_node"] == "gpu-a" and first["text"] in e.reasons["gpu-a"], first)
        wait_text(b, '[data-pending="ml/big"] .reason', first["text"], "ml/big's reason")
        cell = text_of(b, '[data-pending="ml/big"] .reason')
        check(cell.startswith(first["text"] + " (%d of 3 nodes, e.g. gpu-a)" % first["nodes"]), cell)
        check("8 whole GPUs" in text_of(b, '[data-pending="ml/big"]'), text_of(b, '[data-pending="ml/big"]'))
        check("3 (0 / " in text_of(b, '[data-pending="ml/big"]'), text_of(b, '[data-pending="ml/big"]'))
        check(text_of(b, "#n-pending") == "1", text_of(b, "#n-pending"))
        # filters: namespace, model, node; a refused one
        b.click('nav a[data-view="gpus"]')
        b.type_into("#f-namespace", "ml")
        b.wait("JSON.stringify([...document.querySelectorAll('[data-node]')].map(e => e.dataset.node)) === "
               "'[\"gpu-b\",\"gpu-c\"]'", what="namespace ml: gpu-b and gpu-c")
        check(b.eval("document.querySelectorAll('[data-gpu]').length") == 3, "ml holds 3 GPUs")
        b.type_into("#f-namespace", "")
        b.type_into("#f-model", "l4")
        b.wait("JSON.stringify([...document.querySelectorAll('[data-node]')].map(e => e.dataset.node)) === "
               "'[\"gpu-a\"]'", what="model l4: gpu-a")
        b.type_into("#f-model", "")
        b.type_into("#f-node", "gpu-c")
        b.wait("JSON.stringify([...document.querySelectorAll('[data-node]')].map(e => e.dataset.node)) === "
               "'[\"gpu-c\"]'", what="node gpu-c")
        check("node=gpu-c" in b.eval("location.hash"), b.eval("location.hash"))
        b.type_into("#f-node", "GPU C!")
        wait_text(b, "#error", "query parameter 'node'", "the API's refusal shown")
        b.type_into("#f-node", "")
        b.wait("document.querySelectorAll('[data-node]').length === 3 && document.querySelector('#error').hidden",
               what="no filter")
        # live: a pod placed meanwhile shows up without a reload
        e.api.store.put("pods", pod_obj("web", "late", {CORE: 10, MEM: 4}, "gpu-a", [5], 10, 1024))
        wait_text(b, '[data-gpu="gpu-a/5"] .who', "web/late", "the new pod on gpu-a/5")
        # topology: the link matrix and the rings
        b.eval("location.hash = '#view=topology&topo=gpu-b'")
        b.wait("document.querySelectorAll('[data-topology=\"gpu-b\"] td').length === 64", what="8x8 matrix")
        check(text_of(b, '[data-topology="gpu-b"] tr:nth-child(2) td:nth-child(3)') == "NV2", "GPU0-GPU1 NV2")
        check(text_of(b, '[data-topology="gpu-b"] tr:nth-child(2) td:nth-child(6)') == "NV1", "GPU0-GPU4 NV1")
        ring4 = b.eval("[...document.querySelector('[data-ring=\"4\"]').children].map(c => c.textContent)")
        check(ring4[1] in ("0, 1, 2, 3", "4, 5, 6, 7") and ring4[3] == "4, 5, 6, 7", "rings of 4: %s" % ring4)
        check(b.eval("document.querySelector('[data-ring=\"8\"]').children[3].textContent") == "not free",
              "8 GPUs are not free whole on gpu-b")
        errors = [x for x in b.events if x.get("method") == "Log.entryAdded" and x["params"]["entry"]["level"] ==
                  "error" and "node=GPU+C" not in x["params"]["entry"].get("url", "")] + b.console_errors()
        check(not errors, "console errors: %s" % errors)
    return 0


def test_api(a, e):
    base = e.ext.base
    st, text = request(base + "/api/v1/cluster")
    check(st == 200, text)
    d = json.loads(text)
    check(d["ready"] and d["totals"]["nodes"] == 3 and d["totals"]["gpus"] == 24 and d["totals"]["gpus_healthy"] == 23, d["totals"])
    check(d["totals"]["pending_pods"] == 1 and d["pending_pods"][0]["name"] == "big", d["pending_pods"])
    p = d["pending_pods"][0]
    check(p["whole_gpus"] == 8 and p["fit"] == 0 and p["nodes"] == 3 and p["unschedulable_since_ms"], p)
    check(sum(r["nodes"] for r in p["reasons"]) + p["other_nodes"] == 3, p)
    g = {(n["name"], x["index"]): x for n in d["nodes"] for x in n["gpus"]}
    check([h["name"] for h in g[("gpu-a", 1)]["holders"]] == ["frac1", "frac2"], g[("gpu-a", 1)])
    check(g[("gpu-a", 1)]["memory_allocated_mib"] == 6144 and g[("gpu-a", 1)]["core_allocated_percent"] == 50,
          g[("gpu-a", 1)])
    check(g[("gpu-b", 0)]["whole_holder"] == {"namespace": "ml", "name": "train"}, g[("gpu-b", 0)])
    # unchanged since the generation the caller has
    st, text = request(base + "/api/v1/cluster?since=%d" % d["generation"])
    check(st == 200 and json.loads(text) == {"generation": d["generation"], "unchanged": True}, text)
    st, text = request(base + "/api/v1/cluster?since=%d&namespace=ml" % (d["generation"] - 1))
    check(st == 200 and {n["name"] for n in json.loads(text)["nodes"]} == {"gpu-b", "gpu-c"}, text)
    # the scheduler's pending gauge for the alert
    st, text = request(base + "/metrics")
    check('gpuslice_scheduler_unschedulable_pod_seconds{namespace="ml",pod="big"}' in text, text)
    # bad queries: 400 with the reason
    for qs, why in (("node=Gpu-A", "'node'"), ("since=12x", "'since'"), ("colour=red", "unknown query parameter"),
                    ("node=a&node=b", "given twice"), ("model=%zz", "bad %-escape"), ("namespace=a.b", "'namespace'"),
                    ("model=" + "x" * 65, "'model'"), ("node=%00", "NUL")):
        st, text = request(base + "/api/v1/cluster?" + qs)
        check(st == 400 and why in text, "%s: %d %s" % (qs, st, text))
    st, text = request(base + "/api/v1/topology")
    check(st == 400 and "'node' is required" in text, text)
    st, text = request(base + "/api/v1/topology?node=gpu-z")
    check(st == 404, text)
    st, text = request(base + "/api/v1/topology?node=gpu-a")
    t = json.loads(text)
    check(st == 200 and t["links"][0][1] == "PIX" and t["links"][0][7] == "SYS" and t["rings"][0]["count"] == 2, t)
    # read-only
    for path in ("/ui", "/api/v1/cluster", "/ui/app.js"):
        st, text = request(base + path, b"{}", method="POST")
        check(st == 405, "POST %s: %d" % (path, st))
    # the page and its two files, nothing else
    st, text = request(base + "/ui")
    check(st == 200 and '<script src="/ui/app.js"' in text and "://" not in text, "the page loads from elsewhere: "
          + text[:400])
    for path in ("/ui/app.js", "/ui/app.css"):
        check(request(base + path)[0] == 200, path)
    check(request(base + "/ui/other.js")[0] == 404, "only what is embedded")
    # the pod gets bound: no longer pending
    big = e.api.store.get("pods", "ml/big")
    big["spec"]["nodeName"] = "gpu-b"
    e.api.store.put("pods", big)
    deadline = time.time() + 15
    while time.time() < deadline:
        if not json.loads(request(base + "/api/v1/cluster")[1])["pending_pods"]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("ml/big still pending after it was bound")
    return 0


TESTS = {"browser": test_browser, "api": test_api}


def fixture(a):
    if a.test_name == "browser":
        import browser
        if not browser.chromium_path():
            raise runner.Skip("chromium is not installed (scripts/install-deps.sh)")
    e = Env(a)
    e.runner_args = a
    return e


if __name__ == "__main__":
    runner.main({name: (lambda fn: lambda e: fn(e.runner_args, e))(fn) for name, fn in TESTS.items()},
                make_env=fixture, label="ui-", timeout_s=105,
                arguments=runner.STANDARD + [("--screenshot", {"help": "also write the page's screenshot here (docs/ui.png)"})])
