"""corrald's core with real workers and real signals (the foundation issue)."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402


def test_all_serve():
    """N workers come up on one shared socket and every one serves."""
    c = ct.Corrald(workers=3)
    try:
        # Concurrent clients: one shared accept queue promises no fairness
        # to a single sequential client, but a busy worker does not accept,
        # so under concurrency every worker takes connections.
        # Batches of 200 until each has served, at most 5: under the
        # sanitizers on a loaded machine a worker can miss one batch.
        from concurrent.futures import ThreadPoolExecutor
        pids = set()
        with ThreadPoolExecutor(6) as ex:
            for _ in range(5):
                pids |= set(ex.map(lambda _: c.pid_of("/slow?ms=5"), range(200)))
                if pids >= set(c.live_pids()):
                    break
        assert pids == set(c.live_pids()), (pids, c.live_pids())
        # Per-process state: each worker counts alone, so the counts one
        # pid answered are exactly 1..n for that pid. Concurrent clients
        # again (a sequential one may meet one worker only), until two
        # workers have counted.
        import json

        def count(_):
            st, h, body = c.get("/counter")
            return h["x-worker-pid"], json.loads(body)["counter"]

        counters = {}
        with ThreadPoolExecutor(6) as ex:
            for _ in range(5):
                for pid, n in ex.map(count, range(60)):
                    counters.setdefault(pid, []).append(n)
                if len(counters) >= 2:
                    break
        assert len(counters) >= 2, {p: len(v) for p, v in counters.items()}
        for pid, seen in counters.items():
            assert sorted(seen) == list(range(1, len(seen) + 1)), (pid, sorted(seen))
    finally:
        c.close()


def test_kill9_restart():
    """kill -9 of a worker: a new pid serves within 1 s, the death is logged
    with its cause."""
    c = ct.Corrald(workers=2)
    try:
        before = c.live_pids()
        victim = before[0]
        t0 = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        new = ct.wait_for(lambda: [p for p in c.live_pids() if p not in before], 1.0,
                          interval=0.005, what="a replacement")
        # The replacement answers requests.
        ct.wait_for(lambda: c.pid_of() in new or c.pid_of() in new, 1.0, what="it serving")
        elapsed = time.monotonic() - t0
        assert elapsed < 1.0, elapsed
        d = c.wait_death("signal")[0]
        assert d["pid"] == victim and d["signal"] == 9, d
        assert f"pid {victim}) died: signal" in c.log(), c.log()[-2000:]
    finally:
        c.close()


def test_crash_loop():
    """A worker that exits at once every time hits the crash-loop budget and
    is marked failed; corrald keeps running and answering."""
    c = ct.Corrald("--crash-budget", "3", "--crash-window", "20", "--backoff-initial", "20",
                   "--backoff-max", "100", workers=1, command=["/bin/sh", "-c", "exit 3"],
                   wait_ready=False)
    try:
        ct.wait_for(lambda: c.workers()[0]["state"] == "failed", 10, what="state failed")
        h = c.history()
        assert len(h) == 4 and all(d["category"] == "exit-error" for d in h), h
        assert "FAILED: crash loop" in c.log()
        # Retried slowly, not in a loop: no death in the next 0.5 s, where
        # the loop put one every <= 100 ms of backoff (its deaths, newest
        # first, came less than the window apart: the window would see one).
        ends = [d["end_ms"] for d in h]
        assert all(0 <= a - b < 500 for a, b in zip(ends, ends[1:])), ends
        time.sleep(0.5)  # observation window
        assert len(c.history()) == 4
        assert c.proc.poll() is None
        assert c.ctl("ping")["ok"]
    finally:
        c.close()


# A worker that writes a long line, then more than the tail holds, and
# reports on the fd-4 stream in a message split across two writes.
_TALKER = "import sys; sys.path.insert(0, %r)" % ct.LIB + r"""
import fcntl, os, signal, struct, termios
from corraltest import wait_for
def bye(*_):
    sys.stderr.write("last-words")  # no newline: forwarded when corrald drains
    sys.stderr.flush()
    os._exit(3)
signal.signal(signal.SIGUSR1, bye)
sys.stderr.write("x" * 2500 + "\n")
for i in range(200):
    sys.stderr.write("line %04d of the tail\n" % i)
