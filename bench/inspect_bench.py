#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`gpuslice inspect` over a large cluster: 1,000 nodes x 8 GPUs (each with its gpuslice.io/gpus
annotation) and 20,000 pods (realistic full objects as kube-apiserver sends them, ~2 KiB each: labels,
annotations, managedFields, status; fractional, whole, gpushare-style and pending pods). A tiny HTTP
server answers the paged LISTs from pages rendered once up front, so the time measured is the
client's: requests, JSON decoding, slimming, the table. Reports wall time and peak RSS of the inspect
process (median of the runs).

    bench/inspect_bench.py --build DIR [--nodes N] [--pods P] [--runs R] [--markdown]
"""
import argparse
import http.server
import json
import os
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

LINKS = ";".join(",".join("NV2/PIX" if (i ^ j) < 4 else "SYS" for j in range(i + 1, 8)) for i in range(7))


def node(i):
    name = "gpu-node-%04d" % i
    ann = {"v": 1, "driver": "535.104.05", "cuda": 12020, "nvswitch": False,
           "gpus": [{"i": g, "uuid": "GPU-%08x-1111-2222-3333-%012d" % (i, g), "model": "NVIDIA A100-SXM4-80GB",
                     "mem": 81920, "cc": "8.0", "health": "ok"} for g in range(8)], "links": LINKS}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "resourceVersion": "1000", "uid": "u-%d" % i,
        "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                   "nvidia.com/gpu.count": "8", "topology.kubernetes.io/zone": "z1"},
        "annotations": {"gpuslice.io/gpus": json.dumps(ann, separators=(",", ":")),
                        "node.alpha.kubernetes.io/ttl": "0"},
        "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:status": {"f:conditions": {}}}}]},
        "spec": {"podCIDR": "10.244.%d.0/24" % (i % 256)},
        "status": {"capacity": {"cpu": "128", "memory": "1056Gi", "nvidia.com/gpu": "8", "pods": "110"},
                   "allocatable": {"cpu": "127", "memory": "1050Gi", "nvidia.com/gpu": "8", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "lastHeartbeatTime": "2026-11-23T10:00:00Z"}],
                   "nodeInfo": {"kubeletVersion": "v1.20.2", "containerRuntimeVersion": "containerd://1.6.20"},
                   "images": [{"names": ["registry.example.com/ml/trainer:2026.11"], "sizeBytes": 8123456789}]}}


def pod(i, n_nodes):
    kind = i % 10
    node_i = (i * 7) % n_nodes
    gpu = (i // n_nodes) % 8
    name = "job-%06d-worker" % i
    ann = {"kubectl.kubernetes.io/last-applied-configuration": '{"apiVersion":"v1","kind":"Pod","metadata":{}}'}
    if kind < 6:
        limits = {"gpuslice.io/gpu-core": "10", "gpuslice.io/gpu-memory": "16", "cpu": "4", "memory": "16Gi"}
        ann["gpuslice.io/assignment"] = json.dumps({"v": 1, "node": "n", "time": 1, "containers": [
            {"name": "main", "gpus": [gpu], "core": 10, "mem": 4096}]}, separators=(",", ":"))
        ann["gpuslice.io/assigned"] = "true"
    elif kind < 8:
        limits = {"nvidia.com/gpu": "1", "cpu": "8", "memory": "64Gi"}
        ann["tencent.com/predicate-gpu-idx-0"] = str(gpu)
    elif kind < 9:
        limits = {"aliyun.com/gpu-mem": "4", "cpu": "2"}
        ann["ALIYUN_COM_GPU_MEM_IDX"] = str(gpu)
    else:
        limits = {"gpuslice.io/gpu-core": "50", "gpuslice.io/gpu-memory": "64"}
    spec = {"containers": [{"name": "main", "image": "registry.example.com/ml/trainer:2026.11",
                            "command": ["python3", "-m", "train"], "resources": {"limits": limits},
                            "env": [{"name": "EPOCHS", "value": "100"}],
                            "ports": [{"name": "metrics", "containerPort": 9090}]}],
            "restartPolicy": "Never", "schedulerName": "default-scheduler", "serviceAccountName": "default"}
    if kind != 9:
        spec["nodeName"] = "gpu-node-%04d" % node_i
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "ml-team", "uid": "6a1f-%d" % i, "resourceVersion": "123456789",
        "creationTimestamp": "2026-11-23T10:00:00Z", "labels": {"app": "trainer", "job-name": name},
        "annotations": ann,
        "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:spec": {"f:containers": {}}}}]},
        "spec": spec,
        "status": {"phase": "Pending" if kind == 9 else "Running", "hostIP": "10.0.3.17", "podIP": "10.244.3.17",
                   "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-23T10:00:05Z"}],
                   "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0,
                                          "containerID": "containerd://" + "0123456789abcdef" * 4}]}}


def pages(items, limit):
    out = {}
    for start in range(0, max(len(items), 1), limit):
        meta = {"resourceVersion": "5000"}
        if start + limit < len(items):
            meta["continue"] = str(start + limit)
        out[start] = json.dumps({"kind": "List", "apiVersion": "v1", "metadata": meta,
                                 "items": items[start:start + limit]}).encode()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--serve", action="store_true", help="only serve (prints the kubeconfig path) until killed")
    a = ap.parse_args()
    limit = 500
    data = {"/api/v1/nodes": pages([node(i) for i in range(a.nodes)], limit),
            "/api/v1/pods": pages([pod(i, a.nodes) for i in range(a.pods)], limit)}
    total = sum(len(b) for p in data.values() for b in p.values())

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *x):
            pass

        def do_GET(self):
            u = urllib.parse.urlparse(self.path)
            q = urllib.parse.parse_qs(u.query)
            body = data.get(u.path, {}).get(int(q.get("continue", ["0"])[0]))
            if body is None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    srv = S(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="inspect-bench-")
    kc = os.path.join(tmp, "kubeconfig")
    with open(kc, "w") as f:
        json.dump({"kind": "Config", "current-context": "b", "contexts": [{"name": "b", "context": {"cluster": "b"}}],
                   "clusters": [{"name": "b", "cluster": {"server": "http://127.0.0.1:%d" % srv.server_address[1]}}]}, f)
    if a.serve:
        print(kc, flush=True)
        while True:
            time.sleep(3600)
    rows = []
    for mode in (["--json"], []):
        walls, rss = [], []
        for _ in range(a.runs):
            t0 = time.monotonic()
            p = subprocess.Popen([os.path.join(a.build, "gpuslice"), "inspect", "--kubeconfig", kc] + mode,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _, err = p.communicate()
            walls.append(time.monotonic() - t0)
            if p.returncode != 0:
                sys.exit("inspect failed: %s" % err.decode())
        # peak RSS of one more run, measured on its own
        r = subprocess.run(["/usr/bin/python3", "-c",
                            "import resource,subprocess,sys;subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL,"
                            "check=True);print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
                            os.path.join(a.build, "gpuslice"), "inspect", "--kubeconfig", kc] + mode,
                           capture_output=True, text=True, check=True)
        rss.append(int(r.stdout.strip()))
        rows.append((" ".join(mode) or "table", statistics.median(walls), max(rss) / 1024))
    srv.shutdown()
    if a.markdown:
        print("| inspect (%d nodes x 8 GPUs, %d pods, %.0f MiB of LIST JSON) | wall time (median of %d) | peak RSS |"
              % (a.nodes, a.pods, total / 2**20, a.runs))
        print("|---|---|---|")
        for m, w, r in rows:
            print("| `gpuslice inspect %s` | %.2f s | %.0f MiB |" % (m if m != "table" else "", w, r))
    else:
        for m, w, r in rows:
            print("inspect %s: wall %.2f s, peak RSS %.0f MiB (LIST JSON %.0f MiB)" % (m, w, r, total / 2**20))


if __name__ == "__main__":
    main()
