/* JSON views of the supervisor and its workers, for `status`, `worker`
 * and the events stream. Units are in the key names. */
#include "status.h"

#include <cjson/cJSON.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "cr_config.h"
#include "events.h"
#include "history.h"
#include "internal.h"
#include "supervisor.h"
#include "trend.h"

static void num(cJSON *o, const char *k, double v)
{
    cJSON_AddNumberToObject(o, k, v);
}

cJSON *cr_worker_json(const struct cr_worker *w)
{
    const struct cr_supervisor *sup = w->sup;
    uint64_t now = cr_now_ms(sup);
    cJSON *o = cJSON_CreateObject();
    num(o, "id", w->id);
    num(o, "pid", w->pid);
    num(o, "generation", w->generation);
    cJSON_AddStringToObject(o, "state", cr_wstate_to_string(w->state));
    num(o, "uptime_ms", w->pid ? (double)(now - w->spawned_at) : 0);
    num(o, "restarts", w->restarts);
    if (w->replaces)
        num(o, "replaces_pid", w->replaces->pid);
    if (w->replaced_by)
        num(o, "replaced_by_pid", w->replaced_by->pid);
    cJSON_AddBoolToObject(o, "retiring", w->retire_on_exit);
    cJSON_AddBoolToObject(o, "recycle_queued", w->recycle_queued);
    num(o, "requests", (double)w->last.requests);
    num(o, "inflight", (double)w->last.inflight);
    num(o, "rss_bytes", (double)(w->rss ? w->rss : w->last.rss));
    num(o, "heap_used_bytes", (double)w->last.heap_used);
    num(o, "heap_total_bytes", (double)w->last.heap_total);
    num(o, "heap_limit_bytes", (double)w->last.heap_limit);
    num(o, "external_bytes", (double)w->last.external);
    num(o, "cgroup_usage_bytes", (double)w->cg_usage);
    num(o, "cgroup_limit_bytes", (double)w->cg_limit);
    num(o, "cgroup_soft_bytes", (double)sup->cfg.memory_soft);
    if (w->cg)
        cJSON_AddStringToObject(o, "cgroup", cr_cgroup_rel(w->cg));
    num(o, "oom_events", w->oom_events);
    num(o, "oom_kills", w->oom_kills);
    num(o, "loop_delay_p50_us", (double)w->last.delay_p50_us);
    num(o, "loop_delay_p99_us", (double)w->last.delay_p99_us);
    num(o, "loop_delay_max_us", (double)w->last.delay_max_us);
    num(o, "elu", w->last.elu);
    num(o, "pool_queue", (double)w->last.pool_queue);
    num(o, "last_report_ago_ms", w->pid ? (double)(now - w->last_report_at) : 0);
    cJSON_AddStringToObject(o, "verdict",
                            cr_trend_verdict_to_string((enum cr_trend_verdict)w->verdict));
    cJSON_AddStringToObject(o, "verdict_detail", w->verdict_text);
    if (w->status_text[0])
        cJSON_AddStringToObject(o, "status", w->status_text);
    if (w->last_death[0]) {
        cJSON *d = cJSON_AddObjectToObject(o, "last_death");
        cJSON_AddStringToObject(d, "category", w->last_death);
        cJSON_AddStringToObject(d, "reason", w->last_death_reason);
    } else {
        cJSON_AddNullToObject(o, "last_death");
    }
    return o;
}

cJSON *cr_status_json(const struct cr_supervisor *sup)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *s = cJSON_AddObjectToObject(root, "supervisor");
    num(s, "pid", getpid());
    cJSON_AddStringToObject(s, "version", CR_VERSION);
    num(s, "uptime_ms", (double)(cr_now_ms(sup) - sup->started_at));
    num(s, "started_ms", (double)sup->started_wall_ms);
    cJSON_AddStringToObject(s, "state", sup->stopping    ? "stopping"
                                        : sup->reloading ? "reloading"
                                                         : "running");
    num(s, "workers_target", sup->target);
    num(s, "workers_ready", cr_supervisor_count_ready(sup));
    cJSON *l = cJSON_AddArrayToObject(s, "listen");
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "address", sup->listener.addr);
    cJSON_AddStringToObject(a, "source", sup->listener.from_systemd ? "systemd" : "bound");
    cJSON_AddStringToObject(a, "balance", cr_balance_to_string(sup->cfg.balance));
    cJSON_AddItemToArray(l, a);
    cJSON *cg = cJSON_AddObjectToObject(s, "cgroup");
    cJSON_AddStringToObject(cg, "layout",
                            sup->cgroups ? cr_cgroup_layout_to_string(sup->cg_layout) : "none");
    if (sup->cg_workers)
        cJSON_AddStringToObject(cg, "workers", cr_cgroup_rel(sup->cg_workers));
    cJSON *d = cJSON_AddObjectToObject(s, "deaths");
    for (int i = 0; i < _CR_DEATH_MAX; i++)
        num(d, cr_death_to_string((enum cr_death)i), sup->deaths_by_category[i]);
    cJSON *c = cJSON_AddObjectToObject(s, "config");
    cr_config_to_json(&sup->cfg, c);
    cJSON *cmd = cJSON_AddArrayToObject(c, "command");
    if (sup->cfg.argc)
        for (size_t i = 0; i < sup->cfg.argc; i++)
            cJSON_AddItemToArray(cmd, cJSON_CreateString(sup->cfg.argv[i]));
    else
        cJSON_AddItemToArray(cmd, cJSON_CreateString(sup->worker_path));

    cJSON *ws = cJSON_AddArrayToObject(root, "workers");
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
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
