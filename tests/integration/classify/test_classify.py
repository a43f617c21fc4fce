"""Why a worker died, told apart with real kernels and real kills (issues 3
and 4): own-limit and ancestor-limit OOM kills, heap-limit aborts, plain
aborts, outside signals, crashes with core dumps, watchdog and stop-timeout
kills, and cleanup after corrald's own death."""
import os
import resource
import shlex
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
import clhelp as h  # noqa: E402
from clhelp import ct  # noqa: E402


def _oom_own(name, command=None, grandchild=False):
    """Grows off-heap memory past a 64 MB limit: the kernel kills at the
    worker's own limit, corrald says so and replaces the worker."""
    with h.corral_cgroup(name) as cg, \
            h.corrald("--memory-max", "64M", workers=1, cgroups=cg.rel, command=command,
                      name=name) as c:
        victim = c.live_pids()[0]
        served = c.pid_of()
        assert (served != victim) == grandchild, (served, victim)
        h.grow(c, "/buffer?mb=8&retain=1", 40)
        d = h.one_death(c, "oom-own-limit")
        assert d["shell_status"] == 137, d
        assert d["oom_own"]["oom_kill"] == 1, d
        assert d["oom_ancestor"]["oom_kill"] == 0, d
        assert d["cg_limit_bytes"] == 64 << 20, d
        assert "own memory limit" in d["reason"], d
        h.replaced(c, victim, served=served if grandchild else None)
        assert h.pid_gone(served)
        return d, victim


def test_oom_own():
    d, victim = _oom_own("oom-own")
    assert d["pid"] == victim and d["signal"] == 9 and not d["via_shell"], d
    assert d["exit_code"] is None, d
    # The kernel counts the kill in /proc/vmstat too (read at spawn and at
    # death through a kept descriptor): the system counter moved.
    assert d["oom_system_kills"] >= 1, d


def test_oom_shell_exec():
    """sh -c 'exec WORKER': the shell is replaced, the signal is seen."""
    d, victim = _oom_own("oom-sh-exec",
                         ["/bin/sh", "-c", "exec " + shlex.quote(ct.WORKER)])
    assert d["pid"] == victim and d["signal"] == 9 and not d["via_shell"], d


def test_oom_shell_wait():
    """sh -c 'WORKER; exit $?': the shell survives its child and exits 137;
    the OOM counters support reading that as SIGKILL. The inner shell sets
    LISTEN_PID to its own pid, which the worker keeps through exec."""
    inner = '/bin/sh -c "export LISTEN_PID=\\$\\$; exec %s" ; exit $?' % shlex.quote(ct.WORKER)
    d, victim = _oom_own("oom-sh-wait", ["/bin/sh", "-c", inner], grandchild=True)
    # The worker is the shell's child: corrald saw the shell's exit.
    assert d["pid"] == victim, d
    assert d["via_shell"] and d["signal"] == 9 and d["exit_code"] == 137, d


def test_heap_limit():
    """/alloc past the heap limit: the worker reports X_FATAL=heap-limit and
    aborts (134) before the 128 MB cgroup limit is reached."""
    with h.corral_cgroup("heap") as cg, \
            h.corrald("--memory-max", "128M", workers=1, cgroups=cg.rel, name="heap") as c:
        victim = c.live_pids()[0]
        h.grow(c, "/alloc?mb=8&retain=1", 40)
        d = h.one_death(c, "heap-limit")
        assert d["pid"] == victim and d["signal"] == 6 and d["shell_status"] == 134, d
        assert d["oom_own"]["oom_kill"] == 0, d
        # Headroom 25 %: the heap limit is 96 MiB, below the cgroup's 128.
        assert abs(d["heap_limit_bytes"] - (96 << 20)) < 1 << 20, d
        assert d["heap_used_bytes"] >= 90 << 20 and d["cg_peak_bytes"] < 128 << 20, d
        assert "heap limit reached" in d["stderr_tail"], d
        h.replaced(c, victim)


