"""corrald the way a Kubernetes pod runs it: the probes (/livez, /readyz),
the lame-duck stop (--stop-delay), the termination message
(--termination-log) with corrald's exit codes, and --workers auto under a
CPU quota. Real corrald, real workers, real signals, real cgroups.
"""
import http.client
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import corraltest as ct  # noqa: E402


def metrics_addr(c):
    addr = c.status()["supervisor"]["metrics_listen"]
    assert addr, c.status()["supervisor"]
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def probe(addr, path):
    """(status, body) of GET path on the metrics listener."""
    st, _, body = ct.http_get(addr[0], addr[1], path, timeout=3)
    return st, body.decode()


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# -- the probes -------------------------------------------------------------------

def test_probes():
    """/livez answers while the loop turns; /readyz needs --ready-min workers
    ready and answering: one blocked worker (flagged by the watchdog) fails
    it with --ready-min 2 and not with --ready-min 1 (set live)."""
    c = ct.Corrald("--metrics-listen", "127.0.0.1:0", "--ready-min", "2", "--watchdog", "1",
                   "--hang-timeout", "0", workers=2, name="probes")
    try:
        m = metrics_addr(c)
        assert probe(m, "/livez") == (200, "alive\n"), probe(m, "/livez")
        st, body = probe(m, "/readyz")
        assert st == 200 and body.startswith("ready: 2 of 2 worker(s) ready and answering"), body
        st, body = probe(m, "/nothing")
        assert st == 404, (st, body)
        assert c.status()["supervisor"]["readiness"] == {
            "ready": True, "answering": 2, "needed": 2,
            "reason": "ready: 2 of 2 worker(s) ready and answering (2 needed)"}

        heavy = c.start_request("/heavy?ms=6000", timeout=15)
        heavy.wait_read()
        ct.wait_for(lambda: probe(m, "/readyz")[0] == 503, 5, what="/readyz 503 (a worker blocked)")
        st, body = probe(m, "/readyz")
        assert body.startswith("not ready: 1 of 2 worker(s) ready and answering (2 needed)"), body
        assert probe(m, "/livez")[0] == 200  # corrald itself is fine
        assert c.ctl("set", key="ready-min", value="1")["ok"]
        st, body = probe(m, "/readyz")
        assert st == 200 and "(1 needed)" in body, (st, body)
        assert c.ctl("set", key="ready-min", value="0")["ok"]  # every worker again
        assert probe(m, "/readyz")[0] == 503
        heavy.result()
        ct.wait_for(lambda: probe(m, "/readyz")[0] == 200, 5, what="/readyz 200 again")
        assert c.stop() == 0
    finally:
        c.close()


# -- the lame-duck stop ------------------------------------------------------------

