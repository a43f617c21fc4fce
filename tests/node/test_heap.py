#!/usr/bin/env python3
"""Heap evidence of a Node worker's death (docs/worker-protocol.md, "Heap
evidence"): the agent's last heap-space breakdown (X_HEAP_SPACES) and V8's
fatal-error report in the post-mortem, a heap snapshot with
--heap-snapshot (its heap limit lowered so that writing it fits under the
memory cgroup's limit), the per-generation directories corrald makes for
them, and their bounds.

Real corrald, real node, real memory cgroups. usage: test_heap.py <case>;
CORRAL_NODE names node (a wrapper whose name starts with "node" works)."""
import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "classify"))
import clhelp as h  # noqa: E402
from clhelp import ct  # noqa: E402

PLAIN = os.path.join(ROOT, "examples", "node", "plain.js")
SPIN = os.path.join(HERE, "spin_app.js")
MB = 1 << 20


def node():
    n = os.environ.get("CORRAL_NODE", "")
    if not n or not os.access(n, os.X_OK):
        ct.skip("node is not installed")
    return n


def node_args(pid):
    """The node options of a worker (its cmdline up to the script)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    return argv


def opt(argv, name):
    """The value of --name=VALUE in argv, or None."""
    for a in argv:
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def reported(c):
    """The single worker once the agent's first report is in."""
    return ct.wait_for(lambda: (c.workers()[0].get("heap_used_bytes") or 0) > 0 and c.workers()[0],
                       15, interval=0.1, what="a heap report from the agent")


def leak_until_gone(c, pid, path, max_steps, **kw):
    """h.grow until pid is no longer a worker's (in any state: a loop
    blocked while V8 writes a snapshot is still pid's). A worker that dies
    between two requests (V8 can reach its limit in a GC task of the idle
    loop, not only inside the handler: seen with Node 18) fails no request;
    the next one waits in the shared socket's backlog and the replacement
    answers it, so a loop stopped only by a failed request would leak the
    replacement to death too and the newest death would not be pid's."""
    return h.grow(c, path, max_steps, until=lambda: all(w["pid"] != pid for w in c.workers()),
                  **kw)


def test_fatal_report():
    """A V8 heap leak under --node-heap: node runs with
    --report-on-fatalerror into a fresh 0700 directory of its generation;
    the heap-limit post-mortem names the report, which exists and holds the
    heap's spaces (and no JS stack), and has the agent's last heap spaces;
    the replacement has an empty directory of its own."""
    with h.corral_cgroup("nrep") as cg, \
            h.corrald("--node-heap", "--memory-max", "256M", "--heap-headroom", "50", workers=1,
                      cgroups=cg.rel, command=[node(), PLAIN], name="nrep") as c:
        victim = reported(c)["pid"]
        argv = node_args(victim)
        assert "--report-on-fatalerror" in argv and "--report-filename=report.json" in argv, argv
        assert opt(argv, "--heapsnapshot-near-heap-limit") is None, argv
        d1 = opt(argv, "--report-directory")
        st = os.stat(d1)
        assert d1.startswith(os.path.join(c.tmp, "corral-diag") + "/"), (d1, c.tmp)
        assert st.st_mode & 0o777 == 0o700 and os.listdir(d1) == [], (oct(st.st_mode), d1)
        leak_until_gone(c, victim, "/leak?mb=8", 80, interval=0.25, timeout=30)
        d = h.one_death(c, "heap-limit", timeout=30)
        assert d["pid"] == victim and d["shell_status"] == 134, d
        rep = d["reports"]
        assert rep == {"fatal_error_report": d1 + "/report.json", "heap_snapshot": None}, rep
        with open(rep["fatal_error_report"]) as f:
            report = json.load(f)
        assert report["header"]["trigger"] == "OOMError", report["header"]
        spaces = {s: v for s, v in report["javascriptHeap"]["heapSpaces"].items()}
        assert spaces["old_space"]["used"] > 32 * MB, spaces["old_space"]
        print(f"report: {os.path.getsize(rep['fatal_error_report'])} bytes, event "
              f"{report['header']['event']!r}, javascriptStack {report['javascriptStack']}")
        hs = d["heap_spaces"]
        assert hs["old"]["used_bytes"] > 16 * MB and hs["old"]["size_bytes"] >= hs["old"]["used_bytes"], hs
        assert "new" in hs and "code" in hs, hs
        ct.wait_for(lambda: len(c.live_pids()) == 1 and victim not in c.live_pids(), 20,
                    what="a replacement")
        d2 = opt(node_args(c.live_pids()[0]), "--report-directory")
        assert d2 != d1 and os.path.isdir(d2) and os.listdir(d2) == [], (d1, d2)
        why = subprocess.run([os.environ["CORRALCTL"], "--socket", c.sock, "why", "1"],
                             capture_output=True, text=True, timeout=20).stdout
        assert "heap spaces old " in why and "fatal error report:" in why, why


