#!/usr/bin/env python3
"""Chaos (issue 13, item 9): corrald with N workers and --memory-max 96M
under keep-alive load, and every 500 ms one random fault, for a set time.

Faults: kill -9 and SIGSEGV of a worker, a heap-limit abort (/alloc past the
heap limit), a cgroup OOM kill (/buffer past memory.max), a hang past the
hang timeout (/heavy, with --watchdog), reload, scale up and back down.
Every fault is written in the test's own ledger: what was done to which pid
and which death category that must give. A worker is hit over HTTP by
first asking on a keep-alive connection which pid serves it: the connection
stays with that worker.

Afterwards the test asserts:
  - corrald alive and answering (control ping, GET /light);
  - every death corrald recorded (the `events` stream, cross-checked with
    `history`) matches a ledger entry for that pid with the right category,
    and every worker the test hit died with the category the fault must give;
  - never fewer than N-1 workers serving (ready, not blocked or draining)
    for more than a second, from the events;
  - the worker count back to N, all ready;
  - no zombies among corrald's children, no process left in the test
    cgroup but the live workers, no worker cgroup but the live workers';
  - corrald's fd count back to its baseline, its RSS within a small bound;
  - every failed client request is explained by a fault the test caused
    (a planned replacement -- reload, scale-down -- fails none).

The RNG seed is fixed (1 unless --seed or CHAOS_SEED says otherwise; bench/
chaos draws new ones) and printed: a failing run can be replayed with the
same choices of fault (timings, and so victims, still differ).

usage: chaos.py [--seconds S] [--seed N] [--workers N] [--json FILE]
                [--corrald-arg=ARG]...
Exit 0 = pass, 77 = skip (no root or no memory controller), 1 = fail.
"""
import argparse
import contextlib
import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import corraltest as ct  # noqa: E402

FAULT_PERIOD = 0.5
WATCHDOG_S, HANG_TIMEOUT_S = 1, 2
MEMORY_MAX = "96M"
# The category each fault must give (corrald's death classification).
EXPECT = {
    "kill9": "signal",
    "segv": "crash",
    "alloc": "heap-limit",
    "buffer": "oom-own-limit",
    "hang": "watchdog-kill",
    "reload": "recycled",
    "scale-down": "exit-clean",
}
# Requests that make the worker that serves them die of the fault, sent
# up to FAULT_STEPS times on one keep-alive connection until one fails.
# Memory grows in 16 MiB steps: one big request would block the worker's
# loop long enough, on a loaded machine, for the watchdog to kill it first.
FAULT_PATH = {
    "alloc": "/alloc?mb=16&retain=1",    # heap limit (72 MiB) first: 134
    "buffer": "/buffer?mb=16&retain=1",  # off-heap past memory.max: 137
    "hang": "/heavy?ms=8000",            # silent past the hang timeout
}
FAULT_STEPS = 20
DIRECT = ("kill9", "segv", "alloc", "buffer", "hang")
FAULTS = DIRECT + ("reload", "scale")
RSS_BOUND = 8 << 20        # corrald's RSS growth allowed over the run
RSS_BOUND_ASAN = 64 << 20  # ASan's quarantine and shadow grow by themselves
SERVING_GAP = 1.0          # seconds below N-1 serving workers allowed
# A fault that kills hits only a worker ready this long (issue 12's
# criterion): an earlier death counts towards the crash budget (--min-uptime).
VICTIM_MIN_READY_MS = 2000
# A scale-up's new slot counts as a worker that should serve from its first
# ready, or at the latest this long after the scale command.
SCALE_UP_START_MS = 5000
# A sanitized worker would catch SIGSEGV itself and exit 1: let the signal
# through, as for a production build (as test_classify's segv_core does).
SEGV_THROUGH = {k: (os.environ.get(k, "") + ":handle_segv=0").lstrip(":")
                for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS")}


def now_ms():
    return time.time() * 1000.0


class Events(threading.Thread):
    """A control `events` subscriber: every event, in order. sync() returns
    once every event corrald emitted before the call has been read."""

    def __init__(self, sockpath):
        super().__init__(daemon=True)
        self.conn = ct.Control(sockpath).subscribe()
        self.events = []
        self.replies = set()
        self.syncs = 0
        self.lock = threading.Lock()

    def run(self):
        while True:
            try:
                line = self.conn.line(timeout=None)
            except OSError:  # closed by close()
                return
            if line is None:
                return
            obj = json.loads(line)
            with self.lock:
                if "event" in obj:
                    self.events.append(obj)
                elif "id" in obj:
                    self.replies.add(obj["id"])

    def sync(self):
        """Two pings on the subscription, one after the other's answer:
        the second is handled in a later turn of corrald's loop than the
        first, so whatever was pending when sync() began (events, the EOF
        of a control connection the test closed) has been dealt with."""
        for _ in range(2):
            self.syncs += 1
            rid = f"sync-{self.syncs}"
            self.conn.send({"cmd": "ping", "id": rid})
            ct.wait_for(lambda: rid in self.replies, 10, what=f"the answer to {rid}")

    def snapshot(self):
        with self.lock:
            return list(self.events)

    def close(self):
        with contextlib.suppress(OSError):
            self.conn.s.shutdown(socket.SHUT_RDWR)
        self.conn.close()
        self.join(5)


class Client(threading.Thread):
    """One keep-alive client: GET /light in a loop on one connection (a new
    one after a failure or a close), bounded by the stop flag and a hard
    time limit. Each failure is kept with the pid that served the
    connection before (None on a fresh connection) and its time span."""

    def __init__(self, host, port, halt, max_seconds):
        super().__init__(daemon=True)
        self.host, self.port, self.halt, self.max_seconds = host, port, halt, max_seconds
        self.ok = 0
        self.failures = []  # (start_ms, end_ms, pid or None, what)

    def run(self):
        end = time.monotonic() + self.max_seconds
        conn, pid = None, None
        while not self.halt.is_set() and time.monotonic() < end:
            if conn is None:
                conn, pid = http.client.HTTPConnection(self.host, self.port, timeout=15), None
            t0 = now_ms()
            try:
                conn.request("GET", "/light")
                r = conn.getresponse()
                r.read()
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}")
                pid = int(r.getheader("X-Worker-Pid"))
                self.ok += 1
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - every failure counts
                self.failures.append((t0, now_ms(), pid, repr(e)[:120]))
                conn.close()
                conn = None
            self.halt.wait(0.002)
        if conn:
            conn.close()


