"""A slot owns what outlives a process: after a kernel OOM kill, the slot's
last death, restart count and OOM count survive every hand-over of the slot
to a new process — a reload, a restart, a soft-limit recycle, a spare
promotion, and the death of a worker whose replacement was starting.

Each case runs one worker (slot 1) in a 64M group, kills it once at its own
limit, and then hands the slot over the way the case names.
"""
import contextlib
import os
import shlex
import signal
import stat
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402


def slot(c, wid=1):
    """The slot's figures as `status` shows them on its current worker."""
    w = c.worker(wid)
    assert w, c.workers()
    d = w["last_death"]
    return {"restarts": w["restarts"], "oom_kills": w["oom_kills"],
            "last_death": d["category"] if d else None}


@contextlib.contextmanager
def oomed(name, *args, command=None):
    """corrald with one worker under a 64M limit, killed once by the kernel
    at that limit and replaced; yields (corrald, the slot's figures)."""
    ct.need_memcg()
    cg = ct.TestCgroup(name)
    c = None
    try:
        c = ct.Corrald("--memory-max", "64M", *args, workers=1, cgroups=cg.rel, name=name,
                       command=command)
        victim = c.live_pids()[0]
        # One request that needs more than the limit: the kernel kills it
        # before the memory watch could see it grow.
        with contextlib.suppress(Exception):
            c.get("/buffer?mb=96&retain=1", timeout=10)
        c.wait_death("oom-own-limit")
        ct.wait_for(lambda: c.live_pids() and victim not in c.live_pids(), 15,
                    what="a replacement after the OOM kill")
        before = slot(c)
        assert before["last_death"] == "oom-own-limit", (before, c.history())
        assert before["oom_kills"] == 1 and before["restarts"] >= 1, before
        yield c, before
    finally:
        if c:
            c.close()
        cg.remove()


def handed_over(c, old_pid, timeout=15):
    """Slot 1 is served by a process other than old_pid, ready, and nothing
    else of the slot is starting or on its way out."""
    def done():
        ws = c.workers()
        mine = [w for w in ws if w["id"] == 1]
        cur = c.worker(1)
        return (cur and cur["pid"] and cur["pid"] != old_pid and cur["state"] == "ready" and
                len(mine) == 1 and c.status()["supervisor"]["state"] == "running")
    ct.wait_for(done, timeout, what="slot 1 handed to a new process")


def test_survive_reload():
    with oomed("slot-reload") as (c, before):
        pid = c.worker(1)["pid"]
        assert c.ctl("reload")["ok"]
        handed_over(c, pid)
        assert slot(c) == before, (slot(c), before)


def test_survive_restart():
    with oomed("slot-restart") as (c, before):
        pid = c.worker(1)["pid"]
        assert c.ctl("restart", worker=1)["ok"]
        handed_over(c, pid)
        assert slot(c) == before, (slot(c), before)


def test_survive_soft_recycle():
    with oomed("slot-soft", "--memory-soft", "40M", "--soft-samples", "2") as (c, before):
        pid = c.worker(1)["pid"]
        # Above the soft limit, below the hard one: a rolling replacement.
        st, _, _ = c.get("/buffer?mb=48&retain=1", timeout=10)
        assert st == 200, st
        handed_over(c, pid)
        assert any(d["category"] == "recycled" and d["pid"] == pid for d in c.history()), \
            c.history()
        assert slot(c) == before, (slot(c), before)


def test_survive_spare_promotion():
    """The OOM'd slot goes to a frozen spare; later a kill -9 promotes the
    next spare: the OOM count stays, the restart count goes on, and the last
    death is the newest."""
    with oomed("slot-spare", "--spares", "1") as (c, before):
        promoted = c.status()["supervisor"]["spares"]["promotions"]
        assert promoted == 1, c.status()["supervisor"]["spares"]
        ct.wait_for(lambda: any(w["state"] == "spare" for w in c.workers()), 15,
                    what="the next frozen spare")
        pid = c.worker(1)["pid"]
        os.kill(pid, signal.SIGKILL)
        c.wait_death("signal")
        handed_over(c, pid)
        assert c.status()["supervisor"]["spares"]["promotions"] == 2
        after = slot(c)
        assert after == {"restarts": before["restarts"] + 1, "oom_kills": 1,
                         "last_death": "signal"}, (after, before)
        assert c.stop() == 0  # thaws and kills the frozen spare (see below)


def test_survive_death_during_replacement():
    """The slot's worker dies while its replacement starts (a restart asked
    of a worker slow to say READY=1): the replacement takes the slot with the
    slot's figures; this death is its last, and no restart was needed."""
    slow = ["/bin/sh", "-c", "sleep 2; exec " + shlex.quote(ct.WORKER)]
    with oomed("slot-mid", "--ready", "notify", command=slow) as (c, before):
        pid = c.worker(1)["pid"]
        assert c.ctl("restart", worker=1)["ok"]
        ct.wait_for(lambda: any(w.get("replaces_pid") == pid for w in c.workers()), 10,
                    what="a replacement starting")
        os.kill(pid, signal.SIGKILL)
        c.wait_death("signal")
        handed_over(c, pid)
        after = slot(c)
        assert after["oom_kills"] == 1 and after["last_death"] == "signal", (after, before)
        assert after["restarts"] == before["restarts"], (after, before)


def test_exec_failure_keeps_spare():
    """A replacement whose program cannot be executed any more (--ready
    exec: ready only once its exec succeeded) fails as a replacement: the
    old worker keeps the slot and serving, the frozen spare stays frozen
    (a spare is no cure for a missing program), nothing is promoted."""
    ct.need_memcg()
    d = tempfile.mkdtemp(prefix="corral-slot-exec-")
    prog = os.path.join(d, "worker.sh")
    with open(prog, "w") as f:
        f.write("#!/bin/sh\nexec " + shlex.quote(ct.WORKER) + "\n")
    os.chmod(prog, 0o755)
    cg = ct.TestCgroup("slot-exec")
    c = None
    try:
        c = ct.Corrald("--spares", "1", "--ready", "exec", workers=1, cgroups=cg.rel,
                       name="slot-exec", command=[prog])
        ct.wait_for(lambda: any(w["state"] == "spare" for w in c.workers()), 15,
                    what="a frozen spare")
        holder = c.worker(1)["pid"]
        os.chmod(prog, stat.S_IRUSR | stat.S_IWUSR)
        assert c.ctl("restart", worker=1)["ok"]
        c.wait_death("exec-failed")
        ct.wait_for(lambda: not any(w.get("replaces_pid") for w in c.workers()), 10,
                    what="the replacement gone")
        assert c.worker(1)["pid"] == holder and c.worker(1)["state"] == "ready", c.workers()
        assert any(w["state"] == "spare" for w in c.workers()), c.workers()
        sp = c.status()["supervisor"]["spares"]
        assert sp["promotions"] == 0, sp
        assert c.pid_of() == holder
        # A stop thaws and kills the spare; a SIGKILLed corrald would leave
        # it frozen in its group (cgroup v1 holds a frozen task's SIGKILL).
        assert c.stop() == 0
    finally:
        if c:
            c.close()
        cg.remove()
        os.chmod(prog, 0o755)
        os.unlink(prog)
        os.rmdir(d)


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
