"""Warm spares of Node.js workers (issue 15): a spare serves one request to
itself on a private server from its preload on, and its READY=1 (on which
corrald freezes it) waits for that; a regular worker does not warm up.

No timing: the proof is the spare's own READY message. It carries the
warm-up's outcome in STATUS, and corrald freezes a spare on that READY=1, so
a spare seen frozen with "warmed up" in its status had finished before the
freeze (a frozen process sends nothing). The app's handler counts its calls:
the heir's first request is call 1, so the warm-up never ran it.
--no-cgroups (SIGSTOP): how a spare is frozen is not what is tested here."""
import contextlib
import json
import os
import select
import signal
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "classify"))
import clhelp as h  # noqa: E402
from clhelp import ct  # noqa: E402
import harness  # noqa: E402  (tests/node, beside this file)

WARM_APP = os.path.join(HERE, "warm_app.js")
AGENT = os.path.join(ROOT, "agent", "corral-node-agent.js")
SERVER = os.path.join(ROOT, "examples", "node", "server.js")


def node():
    n = os.environ.get("CORRAL_NODE", "")
    if not n or not os.access(n, os.X_OK):
        ct.skip("node is not installed")
    return n


@contextlib.contextmanager
def corrald(*args, **kw):
    """One worker and one spare; stopped by SIGTERM, which thaws and kills
    the spare, before the harness's SIGKILL backstop, also when the worker
    never gets ready (hence wait_ready here, not in the constructor).
    --ready notify: under auto, a start slower than auto's 1 s silent grace
    (a loaded machine) would be frozen as it is, before it speaks."""
    with h.corrald("--spares", "1", "--ready", "notify", *args, workers=1, wait_ready=False,
                   **kw) as c:
        try:
            c.wait_ready(1, 20)
            yield c
        finally:
            c.stop()


def frozen_spare(c):
    def one():
        return next((w for w in c.workers() if w["state"] == "spare"), None)
    return ct.wait_for(one, 20, interval=0.05, what="a frozen spare")


def promote(c, spare):
    """kill -9 worker 1: the spare takes slot 1 and serves."""
    os.kill(c.worker(1)["pid"], signal.SIGKILL)
    ct.wait_for(lambda: (c.worker(1) or {}).get("pid") == spare["pid"] and
                c.worker(1)["state"] == "ready", 10, what="the spare in slot 1")


def test_agent_spare():
    """An unmodified app under --node-agent: the spare is frozen with its
    warm-up's outcome in its status, the regular worker never warmed up, and
    the heir's first request is the first its handler ever ran."""
    with corrald("--node-agent", command=[node(), WARM_APP], name="warm-agent") as c:
        spare = frozen_spare(c)
        assert spare["status"].startswith("serving (corral-node-agent; warmed up in "), spare
        w1 = c.worker(1)
        assert w1["status"] == "serving (corral-node-agent)", w1
        promote(c, spare)
        st, hd, body = c.get("/")
        assert st == 200 and int(hd["x-worker-pid"]) == spare["pid"], (st, hd)
        assert json.loads(body)["calls"] == 1, body
        # The agent counts the app's requests only: the warm-up's is not one.
        heir = ct.wait_for(lambda: (c.worker(1).get("requests") or 0) >= 1 and c.worker(1), 10,
                           interval=0.05, what="the heir's request count")
        assert heir["requests"] == 1, heir
        # A new spare warms up too.
        new = ct.wait_for(lambda: next((w for w in c.workers() if w["state"] == "spare" and
                                        w["pid"] != spare["pid"]), None), 20, what="a new spare")
        assert "warmed up in " in new["status"], new


