#!/usr/bin/env python3
"""Privilege separation and what a worker is handed (issue: trust).

- --user/--group: workers drop to that uid/gid, with no supplementary
  groups, after their cgroup and sockets are set up, and cannot get root
  back; they still report READY through the notify channel.
- The notify socket is a path in a private 0700 directory, not an abstract
  socket any local user can find and flood; it is gone after a stop.
- The environment: corrald's minus a deny-list plus --env, or only
  --pass-env's names; corral's own variables always.
"""
import contextlib
import errno
import os
import re
import shutil
import socket
import stat
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "classify"))
import clhelp as h  # noqa: E402
import corraltest as ct  # noqa: E402

NOBODY = 65534


def need_root():
    if os.geteuid() != 0:
        ct.skip("needs root to switch users")


def proc_ids(pid):
    ids = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Uid", "Gid", "Groups"):
                ids[k] = v.split()
    return ids


def test_user_drop():
    """--user nobody: real, effective, saved and filesystem ids are nobody's,
    no supplementary group, and the worker serves (it reported READY)."""
    need_root()
    with h.optional_cgroup("usr") as cg, \
            h.corrald("--user", "nobody", workers=2, cgroups=h.rel(cg), name="usr") as c:
        for pid in c.live_pids():
            ids = proc_ids(pid)
            assert ids["Uid"] == [str(NOBODY)] * 4, ids
            assert ids["Gid"] == [str(NOBODY)] * 4, ids
            assert ids["Groups"] == [], ids
        st, hd, _ = c.get("/light")
        assert st == 200 and int(hd["x-worker-pid"]) in c.live_pids()
        assert "workers run as uid 65534 gid 65534" in c.log()


def test_group_drop():
    """--group alone keeps the user and changes the group."""
    need_root()
    with h.corrald("--user", "0", "--group", "nogroup", workers=1, name="grp") as c:
        ids = proc_ids(c.live_pids()[0])
        assert ids["Uid"] == ["0"] * 4 and ids["Gid"] == [str(NOBODY)] * 4, ids
        assert ids["Groups"] == [], ids


def as_nobody():
    """A preexec: corrald itself as nobody, owning its test directory (the
    cwd by then), as under a unit with User= and no capability."""
    os.chown(".", NOBODY, NOBODY)
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


def test_user_is_corralds_own():
    """A corrald that is not root, told to run workers as its own user (the
    unprivileged unit on cgroup v2: User=_corral, the shipped config's
    "user": "_corral"), runs them as itself: nothing to switch."""
    need_root()
    with h.corrald("--user", "nobody", "--group", "nogroup", workers=2, preexec=as_nobody,
                   name="own") as c:
        assert proc_ids(c.proc.pid)["Uid"] == [str(NOBODY)] * 4
        for pid in c.live_pids():
            ids = proc_ids(pid)
            assert ids["Uid"] == [str(NOBODY)] * 4, ids
            assert ids["Gid"] == [str(NOBODY)] * 4, ids
        st, hd, _ = c.get("/light")
        assert st == 200 and int(hd["x-worker-pid"]) in c.live_pids()
        assert "workers run as corrald's own uid 65534 gid 65534" in c.log()


def test_user_other_refused_without_root():
    """Without root, any other user is refused at start-up, by name."""
    need_root()
    try:
        c = ct.Corrald("--user", "0", workers=1, preexec=as_nobody, name="oth")
    except AssertionError as e:
        assert "cannot switch workers to uid 0" in str(e), e
    else:
        c.close()
        raise AssertionError("a corrald running as nobody accepted --user 0")


# The hardened unit's CapabilityBoundingSet= (systemd/hardening.inc).
UNIT_CAPS = "-all,+setuid,+setgid,+kill,+chown,+net_admin"


