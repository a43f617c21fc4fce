"""Regenerates docs/benchmarks.md from bench/results/*.csv and meta.json,
and, after a full sitting (every suite of one `bench/run`), the README's
"Numbers" table and the sittings' history (bench/results/sittings.json).
No number in the documents is typed by hand: tables are the CSVs, and the
sentences under them read their figures from the same CSVs."""

import csv
import json
import os

from common import RESULTS, ROOT

DOC = os.path.join(ROOT, 'docs', 'benchmarks.md')
README = os.path.join(ROOT, 'README.md')
SITTINGS = os.path.join(RESULTS, 'sittings.json')
EARLIER = os.path.join(ROOT, 'bench', 'history', 'readme-before-2026-12-02.md')
README_BEGIN = '<!-- numbers: bench/lib/mkdoc.py writes this table after a full bench/run -->'
README_END = '<!-- /numbers -->'


def load(name):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return list(csv.reader(f))


def md_table(rows):
    if not rows:
        return '_(no result yet: run the suite)_\n'
    out = ['| ' + ' | '.join(rows[0]) + ' |', '|' + '---|' * len(rows[0])]
    out += ['| ' + ' | '.join(r) + ' |' for r in rows[1:]]
    return '\n'.join(out) + '\n'


def num(rows, label, col):
    """The figure in column col (header name) of the row whose first cell
    is label; nan when absent."""
    try:
        c = rows[0].index(col)
        for r in rows[1:]:
            if r[0] == label:
                return float(r[c])
    except (TypeError, ValueError):
        pass
    return float('nan')


def verdict(ok):
    return 'met' if ok else 'not met'


def s_throughput(t):
    c2 = num(t, 'corral N=2', 'x nginx')
    n2 = num(t, 'node cluster 2 (rr)', 'x nginx')
    return (f'corral with 2 workers served {c2:.2f}x the requests per second of nginx `return 200` '
            f'(target ≥ 0.9: {verdict(c2 >= 0.9)}), Node cluster 2 {n2:.2f}x. wrk runs on one of '
            f'the two cores, so every server here shares the machine with its client.')


def s_isolation(t):
    g = lambda k, c: num(t, k, c)  # noqa: E731
    base, c2 = g('corral N=2 shared (no /heavy)', 'p99 ms'), g('corral N=2 shared', 'p99 ms')
    return (f'In one process /light waits for /heavy (p50 corral N=1 {g("corral N=1", "p50 ms"):.0f} ms, '
            f'Node {g("node 1 process", "p50 ms"):.0f} ms). Scaled out on one shared accept queue '
            f'(corral N=2 shared, Node cluster `none`) the blocked worker stops accepting and the other '
            f'takes the new connections: p50 {g("corral N=2 shared", "p50 ms"):.1f} / '
            f'{g("node cluster 2 none", "p50 ms"):.1f} ms, p99 {c2:.1f} / '
            f'{g("node cluster 2 none", "p99 ms"):.1f} ms; corral\'s p99 is '
            f'{c2 / base:.1f}x its p99 with no /heavy ({base:.1f} ms; target ≤ 2x: '
            f'{verdict(c2 <= 2 * base)}). Balancing that picks the worker before it can know it is '
            f'busy does not isolate: reuseport hashes connections onto the blocked worker\'s own '
            f'queue (max {g("corral N=2 reuseport", "max ms"):.0f} ms) and Node\'s rr primary hands '
            f'them to it (max {g("node cluster 2 rr", "max ms"):.0f} ms).')


def s_threadpool(t):
    g = lambda k: num(t, k, 'total ms')  # noqa: E731
    return (f'Eight equal jobs finish in waves of the pool size; a bigger pool starts more at once '
            f'but adds no CPU: total {g("corral N=1 pool 1"):.0f} / {g("corral N=1 pool 4"):.0f} / '
            f'{g("corral N=1 pool 8"):.0f} ms for pool 1/4/8, while the per-job time grows '
            f'({num(t, "corral N=1 pool 1", "per-job ms (median)"):.0f} → '
            f'{num(t, "corral N=1 pool 8", "per-job ms (median)"):.0f} ms). '
            f'Two workers × pool 4 take {g("corral N=2 pool 4"):.0f} ms: on two cores the '
            f'machine, not the pool, is the limit.')


def s_loopbound(t):
    two = num(t, 'corral N=2 pool 4', 'x N=1 pool 1')
    p16 = num(t, 'corral N=1 pool 16', 'x N=1 pool 1')
    return (f'Work on the loop does not use the pool: pool 16 gives {p16:.2f}x pool 1 (target ≤ 1.1: '
            f'{verdict(p16 <= 1.1)}); only more processes add a core: 2 workers give {two:.2f}x '
            f'(target ≥ 1.8: {verdict(two >= 1.8)}).')


def s_filereads(t):
    p1 = num(t, 'corral N=1 pool 1', 'total ms')
    p10 = num(t, 'corral N=1 pool 10', 'total ms')
    n1 = num(t, 'node 1 process pool 1', 'total ms')
    n10 = num(t, 'node 1 process pool 10', 'total ms')
    why = ('On two cores the reads (copies from the page cache) are CPU-bound, so a wider pool '
           'buys little here.' if p1 / p10 < 1.5 else 'A pool of 1 serialises the reads.')
    return (f'corral: pool 1 {p1:.0f} ms vs pool 10 {p10:.0f} ms for 500 MB of page-cached reads '
            f'({p1 / p10:.1f}x); Node: {n1:.0f} vs {n10:.0f} ms. {why}')