def bounded(mode, outcome):
    """A warm-up that cannot succeed (the app breaks outgoing connects):
    the spare is frozen all the same, says why, and serves once promoted."""
    with corrald("--node-agent", command=[node(), WARM_APP], env={"WARM_APP_CONNECT": mode},
                 name="warm-" + mode) as c:
        spare = frozen_spare(c)
        assert spare["status"].startswith(f"serving (corral-node-agent; warm-up {outcome}"), spare
        promote(c, spare)
        st, hd, body = c.get("/")
        assert st == 200 and int(hd["x-worker-pid"]) == spare["pid"], (st, hd)
        assert json.loads(body)["calls"] == 1, body


def test_agent_spare_fails():
    bounded("fail", "failed (")


def test_agent_spare_stalls():
    """Only the warm-up's time bound ends this one."""
    bounded("stall", "timed out after ")


def test_server_spare():
    """examples/node/server.js speaks the protocol itself, so the agent
    leaves it alone and it warms itself up: the same proofs, with and
    without the agent preloaded."""
    for args in ((), ("--node-agent",)):
        with corrald(*args, command=[node(), SERVER], name="warm-server") as c:
            spare = frozen_spare(c)
            assert spare.get("status", "").startswith("warmed up in "), (args, spare)
            assert "status" not in c.worker(1), (args, c.worker(1))
            promote(c, spare)
            st, hd, _ = c.get("/light")
            assert st == 200 and int(hd["x-worker-pid"]) == spare["pid"], (st, hd)
            heir = ct.wait_for(lambda: (c.worker(1).get("requests") or 0) >= 1 and c.worker(1),
                               10, interval=0.05, what="the heir's request count")
            assert heir["requests"] == 1, (args, heir)


def test_agent_ready_after_warm_up():
    """A spare warms up once the app's main module has run, and its READY=1
    waits for the warm-up; the app's listen({fd: 3}) is not held (it keeps
    its synchronous effects), so the app answers at once, its handler's
    first call. Without
    corrald: the spare's channel is read here. The warm-up stalls (1 s
    bound). READY=1 is the last thing the spare does: its first report
    comes before."""
    w = harness.Worker(node(), WARM_APP, node_args=["--require=" + AGENT],
                       env={"CORRAL_SPARE": "1", "WARM_APP_CONNECT": "stall"})
    try:
        first = [w.read_message(10), w.read_message(10)]
        assert first == [{"STATUS": "starting (corral-node-agent)"},
                         {"STATUS": "warming up (corral-node-agent)"}], first
        s = socket.create_connection(("127.0.0.1", w.port), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert select.select([s], [], [], 0.5)[0], "the app's listen was held"
        body = b""
        while chunk := s.recv(4096):
            body += chunk
        assert body.startswith(b"HTTP/1.1 200") and b'"calls":1' in body, body
        s.close()
        # Still warming up: no READY yet.
        early = w.read_message(0)
        assert early is None, early
        # The first report comes before READY=1, not after it, where it
        # would run after the freeze.
        report = w.read_message(10)
        assert report and "WATCHDOG" in report and "READY" not in report, report
        ready = w.read_message(10)
        assert ready and ready["STATUS"].startswith(
            "serving (corral-node-agent; warm-up timed out"), ready
    finally:
        w.kill()


def test_agent_spare_never_listens():
    """A spare whose app never listens on fd 3 (a queue consumer) has
    spoken, so silence no longer makes it ready: the agent says READY=1
    itself at half the start timeout corrald gave it, instead of leaving it
    to be killed at the start timeout."""
    w = harness.Worker(node(), "setInterval(() => {}, 1000)",
                       node_args=["--require=" + AGENT, "-e"],
                       env={"CORRAL_SPARE": "1", "CORRAL_START_TIMEOUT_MS": "4000"})
    try:
        got = [w.read_message(10) for _ in range(2)]
        assert got[0] == {"STATUS": "starting (corral-node-agent)"}, got
        msgs = []
        while not any("READY" in m for m in msgs):
            m = w.read_message(10)
            assert m is not None, msgs
            msgs.append(m)
        assert msgs[-1]["STATUS"] == \
            "running (corral-node-agent; no listen on fd 3 after 2000 ms)", msgs
    finally:
        w.kill()


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
