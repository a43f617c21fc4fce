/* Memory watch: every sample period, for each worker, RSS from
 * /proc/<pid>/statm, the cgroup's usage, and the worker's last heap report
 * go into a bounded ring; the trend module reads a verdict off it, and the
 * soft limit recycles a worker before the kernel has to kill it. */
#include "memwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "internal.h"
#include "log.h"
#include "supervisor.h"
#include "textfile.h"
#include "trend.h"
#include "worker_io.h"

/* A round looks at every worker once per sample period, in slices of at
 * most SLICE_NS of loop time, one slice per loop turn (its idle phase): at
 * 1000 workers a round done in one go held the loop (signals, the control
 * socket, heartbeats) for 30 ms and more. Between slices the loop polls
 * for I/O (without blocking while the round goes on), so a round still
 * ends within a few milliseconds when nothing else is waiting. A spawn
 * (pacer.c) may share a turn's idle phase with a slice. */
#define SLICE_NS (2 * 1000 * 1000)

struct cr_memwatch {
    struct cr_supervisor *sup;
    uv_timer_t timer;
    uv_idle_t slice; /* the round goes on */
    unsigned round;  /* a worker sampled in this round has w->sampled_round == round */
    bool closed;
};

static uint64_t page_size;

/* Resident bytes: the second field of statm (one short read), or, under
 * --pss, the proportional set size of smaps_rollup (shared pages divided
 * among their sharers, so N forked workers do not each count the pages
 * they share; costlier). 0 when nothing could be read. */
static uint64_t read_resident(struct cr_worker *w, bool pss, bool reopen)
{
    char buf[2048]; /* smaps_rollup is about 20 short lines */
    unsigned long long a, b;
    int fd = cr_io_mem_fd(w, pss, reopen);
    if (fd < 0 || cr_pread_text(fd, buf, sizeof(buf)) < 0)
        return 0;
    if (!pss)
        return sscanf(buf, "%llu %llu", &a, &b) == 2 ? b * page_size : 0;
    const char *line = strstr(buf, "\nPss:");
    return line && sscanf(line + 1, "Pss: %llu kB", &a) == 1 ? (uint64_t)a * 1024 : 0;
}

static void fmt_mib(char *buf, size_t len, uint64_t b)
{
    snprintf(buf, len, "%.1f MiB", (double)b / (1024.0 * 1024.0));
}

static void check_soft_limit(struct cr_worker *w, uint64_t usage)
{
    struct cr_supervisor *sup = w->sup;
    uint64_t soft = sup->cfg.memory_soft;
    if (!soft || usage <= soft) {
        w->soft_over = 0;
        w->soft_crossed_at = 0;
        return;
    }
    if (!w->soft_over)
        w->soft_crossed_at = cr_now_ms(sup);
    w->soft_over++;
    /* A starting worker is recycled too: growing past the soft limit
     * before it is ready is no reason to wait for the kernel's kill. */
    if (w->soft_over < sup->cfg.soft_samples || w->recycle_queued || w->replaced_by ||
        (w->state != CR_WS_READY && w->state != CR_WS_BLOCKED && w->state != CR_WS_STARTING))
        return;
    char u[32], l[32], why[160];
    fmt_mib(u, sizeof(u), usage);
    fmt_mib(l, sizeof(l), soft);
    snprintf(why, sizeof(why), "memory soft limit (usage %s > soft %s for %u samples)", u, l,
             w->soft_over);
    cr_worker_recycle(w, why);
    if (w->replaced_by)
        cr_log_event(CR_LOG_NOTICE, "soft-limit", w->id, w->pid, NULL,
                     "worker %d: replacement spawned %llu ms after usage crossed the soft limit",
                     w->id, (unsigned long long)(cr_now_ms(sup) - w->soft_crossed_at));
}