def s_exec(t):
    u, l = t[1], t[2]
    same = abs(float(l[3]) - float(u[3])) <= 0.2 * float(u[3])
    last = (f'the last at about the same time ({l[3]} s)' if same
            else f'the last after {l[3]} s (unlimited: {u[3]} s)')
    return (f'Unlimited spawning makes everyone late: first/mean/last {u[1]}/{u[2]}/{u[3]} s; with '
            f'a limit of 2 the first answer comes after {l[1]} s, the mean after {l[2]} s, {last}. '
            f'The worker\'s loop only waits on its children, yet /health max was {u[6]} ms unlimited '
            f'vs {l[6]} ms limited: 30 runnable children crowd out the loop on two cores.')


def s_restart(t):
    c = num(t, 'corral N=1, backoff 1 ms', 'median ms')
    c0 = num(t, 'corral N=1, backoff 1 ms, worker --file-size 0', 'median ms')
    n = num(t, 'node cluster 2 rr', 'median ms')
    return (f'corral: kill -9 → served by the replacement in {c:.1f} ms median ({c0:.1f} ms with a '
            f'worker that does not first write its 10 MB /file data); Node cluster: {n:.0f} ms, '
            f'{n / c:.0f}x longer (target ≤ 10 ms and ≥ 10x: {verdict(c <= 10 and n / c >= 10)}). '
            f'corral keeps the listening socket, so connections made during the gap queue and are '
            f'served; in Node\'s rr mode the primary hands the next connection to the dead worker '
            f'and it is lost (see "requests lost").')


def s_restart_spares(t):
    def cell(server, worker, col):
        for r in t[1:]:
            if r[0] == server and r[1] == worker:
                try:
                    return float(r[t[0].index(col)])
                except ValueError:
                    return float('nan')
        return float('nan')
    out = []
    for w in ('reference', 'node'):
        s = cell('corral N=1 --spares 1', w, 'median ms')
        n = cell('corral N=1', w, 'median ms')
        out.append(f'{w} worker: {s:.1f} ms median with a spare, {n:.1f} ms without '
                   f'(target ≤ 5 ms with a spare: {verdict(s <= 5)})')
    return ('; '.join(out) + '. The spare is thawed before corrald reads the post-mortem; what '
            'remains is the kernel tearing the dead process down before its pidfd says so (for '
            'an idle Node worker ~4 ms, a C worker well under 1), corrald\'s thaw, and the '
            'heir\'s own first request; a Node spare has served one request to itself before it '
            'was frozen, so that request is not its first (docs/architecture.md, "Warm spares"). '
            'The load average above weighs on all of it. PM2 and Node cluster lose requests because the socket dies with the worker '
            '(fork mode) or the primary routes to the dead worker (rr); corral holds the socket.')


def s_scale(t):
    row = {r[0]: r for r in t[1:]}
    cg = row.get('256 workers, cgroups')
    if not cg:
        return ''
    st, cpu, rss = float(cg[5]), float(cg[3]), float(cg[4])
    return (f'256 workers with cgroups: `status` {st:.1f} ms median (target ≤ 5 ms: '
            f'{verdict(st <= 5)}), idle CPU {cpu:.1f} % (target ≤ 1 %: {verdict(cpu <= 1)}), '
            f'RSS {rss:.1f} MiB (target ≤ 8 MiB: {verdict(rss <= 8)}), measured after a minute '
            f'of quiet (a calm worker\'s ring then holds about 45 of its 240 samples; see the note '
            f'below for full rings). What changed since 14.9–15.3 MiB, 2.4–4.2 % '
            f'and 5.7–7.7 ms (the same suite on a quiet machine at the start of the round): '
            f'`status` puts whole numbers into cJSON as raw digits (cJSON printed each of ~7,000 '
            f'with sprintf("%1.15g") and read it back with sscanf), prints and frees one worker '
            f'at a time, and checks UTF-8 eight ASCII bytes at a time; corrald no longer links '
            f'libcrypto (3.4 MiB resident for one SHA-256 of the control path), a worker\'s '
            f'output and stream buffers live with its process and are made when used, and the '
            f'memory samples are packed into 24 bytes instead of 56; the memory watch reads '
            f'/proc/<pid>/statm and the group\'s usage through descriptors kept open (pread, no '
            f'path walk), fits envelopes in one pass, samples a worker that is stable and under '
            f'half its limit and flat every eighth period, in 2 ms slices; the notify socket is read in '
            f'10 ms batches while datagrams trickle in. What is left of the idle CPU is the '
            f'reference workers\' own once-a-second reports (256 wake-ups a second before '
            f'batching) and the samples themselves; a plain app that reports nothing costs less.')


def s_idle(t):
    return ('corrald\'s idle CPU is the cost of reading every worker\'s heartbeat and sampling its '
            'memory; `status` serialises every worker, so its round trip grows with the count.')


