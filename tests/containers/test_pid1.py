"""corrald as PID 1 of a PID namespace (`unshare --pid --fork`), the way a
container engine starts it.

  detect:  corrald says it is PID 1 and takes the container stop timeout
           (8 s, inside the engines' 10 s grace); workers start through
           corral-exec there too.
  reaping: a worker that forks (`sh -c '(sleep 2 &); exec corral-worker'`)
           leaves an orphan that is re-parented to PID 1; once it exits it
           must be reaped, not left as a zombie, across the worker's deaths
           too. DISABLED UNTIL PID-1 REAPING LANDS (issue 14 item 2: the
           child-subreaper work in the core): registered in meson.build with
           should_fail: true; flip that to false when the reaping is merged.

Exit 0 = pass, 77 = skip, anything else = fail."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

CORRALD = os.environ["CORRALD"]
WORKER = os.environ["CORRAL_WORKER_BIN"]


def ctl(sock, cmd, **kw):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(sock)
        s.sendall((json.dumps(dict(kw, cmd=cmd)) + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(p) for p in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):  # gone meanwhile
        pass
    return out


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0]
    except (FileNotFoundError, ProcessLookupError, IndexError):  # gone between open and read
        return "?"


class Pid1:
    def __init__(self, command):
        self.tmp = tempfile.mkdtemp(prefix="corral-pid1-")
        self.sock = os.path.join(self.tmp, "control.sock")
        self.logpath = os.path.join(self.tmp, "corrald.log")
        self.log_file = open(self.logpath, "wb")
        argv = ["unshare", "--pid", "--fork", "--kill-child", "--", CORRALD, "--workers", "1",
                "--listen", "127.0.0.1:0", "--control", self.sock, "--no-cgroups",
                "--"] + command
        self.proc = subprocess.Popen(argv, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     cwd=self.tmp)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("corrald did not start:\n" + self.log())
            time.sleep(0.05)
        kids = children(self.proc.pid)
        assert len(kids) == 1, kids
        self.host_pid = kids[0]  # corrald, PID 1 inside

    def log(self):
        self.log_file.flush()
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def ready_pid(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ws = [w for w in ctl(self.sock, "status")["workers"] if w["state"] == "ready"]
            if ws:
                return ws[0]["pid"]
            time.sleep(0.05)
        raise AssertionError("no ready worker:\n" + self.log())

    def zombies(self):
        return [p for p in children(self.host_pid) if state(p) == "Z"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log_file.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def test_detect():
    c = Pid1([WORKER])
    try:
        c.ready_pid()
        log = c.log()
        assert "as PID 1" in log, log
        assert "default stop timeout is 8 s" in log, log
        # A child that shares PID 1's memory starts corral-exec there too.
        assert "workers start through " in log and "start by fork" not in log, log
        st = ctl(c.sock, "status")
        cfg = st.get("config") or st["supervisor"].get("config", {})
        if "stop-timeout" in cfg:
            assert cfg["stop-timeout"] == 8000, cfg
    finally:
        c.close()


def test_reaping():
    c = Pid1(["sh", "-c", f"(sleep 2 &); exec {WORKER}"])
    try:
        wpid = c.ready_pid()
        # A second life of the worker forks a second orphan.
        r = ctl(c.sock, "kill", worker=1, signal="KILL")
        assert r["ok"], r
        deadline = time.monotonic() + 10
        while c.ready_pid() == wpid and time.monotonic() < deadline:
            time.sleep(0.05)
        # Both sleeps have exited after ~2 s; give PID 1 a moment to reap.
        time.sleep(3.0)
        z = c.zombies()
        assert not z, f"zombies under corrald (PID 1): {z}\n" + c.log()[-2000:]
    finally:
        c.close()


if __name__ == "__main__":
    if os.geteuid() != 0 or not shutil.which("unshare"):
        sys.exit(77)
    globals()["test_" + sys.argv[1]]()
