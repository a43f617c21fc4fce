"""The shared harness of corral's Python tests (every suite under tests/):
the one wait_for, the one control-socket client, and the pieces built on
them -- a corrald under test, test cgroups, HTTP requests whose arrival at
the server can be waited for, a background load. Python 3 standard library
only.

A suite adds this directory to sys.path and imports it:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    import corraltest as ct  # noqa: E402

Every test script is run as `python3 <script> <case>`; each case is a
function named test_<case> (tests/lib/list_cases.py lists them for meson).
Exit 0 = pass, 77 = skip, anything else = fail.

Tests wait on conditions, never on time: wait_for() polls a predicate
until a deadline. A sleep stays only where it is the thing measured (an
observation window, preceded by a check that the window can see what it
asserts does not happen) or where it paces a client's requests.
"""
import contextlib
import errno
import http.client
import json
import os
import shutil
import signal
import socket
import struct
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
LIB = os.path.dirname(os.path.abspath(__file__))


class Skip(Exception):
    pass


def skip(why):
    raise Skip(why)


# -- waiting ------------------------------------------------------------------

# Waits for something to happen (a replacement, a death) end after their
# timeout times this factor: the VM guest runs emulated (TCG) on a shared
# host and sets it. Measured bounds (reaction times, uptimes) never scale.
WAIT_SCALE = float(os.environ.get("CORRAL_TEST_WAIT_SCALE", "1"))


def wait_for(pred, timeout, interval=0.02, what="condition"):
    """Calls pred() until it returns something true, and returns that; fails
    (AssertionError) once timeout * WAIT_SCALE seconds have passed. pred may
    block for a while itself (a read with a short timeout): interval=0 then."""
    timeout *= WAIT_SCALE
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        if interval:
            time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


# -- the control socket ---------------------------------------------------------

class Control:
    """One connection to corrald's control socket (docs/control-protocol.md):
    newline-delimited JSON, one response line per request line, in order;
    after `events`, event lines stream in, interleaved with the responses
    to later requests (told apart by "event" and "ok")."""

    def __init__(self, path, timeout=10.0, rcvbuf=None):
        self.path = path
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if rcvbuf:  # a small one: a peer whose input backs up early
                self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.s.settimeout(timeout)
            self.s.connect(path)
        except BaseException:
            self.s.close()
            raise
        self.buf = b""

    def send(self, req):
        """Sends one request: a dict (as JSON), or raw str/bytes; a missing
        final newline is added."""
        data = req if isinstance(req, (bytes, str)) else json.dumps(req)
        if isinstance(data, str):
            data = data.encode()
        if not data.endswith(b"\n"):
            data += b"\n"
        self.s.sendall(data)

    def line(self, timeout=10.0):
        """The next line (bytes, without its newline), or None at end of
        stream; socket.timeout if none comes within timeout (None: block)."""
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
        if line is None:
            raise AssertionError("control connection closed before a response")
        return json.loads(line)

    def call(self, req, timeout=10.0):
        self.send(req)
        return self.recv_json(timeout)

    def subscribe(self, timeout=10.0):
        """Turns this connection into an `events` subscription."""
        r = self.call({"cmd": "events"}, timeout)
        assert r == {"ok": True, "subscribed": True}, r
        return self

    def read_until(self, pred, timeout, what="a line"):
        """Reads JSON lines until pred(obj) holds; returns every object read,
        the one that matched last."""
        seen = []

        def matched():
            try:
                line = self.line(timeout=0.1)
            except socket.timeout:
                return False
            if line is None:
                raise AssertionError(f"control connection closed before {what}; read {seen}")
            seen.append(json.loads(line))
            return pred(seen[-1])
        wait_for(matched, timeout, interval=0, what=what)
        return seen

    def half_close(self):
        self.s.shutdown(socket.SHUT_WR)

    def close(self):
        self.s.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def request(path, req, timeout=5.0):
    """One request on a fresh connection: its response."""
    with Control(path, timeout) as c:
        return c.call(req, timeout)


