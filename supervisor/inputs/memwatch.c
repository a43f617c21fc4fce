/* Memory watch: every sample period, for each worker, RSS from
 * /proc/<pid>/statm, the cgroup's usage, and the worker's last heap report
 * go into a bounded ring (generation/memread.c); the trend module reads a
 * verdict off it, and the soft limit recycles a worker before the kernel
 * has to kill it.
 *
 * A worker without a cgroup of its own (--no-cgroups: an unprivileged pod,
 * whose cgroup mount is read-only) has no kernel limit but the container's,
 * and with memory.oom.group=1 the container's OOM kill takes every process
 * in it. corrald enforces --memory-max on such a worker itself: SIGKILL
 * once its resident memory reaches the limit. Between rounds every such
 * worker's RSS is read again (one pread of statm) every WATCH_MS, and every
 * NEAR_MS while one is at half its limit or more: a worker growing fast
 * gets that much growth past the limit, not a whole sample period's. */
#include "memwatch.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "internal.h"
#include "log.h"
#include "memread.h"
#include "supervisor.h"
#include "trend.h"
#include "wio.h"

/* A round looks at every worker once per sample period, in slices of at
 * most SLICE_NS of loop time, one slice per loop turn (its idle phase): at
 * 1000 workers a round done in one go held the loop (signals, the control
 * socket, heartbeats) for 30 ms and more. Between slices the loop polls
 * for I/O (without blocking while the round goes on), so a round still
 * ends within a few milliseconds when nothing else is waiting. A spawn
 * (pacer.c) may share a turn's idle phase with a slice. */
#define SLICE_NS (2 * 1000 * 1000)
#define WATCH_MS 25
#define NEAR_MS 5


struct cr_memwatch {
    struct cr_supervisor *sup;
    uv_timer_t timer;
    uv_idle_t slice; /* the round goes on */
    uv_timer_t near; /* workers under a limit corrald enforces: read every WATCH_MS or NEAR_MS */
    unsigned round;  /* a worker looked at in this round has w->g.mem.round == round */
    bool closed;
};

static void fmt_mib(char *buf, size_t len, uint64_t b)
{
    snprintf(buf, len, "%.1f MiB", (double)b / (1024.0 * 1024.0));
}

/* Above the soft limit for --soft-samples samples in a row: a rolling
 * replacement before the kernel has to kill it. A starting worker is
 * recycled too (in place): growing past the soft limit before it is ready
 * is no reason to wait for the kernel's kill. */
static void check_soft_limit(struct cr_worker *w, uint64_t usage)
{
    struct cr_supervisor *sup = w->sup;
    uint64_t soft = sup->cfg.memory_soft;
    unsigned over = cr_mem_over_soft(&w->g.mem, usage, soft, cr_now_ms(sup));
    if (!over || over < sup->cfg.soft_samples)
        return;
    char u[32], l[32], why[160];
    fmt_mib(u, sizeof(u), usage);
    fmt_mib(l, sizeof(l), soft);
    snprintf(why, sizeof(why), "memory soft limit (usage %s > soft %s for %u samples)", u, l,
             over);
    bool replaced = w->role == CR_ROLE_REPLACED;
    cr_worker_recycle(w, why);
    if (!replaced && w->role == CR_ROLE_REPLACED)
        cr_log_event(CR_LOG_NOTICE, "soft-limit", cr_worker_id(w), w->g.pid, NULL,
                     "worker %d: replacement spawned %llu ms after usage crossed the soft limit",
                     cr_worker_id(w),
                     (unsigned long long)(cr_now_ms(sup) - w->g.mem.soft_crossed_at));
}

/* --memory-pressure: a worker whose group stalls on memory that much for
 * --soft-samples samples is replaced gracefully, as at the soft limit:
 * before the kernel's reclaim makes every request slow, and before a
 * userspace OOM killer takes the group. */
static void check_pressure(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    unsigned over = cr_mem_over_pressure(&w->g.mem, sup->cfg.memory_pressure_pct);
    if (!over || over < sup->cfg.soft_samples)
        return;
    char why[160];
    snprintf(why, sizeof(why),
             "memory pressure (some avg10 %.1f%% >= %u%% for %u samples, full avg10 %.1f%%)",
             w->g.mem.pressure.some10, sup->cfg.memory_pressure_pct, over,
             w->g.mem.pressure.full10);
    cr_worker_recycle(w, why);
}

/* The limit corrald enforces on w itself: --memory-max when w has no
 * cgroup of its own (the kernel enforces it otherwise); 0: none. */
static uint64_t enforced_limit(const struct cr_worker *w)
{
    return w->g.cg.cg ? 0 : w->sup->cfg.memory_max;
}

