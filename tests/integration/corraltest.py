"""Harness for corral's integration tests: runs the real corrald with real
workers, talks to its control socket, makes HTTP requests, manages test
cgroups. Python 3 standard library only.

Every test script is run as `python3 <script> <case>`; each case is a
function named test_<case>. Exit 0 = pass, 77 = skip, anything else = fail.
"""
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

CORRALD = os.environ.get("CORRALD", "")
WORKER = os.environ.get("CORRAL_WORKER_BIN", "")
SKIP = 77
CGROOT = "/sys/fs/cgroup"
MEMCG_V1 = CGROOT + "/memory"


class Skip(Exception):
    pass


def skip(why):
    raise Skip(why)


def memcg_layout():
    """Where the memory controller is: "v1" (its own hierarchy, this
    machine), "v2" (the unified hierarchy, e.g. the VM guest) or None."""
    if os.path.exists(os.path.join(MEMCG_V1, "memory.limit_in_bytes")):
        return "v1"
    try:
        with open(os.path.join(CGROOT, "cgroup.subtree_control")) as f:
            if "memory" in f.read().split():
                return "v2"
    except OSError:
        pass
    return None


def have_memcg():
    """True when this test may make memory cgroups: root and a memory
    controller, on v1 or v2."""
    return os.geteuid() == 0 and memcg_layout() is not None


def need_memcg():
    """The tests that need real memory cgroups run as root, with the memory
    controller on cgroup v1 (this machine) or v2 (the VM guest)."""
    if os.geteuid() != 0:
        skip("needs root")
    if memcg_layout() is None:
        skip("needs the memory controller (cgroup v1, or v2 enabled at the root)")


# Waits for something to happen (a replacement, a death) end after their
# timeout times this factor: the VM guest runs emulated (TCG) on a shared
# host and sets it. Measured bounds (reaction times, uptimes) never scale.
WAIT_SCALE = float(os.environ.get("CORRAL_TEST_WAIT_SCALE", "1"))


