#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""tests/runner.py keeps its rules (ctest runner-rules): planted sample scripts that use it are run as
ctest runs them, and each rule must hold — an empty selection fails, an unknown (misspelled) name fails,
a skip is reported SKIP and exits 77 (never PASS, never 0), a failure exits 1, every test runs in its own
process, a hung test is stopped by its timeout (SIGALRM, its fixture still closed) and one that ignores
the alarm is killed with what it started; the same selection and skip rules for run_suites (the e2e
files). It runs itself through runner.main, like every other test script.

    test_runner.py [NAME...]
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import runner  # noqa: E402
from runner import check  # noqa: E402

SAMPLE = textwrap.dedent('''
    import os, signal, subprocess, sys, time
    sys.path.insert(0, %(tests)r)
    import runner
    MARK = os.environ["SAMPLE_MARK"]

    def mark(name, text=""):
        with open(os.path.join(MARK, name), "w") as f:
            f.write(text)

    class Fx:
        def __init__(self, a):
            self.a = a

        def close(self, failed):
            mark("closed-%%s-%%s" %% (self.a.test_name, failed))

    def t_pass(fx):
        mark("pid-pass", str(os.getpid()))

    def t_pass2(fx):
        mark("pid-pass2", str(os.getpid()))

    def t_fail(fx):
        runner.check(False, "planted failure")

    def t_skip(fx):
        raise runner.Skip("planted: the peer is missing")

    def t_skip77(fx):
        return 77

    def t_hang(fx):
        time.sleep(3600)

    def t_stuck(fx):
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        p = subprocess.Popen(["sleep", "3600"])
        mark("grandchild", str(p.pid))
        while True:
            time.sleep(0.2)

    TESTS = {"pass": t_pass, "pass2": t_pass2, "fail": t_fail, "skip": t_skip, "skip77": t_skip77,
             "hang": t_hang, "stuck": t_stuck}
    if os.environ.get("SAMPLE_EMPTY"):
        TESTS = {}
    runner.main(TESTS, make_env=Fx, timeout_s=2, arguments=[], grace_s=8)
''')

SUITES = textwrap.dedent('''
    import os, sys
    sys.path.insert(0, %(tests)r)
    import runner
    MARK = os.environ["SAMPLE_MARK"]

    class Fx:
        def __init__(self, n):
            open(os.path.join(MARK, "setup-%%d" %% n), "w").close()

        def stop(self):
            pass

    def test_one(fx):
        pass

    def test_skipped(fx):
        raise runner.Skip("planted")

    def test_two(fx):
        pass

    sys.exit(runner.run_suites([(lambda: Fx(1), [test_one, test_skipped]), (lambda: Fx(2), [test_two])],
                               names=runner.e2e_names(), timeout_s=5))
''')


class Sample:
    def __init__(self, args):
        self.dir = tempfile.mkdtemp(prefix="gpuslice-runner-test-")
        self.mark = os.path.join(self.dir, "mark")
        os.makedirs(self.mark)
        for name, text in (("sample.py", SAMPLE), ("suites.py", SUITES)):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(text % {"tests": HERE})

    def run(self, script, *names, env=None):
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, os.path.join(self.dir, script)] + list(names), capture_output=True,
                           text=True, timeout=60, env=dict(os.environ, SAMPLE_MARK=self.mark, **(env or {})))
        self.secs = time.monotonic() - t0
        self.out = r.stdout + r.stderr
        return r.returncode

    def marked(self, name):
        p = os.path.join(self.mark, name)
        return open(p).read() if os.path.exists(p) else None

    def close(self, failed):
        if failed:
            sys.stderr.write("---- last sample output ----\n%s\n" % getattr(self, "out", ""))
        subprocess.run(["rm", "-rf", self.dir])


def expect(s, rc, want_rc, *texts):
    check(rc == want_rc, "exit %d, expected %d:\n%s" % (rc, want_rc, s.out))
    for t in texts:
        check(t in s.out, "%r not in the output:\n%s" % (t, s.out))


