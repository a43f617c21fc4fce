"""Control-protocol tests against a live corrald (suite 'ctl')."""
import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from charness import Control, Corrald, check, wait_for  # noqa: E402
import corraltest as ct  # noqa: E402  (on the path through charness)


def err_code(res):
    check(res.get("ok") is False, "expected an error, got %r" % res)
    e = res["error"]
    check(isinstance(e.get("message"), str) and e["message"], "error without message: %r" % res)
    return e["code"]


def test_commands():
    """Every command answers ok with its documented shape; id is echoed."""
    with Corrald(workers=2, name="cmds") as d:
        r = d.request({"cmd": "ping", "id": "abc"})
        check(r == {"ok": True, "pong": "corral", "id": "abc"}, "ping: %r" % r)
        r = d.request({"cmd": "ping", "id": {"n": [1, 2]}})
        check(r["id"] == {"n": [1, 2]}, "structured id not echoed: %r" % r)
        st = d.request({"cmd": "status"})
        check(st["ok"] and len(st["workers"]) == 2, "status: %r" % st)
        ws = d.request({"cmd": "workers"})["workers"]
        check([w["id"] for w in ws] == [1, 2] or sorted(w["id"] for w in ws) == [1, 2], "workers")
        w = d.request({"cmd": "worker", "worker": 1})
        check(w["ok"] and w["worker"]["id"] == 1 and w["worker"]["pid"] > 0, "worker: %r" % w)
        h = d.request({"cmd": "history", "n": 5})
        check(h == {"ok": True, "history": []}, "history: %r" % h)
        m = d.request({"cmd": "metrics"})
        check(m["ok"] and "corral_up 1" in m["metrics"], "metrics")
        s = d.request({"cmd": "set", "key": "max-requests", "value": 1000})
        check(s == {"ok": True, "key": "max-requests", "value": "1000"}, "set: %r" % s)
        check(d.request({"cmd": "status"})["supervisor"]["config"]["max-requests"] == 1000,
              "set did not change the config")
        old = d.pids()
        k = d.request({"cmd": "kill", "worker": 2, "signal": "KILL"})
        check(k == {"ok": True, "signal": 9}, "kill: %r" % k)
        wait_for(lambda: d.request({"cmd": "history"})["history"], timeout=10, what="a death")
        r = d.request({"cmd": "restart", "worker": 1})
        check(r == {"ok": True}, "restart: %r" % r)
        r = d.request({"cmd": "restart", "worker": "all"})
        check(r == {"ok": True}, "restart all: %r" % r)
        wait_for(lambda: not set(d.pids()) & set(old) and len(d.pids()) == 2,
                   timeout=10, what="every worker replaced")
        r = d.request({"cmd": "reload"})
        check(r == {"ok": True}, "reload: %r" % r)
        r = d.request({"cmd": "scale", "workers": 3})
        check(r == {"ok": True, "workers": 3}, "scale: %r" % r)
        wait_for(lambda: len(d.pids()) == 3, timeout=10, what="3 workers")
        c = Control(d.sock)
        check(c.call({"cmd": "events"}) == {"ok": True, "subscribed": True}, "events")
        d.request({"cmd": "kill", "worker": 3, "signal": "TERM"})
        # (A reload may still be rolling: skip other workers' deaths.)
        seen = c.read_until(lambda e: e["event"] == "died" and e["worker"] == 3, 10,
                            what="worker 3's died event")
        died = [e for e in seen if e["event"] == "died" and e["worker"] == 3]
        check(died and died[0]["category"] and "postmortem" in died[0],
              "no died event for worker 3: %r" % seen)
        check(all(set(e) >= {"event", "time_ms", "worker", "pid", "generation"} for e in seen),
              "event without its common fields: %r" % seen)
        c.close()
        r = d.request({"cmd": "stop", "id": 1})
        check(r == {"ok": True, "id": 1}, "stop: %r" % r)
        d.proc.wait(15)
        check(d.proc.returncode == 0, "corrald exit %s after stop" % d.proc.returncode)
        check(not os.path.exists(d.sock), "control socket left behind")


