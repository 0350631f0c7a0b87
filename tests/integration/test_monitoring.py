# SPDX-License-Identifier: Apache-2.0
"""The operator's monitoring artefacts against real peers (docs/monitoring.md):

  rules      deploy/prometheus/gpuslice-rules.yaml: `promtool check rules`, `promtool test rules` with
             tests/data/prometheus/gpuslice-rules.test.yaml (each alert fires and stays quiet), the
             PrometheusRule manifest carries the same groups, every metric the rules read is documented
             in docs/metrics.md.
  dashboard  deploy/grafana/gpuslice.json: a Grafana dashboard model with a Prometheus datasource
             variable and node/namespace/pod variables; every metric it reads is documented in
             docs/metrics.md; a real Prometheus scrapes a real node agent (the simulated 8-GPU node, a
             kubelet stand-in, a whole-GPU and a fractional container, a GPU process of that container
             named through a CRI stand-in, an Xid) and a real `gpuslice scheduler` (the API stand-in's
             cluster, a pod that fits nowhere, a bind), loads the alert rules, and answers every panel's
             and every variable's query through its HTTP API with at least one series and no error.

    /usr/bin/python3 test_monitoring.py --build DIR --source DIR rules|dashboard
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, ".."))
import runner  # noqa: E402  (tests/runner.py)

TIMEOUT_S = 60
# PromQL words that look like metric names: functions, aggregations, keywords
PROMQL_WORDS = {"sum", "avg", "min", "max", "count", "by", "without", "on", "ignoring", "group_left",
                "group_right", "rate", "increase", "irate", "delta", "histogram_quantile", "label_values", "or",
                "and", "unless", "le", "vector", "absent", "bool", "offset", "humanize"}


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def documented(source):
    import test_docs
    return set(test_docs.doc_families(open(os.path.join(source, "docs", "metrics.md")).read()))


def metric_names(expr):
    """The metric names an expression reads (label names inside {} and by(...) left out)."""
    e = re.sub(r"label_values\((.*),\s*\w+\)", r"\1", expr)  # a variable's query: its selector
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', e)               # strings
    e = re.sub(r"\{[^}]*\}", "", e)                       # matchers
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)                      # ranges
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        w = m.group(0)
        if w in PROMQL_WORDS or w.startswith("$"):
            continue
        if e[m.end():m.end() + 1] == "(":                 # a function call
            continue
        names.add(w)
    return names


def family_of(name, docs):
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and name[: -len(suf)] in docs:
            return name[: -len(suf)]
    return name


def undocumented(exprs, docs):
    return sorted({n for e in exprs for n in metric_names(e)
                   if n != "up" and family_of(n, docs) not in docs})


# ---- rules ----

def test_rules(a):
    rules = os.path.join(a.source, "deploy", "prometheus", "gpuslice-rules.yaml")
    for cmd in (["promtool", "check", "rules", rules],
                ["promtool", "test", "rules", os.path.join(a.source, "tests", "data", "prometheus",
                                                            "gpuslice-rules.test.yaml")]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
        check(r.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(cmd[:3]), r.returncode, r.stdout, r.stderr))
    plain = yaml.safe_load(open(rules))["groups"]
    manifest = yaml.safe_load(open(os.path.join(a.source, "deploy", "kubernetes", "monitoring",
                                                "prometheusrule.yaml")))
    check(manifest["kind"] == "PrometheusRule" and manifest["apiVersion"] == "monitoring.coreos.com/v1", manifest)
    check(manifest["spec"]["groups"] == plain,
          "deploy/kubernetes/monitoring/prometheusrule.yaml differs from deploy/prometheus/gpuslice-rules.yaml")
    alerts = [r for g in plain for r in g["rules"]]
    tested = set(re.findall(r"alertname: (\S+)", open(os.path.join(a.source, "tests", "data", "prometheus",
                                                                     "gpuslice-rules.test.yaml")).read()))
    check({r["alert"] for r in alerts} <= tested, "alerts without a promtool test: %s" %
          sorted({r["alert"] for r in alerts} - tested))
    bad = undocumented([r["expr"] for r in alerts], documented(a.source))
    check(not bad, "the rules read metrics docs/metrics.md does not have: %s" % bad)
    print("%d alerts checked, tested, equal in the PrometheusRule" % len(alerts))
    return 0


# ---- dashboard ----

def dashboard_queries(d):
    """[(where, expr)] of every panel target and every query variable."""
    out = []
    for p in d["panels"]:
        if p["type"] == "row":
            continue
        check(p.get("datasource", {}).get("uid") == "${datasource}", "panel %r: datasource %s" %
              (p["title"], p.get("datasource")))
        check(p.get("targets"), "panel %r has no query" % p["title"])
        for t in p["targets"]:
            out.append(("panel %r %s" % (p["title"], t["refId"]), t["expr"]))
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            out.append(("variable $%s" % v["name"], v["query"]["query"]))
    return out


def check_model(d):
    vars_ = {v["name"]: v for v in d["templating"]["list"]}
    ds = vars_.get("datasource")
    check(ds and ds["type"] == "datasource" and ds["query"] == "prometheus", "no Prometheus datasource variable")
    for name in ("node", "namespace", "pod"):
        v = vars_.get(name)
        check(v and v["type"] == "query" and v["datasource"]["uid"] == "${datasource}", "no $%s variable" % name)
    check(d.get("uid") and d.get("title") and d.get("schemaVersion"), "uid, title, schemaVersion")
    ids = [p["id"] for p in d["panels"]]
    check(len(ids) == len(set(ids)), "panel ids repeat")


def substitute(expr):
    # what Grafana sends with every variable at "All" (allValue .*) and a 1 s scrape interval
    return (expr.replace("$__rate_interval", "20s").replace("$node", ".*").replace("$namespace", ".*")
            .replace("$pod", ".*"))


def prom_get(base, path, **params):
    url = base + path + "?" + urllib.parse.urlencode(params, doseq=True)
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body, code = r.read(), r.status
    except urllib.error.HTTPError as e:  # 400/422 with Prometheus' error; 503 text while it starts
        body, code = e.read(), e.code
    try:
        return json.loads(body)
    except ValueError:
        return {"status": "error", "error": "HTTP %d: %s" % (code, body[:200].decode(errors="replace"))}


def run_query(base, expr):
    """Number of series, or raises with Prometheus' error."""
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", expr.strip())
    if m:
        r = prom_get(base, "/api/v1/series", **{"match[]": m.group(1), "start": time.time() - 60})
        check(r["status"] == "success", "%s: %s" % (expr, r.get("error")))
        return len({s.get(m.group(2)) for s in r["data"] if s.get(m.group(2))})
    r = prom_get(base, "/api/v1/query", query=expr)
    check(r["status"] == "success", "%s: %s" % (expr, r.get("error")))
    return len(r["data"]["result"])


