# SPDX-License-Identifier: Apache-2.0
"""gpuslice's Kubernetes client against the real kube-apiserver 1.20 of cluster.py (TLS with generated
certificates, RBAC, etcd): three `gpuslice node` agents on simulated GPU nodes (different topologies)
publish their labels and annotation as the ServiceAccount of deploy/kubernetes (token file, CA data),
patching only gpuslice's keys; RBAC allows exactly what the ClusterRole says; `gpuslice inspect`
(admin client certificate files, KUBECONFIG, and in-cluster) shows every GPU with the right
allocation; an informer's watch gets 410 after an etcd compaction and relists; the API server is
restarted mid-watch and agents and informer carry on without a restart; a rotated service account
token is picked up from its file.

No kubelet is needed for any of this: the Node objects are created through the API (the agents
publish onto them), pods are bound by nodeName. The watch cache is off (--watch-cache=false) so
watches read etcd directly and an etcd compaction gives the real 410.

    /usr/bin/python3 tests/e2e/test_kube_api.py [TEST ...]
"""

import base64
import json
import os
import subprocess
import threading
import sys
import time
import urllib.request

import cluster
import e2e
from e2e import check

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
import test_deploy_kube  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = e2e.BUILD
TOPOS = {"gpu-a": "dgx1-v100-hybrid-cube-mesh.topo", "gpu-b": "dgx-a100-nvswitch.topo",
         "gpu-c": "pcie-8gpu-pix-phb-sys.topo"}
NS = "gpuslice-system"
SA = "gpuslice-node"


class Probe:
    """kube-informer-probe (the informer of src/kube) printing what it sees."""

    def __init__(self, kubeconfig, *args):
        self.lines = []
        self.p = subprocess.Popen([os.path.join(BUILD, "kube-informer-probe"), "--kubeconfig", kubeconfig] +
                                  list(args), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def stats(self):
        for line in reversed(self.lines):
            if line.startswith("STATS "):
                return {k: int(v) for k, v in (x.split("=", 1) for x in line.split(" ")[1:7])}
        return {}

    def has(self, prefix):
        return any(line.startswith(prefix) for line in self.lines)

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(30)
        except Exception:  # noqa: BLE001
            self.p.kill()


def sim_env(c, name):
    return {"LD_LIBRARY_PATH": os.path.join(BUILD, "sim"),
            "GPUSLICE_SIM_NODE": os.path.join(REPO, "tests", "data", "kube", TOPOS[name]),
            "GPUSLICE_SIM_STATE": c.path("sim-" + name + ".state")}


def sim(c, name, *argv):
    cluster.run([os.path.join(BUILD, "sim", "gpuslice-sim")] + list(argv), env=dict(os.environ, **sim_env(c, name)))


def sa_kubeconfig(c, token_path):
    """The agent's credentials: the ServiceAccount token file (re-read on rotation) and the CA inline."""
    with open(c.ca_file, "rb") as f:
        ca = base64.b64encode(f.read()).decode()
    path = c.path("agent.kubeconfig")
    with open(path, "w") as f:
        f.write("# written as YAML on purpose: the agent reads kubectl-style files\n")
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: agent\nclusters:\n- cluster:\n"
                "    certificate-authority-data: %s\n    server: %s\n  name: e2e\ncontexts:\n- context:\n"
                "    cluster: e2e\n    namespace: %s\n    user: agent\n  name: agent\nusers:\n- name: agent\n"
                "  user:\n    tokenFile: %s\n" % (ca, c.server, NS, token_path))
    return path


def annotation(c, name):
    a = c.api("GET", "/api/v1/nodes/" + name)["metadata"].get("annotations", {}).get("gpuslice.io/gpus")
    return json.loads(a) if a else None


def labels(c, name):
    return c.api("GET", "/api/v1/nodes/" + name)["metadata"].get("labels", {})


def put_pod(c, ns, name, node, limits, annotations=None):
    spec = {"containers": [{"name": "main", "image": cluster.BUSYBOX, "resources": {"limits": limits}}],
            "automountServiceAccountToken": False}  # no token controller runs here
    if node:
        spec["nodeName"] = node
    return c.api("POST", "/api/v1/namespaces/%s/pods" % ns, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations or {}}, "spec": spec})


def ensure_ns(c, ns):
    """A namespace with its default ServiceAccount (no controller-manager runs here to make it)."""
    if c.api("GET", "/api/v1/namespaces/" + ns, check=False).get("code") == 404:
        c.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        c.api("POST", "/api/v1/namespaces/%s/serviceaccounts" % ns,
              {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}})


