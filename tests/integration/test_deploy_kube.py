#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/kubernetes renders with `kubectl kustomize` (every kubectl found: the host's and the
Kubernetes 1.20 one that `make e2e` builds) and holds what docs/cluster.md promises: the agent's
ServiceAccount, a ClusterRole with exactly nodes get/list/watch/patch and pods get/list/watch/patch (no
wildcard, nothing else), its binding, and the DaemonSet running as that ServiceAccount with NODE_NAME
from the downward API. deploy/dra (the DRA mode, docs/dra.md) renders too: the same objects, plus the
DRA ClusterRole with exactly resourceslices get/list/watch/create/update/delete, resourceclaims get and
resourceclaims/status patch,
its binding, the DeviceClasses, and the DaemonSet's command = the base's + the `--dra` flags with
kubelet's plugin directories and the CDI directory mounted.

In both, what the agent writes into CDI specs is the host's (docs/runtime.md, "The two roots"): --dev-root and
--driver-root are mounts of host paths, and --host-dev-root / --host-driver-root name exactly those host paths;
--hook-path and --interposer are paths the host has at the same place as the agent (a hostPath volume mounted
at its own path) and the init container installs both there, the image's static gpuslice-cdi-hook as the hook.

Usage: test_deploy_kube.py --source SOURCE_DIR (tests/runner.py; ctest deploy-kube; make e2e runs it with the
1.20 kubectl too: tests/e2e/test_kube_api.py imports it). No kubectl: a skip (CI counts it as not passed).
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
    check_host_paths(spec, agent, who)
    return agent


def host_path_of(spec, agent, path):
    """The host path the agent's path `path` is, through its hostPath volume mounts (None: not a host path)."""
    vols = {v["name"]: v for v in spec["volumes"]}
    best = None
    for m in agent["volumeMounts"]:
        mp = m["mountPath"].rstrip("/") or "/"
        if (path == mp or path.startswith(mp.rstrip("/") + "/")) and "hostPath" in vols[m["name"]]:
            if best is None or len(mp) > len(best[0]):
                best = (mp, vols[m["name"]]["hostPath"]["path"])
    if best is None:
        return None
    rest = path[len(best[0]):].lstrip("/")
    return os.path.normpath(os.path.join(best[1], rest)) if rest else best[1]


def check_host_paths(spec, agent, who):
    flags = dict(a[2:].split("=", 1) for a in agent["command"] if a.startswith("--") and "=" in a)
    for f in ("dev-root", "host-dev-root", "driver-root", "host-driver-root", "hook-path", "interposer"):
        assert f in flags, (who, "no --%s" % f, agent["command"])
    # the dev root: the host's /dev where the agent looks for it, and --host-dev-root the host's view of that root
    dev = host_path_of(spec, agent, flags["dev-root"] + "/dev")
    assert dev == os.path.join(flags["host-dev-root"], "dev"), (who, "dev root", dev, flags)
    # the driver root: a mount of the host's driver root, read-only, and --host-driver-root says which
    drv = host_path_of(spec, agent, flags["driver-root"])
    assert drv == flags["host-driver-root"], (who, "driver root", drv, flags)
    m = [m for m in agent["volumeMounts"] if m["mountPath"] == flags["driver-root"]]
    assert m and m[0].get("readOnly"), (who, "the driver root is not a read-only mount", m)
    # the hook and the interposer: host paths the agent sees at the same place, installed by the init container
    init = [c for c in spec["initContainers"] if c["name"] == "install-interposer"][0]
    script = " ".join(init["command"])
    # what each step of the init container's shell command leaves where: its last word ("cp A B && mv -f B C")
    made = {c.split()[-1] for c in script.split("&&") if c.split()}
    for f in ("hook-path", "interposer"):
        p = flags[f]
        assert host_path_of(spec, agent, p) == p, (who, "--%s %s is not the same path on the host" % (f, p))
        vol = [v for v in spec["volumes"] if "hostPath" in v and v["hostPath"]["path"] == os.path.dirname(p)]
        assert vol, (who, "no hostPath volume holds --%s %s" % (f, p))
        mnt = [x["mountPath"] for x in init["volumeMounts"] if x["name"] == vol[0]["name"]]
        assert mnt and "%s/%s" % (mnt[0], os.path.basename(p)) in made, \
            (who, "the init container does not install %s: %s" % (p, script))
    assert "cp /usr/local/lib/gpuslice/gpuslice-cdi-hook " in script, \
        (who, "the hook installed is not the image's static gpuslice-cdi-hook", script)


