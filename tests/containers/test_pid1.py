"""corrald as PID 1 of a PID namespace (`unshare --pid --fork`), the way a
container engine starts it.

  detect:  corrald says it is PID 1 and takes the container stop timeout
           (8 s, inside the engines' 10 s grace), and drains with it;
           workers start through corral-exec there too.
  stop_timeout_given: an explicit --stop-timeout is kept as given.
  reaping: a worker that forks (`sh -c '(sleep 2 &); exec corral-worker'`)
           leaves an orphan that is re-parented to PID 1; once it exits it
           must be reaped, not left as a zombie, across the worker's deaths
           too.

Exit 0 = pass, 77 = skip, anything else = fail."""
import contextlib
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402

WORKER = ct.WORKER


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


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


class Pid1(ct.Corrald):
    """corrald under `unshare --pid --fork`: PID 1 of its namespace."""

    def __init__(self, command, *args):
        super().__init__(*args, workers=1, command=command, wait_ready=False, name="pid1",
                         prefix=["unshare", "--pid", "--fork", "--kill-child", "--"])
        kids = children(self.proc.pid)
        assert len(kids) == 1, kids
        self.host_pid = kids[0]  # corrald, PID 1 inside

    def ready_pid(self, timeout=10):
        return self.wait_ready(1, timeout)[0]

    def zombies(self):
        return [p for p in children(self.host_pid) if state(p) == "Z"]

    def terminate(self):
        """As an engine stops a container: SIGTERM to its PID 1 (unshare
        does not pass its own on); waits for the end. Returns the log."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.host_pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(15)
        return self.log()

    def close(self):
        self.terminate()  # SIGKILL (in close) only if that fails
        super().close()


def test_detect():
    c = Pid1([WORKER])
    try:
        c.ready_pid()
        log = c.log()
        assert "as PID 1" in log, log
        assert "default stop timeout is 8 s" in log, log
        # A child that shares PID 1's memory starts corral-exec there too.
        assert "workers start through " in log and "start by fork" not in log, log
        # The stop drains with the default it announced.
        log = c.terminate()
        assert "SIGKILL after 8000 ms" in log, log
    finally:
        c.close()


def test_stop_timeout_given():
    """An explicit --stop-timeout stays what was given, PID 1 or not: no
    default is announced and the drain waits the given time."""
    c = Pid1([WORKER], "--stop-timeout", "3")
    try:
        c.ready_pid()
        log = c.log()
        assert "as PID 1" in log, log
        assert "default stop timeout" not in log, log
        log = c.terminate()
        assert "SIGKILL after 3000 ms" in log, log
        assert "SIGKILL after 8000 ms" not in log, log
    finally:
        c.close()


def test_reaping():
    c = Pid1(["sh", "-c", f"(sleep 2 &); exec {WORKER}"])
    try:
        wpid = c.ready_pid()
        orphans = set()

        def orphaned():
            # Each life's `sleep 2` outlives its subshell: PID 1 inherits it.
            orphans.update(p for p in children(c.host_pid) if comm(p) == "sleep")
            return orphans
        ct.wait_for(lambda: len(orphaned()) >= 1, 5, what="the first life's orphan")
        # A second life of the worker forks a second orphan.
        r = c.ctl("kill", worker=1, signal="KILL")
        assert r["ok"], r
        ct.wait_for(lambda: c.live_pids() and c.live_pids() != [wpid], 10,
                    what="the worker's second life")
        ct.wait_for(lambda: len(orphaned()) >= 2, 5, what="the second life's orphan")
        # Each orphan exits after its 2 s; PID 1 must reap it: its /proc
        # entry goes (a zombie keeps one).
        ct.wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in orphaned()), 8,
                    what=f"the orphans {sorted(orphans)} reaped")
        z = c.zombies()
        assert not z, f"zombies under corrald (PID 1): {z}\n" + c.log()[-2000:]
    finally:
        c.close()


if __name__ == "__main__":
    if os.geteuid() != 0 or not shutil.which("unshare"):
        sys.exit(ct.SKIP)
    ct.main(sys.modules[__name__])
