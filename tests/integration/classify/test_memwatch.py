"""The memory watch with real workers (issue 5): growth verdicts, the soft
limit's graceful recycle and its reaction time, coordinated heap and cgroup
limits, and the request and lifetime caps."""
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import clhelp as h  # noqa: E402
from clhelp import ct  # noqa: E402

SAMPLE_MS = 250  # corrald's default --sample-interval
SOFT_K = 4       # corrald's default --soft-samples


class Grower(threading.Thread):
    """GET path every interval, at most max_steps times, until stopped or a
    request fails. Remembers when each answer came and what it said."""

    def __init__(self, c, path, interval, max_steps):
        super().__init__(daemon=True)
        self.c, self.path, self.interval, self.max_steps = c, path, interval, max_steps
        self.answers = []  # (monotonic time, parsed JSON body)
        self.failed = None
        self.t0 = None
        self._halt = threading.Event()

    def run(self):
        import json
        self.t0 = time.monotonic()
        for _ in range(self.max_steps):
            if self._halt.is_set():
                return
            try:
                st, _, body = self.c.get(self.path, timeout=10)
            except Exception as e:  # noqa: BLE001
                self.failed = repr(e)
                return
            if st != 200:
                self.failed = f"HTTP {st}"
                return
            self.answers.append((time.monotonic(), json.loads(body)))
            self._halt.wait(self.interval)

    def stop(self):
        self._halt.set()
        self.join(15)


def _verdict_within(name, path, want, limit=3.0):
    with h.corral_cgroup(name) as cg, \
            h.corrald("--memory-max", "512M", workers=1, cgroups=cg.rel, name=name) as c:
        assert c.workers()[0]["verdict"] in ("unknown", "stable"), c.workers()
        g = Grower(c, path, 0.3, 30)
        g.start()
        try:
            seen = ct.wait_for(lambda: c.workers()[0]["verdict"] == want and c.workers()[0],
                               limit + 2, interval=0.05, what=f"verdict {want}")
            took = time.monotonic() - g.t0
        finally:
            g.stop()
        assert took <= limit, f"{want} after {took:.2f} s (> {limit} s): {seen}"
        assert f"memory: {want}" in c.log(), c.log()[-2000:]
        print(f"{want} after {took:.2f} s: {seen['verdict_detail']}")
        return seen


def test_heap_growing():
    """Heap retained in steps: `heap-growing` within 3 s."""
    w = _verdict_within("vheap", "/alloc?mb=8&retain=1", "heap-growing")
    assert w["heap_used_bytes"] > 0, w


def test_offheap_growing():
    """Buffers retained in steps: `offheap-growing` within 3 s."""
    w = _verdict_within("voff", "/buffer?mb=8&retain=1", "offheap-growing")
    assert w["external_bytes"] > w["heap_used_bytes"], w


def test_soft_limit():
    """Buffers grown slowly past the soft limit: the worker is recycled
    gracefully (replacement first, no failed request) before any OOM kill,
    and the replacement is spawned within K samples + 100 ms of the
    crossing."""
    soft = 96 << 20
    with h.corral_cgroup("soft") as cg, \
            h.corrald("--memory-max", "256M", "--memory-soft", "96M", workers=1,
                      cgroups=cg.rel, name="soft") as c:
        victim = c.live_pids()[0]
        load = ct.Load(c, interval=0.01, max_seconds=30)
        load.start()
        g = Grower(c, "/buffer?mb=8&retain=1", 0.2, 60)
        g.start()
        try:
            def spawned():
                for w in c.workers():
                    if w.get("replaces_pid") == victim or (w["pid"] and w["pid"] != victim):
                        return time.monotonic()
                return None
            t_spawn = ct.wait_for(spawned, 20, interval=0.01, what="a replacement")
            g.stop()
            d = c.wait_death("recycled", timeout=15)[0]
            load.wait_served(10, by=set(c.live_pids()) - {victim})  # on, to the replacement
        finally:
            g.stop()
            load.stop()
        assert d["pid"] == victim and "soft limit" in d["reason"], d
        assert d["oom_own"]["oom_kill"] == 0, d
        assert not [x for x in c.history() if x["category"].startswith("oom")], c.history()
        assert not load.failed, load.failed[:5]
        assert load.ok > 20, load.ok
        new = c.wait_ready(1)
        assert new[0] != victim

        m = re.search(r"worker 1: replacement spawned (\d+) ms after usage crossed the soft limit",
                      c.log())
        assert m, c.log()[-3000:]
        react = int(m.group(1))
        bound = SOFT_K * SAMPLE_MS + 100
        assert react <= bound, f"reaction {react} ms > {bound} ms"
        # From the test side: the first answer whose RSS (a lower bound of
        # the cgroup's usage) was past the soft limit, to the replacement
        # showing up in status; generous, the machine is shared.
        crossed = [t for t, b in g.answers if b["memory"]["rss"] > soft]
        assert crossed, g.answers[-1]
        outside = (t_spawn - crossed[0]) * 1000
        print(f"reaction: corrald {react} ms (bound {bound}), test side {outside:.0f} ms")
        assert outside <= bound + 1500, outside


