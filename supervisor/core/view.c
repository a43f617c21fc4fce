/* The const views of the worker table: counts, flags and snapshots, for
 * the outputs (status, metrics, systemd) that must not see inside. */
#include "view.h"

#include <stdio.h>

#include "budget.h"
#include "cgtree.h"
#include "cr_cgroup.h"
#include "freeze.h"
#include "internal.h"
#include "page.h"
#include "self.h"
#include "wio.h"

/* Serving: ready, or blocked (traced for its stack before a kill too),
 * and not on its way out. */
static bool serving(const struct cr_worker *w)
{
    return (w->state == CR_WS_READY || w->state == CR_WS_BLOCKED ||
            w->state == CR_WS_TRACING) &&
           (w->role == CR_ROLE_HOLDER || w->role == CR_ROLE_REPLACED);
}

/* Serving and not blocked: what /readyz counts. */
static unsigned answering(const struct cr_supervisor *sup)
{
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        n += serving(w) && w->state == CR_WS_READY;
    return n;
}

unsigned cr_supervisor_count_ready(const struct cr_supervisor *sup)
{
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        n += serving(w);
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
    return sup->phase == CR_PHASE_STOPPING;
}

bool cr_supervisor_lame_duck(const struct cr_supervisor *sup)
{
    return sup->phase == CR_PHASE_LAME_DUCK;
}

bool cr_supervisor_reloading(const struct cr_supervisor *sup)
{
    return sup->reload.running;
}

const struct cr_config *cr_supervisor_config(const struct cr_supervisor *sup)
{
    return &sup->cfg;
}

