"""What a worker was doing when it stalled or died: the request it was
serving (its worker page, fd 5) and the stack of its main thread (asked
for before a hang kill, or on demand with `corralctl stack`). Real corrald,
real workers, real signals.
"""
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402

CORRALCTL = os.environ.get("CORRALCTL", "")
HEAVY = "/heavy?ms=60000"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PY_APP = os.path.join(ROOT, "examples", "python", "app.py")


def event(sub, name, timeout=10):
    """The next `name` event on an events subscription."""
    return sub.read_until(lambda e: e.get("event") == name, timeout, what=f"a {name} event")[-1]


def test_hang_reference():
    """A reference worker hung in /heavy?ms=60000 with --hang-timeout 2: the
    `blocked` event names the request; the post-mortem names it with its
    age, and holds the stack the worker gave before the kill, which is in
    the endpoint that burns the loop."""
    c = ct.Corrald("--watchdog", "1", "--hang-timeout", "2", workers=1, name="hang-ref")
    sub = c.subscribe()
    try:
        pid = c.live_pids()[0]
        req = c.start_request(HEAVY, timeout=30)
        req.wait_read()
        blocked = event(sub, "blocked")
        assert blocked["pid"] == pid, blocked
        assert blocked["reason"].startswith(f"GET {HEAVY} ("), blocked
        d = c.wait_death("watchdog-kill", timeout=15)[0]
        assert d["pid"] == pid, d
        assert f"in GET {HEAVY} (" in d["reason"], d["reason"]
        rq = d["request"]
        assert rq["method"] == "GET" and rq["path"] == HEAVY, rq
        assert 1500 <= rq["age_ms"] <= 10000 and rq["inflight"] == 1, rq
        st = d["stack"]
        assert st["source"] == "corral-worker", st
        first = st["text"].splitlines()[0]
        assert "cr_ep_heavy" in st["text"].split("uv_run")[0], st["text"]
        assert first.startswith("#0 "), st["text"]
        log = c.log()
        assert f"blocked: no heartbeat for" in log and f"in GET {HEAVY}" in log, log[-2000:]
        assert "its stack came in" in log, log[-2000:]
        print(f"blocked: {blocked['reason']}; stack after the ask: "
              f"{[l for l in log.splitlines() if 'its stack came in' in l][0]}")
        c.wait_ready(1)
        assert c.stop() == 0
    finally:
        sub.close()
        c.close()


def stack(c, wid):
    r = subprocess.run([CORRALCTL, "--socket", c.sock, "--timeout", "5", "stack", str(wid)],
                       capture_output=True, text=True, timeout=20)
    return r.returncode, r.stdout, r.stderr


def test_stack_on_demand():
    """`corralctl stack` while the worker idles (its loop waits in uv_run)
    and while it burns the loop (the endpoint's frame first); `status`
    names the request being served and its age, and none once it ended."""
    c = ct.Corrald("--hang-timeout", "0", workers=1, name="stack")
    try:
        rc, out, err = stack(c, 1)
        assert rc == 0, (rc, out, err)
        assert out.startswith("stack of worker 1 (corral-worker):\n#0 "), out
        assert "uv_run" in out and "cr_ep_heavy" not in out, out
        w = c.worker(1)
        assert w["request"] == {"method": None, "path": None, "age_ms": None, "inflight": 0}, w
        req = c.start_request("/heavy?ms=3000", timeout=15)
        req.wait_read()
        rc, out, err = stack(c, 1)
        assert rc == 0, (rc, out, err)
        assert "cr_ep_heavy" in out.split("uv_run")[0], out
        w = c.worker(1)
        assert w["request"]["path"] == "/heavy?ms=3000" and w["request"]["age_ms"] > 0, w
        first_age = w["request"]["age_ms"]
        ct.wait_for(lambda: c.worker(1)["request"]["age_ms"] > first_age + 100, 5,
                    what="the request's age to grow")
        assert req.result()[0] == 200
        ct.wait_for(lambda: c.worker(1)["request"]["path"] is None, 5,
                    what="no request named once it was answered")
        # Errors: no such worker; the protocol's own check of `request`.
        rc, out, err = stack(c, 7)
        assert rc == 1 and "not-found" in err, (rc, out, err)
        r = c.ctl("stack", worker=1, request=0)
        assert not r["ok"] and r["error"]["code"] == "bad-argument", r
        assert c.stop() == 0
    finally:
        c.close()


