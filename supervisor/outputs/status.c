/* JSON views of the supervisor and its workers, for `status`, `worker`
 * and the events stream. Units are in the key names. */
#include "status.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <unistd.h>

#include "autoscale.h"
#include "budget.h"
#include "config.h"
#include "cr_cgroup.h"
#include "cr_config.h"
#include "decimal.h"
#include "events.h"
#include "acceptq.h"
#include "history.h"
#include "ondeath.h"
#include "listen.h"
#include "trend.h"
#include "view.h"

/* Keys are string literals (or static tables): added by reference
 * (…CS), which spares a copy per member. */
static void add(cJSON *o, const char *k, cJSON *item)
{
    if (item && !cJSON_AddItemToObjectCS(o, k, item))
        cJSON_Delete(item);
}

/* cJSON prints every number with sprintf("%1.15g") and reads it back with
 * sscanf to check it: at 256 workers, over half of a status request went
 * there. A whole number below 10^15 prints as its plain digits either way,
 * so it goes in as raw text; anything larger (cgroup v1's "no limit") stays
 * a number and prints exactly as it did. */
static void num(cJSON *o, const char *k, uint64_t v)
{
    char d[CR_DECIMAL_U64_SIZE];
    if (v < CR_DECIMAL_G15_BELOW) {
        cr_decimal_u64(d, v);
        add(o, k, cJSON_CreateRaw(d));
    } else {
        add(o, k, cJSON_CreateNumber((double)v));
    }
}

/* ids and pids: never negative, but a negative one must still print as
 * itself. */
static void inum(cJSON *o, const char *k, long long v)
{
    if (v < 0)
        add(o, k, cJSON_CreateNumber((double)v));
    else
        num(o, k, (uint64_t)v);
}

static void str(cJSON *o, const char *k, const char *v)
{
    add(o, k, cJSON_CreateString(v));
}

/* A string that lives as long as corrald (a name from a static table);
 * a NULL name (an enum out of range) leaves the key out. */
static void lit(cJSON *o, const char *k, const char *v)
{
    if (v)
        add(o, k, cJSON_CreateStringReference(v));
}

static void flag(cJSON *o, const char *k, bool v)
{
    add(o, k, cJSON_CreateBool(v));
}

static void null(cJSON *o, const char *k)
{
    add(o, k, cJSON_CreateNull());
}

/* A figure the worker reports: null until it did (never a made-up 0). */
static void reported(cJSON *o, const char *k, const struct cr_worker_view *v, unsigned bit,
                     uint64_t value)
{
    if (v->last.present & bit)
        num(o, k, value);
    else
        null(o, k);
}

static void heap_limit(cJSON *o, const struct cr_worker_view *v)
{
    if (v->last.present & CR_NF_HEAP_LIMIT) {
        num(o, "heap_limit_bytes", v->last.heap_limit);
        lit(o, "heap_limit_source", "reported");
    } else if (v->heap_limit_given) {
        num(o, "heap_limit_bytes", v->heap_limit_given);
        lit(o, "heap_limit_source", "passed");
    } else {
        null(o, "heap_limit_bytes");
    }
}

/* A figure corrald measures: null when unknown (never a made-up 0), else
 * the figure and its age under age_key (0: read for this answer). */
static void measured(cJSON *o, const char *k, const char *age_key, uint64_t value, uint64_t age)
{
    if (value) {
        num(o, k, value);
        num(o, age_key, age);
    } else {
        null(o, k);
        null(o, age_key);
    }
}

