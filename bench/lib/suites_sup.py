"""Suites 6-8: bounded child work, supervision costs, balance."""

import os
import re
import signal
import statistics
import threading
import time

from common import (Corral, NodePeer, concurrent_gets, cpu_ticks, CLK_TCK, get, gnuplot, log,
                    median, now_ms, pct, rss_kb, table, wrk, write_csv)
from suites_load import Opts


# --- 6. bounded child work -------------------------------------------------------

def _poll_health(port, stop, out):
    while not stop.is_set():
        t = now_ms()
        try:
            out.append(get(port, '/health', timeout=30)[3])
        except OSError:
            out.append(float('nan'))
        time.sleep(max(0.0, 0.05 - (now_ms() - t) / 1000.0))


def exec_bound():
    n, ms = 30, Opts.secs(200, 80)
    rows, jobs = [], []
    for idx, limit in enumerate((0, 2)):
        name = f'corral N=1 --exec-concurrency {limit}' + (' (unlimited)' if limit == 0 else '')
        log(f'exec: {name}')
        srv = Corral(1, worker_args=['--exec-concurrency', str(limit), '--exec-queue', '64'])
        stop, health = threading.Event(), []
        th = threading.Thread(target=_poll_health, args=(srv.port, stop, health))
        try:
            th.start()
            res = concurrent_gets(srv.port, [f'/exec?ms={ms}'] * n)
            stop.set()
            th.join()
        finally:
            srv.stop()
        done = sorted(r[1] for r in res if r[2] == 200)
        h = [x for x in health if x == x]
        rows.append([name, done[0] / 1000, statistics.mean(done) / 1000, done[-1] / 1000,
                     n - len(done), pct(h, 50), max(h)])
        jobs += [[idx, name, j, d] for j, d in enumerate(done)]
    hdr = ['server', 'first s', 'mean s', 'last s', 'failed', '/health p50 ms', '/health max ms']
    table(f'6. bounded child work: {n} concurrent /exec?ms={ms} (CPU ms per child)', hdr, rows)
    write_csv('exec.csv', hdr, rows)
    write_csv('exec-jobs.csv', ['side', 'server', 'job', 'done_ms'], jobs)
    print(f'answer: limit 2 answers the first job after {rows[1][1]:.2f} s instead of '
          f'{rows[0][1]:.2f} s and the mean after {rows[1][2]:.2f} s instead of {rows[0][2]:.2f} s, '
          f'the last at about the same time ({rows[1][3]:.2f} vs {rows[0][3]:.2f} s)')
    gnuplot('exec', """
set xlabel 'job (in completion order)'
set ylabel 'completed after (ms)'
set title '30 concurrent /exec jobs: completion times'
set key top left
plot 'exec-jobs.csv' using ($1==0?$3:1/0):4 skip 1 with linespoints pt 7 title 'unlimited', \\
     'exec-jobs.csv' using ($1==1?$3:1/0):4 skip 1 with linespoints pt 7 title 'limit 2'
""")


# --- 7. supervision costs -----------------------------------------------------------

def _served_by_new(port, old_pids, t0, timeout_s=10.0):
    """(ms from t0 until a /light is answered by a pid not in old_pids,
    requests lost on the way: errors or no answer within 250 ms)."""
    end, lost = time.monotonic() + timeout_s, 0
    while time.monotonic() < end:
        try:
            st, h, _, _ = get(port, '/light', timeout=0.25)
            if st == 200 and int(h.get('x-worker-pid', 0)) not in old_pids:
                return now_ms() - t0, lost
        except OSError:
            lost += 1
    return float('nan'), lost


def _restart_corral(reps, worker_args=()):
    srv = Corral(1, worker_args=worker_args, extra=['--backoff-initial', '1ms', '--backoff-max', '1ms',
                           '--crash-budget', '64', '--crash-window', '60s'])
    out = []
    try:
        for _ in range(reps):
            old = srv.worker_pids()
            t0 = now_ms()
            os.kill(old[0], signal.SIGKILL)
            out.append(_served_by_new(srv.port, set(old), t0))
            srv.wait_ready(1, 10)
            time.sleep(0.1)
        # corrald's own account: spawn -> READY of each replacement
        ready = [float(x) for x in re.findall(r'ready: pid \d+ after (\d+) ms', srv.log_text())[1:]]
    finally:
        srv.stop()
    return out, ready


def _node_pids(port, want=2, tries=50):
    pids = set()
    for _ in range(tries):
        pids.add(int(get(port, '/light')[1]['x-worker-pid']))
        if len(pids) >= want:
            break
    return pids


