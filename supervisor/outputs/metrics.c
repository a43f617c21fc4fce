/* Prometheus text exposition (version 0.0.4) of what `status` shows:
 * conventional names, base units (bytes, seconds), one family at a time. */
#include "metrics.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "acceptq.h"
#include "death.h"
#include "prom.h"
#include "trend.h"
#include "view.h"

typedef double (*getter)(const struct cr_worker_view *w);

static double g_rss(const struct cr_worker_view *w)
{
    return (double)w->rss;
}
static double g_heap_used(const struct cr_worker_view *w)
{
    return (double)w->last.heap_used;
}
static double g_heap_total(const struct cr_worker_view *w)
{
    return (double)w->last.heap_total;
}
static double g_heap_limit(const struct cr_worker_view *w)
{
    return (double)(w->last.present & CR_NF_HEAP_LIMIT ? w->last.heap_limit : w->heap_limit_given);
}
static double g_external(const struct cr_worker_view *w)
{
    return (double)w->last.external;
}
static double g_cg_usage(const struct cr_worker_view *w)
{
    return (double)w->cg_usage;
}
static double g_cg_limit(const struct cr_worker_view *w)
{
    return (double)w->cg_limit;
}
static double g_requests(const struct cr_worker_view *w)
{
    return (double)w->last.requests;
}
static double g_inflight(const struct cr_worker_view *w)
{
    return (double)w->last.inflight;
}
static double g_elu(const struct cr_worker_view *w)
{
    return w->last.elu;
}
static double g_restarts(const struct cr_worker_view *w)
{
    return w->restarts;
}
static double g_oom(const struct cr_worker_view *w)
{
    return w->oom_kills;
}
static double g_pool(const struct cr_worker_view *w)
{
    return (double)w->last.pool_queue;
}
static double g_gen(const struct cr_worker_view *w)
{
    return w->generation;
}

/* Pseudo-bits for known(): figures corrald measures or derives itself. */
#define RSS_KNOWN        (1u << 29)
#define HEAP_LIMIT_KNOWN (1u << 30)
#define CG_USAGE_KNOWN   (1u << 31)

static const struct {
    const char *name, *type, *help;
    getter get;
    unsigned need; /* the report bit that makes it known (CR_NF_*); 0 = always known */
} worker_metrics[] = {
    {"corral_worker_memory_rss_bytes", "gauge", "Resident set size of the worker process.", g_rss,
     RSS_KNOWN},
    {"corral_worker_heap_used_bytes", "gauge", "Managed heap in use, as the worker reports it.",
     g_heap_used, CR_NF_HEAP_USED},
    {"corral_worker_heap_total_bytes", "gauge", "Managed heap reserved, as the worker reports it.",
     g_heap_total, CR_NF_HEAP_TOTAL},
    {"corral_worker_heap_limit_bytes", "gauge", "The worker's heap limit.", g_heap_limit,
     HEAP_LIMIT_KNOWN},
    {"corral_worker_external_bytes", "gauge", "Off-heap memory (buffers) the worker reports.",
     g_external, CR_NF_EXTERNAL},
    {"corral_worker_cgroup_usage_bytes", "gauge", "Memory charged to the worker's cgroup.",
     g_cg_usage, CG_USAGE_KNOWN},
    {"corral_worker_cgroup_limit_bytes", "gauge", "The worker cgroup's hard limit (0 = none).",
     g_cg_limit, 0},
    {"corral_worker_requests", "gauge", "Requests served by the current process of the worker.",
     g_requests, CR_NF_REQUESTS},
    {"corral_worker_inflight_requests", "gauge", "Requests in flight in the worker.", g_inflight,
     CR_NF_INFLIGHT},
    {"corral_worker_event_loop_utilization_ratio", "gauge",
     "Event-loop utilization over the last report period.", g_elu, CR_NF_ELU},
    {"corral_worker_restarts_total", "counter", "Restarts of this worker slot.", g_restarts, 0},
    {"corral_worker_oom_kills_total", "counter",
     "Kernel OOM kills of this worker slot (own, ancestor or system limit).", g_oom, 0},
    {"corral_worker_threadpool_queue", "gauge",
     "Jobs queued or running on the worker's thread pool.", g_pool, CR_NF_POOL_QUEUE},
    {"corral_worker_generation", "gauge", "Generation of the worker's current process.", g_gen, 0},
};

/* Whether a worker's figure is known: an unknown one is left out, never 0. */
static bool known(const struct cr_worker_view *w, unsigned need)
{
    if (need == RSS_KNOWN)
        return w->rss != 0;
    if (need == CG_USAGE_KNOWN)
        return w->cg_usage != 0;
    if (need == HEAP_LIMIT_KNOWN)
        return (w->last.present & CR_NF_HEAP_LIMIT) || w->heap_limit_given;
    return !need || (w->last.present & need);
}