def s_balance(t):
    a = num(t, 'corral N=8 shared, keep-alive', 'CV')
    b = num(t, 'corral N=8 reuseport, keep-alive', 'CV')
    return (f'One shared accept queue hands new connections to whichever worker is awake first, '
            f'so under load a few workers take most (8 workers keep-alive CV {a:.2f}); reuseport '
            f'spreads them by hash (CV {b:.2f}). That evenness is also why reuseport fails the '
            f'isolation suite: a hash cannot see that a worker is blocked.')


def s_startup(t):
    w = next((r for r in t[1:] if r[0] == 'corral-worker' and r[1].startswith('SCHED')), None)
    fl = next((r for r in t[1:] if r[0].startswith('floor') and r[1].startswith('SCHED')), None)
    old = next((r for r in t[1:] if r[0].startswith('corral-worker before') and
                r[1].startswith('SCHED')), None)
    if not w:
        return ''
    med = float(w[3])
    out = (f'Under SCHED_FIFO (the start\'s own cost, not the wait for a CPU) the worker reaches '
           f'READY in {med:.2f} ms median (target ≤ 3 ms: {verdict(med <= 3)})')
    if fl:
        out += f', against {float(fl[3]):.2f} ms for the floor program'
    if old:
        out += f'; {old[0][len("corral-worker "):]}: {float(old[3]):.2f} ms'
    return out + ('. What is left above the floor is mostly libuv and the worker\'s own set-up; '
                  'the /file data and libcrypto are made and loaded on first use. '
                  '`bench/startup --rt --worker PATH` times any build.')


def s_hotpath(t):
    c = next((r for r in t[1:] if r[0] == 'corral N=2'), None)
    old = next((r for r in t[1:] if r[0].startswith('corral N=2 before')), None)
    if not c:
        return ''
    x, cpu = float(c[2]), float(c[4])
    out = (f'corral N=2 served {x:.2f}x the requests per second of nginx (target ≥ 0.9: '
           f'{verdict(x >= 0.9)}) and spent {cpu:.2f}x its CPU time per request')
    if old:
        out += (f'; {old[0][len("corral N=2 "):]}: {float(old[2]):.2f}x nginx req/s, '
                f'{float(old[4]):.2f}x its CPU per request')
    return out + '.'


def s_profile_before(t):
    return ('Above: the profile of one worker before the hot-path work (`bench/run profile` '
            'with CORRAL_BENCH_PROFILE_LABEL=before and CORRAL_BENCH_PROFILE_WORKER=<old build>); '
            'below: after.')


def s_profile_after(t):
    return ''


def s_latency(t):
    med = next((r for r in t[1:] if r[0] == 'median'), None)
    if not med:
        return ''
    mx = float(med[6])
    return (f'Median of the runs: p99 {float(med[5]):.1f} ms, max {mx:.1f} ms (target ≤ 20 ms: '
            f'{verdict(mx <= 20)}), {float(med[1]):.0f} workers ready after '
            f'{float(med[2]):.1f} s. The pinger runs SCHED_FIFO, so its own waits for a core are '
            f'not charged to corrald; the steal column is what the host took from this virtual '
            f'machine meanwhile (docs/reliability.md, "Loop latency", has every earlier sitting).')


def _adapt_cell(t, load, workers, col):
    """adapt.csv: the figure in column col for (load, workers); workers may
    be a prefix ('N=2', 'adaptive'). nan when absent."""
    try:
        c = t[0].index(col)
        for r in t[1:]:
            if r[0] == load and r[1].startswith(workers):
                return float(r[c])
    except (TypeError, ValueError):
        pass
    return float('nan')


def _adapt_static(t, load):
    """{label: req/s} of the static rows of one load."""
    c = t[0].index('req/s')
    return {r[1]: float(r[c]) for r in t[1:] if r[0] == load and not r[1].startswith('adaptive')}


def adapt_figures(t):
    """The figures the sentence and the README read from adapt.csv."""
    g = lambda load, w, col: _adapt_cell(t, load, w, col)  # noqa: E731
    cpu = _adapt_static(t, 'cpu')
    best = max(cpu, key=cpu.get) if cpu else ''
    cores = next((k for k in cpu if k.endswith('(cores)')), '')
    bcores = next((k for k in _adapt_static(t, 'block') if k.endswith('(cores)')), '')
    ncores = int(cores[2:].split()[0]) if cores else 0
    f = {'best': best, 'best_rps': cpu.get(best, float('nan')), 'cores': ncores,
         'cpu_rps': g('cpu', 'adaptive', 'req/s'), 'cpu_nmax': g('cpu', 'adaptive', 'N max'),
         'cpu_plateau': g('cpu', 'adaptive', 'plateau N'),
         'block_rps': g('block', 'adaptive', 'req/s'), 'block_cores': g('block', bcores, 'req/s'),
         'block_max': max((v for k, v in _adapt_static(t, 'block').items()), default=float('nan')),
         'block_plateau_s': g('block', 'adaptive', 's to plateau'),
         'block_plateau': g('block', 'adaptive', 'plateau N'),
         'back': g('burst', 'adaptive', 's back to MIN')}
    rows = [r for r in t[1:] if r[0] == 'cpu']
    try:
        oc = t[0].index('other cores')
        f['cpu_others'] = sum(float(r[oc]) for r in rows) / len(rows)
    except (ValueError, ZeroDivisionError):
        f['cpu_others'] = float('nan')
    f['cpu_w_cores'] = g('cpu', cores, 'workers cores')
    f['cpu_w_adapt'] = g('cpu', 'adaptive', 'workers cores')
    f['cpu_rps_cores'] = g('cpu', cores, 'req/s')
    f['cpu_rps_max'] = g('cpu', f'N={MAX_ADAPT}', 'req/s')
    f['cpu_w_max'] = g('cpu', f'N={MAX_ADAPT}', 'workers cores')
    f['cpu_x'] = f['cpu_rps'] / f['best_rps']
    f['block_x'] = f['block_rps'] / f['block_cores']
    return f


