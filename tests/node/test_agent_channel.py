#!/usr/bin/env python3
"""corral-node-agent.js preloaded into apps run the way corrald runs them
(fd 3 listening, fd 4 the notify stream), without corrald: what it sends,
and that a broken channel or a self-reporting app never changes the app.

usage: test_agent_channel.py <case>; CORRAL_NODE names node."""

import os
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import Worker, check, ct, fail, get, node_or_skip  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
AGENT = os.path.join(ROOT, "agent", "corral-node-agent.js")
PLAIN = os.path.join(ROOT, "examples", "node", "plain.js")
SERVER = os.path.join(ROOT, "examples", "node", "server.js")
PRELOAD = ["--require=" + AGENT]
REPORT_KEYS = [
    "WATCHDOG", "X_HEAP_USED", "X_HEAP_TOTAL", "X_HEAP_LIMIT", "X_EXTERNAL", "X_RSS",
    "X_LOOP_DELAY_P50_US", "X_LOOP_DELAY_P99_US", "X_LOOP_DELAY_MAX_US", "X_ELU",
    "X_INFLIGHT", "X_REQUESTS",
]


def serves(w, what):
    st, _, body, _ = get(w.port, "/", timeout=10)
    check(st == 200 and b"pid" in body, "the app serves " + what)


def test_reports(node):
    w = Worker(node, PLAIN, node_args=PRELOAD)
    try:
        ready = w.wait_ready()
        check(ready.get("READY") == "1" and "corral-node-agent" in ready.get("STATUS", ""),
              "READY=1 once the plain app listens on fd 3: %r" % ready)
        rep, _ = w.wait_message("WATCHDOG", 3)
        missing = [k for k in REPORT_KEYS if k not in rep]
        check(not missing, "the report has every key (missing %s)" % missing)
        check(int(rep["X_HEAP_USED"]) > 0 and int(rep["X_HEAP_LIMIT"]) > int(rep["X_HEAP_USED"]),
              "heap used below the heap limit: %s/%s" % (rep["X_HEAP_USED"], rep["X_HEAP_LIMIT"]))
        check(int(rep["X_RSS"]) > int(rep["X_HEAP_USED"]), "RSS above the heap")
        check(get(w.port, "/block?ms=250", timeout=10)[0] == 200, "a 250 ms stall")
        # The report whose window holds the stall may go out before the
        # request is counted (its timer was due during the stall), so the
        # stall and the count can arrive in two consecutive reports.
        stall_max = 0
        for _ in range(20):
            rep, _ = w.wait_message("WATCHDOG", 3)
            stall_max = max(stall_max, int(rep["X_LOOP_DELAY_MAX_US"]))
            if int(rep["X_REQUESTS"]) >= 1 and stall_max >= 200000:
                break
        check(int(rep["X_REQUESTS"]) == 1 and rep["X_INFLIGHT"] == "0",
              "the request counted: %s" % rep["X_REQUESTS"])
        check(200000 <= stall_max < 2000000,
              "the stall in the loop delay max: %s us" % stall_max)
        check(float(rep["X_ELU"]) > 0, "ELU above 0 over the stall: %s" % rep["X_ELU"])
        check(get(w.port, "/buffer?mb=16", timeout=10)[0] == 200, "16 MB of Buffers kept")
        rep, _ = w.wait_message("WATCHDOG", 3)
        rep, _ = w.wait_message("WATCHDOG", 3)
        check(int(rep["X_EXTERNAL"]) >= 16 << 20, "Buffers in X_EXTERNAL: %s" % rep["X_EXTERNAL"])
    finally:
        w.kill()


def test_not_socket(node):
    # fd 2 (a file) named as the channel: reporting off, serving on.
    w = Worker(node, PLAIN, node_args=PRELOAD, notify=False, env={"CORRAL_NOTIFY_FD": "2"})
    try:
        w.wait_ready()
        serves(w, "with a channel that is not a socket")
        check("notify fd 2: not a socket; reporting off" in w.stderr(), "said once why")
    finally:
        w.kill()


def test_ebadf(node):
    # A high fd: node opens low ones (epoll, eventfd) for itself at start.
    w = Worker(node, PLAIN, node_args=PRELOAD, notify=False, env={"CORRAL_NOTIFY_FD": "900"})
    try:
        w.wait_ready()
        serves(w, "with a channel fd that is not open")
        check("notify fd 900: EBADF; reporting off" in w.stderr(), "said once why: EBADF")
    finally:
        w.kill()