def inspect(*argv, env=None, prefix=()):
    r = subprocess.run(list(prefix) + [os.path.join(BUILD, "gpuslice"), "inspect"] + list(argv),
                       capture_output=True, text=True, timeout=60, env=env)
    check(r.returncode == 0, "inspect %s: exit %d: %s" % (argv, r.returncode, r.stderr))
    return r.stdout


def setup():
    e2e.built("gpuslice", "kube-informer-probe", "kube-write-probe", "sim/gpuslice-sim")
    c = cluster.Cluster()
    argv = c._apiserver_argv
    c._apiserver_argv = lambda: argv() + ["--watch-cache=false"]
    c.start_control_plane()
    # the deploy/kubernetes manifests as shipped (kustomize of the 1.20 kubectl)
    rendered = subprocess.run([os.path.join(c.bin, "kubectl"), "kustomize", os.path.join(REPO, "deploy", "kubernetes")],
                              capture_output=True, text=True, check=True).stdout
    c.kubectl("apply", "-f", "-", input=rendered)
    token, c.token_path = c.service_account_token(NS, SA)
    c.agent_kubeconfig = sa_kubeconfig(c, c.token_path)
    c.agents = {}
    for name in TOPOS:
        c.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"kubernetes.io/hostname": name, "gpuslice.io/stale": "1",
                                     "nvidia.com/gpu.machine": "keep"}}})
    for name in TOPOS:
        sim(c, name, "reset")
        d = c.path("agent-" + name)
        os.makedirs(os.path.join(d, "plugins"))
        env = dict(os.environ, NODE_NAME=name, **sim_env(c, name))
        env.pop("KUBERNETES_SERVICE_HOST", None)
        c.agents[name] = c.spawn("agent-" + name, [
            os.path.join(BUILD, "gpuslice"), "node", "--plugin-dir", os.path.join(d, "plugins"),
            "--state-dir", os.path.join(d, "state"), "--pod-resources-socket", os.path.join(d, "podres.sock"),
            "--dev-root", d, "--metrics-address=", "--health-quiet-period", "2s", "--kubeconfig",
            c.agent_kubeconfig], env=env)
    for name in TOPOS:
        c.wait("%s published" % name, lambda n=name: annotation(c, n) and labels(c, n).get("nvidia.com/gpu.count"),
               timeout=90)
    return c


def test_publish(c):
    a, b, g = annotation(c, "gpu-a"), annotation(c, "gpu-b"), annotation(c, "gpu-c")
    check(a["v"] == 1 and len(a["gpus"]) == 8 and a["gpus"][0]["model"] == "Tesla V100-SXM2-16GB", a)
    check(a["links"].startswith("NV1"), a["links"])
    check(b["nvswitch"] is True and "A100" in b["gpus"][0]["model"], b)
    check("NV" not in g["links"], g["links"])
    for n in TOPOS:
        lab = labels(c, n)
        check(lab["nvidia.com/gpu.present"] == "true" and lab["nvidia.com/gpu.count"] == "8", lab)
        check(lab["kubernetes.io/hostname"] == n and lab["nvidia.com/gpu.machine"] == "keep", lab)
        check("gpuslice.io/stale" not in lab, lab)
        check(lab["nvidia.com/gpu.memory"] == str(annotation(c, n)["gpus"][0]["mem"]), lab)
        node = c.api("GET", "/api/v1/nodes/" + n)
        # server-side field ownership: the agent's manager owns only gpuslice's keys
        mine = [m for m in node["metadata"].get("managedFields", []) if m.get("manager", "").startswith("gpuslice")]
        check(mine, "no managedFields entry of gpuslice: %s" % node["metadata"].get("managedFields"))
        for m in mine:
            meta = m["fieldsV1"]["f:metadata"]
            check(set(meta) <= {"f:labels", "f:annotations"}, meta)
            for k in meta.get("f:labels", {}):
                if k == ".":
                    continue
                key = k[2:]
                check(key.startswith("gpuslice.io/") or key.startswith("nvidia.com/gpu.") or
                      key.startswith("nvidia.com/cuda.") or key == "nvidia-gpu-name", key)
            check(set(meta.get("f:annotations", {})) <= {".", "f:gpuslice.io/gpus"}, meta)
    # update on change only: the resourceVersion stays while nothing changes
    rv = {n: c.api("GET", "/api/v1/nodes/" + n)["metadata"]["resourceVersion"] for n in TOPOS}
    time.sleep(5)
    for n in TOPOS:
        check(c.api("GET", "/api/v1/nodes/" + n)["metadata"]["resourceVersion"] == rv[n], "%s changed with nothing new" % n)