def s_adapt(t):
    f = adapt_figures(t)
    c = f['cores']
    ok1 = f['cpu_x'] >= 0.9 and f['cpu_nmax'] <= c + 1
    return (f'CPU-bound step: adaptive {f["cpu_rps"]:.1f} req/s = {f["cpu_x"]:.2f}x the best static '
            f'N ({f["best"]}, {f["best_rps"]:.1f}), N max {f["cpu_nmax"]:.0f} (targets '
            f'≥ 0.9x and ≤ {c + 1} workers: {verdict(ok1)}); meanwhile the host\'s other work '
            f'used {f["cpu_others"]:.2f} of its {c} cores on average, and the workers got '
            f'{f["cpu_w_adapt"]:.2f} cores adaptive, {f["cpu_w_cores"]:.2f} at N={c}, '
            f'{f["cpu_w_max"]:.2f} at N={MAX_ADAPT}: per core they got, adaptive served '
            f'{f["cpu_rps"] / f["cpu_w_adapt"]:.1f} req/s, N={c} '
            f'{f["cpu_rps_cores"] / f["cpu_w_cores"]:.1f}, N={MAX_ADAPT} '
            f'{f["cpu_rps_max"] / f["cpu_w_max"]:.1f} (on a shared host the throughput follows '
            f'the CPU the other work leaves). '
            f'Blocking without the CPU: adaptive '
            f'{f["block_rps"]:.1f} req/s = {f["block_x"]:.2f}x static N={c} (target ≥ 2x: '
            f'{verdict(f["block_x"] >= 2)}); it reached N={f["block_plateau"]:.0f} '
            f'{f["block_plateau_s"]:.1f} s into the load (static N={MAX_ADAPT}: '
            f'{f["block_max"]:.1f} req/s, the ceiling for 8 clients). After the burst: back to '
            f'MIN {f["back"]:.1f} s after the load ended (target ≤ cool-down 5 s + 5 s: '
            f'{verdict(f["back"] == f["back"] and f["back"] <= 10)}); the worst round counts.')


MAX_ADAPT = 6  # bench/lib/suites_adapt.py MAX


SUITES = [
    ('1. Throughput', 'throughput',
     'How many /light requests per second does corral serve, against Node and against nginx '
     '`return 200` as the ceiling?', [('throughput.csv', s_throughput)], ['throughput']),
    ('2. Isolation: a CPU-bound request blocks its own process only', 'isolation',
     'While one client sends /heavy?ms=2000 back to back, what latency does a /light sent every '
     '100 ms see, in one process and scaled out?', [('isolation.csv', s_isolation)], ['isolation']),
    ('3. Thread pool: waves of jobs, and a bigger pool adds no CPU', 'threadpool',
     'When do 8 concurrent pool jobs (/hash, pbkdf2, ~300 ms each alone) finish, for pool sizes '
     '1/4/8 in one worker vs 2 workers × pool 4?', [('threadpool.csv', s_threadpool)], ['threadpool']),
    ('4. Loop-bound CPU: a synchronous call blocks the whole loop', 'loopbound',
     'Does a bigger pool or another worker raise the throughput of CPU work done on the loop '
     '(/hashsync, 8 concurrent)?', [('loopbound.csv', s_loopbound)], ['loopbound']),
    ('5. File reads go through the thread pool', 'filereads',
     'How long do 50 concurrent reads of a 10 MB file take with pool 1 vs pool 10, and 2 workers?',
     [('filereads.csv', s_filereads)], ['filereads']),
    ('6. Bounded child work: a limit near the core count', 'exec',
     'With 30 concurrent /exec jobs (CPU-bound children), when do the first, the mean and the last '
     'finish, unlimited vs 2 at a time, and how slow is /health meanwhile?',
     [('exec.csv', s_exec)], ['exec']),
    ('7. Supervision costs', 'supervision',
     'How fast is a killed worker replaced, what does corrald cost when idle with 8/64/256 workers '
     'and with cgroups, and how fast does it react to a soft memory limit?',
     [('restart.csv', s_restart), ('idle.csv', s_idle), ('cgroups.csv', None)], ['restart']),
    ('8. Balance', 'balance',
     'How evenly are requests spread over the workers: one shared accept queue vs SO_REUSEPORT?',
     [('balance.csv', s_balance)], ['balance']),
    ('9. Worker start-up', 'startup',
     'How long from fork() to READY=1 does the reference worker take, against a C program that '
     'only takes its socket and says READY (linked with libsystemd, as every C worker is)?',
     [('startup.csv', s_startup)], []),
    ('10. The /light hot path', 'hotpath',
     'With 2 workers each, how close does corral come to nginx `return 200`, in requests per '
     'second and in CPU time per request, and what did removing per-request work change?',
     [('hotpath.csv', s_hotpath), ('profile-before.csv', s_profile_before),
      ('profile-after.csv', s_profile_after)], []),
    ('11. Restart with warm spares', 'restart',
     'kill -9 a worker: how long until a /light is answered by its replacement, for corral '
     'without and with a frozen warm spare, Node cluster and PM2, for the reference worker and '
     'for a Node worker, and how many requests are lost?',
     [('restart-spares.csv', s_restart_spares), ('scale.csv', s_scale)], []),
    ('12. The loop while 1000 workers start', 'latency',
     'Does corrald answer its control socket (and so its signals and heartbeats) within 20 ms '
     'while `scale 1000` starts a thousand workers, each in its own cgroup?',
     [('latency.csv', s_latency)], []),
    ('13. Adaptive workers: --workers 1..6 against static N', 'adapt',
     'Under a CPU-bound step, a load that blocks the loops without the CPU, and a burst followed '
     'by nothing, what do static N = 1, N = cores, N = 6 and the adaptive `--workers 1..6` serve, '
     'how slow is a /light meanwhile, how does N move, and how soon does it come back to MIN?',
     [('adapt.csv', s_adapt), ('adapt-runs.csv', None), ('adapt-events.csv', None)], ['adapt']),
]

