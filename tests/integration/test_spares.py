"""Warm spares (--spares N): started, ready, frozen; promoted on a death.

Behaviour only, no timing: which process serves a slot after a kill -9,
that a frozen spare is handed no connection, that reload and a memory-limit
change do the right thing to spares, that reuseport is refused. Cases with
cgroups run on the machine's layout (v1 memory + v1 freezer here, v2
cgroup.freeze in the VM guest); the nocg case covers the SIGSTOP fallback.
"""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402

FREEZER_V1 = "/sys/fs/cgroup/freezer"


def spares(c):
    return [w for w in c.workers() if w["state"] in ("spare-starting", "freezing", "spare")]


def frozen_spare(c, exclude=(), timeout=15):
    """The pid of a frozen spare not in exclude, once there is one."""
    def one():
        for w in spares(c):
            if w["state"] == "spare" and w["pid"] not in exclude:
                return w["pid"]
        return None
    return ct.wait_for(one, timeout, what="a frozen spare")


def proc_state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(") ", 1)[1][0]


def frozen_in_kernel(c, pid):
    """What the kernel says about the spare's process, by the method in use."""
    method = c.status()["supervisor"]["spares"]["freezer"]
    if method == "SIGSTOP":
        return proc_state(pid) == "T"
    with open(f"/proc/{pid}/cgroup") as f:
        lines = f.read().splitlines()
    if method == "v1-freezer":
        rel = next(l.split(":", 2)[2] for l in lines if ":freezer:" in l)
        with open(FREEZER_V1 + rel + "/freezer.state") as f:
            return f.read().strip() == "FROZEN"
    rel = next(l.split(":", 2)[2] for l in lines if l.startswith("0::"))
    with open("/sys/fs/cgroup" + rel + "/cgroup.events") as f:
        return "frozen 1" in f.read().split("\n")


def corrald(name, *args, cgroups=True, workers=2):
    cg = None
    if cgroups:
        ct.need_memcg()
        cg = ct.TestCgroup(name)
    c = ct.Corrald("--spares", "1", *args, workers=workers, cgroups=cg.rel if cg else None,
                   name=name)
    return c, cg


def thaw_leftovers(pid):
    """v1: a frozen task keeps a SIGKILL pending until thawed, so the frozen
    spare of a corrald that was SIGKILLed lives on (the next corrald start
    reclaims it; see docs/architecture.md). A failed test thaws it here."""
    g = os.path.join(FREEZER_V1, f"corral-{pid}")
    if not os.path.isdir(g):
        return
    for root, dirs, _ in os.walk(g, topdown=False):
        with open(os.path.join(root, "freezer.state"), "w") as f:
            f.write("THAWED")
        with open(os.path.join(root, "cgroup.procs")) as f:
            for p in f.read().split():
                try:
                    os.kill(int(p), signal.SIGKILL)
                except ProcessLookupError:
                    pass
    ct.wait_for(lambda: not any(open(os.path.join(r, "cgroup.procs")).read().strip()
                                for r, _, _ in os.walk(g)), 5, what="thawed spares gone")
    for root, dirs, _ in os.walk(g, topdown=False):
        os.rmdir(root)


def close(c, cg):
    if c.proc.poll() is None:
        try:
            c.stop()
        except AssertionError:
            pass
    c.close()
    thaw_leftovers(c.proc.pid)
    if cg:
        cg.remove()


def kill9_promotes(c):
    spare = frozen_spare(c)
    assert frozen_in_kernel(c, spare), spare
    before = set(c.live_pids()) | {spare}
    victim = c.worker(1)["pid"]
    os.kill(victim, signal.SIGKILL)
    # Slot 1 is now served by the process that was the frozen spare.
    ct.wait_for(lambda: (c.worker(1) or {}).get("pid") == spare and
                c.worker(1)["state"] == "ready", 10, what="the spare in slot 1")
    ct.wait_for(lambda: spare in {c.pid_of() for _ in range(20)}, 10,
                what="the promoted spare serving")
    assert not frozen_in_kernel(c, spare)
    # A new spare appears: a process that did not exist before the kill.
    new = frozen_spare(c, exclude=before)
    assert new not in before and ct.pid_alive(new), (new, before)
    assert c.status()["supervisor"]["spares"]["promotions"] == 1, c.status()["supervisor"]
    d = c.wait_death("signal")[0]
    assert d["pid"] == victim, d
    return spare


