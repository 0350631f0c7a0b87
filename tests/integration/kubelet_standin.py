# SPDX-License-Identifier: Apache-2.0
"""A kubelet stand-in for testing device plugins, on Debian's grpcio.

It serves the kubelet side of the device plugin API (Registration on <plugin-dir>/kubelet.sock)
and the PodResources API (List on a configurable socket), and drives plugins the way kubelet
does (docs/specs/kubelet-device-plugin.md, "How kubelet behaves"):

- Register is handled synchronously: inside the call it dials the plugin's socket and calls
  GetDevicePluginOptions (10 s timeout); only then does Register return, and ListAndWatch starts
  afterwards on a thread that records every message with its arrival time.
- restart() does what a starting kubelet does: remove every unix socket in the plugin dir (the
  plugins' too) and create kubelet.sock anew.

Everything it sees is recorded (registrations, ListAndWatch messages, errors) so tests can
assert on it. The stubs are generated once per build by CMake from the repository's proto/ files
(BUILD/python-stubs, load_stubs).
"""

import importlib
import os
import stat
import sys
import threading
import time
from concurrent import futures

import grpc

API_VERSION = "v1beta1"


STUBS_DIR = "python-stubs"  # in the build dir: generated once by CMake (tests/integration/stubs.cmake)


def load_stubs(build_dir, names=("deviceplugin", "podresources")):
    """Import NAME_pb2 and NAME_pb2_grpc for each name from the build's generated stubs; a dict by module name."""
    out_dir = os.path.join(os.path.abspath(build_dir), STUBS_DIR)
    for n in names:
        if not os.path.exists(os.path.join(out_dir, n + "_pb2_grpc.py")):
            raise RuntimeError("%s has no Python stubs for %s: build it first (cmake --build, target python-stubs)"
                               % (build_dir, n))
    if out_dir not in sys.path:
        sys.path.insert(0, out_dir)
    mods = {}
    for n in names:
        for suffix in ("_pb2", "_pb2_grpc"):
            mods[n + suffix] = importlib.import_module(n + suffix)
    return mods


def wait_on(cond, predicate, timeout, what="condition"):
    """Wait under the condition variable until predicate() is true (returned) or fail after timeout s."""
    deadline = time.monotonic() + timeout
    with cond:
        while True:
            v = predicate()
            if v:
                return v
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
            cond.wait(min(left, 0.05))


def valid_resource_name(name):
    """Domain-prefixed extended resource: 'domain/name', not in kubernetes.io's namespace."""
    if name.count("/") != 1:
        return False
    domain, res = name.split("/")
    if not domain or not res or "." not in domain or domain.endswith("kubernetes.io"):
        return False
    return len(res) <= 63


class Registration:
    def __init__(self, request, options, at):
        self.request = request
        self.options = options
        self.at = at