def test_deploy_manifests(c):
    """deploy/kubernetes (and deploy/dra, the DRA mode) render with every kubectl here (the 1.20 one and
    /usr/bin/kubectl when present) and hold exactly the RBAC docs/cluster.md and docs/dra.md describe
    (setup applied deploy/kubernetes for real)."""
    ks = [os.path.join(c.bin, "kubectl")] + [k for k in test_deploy_kube.kubectls() if k != os.path.join(c.bin, "kubectl")]
    for k in ks:
        err = test_deploy_kube.render_and_check(k, REPO)
        check(err is None, err)
    role = c.api("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/gpuslice-node")
    check(len(role["rules"]) == 2, role["rules"])


def test_rbac(c):
    k = [os.path.join(c.bin, "kubectl"), "--kubeconfig", c.agent_kubeconfig, "auth", "can-i"]
    want = {("patch", "nodes"): "yes", ("watch", "nodes"): "yes", ("list", "pods"): "yes",
            ("delete", "nodes"): "no", ("patch", "pods"): "yes", ("get", "secrets"): "no", ("create", "pods"): "no",
            ("delete", "pods"): "no",
            ("update", "nodes"): "no"}
    for (verb, res), ans in want.items():
        r = subprocess.run(k + [verb, res], capture_output=True, text=True, timeout=30)
        check(r.stdout.strip() == ans, "can-i %s %s: %r, want %s" % (verb, res, r.stdout.strip(), ans))
    # the client carries the API's Status message on a refusal
    r = subprocess.run([os.path.join(BUILD, "gpuslice"), "inspect", "--kubeconfig", c.agent_kubeconfig],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "the agent's account can list nodes and pods: %s" % r.stderr)


def test_inspect(c):
    ensure_ns(c, "team")
    put_pod(c, "team", "frac1", "gpu-a", {"gpuslice.io/gpu-core": "30", "gpuslice.io/gpu-memory": "16"},
            {"gpuslice.io/assignment": json.dumps({"v": 1, "node": "gpu-a", "time": 1, "containers": [
                {"name": "main", "gpus": [1], "core": 30, "mem": 4096}]}), "gpuslice.io/assigned": "true"})
    put_pod(c, "team", "share", "gpu-a", {"aliyun.com/gpu-mem": "2"},
            {"ALIYUN_COM_GPU_MEM_IDX": "1", "ALIYUN_COM_GPU_MEM_POD": "2"})
    put_pod(c, "team", "train", "gpu-b", {"nvidia.com/gpu": "2"}, {"tencent.com/predicate-gpu-idx-0": "0,1"})
    put_pod(c, "team", "wait", None, {"gpuslice.io/gpu-core": "50", "gpuslice.io/gpu-memory": "8"})
    put_pod(c, "team", "cpu", "gpu-c", {"cpu": "1"})
    j = json.loads(inspect("--kubeconfig", c.kubeconfig, "--json", "--page-size", "2"))
    names = [n["name"] for n in j["nodes"]]
    check(names == ["gpu-a", "gpu-b", "gpu-c"], names)
    g1 = j["nodes"][0]["gpus"][1]
    check(g1["memory_allocated_mib"] == 6144 and g1["core_allocated_percent"] == 30, g1)
    check(sorted(p["name"] for p in g1["pods"]) == ["frac1", "share"], g1["pods"])
    check(g1["uuid"] == annotation(c, "gpu-a")["gpus"][1]["uuid"], g1)
    for i in (0, 1):
        gb = j["nodes"][1]["gpus"][i]
        check(gb["whole_holder"] == {"namespace": "team", "name": "train"}, gb)
        check(gb["memory_allocated_mib"] == gb["memory_total_mib"] == 40960, gb)
    check(j["pending_pods"] == [{"namespace": "team", "name": "wait", "memory_mib": 2048, "core_percent": 50,
                                 "whole_gpus": 0, "mig_devices": {}}], j["pending_pods"])
    # the same through KUBECONFIG, as a table
    t = inspect(env=dict(os.environ, KUBECONFIG=c.kubeconfig, HOME="/nonexistent"))
    check("6144/16384" in t and "30/100" in t and "team/train" in t and "team/wait" in t, t)
    check("Tesla V100-SXM2-16GB" in t and "NVIDIA A100-SXM4-40GB" in t and "NVIDIA L4" in t, t)