static void sample_worker(struct cr_worker *w, const struct cr_trend_params *tp)
{
    struct cr_supervisor *sup = w->sup;
    /* A spare is not sampled: frozen, it has nothing to say (and reading
     * a frozen group's files would only cost corrald time). */
    if (!w->pid || !w->io || !cr_wstate_has_process(w->state) || w->exec_errno ||
        cr_wstate_spare(w->state))
        return;
    if (!w->samples && cr_trend_ring_new(sup->cfg.sample_ring, &w->samples) < 0)
        return;
    /* A process that has exited but is not reaped yet reads as 0 resident
     * bytes, and its group as nearly empty: keep the last live readings,
     * which are what the post-mortem should carry. */
    uint64_t rss = read_resident(w, sup->cfg.pss, false);
    /* Nothing read: the process may have exec'd again (a shell wrapper;
     * smaps_rollup stays bound to the image it was opened on). */
    if (!rss)
        rss = read_resident(w, sup->cfg.pss, true);
    if (!rss)
        return;
    w->rss = rss;
    if (w->cg) {
        uint64_t u = 0;
        if (cr_cgroup_read_usage(w->cg, &u) == 0)
            w->cg_usage = u;
    }
    w->sampled_at = cr_now_ms(sup);
    struct cr_sample s = {
        .t_ms = w->sampled_at,
        .rss = w->rss,
        .heap_used = w->last.heap_used,
        .heap_total = w->last.heap_total,
        .external = w->last.external,
        .cg_usage = w->cg ? w->cg_usage : 0,
        /* A worker reporting X_HEAP_USED=0 has a heap known to be empty:
         * RSS growth beside it is off-heap, not "cannot tell". */
        .heap_reported = (w->last.present & CR_NF_HEAP_USED) != 0,
    };
    cr_trend_ring_push(w->samples, &s);

    struct cr_trend t;
    int r = cr_trend_analyze_ring(w->samples, tp, w->cg_limit, &t);
    if (r == 0 && (int)t.verdict != w->verdict) {
        char nums[256];
        cr_trend_format(&t, nums, sizeof(nums));
        enum cr_log_level lvl = t.verdict == CR_TREND_STABLE || t.verdict == CR_TREND_UNKNOWN
                                    ? CR_LOG_INFO
                                    : CR_LOG_WARNING;
        cr_log_event(lvl, "verdict", w->id, w->pid, NULL, "worker %d memory: %s (was %s): %s",
                     w->id, cr_trend_verdict_to_string(t.verdict),
                     cr_trend_verdict_to_string((enum cr_trend_verdict)w->verdict), nums);
        w->verdict = (int)t.verdict;
        snprintf(w->verdict_text, sizeof(w->verdict_text), "%s", nums);
    }
    check_soft_limit(w, w->cg ? w->cg_usage : w->rss);
}

/* Every round, sampled or not: a calm worker is sampled every few rounds,
 * its lifetime is not stretched by that. */
static void check_lifetime(struct cr_worker *w)
{
    uint64_t lifetime = w->sup->cfg.max_lifetime_ms;
    if (lifetime && w->state == CR_WS_READY && w->pid &&
        cr_now_ms(w->sup) - w->spawned_at >= lifetime) {
        char why[96];
        snprintf(why, sizeof(why), "max lifetime (%llu ms)", (unsigned long long)lifetime);
        cr_worker_recycle(w, why);
    }
}

static void on_slice(uv_idle_t *h);

/* The lowest of the soft and the hard limit that apply, 0 for none. */
static uint64_t lowest_limit(const struct cr_worker *w)
{
    uint64_t soft = w->sup->cfg.memory_soft, hard = w->cg ? w->cg_limit : 0;
    return !soft ? hard : !hard ? soft : soft < hard ? soft : hard;
}

/* A round comes every sample period; a calm worker is sampled every few
 * rounds (cr_trend_sample_period). Half a period of slack absorbs the
 * timer's jitter. */
