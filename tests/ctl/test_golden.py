"""Golden request/response pairs (tests/data/control) against a live corrald
with a fixed configuration, compared structurally (see golden.py); and
docs/control-protocol.md checked against the implementation."""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from charness import Control, Corrald, check, fail, wait_for  # noqa: E402
import corraltest as ct  # noqa: E402  (on the path through charness)
from golden import load, match  # noqa: E402

SRC = os.environ.get("CORRAL_SRC") or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                    "..", "..")
DATA = os.path.join(SRC, "tests", "data", "control")
DOC = os.path.join(SRC, "docs", "control-protocol.md")


def test_golden():
    reqs = sorted(glob.glob(os.path.join(DATA, "*.request")))
    check(len(reqs) >= 20, "too few golden pairs in %s" % DATA)
    errors = []
    with Corrald(workers=2, name="golden") as d:
        # Ready comes before a worker's first report: the templates want
        # the reported figures, so wait for them (a status in between
        # rightly says unknown).
        wait_for(lambda: all(w["heap_used_bytes"] is not None and w["rss_bytes"] is not None
                             for w in d.ctl("status")["workers"]), 10,
                 what="every worker's first report")
        for req in reqs:
            name = os.path.basename(req)[:-len(".request")]
            with open(req, "rb") as f:
                raw = f.read()
            tpl = load(os.path.join(DATA, name + ".response.json"))
            c = Control(d.sock)
            c.send(raw)
            line = c.line()
            c.close()
            check(line is not None, "%s: no answer" % name)
            got = json.loads(line)
            errs = match(tpl, got)
            if errs:
                errors.append("%s:\n  %s\n  got: %s" % (name, "\n  ".join(errs), line[:600]))
            else:
                print("ok  %s" % name)
        d.proc.wait(15)
    if errors:
        fail("golden mismatches:\n" + "\n".join(errors))


def documented():
    with open(DOC) as f:
        text = f.read()
    cmds = re.findall(r"^### `([a-z]+)`", text, re.M)
    section = text[text.index("### Error codes"):]
    section = section[:section.index("\n## ")]
    codes = re.findall(r"^\| `([a-z-]+)` \|", section, re.M)
    return text, cmds, codes


def test_docs():
    """Every documented command exists, every implemented error code is
    documented, and undocumented commands are refused."""
    text, cmds, codes = documented()
    with open(os.path.join(SRC, "supervisor", "model", "control_cmd.h")) as f:
        impl_codes = re.findall(r'#define CR_E_[A-Z_]+\s+"([a-z-]+)"', f.read())
    check(set(impl_codes) <= set(codes),
          "error codes not documented: %s" % sorted(set(impl_codes) - set(codes)))
    check(set(codes) <= set(impl_codes),
          "documented codes that do not exist: %s" % sorted(set(codes) - set(impl_codes)))
    for want in ("status", "workers", "worker", "history", "scale", "restart", "reload", "kill",
                 "set", "events", "metrics", "stop", "ping"):
        check(want in cmds, "command %s not documented" % want)
    with Corrald(workers=1, name="docs") as d:
        for cmd in cmds:
            if cmd == "stop":
                continue
            r = d.request({"cmd": cmd})
            check(r.get("ok") or r["error"]["code"] != "unknown-command",
                  "documented command %s is unknown to corrald" % cmd)
        # Every key of a live status/worker answer is documented.
        st = d.request({"cmd": "status"})
        keys = set(st["supervisor"]) | set(st["workers"][0]) | set(st["supervisor"]["config"])
        missing = sorted(k for k in keys if "`%s`" % k not in text)
        check(not missing, "status fields not documented: %s" % missing)


def test_man():
    """The man pages cover every corrald option and every corralctl command."""
    import subprocess
    from charness import exe
    helptext = subprocess.run([exe("CORRALD"), "--help"], capture_output=True, text=True,
                              timeout=10).stdout
    with open(os.path.join(SRC, "docs", "man", "corrald.8.scd")) as f:
        page = f.read()
    opts = sorted(set(re.findall(r"(--[a-z][a-z-]+)", helptext)))
    check(len(opts) > 20, "corrald --help lists too few options")
    missing = [o for o in opts if "*%s*" % o not in page]
    check(not missing, "corrald.8 lacks options: %s" % missing)
    helptext = subprocess.run([exe("CORRALCTL"), "--help"], capture_output=True, text=True,
                              timeout=10).stdout
    with open(os.path.join(SRC, "docs", "man", "corralctl.1.scd")) as f:
        page = f.read()
    cmds = re.findall(r"^  ([a-z]+) ", helptext, re.M)
    check(len(cmds) >= 14, "corralctl --help lists too few commands: %s" % cmds)
    missing = [c for c in cmds if "*%s*" % c not in page]
    check(not missing, "corralctl.1 lacks commands: %s" % missing)


if __name__ == "__main__":
    ct.main(sys.modules[__name__])
