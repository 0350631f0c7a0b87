#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/kubernetes renders with `kubectl kustomize` (every kubectl found: the host's and the
Kubernetes 1.20 one that `make e2e` builds) and holds what docs/cluster.md promises: the agent's
ServiceAccount, a ClusterRole with exactly nodes get/list/watch/patch and pods get/list/watch/patch (no
wildcard, nothing else), its binding, and the DaemonSet running as that ServiceAccount with NODE_NAME
from the downward API.

Usage: test_deploy_kube.py SOURCE_DIR
"""
import glob
import os
import subprocess
import sys

import yaml


def kubectls():
    found = []
    for k in ["/usr/bin/kubectl", os.path.join(os.environ.get("GPUSLICE_E2E_K8S_BIN", "/nonexistent"), "kubectl")] + \
            sorted(glob.glob("/var/cache/gpuslice-e2e/k8s-v*/bin/kubectl")):
        if os.access(k, os.X_OK) and k not in found:
            found.append(k)
    return found


def check(docs, who):
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs if d}
    sa = by[("ServiceAccount", "gpuslice-node")]
    assert sa["metadata"]["namespace"] == "gpuslice-system", sa
    role = by[("ClusterRole", "gpuslice-node")]
    rules = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"]))) for r in role["rules"])
    assert rules == [(("",), ("nodes",), ("get", "list", "patch", "watch")),
                     (("",), ("pods",), ("get", "list", "patch", "watch"))], (who, rules)
    for r in role["rules"]:
        assert "*" not in r["verbs"] and "*" not in r["resources"] and "*" not in r["apiGroups"], r
        assert "resourceNames" not in r or r["resourceNames"], r
    b = by[("ClusterRoleBinding", "gpuslice-node")]
    assert b["roleRef"]["name"] == "gpuslice-node" and b["roleRef"]["kind"] == "ClusterRole", b
    assert b["subjects"] == [{"kind": "ServiceAccount", "name": "gpuslice-node", "namespace": "gpuslice-system"}], b
    ds = by[("DaemonSet", "gpuslice-node")]
    spec = ds["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "gpuslice-node", spec
    agent = [c for c in spec["containers"] if c["name"] == "agent"][0]
    env = {e["name"]: e for e in agent.get("env", [])}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName", env
    assert "LD_LIBRARY_PATH" in env, "the patch must add to the env, not replace it: %s" % env
    assert agent["command"][:2] == ["/usr/bin/gpuslice", "node"], agent["command"]


def main():
    src = sys.argv[1]
    ks = kubectls()
    if not ks:
        print("no kubectl found (/usr/bin/kubectl, or the 1.20 one of scripts/e2e/k8s-build.sh)")
        return 1
    for k in ks:
        r = subprocess.run([k, "kustomize", os.path.join(src, "deploy", "kubernetes")], capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            print("%s kustomize failed: %s" % (k, r.stderr))
            return 1
        check(list(yaml.safe_load_all(r.stdout)), k)
        print("ok: %s" % k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
