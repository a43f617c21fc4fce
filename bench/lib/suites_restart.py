"""Suite `restart` (issue 15): kill -9 -> a request answered by the replacement,
in one sitting, for corral without and with a warm spare, Node cluster and
PM2, each for the reference worker and for a Node worker (examples/node).

PM2 is installed from npm into the bench's build directory (never into the
repo) on first use, with PM2_HOME in a temp directory, and killed at the end.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from common import (BUILD, ROOT, WORKER, Corral, NodePeer, free_port, get, log, median, now_ms,
                    pct, table, write_csv)
from suites_load import Opts

NODE_SERVER = os.path.join(ROOT, 'examples', 'node', 'server.js')
PM2_DIR = os.path.join(BUILD, 'pm2')
PM2 = os.path.join(PM2_DIR, 'node_modules', '.bin', 'pm2')
# Back-to-back kills: without these a worker killed again before it ran 30 s
# backs off on purpose (100 ms, doubling).
FAST = ['--backoff-initial', '1ms', '--backoff-max', '1ms', '--crash-budget', '64',
        '--crash-window', '60s']


def _probe(port, old_pids, t0, timeout_s=10.0):
    """(ms from t0 until /light is answered by a pid not in old_pids, requests
    lost on the way). A probe is a fresh connection with a 250 ms timeout; an
    error or a timeout is a lost request, retried after 2 ms."""
    end, lost = time.monotonic() + timeout_s, 0
    while time.monotonic() < end:
        try:
            st, h, _, _ = get(port, '/light', timeout=0.25)
            if st == 200 and int(h.get('x-worker-pid', 0)) not in old_pids:
                return now_ms() - t0, lost
        except OSError:
            lost += 1
            time.sleep(0.002)
    return float('nan'), lost


def _pids_seen(port, want, tries=60):
    pids = set()
    for _ in range(tries):
        try:
            pids.add(int(get(port, '/light', timeout=2)[1]['x-worker-pid']))
        except OSError:
            pass
        if len(pids) >= want:
            break
    return pids


def _corral(reps, spares, command=None):
    extra = FAST + (['--spares', str(spares)] if spares else [])
    if command:
        extra += ['--'] + command
    srv = Corral(1, extra=extra)
    out = []
    try:
        for _ in range(reps):
            if spares:
                _wait(lambda: srv.status()['supervisor']['spares']['frozen'] >= spares, 20)
            old = srv.worker_pids()
            spare_pids = {w['pid'] for w in srv.status()['workers'] if w['state'] == 'spare'}
            t0 = now_ms()
            os.kill(old[0], signal.SIGKILL)
            ms, lost = _probe(srv.port, set(old), t0)
            out.append((ms, lost))
            if spares:  # the answer came from a process that existed before the kill
                st, h, _, _ = get(srv.port, '/light')
                assert int(h['x-worker-pid']) in spare_pids, (h, spare_pids)
            srv.wait_ready(1, 20)
            time.sleep(0.1)
    finally:
        srv.stop()
    return out


def _wait(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.02)
    raise RuntimeError('restart bench: condition not met in time')


def _node_cluster(reps):
    srv = NodePeer(2, 'rr')
    out = []
    try:
        for _ in range(reps):
            old = _pids_seen(srv.port, 2)
            seen = len(srv.lines)
            t0 = now_ms()
            os.kill(min(old), signal.SIGKILL)
            out.append(_probe(srv.port, old, t0))
            srv.wait_line('restarted', seen)
            time.sleep(0.1)
    finally:
        srv.stop()
    return out


def pm2_install():
    if os.path.exists(PM2):
        return True
    os.makedirs(PM2_DIR, exist_ok=True)
    log('restart: installing pm2 from npm into ' + PM2_DIR)
    r = subprocess.run(['npm', 'install', '--no-audit', '--no-fund', '--prefix', PM2_DIR, 'pm2@5'],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    return r.returncode == 0 and os.path.exists(PM2)


class Pm2:
    """A private PM2 daemon (PM2_HOME in a temp dir) running one app."""

    def __init__(self, app):
        self.home = tempfile.mkdtemp(prefix='corral-bench-pm2-')
        self.env = dict(os.environ, PM2_HOME=self.home)
        eco = os.path.join(self.home, 'eco.json')
        with open(eco, 'w') as f:
            json.dump({'apps': [app]}, f)
        subprocess.run([PM2, 'start', eco], env=self.env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)

    def stop(self):
        subprocess.run([PM2, 'kill'], env=self.env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=60)
        shutil.rmtree(self.home, ignore_errors=True)


def _pm2(reps, app, instances):
    port = free_port()
    app = dict(app, name='bench', instances=instances, max_restarts=1000, min_uptime=100,
               autorestart=True, restart_delay=0, env={'PORT': str(port)})
    if app.get('args'):
        app['args'] = [a.replace('PORT', str(port)) for a in app['args']]
    srv = Pm2(app)
    out = []
    try:
        _wait(lambda: len(_pids_seen(port, instances, tries=instances * 4)) >= instances, 30)
        for _ in range(reps):
            old = _pids_seen(port, instances)
            t0 = now_ms()
            os.kill(min(old), signal.SIGKILL)
            out.append(_probe(port, old, t0))
            _wait(lambda: len(_pids_seen(port, instances, tries=instances * 4)) >= instances, 30)
            time.sleep(0.1)
    finally:
        srv.stop()
    return out


def _row(name, worker, res, note=''):
    ms = [m for m, _ in res if m == m]
    return [name, worker, len(res), median(ms), pct(ms, 90), max(ms) if ms else float('nan'),
            sum(lost for _, lost in res), note]


def restart():
    reps = 20 if not Opts.quick else 5
    node = ['node', NODE_SERVER]
    have_pm2 = pm2_install()
    rows = []
    for worker, command in (('reference', None), ('node', node)):
        log(f'restart: corral, {worker} worker, no spare')
        rows.append(_row('corral N=1', worker, _corral(reps, 0, command)))
        log(f'restart: corral, {worker} worker, 1 spare')
        rows.append(_row('corral N=1 --spares 1', worker, _corral(reps, 1, command)))
        if worker == 'node':
            log('restart: node cluster 2 rr')
            rows.append(_row('node cluster 2 rr', worker, _node_cluster(reps)))
        else:
            rows.append(['node cluster 2 rr', worker, 0, float('nan'), float('nan'), float('nan'),
                         0, 'n/a: node:cluster forks Node scripts only'])
        if not have_pm2:
            rows.append(['pm2', worker, 0, float('nan'), float('nan'), float('nan'), 0,
                         'pm2 could not be installed'])
        elif worker == 'node':
            log('restart: pm2 cluster mode, 2 instances')
            rows.append(_row('pm2 cluster -i 2', worker,
                             _pm2(reps, {'script': NODE_SERVER, 'exec_mode': 'cluster'}, 2)))
        else:
            log('restart: pm2 fork mode, reference worker')
            rows.append(_row('pm2 fork -i 1', worker, _pm2(
                reps, {'script': WORKER, 'args': ['--listen', '127.0.0.1:PORT'],
                       'exec_mode': 'fork', 'exec_interpreter': 'none'}, 1),
                'the worker binds the port itself'))
    hdr = ['server', 'worker', 'kills', 'median ms', 'p90 ms', 'max ms', 'requests lost', 'note']
    table('restart: kill -9 a worker -> a /light answered by its replacement', hdr, rows)
    write_csv('restart-spares.csv', hdr, rows)
    for w in ('reference', 'node'):
        s = next(r for r in rows if r[0] == 'corral N=1 --spares 1' and r[1] == w)
        print(f'answer: {w} worker with a spare: {s[3]:.1f} ms median, p90 {s[4]:.1f} ms '
              f'(target <= 5 ms median: {"met" if s[3] <= 5 else "NOT met"})')


# --- scale: corrald at 256 workers (issue 15, item 4) ---------------------------

def _status_raw_ms(srv):
    """One `status` round trip, bytes only (no JSON parsing on this side)."""
    import socket
    t0 = now_ms()
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(srv.sock)
        s.sendall(b'{"cmd":"status"}\n')
        buf = b''
        while not buf.endswith(b'\n'):
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
    return now_ms() - t0, len(buf)


def _scale_row(name, n, parent, window):
    from common import CLK_TCK, cpu_ticks, rss_kb
    t = time.monotonic()
    srv = Corral(n, cgroup_parent=parent, ready_timeout=300)
    up = time.monotonic() - t
    try:
        # Past the start: every worker calm (stable and flat, so sampled
        # every eighth period) and its ring well filled.
        time.sleep(60.0 if not Opts.quick else 3.0)
        c0, w0 = cpu_ticks(srv.pid), time.monotonic()
        time.sleep(window)
        cpu = (cpu_ticks(srv.pid) - c0) / CLK_TCK / (time.monotonic() - w0) * 100
        rss = rss_kb(srv.pid) / 1024
        raw = [_status_raw_ms(srv) for _ in range(50)]
        ms = [r[0] for r in raw]
    finally:
        srv.stop()
    return [name, n, round(up, 2), cpu, rss, median(ms), pct(ms, 90), raw[0][1] // 1024]


def scale():
    from suites_sup import _with_cgroup
    window = 10 if not Opts.quick else 3
    rows = [_scale_row('256 workers, no cgroups', 256, None, window)]
    rows.append(_with_cgroup(lambda parent: _scale_row('256 workers, cgroups', 256, parent,
                                                       window)))
    hdr = ['corrald', 'workers', 'all ready s', 'idle CPU %', 'RSS MiB', 'status ms (median)',
           'status ms (p90)', 'status KiB']
    table('scale: corrald at 256 workers (targets: status <= 5 ms, CPU <= 1 %, RSS <= 8 MiB)',
          hdr, rows)
    write_csv('scale.csv', hdr, rows)
