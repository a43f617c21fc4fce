"""Authorization of control-socket peers (needs root: runs clients as
uid 65534 with setpriv)."""
import json
import os
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from charness import Corrald, SKIP, check  # noqa: E402
import corraltest as ct  # noqa: E402  (on the path through charness)

NOBODY = 65534

# The client, run as another user: the shared control client, from the
# harness directory (argv[2]).
CLIENT = r"""
import json, socket, sys
sys.path.insert(0, sys.argv[2])
from corraltest import Control
try:
    c = Control(sys.argv[1], 5)
except OSError as e:
    print(json.dumps({"connect_errno": e.errno}))
    sys.exit(0)
c.send({"cmd": "ping"})
lines, closed, wait = [], False, 5
while True:  # every line, until the end of the stream or 1.5 s of silence
    try:
        line = c.line(wait)
    except socket.timeout:
        break
    if line is None:
        closed = True
        break
    lines.append(json.loads(line))
    wait = 1.5
print(json.dumps({"lines": lines, "closed": closed}))
"""


def need_root():
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("needs root and setpriv", file=sys.stderr)
        sys.exit(SKIP)


_LIB = None


def client_lib():
    """A world-readable copy of the shared harness for the client: the
    checkout itself may be unreadable to uid 65534 (a clone under /root)."""
    global _LIB
    if _LIB is None:
        import atexit
        import tempfile
        _LIB = tempfile.mkdtemp(prefix="corral-authlib-")
        os.chmod(_LIB, 0o755)
        shutil.copy(os.path.join(ct.LIB, "corraltest.py"), _LIB)
        os.chmod(os.path.join(_LIB, "corraltest.py"), 0o644)
        atexit.register(shutil.rmtree, _LIB, True)
    return _LIB


def as_nobody(sock, gid=NOBODY, groups=None):
    grouping = ["--groups=" + ",".join(map(str, groups))] if groups else ["--clear-groups"]
    out = subprocess.run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % gid] + grouping +
                         [sys.executable, "-c", CLIENT, sock, client_lib()],
                         capture_output=True, text=True, timeout=20)
    check(out.returncode == 0, "client failed: %s" % out.stderr)
    return json.loads(out.stdout)


def open_dir(d):
    # mkdtemp makes 0700: let others reach the socket, so that only the
    # socket's own mode (or corrald's check) can refuse them.
    os.chmod(d.tmp, 0o755)


def test_mode():
    """The socket is 0660: an outsider cannot even connect (EACCES)."""
    need_root()
    with Corrald(workers=1, name="mode") as d:
        m = os.stat(d.sock).st_mode
        check(stat.S_ISSOCK(m) and stat.S_IMODE(m) == 0o660, "socket mode %o" % stat.S_IMODE(m))
        open_dir(d)
        r = as_nobody(d.sock)
        check(r.get("connect_errno") == 13, "uid 65534 on a 0660 root socket: %r" % r)
        check(d.request({"cmd": "ping"})["ok"], "root refused")


def test_peercred():
    """With the mode opened up, SO_PEERCRED is what refuses: one error line,
    then the connection is closed."""
    need_root()
    with Corrald(workers=1, name="cred") as d:
        open_dir(d)
        os.chmod(d.sock, 0o666)
        r = as_nobody(d.sock)
        lines = r.get("lines")
        check(lines is not None and len(lines) == 1, "expected exactly one line: %r" % r)
        check(lines[0]["ok"] is False and lines[0]["error"]["code"] == "forbidden",
              "expected forbidden: %r" % lines)
        check(r["closed"], "refused peer left connected")
        check("refused peer" in d.log(), "refusal not logged")
        check(d.request({"cmd": "ping"})["ok"], "root refused after an outsider")


def test_allow_uid():
    """--control-allow-uid admits that uid (socket opened by mode)."""
    need_root()
    with Corrald(workers=1, name="uid", args=["--control-allow-uid", "1234,%d" % NOBODY]) as d:
        open_dir(d)
        os.chmod(d.sock, 0o666)
        r = as_nobody(d.sock)
        check(r.get("lines") == [{"ok": True, "pong": "corral"}], "allowed uid: %r" % r)


def test_group():
    """--control-group: the socket is group-owned 0660 and members get in,
    both by the mode and by corrald's check; non-members do not."""
    need_root()
    import grp
    g = grp.getgrgid(NOBODY).gr_name
    with Corrald(workers=1, name="grp", args=["--control-group", g]) as d:
        open_dir(d)
        st = os.stat(d.sock)
        check(st.st_gid == NOBODY and stat.S_IMODE(st.st_mode) == 0o660,
              "group/mode %d %o" % (st.st_gid, stat.S_IMODE(st.st_mode)))
        r = as_nobody(d.sock, gid=NOBODY)
        check(r.get("lines") == [{"ok": True, "pong": "corral"}], "group member: %r" % r)
        r = as_nobody(d.sock, gid=4242)
        check(r.get("connect_errno") == 13, "non-member: %r" % r)
        # With the mode opened up, corrald's own check decides: a member
        # through a supplementary group listed after 300 others (past the
        # first SO_PEERGROUPS buffer) gets in; a non-member with as many
        # groups does not.
        os.chmod(d.sock, 0o666)
        many = list(range(5000, 5300))
        r = as_nobody(d.sock, gid=4242, groups=many + [NOBODY])
        check(r.get("lines") == [{"ok": True, "pong": "corral"}], "member of 301 groups: %r" % r)
        r = as_nobody(d.sock, gid=4242, groups=many)
        check(r.get("lines") and r["lines"][0].get("error", {}).get("code") == "forbidden",
              "non-member of 300 groups: %r" % r)


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
