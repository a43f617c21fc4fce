"""--workers MIN..MAX: corrald decides N. Real corrald, real workers, real
load (a new connection per request, so connections wait in the accept
queue when the workers do not keep up).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402

CORES = len(os.sched_getaffinity(0))


def loads(c, path, n, seconds):
    """n clients of path, each a request at a time, bounded in time."""
    ls = [ct.Load(c, path, interval=0, max_seconds=seconds, timeout=10) for _ in range(n)]
    for load in ls:
        load.start()
    return ls


def target(c):
    return c.status()["supervisor"]["workers_target"]


def scale_events(sub, seen):
    """Reads what the subscription has so far; keeps the scale events."""
    while True:
        try:
            line = sub.line(timeout=0.05)
        except Exception:  # noqa: BLE001 - nothing more for now
            return seen
        if line is None:
            return seen
        e = ct.json.loads(line)
        if e.get("event") == "scale":
            seen.append(e)


def test_blocking_goes_past_the_cores():
    """8 clients of /sleepsync?ms=100 (loops blocked, the CPU idle): from 1
    worker to at least 3 within 5 s, each step a `scale` event saying the
    loops wait without the CPU; after the load, back to 1 within the
    cool-down (3 s) plus 5 s; not one request failed, and the workers that
    went were drained, not counted as deaths."""
    c = ct.Corrald("--workers", "1..4", "--scale-cooldown", "3", workers=1, name="as-block")
    sub = c.subscribe()
    seen = []
    try:
        st = c.status()["supervisor"]
        assert st["autoscale"]["min"] == 1 and st["autoscale"]["max"] == 4, st["autoscale"]
        assert st["config"]["workers"] == "1..4", st["config"]["workers"]
        t0 = time.monotonic()
        ls = loads(c, "/sleepsync?ms=100", 8, 15)
        ct.wait_for(lambda: target(c) >= 3, 5, interval=0.1, what="3 workers")
        took = time.monotonic() - t0
        ct.wait_for(lambda: len(c.live_pids()) >= 3, 5, what="3 ready")
        for load in ls:
            load.wait_served(3, timeout=10)
        for load in ls:
            load.stop()
        stopped = time.monotonic()
        ct.wait_for(lambda: target(c) == 1, 3 + 5, interval=0.1, what="back to MIN")
        back = time.monotonic() - stopped
        failed = sum(len(load.failed) for load in ls)
        ok = sum(load.ok for load in ls)
        assert failed == 0, [load.failed[:3] for load in ls]
        scale_events(sub, seen)
        ups = [e for e in seen if e["why"] == "up"]
        assert len(ups) >= 2 and all("without the CPU" in e["text"] for e in ups), seen
        assert ups[0]["from"] == 1 and ups[0]["to"] == 2, ups[0]
        assert "connections waited up to" in ups[0]["text"] or "connection waited" in ups[0]["text"]
        downs = [e for e in seen if e["why"] == "down"]
        assert downs and downs[-1]["to"] == 1 and "low use" in downs[-1]["text"], seen
        ct.wait_for(lambda: len(c.workers()) == 1, 15, what="the drained workers gone")
        s = c.status()["supervisor"]
        assert s["autoscale"]["ups"] >= 2 and s["autoscale"]["downs"] >= 1, s["autoscale"]
        bad = {k: v for k, v in s["deaths"].items() if v and k != "exit-clean"}
        assert not bad, s["deaths"]
        assert all(w["restarts"] == 0 for w in c.workers()), c.workers()
        assert all(d["planned"] for d in c.history()), c.history()
        print(f"1 -> 3 workers in {took:.1f} s; back to 1 {back:.1f} s after the load; "
              f"{ok} requests, 0 failed; {len(ups)} up, {len(downs)} down")
        assert c.stop() == 0
    finally:
        sub.close()
        c.close()


def test_long_polls_do_not_hold_n():
    """Requests held in flight on idle loops (long polls: /slow waits on a
    timer) are not a busy loop: after a /sleepsync load took N up, N comes
    back to MIN within the cool-down plus 5 s while the long polls are
    still in flight, their workers' pages naming them."""
    c = ct.Corrald("--workers", "1..3", "--scale-cooldown", "2", workers=1, name="as-poll")
    polls = []
    try:
        ls = loads(c, "/sleepsync?ms=100", 6, 10)
        ct.wait_for(lambda: target(c) >= 2, 8, interval=0.1, what="2 workers")
        for load in ls:
            load.stop()
        # Long polls, 8 connections: the workers take them as they come.
        for _ in range(8):
            r = ct.Request("127.0.0.1", c.port, "/slow?ms=30000", timeout=40)
            r.wait_read()
            polls.append(r)
        stopped = time.monotonic()
        serving = [w for w in c.workers() if (w.get("request") or {}).get("method")]
        assert serving, c.workers()
        ct.wait_for(lambda: target(c) == 1, 2 + 5, interval=0.1, what="back to MIN")
        back = time.monotonic() - stopped
        # Still named now: N came down with the polls in flight (the workers
        # that go drain, and serve theirs meanwhile).
        named = [w for w in c.workers()
                 if ((w.get("request") or {}).get("path") or "").startswith("/slow")]
        assert named, c.workers()
        held = sum(1 for p in polls if not p.done())
        assert held > 0, "a long poll still in flight when N came back to MIN"
        print(f"back to 1 worker {back:.1f} s after the load, {held} long polls still held")
    finally:
        for p in polls:
            p.conn.close()
        c.close()