def _restart_node(reps):
    srv = NodePeer(2, 'rr')
    out, listening = [], []
    try:
        for _ in range(reps):
            old = _node_pids(srv.port)
            victim = min(old)
            seen = len(srv.lines)
            t0 = now_ms()
            os.kill(victim, signal.SIGKILL)
            out.append(_served_by_new(srv.port, old, t0))
            t, _ = srv.wait_line('restarted', seen)
            listening.append(t - t0 if t else float('nan'))
            time.sleep(0.1)
    finally:
        srv.stop()
    return out, listening


def _idle_cost(n, window):
    t = time.monotonic()
    srv = Corral(n, worker_args=['--file-size', '0'], ready_timeout=120)
    up = time.monotonic() - t
    try:
        time.sleep(1.0)
        c0, w0 = cpu_ticks(srv.pid), time.monotonic()
        time.sleep(window)
        cpu = (cpu_ticks(srv.pid) - c0) / CLK_TCK / (time.monotonic() - w0) * 100
        rss = rss_kb(srv.pid) / 1024
        wrss = sum(rss_kb(p) for p in srv.worker_pids()) / 1024
        rtt = []
        for _ in range(50):
            t0 = now_ms()
            srv.status()
            rtt.append(now_ms() - t0)
    finally:
        srv.stop()
    return [up, cpu, rss, wrss / n, median(rtt)]


def _cgroup_dirs(name):
    base = '/sys/fs/cgroup'
    return [os.path.join(base, c, name) for c in sorted(os.listdir(base))
            if os.path.isdir(os.path.join(base, c, name))]


def _rm_cgroup_tree(path):
    """rmdir a cgroup corrald created for this run, children first."""
    for root, dirs, _ in os.walk(path, topdown=False):
        for d in dirs:
            try:
                os.rmdir(os.path.join(root, d))
            except OSError as e:
                log(f'rmdir {os.path.join(root, d)}: {e}')
    try:
        os.rmdir(path)
    except OSError as e:
        log(f'rmdir {path}: {e}')


def _with_cgroup(fn):
    name = f'corral-bench-{os.getpid()}'
    if _cgroup_dirs(name):
        raise RuntimeError(f'{name} exists already')
    try:
        return fn('/' + name)
    finally:
        for d in _cgroup_dirs(name):
            _rm_cgroup_tree(d)


def _cgroup_cpu(window, parent):
    srv = Corral(64, worker_args=['--file-size', '0'], cgroup_parent=parent, ready_timeout=120)
    try:
        time.sleep(1.0)
        c0, w0 = cpu_ticks(srv.pid), time.monotonic()
        time.sleep(window)
        cpu = (cpu_ticks(srv.pid) - c0) / CLK_TCK / (time.monotonic() - w0) * 100
        rss = rss_kb(srv.pid) / 1024
        layout = srv.status()['supervisor']['cgroup'].get('layout')
    finally:
        srv.stop()
    return cpu, rss, layout


def _soft_limit(reps, parent):
    srv = Corral(1, cgroup_parent=parent,
                 extra=['--memory-max', '256M', '--memory-soft', '128M', '--soft-samples', '4',
                        '--sample-interval', '250'])
    out = []
    try:
        for _ in range(reps):
            old = srv.worker_pids()[0]
            seen = len(re.findall(r'after usage crossed the soft limit', srv.log_text()))
            for _ in range(28):  # 224 MB at most: past 128M, short of 256M
                get(srv.port, '/buffer?mb=8&retain=1', timeout=10)
                time.sleep(0.02)
                if srv.status()['workers'][0].get('retiring'):
                    break
            end = time.monotonic() + 10
            m = []
            while time.monotonic() < end:
                m = re.findall(r'replacement spawned (\d+) ms after usage crossed', srv.log_text())
                if len(m) > seen:
                    break
                time.sleep(0.05)
            out.append(float(m[-1]) if len(m) > seen else float('nan'))
            end = time.monotonic() + 20  # the old worker drains, the new one serves
            while time.monotonic() < end:
                ws = srv.status()['workers']
                if len(ws) == 1 and ws[0]['pid'] != old and ws[0]['state'] == 'ready':
                    break
                time.sleep(0.05)
    finally:
        srv.stop()
    return out


