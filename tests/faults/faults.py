# SPDX-License-Identifier: Apache-2.0
"""Fault injection on the node agent's fractional path (issue 14, docs/sharing.md "Crash safety").

The real `gpuslice node` on the simulated seed node (8 x P40, 24 GiB, 96 memory units per GPU) with
the gpuslice profile, driven by the grpcio kubelet stand-in (tests/integration/kubelet_standin.py)
the way kubelet admits pods: one container at a time, per resource (core and memory in a random
order, or one whole GPU) GetPreferredAllocation over what kubelet's books list as available, then
Allocate with exactly the agent's answer. PodResources lists every container as soon as a resource
of it is allocated. Pods end at random.

The agent is SIGKILLed at named points, then restarted on the same state dir:
  after-preferred      from outside, after a GetPreferredAllocation answer, before its Allocate
  between-halves       from outside, after a container's first half, before its second
  whole-allocate       from outside, right after a whole-GPU Allocate
  idle                 from outside, between two containers
  preferred-journaled  inside GetPreferredAllocation, the proposal journaled, the answer not sent
  allocate-journaled   inside Allocate, the grant journaled, limits dir not written, no answer
  allocate-dir-written inside Allocate, limits dir written, the answer not sent
The last three cannot be hit from outside reliably (the window is microseconds), so the agent has a
crash point for them: $GPUSLICE_CRASH_AT=<point>:<n> (n-th time), set only for that agent's life.
A container whose call met a dead agent is, at random, either failed by the stand-in (its IDs freed,
as kubelet 1.20 fails the admission) or continued after the restart (the remaining calls retried).

After every restart (once the agent has registered) and at the end the stand-in checks what it holds:
  over-committed GPUs   per GPU, the live limits files' core shares sum above 100 or memory above
                        the GPU's, or a GPU held whole also has a live fractional container
  looser limits files   a live container's limits file grants more than kubelet gave it (core over
                        its core IDs, memory over its memory IDs or unlimited)
  split containers      a container's two answers name different limits dirs, or its core and
                        memory IDs are on different GPUs, or its limits file names another GPU
  refused pairs         a container's second half refused although the stand-in followed the
                        agent's preferences (avoidable: a GPU had room for both at its first half)
  first halves refused  for room (avoidable: a GPU not held whole had room for both, by the
                        stand-in's books)
  violations            "fractional invariant violated" in the agent's own logs
Usage:
  faults.py --build DIR --source DIR --topology FILE [--kills N] [--seed S] [--max-seconds T]
  FAULTS_KEEP_LOGS=DIR keeps the agent's debug logs (one per life; the decision lines), FAULTS_TRACE=1
  prints every admitted container and the room the stand-in saw at each first half.
Exit 0 when over-commit, looser files, split containers and violations are all zero (refused pairs
are reported); the seed is printed for reproduction.
"""

import os
import random
import shutil
import signal
import sys
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import kubelet_standin  # noqa: E402
import test_share  # noqa: E402
import runner  # noqa: E402  (tests/runner.py, on the path through test_share's agent_fixture)

WHOLE = "nvidia.com/gpu"
CORE = "gpuslice.io/gpu-core"
MEM = "gpuslice.io/gpu-memory"
UNIT = 256 << 20
GPU_MEM = 24 << 30
# Container shapes (core %, memory units), repeated as a Deployment's replicas would be.
SHAPES = [(10, 4), (20, 8), (25, 24), (30, 12), (50, 40), (15, 6), (40, 16), (20, 20), (5, 2), (35, 30)]
OUTSIDE = ["after-preferred", "between-halves", "whole-allocate", "idle"]
INSIDE = ["preferred-journaled", "allocate-journaled", "allocate-dir-written"]
DEAD_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED,
              grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}


class Dead(Exception):
    """The agent died under a call (or was killed by the stand-in)."""


