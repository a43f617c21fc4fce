"""Unmodified apps under corrald (issue 12): a plain Node.js server
(examples/node/plain.js) instrumented by corral-node-agent.js with no line
changed, and plain Node.js and Python http.server apps that never speak the
protocol at all.

The cases without the agent need corrald's `--ready auto` readiness mode;
they skip (77) while `corrald --help` does not list `--ready`, and run by
themselves once it does."""
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "classify"))
import clhelp as h  # noqa: E402
from clhelp import ct  # noqa: E402

PLAIN_NODE = os.path.join(ROOT, "examples", "node", "plain.js")
PLAIN_PY = os.path.join(ROOT, "examples", "python", "plain_server.py")
V8_OOM = "Reached heap limit"
MB = 1 << 20


def node():
    n = os.environ.get("CORRAL_NODE", "")
    if not n or not os.access(n, os.X_OK):
        ct.skip("node is not installed")
    return n


def need_ready_auto():
    """Skips unless this corrald has the --ready option (issue 12, item 1)."""
    out = subprocess.run([ct.CORRALD, "--help"], capture_output=True, text=True,
                         timeout=10).stdout
    if not re.search(r"--ready\b", out):
        ct.skip("corrald has no --ready option yet: an app that never sends READY=1 "
                "needs --ready auto (issue 12 item 1)")


def plain_cmd(kind):
    if kind == "node":
        return [node(), PLAIN_NODE]
    return [sys.executable, PLAIN_PY]


def pid_of(c, path="/"):
    st, _, body = c.get(path)
    assert st == 200, (st, body)
    return json.loads(body)["pid"]


def body_pid(status, headers, body):
    return json.loads(body)["pid"]


def plain_load(c, interval=0.01, max_seconds=60):
    """A background client for the plain apps, which name their pid in the
    body, not in a corral header: GET / every interval."""
    return ct.Load(c, path="/", interval=interval, max_seconds=max_seconds, pid_of=body_pid)


def reported(c):
    """The single worker once the agent's first report is in."""
    def has_report():
        w = c.workers()[0]
        return (w.get("heap_used_bytes") or 0) > 0 and (w.get("heap_limit_bytes") or 0) > 0 and w
    return ct.wait_for(has_report, 10, interval=0.1, what="a heap report from the agent")


def replaced(c, victim):
    ct.wait_for(lambda: len(c.live_pids()) == 1 and victim not in c.live_pids(), 20,
                what="a replacement")
    assert pid_of(c) == c.live_pids()[0]


def death_after_verdict(c, verdict, category):
    """The log names `verdict` for worker 1 before the death of `category`."""
    log = c.log()
    v = log.find(f"worker 1 memory: {verdict}")
    d = log.find(f"died: {category}")
    assert 0 <= v < d, f"want '{verdict}' before the '{category}' death:\n{log[-4000:]}"


# ---- with the agent ------------------------------------------------------------

def test_agent_status():
    """--node-agent on a plain app: READY once it listens on fd 3, then heap,
    heap limit, Buffers, RSS and loop delay in status; a 300 ms stall on the
    loop shows in the delay max."""
    with h.corrald("--node-agent", workers=1, command=[node(), PLAIN_NODE], name="agst") as c:
        w = reported(c)
        assert w["state"] == "ready", w
        assert "corral-node-agent" in w.get("status", ""), w
        assert (w.get("external_bytes") or 0) > 0, w
        # Node's own limit without --max-old-space-size: well above 256 MB.
        assert w["heap_limit_bytes"] > 256 * MB, w
        # corrald found the agent in the build tree and preloaded it.
        with open(f"/proc/{w['pid']}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        agent = os.path.realpath(os.path.join(os.path.dirname(ct.CORRALD), "..", "agent",
                                              "corral-node-agent.js"))
        assert argv[1] == b"--require=" + agent.encode(), argv
        st, _, _ = c.get("/block?ms=300")
        assert st == 200
        w = ct.wait_for(lambda: (c.workers()[0].get("loop_delay_max_us") or 0) >= 200000
                        and c.workers()[0], 5, interval=0.1, what="the stall in loop delay max")
        print(f"loop delay p50/p99/max {w['loop_delay_p50_us']}/{w['loop_delay_p99_us']}/"
              f"{w['loop_delay_max_us']} us, elu {w['elu']}")
        assert w["requests"] >= 1, w
        assert not c.history(), c.history()