def supervision():
    reps = Opts.secs(20, 5)
    log('supervision: restart latency')
    c1, r1 = _restart_corral(reps)
    c0, r0 = _restart_corral(reps, ['--file-size', '0'])
    nserved, nlisten = _restart_node(reps)
    runs = [('corral N=1, backoff 1 ms', c1, median(r1)),
            ('corral N=1, backoff 1 ms, worker --file-size 0', c0, median(r0)),
            ('node cluster 2 rr', nserved, median(nlisten))]
    rows = []
    for name, res, start in runs:
        ms = [m for m, _ in res]
        rows.append([name, reps, median(ms), min(ms), max(ms), sum(n for _, n in res), start])
    c, nserved = [m for m, _ in c1], [m for m, _ in nserved]
    hdr = ['server', 'kills', 'median ms', 'min ms', 'max ms', 'requests lost',
           'start-up ms (median)']
    table('7a. restart latency: kill -9 a worker -> a /light answered by its replacement', hdr, rows)
    write_csv('restart.csv', hdr, rows)
    ratio = median(nserved) / median(c)
    print(f'answer: corral {median(c):.1f} ms vs node {median(nserved):.1f} ms = {ratio:.1f}x faster '
          f'(target <= 10 ms and >= 10x: {"met" if median(c) <= 10 and ratio >= 10 else "NOT met"})')

    window = Opts.secs(10, 3)
    rows = []
    for n in ((8, 64, 256) if not Opts.quick else (8, 64)):
        log(f'supervision: idle cost, {n} workers')
        rows.append([f'{n} workers, no cgroups'] + _idle_cost(n, window))
    hdr = ['corrald', 'all ready s', 'CPU %', 'RSS MiB', 'worker RSS MiB', 'status rtt ms']
    table(f'7b. corrald idle cost ({window} s window; reference worker --file-size 0)', hdr, rows)
    write_csv('idle.csv', hdr, rows)

    log('supervision: cgroups, 64 workers')
    cpu, rss, layout = _with_cgroup(lambda p: _cgroup_cpu(window, p))
    soft = _with_cgroup(lambda p: _soft_limit(Opts.secs(5, 2), p))
    rows = [['CPU % at 64 workers, cgroups, 250 ms sampling', cpu, f'layout {layout}, RSS {rss:.1f} MiB'],
            ['soft-limit reaction ms (median)', median(soft), ' '.join(f'{x:.0f}' for x in soft)]]
    hdr = ['figure', 'value', 'detail']
    table('7c. with cgroups (memory controller)', hdr, rows)
    write_csv('cgroups.csv', hdr, rows)
    gnuplot('restart', """
set style data histograms
set style fill solid 0.8
set ylabel 'ms (median of kills)'
set title 'kill -9 a worker: until its replacement serves'
set key off
set xtics rotate by -15
plot 'restart.csv' using 3:xtic(1) skip 1 lc rgb '#6040a0'
""")


# --- 8. balance -------------------------------------------------------------------------

def _per_worker(srv):
    return {w['id']: w['requests'] for w in srv.status()['workers']}


def balance():
    secs = Opts.secs(10, 2)
    rows, bars = [], []
    for mode in ('keep-alive', 'close'):
        for n in (2, 8):
            for bal in ('shared', 'reuseport'):
                name = f'corral N={n} {bal}, {mode}'
                log(f'balance: {name}')
                srv = Corral(n, balance=bal)
                try:
                    before = _per_worker(srv)
                    r = wrk(srv.port, '/light', secs=secs if mode == 'keep-alive' else max(2, secs // 2),
                            headers=[] if mode == 'keep-alive' else ['Connection: close'])
                    after = _per_worker(srv)
                finally:
                    srv.stop()
                counts = [after[k] - before.get(k, 0) for k in sorted(after)]
                mean = statistics.mean(counts)
                cv = statistics.pstdev(counts) / mean if mean else float('nan')
                rows.append([name, r['rps'], min(counts), max(counts), cv])
                bars += [[name, k, c] for k, c in zip(sorted(after), counts)]
    hdr = ['server', 'req/s', 'min per worker', 'max per worker', 'CV']
    table(f'8. balance: requests per worker over {secs} s of /light (wrk -c64 -t1)', hdr, rows)
    write_csv('balance.csv', hdr, rows)
    write_csv('balance-workers.csv', ['server', 'worker', 'requests'], bars)
    gnuplot('balance', """
set style data histograms
set style fill solid 0.8
set ylabel 'coefficient of variation of requests per worker'
set title 'balance: shared accept queue vs SO_REUSEPORT'
set xtics rotate by -25
set key off
plot 'balance.csv' using 5:xtic(1) skip 1 lc rgb '#a07020'
""")