# -- TCP and HTTP -----------------------------------------------------------------

_TCP_CLOSE_WAIT = 0x08  # the other end sent its FIN


def _tcp_diag(local, remote):
    """(state, receive queue, send queue) of the IPv4 TCP socket with this
    local and remote (host, port), by an exact sock_diag lookup over
    netlink; None if there is none. OSError if sock_diag is unusable."""
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 4)  # NETLINK_SOCK_DIAG
    try:
        sockid = (struct.pack("!HH", local[1], remote[1]) + socket.inet_aton(local[0]) + bytes(12)
                  + socket.inet_aton(remote[0]) + bytes(12)
                  + struct.pack("=III", 0, 0xffffffff, 0xffffffff))  # any if, no cookie
        req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, 0xffffffff) + sockid
        # nlmsghdr: SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST
        s.sendto(struct.pack("=IHHII", 16 + len(req), 20, 1, 1, 0) + req, (0, 0))
        data = s.recv(65536)
    finally:
        s.close()
    if struct.unpack_from("=H", data, 4)[0] == 2:  # NLMSG_ERROR
        err = -struct.unpack_from("=i", data, 16)[0]
        if err == errno.ENOENT:
            return None
        raise OSError(err, os.strerror(err))
    state = data[17]
    rq, wq = struct.unpack_from("=II", data, 16 + 4 + 48 + 4)  # inet_diag_msg
    return state, rq, wq


def _tcp_proc(local, remote):
    """As _tcp_diag, from /proc/net/tcp (slow where there are many sockets)."""
    def addr(a):
        return "%08X:%04X" % (struct.unpack("=I", socket.inet_aton(a[0]))[0], a[1])
    want = (addr(local), addr(remote))
    with open("/proc/net/tcp") as f:
        next(f)
        for row in f:
            p = row.split()
            if (p[1], p[2]) == want:
                tx, rx = (int(x, 16) for x in p[4].split(":"))
                return int(p[3], 16), rx, tx
    return None


def peer_has_read(sock):
    """True once the other end of this loopback TCP connection holds none of
    the bytes sent on it unread: nothing left in our send queue, nothing in
    its receive queue (the kernel's sock_diag, else /proc/net/tcp). A server
    has then read the request (and, for corral-worker and Node, parsed and
    dispatched it in that same read). True too once the other end has
    closed."""
    me, peer = sock.getsockname(), sock.getpeername()
    try:
        mine = _tcp_diag(me, peer)
        if mine is None:
            raise OSError(errno.ENOENT, "sock_diag does not see our own socket")
        theirs = _tcp_diag(peer, me)
    except OSError:
        mine, theirs = _tcp_proc(me, peer), _tcp_proc(peer, me)
    assert mine is not None, f"no TCP socket {me} -> {peer}"
    if mine[0] == _TCP_CLOSE_WAIT:
        return True
    return mine[2] == 0 and theirs is not None and theirs[1] == 0


def wait_read(sock, timeout=5.0, what="the server to read the request"):
    """Waits until the peer has read everything sent on sock."""
    return wait_for(lambda: peer_has_read(sock), timeout, interval=0.002, what=what)


class Request:
    """One HTTP request on a connection of its own, its answer read by a
    thread: wait_read() returns once the server has read it (it is being
    served), result() waits for the answer: (status, headers, body)."""

    def __init__(self, host, port, path, method="GET", timeout=10.0):
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)
        self.conn.connect()
        self.sock = self.conn.sock
        self.conn.request(method, path)
        self.answer, self.error = None, None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            r = self.conn.getresponse()
            body = r.read()
            self.answer = (r.status, {k.lower(): v for k, v in r.getheaders()}, body)
        except Exception as e:  # noqa: BLE001 - handed to result()
            self.error = e
        finally:
            self.conn.close()

    def done(self):
        return not self.thread.is_alive()

    def _read_by_server(self):
        if self.done():
            return True
        try:
            return peer_has_read(self.sock)
        except OSError:  # closed by the reader meanwhile: answered
            return self.done()

    def wait_read(self, timeout=5.0):
        return wait_for(self._read_by_server, timeout, interval=0.002,
                        what="the server to read the request")

    def result(self, timeout=30.0):
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError(f"no answer within {timeout} s")
        if self.error:
            raise self.error
        return self.answer


