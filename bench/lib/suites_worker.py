"""Suites about the reference worker itself: its start-up cost (issue 15,
item 2). Every process is started and stopped by pid (the C spawner does
that for the workers it times); every run is bounded in count."""

import os
import shutil
import subprocess

from common import BUILD, RESULTS, ROOT, WORKER, log, median, pct, table, write_csv

SPAWNER_SRC = os.path.join(ROOT, 'bench', 'lib', 'spawn_ready.c')
FLOOR_SRC = os.path.join(ROOT, 'bench', 'lib', 'ready_floor.c')


def _cc(src, exe, libs=()):
    """Builds a helper into the bench build directory when it is stale."""
    os.makedirs(os.path.dirname(exe), exist_ok=True)
    if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(src):
        return exe
    cc = os.environ.get('CC') or shutil.which('cc') or shutil.which('gcc')
    if not cc:
        raise RuntimeError('needs a C compiler (cc)')
    subprocess.run([cc, '-O2', '-Wall', '-o', exe, src] + list(libs), check=True)
    return exe


def spawner():
    return _cc(SPAWNER_SRC, os.path.join(BUILD, 'bench', 'spawn_ready'))


def floor_program():
    return _cc(FLOOR_SRC, os.path.join(BUILD, 'bench', 'ready_floor'), ['-lsystemd'])


def spawn_times(worker, args=(), n=50, rt=False):
    """n spawn -> READY times in ms (after one warm-up start)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('LISTEN_', 'CORRAL_', 'WATCHDOG_')) and k != 'NOTIFY_SOCKET'}
    env.update(CORRAL_WORKER_ID='1', CORRAL_GENERATION='1')
    cmd = [spawner(), str(n), os.path.abspath(worker)] + list(args)
    if rt:
        cmd = ['chrt', '-f', '10'] + cmd
    out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=True, timeout=600).stdout
    return sorted(float(x) for x in out.split())


def summary(ms):
    return [min(ms), median(ms), pct(ms, 90), max(ms)]


def startup():
    """Spawn -> READY: the reference worker, optionally an older build of it
    (CORRAL_BENCH_BEFORE=<path to corral-worker>), and the floor program,
    50 starts each, under SCHED_FIFO (the start's own cost) and without."""
    sides = [('corral-worker', WORKER)]
    before = os.environ.get('CORRAL_BENCH_BEFORE')
    if before:
        sides.append(('corral-worker before (' + os.environ.get('CORRAL_BENCH_BEFORE_LABEL', 'older build') + ')',
                      before))
    sides.append(('floor: C + libsystemd, READY only', floor_program()))
    rows = []
    for rt in (True, False):
        for name, exe in sides:
            log(f'startup: {name}{" (SCHED_FIFO)" if rt else ""}')
            rows.append([name, 'SCHED_FIFO 10' if rt else 'normal'] + summary(spawn_times(exe, rt=rt)))
    hdr = ['program', 'scheduling', 'min ms', 'median ms', 'p90 ms', 'max ms']
    table('9. worker start-up: fork -> READY=1, 50 starts', hdr, rows)
    write_csv('startup.csv', hdr, rows)
    med = rows[0][3]
    print(f'answer: corral-worker spawn -> READY median {med:.2f} ms under SCHED_FIFO '
          f'(target <= 3 ms): {"met" if med <= 3 else "NOT met"}')
