# SPDX-License-Identifier: Apache-2.0
"""Integration tests of `gpuslice scheduler` (docs/scheduler.md): the real binary on a snapshot,
driven over HTTP(S) with the bodies a real kube-scheduler 1.20 sent (tests/data/extender/).

    /usr/bin/python3 test_scheduler.py --build DIR --source DIR TEST

TESTS: verbs (filter/prioritize over HTTP, 8 GiB pod vs two 6 GiB GPUs, metrics), tls (HTTPS with
a client CA: a client certificate from that CA is served, none or a foreign one is refused),
usage (bad flags and snapshots: exit codes and messages), mig (nvidia.com/mig-* by free MIG devices, the
one-parent preference, a `single` node's nvidia.com/gpu, MIG GPUs never whole or shared). Certificates
come from the openssl CLI.
"""

import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import runner  # noqa: E402  (tests/runner.py)

TIMEOUT_S = 60


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def node(name, gpus, links=None):
    ann = {"v": 1, "gpus": [{"i": i, "uuid": "GPU-%s-%d" % (name, i), "model": "Tesla T4", "mem": m, "health": "ok"}
                            for i, m in enumerate(gpus)]}
    if links:
        ann["links"] = links
    return {"metadata": {"name": name, "annotations": {"gpuslice.io/gpus": json.dumps(ann)}}}


def pod(name, limits, node_name=None, annotations=None):
    p = {"metadata": {"name": name, "namespace": "default", "uid": "uid-" + name, "resourceVersion": "7",
                      "annotations": annotations or {}},
         "spec": {"containers": [{"name": "main", "resources": {"limits": limits}}]}}
    if node_name:
        p["spec"]["nodeName"] = node_name
    return p


