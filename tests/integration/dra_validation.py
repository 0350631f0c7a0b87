# SPDX-License-Identifier: Apache-2.0
"""The resource.k8s.io rules the API server applies to what a DRA driver writes, for the API stand-in
(kube_standin.py) and the DRA tests: ResourceSlice validation as kube-apiserver 1.36 does it
(pkg/apis/resource/validation: ValidateResourceSlice and what it calls), the fields it drops when a
feature gate is off (the registry strategy's dropDisabledFields), and the Kubernetes quantity and
semver grammars. Written from the upstream sources named in docs/dra.md, independently of the C code
it checks: a slice the driver publishes must pass here or the stand-in answers 422 like the real
server.
"""
import copy
import re

MAX_DEVICES = 128
MAX_DEVICES_TAINTS_OR_COUNTERS = 64
MAX_ATTRS_AND_CAPS = 32
MAX_ATTR_VALUE = 64
MAX_COUNTER_SETS = 8
MAX_COUNTERS = 32
MAX_CONSUMPTIONS = 2
MAX_TAINTS = 16
MAX_VALID_VALUES = 10
POOL_NAME_MAX = 253
DRIVER_MAX = 63
ID_MAX = 32

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NUM = r"(0|[1-9]\d*)"
_PRE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
SEMVER = re.compile(r"^" + _NUM + r"\." + _NUM + r"\." + _NUM + r"(-" + _PRE + r"(\." + _PRE + r")*)?" +
                    r"(\+" + _BUILD + r"(\." + _BUILD + r")*)?$")