class Chaos:
    def __init__(self, c, cg, n, seed, seconds, initial, t_initial):
        self.c, self.cg, self.n, self.seconds = c, cg, n, seconds
        # When each pid became ready: the initial workers were ready before
        # the events subscription (t_initial is later: conservative).
        self.ready_at = {p: t_initial for p in initial}
        self.rng = random.Random(seed)
        self.ledger = []       # {t_ms, fault, pids, expect}
        self.pending = set()   # pids hit directly and not yet seen dead
        self.hang_pid = None
        self.target = n
        self.targets = [(0.0, n)]  # (t_ms, target) from each scale
        self.threads = []
        self.skipped = {}
        self.counts = {}

    # -- choosing a victim -------------------------------------------------
    def died_pids(self, events):
        return {e["pid"] for e in events if e["event"] == "died"}

    def candidates(self, events):
        """Pids of plain ready workers, ready for VICTIM_MIN_READY_MS, that
        no fault or planned replacement is already after."""
        for e in events:
            if e["event"] == "ready":
                self.ready_at.setdefault(e["pid"], e["time_ms"])
        out = []
        old = now_ms() - VICTIM_MIN_READY_MS
        for w in self.c.workers():
            if (w["state"] == "ready" and w["pid"] and not w.get("retiring")
                    and self.ready_at.get(w["pid"], old + 1) <= old
                    and not w.get("recycle_queued") and not w.get("replaces_pid")
                    and not w.get("replaced_by_pid") and w["pid"] not in self.pending
                    and w["id"] <= self.target):
                out.append(w["pid"])
        return out

    def connect_to(self, allowed):
        """A keep-alive connection served by one of `allowed`: (conn, pid)
        or (None, None)."""
        for _ in range(12):
            conn = http.client.HTTPConnection(self.c.host, self.c.port, timeout=20)
            try:
                conn.request("GET", "/light")
                r = conn.getresponse()
                r.read()
                pid = int(r.getheader("X-Worker-Pid"))
                if r.status == 200 and pid in allowed and \
                        r.getheader("Connection", "").lower() != "close":
                    return conn, pid
            except Exception:  # noqa: BLE001 - try another connection
                pass
            conn.close()
        return None, None

    def record(self, fault, pids, expect, t_ms=None):
        """Writes what the test did; t_ms: when it started doing it."""
        self.ledger.append({"t_ms": t_ms or now_ms(), "fault": fault, "pids": sorted(pids),
                            "expect": expect})
        self.counts[fault] = self.counts.get(fault, 0) + 1

    # -- the faults ----------------------------------------------------------
    def direct(self, fault, events):
        cands = self.candidates(events)
        if self.hang_pid in cands:
            cands.remove(self.hang_pid)
        if not cands:
            return False
        if fault in ("kill9", "segv"):
            pid = self.rng.choice(sorted(cands))
            self.pending.add(pid)
            self.record(fault, [pid], EXPECT[fault])
            os.kill(pid, signal.SIGKILL if fault == "kill9" else signal.SIGSEGV)
            return True
        conn, pid = self.connect_to(set(cands))
        if conn is None:
            return False
        self.pending.add(pid)
        self.record(fault, [pid], EXPECT[fault])
        if fault == "hang":
            self.hang_pid = pid
        # Never reconnect silently: once the victim closed the connection
        # (a drain, a death), the next request would go to another worker
        # the ledger does not name (a fresh one hung by /heavy, say).
        conn.auto_open = 0

        def send():
            with contextlib.suppress(Exception):
                for _ in range(FAULT_STEPS):
                    conn.request("GET", FAULT_PATH[fault])
                    r = conn.getresponse()
                    r.read()
                    if r.status != 200 or int(r.getheader("X-Worker-Pid")) != pid:
                        break
            conn.close()
        t = threading.Thread(target=send, daemon=True)
        t.start()
        self.threads.append(t)
        return True

    def hung_drained(self, pids, t):
        """A hung worker that a reload or scale-down drains cannot drain:
        corrald kills it at the stop timeout (its drain deadline replaces
        the hang timeout), unless the hang timeout came first."""
        if self.hang_pid in pids:
            self.ledger.append({"t_ms": t, "fault": "drain-hung", "pids": [self.hang_pid],
                                "expect": "stop-timeout"})

    def reload(self):
        # Every process, a hit one too: a hung worker may be recycled
        # before its hang timeout (either death then matches the ledger).
        t = now_ms()
        ws = self.c.workers()
        pids = [w["pid"] for w in ws if w["pid"]]
        r = self.c.ctl("reload")
        assert r["ok"], r
        self.record("reload", pids, EXPECT["reload"], t)
        self.hung_drained(pids, t)
        # Any process spawned before the answer (a queued replacement may
        # start between the status read and the command) is eligible too.
        self.ledger[-1]["t_end_ms"] = now_ms()
        # A slot restarting after a fault (no process, or one we hit) may
        # have its next process recycled too: eligible, not required. (Its
        # reload replacements are not: a slot with a live process gets one.)
        live = {w["id"] for w in ws if w["pid"] and w["pid"] not in self.pending}
        self.ledger[-1]["slots"] = sorted({w["id"] for w in ws} - live)
        return True

    def scale(self):
        if self.target != self.n:
            return self.scale_to(self.n)
        if self.rng.random() < 0.5:
            return self.scale_to(self.n + 1)
        return self.scale_to(self.n - 1)

    def scale_to(self, k, force=False):
        if k < self.target:
            # The surplus slots (highest ids) drain: a clean stop each.
            ws = [w for w in self.c.workers() if w["id"] > k]
            if not force and any(w["pid"] in self.pending or w["state"] != "ready" or w.get("recycle_queued")
                   or w.get("replaces_pid") or w.get("replaced_by_pid") for w in ws):
                return False  # a fault or a replacement already acts on that slot
            t = now_ms()
            r = self.c.ctl("scale", workers=k)
            assert r["ok"], r
            # The processes of the removed slots, also one spawned between
            # the status read and the command.
            pids = {w["pid"] for w in ws if w["pid"]} | {
                w["pid"] for w in self.c.workers() if w["id"] > k and w["pid"]}
            self.record("scale-down", pids, EXPECT["scale-down"], t)
            self.hung_drained(pids, t)
        else:
            t = now_ms()
            r = self.c.ctl("scale", workers=k)
            assert r["ok"], r
            self.record("scale-up", [], None, t)
        self.target = k
        self.targets.append((t, k))
        return True

    def one(self, events):
        dead = self.died_pids(events)
        self.pending -= dead
        if self.hang_pid in dead:
            self.hang_pid = None
        choices = list(FAULTS)
        if self.hang_pid is not None:
            # One hang at a time: two hung workers out for the whole hang
            # timeout would break N-1 by the test's doing, not corrald's.
            choices.remove("hang")
        fault = self.rng.choice(choices)
        done = (self.direct(fault, events) if fault in DIRECT else
                self.reload() if fault == "reload" else self.scale())
        if not done:
            self.skipped[fault] = self.skipped.get(fault, 0) + 1

    def run(self, events):
        end = time.monotonic() + self.seconds
        tick = time.monotonic()
        while time.monotonic() < end:
            self.one(events.snapshot())
            tick += FAULT_PERIOD
            time.sleep(max(0.0, tick - time.monotonic()))  # the faults' pace
        if self.target != self.n:
            # Back to N whatever the surplus slot is doing (a worker we hit
            # there then has two ledger entries: either death matches).
            self.scale_to(self.n, force=True)


