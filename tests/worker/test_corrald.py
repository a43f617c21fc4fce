"""The reference worker (and the Node example) under the real corrald.
Usage: test_corrald.py CASE.

reloads, reloads_node: rolling replacement under keep-alive load loses no
request (issue 13, finding 5).

Several persistent HTTP/1.1 connections send /light back to back while
corrald is reloaded (SIGHUP) again and again. A well-behaved client reuses
its connection until a response says `Connection: close`, then reconnects;
any reset, empty reply or cut response is a failed request. A draining
worker must end each keep-alive connection at a request boundary (with
`Connection: close`), never under a request already on its way.
"""
import os
import signal
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import corraltest as ct  # noqa: E402

REQ = b"GET /light HTTP/1.1\r\nHost: t\r\n\r\n"


class KeepAliveClient(threading.Thread):
    """One persistent connection, requests back to back, bounded in time."""

    def __init__(self, port, halt, max_seconds):
        super().__init__(daemon=True)
        self.port, self.halt, self.max_seconds = port, halt, max_seconds
        self.ok = 0
        self.closes = 0  # responses that said Connection: close
        self.failed = []
        self.pids = set()

    def connect(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s

    def one(self, s, buf):
        """Sends one request, reads its response; returns (keep, rest)."""
        s.sendall(REQ)
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                raise EOFError("connection closed before a response")
            buf += d
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        if lines[0].split(" ")[1] != "200":
            raise AssertionError("status line %r" % lines[0])
        hdr = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
        n = int(hdr.get("content-length", "0"))
        while len(buf) < n:
            d = s.recv(65536)
            if not d:
                raise EOFError("connection closed inside a response")
            buf += d
        self.pids.add(int(hdr["x-worker-pid"]))
        return hdr.get("connection", "").lower() != "close", buf[n:]

    def run(self):
        end = time.monotonic() + self.max_seconds
        s, buf = None, b""
        while not self.halt.is_set() and time.monotonic() < end:
            try:
                if s is None:
                    s, buf = self.connect(), b""
                keep, buf = self.one(s, buf)
                self.ok += 1
                if not keep:
                    self.closes += 1
                    s.close()
                    s = None
            except Exception as e:  # noqa: BLE001 - every failure counts
                self.failed.append(repr(e))
                if s is not None:
                    s.close()
                s = None
        if s is not None:
            s.close()


def reload_and_wait(c, n, how="sighup"):
    before = set(c.live_pids())
    if how == "sighup":
        c.kill(signal.SIGHUP)
    else:
        r = c.ctl("restart", worker="all")
        assert r.get("ok"), r
    ct.wait_for(lambda: not (set(c.live_pids()) & before) and len(c.live_pids()) == n, 20,
                what="every pid replaced")


def test_reloads():
    run_reloads(None)


def test_restarts():
    """The same for `restart all` (a rolling restart over the control socket)."""
    run_reloads(None, how="restart")


def test_reloads_node():
    """The same for the Node example (examples/node/server.js)."""
    run_reloads(node_command())


def run_reloads(command, how="sighup"):
    reloads = int(os.environ.get("CR_RELOADS", "12"))
    c = ct.Corrald(workers=2, command=command)
    halt = threading.Event()
    clients = [KeepAliveClient(c.port, halt, 90) for _ in range(6)]
    def all_served(since):
        """Every client has had an answer since the counts `since`."""
        ct.wait_for(lambda: all(t.ok > n for t, n in zip(clients, since)), 10,
                    what="an answer to every client")
    try:
        for t in clients:
            t.start()
        all_served([0] * len(clients))
        for _ in range(reloads):
            reload_and_wait(c, 2, how)
            # Under load again, from the new workers, before the next reload.
            all_served([t.ok for t in clients])
        halt.set()
        for t in clients:
            t.join(10)
        ok = sum(t.ok for t in clients)
        closes = sum(t.closes for t in clients)
        failed = [f for t in clients for f in t.failed]
        print("requests %d, failed %d, Connection: close %d, reloads %d" % (ok, len(failed), closes, reloads))
        assert ok > 500, ok
        assert not failed, "%d failed request(s): %s" % (len(failed), failed[:5])
        # Each reload ends every connection once: the drain really happened
        # under keep-alive load.
        assert closes >= reloads, closes
    finally:
        halt.set()
        c.close()


def node_command():
    node = os.environ.get("CORRAL_NODE", "")
    if not node:
        raise ct.Skip("node not found")
    return [node, os.path.join(HERE, "..", "..", "examples", "node", "server.js")]


def test_watchdog_quiet():
    """--watchdog 1 with no load: the worker heartbeats well inside the
    period (corrald passes WATCHDOG_USEC), so it is never flagged blocked
    (issue 13, finding 9)."""
    watchdog_quiet(None)


def test_watchdog_quiet_node():
    watchdog_quiet(node_command())


def watchdog_quiet(command):
    c = ct.Corrald("--watchdog", "1", workers=2, command=command)
    try:
        # The window below can see a flag: corrald watches these workers'
        # heartbeats (they were told the period, and have reported).
        assert c.status()["supervisor"]["config"]["watchdog"] == 1000
        for pid in c.live_pids():
            with open(f"/proc/{pid}/environ", "rb") as f:
                assert b"WATCHDOG_USEC=1000000" in f.read().split(b"\0"), pid
        ct.wait_for(lambda: all(w["last_report_ago_ms"] is not None for w in c.workers()), 5,
                    what="a heartbeat from each worker")
        time.sleep(5)  # observation window: 5 watchdog periods without load
        log = c.log()
        blocked = [ln for ln in log.splitlines() if "blocked" in ln]
        assert not blocked, "flagged blocked with no load:\n" + "\n".join(blocked[:5])
        assert all(not w.get("blocked") for w in c.workers()), c.workers()
        assert len(c.live_pids()) == 2, c.workers()
        # And a worker that does fall silent is flagged in this setup.
        victim = c.live_pids()[0]
        os.kill(victim, signal.SIGSTOP)
        try:
            ct.wait_for(lambda: any(w["pid"] == victim and w["state"] == "blocked"
                                    for w in c.workers()), 5, what="the stopped worker blocked")
        finally:
            os.kill(victim, signal.SIGCONT)
    finally:
        c.close()


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