const struct cr_history *cr_supervisor_history(const struct cr_supervisor *sup)
{
    return sup->deaths.history;
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

const struct cr_acceptq_figures *cr_supervisor_accept_queue(const struct cr_supervisor *sup)
{
    return &sup->accept_queue;
}

const struct cr_worker *cr_view_first(const struct cr_supervisor *sup)
{
    return sup->workers;
}

const struct cr_worker *cr_view_next(const struct cr_worker *w)
{
    return w->next;
}

void cr_view_fresh_begin(struct cr_view_fresh *f)
{
    *f = (struct cr_view_fresh){0};
}

/* The memory figures of a view: read now when the budget allows, else the
 * last sample (or the worker's own report) with its age. A worker without
 * a process has none: its last process's figures are not its own. */
static void memory_now(const struct cr_worker *w, struct cr_view_fresh *fresh,
                       struct cr_worker_view *v)
{
    const struct cr_gen *g = &w->g;
    uint64_t now = cr_now_ms(w->sup);
    if (!g->pid)
        return;
    bool read = fresh && cr_wstate_sampled(w->state) && fresh->read < CR_VIEW_FRESH_MAX;
    if (read)
        fresh->read++;
    /* Under --pss the figure asked for is PSS, which only the watch's
     * samples read (a statm descriptor may be open still, until its next). */
    if (read && !w->sup->cfg.pss && (v->rss = cr_io_resident_now(g)))
        v->rss_age_ms = 0;
    else if ((v->rss = g->mem.rss))
        v->rss_age_ms = now - g->mem.rss_at;
    else if ((g->report.last.present & CR_NF_RSS) && (v->rss = g->report.last.rss))
        v->rss_age_ms = now - g->report.last_at;
    if (!v->cg)
        return;
    uint64_t usage = 0;
    if (read && cr_cgroup_peek_usage(g->cg.cg, &usage) == 0 && usage) {
        v->cg_usage = usage;
        v->cg_usage_age_ms = 0;
    } else if ((v->cg_usage = g->mem.cg_usage)) {
        v->cg_usage_age_ms = now - g->mem.cg_usage_at;
    }
}

void cr_view_worker(const struct cr_worker *w, struct cr_view_fresh *fresh,
                    struct cr_worker_view *ret)
{
    const struct cr_supervisor *sup = w->sup;
    const struct cr_gen *g = &w->g;
    const struct cr_slot *slot = w->slot;
    uint64_t now = cr_now_ms(sup);
    bool died = slot && slot->last_death != _CR_DEATH_MAX;
    *ret = (struct cr_worker_view){
        .id = cr_worker_id(w),
        .pid = g->pid,
        .generation = g->generation,
        .state = w->state,
        .uptime_ms = g->pid ? now - g->spawned_at : 0,
        .last_report_ago_ms = g->pid ? now - g->report.last_at : 0,
        .restarts = slot ? slot->restarts : 0,
        .oom_kills = slot ? slot->oom_kills : 0,
        .oom_events = g->cg.oom_events,
        .role = w->role,
        .replaces_pid =
            w->role == CR_ROLE_REPLACEMENT && slot && slot->holder ? slot->holder->g.pid : 0,
        .replaced_by_pid =
            w->role == CR_ROLE_REPLACED && slot && slot->replacement ? slot->replacement->g.pid : 0,
        .retiring = w->role == CR_ROLE_RETIRING || w->role == CR_ROLE_HANDED_OVER,
        .recycle_queued = w->intent == CR_INTENT_RECYCLE,
        .last = g->report.last,
        .spoke = g->report.speech != CR_SPEECH_SILENT,
        .unannounced = w->readiness == CR_READINESS_ASSUMED && w->state != CR_WS_STARTING,
        .heap_limit_given = g->heap_limit_given,
        .cg = g->cg.cg != NULL,
        .cg_limit = g->cg.limit,
        .cg_soft = sup->cfg.memory_soft,
        .cgroup = g->cg.cg ? cr_cgroup_rel(g->cg.cg) : NULL,
        .verdict = g->mem.verdict,
        .pressure = g->mem.pressure,
        .verdict_text = g->mem.verdict_text,
        .status_text = g->report.status_text,
        .last_death = died ? cr_death_to_string(slot->last_death) : NULL,
        .last_death_reason = died ? slot->last_death_reason : NULL,
    };
    memory_now(w, fresh, ret);
    if (cr_wstate_sampled(w->state))
        cr_page_request(g->page, &ret->request);
}

void cr_view_supervisor(const struct cr_supervisor *sup, struct cr_supervisor_view *ret)
{
    *ret = (struct cr_supervisor_view){
        .uptime_ms = cr_now_ms(sup) - sup->started_at,
        .started_wall_ms = sup->started_wall_ms,
        .stopping = sup->phase == CR_PHASE_STOPPING,
        .lame_duck = sup->phase == CR_PHASE_LAME_DUCK,
        .drain_in_ms = sup->phase == CR_PHASE_LAME_DUCK && sup->drain_at > cr_now_ms(sup)
                           ? sup->drain_at - cr_now_ms(sup)
                           : 0,
        .answering = answering(sup),
        .reloading = sup->reload.running,
        .target = sup->target,
        .ready = cr_supervisor_count_ready(sup),
        .listener = &sup->listener,
        .cgroups = sup->cgtree.on,
        .cg_layout = sup->cgtree.layout,
        .cg_workers = cr_cgtree_workers_rel(&sup->cgtree),
        .deaths_by_category = sup->deaths.by_category,
        .config = &sup->cfg,
        .worker_path = cr_spawner_worker_path(&sup->spawner),
        .spares_target = sup->cfg.spares,
        .spares_frozen = cr_supervisor_count_state(sup, CR_WS_SPARE),
        .spares_starting = cr_supervisor_count_state(sup, CR_WS_SPARE_STARTING) +
                           cr_supervisor_count_state(sup, CR_WS_FREEZING),
        .promotions = sup->spares.promotions,
        .early_promotions = sup->spares.early_promotions,
        .freezer = cr_freeze_method(&sup->freezing),
        .accept_queue = &sup->accept_queue,
        .accept_queue_age_ms =
            sup->accept_queue.known ? cr_now_ms(sup) - sup->accept_queue.sampled_at : 0,
    };
}

bool cr_view_ready(const struct cr_supervisor_view *v, unsigned *need, char *why, size_t size)
{
    unsigned min = v->config->ready_min;
    unsigned n = min && min < v->target ? min : v->target;
    if (need)
        *need = n;
    if (v->stopping) {
        snprintf(why, size, "not ready: stopping, the workers are draining");
        return false;
    }
    if (v->lame_duck) {
        snprintf(why, size, "not ready: stopping, the drain starts in %llu ms (--stop-delay)",
                 (unsigned long long)v->drain_in_ms);
        return false;
    }
    bool ok = v->answering >= n;
    snprintf(why, size, "%s: %u of %u worker(s) ready and answering (%u needed)",
             ok ? "ready" : "not ready", v->answering, v->target, n);
    return ok;
}

void cr_view_budget(const struct cr_supervisor *sup, struct cr_budget_in *in, struct cr_budget *b)
{
    const char *group = NULL;
    bool oom_group = false;
    uint64_t limit = cr_cgtree_enclosing_limit(&sup->cgtree, &group, &oom_group);
    *in = (struct cr_budget_in){
        /* Without per-worker groups corrald enforces --memory-max itself,
         * a little late by design (budget.h). */
        .per_worker = !sup->cfg.memory_max ? 0
                      : sup->cgtree.on     ? sup->cfg.memory_max
                                           : sup->cfg.memory_max + CR_BUDGET_ENFORCED_SLACK,
        .by_corrald = !sup->cgtree.on && sup->cfg.memory_max,
        .workers = sup->target,
        .spares = sup->cfg.spares,
        .replacements = 1,
        .self = cr_self_rss(),
        .limit = limit,
        .group = group,
        .oom_group = oom_group,
    };
    cr_budget_check(in, b);
}