def test_empty_selection_fails(s):
    rc = s.run("sample.py", env={"SAMPLE_EMPTY": "1"})
    expect(s, rc, 1, "FAIL selection: no test is registered")
    check("PASS" not in s.out, s.out)
    rc = s.run("sample.py", "")
    expect(s, rc, 1, "FAIL selection: an empty test name was given")


def test_unknown_name_fails(s):
    rc = s.run("sample.py", "pas")
    expect(s, rc, 1, "FAIL selection: no test named pas", "known: pass, pass2")
    # one misspelled name in a list fails the run before any test runs
    rc = s.run("sample.py", "pass", "skp")
    expect(s, rc, 1, "no test named skp")
    check(s.marked("pid-pass") is None, "a test ran although the selection was wrong")


def test_pass_and_fail(s):
    expect(s, s.run("sample.py", "pass"), 0, "PASS pass", "runner: 1 passed, 0 failed, 0 skipped")
    expect(s, s.run("sample.py", "fail"), 1, "FAIL fail", "planted failure")
    expect(s, s.run("sample.py", "pass", "fail"), 1, "PASS pass", "FAIL fail")


def test_skip_is_not_a_pass(s):
    rc = s.run("sample.py", "skip")
    expect(s, rc, 77, "SKIP skip", "planted: the peer is missing", "runner: 0 passed, 0 failed, 1 skipped")
    check("PASS skip" not in s.out, s.out)
    expect(s, s.run("sample.py", "skip77"), 77, "SKIP skip77")
    expect(s, s.run("sample.py", "pass", "skip"), 77, "PASS pass", "SKIP skip")
    expect(s, s.run("sample.py", "skip", "fail"), 1, "SKIP skip", "FAIL fail")


def test_own_process(s):
    expect(s, s.run("sample.py", "pass", "pass2"), 0, "PASS pass", "PASS pass2")
    a, b = s.marked("pid-pass"), s.marked("pid-pass2")
    check(a and b and a != b, "the two tests ran in one process (%s, %s)" % (a, b))


def test_hung_test_stopped_by_timeout(s):
    rc = s.run("sample.py", "hang")
    expect(s, rc, 1, "FAIL hang", "TimeoutError", "test exceeded its timeout of 2 s")
    check(s.marked("closed-hang-True") is not None, "the fixture of the timed-out test was not closed")
    check(s.secs < 30, "took %.0f s" % s.secs)


def test_stuck_test_killed(s):
    rc = s.run("sample.py", "stuck")
    expect(s, rc, 1, "FAIL stuck", "killed by its timeout (2 s, then 8 s of grace)")
    pid = int(s.marked("grandchild") or 0)
    check(pid > 0, "the stuck test did not start its child")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the process the stuck test started (pid %d) outlived the kill" % pid)


def test_suites_rules(s):
    expect(s, s.run("suites.py", "test_nope"), 1, "FAIL selection: no test named test_nope")
    check(s.marked("setup-1") is None and s.marked("setup-2") is None, "a fixture started for a wrong selection")
    expect(s, s.run("suites.py", "two"), 0, "PASS test_two")
    check(s.marked("setup-1") is None, "suite 1's fixture started although none of its tests was chosen")
    expect(s, s.run("suites.py"), 77, "PASS test_one", "SKIP test_skipped", "PASS test_two")
    expect(s, s.run("suites.py", env={"GPUSLICE_E2E_ONLY": ","}), 1, "FAIL selection")
    expect(s, s.run("suites.py", env={"GPUSLICE_E2E_ONLY": "test_one"}), 0, "PASS test_one")
    check("test_two" not in s.out, s.out)


TESTS = {name[5:].replace("_", "-"): fn for name, fn in list(globals().items()) if name.startswith("test_")}

if __name__ == "__main__":
    runner.main(TESTS, make_env=Sample, label="runner-", timeout_s=90, arguments=[])