/* The workers listed per worker: each slot's holder with a process (not a
 * replacement still starting, a spare, or a process on its way out: they
 * would repeat a slot's series or have none). A snapshot, taken once, so
 * every family lists the same workers. */
struct listed {
    struct cr_worker_view *v;
    char (*label)[24]; /* worker="ID", written once for all the families */
    size_t n;
};

static int snapshot(const struct cr_supervisor *sup, struct listed *ret)
{
    size_t cap = 0;
    for (const struct cr_worker *w = cr_view_first(sup); w; w = cr_view_next(w))
        cap++;
    ret->v = calloc(cap ? cap : 1, sizeof(*ret->v));
    ret->label = calloc(cap ? cap : 1, sizeof(*ret->label));
    ret->n = 0;
    if (!ret->v || !ret->label) {
        free(ret->v);
        free(ret->label);
        return -1;
    }
    struct cr_view_fresh fresh;
    cr_view_fresh_begin(&fresh);
    for (const struct cr_worker *w = cr_view_first(sup); w; w = cr_view_next(w)) {
        cr_view_worker(w, &fresh, &ret->v[ret->n]);
        /* Spares (id 0, not sampled) are counted by state, not listed. */
        const struct cr_worker_view *v = &ret->v[ret->n];
        /* One series per slot: its holder's (a replacement, a spare, a
         * worker on its way out share an id with it, or have none). */
        if (v->pid && (v->role == CR_ROLE_HOLDER || v->role == CR_ROLE_REPLACED)) {
            snprintf(ret->label[ret->n], sizeof(ret->label[0]), "worker=\"%d\"", ret->v[ret->n].id);
            ret->n++;
        }
    }
    return 0;
}

static void supervisor_families(struct cr_prom *b, const struct cr_supervisor *sup)
{
    struct cr_supervisor_view v;
    cr_view_supervisor(sup, &v);
    cr_prom_family(b, "corral_up", "gauge", "1 while corrald runs.");
    cr_prom_printf(b, "corral_up 1\n");
    cr_prom_family(b, "corral_uptime_seconds", "gauge", "Seconds since corrald started.");
    cr_prom_printf(b, "corral_uptime_seconds %.3f\n", (double)v.uptime_ms / 1000.0);
    cr_prom_family(b, "corral_workers", "gauge", "Workers by lifecycle state.");
    for (int s = 0; s < _CR_WS_MAX; s++)
        if (!cr_wstate_unseen((enum cr_wstate)s))
            cr_prom_printf(b, "corral_workers{state=\"%s\"} %u\n",
                           cr_wstate_to_string((enum cr_wstate)s),
                           cr_supervisor_count_state(sup, (enum cr_wstate)s));
    cr_prom_family(b, "corral_workers_target", "gauge", "Workers corrald keeps running.");
    cr_prom_printf(b, "corral_workers_target %u\n", v.target);
    cr_prom_family(b, "corral_spares_target", "gauge",
                   "Warm spares corrald keeps frozen (--spares).");
    cr_prom_printf(b, "corral_spares_target %u\n", v.spares_target);
    cr_prom_family(b, "corral_spare_promotions_total", "counter",
                   "Spares thawed to take a dead worker's slot.");
    cr_prom_printf(b, "corral_spare_promotions_total %u\n", v.promotions);
    /* The accept queue: no sample until a listening TCP socket was read. */
    const struct cr_acceptq_figures *q = v.accept_queue;
    cr_prom_family(b, "corral_listen_queue_length", "gauge",
                   "Connections waiting in the listening socket's accept queue (summed over the "
                   "workers' sockets with reuseport).");
    if (q->known)
        cr_prom_printf(b, "corral_listen_queue_length %u\n", q->length);
    cr_prom_family(b, "corral_listen_queue_max", "gauge",
                   "The accept queue's backlog: at most this many connections can wait.");
    if (q->known)
        cr_prom_printf(b, "corral_listen_queue_max %u\n", q->max);
    cr_prom_family(b, "corral_listen_queue_waited_seconds", "gauge",
                   "Upper bound on how long the connections waiting now have waited: the time "
                   "since the queue was last seen empty (0 when empty).");
    if (q->known)
        cr_prom_printf(b, "corral_listen_queue_waited_seconds %.3f\n",
                       (double)q->waited_ms / 1000.0);
    cr_prom_family(b, "corral_listen_queue_saturated", "gauge",
                   "1 while connections have waited longer than --saturated-after.");
    if (q->known)
        cr_prom_printf(b, "corral_listen_queue_saturated %d\n", q->saturated ? 1 : 0);
    cr_prom_family(b, "corral_listen_queue_saturations_total", "counter",
                   "Times the accept queue became saturated.");
    cr_prom_printf(b, "corral_listen_queue_saturations_total %llu\n",
                   (unsigned long long)q->saturations);
    cr_prom_family(b, "corral_worker_deaths_total", "counter", "Worker deaths by classification.");
    for (int d = 0; d < _CR_DEATH_MAX; d++)
        cr_prom_printf(b, "corral_worker_deaths_total{category=\"%s\"} %u\n",
                       cr_death_to_string((enum cr_death)d), v.deaths_by_category[d]);
}

