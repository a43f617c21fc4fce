#!/usr/bin/env python3
"""--on-death PROGRAM against a real corrald and real workers: the program
gets the death's post-mortem (the history's record, byte for byte as JSON)
on its stdin and the death in its environment; its output and exit status
reach the log; a slow one is SIGKILLed with its process group at
--on-death-timeout; --on-death-parallel bounds the runs at once and a full
queue drops the newest deaths, counted; the loop keeps answering `ping`
while runs flood their output; `set on-death` works live.
"""
import json
import os
import re
import stat
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402


def script(dirname, name, body):
    """An executable /bin/sh script in dirname; its absolute path."""
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, stat.S_IRWXU)
    return path


def on_death(c):
    return c.status()["supervisor"]["on_death"]


def kill(c, wid):
    """SIGKILLs worker wid through corrald; the pid killed."""
    pid = c.worker(wid)["pid"]
    r = c.ctl("kill", worker=wid, signal="KILL")
    assert r["ok"], r
    return pid


def record_of(c, pid):
    for d in c.history():
        if d["pid"] == pid:
            return d
    return None


class Pinger(threading.Thread):
    """`ping` on a fresh connection every 10 ms, each answer timed; bounded
    by halt and by 60 s."""

    def __init__(self, sock):
        super().__init__(daemon=True)
        self.sock, self.lat, self.errors = sock, [], []
        self.halt = threading.Event()

    def run(self):
        end = time.monotonic() + 60
        while not self.halt.is_set() and time.monotonic() < end:
            t0 = time.monotonic()
            try:
                assert ct.request(self.sock, {"cmd": "ping"}, timeout=10)["ok"]
                self.lat.append(time.monotonic() - t0)
            except Exception as e:  # noqa: BLE001 - every failure counts
                self.errors.append(repr(e))
            self.halt.wait(0.01)  # the pings' pace

    def stop(self):
        self.halt.set()
        self.join()


# -- the run ----------------------------------------------------------------------

def test_json_env_log():
    """A SIGKILLed worker: the program's stdin is its post-mortem, one line
    of JSON equal to the history's record (memory series included), its
    environment names the death and lacks corrald's own variables, each
    output line is logged with the prefix, then the exit status."""
    c = None
    try:
        c = ct.Corrald(workers=2, name="od-json")
        hook = script(c.tmp, "hook", 'cat > "$0.$CORRAL_PID.json"\n'
                      'env > "$0.$CORRAL_PID.env"\n'
                      'echo "hello from the hook: worker $CORRAL_WORKER_ID"\n'
                      'echo "and its stderr" >&2\n')
        assert c.ctl("set", key="on-death", value=hook)["ok"]
        # Samples for the series: every 250 ms from the start (every 2 s
        # once the worker is calm).
        ct.wait_for(lambda: c.worker(1)["uptime_ms"] >= 1500, 5, what="1.5 s of samples")
        pid = kill(c, 1)
        out = f"{hook}.{pid}.json"
        ct.wait_for(lambda: on_death(c)["succeeded"] == 1, 10, what="the run's exit")
        with open(out, "rb") as f:
            raw = f.read()
        assert raw.endswith(b"\n") and raw.count(b"\n") == 1, raw[-200:]
        got = json.loads(raw)
        assert got["category"] == "signal" and got["pid"] == pid, got
        assert got == record_of(c, pid), (got, record_of(c, pid))
        series = got["memory_series"]
        assert len(series) >= 1, series
        assert all(-60000 < p["t_ms"] <= 0 and p["rss_bytes"] > 0 for p in series), series
        assert [p["t_ms"] for p in series] == sorted(p["t_ms"] for p in series), series
        assert all(p["cg_usage_bytes"] is None for p in series), series  # --no-cgroups
        env = dict(l.split("=", 1) for l in open(f"{hook}.{pid}.env").read().splitlines()
                   if "=" in l)
        assert env["CORRAL_WORKER_ID"] == "1" and env["CORRAL_PID"] == str(pid), env
        assert env["CORRAL_DEATH_CATEGORY"] == "signal", env
        assert env["CORRAL_DEATH_PLANNED"] == "0" and env["CORRAL_GENERATION"] == "1", env
        assert "CORRAL_WORKER" not in env and "NOTIFY_SOCKET" not in env, env
        assert env.get("PATH") == os.environ.get("PATH"), env  # corrald's own passes
        log = c.log()
        run = re.search(r"on-death\[(\d+)\] w1: (\S+) runs for pid %d \(signal\)" % pid, log)
        assert run and run.group(2) == hook, log[-2000:]
        rp = run.group(1)
        assert f"on-death[{rp}] w1: hello from the hook: worker 1" in log, log[-2000:]
        assert f"on-death[{rp}] w1: and its stderr" in log, log[-2000:]
        assert re.search(r"on-death\[%s\] w1: exited 0 after \d+ ms" % rp, log), log[-2000:]
        st = on_death(c)
        assert st == {"program": hook, "running": 0, "pending": 0, "started": 1,
                      "succeeded": 1, "failed": 0, "timed_out": 0, "spawn_failed": 0,
                      "dropped": 0}, st
        assert c.stop() == 0
    finally:
        if c:
            c.close()


