# SPDX-License-Identifier: Apache-2.0
"""A headless Chromium driven over the DevTools protocol, for the operator page's browser test
(test_ui.py) and its render benchmark (bench/ui-bench.py). The protocol runs over a pipe
(--remote-debugging-pipe: JSON messages separated by NUL bytes on fds 3 and 4), so no WebSocket client
and no port are needed. One page, one session:

    with Browser() as b:
        b.open("http://127.0.0.1:9445/ui")
        b.wait("document.body.dataset.rendered === '1'")
        b.eval("document.querySelectorAll('[data-node]').length")
        png = b.screenshot()

Chromium is Debian's `chromium` (scripts/install-deps.sh); CHROMIUM overrides the executable.
Must never: talk to anything but the browser it started, or leave that browser running.
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time


def chromium_path():
    for c in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser"):
        if c and shutil.which(c):
            return shutil.which(c)
    return None


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, width=1400, height=860, timeout=60):
        self.width, self.height, self.timeout = width, height, timeout
        self.exe = chromium_path()
        if not self.exe:
            raise BrowserError("no chromium executable (Debian package chromium; scripts/install-deps.sh)")
        self.profile = tempfile.mkdtemp(prefix="gpuslice-chromium-")
        self.next_id = 0
        self.events = []
        self.buf = b""
        self.session = None
        cmd_r, self.cmd_w = os.pipe()
        self.res_r, res_w = os.pipe()

        def fds():  # in the child: the protocol's fds 3 (commands in) and 4 (answers out)
            # Not pass_fds=(3, 4): Popen makes those inheritable before this runs, which fails with EBADF when the
            # parent has no fd 3 or 4 open. With close_fds=False only inheritable fds reach chromium (Python's own
            # are not, PEP 446): the two dup2'ed here. The ends are first moved out of the way (either may be 3 or
            # 4), close-on-exec.
            r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
            w = fcntl.fcntl(res_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(r, 3)
            os.dup2(w, 4)

        args = [self.exe, "--headless=new", "--remote-debugging-pipe", "--user-data-dir=" + self.profile,
                "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
                "--window-size=%d,%d" % (width, height), "about:blank"]
        self.log = open(os.path.join(self.profile, "chromium.log"), "w+")
        self.proc = subprocess.Popen(args, preexec_fn=fds, close_fds=False, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        os.close(cmd_r)
        os.close(res_w)
        try:
            targets = self.call("Target.getTargets")["targetInfos"]
            page = [t for t in targets if t["type"] == "page"]
            tid = page[0]["targetId"] if page else self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=tid, flatten=True)["sessionId"]
            self.send("Page.enable")
            self.send("Runtime.enable")
            self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
        except Exception:
            self.close()
            raise

    # ---- the protocol ----
    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            if time.time() > deadline:
                raise BrowserError("no answer from chromium within %ds; its log:\n%s" % (self.timeout, self.output()))
            r, _, _ = select.select([self.res_r], [], [], 0.5)
            if r:
                chunk = os.read(self.res_r, 1 << 20)
                if not chunk:
                    raise BrowserError("chromium closed the pipe; its log:\n" + self.output())
                self.buf += chunk
        msg, _, self.buf = self.buf.partition(b"\0")
        return json.loads(msg)

    def call(self, method, session=None, **params):
        self.next_id += 1
        mid = self.next_id
        m = {"id": mid, "method": method, "params": params}
        if session:
            m["sessionId"] = session
        os.write(self.cmd_w, json.dumps(m).encode() + b"\0")
        deadline = time.time() + self.timeout
        while True:
            r = self._read_message(deadline)
            if r.get("id") == mid:
                if "error" in r:
                    raise BrowserError("%s: %s" % (method, r["error"]))
                return r.get("result", {})
            self.events.append(r)

    def send(self, method, **params):
        """A command to the page's session."""
        return self.call(method, session=self.session, **params)

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    # ---- what the tests use ----
    def open(self, url):
        self.events = []
        self.send("Page.navigate", url=url)
        deadline = time.time() + self.timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read_message(deadline))

    def eval(self, expr, await_promise=False):
        r = self.send("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in r:
            raise BrowserError("%s: %s" % (expr, r["exceptionDetails"].get("exception", {}).get("description",
                                                                                                r["exceptionDetails"])))
        return r["result"].get("value")

    def wait(self, expr, timeout=None, what=None):
        """Poll expr until it is truthy (in JavaScript's sense: an element counts)."""
        deadline = time.time() + (timeout or self.timeout)
        last = None
        while time.time() < deadline:
            last = self.eval("Boolean(%s)" % expr)
            if last:
                return last
            time.sleep(0.05)
        raise BrowserError("timed out waiting for %s (last value %r)" % (what or expr, last))

    def console_errors(self):
        return [e["params"] for e in self.events if e.get("method") == "Runtime.exceptionThrown" or
                (e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error")]

    def click(self, selector):
        self.eval("document.querySelector(%s).click()" % json.dumps(selector))

    def type_into(self, selector, text):
        """Set an input's value and fire its input event, as typing does."""
        self.eval("(() => { const e = document.querySelector(%s); e.value = %s; "
                  "e.dispatchEvent(new Event('input', {bubbles: true})); })()" % (json.dumps(selector), json.dumps(text)))

    def screenshot(self):
        r = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        return base64.b64decode(r["data"])

    def close(self):
        try:
            if self.proc.poll() is None:
                try:  # no waiting for the answer: the browser may go before it sends one
                    os.write(self.cmd_w, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                except OSError:
                    pass
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(10)
        finally:
            for fd in (self.cmd_w, self.res_r):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self.log.close()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()