def test_stack_wait_held():
    """A `stack` with "wait" is answered once, when the stack is in (the
    client asks nothing again), and the client's next line right after it;
    a worker that cannot answer (SIGSTOP) gets `pending` at the wait's end,
    with the request's number to go on with, which its next process cannot
    answer (no-process), and a number never asked is refused; a line sent
    with EOF is held and answered before the close."""
    c = ct.Corrald("--hang-timeout", "0", workers=1, name="stack-wait")
    try:
        ctl = c.control()
        t0 = time.monotonic()
        ctl.send(b'{"cmd":"stack","worker":1,"wait":5000,"id":1}\n{"cmd":"ping","id":2}\n')
        r1, r2 = json.loads(ctl.line()), json.loads(ctl.line())
        assert r1["id"] == 1 and r1["stack"]["state"] == "ready", r1
        assert "uv_run" in r1["stack"]["text"], r1
        assert r2 == {"ok": True, "pong": "corral", "id": 2}, r2
        print(f"held stack answer in {(time.monotonic() - t0) * 1000:.0f} ms")
        pid = c.live_pids()[0]
        assert c.ctl("kill", worker=1, signal="STOP")["ok"]
        try:
            t0 = time.monotonic()
            ctl.send({"cmd": "stack", "worker": 1, "wait": 400})
            r = json.loads(ctl.line())
            took = time.monotonic() - t0
            assert r["stack"]["state"] == "pending" and 0.38 <= took < 3, (r, took)
            n = r["stack"]["request"]
            # Still pending: the same request, answered at once without a wait.
            r = c.ctl("stack", worker=1, request=n)
            assert r["stack"] == {"state": "pending", "request": n}, r
            # A peer that leaves while its answer is held costs nothing
            # after the wait (the sanitizer pass checks the leak too).
            gone = c.control()
            gone.send({"cmd": "stack", "worker": 1, "request": n, "wait": 300})
            gone.close()
        finally:
            c.ctl("kill", worker=1, signal="CONT")
        r = c.ctl("stack", worker=1, request=n, wait=5000)
        assert r["stack"]["state"] == "ready" and r["stack"]["request"] == n, r
        # Its next process: the number was not asked of it.
        assert c.ctl("kill", worker=1, signal="KILL")["ok"]
        ct.wait_for(lambda: (lambda p: p and p != [pid])(c.live_pids()), 10,
                    what="the worker's next process")
        r = c.ctl("stack", worker=1, request=n, wait=1000)
        assert not r["ok"] and r["error"]["code"] == "no-process", r
        assert "has exited" in r["error"]["message"], r
        r = c.ctl("stack", worker=1, request=4000000000, wait=1000)
        assert not r["ok"] and r["error"]["code"] == "bad-argument", r
        assert "never asked" in r["error"]["message"], r
        # A held line then EOF: the answer, then the close.
        ctl.close()
        ctl = c.control()
        ctl.send({"cmd": "stack", "worker": 1, "wait": 5000})
        ctl.s.shutdown(socket.SHUT_WR)
        r = json.loads(ctl.line())
        assert r["stack"]["state"] == "ready", r
        assert ctl.line() is None
        ctl.close()
        assert c.stop() == 0
    finally:
        c.close()


# A worker whose stack answer is hostile text: a terminal title, a bell, a
# screen clear and a CR.
HOSTILE_WORKER = """
import sys
sys.path.insert(0, sys.argv[1])
import corral_notify
corral_notify.Page._stack_text = lambda self: (
    b"\\x1b]0;owned\\x07frame one\\x1b[2J\\r\\nframe two\\n")
corral_notify.serve(corral_notify.make_wsgi_server(
    lambda env, start: start("200 OK", []) or [b"ok"]))
"""