def test_epipe(node):
    # corrald's end is gone before the app is ready: the READY write fails.
    w = Worker(node, PLAIN, node_args=PRELOAD)
    w.chan.close()
    w.chan = None
    try:
        try:
            ct.wait_for(lambda: "reporting off" in w.stderr(), 10, interval=0.05,
                        what="'reporting off' on stderr")
        except AssertionError:
            pass  # reported by the check below, with what it says
        check("EPIPE; reporting off" in w.stderr(), "EPIPE turned reporting off")
        # Observation window: 5 report intervals (100 ms), each a write the
        # agent must no longer try, or a second "reporting off" on the
        # stderr just seen to carry the first.
        time.sleep(0.5)
        serves(w, "after EPIPE")
        check(w.wait_exit(0.1) is None, "the app is still running")
        check(w.stderr().count("reporting off") == 1, "said so once")
    finally:
        w.kill()


def test_self_reporting(node):
    # server.js reads CORRAL_NOTIFY_FD: the agent must fall silent.
    w = Worker(node, SERVER, node_args=PRELOAD)
    try:
        ready = w.wait_ready()
        check(ready == {"READY": "1"}, "READY=1 from server.js only: %r" % ready)
        seen = []
        for _ in range(5):
            msg, before = w.wait_message("WATCHDOG", 3)
            seen += before + [msg]
        agent = [m for m in seen if "corral-node-agent" in m.get("STATUS", "") or "READY" in m]
        check(not agent, "no second READY or agent message: %r" % agent[:2])
        # server.js's own loop delay includes the 10 ms timer period; the
        # agent's does not: every report here is server.js's.
        check(all(int(m["X_LOOP_DELAY_P50_US"]) >= 9000 for m in seen[1:]),
              "every report is server.js's own")
    finally:
        w.kill()


def test_inflight_pipelined(node):
    """X_INFLIGHT counts requests started and not ended, and comes back to
    0 when connections go away with pipelined requests queued behind the
    one being served: Node gives those responses no 'close' of their own
    (they end at their socket's). Without the page: the count is the
    agent's with or without it."""
    spin = os.path.join(HERE, "spin_app.js")
    w = Worker(node, spin, node_args=PRELOAD)
    conns = []
    try:
        w.wait_ready()

        def inflight_is(n):
            def seen():
                msg = w.read_message(0.05)
                return msg if msg and msg.get("X_INFLIGHT") == str(n) else None
            try:
                return ct.wait_for(seen, 10, interval=0, what="X_INFLIGHT=%d" % n)
            except AssertionError:
                fail("X_INFLIGHT never %d" % n)

        for i in range(3):
            c = socket.create_connection(("127.0.0.1", w.port))
            c.sendall(b"".join(b"GET /wait?ms=20000&c%dr%d HTTP/1.1\r\nHost: x\r\n\r\n" % (i, j)
                               for j in range(3)))
            conns.append(c)
        rep = inflight_is(9)
        check(int(rep["X_REQUESTS"]) == 9, "9 requests counted: %s" % rep["X_REQUESTS"])
        for c in conns:
            c.close()
        conns = []
        inflight_is(0)
        serves_again = get(w.port, "/wait?ms=1", timeout=10)[0]
        check(serves_again == 200, "the app serves after: %s" % serves_again)
        rep = inflight_is(0)
        check(int(rep["X_REQUESTS"]) == 10, "10 requests counted: %s" % rep["X_REQUESTS"])
    finally:
        for c in conns:
            c.close()
        w.kill()


def test_exits(node):
    # The agent keeps nothing alive: the app exits when its server closes.
    code = ("require('http').createServer((q, r) => r.end('x'))"
            ".listen({fd: 3}, function () { setTimeout(() => this.close(), 300); });")
    w = Worker(node, code, node_args=PRELOAD + ["-e"])
    try:
        w.wait_ready()
        msg, _ = w.wait_message("STOPPING", 5)
        check(msg.get("STOPPING") == "1", "STOPPING=1 when the server closed")
        status = w.wait_exit(10)
        check(status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0,
              "the app exited 0 by itself: %r" % status)
    finally:
        w.kill()


if __name__ == "__main__":
    ct.main(sys.modules[__name__], call=lambda fn: fn(node_or_skip()))
