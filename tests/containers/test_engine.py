"""The OOM scenarios in a real container engine on this host (issue 14):
a private dockerd or podman (tests/containers/engines.py), the image built
from containers/Containerfile, and corral-lab --container ENGINE asserting
corral's category and the engine's own verdict:

  container-oom            -> oom-ancestor-limit (the container's 200M, corrald
                              with --no-cgroups), the container survives;
  container-oom-contained  -> oom-own-limit, siblings alive, the container is
                              not OOM-killed (exit code 0 after stop);
  heap-limit               -> 134, the heap limit derived from the container's;
  stop-drain               -> `ENGINE stop` drains an in-flight request, exit 0.

  python3 test_engine.py docker|podman
Exit 0 = pass, 77 = skip (not root, engine not installed), else fail."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engines  # noqa: E402

LAB = os.environ["CORRAL_LAB"]
SCENARIOS = ["container-oom", "container-oom-contained", "heap-limit", "stop-drain"]


def lab(eng, scenarios):
    env = dict(os.environ, **eng.env())
    r = subprocess.run([sys.executable, LAB, "--json", "--container", eng.name] + scenarios,
                       capture_output=True, text=True, env=env, timeout=600)
    reports = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    for rep in reports:
        print(json.dumps(rep, indent=1))
    if r.stderr:
        print(r.stderr, file=sys.stderr)
    return {rep["scenario"]: rep for rep in reports}


def startup_messages(eng):
    """A default container (read-only cgroup mount; on v1 docker's default
    is the host's cgroup namespace) makes corrald fail at start-up with one
    line naming the cause and the fix."""
    out = {}
    for label, flags in (("default", []), ("private-ns", ["--cgroupns=private"])):
        r = subprocess.run(eng.cmd + ["run", "--rm", "--network", "none"] + flags + eng.run_flags()
                           + [eng.image, "--workers", "1"], capture_output=True, text=True,
                           timeout=120)
        # The cause's line: "fix: ..." or, for a read-only mount, "routes to
        # writable cgroups: ..."; both end with --no-cgroups.
        line = [x for x in (r.stdout + r.stderr).splitlines()
                if "fix:" in x or "routes to writable cgroups:" in x]
        print(f"{eng.name} {label}: exit {r.returncode}: {line}")
        out[label] = (r.returncode, line)
    return out


def main():
    if os.geteuid() != 0:
        return engines.SKIP
    try:
        eng = engines.engine(sys.argv[1])
    except engines.Unavailable as e:
        print(e)
        return engines.SKIP
    try:
        eng.build_image()
        msgs = startup_messages(eng)
        reps = lab(eng, SCENARIOS)
    finally:
        eng.close()
    bad = []
    for s in SCENARIOS:
        rep = reps.get(s)
        if not rep or rep.get("ok") is not True:
            bad.append((s, rep and (rep.get("mismatch") or rep.get("error")
                                    or rep.get("skipped"))))
    for label, (rc, line) in msgs.items():
        if rc == 0 or not line or ("--no-cgroups" not in line[0]):
            bad.append((f"start-up message ({label})", rc, line))
    if not any("read-only" in x for x in msgs["private-ns"][1]):
        bad.append(("read-only mount not named", msgs["private-ns"]))
    co = reps.get("container-oom", {}).get("happened", {})
    if co.get("death", {}).get("category") != "oom-ancestor-limit":
        bad.append(("container-oom category", co.get("death")))
    cc = reps.get("container-oom-contained", {}).get("happened", {})
    v = cc.get("engine_verdict_after_stop", {})
    if v.get("exit_code") != 0:
        bad.append(("container-oom-contained verdict", v))
    # docker reports OOMKilled=true when any process in the container was
    # OOM-killed, even though the container itself exited 0 (podman 4.3
    # leaves it false): record it, the exit code is what tells.
    print(f"{eng.name}: OOMKilled after a worker's OOM kill: container-oom "
          f"{co.get('engine_verdict_after_stop', {}).get('oom_killed')}, contained "
          f"{v.get('oom_killed')}")
    if bad:
        print("FAILED:", bad)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