def test_live_set_and_failures():
    """`set on-death` takes an absolute path or none, live; a program that
    exits 3, one that cannot be executed, and none at all are told apart."""
    c = None
    try:
        c = ct.Corrald(workers=1, name="od-set")
        r = c.ctl("set", key="on-death", value="relative/hook")
        assert not r["ok"] and "absolute path" in r["error"]["message"], r
        fails = script(c.tmp, "fails", "echo failing\nexit 3\n")
        assert c.ctl("set", key="on-death", value=fails)["ok"]
        kill(c, 1)
        ct.wait_for(lambda: on_death(c)["failed"] == 1, 10, what="the failed run")
        assert re.search(r"on-death\[\d+\] w1: exited 3 after", c.log()), c.log()[-2000:]
        missing = os.path.join(c.tmp, "no-such-program")
        assert c.ctl("set", key="on-death", value=missing)["ok"]
        c.wait_ready(1)
        kill(c, 1)
        ct.wait_for(lambda: on_death(c)["spawn_failed"] == 1, 10, what="the failed start")
        assert f"cannot run {missing} for worker 1" in c.log(), c.log()[-2000:]
        assert c.ctl("set", key="on-death", value="none")["ok"]
        assert on_death(c)["program"] is None
        c.wait_ready(1)
        pid = kill(c, 1)
        ct.wait_for(lambda: record_of(c, pid), 5, what="the third death")
        time.sleep(0.5)  # a run would have started within a loop turn
        st = on_death(c)
        assert st["started"] == 1 and st["spawn_failed"] == 1 and st["running"] == 0, st
        assert c.stop() == 0
    finally:
        if c:
            c.close()


def test_timeout_kills_group():
    """A run that outlives --on-death-timeout 1s is SIGKILLed, and the
    child it started (its process group) with it; the kill is logged and
    counted, a second after the start."""
    c = None
    try:
        c = ct.Corrald("--on-death-timeout", "1", workers=1, name="od-slow")
        slow = script(c.tmp, "slow", 'sleep 60 &\necho $! > "$0.child"\nexec sleep 60\n')
        assert c.ctl("set", key="on-death", value=slow)["ok"]
        kill(c, 1)
        t0 = time.monotonic()
        ct.wait_for(lambda: os.path.exists(slow + ".child") and
                    open(slow + ".child").read().strip(), 5, what="the run's child")
        child = int(open(slow + ".child").read())
        assert ct.pid_alive(child)
        ct.wait_for(lambda: on_death(c)["timed_out"] == 1, 10, what="the timeout")
        took = time.monotonic() - t0
        assert 0.9 <= took <= 5, took
        ct.wait_for(lambda: not ct.pid_alive(child), 5, what="the run's child killed too")
        m = re.search(r"on-death\[\d+\] w1: killed after (\d+) ms \(--on-death-timeout 1000 ms\)",
                      c.log())
        assert m and 1000 <= int(m.group(1)) < 3000, c.log()[-2000:]
        print(f"killed after {m.group(1)} ms; seen by the test after {took * 1000:.0f} ms")
        st = on_death(c)
        assert st["running"] == 0 and st["succeeded"] == 0 and st["failed"] == 0, st
        assert c.stop() == 0
    finally:
        if c:
            c.close()


def overlap(events):
    """The most runs at once, from (time, +1/-1) events."""
    now = top = 0
    for _, d in sorted(events):
        now += d
        top = max(top, now)
    return top


def test_parallel_bound():
    """Six quick deaths with --on-death-parallel 2: every death runs, never
    more than two at once (and two did run together); the program's own
    clock says so."""
    c = None
    try:
        c = ct.Corrald("--on-death-parallel", "2", workers=6, name="od-par")
        runs = os.path.join(c.tmp, "runs")
        hook = script(c.tmp, "hook",
                      f'echo "$(date +%s.%N) +1 $CORRAL_PID" >> {runs}\n'
                      'sleep 0.5\n'
                      f'echo "$(date +%s.%N) -1 $CORRAL_PID" >> {runs}\n')
        assert c.ctl("set", key="on-death", value=hook)["ok"]
        pids = []
        with c.control() as ctl:
            for wid in range(1, 7):
                pids.append(c.worker(wid)["pid"])
                assert ctl.call({"cmd": "kill", "worker": wid, "signal": "KILL"})["ok"]
        ct.wait_for(lambda: on_death(c)["succeeded"] == 6, 20, what="six runs")
        seen = ct.wait_for(lambda: on_death(c)["running"] <= 2 and on_death(c), 1)
        assert seen["dropped"] == 0, seen
        events = []
        ran = set()
        for line in open(runs).read().splitlines():
            t, d, pid = line.split()
            events.append((float(t), int(d)))
            ran.add(int(pid))
        assert ran == set(pids), (ran, pids)
        top = overlap(events)
        print(f"at most {top} runs at once (bound 2)")
        assert top == 2, events
        assert c.stop() == 0
    finally:
        if c:
            c.close()