def wait_for(pred, timeout, interval=0.02, what="condition"):
    timeout *= WAIT_SCALE
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class TestCgroup:
    """A memory cgroup at the root of the hierarchy that holds the memory
    controller (v1 or v2), removed on close (killing only processes that
    are still in it, which this test put there). The file names differ
    between v1 and v2; limit(), oom_kills() and procs_file hide that."""

    def __init__(self, name):
        self.layout = memcg_layout()
        self.rel = f"/corral-test-{os.getpid()}-{name}"
        self.path = (MEMCG_V1 if self.layout == "v1" else CGROOT) + self.rel
        os.makedirs(self.path, exist_ok=True)
        self.procs_file = os.path.join(self.path, "cgroup.procs")

    def set(self, key, value):
        with open(os.path.join(self.path, key), "w") as f:
            f.write(str(value))

    def get(self, key):
        with open(os.path.join(self.path, key)) as f:
            return f.read()

    def limit(self, nbytes):
        """The hard memory limit: v1 memory.limit_in_bytes, v2 memory.max."""
        self.set("memory.limit_in_bytes" if self.layout == "v1" else "memory.max", nbytes)

    def oom_kills(self):
        """OOM kills charged to this group (and, on v2, its descendants):
        v1 memory.oom_control, v2 memory.events."""
        text = self.get("memory.oom_control" if self.layout == "v1" else "memory.events")
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return 0

    def remove(self):
        for _ in range(200):
            if not os.path.exists(self.path):
                return
            for root, dirs, files in os.walk(self.path, topdown=False):
                try:
                    with open(os.path.join(root, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(int(pid), signal.SIGKILL)
                except FileNotFoundError:
                    pass
                with contextlib.suppress(OSError):
                    os.rmdir(root)
            time.sleep(0.02)
        raise AssertionError(f"could not remove {self.path}")

    def groups(self, sub="workers"):
        p = os.path.join(self.path, sub)
        if not os.path.isdir(p):
            return []
        return sorted(d for d in os.listdir(p) if os.path.isdir(os.path.join(p, d)))


class Corrald:
    """One corrald under test."""

    def __init__(self, *args, workers=2, cgroups=None, command=None, env=None, preexec=None,
                 wait_ready=True, name="t"):
        self.tmp = tempfile.mkdtemp(prefix=f"corral-{name}-")
        self.sock = os.path.join(self.tmp, "control.sock")
        self.logpath = os.path.join(self.tmp, "corrald.log")
        argv = [CORRALD, "--workers", str(workers), "--listen", "127.0.0.1:0",
                "--control", self.sock]
        if cgroups is None:
            argv.append("--no-cgroups")
        elif cgroups is not False:
            argv += ["--cgroup-parent", cgroups]
        argv += list(args)
        if command:
            argv += ["--"] + list(command)
        e = dict(os.environ)
        if WORKER:
            e["CORRAL_WORKER"] = WORKER
        e.update(env or {})
        self.argv = argv
        self.log_file = open(self.logpath, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log_file, stderr=subprocess.STDOUT, env=e,
                                     cwd=self.tmp, preexec_fn=preexec)
        try:
            self._come_up(workers, wait_ready)
        except BaseException:
            # Nobody holds this object yet to close it: a corrald (and its
            # workers, frozen spares too) must not outlive the failed test.
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            raise

    def _come_up(self, workers, wait_ready):
        wait_for(lambda: os.path.exists(self.sock) or self.proc.poll() is not None, 10,
                 what="the control socket")
        if self.proc.poll() is not None:
            raise AssertionError(f"corrald exited {self.proc.returncode}:\n{self.log()}")
        st = self.status()
        self.addr = st["supervisor"]["listen"][0]["address"]
        self.host, port = self.addr.rsplit(":", 1)
        self.port = int(port)
        if wait_ready:
            self.wait_ready(workers)

    # -- control socket ---------------------------------------------------
    def ctl(self, cmd, timeout=5, **kw):
        req = dict(kw, cmd=cmd)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.sock)
            s.sendall((json.dumps(req) + "\n").encode())
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return json.loads(buf)

    def status(self):
        r = self.ctl("status")
        assert r["ok"], r
        return r

    def workers(self):
        return self.status()["workers"]

    def live_pids(self):
        return sorted(w["pid"] for w in self.workers() if w["pid"] and w["state"] == "ready")

    def worker(self, wid):
        for w in self.workers():
            if w["id"] == wid and not w.get("replaces_pid"):
                return w
        return None

    def history(self):
        r = self.ctl("history")
        assert r["ok"], r
        return r["history"]

    def wait_ready(self, n, timeout=10):
        return wait_for(lambda: len(self.live_pids()) == n and self.live_pids(), timeout,
                        what=f"{n} ready workers")

    def wait_death(self, category=None, timeout=10, count=1):
        def found():
            h = self.history()
            hits = [d for d in h if category is None or d["category"] == category]
            return hits if len(hits) >= count else None
        try:
            return wait_for(found, timeout, interval=0.05, what=f"a death '{category}'")
        except AssertionError:
            raise AssertionError(f"no '{category}' death; history: "
                                 f"{json.dumps(self.history(), indent=1)[:3000]}\n"
                                 f"log:\n{self.log()[-4000:]}")

    # -- HTTP ---------------------------------------------------------------
    def get(self, path, timeout=5):
        """One request on a fresh connection: (status, headers, body)."""
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            body = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, body
        finally:
            c.close()

    def pid_of(self, path="/light"):
        st, h, _ = self.get(path)
        assert st == 200, st
        return int(h["x-worker-pid"])

    # -- lifetime -------------------------------------------------------------
    def log(self):
        self.log_file.flush()
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def kill(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("corrald did not exit in time:\n" + self.log()[-3000:])
        self.log_file.close()
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(Exception):
            self.log_file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    # ProcessLookupError: reaped between the open and the read
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


class Load(threading.Thread):
    """A bounded background client: GET path every `interval` until stopped
    (or max_seconds), counting failures."""

    def __init__(self, corrald, path="/light", interval=0.01, max_seconds=60, timeout=5):
        super().__init__(daemon=True)
        self.c, self.path, self.interval = corrald, path, interval
        self.max_seconds, self.timeout = max_seconds, timeout
        self.ok = 0
        self.failed = []
        self.pids = set()
        self.latencies = []
        self._halt = threading.Event()

    def run(self):
        end = time.monotonic() + self.max_seconds
        while not self._halt.is_set() and time.monotonic() < end:
            t0 = time.monotonic()
            try:
                st, h, _ = self.c.get(self.path, timeout=self.timeout)
                if st == 200:
                    self.ok += 1
                    self.pids.add(int(h["x-worker-pid"]))
                else:
                    self.failed.append(f"HTTP {st}")
            except Exception as e:  # noqa: BLE001 - every failure counts
                self.failed.append(repr(e))
            self.latencies.append(time.monotonic() - t0)
            self._halt.wait(self.interval)

    def stop(self):
        self._halt.set()
        self.join()


def main(module):
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} CASE", file=sys.stderr)
        sys.exit(2)
    fn = getattr(module, "test_" + sys.argv[1], None)
    if not fn:
        print(f"no case {sys.argv[1]}", file=sys.stderr)
        sys.exit(2)
    try:
        fn()
    except Skip as e:
        print(f"SKIP: {e}")
        sys.exit(SKIP)
    print("PASS")
