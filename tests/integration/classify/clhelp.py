"""Shared steps of the classification and memory-watch tests: a test cgroup
that is removed whatever happens, and bounded growth loops."""
import contextlib
import http.client
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import corraltest as ct  # noqa: E402


def _terminated(signum, frame):
    # meson's timeout sends SIGTERM: unwind through the finally blocks so
    # corrald, its workers and the test cgroup are still cleaned up.
    raise SystemExit(f"terminated by signal {signum}")


signal.signal(signal.SIGTERM, _terminated)


@contextlib.contextmanager
def corral_cgroup(name):
    """A fresh /corral-test-<pid>-<name> memory cgroup (v1 or v2) for one
    test, removed (with anything still in it) also when the test fails."""
    ct.need_memcg()
    cg = ct.TestCgroup(name)
    try:
        yield cg
    finally:
        cg.remove()


@contextlib.contextmanager
def optional_cgroup(name):
    """For a test that needs no memory limit, so that it runs wherever
    users run corrald: a test cgroup where one can be made (root and a
    memory controller), else None, and corrald runs with --no-cgroups.
    CORRAL_TEST_CGROUPS=0 forces None, so that the unprivileged path is
    run on this machine too (the *-nocg meson cases)."""
    if os.environ.get("CORRAL_TEST_CGROUPS") == "0" or not ct.have_memcg():
        yield None
        return
    with corral_cgroup(name) as cg:
        yield cg


def rel(cg):
    """corrald's cgroups= argument for optional_cgroup()'s result."""
    return cg.rel if cg else None


@contextlib.contextmanager
def corrald(*args, **kw):
    c = ct.Corrald(*args, **kw)
    try:
        yield c
    finally:
        c.close()


def grow(c, path, max_steps, interval=0.0, until=None, timeout=10):
    """GET path up to max_steps times, interval apart, until a request fails
    (the worker died under it) or until() says so. Returns the number of
    successful requests. Bounded in count and, through the timeouts, in
    time."""
    ok = 0
    for _ in range(max_steps):
        try:
            st, _, body = c.get(path, timeout=timeout)
        except Exception:  # noqa: BLE001 - the worker died mid-request
            return ok
        if st != 200:
            return ok
        ok += 1
        if until and until():
            return ok
        if interval:
            time.sleep(interval)  # the growth's pace
    return ok


def connection_per_worker(c, pids, tries=200):
    """One keep-alive connection to each of the reference workers `pids`
    (the X-Worker-Pid of its first answer says whose it is): fresh
    connections are opened until every pid has one, at most `tries`."""
    conns = {}
    for _ in range(tries):
        conn = http.client.HTTPConnection(c.host, c.port, timeout=10)
        conn.request("GET", "/light")
        r = conn.getresponse()
        r.read()
        pid = int(r.getheader("X-Worker-Pid", "0"))
        if pid in pids and pid not in conns and r.status == 200:
            conns[pid] = conn
        else:
            conn.close()
        if len(conns) == len(pids):
            return [conns[p] for p in pids]
    for conn in conns.values():
        conn.close()
    raise AssertionError(f"no connection to each of {pids} in {tries} tries: {sorted(conns)}")


def get_on(conn, path):
    """GET path on a connection of connection_per_worker: True if answered
    200 (False: the worker died under it, or refused)."""
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        return r.status == 200
    except (OSError, http.client.HTTPException):
        return False


def one_death(c, category, timeout=15):
    """The single death of `category`, asserting no other category showed
    up before it."""
    d = c.wait_death(category, timeout=timeout)
    hist = c.history()
    others = [x["category"] for x in hist if x["category"] != category]
    assert not others, f"unexpected deaths {others}: {hist}"
    return d[0]


def replaced(c, victim, n=1, timeout=10, served=None):
    """A new pid is ready in place of victim, and it serves. served: the pid
    that answered requests before, when it is not corrald's child (a worker
    under a shell that does not exec)."""
    ct.wait_for(lambda: len(c.live_pids()) == n and victim not in c.live_pids(), timeout,
                what="a replacement")
    new = c.live_pids()
    now = c.pid_of()
    if served is None:
        assert now in new, (now, new)
    else:
        assert now != served and ct.pid_alive(now), (now, served)
    return new


def pid_gone(pid):
    return not ct.pid_alive(pid)
