#!/usr/bin/env python3
"""Nothing a worker starts outlives it (issue: trust, "nothing escapes").

A worker here is `sh -c 'sleep 600 & exec corral-worker'`: the sleep is the
worker's child, which PR_SET_PDEATHSIG does not cover. Each case checks
one way the worker can end — its death, a stop, a SIGKILL of corrald
followed by the next corrald — with and without cgroups, and that corrald
(a child subreaper) reaps the orphans re-parented to it.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "classify"))
import clhelp as h  # noqa: E402
import corraltest as ct  # noqa: E402

CHILD = f"sleep 600 & exec {ct.WORKER}"


def children(pid):
    """Direct children of pid (every thread's list)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):  # gone meanwhile
        pass
    return out


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def ppid(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(") ", 1)[1].split()[1])


def zombies_of(pid):
    z = []
    for c in children(pid):
        try:
            with open(f"/proc/{c}/stat") as f:
                if f.read().rsplit(") ", 1)[1][0] == "Z":
                    z.append(c)
        except (FileNotFoundError, ProcessLookupError):  # gone between open and read
            pass
    return z


def sleeps_of(workers):
    """The `sleep 600` child of each worker pid."""
    out = []
    for w in workers:
        out += [c for c in children(w) if comm(c) == "sleep"]
    return out


def wait_sleeps(c, n):
    return ct.wait_for(lambda: len(sleeps_of(c.live_pids())) == n and sleeps_of(c.live_pids()), 5,
                       what=f"{n} sleep children")


def test_death_kills_children():
    """kill -9 of a worker: its child dies with it and is reaped (by
    corrald, its subreaper), so nothing keeps the listening socket."""
    with h.optional_cgroup("esc-death") as cg, \
            h.corrald(workers=1, cgroups=h.rel(cg), command=["/bin/sh", "-c", CHILD],
                      name="esc-death") as c:
        victim = c.live_pids()[0]
        child = wait_sleeps(c, 1)[0]
        os.kill(victim, signal.SIGKILL)
        ct.wait_for(lambda: not ct.pid_alive(child), 3, what=f"the worker's child {child} to die")
        ct.wait_for(lambda: not os.path.exists(f"/proc/{child}"), 3,
                    what=f"the worker's child {child} to be reaped")
        h.replaced(c, victim)
        assert not zombies_of(c.proc.pid), zombies_of(c.proc.pid)


def test_death_kills_children_nocg():
    """The same without cgroups: the worker's process group is killed."""
    os.environ["CORRAL_TEST_CGROUPS"] = "0"
    test_death_kills_children()


def test_stop_kills_children():
    """SIGTERM: every worker drains, and what they started is gone when
    corrald exits 0."""
    with h.optional_cgroup("esc-stop") as cg, \
            h.corrald(workers=2, cgroups=h.rel(cg), command=["/bin/sh", "-c", CHILD],
                      name="esc-stop") as c:
        kids = wait_sleeps(c, 2)
        assert c.stop() == 0, c.log()[-2000:]
        ct.wait_for(lambda: not any(ct.pid_alive(k) for k in kids), 3,
                    what="the workers' children to die")


def test_stop_kills_children_nocg():
    os.environ["CORRAL_TEST_CGROUPS"] = "0"
    test_stop_kills_children()


def test_sigkill_then_next_start_purges():
    """kill -9 of corrald: PDEATHSIG ends the workers but not their
    children, which stay in the worker groups. The next corrald with the same
    cgroup parent kills them before reclaiming the groups, and says so."""
    with h.corral_cgroup("esc-purge") as cg:
        # The same instance (each run here has its own control path, so the
        # default instance names would differ).
        with h.corrald("--instance", "esc-purge", workers=2, cgroups=cg.rel,
                       command=["/bin/sh", "-c", CHILD], name="esc-purge1") as c:
            kids = wait_sleeps(c, 2)
            workers = c.live_pids()
            c.kill(signal.SIGKILL)
            c.proc.wait(5)
        # PDEATHSIG has ended their parents, the workers: what would have
        # taken the children along is over.
        ct.wait_for(lambda: not any(ct.pid_alive(w) for w in workers), 5,
                    what="the workers ended by PDEATHSIG")
        left = [k for k in kids if ct.pid_alive(k)]
        assert left == kids, f"expected the orphans to survive corrald's SIGKILL: {left} {kids}"
        with h.corrald("--instance", "esc-purge", workers=1, cgroups=cg.rel,
                       name="esc-purge2") as c2:
            ct.wait_for(lambda: not any(ct.pid_alive(k) for k in kids), 3,
                        what="the orphans of the last corrald to be killed")
            assert "killed 2 process(es) left in stale worker cgroups" in c2.log(), \
                c2.log()[-2000:]


def test_orphans_reaped():
    """A worker's grandchild whose parent exits is re-parented to corrald
    (a child subreaper), not to init, and reaped when it exits: no zombie."""
    cmd = f"(sleep 0.5 &); exec {ct.WORKER}"
    with h.corrald(workers=1, command=["/bin/sh", "-c", cmd], name="esc-orphan") as c:
        orphan = ct.wait_for(lambda: [p for p in children(c.proc.pid) if comm(p) == "sleep"], 3,
                             what="the orphan under corrald")[0]
        assert ppid(orphan) == c.proc.pid
        ct.wait_for(lambda: not os.path.exists(f"/proc/{orphan}"), 3,
                    what="the orphan to be reaped")
        assert not zombies_of(c.proc.pid), zombies_of(c.proc.pid)
        assert len(c.live_pids()) == 1


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