_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_BIN = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DEC = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def quantity(s):
    """A Kubernetes quantity as an exact integer, rounded up like Quantity.Value(); ValueError if it is
    not one."""
    if not isinstance(s, str):
        if isinstance(s, int) and not isinstance(s, bool):
            return s
        raise ValueError("not a quantity: %r" % (s,))
    m = _QUANTITY.match(s)
    if not m:
        raise ValueError("not a quantity: %r" % s)
    sign, num, suffix = m.group(1), m.group(2), m.group(3) or ""
    whole, _, frac = num.partition(".")
    mant = int((whole or "0") + frac)
    scale = len(frac)
    if suffix in _BIN:
        num_, den = mant << _BIN[suffix], 10 ** scale
    else:
        e = _DEC[suffix] if suffix in _DEC else int(suffix[1:])
        e -= scale
        num_, den = (mant * 10 ** e, 1) if e >= 0 else (mant, 10 ** -e)
    v = -(-num_ // den)
    return -v if sign == "-" else v


def dns_label(s):
    return isinstance(s, str) and 0 < len(s) <= 63 and bool(_DNS_LABEL.match(s))


def dns_subdomain(s):
    return isinstance(s, str) and 0 < len(s) <= 253 and bool(_DNS_SUBDOMAIN.match(s))


def driver_name(s):
    """ValidateCSIDriverName: at most 63, a DNS subdomain once lowercased."""
    return isinstance(s, str) and 0 < len(s) <= DRIVER_MAX and bool(_DNS_SUBDOMAIN.match(s.lower()))


def c_identifier(s):
    return 0 < len(s) <= ID_MAX and bool(_C_ID.match(s))


def qualified_name(s):
    if not isinstance(s, str) or not s:
        return False
    parts = s.split("/")
    if len(parts) == 1:
        return c_identifier(parts[0])
    if len(parts) == 2:
        return bool(parts[0]) and driver_name(parts[0]) and bool(parts[1]) and c_identifier(parts[1])
    return True  # upstream leaves "a/b/c" unchecked (a TODO in validateQualifiedName)


def pool_name(s):
    return isinstance(s, str) and 0 < len(s) <= POOL_NAME_MAX and all(dns_subdomain(p) for p in s.split("/"))


def label_name(s):
    """metav1 ValidateLabelName: [prefix/]name, name <= 63 of [A-Za-z0-9._-] starting and ending alnum."""
    if not isinstance(s, str) or not s:
        return False
    prefix, _, name = s.rpartition("/")
    if prefix and not dns_subdomain(prefix):
        return False
    return 0 < len(name) <= 63 and bool(re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", name))


# ---- feature gates: what the server drops before validating ----

GATES_1_36 = {"DRAConsumableCapacity": True, "DRAPartitionableDevices": True, "DRADeviceTaints": True}
GATES_1_34 = {"DRAConsumableCapacity": False, "DRAPartitionableDevices": False, "DRADeviceTaints": False}


def drop_disabled(slice_, gates):
    """The fields a server with these gates off silently drops from a slice it stores."""
    spec = slice_.get("spec", {})
    if not gates.get("DRAPartitionableDevices", True):
        for k in ("sharedCounters", "perDeviceNodeSelection"):
            spec.pop(k, None)
    for d in spec.get("devices") or []:
        if not gates.get("DRAConsumableCapacity", True):
            d.pop("allowMultipleAllocations", None)
            for c in (d.get("capacity") or {}).values():
                if isinstance(c, dict):
                    c.pop("requestPolicy", None)
        if not gates.get("DRAPartitionableDevices", True):
            for k in ("consumesCounters", "nodeName", "nodeSelector", "allNodes"):
                d.pop(k, None)
        if not gates.get("DRADeviceTaints", True):
            d.pop("taints", None)
    return slice_


# ---- v1beta1 wraps a device's fields in "basic" ----

def to_v1(slice_):
    out = copy.deepcopy(slice_)
    for d in out.get("spec", {}).get("devices") or []:
        basic = d.pop("basic", None)
        if isinstance(basic, dict):
            d.update(basic)
    return out


def from_v1(slice_, version):
    out = copy.deepcopy(slice_)
    out["apiVersion"] = "resource.k8s.io/" + version
    if version == "v1beta1":
        devs = []
        for d in out.get("spec", {}).get("devices") or []:
            name = d.pop("name", None)
            devs.append({"name": name, "basic": d})
        if "devices" in out.get("spec", {}):
            out["spec"]["devices"] = devs
    return out


# ---- validation ----

def _policy(errs, path, value, pol):
    vv, rng, dflt = pol.get("validValues"), pol.get("validRange"), pol.get("default")
    if vv and rng:
        errs.append(path + ": exactly one policy can be specified")
        return
    try:
        d = quantity(dflt) if dflt is not None else None
        if vv:
            if d is None:
                errs.append(path + ".default: required when validValues is defined")
            q = [quantity(v) for v in vv]
            if len(q) > MAX_VALID_VALUES:
                errs.append(path + ".validValues: more than %d" % MAX_VALID_VALUES)
            if q != sorted(q) or len(set(q)) != len(q):
                errs.append(path + ".validValues: must be sorted ascending without duplicates")
            if any(v > value for v in q):
                errs.append(path + ".validValues: an option is larger than the capacity")
            if d is not None and d not in q:
                errs.append(path + ".validValues: default value is not valid according to the requestPolicy")
        elif rng is not None:
            if d is None:
                errs.append(path + ".default: required when validRange is defined")
                return
            if rng.get("min") is None:
                errs.append(path + ".validRange.min: required")
                return
            lo = quantity(rng["min"])
            if lo > value:
                errs.append(path + ".validRange.min: larger than the capacity")
            if d < lo:
                errs.append(path + ".validRange.min: default is less than min")
            hi = quantity(rng["max"]) if rng.get("max") is not None else None
            if hi is not None and (lo > hi or hi > value or d > hi):
                errs.append(path + ".validRange.max: out of order with min, default or the capacity")
            if rng.get("step") is not None:
                st = quantity(rng["step"])
                if st <= 0 or lo + st > value:
                    errs.append(path + ".validRange.step: one step is larger than the capacity")
                elif (d - lo) % st or (hi is not None and (hi - lo) % st):
                    errs.append(path + ".validRange.step: default or max is not a multiple of step from min")
    except ValueError as e:
        errs.append("%s: %s" % (path, e))


def _counters(errs, path, counters):
    if not isinstance(counters, dict) or not counters:
        errs.append(path + ": required")
        return
    if len(counters) > MAX_COUNTERS:
        errs.append(path + ": more than %d counters" % MAX_COUNTERS)
    for k, c in counters.items():
        if not dns_label(k):
            errs.append("%s[%s]: not a DNS label" % (path, k))
        try:
            quantity((c or {}).get("value"))
        except ValueError:
            errs.append("%s[%s].value: not a quantity" % (path, k))


def _attribute(errs, path, a):
    if not isinstance(a, dict) or sum(k in a for k in ("int", "bool", "string", "version")) != 1 or len(a) != 1:
        errs.append(path + ": exactly one value must be specified")
        return
    if "int" in a and (not isinstance(a["int"], int) or isinstance(a["int"], bool)):
        errs.append(path + ".int: not an integer")
    if "bool" in a and not isinstance(a["bool"], bool):
        errs.append(path + ".bool: not a boolean")
    for k in ("string", "version"):
        if k in a:
            v = a[k]
            if not isinstance(v, str):
                errs.append("%s.%s: not a string" % (path, k))
            elif len(v) > MAX_ATTR_VALUE:
                errs.append("%s.%s: longer than %d" % (path, k, MAX_ATTR_VALUE))
            elif k == "version" and not SEMVER.match(v):
                errs.append("%s.version: must be a string compatible with semver.org spec 2.0.0" % path)


def _device(errs, path, d):
    if not dns_label(d.get("name")):
        errs.append(path + ".name: not a DNS label")
    attrs, caps = d.get("attributes") or {}, d.get("capacity") or {}
    if len(attrs) + len(caps) > MAX_ATTRS_AND_CAPS:
        errs.append(path + ": the total number of attributes and capacities must not exceed %d" % MAX_ATTRS_AND_CAPS)
    for k, a in attrs.items():
        if not qualified_name(k):
            errs.append("%s.attributes[%s]: not a qualified name" % (path, k))
        _attribute(errs, "%s.attributes[%s]" % (path, k), a)
    multi = d.get("allowMultipleAllocations") is True
    for k, c in caps.items():
        p = "%s.capacity[%s]" % (path, k)
        if not qualified_name(k):
            errs.append(p + ": not a qualified name")
        try:
            v = quantity((c or {}).get("value"))
        except ValueError:
            errs.append(p + ".value: not a quantity")
            continue
        if (c or {}).get("requestPolicy") is not None:
            if not multi:
                errs.append(p + ".requestPolicy: allowMultipleAllocations must be true")
            else:
                _policy(errs, p + ".requestPolicy", v, c["requestPolicy"])
    taints = d.get("taints") or []
    if len(taints) > MAX_TAINTS:
        errs.append(path + ".taints: more than %d" % MAX_TAINTS)
    for i, t in enumerate(taints):
        if not label_name(t.get("key")) or t.get("effect") not in ("NoSchedule", "NoExecute", "None"):
            errs.append("%s.taints[%d]: bad key or effect" % (path, i))
    cons = d.get("consumesCounters") or []
    if len(cons) > MAX_CONSUMPTIONS:
        errs.append(path + ".consumesCounters: more than %d" % MAX_CONSUMPTIONS)
    seen = set()
    for i, c in enumerate(cons):
        if not dns_label(c.get("counterSet")):
            errs.append("%s.consumesCounters[%d].counterSet: not a DNS label" % (path, i))
        if c.get("counterSet") in seen:
            errs.append("%s.consumesCounters[%d]: duplicate" % (path, i))
        seen.add(c.get("counterSet"))
        _counters(errs, "%s.consumesCounters[%d].counters" % (path, i), c.get("counters"))
    if any(k in d for k in ("nodeName", "nodeSelector", "allNodes")):
        errs.append(path + ": nodeName, nodeSelector and allNodes need perDeviceNodeSelection")


def validate_slice(s):
    """The errors kube-apiserver would answer 422 with for this v1-shaped slice ([] when valid)."""
    errs = []
    meta, spec = s.get("metadata") or {}, s.get("spec")
    if not dns_subdomain(meta.get("name")):
        errs.append("metadata.name: not a DNS subdomain")
    if not isinstance(spec, dict):
        return errs + ["spec: required"]
    if not driver_name(spec.get("driver")):
        errs.append("spec.driver: not a DNS subdomain of at most 63 characters")
    pool = spec.get("pool") or {}
    if not pool_name(pool.get("name")):
        errs.append("spec.pool.name: invalid")
    g, n = pool.get("generation"), pool.get("resourceSliceCount")
    if not isinstance(g, int) or g < 0:
        errs.append("spec.pool.generation: must be greater than or equal to zero")
    if not isinstance(n, int) or n <= 0:
        errs.append("spec.pool.resourceSliceCount: must be greater than zero")
    sel = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if len(sel) != 1:
        errs.append("spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required")
    devices, counters = spec.get("devices"), spec.get("sharedCounters")
    if devices is not None and counters is not None:
        errs.append("spec: only one of sharedCounters or devices is allowed")
    devices = devices or []
    limit = MAX_DEVICES
    if any(d.get("taints") or d.get("consumesCounters") for d in devices):
        limit = MAX_DEVICES_TAINTS_OR_COUNTERS
    if len(devices) > limit:
        return errs + ["spec.devices: must have at most %d items" % limit]
    names = set()
    for i, d in enumerate(devices):
        _device(errs, "spec.devices[%d]" % i, d)
        if d.get("name") in names:
            errs.append("spec.devices[%d].name: duplicate" % i)
        names.add(d.get("name"))
    counters = counters or []
    if len(counters) > MAX_COUNTER_SETS:
        return errs + ["spec.sharedCounters: must have at most %d items" % MAX_COUNTER_SETS]
    seen = set()
    for i, c in enumerate(counters):
        if not dns_label(c.get("name")) or c.get("name") in seen:
            errs.append("spec.sharedCounters[%d].name: not a DNS label or duplicate" % i)
        seen.add(c.get("name"))
        _counters(errs, "spec.sharedCounters[%d].counters" % i, c.get("counters"))
    return errs


# ---- across the slices of one pool ----

def validate_pool(slices):
    """What validation.go cannot check (it sees one slice at a time) but a pool must hold for the scheduler
    to allocate from it as the driver means (KEP-4815 partitionable devices: the allocator sums what the
    allocated devices consume of each counter set of the pool and allocates a device only while the sums
    stay within the set): one generation, as many slices as resourceSliceCount, device names and counter
    set names unique in the pool, every counter set and counter a device consumes published in the pool,
    no device consuming more of a counter than its set holds. [] when it holds."""
    errs = []
    gens = {(s.get("spec") or {}).get("pool", {}).get("generation") for s in slices}
    if len(gens) != 1:
        errs.append("pool: slices of generations %s" % sorted(gens, key=str))
    counts = {(s.get("spec") or {}).get("pool", {}).get("resourceSliceCount") for s in slices}
    if counts != {len(slices)}:
        errs.append("pool: resourceSliceCount %s for %d slices" % (sorted(counts, key=str), len(slices)))
    sets, names = {}, set()
    for s in slices:
        for c in (s.get("spec") or {}).get("sharedCounters") or []:
            if c.get("name") in sets:
                errs.append("pool: counter set %s twice" % c.get("name"))
            sets[c.get("name")] = {k: quantity(v.get("value")) for k, v in (c.get("counters") or {}).items()}
    for s in slices:
        for d in (s.get("spec") or {}).get("devices") or []:
            if d.get("name") in names:
                errs.append("pool: device %s twice" % d.get("name"))
            names.add(d.get("name"))
            for c in d.get("consumesCounters") or []:
                have = sets.get(c.get("counterSet"))
                if have is None:
                    errs.append("device %s: counter set %s is not in the pool" % (d.get("name"), c.get("counterSet")))
                    continue
                for k, v in (c.get("counters") or {}).items():
                    if k not in have:
                        errs.append("device %s: counter %s/%s is not in the pool" % (d.get("name"), c["counterSet"], k))
                    elif quantity(v.get("value")) > have[k]:
                        errs.append("device %s: consumes %s of %s/%s, which holds %s" %
                                    (d.get("name"), v.get("value"), c["counterSet"], k, have[k]))
    return errs