def write(c, *argv):
    r = subprocess.run([os.path.join(BUILD, "kube-write-probe"), c.kubeconfig] + list(argv), capture_output=True,
                       text=True, timeout=30)
    return r.returncode, r.stdout.strip()


def test_client_writes(c):
    """The writes the agent and the extender use, on the real API: annotate with a resourceVersion
    precondition (409 when stale), JSON patch with a test op (422 when it fails), POST a Binding carrying
    annotations (merged in the same update; 409 bound or being deleted, 404 gone), POST an Event."""
    ensure_ns(c, "wr")
    p = put_pod(c, "wr", "pend", None, {"gpuslice.io/gpu-core": "20"})
    rv, uid = p["metadata"]["resourceVersion"], p["metadata"]["uid"]
    assignment = json.dumps({"v": 1, "node": "gpu-c", "time": 1, "containers": [
        {"name": "main", "gpus": [4], "core": 20, "mem": 0}]})
    rc, out = write(c, "annotate", "wr", "pend", rv, "gpuslice.io/assignment=" + assignment, "gpuslice.io/assigned=false")
    check(rc == 0, out)
    rc, out = write(c, "annotate", "wr", "pend", rv, "gpuslice.io/assigned=true")
    check(rc == 1 and out.startswith("error ESTALE http=409 reason=Conflict"), out)
    path = "/api/v1/namespaces/wr/pods/pend"
    rc, out = write(c, "jsonpatch", path, '[{"op":"test","path":"/metadata/annotations/gpuslice.io~1assigned",'
                    '"value":"true"},{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]')
    check(rc == 1 and "http=422" in out, out)
    rc, out = write(c, "jsonpatch", path, '[{"op":"test","path":"/metadata/annotations/gpuslice.io~1assigned",'
                    '"value":"false"},{"op":"add","path":"/metadata/labels","value":{"x":"y"}}]')
    check(rc == 0, out)
    # the Binding carries annotations: merged into the pod's in the update that sets its node (1.20's
    # setPodHostAndAnnotations), the pod's own kept, a shared key taking the Binding's value
    rc, out = write(c, "bind", "wr", "pend", uid, "gpu-c", "gpuslice.io/assigned=bound", "gpuslice.io/by-binding=yes")
    check(rc == 0, out)
    got = c.api("GET", path)
    check(got["spec"]["nodeName"] == "gpu-c" and got["metadata"]["labels"] == {"x": "y"}, got["spec"])
    ann = got["metadata"]["annotations"]
    check(ann.get("gpuslice.io/assignment") == assignment and ann.get("gpuslice.io/assigned") == "bound" and
          ann.get("gpuslice.io/by-binding") == "yes", ann)
    rc, out = write(c, "bind", "wr", "pend", uid, "gpu-a", "gpuslice.io/by-binding=again")
    check(rc == 1 and "http=409" in out, "a second bind must be refused: " + out)
    check(c.api("GET", path)["metadata"]["annotations"]["gpuslice.io/by-binding"] == "yes",
          "a refused Binding wrote its annotations")
    # a pod being deleted is refused (409), a pod gone is 404, and 1.20 takes no uid precondition from
    # the Binding (1.23+ does: kubernetes#105913; docs/scheduler.md)
    dying = put_pod(c, "wr", "dying", None, {"gpuslice.io/gpu-core": "20"})
    dpath = "/api/v1/namespaces/wr/pods/dying"
    rc, out = write(c, "jsonpatch", dpath, '[{"op":"add","path":"/metadata/finalizers","value":["gpuslice.io/e2e"]}]')
    check(rc == 0, out)
    c.api("DELETE", dpath)
    rc, out = write(c, "bind", "wr", "dying", dying["metadata"]["uid"], "gpu-c", "gpuslice.io/x=1")
    check(rc == 1 and "http=409" in out and "being deleted" in out, "binding a pod being deleted: " + out)
    rc, out = write(c, "jsonpatch", dpath, '[{"op":"remove","path":"/metadata/finalizers"}]')
    check(rc == 0, out)
    rc, out = write(c, "bind", "wr", "never-was", "-", "gpu-c")
    check(rc == 1 and "http=404" in out, "binding a pod that does not exist: " + out)
    put_pod(c, "wr", "reborn", None, {"gpuslice.io/gpu-core": "20"})
    rc, out = write(c, "bind", "wr", "reborn", "00000000-0000-0000-0000-000000000000", "gpu-c")
    check(rc == 0, "kube-apiserver 1.20 checked the Binding's uid (update docs/scheduler.md, Bind): " + out)
    rc, out = write(c, "event", "wr", "Pod", "pend", uid, "Normal", "GPUAssigned", "GPU 4 of gpu-c")
    check(rc == 0, out)
    evs = c.api("GET", "/api/v1/namespaces/wr/events")["items"]
    check(any(e["reason"] == "GPUAssigned" and e["involvedObject"]["name"] == "pend" and
              e["source"]["component"] == "gpuslice-test" for e in evs), evs)
    # inspect now sees the pod on GPU 4 of gpu-c, unconfirmed
    j = json.loads(inspect("--kubeconfig", c.kubeconfig, "--json", "--node", "gpu-c"))
    g4 = j["nodes"][0]["gpus"][4]
    check([(q["name"], q["core_percent"], q["confirmed"]) for q in g4["pods"]] == [("pend", 20, False)], g4)


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def kubeconfig_yaml(c, name, cluster_fields, user_fields):
    """A kubectl-style YAML kubeconfig with the given cluster and user fields."""
    path = c.path(name + ".kubeconfig")
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: t\n  cluster:\n"
                "    server: %s\n" % c.server)
        for k, v in cluster_fields.items():
            f.write("    %s: %s\n" % (k, v))
        f.write("contexts:\n- name: t\n  context:\n    cluster: t\n    user: u\nusers:\n- name: u\n  user:\n")
        for k, v in user_fields.items():
            f.write("    %s: %s\n" % (k, v))
        if not user_fields:
            f.write("    {}\n")
    return path


