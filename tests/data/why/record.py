#!/usr/bin/env python3
"""Records the `corralctl why` fixtures from real deaths: this tree's
corrald, an unmodified Node app (examples/node/plain.js) under the agent
(--node-heap), a test memory cgroup. Not a test: run by hand as root when
the post-mortem's shape changes, then regenerate the screens (README.md in
this directory) and read the diff.

  CORRALD=build/supervisor/corrald CORRALCTL=build/supervisor/ctl/corralctl \\
      python3 tests/data/why/record.py [hang|heap-limit|oom ...]
"""
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "classify"))
import clhelp as h  # noqa: E402
from clhelp import ct  # noqa: E402

PLAIN = os.path.join(ROOT, "examples", "node", "plain.js")


def node():
    return os.environ.get("CORRAL_NODE") or shutil.which("node") or ct.skip("no node")


def reported(c, seconds):
    """The worker's pid once it reported and keeps its page, after some
    light traffic (a minute's memory series starts before the incident;
    a hang comes after 30 s, when start-up's growth has settled and the
    trend says so)."""
    ct.wait_for(lambda: (c.workers()[0].get("heap_used_bytes") or 0) > 0, 20, interval=0.1,
                what="the agent's first report")
    for _ in range(seconds * 4):
        c.get("/")
        time.sleep(0.25)
    ct.wait_for(lambda: (c.worker(1).get("request") or {}).get("inflight") == 0, 20,
                what="the agent's record on the page")
    return c.live_pids()[0]


def record_of(c, pid):
    return [d for d in c.history() if d["pid"] == pid][0]


def hang(c, pid):
    """A handler that computes for 60 s: the hang kill after 2 s."""
    req = c.start_request("/block?ms=60000", timeout=30)
    req.wait_read()
    c.wait_death("watchdog-kill", timeout=30)


def heap_limit(c, pid):
    """8 MB of JavaScript objects kept every 0.25 s: V8's heap limit."""
    h.grow(c, "/leak?mb=8", 200, interval=0.25, timeout=60)
    c.wait_death("heap-limit", timeout=30)


def oom(c, pid):
    """8 MB of Buffers (off the V8 heap) every 0.25 s: the group's limit."""
    h.grow(c, "/buffer?mb=8", 200, interval=0.25, timeout=60)
    c.wait_death("oom-own-limit", timeout=30)


CASES = {
    "hang": (hang, ["--watchdog", "1", "--hang-timeout", "2"], 30),
    "heap-limit": (heap_limit, [], 8),
    "oom": (oom, [], 8),
}


def main():
    for name in sys.argv[1:] or list(CASES):
        act, extra, warm = CASES[name]
        # A short --diag-dir, so that the report's path reads whole.
        diag = tempfile.mkdtemp(prefix="cw-")
        with h.corral_cgroup("why-" + name) as cg, \
                h.corrald("--node-heap", "--memory-max", "256M", "--diag-dir", diag, *extra,
                          workers=1,
                          cgroups=cg.rel, command=[node(), PLAIN], name="why" + name) as c:
            pid = reported(c, warm)
            act(c, pid)
            rec = record_of(c, pid)
            out = os.path.join(HERE, name + ".json")
            with open(out, "w") as f:
                json.dump(rec, f, indent=1)
                f.write("\n")
            print(f"{out}: {rec['category']}, pid {pid}")
        shutil.rmtree(diag, ignore_errors=True)


if __name__ == "__main__":
    main()
