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
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402


def vmstat_oom_kill():
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k == "oom_kill":
                return int(v)
    return 0


def main():
    if os.geteuid() != 0 or ct.memcg_layout() != "v1":
        return ct.SKIP
    home, small = ct.TestCgroup("home"), ct.TestCgroup("small")
    c = None
    try:
        small.limit(32 << 20)
        c = ct.Corrald(workers=2, preexec=home.enter, name="foreign", ready_timeout=15)
        pids = c.live_pids()
        before = vmstat_oom_kill()
        hog = subprocess.run([sys.executable, "-c", "b = b'x' * (100 << 20)"],
                             preexec_fn=small.enter, capture_output=True)
        assert hog.returncode == -signal.SIGKILL, hog
        assert vmstat_oom_kill() > before, "the foreign OOM kill did not move /proc/vmstat"
        os.kill(pids[0], signal.SIGKILL)
        os.kill(pids[1], signal.SIGTERM)
        hist = c.wait_death(timeout=15, count=2)
        for d in hist:
            print(d["category"], d["shell_status"], d["oom_system_kills"], d["reason"])
            assert d["oom_system_kills"] == 0, d
            assert not d["category"].startswith("oom-"), d
        cats = sorted(d["category"] for d in hist)
        assert cats == ["exit-clean", "signal"] or cats == ["signal", "signal"], cats
        return 0
    finally:
        if c:
            try:
                c.stop(timeout=20)
            finally:
                c.close()
        home.remove()
        small.remove()


if __name__ == "__main__":
    sys.exit(main())
