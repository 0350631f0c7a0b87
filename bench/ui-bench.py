# SPDX-License-Identifier: Apache-2.0
"""The operator page at 1,000 nodes x 8 GPUs (docs/ui.md, docs/BENCHMARKS.md "Operator page"): how long
headless Chromium takes from navigation to the first painted grid, and what the extender's JSON costs.

    /usr/bin/python3 bench/ui-bench.py --build DIR [--nodes 1000] [--loads 5] [--markdown]

The real `gpuslice scheduler` serves a snapshot (--snapshot) of N nodes of 8 GPUs (half A100 NVLink,
half L4 PCIe; 1 in 50 GPUs lost to an Xid; 3 pods per node: two shares and a pair of whole GPUs, with
assignment annotations) and 40 pending pods, each filtered once over every node as kube-scheduler
would. Measured in one run, in one browser, fresh navigation each time:
  - baseline: the same page over a 3-node cluster (the page's own cost: navigation, script, styles);
  - the page over N nodes: the performance marks the page sets (gs-data: the answer fetched and parsed;
    gs-first-render: the frame after the first grid was written), the page's own fetch/parse split,
    and Chromium's layout and style-recalculation counts (DevTools Performance.getMetrics) over the
    load — one layout per render is the goal (no thrash);
  - scrolling the grid to 20 places: the time from setting scrollTop to the second frame after;
  - the API alone (urllib): /api/v1/cluster p50 over 20 calls, its size, and the unchanged answer.
Not a test: nothing here passes or fails on a number.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "integration"))
import browser  # noqa: E402
import test_ui  # noqa: E402


def snapshot(n_nodes):
    nodes, pods = [], []
    for i in range(n_nodes):
        name = "gpu-%04d" % i
        a100 = i % 2 == 0
        health = {g: "xid 79" for g in range(8) if (i * 8 + g) % 50 == 7}
        nodes.append(test_ui.node_obj(name, "NVIDIA A100-SXM4-40GB" if a100 else "NVIDIA L4",
                                      40960 if a100 else 23034, test_ui.nvlink_cube if a100 else test_ui.pcie_2socket,
                                      health=health))
        ns = "team-%d" % (i % 17)
        pods.append(test_ui.pod_obj(ns, "infer-%04d" % i, {test_ui.CORE: 30, test_ui.MEM: 16}, name, [0], 30, 4096))
        pods.append(test_ui.pod_obj(ns, "eval-%04d" % i, {test_ui.CORE: 20, test_ui.MEM: 8}, name, [0], 20, 2048))
        pods.append(test_ui.pod_obj("train", "ddp-%04d" % i, {"nvidia.com/gpu": 2}, name, [2, 3]))
    return {"nodes": nodes, "pods": pods}


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def start(build, tmp, snap):
    path = os.path.join(tmp, "snapshot-%d.json" % len(snap["nodes"]))
    with open(path, "w") as f:
        json.dump(snap, f)
    port = test_ui.free_port()
    p = subprocess.Popen([os.path.join(build, "gpuslice"), "scheduler", "--snapshot", path, "--address",
                          "127.0.0.1:%d" % port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if test_ui.request(base + "/healthz")[0] == 200:
                return p, base
        except OSError:
            time.sleep(0.1)
    p.kill()
    raise RuntimeError("scheduler did not come up")


def page_load(b, url):
    b.open("about:blank")
    b.send("Performance.disable")
    b.send("Performance.enable")  # the counts below are the page's, from its navigation on
    b.open(url)
    b.wait("document.body.dataset.rendered === '1'", timeout=120)
    marks = b.eval("(() => { const m = (n) => performance.getEntriesByName(n)[0].startTime; "
                   "return {data: m('gs-data'), render: m('gs-first-render'), t: window.gsTiming, "
                   "rows: document.querySelectorAll('[data-node]').length, "
                   "cells: document.querySelectorAll('[data-gpu]').length}; })()")
    after = {m["name"]: m["value"] for m in b.send("Performance.getMetrics")["metrics"]}
    marks["layouts"] = after.get("LayoutCount", 0)
    marks["recalcs"] = after.get("RecalcStyleCount", 0)
    marks["layout_ms"] = 1000 * after.get("LayoutDuration", 0)
    return marks


def scroll_times(b, places=20):
    return b.eval("""(async () => {
        const g = document.getElementById('grid'); const out = [];
        const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
        for (let i = 1; i <= %d; i++) {
            const t0 = performance.now();
            g.scrollTop = (g.scrollHeight - g.clientHeight) * i / %d;
            await frame(); await frame();
            out.push(performance.now() - t0);
        }
        return out; })()""" % (places, places), await_promise=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpuslice-ui-bench-")
    small, small_base = start(a.build, tmp, snapshot(3))
    big, base = start(a.build, tmp, snapshot(a.nodes))
    try:
        names = ["gpu-%04d" % i for i in range(a.nodes)]
        for k in range(40):  # pending pods, each filtered over every node as kube-scheduler would
            pod = test_ui.pod_obj("batch", "wide-%02d" % k, {"nvidia.com/gpu": 8} if k % 2 else
                                  {test_ui.CORE: 60, test_ui.MEM: 160})
            st, text = test_ui.request(base + "/filter", {"Pod": pod, "Nodes": None, "NodeNames": names})
            assert st == 200, text
        api = []
        for _ in range(20):
            t0 = time.time()
            with urllib.request.urlopen(base + "/api/v1/cluster", timeout=60) as r:
                body = r.read()
            api.append(time.time() - t0)
        gen = json.loads(body)["generation"]
        t0 = time.time()
        with urllib.request.urlopen(base + "/api/v1/cluster?since=%d" % gen, timeout=60) as r:
            unchanged = r.read()
        t_unchanged = time.time() - t0
        with browser.Browser(width=1400, height=900, timeout=120) as b:
            base_loads = [page_load(b, small_base + "/ui") for _ in range(a.loads)]
            loads = [page_load(b, base + "/ui") for _ in range(a.loads)]
            scrolls = scroll_times(b)
        version = subprocess.run([browser.chromium_path(), "--version"], capture_output=True, text=True).stdout.strip()
    finally:
        for p in (small, big):
            p.terminate()
            p.wait(30)

    def med(xs, k):
        return statistics.median(x[k] for x in xs)

    r = {
        "nodes": a.nodes, "gpus": a.nodes * 8, "rows_in_dom": loads[-1]["rows"],
        "cells_in_dom": loads[-1]["cells"], "baseline_render_ms": med(base_loads, "render"),
        "render_ms_p50": med(loads, "render"), "render_ms_max": max(x["render"] for x in loads),
        "data_ms_p50": med(loads, "data"), "fetch_ms_p50": statistics.median(x["t"]["fetch_ms"] for x in loads),
        "parse_ms_p50": statistics.median(x["t"]["parse_ms"] for x in loads), "bytes": loads[0]["t"]["bytes"],
        "layouts_p50": med(loads, "layouts"), "recalcs_p50": med(loads, "recalcs"), "layout_ms_p50": med(loads, "layout_ms"),
        "scroll_ms_p50": pct(scrolls, 0.5), "scroll_ms_max": max(scrolls),
        "api_ms_p50": 1000 * pct(api, 0.5), "api_bytes": len(body), "unchanged_ms": 1000 * t_unchanged,
        "unchanged_bytes": len(unchanged), "chromium": version,
    }
    if a.markdown:
        print("| page | first grid painted (gs-first-render) p50 / max | answer fetched + parsed (gs-data) | layouts / style recalcs per load |")
        print("|---|---|---|---|")
        print("| baseline: 3 nodes | %.0f ms | – | – |" % r["baseline_render_ms"])
        print("| %d nodes x 8 GPUs (%d rows, %d GPU cells in the DOM) | %.0f ms / %.0f ms | %.0f ms (fetch %.0f, JSON.parse %.0f; %.1f MB) | %.0f / %.0f (%.1f ms of layout) |"
              % (a.nodes, r["rows_in_dom"], r["cells_in_dom"], r["render_ms_p50"], r["render_ms_max"], r["data_ms_p50"],
                 r["fetch_ms_p50"], r["parse_ms_p50"], r["bytes"] / 1e6, r["layouts_p50"], r["recalcs_p50"], r["layout_ms_p50"]))
        print()
        print("Scrolling to 20 places: p50 %.1f ms, max %.1f ms to the second frame. API alone: /api/v1/cluster p50 %.0f ms "
              "(%.1f MB); unchanged (?since=) %.1f ms, %d bytes. %s."
              % (r["scroll_ms_p50"], r["scroll_ms_max"], r["api_ms_p50"], r["api_bytes"] / 1e6, r["unchanged_ms"],
                 r["unchanged_bytes"], r["chromium"]))
    else:
        print(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