def test_heap_snapshot():
    """--heap-snapshot with --node-heap --memory-max 768M and a heap of small
    objects: the heap limit is lowered to leave room for the snapshot (old
    space (768 - 256) / 16 = 32 MB); node writes the snapshot near it, then
    aborts at the limit (134, no OOM kill: it fit); the post-mortem names
    the snapshot, whole and written before the death, beside the report."""
    with h.corral_cgroup("nsnap") as cg, \
            h.corrald("--node-heap", "--heap-snapshot", "--memory-max", "768M",
                      "--hang-timeout", "300", workers=1, cgroups=cg.rel,
                      command=[node(), SPIN], name="nsnap") as c:
        victim = reported(c)["pid"]
        argv = node_args(victim)
        d1 = opt(argv, "--report-directory")
        assert opt(argv, "--max-old-space-size") == "32", argv
        assert opt(argv, "--heapsnapshot-near-heap-limit") == "1", argv
        assert opt(argv, "--diagnostic-dir") == d1, argv
        t0 = time.time()
        leak_until_gone(c, victim, "/objects?n=5", 200, timeout=120)
        d = h.one_death(c, "heap-limit", timeout=120)
        assert d["pid"] == victim and d["oom_own"]["oom_kill"] == 0, d
        rep = d["reports"]
        snap = rep["heap_snapshot"]
        assert snap and os.path.dirname(snap) == d1, rep
        assert rep["fatal_error_report"] == d1 + "/report.json", rep
        size = os.path.getsize(snap)
        assert size > 16 * MB, size
        with open(snap, "rb") as f:
            f.seek(-64, os.SEEK_END)
            assert f.read().rstrip().endswith(b"}"), "the snapshot is whole"
        assert os.path.getmtime(snap) <= d["end_ms"] / 1000, (os.path.getmtime(snap), d["end_ms"])
        print(f"snapshot {size / MB:.0f} MB; death {d['end_ms'] / 1000 - t0:.1f} s after the leak "
              f"began; group peak {d['cg_peak_bytes'] / MB:.0f} MB of {d['cg_limit_bytes'] / MB:.0f}")


def test_retention():
    """Bounds: what a previous run left in the instance's directory is
    removed at the first spawn; a slot keeps the directory of its latest
    death that left files, and the older one is deleted; a death that left
    nothing leaves no directory."""
    with tempfile.TemporaryDirectory(prefix="corral-diag-") as base, \
            h.corral_cgroup("nret") as cg:
        stale = os.path.join(base, "ret1", "w7-7")
        os.makedirs(stale)
        with open(os.path.join(stale, "report.json"), "w") as f:
            f.write("{}")
        with h.corrald("--node-heap", "--memory-max", "256M", "--heap-headroom", "50",
                       "--diag-dir", base, "--instance", "ret1", workers=1, cgroups=cg.rel,
                       command=[node(), PLAIN], name="nret") as c:
            first = reported(c)["pid"]
            assert os.listdir(os.path.join(base, "ret1")) == ["w1-1"], os.listdir(base + "/ret1")
            # A kill leaves nothing: its directory goes.
            os.kill(first, signal.SIGKILL)
            ct.wait_for(lambda: c.history(), 10, what="the SIGKILL's death")
            assert c.history()[0]["reports"] == {"fatal_error_report": None,
                                                 "heap_snapshot": None}, c.history()[0]
            ct.wait_for(lambda: sorted(os.listdir(base + "/ret1")) == ["w1-2"], 20,
                        what="w1-1 removed, w1-2 made")
            paths = []
            for gen in (2, 3):
                leak_until_gone(c, reported(c)["pid"], "/leak?mb=8", 80, interval=0.25,
                                timeout=30)
                d = c.wait_death("heap-limit", timeout=30, count=gen - 1)[0]
                paths.append(d["reports"]["fatal_error_report"])
                assert paths[-1] == f"{base}/ret1/w1-{gen}/report.json", d["reports"]
                ct.wait_for(lambda: len(c.live_pids()) == 1, 20, what="a replacement")
            assert not os.path.exists(os.path.dirname(paths[0])), os.listdir(base + "/ret1")
            assert os.path.exists(paths[1]), paths
            assert sorted(os.listdir(base + "/ret1")) == ["w1-3", "w1-4"], os.listdir(base + "/ret1")
            assert "an older death's reports (one kept per slot)" in c.log()
            assert c.stop() == 0
        # At exit: the live generation's empty directory is gone, the evidence stays.
        assert os.listdir(base + "/ret1") == ["w1-3"], os.listdir(base + "/ret1")


