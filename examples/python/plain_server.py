#!/usr/bin/env python3
"""An ordinary Python http.server app with no corral code at all: it serves
the listening socket it inherits as fd 3 (systemd's and corrald's
convention) and stops gracefully on SIGTERM. corrald runs it as is:

    corrald --workers 2 --memory-max 256M -- python3 examples/python/plain_server.py

GET /buffer?mb=N keeps N MB more (resident memory that only grows), so a
--memory-soft recycle or a --memory-max kill can be seen. Standard library
only.
"""
import json
import os
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

kept = []
kept_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/buffer":
            try:
                mb = int(parse_qs(url.query).get("mb", ["1"])[0])
            except ValueError:
                mb = 0
            if not 1 <= mb <= 1024:
                return self.reply(400, {"error": "mb: 1..1024"})
            with kept_lock:
                kept.extend(bytearray(b"\1" * (1 << 20)) for _ in range(mb))
        self.reply(200, {"pid": os.getpid(), "kept_mb": len(kept)})

    def reply(self, status, obj):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        pass  # one line per request would drown corrald's log


def main():
    # fd 3 is already bound and listening: adopt it, never bind.
    sock = socket.socket(fileno=3)
    server = ThreadingHTTPServer(sock.getsockname()[:2], Handler, bind_and_activate=False)
    server.socket.close()
    server.socket = sock
    # Requests in progress finish before the process exits (HTTP/1.0: every
    # connection closes after its response, so none lingers).
    server.daemon_threads = False
    signal.signal(signal.SIGTERM,
                  lambda *_: threading.Thread(target=server.shutdown, daemon=True).start())
    server.serve_forever()
    server.server_close()


if __name__ == "__main__":
    main()
