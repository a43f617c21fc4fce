"""The Node.js example worker under corrald (issues 4 and 5): V8's heap
limit (134, with V8's own message in the post-mortem) against the cgroup's
(137), and a Buffer leak recycled by the soft limit."""
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import clhelp as h  # noqa: E402
from clhelp import ct  # noqa: E402

SERVER = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                      "examples", "node", "server.js"))
V8_OOM = ("Reached heap limit", "heap out of memory")


def node_cmd():
    node = shutil.which("node")
    if not node:
        ct.skip("node is not installed")
    return [node, SERVER]


def test_node_heap_limit():
    """--node-heap derives --max-old-space-size from --memory-max 512M minus
    50 % headroom: a V8 leak ends in V8's own abort, `heap-limit`, with its
    message in the stderr tail, before the cgroup's limit."""
    cmd = node_cmd()
    with h.corral_cgroup("nheap") as cg, \
            h.corrald("--node-heap", "--memory-max", "512M", "--heap-headroom", "50",
                      workers=1, cgroups=cg.rel, command=cmd, name="nheap") as c:
        victim = c.live_pids()[0]
        st, _, body = c.get("/alloc?mb=1&retain=0")
        assert st == 200, body
        h.grow(c, "/alloc?mb=16&retain=1", 60, timeout=30)
        d = h.one_death(c, "heap-limit", timeout=30)
        assert d["pid"] == victim and d["signal"] == 6 and d["shell_status"] == 134, d
        assert any(m in d["stderr_tail"] for m in V8_OOM), d["stderr_tail"]
        assert d["oom_own"]["oom_kill"] == 0 and d["cg_peak_bytes"] < 512 << 20, d
        # V8's limit: old space (256 - 48 MB) plus the young generation.
        assert 200 << 20 <= d["heap_limit_bytes"] <= 300 << 20, d
        h.replaced(c, victim, timeout=15)


def test_node_buffer_oom():
    """Buffers past a 160M cgroup limit: the kernel kills node, 137."""
    cmd = node_cmd()
    with h.corral_cgroup("nbuf") as cg, \
            h.corrald("--memory-max", "160M", workers=1, cgroups=cg.rel, command=cmd,
                      name="nbuf") as c:
        victim = c.live_pids()[0]
        h.grow(c, "/buffer?mb=16&retain=1", 30)
        d = h.one_death(c, "oom-own-limit", timeout=15)
        assert d["pid"] == victim and d["signal"] == 9 and d["shell_status"] == 137, d
        assert d["oom_own"]["oom_kill"] == 1, d
        h.replaced(c, victim, timeout=15)


def test_node_soft_recycle():
    """A Buffer leak under --memory-soft is recycled gracefully before the
    kernel has to kill it; no /light request fails meanwhile."""
    cmd = node_cmd()
    with h.corral_cgroup("nsoft") as cg, \
            h.corrald("--node-heap", "--memory-max", "320M", "--memory-soft", "160M", workers=1,
                      cgroups=cg.rel, command=cmd, name="nsoft") as c:
        victim = c.live_pids()[0]
        load = ct.Load(c, interval=0.01, max_seconds=40)
        load.start()
        try:
            for _ in range(40):
                if c.history() or any(w.get("replaces_pid") for w in c.workers()):
                    break
                h.grow(c, "/buffer?mb=8&retain=1", 1)
                time.sleep(0.2)  # the growth's pace
            d = c.wait_death("recycled", timeout=20)[0]
            load.wait_served(10, by=set(c.live_pids()) - {victim})  # on, to the replacement
        finally:
            load.stop()
        assert d["pid"] == victim and "soft limit" in d["reason"], d
        assert d["oom_own"]["oom_kill"] == 0, d
        assert not [x for x in c.history() if x["category"] != "recycled"], c.history()
        assert not load.failed, load.failed[:5]
        assert c.wait_ready(1, timeout=15)[0] != victim


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