static cJSON *worker_json(const struct cr_worker *w, struct cr_view_fresh *fresh)
{
    struct cr_worker_view v;
    cr_view_worker(w, fresh, &v);
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    inum(o, "id", v.id);
    inum(o, "pid", v.pid);
    num(o, "generation", v.generation);
    lit(o, "state", cr_wstate_to_string(v.state));
    num(o, "uptime_ms", v.uptime_ms);
    num(o, "restarts", v.restarts);
    if (v.role == CR_ROLE_REPLACEMENT)
        inum(o, "replaces_pid", v.replaces_pid);
    if (v.role == CR_ROLE_REPLACED)
        inum(o, "replaced_by_pid", v.replaced_by_pid);
    flag(o, "retiring", v.retiring);
    flag(o, "recycle_queued", v.recycle_queued);
    flag(o, "unannounced", v.unannounced);
    reported(o, "requests", &v, CR_NF_REQUESTS, v.last.requests);
    reported(o, "inflight", &v, CR_NF_INFLIGHT, v.last.inflight);
    measured(o, "rss_bytes", "rss_age_ms", v.rss, v.rss_age_ms);
    reported(o, "heap_used_bytes", &v, CR_NF_HEAP_USED, v.last.heap_used);
    reported(o, "heap_total_bytes", &v, CR_NF_HEAP_TOTAL, v.last.heap_total);
    heap_limit(o, &v);
    reported(o, "external_bytes", &v, CR_NF_EXTERNAL, v.last.external);
    measured(o, "cgroup_usage_bytes", "cgroup_usage_age_ms", v.cg_usage, v.cg_usage_age_ms);
    num(o, "cgroup_limit_bytes", v.cg_limit);
    num(o, "cgroup_soft_bytes", v.cg_soft);
    if (v.cgroup)
        str(o, "cgroup", v.cgroup);
    /* Counted by the group's OOM watch: without a group of its own, not
     * known (0 would say "none happened"). */
    if (v.cg)
        num(o, "oom_events", v.oom_events);
    else
        null(o, "oom_events");
    num(o, "oom_kills", v.oom_kills);
    reported(o, "loop_delay_p50_us", &v, CR_NF_DELAY_P50, v.last.delay_p50_us);
    reported(o, "loop_delay_p99_us", &v, CR_NF_DELAY_P99, v.last.delay_p99_us);
    reported(o, "loop_delay_max_us", &v, CR_NF_DELAY_MAX, v.last.delay_max_us);
    if (v.last.present & CR_NF_ELU)
        add(o, "elu", cJSON_CreateNumber(v.last.elu)); /* a fraction: a real number */
    else
        null(o, "elu");
    reported(o, "pool_queue", &v, CR_NF_POOL_QUEUE, v.last.pool_queue);
    if (v.spoke)
        num(o, "last_report_ago_ms", v.last_report_ago_ms);
    else
        null(o, "last_report_ago_ms");
    lit(o, "verdict", cr_trend_verdict_to_string(v.verdict));
    str(o, "verdict_detail", v.verdict_text);
    if (v.status_text[0])
        str(o, "status", v.status_text);
    add(o, "request", cr_request_seen_to_json(&v.request));
    if (v.pressure.known) { /* v2, with PSI */
        cJSON *p = cJSON_AddObjectToObject(o, "memory_pressure");
        add(p, "some_avg10", cJSON_CreateNumber(v.pressure.some10));
        add(p, "some_avg60", cJSON_CreateNumber(v.pressure.some60));
        add(p, "full_avg10", cJSON_CreateNumber(v.pressure.full10));
        add(p, "full_avg60", cJSON_CreateNumber(v.pressure.full60));
    } else {
        null(o, "memory_pressure");
    }
    if (v.last_death) {
        cJSON *d = cJSON_CreateObject();
        str(d, "category", v.last_death);
        str(d, "reason", v.last_death_reason);
        add(o, "last_death", d);
    } else {
        null(o, "last_death");
    }
    return o;
}

/* The accept queue (model/acceptq.h); null until a listening TCP socket
 * was sampled (a Unix socket from systemd has no such figures). */