sys.stderr.flush()
fd = int(os.environ["CORRAL_NOTIFY_FD"])
def unread():  # bytes corrald has not read yet from this stream socket
    return struct.unpack("i", fcntl.ioctl(fd, termios.TIOCOUTQ, b"\0" * 4))[0]
os.write(fd, b"STATUS=split ok\nREA")
wait_for(lambda: unread() == 0, 10, what="corrald reading the first half")
os.write(fd, b"DY=1\n\n")
while True:
    signal.pause()
"""


def test_output_and_stream():
    """A worker's output reaches the log line by line (an endless line cut
    at 1023 bytes), its post-mortem keeps exactly the last 4096 bytes
    (the line still open at death included), and a stream message split
    across writes is framed whole."""
    c = ct.Corrald(workers=1, command=[sys.executable, "-c", _TALKER], name="talk")
    try:
        w = c.worker(1)
        assert w["status"] == "split ok", w
        pid = w["pid"]
        os.kill(pid, signal.SIGUSR1)
        d = c.wait_death("exit-error")[0]
        assert d["pid"] == pid, d
        written = ("x" * 2500 + "\n" + "".join("line %04d of the tail\n" % i for i in range(200))
                   + "last-words")
        assert d["stderr_tail"] == written[-4096:], d["stderr_tail"][:200]
        log = c.log()
        cut = [l.split("]: ", 1)[1] for l in log.splitlines() if f"w1[{pid}]: x" in l]
        assert [len(l) for l in cut] == [1023, 1023, 454], [len(l) for l in cut]
        assert f"w1[{pid}]: line 0199 of the tail\n" in log, log[-2000:]
        assert f"w1[{pid}]: last-words\n" in log, log[-2000:]
    finally:
        c.close()

def test_sighup_reload():
    """SIGHUP under continuous requests replaces every pid with zero failed
    requests; capacity never drops."""
    c = ct.Corrald(workers=2)
    try:
        before = set(c.live_pids())
        load = ct.Load(c, interval=0.005, max_seconds=30)
        load.start()
        load.wait_served(10)  # under load before the reload
        c.kill(signal.SIGHUP)
        ct.wait_for(lambda: len(set(c.live_pids()) & before) == 0 and len(c.live_pids()) == 2,
                    15, what="every pid replaced")
        ct.wait_for(lambda: "reload complete" in c.log(), 5, what="reload complete")
        load.wait_served(10)  # and after it
        load.stop()
        assert not load.failed, load.failed[:5]
        # Requests kept flowing through the whole reload (a few per second
        # at least, whatever the machine's load), not merely before it.
        assert load.ok >= 10, load.ok
        after = set(c.live_pids())
        assert after & load.pids, "the new workers served during the load"
        rec = [d for d in c.history() if d["category"] == "recycled"]
        assert {d["pid"] for d in rec} == before, c.history()
    finally:
        c.close()


def test_sigterm_drain():
    """SIGTERM drains (an in-flight request completes) and exits 0 with no
    worker left."""
    c = ct.Corrald(workers=2)
    try:
        pids = c.live_pids()
        r = c.start_request("/slow?ms=700", timeout=5)
        r.wait_read()  # in flight
        code = c.stop(signal.SIGTERM)
        assert code == 0, (code, c.log()[-2000:])
        assert r.result()[0] == 200, r.answer
        for p in pids:
            assert not ct.pid_alive(p), f"worker {p} survived"
        assert not os.path.exists(c.sock), "the control socket was removed"
    finally:
        c.close()


def test_hang_kill():
    """A worker blocked by /heavy?ms=5000 with a 1 s watchdog is flagged
    blocked and, with a 2 s hang timeout, killed and replaced."""
    c = ct.Corrald("--watchdog", "1", "--hang-timeout", "2", workers=1,
                   command=[ct.WORKER, "--report-interval", "250"])
    try:
        victim = c.live_pids()[0]
        import threading
        t0 = time.monotonic()
        threading.Thread(target=lambda: c.get("/heavy?ms=5000", timeout=10), daemon=True).start()
        ct.wait_for(lambda: c.workers()[0]["state"] in ("blocked", "killing"), 3,
                    what="state blocked")
        assert time.monotonic() - t0 >= 0.9, "flagged blocked before the watchdog timeout"
        assert "blocked: no heartbeat" in c.log()
        d = c.wait_death("watchdog-kill", timeout=6)[0]
        assert d["pid"] == victim, d
        assert d["signal"] in (6, 9), d
        new = c.wait_ready(1)
        assert new[0] != victim
    finally:
        c.close()


def test_watchdog_lowered_live():
    """`set watchdog 1` on a worker armed with a 1 h watchdog: the next
    heartbeat re-arms the timer, so a hang is flagged within seconds, not an
    hour later (a heartbeat otherwise only moves the due time on)."""
    c = ct.Corrald("--watchdog", "3600", "--hang-timeout", "0", workers=1,
                   command=[ct.WORKER, "--report-interval", "250"])

    def heartbeat_since(t):
        """A heartbeat (report) has come since monotonic time t."""
        def beat():
            ago = c.workers()[0]["last_report_ago_ms"]
            return ago is not None and ago < (time.monotonic() - t) * 1000
        return beat
    try:
        # Heartbeats under the 1 h watchdog (the first of them, at least).
        ct.wait_for(lambda: c.workers()[0]["last_report_ago_ms"] is not None, 5,
                    what="a heartbeat")
        r = c.ctl("set", key="watchdog", value="1")
        assert r["ok"], r
        t = time.monotonic()
        ct.wait_for(heartbeat_since(t), 5, what="a heartbeat under the new watchdog")
        import threading
        threading.Thread(target=lambda: c.get("/heavy?ms=4000", timeout=10), daemon=True).start()
        ct.wait_for(lambda: c.workers()[0]["state"] == "blocked", 3.5, what="state blocked")
    finally:
        c.close()


def test_exec_missing():
    """A program that cannot be executed at all refuses start-up: corrald
    exits non-zero within a second with one error line, nothing stays bound."""
    tmp = ct.tempfile.mkdtemp(prefix="corral-noexec-")
    try:
        t0 = time.monotonic()
        p = subprocess.run([ct.CORRALD, "--workers", "2", "--listen", "127.0.0.1:0", "--no-cgroups",
                            "--control", os.path.join(tmp, "c.sock"), "--",
                            "/nonexistent/corral-worker"],
                           capture_output=True, text=True, timeout=10, cwd=tmp)
        took = time.monotonic() - t0
        errs = [l for l in (p.stdout + p.stderr).splitlines() if " err " in l]
        assert p.returncode != 0, (p.returncode, p.stderr)
        assert took < 1.0, took
        assert len(errs) == 1, errs
        assert "cannot execute /nonexistent/corral-worker" in errs[0], errs
        assert "No such file" in errs[0], errs
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_exits_at_once_fails():
    """A program that exits at once is a crash loop: it still reaches failed."""
    c = ct.Corrald(workers=1, command=["/bin/false"], wait_ready=False)
    try:
        ct.wait_for(lambda: c.workers()[0]["state"] == "failed", 10, what="failed")
        assert "crash loop" in c.log()
        assert all(d["category"] == "exit-error" for d in c.history()), c.history()
    finally:
        c.close()


def test_scale_and_status():
    """scale up and down over the control socket; ids stay dense."""
    c = ct.Corrald(workers=1)
    try:
        assert c.ctl("scale", workers=3)["ok"]
        c.wait_ready(3)
        assert sorted(w["id"] for w in c.workers()) == [1, 2, 3]
        assert c.ctl("scale", workers=1)["ok"]
        c.wait_ready(1)
        ct.wait_for(lambda: len(c.workers()) == 1, 5, what="one worker left")
        assert c.workers()[0]["id"] == 1
    finally:
        c.close()


def test_reuseport():
    """balance=reuseport: every worker has its own socket and all serve."""
    c = ct.Corrald("--balance", "reuseport", workers=2)
    try:
        pids = {c.pid_of() for _ in range(200)}
        assert pids == set(c.live_pids()), (pids, c.live_pids())
    finally:
        c.close()


def test_config_file():
    """The JSON config file sets the same keys as flags; flags win; bad keys
    are refused with a message naming them."""
    import json
    import subprocess
    import tempfile
    d = tempfile.mkdtemp()
    cfg = os.path.join(d, "c.json")
    with open(cfg, "w") as f:
        json.dump({"workers": 3, "stop-timeout": "2s"}, f)
    c = ct.Corrald("--config", cfg, "--workers", "2", workers=2)
    try:
        st = c.status()["supervisor"]["config"]
        assert st["workers"] == 2 and st["stop-timeout"] == 2000, st
    finally:
        c.close()
    with open(cfg, "w") as f:
        json.dump({"wrokers": 3}, f)
    p = subprocess.run([ct.CORRALD, "--config", cfg], capture_output=True, text=True)
    assert p.returncode == 2 and "wrokers" in p.stderr, (p.returncode, p.stderr)
    p = subprocess.run([ct.CORRALD, "--stop-timeout", "soon"], capture_output=True, text=True)
    assert p.returncode == 2 and "soon" in p.stderr, p.stderr
    p = subprocess.run([ct.CORRALD, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--memory-soft" in p.stdout


def test_pss():
    """--pss samples proportional set size: with two workers sharing their
    program's pages, each one's PSS is below its RSS."""
    def proc_kib(pid, path, key):
        with open(f"/proc/{pid}/{path}") as f:
            return int(next(l for l in f if l.startswith(key)).split()[1]) * 1024

    def sampled(measure):
        """Every worker's figure is corrald's sample of measure(pid): nearer
        to it than to the other measure."""
        ws = c.workers()
        for w in ws:
            v, rss = w["rss_bytes"] or 0, proc_kib(w["pid"], "status", "VmRSS:")
            pss = proc_kib(w["pid"], "smaps_rollup", "Pss:")
            want, other = (rss, pss) if measure == "rss" else (pss, rss)
            if not v or abs(v - want) >= abs(v - other):
                return None
        return ws
    c = ct.Corrald(workers=2)
    try:
        rss = {w["pid"]: w["rss_bytes"] for w in ct.wait_for(lambda: sampled("rss"), 5,
                                                             what="an RSS sample of each")}
        assert all(v > 0 for v in rss.values()), rss
        assert c.ctl("set", key="pss", value=True)["ok"]
        pss = {w["pid"]: w["rss_bytes"] for w in ct.wait_for(lambda: sampled("pss"), 5,
                                                             what="a PSS sample of each")}
        for pid in rss:
            assert 0 < pss[pid] < rss[pid], (pss, rss)
    finally:
        c.close()


def test_scale_reuses_id_not_generation():
    """Scaling back up while a worker of that id still drains hands out a new
    generation: the two processes never share a cgroup name."""
    c = ct.Corrald("--stop-timeout", "5", "--start-timeout", "60", workers=2,
                   command=["/bin/sh", "-c", "trap '' TERM; sleep 30"], wait_ready=False)
    try:
        pids = ct.wait_for(lambda: [w["pid"] for w in c.workers() if w["pid"]]
                           if len([w for w in c.workers() if w["pid"]]) == 2 else None,
                           5, what="2 pids")

        def ignores_term(pid):
            with open(f"/proc/{pid}/status") as f:
                ign = [l for l in f if l.startswith("SigIgn:")][0].split()[1]
            return int(ign, 16) & (1 << (signal.SIGTERM - 1))
        # The shells must have run their trap before SIGTERM comes.
        ct.wait_for(lambda: all(ignores_term(p) for p in pids), 5, what="the traps")
        assert c.ctl("scale", workers=1)["ok"]
        ct.wait_for(lambda: any(w["state"] == "draining" for w in c.workers()), 3,
                    what="worker 2 draining")
        assert c.ctl("scale", workers=2)["ok"]
        twos = ct.wait_for(lambda: [w for w in c.workers() if w["id"] == 2 and w["pid"]]
                           if len([w for w in c.workers() if w["id"] == 2 and w["pid"]]) == 2
                           else None, 3, what="two processes with id 2")
        gens = sorted(w["generation"] for w in twos)
        assert gens[0] != gens[1], twos
    finally:
        c.close()


def test_replacement_failure_backs_off():
    """A replacement that dies before READY leaves the old worker serving and
    the next recycle waits (no respawn storm); a reload says it failed."""
    script = ('if [ "$CORRAL_GENERATION" -gt 1 ]; then exit 1; fi; exec "$0"')
    c = ct.Corrald("--max-lifetime", "1", workers=1, command=["/bin/sh", "-c", script, ct.WORKER])
    try:
        first = c.live_pids()
        ct.wait_for(lambda: c.log().count("replacement died before it was ready") >= 5, 15,
                    what="5 failed replacements")
        # Each next attempt waited at least the delay corrald announced (less
        # 50 ms for the loop's lag between its clock and the log line), and
        # the delays grow (a restart's backoff) past the 250 ms sample tick
        # that would pace a storm, as corrald's log times them.
        events = []  # (ms of the day, "recycle" or the announced wait)
        for line in c.log().splitlines():
            hms, _, rest = line.partition(" ")
            h, m, sec = hms.split(":") if hms.count(":") == 2 else (0, 0, "x")
            if "[recycle] worker 1" in rest or "[replacement-failed]" in rest:
                t = (int(h) * 3600 + int(m) * 60) * 1000 + round(float(sec) * 1000)
                wait = re.search(r"no new recycle for (\d+) ms", rest)
                events.append((t, int(wait.group(1)) if wait else "recycle"))
        waits = []
        for (t0, w), (t1, nxt) in zip(events, events[1:]):
            if w != "recycle":
                assert nxt == "recycle", events
                waits.append(w)
                gap = (t1 - t0) % 86400000
                assert gap >= w - 50, f"recycled {gap} ms after a failure announcing {w} ms: {events}"
        assert len(waits) >= 4 and waits == sorted(waits) and waits[-1] >= 4 * waits[0] \
            and waits[-1] > 250, (waits, events)
        assert c.live_pids() == first, "the old worker kept serving"
        assert c.get("/light")[0] == 200
    finally:
        c.close()
    c = ct.Corrald(workers=2, command=["/bin/sh", "-c", script, ct.WORKER])
    try:
        c.kill(signal.SIGHUP)
        ct.wait_for(lambda: "reload finished: 2 replacement(s) died" in c.log(), 10,
                    what="the reload to report its failures")
        assert "reload complete" not in c.log()
    finally:
        c.close()


def test_stop_answers_when_empty():
    """`stop` is answered even when no worker has a process to drain."""
    c = ct.Corrald(workers=1, command=["/bin/false"], wait_ready=False)
    try:
        ct.wait_for(lambda: c.workers()[0]["state"] == "failed", 10, what="failed")
        r = c.ctl("stop")
        assert r["ok"], r
        assert c.proc.wait(5) == 0
    finally:
        c.close()


def test_sd_notify():
    """Under systemd (NOTIFY_SOCKET), corrald reports READY=1 with a STATUS
    once every worker is ready, RELOADING=1 then READY=1 around a reload, a
    death in STATUS, and STOPPING=1 on SIGTERM."""
    import socket
    tmp = ct.tempfile.mkdtemp(prefix="corral-sd-")
    path = os.path.join(tmp, "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(0.2)
    got = []

    def until(pred, timeout, what):
        def heard():
            try:
                got.append(s.recv(4096).decode())
            except socket.timeout:
                pass
            hit = [m for m in got if pred(m)]
            return hit and hit[-1]
        try:
            return ct.wait_for(heard, timeout, interval=0, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e}; got {got}") from None

    c = ct.Corrald(workers=2, env={"NOTIFY_SOCKET": path})
    try:
        m = until(lambda m: m.startswith("READY=1"), 10, "READY=1")
        assert "STATUS=2/2 workers ready, 0 deaths in the last hour" in m, m
        got.clear()
        c.kill(signal.SIGHUP)
        m = until(lambda m: m.startswith("RELOADING=1"), 10, "RELOADING=1")
        assert "MONOTONIC_USEC=" in m, m
        m = until(lambda m: m.startswith("READY=1"), 15, "READY=1 after the reload")
        assert "2/2 workers ready" in m, m
        got.clear()
        os.kill(c.live_pids()[0], signal.SIGKILL)
        until(lambda m: "(1 signal, 2 recycled) in the last hour" in m, 10, "the death in STATUS")
        got.clear()
        c.kill(signal.SIGTERM)
        m = until(lambda m: m.startswith("STOPPING=1"), 10, "STOPPING=1")
        assert "EXTEND_TIMEOUT_USEC=" in m, m
        rc = c.stop()
        assert rc == 0, f"corrald exited {rc}:\n{c.log()[-3000:]}"
    finally:
        c.close()
        s.close()
        ct.shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
