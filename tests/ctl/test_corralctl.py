"""corralctl against a live corrald: output, --json, exit codes, scale,
kill, events; and promtool on the Prometheus output."""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from charness import Corrald, SKIP, check, exe, fail, wait_for  # noqa: E402
import corraltest as ct  # noqa: E402  (on the path through charness)


def corralctl(d, *args, timeout=20, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([exe("CORRALCTL"), "--socket", d.sock] + list(args),
                          capture_output=True, text=True, timeout=timeout, env=e)


def test_status():
    with Corrald(workers=3, name="cstatus") as d:
        r = corralctl(d, "status")
        check(r.returncode == 0, "status exit %d: %s" % (r.returncode, r.stderr))
        print(r.stdout)
        check("\033[" not in r.stdout, "colour codes on a pipe")
        for w in d.request({"cmd": "workers"})["workers"]:
            rows = [l for l in r.stdout.splitlines() if l.split()[:1] == [str(w["id"])]]
            check(len(rows) == 1 and str(w["pid"]) in rows[0] and w["state"] in rows[0],
                  "worker %d (pid %d) missing from status" % (w["id"], w["pid"]))
        for cmd in (["status"], ["workers"], ["worker", "1"], ["history"], ["metrics"],
                    ["ping"]):
            r = corralctl(d, "--json", *cmd)
            check(r.returncode == 0, "%s --json exit %d" % (cmd, r.returncode))
            lines = r.stdout.splitlines()
            check(len(lines) == 1 and json.loads(lines[0])["ok"] is True,
                  "%s --json is not one JSON line" % cmd)
        # --json may also follow the command.
        check(json.loads(corralctl(d, "status", "--json").stdout)["ok"], "status --json")
        r = corralctl(d, "worker", "1")
        check(r.returncode == 0 and "pid" in r.stdout, "worker 1")


def test_exit_codes():
    with Corrald(workers=1, name="ccodes") as d:
        r = corralctl(d, "worker", "42")
        check(r.returncode == 1 and "not-found" in r.stderr, "refused -> 1: %r" % (r,))
        r = corralctl(d, "--json", "worker", "42")
        check(r.returncode == 1 and json.loads(r.stdout)["error"]["code"] == "not-found",
              "refused --json")
        for bad in (["frobnicate"], ["scale"], ["scale", "x"], ["kill", "1"], [], ["--nope"]):
            r = corralctl(d, *bad)
            check(r.returncode == 2, "%s -> %d, expected 2" % (bad, r.returncode))
        r = subprocess.run([exe("CORRALCTL"), "--socket", d.tmp + "/nope.sock", "status"],
                           capture_output=True, text=True, timeout=10)
        check(r.returncode == 3, "no socket -> %d, expected 3" % r.returncode)
        # The default socket: $RUNTIME_DIRECTORY/control.sock.
        r = subprocess.run([exe("CORRALCTL"), "ping"], capture_output=True, text=True,
                           timeout=10, env=dict(os.environ, RUNTIME_DIRECTORY=d.tmp),
                           cwd="/")
        check(r.returncode == 0, "RUNTIME_DIRECTORY default socket: %r" % (r,))
        r = subprocess.run([exe("CORRALCTL"), "ping"], capture_output=True, text=True,
                           timeout=10, cwd=d.tmp,
                           env={k: v for k, v in os.environ.items() if k != "RUNTIME_DIRECTORY"})
        check(r.returncode == 3 or os.path.exists("/run/corral/control.sock"),
              "./corral.sock default: %r" % (r,))


def test_scale():
    with Corrald(workers=2, name="cscale") as d:
        r = corralctl(d, "scale", "4")
        check(r.returncode == 0, "scale 4: %s" % r.stderr)
        wait_for(lambda: len(d.pids()) == 4, timeout=10, what="4 workers")
        pids = d.pids()
        check(all(os.path.exists("/proc/%d" % p) for p in pids), "pids not alive")
        r = corralctl(d, "scale", "1")
        check(r.returncode == 0, "scale 1")
        wait_for(lambda: len(d.request({"cmd": "workers"})["workers"]) == 1, timeout=10,
                 what="1 worker")
        left = d.pids()
        check(len(left) == 1, "pids after scale 1: %r" % left)
        gone = [p for p in pids if p not in left]
        wait_for(lambda: not any(os.path.exists("/proc/%d/status" % p) and
                                   "zombie" not in open("/proc/%d/status" % p).read()
                                   for p in gone), timeout=10, what="scaled-down processes gone")


def test_kill_history():
    with Corrald(workers=2, name="ckill") as d:
        pid = d.request({"cmd": "worker", "worker": 1})["worker"]["pid"]
        r = corralctl(d, "kill", "1", "KILL")
        check(r.returncode == 0, "kill: %s" % r.stderr)
        wait_for(lambda: d.request({"cmd": "history"})["history"], timeout=10, what="a death")
        h = json.loads(corralctl(d, "--json", "history").stdout)["history"]
        check(h[0]["pid"] == pid and h[0]["category"] == "signal", "history: %r" % h[0])
        r = corralctl(d, "history", "5")
        check(r.returncode == 0 and "signal" in r.stdout and str(pid) in r.stdout,
              "history table: %s" % r.stdout)
        r = corralctl(d, "kill", "2", "9")
        check(r.returncode == 0 and "9" in r.stdout, "numeric signal")


def test_events():
    with Corrald(workers=2, name="cevents") as d:
        pid = d.request({"cmd": "worker", "worker": 2})["worker"]["pid"]
        p = subprocess.Popen([exe("CORRALCTL"), "--socket", d.sock, "events"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            got = []
            os.set_blocking(p.stdout.fileno(), False)

            def printed(want):
                line = p.stdout.readline()
                if line:
                    got.append(line)
                return any(want(l) for l in got)
            # corralctl prints nothing when its subscription starts, and
            # events are not replayed: its stream is known live once it
            # shows an event caused after it started. A restart of worker 1
            # causes a few (spawned, ready, draining, died), again each
            # second until one shows.
            restarted = [0.0]

            def live():
                if printed(lambda l: " worker 1 " in l):
                    return True
                if time.monotonic() - restarted[0] > 1.0:
                    check(corralctl(d, "restart", "1").returncode == 0, "restart 1")
                    restarted[0] = time.monotonic()
                return False
            wait_for(live, 10, what="an event in corralctl events' output")
            check(corralctl(d, "kill", "2", "KILL").returncode == 0, "kill")
            try:
                wait_for(lambda: printed(lambda l: "died" in l and str(pid) in l), 10,
                         what="worker 2's death in corralctl events' output")
            except AssertionError:
                pass  # reported below, with the output
            died = [l for l in got if "died" in l and str(pid) in l]
            check(died and "signal" in died[0], "events output: %r" % got)
        finally:
            p.terminate()
            p.wait(5)


def promtool(text, what):
    if not shutil.which("promtool"):
        print("promtool missing", file=sys.stderr)
        sys.exit(SKIP)
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0, "promtool on %s:\n%s%s" % (what, r.stdout, r.stderr))


def test_promtool():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with Corrald(workers=2, name="cprom",
                 args=["--metrics-listen", "127.0.0.1:%d" % port]) as d:
        d.request({"cmd": "kill", "worker": 1, "signal": "KILL"})
        wait_for(lambda: d.request({"cmd": "history"})["history"], timeout=10,
                 what="the death")
        wait_for(lambda: d.request({"cmd": "status"})["supervisor"]["workers_ready"] == 2,
                   timeout=10, what="worker back")
        text = d.request({"cmd": "metrics"})["metrics"]
        check('corral_worker_deaths_total{category="signal"} 1' in text, "death not counted")
        r = corralctl(d, "metrics")
        check(r.returncode == 0 and "corral_up 1" in r.stdout, "corralctl metrics")
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as resp:
            check(resp.status == 200, "HTTP status %d" % resp.status)
            ctype = resp.headers["Content-Type"]
            check(ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype)
            body = resp.read().decode()
        check("corral_workers_target 2" in body, "HTTP body")
        for path, code in (("/", 404), ("/metricsx", 404)):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5)
                fail("%s answered 200" % path)
            except urllib.error.HTTPError as e:
                check(e.code == code, "%s -> %d" % (path, e.code))
        req = urllib.request.Request("http://127.0.0.1:%d/metrics" % port, data=b"x",
                                     method="POST")
        try:
            urllib.request.urlopen(req, timeout=5)
            fail("POST answered 200")
        except urllib.error.HTTPError as e:
            check(e.code == 405, "POST -> %d" % e.code)
        # An oversized request head is refused, not buffered.
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.sendall(b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n")
        head = c.recv(100)
        check(head.startswith(b"HTTP/1.1 431"), "oversized head: %r" % head)
        c.close()
        promtool(r.stdout, "corralctl metrics")
        promtool(text, "the metrics command")
        promtool(body, "--metrics-listen")


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