def test_tls_variants(c):
    """Every TLS/credential form of a kubeconfig against the real server's TLS: inline CA and client
    certificate/key (the -data fields), insecure-skip-tls-verify with a token, and refusals: a wrong
    CA (the server's certificate does not verify) and no credentials (403 from RBAC for anonymous)."""
    crt, key = c.admin_cert
    ok = kubeconfig_yaml(c, "inline", {"certificate-authority-data": b64(c.ca_file)},
                         {"client-certificate-data": b64(crt), "client-key-data": b64(key)})
    j = json.loads(inspect("--kubeconfig", ok, "--json"))
    check(len(j["nodes"]) == 3, j)
    ins = kubeconfig_yaml(c, "insecure", {"insecure-skip-tls-verify": "true"}, {"tokenFile": c.token_path})
    check(len(json.loads(inspect("--kubeconfig", ins, "--json"))["nodes"]) == 3, "insecure + token")
    wrong = kubeconfig_yaml(c, "wrongca", {"certificate-authority-data": b64(crt)},  # a client cert, not the CA
                            {"client-certificate-data": b64(crt), "client-key-data": b64(key)})
    r = subprocess.run([os.path.join(BUILD, "gpuslice"), "inspect", "--kubeconfig", wrong], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 1 and "certificate" in r.stderr.lower(), "wrong CA: %d %s" % (r.returncode, r.stderr))
    anon = kubeconfig_yaml(c, "anon", {"certificate-authority-data": b64(c.ca_file)}, {})
    r = subprocess.run([os.path.join(BUILD, "gpuslice"), "inspect", "--kubeconfig", anon], capture_output=True,
                       text=True, timeout=60)
    check(r.returncode == 1 and "Permission denied" in r.stderr and "system:anonymous" in r.stderr,
          "anonymous: %d %s" % (r.returncode, r.stderr))


def test_in_cluster(c):
    """inspect inside a pod-like mount namespace: token, CA and namespace where a pod has them,
    KUBERNETES_SERVICE_HOST/PORT, no kubeconfig anywhere."""
    src = c.path("sa-files")
    os.makedirs(src, exist_ok=True)
    for f, data in (("token", open(c.token_path).read()), ("ca.crt", open(c.ca_file).read()), ("namespace", NS)):
        with open(os.path.join(src, f), "w") as fh:
            fh.write(data)
    host, port = c.server[len("https://"):].rsplit(":", 1)
    script = ("mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount && "
              "cp %s/* /run/secrets/kubernetes.io/serviceaccount/ && exec \"$@\"" % src)
    env = {"PATH": os.environ["PATH"], "KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port,
           "HOME": "/nonexistent"}
    out = inspect("--json", env=env, prefix=("unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"))
    check([n["name"] for n in json.loads(out)["nodes"]] == ["gpu-a", "gpu-b", "gpu-c"], out[:500])