def test_lame_duck():
    """SIGTERM with --stop-delay 2: /readyz fails at once; a keep-alive
    client that stops at the flip lost nothing; new connections and the
    keep-alive connection are still served until the delay is over; then
    the drain, and exit 0 no sooner than the delay."""
    delay = 2.0
    c = ct.Corrald("--metrics-listen", "127.0.0.1:0", "--stop-delay", "2s", workers=2,
                   name="lameduck")
    try:
        m = metrics_addr(c)
        assert probe(m, "/readyz")[0] == 200
        # The client a load balancer stands for: keep-alive requests, and a
        # readiness check between them; it stops sending at the flip.
        ka = http.client.HTTPConnection(c.host, c.port, timeout=5)
        failed, served = [], 0

        def one(conn):
            conn.request("GET", "/light")
            r = conn.getresponse()
            r.read()
            return r.status

        for _ in range(20):
            st = one(ka)
            served += st == 200
        t_sig = time.monotonic()
        c.kill(signal.SIGTERM)
        flipped = None
        deadline = t_sig + 1.0
        while time.monotonic() < deadline:
            try:
                st = one(ka)
                served += st == 200
                if st != 200:
                    failed.append(st)
            except Exception as e:  # noqa: BLE001 - every failure counts
                failed.append(repr(e))
                break
            if probe(m, "/readyz")[0] == 503:
                flipped = time.monotonic()
                break
        assert flipped, "/readyz never failed after SIGTERM"
        assert failed == [], failed
        assert flipped - t_sig < 0.5, f"/readyz flipped {flipped - t_sig:.3f} s after SIGTERM"
        st, body = probe(m, "/readyz")
        assert st == 503 and "--stop-delay" in body, body
        assert probe(m, "/livez")[0] == 200
        sup = c.status()["supervisor"]
        assert sup["state"] == "lame-duck", sup["state"]
        assert 0 < sup["drain_in_ms"] <= delay * 1000, sup
        assert sup["readiness"]["ready"] is False

        # Late senders: endpoints are still being removed. Until shortly
        # before the delay ends, every request is served, on new
        # connections and on the kept-alive one alike.
        late_new = late_ka = 0
        while time.monotonic() < t_sig + delay - 0.3:
            st, _, _ = c.get("/light", timeout=3)
            assert st == 200, st
            late_new += 1
            assert one(ka) == 200
            late_ka += 1
            time.sleep(0.02)
        assert late_new >= 10 and late_ka >= 10, (late_new, late_ka)
        assert c.proc.poll() is None, "corrald exited before its stop delay was over"

        rc = c.proc.wait(15)
        took = time.monotonic() - t_sig
        assert rc == 0, rc
        assert took >= delay, f"exited {took:.2f} s after SIGTERM, the delay is {delay} s"
        log = c.log()
        assert "stopping in 2.000 s (--stop-delay)" in log, log[-2000:]
        assert log.index("the stop delay is over") < log.index("stopping: draining 2 worker(s)")
        print(f"readyz flipped {1000 * (flipped - t_sig):.0f} ms after SIGTERM; "
              f"{served} keep-alive requests before the flip, 0 failed; "
              f"{late_new} new + {late_ka} keep-alive served after it; exit after {took:.2f} s")
        ka.close()
    finally:
        c.close()


def test_lame_duck_second_signal():
    """A second SIGTERM during the stop delay drains at once; `stop` over the
    control socket takes the stop delay too."""
    c = ct.Corrald("--stop-delay", "30", workers=1, name="lameduck2")
    try:
        c.kill(signal.SIGTERM)
        ct.wait_for(lambda: c.status()["supervisor"]["state"] == "lame-duck", 3,
                    what="lame-duck state")
        t0 = time.monotonic()
        c.kill(signal.SIGTERM)
        assert c.proc.wait(10) == 0
        assert time.monotonic() - t0 < 5
        assert "again: draining now, before the stop delay is over" in c.log()
    finally:
        c.close()
    c = ct.Corrald("--stop-delay", "500ms", workers=1, name="lameduck3")
    try:
        t0 = time.monotonic()
        assert c.ctl("stop")["ok"]
        assert c.proc.wait(10) == 0
        assert time.monotonic() - t0 >= 0.5
        assert "stopping in 0.500 s (--stop-delay)" in c.log()
    finally:
        c.close()


# -- the termination message --------------------------------------------------------

def test_termination_log():
    """The file is rewritten at every death and at exit: a kill -9 shows as
    the worker's signal death with its shell status; the stop's planned
    deaths come after it; the exit line says 0 and why. Never over 4096."""
    tmp = ct.tempfile.mkdtemp(prefix="corral-termlog-")
    path = os.path.join(tmp, "termination-log")
    c = ct.Corrald("--termination-log", path, workers=2, name="termlog")
    try:
        ct.wait_for(lambda: "2 of 2 worker(s) ready" in read(path), 5, what="2 of 2 ready")
        text = read(path)
        assert "worker deaths: none" in text, text
        assert "it was killed if no exit line replaced this one" in text, text
        victim = c.worker(2)["pid"]
        os.kill(victim, signal.SIGKILL)
        c.wait_death()
        ct.wait_for(lambda: f"pid {victim} " in read(path), 5, what="the death in the file")
        text = read(path)
        assert "worker deaths: 1 (signal 1)" in text, text
        line = next(l for l in text.splitlines() if f"pid {victim} " in l)
        assert " worker 2 " in line and " signal (137, signal 9): " in line, line
        c.wait_ready(2)
        assert c.stop() == 0
        text = read(path)
        first, *rest = text.splitlines()
        assert " exited 0 at " in first and first.endswith(": stopped (SIGTERM), no worker left"), first
        assert "worker deaths: 3 (" in text, text
        deaths = [l for l in rest[1:] if " worker " in l and " pid " in l]
        assert f"pid {victim} " in deaths[0], deaths  # the unplanned death first
        assert len(deaths) == 3, deaths
        assert len(text.encode()) < 4096
    finally:
        c.close()
        ct.shutil.rmtree(tmp, ignore_errors=True)


