"""Suite `adapt`: --workers MIN..MAX against static N, under three loads.

Each load runs against static N = 1, N = cores, N = MAX and the adaptive
`--workers 1..MAX`, a fresh corrald each, the four alternated: round 1 in
that order, round 2 reversed, so that the shared machine's drift does not
favour one. Alongside every run:

- a prober: a /light every PROBE_MS by the clock, each on a new connection
  of its own thread (a blocked one does not delay the next);
- a sampler: `status` every SAMPLE_MS (workers_target, workers_ready and the
  scaler's measurements);
- a subscriber to the control socket's `events`, keeping the `scale` ones.

The load is a closed loop of C clients, a new connection per request (only
new connections wait in the accept queue, which is what the scaler reads).
Every loop is bounded in time; every request has a timeout.
"""

import math
import json
import os
import resource
import socket
import threading
import time

from common import (CLK_TCK, Corral, cpu_ticks, get, gnuplot, log, median, now_ms, pct, table,
                    write_csv)
from suites_load import Opts

MAX = 6
COOLDOWN_S = 5  # --scale-cooldown for every run (a static N ignores it)
PROBE_MS = 20
SAMPLE_MS = 250
PRE_S = 1.0  # observed before the load starts
HASH_MS = 50  # one /hashsync alone, on this machine


def _configs():
    cores = os.cpu_count() or 1
    return [('N=1', '1', 1), (f'N={cores} (cores)', str(cores), cores),
            (f'N={MAX} (MAX)', str(MAX), MAX), (f'adaptive 1..{MAX}', f'1..{MAX}', 1)]


# --- what runs alongside the load ------------------------------------------------

class Observer:
    """The prober, the sampler and the events subscriber of one run. Times
    are ms on our monotonic clock; the caller makes them relative."""

    def __init__(self, srv):
        self.srv = srv
        self.stop = threading.Event()
        self.probes, self.samples, self.events = [], [], []
        self.lock = threading.Lock()
        self.t_start = now_ms()
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self._probe_loop, self._sample_loop, self._event_loop)]
        self.sub_ready = threading.Event()
        for t in self.threads:
            t.start()
        self.sub_ready.wait(5)

    def _probe(self, t_send):
        try:
            st, _, _, ms = get(self.srv.port, '/light', timeout=10)
            ms = ms if st == 200 else float('nan')
        except OSError:
            ms = float('nan')
        with self.lock:
            self.probes.append((t_send, ms))

    def _probe_loop(self):
        flights, i = [], 0
        while not self.stop.is_set():
            t_send = self.t_start + i * PROBE_MS
            delay = (t_send - now_ms()) / 1000.0
            if delay > 0 and self.stop.wait(delay):
                break
            th = threading.Thread(target=self._probe, args=(t_send,), daemon=True)
            th.start()
            flights.append(th)
            i += 1
        for th in flights:
            th.join(11)

    def _sample_loop(self):
        i = 0
        while not self.stop.is_set():
            t = now_ms()
            try:
                st = self.srv.status()['supervisor']
                a = st.get('autoscale') or {}
                m = a.get('measured') or {}
                self.samples.append((t, st['workers_target'], st['workers_ready'],
                                     m.get('queue_length'), m.get('busy'),
                                     m.get('cpu_wanted_each'), m.get('idle_cores')))
            except (OSError, ValueError, KeyError):
                pass
            i += 1
            self.stop.wait(max(0.0, (self.t_start + i * SAMPLE_MS - now_ms()) / 1000.0))

    def _event_loop(self):
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(0.2)
                s.connect(self.srv.sock)
                s.sendall(b'{"cmd":"events"}\n')
                buf = b''
                while not self.stop.is_set():
                    try:
                        chunk = s.recv(65536)
                    except socket.timeout:
                        continue
                    if not chunk:
                        break
                    buf += chunk
                    while b'\n' in buf:
                        line, buf = buf.split(b'\n', 1)
                        t = now_ms()
                        ev = json.loads(line)
                        if ev.get('subscribed'):
                            self.sub_ready.set()
                        if ev.get('event') == 'scale':
                            self.events.append((t, ev.get('from'), ev.get('to'), ev.get('why'),
                                                ev.get('text', '')))
        except OSError as e:
            log(f'adapt: events subscriber: {e}')
        finally:
            self.sub_ready.set()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(15)


def _load(port, path, clients, secs):
    """C clients, each a request after the other on a new connection, for
    secs. Returns [(t_done_ms, ok)] and the start time (our clock)."""
    done, lock = [], threading.Lock()
    t0 = now_ms()
    end = t0 + secs * 1000.0

    def client():
        while now_ms() < end:
            try:
                st = get(port, path, timeout=30)[0]
                ok = st == 200
            except OSError:
                ok = False
                time.sleep(0.01)
            with lock:
                done.append((now_ms(), ok))

    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return done, t0