def test_unit_capabilities():
    """Root with only the hardened unit's capabilities (no
    CAP_DAC_OVERRIDE, no CAP_SYS_NICE) runs workers as another user, reaps
    and replaces them, and on stop removes its notify socket and directory:
    the directory stays corrald's (0710, the workers' group), the socket is
    the workers' user's."""
    need_root()
    if shutil.which("setpriv") is None:
        ct.skip("no setpriv")
    out = tempfile.mktemp(prefix="corral-env-")
    cmd = ["/bin/sh", "-c", f'echo "$NOTIFY_SOCKET" > {out}; exec {ct.WORKER}']
    # The unit's runtime directory: root's, RuntimeDirectoryMode=0711.
    rt = tempfile.mkdtemp(prefix="corral-rt-")
    os.chmod(rt, 0o711)
    with h.optional_cgroup("caps") as cg, \
            h.corrald("--user", "nobody", "--ready", "notify", workers=2, cgroups=h.rel(cg),
                      command=cmd, env={"RUNTIME_DIRECTORY": rt},
                      prefix=["setpriv", "--bounding-set", UNIT_CAPS, "--"], name="caps") as c:
        with open(f"/proc/{c.proc.pid}/status") as f:
            eff = int(re.search(r"^CapEff:\s+(\w+)", f.read(), re.M).group(1), 16)
        assert eff == (1 << 0) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 12), hex(eff)
        path = open(out).read().strip()
        d = os.path.dirname(path)
        st = os.stat(d)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, NOBODY, 0o710), st
        st = os.stat(path)
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (NOBODY, 0o600), st
        assert path.startswith(rt + "/"), path
        for pid in c.live_pids():
            assert proc_ids(pid)["Uid"] == [str(NOBODY)] * 4
        # They were heard: READY=1 (--ready notify), nothing assumed.
        assert not any(w.get("unannounced") for w in c.status()["workers"]), c.status()
        assert "cannot reach the notify socket" not in c.log(), c.log()
        victim = c.live_pids()[0]
        os.kill(victim, 9)
        ct.wait_for(lambda: len(c.live_pids()) == 2 and victim not in c.live_pids(), 15,
                    what="the killed worker replaced")
        assert c.stop() == 0
        assert not os.path.exists(d), f"{d} left after the stop: {os.listdir(d)}"
    os.unlink(out)
    os.rmdir(rt)


def test_notify_parent_unreachable():
    """A runtime directory the workers cannot search (root's 0750, what a
    unit's RuntimeDirectoryMode=0750 makes) would silence them: corrald
    says so at start, naming the directory."""
    need_root()
    rt = tempfile.mkdtemp(prefix="corral-rt-")
    os.chmod(rt, 0o750)
    with contextlib.ExitStack() as done:
        done.callback(shutil.rmtree, rt, True)
        unreachable(rt)


def unreachable(rt):
    with h.corrald("--user", "nobody", workers=1, env={"RUNTIME_DIRECTORY": rt},
                   name="unreach") as c:
        log = c.log()
        assert f"cannot reach the notify socket {rt}/corral-notify." in log, log
        assert f"{rt} is mode 0750, owner 0:0" in log, log
        # Silent, the worker is assumed ready after the quiet period.
        assert all(w.get("unannounced") for w in c.status()["workers"]), c.status()
        assert c.stop() == 0
    os.rmdir(rt)  # nothing left behind


def test_unknown_user():
    """An unknown user is a start-up error naming the option."""
    tmp = tempfile.mkdtemp(prefix="corral-nouser-")
    import subprocess
    p = subprocess.run([ct.CORRALD, "--no-cgroups", "--listen", "127.0.0.1:0", "--control",
                        os.path.join(tmp, "c.sock"), "--user", "no-such-user-xyz"],
                       capture_output=True, text=True, timeout=10,
                       env=dict(os.environ, CORRAL_WORKER=ct.WORKER))
    assert p.returncode != 0, p
    assert "--user: no such user 'no-such-user-xyz'" in p.stdout + p.stderr, p


def test_notify_socket_private():
    """NOTIFY_SOCKET is a path in a 0700 directory: another local user cannot
    send to it; the directory is removed at exit."""
    need_root()
    out = tempfile.mktemp(prefix="corral-env-")
    cmd = ["/bin/sh", "-c", f'echo "$NOTIFY_SOCKET" > {out}; exec {ct.WORKER}']
    with h.corrald(workers=1, command=cmd, name="nsock") as c:
        path = open(out).read().strip()
        assert path.startswith("/") and not path.startswith("@"), path
        d = os.path.dirname(path)
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, oct(os.stat(d).st_mode)
        assert stat.S_ISSOCK(os.stat(path).st_mode)
        pid = os.fork()
        if pid == 0:  # a stranger: uid nobody
            code = 1
            try:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                try:
                    s.sendto(b"READY=1", path)
                except PermissionError:
                    code = 0
                except OSError as e:
                    code = 0 if e.errno == errno.EACCES else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, "a stranger could reach the notify socket"
        assert len(c.live_pids()) == 1
        assert c.stop() == 0
        assert not os.path.exists(d), d
    os.unlink(out)


