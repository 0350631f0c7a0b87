// SPDX-License-Identifier: Apache-2.0
// The DeviceClass and claim selectors of deploy/dra evaluated with a real CEL implementation
// (@bufbuild/cel, vendored in vendor/) against the devices the DRA driver published, with the variables
// Kubernetes' DRA CEL environment documents (resource.k8s.io/v1 CELDeviceSelector): device.driver,
// device.attributes[domain].name, device.capacity[domain].name, device.allowMultipleAllocations.
// Kubernetes' quantity() and semver() libraries are given as CEL functions here (quantities as exact
// integers, versions as {major, minor, patch}); an attribute without a domain is in the driver's.
//
// Then every example claim is allocated as the scheduler does without scoring: its requests in order, each
// device the first one (in the slices' order) that every selector of the class and the request accepts,
// whose requested capacity fits (rounded up by the capacity's request policy), and that keeps every
// matchAttribute constraint, backtracking when a later request cannot be met.
//
// Input (stdin): {driver, devices: [v1 Device + "driver"], classes: {name: [expression]},
//                 claims: [{name, requests: [{name, deviceClassName, selectors, count, capacity}],
//                           constraints: [{requests, matchAttribute}]}]}
// Output (stdout): {classes: {name: [device names]}, claims: {name: null | [{request, device, consumed}]},
//                   errors: [text]}
import { CelScalar, celFunc, celMethod, isCelError, mapType, run } from "@bufbuild/cel";
import { readFileSync } from "node:fs";

const input = JSON.parse(readFileSync(0, "utf8"));
const errors = [];

// ---- Kubernetes' quantity and semver, as CEL functions ----

const BIN = { Ki: 10n, Mi: 20n, Gi: 30n, Ti: 40n, Pi: 50n, Ei: 60n };
const DEC = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

function quantity(s) {
  const m = /^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$/.exec(String(s));
  if (!m) throw new Error(`not a quantity: ${s}`);
  const [whole, frac = ""] = m[2].split(".");
  let num = BigInt((whole || "0") + frac);
  let den = 10n ** BigInt(frac.length);
  const suf = m[3] || "";
  if (suf in BIN) num <<= BIN[suf];
  else {
    const e = suf in DEC ? DEC[suf] : Number(suf.slice(1));
    if (e >= 0) num *= 10n ** BigInt(e);
    else den *= 10n ** BigInt(-e);
  }
  const v = (num + den - 1n) / den;
  return m[1] === "-" ? -v : v;
}

const VERSION = mapType(CelScalar.STRING, CelScalar.INT);
function semver(s) {
  const m = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:[-+].*)?$/.exec(s);
  if (!m) throw new Error(`not a semver: ${s}`);
  return new Map([["major", BigInt(m[1])], ["minor", BigInt(m[2])], ["patch", BigInt(m[3])]]);
}
function cmpVersion(a, b) {
  for (const k of ["major", "minor", "patch"]) {
    if (a.get(k) < b.get(k)) return -1n;
    if (a.get(k) > b.get(k)) return 1n;
  }
  return 0n;
}
const cmpInt = (a, b) => (a < b ? -1n : a > b ? 1n : 0n);

const funcs = [
  celFunc("quantity", [CelScalar.STRING], CelScalar.INT, (s) => quantity(s)),
  celMethod("compareTo", CelScalar.INT, [CelScalar.INT], CelScalar.INT, function (o) { return cmpInt(this, o); }),
  celMethod("isGreaterThan", CelScalar.INT, [CelScalar.INT], CelScalar.BOOL, function (o) { return this > o; }),
  celMethod("isLessThan", CelScalar.INT, [CelScalar.INT], CelScalar.BOOL, function (o) { return this < o; }),
  celFunc("semver", [CelScalar.STRING], VERSION, (s) => semver(s)),
  celMethod("compareTo", VERSION, [VERSION], CelScalar.INT, function (o) { return cmpVersion(this, o); }),
  celMethod("isGreaterThan", VERSION, [VERSION], CelScalar.BOOL, function (o) { return cmpVersion(this, o) > 0n; }),
  celMethod("isLessThan", VERSION, [VERSION], CelScalar.BOOL, function (o) { return cmpVersion(this, o) < 0n; }),
];

// ---- the CEL variable "device" ----

function split(name, driver) {
  const i = name.indexOf("/");
  return i < 0 ? [driver, name] : [name.slice(0, i), name.slice(i + 1)];
}