NOTES = {
    'adapt': (
        'One sitting, two rounds: round 1 runs each load against N=1, N=cores, N=6, adaptive in '
        'that order, round 2 in the reverse order, so that the shared machine\'s drift favours '
        'none; each run is a fresh corrald (`--scale-cooldown 5`, `--no-cgroups`, the reference '
        'worker). The first table pools the rounds (req/s and cores: their mean; /light and N: '
        'every sample of both; the times: the worse round; errors: failed requests and /light '
        'probes); the second is each run with the load average at its start and where the CPU '
        'went during the load: the host\'s busy cores (/proc/stat), the workers\' '
        '(/proc/<pid>/stat), the bench\'s own (its rusage) and what is left, the machine\'s '
        'other work ("other cores"; corrald\'s few % included); the third is every `scale` event of the adaptive runs, as the '
        'control socket\'s `events` stream gave it (t: seconds since the load started). '
        'The load is a closed loop of clients, each a request after the other on a new '
        'connection (only new connections wait in the accept queue, which is what the scaler '
        'reads); req/s counts the answers within the load\'s window. Alongside, a /light every '
        '20 ms by the clock on a connection of its own (percentiles over the load\'s window), '
        '`status` every 250 ms (N is `workers_target`) and the `events` subscription. '
        'The CPU-bound step is /hashsync (pbkdf2 on the loop: a fixed amount of CPU per request, '
        'the iterations calibrated to ~50 ms alone at the start of the suite), not /heavy: '
        '/heavy spins until a wall-clock deadline, so six workers sharing two cores would each '
        'still answer after 50 ms and over-subscription would look three times faster than it '
        'is. Plateau: the N held at the end of the load, and when it last became it; back to '
        'MIN: the first sample after the load\'s end with N = 1. The plot is round 1: N of the '
        'adaptive run (steps), its /light latency (orange) and static N=cores\' (grey), log '
        'scale; dashed lines are the static N.'),
    'restart': (
        'One sitting, 20 kills per row. corrald runs 1 worker with `--backoff-initial 1ms '
        '--backoff-max 1ms --crash-budget 64`, with and without `--spares 1` (v1 here would need '
        'cgroups; the bench runs `--no-cgroups`, so spares are stopped with SIGSTOP); the Node '
        'worker is examples/node/server.js. Node cluster runs 2 rr workers (it cannot run the C '
        'worker); PM2 5 (installed by the suite from npm into the bench build directory) runs the '
        'Node worker in cluster mode with 2 instances and the C worker in fork mode (it binds the '
        'port itself), `min_uptime 100, max_restarts 1000`. A probe is a fresh connection with a '
        '250 ms timeout; an error or timeout is a lost request, retried after 2 ms. With a spare, '
        'the suite checks that the answer comes from the process that was the frozen spare. '
        'The scale table is `bench/run scale`, run in the same sitting: corrald with 256 reference workers, '
        'a minute to fill the sample rings, then its CPU over 10 s and 50 `status` requests.'),
    'hotpath': (
        'Commands: `CORRAL_BENCH_BEFORE=/tmp/before/b/worker/corral-worker '
        'CORRAL_BENCH_BEFORE_LABEL=9b807f2 bench/run hotpath` (the old build as in section 9), '
        'and `bench/run profile` twice (before/after). The sides run interleaved over three '
        'sittings and each figure is the median, because this 2-core machine is shared: with '
        'wrk, two workers and twenty other runnable tasks, req/s measures the share of CPU each '
        'server got as much as its own cost; CPU time per request of the serving processes is '
        'the steadier figure: between two sittings of the same day the req/s ratio of the '
        'same builds moved by more than 2x with the machine\'s load, the CPU ratio far less. '
        'Section 1 (throughput) is older and was measured on a quiet machine, before this work. '
        'What left the hot path: the epoll_ctl per response (libuv '
        're-registers a socket after each completed uv_write; answers now go out with '
        'uv_try_write when nothing is in flight), four timer-heap operations per request (one '
        'lazy deadline per connection), a clock read, three malloc/free pairs (requests are '
        'recycled with inline URL and response buffers) and a printf of the head (memcpy from '
        'a per-worker block and a per-second Date line). What stays: one read and one write '
        'per request, the HTTP parser, libuv\'s loop.'),
    'startup': (
        'The "before" row comes from an older build passed in: `git archive 9b807f2 | tar -x -C '
        '/tmp/before && meson setup /tmp/before/b /tmp/before --buildtype=release && meson compile '
        '-C /tmp/before/b corral-worker`, then `CORRAL_BENCH_BEFORE=/tmp/before/b/worker/corral-worker '
        'CORRAL_BENCH_BEFORE_LABEL="9b807f2, before the lean start" bench/run startup`. The '
        'timing is done by `bench/lib/spawn_ready.c` (fork, fd 3, LISTEN_PID, NOTIFY_SOCKET, '
        'like corrald), not by Python, whose own fork+exec costs 2-4 ms here. "normal" rows wait '
        'for a CPU on this shared 2-core machine and move with its load.'),
    'supervision': (
        'Restart: corrald runs with `--backoff-initial 1ms --backoff-max 1ms --crash-budget 64` '
        '(the kills come back to back: with the defaults a lone death restarts at once, but a worker killed again before it ran 30 s backs off 100 ms, doubling, on purpose); '
        'corral runs 1 worker, Node a cluster of 2 (`--workers 1` runs Node without cluster, '
        'which restarts nothing). "start-up" is corrald\'s own log (worker spawned → READY, '
        '"ready: pid P after N ms") for corral, and kill → the "restarted" line (replacement '
        'listening) for Node. A poll is a fresh connection with a 250 ms timeout; a timeout '
        'or error counts as a lost request. Idle cost: CPU from /proc/<corrald>/stat utime+stime; '
        'worker RSS is the mean per worker (the reference worker with `--file-size 0`; with the '
        'default it also writes a 10 MB unlinked temp file each). The cgroup rows run corrald with '
        '`--cgroup-parent /corral-bench-<pid>` (the CPU figure is for issue 5) and, for the soft '
        'limit, `--workers 1 --memory-max 256M --memory-soft 128M --soft-samples 4 '
        '--sample-interval 250` growing the worker by `/buffer?mb=8&retain=1` until it is '
        'retired; the value is corrald\'s own notice "replacement spawned N ms after usage '
        'crossed the soft limit" (the per-run values are in the detail column).'),
    'balance': (
        'keep-alive: wrk\'s 64 connections are spread once, at accept; close: `-H "Connection: '
        'close"`, every request a new connection (run for half the time). Per-worker counts are '
        'the `requests` deltas of `status`.'),
    'isolation': (
        'Each /light is a new connection (a keep-alive connection would stay on one worker). '
        'The plot is /light latency by send time, log scale.'),
}