def test_kill9_promotes_spare():
    """kill -9 of a ready worker: a process that existed before the kill (the
    thawed spare) serves the slot, and a new spare is started and frozen."""
    c, cg = corrald("spare-kill")
    try:
        kill9_promotes(c)
        assert "corral_spare_promotions_total 1" in c.ctl("metrics")["metrics"]
    finally:
        close(c, cg)


def test_kill9_promotes_spare_nocg():
    """The same without cgroups: the spare is stopped with SIGSTOP."""
    c, cg = corrald("spare-nocg", cgroups=False)
    try:
        assert c.status()["supervisor"]["spares"]["freezer"] == "SIGSTOP"
        kill9_promotes(c)
    finally:
        close(c, cg)


def heir_answers_before_reap(name, *args):
    """kill -9 of a worker holding 1 GiB, which the kernel takes ~100 ms to
    free: whether the slot's heir (the thawed spare) answered while the dead
    process still had its /proc entry, i.e. before corrald reaped it."""
    c, cg = corrald(name, *args, workers=1)
    try:
        spare = frozen_spare(c)
        victim = c.worker(1)["pid"]
        st, _, body = c.get("/buffer?mb=1024&retain=1", timeout=30)
        assert st == 200, (st, body)
        os.kill(victim, signal.SIGKILL)
        ct.wait_for(lambda: c.pid_of() == spare, 10, interval=0, what="the heir answering")
        before_reap = os.path.exists(f"/proc/{victim}")
        d = c.wait_death("signal")[0]
        assert d["pid"] == victim and d["signal"] == 9, d
        sp = c.status()["supervisor"]["spares"]
        assert sp["promotions"] == 1, sp
        return before_reap, sp
    finally:
        close(c, cg)


def test_exit_notice_hands_over_before_reap():
    """With the kernel's exit notice (taskstats, root) the spare takes the slot
    before the reap; with --no-exit-notice only after it."""
    if os.geteuid() != 0:
        ct.skip("taskstats listeners need CAP_NET_ADMIN")
    early, sp = heir_answers_before_reap("spare-notice")
    assert sp["exit_notice"] == "taskstats" and sp["early_promotions"] == 1, sp
    assert early, "the heir answered only after the 1 GiB worker was reaped"
    early, sp = heir_answers_before_reap("spare-nonotice", "--no-exit-notice")
    assert sp["exit_notice"] == "off" and sp["early_promotions"] == 0, sp
    assert not early, "without exit notices the heir answered before the reap"


def test_frozen_spare_accepts_nothing():
    """2,000 requests on fresh connections: none reaches the frozen spare;
    every one is answered by a worker."""
    c, cg = corrald("spare-accept")
    try:
        spare = frozen_spare(c)
        counts = {}
        for _ in range(2000):
            pid = c.pid_of()
            counts[pid] = counts.get(pid, 0) + 1
        assert spare not in counts, counts
        assert set(counts) == set(c.live_pids()), (counts, c.live_pids())
        assert sum(counts.values()) == 2000
        assert frozen_in_kernel(c, spare) and c.status()["supervisor"]["spares"]["frozen"] == 1
        st = c.status()["supervisor"]
        assert st["workers_ready"] == 2, st  # a spare is not capacity
    finally:
        close(c, cg)