# --- where the CPU went ------------------------------------------------------------

def _host_busy():
    """(busy, total) jiffies of all CPUs, /proc/stat (idle and iowait not busy)."""
    with open('/proc/stat') as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4], sum(v)


def _self_cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _workers_ticks(srv):
    out = {}
    for pid in srv.worker_pids():
        try:
            out[pid] = cpu_ticks(pid)
        except OSError:
            pass
    return out


class CpuSplit:
    """The cores the host, the workers and this harness used over the load:
    what is left is the machine's other work (and corrald, a few %)."""

    def __init__(self, srv):
        self.srv = srv
        self.host0, self.self0 = _host_busy(), _self_cpu_s()
        self.w0, self.t0 = _workers_ticks(srv), time.monotonic()

    def end(self):
        host1, self1, w1 = _host_busy(), _self_cpu_s(), _workers_ticks(self.srv)
        secs = time.monotonic() - self.t0
        ncpu = os.cpu_count() or 1
        host = (host1[0] - self.host0[0]) / max(1, host1[1] - self.host0[1]) * ncpu
        workers = sum(t - self.w0.get(pid, 0) for pid, t in w1.items()) / CLK_TCK / secs
        harness = (self1 - self.self0) / secs
        return {'host': host, 'workers': workers, 'harness': harness,
                'others': max(0.0, host - workers - harness)}


# --- one run ----------------------------------------------------------------------

def _run(shape, label, workers, ready):
    """One corrald, one load; the figures and series of the run."""
    key, path, clients, secs, _ = shape
    srv = Corral(workers, ready=ready, extra=['--scale-cooldown', str(COOLDOWN_S)])
    adaptive = '..' in workers
    load1 = open('/proc/loadavg').read().split()[0]
    try:
        obs = Observer(srv)
        time.sleep(max(0.0, (obs.t_start + PRE_S * 1000.0 - now_ms()) / 1000.0))
        split = CpuSplit(srv)
        done, t0 = _load(srv.port, path, clients, secs)
        cpu = split.end()
        t_end = t0 + secs * 1000.0
        if key == 'burst' and adaptive:
            # Watch until N is back to MIN, bounded: the cool-down and 15 s.
            limit = t_end + (COOLDOWN_S + 15) * 1000.0
            while now_ms() < limit and not any(s[0] > t_end and s[1] == 1
                                               for s in list(obs.samples)):
                time.sleep(0.1)
            time.sleep(1.0)
        else:
            time.sleep(2.0 if key == 'burst' else 0.5)
        obs.finish()
    finally:
        srv.stop()
    rel = lambda t: (t - t0) / 1000.0  # noqa: E731 seconds since the load started
    ok = [rel(t) for t, good in done if good and t <= t_end]
    errors = sum(1 for _, good in done if not good)
    probes = sorted((rel(t), ms) for t, ms in obs.probes)
    samples = [(rel(s[0]),) + s[1:] for s in obs.samples]
    events = [(rel(e[0]),) + e[1:] for e in obs.events]
    in_load = [s for s in samples if 0 <= s[0] <= secs]
    ns = [s[1] for s in in_load]
    r = {'shape': key, 'label': label, 'adaptive': adaptive, 'secs': secs, 'loadavg': load1,
         'rps': len(ok) / secs, 'requests': len(ok), 'errors': errors, 'cpu': cpu,
         'light': [ms for t, ms in probes if 0 <= t <= secs],
         'n_load': ns, 'n_all_max': max((s[1] for s in samples), default=float('nan')),
         'probes': probes, 'samples': samples, 'events': events,
         'plateau_n': float('nan'), 'plateau_s': float('nan'), 'back_min_s': float('nan')}
    if adaptive and in_load:
        # The plateau: the N held at the end of the load; reached when N
        # last became it (and stayed until the end).
        plat = in_load[-1][1]
        since = in_load[-1][0]
        for s in reversed(in_load):
            if s[1] != plat:
                break
            since = s[0]
        r['plateau_n'], r['plateau_s'] = plat, since
        if key == 'burst':
            back = next((s[0] for s in samples if s[0] > secs and s[1] == 1), None)
            if back is not None:
                r['back_min_s'] = back - secs
    return r


# --- the suite ------------------------------------------------------------------------