class Refused(Exception):
    def __init__(self, res, code, details):
        super().__init__("%s: %s %s" % (res, code, details))
        self.res, self.code, self.details = res, code, details


class Ctr:
    n = 0

    def __init__(self, reqs):
        Ctr.n += 1
        self.pod = "pod-%d" % Ctr.n
        self.reqs = reqs          # [(resource, size)] in kubelet's order
        self.ids = {}             # resource -> [ids] granted
        self.resp = {}            # resource -> ContainerAllocateResponse
        self.fit_both = None      # at the first half: some GPU had room for both halves
        self.history = []         # (resource, first ID, agent life) per Allocate answer, for reports


class Faults:
    def __init__(self, args, stubs):
        self.args = args
        self.rng = random.Random(args.seed)
        self.e = test_share.Share(args, stubs)
        self.k = self.e.kubelet
        self.taken = {WHOLE: set(), CORE: set(), MEM: set()}
        self.live = []            # admitted containers
        self.stats = dict(kills=0, pods=0, whole=0, pairs=0, refused_first=0, refused_pairs=0,
                          refused_avoidable=0, refused_first_avoidable=0, overcommit=0, looser=0, split=0, checks=0, violations=0,
                          failed_by_kubelet=0, retried=0)
        self.law_since = 0.0
        self.events = []
        self.points = {}          # kill point -> times hit
        self.killed = False       # the current agent was SIGKILLed by the stand-in

    # ---- the agent ----

    def start(self, crash=None):
        if crash:
            self.e.env["GPUSLICE_CRASH_AT"] = crash
        else:
            self.e.env.pop("GPUSLICE_CRASH_AT", None)
        n = len(self.k.registrations)
        self.killed = False
        t0 = time.monotonic()
        self.e.profile = "gpuslice"
        self.e.core, self.e.mem, self.e.unit = CORE, MEM, UNIT
        self.e.start_agent("--resource-profile", "gpuslice", "--interposer", self.e.interposer)
        self.k.wait_for(lambda: len(self.k.registrations) >= n + 3, 30, "three registrations")
        eps = [test_share.endpoint(r) for r in (WHOLE, CORE, MEM)]
        self.k.wait_for(lambda: all(any(m[1] == ep and m[0] >= t0 for m in self.k.law) for ep in eps), 30,
                        "a ListAndWatch message from every resource after the start")
        self.law_since = t0

    def kill(self, point=None):
        self.stats["kills"] += 1
        if point:
            self.points[point] = self.points.get(point, 0) + 1
        self.e.kill_agent(signal.SIGKILL)
        self.killed = True

    def restart(self, point="idle"):
        if self.e.agent and self.e.agent.poll() is None:
            self.kill(point)
        elif self.killed:  # killed from outside already (and counted)
            pass
        else:  # a crash point fired
            self.stats["kills"] += 1
            crash = self.e.env.get("GPUSLICE_CRASH_AT", "?").split(":")[0]
            self.points[crash] = self.points.get(crash, 0) + 1
            self.e.agent.wait(10)
        self.k.restart()
        self.start()
        self.check("after restart")

    def alive(self):
        return self.e.agent is not None and self.e.agent.poll() is None

    # ---- kubelet's side ----

    def devices(self, res):
        ep = test_share.endpoint(res)
        with self.k.cond:
            msgs = [m for m in self.k.law if m[1] == ep and m[0] >= self.law_since]
            return {d.ID: d.health for d in msgs[-1][2].devices} if msgs else {}

    def available(self, res):
        return sorted(i for i, h in self.devices(res).items() if h == "Healthy" and i not in self.taken[res])

    def call(self, res, fn):
        try:
            return fn()
        except grpc.RpcError as err:
            # a SIGKILLed agent drops the connection; give the process a moment to be gone
            for _ in range(8 if err.code() in DEAD_CODES else 1):
                if not self.alive():
                    raise Dead() from err
                time.sleep(0.05)
            raise Refused(res, err.code(), err.details()) from err

    def prefer(self, res, size):
        return self.call(res, lambda: self.e.prefer_r(res, self.available(res), size))

    def allocate(self, res, ids):
        def go():
            req = self.e.pb.AllocateRequest()
            req.container_requests.add(devices_ids=ids)
            return self.e.stub_of(res).Allocate(req, timeout=5).container_responses[0]
        return self.call(res, go)

    def podres_update(self):
        pods = []
        for c in self.live:
            for res, ids in c.ids.items():
                pods.append(("default", c.pod, "main", res, list(ids)))
        with self.k.cond:
            self.k.pods = pods

    def release(self, c):
        for res, ids in c.ids.items():
            self.taken[res].difference_update(ids)
        if c in self.live:
            self.live.remove(c)
        self.podres_update()

    def fit_both(self, core, mem):
        def free(res):
            out = {}
            for i in self.available(res):
                out[i.split("::")[0]] = out.get(i.split("::")[0], 0) + 1
            return out
        fc, fm = free(CORE), free(MEM)
        # not a GPU the stand-in holds whole (the agent's ListAndWatch saying so may not have arrived yet)
        whole = set(self.taken[WHOLE])
        room = [g[4:8] for g in fc if g not in whole and fc.get(g, 0) >= core and fm.get(g, 0) >= mem]
        if room and os.environ.get("FAULTS_TRACE"):
            print("room for (%d, %d): %s; free %s" % (core, mem, room,
                                                     sorted((g[4:8], fc.get(g, 0), fm.get(g, 0)) for g in fc)))
        return bool(room)

    def admit(self, c, plan=None):
        """Admit one container; plan names an outside kill to perform in it. Raises Dead."""
        frac = [r for r, _ in c.reqs if r != WHOLE]
        if c not in self.live:
            self.live.append(c)
        for res, size in c.reqs:
            if res in c.ids:
                continue
            if res != WHOLE and not c.ids and len(frac) == 2:
                c.fit_both = self.fit_both(*[s for r, s in sorted(c.reqs)])
            second = res != WHOLE and any(r in c.ids for r in frac)
            try:
                ids = self.prefer(res, size)
                if len(ids) != size:
                    raise AssertionError("preferred %d IDs of %s, wanted %d" % (len(ids), res, size))
                if plan == "after-preferred":
                    self.kill(plan)
                    raise Dead()
                resp = self.allocate(res, ids)
            except Refused as r:
                self.events.append("refused %s %s%s%s: %s %s" % (c.pod, res, " (second half)" if second else "",
                                                                 " (a GPU had room for both)" if c.fit_both else "",
                                                                 r.details, c.history))
                if second:
                    self.stats["refused_pairs"] += 1
                    if c.fit_both:
                        self.stats["refused_avoidable"] += 1
                else:
                    self.stats["refused_first"] += 1
                    if c.fit_both and res != WHOLE:
                        self.stats["refused_first_avoidable"] += 1
                self.release(c)
                return False
            c.ids[res], c.resp[res] = ids, resp
            dirs = [m.host_path.split("/")[-2][-8:] for m in resp.mounts if m.container_path == "/run/gpuslice/limits"]
            c.history.append((res.split("/")[1], ids[0][4:8] + ids[0].split("::")[-1], len(self.e.logs) - 1, dirs))
            self.taken[res].update(ids)
            self.podres_update()
            if plan == "between-halves" and res != WHOLE and len(c.ids) == 1 and len(frac) == 2:
                self.kill(plan)
                raise Dead()
            if plan == "whole-allocate" and res == WHOLE:
                self.kill(plan)
                raise Dead()
        self.stats["pods"] += 1
        self.stats["whole" if WHOLE in c.ids else "pairs"] += 1
        if os.environ.get("FAULTS_TRACE"):
            print("admitted %s %s" % (c.pod, c.history))
        return True

    def new_ctr(self):
        if self.rng.random() < 0.15:
            return Ctr([(WHOLE, 1)])
        core, mem = self.rng.choice(SHAPES)
        reqs = [(CORE, core), (MEM, mem)]
        self.rng.shuffle(reqs)
        return Ctr(reqs)

    def admit_through(self, c, plan=None):
        """Admit c; when the agent dies under it, restart it and either continue or fail c."""
        while True:
            try:
                return self.admit(c, plan)
            except Dead:
                plan = None
                self.restart()
                if self.rng.random() < 0.5:
                    self.stats["failed_by_kubelet"] += 1
                    self.release(c)
                    return False
                self.stats["retried"] += 1

    def churn(self):
        # Pods end at random, but not the one admitted last: a container lives at least until
        # kubelet admits the next one (see docs/sharing.md, "What stays ambiguous").
        for c in list(self.live[:-1]):
            if self.rng.random() < 0.12:
                self.release(c)

    # ---- checks ----

    def limits_of(self, c):
        paths = set()
        for res, resp in c.resp.items():
            if res == WHOLE:
                continue
            for m in resp.mounts:
                if m.container_path == "/run/gpuslice/limits":
                    paths.add(m.host_path)
        return paths

    def check(self, when):
        self.stats["checks"] += 1
        core_sum, mem_sum, whole_gpus, frac_gpus = {}, {}, set(), set()
        seen_files = set()
        for c in self.live:
            if not all(r in c.ids for r, _ in c.reqs):
                continue  # still being admitted: its container does not exist yet
            if WHOLE in c.ids:
                whole_gpus.update(c.ids[WHOLE])
                continue
            gpus = {i.split("::")[0] for ids in c.ids.values() for i in ids}
            paths = self.limits_of(c)
            if len(gpus) != 1 or len(paths) != 1:
                self.stats["split"] += 1
                self.events.append("%s: %s split: GPUs %s, limits %s, history %s" %
                                   (when, c.pod, sorted(gpus), sorted(p.split("/")[-2] for p in paths), c.history))
                continue
            gpu, path = gpus.pop(), paths.pop()
            frac_gpus.add(gpu)
            try:
                lim = test_share.parse_limits(open(path).read())
            except (OSError, AssertionError) as err:
                self.stats["looser"] += 1
                self.events.append("%s: %s: limits file unreadable: %s" % (when, c.pod, err))
                continue
            devs = lim["devices"]
            if len(devs) != 1 or devs[0].get("uuid") != gpu:
                self.stats["split"] += 1
                self.events.append("%s: %s: limits file names %s, IDs are on %s" % (when, c.pod, devs, gpu))
                continue
            d = devs[0]
            core, mem = d.get("core", 100), d.get("memory", 0)
            want_core, want_mem = len(c.ids.get(CORE, [])), len(c.ids.get(MEM, [])) * UNIT
            if core > want_core or mem == 0 or mem > want_mem:
                self.stats["looser"] += 1
                self.events.append("%s: %s: limits core=%s memory=%s, granted core=%d memory=%d" %
                                   (when, c.pod, core, mem, want_core, want_mem))
            if path not in seen_files:
                seen_files.add(path)
                core_sum[gpu] = core_sum.get(gpu, 0) + core
                mem_sum[gpu] = mem_sum.get(gpu, 0) + (mem or GPU_MEM)
        over = {g for g in core_sum if core_sum[g] > 100 or mem_sum[g] > GPU_MEM} | (whole_gpus & frac_gpus)
        if over:
            self.stats["overcommit"] += len(over)
            self.events.append("%s: over-committed GPUs %s (core %s)" % (when, sorted(over), core_sum))

    def violations(self):
        n = 0
        for log in self.e.logs:
            with open(log, errors="replace") as f:
                n += f.read().count("fractional invariant violated")
        return n

    # ---- the run ----

    def run(self):
        t_end = time.monotonic() + self.args.max_seconds
        self.start()
        while self.stats["kills"] < self.args.kills and time.monotonic() < t_end:
            point = self.rng.choice(OUTSIDE + INSIDE)
            if point in INSIDE:
                self.e.kill_agent(signal.SIGKILL)  # not counted: the crash point's death is
                self.k.restart()
                self.start(crash="%s:%d" % (point, self.rng.randint(1, 3)))
                for _ in range(20):
                    if not self.alive():
                        break
                    self.admit_through(self.new_ctr())
                    self.churn()
                if self.alive():  # the point was not reached (e.g. only whole GPUs asked)
                    self.restart("idle")
                continue
            for j in range(self.rng.randint(0, 3)):
                self.admit_through(self.new_ctr())
            if point == "idle":
                self.restart()
            else:
                c = self.new_ctr()
                if point == "whole-allocate":
                    c = Ctr([(WHOLE, 1)])
                elif WHOLE in dict(c.reqs):
                    c = Ctr([(CORE, 20), (MEM, 8)])
                self.admit_through(c, point)
            self.churn()
            self.podres_update()
        self.check("end")
        self.stats["violations"] = self.violations()


