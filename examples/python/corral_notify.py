"""corral_notify: a small, standard-library-only helper that makes a Python
WSGI or http.server app a speaking corral worker (docs/worker-protocol.md).

Optional: corrald serves unmodified apps too. With it, corrald learns when
the app is really ready, hears a heartbeat from the serving loop (a stuck
loop falls silent and is flagged, then killed) and sees the app's RSS and
request counts. Python has no heap limit to report, so none is sent.

    from corral_notify import CorralServer, inherited_socket, serve
    server = CorralServer.for_handler(MyHandler)  # http.server handler class
    serve(server)                                   # READY=1, then serve_forever

or, for WSGI, `make_wsgi_server(app)` (wsgiref). Outside corrald (no fd 3)
the helpers bind 127.0.0.1:$PORT and report nothing.

Channel: the stream on CORRAL_NOTIFY_FD (messages end with an empty line),
else the datagram socket NOTIFY_SOCKET (so the same app also speaks to
systemd directly). A broken channel turns reporting off, never the app.

The worker page (CORRAL_PAGE_FD, docs/worker-protocol.md): the helper
writes the request being served into it (mmap, no system call) and answers
corrald's stack requests from a thread of its own, which sleeps on the
page's futex: the traceback of every thread, the serving one first, even
while it is stuck in a long computation (a pure-Python loop gives up the
interpreter lock every few milliseconds; a C call that holds it delays the
answer until it returns, and corrald then records it missing).
"""
import ctypes
import mmap
import os
import platform
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from http.server import ThreadingHTTPServer