char *cr_metrics_text(const struct cr_supervisor *sup)
{
    struct listed ws;
    if (snapshot(sup, &ws) < 0)
        return NULL;
    struct cr_prom b = CR_PROM_INIT;
    supervisor_families(&b, sup);
    for (size_t m = 0; m < sizeof(worker_metrics) / sizeof(worker_metrics[0]); m++) {
        cr_prom_family(&b, worker_metrics[m].name, worker_metrics[m].type, worker_metrics[m].help);
        for (size_t i = 0; i < ws.n; i++)
            if (known(&ws.v[i], worker_metrics[m].need))
                cr_prom_sample(&b, worker_metrics[m].name, ws.label[i],
                               worker_metrics[m].get(&ws.v[i]));
    }
    /* Three gauges, not one with a "quantile" label: that label belongs to
     * summaries, and these are a window's statistics, reset each report. */
    static const struct {
        const char *name, *help;
        size_t off;
        unsigned need;
    } delays[] = {
        {"corral_worker_loop_delay_p50_seconds",
         "Median event-loop delay over the last report period.",
         offsetof(struct cr_notify_msg, delay_p50_us), CR_NF_DELAY_P50},
        {"corral_worker_loop_delay_p99_seconds",
         "99th percentile event-loop delay over the last report period.",
         offsetof(struct cr_notify_msg, delay_p99_us), CR_NF_DELAY_P99},
        {"corral_worker_loop_delay_max_seconds",
         "Longest event-loop delay over the last report period.",
         offsetof(struct cr_notify_msg, delay_max_us), CR_NF_DELAY_MAX},
    };
    for (size_t d = 0; d < sizeof(delays) / sizeof(delays[0]); d++) {
        cr_prom_family(&b, delays[d].name, "gauge", delays[d].help);
        for (size_t i = 0; i < ws.n; i++)
            if (known(&ws.v[i], delays[d].need))
                cr_prom_sample_us(&b, delays[d].name, ws.label[i],
                                  *(const uint64_t *)((const char *)&ws.v[i].last + delays[d].off));
    }
    cr_prom_family(&b, "corral_worker_memory_verdict", "gauge",
                   "1 for the worker's current memory trend verdict.");
    for (size_t i = 0; i < ws.n; i++)
        cr_prom_printf(&b, "corral_worker_memory_verdict{worker=\"%d\",verdict=\"%s\"} 1\n",
                       ws.v[i].id,
                       cr_trend_verdict_to_string((enum cr_trend_verdict)ws.v[i].verdict));
    /* PSI, where the worker has a v2 group of its own. */
    static const struct {
        const char *kind, *window;
        size_t off;
    } psi[] = {
        {"some", "10s", offsetof(struct cr_mem_pressure, some10)},
        {"some", "60s", offsetof(struct cr_mem_pressure, some60)},
        {"full", "10s", offsetof(struct cr_mem_pressure, full10)},
        {"full", "60s", offsetof(struct cr_mem_pressure, full60)},
    };
    cr_prom_family(&b, "corral_worker_memory_pressure_ratio", "gauge",
                   "Share of time the worker's tasks stalled on memory (PSI of its cgroup, v2): "
                   "some = at least one, full = all; over the last 10 s or 60 s.");
    for (size_t i = 0; i < ws.n; i++)
        for (size_t k = 0; ws.v[i].pressure.known && k < sizeof(psi) / sizeof(psi[0]); k++)
            cr_prom_printf(
                &b, "corral_worker_memory_pressure_ratio{worker=\"%d\",kind=\"%s\",window=\"%s\"} %.4f\n",
                ws.v[i].id, psi[k].kind, psi[k].window,
                *(const double *)((const char *)&ws.v[i].pressure + psi[k].off) / 100.0);
    free(ws.v);
    free(ws.label);
    char *text;
    return cr_prom_take(&b, &text, NULL) < 0 ? NULL : text;
}
