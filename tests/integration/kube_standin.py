# SPDX-License-Identifier: Apache-2.0
"""A small stand-in for the Kubernetes API server, for what the real one cannot be made to do on
demand: a watch stream cut in the middle of an event, bursts of 429/500 answers, a response that
never comes, 410 Gone at will. It keeps nodes and pods with a global resourceVersion, serves GET,
paged LIST (limit/continue, fieldSelector metadata.name / spec.nodeName), WATCH as chunked
newline-delimited JSON (resourceVersion, timeoutSeconds, allowWatchBookmarks), merge-patch
PATCH, and pods/binding as 1.20 does it (annotations merged in the update that sets the node).

resource.k8s.io (the DRA driver's tests, test_dra.py; no kube-apiserver new enough for DRA can be built
here): ResourceSlices (cluster-scoped, fieldSelector spec.nodeName / spec.driver), ResourceClaims
(namespaced) and DeviceClasses in the versions of `Store.resource_versions` (v1 only by default, as 1.36
serves them; v1beta2, v1beta1 with its "basic" device wrapper when a test enables them), GET
/apis/resource.k8s.io for discovery, POST / PUT (resourceVersion preconditions) / DELETE, server-side apply
of a claim's status.devices, and the stored form the real 1.36 showed (tests/data/dra/real-1.36: uid,
creationTimestamp, generation bumped by a spec change, a claim's request defaults, a taint's timeAdded;
claim_defaults, allocated, extended_resource_claim), with the watch lagging the answers by
`Store.watch_delay`. Slices are validated as kube-apiserver 1.36 validates them,
after the fields of disabled feature gates (`Store.gates`) are dropped (dra_validation.py): what the real
server refuses is answered 422 Invalid. Everything else about Kubernetes is left out; tests/e2e runs the
real kube-apiserver (1.20, without resource.k8s.io).
"""
import copy
import http.server
import json
import os
import socketserver
import sys
import threading
import time
import urllib.parse
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dra_validation  # noqa: E402

RESOURCE_KINDS = ("resourceslices", "resourceclaims", "deviceclasses")
CLUSTER_SCOPED = ("nodes", "resourceslices", "deviceclasses")
KIND_NAMES = {"nodes": "Node", "pods": "Pod", "resourceslices": "ResourceSlice", "resourceclaims": "ResourceClaim",
              "deviceclasses": "DeviceClass"}


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class Store:
    def __init__(self):
        self.lock = threading.Condition()
        self.rv = 100
        self.objs = {"nodes": {}, "pods": {}, "resourceslices": {}, "resourceclaims": {}, "deviceclasses": {}}
        # resource.k8s.io versions served, preferred first: 1.36 serves v1 only unless v1beta1/v1beta2 are enabled
        self.resource_versions = ["v1"]
        self.gates = dict(dra_validation.GATES_1_36)  # feature gates of resource.k8s.io fields
        self.rejected = []  # (path, [errors]) of 422 answers
        self.log = []  # (rv, kind, type, obj)
        self.logged_at = {}  # rv -> time.monotonic() of the change
        # A watch delivers a change only this long after it was made: the real kube-apiserver's watch cache
        # lags the write's answer (the DRA tests set it; 0 for the rest)
        self.watch_delay = 0.0
        self.compacted = 0  # watches from an older version get 410
        # fault injection
        self.fail = []  # list of [method-or-None, path-prefix, code, count]
        self.cut_next_watch = 0  # cut that many watches in the middle of their next event
        self.hang_next = 0  # that many requests (any) never get an answer
        self.hang_paths = []  # [path-prefix, count]: that many requests under the prefix never get an answer
        self.gone_next_watch = 0  # that many watches answer an ERROR 410 event
        self.requests = []  # (method, path)
        self.patches = []  # (path, body)
        self.ssa_owned = {}  # (claim key, field manager) -> the status.devices keys it applied
        self.bindings = []  # (path, Binding)
        self.stopping = False

    def key(self, kind, obj):
        m = obj["metadata"]
        return m["name"] if kind in CLUSTER_SCOPED else "%s/%s" % (m.get("namespace", "default"), m["name"])

    def put(self, kind, obj, etype=None):
        with self.lock:
            self.rv += 1
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
            k = self.key(kind, obj)
            if etype is None:
                etype = "MODIFIED" if k in self.objs[kind] else "ADDED"
            self.objs[kind][k] = obj
            self.log.append((self.rv, kind, etype, copy.deepcopy(obj)))
            self.logged_at[self.rv] = time.monotonic()
            self.lock.notify_all()
            return obj

    def delete(self, kind, k):
        with self.lock:
            obj = self.objs[kind].pop(k)
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.log.append((self.rv, kind, "DELETED", obj))
            self.logged_at[self.rv] = time.monotonic()
            self.lock.notify_all()

    def get(self, kind, k):
        with self.lock:
            o = self.objs[kind].get(k)
            return copy.deepcopy(o) if o else None

    def compact(self):
        """Forget history, as etcd compaction past every watcher would: watches in flight end with
        an ERROR 410 event, new watches from any version seen so far get 410."""
        with self.lock:
            self.compacted = self.rv + 1
            self.log = []
            self.lock.notify_all()