LISTEN_FD = 3
MAX_MESSAGE = 4096
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    """Resident set size from /proc/self/statm, 0 when unreadable."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (OSError, ValueError, IndexError):
        return 0


class Notifier:
    """Sends whole KEY=VALUE messages to corrald, thread-safe."""

    def __init__(self, env=None):
        env = os.environ if env is None else env
        self.lock = threading.Lock()
        self.sock = None
        self.stream = False
        self.addr = None
        raw = env.get("CORRAL_NOTIFY_FD", "")
        try:
            if raw:
                fd = int(raw)
                # Our own descriptor, close-on-exec: children must not write.
                self.sock = socket.socket(fileno=os.dup(fd))
                if self.sock.type != socket.SOCK_STREAM:
                    raise OSError("notify fd %d is not a stream socket" % fd)
                self.stream = True
                self.sock.setblocking(True)
            elif env.get("NOTIFY_SOCKET"):
                path = env["NOTIFY_SOCKET"]
                self.addr = "\0" + path[1:] if path.startswith("@") else path
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        except (OSError, ValueError) as e:
            self._off(e)

    @property
    def enabled(self):
        return self.sock is not None

    def _off(self, err):
        os.write(2, ("corral_notify: %s; reporting off\n" % err).encode(errors="replace"))
        if self.sock is not None:
            self.sock.close()
        self.sock = None

    def send(self, **fields):
        """Sends one message; returns False when reporting is off."""
        text = "".join("%s=%s\n" % (k, v) for k, v in fields.items())
        data = (text + "\n" if self.stream else text).encode()
        if len(data) > MAX_MESSAGE:
            raise ValueError("notify message over 4 KiB")
        with self.lock:
            if self.sock is None:
                return False
            try:
                if self.stream:
                    self.sock.sendall(data)
                else:
                    self.sock.sendto(data, self.addr)
                return True
            except OSError as e:
                self._off(e)
                return False


class Page:
    """corrald's worker page (common/wpage.h): the request being served,
    and the stack exchange. Every method is a no-op without a page."""

    SIZE = 16384
    MAGIC = 0x50575243
    F_REQUEST, F_STACK = 1, 2
    OFF_FEATURES, OFF_REQ, OFF_SEQ_END = 8, 64, 496
    OFF_STACK_REQ, OFF_STACK_ANS, OFF_STACK_LEN, OFF_SOURCE, OFF_STACK = 512, 516, 520, 528, 1024
    METHOD_MAX, TARGET_MAX = 16, 384
    # The futex system call's number, where known: else the stack thread polls.
    SYS_FUTEX = {"x86_64": 202, "aarch64": 98, "i686": 240, "armv7l": 240}.get(platform.machine())

    def __init__(self, env=None):
        env = os.environ if env is None else env
        self.map = None
        self.lock = threading.Lock()
        self.seq = 0
        self.live = {}  # id -> (started_ns, method, target), oldest first
        self.next_id = 0
        self.count = 0
        self.main_ident = threading.main_thread().ident
        raw = env.get("CORRAL_PAGE_FD", "")
        if not raw:
            return
        try:
            fd = int(raw)
            m = mmap.mmap(fd, self.SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            os.close(fd)  # the mapping keeps it; children must not inherit it
            if struct.unpack_from("<I", m, 0)[0] != self.MAGIC:
                raise OSError("not a corral page")
        except (OSError, ValueError) as e:
            os.write(2, ("corral_notify: CORRAL_PAGE_FD: %s; not saying what it serves\n"
                         % e).encode(errors="replace"))
            return
        self.map = m
        features = self.F_REQUEST
        # The request word before stacks are offered: one made before the
        # thread first runs is still answered.
        self.seen = struct.unpack_from("<I", m, self.OFF_STACK_REQ)[0]
        t = threading.Thread(target=self._stacks, name="corral-stack", daemon=True)
        t.start()
        features |= self.F_STACK
        struct.pack_into("<I", m, self.OFF_FEATURES, features)

    def _write(self):
        """The record of the newest request being served (lock held)."""
        self.seq = (self.seq + 1) & 0xFFFFFFFF
        if self.live:
            started, method, target = self.live[next(reversed(self.live))]
        else:
            started, method, target = 0, b"", b""
        body = struct.pack("<IQQHHI", len(self.live), started, self.count, len(method),
                           len(target), 0)
        body += method.ljust(self.METHOD_MAX, b"\0") + target.ljust(self.TARGET_MAX, b"\0")
        seq = struct.pack("<I", self.seq)
        # Three stores, in this order: the first sequence number, the
        # fields, the second. Never one copy of the whole record: glibc's
        # memcpy (which mmap's slice assignment is) stores the head of a
        # copy of this size last, after the tail (x86-64, AVX2), and a
        # reader then takes a half-written record for a whole one.
        self.map[self.OFF_REQ:self.OFF_REQ + 4] = seq
        self.map[self.OFF_REQ + 4:self.OFF_SEQ_END] = body
        self.map[self.OFF_SEQ_END:self.OFF_SEQ_END + 4] = seq

    def begin(self, method, target):
        """A request is being served: its id, for end()."""
        if self.map is None:
            return None
        with self.lock:
            self.next_id += 1
            self.count += 1
            self.live[self.next_id] = (time.monotonic_ns(),
                                       method.encode("ascii", "replace")[:self.METHOD_MAX],
                                       target.encode("utf-8", "replace")[:self.TARGET_MAX])
            self._write()
            return self.next_id

    def end(self, rid):
        if self.map is None or rid is None:
            return
        with self.lock:
            if self.live.pop(rid, None) is not None:
                self._write()

    def _stack_text(self):
        frames = sys._current_frames()
        me = threading.get_ident()
        names = {t.ident: t.name for t in threading.enumerate()}
        order = sorted((i for i in frames if i != me), key=lambda i: i != self.main_ident)
        out = []
        for ident in order:
            out.append("Thread %s (%s)%s:\n" % (hex(ident), names.get(ident, "?"),
                                                " (main)" if ident == self.main_ident else ""))
            out.extend(traceback.format_stack(frames[ident]))
        return "".join(out).encode("utf-8", "replace")

    def _answer(self, req):
        text = self._stack_text()[:self.SIZE - self.OFF_STACK]
        self.map[self.OFF_STACK:self.OFF_STACK + len(text)] = text
        self.map[self.OFF_SOURCE:self.OFF_SOURCE + 8] = b"python\0\0"
        struct.pack_into("<I", self.map, self.OFF_STACK_LEN, len(text))
        struct.pack_into("<I", self.map, self.OFF_STACK_ANS, req)

    def _stacks(self):
        """Waits for corrald's stack requests: on the futex (ctypes releases
        the interpreter lock while it sleeps), else every 50 ms."""
        word = ctypes.c_uint32.from_buffer(self.map, self.OFF_STACK_REQ)
        libc = None
        if self.SYS_FUTEX is not None:
            try:
                libc = ctypes.CDLL(None, use_errno=True)
            except OSError:
                libc = None
        seen = self.seen
        while True:
            if libc is not None:
                libc.syscall(self.SYS_FUTEX, ctypes.byref(word), 0, ctypes.c_uint32(seen),
                             None, None, 0)  # FUTEX_WAIT
            else:
                time.sleep(0.05)
            req = word.value
            if req != seen:
                seen = req
                try:
                    self._answer(req)
                except Exception:  # the app comes first
                    pass


def inherited_socket():
    """The listening socket corrald (or systemd) passed as fd 3, or None."""
    if int(os.environ.get("LISTEN_FDS", "0") or 0) < 1:
        return None
    pid = os.environ.get("LISTEN_PID")
    if pid and int(pid) != os.getpid():
        return None
    return socket.socket(fileno=LISTEN_FD)


class CorralServer(ThreadingHTTPServer):
    """ThreadingHTTPServer on the inherited socket that reports to corrald
    from its serving loop: WATCHDOG=1 with X_RSS, X_REQUESTS and X_INFLIGHT
    every `report_interval` seconds (serve_forever calls service_actions
    between polls, so a stuck loop falls silent)."""

    report_interval = float(os.environ.get("CORRAL_REPORT_INTERVAL_MS", "1000")) / 1000
    # Requests in progress finish before the process exits.
    daemon_threads = False

    def __init__(self, handler, notifier=None):
        sock = inherited_socket()
        self.notifier = notifier or Notifier()
        self.page = Page() if sock is not None else Page({})
        handler = traced(handler, self.page)
        self.requests = 0
        self.inflight = 0
        self.count_lock = threading.Lock()
        self.next_report = 0.0
        if sock is None:
            port = int(os.environ.get("PORT", "8080"))
            super().__init__(("127.0.0.1", port), handler)
            self.notifier = Notifier({})  # not a corral worker: silent
        else:
            super().__init__(sock.getsockname()[:2], handler, bind_and_activate=False)
            self.socket.close()
            self.socket = sock
        self.poll_interval = min(0.5, self.report_interval / 2)

    @classmethod
    def for_handler(cls, handler):
        return cls(handler)

    def report(self):
        with self.count_lock:
            requests, inflight = self.requests, self.inflight
        self.notifier.send(WATCHDOG=1, X_RSS=rss_bytes(), X_REQUESTS=requests,
                           X_INFLIGHT=inflight)

    def service_actions(self):
        super().service_actions()
        now = time.monotonic()
        if now >= self.next_report:
            self.next_report = now + self.report_interval
            self.report()

    def process_request(self, request, client_address):
        with self.count_lock:
            self.requests += 1
            self.inflight += 1
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        super().shutdown_request(request)
        with self.count_lock:
            self.inflight -= 1


def traced(handler, page):
    """handler, telling the page which request it serves (http.server's
    handlers and wsgiref's alike parse each request in parse_request)."""
    if page.map is None:
        return handler

    class Traced(handler):
        def parse_request(self):
            # The previous request of a keep-alive connection was answered.
            page.end(getattr(self, "_corral_rid", None))
            self._corral_rid = None
            ok = super().parse_request()
            if ok:
                self._corral_rid = page.begin(self.command or "", self.path or "")
            return ok

        def handle(self):
            try:
                super().handle()
            finally:
                page.end(getattr(self, "_corral_rid", None))
                self._corral_rid = None

    Traced.__name__ = handler.__name__
    return Traced


def serve(server):
    """READY=1, serve until SIGTERM/SIGINT, then STOPPING=1 and a graceful
    close (requests in progress finish)."""

    # The handler only starts a thread: sending from the handler itself
    # could cut into a message the interrupted loop is writing.
    def drain():
        server.notifier.send(STOPPING=1, STATUS="draining")
        server.shutdown()

    def stop(signum, frame):
        threading.Thread(target=drain, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.notifier.send(READY=1, STATUS="serving")
    # The first heartbeat now, not after the first poll: a first request
    # that stalls the loop is then noticed like any later one.
    server.next_report = time.monotonic() + server.report_interval
    server.report()
    server.serve_forever(poll_interval=server.poll_interval)
    server.server_close()


def make_wsgi_server(app, notifier=None, threaded=True):
    """A CorralServer running a WSGI app through wsgiref; threaded=False
    serves one request at a time on the serving loop (a synchronous worker:
    a long request stalls its heartbeat)."""
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    class Server(CorralServer, WSGIServer):
        if not threaded:
            def process_request(self, request, client_address):
                with self.count_lock:
                    self.requests += 1
                    self.inflight += 1
                self.finish_request(request, client_address)
                self.shutdown_request(request)

        def __init__(self):
            CorralServer.__init__(self, QuietHandler, notifier)
            self.server_name = "localhost"
            self.server_port = self.socket.getsockname()[1]
            self.setup_environ()
            self.set_app(app)

    class QuietHandler(WSGIRequestHandler):
        def log_message(self, fmt, *args):
            pass

    return Server()
