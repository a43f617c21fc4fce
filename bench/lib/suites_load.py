"""Suites 1-5: throughput, isolation, thread pool, loop-bound CPU, file reads.
Each run() prints its table, writes bench/results/<suite>*.csv and plots."""

import threading
import time

from common import (Corral, Nginx, NodePeer, concurrent_gets, get, gnuplot, log,
                    now_ms, pct, table, wrk, write_csv)

import json


class Opts:
    quick = False

    @classmethod
    def secs(cls, full, quick):
        return quick if cls.quick else full


def _corral(n, **kw):
    return lambda: Corral(n, **kw)


# --- 1. throughput -------------------------------------------------------------

def throughput():
    secs = Opts.secs(5, 2)
    sides = [('corral N=1', _corral(1)), ('corral N=2', _corral(2)),
             ('node 1 process', lambda: NodePeer(1)), ('node cluster 2 (rr)', lambda: NodePeer(2)),
             ('nginx return 200 (2 workers)', lambda: Nginx(2))]
    rows = []
    for name, start in sides:
        log(f'throughput: {name}')
        srv = start()
        try:
            path = '/' if isinstance(srv, Nginx) else '/light'
            wrk(srv.port, path, secs=1)  # warm-up
            r = wrk(srv.port, path, secs=secs)
        finally:
            srv.stop()
        rows.append([name, r['rps'], r['p50'], r['p99'], r['errors']])
    ceiling = rows[-1][1]
    rows = [r[:2] + [r[1] / ceiling] + r[2:] for r in rows]
    hdr = ['server', 'req/s', 'x nginx', 'p50 ms', 'p99 ms', 'errors']
    table(f'1. throughput: /light, wrk -c64 -t1 -d{secs}s', hdr, rows)
    write_csv('throughput.csv', hdr, rows)
    c2 = rows[1][2]
    print(f'answer: corral N=2 = {c2:.2f}x nginx (target >= 0.9): '
          f'{"met" if c2 >= 0.9 else "NOT met"}')
    gnuplot('throughput', """
set style data histograms
set style fill solid 0.8
set ylabel 'requests/s'
set title '/light throughput, wrk -c64 -t1'
set xtics rotate by -20
set key off
plot 'throughput.csv' using 2:xtic(1) skip 1 lc rgb '#3060a0'
""")


# --- 2. isolation ----------------------------------------------------------------

def _isolation_run(port, secs, heavy):
    """A /light every 100 ms on a fresh connection for secs, while (if heavy)
    another client sends /heavy?ms=2000 back to back. Returns [(t_s, ms)]."""
    stop = threading.Event()

    def heavy_loop():
        while not stop.is_set():
            try:
                get(port, '/heavy?ms=2000', timeout=30)
            except OSError:
                time.sleep(0.05)

    th = threading.Thread(target=heavy_loop) if heavy else None
    if th:
        th.start()
        time.sleep(0.2)  # the first /heavy is running
    # A /light every 100 ms by the clock, each on its own thread: a blocked
    # one does not delay the next one's sending.
    samples, lights, t0 = [], [], now_ms()
    lock = threading.Lock()

    def light(t_s):
        try:
            ms = get(port, '/light', timeout=10)[3]
        except OSError:
            ms = float('nan')
        with lock:
            samples.append((t_s, ms))

    for i in range(int(secs * 10)):
        time.sleep(max(0.0, (t0 + i * 100 - now_ms()) / 1000.0))
        t = threading.Thread(target=light, args=(i / 10.0,))
        t.start()
        lights.append(t)
    for t in lights:
        t.join()
    samples.sort()
    stop.set()
    if th:
        th.join()
    return samples