def test_queue_drops_newest():
    """36 deaths at once, one run at a time, each 2 s: one runs, 32 wait,
    the last 3 deaths are dropped (logged, counted) — the newest, since a
    storm's first deaths tell its cause. At the stop the waiting ones are
    dropped too and corrald exits once the run under way has ended."""
    n = 36
    c = None
    try:
        c = ct.Corrald("--on-death-parallel", "1", "--on-death-timeout", "5", workers=n,
                       name="od-queue", ready_timeout=30)
        hook = script(c.tmp, "hook", "sleep 2\n")
        assert c.ctl("set", key="on-death", value=hook)["ok"]
        with c.control() as ctl:
            for wid in range(1, n + 1):
                assert ctl.call({"cmd": "kill", "worker": wid, "signal": "KILL"})["ok"]
        ct.wait_for(lambda: len(c.history()) >= n, 15, what=f"{n} deaths")
        st = ct.wait_for(lambda: on_death(c)["dropped"] == 3 and on_death(c), 5,
                         what="three deaths dropped")
        assert st["running"] == 1 and st["pending"] == 32 and st["started"] == 1, st
        dropped = [int(p) for p in re.findall(r"worker \d+'s \(pid (\d+), signal\) runs nothing",
                                              c.log())]
        newest = [d["pid"] for d in c.history()[:3]]
        assert sorted(dropped) == sorted(newest), (dropped, newest)
        t0 = time.monotonic()
        assert c.stop(timeout=20) == 0
        log = c.log()
        # The 33 deaths taken in: run, or dropped at the stop (a run that
        # ended before it let the next one start).
        started = len(re.findall(r"on-death\[\d+\] w\d+: \S+ runs for pid", log))
        m = re.search(r"on-death: corrald stops: (\d+) deaths waiting run nothing", log)
        assert m and started + int(m.group(1)) == 33, (started, log[-3000:])
        # The run under way ended on its own (sleep 2), not at the timeout.
        assert re.search(r"on-death\[\d+\] w\d+: exited 0 after", log), log[-3000:]
        print(f"stopped in {time.monotonic() - t0:.2f} s with a run under way")
    finally:
        if c:
            c.close()


def test_loop_answers_while_runs_flood():
    """Four runs at once that never read their stdin and write 20 MB of
    output each: corrald reads it all (100 lines logged a run, the rest
    counted) while `ping` keeps answering promptly."""
    c = None
    try:
        c = ct.Corrald("--on-death-parallel", "4", workers=4, name="od-flood")
        hook = script(c.tmp, "hook", 'yes "a line of the hook\'s output" | head -c 20000000\n'
                      "sleep 1\n")
        assert c.ctl("set", key="on-death", value=hook)["ok"]
        p = Pinger(c.sock)
        p.start()
        ct.wait_for(lambda: len(p.lat) >= 20, 10, what="pings before the runs")
        base = len(p.lat)
        with c.control() as ctl:
            for wid in range(1, 5):
                assert ctl.call({"cmd": "kill", "worker": wid, "signal": "KILL"})["ok"]
        ct.wait_for(lambda: on_death(c)["succeeded"] == 4, 30, what="four runs")
        p.stop()
        during = sorted(p.lat[base:])
        assert not p.errors, p.errors[:3]
        assert len(during) >= 20, len(during)
        p50, pmax = during[len(during) // 2] * 1000, during[-1] * 1000
        print(f"{len(during)} pings while the runs flooded: p50 {p50:.1f} ms, max {pmax:.1f} ms")
        # A ping on this shared 2-core machine has been measured at up to
        # 475 ms with nothing happening (test_pacing.py): the bound is for
        # a loop that would be held for the runs' whole output.
        assert p50 < 50 and pmax < 1000, (p50, pmax)
        log = c.log()
        cut = re.findall(r"on-death\[\d+\] w\d+: (\d+) more output lines not logged", log)
        assert len(cut) == 4, log[-3000:]
        line = len("a line of the hook's output\n")
        lines = 20000000 // line + (1 if 20000000 % line else 0)  # the last one cut short
        assert all(int(k) == lines - 100 for k in cut), (cut, lines)
        assert c.stop() == 0
    finally:
        if c:
            c.close()


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