def test_reload_replaces_spares():
    """reload: the spare is replaced by a new one too, and the old one is gone."""
    c, cg = corrald("spare-reload")
    try:
        old = frozen_spare(c)
        workers = set(c.live_pids())
        r = c.ctl("reload")
        assert r["ok"], r
        ct.wait_for(lambda: not (set(c.live_pids()) & workers) and len(c.live_pids()) == 2, 20,
                    what="every worker replaced")
        new = frozen_spare(c, exclude={old})
        ct.wait_for(lambda: not ct.pid_alive(old), 10, what="the old spare gone")
        assert new != old
        assert len(spares(c)) == 1, spares(c)
    finally:
        close(c, cg)


def test_reuseport_refused():
    """--spares with --balance reuseport is refused at start and by `set`."""
    argv = [ct.CORRALD, "--no-cgroups", "--listen", "127.0.0.1:0", "--control",
            "/nonexistent/x.sock", "--spares", "1", "--balance", "reuseport"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, CORRAL_WORKER=ct.WORKER))
    assert p.returncode != 0, p
    assert "--spares needs --balance shared" in p.stderr + p.stdout, p.stderr
    c = ct.Corrald("--balance", "reuseport", workers=1)
    try:
        r = c.ctl("set", key="spares", value="1")
        assert not r["ok"] and "reuseport" in r["error"]["message"], r
        assert not spares(c)
    finally:
        c.close()


def test_spares_survive_memory_limit_change():
    """`set memory-max` applies to the spare's own group and leaves it frozen."""
    c, cg = corrald("spare-mem", "--memory-max", "256M")
    try:
        spare = frozen_spare(c)
        r = c.ctl("set", key="memory-max", value="200M")
        assert r["ok"], r
        s = [w for w in spares(c) if w["pid"] == spare]
        assert s and s[0]["state"] == "spare", spares(c)
        assert ct.pid_alive(spare) and frozen_in_kernel(c, spare)
        rel = s[0]["cgroup"]
        leaf = cg.path + rel[len(cg.rel):] if rel.startswith(cg.rel) else None
        assert leaf and os.path.basename(leaf).startswith("s"), rel
        f = "memory.limit_in_bytes" if cg.layout == "v1" else "memory.max"
        with open(os.path.join(leaf, f)) as fh:
            assert int(fh.read()) == 200 << 20
        kill9_promotes(c)  # and it still takes a slot afterwards
    finally:
        close(c, cg)


def test_stop_leaves_nothing():
    """A stop kills the frozen spare and removes every group made for it."""
    c, cg = corrald("spare-stop")
    try:
        spare = frozen_spare(c)
        mine = f"corral-{c.proc.pid}"
        v1 = c.status()["supervisor"]["spares"]["freezer"] == "v1-freezer"
        if v1:
            assert os.path.isdir(os.path.join(FREEZER_V1, mine)), os.listdir(FREEZER_V1)
        assert c.stop() == 0, c.log()[-2000:]
        ct.wait_for(lambda: not ct.pid_alive(spare), 5, what="the spare gone")
        if v1:
            assert not os.path.exists(os.path.join(FREEZER_V1, mine))
        assert not [g for g in cg.groups() if g.startswith("s")], cg.groups()
    finally:
        close(c, cg)


def test_sigkill_then_next_start_reclaims():
    """A SIGKILLed corrald leaves its v1-frozen spare alive (the kill stays
    pending while frozen); the next corrald start thaws it, so it dies, and
    removes the group."""
    c, cg = corrald("spare-sigkill")
    c2 = None
    try:
        if c.status()["supervisor"]["spares"]["freezer"] != "v1-freezer":
            ct.skip("only the v1 freezer keeps a SIGKILL pending")
        spare = frozen_spare(c)
        old = c.proc.pid
        c.kill(signal.SIGKILL)
        c.proc.wait()
        assert os.path.isdir(os.path.join(FREEZER_V1, f"corral-{old}"))
        c2 = ct.Corrald("--spares", "1", workers=1, cgroups=cg.rel, name="spare-sigkill2")
        assert not os.path.exists(os.path.join(FREEZER_V1, f"corral-{old}"))
        ct.wait_for(lambda: not ct.pid_alive(spare), 5, what="the old spare gone")
    finally:
        if c2:
            close(c2, None)
        close(c, cg)


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
