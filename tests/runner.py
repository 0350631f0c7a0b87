# SPDX-License-Identifier: Apache-2.0
"""The one test runner of gpuslice's Python tests (tests/, bench/'s checks, hwkit/): every script that
runs tests ends in `runner.main(...)` or `runner.run_suites(...)`, so they all follow one rule set
(libuv's test/runner.c is the model):

- selection: the test names on the command line (or, for the e2e files, $GPUSLICE_E2E_ONLY); none named
  means every registered test. A name no test has FAILS (a misspelled selection never passes green), and
  so does a selection that comes to nothing (no test registered, or an empty list named).
  A name matches a test's name, or its name without the "test_" prefix.
- isolation: `main` runs every selected test in a process of its own (this script again, with
  --runner-child NAME, in a new session), under a timeout: at timeout_s the test gets SIGALRM (a
  TimeoutError in the test, so its fixture still closes and dumps its logs); 10 s later its whole
  process group is killed and the test FAILS "killed by its timeout". `run_suites` (the e2e files, whose
  tests share one cluster that takes minutes to start) runs the tests in this process, each under the
  same SIGALRM timeout.
- one skip rule: a test raises runner.Skip (or returns 77) when a peer it needs is missing; it is
  reported SKIP, never PASS, and the run exits 77, which ctest reports as skipped (SKIP_RETURN_CODE 77,
  set on every Python test) and CI counts as not passed (scripts/run-tests.sh, GPUSLICE_REQUIRE_ALL=1).
- verdicts: one line per test, "PASS NAME (N s)", "SKIP NAME (N s): why", "FAIL NAME (N s): why";
  then "runner: N passed, N failed, N skipped"; exit 1 when any failed, else 77 when any skipped, else 0.

A test is a function; `main` calls it with the fixture make_env(args) built for it (or with the parsed
arguments when there is no fixture; args.test_name is the test's name); the fixture's close(failed) runs after it when it has one. A test
returns None (or 0) to pass, 77 to skip; an exception (AssertionError from check()) fails it.

    import runner
    runner.main({"name": fn, ...}, make_env=Env, label="agent-", timeout_s=90,
                arguments=[("--build", {"required": True}), ...])
    runner.run_suites([(setup, [test_fn, ...]), ...], names=None, timeout_s=1200)
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

SKIP_EXIT = 77
KILL_GRACE_S = 10
CHILD_FLAG = "--runner-child"


class Skip(Exception):
    """A peer the test needs is missing: SKIP, exit 77 (ctest: skipped; CI: not passed)."""


class SelectionError(Exception):
    """The selection names no test, or a test that does not exist."""


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def _short(name):
    return name[5:] if name.startswith("test_") else name


def select(known, wanted):
    """known: test names in order; wanted: None (every test) or the names asked for.
    -> the chosen names, in the order asked; raises SelectionError for an empty or unknown selection."""
    known = list(known)
    if not known:
        raise SelectionError("no test is registered: nothing to run")
    if wanted is None:
        return known
    wanted = [w for w in wanted]
    if not wanted or any(not w for w in wanted):
        raise SelectionError("an empty test name was given (known: %s)" % ", ".join(known))
    chosen, unknown = [], []
    for w in wanted:
        hits = [k for k in known if k == w or _short(k) == w]
        if not hits:
            unknown.append(w)
        for h in hits:
            if h not in chosen:
                chosen.append(h)
    if unknown:
        raise SelectionError("no test named %s (known: %s)" % (", ".join(unknown), ", ".join(known)))
    return chosen


class Tally:
    def __init__(self, label=""):
        self.label = label
        self.passed = self.failed = self.skipped = 0

    def report(self, status, name, secs, why=""):
        if status == "PASS":
            self.passed += 1
        elif status == "SKIP":
            self.skipped += 1
        else:
            status = "FAIL"
            self.failed += 1
        why = str(why).strip().replace("\n", " | ")[:600]
        print("%s %s%s (%.0f s)%s" % (status, self.label, name, secs, (": " + why) if why else ""), flush=True)

    def exit_code(self):
        print("runner: %d passed, %d failed, %d skipped" % (self.passed, self.failed, self.skipped), flush=True)
        if self.failed or not (self.passed or self.skipped):
            return 1
        return SKIP_EXIT if self.skipped else 0


def _verdict(result):
    """A test function's return value -> PASS/SKIP/FAIL."""
    if result is None or result == 0 or result is True:
        return "PASS", ""
    if result == SKIP_EXIT:
        return "SKIP", "the test returned 77"
    return "FAIL", "the test returned %r" % (result,)