SNAPSHOT = {
    "nodes": [node("two-6g", [6144, 6144], "PIX"), node("one-16g", [16384]), node("busy-16g", [16384])],
    "pods": [pod("holder", {"gpuslice.io/gpu-memory": "40"}, "busy-16g")],  # 10 GiB of 16 used
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scheduler:
    def __init__(self, build, tmp, extra=(), snapshot=None):
        snap = os.path.join(tmp, "snapshot.json")
        with open(snap, "w") as f:
            json.dump(snapshot or SNAPSHOT, f)
        self.port = free_port()
        self.log = open(os.path.join(tmp, "scheduler.log"), "w+")
        self.proc = subprocess.Popen([os.path.join(build, "gpuslice"), "scheduler", "--snapshot", snap,
                                      "--address", "127.0.0.1:%d" % self.port, *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + TIMEOUT_S
        while time.time() < deadline:
            check(self.proc.poll() is None, "scheduler exited early: " + self.output())
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("scheduler did not listen: " + self.output())

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=TIMEOUT_S)
        check(rc == 0, "scheduler exit %d after SIGTERM: %s" % (rc, self.output()))


def request(url, body=None, context=None):
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=context) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def args_for(p, names):
    return {"Pod": p, "Nodes": None, "NodeNames": names}


def test_verbs(a, tmp):
    # every node's verdict: the full answer (--filter-answer best is test_filter_best)
    s = Scheduler(a.build, tmp, extra=("--filter-answer", "all"))
    base = "http://127.0.0.1:%d" % s.port
    try:
        st, text = request(base + "/healthz")
        check(st == 200, "healthz %d %s" % (st, text))
        names = ["two-6g", "one-16g", "busy-16g", "cpu-only"]
        p = pod("want8", {"gpuslice.io/gpu-core": "50", "gpuslice.io/gpu-memory": "32"})  # 8 GiB
        st, text = request(base + "/filter", args_for(p, names))
        check(st == 200, "filter %d %s" % (st, text))
        r = json.loads(text)
        check(r["Error"] == "" and r["NodeNames"] == ["one-16g"], "filter: %s" % r)
        check("largest free GPU has 6 GiB, container main needs 8 GiB" in r["FailedNodes"]["two-6g"], r)
        check("two-6g" in r["FailedAndUnresolvableNodes"], r)
        check("largest free GPU has 6 GiB, container main needs 8 GiB" in r["FailedNodes"]["busy-16g"], r)
        check("busy-16g" not in r["FailedAndUnresolvableNodes"], "preemption could help on busy-16g: %s" % r)
        check("publishes no GPUs" in r["FailedNodes"]["cpu-only"], r)
        # a 4 GiB pod fits everywhere; binpack (asked: the default is frag) prefers the busy GPU
        p = pod("want4", {"gpuslice.io/gpu-memory": "16"}, annotations={"gpuslice.io/scheduling-policy": "binpack"})
        st, text = request(base + "/prioritize", args_for(p, names[:3]))
        check(st == 200, "prioritize %d %s" % (st, text))
        scores = {h["Host"]: h["Score"] for h in json.loads(text)}
        check(set(scores) == set(names[:3]) and all(0 <= v <= 10 for v in scores.values()), scores)
        check(scores["busy-16g"] > scores["one-16g"], "binpack: %s" % scores)
        # the same pod asking for spread
        p = pod("want4s", {"gpuslice.io/gpu-memory": "16"}, annotations={"gpuslice.io/scheduling-policy": "spread"})
        st, text = request(base + "/prioritize", args_for(p, names[:3]))
        scores = {h["Host"]: h["Score"] for h in json.loads(text)}
        check(scores["busy-16g"] < scores["one-16g"], "spread: %s" % scores)
        # the real kube-scheduler's body, full Nodes form: both names unknown here
        with open(os.path.join(a.source, "tests/data/extender/filter.request.nodes.json"), "rb") as f:
            st, text = request(base + "/filter", f.read())
        r = json.loads(text)
        check(st == 200 and r["Nodes"]["items"] == [] and len(r["FailedNodes"]) == 2, r)
        st, text = request(base + "/filter", b"{not json")
        check(st == 400 and "bad ExtenderArgs" in json.loads(text)["Error"], text)
        st, text = request(base + "/metrics")
        check('gpuslice_scheduler_requests_total{verb="filter"} 3' in text, text)
        check('gpuslice_scheduler_filter_answers_total{form="all"} 2' in text, text)
        check("gpuslice_scheduler_model_pods 1" in text, text)
    finally:
        s.stop()


def test_filter_best(a, tmp):
    """The default --filter-answer best: a GPU pod that fits gets only the node its policy ranks first (so
    kube-scheduler skips prioritize); one that fits nowhere gets every node's reason."""
    s = Scheduler(a.build, tmp)
    base = "http://127.0.0.1:%d" % s.port
    try:
        names = ["two-6g", "one-16g", "busy-16g", "cpu-only"]
        p = pod("want4", {"gpuslice.io/gpu-memory": "16"}, annotations={"gpuslice.io/scheduling-policy": "binpack"})
        r = filter_(base, p, names)
        check(r["NodeNames"] == ["busy-16g"] and r["FailedNodes"] == {}, "binpack: %s" % r)
        p = pod("want4s", {"gpuslice.io/gpu-memory": "16"}, annotations={"gpuslice.io/scheduling-policy": "spread"})
        r = filter_(base, p, names)
        check(len(r["NodeNames"]) == 1 and r["NodeNames"][0] != "busy-16g", "spread: %s" % r)
        r = filter_(base, pod("want32", {"gpuslice.io/gpu-memory": "128"}), names)
        check(r["NodeNames"] == [] and set(r["FailedNodes"]) == set(names), "fits nowhere: %s" % r)
        check("container main needs 32 GiB" in r["FailedNodes"]["one-16g"], r)
        st, text = request(base + "/metrics")
        check('gpuslice_scheduler_filter_answers_total{form="one"} 2' in text, text)
        check('gpuslice_scheduler_filter_answers_total{form="all"} 1' in text, text)
    finally:
        s.stop()


def mig_node(name, gpus, strategy="mixed"):
    """gpus: per GPU None (not in MIG mode) or a list of (profile, holder or "") MIG devices."""
    ann = {"v": 1, "mig_strategy": strategy, "gpus": []}
    for i, devs in enumerate(gpus):
        g = {"i": i, "uuid": "GPU-%s-%d" % (name, i), "model": "A100-SXM4-80GB", "mem": 81920, "health": "ok"}
        if devs is not None:
            g["mig"] = [dict({"i": k, "uuid": "MIG-%s-%d-%d" % (name, i, k), "profile": prof, "mem": 9856,
                              "health": "ok"}, **({"pod": holder} if holder else {}))
                        for k, (prof, holder) in enumerate(devs)]
        ann["gpus"].append(g)
    return {"metadata": {"name": name, "annotations": {"gpuslice.io/gpus": json.dumps(ann)}}}


FREE, HELD = ("1g.10gb", ""), ("1g.10gb", "ml/other")
MIG_SNAPSHOT = {
    "nodes": [mig_node("mig-one", [[FREE, FREE, FREE], None]),       # GPU 1 (not MIG) held whole below
              mig_node("mig-split", [[FREE, HELD], [FREE, HELD]]),
              mig_node("mig-full", [[HELD, HELD]]),
              mig_node("mig-awaited", [[FREE, FREE, FREE]]),          # a bound pod waits for 2 of them
              mig_node("single", [[FREE, FREE]], strategy="single")],
    "pods": [pod("whole", {"nvidia.com/gpu": "1"}, "mig-one",
                 {"gpuslice.io/assignment": json.dumps({"v": 1, "node": "mig-one",
                                                         "containers": [{"name": "main", "gpus": [1]}]})}),
             pod("late", {"nvidia.com/mig-1g.10gb": "2"}, "mig-awaited")],
}


def filter_(base, p, names):
    st, text = request(base + "/filter", args_for(p, names))
    check(st == 200, "filter %d %s" % (st, text))
    r = json.loads(text)
    check(r["Error"] == "", r)
    return r


def test_mig(a, tmp):
    s = Scheduler(a.build, tmp, snapshot=MIG_SNAPSHOT, extra=("--filter-answer", "all"))
    base = "http://127.0.0.1:%d" % s.port
    names = ["mig-one", "mig-split", "mig-full", "mig-awaited", "single", "cpu-only"]
    try:
        p = pod("want2", {"nvidia.com/mig-1g.10gb": "2"})
        r = filter_(base, p, names)
        check(r["NodeNames"] == ["mig-one", "mig-split"], "mig filter: %s" % r)
        f, unres = r["FailedNodes"], r["FailedAndUnresolvableNodes"]
        check("0 free MIG devices 1g.10gb, pod needs 2" in f["mig-full"] and "mig-full" not in unres, r)
        check("1 free MIG devices 1g.10gb, pod needs 2" in f["mig-awaited"] and "2 awaited" in f["mig-awaited"], r)
        check("MIG strategy single" in f["single"] and "single" in unres, r)
        check("publishes no GPUs" in f["cpu-only"], r)
        st, text = request(base + "/prioritize", args_for(p, ["mig-one", "mig-split"]))
        scores = {h["Host"]: h["Score"] for h in json.loads(text)}
        check(st == 200 and scores["mig-one"] > scores["mig-split"], "one parent first: %s" % scores)
        # nvidia.com/gpu: never a MIG GPU whole; the single node's MIG devices are its GPUs
        r = filter_(base, pod("gpu1", {"nvidia.com/gpu": "1"}), names)
        check(r["NodeNames"] == ["single"], "whole filter: %s" % r)
        check("mig-one" not in r["FailedAndUnresolvableNodes"], "mig-one frees a GPU by preemption only: %s" % r)
        r = filter_(base, pod("gpu3", {"nvidia.com/gpu": "3"}), ["single"])
        check("2 healthy MIG devices (nvidia.com/gpu), pod needs 3" in r["FailedNodes"]["single"], r)
        # a share: no MIG GPU is shared
        r = filter_(base, pod("share", {"gpuslice.io/gpu-memory": "4"}), names)
        check(r["NodeNames"] == [], "share filter: %s" % r)
        # the /ui API lists the pod waiting for MIG devices with what it asks
        st, text = request(base + "/api/v1/cluster")
        pend = {p["name"]: p for p in json.loads(text)["pending_pods"]}
        check(st == 200 and pend["want2"]["mig_devices"] == {"1g.10gb": 2} and pend["want2"]["what"] == "2 MIG 1g.10gb"
              and pend["gpu3"]["mig_devices"] == {}, "pending %s" % pend)
    finally:
        s.stop()


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(tmp, name):
    key, crt = os.path.join(tmp, name + ".key"), os.path.join(tmp, name + ".crt")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt, "-days", "2",
            "-subj", "/CN=" + name)
    return key, crt