def header(meta):
    m = meta or {}
    return f"""# Benchmarks

Generated by `bench/lib/mkdoc.py` from `bench/results/*.csv` — do not edit by
hand; rerun `bench/run` (all suites, about 20 minutes) to refresh the tables,
the sentences under them and the plots in `docs/img/`.

Run: {m.get('date', 'n/a')} on {m.get('nproc', '?')} × {m.get('cpu', '?')},
{m.get('mem_gib', '?')} GiB, kernel {m.get('kernel', '?')}; load average at start
{m.get('loadavg', '?')}. {m.get('corrald', '?')}, Node {m.get('node', '?')},
{m.get('nginx', '?')}, {m.get('wrk', '?')}. corral is built `--buildtype=release`.
A suite run on its own since then says when under its heading.

This machine is shared with other engineers' test runs and has two cores:
absolute figures move between runs; each comparison is a ratio from one run,
every side started and measured in the same sitting on 127.0.0.1. Node is the
peer in `bench/peers/node/cluster.js` (same endpoints); nginx is `return 200`
with 2 worker processes.

Targets (tracked, not tests): /light corral 2 workers ≥ 0.9× nginx; isolation
corral N=2 /light p99 under /heavy ≤ 2× without; loop-bound 2 workers ≥ 1.8×
1 worker and pool 16 ≤ 1.1× pool 1; restart median ≤ 10 ms and ≥ 10× faster
than Node cluster; `--workers 1..6`: on a CPU-bound step within 10 % of the
best static N's throughput and never above cores + 1 workers, on a load
blocked without the CPU ≥ 2× static N = cores, back to MIN within the
cool-down + 5 s after a burst. Each suite's sentence says where it stands.

Programs used: wrk, gnuplot (pngcairo), nginx, node, meson/ninja, python3.
"""


def _f(x, fmt='.1f'):
    return format(float(x), fmt)