# -- checks -----------------------------------------------------------------
def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def sanitized(pid):
    with open(f"/proc/{pid}/maps") as f:
        return "libasan" in f.read()


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read().rsplit(") ", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):  # gone meanwhile
            continue
        if int(st[1]) == pid:
            out.append((int(d), st[0]))
    return out


def cgroup_procs(path):
    pids = set()
    for root, _, files in os.walk(path):
        if "cgroup.procs" in files:
            with contextlib.suppress(FileNotFoundError):
                with open(os.path.join(root, "cgroup.procs")) as f:
                    pids |= {int(p) for p in f.read().split()}
    return pids


def settled(c, n):
    ws = c.workers()
    return len(ws) == n and all(w["state"] == "ready" and w["pid"] for w in ws)


def effective_targets(targets, events):
    """The targets in force: a scale-down at once (its slot drains), a
    scale-up's new slot from its first ready, or SCALE_UP_START_MS after
    the command at the latest (it must have had the chance to start)."""
    out, prev = [], targets[0][1]
    for t, k in targets[1:]:
        if k > prev:
            first = [e["time_ms"] for e in events if e["event"] == "ready"
                     and e.get("worker", 0) > prev and e["time_ms"] >= t]
            t = min(first + [t + SCALE_UP_START_MS])
        out.append((t, k))
        prev = k
    return out