def isolation():
    secs = Opts.secs(6, 3)
    sides = [('corral N=1', 'corral-n1', _corral(1)),
             ('corral N=2 shared', 'corral-n2', _corral(2)),
             ('corral N=2 reuseport', 'corral-n2-rp', _corral(2, balance='reuseport')),
             ('node 1 process', 'node-1', lambda: NodePeer(1)),
             ('node cluster 2 rr', 'node-rr', lambda: NodePeer(2, 'rr')),
             ('node cluster 2 none', 'node-none', lambda: NodePeer(2, 'none'))]
    rows, series = [], []
    for name, key, start in sides:
        srv = start()
        try:
            for heavy in ([False, True] if key == 'corral-n2' else [True]):
                log(f'isolation: {name} heavy={heavy}')
                s = _isolation_run(srv.port, secs, heavy)
                lat = [ms for _, ms in s if ms == ms]
                label = name + ('' if heavy else ' (no /heavy)')
                rows.append([label, len(s), pct(lat, 50), pct(lat, 99), max(lat), len(s) - len(lat)])
                if heavy:
                    write_csv(f'isolation-{key}.csv', ['t_s', 'light_ms'], s)
                    series.append((key, name))
        finally:
            srv.stop()
    hdr = ['server', 'requests', 'p50 ms', 'p99 ms', 'max ms', 'failed']
    table(f'2. isolation: /light every 100 ms for {secs}s while /heavy?ms=2000 runs back to back',
          hdr, rows)
    write_csv('isolation.csv', hdr, rows)
    base, under = rows[1][3], rows[2][3]
    print(f'answer: corral N=2 /light p99 under /heavy {under:.2f} ms vs {base:.2f} ms without '
          f'= {under / base:.1f}x (target <= 2x): {"met" if under <= 2 * base else "NOT met"}')
    plots = ', '.join(f"'isolation-{k}.csv' using 1:2 skip 1 with linespoints pt 7 ps 0.5 title '{n}'"
                      for k, n in series)
    gnuplot('isolation', f"""
set logscale y
set xlabel 'time (s)'
set ylabel '/light latency (ms, log)'
set title '/light every 100 ms while /heavy?ms=2000 runs back to back'
plot {plots}
""")


# --- 3. thread pool ----------------------------------------------------------------

HASH_MS = 300  # the target duration of one /hash job, alone, on this machine