def test_abort():
    """SIGABRT from outside, no heap evidence: a plain abort."""
    with h.optional_cgroup("abort") as cg, \
            h.corrald(workers=1, cgroups=h.rel(cg), name="abort") as c:
        victim = c.live_pids()[0]
        os.kill(victim, signal.SIGABRT)
        d = h.one_death(c, "abort")
        assert d["pid"] == victim and d["signal"] == 6 and d["shell_status"] == 134, d
        h.replaced(c, victim)


def test_ancestor():
    """corrald and its workers in an enclosing 160 MB group, each worker
    limited to 128 MB: two growing workers exhaust the enclosing group first,
    and the kill is charged to it, not to the worker's own limit."""
    with h.corral_cgroup("anc") as cg:
        cg.limit(160 << 20)
        procs = cg.procs_file

        def enter():
            with open(procs, "w") as f:
                f.write(str(os.getpid()))
        with h.corrald("--memory-max", "128M", workers=2, cgroups=False, preexec=enter,
                       name="anc") as c:
            assert c.status()["supervisor"]["cgroup"]["workers"].startswith(cg.rel + "/workers/")
            pids = c.live_pids()
            # Both workers grow in turn, each over a keep-alive connection
            # of its own: fresh connections go to whichever worker accepts
            # first, and one that takes 16 of the first 19 (seen in the v2
            # guest) reaches its own 128 MB before the group's 160.
            conns = h.connection_per_worker(c, pids)
            try:
                for _ in range(20):
                    if not all(h.get_on(conn, "/buffer?mb=8&retain=1") for conn in conns):
                        break
                    if c.history():
                        break
            finally:
                for conn in conns:
                    conn.close()
            d = c.wait_death("oom-ancestor-limit", timeout=15)[0]
            assert d["pid"] in pids and d["signal"] == 9, d
            assert d["oom_own"]["oom_kill"] == 1, d
            assert cg.rel in d["reason"], d
            assert not [x for x in c.history() if x["category"] == "oom-own-limit"], c.history()


def test_kill9():
    """kill -9 from outside is a signal, not an OOM."""
    with h.corral_cgroup("kill9") as cg, \
            h.corrald("--memory-max", "64M", workers=1, cgroups=cg.rel, name="kill9") as c:
        victim = c.live_pids()[0]
        os.kill(victim, signal.SIGKILL)
        d = h.one_death(c, "signal")
        assert d["pid"] == victim and d["signal"] == 9 and d["oom_own"]["oom_kill"] == 0, d
        h.replaced(c, victim)


