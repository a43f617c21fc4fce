"""Harness for the control-protocol tests: runs a real corrald (stdlib only).

Corrald(args).start() makes a private temp dir, starts corrald with
--listen 127.0.0.1:0 and --control <tmp>/control.sock, and waits until every
worker is ready. request() opens a fresh connection per request.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77


def exe(var):
    p = os.environ.get(var)
    if not p or not os.access(p, os.X_OK):
        print("%s not set or not executable" % var, file=sys.stderr)
        sys.exit(SKIP)
    return p


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Conn:
    """One control connection with line framing."""

    def __init__(self, path, timeout=10.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def send(self, obj):
        data = obj if isinstance(obj, (bytes, str)) else json.dumps(obj)
        if isinstance(data, str):
            data = data.encode()
        if not data.endswith(b"\n"):
            data += b"\n"
        self.s.sendall(data)

    def line(self, timeout=10.0):
        """The next line, or None at end of stream."""
        self.s.settimeout(timeout)
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def recv_json(self, timeout=10.0):
        line = self.line(timeout)
        check(line is not None, "connection closed before a response")
        return json.loads(line)

    def call(self, obj, timeout=10.0):
        self.send(obj)
        return self.recv_json(timeout)

    def close(self):
        self.s.close()


class Corrald:
    def __init__(self, args=(), env=None, workers=2, name="ctl", command=None, wait_ready=True,
                 nice=0):
        self.wait_ready = wait_ready
        self.nice = nice
        self.args = list(args)
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.workers = workers
        self.name = name
        self.command = command
        self.proc = None

    def start(self, timeout=15.0):
        wait_ready = self.wait_ready
        self.tmp = tempfile.mkdtemp(prefix="crctl-%s-" % self.name)
        self.sock = os.path.join(self.tmp, "control.sock")
        self.log = open(os.path.join(self.tmp, "corrald.log"), "w+")
        argv = [exe("CORRALD"), "--workers", str(self.workers), "--listen", "127.0.0.1:0",
                "--control", self.sock] + self.args
        if "--cgroup-parent" not in self.args:
            argv.append("--no-cgroups")
        if self.command:
            argv += ["--"] + self.command
        pre = (lambda: os.nice(self.nice)) if self.nice else None
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env, cwd=self.tmp, preexec_fn=pre)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                fail("corrald exited early (%s):\n%s" % (self.proc.returncode, self.logtext()))
            if os.path.exists(self.sock):
                try:
                    st = self.request({"cmd": "status"})
                    ready = st["supervisor"]["workers_ready"]
                    if not wait_ready or ready >= self.workers:
                        self.status = st
                        return self
                except (OSError, ValueError):
                    pass
            time.sleep(0.05)
        fail("corrald not ready in %.0fs:\n%s" % (timeout, self.logtext()))

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def request(self, obj, timeout=10.0):
        c = Conn(self.sock, timeout)
        try:
            return c.call(obj, timeout)
        finally:
            c.close()

    def listen_address(self):
        return self.request({"cmd": "status"})["supervisor"]["listen"][0]["address"]

    def pids(self):
        """pids of live (non-draining) worker processes."""
        ws = self.request({"cmd": "workers"})["workers"]
        return sorted(w["pid"] for w in ws if w["pid"] and w["state"] in ("starting", "ready"))

    def wait_for(self, pred, timeout=10.0, what="condition"):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.05)
        fail("timed out waiting for %s\n%s" % (what, self.logtext()[-3000:]))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        log = self.logtext() if self.proc else ""
        shutil.rmtree(self.tmp, ignore_errors=True)
        # A sanitizer report or a failed exit after a requested stop is a bug.
        bad = [l for l in log.splitlines()
               if "Sanitizer" in l or "runtime error:" in l]
        if bad or (self.proc and self.proc.returncode not in (0, None)):
            print(log[-6000:], file=sys.stderr)
            fail("corrald exited %s after stop; sanitizer lines: %d" % (
                self.proc.returncode, len(bad)))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if exc[0] is not None:
            print(self.logtext()[-4000:], file=sys.stderr)
        self.stop()


def run_cases(cases):
    """main(): runs the case named by argv[1]."""
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in cases:
        print("cases: " + " ".join(sorted(cases)), file=sys.stderr)
        sys.exit(2)
    cases[name]()
    print("ok: " + name)