def numbers():
    """The README's table: one row per question a user asks, each read from
    the CSVs of the sitting. None when a CSV it needs is missing."""
    t = {n: load(n + '.csv') for n in ('throughput', 'isolation', 'threadpool', 'loopbound',
                                         'exec', 'restart-spares', 'scale', 'cgroups',
                                         'startup', 'hotpath', 'latency', 'adapt')}
    if not all(t.values()):
        return None
    g = lambda name, label, col: num(t[name], label, col)  # noqa: E731

    def spare(server, worker, col):
        for r in t['restart-spares'][1:]:
            if r[0] == server and r[1] == worker:
                return r[t['restart-spares'][0].index(col)]
        return 'n/a'

    ex = t['exec']
    u, lim = ex[1], ex[2]
    soft = next((r for r in t['cgroups'][1:] if r[0].startswith('soft-limit')), None)
    st = next((r for r in t['startup'][1:] if r[0] == 'corral-worker' and
               r[1].startswith('SCHED')), None)
    fl = next((r for r in t['startup'][1:] if r[0].startswith('floor') and
               r[1].startswith('SCHED')), None)
    sc = next((r for r in t['scale'][1:] if r[0] == '256 workers, cgroups'), None)
    hp = next((r for r in t['hotpath'][1:] if r[0] == 'corral N=2'), None)
    ng = next((r for r in t['hotpath'][1:] if r[0].startswith('nginx')), None)
    lat = next((r for r in t['latency'][1:] if r[0] == 'median'), None)
    rows = [
        ('How many `/light` requests a second? (wrk -c64; wrk takes one of the 2 cores)',
         f'2 workers {g("throughput", "corral N=2", "req/s") / 1000:.1f}k = '
         f'**{g("throughput", "corral N=2", "x nginx"):.2f}× nginx**; 1 worker '
         f'{g("throughput", "corral N=1", "req/s") / 1000:.1f}k',
         f'nginx `return 200` {g("throughput", "nginx return 200 (2 workers)", "req/s") / 1000:.1f}k; '
         f'Node cluster 2 {g("throughput", "node cluster 2 (rr)", "req/s") / 1000:.1f}k'),
        ('Does a 2 s CPU request delay the other requests? (`/light` p99 while a client runs '
         '`/heavy?ms=2000` back to back)',
         f'2 workers, shared socket: **{g("isolation", "corral N=2 shared", "p99 ms"):.1f} ms** '
         f'({g("isolation", "corral N=2 shared (no /heavy)", "p99 ms"):.1f} ms without /heavy); '
         f'1 worker: {g("isolation", "corral N=1", "p99 ms") / 1000:.1f} s',
         f'Node 1 process {g("isolation", "node 1 process", "p99 ms") / 1000:.1f} s; Node '
         f'cluster rr {g("isolation", "node cluster 2 rr", "max ms") / 1000:.1f} s max'),
        ('Does a bigger thread pool finish 8 pbkdf2 jobs sooner? (pool 1 / 4 / 8, total)',
         f'{g("threadpool", "corral N=1 pool 1", "total ms") / 1000:.2f} / '
         f'{g("threadpool", "corral N=1 pool 4", "total ms") / 1000:.2f} / '
         f'{g("threadpool", "corral N=1 pool 8", "total ms") / 1000:.2f} s: a bigger pool adds '
         f'no CPU; 2 workers × pool 4 {g("threadpool", "corral N=2 pool 4", "total ms") / 1000:.2f} s',
         f'Node pool 4: {g("threadpool", "node 1 process pool 4", "total ms") / 1000:.2f} s'),
        ('CPU work on the loop (`/hashsync`, 8 at once): a bigger pool or another worker?',
         f'pool 16 = {g("loopbound", "corral N=1 pool 16", "x N=1 pool 1"):.2f}× pool 1; '
         f'**2 workers = {g("loopbound", "corral N=2 pool 4", "x N=1 pool 1"):.2f}×**',
         f'Node cluster 2 = {g("loopbound", "node cluster 2 rr", "x N=1 pool 1"):.2f}× Node 1'),
        ('30 CPU-bound child jobs (`/exec`): unlimited or 2 at a time? (first / mean / last; '
         '`/health` max meanwhile)',
         f'{u[1]} / {u[2]} / {u[3]} s unlimited, {lim[1]} / {lim[2]} / {lim[3]} s limited; '
         f'`/health` max {_f(u[6], ".0f")} → {_f(lim[6], ".0f")} ms', ''),
        ('`kill -9` a worker: how soon does its replacement answer? (median of 20)',
         f'reference worker {_f(spare("corral N=1", "reference", "median ms"))} ms, '
         f'**{_f(spare("corral N=1 --spares 1", "reference", "median ms"))} ms with a warm '
         f'spare**; Node worker {_f(spare("corral N=1", "node", "median ms"), ".0f")} ms, '
         f'{_f(spare("corral N=1 --spares 1", "node", "median ms"))} ms with a spare; '
         f'{spare("corral N=1", "reference", "requests lost")} requests lost',
         f'Node cluster {_f(spare("node cluster 2 rr", "node", "median ms"), ".0f")} ms, '
         f'{spare("node cluster 2 rr", "node", "requests lost")} lost; PM2 cluster '
         f'{_f(spare("pm2 cluster -i 2", "node", "median ms"), ".0f")} ms, '
         f'{spare("pm2 cluster -i 2", "node", "requests lost")} lost'),
        ('How soon is a worker over its soft memory limit replaced?',
         f'{_f(soft[1], ".0f")} ms after usage crossed it (4 samples of 250 ms)' if soft else 'n/a',
         'PM2 polls RSS every 30 s'),
        ('What does corrald cost at 256 workers with cgroups? (idle CPU, RSS, `status`)',
         f'{_f(sc[3])} % CPU, {_f(sc[4])} MiB, `status` {_f(sc[5])} ms' if sc else 'n/a', ''),
        ('Does corrald answer while `scale 1000` starts workers? (ping p99 / max, median of '
         f'{len(t["latency"]) - 2} runs, cgroups)',
         f'p99 {_f(lat[5])} ms, **max {_f(lat[6])} ms**; 1000 ready in {_f(lat[2])} s'
         if lat else 'n/a', ''),
        ('Worker spawn → READY=1 (median, SCHED_FIFO)',
         f'{_f(st[3], ".2f")} ms' if st else 'n/a',
         f'a C program that only says READY: {_f(fl[3], ".2f")} ms' if fl else ''),
        ('CPU time per `/light` request, 2 workers',
         f'{_f(hp[3])} µs = {_f(hp[4], ".2f")}× nginx' if hp else 'n/a',
         f'nginx `return 200`: {_f(ng[3])} µs' if ng else ''),
    ]
    ad = adapt_figures(t['adapt'])
    rows.append(
        (f'`--workers 1..{MAX_ADAPT}` against static N: a CPU-bound step / a load blocked '
         f'without the CPU (req/s), and after a burst, back to MIN (cool-down 5 s)',
         f'CPU-bound {ad["cpu_rps"]:.1f} = **{ad["cpu_x"]:.2f}× the best static**, '
         f'N ≤ {ad["cpu_nmax"]:.0f}; blocked **{ad["block_x"]:.1f}× N={ad["cores"]}** '
         f'({ad["block_rps"]:.1f}); back to 1 worker {ad["back"]:.1f} s after the burst',
         f'best static {ad["best"]} {ad["best_rps"]:.1f}; blocked N={ad["cores"]} '
         f'{ad["block_cores"]:.1f}, N={MAX_ADAPT} {ad["block_max"]:.1f}'))
    return rows