def make_cert(tmp, name, ca_key, ca_crt, san=None):
    key, csr, crt = (os.path.join(tmp, name + ext) for ext in (".key", ".csr", ".crt"))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=" + name)
    ext = os.path.join(tmp, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % (san or "DNS:" + name))
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
            "-days", "2", "-extfile", ext)
    return key, crt


def test_tls(a, tmp):
    ca_key, ca_crt = make_ca(tmp, "ca")
    other_key, other_crt = make_ca(tmp, "other-ca")
    srv_key, srv_crt = make_cert(tmp, "server", ca_key, ca_crt, "IP:127.0.0.1")
    cli_key, cli_crt = make_cert(tmp, "kube-scheduler", ca_key, ca_crt)
    bad_key, bad_crt = make_cert(tmp, "intruder", other_key, other_crt)
    s = Scheduler(a.build, tmp, ["--tls-cert", srv_crt, "--tls-key", srv_key, "--tls-client-ca", ca_crt])
    url = "https://127.0.0.1:%d/filter" % s.port
    body = args_for(pod("p", {"nvidia.com/gpu": "1"}), ["one-16g"])
    try:
        ctx = ssl.create_default_context(cafile=ca_crt)
        ctx.load_cert_chain(cli_crt, cli_key)
        st, text = request(url, body, ctx)
        check(st == 200 and json.loads(text)["NodeNames"] == ["one-16g"], "%d %s" % (st, text))
        for label, chain in (("no client certificate", None), ("a foreign CA's certificate", (bad_crt, bad_key))):
            ctx = ssl.create_default_context(cafile=ca_crt)
            if chain:
                ctx.load_cert_chain(*chain)
            try:
                st, text = request(url, body, ctx)
            except (urllib.error.URLError, ssl.SSLError, ConnectionError) as e:
                st, text = -1, str(e)
            check(st != 200, "%s was served: %d %s" % (label, st, text))
            if st > 0:
                check(st == 403 and "client certificate" in text, "%s: %d %s" % (label, st, text))
        # plain HTTP to the TLS port is not served
        try:
            st, text = request("http://127.0.0.1:%d/healthz" % s.port)
        except (urllib.error.URLError, ConnectionError, http_client_errors()) as e:
            st, text = -1, str(e)
        check(st != 200, "plain HTTP served on the TLS port: %s" % text)
    finally:
        s.stop()


