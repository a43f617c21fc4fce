"""corral's Kubernetes manifests (containers/kubernetes/) run by a real
manifest consumer on this host: `podman kube play`, rootful, with the
private storage and the image of tests/containers/engines.py, on the
host's cgroup layout (v1 here; tests/vm/guest/kube.sh does the same on v2
under systemd). One case a variant:

  writable      corral-cgroups.yaml: per-worker cgroups (SYS_ADMIN; the
                image's entrypoint remounts the cgroup mount read-write and
                gives corrald a cgroup namespace of its own on v1); a leak
                ends in oom-own-limit, the kernel's kill at the worker's
                own limit;
  unprivileged  corral.yaml: "no-cgroups", no capability at all; corrald
                enforces memory-max itself: a leak ends in memory-kill.

The manifest is played as a user applies it, with the edits podman needs
and the ones a kubelet makes itself (kube_manifest.py's for_podman: one
replica, a pid-suffixed name, no containerPorts, the termination-message
file). Then:

  - the values the manifest promises hold together (kube_manifest.py's
    values: probes on the metrics port, listening on 0.0.0.0, the grace
    period above stop-delay + stop-timeout, the budget under the limit);
  - the pod serves HTTP (reached inside its network namespace: the pod runs
    with --network none), /livez and /readyz answer 200;
  - the container's cgroup memory limit is the manifest's, and (writable)
    each worker's own group holds memory-max;
  - corrald's start-up log and status: the memory budget fits, no warning;
  - a worker leaking on one keep-alive connection ends in the variant's
    category, the pod and corrald (same pid) still running, the sibling
    worker untouched, the container's group never OOM-killed, and the
    termination message naming the death;
  - a stop with the manifest's grace period (`podman pod stop -t GRACE`,
    what the kubelet does; podman 4.3's kube down stops with a 0 s
    timeout, a SIGKILL):
    /readyz fails at once while the workers still serve (stop-delay), then
    corrald drains and exits 0 within the grace period, and the
    termination message says so.

Probes do not run here: podman runs them from systemd timers, and PID 1 of
this machine is not systemd (the guest checks them).

  python3 test_kube.py writable|unprivileged
Exit 0 = pass, 77 = skip (not root; podman, runc or catatonit missing)."""
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engines  # noqa: E402
import kube_manifest  # noqa: E402

ct = engines.ct
MANIFESTS = os.path.join(engines.SRC, "containers", "kubernetes")
DOC = os.path.join(engines.SRC, "docs", "containers-kubernetes.md")
# podman's pause image is built from catatonit, found here (Debian's
# catatonit package); without it `kube play` fails.
CATATONIT = "/usr/libexec/podman/catatonit"
# podman kube play takes no --ulimit: the limits podman with runc needs on
# this host (engines.Podman passes them to `podman run`), the cgroupfs
# manager and the file event log (no systemd) come from containers.conf.
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
"""
MIB = kube_manifest.MIB


# -- the pod ------------------------------------------------------------------------

class NetnsHTTP(http.client.HTTPConnection):
    """An HTTP connection made inside a process's network namespace."""

    def __init__(self, pid, port, timeout=5):
        super().__init__("127.0.0.1", port, timeout=timeout)
        self.pid = pid

    def connect(self):
        with engines.netns_of(self.pid):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect((self.host, self.port))
        except BaseException:
            s.close()
            raise
        self.sock = s


