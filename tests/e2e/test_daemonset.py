# SPDX-License-Identifier: Apache-2.0
"""The agent deployed the way users deploy it: deploy/kubernetes (kustomize: gpuslice-node.yaml, rbac.yaml,
publish-patch.yaml) applied to a real
cluster, running the image Podman builds from deploy/Containerfile (binaries from the build tree;
scripts/e2e/agent-image.sh), imported into the node's containerd. The manifest is applied as it is
except for what a simulated node needs: the driver hostPath points at build/sim, the agent gets the
simulator's GPUSLICE_SIM_* variables, and the ConfigMap turns on the gpuslice sharing profile.

Then deploy/kubernetes/scheduler (kustomize: the extender's Deployment from the same image, its
ServiceAccount and RBAC, the second kube-scheduler `gpuslice-scheduler` with its own RBAC and lease):
applied as it is except for what this cluster lacks — no kube-proxy or cluster DNS, an API server on
127.0.0.1 — so both Deployments run on the host network with KUBERNETES_SERVICE_HOST/PORT pointing at
it, on free ports, and the extender's URL in the scheduler configuration is 127.0.0.1:PORT; the
kube-scheduler image is the cluster's own binary (cluster.image_tar). A GPU pod asking
`schedulerName: gpuslice-scheduler` is placed through the extender (bound, with its assignment), and
its operator page (docs/ui.md), opened in headless Chromium, shows the pod on its GPU.

Proves: the ServiceAccount/RBAC, the init container putting the interposer on the host, whole-GPU
pods getting their device nodes with the manifest's --dev-root=/host (fails on main: host paths under
/host/dev), fractional pods getting the interposer at its one path (fails on main: the image kept it
in /usr/lib/gpuslice, the agent looked in /usr/local/lib/gpuslice on the host), `kubectl exec
ds/gpuslice-node -- gpuslice status` as docs/install.md says.

    /usr/bin/python3 tests/e2e/test_daemonset.py [TEST ...]
"""

import json
import os
import re
import subprocess
import sys

import yaml

import cluster
import e2e
from e2e import check, pod, wait_pod

NODE = "ds-gpu"
NS = "gpuslice-system"
MANIFEST = os.path.join(e2e.REPO, "deploy", "kubernetes", "gpuslice-node.yaml")
SCHEDULER = os.path.join(e2e.REPO, "deploy", "kubernetes", "scheduler")
EXT_PORT = cluster.free_port()    # the extender, on the host network
KS_PORT = cluster.free_port()     # the second kube-scheduler's secure port


def adapt(docs, g):
    """The manifest's objects with the simulated node's three adjustments."""
    out = []
    for d in docs:
        if not d:
            continue
        if d["kind"] == "ConfigMap":
            d["data"]["node.conf"] = d["data"]["node.conf"].replace("profile = default", "profile = gpuslice")
            check("profile = gpuslice" in d["data"]["node.conf"], "ConfigMap has no 'profile = default' to change")
        if d["kind"] == "DaemonSet":
            spec = d["spec"]["template"]["spec"]
            for v in spec["volumes"]:
                if v["name"] == "driver":
                    v["hostPath"]["path"] = os.path.join(e2e.BUILD, "sim")
            spec["volumes"].append({"name": "sim-node", "hostPath": {"path": g.simdir}})
            agent = [c for c in spec["containers"] if c["name"] == "agent"][0]
            agent["volumeMounts"].append({"name": "sim-node", "mountPath": "/gpuslice-sim/node"})
            agent["env"] += [{"name": "GPUSLICE_SIM_NODE", "value": "/gpuslice-sim/node/node.topo"},
                             {"name": "GPUSLICE_SIM_STATE", "value": "/gpuslice-sim/node/state"}]
        out.append(d)
    return out


def adapt_scheduler(docs, c):
    """deploy/kubernetes/scheduler for a cluster without kube-proxy and DNS whose API server listens on
    127.0.0.1: both Deployments on the host network, on free ports, told where the API server is."""
    api = [{"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"},
           {"name": "KUBERNETES_SERVICE_PORT", "value": str(c.api_port)}]
    out = []
    for d in docs:
        if not d:
            continue
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpuslice-kube-scheduler":
            cfg = d["data"]["config.yaml"]
            check("http://gpuslice-scheduler.gpuslice-system.svc:9445" in cfg, "the extender URL changed")
            d["data"]["config.yaml"] = cfg.replace("http://gpuslice-scheduler.gpuslice-system.svc:9445",
                                                   "http://127.0.0.1:%d" % EXT_PORT)
        if d["kind"] == "Deployment":
            spec = d["spec"]["template"]["spec"]
            spec["hostNetwork"] = True
            ctr = spec["containers"][0]
            ctr["env"] = ctr.get("env", []) + api
            if d["metadata"]["name"] == "gpuslice-scheduler":
                check("--address=:9445" in ctr["command"], "the extender's address changed: %s" % ctr["command"])
                ctr["command"] = [a if a != "--address=:9445" else "--address=:%d" % EXT_PORT for a in ctr["command"]]
                ctr["ports"][0]["containerPort"] = EXT_PORT
            else:
                ctr["command"] += ["--secure-port=%d" % KS_PORT, "--port=0"]
                ctr["livenessProbe"]["httpGet"]["port"] = KS_PORT
        out.append(d)
    return out