def etcd(c, path, body):
    req = urllib.request.Request(c.etcd_url + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_watch_410_after_compaction(c):
    ensure_ns(c, "w410")
    ensure_ns(c, "w410-other")
    pr = Probe(c.kubeconfig, "--path", "/api/v1/namespaces/w410/pods", "--watch-timeout", "3", "--backoff-ms", "200")
    try:
        c.wait("probe synced", lambda: pr.has("SYNC"), timeout=30)
        put_pod(c, "w410", "p1", "gpu-a", {"nvidia.com/gpu": "1"})
        c.wait("ADD p1", lambda: pr.has("ADD w410/p1"), timeout=30)
        for i in range(5):  # the revision moves on elsewhere
            c.api("POST", "/api/v1/namespaces/w410-other/configmaps", {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d" % i}, "data": {"x": "y"}})
        rev = int(etcd(c, "/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
        etcd(c, "/v3/kv/compaction", {"revision": rev, "physical": True})
        # the probe's next watch (its server-side timeout is 3 s) starts from p1's version: 410, relist
        c.wait("a relist after 410", lambda: pr.stats().get("relists410", 0) >= 1, timeout=60)
        put_pod(c, "w410", "p2", "gpu-a", {"nvidia.com/gpu": "1"})
        c.wait("ADD p2", lambda: pr.has("ADD w410/p2"), timeout=30)
        check(sum(1 for line in pr.lines if line.startswith("ADD w410/p1")) == 1, "p1 announced twice: %s" % pr.lines)
    finally:
        pr.close()


def test_apiserver_restart_mid_watch(c):
    ensure_ns(c, "rs")
    pr = Probe(c.kubeconfig, "--path", "/api/v1/namespaces/rs/pods", "--backoff-ms", "200")
    try:
        c.wait("probe synced", lambda: pr.has("SYNC"), timeout=30)
        put_pod(c, "rs", "before", "gpu-a", {"nvidia.com/gpu": "1"})
        c.wait("ADD before", lambda: pr.has("ADD rs/before"), timeout=30)
        c.restart_apiserver()
        put_pod(c, "rs", "after", "gpu-a", {"nvidia.com/gpu": "1"})
        c.wait("ADD after", lambda: pr.has("ADD rs/after"), timeout=90)
        # the agents carry on: a GPU lost now shows in gpu-a's annotation
        sim(c, "gpu-a", "lose", "5")
        c.wait("GPU 5 unhealthy published", lambda: annotation(c, "gpu-a")["gpus"][5]["health"] != "ok", timeout=90)
        check(labels(c, "gpu-a")["gpuslice.io/gpu.healthy"] == "7", labels(c, "gpu-a"))
        sim(c, "gpu-a", "restore", "5")
        c.wait("GPU 5 healthy again", lambda: annotation(c, "gpu-a")["gpus"][5]["health"] == "ok", timeout=90)
        for name, p in c.agents.items():
            check(p.alive(), "agent %s died: %s" % (name, p.tail()))
    finally:
        pr.close()


def test_token_rotation(c):
    """The token file changes under the agent (as kubelet rotates a projected token): first to a token
    the API refuses (401), then to a fresh one; the agent follows the file both times."""
    good = open(c.token_path).read()
    with open(c.token_path, "w") as f:
        f.write(good[:-12] + "AAAAAAAAAAAA")  # a bad signature
    time.sleep(11)  # the agent stats the file at most every 10 s
    sim(c, "gpu-c", "lose", "2")
    time.sleep(6)
    check(annotation(c, "gpu-c")["gpus"][2]["health"] == "ok", "published with a refused token?")
    log = open(c.agents["gpu-c"].log).read()
    check("HTTP 401" in log and "Unauthorized" in log, c.agents["gpu-c"].tail(20))
    c.service_account_token(NS, SA)  # a fresh token in the same file
    c.wait("GPU 2 unhealthy published with the new token",
           lambda: annotation(c, "gpu-c")["gpus"][2]["health"] != "ok", timeout=90)
    sim(c, "gpu-c", "restore", "2")
    c.wait("GPU 2 healthy again", lambda: annotation(c, "gpu-c")["gpus"][2]["health"] == "ok", timeout=90)


if __name__ == "__main__":
    raise SystemExit(e2e.main([test_publish, test_deploy_manifests, test_rbac, test_inspect, test_client_writes, test_tls_variants, test_in_cluster, test_watch_410_after_compaction,
                               test_apiserver_restart_mid_watch, test_token_rotation], setup))