def test_diag_none():
    """--diag-dir none: no report options, no directory, reports null."""
    with h.corrald("--node-agent", "--diag-dir", "none", workers=1, command=[node(), PLAIN],
                   name="nnone") as c:
        pid = reported(c)["pid"]
        argv = node_args(pid)
        assert not [a for a in argv if a.startswith("--report")], argv
        os.kill(pid, signal.SIGKILL)
        ct.wait_for(lambda: c.history(), 10, what="the death")
        assert c.history()[0]["reports"] is None, c.history()[0]
        assert not os.path.exists(os.path.join(c.tmp, "corral-diag"))


def test_user():
    """--user nobody: the generation's directory is nobody's, 0700, below
    two 0711 ones; node, as nobody, writes its report there; corrald takes
    the dead worker's directory back to read it."""
    nobody = pwd.getpwnam("nobody")
    with tempfile.TemporaryDirectory(prefix="corral-diag-") as base, \
            h.corral_cgroup("nuser") as cg:
        os.chmod(base, 0o711)
        with h.corrald("--user", "nobody", "--node-heap", "--memory-max", "256M",
                       "--heap-headroom", "50", "--diag-dir", base + "/d", "--instance", "u1",
                       workers=1, cgroups=cg.rel, command=[node(), PLAIN], name="nuser") as c:
            pid = reported(c)["pid"]
            d1 = opt(node_args(pid), "--report-directory")
            assert d1 == base + "/d/u1/w1-1", d1
            st = os.stat(d1)
            assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (nobody.pw_uid, nobody.pw_gid,
                                                                  0o700), st
            for p in (base + "/d", base + "/d/u1"):
                assert os.stat(p).st_mode & 0o777 == 0o711 and os.stat(p).st_uid == 0, p
            leak_until_gone(c, pid, "/leak?mb=8", 80, interval=0.25, timeout=30)
            d = h.one_death(c, "heap-limit", timeout=30)
            assert d["reports"]["fatal_error_report"] == d1 + "/report.json", d["reports"]
            assert os.stat(d1).st_uid == 0, "taken back by corrald"



def test_previous_run():
    """What a previous run left in <diag-dir>/<instance> is removed at the
    first spawn — its generations' directories (w<ID>-<GEN>, s<GEN>) and
    nothing else: a file or a directory of another name stays, and so does
    the directory's mode (a --diag-dir and --instance naming someone
    else's directory lose nothing of theirs). A relative --diag-dir is
    made absolute."""
    with tempfile.TemporaryDirectory(prefix="corral-diag-") as base:
        root = os.path.join(base, "d", "u2")
        for sub in ("w7-3", "s4", "notours", "w1-x"):
            os.makedirs(os.path.join(root, sub))
            with open(os.path.join(root, sub, "report.json"), "w") as f:
                f.write("{}")
        with open(os.path.join(root, "keepme"), "w") as f:
            f.write("theirs")
        os.chmod(root, 0o755)
        # corrald runs in a directory of its own beside base (both made by
        # tempfile in the same temporary directory).
        rel = os.path.join("..", os.path.basename(base), "d")
        with h.corrald("--node-agent", "--diag-dir", rel, "--instance", "u2", workers=1,
                       command=[node(), PLAIN], name="nprev") as c:
            pid = reported(c)["pid"]
            d1 = opt(node_args(pid), "--report-directory")
            assert d1.startswith("/") and os.path.normpath(d1) == os.path.join(root, "w1-1"), \
                (d1, root)
            left = sorted(os.listdir(root))
            assert left == ["keepme", "notours", "w1-1", "w1-x"], left
            assert os.path.exists(os.path.join(root, "notours", "report.json"))
            assert os.stat(root).st_mode & 0o777 == 0o755, oct(os.stat(root).st_mode)


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
