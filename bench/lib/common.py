"""Shared machinery of bench/run: the servers it starts (corrald, the Node
peer, nginx), a small HTTP client, wrk, CSV output, tables and gnuplot.

Every process started here is recorded and stopped by its pid; every load
here is bounded in count and in time."""

import csv
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get('CORRAL_BENCH_BUILD', os.path.join(ROOT, 'build-bench'))
RESULTS = os.path.join(ROOT, 'bench', 'results')
IMG = os.path.join(ROOT, 'docs', 'img')
CORRALD = os.path.join(BUILD, 'supervisor', 'corrald')
WORKER = os.path.join(BUILD, 'worker', 'corral-worker')
NODE_PEER = os.path.join(ROOT, 'bench', 'peers', 'node', 'cluster.js')
HOST = '127.0.0.1'

_started = []  # every Popen this run started, stopped by pid at exit


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def now_ms():
    return time.monotonic() * 1000.0


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _spawn(argv, env=None, stdout=subprocess.DEVNULL, stderr=None):
    full = dict(os.environ)
    full.update(env or {})
    p = subprocess.Popen(argv, env=full, stdout=stdout,
                         stderr=stderr if stderr is not None else subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, text=True)
    _started.append(p)
    return p


def stop_proc(p, sig=signal.SIGTERM, grace=12.0):
    """Stop one process we started, by its pid: sig, then SIGKILL."""
    if p.poll() is None:
        try:
            os.kill(p.pid, sig)
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
        except ProcessLookupError:
            pass
    if p in _started:
        _started.remove(p)


def stop_all():
    for p in list(_started):
        stop_proc(p)


# --- HTTP ------------------------------------------------------------------

def get(port, path, timeout=10.0):
    """One request on a fresh connection: (status, headers dict, body, ms)."""
    t0 = now_ms()
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request('GET', path, headers={'Connection': 'close'})
        r = c.getresponse()
        body = r.read()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        return r.status, hdrs, body, now_ms() - t0
    finally:
        c.close()


def wait_http(port, path='/light', timeout=15.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if get(port, path, timeout=1.0)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f'nothing answers on port {port}')


def concurrent_gets(port, paths, timeout=60.0):
    """Send every path at once (a thread each); returns per request
    (t_send_ms, t_done_ms, status, headers, body) relative to the batch start."""
    out = [None] * len(paths)
    t0 = now_ms()
    gate = threading.Barrier(len(paths))

    def one(i):
        gate.wait()
        s = now_ms() - t0
        try:
            st, h, b, _ = get(port, paths[i], timeout)
        except OSError as e:
            st, h, b = 0, {}, str(e).encode()
        out[i] = (s, now_ms() - t0, st, h, b)

    ts = [threading.Thread(target=one, args=(i,)) for i in range(len(paths))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


# --- corrald ----------------------------------------------------------------

class Corral:
    """corrald on 127.0.0.1:<free port>, --no-cgroups unless cgroup_parent."""

    def __init__(self, workers, threadpool=None, balance=None, worker_args=(),
                 extra=(), cgroup_parent=None, logfile=None, ready_timeout=60.0, ready=None):
        self.port = free_port()
        self.tmp = tempfile.mkdtemp(prefix='corral-bench-')
        self.sock = os.path.join(self.tmp, 'control.sock')
        self.logpath = logfile or os.path.join(self.tmp, 'corrald.log')
        argv = [CORRALD, '--workers', str(workers), '--listen', f'{HOST}:{self.port}',
                '--control', self.sock]
        argv += ['--cgroup-parent', cgroup_parent] if cgroup_parent else ['--no-cgroups']
        if threadpool:
            argv += ['--threadpool', str(threadpool)]
        if balance:
            argv += ['--balance', balance]
        argv += list(extra)
        if worker_args:
            argv += ['--', WORKER] + list(worker_args)
        self.logf = open(self.logpath, 'w')
        self.proc = _spawn(argv, stderr=self.logf, stdout=self.logf)
        self.workers = workers
        # workers may be 'MIN..MAX': then `ready` says how many to wait for.
        self.wait_ready(ready if ready is not None else int(workers), ready_timeout)

    @property
    def pid(self):
        return self.proc.pid

    def ctl(self, obj, timeout=10.0):
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(timeout)
            s.connect(self.sock)
            s.sendall((json.dumps(obj) + '\n').encode())
            buf = b''
            while not buf.endswith(b'\n'):
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                buf += chunk
        return json.loads(buf)

    def status(self):
        return self.ctl({'cmd': 'status'})

    def wait_ready(self, n, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f'corrald exited {self.proc.returncode}; log {self.logpath}')
            try:
                st = self.status()
                if st['supervisor']['workers_ready'] >= n:
                    return st
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f'corrald: {n} workers not ready in {timeout}s; log {self.logpath}')

    def worker_pids(self):
        return [w['pid'] for w in self.status()['workers'] if w['state'] == 'ready']

    def log_text(self):
        self.logf.flush()
        with open(self.logpath) as f:
            return f.read()

    def stop(self):
        stop_proc(self.proc, grace=30.0)
        self.logf.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class NodePeer:
    """bench/peers/node/cluster.js: one process (workers=1) or a cluster."""

    def __init__(self, workers, policy='rr', threadpool=None):
        env = {'NODE_CLUSTER_SCHED_POLICY': policy}
        if threadpool:
            env['UV_THREADPOOL_SIZE'] = str(threadpool)
        self.proc = _spawn(['node', NODE_PEER, '--workers', str(workers), '--port', '0'],
                           env=env, stdout=subprocess.PIPE)
        self.lines = []
        self.cv = threading.Condition()
        line = self.proc.stdout.readline()
        m = re.match(r'listening (\d+)', line or '')
        if not m:
            stop_proc(self.proc)
            raise RuntimeError(f'node peer did not start: {line!r}')
        self.port = int(m.group(1))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append((now_ms(), line.strip()))
                self.cv.notify_all()

    def wait_line(self, prefix, after, timeout=10.0):
        end = time.monotonic() + timeout
        with self.cv:
            while True:
                for t, line in self.lines[after:]:
                    if line.startswith(prefix):
                        return t, line
                left = end - time.monotonic()
                if left <= 0:
                    return None, None
                self.cv.wait(left)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        stop_proc(self.proc)


