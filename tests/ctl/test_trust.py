"""Regression tests for issue #13's control-socket findings, each against
real corralds (suite 'ctl'):

- gone_subscribers (finding 1): `events` clients that go away are freed, so
  130 of them do not lock the socket into answering `busy`;
- double_start, foreign_socket, stale_socket (finding 3): the control path
  is owned; a live socket is never replaced, a stale one is;
- bytes, eof_first (finding 8): every response is valid UTF-8 JSON, the id
  comes back as the exact text sent, and an EOF before any byte is handled
  (the UBSan report at control.c memchr/memmove; a sanitized build's log is
  checked by Corrald.stop()).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from charness import Control, Corrald, check, exe, fail, wait_for  # noqa: E402
import corraltest as ct  # noqa: E402  (on the path through charness)


def nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def test_gone_subscribers():
    """130 subscribers that leave (> --control-max-clients 128): status answers."""
    with Corrald(workers=1, name="gonesub") as d:
        base = nfds(d.proc.pid)
        for i in range(130):
            with Control(d.sock, 10) as s:
                s.send({"cmd": "events"})
                if i % 2:
                    # Like `printf … | socat -t0 -`: half-close, then gone.
                    s.half_close()
                # Read the answer, so corrald has taken this client in.
                r = s.recv_json()
                check(r.get("subscribed") is True, "subscriber %d answered %r" % (i, r))
        r = d.request({"cmd": "status"})
        check(r.get("ok") is True, "status after 130 gone subscribers: %r" % r)
        # Every one of them is freed: the fd count returns to where it was.
        wait_for(lambda: nfds(d.proc.pid) <= base, timeout=10,
                   what="fds back to %d (now %d)" % (base, nfds(d.proc.pid)))
        # A live subscriber still gets events.
        c = Control(d.sock)
        check(c.call({"cmd": "events"}) == {"ok": True, "subscribed": True}, "subscribe")
        check(d.request({"cmd": "restart", "worker": 1})["ok"], "restart")
        ev = c.recv_json(timeout=15)
        check("event" in ev, "event expected, got %r" % ev)
        c.close()


def start_second(sock, tmp, timeout=20, listen="127.0.0.1:0"):
    """A second corrald on the same control path: (exit code or None, output)."""
    out = open(os.path.join(tmp, "second.log"), "w+")
    p = subprocess.Popen([exe("CORRALD"), "--workers", "1", "--listen", listen,
                          "--no-cgroups", "--control", sock],
                         stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
    try:
        code = p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        p.wait(15)
        code = None
    out.seek(0)
    text = out.read()
    check("Sanitizer" not in text and "runtime error:" not in text,
          "sanitizer report from the second corrald:\n%s" % text[-4000:])
    return code, text


def test_double_start():
    """A second corrald with the same --control path exits non-zero with one
    clear error; the first keeps its socket and answers."""
    with Corrald(workers=1, name="dbl") as d:
        ino = os.stat(d.sock).st_ino
        code, text = start_second(d.sock, d.tmp)
        check(code not in (0, None), "second corrald exit %r:\n%s" % (code, text))
        errs = [l for l in text.splitlines() if "is in use by" in l]
        check(len(errs) == 1 and d.sock in errs[0] and str(d.proc.pid) in errs[0],
              "one error naming the path and the owner expected:\n%s" % text)
        check(os.stat(d.sock).st_ino == ino, "the live socket was replaced")
        check(d.request({"cmd": "ping"})["ok"], "first corrald unreachable")
        check(os.path.exists(d.sock + ".lock"), "lock file missing")
        # Even on the first one's port, the path is what refuses it: the
        # control socket is claimed before anything else is opened.
        code, text = start_second(d.sock, d.tmp, listen=d.addr)
        check(code not in (0, None) and "is in use by" in text and "listening on" not in text,
              "second corrald on the same port and path, exit %r:\n%s" % (code, text))
        check(d.request({"cmd": "ping"})["ok"], "first corrald unreachable")
    check(not os.path.exists(d.sock + ".lock"), "lock file left after a clean stop")


def test_stale_socket():
    """After kill -9 the socket file stays behind: the next corrald replaces it."""
    d = Corrald(workers=1, name="stale")
    d.start()
    p = None
    try:
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(10)
        check(os.path.exists(d.sock), "the killed corrald's socket should be left behind")
        log = open(os.path.join(d.tmp, "second.log"), "w+")
        p = subprocess.Popen([exe("CORRALD"), "--workers", "1", "--listen", "127.0.0.1:0",
                              "--no-cgroups", "--control", d.sock],
                             stdout=log, stderr=subprocess.STDOUT, cwd=d.tmp)
        def answer():
            check(p.poll() is None, "corrald refused a stale socket:\n%s" % open(log.name).read())
            try:
                return d.request({"cmd": "status"}, timeout=2)
            except (OSError, ValueError):
                return None
        st = wait_for(answer, 15, what="the new corrald to answer on the stale path")
        check(st["supervisor"]["pid"] == p.pid, "the answer is not from the new corrald")
        p.send_signal(signal.SIGTERM)
        check(p.wait(15) == 0, "new corrald exit %r" % p.returncode)
        check(not os.path.exists(d.sock), "socket left after a clean stop")
    finally:
        if p and p.poll() is None:
            p.kill()
            p.wait()
        d.proc = None
        d.stop()


def test_foreign_socket():
    """A live socket that some other process (no lock) listens on is never
    replaced; a socket nobody listens on is."""
    tmp = tempfile.mkdtemp(prefix="crctl-foreign-")
    path = os.path.join(tmp, "control.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    code, text = start_second(path, tmp)
    check(code not in (0, None), "corrald replaced a live foreign socket (exit %r):\n%s"
          % (code, text))
    check(any("live" in l and path in l for l in text.splitlines()), "no clear error:\n%s" % text)
    # Still the foreign listener's socket.
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    a, _ = srv.accept()
    a.close()
    c.close()
    # A regular file is never removed either.
    srv.close()
    os.unlink(path)
    with open(path, "w") as f:
        f.write("not a socket")
    code, text = start_second(path, tmp)
    check(code not in (0, None) and open(path).read() == "not a socket",
          "a regular file at the path: exit %r:\n%s" % (code, text))
    os.unlink(path)
    # A socket file nobody listens on (closed without unlink) is stale.
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()
    check(os.path.exists(path), "stale socket file not created")
    p = subprocess.Popen([exe("CORRALD"), "--workers", "1", "--listen", "127.0.0.1:0",
                          "--no-cgroups", "--control", path],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
    try:
        def pong():
            if p.poll() is not None:
                return "exited"
            try:
                with Control(path, 2) as c:
                    return c.call({"cmd": "ping"})["ok"]
            except (OSError, ValueError):
                return False
        ok = wait_for(pong, 15, what="corrald to replace a stale socket")
        check(ok is True, "corrald did not replace a stale socket (exit %r)" % p.poll())
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        p.wait(15)
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


def test_failed_start():
    """A corrald whose start fails after it claimed the path (the port is
    taken) exits 1 and leaves neither the socket nor the lock file."""
    tmp = tempfile.mkdtemp(prefix="crctl-fstart-")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    path = os.path.join(tmp, "control.sock")
    try:
        code, text = start_second(path, tmp, listen="127.0.0.1:%d" % taken.getsockname()[1])
        check(code == 1 and "cannot listen" in text, "exit %r:\n%s" % (code, text))
        left = sorted(f for f in os.listdir(tmp) if f != "second.log")
        check(not left, "left behind: %s" % left)
    finally:
        taken.close()
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


def raw_call(path, data):
    """Sends bytes, returns the raw response line (bytes, without '\\n')."""
    c = Control(path)
    c.s.sendall(data + b"\n")
    line = c.line()
    c.close()
    check(line is not None, "no answer to %r" % data[:80])
    return line


def strict(line):
    """The line is UTF-8 and strict JSON (no raw control characters)."""
    try:
        return json.loads(line.decode("utf-8", errors="strict"), strict=True)
    except (UnicodeDecodeError, ValueError) as e:
        fail("response is not valid UTF-8 JSON (%s): %r" % (e, line[:200]))


def test_bytes():
    """Invalid UTF-8 is refused, never echoed; the id's text comes back as sent."""
    with Corrald(workers=1, name="bytes") as d:
        for bad in (b'{"cmd":"\xff\xfe","id":1}', b'{"cmd":"ping","id":"\xc3("}',
                    b'{"cmd":"\xed\xa0\x80"}', b'{"cmd":"ping","id":"a\x01b"}',
                    ):
            r = strict(raw_call(d.sock, bad))
            check(r["ok"] is False and r["error"]["code"] == "bad-json", "%r: %r" % (bad, r))
        r = strict(raw_call(d.sock, b'{"cmd":"' + b"e" * 63 + b'\xc3\xa9\xc3\xa9"}'))
        check(r["error"]["code"] == "unknown-command", "long unknown command: %r" % r)
        ids = [b'123456789012345678901234567890', b'-1.50000000000000000001e-400',
               b'"a\\u0000b"', b'"\\ud83d\\udc0e \xc3\xa9"', b'{"k": [1, "]"]}', b'1E+2']
        for ident in ids:
            line = raw_call(d.sock, b'{"cmd":"ping","id":' + ident + b'}')
            strict(line)
            check(line.endswith(b',"id":' + ident + b'}'), "id altered: sent %r, got %r"
                  % (ident, line))
        line = raw_call(d.sock, b'{"cmd":"nope","id":123456789012345678901234567890}')
        check(line.endswith(b',"id":123456789012345678901234567890}'), "error id: %r" % line)
        r = strict(raw_call(d.sock, b'{"cmd":"ping\\u0000x"}'))
        check(r["error"]["code"] == "bad-request", "NUL in cmd: %r" % r)


def test_eof_first():
    """Connections that end before sending a byte, or after blanks only."""
    with Corrald(workers=1, name="eof") as d:
        for data in (b"", b"\n", b"\r\n\n"):
            for _ in range(5):
                with Control(d.sock, 5) as c:
                    if data:
                        c.s.sendall(data)
                    c.half_close()
                    check(c.s.recv(4096) == b"", "an answer to %r" % data)
        check(d.request({"cmd": "ping"})["ok"], "ping after EOF-first clients")


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