def node_annotation():
    """The GPUs the node agent would publish (its DaemonSet here has no route to the API server)."""
    def link(a, b):
        return "PIX" if a // 2 == b // 2 else "PHB" if a // 4 == b // 4 else "SYS"
    return json.dumps({"v": 1, "gpus": [{"i": i, "uuid": "GPU-ds-%d" % i, "model": "Tesla P40", "mem": 24576,
                                         "health": "ok"} for i in range(8)],
                       "links": ";".join(",".join(link(a, b) for b in range(a + 1, 8)) for a in range(7))})


def setup():
    c = e2e.gpu_cluster([(NODE, "demo-8gpu-2socket.node", None)])
    g = c.gpu[NODE]
    tar = c.path("images", "gpuslice-agent.tar")
    r = subprocess.run([os.path.join(e2e.REPO, "scripts", "e2e", "agent-image.sh"), e2e.BUILD, tar],
                       capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise cluster.E2EError("agent image: %s" % r.stderr.strip()[-2000:])
    g.node.import_image(tar)
    g.node.import_image(e2e.cuda_image(c))
    rendered = c.kubectl("kustomize", os.path.dirname(MANIFEST))  # as docs/install.md: kubectl apply -k
    docs = adapt(list(yaml.safe_load_all(rendered)), g)
    c.apply(docs)
    return c


def ds_pod(c):
    items = c.api("GET", "/api/v1/namespaces/%s/pods?labelSelector=app.kubernetes.io%%2Fname%%3Dgpuslice-node" % NS)["items"]
    return items[0] if items else None


def test_daemonset_agent_serves(c):
    g = c.gpu[NODE]

    def running():
        p = ds_pod(c)
        if not p:
            return False
        for cs in p["status"].get("containerStatuses", []) + p["status"].get("initContainerStatuses", []):
            w = cs.get("state", {}).get("waiting", {})
            if w.get("reason") in ("CreateContainerError", "ErrImageNeverPull", "ErrImagePull", "CrashLoopBackOff",
                                   "RunContainerError", "CreateContainerConfigError"):
                raise e2e.Fail("DaemonSet pod: %s: %s" % (w.get("reason"), w.get("message")))
        return p["status"].get("phase") == "Running" and p
    p = c.wait("the DaemonSet's pod running", running, timeout=120)
    check(p["spec"]["serviceAccountName"] == "gpuslice-node", "pod runs as %s" % p["spec"].get("serviceAccountName"))
    c.wait("allocatable nvidia.com/gpu 8 from the DaemonSet's agent", lambda: g.allocatable() == 8, timeout=120)
    c.wait("allocatable gpuslice.io/gpu-core 800", lambda: g.allocatable("gpuslice.io/gpu-core") == 800, timeout=120)
    check(os.path.exists(g.node.host_path("/usr/local/lib/gpuslice/libgpuslice-cuda.so")),
          "the init container did not put the interposer on the host")


def test_rbac_applied(c):
    out = c.kubectl("auth", "can-i", "watch", "pods", "--as", "system:serviceaccount:%s:gpuslice-node" % NS,
                    check=False)
    check(out.stdout.strip() == "yes", "the agent's ServiceAccount cannot watch pods: %s %s" % (out.stdout, out.stderr))
    out = c.kubectl("auth", "can-i", "delete", "pods", "--as", "system:serviceaccount:%s:gpuslice-node" % NS,
                    check=False)
    check(out.stdout.strip() == "no", "the agent's ServiceAccount may delete pods")


def test_status_through_kubectl_exec(c):
    out = c.kubectl("-n", NS, "exec", "ds/gpuslice-node", "-c", "agent", "--", "gpuslice", "status")
    check(len(re.findall(r"GPU-[0-9a-f-]{36}", out)) >= 8, "gpuslice status in the pod lists no GPUs:\n%s" % out)


def test_whole_gpus_with_dev_root(c):
    c.apply(pod("ds-whole", NODE, 'echo "VISIBLE=$NVIDIA_VISIBLE_DEVICES"; ls /dev | grep "^nvidia[0-9]"; echo DONE; '
                "sleep 3600", limits={"nvidia.com/gpu": 2}))
    wait_pod(c, "ds-whole", timeout=120)
    out = c.wait("output", lambda: (lambda t: t if "DONE" in t else None)(e2e.logs(c, "ds-whole")), timeout=90)
    check(len(re.findall(r"^nvidia\d+$", out, re.M)) == 2, "the 2-GPU pod does not see 2 device nodes:\n%s" % out)
    e2e.delete(c, "pod", "ds-whole", wait=False)


def test_fraction_with_interposer_from_image(c):
    g = c.gpu[NODE]
    cmd = ('export CUDA_VISIBLE_DEVICES="$NVIDIA_VISIBLE_DEVICES"; echo "PRELOAD=$LD_PRELOAD"; '
           "cuda-workload init info alloc 1536M alloc! 1G; echo MEMRC=$?; echo DONE; sleep 3600")
    c.apply(pod("ds-frac", NODE, cmd, limits={"gpuslice.io/gpu-core": 20, "gpuslice.io/gpu-memory": 8},
                image=e2e.CUDA_IMAGE, sim=g))
    wait_pod(c, "ds-frac", timeout=120)
    out = c.wait("output", lambda: (lambda t: t if "DONE" in t else None)(e2e.logs(c, "ds-frac")), timeout=90)
    m = re.search(r"info (\d+) (\d+)", out)
    check(m and int(m.group(2)) == 2 << 30 and "MEMRC=0" in out,
          "the fractional pod is not held to its 2 GiB through the image's interposer:\n%s" % out)
    e2e.delete(c, "pod", "ds-frac", wait=False)


def test_scheduler_deployment_places_a_gpu_pod(c):
    g = c.gpu[NODE]
    tar = c.path("images", "kube-scheduler.tar")
    cluster.image_tar(tar, "k8s.gcr.io/kube-scheduler:v1.20.2",
                      files={"/usr/local/bin/kube-scheduler": os.path.join(c.bin, "kube-scheduler")})
    g.node.import_image(tar)
    c.kubectl("annotate", "node", NODE, "--overwrite", "gpuslice.io/gpus=" + node_annotation())
    rendered = c.kubectl("kustomize", SCHEDULER)  # as docs/scheduler.md: kubectl apply -k
    c.apply(adapt_scheduler(list(yaml.safe_load_all(rendered)), c))

    def ready(name):
        items = c.api("GET", "/api/v1/namespaces/%s/pods?labelSelector=app.kubernetes.io%%2Fname%%3D%s" % (NS, name))["items"]
        for p in items:
            for cs in p["status"].get("containerStatuses", []):
                w = cs.get("state", {}).get("waiting", {})
                if w.get("reason") in ("CreateContainerError", "ErrImageNeverPull", "ErrImagePull", "CrashLoopBackOff",
                                       "RunContainerError", "CreateContainerConfigError"):
                    raise e2e.Fail("%s: %s: %s" % (name, w.get("reason"), w.get("message")))
                if cs.get("ready"):
                    return True
        return False
    c.wait("the extender's pod ready", lambda: ready("gpuslice-scheduler"), timeout=120)
    c.wait("the second kube-scheduler's pod ready", lambda: ready("gpuslice-kube-scheduler"), timeout=120)
    c.apply(pod("through-extender", NODE, "echo READY; sleep 3600",
                limits={"gpuslice.io/gpu-core": 20, "gpuslice.io/gpu-memory": 8}, schedulerName="gpuslice-scheduler"))
    p = wait_pod(c, "through-extender", timeout=120)
    asg = json.loads(p["metadata"].get("annotations", {}).get("gpuslice.io/assignment", "null") or "null")
    check(p["spec"].get("nodeName") == NODE and asg and asg["node"] == NODE,
          "the pod was not placed through the extender: %s" % p["metadata"].get("annotations"))


def test_operator_page_shows_the_pod(c):
    sys.path.insert(0, os.path.join(e2e.REPO, "tests", "integration"))
    import browser
    p = e2e.get_pod(c, "through-extender")
    gpu = json.loads(p["metadata"]["annotations"]["gpuslice.io/assignment"])["containers"][0]["gpus"][0]
    base = "http://127.0.0.1:%d" % EXT_PORT
    with browser.Browser(width=1280, height=760) as b:
        b.open(base + "/ui")
        b.wait("document.body.dataset.rendered === '1'", what="the page's first render")
        cell = '[data-gpu="%s/%d"]' % (NODE, gpu)
        b.wait("(document.querySelector(%s) || {textContent: ''}).textContent.includes('default/through-extender')"
               % json.dumps(cell), what="the pod on GPU %d of %s" % (gpu, NODE))
        b.click(cell)
        b.wait("document.querySelector('[data-holders=\"%s/%d\"] [data-holder=\"default/through-extender\"]')"
               % (NODE, gpu), what="the pod in the GPU's holders")
        row = b.eval("document.querySelector('[data-holder=\"default/through-extender\"]').textContent")
        check("20 %" in row and "2 GiB" in row, "the holder's share: %s" % row)


TESTS = [test_daemonset_agent_serves, test_rbac_applied, test_status_through_kubectl_exec,
         test_whole_gpus_with_dev_root, test_fraction_with_interposer_from_image,
         test_scheduler_deployment_places_a_gpu_pod, test_operator_page_shows_the_pod]

if __name__ == "__main__":
    sys.exit(e2e.main(TESTS, setup))