class Kubelet:
    def __init__(self, stubs, plugin_dir, podres_socket=None):
        self.pb = stubs["deviceplugin_pb2"]
        self.pbg = stubs["deviceplugin_pb2_grpc"]
        self.pr = stubs["podresources_pb2"]
        self.prg = stubs["podresources_pb2_grpc"]
        self.plugin_dir = plugin_dir
        self.podres_socket = podres_socket
        self.cond = threading.Condition()
        self.registrations = []      # Registration, in order
        self.register_errors = []    # strings
        self.law = []                # (time, endpoint, ListAndWatchResponse)
        self.law_ends = []           # (time, endpoint, status text)
        self.pods = []               # PodResources List answer: (namespace, pod, container, resource, [ids])
        self.podres_calls = 0
        self.server = None
        self.podres_server = None
        self.channels = []
        self.restarted_at = None
        self.reject_register = False  # answer Register with an error (tests)
        self.hang_register = False    # a hung kubelet: dial back, then never answer Register (tests)
        self.hung_calls = 0           # Register calls left hanging
        self.unhang = threading.Event()  # set on close(): hung Register handlers return
        self.podres_hang_s = 0        # every PodResources List answers only after this long (tests)

    # ---- servers ----

    def _make_registration_servicer(self):
        kubelet = self

        class Servicer(self.pbg.RegistrationServicer):
            def Register(self, request, context):
                return kubelet._register(request, context)

        return Servicer()

    def _make_podres_servicer(self):
        kubelet = self

        class Servicer(self.prg.PodResourcesListerServicer):
            def List(self, request, context):
                with kubelet.cond:
                    kubelet.podres_calls += 1
                    hang = kubelet.podres_hang_s
                deadline = time.monotonic() + hang
                while time.monotonic() < deadline and context.is_active() and not kubelet.unhang.wait(0.05):
                    pass
                with kubelet.cond:
                    pods = list(kubelet.pods)
                resp = kubelet.pr.ListPodResourcesResponse()
                by_pod = {}
                for ns, pod, ctr, res, ids in pods:
                    by_pod.setdefault((ns, pod), []).append((ctr, res, ids))
                for (ns, pod), ctrs in by_pod.items():
                    p = resp.pod_resources.add(name=pod, namespace=ns)
                    for ctr, res, ids in ctrs:
                        c = p.containers.add(name=ctr)
                        c.devices.add(resource_name=res, device_ids=ids)
                return resp

        return Servicer()

    def move_podres(self, socket):
        """Serve PodResources on another socket from now on (the old one removed)."""
        if self.podres_server:
            self.podres_server.stop(0)
            self.podres_server = None
        if self.podres_socket and os.path.exists(self.podres_socket):
            os.unlink(self.podres_socket)
        self.podres_socket = socket
        self.start_podres()

    def start_podres(self):
        if self.podres_socket and self.podres_server is None:
            self.podres_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            self.prg.add_PodResourcesListerServicer_to_server(self._make_podres_servicer(), self.podres_server)
            if self.podres_server.add_insecure_port("unix:" + self.podres_socket) == 0:
                raise RuntimeError("cannot listen on " + self.podres_socket)
            self.podres_server.start()

    def start(self):
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.pbg.add_RegistrationServicer_to_server(self._make_registration_servicer(), self.server)
        sock = os.path.join(self.plugin_dir, "kubelet.sock")
        if self.server.add_insecure_port("unix:" + sock) == 0:
            raise RuntimeError("cannot listen on " + sock)
        self.server.start()
        self.start_podres()

    def stop(self):
        if self.server:
            self.server.stop(0)
            self.server = None
        for ch in self.channels:
            ch.close()
        self.channels = []

    def close(self):
        self.unhang.set()
        self.stop()
        if self.podres_server:
            self.podres_server.stop(0)
            self.podres_server = None

    def restart(self):
        """What a starting kubelet does: drop every socket in the plugin dir, new kubelet.sock."""
        self.stop()
        for name in os.listdir(self.plugin_dir):
            path = os.path.join(self.plugin_dir, name)
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
            except FileNotFoundError:
                pass
        self.restarted_at = time.monotonic()
        self.start()

    # ---- kubelet behaviour ----

    def _register(self, request, context):
        if self.reject_register:
            context.abort(grpc.StatusCode.UNAVAILABLE, "stand-in told to refuse")
        if request.version != API_VERSION:
            msg = "unsupported version %r" % request.version
            with self.cond:
                self.register_errors.append(msg)
                self.cond.notify_all()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, msg)
        if not valid_resource_name(request.resource_name):
            msg = "invalid resource name %r" % request.resource_name
            with self.cond:
                self.register_errors.append(msg)
                self.cond.notify_all()
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, msg)
        # Synchronously dial the plugin and ask for its options, as kubelet does.
        channel = grpc.insecure_channel("unix:" + os.path.join(self.plugin_dir, request.endpoint))
        try:
            stub = self.pbg.DevicePluginStub(channel)
            options = stub.GetDevicePluginOptions(self.pb.Empty(), timeout=10)
        except grpc.RpcError as e:
            channel.close()
            msg = "GetDevicePluginOptions failed: %s" % e
            with self.cond:
                self.register_errors.append(msg)
                self.cond.notify_all()
            context.abort(grpc.StatusCode.UNAVAILABLE, msg)
        if self.hang_register:
            # Kubelet took the plugin's options but never returns from Register.
            with self.cond:
                self.hung_calls += 1
                self.cond.notify_all()
            channel.close()
            while not self.unhang.wait(0.1) and context.is_active():
                pass
            context.abort(grpc.StatusCode.UNAVAILABLE, "stand-in was hung")
        with self.cond:
            self.registrations.append(Registration(request, options, time.monotonic()))
            self.channels.append(channel)
            self.cond.notify_all()
        threading.Thread(target=self._watch, args=(channel, request.endpoint), daemon=True).start()
        return self.pb.Empty()

    def _watch(self, channel, endpoint):
        stub = self.pbg.DevicePluginStub(channel)
        status = "ended"
        try:
            for resp in stub.ListAndWatch(self.pb.Empty()):
                with self.cond:
                    self.law.append((time.monotonic(), endpoint, resp))
                    self.cond.notify_all()
        except grpc.RpcError as e:
            status = "%s" % (e.code(),)
        except ValueError:  # channel closed under us
            status = "closed"
        with self.cond:
            self.law_ends.append((time.monotonic(), endpoint, status))
            self.cond.notify_all()

    # ---- helpers for tests ----

    def wait_for(self, predicate, timeout, what="condition"):
        return wait_on(self.cond, predicate, timeout, what)

    def last_devices(self, endpoint=None):
        """The latest ListAndWatch list (of one endpoint, or of any) as {id: (health, [numa ids])}."""
        with self.cond:
            msgs = [m for m in self.law if endpoint is None or m[1] == endpoint]
            if not msgs:
                return None
            resp = msgs[-1][2]
        return {d.ID: (d.health, [n.ID for n in d.topology.nodes]) for d in resp.devices}

    def last_ids(self, endpoint):
        """Device IDs of the latest ListAndWatch message of an endpoint, in the order listed."""
        with self.cond:
            msgs = [m for m in self.law if m[1] == endpoint]
            return [d.ID for d in msgs[-1][2].devices] if msgs else None

    def plugin_stub(self, endpoint=None):
        if endpoint is None:
            endpoint = self.registrations[-1].request.endpoint
        ch = grpc.insecure_channel("unix:" + os.path.join(self.plugin_dir, endpoint))
        self.channels.append(ch)
        return self.pbg.DevicePluginStub(ch), ch

    def raw_call(self, method, payload, endpoint=None, timeout=5):
        """Send raw bytes to a plugin method; returns (status code, details, response bytes)."""
        _, ch = self.plugin_stub(endpoint)
        call = ch.unary_unary(method, request_serializer=None, response_deserializer=None)
        try:
            resp = call(payload, timeout=timeout)
            return grpc.StatusCode.OK, "", resp
        except grpc.RpcError as e:
            return e.code(), e.details(), None


