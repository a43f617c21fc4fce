"""Test harness for corral-worker: socket activation and sd_notify, stdlib
only, built on the shared one (tests/lib/corraltest.py).

Worker(...).start() binds 127.0.0.1:0, hands it to corral-worker as fd 3
(LISTEN_FDS=1, LISTEN_PID=<worker pid>), receives its sd_notify datagrams on
an AF_UNIX socket of its own and waits for READY=1. RawConn is an HTTP/1.1
client connection whose bytes the test controls, down to waiting until the
worker has read what was sent.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402

SKIP = ct.SKIP


def worker_path():
    p = os.environ.get("CORRAL_WORKER")
    if not p or not os.access(p, os.X_OK):
        print("CORRAL_WORKER not set or not executable", file=sys.stderr)
        sys.exit(SKIP)
    return p


def parse_notify(raw):
    """KEY=VALUE lines -> dict (the sd_notify wire format)."""
    out = {}
    for line in raw.decode("utf-8", "replace").split("\n"):
        if not line:
            continue
        k, sep, v = line.partition("=")
        if not sep:
            raise ValueError("notify line without '=': %r" % line)
        out[k] = v
    return out


class Worker:
    def __init__(self, args=(), env=None, keep_listener=False):
        self.args = list(args)
        self.env = dict(env or {})
        self.keep_listener = keep_listener
        self.msgs = []  # (monotonic time, dict)
        self.cond = threading.Condition()
        self.proc = None
        self.stderr_text = None

    # -- lifecycle --
    def start(self, ready_timeout=10.0):
        self.tmp = tempfile.mkdtemp(prefix="crw-")
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(128)
        self.port = self.lsock.getsockname()[1]
        self.nsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.npath = os.path.join(self.tmp, "notify")
        self.nsock.bind(self.npath)
        self.nsock.settimeout(0.2)
        self._stop = False
        self.reader = threading.Thread(target=self._read_notify, daemon=True)
        self.reader.start()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("LISTEN_", "CORRAL_")) and k not in ("NOTIFY_SOCKET", "UV_THREADPOOL_SIZE")}
        env.update({"LISTEN_FDS": "1", "LISTEN_FDNAMES": "http", "NOTIFY_SOCKET": self.npath})
        env.update(self.env)
        lfd = self.lsock.fileno()
        # sh sets LISTEN_PID to its own pid, which exec keeps, and moves
        # the socket to fd 3. No core files from the abort tests.
        redir = "" if lfd == 3 else " 3<&%d %d<&-" % (lfd, lfd)
        script = 'ulimit -c 0; export LISTEN_PID=$$; exec "$0" "$@"' + redir
        self.errf = open(os.path.join(self.tmp, "stderr"), "w+b")
        # CORRAL_WORKER_WRAP: a command prefix such as valgrind; it must exec
        # the worker in the same process, or LISTEN_PID would not match.
        wrap = os.environ.get("CORRAL_WORKER_WRAP", "").split()
        self.proc = subprocess.Popen(["/bin/sh", "-c", script] + wrap + [worker_path()] + self.args,
                                     env=env, pass_fds=[lfd], stdout=subprocess.DEVNULL,
                                     stderr=self.errf)
        if not self.keep_listener:
            self.lsock.close()
        self.wait_notify(lambda m: m.get("READY") == "1", ready_timeout, "READY=1")
        return self

    def _read_notify(self):
        while not self._stop:
            try:
                raw = self.nsock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            msg = parse_notify(raw)
            with self.cond:
                self.msgs.append((time.monotonic(), msg))
                self.cond.notify_all()

    def wait_notify(self, pred, timeout=5.0, what="message", after=0.0):
        """The first message (since `after`, a monotonic time) for which
        pred holds, waiting for it if need be."""
        def found():
            with self.cond:
                for t, m in self.msgs:
                    if t >= after and pred(m):
                        return m
                n = len(self.msgs)
            if self.proc and self.proc.poll() is not None and not n:
                raise AssertionError("worker exited with %s before %s: %s"
                                     % (self.proc.returncode, what, self.stderr()))
            return None
        return ct.wait_for(found, timeout, interval=0.01,
                           what="%s from the worker (%d messages so far)" % (what, len(self.msgs)))

    def stderr(self):
        self.errf.flush()
        self.errf.seek(0)
        return self.errf.read().decode("utf-8", "replace")

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait(self, timeout=15.0):
        return self.proc.wait(timeout)

    def stop(self, check=True):
        """Ends the worker gracefully (SIGTERM: it must drain and exit 0),
        else kills it; then fails on any sanitizer report in its stderr."""
        problems = []
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(8)
                if rc != 0:
                    problems.append("exit %s after SIGTERM" % rc)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # our own child, by pid
                self.proc.wait(5)
                problems.append("did not exit within 8 s of SIGTERM")
        err = self.stderr()
        for marker in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
            if marker in err:
                problems.append("sanitizer report:\n" + err[-4000:])
                break
        self._stop = True
        self.nsock.close()
        if self.keep_listener:
            self.lsock.close()
        self.errf.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if check and problems:
            raise AssertionError("; ".join(problems))

    def __enter__(self):
        return self.start()

    def __exit__(self, typ, val, tb):
        self.stop(check=typ is None)

    # -- HTTP --
    def conn(self, timeout=10.0):
        return RawConn(self.port, timeout)

    def get(self, path, timeout=10.0):
        with self.conn(timeout) as c:
            c.send(b"GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" % path.encode())
            return c.response()


class Response:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        import json
        return json.loads(self.body)

    def __repr__(self):
        return "<%d %r>" % (self.status, self.body[:200])


class RawConn:
    """A client socket with an HTTP/1.1 response reader (Content-Length only,
    which is all the worker sends)."""

    def __init__(self, port, timeout=10.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.timeout = timeout
        self.buf = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.s.close()

    def send(self, data):
        self.s.sendall(data)

    def _fill(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError("connection closed by the worker")
        self.buf += d

    def response(self):
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        proto, code, _ = (lines[0].split(" ", 2) + [""])[:3]
        assert proto == "HTTP/1.1", lines[0]
        headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return Response(int(code), headers, body.decode("utf-8", "replace"))

    def wait_read(self, timeout=5.0):
        """Returns once the worker has read every byte sent so far (the TCP
        queues say so): what follows arrives in a read of its own, and a
        request sent is being served."""
        ct.wait_read(self.s, timeout)

    def closed_within(self, seconds):
        """True if the peer closes (EOF or reset) within seconds; any bytes
        read meanwhile are kept in self.buf."""
        def closed():
            self.s.settimeout(0.01)
            try:
                d = self.s.recv(65536)
            except socket.timeout:
                return False
            except ConnectionResetError:
                return True
            if not d:
                return True
            self.buf += d
            return False
        try:
            return ct.wait_for(closed, seconds, interval=0, what="the worker to close")
        except AssertionError:
            return False
        finally:
            self.s.settimeout(self.timeout)