def selector_match(obj, fs):
    if not fs:
        return True
    for term in fs.split(","):
        k, _, v = term.partition("=")
        if k == "metadata.name":
            if obj["metadata"].get("name") != v:
                return False
        elif k == "spec.nodeName":
            if obj.get("spec", {}).get("nodeName", "") != v:
                return False
        elif k == "spec.driver":
            if obj.get("spec", {}).get("driver", "") != v:
                return False
        else:
            return False
    return True


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def binary_quantity(n):
    """An integer number of bytes as the real server writes a BinarySI quantity: the largest binary suffix that
    keeps it whole ("4Gi" for 4294967296, the consumedCapacity the real 1.36 scheduler wrote)."""
    for suffix, k in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if n and n % (1 << k) == 0:
            return "%d%s" % (n >> k, suffix)
    return str(n)


def claim_defaults(obj):
    """A ResourceClaim's spec as kube-apiserver 1.36 stores it (tests/data/dra/real-1.36/claim-one-gpu.yaml):
    every exact request and subrequest gets allocationMode ExactCount and, for that mode, count 1."""
    for r in ((obj.get("spec") or {}).get("devices") or {}).get("requests") or []:
        for e in [r.get("exactly")] + list(r.get("firstAvailable") or []):
            if isinstance(e, dict):
                e.setdefault("allocationMode", "ExactCount")
                if e["allocationMode"] == "ExactCount":
                    e.setdefault("count", 1)
    return obj


def allocated(obj, node, pod=None):
    """A claim as the 1.36 scheduler leaves it allocated (the recorded claim): allocationTimestamp, the
    nodeSelector of its node, the delete-protection finalizer, and reservedFor the pod ({name, uid})."""
    a = obj.setdefault("status", {}).setdefault("allocation", {})
    a.setdefault("allocationTimestamp", now())
    a.setdefault("nodeSelector", {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]})
    fin = obj["metadata"].setdefault("finalizers", [])
    if "resource.kubernetes.io/delete-protection" not in fin:
        fin.append("resource.kubernetes.io/delete-protection")
    if pod:
        obj["status"].setdefault("reservedFor", [{"resource": "pods", "name": pod["name"], "uid": pod["uid"]}])
    return obj