def http_client_errors():
    import http.client
    return http.client.HTTPException


def test_usage(a, tmp):
    exe = os.path.join(a.build, "gpuslice")

    def run(*args):
        return subprocess.run([exe, "scheduler", *args], capture_output=True, text=True, timeout=TIMEOUT_S)

    r = run("--policy", "fastest", "--snapshot", "x")
    check(r.returncode == 2 and "expected binpack, spread, frag" in r.stderr and "'fastest'" in r.stderr, r)
    r = run("--tls-cert", "x", "--snapshot", "x")
    check(r.returncode == 2 and "go together" in r.stderr, r)
    r = run("--memory-unit", "cpu=5", "--snapshot", "x")
    check(r.returncode == 2, r)
    r = run("--filter-answer", "some", "--snapshot", "x")
    check(r.returncode == 2 and "expected best or all" in r.stderr, r)
    if "--kubeconfig" in run("--help").stdout:
        # built with the Kubernetes client: no snapshot means the API, and here there is none
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
        env["HOME"] = tmp
        r = subprocess.run([exe, "scheduler", "--address", "127.0.0.1:0"], capture_output=True, text=True,
                           timeout=TIMEOUT_S, env=env)
        check(r.returncode == 1 and "cannot reach the API server" in r.stderr, r)
        r = run("--snapshot", "x", "--kubeconfig", "y")
        check(r.returncode == 2 and "exclude each other" in r.stderr, r)
        missing = os.path.join(tmp, "no-such-kubeconfig")
        r = run("--kubeconfig", missing, "--address", "127.0.0.1:0")
        check(r.returncode == 1 and "no-such-kubeconfig" in r.stderr, r)
    else:
        r = run()
        check(r.returncode == 2 and "--snapshot" in r.stderr, r)
    bad = os.path.join(tmp, "bad.json")
    with open(bad, "w") as f:
        f.write('{"nodes":[{"metadata":{"name":"n","annotations":{"gpuslice.io/gpus":"{\\"v\\":9}"}}}]}')
    r = run("--snapshot", bad, "--address", "127.0.0.1:0")
    check(r.returncode == 3 and "node n" in r.stderr, r)
    r = run("--snapshot", os.path.join(tmp, "missing.json"), "--address", "127.0.0.1:0")
    check(r.returncode == 1, r)
    r = run("--help")
    check(r.returncode == 0 and "--tls-client-ca" in r.stdout, r)