def test_termination_log_oom():
    """A worker killed by the kernel at its own memory limit: the message
    names oom-own-limit, 137 and the evidence, and so does the exit's."""
    ct.need_memcg()
    cg = ct.TestCgroup("termlog-oom")
    tmp = ct.tempfile.mkdtemp(prefix="corral-termlog-")
    path = os.path.join(tmp, "termination-log")
    c = None
    try:
        c = ct.Corrald("--termination-log", path, "--memory-max", "64M", workers=2,
                       cgroups=cg.rel, name="termlog-oom")
        with ct.contextlib.suppress(Exception):
            c.get("/buffer?mb=200&retain=1", timeout=10)
        victim = c.wait_death("oom-own-limit")[0]["pid"]
        ct.wait_for(lambda: "oom-own-limit" in read(path), 5, what="the OOM kill in the file")
        line = next(l for l in read(path).splitlines() if f"pid {victim} " in l)
        assert " oom-own-limit (137, signal 9): " in line and "memory" in line, line
        assert c.stop() == 0
        text = read(path)
        assert text.splitlines()[0].endswith("stopped (SIGTERM), no worker left"), text
        assert f"pid {victim} " in text.splitlines()[2], text
    finally:
        if c:
            c.close()
        cg.remove()
        ct.shutil.rmtree(tmp, ignore_errors=True)


def test_exit_codes():
    """2: the command line is refused (and the file says so); 1: start-up
    failed (the port is taken) and the file says why; none is written with
    --termination-log none."""
    tmp = ct.tempfile.mkdtemp(prefix="corral-exit-")
    try:
        path = os.path.join(tmp, "termination-log")
        r = subprocess.run([ct.CORRALD, "--termination-log", path, "--workers", "many"],
                           capture_output=True, timeout=10)
        assert r.returncode == 2, r
        text = read(path)
        assert " exited 2: the configuration was refused: " in text and "--workers" in text, text

        taken = ct.socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        os.unlink(path)
        r = subprocess.run([ct.CORRALD, "--termination-log", path, "--no-cgroups", "--workers", "1",
                            "--listen", f"127.0.0.1:{port}", "--control",
                            os.path.join(tmp, "c.sock"), "--", "/bin/true"],
                           capture_output=True, timeout=20, cwd=tmp)
        taken.close()
        assert r.returncode == 1, r
        first = read(path).splitlines()[0]
        assert " exited 1 at " in first and ": start-up failed" in first, first

        os.unlink(path)
        r = subprocess.run([ct.CORRALD, "--termination-log", "none", "--workers", "many"],
                           capture_output=True, timeout=10, cwd=tmp)
        assert r.returncode == 2 and not os.path.exists(path), r
    finally:
        ct.shutil.rmtree(tmp, ignore_errors=True)


# -- --memory-max without per-worker cgroups -----------------------------------------

def leak(c, mb, every, limit_s=15):
    """Grows one worker by `mb` MiB every `every` seconds on one keep-alive
    connection (so one worker) until the connection breaks: the worker
    died. Returns the pid that answered."""
    conn = http.client.HTTPConnection(c.host, c.port, timeout=5)
    pid = None
    end = time.monotonic() + limit_s
    try:
        while time.monotonic() < end:
            conn.request("GET", f"/buffer?mb={mb}&retain=1")
            r = conn.getresponse()
            r.read()
            assert r.status == 200, r.status
            pid = int(r.getheader("X-Worker-Pid"))
            time.sleep(every)
    except (OSError, http.client.HTTPException):
        return pid
    finally:
        conn.close()
    raise AssertionError(f"worker {pid} still alive after {limit_s} s of growth")