class Peers:
    """The node agent (test_share's fixture), the extender (test_ui's), a CRI stand-in, Prometheus."""

    def __init__(self, a):
        import kubelet_standin
        import test_share
        import test_ui
        import kube_standin
        self.tmp = tempfile.mkdtemp(prefix="gpuslice-dash-")
        self.procs = []
        args = argparse.Namespace(build=a.build, source=a.source,
                                  topology=os.path.join(a.source, "tests/data/topologies/seed000-8gpu-pcie-2socket.topo"))
        self.agent = test_share.Share(args, kubelet_standin.load_stubs(a.build))
        self.api = kube_standin.StandIn().start()
        test_ui.small_cluster(self.api.store)
        self.ext = None
        # a GPU process of container 3f1c… (pod uid 8c6e…): the proc root fixture, named ml/infer/main by CRI
        proc = os.path.join(self.tmp, "proc")
        shutil.copytree(os.path.join(a.source, "tests/data/proc-v2-systemd-containerd-guaranteed"), proc)
        with open(os.path.join(proc, "4242", "comm"), "w") as f:
            f.write("python3\n")
        cid = "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a"
        sock = os.path.join(self.tmp, "cri.sock")
        cri = subprocess.Popen(["/usr/bin/python3", os.path.join(here, "cri_standin.py"), "--build", a.build,
                                "--socket", sock, "--container",
                                "%s,running,ml,infer,8c6e4f1a-2b3d-4c5e-9f7a-1b2c3d4e5f6a,main" % cid],
                               stdout=subprocess.PIPE, text=True)
        self.procs.append(cri)
        check(cri.stdout.readline().strip() == "ready", "the CRI stand-in did not start")
        e = self.agent
        self.agent_port = test_share.agent_fixture.free_port()
        e.start_share("gpuslice", "--metrics-address", "127.0.0.1:%d" % self.agent_port, "--sample-interval", "1s",
                      "--proc-root", proc, "--cri-socket", sock)
        whole = e.admit(("nvidia.com/gpu", 1))
        frac = e.admit((e.core, 30), (e.mem, 8))
        e.kubelet.pods = [("ml", "train", "main", "nvidia.com/gpu", whole["nvidia.com/gpu"][0]),
                          ("ml", "infer", "main", e.core, frac[e.core][0]),
                          ("ml", "infer", "main", e.mem, frac[e.mem][0])]
        e.status()
        text = test_share.agent_fixture.scrape(
            self.agent_port, lambda t: 'gpuslice_container_gpu_memory_limit_bytes{namespace="ml",pod="infer"' in t,
            "the fractional container's limit")
        gpu = re.search(r'gpuslice_container_gpu_memory_limit_bytes\{namespace="ml",pod="infer",container="main",'
                        r'gpu_index="(\d+)"', text).group(1)
        e.sim("proc", "add", "--gpu", gpu, "--pid", "4242", "--mem", "1536MiB", "--sm", "20", "--keep")
        e.sim("xid", "7", "48")  # a critical Xid on a GPU nobody holds
        # the extender, driven as kube-scheduler would: a pod that fits nowhere, one that fits and is bound
        self.ext = test_ui.Extender(a.build, self.tmp, self.api)
        self.ext.filter(self.api.store.get("pods", "ml/big"), ["gpu-a", "gpu-b", "gpu-c"])
        late = test_ui.pod_obj("web", "late", {test_ui.CORE: 10, test_ui.MEM: 4})
        self.api.store.put("pods", late)
        late = self.api.store.get("pods", "web/late")
        self.ext.filter(late, ["gpu-a"])
        st, txt = test_ui.request(self.ext.base + "/bind", {"PodName": "late", "PodNamespace": "web",
                                                            "PodUID": late["metadata"]["uid"], "Node": "gpu-a"})
        check(st == 200 and json.loads(txt)["Error"] == "", "bind: %d %s" % (st, txt))
        # Prometheus scraping both every second, with the alert rules loaded
        self.prom_port = test_share.agent_fixture.free_port()
        cfg = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
               "rule_files": [os.path.join(a.source, "deploy", "prometheus", "gpuslice-rules.yaml")],
               "scrape_configs": [
                   {"job_name": "gpuslice-node", "static_configs": [{"targets": ["127.0.0.1:%d" % self.agent_port]}]},
                   {"job_name": "gpuslice-scheduler", "static_configs": [{"targets": [self.ext.base[7:]]}]}]}
        with open(os.path.join(self.tmp, "prometheus.yml"), "w") as f:
            yaml.safe_dump(cfg, f)
        self.prom_log = open(os.path.join(self.tmp, "prometheus.log"), "w+")
        prom = subprocess.Popen(["prometheus", "--config.file=" + os.path.join(self.tmp, "prometheus.yml"),
                                 "--storage.tsdb.path=" + os.path.join(self.tmp, "tsdb"),
                                 "--web.listen-address=127.0.0.1:%d" % self.prom_port],
                                stdout=self.prom_log, stderr=subprocess.STDOUT)
        self.procs.append(prom)
        self.prom = "http://127.0.0.1:%d" % self.prom_port

    def wait_scraped(self, seconds):
        """Both targets up, with `seconds` of samples."""
        deadline = time.time() + TIMEOUT_S + seconds
        while time.time() < deadline:
            try:
                r = prom_get(self.prom, "/api/v1/query", query="count_over_time(up[%ds]) >= %d" % (seconds, seconds))
                if r.get("status") == "success" and len(r["data"]["result"]) == 2:
                    up = prom_get(self.prom, "/api/v1/query", query="up == 1")
                    if len(up["data"]["result"]) == 2:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        self.prom_log.seek(0)
        raise AssertionError("Prometheus did not scrape both targets: " + self.prom_log.read()[-3000:])

    def close(self, failed):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
        try:
            if self.ext:
                self.ext.stop()
        finally:
            if failed and self.ext:
                sys.stderr.write("---- scheduler log ----\n" + self.ext.output())
            self.api.stop()
            self.agent.close(failed)
            shutil.rmtree(self.tmp, ignore_errors=True)