def test_errors():
    """Every error code reachable from a request."""
    with Corrald(workers=1, name="errs", args=["--backoff-initial", "3000"]) as d:
        cases = [
            (b"{\"cmd\":", "bad-json"),
            (b"not json at all", "bad-json"),
            (b"[1,2,3]", "bad-request"),
            (b"\"status\"", "bad-request"),
            (b"{}", "bad-request"),
            (b"{\"cmd\":42}", "bad-request"),
            (b"{\"cmd\":\"frobnicate\"}", "unknown-command"),
            (b"{\"cmd\":\"Status\"}", "unknown-command"),
            (b"{\"cmd\":\"worker\"}", "bad-argument"),
            (b"{\"cmd\":\"worker\",\"worker\":0}", "bad-argument"),
            (b"{\"cmd\":\"worker\",\"worker\":1.5}", "bad-argument"),
            (b"{\"cmd\":\"worker\",\"worker\":1e20}", "bad-argument"),
            (b"{\"cmd\":\"worker\",\"worker\":-1e20}", "bad-argument"),
            (b"{\"cmd\":\"scale\",\"workers\":1e300}", "bad-argument"),
            (b"{\"cmd\":\"kill\",\"worker\":1,\"signal\":1e19}", "bad-argument"),
            (b"{\"cmd\":\"history\",\"n\":\"all\"}", "bad-argument"),
            (b"{\"cmd\":\"worker\",\"worker\":99}", "not-found"),
            (b"{\"cmd\":\"history\",\"n\":-1}", "bad-argument"),
            (b"{\"cmd\":\"scale\",\"workers\":0}", "bad-argument"),
            (b"{\"cmd\":\"scale\",\"workers\":\"two\"}", "bad-argument"),
            (b"{\"cmd\":\"restart\"}", "bad-argument"),
            (b"{\"cmd\":\"restart\",\"worker\":7}", "not-found"),
            (b"{\"cmd\":\"kill\",\"worker\":1,\"signal\":\"NOPE\"}", "bad-argument"),
            (b"{\"cmd\":\"kill\",\"worker\":1}", "bad-argument"),
            (b"{\"cmd\":\"kill\",\"worker\":5,\"signal\":\"TERM\"}", "not-found"),
            (b"{\"cmd\":\"set\",\"key\":\"no-such-key\",\"value\":\"1\"}", "bad-argument"),
            (b"{\"cmd\":\"set\",\"key\":\"memory-max\",\"value\":\"lots\"}", "bad-argument"),
            (b"{\"cmd\":\"set\",\"key\":\"listen\",\"value\":\"1.2.3.4:1\"}", "bad-argument"),
        ]
        c = Control(d.sock)
        for raw, code in cases:
            r = c.call(raw)
            got = err_code(r)
            check(got == code, "%s -> %s, expected %s" % (raw, got, code))
        # The id is echoed on errors too (when the request parsed).
        r = c.call({"cmd": "nope", "id": 9})
        check(r.get("id") == 9 and err_code(r) == "unknown-command", "id on error: %r" % r)
        # The connection survived every error above.
        check(c.call({"cmd": "ping"})["ok"], "connection broken by errors")
        # no-process: a slot in backoff has no process.
        # The first death may restart at once; repeated ones back off.
        def in_backoff():
            w = d.request({"cmd": "worker", "worker": 1})["worker"]
            if w["state"] == "backoff":
                return True
            if w["pid"]:
                deaths = len(d.request({"cmd": "history"})["history"])
                c.call({"cmd": "kill", "worker": 1, "signal": "KILL"})
                wait_for(lambda: len(d.request({"cmd": "history"})["history"]) > deaths, 10,
                         what="the death recorded")
            return False
        wait_for(in_backoff, timeout=15, what="worker 1 in backoff")
        r = c.call({"cmd": "kill", "worker": 1, "signal": "TERM"})
        check(err_code(r) == "no-process", "kill in backoff: %r" % r)
        c.close()


