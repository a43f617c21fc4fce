"""`corralctl why` and `corralctl history --format/--since`.

screens: recorded post-mortems (tests/data/why/*.json) rendered by the real
corralctl (`why --file`) and compared byte for byte with the committed
screens (tests/data/why/*.txt), in a UTF-8 and a C locale and at 80 and 60
columns; CORRAL_WHY_REGEN=1 rewrites the screens instead (then read the
diff). history_formats: ndjson, csv and --since against a live corrald,
filtered by corrald. why_oom: a real OOM kill (the reference worker, a 64M
limit, /buffer?mb=4&retain=1) explained by the real corralctl why.
"""
import csv
import datetime
import glob
import io
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from charness import Corrald, check, exe, fail, wait_for  # noqa: E402
import corraltest as ct  # noqa: E402  (on the path through charness)

SRC = os.environ.get("CORRAL_SRC") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "..")
DATA = os.path.join(SRC, "tests", "data", "why")

# A screen's variant: (suffix, locale, columns, extra arguments).
UTF8 = ("", "C.UTF-8", 80, [])
VARIANTS = {
    "hang": [UTF8],
    "heap-limit": [UTF8, (".w60", "C.UTF-8", 60, [])],
    "oom": [UTF8, (".ascii", "C", 80, [])],
    "oom-older": [UTF8],
}


def corralctl(args, sock=None, locale="C.UTF-8", columns=80, stdin=None, timeout=20):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LC_") and k not in ("LANG", "LANGUAGE", "NO_COLOR")}
    env.update(TZ="UTC", LC_ALL=locale, COLUMNS=str(columns))
    argv = [exe("CORRALCTL")] + (["--socket", sock] if sock else []) + list(args)
    return subprocess.run(argv, capture_output=True, env=env, input=stdin, timeout=timeout)


def width(line):
    return len(line.decode("utf-8"))


def check_fits(out, columns, ascii_only, what):
    for line in out.splitlines():
        check(width(line) <= columns, "%s: a line of %d columns > %d: %r"
              % (what, width(line), columns, line))
    if ascii_only:
        check(all(b < 0x80 for b in out), "%s: a byte outside ASCII" % what)


def test_screens():
    regen = os.environ.get("CORRAL_WHY_REGEN") == "1"
    fixtures = sorted(glob.glob(os.path.join(DATA, "*.json")))
    check(sorted(os.path.basename(f)[:-5] for f in fixtures) == sorted(VARIANTS),
          "fixtures %s, expected %s" % (fixtures, sorted(VARIANTS)))
    errors = []
    for name, variants in sorted(VARIANTS.items()):
        fixture = os.path.join(DATA, name + ".json")
        for suffix, locale, columns, extra in variants:
            r = corralctl(["why", "--file", fixture] + extra, locale=locale, columns=columns)
            check(r.returncode == 0, "%s%s: exit %d: %s" % (name, suffix, r.returncode, r.stderr))
            check_fits(r.stdout, columns, locale == "C", name + suffix)
            golden = os.path.join(DATA, name + suffix + ".txt")
            if regen:
                with open(golden, "wb") as f:
                    f.write(r.stdout)
                print("wrote %s" % golden)
                continue
            with open(golden, "rb") as f:
                want = f.read()
            if r.stdout != want:
                errors.append("%s: differs from %s:\n%s" % (name + suffix, golden, diff(want, r.stdout)))
            else:
                print("ok  %s%s" % (name, suffix))
    # --ascii in a UTF-8 locale gives the C locale's screen.
    r = corralctl(["why", "--ascii", "--file", os.path.join(DATA, "oom.json")])
    with open(os.path.join(DATA, "oom.ascii.txt"), "rb") as f:
        check(regen or r.stdout == f.read(), "--ascii differs from the C locale's screen")
    if errors:
        fail("\n".join(errors))


def diff(want, got):
    import difflib
    return "".join(difflib.unified_diff(want.decode().splitlines(True),
                                        got.decode().splitlines(True), "golden", "corralctl"))