def test_dashboard(a):
    d = json.load(open(os.path.join(a.source, "deploy", "grafana", "gpuslice.json")))
    check_model(d)
    queries = dashboard_queries(d)
    bad = undocumented([e for _, e in queries], documented(a.source))
    check(not bad, "the dashboard reads metrics docs/metrics.md does not have: %s" % bad)
    peers = Peers(a)
    failed = True
    try:
        peers.wait_scraped(8)
        problems = []
        for where, expr in queries:
            try:
                n = run_query(peers.prom, substitute(expr))
                if n == 0:
                    problems.append("%s returns no series: %s" % (where, expr))
            except AssertionError as e:
                problems.append("%s fails: %s" % (where, e))
        # the rules Prometheus loaded evaluate without error
        rules = prom_get(peers.prom, "/api/v1/rules")
        for g in rules["data"]["groups"]:
            for r in g["rules"]:
                if r.get("health") not in ("ok", "unknown") or r.get("lastError"):
                    problems.append("rule %s: %s %s" % (r["name"], r.get("health"), r.get("lastError")))
        check(not problems, "\n".join(problems))
        failed = False
        print("%d queries answered with series" % len(queries))
    finally:
        peers.close(failed)
    return 0


TESTS = {"rules": test_rules, "dashboard": test_dashboard}


if __name__ == "__main__":
    runner.main(TESTS, label="monitoring-", timeout_s=160)