class Nginx:
    """nginx `return 200` with 2 worker processes, everything in a temp dir."""

    CONF = """daemon off;
worker_processes {workers};
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location / {{ default_type text/plain; return 200 "ok"; }}
  }}
}}
"""

    def __init__(self, workers=2):
        self.tmp = tempfile.mkdtemp(prefix='corral-bench-nginx-')
        self.port = free_port()
        conf = os.path.join(self.tmp, 'nginx.conf')
        with open(conf, 'w') as f:
            f.write(self.CONF.format(workers=workers, tmp=self.tmp, port=self.port))
        self.proc = _spawn(['nginx', '-p', self.tmp, '-c', conf, '-e', os.path.join(self.tmp, 'error.log')])
        wait_http(self.port, '/')

    def stop(self):
        stop_proc(self.proc, sig=signal.SIGQUIT)
        shutil.rmtree(self.tmp, ignore_errors=True)


# --- wrk ----------------------------------------------------------------------

def _ms(text):
    m = re.match(r'([\d.]+)(us|ms|s|m)', text)
    v, u = float(m.group(1)), m.group(2)
    return v * {'us': 0.001, 'ms': 1.0, 's': 1000.0, 'm': 60000.0}[u]


def wrk(port, path, conns=64, threads=1, secs=5, timeout='10s', headers=()):
    """wrk --latency; returns req/s, p50/p99 ms, requests, errors."""
    argv = ['wrk', f'-c{conns}', f'-t{threads}', f'-d{secs}s', '--latency', '--timeout', timeout]
    for h in headers:
        argv += ['-H', h]
    out = subprocess.run(argv + [f'http://{HOST}:{port}{path}'],
                         capture_output=True, text=True, timeout=secs + 30).stdout
    res = {'rps': float(re.search(r'Requests/sec:\s+([\d.]+)', out).group(1)),
           'requests': int(re.search(r'(\d+) requests in', out).group(1))}
    for q in ('50', '99'):
        m = re.search(rf'^\s+{q}%\s+(\S+)', out, re.M)
        res[f'p{q}'] = _ms(m.group(1)) if m else float('nan')
    errs = re.search(r'Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)', out)
    non2xx = re.search(r'Non-2xx or 3xx responses: (\d+)', out)
    res['errors'] = (sum(int(x) for x in errs.groups()) if errs else 0) + \
        (int(non2xx.group(1)) if non2xx else 0)
    return res


# --- numbers, CSV, tables, plots ---------------------------------------------

def pct(values, q):
    """Nearest-rank percentile of a list (q in 0..100)."""
    if not values:
        return float('nan')
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(q / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def median(values):
    return statistics.median(values) if values else float('nan')


def write_csv(name, header, rows):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name)
    with open(path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(header)
        for r in rows:
            w.writerow([fmt(x) for x in r])
    return path


def fmt(x):
    if isinstance(x, float):
        if x != x:
            return 'n/a'
        return f'{x:.0f}' if abs(x) >= 1000 else f'{x:.3g}' if abs(x) < 10 else f'{x:.1f}'
    return str(x)


def table(title, header, rows):
    cells = [[str(h) for h in header]] + [[fmt(x) for x in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f'\n== {title}')
    for n, r in enumerate(cells):
        print('  '.join(c.rjust(w) if n and i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            print('  '.join('-' * w for w in widths))
    sys.stdout.flush()


def gnuplot(name, script, size='900,500'):
    """Render docs/img/<name>.png from a gnuplot script (paths resolved
    against bench/results)."""
    os.makedirs(IMG, exist_ok=True)
    out = os.path.join(IMG, name + '.png')
    head = (f"set terminal pngcairo size {size} font 'DejaVu Sans,10'\n"
            f"set output '{out}'\nset datafile separator ','\nset key outside right\n"
            f"cd '{RESULTS}'\n")
    r = subprocess.run(['gnuplot'], input=head + script, text=True, capture_output=True)
    if r.returncode != 0:
        log(f'gnuplot {name}: {r.stderr.strip()}')
    return out


# --- /proc ----------------------------------------------------------------------

CLK_TCK = os.sysconf('SC_CLK_TCK')


def cpu_ticks(pid):
    with open(f'/proc/{pid}/stat') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime


def rss_kb(pid):
    with open(f'/proc/{pid}/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0