def test_coordinated():
    """--memory-max 128M: heap growth ends in the heap limit (134) before
    the cgroup's; buffer growth, with no soft limit, in the kernel's
    (137)."""
    with h.corral_cgroup("coord") as cg, \
            h.corrald("--memory-max", "128M", workers=1, cgroups=cg.rel, name="coord") as c:
        first = c.live_pids()[0]
        h.grow(c, "/alloc?mb=8&retain=1", 40)
        d = h.one_death(c, "heap-limit")
        assert d["pid"] == first and d["shell_status"] == 134, d
        assert d["oom_own"]["oom_kill"] == 0 and d["cg_peak_bytes"] < 128 << 20, d
        second = h.replaced(c, first)[0]
        h.grow(c, "/buffer?mb=8&retain=1", 40)
        d2 = c.wait_death("oom-own-limit")[0]
        assert d2["pid"] == second and d2["shell_status"] == 137, d2
        assert d2["oom_own"]["oom_kill"] == 1, d2
        assert [x["category"] for x in c.history()] == ["oom-own-limit", "heap-limit"]


def test_max_requests():
    """--max-requests 50: recycled after about 50 requests, no request
    fails."""
    with h.optional_cgroup("maxreq") as cg, \
            h.corrald("--max-requests", "50", workers=1, cgroups=h.rel(cg),
                      command=[ct.WORKER, "--report-interval", "250"], name="maxreq") as c:
        victim = c.live_pids()[0]
        load = ct.Load(c, interval=0.02, max_seconds=20)
        load.start()
        try:
            d = c.wait_death("recycled", timeout=15)[0]
            load.wait_served(10, by=set(c.live_pids()) - {victim})  # on, to the replacement
        finally:
            load.stop()
        assert d["pid"] == victim, d
        m = re.search(r"request cap \((\d+) of 50\)", d["reason"])
        assert m, d
        assert 50 <= int(m.group(1)) <= 80, d["reason"]
        assert not load.failed, load.failed[:5]
        assert not [x for x in c.history() if x["category"] != "recycled"], c.history()


def test_max_lifetime():
    """--max-lifetime 2: recycled after 2 s of uptime."""
    with h.optional_cgroup("maxlife") as cg, \
            h.corrald("--max-lifetime", "2", workers=1, cgroups=h.rel(cg), name="maxlife") as c:
        victim = c.live_pids()[0]
        d = c.wait_death("recycled", timeout=8)[0]
        assert d["pid"] == victim and "max lifetime" in d["reason"], d
        assert 2000 <= d["uptime_ms"], d
        # corrald decides at its first memory sample (250 ms) past 2 s: from
        # its own log, spawn to decision (the spawn line is written a few
        # ms after the fork that starts the uptime).
        log = c.log()
        took = (_log_ms(log, r"\[recycle\] worker 1: recycle: max lifetime") -
                _log_ms(log, rf"\[spawned\] worker 1 spawned: pid {victim},"))
        # Not early: the uptime check above. Not late: at most a second
        # past the limit by corrald's own clock. (A lower bound read from the
        # log would measure the log line's delay, ~500 ms in the TCG guest.)
        assert took <= 3000, (took, log[-2000:])
        # The death follows once the replacement is ready and the old
        # worker drained (a drain gives idle keep-alive connections a 1 s
        # grace): seconds more in the emulated VM guest, where waits are
        # scaled; here, within 5 s of the start (4.04 s seen under ASan).
        if ct.WAIT_SCALE == 1:
            assert d["uptime_ms"] <= 5000, d
        assert c.wait_ready(1)[0] != victim


def _log_ms(log, pattern):
    """The time of day, in ms, of corrald's first log line matching."""
    m = re.search(r"^(\d\d):(\d\d):(\d\d)\.(\d\d\d) .*" + pattern, log, re.M)
    assert m, (pattern, log[-2000:])
    h, mi, sec, ms = (int(x) for x in m.groups())
    return ((h * 60 + mi) * 60 + sec) * 1000 + ms


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