def test_stuck_loop_is_busy_before_the_watchdog():
    """A loop that has sent nothing since it began the request it serves,
    for 1.5 s (its report period is 1 s), counts 100 % busy at once, while
    the watchdog (5 s) still calls the worker ready; before that, its last
    utilization decides (idle: under 0.5)."""
    c = ct.Corrald("--workers", "1..2", "--scale-cooldown", "30", workers=1, name="as-stuck")
    try:
        # Its utilization reported idle (the first report covers its
        # start-up), and measured by a tick since (before a report, the page
        # alone decides: serving counts busy).
        ct.wait_for(lambda: (c.workers()[0].get("elu") or 1) < 0.5, 5, interval=0.1,
                    what="an idle X_ELU")
        ct.wait_for(lambda: (c.status()["supervisor"]["autoscale"]["measured"] or {}).get("busy")
                    is not None, 5, interval=0.1, what="a first measure")
        time.sleep(0.6)  # one tick after the report: a scaler tick is every 500 ms
        r = ct.Request("127.0.0.1", c.port, "/sleepsync?ms=4000", timeout=15)
        r.wait_read()
        early, stuck = [], []
        end = time.monotonic() + 3.8
        while time.monotonic() < end and not stuck:
            full = c.status()
            st, w = full["supervisor"], full["workers"][0]
            age = (w.get("request") or {}).get("age_ms")
            busy = st["autoscale"]["measured"]["busy"]
            if age is not None and w["state"] == "ready":
                silent = w.get("last_report_ago_ms")
                (early if age < 900 else stuck if busy == 1 else []).append((age, busy, silent))
            time.sleep(0.05)
        assert early and all(b < 0.5 for _, b, _ in early), early
        assert stuck, "busy never 1 while the worker was ready"
        # Seen while its last utilization was still fresh (3 s): the stuck
        # rule said so, not the staleness of the report (the measure is a
        # tick old, at most 500 ms).
        assert stuck[0][2] < 2900, f"busy 1 only once the report was stale: {stuck[0]}"
        print(f"busy {early[-1][1]} at {early[-1][0]} ms into the request; 1 at {stuck[0][0]} ms, "
              f"{stuck[0][2]} ms after the last report")
        assert r.result()[0] == 200
    finally:
        c.close()


def test_cpu_bound_stops_at_the_cores():
    """8 clients of /heavy?ms=200 (loops burning the CPU): N reaches the
    cores (a core kept busy by other work of the host does not hold it
    below them) and never goes past the cores plus one, whatever the queue
    says."""
    c = ct.Corrald("--workers", "1..6", "--scale-cooldown", "30", workers=1, name="as-cpu")
    try:
        ls = loads(c, "/heavy?ms=200", 8, 8)
        most = 1
        end = time.monotonic() + 7
        while time.monotonic() < end:
            most = max(most, target(c))
            time.sleep(0.1)
        for load in ls:
            load.stop()
        assert min(CORES, 6) <= most <= CORES + 1, (most, CORES)
        a = c.status()["supervisor"]["autoscale"]
        assert a["measured"]["cpu_each"] is not None, a
        assert sum(len(load.failed) for load in ls) == 0
        print(f"at most {most} workers on {CORES} cores; last: "
              f"{(a['last'] or {}).get('text')}")
        assert c.stop() == 0
    finally:
        c.close()