def http_get(host, port, path, timeout=5.0):
    """One request on a fresh connection: (status, headers, body)."""
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, body
    finally:
        c.close()


# -- memory cgroups -------------------------------------------------------------

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

    def enter(self):
        """Moves the calling process into the group (a preexec_fn)."""
        with open(self.procs_file, "w") as f:
            f.write(str(os.getpid()))

    def oom_kills(self):
        """OOM kills charged to this group (and, on v2, its descendants):
        v1 memory.oom_control, v2 memory.events."""
        text = self.get("memory.oom_control" if self.layout == "v1" else "memory.events")
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return 0

    def _remove_once(self):
        """One pass: SIGKILL what is left, rmdir bottom-up; True once gone."""
        if not os.path.exists(self.path):
            return True
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
        return not os.path.exists(self.path)

    def remove(self):
        # A killed process leaves its group once the kernel has reaped it.
        wait_for(self._remove_once, 4, what=f"{self.path} removed")

    def groups(self, sub="workers"):
        p = os.path.join(self.path, sub)
        if not os.path.isdir(p):
            return []
        return sorted(d for d in os.listdir(p) if os.path.isdir(os.path.join(p, d)))


# -- corrald ----------------------------------------------------------------------

class Corrald:
    """One corrald under test: started here with --listen 127.0.0.1:0 and a
    control socket in a temporary directory, ready once `workers` workers
    are (unless wait_ready=False). cgroups: None = --no-cgroups, False =
    neither flag (the args say), else the --cgroup-parent. prefix: argv
    before corrald's (e.g. unshare)."""

    def __init__(self, *args, workers=2, cgroups=None, command=None, env=None, preexec=None,
                 wait_ready=True, name="t", prefix=(), ready_timeout=10):
        self.tmp = tempfile.mkdtemp(prefix=f"corral-{name}-")
        self.sock = os.path.join(self.tmp, "control.sock")
        self.logpath = os.path.join(self.tmp, "corrald.log")
        argv = list(prefix) + [CORRALD, "--workers", str(workers), "--listen", "127.0.0.1:0",
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
            self._come_up(workers, wait_ready, ready_timeout)
        except BaseException as e:
            # Nobody holds this object yet to close it: a corrald (and its
            # workers, frozen spares too) must not outlive the failed test.
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            log = self.log()[-3000:]
            with contextlib.suppress(Exception):
                self.log_file.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
            if isinstance(e, AssertionError):
                raise AssertionError(f"{e}\ncorrald's log:\n{log}") from None
            raise

    def _come_up(self, workers, wait_ready, ready_timeout):
        def answering():
            if self.proc.poll() is not None:
                return True
            try:
                return self.ctl("status")
            except (OSError, ValueError):  # not there yet, or not listening yet
                return None
        st = wait_for(answering, 10, what="the control socket")
        if self.proc.poll() is not None:
            raise AssertionError(f"corrald exited {self.proc.returncode}")
        self.addr = st["supervisor"]["listen"][0]["address"]
        self.host, port = self.addr.rsplit(":", 1)
        self.port = int(port)
        if wait_ready:
            self.wait_ready(workers, ready_timeout)

    # -- control socket ---------------------------------------------------
    def request(self, req, timeout=5):
        """One request (a dict) on a fresh connection: the response."""
        return request(self.sock, req, timeout)

    def ctl(self, cmd, timeout=5, **kw):
        return self.request(dict(kw, cmd=cmd), timeout)

    def control(self, timeout=10.0):
        """A connection of one's own (close it)."""
        return Control(self.sock, timeout)

    def subscribe(self):
        """An `events` subscription (close it)."""
        return self.control().subscribe()

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
        return http_get(self.host, self.port, path, timeout)

    def start_request(self, path, timeout=10):
        """A request in flight on a connection of its own (a Request)."""
        return Request(self.host, self.port, path, timeout=timeout)

    def pid_of(self, path="/light"):
        st, h, _ = self.get(path)
        assert st == 200, st
        return int(h["x-worker-pid"])

    # -- lifetime -------------------------------------------------------------
    def log(self):
        if not self.log_file.closed:
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
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(Exception):
            self.log_file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(") ")[2][:1] not in ("Z", "")
    # ProcessLookupError: reaped between the open and the read
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def ignores_signal(pid, sig):
    """True once the process has set sig to SIG_IGN (SigIgn in its status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            ign = next(l for l in f if l.startswith("SigIgn:")).split()[1]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return bool(int(ign, 16) & (1 << (sig - 1)))


def header_pid(status, headers, body):
    """The pid of the worker that answered, from corral's X-Worker-Pid."""
    return int(headers["x-worker-pid"])


class Load(threading.Thread):
    """A bounded background client: GET path every `interval` until stopped
    (or max_seconds), counting failures. pid_of(status, headers, body) says
    which worker answered (default: the X-Worker-Pid header)."""

    def __init__(self, corrald, path="/light", interval=0.01, max_seconds=60, timeout=5,
                 pid_of=header_pid):
        super().__init__(daemon=True)
        self.c, self.path, self.interval = corrald, path, interval
        self.max_seconds, self.timeout, self.pid_of = max_seconds, timeout, pid_of
        self.ok = 0
        self.failed = []
        self.pids = set()
        self.answered = []  # the pid of each successful answer, in order
        self.latencies = []
        self._halt = threading.Event()

    def run(self):
        end = time.monotonic() + self.max_seconds
        while not self._halt.is_set() and time.monotonic() < end:
            t0 = time.monotonic()
            try:
                st, h, body = self.c.get(self.path, timeout=self.timeout)
                if st == 200:
                    pid = self.pid_of(st, h, body)
                    self.ok += 1
                    self.pids.add(pid)
                    self.answered.append(pid)
                else:
                    self.failed.append(f"HTTP {st}")
            except Exception as e:  # noqa: BLE001 - every failure counts
                self.failed.append(repr(e))
            self.latencies.append(time.monotonic() - t0)
            self._halt.wait(self.interval)  # the client's request pace

    def wait_served(self, n=10, by=None, timeout=10):
        """Waits until n more requests than now have been answered (by one of
        the pids in `by`, when given): the load is flowing, to those workers."""
        start = len(self.answered)

        def served():
            got = [p for p in self.answered[start:] if by is None or p in by]
            return len(got) >= n
        what = f"{n} more answers" + (f" from {sorted(by)}" if by is not None else "")
        return wait_for(served, timeout, what=what)

    def stop(self):
        self._halt.set()
        self.join()


def main(module, call=None):
    """Runs the case named by argv[1] (the function test_<case> of module),
    through call(fn) when given. Skip -> exit 77."""
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} CASE", file=sys.stderr)
        sys.exit(2)
    fn = getattr(module, "test_" + sys.argv[1], None)
    if not fn:
        cases = sorted(k[5:] for k in vars(module) if k.startswith("test_"))
        print(f"no case {sys.argv[1]}; cases: {' '.join(cases)}", file=sys.stderr)
        sys.exit(2)
    try:
        fn() if call is None else call(fn)
    except Skip as e:
        print(f"SKIP: {e}")
        sys.exit(SKIP)
    print("PASS")