def serving_gaps(initial, events, targets, t0, t1):
    """Spans (start, end, serving, target) during which fewer than
    target-1 workers were serving, from the event stream."""
    serving = set(initial)
    changes = sorted([(e["time_ms"], "ev", e) for e in events] +
                     [(t, "target", k) for t, k in effective_targets(targets, events)],
                     key=lambda x: (x[0], x[1] == "target"))
    target = targets[0][1]
    gaps, below_since = [], None
    for t, kind, x in changes:
        if kind == "target":
            target = x
        elif x["event"] in ("ready", "unblocked"):
            serving.add(x["pid"])
        elif x["event"] in ("blocked", "draining", "died"):
            serving.discard(x["pid"])
        low = len(serving) < target - 1 and t >= t0
        if low and below_since is None:
            below_since = (t, len(serving), target)
        elif not low and below_since is not None:
            gaps.append((below_since[0], t, below_since[1], below_since[2]))
            below_since = None
    if below_since is not None:
        gaps.append((below_since[0], t1, below_since[1], below_since[2]))
    return gaps


def match_deaths(ledger, deaths, events):
    """(unmatched deaths, [(ledger entry, pid, its death or None)] for the
    pids the ledger expects dead and that are not, or not of that fault)."""
    by_pid = {}
    for e in ledger:
        for p in e["pids"]:
            by_pid.setdefault(p, []).append(e)
        for slot in e.get("slots", []):
            nxt = [x["pid"] for x in events if x["event"] == "spawned" and x["worker"] == slot
                   and x["time_ms"] >= e["t_ms"]]
            if nxt and nxt[0] not in e["pids"]:
                by_pid.setdefault(nxt[0], []).append(e)
        if "t_end_ms" in e:
            gone = {x["pid"] for x in events if x["event"] == "died" and x["time_ms"] < e["t_ms"]}
            for x in events:
                if (x["event"] == "spawned" and x["time_ms"] <= e["t_end_ms"]
                        and x["pid"] not in gone and x["pid"] not in e["pids"]):
                    by_pid.setdefault(x["pid"], []).append(e)
    unmatched = []
    for d in deaths:
        ok = any(e["expect"] == d["category"] and e["t_ms"] <= d["end_ms"] + 50
                 for e in by_pid.get(d["pid"], []))
        if not ok:
            unmatched.append(d)
    died = {d["pid"]: d for d in deaths}
    missing = []
    for e in ledger:
        for p in e["pids"] if e["expect"] else []:
            d = died.get(p)
            if d is None:
                missing.append((e, p, None))
            elif e["fault"] in DIRECT and d["category"] != e["expect"] and not any(
                    o is not e and o["t_ms"] >= e["t_ms"] and o["expect"] == d["category"]
                    for o in by_pid[p]):
                # A hit worker dies of its fault, unless a later planned
                # operation of the test (a reload) took it first.
                missing.append((e, p, d))
    return unmatched, missing


