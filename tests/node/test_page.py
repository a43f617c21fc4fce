#!/usr/bin/env python3
"""The Node agent's side of the worker page (docs/worker-protocol.md, "The
worker page"): an unmodified app (tests/node/spin_app.js) with
corral-node-agent.js preloaded names the request it serves and answers
stack requests with its main thread's JavaScript stack, while that thread
spins in a handler.

The record_* and stack_* cases run the app the way corrald does (fds 3 and
5, harness.Worker) and read the page as corrald does; the corrald_* cases
run it under corrald: the `blocked` event, the post-mortem of a hang kill,
`corralctl stack`, a crash.

usage: test_page.py <case>; CORRAL_NODE names node (any node whose name
starts with "node": a wrapper such as a Node 18 runner works too)."""

import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import Worker, ct, node_or_skip  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
AGENT = os.path.join(ROOT, "agent", "corral-node-agent.js")
SPIN = os.path.join(HERE, "spin_app.js")
PRELOAD = ["--require=" + AGENT]
CORRALCTL = os.environ.get("CORRALCTL", "")
F_REQUEST, F_STACK = 1, 2
# The line of spinFor's loop in spin_app.js: where the stack must point.
SPIN_LINE = next(i for i, l in enumerate(open(SPIN), 1) if "while (Date.now() < end) n++;" in l)


def page_worker(node, **kw):
    return Worker(node, SPIN, node_args=PRELOAD, notify=False, page=True, **kw)


def features(w, want, timeout=15):
    """The page's features once they hold `want` (the helper thread boots
    in 50-800 ms)."""
    return ct.wait_for(lambda: (w.page.features() & want) == want and w.page.features(),
                       timeout, what=f"features {want} on the page")


def record(w, pred, timeout=5, what="the record"):
    def ok():
        r = w.page.request()
        return r if r is not None and pred(r) else None
    try:
        return ct.wait_for(ok, timeout, interval=0.005, what=what)
    except AssertionError:
        raise AssertionError(f"{what}: the page holds {w.page.request()}") from None


def stack(w, timeout=5):
    """Asks for a stack and waits for the answer: (source, text, ms)."""
    t0 = time.monotonic()
    n = w.page.ask_stack()
    got = ct.wait_for(lambda: w.page.answer(n), timeout, interval=0.002, what=f"stack answer {n}")
    return got[0], got[1], (time.monotonic() - t0) * 1000


def start(w, path):
    r = ct.Request("127.0.0.1", w.port, path, timeout=30)
    r.wait_read()
    return r


def test_record(node):
    """The record names the newest request in flight, with its start time
    and the count in flight; an older one is named again when the newest
    ends; none once all ended; a request whose client went away ends at
    its close. Every record read is whole (sequence numbers equal). The
    record is offered (feature bit 0) only once the server of fd 3 had a
    request: until then a blocked app's request is unknown, not none."""
    w = page_worker(node)
    try:
        w.wait_ready()
        f = features(w, F_STACK)
        assert f == F_STACK, f
        assert ct.http_get("127.0.0.1", w.port, "/")[0] == 200
        f = features(w, F_REQUEST | F_STACK)
        assert f == F_REQUEST | F_STACK, f
        r = record(w, lambda r: r["inflight"] == 0)
        assert r["method"] is None and r["target"] is None, r
        a = start(w, "/wait?ms=3000&first")
        ra = record(w, lambda r: r["inflight"] == 1, what="the first request named")
        assert ra["method"] == "GET" and ra["target"] == "/wait?ms=3000&first", ra
        assert 0 <= ra["age_ms"] < 3000, ra
        b = start(w, "/wait?ms=1000&second")
        rb = record(w, lambda r: r["inflight"] == 2, what="the second request named")
        assert rb["target"] == "/wait?ms=1000&second" and rb["count"] == ra["count"] + 1, rb
        assert rb["age_ms"] < ra["age_ms"] + 1000, (ra, rb)
        assert b.result()[0] == 200
        r = record(w, lambda r: r["inflight"] == 1, what="the first one named again")
        assert r["target"] == "/wait?ms=3000&first", r
        assert a.result()[0] == 200
        r = record(w, lambda r: r["inflight"] == 0, what="none in flight")
        assert r["target"] is None and r["count"] == rb["count"], r
        # A client that goes away: no 'finish', only 'close'.
        c = socket.create_connection(("127.0.0.1", w.port))
        c.sendall(b"GET /wait?ms=20000&gone HTTP/1.1\r\nHost: x\r\n\r\n")
        record(w, lambda r: r["inflight"] == 1 and r["target"] == "/wait?ms=20000&gone",
               what="the abandoned request named")
        c.close()
        r = record(w, lambda r: r["inflight"] == 0, what="the abandoned request ended")
        assert r["target"] is None and r["lengths"] == (0, 0), r
        # Two pipelined requests on one connection that goes away: both end
        # at its close (the agent watches the socket, not each response).
        c = socket.create_connection(("127.0.0.1", w.port))
        c.sendall(b"GET /wait?ms=20000&p1 HTTP/1.1\r\nHost: x\r\n\r\n"
                  b"GET /wait?ms=20000&p2 HTTP/1.1\r\nHost: x\r\n\r\n")
        record(w, lambda r: r["inflight"] == 2 and r["target"] == "/wait?ms=20000&p2",
               what="the second pipelined request named")
        c.close()
        r = record(w, lambda r: r["inflight"] == 0, what="both pipelined requests ended")
        assert r["target"] is None, r
        # The same target again after none: named whole (its bytes are kept
        # in the record, only its length comes back).
        for i in range(2):
            e = start(w, "/wait?ms=300&again")
            r = record(w, lambda r: r["inflight"] == 1, what=f"the same target, {i + 1}")
            assert r["method"] == "GET" and r["target"] == "/wait?ms=300&again", r
            assert e.result()[0] == 200
            record(w, lambda r: r["inflight"] == 0, what="none in flight again")
        # A long target is cut to 384 bytes.
        long = "/wait?ms=2000&" + "x" * 500
        d = start(w, long)
        r = record(w, lambda r: r["inflight"] == 1, what="the long request named")
        assert r["target"] == long[:384] and r["count"] == rb["count"] + 6, r
        assert d.result()[0] == 200
        print(f"record ok: {record(w, lambda r: r['inflight'] == 0)}")
    finally:
        w.kill()


