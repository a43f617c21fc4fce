#!/usr/bin/env python3
"""A WSGI app made a speaking corral worker by corral_notify (standard
library only):

    corrald --workers 2 --memory-max 256M --memory-soft 80% \\
        -- python3 examples/python/app.py

It sends READY=1 when it serves, WATCHDOG=1 with its RSS and request counts
every second from its serving loop, and STOPPING=1 when it drains.

    GET /            a small JSON answer with the worker's pid and id
    GET /buffer?mb=N keeps N MB more (RSS grows; the soft limit recycles it)
    GET /sleep?ms=N  holds the request N ms (to watch a graceful drain)
    GET /heavy?ms=N  computes for N ms (a stuck worker, with --sync)

--sync serves one request at a time, as a synchronous worker of a
pre-forked server does: a long /heavy then stalls its serving loop, its
heartbeat stops, and corrald flags it blocked, asks for its stack and
kills it at --hang-timeout; the post-mortem names the request and holds
the traceback (the helper's stack thread answers; corrald also sets
PYTHONFAULTHANDLER=1, so the SIGABRT dumps every thread on stderr).
"""
import json
import os
import sys
import threading
import time
from urllib.parse import parse_qs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corral_notify import make_wsgi_server, serve  # noqa: E402

kept = []
kept_lock = threading.Lock()


def number(environ, name, default, top):
    try:
        n = int(parse_qs(environ.get("QUERY_STRING", "")).get(name, [str(default)])[0])
    except ValueError:
        return None
    return n if 0 <= n <= top else None


def heavy(ms):
    """Burns the CPU for ms milliseconds in Python code."""
    end = time.monotonic() + ms / 1000
    n = 0
    while time.monotonic() < end:
        n += 1
    return n


def app(environ, start_response):
    path = environ.get("PATH_INFO", "/")
    status = "200 OK"
    if path == "/buffer":
        mb = number(environ, "mb", 1, 1024)
        if mb is None:
            status = "400 Bad Request"
        else:
            with kept_lock:
                kept.extend(bytearray(b"\1" * (1 << 20)) for _ in range(mb))
    elif path == "/heavy":
        ms = number(environ, "ms", 100, 60000)
        if ms is None:
            status = "400 Bad Request"
        else:
            heavy(ms)
    elif path == "/sleep":
        ms = number(environ, "ms", 100, 60000)
        if ms is None:
            status = "400 Bad Request"
        else:
            time.sleep(ms / 1000)
    body = json.dumps({"pid": os.getpid(), "worker": os.environ.get("CORRAL_WORKER_ID"),
                       "kept_mb": len(kept)}).encode() + b"\n"
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))])
    return [body]


if __name__ == "__main__":
    serve(make_wsgi_server(app, threaded="--sync" not in sys.argv[1:]))