def _on_alarm(timeout_s):
    def handler(signum, frame):
        raise TimeoutError("test exceeded its timeout of %d s" % timeout_s)

    return handler


def _run_one(fn, make_env, args, timeout_s):
    """In the child: fixture, test, close; -> exit status 0 / 77 / 1 (prints the reason of a skip or failure)."""
    signal.signal(signal.SIGALRM, _on_alarm(timeout_s))
    signal.alarm(timeout_s)
    env, failed, code = None, True, 1
    try:
        env = make_env(args) if make_env else args
        status, why = _verdict(fn(env))
        failed = status == "FAIL"
        code = {"PASS": 0, "SKIP": SKIP_EXIT, "FAIL": 1}[status]
        if why:
            _note(why)
    except Skip as s:
        failed, code = False, SKIP_EXIT
        _note(s)
    except BaseException as e:  # noqa: B902 — report everything, the alarm's TimeoutError included
        traceback.print_exc()
        sys.stderr.flush()
        _note("%s: %s" % (type(e).__name__, e))
    finally:
        signal.alarm(0)
        close = getattr(env, "close", None) if env is not None and env is not args else None
        if close:
            try:
                close(failed)
            except BaseException:  # noqa: B902 — a broken close fails the test, it does not hide it
                traceback.print_exc()
                code = 1
    return code


def _note(text):
    """In the child: the reason of a skip or failure, for the parent's verdict line."""
    path = os.environ.get("GPUSLICE_RUNNER_NOTE")
    if path:
        with open(path, "w") as f:
            f.write(str(text).strip()[:600])


def _spawn(name, argv, timeout_s, grace_s=KILL_GRACE_S):
    """Run this script again for one test in a session of its own; -> (status, why, secs)."""
    t0 = time.monotonic()
    fd, note = tempfile.mkstemp(prefix="gpuslice-runner-")
    os.close(fd)
    env = dict(os.environ, GPUSLICE_RUNNER_NOTE=note)
    p = subprocess.Popen([sys.executable, os.path.abspath(sys.argv[0])] + argv + [CHILD_FLAG, name], env=env,
                         start_new_session=True)
    killed = False
    try:
        p.wait(timeout=timeout_s + grace_s)
    except subprocess.TimeoutExpired:
        killed = True
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
    # whatever the test left running in its session goes with it
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    with open(note) as f:
        why = f.read()
    os.unlink(note)
    secs = time.monotonic() - t0
    if killed:
        return "FAIL", "killed by its timeout (%d s, then %d s of grace)" % (timeout_s, grace_s), secs
    if p.returncode == 0:
        return "PASS", "", secs
    if p.returncode == SKIP_EXIT:
        return "SKIP", why or "exit 77", secs
    status = "exit %d" % p.returncode if p.returncode >= 0 else "killed by signal %d" % -p.returncode
    return "FAIL", "%s%s" % (status, (": " + why) if why else ""), secs


class TempDir:
    """A fixture that is a private temporary directory (path), removed after the test; args: the arguments."""

    def __init__(self, args, prefix="gpuslice-test-"):
        self.args = args
        self.path = tempfile.mkdtemp(prefix=prefix)

    def close(self, failed):
        shutil.rmtree(self.path, ignore_errors=True)


def parser(arguments=()):
    """The runner's argument parser: the script's own options, then the test names."""
    ap = argparse.ArgumentParser()
    for flags, kw in arguments:
        flags = (flags,) if isinstance(flags, str) else tuple(flags)
        ap.add_argument(*flags, **kw)
    ap.add_argument("tests", nargs="*", help="tests to run (default: all)")
    ap.add_argument(CHILD_FLAG, dest="runner_child", help=argparse.SUPPRESS)
    return ap