def env_of(*args, command_env=None):
    out = tempfile.mktemp(prefix="corral-env-")
    cmd = ["/bin/sh", "-c", f"/usr/bin/env > {out}; exec {ct.WORKER}"]
    with h.corrald(*args, workers=1, command=cmd, env=command_env, name="env") as c:
        assert len(c.live_pids()) == 1
    with open(out) as f:
        env = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    os.unlink(out)
    return env


def test_env_deny_list():
    """The invoking session's agent and corrald's own systemd variables never
    reach a worker; everything else does; --env adds and overrides."""
    # systemd (254 and later) gives corrald's unit MEMORY_PRESSURE_WATCH
    # for corrald's own group: a worker must not watch that one.
    env = env_of("--env", "BAR=two", "--env", "FOO=over",
                 command_env={"FOO": "1", "KEEP": "yes", "SSH_AUTH_SOCK": "/tmp/agent",
                              "INVOCATION_ID": "abc", "CORRAL_WORKER_ID": "99",
                              "MEMORY_PRESSURE_WATCH": "/sys/fs/cgroup/corral.service/"
                                                       "memory.pressure",
                              "MEMORY_PRESSURE_WRITE": "c29tZSAxMDAwIDEwMDAwAA=="})
    assert env.get("KEEP") == "yes", env
    assert env.get("FOO") == "over" and env.get("BAR") == "two", env
    assert "SSH_AUTH_SOCK" not in env and "INVOCATION_ID" not in env, env
    assert "corral.service" not in env.get("MEMORY_PRESSURE_WATCH", ""), env
    assert env.get("MEMORY_PRESSURE_WRITE") != "c29tZSAxMDAwIDEwMDAwAA==", env
    assert env.get("CORRAL_WORKER_ID") == "1", env
    assert env.get("LISTEN_FDS") == "1" and "NOTIFY_SOCKET" in env, env


def test_env_allow_list():
    """--pass-env: only the named variables pass (plus corral's own)."""
    env = env_of("--pass-env", "KEEP", "--env", "BAR=two",
                 command_env={"KEEP": "yes", "OTHER": "no"})
    assert env.get("KEEP") == "yes" and env.get("BAR") == "two", env
    assert "OTHER" not in env and "HOME" not in env, env
    assert env.get("CORRAL_WORKER_ID") == "1" and env.get("LISTEN_FDS") == "1", env


def test_env_bad_value():
    """--env without '=' is refused with the option's name."""
    import subprocess
    p = subprocess.run([ct.CORRALD, "--env", "NOEQUALS"], capture_output=True, text=True,
                       timeout=10)
    assert p.returncode == 2 and "--env: 'NOEQUALS' is not KEY=VALUE" in p.stderr, p


def test_nofile_raised_for_corrald_only():
    """Started with systemd's default of a low soft open-files limit (here
    64, hard 4096), corrald raises its own soft limit to the hard one, so
    that 24 workers (five or six descriptors each) fit; every worker gets 64
    back before exec, as a program using select() needs."""
    import resource
    out = tempfile.mkdtemp(prefix="corral-nofile-")

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 4096))

    script = f'ulimit -Sn > {out}/w$CORRAL_WORKER_ID; exec {ct.WORKER}'
    with h.corrald(workers=24, command=["/bin/sh", "-c", script], preexec=low_limit,
                   name="nofile") as c:
        with open(f"/proc/{c.proc.pid}/limits") as f:
            line = next(l for l in f if l.startswith("Max open files"))
        assert line.split()[3:5] == ["4096", "4096"], line
        assert len(c.live_pids()) == 24, c.status()["supervisor"]
        seen = {}
        for n in os.listdir(out):
            with open(os.path.join(out, n)) as f:
                seen[n] = f.read().strip()
        assert len(seen) == 24 and set(seen.values()) == {"64"}, seen
        st, _, _ = c.get("/light")
        assert st == 200


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
