"""Another group's OOM kill moves the host-wide /proc/vmstat oom_kill
counter; a worker that dies meanwhile for another reason must not carry it
(issue 14: deaths without an OOM never carry a moved system counter), with
--no-cgroups too (corrald then reads the counters of the group it shares
with its workers).

corrald --no-cgroups runs in a group of its own (unlimited); a process in a
second group limited to 32M is OOM-killed by the kernel; then one worker is
killed with SIGKILL from outside and another exits by SIGTERM from outside.
Both deaths must be recorded with oom_system_kills 0 and neither as an OOM.
Exit 0 = pass, 77 = skip (not root, no v1 memory controller)."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

CORRALD = os.environ["CORRALD"]
WORKER = os.environ["CORRAL_WORKER_BIN"]
MEMCG = "/sys/fs/cgroup/memory"


def vmstat_oom_kill():
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k == "oom_kill":
                return int(v)
    return 0


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


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Group:
    def __init__(self, name, limit=None):
        self.path = f"{MEMCG}/corral-test-{os.getpid()}-{name}"
        os.makedirs(self.path, exist_ok=True)
        if limit:
            with open(self.path + "/memory.limit_in_bytes", "w") as f:
                f.write(str(limit))

    def enter(self):
        with open(self.path + "/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    def remove(self):
        for _ in range(250):
            try:
                with open(self.path + "/cgroup.procs") as f:
                    for pid in f.read().split():
                        os.kill(int(pid), signal.SIGKILL)
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def main():
    if os.geteuid() != 0 or not os.path.exists(MEMCG + "/memory.limit_in_bytes"):
        return 77
    home, small = Group("home"), Group("small", 32 << 20)
    tmp = tempfile.mkdtemp(prefix="corral-foreign-")
    sock = os.path.join(tmp, "control.sock")
    log = open(os.path.join(tmp, "corrald.log"), "wb")
    proc = subprocess.Popen([CORRALD, "--workers", "2", "--listen", "127.0.0.1:0", "--control",
                             sock, "--no-cgroups"], stdout=log, stderr=subprocess.STDOUT,
                            cwd=tmp, preexec_fn=home.enter,
                            env=dict(os.environ, CORRAL_WORKER=WORKER))
    try:
        def ready():
            try:
                ws = ctl(sock, "status")["workers"]
            except OSError:
                return None
            return [w["pid"] for w in ws if w["state"] == "ready"] if len(
                [w for w in ws if w["state"] == "ready"]) == 2 else None
        pids = wait_for(ready, 15, "2 ready workers")
        before = vmstat_oom_kill()
        hog = subprocess.run([sys.executable, "-c", "b = b'x' * (100 << 20)"],
                             preexec_fn=small.enter, capture_output=True)
        assert hog.returncode == -signal.SIGKILL, hog
        assert vmstat_oom_kill() > before, "the foreign OOM kill did not move /proc/vmstat"
        os.kill(pids[0], signal.SIGKILL)
        os.kill(pids[1], signal.SIGTERM)
        hist = wait_for(lambda: (lambda h: h if len(h) >= 2 else None)(
            ctl(sock, "history")["history"]), 15, "two deaths")
        for d in hist:
            print(d["category"], d["shell_status"], d["oom_system_kills"], d["reason"])
            assert d["oom_system_kills"] == 0, d
            assert not d["category"].startswith("oom-"), d
        cats = sorted(d["category"] for d in hist)
        assert cats == ["exit-clean", "signal"] or cats == ["signal", "signal"], cats
        return 0
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        home.remove()
        small.remove()


if __name__ == "__main__":
    sys.exit(main())