def test_shutting_down():
    """Commands that start work are refused while corrald drains."""
    stubborn = ["python3", "-c",
                "import signal,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "time.sleep(60)\n"]
    with Corrald(workers=1, name="shut", command=stubborn, wait_ready=False,
                 args=["--stop-timeout", "4", "--start-timeout", "30"]) as d:
        # Python must have installed its SIG_IGN before the stop's SIGTERM.
        def sig_ign():
            pid = d.request({"cmd": "worker", "worker": 1})["worker"]["pid"]
            return pid and ct.ignores_signal(pid, signal.SIGTERM)
        wait_for(sig_ign, 10, what="the stubborn worker's SIG_IGN")
        a, b = Control(d.sock), Control(d.sock)
        check(a.call({"cmd": "stop"}) == {"ok": True}, "stop")
        for req in ({"cmd": "scale", "workers": 2}, {"cmd": "reload"},
                    {"cmd": "restart", "worker": "all"}):
            r = b.call(req)
            check(err_code(r) == "shutting-down", "%r while stopping -> %r" % (req, r))
        st = b.call({"cmd": "status"})
        check(st["supervisor"]["state"] == "stopping", "state while stopping: %r" % st["supervisor"]["state"])
        a.close()
        b.close()
        d.proc.wait(20)


def test_malformed():
    """Garbage, blank lines, CRLF, and a last line without newline."""
    with Corrald(workers=1, name="malf") as d:
        c = Control(d.sock)
        c.send(b"\n\r\n{\"cmd\":\"ping\",\"id\":1}\r\n")
        check(c.recv_json() == {"ok": True, "pong": "corral", "id": 1}, "CRLF / blank lines")
        c.send(b"\x00\xff\xfe garbage")
        check(err_code(c.recv_json()) == "bad-json", "binary garbage")
        c.send(b"{\"cmd\":\"ping\"}{\"cmd\":\"ping\"}")
        check(err_code(c.recv_json()) == "bad-json", "two objects on one line")
        # Several requests in one write are answered in order.
        c.send(b"{\"cmd\":\"ping\",\"id\":1}\n{\"cmd\":\"ping\",\"id\":2}\n{\"cmd\":\"ping\",\"id\":3}\n")
        check([c.recv_json()["id"] for _ in range(3)] == [1, 2, 3], "pipelined order")
        # A request split over many writes.
        for ch in b"{\"cmd\":\"ping\",\"id\":\"slow\"}\n":
            c.s.sendall(bytes([ch]))
        check(c.recv_json()["id"] == "slow", "byte-by-byte request")
        c.close()
        # Unterminated last line before EOF is still answered.
        with Control(d.sock, 5) as c:
            c.s.sendall(b"{\"cmd\":\"ping\",\"id\":\"eof\"}")
            c.half_close()
            line = c.line(5)
            check(line is not None and json.loads(line)["id"] == "eof",
                  "answer before EOF: %r" % line)
            check(c.line(5) is None, "connection not closed after the answer to a half-close")


def test_longline():
    """A 1 MiB line: one line-too-long error, then the connection closes."""
    with Corrald(workers=1, name="long") as d:
        c = Control(d.sock)
        big = b"{\"cmd\":\"ping\",\"pad\":\"" + b"x" * (1 << 20) + b"\"}\n"
        try:
            c.s.sendall(big)
        except (BrokenPipeError, ConnectionResetError):
            pass  # corrald may close before the whole MiB is written
        r = c.recv_json()
        check(err_code(r) == "line-too-long", "1 MiB line: %r" % r)
        check(c.line(5) is None, "connection not closed after line-too-long")
        c.close()
        # Just under the cap is fine.
        c = Control(d.sock)
        pad = 65536 - len(b"{\"cmd\":\"ping\",\"pad\":\"\"}") - 1
        r = c.call(b"{\"cmd\":\"ping\",\"pad\":\"" + b"y" * pad + b"\"}")
        check(r["ok"], "line just under 64 KiB refused: %r" % r)
        c.close()
        # Just over the cap, newline included, sent at once: refused too,
        # however the reads split it (corrald reads 16 KiB at a time, so a
        # check on unterminated input alone let up to 16 KiB more through).
        for over in (2, 1000, 16000):  # pad + 1 is exactly the cap
            c = Control(d.sock)
            line = b"{\"cmd\":\"ping\",\"pad\":\"" + b"z" * (pad + over) + b"\"}\n"
            try:
                c.s.sendall(line)
            except (BrokenPipeError, ConnectionResetError):
                pass
            r = c.recv_json()
            check(err_code(r) == "line-too-long", "line %d bytes over the cap: %r" % (over, r))
            c.close()
        check(d.request({"cmd": "ping"})["ok"], "corrald unresponsive")


def test_halfline():
    """Half a line and silence: others are served; the idle timeout closes it."""
    with Corrald(args=("--control-idle-timeout", "1500ms"), workers=1, name="half") as d:
        c = Control(d.sock)
        c.s.sendall(b"{\"cmd\":\"sta")
        t0 = time.monotonic()
        for _ in range(5):
            t = time.monotonic()
            check(d.request({"cmd": "ping"})["ok"], "ping while a client is half-way")
            check(time.monotonic() - t < 0.1, "ping slow while a client is half-way")
        r = c.recv_json(timeout=5)
        check(err_code(r) == "bad-request" and "idle" in r["error"]["message"], "idle: %r" % r)
        waited = time.monotonic() - t0
        check(1.0 < waited < 4.0, "idle timeout after %.2fs, configured 1.5s" % waited)
        check(c.line(3) is None, "connection not closed after idle timeout")
        c.close()


def test_many():
    """100 clients at once, each gets its own answer."""
    with Corrald(workers=2, name="many") as d:
        conns = [Control(d.sock) for _ in range(100)]
        for i, c in enumerate(conns):
            c.send({"cmd": "status", "id": i})
        for i, c in enumerate(conns):
            r = c.recv_json()
            check(r["ok"] and r["id"] == i and len(r["workers"]) == 2, "client %d: %r" % (i, r))
        for c in conns:
            c.close()
        check(d.request({"cmd": "ping"})["ok"], "after 100 clients")


def test_busy():
    """Past --control-max-clients a new client gets `busy` and is closed."""
    with Corrald(workers=1, name="busy", args=["--control-max-clients", "4"]) as d:
        conns = [Control(d.sock) for _ in range(4)]
        for c in conns:
            check(c.call({"cmd": "ping"})["ok"], "client within the limit")
        extra = Control(d.sock)
        r = extra.recv_json()
        check(err_code(r) == "busy", "5th client: %r" % r)
        check(extra.line(3) is None, "busy client not closed")
        extra.close()
        conns.pop().close()
        wait_for(lambda: d.request({"cmd": "ping"}).get("ok"), timeout=10,
                 what="a free slot")
        for c in conns:
            c.close()


def test_slowsub():
    """An events subscriber that never reads, while events pour in, and a
    client that pipelines thousands of requests without reading: corrald
    keeps answering status within 100 ms and, rather than buffer the
    non-reader's answers, pauses reading its requests.

    The machine is shared: corrald and this client run at nice -10 (when
    root) so that what is measured is corrald's loop, not the scheduler."""
    nice = -10 if os.geteuid() == 0 else 0
    if nice:
        os.nice(nice)
    with Corrald(workers=2, name="slowsub", nice=nice) as d:
        stuck = Control(d.sock, rcvbuf=4096)
        stuck.send({"cmd": "events"})
        flood_conn = Control(d.sock, rcvbuf=4096)
        flood = flood_conn.s  # raw writes and reads below
        flood.setblocking(False)
        # Padded so that 4000 requests (4 MB) cannot all sit in socket
        # buffers: once corrald pauses this client, our sends stop.
        req = b"{\"cmd\":\"status\",\"pad\":\"" + b"p" * 960 + b"\"}\n"
        pending = req * 4000  # 4000 answers of ~5 KiB: ~20 MiB if buffered
        sent_bytes = 0
        lat = []

        def timed_status():
            t = time.monotonic()
            r = d.request({"cmd": "status"})
            lat.append(time.monotonic() - t)
            check(r["ok"], "status failed")

        stop = time.monotonic() + 6
        ctl = Control(d.sock)
        sent = 0
        while time.monotonic() < stop:
            ctl.call({"cmd": "restart", "worker": "all"})
            try:
                sent_bytes += flood.send(pending[sent_bytes:sent_bytes + 65536])
            except BlockingIOError:
                pass  # corrald stopped reading this client: it is paused
            for _ in range(3):
                timed_status()
            time.sleep(0.1)  # the rounds' pace for 6 s (a load loop, not a wait)
        ctl.close()
        lat.sort()
        print("status requests: %d, median %.1f ms, p99 %.1f ms, slowest %.1f ms" % (
            len(lat), lat[len(lat) // 2] * 1000, lat[int(len(lat) * 0.99)] * 1000,
            lat[-1] * 1000))
        # 100 ms is the requirement; an ASan/UBSan corrald (whose fork()s of
        # a huge shadow mapping stall its loop) gets 500 ms.
        bound = 0.5 if os.environ.get("CORRAL_SANITIZED") == "1" else 0.1
        check(lat[-1] < bound, "status took %.1f ms while clients were stuck" % (lat[-1] * 1000))
        log = d.log()
        spawned = log.count("[spawned]")
        print("workers spawned during the run: %d" % spawned)
        check(spawned > 20, "too few events generated (%d)" % spawned)
        # ~4000 pipelined status answers (~20 MiB) were asked for: corrald
        # paused that client instead of buffering them.
        with open("/proc/%d/status" % d.proc.pid) as f:
            rss_kb = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
        print("corrald VmRSS after the flood: %d KiB" % rss_kb)
        # ASan keeps freed blocks in its quarantine, and this run frees a
        # worker's worth of state ~100 times: its RSS says little about
        # buffering (40 MiB seen); `sent` below is the direct evidence.
        rss_bound = 64 if os.environ.get("CORRAL_SANITIZED") == "1" else 32
        check(rss_kb < rss_bound * 1024, "corrald buffered the non-reader: VmRSS %d KiB" % rss_kb)
        sent = sent_bytes // len(req)
        check(sent < 4000, "corrald read all 4000 requests without pausing")
        # Reading the answers resumes it: every complete request is answered.
        flood.setblocking(True)
        flood.settimeout(10)
        got = 0
        while got < sent:
            chunk = flood.recv(1 << 20)
            check(chunk, "flood client closed after %d of %d answers" % (got, sent))
            got += chunk.count(b"\n")
        print("flood client: %d requests accepted before the pause, all answered" % sent)
        check(d.request({"cmd": "ping"})["ok"], "corrald unresponsive at the end")
        stuck.close()
        flood_conn.close()


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
