# SPDX-License-Identifier: Apache-2.0
"""A real Kubernetes 1.20 cluster on loopback for gpuslice's end-to-end tests (`make e2e`).

Everything is a real component: etcd (Debian's etcd-server), kube-apiserver, kube-controller-manager,
kube-scheduler and kubelet (built from Debian's `kubernetes` source by scripts/e2e/k8s-build.sh),
containerd + runc (Debian's), CNI bridge/host-local (Debian's containernetworking-plugins). Nothing
is downloaded at run time: images are made here from busybox-static (or anything else on the host)
and imported into containerd. Run with /usr/bin/python3 (Debian's python3-kubernetes is the client).

API
---
    import cluster
    c = cluster.Cluster(workdir=None, bin_dir=None, log=None)
        workdir: an empty or missing directory for everything (default: a new /tmp/gpuslice-e2e-*).
        bin_dir: the Kubernetes binaries (default: $GPUSLICE_E2E_K8S_BIN, else what
                 `scripts/e2e/k8s-build.sh --print` names; it fails with a clear error if not built).
        log: a function taking one string (default: print to stderr with a timestamp).
    c.start_control_plane()     PKI (openssl) + etcd + kube-apiserver on free loopback ports; waits for
                                /readyz. Writes c.kubeconfig (admin, system:masters) and c.ca_file.
    c.restart_apiserver()       stops kube-apiserver (SIGTERM) and starts it again on the same port.
    c.start_controller_manager()
    c.start_scheduler(extenders=None, qps=None)   extenders: a list of dicts in kubescheduler.config.k8s.io/v1beta1
                                form ({"urlPrefix": ..., "filterVerb": ..., ...}) put in the config file;
                                qps: the client's QPS and burst (default: kube-scheduler's own, 50/100).
    c.start()                   all of the above (control plane, controller-manager, scheduler).
    c.service_account_token(namespace, name, audience=None) -> (token, path)
                                creates the namespace and ServiceAccount if needed, asks the TokenRequest API
                                for a token valid 24 h, writes it to workdir/tokens/NS-NAME.token.
    c.kubectl(*args, input=None, check=True, timeout=60) -> str   (stdout; raises E2EError on failure)
    c.api(method, path, body=None, check=True) -> dict   raw REST with the admin certificate
    c.client() -> kubernetes.client.ApiClient             python3-kubernetes client, admin kubeconfig
    c.wait(what, predicate, timeout=60, interval=0.5)      poll predicate() until truthy; E2EError naming
                                                           `what` (and the last value) on timeout
    node = c.add_node(name, gpus=None, labels=None, images=None, env=None)
                                one kubelet node: its own mount namespace (private /var/lib/kubelet,
                                /var/lib/gpuslice, /var/log/pods and a tmpfs /dev holding /dev/nvidia* char
                                nodes for a simulated GPU node), its own containerd, root dir, ports and CNI
                                bridge. gpus: the number of /dev/nvidiaN nodes to create (None: no GPUs).
                                images: extra docker-archive tars to import (busybox and pause always are).
                                Waits until the Node is Ready.
    c.stop()                    stops everything (containers, kubelets, containerd, control plane) and
                                removes the workdir (kept when $GPUSLICE_E2E_KEEP_DIR=1). Also runs at exit,
                                on SIGTERM/SIGINT/SIGHUP, and children die with us (PR_SET_PDEATHSIG).
    with cluster.Cluster() as c: ...     the same, stop() at the end of the block

    Node (c.nodes[name]):
    node.run(argv, env=None, check=True, timeout=60) -> CompletedProcess   run a command in the node's
                                mount namespace (what its kubelet and containerd see)
    node.spawn(name, argv, env=None, prefix=()) -> Proc   a long-running process (prefix + argv) in the
                                node's namespace, stopped with the node; Proc: .pid, .log (path), .stop(sig=SIGTERM), .kill(), .alive()
    node.ctr(*args) -> str      `ctr -n k8s.io` against the node's containerd
    node.import_image(tar, tag=None)   import a docker-archive tar (and tag it)
    node.start_kubelet() / node.stop_kubelet(sig=SIGTERM) / node.restart_kubelet()
    node.plugin_dir             /var/lib/kubelet/device-plugins (inside the node's namespace: hard-coded by
                                kubelet 1.20); node.host_path(p) maps a path of the namespace that lives in a
                                private bind mount to where it is on the host (e.g. the plugin dir).
    node.stop()

    Images:
    cluster.BUSYBOX = "gpuslice.local/busybox:1", cluster.PAUSE = "gpuslice.local/pause:1"
    cluster.image_tar(path, tag, files, cmd=None, entrypoint=None, env=None)
                                writes a docker-archive with busybox-static (/bin/* applets) plus `files`
                                ({path in image: host file}); ELF files bring the shared libraries ldd names.

Command line:  /usr/bin/python3 tests/e2e/cluster.py up [--nodes N]   start a cluster and keep it up
               (prints the kubeconfig; Ctrl-C stops it);   cluster.py reap WORKDIR   kill what a killed
               run left behind in WORKDIR (containers, shims, bridges) and remove it.
"""