def _calibrate_hash():
    """iter for one /hash job of ~HASH_MS here and now (the machine is shared:
    the best of 3 runs of a 100000-iteration job, scaled)."""
    srv = Corral(1, threadpool=1)
    try:
        runs = [json.loads(get(srv.port, '/hash?iter=100000')[2]) for _ in range(3)]
        best = min(runs, key=lambda j: j['end_us'] - j['start_us'])
    finally:
        srv.stop()
    ms = (best['end_us'] - best['start_us']) / 1000.0
    return max(1000, int(100000 * HASH_MS / ms) // 1000 * 1000), ms


def _stamps(rows, node):
    """Per-job (start, end) in ms on the server's own clock, from the body."""
    out = []
    for _, _, st, _, body in rows:
        if st != 200:
            out.append((float('nan'), float('nan')))
            continue
        j = json.loads(body)
        if node:
            out.append((j['start'], j['end']))
        else:
            out.append((j['start_us'] / 1000.0, j['end_us'] / 1000.0))
    return out


def threadpool():
    iters, ms100k = _calibrate_hash()
    if Opts.quick:
        iters //= 2
    log(f'threadpool: /hash?iter=100000 takes {ms100k:.0f} ms alone: iter={iters}')
    sides = [('corral N=1 pool 1', 'c-p1', _corral(1, threadpool=1), False),
             ('corral N=1 pool 4', 'c-p4', _corral(1, threadpool=4), False),
             ('corral N=1 pool 8', 'c-p8', _corral(1, threadpool=8), False),
             ('corral N=2 pool 4', 'c-2x4', _corral(2, threadpool=4), False),
             ('node 1 process pool 4', 'n-p4', lambda: NodePeer(1, threadpool=4), True),
             ('node cluster 2 pool 4', 'n-2x4', lambda: NodePeer(2, threadpool=4), True)]
    rows, bars = [], []
    for idx, (name, key, start, node) in enumerate(sides):
        log(f'threadpool: {name}')
        srv = start()
        try:
            get(srv.port, f'/hash?iter={iters // 10}')  # warm-up
            res = concurrent_gets(srv.port, [f'/hash?iter={iters}'] * 8)
        finally:
            srv.stop()
        st = _stamps(res, node)
        t0 = min(s for s, _ in st)
        jobs = sorted(((s - t0, e - t0) for s, e in st), key=lambda x: x[1])
        per_job = [e - s for s, e in jobs]
        done = [r[1] for r in res]
        rows.append([name, pct(per_job, 50), min(done), max(done), sum(r[2] != 200 for r in res)])
        for j, (s, e) in enumerate(jobs):
            bars.append([idx, name, j, s, e])
    hdr = ['server', 'per-job ms (median)', 'first done ms', 'total ms', 'failed']
    table(f'3. thread pool: 8 concurrent /hash?iter={iters}', hdr, rows)
    write_csv('threadpool.csv', hdr, rows)
    write_csv('threadpool-jobs.csv', ['side', 'server', 'job', 'start_ms', 'end_ms'], bars)
    t = {r[0]: r[3] for r in rows}
    print(f"answer: total time pool 1/4/8 = {t['corral N=1 pool 1']:.0f}/{t['corral N=1 pool 4']:.0f}/"
          f"{t['corral N=1 pool 8']:.0f} ms; 2 workers x pool 4 = {t['corral N=2 pool 4']:.0f} ms: "
          f"a bigger pool starts more at once, but two cores finish at the same time")
    ytics = ', '.join(f"'{n}' {i * 10 + 4}" for i, (n, *_rest) in enumerate(sides))
    gnuplot('threadpool', f"""
set xlabel 'ms since the first job started (server clock)'
set ytics ({ytics})
set yrange [-2:{len(sides) * 10}]
set key off
set title '8 concurrent /hash jobs: one bar per job, start to end'
plot 'threadpool-jobs.csv' using 4:($1*10+$3):($5-$4):(0):($1+1) skip 1 with vectors nohead lw 5 lc variable
""")


# --- 4. loop-bound CPU ---------------------------------------------------------------

def loopbound():
    secs = Opts.secs(4, 2)
    iters = 20000  # ~10 ms on the loop per request
    sides = [('corral N=1 pool 1', _corral(1, threadpool=1)),
             ('corral N=1 pool 4', _corral(1, threadpool=4)),
             ('corral N=1 pool 16', _corral(1, threadpool=16)),
             ('corral N=2 pool 4', _corral(2, threadpool=4)),
             ('node 1 process', lambda: NodePeer(1)),
             ('node cluster 2 rr', lambda: NodePeer(2))]
    rows = []
    for name, start in sides:
        log(f'loopbound: {name}')
        srv = start()
        try:
            r = wrk(srv.port, f'/hashsync?iter={iters}', conns=8, secs=secs)
        finally:
            srv.stop()
        rows.append([name, r['rps'], r['p50'], r['p99'], r['errors']])
    one = rows[0][1]
    rows = [r[:2] + [r[1] / one] + r[2:] for r in rows]
    hdr = ['server', 'req/s', 'x N=1 pool 1', 'p50 ms', 'p99 ms', 'errors']
    table(f'4. loop-bound CPU: /hashsync?iter={iters}, wrk -c8 -t1 -d{secs}s', hdr, rows)
    write_csv('loopbound.csv', hdr, rows)
    two, p16 = rows[3][2], rows[2][2]
    print(f'answer: 2 workers = {two:.2f}x one worker (target >= 1.8: {"met" if two >= 1.8 else "NOT met"}); '
          f'pool 16 = {p16:.2f}x pool 1 (target <= 1.1: {"met" if p16 <= 1.1 else "NOT met"})')
    gnuplot('loopbound', """
set style data histograms
set style fill solid 0.8
set ylabel 'requests/s'
set title '/hashsync (CPU on the event loop), 8 concurrent'
set xtics rotate by -20
set key off
plot 'loopbound.csv' using 2:xtic(1) skip 1 lc rgb '#a04030'
""")


# --- 5. file reads ----------------------------------------------------------------------

def filereads():
    n = 50
    sides = [('corral N=1 pool 1', _corral(1, threadpool=1)),
             ('corral N=1 pool 10', _corral(1, threadpool=10)),
             ('corral N=2 pool 1', _corral(2, threadpool=1)),
             ('node 1 process pool 1', lambda: NodePeer(1, threadpool=1)),
             ('node 1 process pool 10', lambda: NodePeer(1, threadpool=10))]
    rows = []
    for name, start in sides:
        log(f'filereads: {name}')
        srv = start()
        try:
            get(srv.port, '/file?mb=10')  # warm the page cache
            res = concurrent_gets(srv.port, ['/file?mb=10'] * n)
        finally:
            srv.stop()
        done = [r[1] for r in res if r[2] == 200]
        rows.append([name, pct(done, 50), max(done) if done else float('nan'), n - len(done)])
    hdr = ['server', 'median done ms', 'total ms', 'failed']
    table(f'5. file reads: {n} concurrent /file?mb=10', hdr, rows)
    write_csv('filereads.csv', hdr, rows)
    print(f'answer: pool 1 total {rows[0][2]:.0f} ms vs pool 10 {rows[1][2]:.0f} ms '
          f'({rows[0][2] / rows[1][2]:.1f}x); 2 workers x pool 1: {rows[2][2]:.0f} ms')
    gnuplot('filereads', """
set style data histograms
set style fill solid 0.8
set ylabel 'ms until all 50 reads are answered'
set title '50 concurrent /file?mb=10'
set xtics rotate by -20
set key off
plot 'filereads.csv' using 3:xtic(1) skip 1 lc rgb '#308040'
""")