def test_stack_text_shown_clean():
    """`corralctl stack` prints what the worker wrote: its control bytes
    (an escape sequence's start, a bell, a CR) come out as '?', as `why`
    shows them, never raw on the operator's terminal; --json keeps them,
    escaped by JSON."""
    c = None
    try:
        c = ct.Corrald("--hang-timeout", "0", workers=1, name="stack-clean",
                       command=[sys.executable, "-c", HOSTILE_WORKER,
                                os.path.join(ROOT, "examples", "python")])
        rc, out, err = stack(c, 1)
        assert rc == 0, (rc, out, err)
        assert out == "stack of worker 1 (python):\n?]0;owned?frame one?[2J?\nframe two\n", out
        r = subprocess.run([CORRALCTL, "--socket", c.sock, "--json", "stack", "1"],
                           capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r
        text = json.loads(r.stdout)["stack"]["text"]
        assert text == "\x1b]0;owned\x07frame one\x1b[2J\r\nframe two\n", text
        assert c.stop() == 0
    finally:
        if c:
            c.close()


def test_stack_missing():
    """A worker with no page says nothing: the hang kill proceeds at once
    and the post-mortem says why there is no stack; --stack-timeout 0 asks
    for none (null)."""
    c = ct.Corrald("--watchdog", "1", "--hang-timeout", "2", "--no-worker-page", workers=1,
                   name="nopage")
    try:
        rc, out, err = stack(c, 1)
        assert rc == 1 and "no page" in err, (rc, out, err)
        req = c.start_request(HEAVY, timeout=30)
        req.wait_read()
        d = c.wait_death("watchdog-kill", timeout=15)[0]
        assert d["request"] is None, d
        assert d["stack"] == {"missing": "the worker has no page (--no-worker-page)"}, d["stack"]
        assert c.stop() == 0
    finally:
        c.close()
    c = ct.Corrald("--watchdog", "1", "--hang-timeout", "2", "--stack-timeout", "0", workers=1,
                   name="nostack")
    try:
        req = c.start_request(HEAVY, timeout=30)
        req.wait_read()
        d = c.wait_death("watchdog-kill", timeout=15)[0]
        assert d["stack"] is None, d["stack"]
        assert d["request"]["path"] == HEAVY, d
        assert "asking for its stack" not in c.log()
        assert c.stop() == 0
    finally:
        c.close()


def test_hang_python():
    """The Python helper's synchronous worker stuck in /heavy: the blocked
    event and the post-mortem name the request; the stack is the helper's
    answer, the serving thread's traceback ending in the app's loop. With
    --no-worker-page the helper says nothing, and the stack comes from
    the traceback Python's faulthandler printed at the SIGABRT."""
    c = ct.Corrald("--watchdog", "1", "--hang-timeout", "2", workers=1, name="hang-py",
                   command=[sys.executable, PY_APP, "--sync"])
    sub = c.subscribe()
    try:
        req = c.start_request(HEAVY, timeout=30)
        req.wait_read()
        assert event(sub, "blocked")["reason"].startswith(f"GET {HEAVY} ("), c.log()[-2000:]
        d = c.wait_death("watchdog-kill", timeout=15)[0]
        assert d["request"]["path"] == HEAVY and d["request"]["age_ms"] >= 1000, d["request"]
        st = d["stack"]
        assert st["source"] == "python", st
        main = st["text"].split("Thread ")[1]  # the serving thread comes first
        assert "(main)" in main and main.rstrip().endswith("while time.monotonic() < end:"), st
        assert 'app.py", line' in main and "in heavy" in main, st
        assert c.stop() == 0
    finally:
        sub.close()
        c.close()
    c = ct.Corrald("--watchdog", "1", "--hang-timeout", "2", "--no-worker-page", workers=1,
                   name="hang-py-fh", command=[sys.executable, PY_APP, "--sync"])
    try:
        req = c.start_request(HEAVY, timeout=30)
        req.wait_read()
        d = c.wait_death("watchdog-kill", timeout=15)[0]
        st = d["stack"]
        assert st["source"] == "faulthandler", st
        assert st["text"].startswith("Current thread 0x") or st["text"].startswith("Thread 0x"), st
        assert 'app.py", line' in st["text"] and " in heavy\n" in st["text"], st
        assert d["request"] is None, d["request"]
        assert c.stop() == 0
    finally:
        c.close()


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