def test_memory_kill():
    """--no-cgroups inside a group that stands for the pod (its limit 512M,
    the container's): a worker growing 4 MiB every 50 ms is killed by
    corrald at --memory-max 64M with its own category and the reading;
    its sibling keeps its pid, the container's group never OOM-kills, and
    the termination message names the death."""
    ct.need_memcg()
    pod = ct.TestCgroup("memkill")
    pod.limit(512 << 20)
    tmp = ct.tempfile.mkdtemp(prefix="corral-memkill-")
    path = os.path.join(tmp, "termination-log")
    c = None
    try:
        c = ct.Corrald("--memory-max", "64M", "--termination-log", path, workers=2,
                       preexec=pod.enter, name="memkill")
        assert "corrald enforces it from each worker's resident memory" in c.log(), c.log()
        victim = leak(c, 4, 0.05)
        sibling = next(p for p in c.live_pids() if p != victim)
        d = c.wait_death("memory-kill")[0]
        assert d["pid"] == victim, d
        assert d["exit_code"] is None or d["shell_status"] == 137, d
        assert "at --memory-max 64.0 MiB" in d["reason"], d["reason"]
        pm = d.get("postmortem", d)
        rss = pm["rss_bytes"]
        assert rss >= 64 << 20, pm
        over = rss - (64 << 20)
        # One request's 4 MiB, plus what a 5 ms read interval lets through.
        assert over <= 16 << 20, f"{over / 2**20:.1f} MiB past the limit"
        assert ct.pid_alive(sibling) and sibling in c.live_pids(), c.workers()
        assert pod.oom_kills() == 0
        c.wait_ready(2)
        ct.wait_for(lambda: "memory-kill" in read(path), 5, what="the death in the file")
        line = next(l for l in read(path).splitlines() if f"pid {victim} " in l)
        assert " memory-kill (137, signal 9): " in line, line
        print(f"killed at RSS {rss / 2**20:.1f} MiB, {over / 2**20:.1f} MiB past the limit")
        assert c.stop() == 0
    finally:
        if c:
            c.close()
        pod.remove()
        ct.shutil.rmtree(tmp, ignore_errors=True)


# -- the memory budget ----------------------------------------------------------------

def test_memory_budget():
    """Per-worker limits that add up to more than the enclosing group's:
    one warning line with the numbers and what would fit, at start-up and on
    `set` and `scale`; status shows the budget."""
    ct.need_memcg()
    cg = ct.TestCgroup("budget")
    cg.limit(300 << 20)
    c = None
    try:
        # 2 workers + a reload's replacement at 128M = 384M > 300M.
        c = ct.Corrald("--memory-max", "128M", workers=2, cgroups=cg.rel, name="budget")
        b = c.status()["supervisor"]["memory_budget"]
        assert b and b["fits"] is False, b
        assert b["limit_bytes"] == 300 << 20 and b["limit_group"] == cg.rel, b
        assert b["per_worker_bytes"] == 128 << 20 and b["workers"] == 2, b
        assert b["reload_replacements"] == 1 and b["margin_bytes"] == 16 << 20, b
        assert 0 < b["corrald_bytes"] < 64 << 20, b
        assert b["need_bytes"] == 3 * (128 << 20) + b["corrald_bytes"] + (16 << 20), b
        assert b["fit_workers"] == 1, b
        log = c.log()
        warn = [l for l in log.splitlines() if "warning" in l and "memory budget: " in l]
        assert len(warn) == 1, log[-3000:]
        assert (f"x 128 MiB + corrald " in warn[0] and "is over the 300 MiB limit of "
                f"{cg.rel}; it fits with --workers 1, or --memory-max " in warn[0]), warn[0]

        assert c.ctl("set", key="memory-max", value="64M")["ok"]
        ct.wait_for(lambda: "fits under the 300 MiB limit" in c.log(), 3, what="fits again")
        assert c.status()["supervisor"]["memory_budget"]["fits"] is True
        assert c.ctl("scale", workers=4)["ok"]  # 5 x 64M + 20M > 300M
        ct.wait_for(lambda: len([l for l in c.log().splitlines()
                                 if "warning" in l and "memory budget: " in l]) == 2, 3,
                    what="a second warning")
        assert c.status()["supervisor"]["memory_budget"]["fit_workers"] == 3
        out = subprocess.run([os.environ["CORRALCTL"], "--socket", c.sock, "status"],
                             capture_output=True, text=True, timeout=10)
        assert "memory budget: (4 worker(s) + 0 spare(s) + 1 reload replacement) x 64 MiB" \
            in out.stdout, out.stdout
        assert c.stop() == 0
    finally:
        if c:
            c.close()
        cg.remove()