static bool near_limit(const struct cr_worker *w)
{
    uint64_t lim = enforced_limit(w);
    return lim && w->g.pid && cr_wstate_sampled(w->state) && w->g.mem.rss >= lim / 2;
}

/* At or over the limit corrald enforces: SIGKILL, as the kernel would at a
 * cgroup's memory.max, with the reading in the death's evidence. Once. */
static void check_hard_limit(struct cr_worker *w, uint64_t rss)
{
    uint64_t lim = enforced_limit(w);
    if (!lim || rss < lim || w->g.ledger.reason == CR_KILL_MEMORY)
        return;
    char u[32], l[32], why[160];
    fmt_mib(u, sizeof(u), rss);
    fmt_mib(l, sizeof(l), lim);
    snprintf(why, sizeof(why), "RSS %s at --memory-max %s", u, l);
    cr_log_event(CR_LOG_WARNING, "memory-kill", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d: %s, SIGKILL (corrald enforces the limit: no per-worker cgroup)",
                 cr_worker_id(w), why);
    cr_worker_signal(w, SIGKILL, CR_KILL_MEMORY, why);
}

static void sample_worker(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    struct cr_gen *g = &w->g;
    /* A spare is not sampled: frozen, it has nothing to say (and reading
     * a frozen group's files would only cost corrald time). */
    if (!g->pid || !cr_wstate_sampled(w->state))
        return;
    /* A process that has exited but is not reaped yet reads as 0 resident
     * bytes, and its group as nearly empty: keep the last live readings,
     * which are what the post-mortem should carry. Nothing read: the
     * process may have exec'd again (a shell wrapper; smaps_rollup stays
     * bound to the image it was opened on). */
    bool pss = sup->cfg.pss;
    uint64_t rss = cr_mem_read_resident(cr_io_mem_fd(g, pss, false), pss);
    if (!rss)
        rss = cr_mem_read_resident(cr_io_mem_fd(g, pss, true), pss);
    if (!rss)
        return;
    struct cr_mem_reading in = {.now = cr_now_ms(sup), .rss = rss, .cg = g->cg.cg != NULL,
                                .cg_usage = g->mem.cg_usage, .cg_limit = g->cg.limit,
                                .ring = sup->cfg.sample_ring};
    if (g->cg.cg) {
        in.cg_read = cr_cgroup_read_usage(g->cg.cg, &in.cg_usage) == 0;
        struct cr_cgroup_pressure p;
        /* v2 only (-EOPNOTSUPP on v1, -ENOENT without PSI). */
        if (cr_cgroup_read_pressure(g->cg.cg, &p) == 0) {
            in.psi = true;
            in.some10 = p.some_avg10;
            in.some60 = p.some_avg60;
            in.full10 = p.full_avg10;
            in.full60 = p.full_avg60;
        }
    }
    enum cr_trend_verdict was = g->mem.verdict;
    if (cr_mem_take(&g->mem, &in, &g->report) == 1) {
        enum cr_trend_verdict v = g->mem.verdict;
        enum cr_log_level lvl = v == CR_TREND_STABLE || v == CR_TREND_UNKNOWN ? CR_LOG_INFO
                                                                              : CR_LOG_WARNING;
        cr_log_event(lvl, "verdict", cr_worker_id(w), g->pid, NULL,
                     "worker %d memory: %s (was %s): %s", cr_worker_id(w),
                     cr_trend_verdict_to_string(v), cr_trend_verdict_to_string(was),
                     g->mem.verdict_text);
    }
    check_hard_limit(w, g->mem.rss);
    check_soft_limit(w, g->cg.cg ? g->mem.cg_usage : g->mem.rss);
    check_pressure(w);
}

/* Workers under a limit corrald enforces: their resident memory only,
 * against the hard limit, every WATCH_MS, or NEAR_MS while one of them is
 * near it. Stops when none is left. */
static void on_near(uv_timer_t *t)
{
    struct cr_memwatch *mw = t->data;
    bool any = false, near = false;
    for (struct cr_worker *w = mw->sup->workers, *next; w; w = next) {
        next = w->next;
        if (!enforced_limit(w) || !w->g.pid || !cr_wstate_sampled(w->state))
            continue;
        any = true;
        bool pss = w->sup->cfg.pss;
        uint64_t rss = cr_mem_read_resident(cr_io_mem_fd(&w->g, pss, false), pss);
        if (!rss)
            continue; /* exited, not reaped yet: the last reading stands */
        cr_mem_note_resident(&w->g.mem, rss, cr_now_ms(w->sup));
        check_hard_limit(w, rss);
        near |= near_limit(w);
    }
    if (!any)
        uv_timer_stop(t);
    else if (uv_timer_get_repeat(t) != (near ? NEAR_MS : WATCH_MS))
        uv_timer_start(t, on_near, near ? NEAR_MS : WATCH_MS, near ? NEAR_MS : WATCH_MS);
}

