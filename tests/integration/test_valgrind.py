#!/usr/bin/env python3
"""corrald under valgrind (memcheck) through start, scale, a worker's
kill -9, a rolling reload and a stop: 0 errors, 0 leaks.

valgrind does not implement pidfd_open, so this is also the test of the
fallback for kernels without pidfds: workers are watched through SIGCHLD
and signalled by pid. Run only in the plain build (valgrind and ASan
exclude each other); skipped (77) where valgrind is missing.
"""
import os
import re
import shutil
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "classify"))
import clhelp as h  # noqa: E402
import corraltest as ct  # noqa: E402


def test_lifecycle():
    vg = shutil.which("valgrind")
    if not vg:
        ct.skip("valgrind is not installed")
    real = ct.CORRALD
    # The harness runs CORRALD; put valgrind in front of it for this case.
    wrapper = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"corrald-vg-{os.getpid()}")
    vglog = wrapper + ".log"
    with open(wrapper, "w") as f:
        f.write("#!/bin/sh\nexec %s --log-file=%s --error-exitcode=99 --leak-check=full "
                "--show-leak-kinds=definite,indirect,possible "
                "--errors-for-leak-kinds=definite,indirect,possible --trace-children=no "
                "%s \"$@\"\n" % (vg, vglog, real))
    os.chmod(wrapper, 0o755)
    ct.CORRALD = wrapper
    try:
        with h.optional_cgroup("vg") as cg, \
                h.corrald(workers=2, cgroups=h.rel(cg), name="vg") as c:
            r = c.ctl("scale", workers=3)
            assert r["ok"], r
            c.wait_ready(3, timeout=30)
            victim = c.live_pids()[0]
            os.kill(victim, signal.SIGKILL)
            c.wait_death("signal", timeout=30)
            ct.wait_for(lambda: len(c.live_pids()) == 3 and victim not in c.live_pids(), 30,
                        what="the replacement")
            before = set(c.live_pids())
            c.ctl("reload")
            ct.wait_for(lambda: not (set(c.live_pids()) & before) and len(c.live_pids()) == 3,
                        60, what="the reload to replace every worker")
            st, _, _ = c.get("/light", timeout=10)
            assert st == 200
            code = c.stop(timeout=60)
            with open(vglog) as f:
                text = f.read()
            summary = re.search(r"ERROR SUMMARY: (\d+) errors", text)
            assert code == 0 and summary and summary.group(1) == "0", \
                f"exit {code}\n{text[-6000:]}"
            for kind in ("definitely", "indirectly", "possibly"):
                m = re.search(kind + r" lost: ([\d,]+) bytes", text)
                assert m is None or m.group(1) == "0", text[-6000:]
            # The fallback really ran: valgrind refused pidfd_open.
            assert "unhandled amd64-linux syscall: 434" in text or "pidfd" not in text
            print(text[text.find("HEAP SUMMARY"):][:800])
    finally:
        ct.CORRALD = real
        for p in (wrapper, vglog):
            if os.path.exists(p):
                os.unlink(p)


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