# -- --workers auto under a CPU quota ---------------------------------------------------

class CpuCgroup:
    """A cpu cgroup at the root of the hierarchy with the cpu controller
    (v1 /sys/fs/cgroup/cpu, or v2 with cpu enabled at the root), holding a
    CFS quota of `cpus` CPUs (a float; None = no quota), removed on close."""

    def __init__(self, name, cpus):
        v1 = next((p for p in (ct.CGROOT + "/cpu", ct.CGROOT + "/cpu,cpuacct")
                   if os.path.exists(p + "/cpu.cfs_quota_us")), None)
        if v1:
            self.v2 = False
            root = v1
        else:
            try:
                ctl = read(ct.CGROOT + "/cgroup.subtree_control").split()
            except OSError:
                ctl = []
            if "cpu" not in ctl:
                ct.skip("needs the cpu controller (cgroup v1, or v2 enabled at the root)")
            self.v2 = True
            root = ct.CGROOT
        self.path = f"{root}/corral-test-{os.getpid()}-{name}"
        os.makedirs(self.path, exist_ok=True)
        period = 100000
        quota = -1 if cpus is None else int(cpus * period)
        if self.v2:
            with open(self.path + "/cpu.max", "w") as f:
                f.write(f"{'max' if quota < 0 else quota} {period}")
        else:
            with open(self.path + "/cpu.cfs_period_us", "w") as f:
                f.write(str(period))
            with open(self.path + "/cpu.cfs_quota_us", "w") as f:
                f.write(str(quota))

    def enter(self):
        with open(self.path + "/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))

    def remove(self):
        def gone():
            try:
                for pid in read(self.path + "/cgroup.procs").split():
                    with ct.contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                os.rmdir(self.path)
            except FileNotFoundError:
                return True
            except OSError:
                return False
            return True
        ct.wait_for(gone, 4, what=f"{self.path} removed")


def auto_workers(name, cpus):
    """corrald --workers auto started inside a group with that quota: the
    number of workers it starts, and its start-up line."""
    if os.geteuid() != 0:
        ct.skip("needs root")
    cg = CpuCgroup(name, cpus)
    c = None
    try:
        c = ct.Corrald(workers="auto", preexec=cg.enter, wait_ready=False, name=name)
        ct.wait_for(lambda: "workers auto: " in c.log(), 5, what="the workers auto line")
        line = next(l for l in c.log().splitlines() if "workers auto: " in l)
        n = int(line.split("workers auto: ")[1].split(",")[0])
        c.wait_ready(n)
        assert len(c.workers()) == n, c.workers()
        assert c.stop() == 0
        return n, line
    finally:
        if c:
            c.close()
        cg.remove()


def test_auto_cpu_quota():
    """A 1-CPU quota starts 1 worker and the start-up line names the quota
    and its group; 0.5 CPU still starts 1; 1.5 CPUs rounds up to 2 (or the
    affinity mask where that is smaller); no quota: the affinity mask."""
    cores = len(os.sched_getaffinity(0))
    n, line = auto_workers("auto1", 1.0)
    assert n == 1, line
    assert f"workers auto: 1, the CPU quota of cgroup /corral-test-{os.getpid()}-auto1" in line, line
    n, line = auto_workers("auto-half", 0.5)
    assert n == 1, line
    n, line = auto_workers("auto15", 1.5)
    assert n == min(2, cores), line
    n, line = auto_workers("auto-none", None)
    assert n == cores and "the CPUs of the affinity mask" in line, line


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