def test_memory_budget_caps():
    """A memory budget that fits only 2 workers (a 256M group around
    corrald, --memory-max 64M each: 3 × 64M with a reload's replacement,
    corrald and the margin) caps N at 2 under a load that wants 4, and the
    `scale` event says why."""
    ct.need_memcg()
    pod = ct.TestCgroup("as-budget")
    pod.limit(256 << 20)
    c = None
    try:
        c = ct.Corrald("--workers", "1..4", "--memory-max", "64M", workers=1, name="as-budget",
                       cgroups=False, preexec=pod.enter)
        sub = c.subscribe()
        fit = c.status()["supervisor"]["memory_budget"]["fit_workers"]
        assert fit == 2, c.status()["supervisor"]["memory_budget"]
        ls = loads(c, "/sleepsync?ms=100", 8, 12)
        seen = []
        ct.wait_for(lambda: any(e["why"] == "at-budget" for e in scale_events(sub, seen)), 10,
                    interval=0.1, what="a hold at the budget")
        held = [e for e in seen if e["why"] == "at-budget"][0]
        assert held["from"] == 2 and held["to"] == 2, held
        assert "the memory budget fits 2 workers" in held["text"], held
        assert target(c) == 2
        for load in ls:
            load.stop()
        assert sum(len(load.failed) for load in ls) == 0
        sub.close()
        assert c.stop() == 0
    finally:
        if c:
            c.close()
        pod.remove()


def test_bounds():
    """An operator's scale within the bounds is where the scaler goes on
    from; outside them it is refused; `set workers` moves the bounds (the
    count clamped into them) or ends them (a number)."""
    c = ct.Corrald("--workers", "2..5", "--scale-cooldown", "60", workers=2, name="as-bounds")
    try:
        assert c.ctl("scale", workers=4)["ok"]
        c.wait_ready(4)
        r = c.ctl("scale", workers=6)
        assert not r["ok"] and r["error"]["code"] == "bad-argument", r
        assert "MIN..MAX" in r["error"]["message"], r
        assert c.ctl("set", key="workers", value="1..3")["ok"]
        ct.wait_for(lambda: target(c) == 3, 5, what="clamped to 3")
        assert c.status()["supervisor"]["autoscale"]["max"] == 3
        assert c.ctl("set", key="workers", value="2")["ok"]
        ct.wait_for(lambda: target(c) == 2, 5, what="fixed at 2")
        st = c.status()["supervisor"]
        assert st["autoscale"] is None and st["config"]["workers"] == 2, st["autoscale"]
        assert c.ctl("scale", workers=6)["ok"]  # fixed N: any count again
        assert c.stop() == 0
    finally:
        c.close()
    # From --workers auto, a range keeps the count auto gave (the cores),
    # not the 0 that spells auto.
    c = ct.Corrald("--workers", "auto", "--scale-cooldown", "60", workers=CORES, name="as-auto")
    try:
        assert c.ctl("set", key="workers", value=f"1..{CORES + 2}")["ok"]
        assert target(c) == CORES, c.status()["supervisor"]
        assert c.stop() == 0
    finally:
        c.close()



def test_unmeasured_is_null():
    """A range set at run time: until the scaler has measured something,
    its `measured` figures are null, not 0 (0 cores used, 0 idle would be
    measurements). The CPU figures need two ticks (a difference of two
    readings, 1 s apart at the least), so they are null on the answer
    right after the `set` whether or not the first tick has run."""
    c = ct.Corrald(workers=1, name="as-unmeasured")
    try:
        assert c.status()["supervisor"]["autoscale"] is None
        assert c.ctl("set", key="workers", value="1..3")["ok"]
        m = c.status()["supervisor"]["autoscale"]["measured"]
        for k in ("cpu_each", "cpu_wanted_each", "idle_cores"):
            assert m[k] is None, (k, m)
        assert c.stop() == 0
    finally:
        c.close()

if __name__ == "__main__":
    ct.main(sys.modules[__name__])