RESOURCES = {"nvidia.com/gpu", "gpuslice.io/gpu-core", "gpuslice.io/gpu-memory", "tencent.com/vcuda-core",
             "tencent.com/vcuda-memory", "aliyun.com/gpu-mem"} | {
    "nvidia.com/mig-" + p for p in ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb", "1g.10gb", "1g.20gb",
                                    "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.18gb", "1g.35gb", "2g.35gb",
                                    "3g.71gb", "4g.71gb", "7g.141gb")}


def test_deploy(a, tmp):
    """deploy/kubernetes/scheduler: rendered by `kubectl kustomize` where kubectl exists (else the files
    the kustomization lists, loaded as YAML); least-privilege RBAC and a complete extender entry."""
    import shutil
    import yaml
    d = os.path.join(a.source, "deploy/kubernetes/scheduler")
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", d], capture_output=True, text=True, timeout=TIMEOUT_S)
        check(out.returncode == 0, "kubectl kustomize: %s" % out.stderr)
        docs = [x for x in yaml.safe_load_all(out.stdout) if x]
    else:
        with open(os.path.join(d, "kustomization.yaml")) as f:
            k = yaml.safe_load(f)
        docs = []
        for r in k["resources"]:
            with open(os.path.join(d, r)) as f:
                docs += [x for x in yaml.safe_load_all(f) if x]
    by = {(x["kind"], x["metadata"]["name"]): x for x in docs}
    dep = by[("Deployment", "gpuslice-scheduler")]
    c = dep["spec"]["template"]["spec"]["containers"][0]
    check(c["command"][:2] == ["/usr/bin/gpuslice", "scheduler"] and "--address=:9445" in c["command"], c)
    check(dep["spec"]["template"]["spec"]["serviceAccountName"] == "gpuslice-scheduler", dep)
    check(dep["spec"]["replicas"] == 1, "one binder only")
    svc = by[("Service", "gpuslice-scheduler")]
    check(svc["spec"]["ports"][0]["port"] == 9445, svc)
    role = by[("ClusterRole", "gpuslice-scheduler")]
    rules = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    check(rules[("", "pods")] == {"get", "list", "watch", "patch"}, rules)
    check(rules[("", "pods/binding")] == {"create"}, rules)
    check(rules[("", "nodes")] == {"get", "list", "watch"}, rules)
    check(all("*" not in v and "delete" not in v and "update" not in v for v in rules.values()), rules)
    check(set(r for _, r in rules) == {"pods", "pods/binding", "nodes", "events"}, rules)
    cfg = yaml.safe_load(by[("ConfigMap", "gpuslice-kube-scheduler")]["data"]["config.yaml"])
    check(cfg["kind"] == "KubeSchedulerConfiguration", cfg)
    ext = cfg["extenders"][0]
    check(ext["urlPrefix"] == "http://gpuslice-scheduler.gpuslice-system.svc:9445", ext)
    check(ext["filterVerb"] == "filter" and ext["prioritizeVerb"] == "prioritize" and ext["bindVerb"] == "bind", ext)
    check(ext["preemptVerb"] == "preempt", ext)
    check(ext["nodeCacheCapable"] is True and ext["ignorable"] is False, ext)
    check({m["name"] for m in ext["managedResources"]} == RESOURCES, ext["managedResources"])
    check(cfg["profiles"][0]["schedulerName"] == "gpuslice-scheduler", cfg)


TESTS = {"verbs": test_verbs, "filter-best": test_filter_best, "tls": test_tls, "usage": test_usage, "deploy": test_deploy, "mig": test_mig}


if __name__ == "__main__":
    runner.main({name: (lambda fn: lambda f: fn(f.args, f.path))(fn) for name, fn in TESTS.items()},
                make_env=lambda a: runner.TempDir(a, "gpuslice-sched-"), label="scheduler-", timeout_s=105)
