# SPDX-License-Identifier: Apache-2.0
"""Hostile local clients against the node agent's own listeners: the status socket
(<state-dir>/gpuslice.sock, HTTP: GET /v1/status) and the metrics HTTP server (--metrics-address). Whatever they do —
say nothing (slowloris), send megabytes, open many connections, never read the answer — the agent
must not crash, must keep serving kubelet (Allocate, ListAndWatch health pushes) and must answer
honest clients again once they stop. Every wait is bounded; reuses test_agent.py's Env.

    /usr/bin/python3 test_hostile_local.py --build DIR --source DIR --topology FILE TEST
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_agent  # noqa: E402
from agent_fixture import REACT_S, check, free_port, run_main, scrape  # noqa: E402

ATTACK_S = 6


class Hammer:
    """Threads that keep `n` connections open doing `act(sock)` until stopped."""

    def __init__(self, connect, act, n):
        self.connect, self.act, self.n = connect, act, n
        self.stop = threading.Event()
        self.opened = 0
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(n)]

    def run(self):
        while not self.stop.is_set():
            try:
                s = self.connect()
            except OSError:
                time.sleep(0.05)
                continue
            self.opened += 1
            try:
                self.act(s, self.stop)
            except OSError:
                pass
            finally:
                s.close()

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(10)


def hold_silent(s, stop):
    """Say nothing; reconnect as soon as the agent gives up on us."""
    s.settimeout(0.2)
    while not stop.is_set():
        try:
            if s.recv(1) == b"":
                return
        except socket.timeout:
            pass


def unix_connect(path):
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(path)
        return s
    return connect


def still_serving_kubelet(e, ids, gpu):
    """Allocate answers and a health change is pushed on ListAndWatch while under attack."""
    e.allocate([ids[gpu]])
    e.sim("xid", str(gpu + 1), "48")  # double-bit ECC: critical
    e.kubelet.wait_for(lambda: (e.kubelet.last_devices() or {}).get(ids[gpu + 1], ("",))[0] == "Unhealthy",
                       REACT_S, "GPU %d unhealthy pushed while under attack" % (gpu + 1))
    check(e.agent.poll() is None, "agent died")
    check(len(e.kubelet.law_ends) == 0, "ListAndWatch ended: %s" % e.kubelet.law_ends)


def unix_http(path, data):
    """Send raw bytes to the status socket; (what the agent answered, whether it closed)."""
    s = unix_connect(path)()
    out = b""
    try:
        s.sendall(data)
        while True:
            k = s.recv(65536)
            if not k:
                return out, True
            out += k
    except OSError:
        return out, False
    finally:
        s.close()


def test_status_hostile(e):
    e.start_agent()
    e.registered()
    ids = e.ids()
    path = os.path.join(e.state_dir, "gpuslice.sock")
    connect = unix_connect(path)
    # A megabyte of request line: refused, the rest never read.
    s = connect()
    try:
        s.sendall(b"GET /v1/status" + b"x" * (1 << 20))
    except OSError:
        pass  # the agent may close before we finish writing
    s.close()
    # The old line protocol and garbage: never a status answer (libmicrohttpd closes on a request
    # line it cannot parse, answers 400, or waits for more until its 10 s idle timeout); unknown
    # paths and methods: an HTTP error, then closed.
    for req in (b"status\n\n", b"status\r\n\r\n", b"\x00\xff\xfe\r\n\r\n"):
        got, _ = unix_http(path, req)
        check(got == b"" or got.startswith(b"HTTP/1.1 400"), "answer to %r: %r" % (req, got[:80]))
    for req, want in (
                      (b"GET /v1/other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"HTTP/1.1 404"),
                      (b"DELETE /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", b"HTTP/1.1 405")):
        got, closed = unix_http(path, req)
        check(got.startswith(want) and closed, "answer to %r: %r (closed: %s)" % (req, got[:80], closed))
    got, closed = unix_http(path, b"GET /v1/status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    check(got.startswith(b"HTTP/1.1 200") and b'"devices"' in got and closed, "raw status: %r" % got[:200])
    # Asks and never reads, with the smallest receive buffer.
    lazy = []
    for _ in range(4):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
        s.connect(path)
        s.sendall(b"GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n")
        lazy.append(s)
    # Slowloris: many clients that connect and say nothing, reconnecting as soon as dropped.
    t0 = time.monotonic()
    with Hammer(connect, hold_silent, 16) as h:
        still_serving_kubelet(e, ids, 1)
        # an honest client still gets its answer (gpuslice status gives up after 5 s)
        st = e.status()
        check(len(st["devices"]) == 8, "status under attack: %s" % st)
        time.sleep(max(0, ATTACK_S - (time.monotonic() - t0)))
        check(h.opened >= 16, "the attack opened only %d connections" % h.opened)
    for s in lazy:
        s.close()
    # Honest clients are answered again.
    deadline = time.monotonic() + REACT_S
    while True:
        try:
            st = e.status()
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    check(len(st["devices"]) == 8, "status after the attack: %s" % st)
    check(e.agent.poll() is None, "agent died")


def http_get_raw(port, data, read=True):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(data)
        return s.recv(4096) if read else b""
    except OSError:
        return b""
    finally:
        s.close()


def test_metrics_hostile(e):
    port = free_port()
    e.start_agent("--metrics-address", "127.0.0.1:%d" % port, "--sample-interval", "1s")
    e.registered()
    ids = e.ids()
    scrape(port, lambda t: "gpuslice_gpu_allocated_ratio" in t, "first scrape")
    # Giant header, giant body, garbage request line, unknown method: answered or dropped, never fatal.
    big = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    r = http_get_raw(port, big)
    check(r == b"" or r.split(b" ")[1][:1] == b"4", "giant header answered %r" % r[:80])
    r = http_get_raw(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 20000000\r\n\r\n" +
                     b"b" * (2 << 20), read=True)
    check(r == b"" or r.split(b" ")[1][:1] == b"4", "giant body answered %r" % r[:80])
    for junk in (b"\x00\x01\x02\r\n\r\n", b"GET\r\n\r\n", b"BREW /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
                 b"GET /metrics HTTP/9.9\r\n\r\n", b"GET /" + b"%" * 5000 + b" HTTP/1.1\r\n\r\n"):
        http_get_raw(port, junk)
    check(e.agent.poll() is None, "agent died on malformed HTTP")
    # Hit and run: half a request line, then close. Found here: with libmicrohttpd's epoll mode the
    # server missed the FIN and held each such connection for its 10 s timeout, so 200 of them
    # starved every scrape; each must be let go at once.
    for _ in range(200):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(b"GET /met")
            s.shutdown(socket.SHUT_WR)
            s.close()
        except OSError:
            pass  # refused while the server is full: what the scrape below checks
    text = scrape_from("127.0.0.1", port, deadline_s=3)
    check("gpuslice_gpu_allocated_ratio" in text, "scrape right after 200 hit-and-run clients: %r" % text[:200])

    # Slowloris: more half-sent requests than the server takes connections, dribbling a header byte
    # now and then; plus clients that ask and never read.
    def dribble(s, stop):
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        while not stop.wait(1):
            s.sendall(b"X-a: b\r\n")

    def tcp_connect():
        return socket.create_connection(("127.0.0.1", port), timeout=2)

    t0 = time.monotonic()
    with Hammer(tcp_connect, dribble, 150) as h:
        still_serving_kubelet(e, ids, 3)
        # a scraper on another address still gets in: one host cannot take every connection slot
        text = scrape_from("127.0.0.2", port)
        check("gpuslice_gpu_allocated_ratio" in text, "scrape from another address under attack: %r" % text[:200])
        time.sleep(max(0, ATTACK_S - (time.monotonic() - t0)))
        check(h.opened >= 30, "the attack opened only %d connections" % h.opened)
    # Metrics answer again once the attackers are gone.
    text = scrape(port, lambda t: allocated(t, 3), "GPU 3 allocated after the attack", timeout=REACT_S + 10)
    check("gpuslice_gpu_allocated_ratio" in text, "scrape after the attack")
    check(e.agent.poll() is None, "agent died")
    check(e.kill_agent(signal.SIGTERM) == 0, "exit status after SIGTERM")


def scrape_from(source, port, deadline_s=REACT_S):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
            s.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
            data = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            s.close()
            if data or time.monotonic() > deadline:
                return data.decode(errors="replace")
        except OSError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def allocated(text, gpu):
    return test_agent.allocated_ratios(text).get(gpu) == 1.0


TESTS = {"status-hostile": test_status_hostile, "metrics-hostile": test_metrics_hostile}

if __name__ == "__main__":
    run_main(TESTS, label="agent-", timeout_s=test_agent.TEST_TIMEOUT_S)