def _core_limit(pid):
    """The worker's own RLIMIT_CORE soft limit (a sanitizer runtime may have
    lowered it at start), as /proc shows it."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max core file size"):
                v = line.split()[4]
                return None if v == "unlimited" else int(v)
    return 0


def test_segv_core():
    """SIGSEGV is a crash; with RLIMIT_CORE open the kernel dumps a core
    into the worker's cwd and the post-mortem says so."""
    def core_on():
        resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    # A sanitized worker would catch SIGSEGV itself and exit 1: let the
    # signal through, as for a production build.
    env = {k: (os.environ.get(k, "") + ":handle_segv=0").lstrip(":")
           for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS")}
    with h.optional_cgroup("segv") as cg, \
            h.corrald(workers=1, cgroups=h.rel(cg), preexec=core_on, env=env, name="segv") as c:
        victim = c.live_pids()[0]
        limit = _core_limit(victim)
        os.kill(victim, signal.SIGSEGV)
        d = h.one_death(c, "crash")
        assert d["pid"] == victim and d["signal"] == 11 and d["shell_status"] == 139, d
        h.replaced(c, victim)
        if limit == 0:
            # ASan lowers RLIMIT_CORE to 0 at start (disable_coredump=1):
            # then no core may be claimed.
            assert d["core_dumped"] is False, d
            return
        if pattern.startswith("|"):
            ct.skip(f"core_pattern pipes to a handler ({pattern}); core_dumped not checkable")
        assert d["core_dumped"] is True, d
        if pattern in ("core", "core.%p"):
            cores = [f for f in os.listdir(c.tmp) if f.startswith("core")]
            assert cores, os.listdir(c.tmp)


def test_watchdog_kill():
    """A blocked loop with cgroups on: flagged, killed, `watchdog-kill`."""
    with h.optional_cgroup("hang") as cg, \
            h.corrald("--watchdog", "1", "--hang-timeout", "2", workers=1, cgroups=h.rel(cg),
                      command=[ct.WORKER, "--report-interval", "250"], name="hang") as c:
        victim = c.live_pids()[0]
        threading.Thread(target=lambda: _try(c, "/heavy?ms=5000"),
                         daemon=True).start()
        d = h.one_death(c, "watchdog-kill", timeout=8)
        assert d["pid"] == victim and d["signal"] in (6, 9), d
        # Without a group to count in (the -nocg case) the count is
        # unknown: null, never a made-up 0.
        if cg:
            assert d["oom_own"]["oom_kill"] == 0, d
        else:
            assert d["oom_own"] is None or d["oom_own"]["oom_kill"] == 0, d
        h.replaced(c, victim)


def test_stop_timeout():
    """A drain that outlives --stop-timeout: SIGKILL and `stop-timeout`."""
    with h.optional_cgroup("stopto") as cg, \
            h.corrald("--stop-timeout", "1", workers=1, cgroups=h.rel(cg), name="stopto") as c:
        victim = c.live_pids()[0]
        res = {}
        t = threading.Thread(target=lambda: res.setdefault("r", _try(c, "/slow?ms=5000")),
                             daemon=True)
        t.start()
        ct.wait_for(lambda: c.worker(1) and (c.worker(1)["inflight"] or 0) >= 1, 3,
                    what="the slow request in flight")
        t0 = time.monotonic()
        assert c.ctl("restart", worker=1)["ok"]
        d = h.one_death(c, "stop-timeout", timeout=8)
        took = time.monotonic() - t0
        assert d["pid"] == victim and d["signal"] == 9, d
        assert 0.9 <= took < 4, took
        t.join(6)
        assert res.get("r") != 200, "the request was cut, not completed"
        h.replaced(c, victim)


def _try(c, path):
    try:
        return c.get(path, timeout=10)[0]
    except Exception as e:  # noqa: BLE001
        return repr(e)


def _wgroups(cg):
    # One instance across the three corralds below (each has its own
    # control path, so their default instance names would differ).
    return [g for g in cg.groups("workers/cleanup") if g.startswith("w")]


def test_cleanup():
    """After SIGTERM no worker group is left; after kill -9 of corrald no
    worker survives (PDEATHSIG) and the next corrald reclaims the stale
    groups."""
    with h.corral_cgroup("cleanup") as cg:
        c = ct.Corrald("--instance", "cleanup", workers=2, cgroups=cg.rel, name="cleanup1")
        try:
            pids = c.live_pids()
            assert len(_wgroups(cg)) == 2, cg.groups()
            assert c.stop(signal.SIGTERM) == 0
            assert not _wgroups(cg), cg.groups()
            assert all(h.pid_gone(p) for p in pids)
        finally:
            c.close()
        c = ct.Corrald("--instance", "cleanup", workers=2, cgroups=cg.rel, name="cleanup2")
        try:
            pids = c.live_pids()
            stale = _wgroups(cg)
            assert len(stale) == 2, stale
            c.kill(signal.SIGKILL)
            c.proc.wait(5)
            ct.wait_for(lambda: all(h.pid_gone(p) for p in pids), 3,
                        what="the workers to die with corrald")
            assert _wgroups(cg) == stale, "kill -9 leaves the groups for the next start"
        finally:
            c.close()
        c = ct.Corrald("--instance", "cleanup", workers=2, cgroups=cg.rel, name="cleanup3")
        try:
            assert "reclaimed 2 stale worker cgroup(s)" in c.log(), c.log()
            live = sorted(w["cgroup"].rsplit("/", 1)[1] for w in c.workers())
            assert _wgroups(cg) == live, (cg.groups(), live)
        finally:
            c.close()


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