function celDevice(d) {
  const attrs = new Map(), caps = new Map();
  for (const [k, a] of Object.entries(d.attributes || {})) {
    const [dom, id] = split(k, d.driver);
    if (!attrs.has(dom)) attrs.set(dom, new Map());
    let v;
    if ("int" in a) v = BigInt(a.int);
    else if ("bool" in a) v = a.bool;
    else if ("string" in a) v = a.string;
    else v = semver(a.version);
    attrs.get(dom).set(id, v);
  }
  for (const [k, c] of Object.entries(d.capacity || {})) {
    const [dom, id] = split(k, d.driver);
    if (!caps.has(dom)) caps.set(dom, new Map());
    caps.get(dom).set(id, quantity(c.value));
  }
  return { driver: d.driver, attributes: attrs, capacity: caps,
           allowMultipleAllocations: d.allowMultipleAllocations === true };
}

const devices = input.devices.map((d) => ({ raw: d, cel: celDevice(d) }));

function matches(dev, exprs) {
  for (const e of exprs) {
    const r = run(e, { device: dev.cel }, { funcs });
    if (isCelError(r)) {
      // an unknown domain or attribute is an error for that device (the scheduler stops with an error; a
      // robust expression checks first): the device is not selected, and the error is reported
      errors.push(`${dev.raw.name}: ${e}: ${r.message}`);
      return false;
    }
    if (r !== true) return false;
  }
  return true;
}

// ---- classes ----

const classes = {};
for (const [name, exprs] of Object.entries(input.classes)) {
  classes[name] = devices.filter((d) => matches(d, exprs)).map((d) => d.raw.name);
}

// ---- claims ----

// What a request consumes of a shared device's capacity: the request, or the policy's default when absent,
// rounded up to the policy's valid range; null when it does not fit.
function consume(dev, capReq) {
  const out = {};
  for (const [k, c] of Object.entries(dev.raw.capacity || {})) {
    const total = quantity(c.value);
    const pol = c.requestPolicy;
    let want = capReq && k in capReq ? quantity(capReq[k]) : pol && pol.default !== undefined ? quantity(pol.default) : total;
    if (pol && pol.validRange) {
      const min = quantity(pol.validRange.min);
      if (want < min) want = min;
      if (pol.validRange.step !== undefined) {
        const step = quantity(pol.validRange.step);
        want = min + ((want - min + step - 1n) / step) * step;
      }
      if (pol.validRange.max !== undefined && want > quantity(pol.validRange.max)) return null;
    }
    if (want > total) return null;
    out[k] = want;
  }
  for (const k of Object.keys(capReq || {})) if (!(k in out)) return null;
  return out;
}

function attr(dev, name) {
  const [dom, id] = split(name, dev.raw.driver);
  const m = dev.cel.attributes.get(dom);
  if (!m || !m.has(id)) return undefined;
  const v = m.get(id);
  return v instanceof Map ? `${v.get("major")}.${v.get("minor")}.${v.get("patch")}` : String(v);
}

function allocate(claim) {
  const slots = [];
  for (const r of claim.requests) {
    const exprs = [...(input.classes[r.deviceClassName] || ["false"]), ...(r.selectors || [])];
    const cands = devices.filter((d) => matches(d, exprs));
    for (let i = 0; i < (r.count || 1); i++) slots.push({ request: r.name, cands, capReq: r.capacity });
  }
  const chosen = [];
  const used = new Set();
  const constraints = claim.constraints || [];
  function ok(slot, dev) {
    for (const c of constraints) {
      if (c.requests && !c.requests.includes(slot.request)) continue;
      const v = attr(dev, c.matchAttribute);
      if (v === undefined) return false;
      for (const p of chosen) {
        if (c.requests && !c.requests.includes(p.request)) continue;
        if (attr(p.dev, c.matchAttribute) !== v) return false;
      }
    }
    return true;
  }
  function place(i) {
    if (i === slots.length) return true;
    const s = slots[i];
    for (const dev of s.cands) {
      if (used.has(dev.raw.name) && !dev.cel.allowMultipleAllocations) continue;
      if (!ok(s, dev)) continue;
      const consumed = dev.cel.allowMultipleAllocations ? consume(dev, s.capReq) : {};
      if (consumed === null) continue;
      used.add(dev.raw.name);
      chosen.push({ request: s.request, dev, consumed });
      if (place(i + 1)) return true;
      chosen.pop();
      used.delete(dev.raw.name);
    }
    return false;
  }
  if (!place(0)) return null;
  return chosen.map((c) => ({ request: c.request, device: c.dev.raw.name,
                              consumed: Object.fromEntries(Object.entries(c.consumed).map(([k, v]) => [k, v.toString()])) }));
}

const claims = {};
for (const c of input.claims) claims[c.name] = allocate(c);
process.stdout.write(JSON.stringify({ classes, claims, errors }));