def extended_resource_claim(pod, node, driver, device_class, devices, container=0):
    """The claim kube-scheduler 1.36 makes for a pod asking an extended resource a DeviceClass names
    (`extendedResourceName`, KEP-5004; the real server named it "<pod>-extended-resources-<suffix>"): owned by
    the pod, one request per container and resource ("container-<c>-request-<r>"), allocated on the node.
    pod: {name, namespace, uid}; devices: the device names the scheduler chose."""
    req = "container-%d-request-0" % container
    suffix = uuid.uuid4().hex[:5]
    obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": "%s-extended-resources-%s" % (pod["name"], suffix),
                        "namespace": pod.get("namespace", "default"), "uid": str(uuid.uuid4()),
                        "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod["name"],
                                             "uid": pod["uid"], "controller": True, "blockOwnerDeletion": True}],
                        "creationTimestamp": now(), "generation": 1},
           "spec": {"devices": {"requests": [{"name": req, "exactly": {
               "deviceClassName": device_class, "allocationMode": "ExactCount", "count": len(devices)}}]}},
           "status": {"allocation": {"devices": {"results": [
               {"request": req, "driver": driver, "pool": node, "device": d} for d in devices]}}}}
    return allocated(obj, node, pod)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    store = None

    def log_message(self, *a):
        pass

    def send_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def route(self):
        u = urllib.parse.urlparse(self.path)
        q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        parts = [p for p in u.path.split("/") if p]
        self.version = None
        self.subresource = None
        # /apis/resource.k8s.io/VERSION/{resourceslices,deviceclasses}[/name],
        # /apis/resource.k8s.io/VERSION/[namespaces/NS/]resourceclaims[/name]
        if parts[:2] == ["apis", "resource.k8s.io"] and len(parts) >= 4:
            if parts[2] not in self.store.resource_versions:
                return None, None, q
            self.version = parts[2]
            rest = parts[3:]
            if len(rest) in (3, 5) and rest[-1] == "status":  # the status subresource
                self.subresource = "status"
                rest = rest[:-1]
            if rest[0] in ("resourceslices", "deviceclasses", "resourceclaims"):
                return rest[0], rest[1] if len(rest) > 1 else None, q
            if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] == "resourceclaims":
                return "resourceclaims", "%s/%s" % (rest[1], rest[3]) if len(rest) > 3 else None, q
            return None, None, q
        # /api/v1/nodes[/name], /api/v1/pods, /api/v1/namespaces/ns/pods[/name]
        if parts[:2] != ["api", "v1"]:
            return None, None, q
        rest = parts[2:]
        if rest[:1] == ["nodes"]:
            return "nodes", rest[1] if len(rest) > 1 else None, q
        if rest[:1] == ["pods"]:
            return "pods", None, q
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] == "pods":
            return "pods", "%s/%s" % (rest[1], rest[3]) if len(rest) > 3 else None, q
        return None, None, q

    def faults(self, method):
        s = self.store
        with s.lock:
            s.requests.append((method, self.path))
            if s.hang_next > 0:
                s.hang_next -= 1
                hang = True
            else:
                hang = False
            for h in s.hang_paths:
                if not hang and h[1] > 0 and self.path.startswith(h[0]):
                    h[1] -= 1
                    hang = True
            for f in s.fail:
                if f[3] > 0 and (f[0] is None or f[0] == method) and self.path.startswith(f[1]):
                    f[3] -= 1
                    code = f[2]
                    break
            else:
                code = None
        if hang:
            while not s.stopping:
                time.sleep(0.2)
            return True
        if code:
            reason = {429: "TooManyRequests", 500: "InternalError", 410: "Expired"}.get(code, "Error")
            self.send_json(code, status(code, reason, "stand-in: injected %d" % code))
            return True
        return False

    def out(self, kind, obj):
        """An object as the version of the request shows it (stored as v1)."""
        if kind not in RESOURCE_KINDS or not self.version:
            return obj
        if kind == "resourceslices":
            return dra_validation.from_v1(obj, self.version)
        obj = copy.deepcopy(obj)
        obj["apiVersion"] = "resource.k8s.io/" + self.version
        return obj

    def discovery(self):
        vs = [{"groupVersion": "resource.k8s.io/" + v, "version": v} for v in self.store.resource_versions]
        if not vs:
            return self.send_json(404, status(404, "NotFound", "the server could not find the requested resource"))
        self.send_json(200, {"kind": "APIGroup", "apiVersion": "v1", "name": "resource.k8s.io", "versions": vs,
                             "preferredVersion": vs[0]})

    def do_GET(self):
        if self.faults("GET"):
            return
        if urllib.parse.urlparse(self.path).path.rstrip("/") == "/apis/resource.k8s.io":
            return self.discovery()
        kind, name, q = self.route()
        if not kind:
            return self.send_json(404, status(404, "NotFound", "no such path"))
        s = self.store
        if name:
            o = s.get(kind, name)
            if not o:
                return self.send_json(404, status(404, "NotFound", '%s "%s" not found' % (kind, name)))
            return self.send_json(200, self.out(kind, o))
        if q.get("watch") in ("1", "true"):
            return self.watch(kind, q)
        fs = q.get("fieldSelector", "")
        with s.lock:
            items = [self.out(kind, copy.deepcopy(o)) for k, o in sorted(s.objs[kind].items()) if selector_match(o, fs)]
            rv = str(s.rv)
        start = 0
        if q.get("continue"):
            start = int(q["continue"])
        limit = int(q.get("limit", "0") or 0)
        page = items[start:start + limit] if limit else items[start:]
        meta = {"resourceVersion": rv}
        if limit and start + limit < len(items):
            meta["continue"] = str(start + limit)
        self.send_json(200, {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page})

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def watch(self, kind, q):
        s = self.store
        since = int(q.get("resourceVersion") or 0)
        timeout = int(q.get("timeoutSeconds") or 300)
        fs = q.get("fieldSelector", "")
        bookmarks = q.get("allowWatchBookmarks") == "true"
        with s.lock:
            if since and since < s.compacted:
                code = 410
            else:
                code = None
            if not since:
                since = s.rv
            gone = s.gone_next_watch > 0
            if gone:
                s.gone_next_watch -= 1
        if code:
            return self.send_json(410, status(410, "Expired", "too old resource version: %d (%d)" %
                                              (since, s.compacted)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if gone:
            self.chunk((json.dumps({"type": "ERROR", "object": status(410, "Expired", "stand-in: gone")}) +
                        "\n").encode())
            self.chunk(b"")
            return
        deadline = time.time() + timeout
        last_bookmark = time.time()
        try:
            while time.time() < deadline and not s.stopping:
                with s.lock:
                    ripe = time.monotonic() - s.watch_delay
                    evs = [e for e in s.log if e[0] > since and e[1] == kind and selector_match(e[3], fs)]
                    late = [e for e in evs if s.logged_at.get(e[0], 0) > ripe]
                    if late:  # in order: nothing after the first change not yet delivered
                        evs = evs[:evs.index(late[0])]
                    if since < s.compacted:
                        evs = None
                    elif not evs:
                        s.lock.wait(min(0.2, s.watch_delay) if late else 0.2)
                        evs = []
                    cut = s.cut_next_watch > 0 and evs
                    if cut:
                        s.cut_next_watch -= 1
                if evs is None:
                    self.chunk((json.dumps({"type": "ERROR", "object": status(410, "Expired", "compacted")}) +
                                "\n").encode())
                    break
                for rv, _, etype, obj in evs:
                    line = (json.dumps({"type": etype, "object": self.out(kind, obj)}) + "\n").encode()
                    if cut:
                        # half an event, then the connection drops without the closing chunk
                        self.chunk(line[:len(line) // 2])
                        self.connection.shutdown(2)
                        return
                    self.chunk(line)
                    since = rv
                if bookmarks and time.time() - last_bookmark > 1:
                    last_bookmark = time.time()
                    with s.lock:
                        brv = max(since, min(s.rv, since))
                    self.chunk((json.dumps({"type": "BOOKMARK", "object": {
                        "kind": KIND_NAMES[kind], "apiVersion": "v1",
                        "metadata": {"resourceVersion": str(brv)}}}) + "\n").encode())
            self.chunk(b"")
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_PATCH(self):
        body = self.read_body()
        if self.faults("PATCH"):
            return
        kind, name, q = self.route()
        s = self.store
        ct = self.headers.get("Content-Type", "")
        if not kind or not name:
            return self.send_json(404, status(404, "NotFound", "no such object"))
        if ct == "application/apply-patch+yaml" and kind == "resourceclaims" and self.subresource == "status":
            return self.apply_claim_status(name, q, body)
        if ct != "application/merge-patch+json":
            return self.send_json(415, status(415, "UnsupportedMediaType", "stand-in speaks merge patch only"))
        try:
            patch = json.loads(body)
        except ValueError as e:
            return self.send_json(400, status(400, "BadRequest", str(e)))
        with s.lock:
            o = s.objs[kind].get(name)
            if not o:
                return self.send_json(404, status(404, "NotFound", '%s "%s" not found' % (kind, name)))
            want_rv = (patch.get("metadata") or {}).get("resourceVersion")
            if want_rv and want_rv != o["metadata"]["resourceVersion"]:
                return self.send_json(409, status(409, "Conflict", "the object has been modified"))
            s.patches.append((self.path, patch))
            new = merge_patch(o, patch)
            new = s.put(kind, new)
        self.send_json(200, new)

    def apply_claim_status(self, name, q, body):
        """Server-side apply of a ResourceClaim's status.devices (the status subresource), as kube-apiserver 1.36
        does it for a driver: the field manager owns the entries it applied (status.devices is a map list keyed
        by driver, device, pool and shareID), so an apply replaces that manager's entries and keeps the others';
        metadata.uid, when given, must be the claim's (409); every entry must name a device of the claim's
        allocation (ValidateDeviceStatus: 422), and its data must be an object of at most 10 KiB."""
        s = self.store
        manager = q.get("fieldManager")
        if not manager:
            return self.send_json(400, status(400, "BadRequest", "PATCH with apply requires fieldManager"))
        try:
            obj = json.loads(body)  # JSON is YAML; the driver sends JSON
        except ValueError as e:
            return self.send_json(400, status(400, "BadRequest", str(e)))
        entries = ((obj.get("status") or {}).get("devices")) or []
        key = lambda e: (e.get("driver"), e.get("device"), e.get("pool"), e.get("shareID") or "")  # noqa: E731
        with s.lock:
            o = s.objs["resourceclaims"].get(name)
            if not o:
                return self.send_json(404, status(404, "NotFound", 'resourceclaims "%s" not found' % name))
            uid = (obj.get("metadata") or {}).get("uid")
            if uid and uid != o["metadata"].get("uid"):
                return self.send_json(409, status(409, "Conflict", "Precondition failed: UID in precondition: %s, "
                                                  "UID in object meta: %s" % (uid, o["metadata"].get("uid"))))
            allocated = {key(r) for r in (((o.get("status") or {}).get("allocation") or {}).get("devices") or {})
                         .get("results") or []}
            errs = []
            for i, e in enumerate(entries):
                if key(e) not in allocated:
                    errs.append("status.devices[%d]: Invalid value: must be an allocated device in the claim" % i)
                data = e.get("data")
                if data is not None and (not isinstance(data, dict) or len(json.dumps(data)) > 10 * 1024):
                    errs.append("status.devices[%d].data: Invalid value: must be a JSON object of at most 10Ki" % i)
            if len({key(e) for e in entries}) != len(entries):
                errs.append("status.devices: Duplicate value")
            if errs:
                s.rejected.append((self.path, errs))
                return self.send_json(422, status(422, "Invalid", 'ResourceClaim "%s" is invalid: %s' %
                                                  (name, "; ".join(errs))))
            owned = s.ssa_owned.get((name, manager), set())
            mine = {key(e): e for e in entries}
            kept = [e for e in ((o.get("status") or {}).get("devices") or [])
                    if key(e) not in owned and key(e) not in mine]
            new = copy.deepcopy(o)
            new.setdefault("status", {})["devices"] = kept + list(mine.values())
            if not new["status"]["devices"]:
                del new["status"]["devices"]
            s.ssa_owned[(name, manager)] = set(mine)
            s.patches.append((self.path, obj))
            new = s.put("resourceclaims", new)
        self.send_json(200, self.out("resourceclaims", new))

    def bind(self, name, binding):
        """pods/NAME/binding as kube-apiserver 1.20 does it (pkg/registry/core/pod/storage/storage.go,
        setPodHostAndAnnotations): one update that sets spec.nodeName, merges the Binding's
        metadata.annotations into the pod's and marks it scheduled; 404 for no such pod, 409 for a pod
        being deleted or already bound. 1.20 takes no uid/resourceVersion precondition from the Binding."""
        s = self.store
        with s.lock:
            s.bindings.append((self.path, binding))
            o = s.objs["pods"].get(name)
            if not o:
                return self.send_json(404, status(404, "NotFound", 'pods "%s" not found' % name))
            if o["metadata"].get("deletionTimestamp"):
                return self.send_json(409, status(409, "Conflict", "pod %s is being deleted" % name))
            if o.get("spec", {}).get("nodeName"):
                return self.send_json(409, status(409, "Conflict", 'pod %s is already assigned to node "%s"' %
                                                  (name, o["spec"]["nodeName"])))
            new = copy.deepcopy(o)
            new.setdefault("spec", {})["nodeName"] = binding.get("target", {}).get("name", "")
            new["metadata"].setdefault("annotations", {}).update((binding.get("metadata") or {}).get("annotations") or {})
            new.setdefault("status", {}).setdefault("conditions", []).append({"type": "PodScheduled", "status": "True"})
            s.put("pods", new)
        self.send_json(201, {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})

    def do_POST(self):
        body = self.read_body()
        if self.faults("POST"):
            return
        kind, name, q = self.route()
        if kind in RESOURCE_KINDS and not name:
            return self.write_resource(kind, None, body)
        if kind != "pods":
            return self.send_json(404, status(404, "NotFound", "stand-in: POST pods only"))
        obj = json.loads(body)
        if urllib.parse.urlparse(self.path).path.endswith("/binding") and name:
            return self.bind(name, obj)
        self.send_json(201, self.store.put("pods", obj))

    def do_PUT(self):
        body = self.read_body()
        if self.faults("PUT"):
            return
        kind, name, q = self.route()
        if kind not in RESOURCE_KINDS or not name:
            return self.send_json(404, status(404, "NotFound", "stand-in: PUT resource.k8s.io objects only"))
        self.write_resource(kind, name, body)

    def do_DELETE(self):
        self.read_body()
        if self.faults("DELETE"):
            return
        kind, name, q = self.route()
        s = self.store
        if kind not in RESOURCE_KINDS or not name:
            return self.send_json(404, status(404, "NotFound", "stand-in: DELETE resource.k8s.io objects only"))
        with s.lock:
            if name not in s.objs[kind]:
                return self.send_json(404, status(404, "NotFound", '%s "%s" not found' % (kind, name)))
            s.delete(kind, name)
        self.send_json(200, status(200, "", "deleted") | {"status": "Success"})

    def write_resource(self, kind, name, body):
        """POST (name None) or PUT of a resource.k8s.io object, checked as kube-apiserver checks it."""
        s = self.store
        try:
            obj = json.loads(body)
        except ValueError as e:
            return self.send_json(400, status(400, "BadRequest", str(e)))
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            return self.send_json(400, status(400, "BadRequest", "not an object with metadata"))
        if kind == "resourceslices":
            obj = dra_validation.drop_disabled(dra_validation.to_v1(obj), s.gates)
            errs = dra_validation.validate_slice(obj)
            if errs:
                with s.lock:
                    s.rejected.append((self.path, errs))
                return self.send_json(422, status(422, "Invalid", 'ResourceSlice "%s" is invalid: %s' %
                                                  (obj["metadata"].get("name"), "; ".join(errs))))
            for d in (obj.get("spec") or {}).get("devices") or []:  # 1.36 stamps a taint that has no time
                for t in d.get("taints") or []:
                    t.setdefault("timeAdded", now())
        obj["apiVersion"] = "resource.k8s.io/v1"
        obj["kind"] = KIND_NAMES[kind]
        if kind == "resourceclaims":
            claim_defaults(obj)
        if kind == "resourceclaims" and name:
            obj["metadata"].setdefault("namespace", name.split("/")[0])
        with s.lock:
            key = s.key(kind, obj)
            have = s.objs[kind].get(key)
            if name is None and have:
                return self.send_json(409, status(409, "AlreadyExists", '%s "%s" already exists' % (kind, key)))
            if name is not None:
                if key != name:
                    return self.send_json(400, status(400, "BadRequest", "the name in the body differs"))
                if not have:
                    return self.send_json(404, status(404, "NotFound", '%s "%s" not found' % (kind, key)))
                rv = obj["metadata"].get("resourceVersion")
                if rv and rv != have["metadata"]["resourceVersion"]:
                    return self.send_json(409, status(409, "Conflict", "the object has been modified"))
                obj["metadata"]["uid"] = have["metadata"]["uid"]
                # as the real server keeps them: the creation time, and a generation bumped by a spec change
                obj["metadata"]["creationTimestamp"] = have["metadata"].get("creationTimestamp")
                obj["metadata"]["generation"] = have["metadata"].get("generation", 1) + \
                    (obj.get("spec") != have.get("spec"))
            else:
                obj["metadata"]["uid"] = str(uuid.uuid4())
                obj["metadata"]["creationTimestamp"] = now()
                obj["metadata"]["generation"] = 1
            stored = s.put(kind, obj)
        self.send_json(201 if name is None else 200, self.out(kind, stored))


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        """A client killed mid-request (the DRA kill tests) is not the stand-in's error."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


class StandIn:
    def __init__(self):
        self.store = Store()
        handler = type("H", (Handler,), {"store": self.store})
        self.httpd = Server(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.store.stopping = True
        self.httpd.shutdown()
        self.httpd.server_close()

    def kubeconfig(self, path, token="stand-in-token"):
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "standin",
               "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
               "contexts": [{"name": "standin", "context": {"cluster": "standin", "user": "u"}}],
               "users": [{"name": "u", "user": {"token": token}}]}
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path