def check_dra(docs, base_agent, who):
    agent = check(docs, who)
    by = {(d["kind"], d["metadata"]["name"]): d for d in docs if d}
    role = by[("ClusterRole", "gpuslice-node-dra")]
    rules = sorted((tuple(r["apiGroups"]), tuple(r["resources"]), tuple(sorted(r["verbs"]))) for r in role["rules"])
    assert rules == [(("resource.k8s.io",), ("resourceclaims",), ("get",)),
                     (("resource.k8s.io",), ("resourceclaims/status",), ("patch",)),
                     (("resource.k8s.io",), ("resourceslices",),
                      ("create", "delete", "get", "list", "update", "watch"))], (who, rules)
    b = by[("ClusterRoleBinding", "gpuslice-node-dra")]
    assert b["roleRef"]["name"] == "gpuslice-node-dra" and b["roleRef"]["kind"] == "ClusterRole", b
    assert b["subjects"] == [{"kind": "ServiceAccount", "name": "gpuslice-node", "namespace": "gpuslice-system"}], b
    classes = sorted(n for (k, n) in by if k == "DeviceClass")
    assert classes == ["gpu-shared.gpuslice.io", "gpu.gpuslice.io", "mig-shared.gpuslice.io", "mig.gpuslice.io"], \
        (who, classes)
    assert by[("DeviceClass", "gpu.gpuslice.io")]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    cmd = agent["command"]
    dra = [a for a in cmd if a.startswith("--dra")]
    assert [a for a in cmd if not a.startswith("--dra")] == base_agent["command"], \
        "the DRA patch's command drifted from the base's: %s vs %s" % (cmd, base_agent["command"])
    assert "--dra" in dra, cmd
    flags = dict(a.split("=", 1) for a in dra if "=" in a)
    mounts = {m["mountPath"] for m in agent["volumeMounts"]}
    for f in ("--dra-registry-dir", "--dra-plugin-dir", "--dra-cdi-dir"):
        assert flags.get(f) in mounts, (f, flags, mounts)
    assert flags["--dra-registry-dir"] == "/var/lib/kubelet/plugins_registry", flags
    assert flags["--dra-plugin-dir"] == "/var/lib/kubelet/plugins", flags


def render_and_check(k, src):
    """deploy/kubernetes and deploy/dra rendered by kubectl K and checked; an error string or None."""
    rendered = {}
    for d in ("kubernetes", "dra"):
        r = subprocess.run([k, "kustomize", os.path.join(src, "deploy", d)], capture_output=True,
                           text=True, timeout=120)
        if r.returncode != 0:
            return "%s kustomize deploy/%s failed: %s" % (k, d, r.stderr)
        rendered[d] = list(yaml.safe_load_all(r.stdout))
    base_agent = check(rendered["kubernetes"], k)
    check_dra(rendered["dra"], base_agent, k)
    return None


def test_deploy_manifests(a):
    ks = kubectls()
    if not ks:
        raise runner.Skip("no kubectl found (/usr/bin/kubectl, or the 1.20 one of scripts/e2e/k8s-build.sh)")
    for k in ks:
        err = render_and_check(k, a.source)
        if err:
            raise AssertionError(err)
        print("ok: %s" % k)


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import runner  # noqa: E402  (tests/runner.py)
    runner.main({"deploy-manifests": test_deploy_manifests}, timeout_s=120,
                arguments=[("--source", {"required": True})])