def explain_failures(failures, ledger, deaths):
    """Split the clients' failures: (explained, planned, other). Explained:
    a fault of the test explains it (the connection's worker was hit, or a
    hit worker died while a request on a fresh connection was out).
    Planned: the connection's worker was being replaced on purpose (reload,
    scale-down), which must cost no request. Other: neither."""
    hit = {e["pids"][0] for e in ledger if e["fault"] in DIRECT}
    planned_pids = {p for e in ledger if e["fault"] not in DIRECT for p in e["pids"]}
    hit_deaths = [d["end_ms"] for d in deaths if d["pid"] in hit]
    explained, planned, other = [], [], []
    for f in failures:
        t0, t1, pid, what = f
        if pid is not None:
            (explained if pid in hit else planned if pid in planned_pids else other).append(f)
        elif any(t0 - 100 <= t <= t1 + 500 for t in hit_deaths):
            explained.append(f)
        else:
            other.append(f)
    return explained, planned, other


def check_deaths(c, chaos, events):
    """Deaths against the ledger and history; (problems, deaths, unmatched)."""
    problems = []
    deaths = [dict(e["postmortem"], category=e["category"]) for e in events
              if e["event"] == "died"]
    # history keeps the newest --history (256) records, newest first: they
    # must be the stream's last deaths.
    hist = c.history()
    ev_last = [(d["pid"], d["category"]) for d in deaths][::-1][:len(hist)]
    hist_last = [(d["pid"], d["category"]) for d in hist]
    if ev_last != hist_last or (len(hist) < len(deaths) and len(hist) < 256):
        problems.append(f"events and history disagree: {len(deaths)} died events, "
                        f"{len(hist)} history records; only in events "
                        f"{sorted(set(ev_last) - set(hist_last))[:20]}, only in history "
                        f"{sorted(set(hist_last) - set(ev_last))[:20]}")
    failed_slots = [e for e in events if e["event"] == "failed"]
    if failed_slots:
        problems.append(f"{len(failed_slots)} slot(s) marked failed: "
                        f"{[(e['worker'], e['reason']) for e in failed_slots][:10]}")
    unmatched, missing = match_deaths(chaos.ledger, deaths, events)
    if unmatched:
        problems.append(f"{len(unmatched)} death(s) match no ledger entry: " + "; ".join(
            f"pid {d['pid']} {d['category']} ({d['reason']})" for d in unmatched[:10]))
    if missing:
        problems.append(f"{len(missing)} fault(s) without their death: " + "; ".join(
            f"{e['fault']} pid {p} want {e['expect']}, got " +
            (f"{d['category']} ({d['reason']})" if d else "no death") for e, p, d in missing[:10]))
    return problems, deaths, unmatched