def expect_request(port, target, expect=b"100-continue", interim=True):
    """Sends the head of a request with an Expect header and a 5-byte body:
    the connection, and whether a 100 Continue came within 2 s (the body
    is sent then, or after the wait; at once for another expectation, or
    without interim)."""
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nExpect: %s\r\n"
              b"Content-Length: 5\r\n\r\n" % (target.encode(), expect))
    c.settimeout(2)
    try:
        interim = c.recv(64) if interim and expect == b"100-continue" else b""
    except socket.timeout:
        interim = b""
    c.sendall(b"hello")
    c.settimeout(30)
    return c, interim.startswith(b"HTTP/1.1 100 Continue")


def test_record_expect(node):
    """Requests with `Expect: 100-continue`: while the app has no
    'checkContinue' listener, Node answers 100 Continue itself and the
    request is named as any other (the agent added no listener of its
    own); once the app takes them, the ones it serves through its
    listener are named and counted, the ones it passes on as 'request'
    counted once (its listeners added with on() or prependListener());
    once it stops, Node's 100 Continue is back. Another
    expectation: named when the app's 'checkExpectation' takes it, else
    Node's 417 (nothing served, nothing counted)."""
    w = page_worker(node)
    try:
        w.wait_ready()
        assert ct.http_get("127.0.0.1", w.port, "/")[0] == 200
        features(w, F_REQUEST | F_STACK)
        base = record(w, lambda r: r["inflight"] == 0)["count"]

        def served(target, count, continued):
            c, got = expect_request(w.port, target)
            try:
                assert got == continued, (target, got)
                # The GET before may still be ending (its 'close' comes after
                # the client read the answer): this request, alone.
                r = record(w, lambda r: r["inflight"] == 1 and r["target"] == target,
                           what=f"{target} named")
                assert r["method"] == "POST" and r["target"] == target and r["count"] == count, r
                assert c.recv(4096).startswith(b"HTTP/1.1 200"), target
            finally:
                c.close()
            r = record(w, lambda r: r["inflight"] == 0, what=f"{target} ended")
            assert r["count"] == count, r

        served("/wait?ms=2000&auto", base + 1, True)
        assert ct.http_get("127.0.0.1", w.port, "/expect/on")[0] == 200
        served("/wait?ms=2000&listener", base + 3, True)
        served("/wait?ms=2000&reemit", base + 4, True)
        c, got = expect_request(w.port, "/wait?ms=2000&other", b"x-corral")
        try:
            r = record(w, lambda r: r["inflight"] == 1 and r["target"] == "/wait?ms=2000&other",
                       what="another expectation named")
            assert r["target"] == "/wait?ms=2000&other" and r["count"] == base + 5, r
            assert not got and c.recv(4096).startswith(b"HTTP/1.1 200")
        finally:
            c.close()
        assert ct.http_get("127.0.0.1", w.port, "/expect/off")[0] == 200
        served("/wait?ms=2000&auto-again", base + 7, True)
        c, got = expect_request(w.port, "/wait?ms=2000&refused", b"x-corral")
        try:
            assert c.recv(4096).startswith(b"HTTP/1.1 417"), "Node's own 417"
        finally:
            c.close()
        assert ct.http_get("127.0.0.1", w.port, "/")[0] == 200
        r = record(w, lambda r: r["inflight"] == 0 and r["count"] == base + 8,
                   what="the 417 not counted")
        # The app's listeners put before every other (prependListener): the
        # agent's still come first, and a passed-on request counts once.
        assert ct.http_get("127.0.0.1", w.port, "/expect/on?prepend")[0] == 200
        served("/wait?ms=2000&prepended", base + 10, True)
        served("/wait?ms=2000&prepended-reemit", base + 11, True)
        # First indeed: a handler that blocks the loop is named while it
        # does (an agent listener behind the app's would name it after).
        t0 = time.monotonic()
        c, _ = expect_request(w.port, "/spin?ms=3000&prepended", interim=False)
        try:
            r = record(w, lambda r: r["target"] == "/spin?ms=3000&prepended",
                       what="the spinning request named")
            took = time.monotonic() - t0
            assert took < 2.0 and r["count"] == base + 12, (took, r)
            got = b""
            while b"HTTP/1.1 200 " not in got:  # after the 100 Continue
                chunk = c.recv(4096)
                assert chunk, got
                got += chunk
        finally:
            c.close()
        print(f"expect ok: {record(w, lambda r: r['inflight'] == 0)}")
    finally:
        w.kill()