static void listen_queue(cJSON *s, const struct cr_supervisor_view *v)
{
    const struct cr_acceptq_figures *q = v->accept_queue;
    if (!q->known) {
        null(s, "listen_queue");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    num(o, "length", q->length);
    num(o, "max", q->max);
    num(o, "waited_ms", q->waited_ms);
    num(o, "nonempty_ms", q->nonempty_ms);
    flag(o, "saturated", q->saturated);
    num(o, "saturations", q->saturations);
    num(o, "sockets", q->sockets);
    num(o, "age_ms", v->accept_queue_age_ms);
    add(s, "listen_queue", o);
}

/* A measured figure, or null where unknown (negative). */
static void fig(cJSON *o, const char *k, double v)
{
    if (v < 0)
        null(o, k);
    else
        add(o, k, cJSON_CreateNumber(round(v * 1000) / 1000));
}

static cJSON *decision_json(const struct cr_scale_decision *d)
{
    cJSON *o = cJSON_CreateObject();
    num(o, "from", d->from);
    num(o, "to", d->to);
    lit(o, "why", cr_scale_why_to_string(d->why));
    str(o, "text", d->text);
    return o;
}

/* --workers MIN..MAX: the bounds, the steps, the last decision published
 * and what the last tick measured; null while N is fixed. */
static cJSON *scale_json(const struct cr_config *c, const struct cr_scale_status *st)
{
    if (!c->workers_max)
        return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    num(o, "min", c->workers_min);
    num(o, "max", c->workers_max);
    num(o, "ups", st ? st->ups : 0);
    num(o, "downs", st ? st->downs : 0);
    num(o, "holds", st ? st->holds : 0);
    if (st && st->decided) {
        cJSON *l = decision_json(&st->last);
        num(l, "time_ms", st->last_wall_ms);
        add(o, "last", l);
    } else {
        null(o, "last");
    }
    cJSON *m = cJSON_AddObjectToObject(o, "measured");
    const struct cr_scale_sample *s = st ? &st->sample : NULL;
    /* Unknown (no tick yet, no TCP listener to read) is null, never 0. */
    if (s && s->queue_known) {
        num(m, "queue_length", s->queue_len);
        num(m, "queue_waited_ms", s->queue_waited_ms);
    } else {
        null(m, "queue_length");
        null(m, "queue_waited_ms");
    }
    fig(m, "busy", s ? s->busy : -1);
    fig(m, "cpu_each", s ? s->cpu_each : -1);
    fig(m, "cpu_wanted_each", s ? s->demand_each : -1);
    fig(m, "idle_cores", s ? s->idle_cores : -1);
    fig(m, "cpu_pressure", s ? s->cpu_pressure : -1);
    return o;
}

static cJSON *scale_event_json(const struct cr_event *ev)
{
    cJSON *o = decision_json(ev->scale);
    cJSON *e = cJSON_CreateObject();
    lit(e, "event", "scale");
    num(e, "time_ms", ev->time_ms);
    cJSON *item;
    while ((item = o->child)) {
        cJSON_DetachItemViaPointer(o, item);
        cJSON_AddItemToObject(e, item->string, item);
    }
    cJSON_Delete(o);
    return e;
}

cJSON *cr_status_json(const struct cr_supervisor *sup, const struct cr_status_extra *x)
{
    struct cr_supervisor_view v;
    cr_view_supervisor(sup, &v);
    cJSON *root = cJSON_CreateObject();
    cJSON *s = cJSON_AddObjectToObject(root, "supervisor");
    inum(s, "pid", getpid());
    lit(s, "version", CR_VERSION);
    num(s, "uptime_ms", v.uptime_ms);
    num(s, "started_ms", v.started_wall_ms);
    lit(s, "state",
        v.stopping    ? "stopping"
        : v.lame_duck ? "lame-duck"
        : v.reloading ? "reloading"
                      : "running");
    if (v.lame_duck)
        num(s, "drain_in_ms", v.drain_in_ms);
    num(s, "workers_target", v.target);
    num(s, "workers_ready", v.ready);
    char why[160];
    unsigned need;
    bool ready = cr_view_ready(&v, &need, why, sizeof why);
    cJSON *rz = cJSON_AddObjectToObject(s, "readiness");
    cJSON_AddBoolToObject(rz, "ready", ready);
    num(rz, "answering", v.answering);
    num(rz, "needed", need);
    str(rz, "reason", why);
    cJSON *sp = cJSON_AddObjectToObject(s, "spares");
    num(sp, "target", v.spares_target);
    num(sp, "frozen", v.spares_frozen);
    num(sp, "starting", v.spares_starting);
    num(sp, "promotions", v.promotions);
    num(sp, "early_promotions", v.early_promotions);
    str(sp, "exit_notice", x && x->exit_notice ? x->exit_notice : "off");
    str(sp, "freezer", v.freezer);
    cJSON *l = cJSON_AddArrayToObject(s, "listen");
    cJSON *a = cJSON_CreateObject();
    str(a, "address", v.listener->addr);
    lit(a, "source", v.listener->from_systemd ? "systemd" : "bound");
    lit(a, "balance", cr_balance_to_string(v.config->balance));
    cJSON_AddItemToArray(l, a);
    listen_queue(s, &v);
    if (x && x->metrics_addr)
        str(s, "metrics_listen", x->metrics_addr);
    cJSON *cg = cJSON_AddObjectToObject(s, "cgroup");
    lit(cg, "layout", v.cgroups ? cr_cgroup_layout_to_string(v.cg_layout) : "none");
    if (v.cg_workers)
        str(cg, "workers", v.cg_workers);
    struct cr_budget_in bi;
    struct cr_budget b;
    cr_view_budget(sup, &bi, &b);
    if (!b.limited) {
        cJSON_AddNullToObject(s, "memory_budget");
    } else {
        char line[512];
        cJSON *mb = cJSON_AddObjectToObject(s, "memory_budget");
        cJSON_AddBoolToObject(mb, "fits", b.fits);
        num(mb, "limit_bytes", bi.limit);
        if (bi.group)
            str(mb, "limit_group", bi.group);
        cJSON_AddBoolToObject(mb, "oom_group", bi.oom_group);
        if (bi.per_worker)
            num(mb, "per_worker_bytes", bi.per_worker);
        else
            cJSON_AddNullToObject(mb, "per_worker_bytes");
        num(mb, "workers", bi.workers);
        num(mb, "spares", bi.spares);
        num(mb, "reload_replacements", bi.replacements);
        if (bi.self)
            num(mb, "corrald_bytes", bi.self);
        else
            null(mb, "corrald_bytes"); /* /proc/self/statm unread */
        num(mb, "margin_bytes", b.margin);
        num(mb, "need_bytes", b.need);
        num(mb, "fit_workers", b.fit_workers);
        num(mb, "fit_per_worker_bytes", b.fit_per_worker);
        cr_budget_format(&bi, &b, line, sizeof line);
        str(mb, "summary", line);
    }
    cJSON *d = cJSON_AddObjectToObject(s, "deaths");
    for (int i = 0; i < _CR_DEATH_MAX; i++)
        num(d, cr_death_to_string((enum cr_death)i), v.deaths_by_category[i]);
    /* The --on-death runs: what is running and waiting, what became of them. */
    struct cr_ondeath_stats od;
    cr_ondeath_stats(x ? x->on_death : NULL, &od);
    cJSON *odj = cJSON_AddObjectToObject(s, "on_death");
    if (v.config->on_death)
        str(odj, "program", v.config->on_death);
    else
        null(odj, "program");
    num(odj, "running", od.running);
    num(odj, "pending", od.pending);
    num(odj, "started", od.started);
    num(odj, "succeeded", od.succeeded);
    num(odj, "failed", od.failed);
    num(odj, "timed_out", od.timed_out);
    num(odj, "spawn_failed", od.spawn_failed);
    num(odj, "dropped", od.dropped);
    add(s, "autoscale", scale_json(v.config, x ? x->scale : NULL));
    cJSON *c = cJSON_AddObjectToObject(s, "config");
    cr_config_to_json(v.config, c);
    cJSON *cmd = cJSON_AddArrayToObject(c, "command");
    if (v.config->argc)
        for (size_t i = 0; i < v.config->argc; i++)
            cJSON_AddItemToArray(cmd, cJSON_CreateString(v.config->argv[i]));
    else
        cJSON_AddItemToArray(cmd, cJSON_CreateString(v.worker_path));

    cJSON *ws = cr_workers_json(sup);
    if (!ws) {
        cJSON_Delete(root);
        return NULL;
    }
    add(root, "workers", ws);
    return root;
}

cJSON *cr_worker_json(const struct cr_worker *w)
{
    struct cr_view_fresh fresh;
    cr_view_fresh_begin(&fresh);
    return worker_json(w, &fresh);
}

/* One worker's object as raw JSON text: built, printed and freed at once.
 * 4 KiB holds any worker but one with a long cgroup path or a STATUS= text
 * full of escapes; those are printed into a buffer of their own. */
static cJSON *worker_raw(const struct cr_worker *w, struct cr_view_fresh *fresh)
{
    char buf[4096];
    cJSON *o = worker_json(w, fresh), *raw = NULL;
    if (!o)
        return NULL;
    if (cJSON_PrintPreallocated(o, buf, (int)sizeof(buf), false)) {
        raw = cJSON_CreateRaw(buf);
    } else {
        char *t = cJSON_PrintUnformatted(o);
        raw = t ? cJSON_CreateRaw(t) : NULL;
        cJSON_free(t);
    }
    cJSON_Delete(o);
    return raw;
}

cJSON *cr_workers_json(const struct cr_supervisor *sup)
{
    cJSON *ws = cJSON_CreateArray();
    struct cr_view_fresh fresh;
    cr_view_fresh_begin(&fresh);
    for (const struct cr_worker *w = cr_view_first(sup); ws && w; w = cr_view_next(w)) {
        /* A worker left out for want of memory would be a lie: fail whole. */
        cJSON *o = worker_raw(w, &fresh);
        if (!o || !cJSON_AddItemToArray(ws, o)) {
            cJSON_Delete(o);
            cJSON_Delete(ws);
            return NULL;
        }
    }
    return ws;
}

/* An accept-queue event: no worker, the queue's figures at that round. */
static cJSON *queue_event_json(const struct cr_event *ev)
{
    const struct cr_acceptq_figures *q = ev->queue;
    cJSON *o = cJSON_CreateObject();
    lit(o, "event", cr_event_type_to_string(ev->type));
    num(o, "time_ms", ev->time_ms);
    num(o, "length", q->length);
    num(o, "max", q->max);
    num(o, "waited_ms", q->waited_ms);
    num(o, "nonempty_ms", q->nonempty_ms);
    num(o, "sockets", q->sockets);
    if (ev->type == CR_EV_QUEUE_DRAINED) {
        num(o, "saturated_ms", q->sampled_at - q->saturated_at);
        num(o, "peak_length", q->peak_length);
        num(o, "peak_waited_ms", q->peak_waited_ms);
    }
    return o;
}

cJSON *cr_event_json(const struct cr_event *ev)
{
    const char *name;
    switch (ev->type) {
    case CR_EV_WORKER_STATE:
        name = ev->name;
        break;
    case CR_EV_WORKER_RECYCLE:
        name = "recycling";
        break;
    case CR_EV_WORKER_DIED:
        name = "died";
        break;
    case CR_EV_QUEUE_SATURATED:
    case CR_EV_QUEUE_DRAINED:
        return ev->queue ? queue_event_json(ev) : NULL;
    case CR_EV_SCALE:
        return ev->scale ? scale_event_json(ev) : NULL;
    default:
        return NULL;
    }
    if (!name)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", name);
    num(o, "time_ms", ev->time_ms);
    inum(o, "worker", ev->worker);
    inum(o, "pid", ev->pid);
    num(o, "generation", ev->generation);
    if (ev->type == CR_EV_WORKER_DIED && ev->postmortem) {
        cJSON_AddStringToObject(o, "category", cr_death_to_string(ev->postmortem->category));
        cJSON_AddStringToObject(o, "reason", ev->postmortem->reason);
        cJSON_AddItemToObject(o, "postmortem", cr_postmortem_to_json(ev->postmortem));
    } else if (ev->reason) {
        cJSON_AddStringToObject(o, "reason", ev->reason);
    }
    return o;
}