STANDARD = [("--build", {"required": True}), ("--source", {"required": True})]
WITH_TOPOLOGY = STANDARD + [("--topology", {"required": True})]


def main(tests, make_env=None, label="", timeout_s=90, arguments=STANDARD, argv=None, grace_s=KILL_GRACE_S):
    """Parse the arguments, run the selected tests each in its own process, exit 0 / 77 / 1 (never returns).
    tests: {name: fn} (in order); arguments: [(flags, add_argument kwargs)] besides the test names."""
    argv = sys.argv[1:] if argv is None else argv
    args = parser(arguments).parse_args(argv)
    if args.runner_child:
        if args.runner_child not in tests:
            print("runner: no test named %s" % args.runner_child)
            sys.exit(1)
        args.test_name = args.runner_child
        sys.exit(_run_one(tests[args.runner_child], make_env, args, timeout_s))
    tally = Tally(label)
    try:
        chosen = select(tests, args.tests if args.tests else None)
    except SelectionError as e:
        print("FAIL %sselection: %s" % (label, e), flush=True)
        tally.failed += 1
        sys.exit(tally.exit_code())
    # the child gets the same options, without the names
    names = set(args.tests)
    own = [a for a in argv if a not in names]
    for name in chosen:
        status, why, secs = _spawn(name, own, timeout_s, grace_s)
        tally.report(status, name, secs, why)
    sys.exit(tally.exit_code())


def run_suites(suites, names=None, timeout_s=1200, label=""):
    """Shared-fixture suites (the e2e files): suites = [(setup, [fn, ...]), ...]; setup() -> a fixture with
    stop() (or None), each fn(fixture). Runs the selection in this process, every test under its timeout,
    each suite's fixture started only when one of its tests is chosen; -> exit status 0 / 77 / 1."""
    tally = Tally(label)
    known = [fn.__name__ for _, fns in suites for fn in fns]
    if len(set(known)) != len(known):
        print("FAIL %sselection: two tests share a name: %s" % (label, known), flush=True)
        tally.failed += 1
        return tally.exit_code()
    try:
        chosen = set(select(known, names))
    except SelectionError as e:
        print("FAIL %sselection: %s" % (label, e), flush=True)
        tally.failed += 1
        return tally.exit_code()
    signal.signal(signal.SIGALRM, _on_alarm(timeout_s))
    for setup, fns in suites:
        mine = [fn for fn in fns if fn.__name__ in chosen]
        if not mine:
            continue
        fixture, t0, done = None, time.monotonic(), 0
        try:
            fixture = setup()
            print("runner: fixture up in %.0f s" % (time.monotonic() - t0), flush=True)
            for fn in mine:
                t1 = time.monotonic()
                signal.alarm(timeout_s)
                try:
                    status, why = _verdict(fn(fixture))
                except Skip as s:
                    status, why = "SKIP", s
                except Exception as e:  # noqa: BLE001 — every failure is reported, the others still run
                    traceback.print_exc()
                    status, why = "FAIL", e
                finally:
                    signal.alarm(0)
                done += 1
                tally.report(status, fn.__name__, time.monotonic() - t1, why)
            if os.environ.get("GPUSLICE_E2E_KEEP") == "1" and fixture is not None:
                print("GPUSLICE_E2E_KEEP=1: fixture kept up (%s); Ctrl-C ends" % getattr(fixture, "kubeconfig", ""),
                      flush=True)
                signal.pause()
        except Exception as e:  # noqa: BLE001 — the fixture did not come up: every chosen test of it fails
            traceback.print_exc()
            for fn in mine[done:]:
                tally.report("FAIL", fn.__name__, 0, "setup: %s" % e)
        finally:
            if fixture is not None and hasattr(fixture, "stop"):
                fixture.stop()
    return tally.exit_code()


def e2e_names(argv=None):
    """The e2e files' selection: names in argv, else $GPUSLICE_E2E_ONLY (comma-separated), else None (all).
    A set but empty-after-splitting variable is an empty selection (it fails), not 'all'."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        return list(argv)
    only = os.environ.get("GPUSLICE_E2E_ONLY")
    if only is None or only == "":
        return None
    return [x.strip() for x in only.split(",") if x.strip()]