def check_serving(initial, events, chaos, t_start, t_end):
    """Never fewer than N-1 serving for more than SERVING_GAP; (problems,
    the longest span below N-1 in ms)."""
    gaps = serving_gaps(initial, events, chaos.targets, t_start, t_end)
    long_gaps = [g for g in gaps if g[1] - g[0] > SERVING_GAP * 1000]
    worst = max((g[1] - g[0] for g in gaps), default=0.0)
    if not long_gaps:
        return [], worst
    return [f"fewer than N-1 workers serving for more than {SERVING_GAP} s "
            f"{len(long_gaps)} time(s), longest {worst:.0f} ms: " + "; ".join(
                f"{g[2]} of target {g[3]} for {g[1] - g[0]:.0f} ms at "
                f"+{(g[0] - t_start) / 1000:.1f} s" for g in long_gaps[:8])], worst


def check_leftovers(c, cg, n, base, settle_problem, ev):
    """Worker count, zombies, escaped processes, stray cgroups, fds, RSS;
    (problems, (fd, rss) now)."""
    problems = []
    pid = c.proc.pid
    ws = c.workers()
    live = {w["pid"] for w in ws if w["pid"]}
    if len([w for w in ws if w["state"] == "ready"]) != n:
        problems.append(f"worker count not back to {n}: "
                        f"{[(w['id'], w['state'], w['pid']) for w in ws]}")
    zombies = [p for p, s in children(pid) if s == "Z"]
    if zombies:
        problems.append(f"zombie children of corrald: {zombies}")
    escaped = cgroup_procs(cg.path) - live
    if escaped:
        problems.append(f"processes in the test cgroup that are no live worker: "
                        f"{sorted(escaped)}")
    # Worker groups live below the instance's subtree: workers/<INSTANCE>/wN-G.
    groups = {f"{i}/{g}" for i in cg.groups()
              for g in cg.groups(os.path.join("workers", i))}
    want = {"/".join(w["cgroup"].rsplit("/", 2)[1:]) for w in ws if w.get("cgroup")}
    if groups != want:
        problems.append(f"stray worker cgroups: {sorted(groups - want)}; "
                        f"missing: {sorted(want - groups)}")
    ev.sync()  # corrald has closed its ends of the control connections above
    fd1, rss1 = fd_count(pid), rss_bytes(pid)
    bound = RSS_BOUND_ASAN if sanitized(pid) else RSS_BOUND
    if fd1 != base[0]:
        problems.append(f"corrald's fds {base[0]} -> {fd1}" +
                        (" (with fewer than N workers: see above)" if settle_problem else ""))
    if rss1 - base[1] > bound:
        problems.append(f"corrald's RSS grew {(rss1 - base[1]) >> 10} KiB "
                        f"(bound {bound >> 10} KiB)")
    return problems, (fd1, rss1)


def check_failures(failures, chaos, deaths, t_start):
    """(problems, explained, planned, other) of the clients' failures."""
    explained, planned, other = explain_failures(failures, chaos.ledger, deaths)
    problems = []

    def show(fs):
        return "; ".join(f"pid {f[2]} at +{(f[0] - t_start) / 1000:.1f} s {f[3]}" for f in fs[:5])
    if planned:
        problems.append(f"{len(planned)} failed request(s) on connections to workers replaced "
                        f"on purpose (reload, scale-down must fail none): " + show(planned))
    if other:
        problems.append(f"{len(other)} failed request(s) no fault explains: " + show(other))
    return problems, explained, planned, other


def settle(c, chaos, ev, n):
    """Waits for the hit workers to die and N ready workers, nothing else;
    a problem text or None."""
    try:
        ct.wait_for(lambda: not (chaos.pending - chaos.died_pids(ev.snapshot())), 30,
                    interval=0.1, what="every hit worker to die")
        ct.wait_for(lambda: settled(c, n), 30, interval=0.1,
                    what=f"{n} ready workers and nothing else")
        return None
    except AssertionError as e:
        return f"did not settle: {e}; workers: {json.dumps(c.workers())[:1500]}"


def wait_sampled(c):
    """Until every worker has been sampled by corrald and heard from: its RSS
    read for the answer (age 0) goes through the statm descriptor its first
    sample opened (before that the RSS is the worker's report, with an
    age), and its group's usage is known."""
    ct.wait_for(lambda: all((w["cgroup_usage_bytes"] or 0) > 0 and w["rss_age_ms"] == 0 and
                            w["last_report_ago_ms"] is not None for w in c.workers()), 10,
                what="a sample and a report of each worker")


