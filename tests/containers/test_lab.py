"""corral-lab's scenarios in their plain-cgroup form on this host: each runs
`corral-lab --json SCENARIO` and requires the expected outcome (category,
exit status as a shell shows it, ordering: the checks live in the
scenario's report, see lab/corral-lab.in), and that --list names them all.

  python3 test_lab.py SCENARIO | list
Exit 0 = pass, 77 = skip (not root or no memory controller), else fail."""
import json
import os
import subprocess
import sys

LAB = os.environ["CORRAL_LAB"]
ALL = ["heap-limit", "worker-oom", "container-oom", "container-oom-contained",
       "offheap-vs-heap", "soft-recycle", "node-heap", "loop-stall", "timers",
       "per-process-state", "stop-drain", "accept-queue"]


def main(name):
    if name == "list":
        # Run as a user runs it from the build tree: the file itself, not
        # through python3 (it must be executable there, not only once installed).
        out = subprocess.run([LAB, "--list"], capture_output=True, text=True,
                             check=True).stdout
        listed = [line.split()[0] for line in out.splitlines() if line.strip()]
        assert listed == ALL, listed
        r = subprocess.run([sys.executable, LAB, "nope"], capture_output=True, text=True)
        assert r.returncode == 2 and "unknown scenario" in r.stderr, r
        return 0
    r = subprocess.run([sys.executable, LAB, "--json", name], capture_output=True, text=True,
                       timeout=240)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    rep = json.loads(r.stdout.splitlines()[-1])
    if rep.get("skipped"):
        return 77
    assert rep["ok"] is True and r.returncode == 0, rep
    assert rep["did"] and rep["next"] and rep["command"], rep
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