def test_file_pick():
    """--file takes a record, a history response or NDJSON (here on stdin):
    the newest record, or the one of a worker id, else of a pid."""
    recs = [json.load(open(os.path.join(DATA, n + ".json"))) for n in sorted(VARIANTS)]
    ndjson = "".join(json.dumps(r) + "\n" for r in recs).encode()
    newest = max(recs, key=lambda r: r["end_ms"])
    goldens = {r["pid"]: open(os.path.join(DATA, n + ".txt"), "rb").read()
               for n, r in zip(sorted(VARIANTS), recs)}
    r = corralctl(["why", "--file", "-"], stdin=ndjson)
    check(r.returncode == 0 and r.stdout == goldens[newest["pid"]], "the newest of NDJSON")
    oom = [x for x in recs if x["category"] == "oom-own-limit"][0]
    r = corralctl(["why", "--file", "-", str(oom["pid"])], stdin=ndjson)
    check(r.returncode == 0 and r.stdout == goldens[oom["pid"]], "by pid from NDJSON")
    resp = json.dumps({"ok": True, "history": recs}).encode()
    r = corralctl(["why", "--file", "-", str(oom["pid"])], stdin=resp)
    check(r.returncode == 0 and r.stdout == goldens[oom["pid"]], "by pid from a response")
    r = corralctl(["--json", "why", "--file", "-", str(oom["pid"])], stdin=resp)
    check(json.loads(r.stdout) == oom, "--json why: the record itself")
    r = corralctl(["why", "--file", "-", "424242"], stdin=ndjson)
    check(r.returncode == 1 and b"no death of worker or pid 424242" in r.stderr, r.stderr)
    r = corralctl(["why", "--file", "-"], stdin=b"{\"not\": \"a record\"}\n")
    check(r.returncode == 1 and b"no post-mortem" in r.stderr, r.stderr)
    r = corralctl(["history", "--ascii"], sock="/nonexistent")
    check(r.returncode == 2 and b"--ascii is for 'why' only" in r.stderr, r.stderr)


