"""Shared helpers for the Node.js worker tests: spawn examples/node/server.js
the way corrald does (listening socket on fd 3, stream notify channel on fd 4)
and read its protocol messages. Built on the shared harness
(tests/lib/corraltest.py); Python 3 standard library only."""

import http.client
import mmap
import os
import resource
import select
import signal
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402

SKIP = ct.SKIP
MB = 1024 * 1024


def node_or_skip():
    node = os.environ.get("CORRAL_NODE", "")
    if not node or not os.access(node, os.X_OK):
        print("node not found: skipping")
        sys.exit(SKIP)
    # A SIGABRT test must not litter the build dir with core files.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return node


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok: " + msg, flush=True)


class Worker:
    """One server.js process with the fds and environment corrald gives it."""

    def __init__(self, node, script, node_args=(), env=None, notify=True,
                 worker_id="7", interval_ms=100, page=False):
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.port = self.lsock.getsockname()[1]
        self.chan = None
        self.buf = b""
        self.stderr_path = "/tmp/corral-node-test-%d-%d.err" % (os.getpid(), self.port)
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LISTEN_FDS": "1",
            "CORRAL_WORKER_ID": worker_id,
            "CORRAL_GENERATION": "1",
            "CORRAL_REPORT_INTERVAL_MS": str(interval_ms),
        }
        # Source fds far above 4, so dup2 onto 3/4 never aliases its source.
        lfd = os.dup(self.lsock.fileno())
        hi = [fcntl_dup_high(lfd)]
        os.close(lfd)
        if notify:
            self.chan, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            hi.append(fcntl_dup_high(theirs.fileno()))
            theirs.close()
            full_env["CORRAL_NOTIFY_FD"] = "4"
        self.page = None
        if page:
            # A worker page as corrald makes it (common/wpage.h): fd 5.
            pfd = os.memfd_create("corral-page", os.MFD_CLOEXEC)
            os.ftruncate(pfd, Page.SIZE)
            self.page = Page(mmap.mmap(pfd, Page.SIZE))
            hi.append(fcntl_dup_high(pfd))
            os.close(pfd)
            full_env["CORRAL_PAGE_FD"] = "5"
        full_env.update(env or {})
        errfd = os.open(self.stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        actions = [(os.POSIX_SPAWN_DUP2, errfd, 2), (os.POSIX_SPAWN_DUP2, hi[0], 3)]
        if notify:
            actions.append((os.POSIX_SPAWN_DUP2, hi[1], 4))
        if page:
            actions.append((os.POSIX_SPAWN_DUP2, hi[-1], 5))
        argv = [node, *node_args, script]
        self.pid = os.posix_spawn(node, argv, full_env, file_actions=actions)
        for fd in hi + [errfd]:
            os.close(fd)
        # corrald keeps its copy; the tests drop theirs so that a closed
        # server listener really refuses connections.
        self.lsock.close()
        self.status = None
        self.eof = False

    def read_message(self, timeout):
        """Returns the next KEY=VALUE message as a dict, or None on timeout/EOF."""
        deadline = time.monotonic() + timeout
        while b"\n\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.chan], [], [], left)
            if not r:
                return None
            data = self.chan.recv(65536)
            if not data:
                self.eof = True
                return None
            self.buf += data
        raw, self.buf = self.buf.split(b"\n\n", 1)
        if len(raw) + 2 > 4096:
            fail("message over 4 KiB: %d bytes" % (len(raw) + 2))
        msg = {}
        for line in raw.decode().split("\n"):
            key, sep, value = line.partition("=")
            if not sep or not key:
                fail("malformed line %r" % line)
            msg[key] = value
        return msg

    def wait_message(self, key, timeout):
        """Reads messages until one has `key`; returns (msg, messages seen before)."""
        seen = []

        def got():
            msg = self.read_message(0.05)
            if msg is None:
                if self.eof:
                    fail("the channel closed before a %s (saw %d messages)" % (key, len(seen)))
                return None
            if key in msg:
                return msg
            seen.append(msg)
            return None
        try:
            msg = ct.wait_for(got, timeout, interval=0, what=key)
        except AssertionError:
            fail("no %s within %.1f s (saw %d messages)" % (key, timeout, len(seen)))
        return msg, seen

    def wait_ready(self, timeout=10):
        if self.chan is None:
            wait_port(self.port, timeout)
            return None
        msg, _ = self.wait_message("READY", timeout)
        return msg

    def wait_exit(self, timeout):
        """The wait status once the process has exited within timeout, else None."""
        def reaped():
            if self.status is None:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid == self.pid:
                    self.status = status
            return self.status is not None
        try:
            ct.wait_for(reaped, timeout, what="pid %d to exit" % self.pid)
        except AssertionError:
            return None
        return self.status

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def kill(self):
        if self.status is None:
            os.kill(self.pid, signal.SIGKILL)
            self.wait_exit(5)
        if os.path.exists(self.stderr_path):
            os.unlink(self.stderr_path)


class Page:
    """corrald's side of a worker page (common/wpage.h), for tests that run
    a worker without corrald."""

    SIZE = 16384
    MAGIC = 0x50575243

    def __init__(self, m):
        self.m = m
        struct.pack_into("<II", m, 0, self.MAGIC, 1)
        self.asked = 0
        self.torn = 0  # reads that met a record being rewritten

    def features(self):
        return struct.unpack_from("<I", self.m, 8)[0]

    def request(self):
        """The request record read whole (both sequence numbers equal), as a
        dict, or None after a few torn reads."""
        for _ in range(4):
            # corrald's order: the last copy, the fields, then the first.
            end = struct.unpack_from("<I", self.m, 496)[0]
            inflight, started, count, ml, tl = struct.unpack_from("<IQQHH", self.m, 68)
            method = bytes(self.m[96:96 + min(ml, 16)]).decode("latin1")
            target = bytes(self.m[112:112 + min(tl, 384)]).decode("utf-8", "replace")
            seq = struct.unpack_from("<I", self.m, 64)[0]
            if seq != end:
                self.torn += 1
            if seq == end:
                age = (time.clock_gettime_ns(time.CLOCK_MONOTONIC) - started) / 1e6
                return {"seq": seq, "inflight": inflight, "count": count,
                        "method": method if started else None,
                        "target": target if started else None,
                        "age_ms": age if started else None, "lengths": (ml, tl)}
        return None

    def ask_stack(self):
        """Raises the stack request word, as corrald does: its number."""
        self.asked = struct.unpack_from("<I", self.m, 512)[0] + 1
        struct.pack_into("<I", self.m, 512, self.asked)
        return self.asked

    def answer(self, n):
        """(source, text) once request n (or a later one) is answered, else None."""
        ans = struct.unpack_from("<I", self.m, 516)[0]
        if not ans or ((ans - n) & 0xFFFFFFFF) >= 0x80000000:
            return None
        ln = min(struct.unpack_from("<I", self.m, 520)[0], self.SIZE - 1024)
        source = bytes(self.m[528:560]).split(b"\0")[0].decode()
        return source, bytes(self.m[1024:1024 + ln]).decode("utf-8", "replace")


def fcntl_dup_high(fd):
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)


def wait_port(port, timeout):
    def accepting():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False
    try:
        ct.wait_for(accepting, timeout, interval=0.05, what="port %d accepting" % port)
    except AssertionError:
        fail("port %d not accepting within %.1f s" % (port, timeout))


def start(port, path):
    """A GET on a connection of its own (a corraltest.Request): its
    wait_read() returns once the server has read it, result() is the answer."""
    return ct.Request("127.0.0.1", port, path, timeout=30)


def get(port, path, timeout=30, method="GET", body=None, headers=None):
    """One request on a fresh connection: (status, headers dict, body, seconds)."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data, time.monotonic() - t0
    finally:
        conn.close()


def rss_of(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0
