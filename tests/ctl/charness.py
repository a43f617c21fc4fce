"""The control-protocol tests' flavour of the shared harness
(tests/lib/corraltest.py), stdlib only.

Corrald(args).start(), or `with Corrald(args) as d`, starts corrald with
--listen 127.0.0.1:0 and --control <tmp>/control.sock (--no-cgroups unless
the args name a --cgroup-parent) and waits until every worker is ready;
request() opens a fresh connection per request. Leaving the `with` stops it
and fails on a sanitizer report or an unclean exit.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402
from corraltest import SKIP, Control, wait_for  # noqa: E402,F401  (the suite's imports)


def exe(var):
    p = os.environ.get(var)
    if not p or not os.access(p, os.X_OK):
        raise ct.Skip("%s not set or not executable" % var)
    return p


def fail(msg):
    print("FAIL: " + (msg if isinstance(msg, str) else repr(msg)), file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Corrald(ct.Corrald):
    """A corrald started by start() (or `with`), not by the constructor."""

    def __init__(self, args=(), env=None, workers=2, name="ctl", command=None, wait_ready=True,
                 nice=0):
        self.spec = dict(args=list(args), env=env, workers=workers, name=name, command=command,
                         wait_ready=wait_ready, nice=nice)
        self.proc = None

    def start(self, timeout=15.0):
        s = self.spec
        exe("CORRALD")
        super().__init__(*s["args"], workers=s["workers"], name="ctl-" + s["name"],
                         cgroups=False if "--cgroup-parent" in s["args"] else None,
                         command=s["command"], env=s["env"], wait_ready=s["wait_ready"],
                         preexec=(lambda: os.nice(s["nice"])) if s["nice"] else None,
                         ready_timeout=timeout)
        return self

    def pids(self):
        """pids of live (non-draining) worker processes."""
        ws = self.request({"cmd": "workers"})["workers"]
        return sorted(w["pid"] for w in ws if w["pid"] and w["state"] in ("starting", "ready"))

    def stop(self):
        rc = None
        if self.proc:
            try:
                rc = super().stop()
            except AssertionError as e:  # did not exit in time, killed
                print(e, file=sys.stderr)
                rc = self.proc.returncode
        log = self.log() if self.proc else ""
        self.close()
        # A sanitizer report or a failed exit after a requested stop is a bug.
        bad = [l for l in log.splitlines()
               if "Sanitizer" in l or "runtime error:" in l]
        if bad or rc not in (0, None):
            print(log[-6000:], file=sys.stderr)
            fail("corrald exited %s after stop; sanitizer lines: %d" % (rc, len(bad)))

    def close(self):
        if hasattr(self, "tmp"):  # started
            super().close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if exc[0] is not None and self.proc is not None:
            print(self.log()[-4000:], file=sys.stderr)
        self.stop()