import atexit
import base64
import ctypes
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
K8S_VERSION = "1.20.2"
BUSYBOX = "gpuslice.local/busybox:1"
PAUSE = "gpuslice.local/pause:1"
NVIDIA_MAJOR = 195


class E2EError(Exception):
    pass


class ProcessDied(E2EError):
    """A component exited: waiting for it is pointless (c.wait re-raises at once)."""


def _default_log(msg):
    sys.stderr.write("%s %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def k8s_bin_dir():
    d = os.environ.get("GPUSLICE_E2E_K8S_BIN")
    if d:
        return d
    r = subprocess.run([os.path.join(REPO, "scripts", "e2e", "k8s-build.sh"), "--print"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise E2EError("Kubernetes %s binaries are not built: run scripts/e2e/k8s-build.sh (make e2e does)" % K8S_VERSION)
    return r.stdout.strip()


# ---- processes ---------------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _child_setup():
    # Our own process group (killed as a whole) and death with the test process, even on SIGKILL.
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Proc:
    """A started process in its own process group, logging to a file."""

    def __init__(self, name, argv, log, env=None, cwd=None):
        self.name, self.argv, self.log = name, argv, log
        self.fh = open(log, "ab")
        self.fh.write(("\n==== %s %s\n" % (time.strftime("%H:%M:%S"), " ".join(argv))).encode())
        self.fh.flush()
        self.p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.fh, stderr=subprocess.STDOUT,
                                  env=env, cwd=cwd, start_new_session=True, preexec_fn=_child_setup)
        self.pid = self.p.pid

    def alive(self):
        return self.p.poll() is None

    def send(self, sig):
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Signal the process group; SIGKILL it after timeout. Returns the exit status."""
        if self.alive():
            self.send(sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.send(signal.SIGKILL)
                self.p.wait(10)
        self.send(signal.SIGKILL)  # whatever else is left in the group
        self.fh.close()
        return self.p.returncode

    def kill(self):
        return self.stop(signal.SIGKILL)

    def tail(self, n=30):
        try:
            with open(self.log, "rb") as f:
                return b"\n".join(f.read().splitlines()[-n:]).decode(errors="replace")
        except OSError:
            return ""


_given_ports = set()


def free_port():
    for _ in range(100):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _given_ports:
            _given_ports.add(port)
            return port
    raise E2EError("no free port")


def host_ip():
    """The address of the default route's interface (kubelet refuses 127.0.0.1 as node IP)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("192.0.2.254", 9))
        ip = s.getsockname()[0]
    except OSError:
        ip = ""
    finally:
        s.close()
    if not ip or ip.startswith("127."):
        raise E2EError("no non-loopback IPv4 address: kubelet needs one as its node IP")
    return ip


def run(argv, check=True, timeout=120, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise E2EError("%s failed (exit %d): %s" % (" ".join(argv), r.returncode, (r.stderr or r.stdout).strip()[-2000:]))
    return r


# ---- cleanup at exit and on signals -------------------------------------------------------------

_live = []
_handlers_installed = False


def _stop_all():
    for c in list(_live):
        try:
            c.stop()
        except Exception as e:  # noqa: BLE001 - cleanup must go on
            _default_log("cleanup: %s" % e)


def _on_signal(sig, _frame):
    _stop_all()
    os._exit(128 + sig)


def _install_handlers():
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_stop_all)
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, _on_signal)


# ---- PKI ---------------------------------------------------------------------------------------

class PKI:
    """A CA and the certificates of a cluster, made with openssl."""

    def __init__(self, d):
        self.d = d
        os.makedirs(d, exist_ok=True)
        self.ca_crt, self.ca_key = self.p("ca.crt"), self.p("ca.key")
        run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", self.ca_key, "-out", self.ca_crt,
             "-days", "3", "-subj", "/CN=gpuslice-e2e-ca"])
        self.sa_key, self.sa_pub = self.p("sa.key"), self.p("sa.pub")
        run(["openssl", "genrsa", "-out", self.sa_key, "2048"])
        run(["openssl", "rsa", "-in", self.sa_key, "-pubout", "-out", self.sa_pub])

    def p(self, name):
        return os.path.join(self.d, name)

    def cert(self, name, cn, orgs=(), sans=(), server=False):
        key, csr, crt, ext = self.p(name + ".key"), self.p(name + ".csr"), self.p(name + ".crt"), self.p(name + ".ext")
        subj = "/CN=" + cn + "".join("/O=" + o for o in orgs)
        run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", subj])
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n")
            f.write("extendedKeyUsage=%s\n" % ("serverAuth,clientAuth" if server else "clientAuth"))
            if sans:
                f.write("subjectAltName=%s\n" % ",".join(("IP:" if s[0].isdigit() else "DNS:") + s for s in sans))
        run(["openssl", "x509", "-req", "-in", csr, "-CA", self.ca_crt, "-CAkey", self.ca_key, "-set_serial",
             str(int.from_bytes(os.urandom(8), "big")), "-days", "3", "-sha256", "-extfile", ext, "-out", crt])
        return crt, key