def test_agent_node_heap():
    """--node-heap alone implies the agent: the heap limit the plain app
    reports is the one corrald derived (512M - 50 % = 256M: old space
    208 MB plus V8's young generation)."""
    with h.corral_cgroup("agheap") as cg, \
            h.corrald("--node-heap", "--memory-max", "512M", "--heap-headroom", "50",
                      workers=1, cgroups=cg.rel, command=[node(), PLAIN_NODE],
                      name="agheap") as c:
        w = reported(c)
        assert "corral-node-agent" in w.get("status", ""), w
        assert 200 * MB <= w["heap_limit_bytes"] <= 300 * MB, w
        assert (w.get("rss_bytes") or 0) > 0, w


def test_agent_heap_leak():
    """A V8 heap leak in the plain app: verdict heap-growing before the
    death, then heap-limit (134) with V8's FATAL line in the post-mortem."""
    with h.corral_cgroup("agleak") as cg, \
            h.corrald("--node-heap", "--memory-max", "512M", "--heap-headroom", "50",
                      workers=1, cgroups=cg.rel, command=[node(), PLAIN_NODE],
                      name="agleak") as c:
        reported(c)
        victim = c.live_pids()[0]
        h.grow(c, "/leak?mb=8", 80, interval=0.25, timeout=30)
        d = h.one_death(c, "heap-limit", timeout=30)
        assert d["pid"] == victim and d["signal"] == 6 and d["shell_status"] == 134, d
        assert V8_OOM in d["stderr_tail"], d["stderr_tail"]
        assert d["oom_own"]["oom_kill"] == 0, d
        death_after_verdict(c, "heap-growing", "heap-limit")
        replaced(c, victim)


def test_agent_buffer_leak():
    """A Buffer leak in the plain app: verdict offheap-growing before the
    kernel kills it at the cgroup limit, oom-own-limit (137)."""
    with h.corral_cgroup("agbuf") as cg, \
            h.corrald("--node-agent", "--memory-max", "200M", workers=1, cgroups=cg.rel,
                      command=[node(), PLAIN_NODE], name="agbuf") as c:
        reported(c)
        victim = c.live_pids()[0]
        h.grow(c, "/buffer?mb=8", 60, interval=0.25, timeout=30)
        d = h.one_death(c, "oom-own-limit", timeout=20)
        assert d["pid"] == victim and d["signal"] == 9 and d["shell_status"] == 137, d
        assert d["oom_own"]["oom_kill"] >= 1, d
        death_after_verdict(c, "offheap-growing", "oom-own-limit")
        replaced(c, victim)


# ---- the Python helper ------------------------------------------------------------

def test_python_helper():
    """examples/python/app.py speaks through corral_notify.py: ready by its
    own READY=1, its request count and heartbeat reach status, and a SIGHUP
    reload drains it gracefully (exit 0, STOPPING=1 first)."""
    app = os.path.join(ROOT, "examples", "python", "app.py")
    # notify: it speaks, and this checks its own READY=1 (under load a
    # Python start may take longer than auto's 1 s grace).
    with h.corrald("--ready", "notify", "--start-timeout", "20", workers=1,
                   command=[sys.executable, app], name="pyhelp") as c:
        w = c.workers()[0]
        assert w["state"] == "ready" and w.get("status") == "serving", w
        victim = w["pid"]
        for _ in range(3):
            assert pid_of(c) == victim
        w = ct.wait_for(lambda: (c.workers()[0]["requests"] or 0) >= 3 and c.workers()[0], 5,
                        interval=0.1, what="the request count in a report")
        assert w["last_report_ago_ms"] < 2500, w
        assert (w.get("heap_used_bytes") or 0) == 0, "no heap figures from Python"
        c.kill(signal.SIGHUP)
        d = c.wait_death("recycled", timeout=30)[0]
        assert d["pid"] == victim and d["exit_code"] == 0, d
        ct.wait_for(lambda: "reload complete" in c.log(), 10, what="reload complete")
        assert len(c.live_pids()) == 1 and victim not in c.live_pids()


# ---- without the agent: plain apps that never speak --------------------------

START_TIMEOUT = 2  # seconds; the cases serve for more than three of them