/* Starts the reads when a round found a worker under a limit corrald
 * enforces. */
static void arm_near(struct cr_memwatch *mw)
{
    /* Called on every worker-state event: without --memory-max, or with
     * per-worker groups (every worker with a process has its own, and the
     * kernel enforces the limit), there is nothing to look for, and a
     * walk of the whole table per event would cost a scale of N workers
     * N² steps. */
    const struct cr_supervisor *sup = mw->sup;
    if (mw->closed || !sup->cfg.memory_max || sup->cgtree.on ||
        uv_is_active((uv_handle_t *)&mw->near))
        return;
    for (struct cr_worker *w = mw->sup->workers; w; w = w->next)
        if (enforced_limit(w) && w->g.pid && cr_wstate_sampled(w->state)) {
            uint64_t ms = near_limit(w) ? NEAR_MS : WATCH_MS;
            uv_timer_start(&mw->near, on_near, ms, ms);
            return;
        }
}

/* Every round, sampled or not: a calm worker is sampled every few rounds,
 * its lifetime is not stretched by that. */
static void check_lifetime(struct cr_worker *w)
{
    uint64_t lifetime = w->sup->cfg.max_lifetime_ms;
    if (lifetime && w->state == CR_WS_READY && w->g.pid &&
        cr_now_ms(w->sup) - w->g.spawned_at >= lifetime) {
        char why[96];
        snprintf(why, sizeof(why), "max lifetime (%llu ms)", (unsigned long long)lifetime);
        cr_worker_recycle(w, why);
    }
}

static void on_slice(uv_idle_t *h);

/* The lowest of the soft and the hard limit that apply (the kernel's or
 * corrald's own), 0 for none. */
static uint64_t lowest_limit(const struct cr_worker *w)
{
    uint64_t soft = w->sup->cfg.memory_soft, hard = w->g.cg.cg ? w->g.cg.limit : enforced_limit(w);
    return !soft ? hard : !hard ? soft : soft < hard ? soft : hard;
}

/* A round comes every sample period; a calm worker is sampled every few
 * rounds (cr_trend_sample_period). Half a period of slack absorbs the
 * timer's jitter. */
static bool due(const struct cr_worker *w)
{
    const struct cr_mem *m = &w->g.mem;
    uint64_t base = w->sup->cfg.sample_interval_ms, now = cr_now_ms(w->sup);
    uint64_t period = cr_trend_sample_period(base, m->verdict, w->g.cg.cg ? m->cg_usage : m->rss,
                                             lowest_limit(w),
                                             cr_trend_ring_flat(m->samples, CR_TREND_RELAXED + 1));
    return !m->sampled_at || now - m->sampled_at + base / 2 >= period;
}

static void sample_slice(struct cr_memwatch *mw)
{
    uint64_t t0 = uv_hrtime();
    /* Workers come and go between slices, so the round is a mark on each
     * worker, not a cursor into the list. Recycling may add workers while
     * we walk: remember the next before each step. */
    for (struct cr_worker *w = mw->sup->workers, *next; w; w = next) {
        next = w->next;
        if (w->g.mem.round == mw->round)
            continue;
        if (uv_hrtime() - t0 >= SLICE_NS)
            return; /* the idle handle stays on: the next turn goes on */
        cr_mem_visit(&w->g.mem, mw->round);
        if (due(w))
            sample_worker(w);
        check_lifetime(w);
    }
    uv_idle_stop(&mw->slice);
    arm_near(mw);
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
    uv_timer_init(loop, &mw->near);
    mw->near.data = mw;
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
    if (ev->type == CR_EV_WORKER_STATE ||
        (ev->type == CR_EV_CONFIG && strcmp(ev->key, "memory-max") == 0)) {
        arm_near(mw); /* a new worker is watched from its start, not the next round */
    } else if (ev->type == CR_EV_CONFIG && strcmp(ev->key, "sample-interval") == 0) {
        uv_timer_stop(&mw->timer);
        cr_memwatch_start(mw);
    } else if (ev->type == CR_EV_FINISHED) {
        mw->closed = true;
        uv_close((uv_handle_t *)&mw->timer, NULL);
        uv_close((uv_handle_t *)&mw->slice, NULL);
        uv_close((uv_handle_t *)&mw->near, NULL);
    }
}

struct cr_memwatch *cr_memwatch_free(struct cr_memwatch *mw)
{
    free(mw);
    return NULL;
}