ARGUMENTS = runner.WITH_TOPOLOGY + [
    ("--kills", {"type": int, "default": 30}),
    ("--seed", {"type": int, "default": None}),
    ("--max-seconds", {"type": float, "default": 80}),
]


def faults(args):
    """The one test of this file: the run, its figures, and a failure when an invariant broke."""
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "little")
    print("faults: seed %d, %d kills at most, %.0f s at most" % (args.seed, args.kills, args.max_seconds))
    sys.stdout.flush()
    f = None
    failed = True
    t0 = time.monotonic()
    try:
        stubs = kubelet_standin.load_stubs(args.build)
        f = Faults(args, stubs)
        f.run()
        s = f.stats
        # Refused pairs are reported, not failed on: the first half's GPU is chosen before the
        # partner's size is known (docs/sharing.md, "Placement"), so a first occurrence of a shape
        # can still be refused; over-commit, looser files, split containers and violations never may.
        bad = s["overcommit"] + s["looser"] + s["split"] + s["violations"]
        for ev in f.events[-30:]:
            print("  " + ev)
        print("faults: %d kills, %d containers admitted (%d pairs, %d whole), %d checks in %.0f s" %
              (s["kills"], s["pods"], s["pairs"], s["whole"], s["checks"], time.monotonic() - t0))
        print("faults: over-committed GPUs %d, looser limits files %d, split containers %d, refused pairs %d "
              "(avoidable %d), first halves refused for room %d (avoidable %d), invariant violations %d" %
              (s["overcommit"], s["looser"], s["split"], s["refused_pairs"], s["refused_avoidable"],
               s["refused_first"], s["refused_first_avoidable"], s["violations"]))
        print("faults: kills by point: %s" % ", ".join("%s %d" % kv for kv in sorted(f.points.items())))
        print("faults: containers met a dead agent: %d failed by kubelet, %d continued after the restart" %
              (s["failed_by_kubelet"], s["retried"]))
        if s["kills"] < min(args.kills, 10):
            print("faults: too few kills (%d)" % s["kills"])
            bad += 1
        failed = bad > 0
        if failed:
            raise AssertionError("faults: %d invariant failures (seed %d)" % (bad, args.seed))
    finally:
        if f:
            keep = os.environ.get("FAULTS_KEEP_LOGS")
            if keep:  # the agent's debug logs, for reading its decision lines
                os.makedirs(keep, exist_ok=True)
                for log in f.e.logs:
                    shutil.copy(log, keep)
                print("faults: agent logs kept in %s" % keep)
            f.e.close(failed)


if __name__ == "__main__":
    # tests/runner.py: one test, in its own process, under a timeout a little above --max-seconds
    _ap = runner.parser(ARGUMENTS).parse_known_args()[0]
    runner.main({"faults": faults}, label="", timeout_s=int(_ap.max_seconds) + 120, arguments=ARGUMENTS)