static bool due(const struct cr_worker *w)
{
    uint64_t base = w->sup->cfg.sample_interval_ms, now = cr_now_ms(w->sup);
    uint64_t period =
        cr_trend_sample_period(base, (enum cr_trend_verdict)w->verdict, w->cg ? w->cg_usage : w->rss,
                               lowest_limit(w), cr_trend_ring_flat(w->samples, CR_TREND_RELAXED + 1));
    return !w->sampled_at || now - w->sampled_at + base / 2 >= period;
}

static void sample_slice(struct cr_memwatch *mw)
{
    static const struct cr_trend_params tp = {
        .window_ms = CR_TREND_DEFAULT_WINDOW_MS,
        .min_samples = CR_TREND_DEFAULT_MIN_SAMPLES,
        .min_span_ms = CR_TREND_DEFAULT_MIN_SPAN_MS,
        .min_rise_bytes = CR_TREND_DEFAULT_MIN_RISE,
        .min_rise_pct = CR_TREND_DEFAULT_MIN_RISE_PCT,
        .horizon_ms = CR_TREND_DEFAULT_HORIZON_MS,
        .near_pct = CR_TREND_DEFAULT_NEAR_PCT,
        .projection_window_ms = CR_TREND_DEFAULT_PROJECTION_MS,
    };
    uint64_t t0 = uv_hrtime();
    /* Workers come and go between slices, so the round is a mark on each
     * worker, not a cursor into the list. Recycling may add workers while
     * we walk: remember the next before each step. */
    for (struct cr_worker *w = mw->sup->workers, *next; w; w = next) {
        next = w->next;
        if (w->sampled_round == mw->round)
            continue;
        if (uv_hrtime() - t0 >= SLICE_NS)
            return; /* the idle handle stays on: the next turn goes on */
        w->sampled_round = mw->round;
        if (due(w))
            sample_worker(w, &tp);
        check_lifetime(w);
    }
    uv_idle_stop(&mw->slice);
}

static void on_slice(uv_idle_t *h)
{
    sample_slice(h->data);
}

static void on_sample(uv_timer_t *t)
{
    struct cr_memwatch *mw = t->data;
    /* A round still going when the next is due (a loop this busy) ends
     * first: no worker is sampled twice in one period. */
    if (uv_is_active((uv_handle_t *)&mw->slice))
        return;
    mw->round++;
    /* Every slice runs in the idle phase, one per loop turn: a first slice
     * run here would be followed at once by a second in this turn's idle
     * phase (timers, then idle, then the poll), without I/O in between. */
    uv_idle_start(&mw->slice, on_slice);
}

int cr_memwatch_new(struct cr_supervisor *sup, uv_loop_t *loop, struct cr_memwatch **ret)
{
    struct cr_memwatch *mw = calloc(1, sizeof(*mw));
    if (!mw)
        return -ENOMEM;
    mw->sup = sup;
    uv_timer_init(loop, &mw->timer);
    mw->timer.data = mw;
    uv_idle_init(loop, &mw->slice);
    mw->slice.data = mw;
    if (!page_size)
        page_size = (uint64_t)sysconf(_SC_PAGESIZE);
    *ret = mw;
    return 0;
}

void cr_memwatch_start(struct cr_memwatch *mw)
{
    uint64_t ms = mw->sup->cfg.sample_interval_ms;
    uv_timer_start(&mw->timer, on_sample, ms, ms);
}

void cr_memwatch_on_event(void *userdata, const struct cr_event *ev)
{
    struct cr_memwatch *mw = userdata;
    if (mw->closed)
        return;
    if (ev->type == CR_EV_CONFIG && strcmp(ev->key, "sample-interval") == 0) {
        uv_timer_stop(&mw->timer);
        cr_memwatch_start(mw);
    } else if (ev->type == CR_EV_FINISHED) {
        mw->closed = true;
        uv_close((uv_handle_t *)&mw->timer, NULL);
        uv_close((uv_handle_t *)&mw->slice, NULL);
    }
}

struct cr_memwatch *cr_memwatch_free(struct cr_memwatch *mw)
{
    free(mw);
    return NULL;
}