def test_record_listeners(node):
    """The app replaces its 'request' listeners (removeAllListeners, then
    its handler again: a reload idiom): its requests are still named and
    counted. It emits 'request' with objects of its own (no headers, no
    socket) while it takes Expect requests: the agent neither throws (its
    listener runs first, inside the app's emit) nor stops counting."""
    w = page_worker(node)
    try:
        w.wait_ready()
        assert ct.http_get("127.0.0.1", w.port, "/")[0] == 200
        features(w, F_REQUEST | F_STACK)
        assert ct.http_get("127.0.0.1", w.port, "/expect/on")[0] == 200
        st, body = ct.http_get("127.0.0.1", w.port, "/request/synthetic")[:2]
        assert st == 200, (st, body)
        assert ct.http_get("127.0.0.1", w.port, "/request/replace")[0] == 200
        a = start(w, "/wait?ms=3000&after-replace")
        r = record(w, lambda r: r["target"] == "/wait?ms=3000&after-replace",
                   what="a request after the replace named")
        # GET /, /expect/on, /request/synthetic and the request it emitted
        # (in flight for good: its response has no events), /request/replace.
        assert r["count"] == 6 and r["inflight"] == 2, r
        assert a.result()[0] == 200
        print(f"listeners ok: {r}")
    finally:
        w.kill()


def test_stack(node):
    """A stack request while the main thread spins in spinFor() is answered
    with its JS stack, innermost first, file and line; while it idles,
    "idle"; a request raised the moment stacks are offered (corrald may
    ask before the helper's first look) is answered."""
    w = page_worker(node)
    try:
        ct.wait_for(lambda: w.page.features() & F_STACK, 15, interval=0, what="stacks offered")
        early = w.page.ask_stack()
        got = ct.wait_for(lambda: w.page.answer(early), 5, what="the first request's answer")
        assert got[0] == "node-inspector", got
        w.wait_ready()
        src, text, ms = stack(w)
        assert src == "node-inspector" and text == "idle: the main thread runs no JavaScript\n", text
        r = start(w, "/spin?ms=2500")
        lat = []
        for _ in range(3):
            src, text, ms = stack(w)
            lat.append(ms)
            lines = text.splitlines()
            assert lines[0].startswith(f"spinFor ({SPIN}:{SPIN_LINE}:"), text
            assert lines[1].startswith(f"handle ({SPIN}:"), text
            assert any(l.startswith("parserOnIncoming (node:_http_server:") for l in lines), text
            assert "corralNodeAgentStack" not in text and "<anonymous> (<anonymous>" not in text, text
        assert r.result()[0] == 200
        print(f"stack latency while spinning: {', '.join(f'{x:.1f}' for x in lat)} ms")
    finally:
        w.kill()