def numbers_md(meta, rows):
    m = meta or {}
    out = [README_BEGIN,
           f'From one `bench/run` (every suite, one sitting) on {m.get("date", "n/a")}: '
           f'{m.get("nproc", "?")} × {m.get("cpu", "?")}, kernel {m.get("kernel", "?")}, '
           f'Node {m.get("node", "?")}, {m.get("nginx", "?")}; corral {m.get("commit", "?")}, '
           f'load average {m.get("loadavg", "?")} at the start. Every side of a row ran in that '
           'sitting on 127.0.0.1; the full tables, plots and commands are in '
           '[docs/benchmarks.md](docs/benchmarks.md), earlier sittings under its "Sittings".',
           '', '| question | corral | peer |', '|---|---|---|']
    out += [f'| {q} | {c} | {p} |' for q, c, p in rows]
    out.append(README_END)
    return '\n'.join(out)


def record_sitting(meta):
    """A full sitting's README rows, kept in bench/results/sittings.json."""
    rows = numbers()
    if rows is None:
        return
    hist = json.load(open(SITTINGS)) if os.path.exists(SITTINGS) else []
    hist.append({'date': meta.get('date'), 'commit': meta.get('commit'),
                 'loadavg': meta.get('loadavg'), 'rows': [list(r) for r in rows]})
    with open(SITTINGS, 'w') as f:
        json.dump(hist, f, indent=1, ensure_ascii=False)


def write_readme(meta):
    rows = numbers()
    if rows is None or not (meta or {}).get('sitting'):
        print('mkdoc: the README\'s table is kept: the results are not one full sitting')
        return
    with open(README) as f:
        text = f.read()
    i, j = text.find(README_BEGIN), text.find(README_END)
    if i < 0 or j < i:
        print('mkdoc: README.md has no numbers markers; its table is not written')
        return
    with open(README, 'w') as f:
        f.write(text[:i] + numbers_md(meta, rows) + text[j + len(README_END):])


def sittings_md():
    out = ['\n## Sittings\n\nEvery full `bench/run`, newest first: the README\'s table as it was '
           'written from that sitting.\n']
    hist = json.load(open(SITTINGS)) if os.path.exists(SITTINGS) else []
    for s in reversed(hist):
        out.append(f'\n### {s["date"]} (corral {s["commit"]}, load average {s["loadavg"]})\n\n'
                   '| question | corral | peer |\n|---|---|---|\n')
        out += [f'| {q} | {c} | {p} |\n' for q, c, p in s['rows']]
    if os.path.exists(EARLIER):
        with open(EARLIER) as f:
            text = f.read().replace('](docs/', '](')
        out.append('\n### Before one-sitting tables\n\n' + text.split('\n', 1)[1].lstrip())
    return ''.join(out)


def main():
    meta_path = os.path.join(RESULTS, 'meta.json')
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    out = [header(meta)]
    for title, key, question, tables, imgs in SUITES:
        out.append(f'\n## {title}\n\n**Question.** {question}\n\n```sh\nbench/run {key}\n```\n')
        if meta.get(f'suite_{key}'):
            out.append(f'Measured {meta[f"suite_{key}"]}.\n')
        for csvname, sentence in tables:
            rows = load(csvname)
            out.append('\n' + md_table(rows))
            if rows and sentence:
                out.append('\n' + sentence(rows) + '\n')
        if key in NOTES:
            out.append('\n' + NOTES[key] + '\n')
        for img in imgs:
            if os.path.exists(os.path.join(ROOT, 'docs', 'img', img + '.png')):
                out.append(f'\n![{title}](img/{img}.png)\n')
    out.append(sittings_md())
    with open(DOC, 'w') as f:
        f.write(''.join(out))
    write_readme(meta)


if __name__ == '__main__':
    main()
