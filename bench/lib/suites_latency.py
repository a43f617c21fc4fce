"""The loop's latency while it starts 1000 workers: bench/loop-latency run
a few times in the sitting (docs/reliability.md, "Loop latency")."""
import os
import re
import subprocess
import sys

from common import BUILD, ROOT, log, median, table, write_csv
from suites_load import Opts

RUNS = 3
LINE = re.compile(r'during spawning: (\d+) pings: p50 ([\d.]+) ms, p99 ([\d.]+) ms, '
                  r'max ([\d.]+) ms')
READY = re.compile(r'^(\d+) ready after ([\d.]+) s', re.M)
STEAL = re.compile(r'host steal [\d.]+ ms \(([\d.]+) %')


def _run(n):
    argv = [sys.executable, os.path.join(ROOT, 'bench', 'loop-latency'), '--pinger-fifo',
            '--cgroups', '--worker-args', '--loop-resolution 1000',
            '--corrald', os.path.join(BUILD, 'supervisor', 'corrald'),
            '--worker', os.path.join(BUILD, 'worker', 'corral-worker'), 'scale', str(n)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    m, ready = LINE.search(out), READY.search(out)
    if r.returncode != 0 or not m or not ready:
        raise RuntimeError(f'bench/loop-latency failed ({r.returncode}):\n{out[-2000:]}')
    steal = STEAL.search(out[m.start():])
    return [int(ready.group(1)), float(ready.group(2)), int(m.group(1)), float(m.group(2)),
            float(m.group(3)), float(m.group(4)), float(steal.group(1)) if steal else float('nan')]


def latency():
    n = 1000 if not Opts.quick else 100
    if os.geteuid() != 0:
        raise RuntimeError('the latency suite needs root (per-worker cgroups)')
    rows = []
    for i in range(1 if Opts.quick else RUNS):
        log(f'latency: run {i + 1}: scale {n}')
        rows.append([f'run {i + 1}'] + _run(n))
    rows.append(['median'] + [median([r[k] for r in rows]) for k in range(1, len(rows[0]))])
    hdr = ['run', 'ready', 'ready after s', 'pings', 'p50 ms', 'p99 ms', 'max ms', 'host steal %']
    table(f'latency: pings to corrald while `scale {n}` spawns, with cgroups, the pinger '
          'SCHED_FIFO (target: max <= 20 ms)', hdr, rows)
    write_csv('latency.csv', hdr, rows)