def write_kubeconfig(path, server, ca, crt=None, key=None, token=None, user="user"):
    u = {"client-certificate": crt, "client-key": key} if crt else {"token": token}
    cfg = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": ca}}],
        "users": [{"name": user, "user": u}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
        "current-context": "e2e",
    }
    with open(path, "w") as f:
        json.dump(cfg, f, indent=1)  # JSON is YAML
    return path


# ---- images ------------------------------------------------------------------------------------

def _ldd(path):
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    libs = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if "=>" in parts:
            i = parts.index("=>")
            if i + 1 < len(parts) and parts[i + 1].startswith("/"):
                libs.append(parts[i + 1])
        elif parts and parts[0].startswith("/"):
            libs.append(parts[0])  # the dynamic loader
    return libs


def _is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def image_tar(path, tag, files=None, cmd=None, entrypoint=None, env=None):
    """Write a docker-archive image: busybox-static with every applet in /bin, plus files
    ({path in image: host path}); ELF files bring the shared libraries ldd names, at their host paths."""
    bb = shutil.which("busybox") or "/bin/busybox"
    applets = run([bb, "--list"]).stdout.split()
    layer = io.BytesIO()
    added = set()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.GNU_FORMAT) as t:
        def add_dir(d):
            parts = d.strip("/").split("/")
            for i in range(1, len(parts) + 1):
                p = "/".join(parts[:i])
                if p and p not in added:
                    ti = tarfile.TarInfo(p)
                    ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 0
                    t.addfile(ti)
                    added.add(p)

        def add_file(dst, src):
            dst = dst.strip("/")
            if dst in added:
                return
            add_dir(os.path.dirname(dst))
            real = os.path.realpath(src)
            ti = t.gettarinfo(real, arcname=dst)
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            ti.mtime = 0
            with open(real, "rb") as f:
                t.addfile(ti, f)
            added.add(dst)

        for d in ("tmp", "etc", "proc", "sys", "dev", "run", "var", "root", "usr/bin"):
            add_dir(d)
        add_file("bin/busybox", bb)
        for a in applets:
            if "bin/" + a not in added:
                ti = tarfile.TarInfo("bin/" + a)
                ti.type, ti.linkname, ti.mode, ti.mtime = tarfile.SYMTYPE, "busybox", 0o777, 0
                t.addfile(ti)
                added.add("bin/" + a)
        extra = dict(files or {})
        for dst, src in list(extra.items()):
            if _is_elf(src):
                for lib in _ldd(src):
                    extra.setdefault(lib, lib)
                    # the loader is looked up by its PT_INTERP path, often a symlink (/lib64 -> usr/lib64)
        for dst, src in sorted(extra.items()):
            add_file(dst, src)
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
            if name not in added:
                data = text.encode()
                ti = tarfile.TarInfo(name)
                ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
                t.addfile(ti, io.BytesIO(data))
    layer_bytes = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer_bytes).hexdigest()
    config = {
        "architecture": "amd64", "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + list(env or []),
                   "Cmd": cmd or (["sh"] if not entrypoint else None), "Entrypoint": entrypoint, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "gpuslice e2e cluster.image_tar"}],
    }
    cfg_bytes = json.dumps(config).encode()
    cfg_name = hashlib.sha256(cfg_bytes).hexdigest() + ".json"
    layer_name = diff_id[7:] + "/layer.tar"
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [tag], "Layers": [layer_name]}]).encode()
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w") as out:
        for name, data in ((cfg_name, cfg_bytes), (layer_name, layer_bytes), ("manifest.json", manifest)):
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            out.addfile(ti, io.BytesIO(data))
    os.replace(tmp, path)
    return path


# ---- the cluster -------------------------------------------------------------------------------