def run(args):
    ct.need_memcg()
    print(f"chaos: seed {args.seed}, {args.seconds} s, {args.workers} workers, "
          f"a fault every {FAULT_PERIOD * 1000:.0f} ms", flush=True)
    cg = ct.TestCgroup("chaos")
    c, ev, clients, halt = None, None, [], threading.Event()
    try:
        c = ct.Corrald("--memory-max", MEMORY_MAX, "--watchdog", str(WATCHDOG_S),
                       "--hang-timeout", str(HANG_TIMEOUT_S), *args.corrald_arg,
                       workers=args.workers, cgroups=cg.rel, name="chaos", env=SEGV_THROUGH,
                       command=[ct.WORKER, "--report-interval", "250"])
        ev = Events(c.sock)
        ev.start()
        t_initial = now_ms()
        # The baseline once corrald holds all it holds for its workers (a
        # sample of each keeps its statm open), no control connection of
        # ours left open but the subscription.
        wait_sampled(c)
        ev.sync()
        base = fd_count(c.proc.pid), rss_bytes(c.proc.pid)
        initial = c.live_pids()
        assert len(initial) == args.workers, initial
        clients = [Client(c.host, c.port, halt, args.seconds + 120) for _ in range(4)]
        for cl in clients:
            cl.start()
        chaos = Chaos(c, cg, args.workers, args.seed, args.seconds, initial, t_initial)
        t_start = now_ms()
        chaos.run(ev)
        t_chaos_end = now_ms()
        settle_problem = settle(c, chaos, ev, args.workers)
        halt.set()
        for t in clients + chaos.threads:
            t.join(20)
        wait_sampled(c)  # the replacements too
        ev.sync()  # every event so far is in
        t_end = now_ms()

        # Alive and answering.
        if c.proc.poll() is not None:
            raise AssertionError(f"corrald died ({c.proc.returncode}):\n{c.log()[-3000:]}")
        assert c.ctl("ping").get("pong") == "corral"
        problems = [settle_problem] if settle_problem else []
        st, _, _ = c.get("/light")
        if st != 200:
            problems.append(f"GET /light answered {st}")
        events = ev.snapshot()
        p, deaths, unmatched = check_deaths(c, chaos, events)
        problems += p
        p, worst = check_serving(initial, events, chaos, t_start, t_end)
        problems += p
        p, now = check_leftovers(c, cg, args.workers, base, settle_problem, ev)
        problems += p
        failures = [f for cl in clients for f in cl.failures]
        p, explained, planned, other = check_failures(failures, chaos, deaths, t_start)
        problems += p

        result = {
            "seed": args.seed, "seconds": args.seconds,
            "faults": sum(chaos.counts.values()), "by_fault": chaos.counts, "skipped": chaos.skipped,
            "deaths": len(deaths), "matched": len(deaths) - len(unmatched),
            "by_category": {k: sum(1 for d in deaths if d["category"] == k)
                            for k in sorted({d["category"] for d in deaths})},
            "requests_ok": sum(cl.ok for cl in clients), "requests_failed": len(failures),
            "failed_explained": len(explained), "failed_planned": len(planned),
            "failed_unexplained": len(other), "serving_gap_max_ms": round(worst),
            "fd": [base[0], now[0]], "rss_kib": [base[1] >> 10, now[1] >> 10],
            "chaos_s": round((t_chaos_end - t_start) / 1000, 1), "problems": problems,
        }
        print(json.dumps({k: v for k, v in result.items() if k != "problems"}), flush=True)
        for p in problems:
            print("FAIL: " + p, flush=True)
        if os.environ.get("CHAOS_DUMP"):
            with open(os.environ["CHAOS_DUMP"], "w") as f:
                json.dump({"ledger": chaos.ledger, "events": events}, f)
        if problems:
            print(f"(replay the fault sequence with --seed {args.seed})")
            print("--- corrald log tail ---\n" + c.log()[-3000:])
        return result
    finally:
        halt.set()
        if ev:
            ev.close()
        if c:
            c.close()
        cg.remove()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("CHAOS_SECONDS", 60)))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", 1)))
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--corrald-arg", action="append", default=[],
                    help="one more corrald argument (diagnosis only; CI passes none)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(f"terminated by signal {s}"))
    try:
        result = run(args)
    except ct.Skip as e:
        print(f"SKIP: {e}")
        sys.exit(ct.SKIP)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if result["problems"]:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