def test_stack_claimed(node):
    """An app that reads CORRAL_PAGE_FD itself keeps the page: the agent
    offers nothing on it (features 0, also after its helper thread booted,
    50-800 ms later) and writes nothing more to it (its helper stops
    answering)."""
    code = ("const fd = process.env.CORRAL_PAGE_FD;"
            "require('http').createServer((q, r) => r.end(String(fd))).listen({fd: 3});")
    w = Worker(node, code, node_args=PRELOAD + ["-e"], notify=False, page=True)
    try:
        w.wait_ready()
        time.sleep(1.0)  # past the helper's boot
        assert w.page.features() == 0, w.page.features()
        before = w.page.request()
        st = ct.http_get("127.0.0.1", w.port, "/x")
        assert st[0] == 200 and st[2] == b"5", st
        n = w.page.ask_stack()
        # Observation window: 10 of the helper's looks at the request word.
        time.sleep(0.5)
        assert w.page.answer(n) is None, w.page.answer(n)
        assert w.page.request()["seq"] == before["seq"], (before, w.page.request())
    finally:
        w.kill()


def test_record_exit(node):
    """An uncaught exception in a handler: the process exits, and the page
    it leaves behind (corrald reads it after the death) names the request
    that threw."""
    w = page_worker(node)
    try:
        w.wait_ready()
        features(w, F_STACK)
        assert ct.http_get("127.0.0.1", w.port, "/")[0] == 200
        features(w, F_REQUEST | F_STACK)
        c = socket.create_connection(("127.0.0.1", w.port))
        c.sendall(b"GET /throw?why=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        st = w.wait_exit(10)
        c.close()
        assert st is not None and os.WIFEXITED(st) and os.WEXITSTATUS(st) == 1, st
        r = w.page.request()
        assert r["inflight"] == 1 and r["target"] == "/throw?why=1", r
        assert "thrown by the handler of /throw" in w.stderr(), w.stderr()
        assert "Waiting for the debugger" not in w.stderr(), w.stderr()
    finally:
        w.kill()


# ---- under corrald -----------------------------------------------------------

def corrald(node, *args, name, **kw):
    return ct.Corrald("--node-agent", *args, workers=1, command=[node, SPIN], name=name, **kw)


def ctl_stack(c, wid=1):
    r = subprocess.run([CORRALCTL, "--socket", c.sock, "--timeout", "5", "stack", str(wid)],
                       capture_output=True, text=True, timeout=20)
    return r.returncode, r.stdout, r.stderr


def event(sub, name, timeout=10):
    return sub.read_until(lambda e: e.get("event") == name, timeout, what=f"a {name} event")[-1]


def test_corrald_hang(node):
    """A handler that spins for 60 s under --watchdog 1 --hang-timeout 2:
    the blocked event names the request; the hang kill's post-mortem names
    it with its age and holds the stack the helper took before the kill,
    spinFor() first with its file and line."""
    path = "/spin?ms=60000"
    c = corrald(node, "--watchdog", "1", "--hang-timeout", "2", name="nhang")
    sub = c.subscribe()
    try:
        pid = c.live_pids()[0]
        # The helper thread boots 50-800 ms after the app: a hang before
        # that has no stack to give.
        ct.wait_for(lambda: ctl_stack(c)[0] == 0, 15, what="stacks answered")
        c.get("/")  # the first request: the record is offered from it on
        ct.wait_for(lambda: (c.worker(1).get("request") or {}).get("inflight") == 0, 15,
                    what="the agent's record on the page")
        req = c.start_request(path, timeout=30)
        req.wait_read()
        blocked = event(sub, "blocked")
        assert blocked["pid"] == pid and blocked["reason"].startswith(f"GET {path} ("), blocked
        d = c.wait_death("watchdog-kill", timeout=20)[0]
        assert d["pid"] == pid and f"in GET {path} (" in d["reason"], d["reason"]
        rq = d["request"]
        assert rq["method"] == "GET" and rq["path"] == path and rq["inflight"] == 1, rq
        assert 1500 <= rq["age_ms"] <= 15000, rq
        st = d["stack"]
        assert st["source"] == "node-inspector", st
        first = st["text"].splitlines()[0]
        assert first.startswith(f"spinFor ({SPIN}:{SPIN_LINE}:"), st["text"]
        assert f"handle ({SPIN}:" in st["text"], st["text"]
        came = [l for l in c.log().splitlines() if "its stack came in" in l]
        assert came, c.log()[-2000:]
        print(f"blocked: {blocked['reason']}\n{came[0]}")
        c.wait_ready(1, timeout=15)
        assert c.stop() == 0
    finally:
        sub.close()
        c.close()


def test_corrald_stack(node):
    """`corralctl stack` on demand: idle, then inside spinFor(); status
    names the request being served, and none once it was answered."""
    c = corrald(node, "--hang-timeout", "0", name="nstack")
    try:
        ct.wait_for(lambda: ctl_stack(c)[0] == 0, 15, what="stacks answered")
        rc, out, err = ctl_stack(c)
        assert out == "stack of worker 1 (node-inspector):\nidle: the main thread runs no JavaScript\n", out
        req = c.start_request("/spin?ms=3000", timeout=15)
        req.wait_read()
        t0 = time.monotonic()
        rc, out, err = ctl_stack(c)
        ms = (time.monotonic() - t0) * 1000
        assert rc == 0 and out.splitlines()[1].startswith(f"spinFor ({SPIN}:{SPIN_LINE}:"), (rc, out, err)
        w = c.worker(1)
        assert w["request"]["path"] == "/spin?ms=3000" and w["request"]["age_ms"] > 0, w["request"]
        assert req.result()[0] == 200
        ct.wait_for(lambda: c.worker(1)["request"]["path"] is None, 5,
                    what="no request named once it was answered")
        print(f"corralctl stack while spinning: {ms:.0f} ms")
        assert c.stop() == 0
    finally:
        c.close()


def test_corrald_not_interruptible(node):
    """One native call that runs for 20 s (crypto.pbkdf2Sync) never reaches
    an interrupt check: no stack within --stack-timeout, the kill proceeds,
    the post-mortem says why and still names the request."""
    path = "/native?ms=20000"
    c = corrald(node, "--watchdog", "1", "--hang-timeout", "2", name="nparse")
    try:
        ct.wait_for(lambda: ctl_stack(c)[0] == 0, 15, what="stacks answered")
        req = c.start_request(path, timeout=30)
        req.wait_read()
        d = c.wait_death("watchdog-kill", timeout=20)[0]
        assert d["request"]["path"] == path, d["request"]
        assert d["stack"] == {"missing": "no answer within 1000 ms (--stack-timeout)"}, d["stack"]
        c.wait_ready(1, timeout=15)
        assert c.stop() == 0
    finally:
        c.close()


def test_corrald_net(node):
    """An app that serves plain net (no http server publishes requests):
    the agent offers no record, so a worker stuck in its handler shows its
    request as unknown (null), never as "none being served"."""
    code = ("require('net').createServer((s) => s.on('data', () => {"
            " const end = Date.now() + 2000; while (Date.now() < end); s.end('x'); }))"
            ".listen({fd: 3});")
    c = ct.Corrald("--node-agent", workers=1, command=[node, "-e", code], name="nnet")
    try:
        ct.wait_for(lambda: c.worker(1).get("last_report_ago_ms") is not None, 15,
                    what="the agent's first report")
        with socket.create_connection((c.host, c.port)) as s:
            s.sendall(b"spin")
            time.sleep(0.5)
            w = c.worker(1)
            assert w["request"] is None, w["request"]
            s.settimeout(10)
            assert s.recv(1) == b"x"
    finally:
        c.close()


def test_corrald_crash(node):
    """An uncaught exception thrown by a handler: the crash's post-mortem
    names the request it was serving."""
    c = corrald(node, name="ncrash")
    try:
        c.get("/")  # the first request: the record is offered from it on
        ct.wait_for(lambda: (c.worker(1).get("request") or {}).get("inflight") == 0, 15,
                    what="the agent's record on the page")
        pid = c.live_pids()[0]
        with socket.create_connection((c.host, c.port)) as s:
            s.sendall(b"GET /throw?x=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            d = c.wait_death(timeout=15)[0]
        assert d["pid"] == pid and d["exit_code"] == 1, d
        assert d["request"]["path"] == "/throw?x=1" and d["request"]["inflight"] == 1, d["request"]
        assert c.stop() == 0
    finally:
        c.close()


if __name__ == "__main__":
    ct.main(sys.modules[__name__], call=lambda fn: fn(node_or_skip()))