class Cluster:
    def __init__(self, workdir=None, bin_dir=None, log=None):
        self.log = log or _default_log
        self.bin = bin_dir or k8s_bin_dir()
        for b in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kubectl"):
            if not os.access(os.path.join(self.bin, b), os.X_OK):
                raise E2EError("%s/%s missing: run scripts/e2e/k8s-build.sh" % (self.bin, b))
        for tool in ("etcd", "containerd", "ctr", "runc", "openssl", "unshare", "nsenter"):
            if not shutil.which(tool):
                raise E2EError("%s not found (apt-get install etcd-server containerd runc openssl util-linux)" % tool)
        if workdir:
            os.makedirs(workdir, exist_ok=True)
            self.dir = os.path.abspath(workdir)
        else:
            self.dir = tempfile.mkdtemp(prefix="gpuslice-e2e-")
        self.logs = os.path.join(self.dir, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.procs = {}
        self.nodes = {}
        self.pki = None
        self.stopped = False
        self.node_ip = host_ip()
        self.kubeconfig = os.path.join(self.dir, "admin.kubeconfig")
        self._images = None
        _live.append(self)
        _install_handlers()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def spawn(self, name, argv, env=None):
        p = Proc(name, argv, os.path.join(self.logs, name + ".log"), env=env)
        self.procs[name] = p
        return p

    def wait(self, what, predicate, timeout=60, interval=0.5):
        deadline = time.monotonic() + timeout
        last = None
        while True:
            try:
                last = predicate()
                if last:
                    return last
            except ProcessDied:
                raise
            except E2EError as e:
                last = e
            if time.monotonic() > deadline:
                raise E2EError("timed out after %ss waiting for %s (last: %s)" % (timeout, what, str(last)[-1500:]))
            time.sleep(interval)

    def _check_alive(self, name):
        p = self.procs.get(name)
        if p and not p.alive():
            raise ProcessDied("%s exited (%s); last lines of %s:\n%s" % (name, p.p.returncode, p.log, p.tail()))

    # -- control plane --

    def start_control_plane(self):
        self.log("cluster: PKI, etcd, kube-apiserver in %s" % self.dir)
        self.pki = pki = PKI(self.path("pki"))
        self.ca_file = pki.ca_crt
        self.api_port = free_port()
        self.server = "https://127.0.0.1:%d" % self.api_port
        self.apiserver_cert = pki.cert("apiserver", "kube-apiserver", sans=(
            "127.0.0.1", "10.96.0.1", self.node_ip, "localhost", "kubernetes", "kubernetes.default",
            "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"), server=True)
        self.admin_cert = pki.cert("admin", "e2e-admin", orgs=("system:masters",))
        self.kubelet_client_cert = pki.cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                            orgs=("system:masters",))
        write_kubeconfig(self.kubeconfig, self.server, pki.ca_crt, *self.admin_cert, user="admin")
        for name, cn in (("scheduler", "system:kube-scheduler"), ("controller-manager", "system:kube-controller-manager")):
            crt, key = pki.cert(name, cn)
            write_kubeconfig(self.path(name + ".kubeconfig"), self.server, pki.ca_crt, crt, key, user=cn)
        self.start_etcd()
        self.start_apiserver()

    def start_etcd(self):
        cport, pport = free_port(), free_port()
        self.etcd_url = "http://127.0.0.1:%d" % cport
        peer = "http://127.0.0.1:%d" % pport
        self.spawn("etcd", ["etcd", "--name", "e2e", "--data-dir", self.path("etcd"),
                            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
                            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                            "--initial-cluster", "e2e=" + peer, "--unsafe-no-fsync", "--log-level", "warn"])

        def healthy():
            self._check_alive("etcd")
            try:
                with urllib.request.urlopen(self.etcd_url + "/health", timeout=2) as r:
                    return b"true" in r.read()
            except (urllib.error.URLError, OSError):
                return False
        self.wait("etcd health", healthy, timeout=60)

    def _apiserver_argv(self):
        pki = self.pki
        return [os.path.join(self.bin, "kube-apiserver"),
                "--etcd-servers", self.etcd_url, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
                "--secure-port", str(self.api_port), "--insecure-port", "0",
                "--tls-cert-file", self.apiserver_cert[0], "--tls-private-key-file", self.apiserver_cert[1],
                "--client-ca-file", pki.ca_crt,
                "--kubelet-client-certificate", self.kubelet_client_cert[0],
                "--kubelet-client-key", self.kubelet_client_cert[1],
                "--kubelet-preferred-address-types", "InternalIP,Hostname",
                "--service-account-key-file", pki.sa_pub, "--service-account-signing-key-file", pki.sa_key,
                "--service-account-issuer", "https://kubernetes.default.svc",
                "--service-cluster-ip-range", "10.96.0.0/12", "--authorization-mode", "Node,RBAC",
                "--enable-admission-plugins", "NodeRestriction", "--allow-privileged=true",
                "--profiling=false", "--cert-dir", self.path("apiserver-certs"), "--v", "1"]

    def start_apiserver(self):
        self.spawn("kube-apiserver", self._apiserver_argv())
        self.wait_apiserver()

    def wait_apiserver(self, timeout=120):
        def ready():
            self._check_alive("kube-apiserver")
            try:
                return self.api("GET", "/readyz", raw=True) == "ok"
            except E2EError:
                return False
        self.wait("kube-apiserver /readyz", ready, timeout=timeout)

    def restart_apiserver(self):
        self.log("cluster: restarting kube-apiserver")
        self.procs["kube-apiserver"].stop()
        self.start_apiserver()

    def start_controller_manager(self):
        kc = self.path("controller-manager.kubeconfig")
        self.spawn("kube-controller-manager", [
            os.path.join(self.bin, "kube-controller-manager"), "--kubeconfig", kc,
            "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()), "--port", "0",
            "--service-account-private-key-file", self.pki.sa_key, "--root-ca-file", self.pki.ca_crt,
            "--cluster-signing-cert-file", self.pki.ca_crt, "--cluster-signing-key-file", self.pki.ca_key,
            "--use-service-account-credentials=true", "--leader-elect=false",
            "--node-monitor-grace-period", "40s", "--cert-dir", self.path("cm-certs"), "--v", "1"])

    def start_scheduler(self, extenders=None, qps=None):
        kc = self.path("scheduler.kubeconfig")
        hport = free_port()
        self.scheduler_http_port = hport  # plain HTTP: /healthz, /metrics, /debug/pprof (bench/sched-e2e.py)
        conn = {"kubeconfig": kc}
        if qps:
            conn.update(qps=qps, burst=qps)
        cfg = {"apiVersion": "kubescheduler.config.k8s.io/v1beta1", "kind": "KubeSchedulerConfiguration",
               "clientConnection": conn, "leaderElection": {"leaderElect": False},
               "healthzBindAddress": "127.0.0.1:%d" % hport, "metricsBindAddress": "127.0.0.1:%d" % hport}
        if extenders:
            cfg["extenders"] = extenders
        path = self.path("scheduler-config.yaml")
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)
        if "kube-scheduler" in self.procs:
            self.procs["kube-scheduler"].stop()
        self.spawn("kube-scheduler", [
            os.path.join(self.bin, "kube-scheduler"), "--config", path,
            "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
            "--bind-address", "127.0.0.1", "--secure-port", str(free_port()), "--port", "0",
            "--cert-dir", self.path("scheduler-certs"), "--v", "1"])

    def start(self):
        self.start_control_plane()
        self.start_controller_manager()
        self.start_scheduler()
        # the default ServiceAccount appears once the controller-manager runs
        self.wait("the default ServiceAccount", lambda: self._exists("/api/v1/namespaces/default/serviceaccounts/default"),
                  timeout=90)
        return self

    # -- API --

    def _ssl(self):
        ctx = ssl.create_default_context(cafile=self.pki.ca_crt)
        ctx.load_cert_chain(*self.admin_cert)
        return ctx

    def api(self, method, path, body=None, check=True, raw=False, timeout=30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self._ssl(), timeout=timeout) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            if check:
                raise E2EError("%s %s: HTTP %d %s" % (method, path, e.code, text[:500]))
            return {"code": e.code, "error": text}
        except (urllib.error.URLError, OSError) as e:
            raise E2EError("%s %s: %s" % (method, path, e))
        return text if raw else json.loads(text or "{}")

    def _exists(self, path):
        r = self.api("GET", path, check=False)
        return "code" not in r

    def client(self):
        import kubernetes
        return kubernetes.config.new_client_from_config(config_file=self.kubeconfig)

    def kubectl(self, *args, input=None, check=True, timeout=60):
        argv = [os.path.join(self.bin, "kubectl"), "--kubeconfig", self.kubeconfig] + [str(a) for a in args]
        r = subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise E2EError("kubectl %s: %s" % (" ".join(str(a) for a in args), (r.stderr or r.stdout).strip()))
        return r.stdout if check else r

    def apply(self, obj):
        """kubectl apply of a dict, a list of dicts, or YAML/JSON text."""
        if not isinstance(obj, str):
            objs = obj if isinstance(obj, list) else [obj]
            obj = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
        return self.kubectl("apply", "-f", "-", input=obj)

    def service_account_token(self, namespace, name, audience=None):
        if not self._exists("/api/v1/namespaces/" + namespace):
            self.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": namespace}})
        if not self._exists("/api/v1/namespaces/%s/serviceaccounts/%s" % (namespace, name)):
            self.api("POST", "/api/v1/namespaces/%s/serviceaccounts" % namespace,
                     {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        r = self.api("POST", "/api/v1/namespaces/%s/serviceaccounts/%s/token" % (namespace, name), {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": [audience or "https://kubernetes.default.svc"], "expirationSeconds": 86400}})
        token = r["status"]["token"]
        os.makedirs(self.path("tokens"), exist_ok=True)
        path = self.path("tokens", "%s-%s.token" % (namespace, name))
        with open(path, "w") as f:
            f.write(token)
        return token, path

    # -- nodes --

    def base_images(self):
        if self._images is None:
            d = self.path("images")
            os.makedirs(d, exist_ok=True)
            self._images = [image_tar(os.path.join(d, "busybox.tar"), BUSYBOX),
                            image_tar(os.path.join(d, "pause.tar"), PAUSE, entrypoint=["/bin/sleep", "2147483647"])]
        return self._images

    def add_node(self, name, gpus=None, labels=None, images=None, env=None, wait=True):
        if not self.pki:
            raise E2EError("start the control plane before adding nodes")
        n = Node(self, name, len(self.nodes), gpus=gpus, labels=labels or {}, env=env)
        self.nodes[name] = n
        n.start(images=self.base_images() + list(images or []), wait=wait)
        return n

    def node_ready(self, name):
        r = self.api("GET", "/api/v1/nodes/" + name, check=False)
        if "code" in r:
            return False
        return any(c["type"] == "Ready" and c["status"] == "True" for c in r.get("status", {}).get("conditions", []))

    # -- the end --

    def stop(self):
        if self.stopped:
            return
        self.stopped = True
        for n in reversed(list(self.nodes.values())):
            try:
                n.stop()
            except Exception as e:  # noqa: BLE001
                self.log("cleanup: node %s: %s" % (n.name, e))
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            if name in self.procs:
                self.procs[name].stop()
        for p in self.procs.values():
            p.stop()
        if self in _live:
            _live.remove(self)
        if os.environ.get("GPUSLICE_E2E_KEEP_DIR") == "1":
            self.log("cluster: kept %s" % self.dir)
        else:
            reap(self.dir, quiet=True)


# ---- nodes -------------------------------------------------------------------------------------

# Run inside the node's fresh mount namespace (unshare -m, private propagation) by its holder:
# private copies of kubelet's hard-coded directories and a /dev with simulated NVIDIA nodes. The host's
# own NVIDIA nodes (a GPU host has /dev/nvidia0..., nvidiactl, nvidia-uvm*, nvidia-caps/) are not copied:
# the node has its simulated GPUs' nodes only, made below (and `gpuslice-sim caps` makes its nvidia-caps/),
# never the host's real devices (tests/e2e/test_node_setup.py makes them first).
_NODE_SETUP = r'''
set -eu
N=$1; GPUS=$2
mount --make-rprivate /
for d in /var/lib/kubelet /var/lib/gpuslice /var/log/pods /var/log/containers /run/gpuslice-e2e \
         /usr/local/lib/gpuslice; do
    mkdir -p "$d" "$N/root$d"
    mount --bind "$N/root$d" "$d"
done
mkdir -p "$N/hostdev"
mount --rbind /dev "$N/hostdev"
mount -t tmpfs -o mode=755,nosuid,size=16m e2e-dev /dev
for e in "$N"/hostdev/* "$N"/hostdev/.[!.]*; do
    [ -e "$e" ] || [ -L "$e" ] || continue
    b=${e##*/}
    case $b in nvidia*) continue ;; esac
    if [ -d "$e" ] && [ ! -L "$e" ]; then
        mkdir -p "/dev/$b"; mount --rbind "$e" "/dev/$b"
    else
        cp -a "$e" "/dev/$b"
    fi
done
if [ "$GPUS" -gt 0 ]; then
    i=0
    while [ "$i" -lt "$GPUS" ]; do mknod -m 666 "/dev/nvidia$i" c 195 "$i"; i=$((i + 1)); done
    mknod -m 666 /dev/nvidiactl c 195 255
    mknod -m 666 /dev/nvidia-modeset c 195 254
    mknod -m 666 /dev/nvidia-uvm c 510 0
    mknod -m 666 /dev/nvidia-uvm-tools c 510 1
fi
umount -l "$N/hostdev"
echo ready
'''


class Node:
    """One kubelet node in its own mount namespace, with its own containerd."""

    plugin_dir = "/var/lib/kubelet/device-plugins"
    pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock"

    def __init__(self, cluster, name, index, gpus=None, labels=None, env=None):
        self.c, self.name, self.index = cluster, name, index
        self.gpus = gpus or 0
        self.labels = labels or {}
        self.env = env or {}
        self.dir = cluster.path("nodes", name)
        os.makedirs(self.dir, exist_ok=True)
        self.procs = {}
        self.sock = os.path.join(self.dir, "containerd.sock")
        self.bridge = "gse%d%s" % (os.getpid() % 100000, index)
        self.holder = None

    def host_path(self, p):
        """Where a path under one of the node's private directories lives on the host."""
        return os.path.join(self.dir, "root") + p

    def _nsenter(self, argv):
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--"] + list(argv)

    def run(self, argv, env=None, check=True, timeout=60, input=None):
        e = dict(os.environ)
        e.update(env or {})
        r = subprocess.run(self._nsenter(argv), env=e, capture_output=True, text=True, timeout=timeout, input=input)
        if check and r.returncode != 0:
            raise E2EError("node %s: %s failed (exit %d): %s" % (self.name, " ".join(argv), r.returncode,
                                                                 (r.stderr or r.stdout).strip()[-2000:]))
        return r

    def spawn(self, name, argv, env=None, prefix=()):
        e = dict(os.environ)
        e.update(env or {})
        argv = list(prefix) + list(argv)
        if name in self.procs and self.procs[name].alive():
            raise E2EError("node %s: %s is already running" % (self.name, name))
        p = Proc("%s-%s" % (self.name, name), self._nsenter(argv), os.path.join(self.c.logs, "%s-%s.log" % (self.name, name)),
                 env=e)
        self.procs[name] = p
        return p

    def ctr(self, *args, check=True, timeout=120):
        r = run(["ctr", "-a", self.sock, "-n", "k8s.io"] + list(args), check=check, timeout=timeout)
        return r.stdout if check else r

    def import_image(self, tar, tag=None):
        out = self.ctr("images", "import", "--no-unpack=false", tar, timeout=300)
        if tag:
            src = None
            for line in out.splitlines():
                # "unpacking docker.io/library/x:1 (sha256:...)...done"
                parts = line.split()
                if len(parts) >= 2 and parts[0] == "unpacking":
                    src = parts[1]
            if src and src != tag:
                self.ctr("images", "tag", "--force", src, tag)
        return out

    def start(self, images, wait=True):
        c = self.c
        c.log("cluster: node %s (%d GPU device nodes)" % (self.name, self.gpus))
        self.holder = Proc("%s-ns" % self.name, ["unshare", "-m", "--propagation", "private", "sleep", "2147483647"],
                           os.path.join(c.logs, "%s-ns.log" % self.name))
        c.wait("node %s mount namespace" % self.name,
               lambda: os.readlink("/proc/%d/ns/mnt" % self.holder.pid) != os.readlink("/proc/self/ns/mnt"), timeout=10,
               interval=0.05)
        self.run(["sh", "-c", _NODE_SETUP, "node-setup", self.dir, str(self.gpus)])
        with open(os.path.join(self.dir, "ns.pid"), "w") as f:  # for nsenter while debugging (docs/e2e.md)
            f.write("%d\n" % self.holder.pid)
        self._write_containerd_config()
        self.start_containerd()
        for tar in images:
            self.import_image(tar)
        self._write_kubelet_config()
        self.start_kubelet(wait=wait)

    def _write_containerd_config(self):
        d = self.dir
        cni = os.path.join(d, "cni")
        os.makedirs(cni, exist_ok=True)
        sub = 100 + self.index
        conflist = {"cniVersion": "0.4.0", "name": "e2e-%s" % self.name, "plugins": [
            {"type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": False, "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": os.path.join(d, "cni-ipam"),
                      "ranges": [[{"subnet": "10.%d.%d.0/24" % (sub, os.getpid() % 250)}]],
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "loopback"}]}
        with open(os.path.join(cni, "10-e2e.conflist"), "w") as f:
            json.dump(conflist, f)
        toml = '''version = 2
root = "{d}/containerd/root"
state = "{d}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{d}/containerd.ttrpc.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  restrict_oom_score_adj = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
'''.format(d=d, sock=self.sock, pause=PAUSE, cni=cni)
        with open(os.path.join(d, "containerd.toml"), "w") as f:
            f.write(toml)

    def start_containerd(self):
        self.spawn("containerd", ["containerd", "--config", os.path.join(self.dir, "containerd.toml"), "--log-level", "warn"])

        def up():
            p = self.procs["containerd"]
            if not p.alive():
                raise ProcessDied("containerd of %s exited:\n%s" % (self.name, p.tail()))
            return run(["ctr", "-a", self.sock, "version"], check=False, timeout=10).returncode == 0
        self.c.wait("containerd of node %s" % self.name, up, timeout=60)

    def _write_kubelet_config(self):
        c = self.c
        crt, key = c.pki.cert("kubelet-" + self.name, "system:node:" + self.name, orgs=("system:nodes",))
        serving = c.pki.cert("kubelet-serving-" + self.name, self.name, sans=(c.node_ip, "127.0.0.1", self.name),
                             server=True)
        self.kubeconfig = write_kubeconfig(os.path.join(self.dir, "kubelet.kubeconfig"), c.server, c.pki.ca_crt, crt, key,
                                           user="system:node:" + self.name)
        self.port, self.healthz_port = free_port(), free_port()
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            "address": "0.0.0.0", "port": self.port, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": self.healthz_port,
            "tlsCertFile": serving[0], "tlsPrivateKeyFile": serving[1],
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                               "x509": {"clientCAFile": c.pki.ca_crt}},
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs", "cgroupsPerQOS": False, "enforceNodeAllocatable": [], "failSwapOn": False,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False, "nodeStatusUpdateFrequency": "5s", "syncFrequency": "10s",
            "fileCheckFrequency": "5s", "resolvConf": "", "maxPods": 60,
        }
        self.kubelet_config = os.path.join(self.dir, "kubelet-config.yaml")
        with open(self.kubelet_config, "w") as f:
            json.dump(cfg, f, indent=1)

    def start_kubelet(self, wait=True):
        labels = ",".join("%s=%s" % kv for kv in sorted(self.labels.items()))
        argv = [os.path.join(self.c.bin, "kubelet"), "--config", self.kubelet_config, "--kubeconfig", self.kubeconfig,
                "--container-runtime", "remote", "--container-runtime-endpoint", "unix://" + self.sock,
                "--image-service-endpoint", "unix://" + self.sock, "--runtime-request-timeout", "2m",
                "--hostname-override", self.name, "--node-ip", self.c.node_ip, "--root-dir", "/var/lib/kubelet",
                "--cert-dir", "/var/lib/kubelet/pki", "--v", "2"]
        if labels:
            argv += ["--node-labels", labels]
        self.spawn("kubelet", argv)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout=120):
        def ready():
            p = self.procs["kubelet"]
            if not p.alive():
                raise ProcessDied("kubelet of %s exited:\n%s" % (self.name, p.tail()))
            return self.c.node_ready(self.name)
        self.c.wait("node %s Ready" % self.name, ready, timeout=timeout)

    def stop_kubelet(self, sig=signal.SIGTERM):
        return self.procs["kubelet"].stop(sig)

    def restart_kubelet(self, wait=True):
        self.stop_kubelet()
        self.start_kubelet(wait=wait)

    def _kill_containers(self):
        if "containerd" in self.procs and self.procs["containerd"].alive():
            r = run(["ctr", "-a", self.sock, "-n", "k8s.io", "tasks", "ls", "-q"], check=False, timeout=30)
            for cid in r.stdout.split():
                run(["ctr", "-a", self.sock, "-n", "k8s.io", "tasks", "kill", "-a", "-s", "SIGKILL", cid], check=False,
                    timeout=30)
            for cid in r.stdout.split():
                run(["ctr", "-a", self.sock, "-n", "k8s.io", "tasks", "delete", "-f", cid], check=False, timeout=30)
        _kill_shims(self.sock)

    def stop(self):
        for name in ("kubelet",) + tuple(n for n in self.procs if n not in ("kubelet", "containerd")):
            if name in self.procs:
                self.procs[name].stop()
        self._kill_containers()
        if "containerd" in self.procs:
            self.procs["containerd"].stop()
        if self.holder:
            self.holder.stop(signal.SIGKILL)
        run(["ip", "link", "del", self.bridge], check=False)


def _kill_shims(marker):
    """SIGKILL containerd shims whose command line names marker (a node's containerd socket or the workdir),
    and their children (the containers' init processes), by PID."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "containerd-shim" not in cmd or marker not in cmd:
            continue
        kids = []
        try:
            for tid in os.listdir("/proc/%s/task" % pid):
                with open("/proc/%s/task/%s/children" % (pid, tid)) as f:
                    kids += [int(k) for k in f.read().split()]
        except OSError:
            pass
        for k in kids + [int(pid)]:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass


def reap(workdir, quiet=False):
    """Remove what a run left in workdir: shims and containers, bridges, mounts, files."""
    workdir = os.path.abspath(workdir)
    _kill_shims(workdir)
    nodes = os.path.join(workdir, "nodes")
    for n in os.listdir(nodes) if os.path.isdir(nodes) else []:
        try:
            with open(os.path.join(nodes, n, "cni", "10-e2e.conflist")) as f:
                br = json.load(f)["plugins"][0]["bridge"]
            run(["ip", "link", "del", br], check=False)
        except (OSError, ValueError, KeyError):
            pass
    # overlay mounts of containers live in the nodes' namespaces, gone with them; anything mounted
    # on the host under workdir is unmounted before removal
    with open("/proc/self/mounts") as f:
        mps = [line.split()[1] for line in f if line.split()[1].startswith(workdir + "/")]
    for mp in sorted(mps, key=len, reverse=True):
        run(["umount", "-l", mp], check=False)
    for _ in range(3):
        shutil.rmtree(workdir, ignore_errors=True)
        if not os.path.exists(workdir):
            break
        time.sleep(1)
    if not quiet:
        _default_log("reaped %s" % workdir)


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a cluster and keep it up until Ctrl-C")
    up.add_argument("--nodes", type=int, default=1)
    up.add_argument("--gpus", type=int, default=8)
    up.add_argument("--workdir")
    rp = sub.add_parser("reap", help="clean up after a killed run")
    rp.add_argument("workdir")
    a = ap.parse_args(argv)
    if a.cmd == "reap":
        reap(a.workdir)
        return 0
    c = Cluster(workdir=a.workdir)
    try:
        c.start()
        for i in range(a.nodes):
            c.add_node("node%d" % (i + 1), gpus=a.gpus)
        print("export KUBECONFIG=%s" % c.kubeconfig)
        print("kubectl: %s/kubectl" % c.bin)
        print("up; Ctrl-C stops and removes it")
        sys.stdout.flush()
        signal.pause()
    finally:
        c.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