# ---- Dynamic Resource Allocation ----

DRA_STUBS = ("pluginregistration", "dra_v1", "dra_v1beta1", "dra_health_v1", "dra_health_v1alpha1")


class DraKubelet:
    """The kubelet side of a DRA driver, as kubelet 1.36 drives it (docs/specs/dra.md, docs/dra.md):

    - its plugin watcher finds <registry-dir>/*-reg.sock, calls GetInfo (type must be "DRAPlugin"), picks
      the first service of the plugin's supported_versions that it supports itself (`services`, v1 and
      v1beta1 by default; a tuple of one plays an older or newer kubelet) and answers
      NotifyRegistrationStatus;
    - NodePrepareResources / NodeUnprepareResources on the plugin's endpoint in the chosen version, every
      claim of the request answered (checked);
    - the health stream: /v1alpha1.DRAResourceHealth/NodeWatchResources as 1.36 does, or v1 when
      `health` says so; every message recorded;
    - restart(): forget the plugin and register it again, and wipe the node's ResourceSlices through the
      API as a starting kubelet does (a callback).
    """

    def __init__(self, stubs, registry_dir, services=("v1.DRAPlugin", "v1beta1.DRAPlugin"), health="v1alpha1",
                 wipe=None):
        self.s = stubs
        self.registry_dir = registry_dir
        self.wipe = wipe  # deletes the node's ResourceSlices, as a starting kubelet >= 1.36 does (restart())
        self.services = services
        self.health_version = health
        self.cond = threading.Condition()
        self.info = None          # the last GetInfo answer
        self.chosen = None        # the service prepare/unprepare use
        self.registrations = 0
        self.health = []          # (time, NodeWatchResourcesResponse)
        self.health_errors = []
        self.channels = []
        self._health_call = None

    def _channel(self, path):
        ch = grpc.insecure_channel("unix:" + path)
        self.channels.append(ch)
        return ch

    def register(self, timeout=15):
        """Find the registration socket, GetInfo, choose the version, notify; returns the PluginInfo."""
        deadline = time.monotonic() + timeout
        sock = None
        while time.monotonic() < deadline:
            socks = [n for n in os.listdir(self.registry_dir) if n.endswith("-reg.sock")]
            if socks:
                sock = os.path.join(self.registry_dir, socks[0])
                try:
                    stub = self.s["pluginregistration_pb2_grpc"].RegistrationStub(self._channel(sock))
                    info = stub.GetInfo(self.s["pluginregistration_pb2"].InfoRequest(), timeout=5)
                    break
                except grpc.RpcError:
                    pass
            time.sleep(0.1)
        else:
            raise AssertionError("no DRA registration socket answered in %s" % self.registry_dir)
        err = ""
        if info.type != "DRAPlugin":
            err = "type %r is not DRAPlugin" % info.type
        chosen = next((v for v in info.supported_versions if v in self.services), None)
        if not chosen:
            err = "none of %s is supported (kubelet: %s)" % (list(info.supported_versions), self.services)
        if not os.path.exists(info.endpoint):
            err = "endpoint %s does not exist" % info.endpoint
        stub.NotifyRegistrationStatus(self.s["pluginregistration_pb2"].RegistrationStatus(
            plugin_registered=not err, error=err), timeout=5)
        if err:
            raise AssertionError("registration refused: " + err)
        with self.cond:
            self.info, self.chosen = info, chosen
            self.registrations += 1
            self.cond.notify_all()
        return info

    def _dra(self):
        mod = "dra_v1" if self.chosen == "v1.DRAPlugin" else "dra_v1beta1"
        return self.s[mod + "_pb2"], self.s[mod + "_pb2_grpc"].DRAPluginStub(self._channel(self.info.endpoint))

    def _call(self, method, claims, timeout):
        """One NodePrepareResources / NodeUnprepareResources call; every claim of it must be answered."""
        pb, stub = self._dra()
        req = getattr(pb, method + "Request")(claims=[pb.Claim(namespace=ns, uid=uid, name=name)
                                                      for ns, uid, name in claims])
        resp = getattr(stub, method)(req, timeout=timeout)
        missing = {c[1] for c in claims} - set(resp.claims.keys())
        if missing:
            raise AssertionError("%s answered no entry for %s (kubelet would retry them)" % (method, sorted(missing)))
        return resp.claims

    def prepare(self, *claims, timeout=45):
        """claims: (namespace, uid, name). Returns {uid: NodePrepareResourceResponse}."""
        return dict(self._call("NodePrepareResources", claims, timeout))

    def unprepare(self, *claims, timeout=45):
        """Returns {uid: error text}."""
        return {k: v.error for k, v in self._call("NodeUnprepareResources", claims, timeout).items()}

    def watch_health(self):
        """Subscribe as kubelet does (one stream, re-subscribed by the caller after a restart)."""
        mod = "dra_health_" + self.health_version
        pb, grpcmod = self.s[mod + "_pb2"], self.s[mod + "_pb2_grpc"]
        stub = grpcmod.DRAResourceHealthStub(self._channel(self.info.endpoint))
        call = stub.NodeWatchResources(pb.NodeWatchResourcesRequest())
        self._health_call = call

        def run():
            try:
                for msg in call:
                    with self.cond:
                        self.health.append((time.monotonic(), msg))
                        self.cond.notify_all()
            except grpc.RpcError as e:
                with self.cond:
                    self.health_errors.append(str(e.code()))
                    self.cond.notify_all()
        threading.Thread(target=run, daemon=True).start()

    def last_health(self):
        """{device name: (health enum value, message)} of the latest health message."""
        with self.cond:
            if not self.health:
                return None
            msg = self.health[-1][1]
        return {d.device.device_name: (d.health, d.message) for d in msg.devices}

    def wait_for(self, predicate, timeout, what="condition"):
        return wait_on(self.cond, predicate, timeout, what)

    def restart(self, wipe=None):
        """A kubelet restart: connections dropped, ResourceSlices of the node wiped (wipe(), else the one given
        at construction: the real 1.36 kubelet deletes them at every start), the plugin found and registered
        again."""
        self.close()
        wipe = wipe or self.wipe
        if wipe:
            wipe()
        self.info = self.chosen = None
        return self.register()

    def close(self):
        if self._health_call:
            self._health_call.cancel()
            self._health_call = None
        for ch in self.channels:
            ch.close()
        self.channels = []
