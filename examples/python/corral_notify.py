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
"""
import os
import signal
import socket
import threading
import time
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
    server.serve_forever(poll_interval=server.poll_interval)
    server.server_close()


def make_wsgi_server(app, notifier=None):
    """A CorralServer running a WSGI app through wsgiref."""
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

    class Server(CorralServer, WSGIServer):
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
