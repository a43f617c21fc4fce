/* JSON views of the supervisor and its workers, for `status`, `worker`
 * and the events stream. Units are in the key names. */
#include "status.h"

#include <cjson/cJSON.h>
#include <unistd.h>

#include "config.h"
#include "cr_cgroup.h"
#include "cr_config.h"
#include "events.h"
#include "history.h"
#include "listen.h"
#include "trend.h"
#include "view.h"

static void num(cJSON *o, const char *k, double v)
{
    cJSON_AddNumberToObject(o, k, v);
}

/* A figure the worker reports: null until it did (never a made-up 0). */
static void reported(cJSON *o, const char *k, const struct cr_worker_view *v, unsigned bit,
                     double value)
{
    if (v->last.present & bit)
        num(o, k, value);
    else
        cJSON_AddNullToObject(o, k);
}

static void heap_limit(cJSON *o, const struct cr_worker_view *v)
{
    if (v->last.present & CR_NF_HEAP_LIMIT) {
        num(o, "heap_limit_bytes", (double)v->last.heap_limit);
        cJSON_AddStringToObject(o, "heap_limit_source", "reported");
    } else if (v->heap_limit_given) {
        num(o, "heap_limit_bytes", (double)v->heap_limit_given);
        cJSON_AddStringToObject(o, "heap_limit_source", "passed");
    } else {
        cJSON_AddNullToObject(o, "heap_limit_bytes");
    }
}

cJSON *cr_worker_json(const struct cr_worker *w)
{
    struct cr_worker_view v;
    cr_view_worker(w, &v);
    cJSON *o = cJSON_CreateObject();
    num(o, "id", v.id);
    num(o, "pid", v.pid);
    num(o, "generation", v.generation);
    cJSON_AddStringToObject(o, "state", cr_wstate_to_string(v.state));
    num(o, "uptime_ms", (double)v.uptime_ms);
    num(o, "restarts", v.restarts);
    if (v.replaces)
        num(o, "replaces_pid", v.replaces_pid);
    if (v.replaced_by)
        num(o, "replaced_by_pid", v.replaced_by_pid);
    cJSON_AddBoolToObject(o, "retiring", v.retiring);
    cJSON_AddBoolToObject(o, "recycle_queued", v.recycle_queued);
    cJSON_AddBoolToObject(o, "unannounced", v.unannounced);
    reported(o, "requests", &v, CR_NF_REQUESTS, (double)v.last.requests);
    reported(o, "inflight", &v, CR_NF_INFLIGHT, (double)v.last.inflight);
    if (v.rss)
        num(o, "rss_bytes", (double)v.rss);
    else
        cJSON_AddNullToObject(o, "rss_bytes");
    reported(o, "heap_used_bytes", &v, CR_NF_HEAP_USED, (double)v.last.heap_used);
    reported(o, "heap_total_bytes", &v, CR_NF_HEAP_TOTAL, (double)v.last.heap_total);
    heap_limit(o, &v);
    reported(o, "external_bytes", &v, CR_NF_EXTERNAL, (double)v.last.external);
    num(o, "cgroup_usage_bytes", (double)v.cg_usage);
    num(o, "cgroup_limit_bytes", (double)v.cg_limit);
    num(o, "cgroup_soft_bytes", (double)v.cg_soft);
    if (v.cgroup)
        cJSON_AddStringToObject(o, "cgroup", v.cgroup);
    num(o, "oom_events", v.oom_events);
    num(o, "oom_kills", v.oom_kills);
    reported(o, "loop_delay_p50_us", &v, CR_NF_DELAY_P50, (double)v.last.delay_p50_us);
    reported(o, "loop_delay_p99_us", &v, CR_NF_DELAY_P99, (double)v.last.delay_p99_us);
    reported(o, "loop_delay_max_us", &v, CR_NF_DELAY_MAX, (double)v.last.delay_max_us);
    reported(o, "elu", &v, CR_NF_ELU, v.last.elu);
    reported(o, "pool_queue", &v, CR_NF_POOL_QUEUE, (double)v.last.pool_queue);
    if (v.spoke)
        num(o, "last_report_ago_ms", (double)v.last_report_ago_ms);
    else
        cJSON_AddNullToObject(o, "last_report_ago_ms");
    cJSON_AddStringToObject(o, "verdict", cr_trend_verdict_to_string((enum cr_trend_verdict)v.verdict));
    cJSON_AddStringToObject(o, "verdict_detail", v.verdict_text);
    if (v.status_text[0])
        cJSON_AddStringToObject(o, "status", v.status_text);
    if (v.last_death[0]) {
        cJSON *d = cJSON_AddObjectToObject(o, "last_death");
        cJSON_AddStringToObject(d, "category", v.last_death);
        cJSON_AddStringToObject(d, "reason", v.last_death_reason);
    } else {
        cJSON_AddNullToObject(o, "last_death");
    }
    return o;
}

cJSON *cr_status_json(const struct cr_supervisor *sup)
{
    struct cr_supervisor_view v;
    cr_view_supervisor(sup, &v);
    cJSON *root = cJSON_CreateObject();
    cJSON *s = cJSON_AddObjectToObject(root, "supervisor");
    num(s, "pid", getpid());
    cJSON_AddStringToObject(s, "version", CR_VERSION);
    num(s, "uptime_ms", (double)v.uptime_ms);
    num(s, "started_ms", (double)v.started_wall_ms);
    cJSON_AddStringToObject(s, "state", v.stopping ? "stopping" : v.reloading ? "reloading" : "running");
    num(s, "workers_target", v.target);
    num(s, "workers_ready", v.ready);
    cJSON *l = cJSON_AddArrayToObject(s, "listen");
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "address", v.listener->addr);
    cJSON_AddStringToObject(a, "source", v.listener->from_systemd ? "systemd" : "bound");
    cJSON_AddStringToObject(a, "balance", cr_balance_to_string(v.config->balance));
    cJSON_AddItemToArray(l, a);
    cJSON *cg = cJSON_AddObjectToObject(s, "cgroup");
    cJSON_AddStringToObject(cg, "layout",
                            v.cgroups ? cr_cgroup_layout_to_string(v.cg_layout) : "none");
    if (v.cg_workers)
        cJSON_AddStringToObject(cg, "workers", v.cg_workers);
    cJSON *d = cJSON_AddObjectToObject(s, "deaths");
    for (int i = 0; i < _CR_DEATH_MAX; i++)
        num(d, cr_death_to_string((enum cr_death)i), v.deaths_by_category[i]);
    cJSON *c = cJSON_AddObjectToObject(s, "config");
    cr_config_to_json(v.config, c);
    cJSON *cmd = cJSON_AddArrayToObject(c, "command");
    if (v.config->argc)
        for (size_t i = 0; i < v.config->argc; i++)
            cJSON_AddItemToArray(cmd, cJSON_CreateString(v.config->argv[i]));
    else
        cJSON_AddItemToArray(cmd, cJSON_CreateString(v.worker_path));

    cJSON *ws = cJSON_AddArrayToObject(root, "workers");
    for (const struct cr_worker *w = cr_view_first(sup); w; w = cr_view_next(w))
        cJSON_AddItemToArray(ws, cr_worker_json(w));
    return root;
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
    default:
        return NULL;
    }
    if (!name)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", name);
    num(o, "time_ms", (double)ev->time_ms);
    num(o, "worker", ev->worker);
    num(o, "pid", ev->pid);
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