def _long(kind):
    """Served for longer than three start timeouts: no kill, same pids."""
    need_ready_auto()
    with h.corrald("--ready", "auto", "--start-timeout", str(START_TIMEOUT), workers=2,
                   command=plain_cmd(kind), name=f"long{kind}") as c:
        before = c.live_pids()
        load = plain_load(c, interval=0.02, max_seconds=30)
        load.start()
        try:
            # Until both have served for three start timeouts and more, as
            # corrald measures their uptime (or one died: asserted below).
            ct.wait_for(lambda: c.history() or all(
                w["uptime_ms"] >= (3 * START_TIMEOUT + 1.5) * 1000 for w in c.workers()),
                3 * START_TIMEOUT + 10, interval=0.1, what="three start timeouts of uptime")
        finally:
            load.stop()
        assert not c.history(), c.history()
        assert c.live_pids() == before, (before, c.live_pids())
        assert not load.failed and load.ok > 50, (load.ok, load.failed[:5])


def _reload(kind, how):
    """A rolling reload (control `reload` or SIGHUP) replaces every pid with
    zero failed requests, and completes."""
    need_ready_auto()
    with h.corrald("--ready", "auto", workers=2, command=plain_cmd(kind),
                   name=f"rl{kind}") as c:
        before = set(c.live_pids())
        load = plain_load(c, interval=0.005, max_seconds=40)
        load.start()
        try:
            load.wait_served(10)  # under load before the reload
            if how == "sighup":
                c.kill(signal.SIGHUP)
            else:
                r = c.ctl("reload")
                assert r["ok"], r
            ct.wait_for(lambda: not (set(c.live_pids()) & before) and len(c.live_pids()) == 2,
                        25, what="every pid replaced")
            ct.wait_for(lambda: "reload complete" in c.log(), 10, what="reload complete")
            ct.wait_for(lambda: c.status()["supervisor"]["state"] == "running", 5,
                        what="state running")
            load.wait_served(10, by=set(c.live_pids()))  # and after it, by the new workers
        finally:
            load.stop()
        assert not load.failed, load.failed[:5]
        assert load.ok > 50, load.ok
        assert set(c.live_pids()) & load.pids, "the new workers served"
        # Every old worker drained and was reaped as a planned recycle.
        rec = c.wait_death("recycled", timeout=15, count=len(before))
        assert {d["pid"] for d in rec} == before, c.history()
        assert all(d["category"] == "recycled" for d in c.history()), c.history()


def _soft(kind):
    """Memory past --memory-soft recycles the worker gracefully: replacement
    first, no kill by the kernel, no failed request."""
    need_ready_auto()
    with h.corral_cgroup(f"soft{kind}") as cg, \
            h.corrald("--ready", "auto", "--memory-max", "320M", "--memory-soft", "120M",
                      workers=1, cgroups=cg.rel, command=plain_cmd(kind),
                      name=f"soft{kind}") as c:
        victim = c.live_pids()[0]
        load = plain_load(c, interval=0.01, max_seconds=40)
        load.start()
        try:
            for _ in range(30):
                if c.history() or any(w.get("replaces_pid") for w in c.workers()):
                    break
                h.grow(c, "/buffer?mb=8", 1)
                time.sleep(0.2)  # the growth's pace
            d = c.wait_death("recycled", timeout=25)[0]
            ct.wait_for(lambda: len(c.live_pids()) == 1 and victim not in c.live_pids(), 15,
                        what="the replacement")
            load.wait_served(10, by=set(c.live_pids()))  # the load goes on, to it
        finally:
            load.stop()
        assert d["pid"] == victim and "soft limit" in d["reason"], d
        assert d["oom_own"]["oom_kill"] == 0, d
        assert not [x for x in c.history() if x["category"] != "recycled"], c.history()
        assert not load.failed, load.failed[:5]


def test_plain_node_long():
    _long("node")


def test_plain_python_long():
    _long("python")


def test_plain_node_reload():
    _reload("node", "ctl")


def test_plain_python_reload():
    _reload("python", "ctl")


def test_plain_node_sighup():
    _reload("node", "sighup")


def test_plain_python_sighup():
    _reload("python", "sighup")


def test_plain_node_soft():
    _soft("node")


def test_plain_python_soft():
    _soft("python")


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
