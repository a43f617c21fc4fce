/* The const views of the worker table: counts, flags and snapshots, for
 * the outputs (status, metrics, systemd) that must not see inside. */
#include "view.h"

#include "cr_cgroup.h"
#include "internal.h"

unsigned cr_supervisor_count_ready(const struct cr_supervisor *sup)
{
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        if ((w->state == CR_WS_READY || w->state == CR_WS_BLOCKED) && !w->retire_on_exit)
            n++;
    return n;
}

unsigned cr_supervisor_count_state(const struct cr_supervisor *sup, enum cr_wstate s)
{
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        n += w->state == s;
    return n;
}

unsigned cr_supervisor_target(const struct cr_supervisor *sup)
{
    return sup->target;
}

bool cr_supervisor_stopping(const struct cr_supervisor *sup)
{
    return sup->stopping;
}

bool cr_supervisor_reloading(const struct cr_supervisor *sup)
{
    return sup->reloading;
}

const struct cr_config *cr_supervisor_config(const struct cr_supervisor *sup)
{
    return &sup->cfg;
}

const struct cr_history *cr_supervisor_history(const struct cr_supervisor *sup)
{
    return sup->history;
}

uint64_t cr_supervisor_now_ms(const struct cr_supervisor *sup)
{
    return cr_now_ms(sup);
}

uint64_t cr_supervisor_uptime_ms(const struct cr_supervisor *sup)
{
    return cr_now_ms(sup) - sup->started_at;
}

const char *cr_worker_state_name(const struct cr_worker *w)
{
    return cr_wstate_to_string(w->state);
}

const struct cr_worker *cr_view_first(const struct cr_supervisor *sup)
{
    return sup->workers;
}

const struct cr_worker *cr_view_next(const struct cr_worker *w)
{
    return w->next;
}

void cr_view_worker(const struct cr_worker *w, struct cr_worker_view *ret)
{
    const struct cr_supervisor *sup = w->sup;
    uint64_t now = cr_now_ms(sup);
    *ret = (struct cr_worker_view){
        .id = w->id,
        .pid = w->pid,
        .generation = w->generation,
        .state = w->state,
        .uptime_ms = w->pid ? now - w->spawned_at : 0,
        .last_report_ago_ms = w->pid ? now - w->last_report_at : 0,
        .restarts = w->restarts,
        .oom_events = w->oom_events,
        .oom_kills = w->oom_kills,
        .replaces = w->replaces != NULL,
        .replaces_pid = w->replaces ? w->replaces->pid : 0,
        .replaced_by = w->replaced_by != NULL,
        .replaced_by_pid = w->replaced_by ? w->replaced_by->pid : 0,
        .retiring = w->retire_on_exit,
        .recycle_queued = w->recycle_queued,
        .last = w->last,
        .spoke = w->spoke,
        .unannounced = w->unannounced && w->state != CR_WS_STARTING,
        .heap_limit_given = w->heap_limit_given,
        .rss = w->rss ? w->rss : w->last.rss,
        .cg_usage = w->cg_usage,
        .cg_limit = w->cg_limit,
        .cg_soft = sup->cfg.memory_soft,
        .cgroup = w->cg ? cr_cgroup_rel(w->cg) : NULL,
        .verdict = w->verdict,
        .verdict_text = w->verdict_text,
        .status_text = w->status_text,
        .last_death = w->last_death,
        .last_death_reason = w->last_death_reason,
    };
}

void cr_view_supervisor(const struct cr_supervisor *sup, struct cr_supervisor_view *ret)
{
    *ret = (struct cr_supervisor_view){
        .uptime_ms = cr_now_ms(sup) - sup->started_at,
        .started_wall_ms = sup->started_wall_ms,
        .stopping = sup->stopping,
        .reloading = sup->reloading,
        .target = sup->target,
        .ready = cr_supervisor_count_ready(sup),
        .listener = &sup->listener,
        .cgroups = sup->cgroups,
        .cg_layout = sup->cg_layout,
        .cg_workers = sup->cg_workers ? cr_cgroup_rel(sup->cg_workers) : NULL,
        .deaths_by_category = sup->deaths_by_category,
        .config = &sup->cfg,
        .worker_path = sup->worker_path,
        .spares_target = sup->cfg.spares,
        .spares_frozen = cr_supervisor_count_state(sup, CR_WS_SPARE),
        .spares_starting = cr_supervisor_count_state(sup, CR_WS_SPARE_STARTING) +
                           cr_supervisor_count_state(sup, CR_WS_FREEZING),
        .promotions = sup->promotions,
        .early_promotions = sup->early_promotions,
        .exit_notice = sup->exit_notice[0] ? sup->exit_notice : "off",
        .freezer = sup->freezer_kind == CR_FREEZER_NONE
                       ? "SIGSTOP"
                       : cr_freezer_kind_to_string((enum cr_freezer_kind)sup->freezer_kind),
    };
}