def get(pid, port, path, timeout=5):
    c = NetnsHTTP(pid, port, timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        c.close()


def cgroup_lines(pid, ns_of=None):
    """pid's /proc/PID/cgroup, read from the host's cgroup namespace (host
    paths), or from ns_of's (paths below that namespace's root)."""
    argv = ["cat", f"/proc/{pid}/cgroup"]
    if ns_of:
        argv = ["nsenter", f"--cgroup=/proc/{ns_of}/ns/cgroup"] + argv
    return engines.run(argv, timeout=30).splitlines()


def cgroup_of(pid):
    """(layout, the host directory of the container's memory cgroup) for the
    container whose PID 1 is pid: pid's group by its host path, less where
    corrald sits below its namespace's root (on v2 it moves itself into a
    supervisor/ leaf of the container's group)."""
    layout = ct.memcg_layout()

    def memory(lines):
        for line in lines:
            _, ctl, path = line.split(":", 2)
            if (layout == "v1" and "memory" in ctl.split(",")) or (layout == "v2" and ctl == ""):
                return path
        raise AssertionError(f"no memory cgroup in {lines}")
    host = memory(cgroup_lines(pid))
    if os.readlink(f"/proc/{pid}/ns/cgroup") != os.readlink("/proc/self/ns/cgroup"):
        inside = memory(cgroup_lines(pid, ns_of=pid))
        if inside != "/":
            assert host.endswith(inside), (host, inside)
            host = host[:-len(inside)]
    return layout, (ct.MEMCG_V1 if layout == "v1" else ct.CGROOT) + host


def read(path):
    with open(path) as f:
        return f.read()


def limit_of(layout, d):
    return int(read(os.path.join(d, "memory.limit_in_bytes" if layout == "v1" else "memory.max")))


def own_oom_kills(layout, d):
    """OOM kills in this group itself, not its children: v1's counter is
    local, v2 has memory.events.local."""
    text = read(os.path.join(d, "memory.oom_control" if layout == "v1" else "memory.events.local"))
    return int(dict(line.split() for line in text.splitlines())["oom_kill"])


class Pod:
    """The played manifest's one pod and its corral container."""

    def __init__(self, eng, manifest_path, container):
        self.eng, self.manifest_path = eng, manifest_path
        t0 = time.monotonic()
        r = subprocess.run(eng.cmd + ["kube", "play", "--network", "none", manifest_path],
                           capture_output=True, text=True, timeout=180)
        self.play_s = time.monotonic() - t0
        self.play_out = r.stdout + r.stderr
        assert r.returncode == 0, f"podman kube play failed ({r.returncode}):\n{self.play_out}"
        ids = r.stdout.split()
        self.pod_id = ids[ids.index("Pod:") + 1]
        self.ctr = ids[ids.index("Container:") + 1]
        assert self.inspect("{{.Name}}").endswith(f"-{container}"), self.inspect("{{.Name}}")

    def inspect(self, fmt):
        return engines.run(self.eng.cmd + ["inspect", "-f", fmt, self.ctr], timeout=60).strip()

    def state(self):
        s = json.loads(self.inspect("{{json .State}}"))
        return {"running": s["Running"], "pid": s["Pid"], "exit_code": s["ExitCode"],
                "oom_killed": s["OOMKilled"],
                "restarts": int(self.inspect("{{.RestartCount}}"))}

    def logs(self):
        r = subprocess.run(self.eng.cmd + ["logs", self.ctr], capture_output=True, text=True,
                           timeout=60)
        return r.stdout + r.stderr

    def down(self):
        return subprocess.run(self.eng.cmd + ["kube", "down", self.manifest_path],
                              capture_output=True, text=True, timeout=120)


class Corral:
    """corrald as the pod's PID 1, from the host: its control socket through
    /proc/PID/root (the emptyDir at /run/corral), HTTP through the pod's
    network namespace."""

    def __init__(self, pid, http_port, metrics_port):
        self.pid, self.http_port, self.metrics_port = pid, http_port, metrics_port
        self.sock = f"/proc/{pid}/root/run/corral/control.sock"

    def ctl(self, cmd):
        r = ct.request(self.sock, {"cmd": cmd})
        assert r["ok"], r
        return r

    def status(self):
        return self.ctl("status")

    def history(self):
        return self.ctl("history")["history"]

    def ready_pids(self):
        return sorted(w["pid"] for w in self.status()["workers"] if w["state"] == "ready")

    def wait_ready(self, n, timeout=30):
        return ct.wait_for(lambda: len(self.ready_pids()) == n and self.ready_pids(), timeout,
                           interval=0.1, what=f"{n} ready workers")

    def alive(self, pid):
        """pid, a pid of the pod's PID namespace (corrald's numbers), is a
        live process: read from the container's own /proc."""
        try:
            with open(f"/proc/{self.pid}/root/proc/{pid}/stat") as f:
                return f.read().rpartition(") ")[2][:1] not in ("Z", "")
        except (FileNotFoundError, ProcessLookupError):
            return False

    def get(self, path, timeout=5):
        return get(self.pid, self.http_port, path, timeout)

    def probe(self, path, timeout=5):
        return get(self.pid, self.metrics_port, path, timeout)

    def leak(self, mb, every=0.05, limit_s=30):
        """Grows one worker by `mb` MiB a request on one keep-alive
        connection (so one worker) until the connection breaks: the worker
        died. Returns the pid that answered."""
        c = NetnsHTTP(self.pid, self.http_port, timeout=10)
        pid = None
        end = time.monotonic() + limit_s
        try:
            while time.monotonic() < end:
                c.request("GET", f"/buffer?mb={mb}&retain=1")
                r = c.getresponse()
                r.read()
                assert r.status == 200, r.status
                pid = int(r.getheader("X-Worker-Pid"))
                time.sleep(every)  # the client's pace, not a wait for an event
        except (OSError, http.client.HTTPException):
            return pid
        finally:
            c.close()
        raise AssertionError(f"worker {pid} still alive after {limit_s} s of growth")


# -- a variant, end to end ------------------------------------------------------------

def variant(manifest_name, category):
    if os.geteuid() != 0:
        ct.skip("needs root (rootful podman)")
    if not os.path.exists(CATATONIT):
        ct.skip(f"{CATATONIT} is missing: podman kube play builds its pause image from "
                "catatonit (scripts/deps --test)")
    try:
        eng = engines.Podman()
    except engines.Unavailable as e:
        ct.skip(str(e))
    tmp = tempfile.mkdtemp(prefix="corral-kube-")
    pod = None
    t_start = time.monotonic()
    try:
        conf = os.path.join(eng.tmp, "containers.conf")
        with open(conf, "w") as f:
            f.write(CONTAINERS_CONF)
        os.environ["CONTAINERS_CONF"] = conf

        m = kube_manifest.Manifest(os.path.join(MANIFESTS, manifest_name))
        v = m.values()
        assert v["category"] == category, v
        # The recipe shows what is tested: the default manifest whole, the
        # per-worker variant's securityContext.
        shown = m.block("securityContext") if v["writable"] else m.text
        assert shown in read(DOC), f"{DOC} does not show {manifest_name} as it is:\n{shown}"
        limit, grace, stop_delay = v["limit"], v["grace"], v["stop_delay"]
        per_worker, workers, writable = v["per_worker"], v["workers"], v["writable"]

        eng.build_image("corral-test")
        engines.run(eng.cmd + ["tag", "corral-test", v["image"]])
        t_image = time.monotonic() - t_start

        # The termination-message file, as the kubelet makes one for each
        # container: empty, writable by the container's user.
        termlog = os.path.join(tmp, "termination-log")
        open(termlog, "w").close()
        os.chmod(termlog, 0o666)
        name = f"corral-kube-{os.getpid()}"
        played = os.path.join(tmp, "played.yaml")
        with open(played, "w") as f:
            f.write(m.for_podman(name, termlog))

        pod = Pod(eng, played, v["container"])
        ct.wait_for(lambda: pod.state()["pid"] > 0, 30, interval=0.1, what="the container's pid")
        st = pod.state()
        assert st["running"], (st, pod.logs()[-3000:])
        c = Corral(st["pid"], v["http_port"], v["metrics_port"])
        ct.wait_for(lambda: os.path.exists(c.sock) or not pod.state()["running"], 30,
                    interval=0.1, what="corrald's control socket")
        assert pod.state()["running"], pod.logs()[-3000:]
        pids = c.wait_ready(workers)
        t_up = time.monotonic() - t_start

        # -- it serves, and the probes' endpoints answer
        code, h, _ = c.get("/light")
        assert code == 200 and int(h["x-worker-pid"]) in pids, (code, h)
        assert c.probe("/livez")[::2] == (200, "alive\n"), c.probe("/livez")
        code, _, body = c.probe("/readyz")
        assert code == 200 and body.startswith(
            f"ready: {workers} of {workers} worker(s) ready and answering"), (code, body)

        # -- the container's limit is the manifest's; the workers' own
        layout, ctr_cg = cgroup_of(c.pid)
        got = limit_of(layout, ctr_cg)
        assert got == limit, f"{ctr_cg}: limit {got}, the manifest says {limit}"
        sup = c.status()["supervisor"]
        b = sup["memory_budget"]
        assert b["fits"] is True and b["limit_bytes"] == limit and b["limit_group"] == "/", b
        log = pod.logs()
        budget = [line for line in log.splitlines() if "memory budget: " in line]
        assert len(budget) == 1 and " info " in budget[0], budget
        assert not [line for line in log.splitlines() if " warning " in line], log[-3000:]
        ns_own = os.readlink(f"/proc/{c.pid}/ns/cgroup") != os.readlink("/proc/self/ns/cgroup")
        workers_now = c.status()["workers"]
        if writable:
            assert sup["cgroup"]["workers"], sup["cgroup"]
            assert b["per_worker_bytes"] == per_worker, b
            assert f"x {per_worker // MIB} MiB + corrald " in budget[0] and \
                f"fits under the {limit // MIB} MiB limit of /" in budget[0], budget[0]
            for w in workers_now:
                wl = limit_of(layout, ctr_cg + w["cgroup"])
                assert wl == per_worker, f"{w['cgroup']}: limit {wl}, memory-max {per_worker}"
            if layout == "v1":
                # The entrypoint's cgroup namespace (podman 4.3 runs every
                # container in the host's on v1): corrald's group is its "/".
                assert ns_own, "corrald shares the host's cgroup namespace"
        else:
            assert sup["cgroup"].get("workers") is None and sup["config"]["no-cgroups"], sup
            assert "x 98 MiB (--memory-max and the 2 MiB a worker may pass it by before " \
                "corrald's kill)" in budget[0] and " fits under " in budget[0], budget[0]
            assert "corrald enforces it from each worker's resident memory" in log, log[-3000:]
        text = read(termlog)
        assert f"{workers} of {workers} worker(s) ready" in text and \
            "it was killed if no exit line replaced this one" in text, text

        # -- a worker leaks: only it dies, in the variant's category
        before = {w["id"]: w["pid"] for w in workers_now}
        t0 = time.monotonic()
        # 16 MiB a request: past the soft limit (80 %) and on to memory-max
        # in one or two requests, before the soft limit's 4 samples (1 s)
        # would recycle it gracefully.
        victim = c.leak(16, every=0.02)
        assert victim in before.values(), (victim, before)
        d = ct.wait_for(lambda: next((x for x in c.history() if x["pid"] == victim), None), 15,
                        interval=0.1, what=f"worker {victim}'s death")
        t_death = time.monotonic() - t0
        assert d["category"] == category and d["shell_status"] == 137, d
        if category == "memory-kill":
            assert f"at --memory-max {per_worker / MIB:.1f} MiB" in d["reason"], d["reason"]
        else:
            assert "memory" in d["reason"], d["reason"]
        sibling_id = next(i for i, p in before.items() if p != victim)
        sibling = before[sibling_id]
        assert [x for x in c.history() if x["pid"] != victim] == [], c.history()
        after = c.wait_ready(workers)
        assert sibling in after and c.alive(sibling), (sibling, after)
        assert next(w for w in c.status()["workers"] if w["id"] == sibling_id)["pid"] == sibling
        st2 = pod.state()
        assert st2["running"] and st2["pid"] == c.pid and st2["restarts"] == 0, st2
        assert not st2["oom_killed"], st2
        assert own_oom_kills(layout, ctr_cg) == 0, read(os.path.join(ctr_cg, "memory.oom_control"
                                                                     if layout == "v1" else
                                                                     "memory.events.local"))
        ct.wait_for(lambda: f"pid {victim} " in read(termlog), 5, interval=0.1,
                    what="the death in the termination message")
        line = next(x for x in read(termlog).splitlines() if f"pid {victim} " in x)
        assert f" {category} (137, signal 9): " in line, line
        print(f"{manifest_name}: worker {victim} died {category} {t_death:.2f} s after the leak "
              f"began: {d['reason']}")
        print(f"termination message line: {line}")

        # -- the stop, with the manifest's grace period
        t0 = time.monotonic()
        stopper = subprocess.Popen(eng.cmd + ["pod", "stop", "-t", str(grace), pod.pod_id],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            ct.wait_for(lambda: c.probe("/readyz")[0] == 503, 5, interval=0.02,
                        what="/readyz 503 after the stop signal")
            flipped = time.monotonic() - t0
            # The lame duck: endpoints are being removed, the workers serve on.
            assert c.get("/light")[0] == 200
            assert c.probe("/livez")[0] == 200
            lame_duck_served = time.monotonic() - t0
            out, _ = stopper.communicate(timeout=grace + 60)
        finally:
            if stopper.poll() is None:
                stopper.kill()
                stopper.wait()
        took = time.monotonic() - t0
        assert stopper.returncode == 0, out
        st3 = pod.state()
        assert not st3["running"] and st3["exit_code"] == 0, (st3, pod.logs()[-3000:])
        assert stop_delay <= took < grace, f"stopped after {took:.2f} s, grace {grace} s"
        log = pod.logs()
        assert f"stopping in {stop_delay:.3f} s (--stop-delay)" in log, log[-3000:]
        assert log.index("the stop delay is over") < log.index("stopping: draining")
        first = read(termlog).splitlines()[0]
        assert " exited 0 at " in first and first.endswith("stopped (SIGTERM), no worker left"), \
            first
        print(f"{manifest_name}: image {t_image:.1f} s, kube play {pod.play_s:.1f} s, "
              f"{workers} workers ready {t_up:.1f} s after the start; container limit {got} "
              f"({layout} {ctr_cg}); own cgroup namespace: {ns_own}")
        print(f"stop: /readyz 503 after {flipped:.3f} s, a request served at "
              f"{lame_duck_served:.3f} s, exit 0 after {took:.2f} s (grace {grace} s, "
              f"stop-delay {stop_delay:g} s)")
        print(f"termination message after the stop: {first}")
        r = pod.down()
        assert r.returncode == 0, r.stdout + r.stderr
        pod = None
        left = engines.run(eng.cmd + ["ps", "-a", "-q"]).split()
        assert left == [], left
        print(f"total {time.monotonic() - t_start:.1f} s")
    finally:
        if pod:
            print(pod.logs()[-4000:])
            pod.down()
        eng.close()
        os.environ.pop("CONTAINERS_CONF", None)
        shutil.rmtree(tmp, ignore_errors=True)


def test_writable():
    """corral-cgroups.yaml: per-worker cgroups, a leak ends oom-own-limit."""
    variant("corral-cgroups.yaml", "oom-own-limit")


def test_unprivileged():
    """corral.yaml: no capability, corrald enforces memory-max: memory-kill."""
    variant("corral.yaml", "memory-kill")


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
