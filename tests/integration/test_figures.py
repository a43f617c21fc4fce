"""Figures that are true when they are shown: a worker's memory read for
the answer rather than as last sampled, and unknown figures that stay
unknown in every output. Real corrald, real workers and cgroups.
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402

MIB = 1 << 20
CORRALCTL = os.environ.get("CORRALCTL", "")


def statm_rss(pid):
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def metric(text, name, labels=""):
    m = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


# -- memory read for the answer ------------------------------------------------

def test_rss_read_for_the_answer():
    """A calm worker (sampled every eighth period, 2 s at the default
    --sample-interval) grows by 100 MB; status, worker and metrics asked
    right after the response show its RSS and its group's usage as /proc
    and the group say now (within 4 MiB), not as last sampled, each with
    age 0."""
    ct.need_memcg()
    cg = ct.TestCgroup("fresh")
    try:
        c = ct.Corrald(workers=1, cgroups=cg.rel, name="fresh")
        try:
            # Calm: a stable verdict and a flat ring; its sample period is
            # then 2 s, so a sample is unlikely to fall in the window below.
            w = ct.wait_for(lambda: (lambda w: w if w["verdict"] == "stable" else None)(
                c.workers()[0]), 10, what="a stable verdict")
            time.sleep(2.5)  # the ring's last nine samples flat: calm
            pid, before = w["pid"], c.workers()[0]["rss_bytes"]
            usage_file = os.path.join(ct.MEMCG_V1 if cg.layout == "v1" else ct.CGROOT,
                                      w["cgroup"].lstrip("/"),
                                      "memory.usage_in_bytes" if cg.layout == "v1"
                                      else "memory.current")
            st, _, body = c.get("/buffer?mb=100&retain=1", timeout=10)
            t_resp = time.monotonic()
            assert st == 200, (st, body)
            s = c.status()
            asked = time.monotonic() - t_resp
            rss_proc = statm_rss(pid)
            with open(usage_file) as f:
                usage_cg = int(f.read())
            w = s["workers"][0]
            print(f"status asked {asked * 1000:.0f} ms after the response: rss {w['rss_bytes']} "
                  f"(age {w.get('rss_age_ms')} ms) vs statm {rss_proc}; usage "
                  f"{w['cgroup_usage_bytes']} (age {w.get('cgroup_usage_age_ms')} ms) "
                  f"vs {usage_cg}; before {before}")
            assert asked < 0.3, asked
            assert w["rss_bytes"] - before >= 95 * MIB, (before, w)
            assert abs(w["rss_bytes"] - rss_proc) < 4 * MIB, (w, rss_proc)
            assert w["rss_age_ms"] == 0, w
            assert abs(w["cgroup_usage_bytes"] - usage_cg) < 4 * MIB, (w, usage_cg)
            assert w["cgroup_usage_age_ms"] == 0, w

            one = c.ctl("worker", worker=1)["worker"]
            assert abs(one["rss_bytes"] - statm_rss(pid)) < 4 * MIB and one["rss_age_ms"] == 0, one
            text = c.ctl("metrics")["metrics"]
            m = metric(text, "corral_worker_memory_rss_bytes", '{worker="1"}')
            assert m is not None and abs(m - statm_rss(pid)) < 4 * MIB, (m, statm_rss(pid))
        finally:
            c.close()
    finally:
        cg.remove()


def test_unknown_stays_unknown():
    """Without a group of its own a worker's cgroup usage and OOM events are
    null (no metric sample); a worker that never reports its heap dies with
    a post-mortem whose heap, group and OOM figures are null in the JSON and
    absent from the logfmt line of its death, never 0."""
    c = ct.Corrald(workers=1, name="unknown")
    try:
        w = ct.wait_for(lambda: (lambda w: w if w["rss_bytes"] else None)(c.workers()[0]), 5,
                        what="a resident size")
        assert w["cgroup_usage_bytes"] is None and w["cgroup_usage_age_ms"] is None, w
        assert w["oom_events"] is None, w
        text = c.ctl("metrics")["metrics"]
        assert "corral_worker_cgroup_usage_bytes{" not in text, text
        assert metric(text, "corral_worker_memory_rss_bytes", '{worker="1"}') > 0
    finally:
        c.close()
    # A program that says nothing and exits 3 after a while.
    c = ct.Corrald("--ready", "exec", workers=1, name="unknown2",
                   command=["/bin/sh", "-c", "sleep 0.4; exit 3"])
    try:
        d = c.wait_death(timeout=10)[-1]
        for k in ("heap_used_bytes", "heap_total_bytes", "heap_limit_bytes", "external_bytes",
                  "loop_delay_max_us", "cg_usage_bytes", "cg_peak_bytes", "memory_stat"):
            assert d[k] is None, (k, d)
        line = ct.wait_for(lambda: next((l for l in c.log().splitlines()
                                         if "[died]" in l and "postmortem=" in l), None), 5,
                           what="the death's log line")
        pm = line.split("postmortem=", 1)[1]
        print(pm)
        for k in ("heap_used_bytes", "heap_limit_bytes", "external_bytes", "cg_usage_bytes",
                  "cg_peak_bytes"):
            assert f" {k}=" not in pm, (k, line)
    finally:
        c.close()


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