def _calibrate():
    """iter for one /hashsync of ~HASH_MS here and now: the best of 3 runs of
    a 20000-iteration job, scaled (the machine is shared)."""
    srv = Corral(1)
    try:
        get(srv.port, '/hashsync?iter=1000')  # loads libcrypto
        runs = [json.loads(get(srv.port, '/hashsync?iter=20000')[2]) for _ in range(3)]
        ms = min(j['end_us'] - j['start_us'] for j in runs) / 1000.0
    finally:
        srv.stop()
    return max(1000, int(20000 * HASH_MS / ms) // 1000 * 1000), ms


def _shapes(iters):
    q = Opts.quick
    return [
        # key, path, clients, load seconds, title
        ('cpu', f'/hashsync?iter={iters}', 8, 6 if q else 20,
         f'CPU-bound step: 8 clients of /hashsync?iter={iters} (~{HASH_MS} ms of CPU each)'),
        ('block', '/sleepsync?ms=100', 8, 6 if q else 20,
         'blocking without the CPU: 8 clients of /sleepsync?ms=100'),
        ('burst', '/sleepsync?ms=100', 12, 5 if q else 8,
         '12 clients of /sleepsync?ms=100, then nothing'),
    ]


def _agg(runs):
    """The rounds of one (shape, config): req/s averaged, /light pooled, N
    pooled, times the worst round's."""
    light = [ms for r in runs for ms in r['light'] if ms == ms]
    failed = sum(1 for r in runs for ms in r['light'] if ms != ms)
    ns = [n for r in runs for n in r['n_load']]
    def worst(k):
        # A round that never got there (NaN) is the worst of all: max()
        # would skip a NaN that comes second.
        vals = [r[k] for r in runs]
        if any(math.isnan(v) for v in vals):
            return float('nan')
        return max(vals, default=float('nan'))
    return {'rps': sum(r['rps'] for r in runs) / len(runs), 'p50': pct(light, 50),
            'p99': pct(light, 99), 'failed': failed,
            'n_min': min(ns, default=float('nan')), 'n_med': median(ns),
            'n_max': max(ns, default=float('nan')),
            'n_all_max': worst('n_all_max'), 'plateau_n': worst('plateau_n'),
            'plateau_s': worst('plateau_s'), 'back_min_s': worst('back_min_s'),
            'errors': sum(r['errors'] for r in runs),
            'workers_cores': sum(r['cpu']['workers'] for r in runs) / len(runs),
            'other_cores': sum(r['cpu']['others'] for r in runs) / len(runs)}


def _timeline(key, runs):
    """Round 1's series of one shape, for the plot: the adaptive N (and what
    the scaler read) every SAMPLE_MS, and /light by send time per config."""
    ad = next(r for r in runs if r['adaptive'])
    write_csv(f'adapt-{key}-n.csv',
              ['t_s', 'workers_target', 'workers_ready', 'queue_length', 'busy',
               'cpu_wanted_each', 'idle_cores'],
              [[round(s[0], 3)] + [float('nan') if v is None else v for v in s[1:]]
               for s in ad['samples']])
    cols = [{round(t / (PROBE_MS / 1000.0)): ms for t, ms in r['probes']} for r in runs]
    idx = sorted(set().union(*cols))
    write_csv(f'adapt-{key}-light.csv', ['t_s'] + [r['label'] for r in runs],
              [[round(i * PROBE_MS / 1000.0, 3)] + [c.get(i, float('nan')) for c in cols]
               for i in idx])


def adapt():
    cores = os.cpu_count() or 1
    iters, ms20k = _calibrate()
    log(f'adapt: /hashsync?iter=20000 takes {ms20k:.1f} ms alone: iter={iters}')
    configs = _configs()
    shapes = _shapes(iters)
    rounds = 1 if Opts.quick else 2
    res = {}  # (shape key, label) -> [run per round]
    detail, events = [], []
    for rnd in range(rounds):
        order = configs if rnd % 2 == 0 else list(reversed(configs))
        for shape in shapes:
            for pos, (label, workers, ready) in enumerate(order):
                log(f'adapt: round {rnd + 1}, {shape[0]}, {label}')
                r = _run(shape, label, workers, ready)
                res.setdefault((shape[0], label), []).append(r)
                c = r['cpu']
                detail.append([shape[0], label, rnd + 1, pos + 1, r['loadavg'], r['rps'],
                               r['errors'], pct([m for m in r['light'] if m == m], 99),
                               max(r['n_load'], default=float('nan')), r['n_all_max'],
                               r['plateau_n'], r['plateau_s'], r['back_min_s'], c['host'],
                               c['workers'], c['harness'], c['others']])
                if r['adaptive']:
                    events += [[shape[0], rnd + 1, round(e[0], 2), e[1], e[2], e[3], e[4]]
                               for e in r['events']]
        if rnd == 0:
            for shape in shapes:
                _timeline(shape[0], [res[(shape[0], c[0])][0] for c in configs])
    rows = []
    for key, _, clients, secs, title in shapes:
        for label, _, _ in configs:
            a = _agg(res[(key, label)])
            rows.append([key, label, a['rps'], a['p50'], a['p99'], a['n_min'], a['n_med'],
                         a['n_max'], a['plateau_n'], a['plateau_s'], a['back_min_s'],
                         a['workers_cores'], a['other_cores'], a['errors'] + a['failed']])
    hdr = ['load', 'workers', 'req/s', '/light p50 ms', '/light p99 ms', 'N min', 'N median',
           'N max', 'plateau N', 's to plateau', 's back to MIN', 'workers cores', 'other cores',
           'errors']
    title = (f'adapt: static N vs --workers 1..{MAX} (--scale-cooldown {COOLDOWN_S}), '
             f'{rounds} round(s) alternated; /light every {PROBE_MS} ms')
    table(title, hdr, rows)
    for key, _, _, _, t in shapes:
        print(f'  {key}: {t}')
    write_csv('adapt.csv', hdr, rows)
    write_csv('adapt-runs.csv', ['load', 'workers', 'round', 'position', 'loadavg', 'req/s',
                                 'errors', '/light p99 ms', 'N max (load)', 'N max (run)',
                                 'plateau N', 's to plateau', 's back to MIN', 'host cores',
                                 'workers cores', 'harness cores', 'other cores'], detail)
    write_csv('adapt-events.csv', ['load', 'round', 't_s', 'from', 'to', 'why', 'text'], events)
    _answer(rows, cores)
    _plot(shapes, cores)


def _answer(rows, cores):
    g = {(r[0], r[1]): r for r in rows}
    ad = f'adaptive 1..{MAX}'
    cpu = [r for r in rows if r[0] == 'cpu']
    best = max((r for r in cpu if r[1] != ad), key=lambda r: r[2])
    a = g[('cpu', ad)]
    ok1 = a[2] >= 0.9 * best[2] and a[7] <= cores + 1
    print(f'answer: CPU-bound: adaptive {a[2]:.1f} req/s = {a[2] / best[2]:.2f}x the best static '
          f'({best[1]}, {best[2]:.1f}), N max {a[7]:.0f} (targets >= 0.9x and <= {cores + 1} '
          f'workers): {"met" if ok1 else "NOT met"}')
    b, s = g[('block', ad)], g[('block', f'N={cores} (cores)')]
    print(f'answer: blocking: adaptive {b[2]:.1f} req/s = {b[2] / s[2]:.2f}x N={cores} '
          f'(target >= 2x): {"met" if b[2] >= 2 * s[2] else "NOT met"}')
    c = g[('burst', ad)]
    ok3 = c[10] == c[10] and c[10] <= COOLDOWN_S + 5
    print(f'answer: burst: back to MIN {c[10]:.1f} s after the load ended (target <= '
          f'{COOLDOWN_S + 5} s): {"met" if ok3 else "NOT met"}')


def _plot(shapes, cores):
    panels = []
    for key, _, _, secs, title in shapes:
        panels.append(f"""
set title "{title}" noenhanced
set xrange [-{PRE_S}:*]
set arrow from 0, graph 0 to 0, graph 1 nohead dt 3 lc rgb '#808080'
set arrow from {secs}, graph 0 to {secs}, graph 1 nohead dt 3 lc rgb '#808080'
plot 'adapt-{key}-light.csv' using 1:3 skip 1 axes x1y2 with points pt 7 ps 0.25 lc rgb '#c0c0c0' title '/light ms, N={cores}', \\
     'adapt-{key}-light.csv' using 1:5 skip 1 axes x1y2 with points pt 7 ps 0.3 lc rgb '#d08030' title '/light ms, adaptive', \\
     1 with lines dt 2 lc rgb '#606060' title 'static N = 1, {cores}, {MAX}', \\
     {cores} with lines dt 2 lc rgb '#606060' notitle, \\
     {MAX} with lines dt 2 lc rgb '#606060' notitle, \\
     'adapt-{key}-n.csv' using 1:2 skip 1 with steps lw 2.5 lc rgb '#3060a0' title 'N (adaptive)'
unset arrow
""")
    gnuplot('adapt', f"""
set datafile missing 'n/a'
set multiplot layout 3,1
set xlabel 'seconds since the load started'
set ylabel 'workers (N)'
set yrange [0:{MAX + 1}]
set ytics 1 nomirror
set y2label '/light latency (ms, log)'
set logscale y2
set y2range [0.1:3000]
set y2tics
set key outside right
""" + ''.join(panels) + 'unset multiplot\n', size='1000,1100')
