#!/usr/bin/env python3
"""bench/peers/node/cluster.js, the node:cluster benchmark peer.

usage: test_cluster.py <case>; CORRAL_NODE and CORRAL_NODE_CLUSTER name node
and cluster.js."""

import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, ct, fail, get, node_or_skip  # noqa: E402


class Peer:
    def __init__(self, node, script, workers, policy="rr"):
        env = dict(os.environ, NODE_CLUSTER_SCHED_POLICY=policy, UV_THREADPOOL_SIZE="2")
        self.proc = subprocess.Popen(
            [node, script, "--workers", str(workers), "--port", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.out = b""
        line = self.line(10)
        if not line.startswith("listening "):
            fail("first line %r, stderr %r" % (line, self.proc.stderr.read1(4096)))
        self.port = int(line.split()[1])

    def line(self, timeout):
        """The next stdout line, or fail after timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.out:
            left = deadline - time.monotonic()
            r, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            if not r:
                fail("no output line within %.1f s" % timeout)
            data = os.read(self.proc.stdout.fileno(), 4096)
            if not data:
                fail("peer closed stdout (exit %r)" % self.proc.poll())
            self.out += data
        line, self.out = self.out.split(b"\n", 1)
        return line.decode()

    def children(self):
        kids = set()
        for tid in os.listdir("/proc/%d/task" % self.proc.pid):
            with open("/proc/%d/task/%s/children" % (self.proc.pid, tid)) as f:
                kids.update(int(p) for p in f.read().split())
        return kids

    def pids(self, n):
        """The X-Worker-Pid of n requests, each on its own connection."""
        seen = []
        for _ in range(n):
            status, hdr, _, _ = get(self.port, "/light", timeout=5)
            if status != 200:
                fail("/light: %d" % status)
            seen.append(int(hdr["x-worker-pid"]))
        return seen

    def stop(self):
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("peer did not exit within 10 s of SIGTERM")
        return code, time.monotonic() - t0

    def kill(self):
        if self.proc.poll() is None:
            for pid in self.children():
                os.kill(pid, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait()


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone between open and read
        return False


def test_balance(peer):
    kids = peer.children()
    check(len(kids) == 2, "2 worker processes: %s" % sorted(kids))
    seen = peer.pids(200)
    distinct = set(seen)
    counts = {p: seen.count(p) for p in distinct}
    check(distinct == kids, "200 /light answered by both workers: %s" % counts)
    check(min(counts.values()) >= 80, "round-robin spreads them evenly: %s" % counts)
    code, took = peer.stop()
    check(code == 0, "primary exits 0 on SIGTERM (%.2f s)" % took)
    # The primary exits once its workers' exits are in (it reaped them).
    check(not any(alive(p) for p in kids), "no worker outlives the primary")


def test_restart(peer):
    kids = sorted(peer.children())
    victim = kids[0]
    t0 = time.monotonic()
    os.kill(victim, signal.SIGKILL)
    line = peer.line(10)
    took = time.monotonic() - t0
    parts = line.split()
    check(len(parts) == 3 and parts[0] == "restarted" and int(parts[1]) == victim,
          "%r after kill -9 of %d (%.0f ms)" % (line, victim, took * 1000))
    new = int(parts[2])
    check(peer.children() == {new, kids[1]}, "worker set is now %s" % sorted(peer.children()))
    seen = set(peer.pids(20))
    check(new in seen and kids[1] in seen, "replacement serves: %s" % sorted(seen))
    code, _ = peer.stop()
    check(code == 0, "primary exits 0 on SIGTERM")


def test_none(peer):
    # NODE_CLUSTER_SCHED_POLICY=none: every worker accepts on the shared
    # socket; the kernel picks, so only "both alive, all served" is certain.
    kids = peer.children()
    check(len(kids) == 2, "2 worker processes")
    seen = set(peer.pids(50))
    check(seen <= kids, "50 /light served by the workers: %s" % sorted(seen))
    code, _ = peer.stop()
    check(code == 0, "primary exits 0 on SIGTERM")


def test_single(peer):
    check(peer.children() == set(), "--workers 1 forks nothing")
    check(set(peer.pids(5)) == {peer.proc.pid}, "the process itself serves")
    code, _ = peer.stop()
    check(code == 0, "exits 0 on SIGTERM")


# Worker processes of each case's peer (default 2).
WORKERS = {"single": 1}


def run(fn):
    node = node_or_skip()
    policy = "none" if sys.argv[1] == "none" else "rr"
    peer = Peer(node, os.environ["CORRAL_NODE_CLUSTER"], WORKERS.get(sys.argv[1], 2), policy)
    try:
        fn(peer)
    finally:
        peer.kill()


if __name__ == "__main__":
    ct.main(sys.modules[__name__], call=run)