def ms_iso(ms):
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_history_formats():
    """Two deaths 300 ms apart: ndjson is the history's records, one a line;
    csv is RFC 4180 with the fixed columns; --since (a duration, an ISO 8601
    time between the two, a Unix time, a future time) is answered by
    corrald with only the records that ended since."""
    with Corrald(workers=2, name="hfmt") as d:
        for wid in (1, 2):
            check(d.request({"cmd": "kill", "worker": wid, "signal": "KILL"})["ok"], "kill")
            wait_for(lambda: len(d.request({"cmd": "history"})["history"]) == wid, 5,
                     what="death %d" % wid)
            time.sleep(0.3)  # the two deaths' end times apart, for --since between them
        recs = d.request({"cmd": "history"})["history"]
        r = corralctl(["history", "--format", "ndjson"], sock=d.sock)
        check(r.returncode == 0, r.stderr)
        lines = r.stdout.decode().splitlines()
        check([json.loads(l) for l in lines] == recs, "ndjson != the history's records")

        r = corralctl(["history", "--format", "csv"], sock=d.sock)
        check(r.returncode == 0 and r.stdout.count(b"\r\n") == 3, r.stdout)
        rows = list(csv.reader(io.StringIO(r.stdout.decode(), newline="")))
        check(rows[0] == ["time", "worker", "pid", "generation", "category", "shell_status",
                          "uptime_ms", "rss_bytes", "cg_usage_bytes", "heap_used_bytes",
                          "heap_limit_bytes", "reason"], rows[0])
        for row, rec in zip(rows[1:], recs):
            check(row[0] == ms_iso(rec["end_ms"]), (row[0], rec["end_ms"]))
            check([int(row[1]), int(row[2]), row[4], int(row[5]), row[11]] ==
                  [rec["worker_id"], rec["pid"], rec["category"], rec["shell_status"],
                   rec["reason"]], (row, rec))
            # Unknown is an empty field (a worker killed before its first
            # sample has no RSS: seen under load).
            csv_of = lambda v: "" if v is None else str(v)  # noqa: E731
            check(row[7] == csv_of(rec["rss_bytes"]) and
                  row[10] == csv_of(rec["heap_limit_bytes"]), (row, rec))

        newer, older = recs
        # The protocol's own filters, as corralctl why uses them.
        for req, want in (({"worker": 1}, [older]), ({"worker": 2, "n": 1}, [newer]),
                          ({"pid": older["pid"]}, [older]), ({"pid": 1}, []),
                          ({"since_ms": older["end_ms"] + 1}, [newer]),
                          ({"since_ms": older["end_ms"], "worker": 1}, [older])):
            got = d.request(dict(req, cmd="history"))["history"]
            check(got == want, "history %s: %s" % (req, [g["pid"] for g in got]))
        between = ms_iso(older["end_ms"] + 1)
        cases = [("10m", 2), (between, 1), ("@%d" % (older["end_ms"] // 1000 - 1), 2),
                 (str(older["end_ms"] + 1), 1), ("2099-01-01T00:00:00+02:00", 0)]
        for since, n in cases:
            r = corralctl(["--json", "history", "--since", since], sock=d.sock)
            got = json.loads(r.stdout)["history"]
            check(r.returncode == 0 and len(got) == n,
                  "--since %s: %d records, expected %d" % (since, len(got), n))
            if n == 1:
                check(got[0]["pid"] == newer["pid"], "--since %s kept the older" % since)
        r = corralctl(["history", "--format", "csv", "--since", "2099-01-01"], sock=d.sock)
        check(r.stdout.count(b"\r\n") == 1, "a future --since: the header alone")
        for bad in (["history", "--since", "yesterday"], ["history", "--format", "xml"],
                    ["history", "--since", "@18446744073709551"],  # * 1000 overflows int64
                    ["--json", "history", "--format", "csv"], ["status", "--since", "1h"]):
            r = corralctl(bad, sock=d.sock)
            check(r.returncode == 2, "%s -> %d, expected 2" % (bad, r.returncode))
        # why: the newest death, of a worker, of a pid; and none.
        r = corralctl(["why"], sock=d.sock)
        check(r.returncode == 0 and b"worker 2 died: signal" in r.stdout, r.stdout[:300])
        r = corralctl(["why", "1"], sock=d.sock)
        check(r.returncode == 0 and b"worker 1 died: signal" in r.stdout, r.stdout[:300])
        r = corralctl(["why", str(older["pid"])], sock=d.sock)
        check(r.returncode == 0 and b"pid %d," % older["pid"] in r.stdout, r.stdout[:300])
        r = corralctl(["why", "77777777"], sock=d.sock)
        check(r.returncode == 1 and b"no death of worker or pid 77777777" in r.stderr, r.stderr)


def test_why_oom():
    """A real OOM kill (reference worker, --memory-max 64M, Buffers retained
    4 MiB at a time) explained by the real corralctl why, from a real
    corrald: the category, the limit, a minute of memory with the growth
    in it, the advice; and history's csv quotes the reason's comma."""
    ct.need_memcg()
    cg = ct.TestCgroup("why-oom")
    d = None
    try:
        d = Corrald(["--memory-max", "64M", "--cgroup-parent", cg.rel], workers=1,
                    name="why-oom").start()
        victim = d.pids()[0]
        time.sleep(1)  # a second of calm samples before the growth: the series' start
        for _ in range(30):  # 30 x 4 MiB passes 64M; bounded either way
            try:
                st, _, _ = d.get("/buffer?mb=4&retain=1", timeout=10)
            except Exception:  # noqa: BLE001 - the worker died under the request
                break
            if st != 200:
                break
            time.sleep(0.5)  # the growth's pace: two samples per step
        wait_for(lambda: any(x["pid"] == victim for x in d.request({"cmd": "history"})["history"]),
                 10, what="the OOM death")
        rec = [x for x in d.request({"cmd": "history"})["history"] if x["pid"] == victim][0]
        check(rec["category"] == "oom-own-limit", rec["category"])
        check(len(rec["memory_series"]) >= 5, rec["memory_series"])
        for args in (["why"], ["why", "1"], ["why", str(victim)]):
            r = corralctl(args, sock=d.sock)
            check(r.returncode == 0, "%s: exit %d %s" % (args, r.returncode, r.stderr))
            out = r.stdout.decode()
            print(out)
            check_fits(r.stdout, 80, False, " ".join(args))
            check(out.startswith("worker 1 died: oom-own-limit\n  pid %d," % victim), out[:200])
            check("limit 64M" in out, "no limit in the group line")
            group = [l for l in out.splitlines() if l.startswith("  group       ") and "…" in l]
            check(len(group) == 1, "no group sparkline")
            spark = group[0][14:14 + 30]  # 30 cells of 2 s at 80 columns
            check(sum(ch in "▁▂▃▄▅▆▇█" for ch in spark) >= 3 and "█" in spark[-3:],
                  "group sparkline %r" % spark)
            check("The kernel killed it at its own limit (--memory-max 64M)" in out, out)
            check("rose from" in out, "no growth named in the advice")
        r = corralctl(["why", "--ascii"], sock=d.sock)
        check_fits(r.stdout, 80, True, "why --ascii")
        r = corralctl(["history", "--format", "csv"], sock=d.sock)
        row = list(csv.reader(io.StringIO(r.stdout.decode(), newline="")))[1]
        check("," in rec["reason"] and row[11] == rec["reason"], (row, rec["reason"]))
        check(row[10] == str(rec["heap_limit_bytes"]) and row[8] == str(rec["cg_usage_bytes"]),
              row)
        d.stop()
        d = None
    finally:
        if d:
            d.close()
        cg.remove()


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
