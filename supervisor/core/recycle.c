/* Rolling replacement, a part of the supervisor core (supervisor_int.h).
 * A recycle (memory soft limit, request cap, lifetime, reload, restart)
 * is queued; up to --recycle-parallel replacements start at once, and each
 * old worker is drained when its replacement is ready (become_ready in
 * supervisor.c); one not ready yet restarts in place. Also the drain of a
 * worker that goes for good. */

#include <signal.h>
#include <stdio.h>

#include "internal.h"
#include "log.h"
#include "supervisor.h"
#include "supervisor_int.h"

static unsigned replacements_in_progress(const struct cr_supervisor *sup)
{
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->replaces)
            n++;
    return n;
}

static void start_replacement(struct cr_worker *old)
{
    struct cr_worker *r = cr_worker_new(old->sup, old->id);
    if (!r)
        return;
    old->recycle_queued = false;
    r->generation = old->generation;
    r->restart = old->restart;
    r->restarts = old->restarts;
    r->oom_kills = old->oom_kills;
    r->replaces = old;
    old->replaced_by = r;
    cr_worker_start(r);
}

/* A worker that is not ready yet serves no one corrald counts on: a
 * recycle (reload, the soft limit crossed while starting) restarts it in
 * place — a planned death, then a fresh process at once — rather than wait
 * for a readiness that may never come. */
static void restart_in_place(struct cr_worker *w)
{
    w->recycle_queued = false;
    w->kill_reason = CR_KILL_RECYCLE;
    snprintf(w->kill_text, sizeof(w->kill_text), "%s", w->recycle_text);
    cr_worker_event(w, CR_WE_DRAIN);
}

void cr_supervisor_pump_recycles(struct cr_supervisor *sup)
{
    if (sup->stopping)
        return;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->recycle_queued && w->state == CR_WS_STARTING && !w->replaced_by &&
            !w->retire_on_exit)
            restart_in_place(w);
    /* Counted once: called on every READY=1, this must stay one pass. */
    unsigned running = replacements_in_progress(sup);
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        if (running >= sup->cfg.recycle_parallel)
            break;
        if (w->recycle_queued && !w->replaced_by && !w->retire_on_exit &&
            (w->state == CR_WS_READY || w->state == CR_WS_BLOCKED)) {
            start_replacement(w);
            running++;
        }
    }
    bool pending = false;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->recycle_queued || w->replaces)
            pending = true;
    if (!pending && sup->reloading) {
        sup->reloading = false;
        if (sup->reload_failed)
            cr_log(CR_LOG_ERR, "reload finished: %u replacement(s) died before ready; their "
                               "old workers keep serving", sup->reload_failed);
        else
            cr_log(CR_LOG_NOTICE, "reload complete: every worker replaced");
        struct cr_event ev = {.type = CR_EV_RELOAD, .phase = CR_RELOAD_FINISHED,
                              .failed = sup->reload_failed};
        sup->reload_failed = 0;
        cr_supervisor_publish(sup, &ev);
    }
}

void cr_worker_recycle(struct cr_worker *w, const char *why)
{
    if (w->recycle_queued || w->replaced_by || w->retire_on_exit || w->replaces ||
        !cr_wstate_has_process(w->state) || w->state == CR_WS_DRAINING ||
        w->state == CR_WS_KILLING || cr_now_ms(w->sup) < w->recycle_after)
        return;
    w->recycle_queued = true;
    snprintf(w->recycle_text, sizeof(w->recycle_text), "%s", why);
    cr_log_event(CR_LOG_NOTICE, "recycle", w->id, w->pid, NULL, "worker %d: recycle: %s", w->id,
                 why);
    struct cr_event ev = cr_worker_stamp(w, CR_EV_WORKER_RECYCLE);
    ev.reason = why;
    cr_supervisor_publish(w->sup, &ev);
    cr_supervisor_pump_recycles(w->sup);
}

/* Asks a worker to go away for good (stop, scale-down, handed over). */
void cr_worker_drain(struct cr_worker *w, enum cr_kill_reason why, const char *text)
{
    w->retire_on_exit = true;
    w->recycle_queued = false;
    /* Only a drain that really sends SIGTERM changes the ledger: a worker
     * corrald is already killing (hang, stop timeout, a start timeout's
     * SIGKILL still on its way) dies for that. */
    bool killing = w->kill_sigmask & (1ull << SIGKILL);
    if (!killing &&
        (w->state == CR_WS_STARTING || w->state == CR_WS_READY || w->state == CR_WS_BLOCKED)) {
        w->kill_reason = why;
        if (text && text != w->kill_text)
            snprintf(w->kill_text, sizeof(w->kill_text), "%s", text);
    }
    cr_worker_event(w, CR_WE_DRAIN);
}

/* SIGTERM to hundreds of workers in one loop turn held it 70 ms at a
 * scale-down of 998 (each signal wakes a process that takes the core from
 * corrald): a stop or a scale-down retires its workers at once and sends
 * their SIGTERMs DRAINS_PER_TURN a turn, in list order. 16 a turn still let
 * pings wait 27-34 ms while 998 drained; 4 a turn, 9-15 ms, and the drain
 * took as long (0.8-0.9 s: the workers' own exits are what it waits for). */
#define DRAINS_PER_TURN 4

static void drain_turn(uv_idle_t *h)
{
    struct cr_supervisor *sup = h->data;
    for (unsigned n = 0; n < DRAINS_PER_TURN; n++) {
        struct cr_worker *w = sup->workers; /* afresh: a drain may free workers */
        while (w && !w->drain_queued)
            w = w->next;
        if (!w) {
            uv_idle_stop(h);
            return;
        }
        w->drain_queued = false;
        cr_worker_drain(w, w->drain_why, w->drain_text);
    }
}

void cr_worker_drain_paced(struct cr_worker *w, enum cr_kill_reason why, const char *text)
{
    struct cr_supervisor *sup = w->sup;
    if (!cr_wstate_has_process(w->state) || uv_is_closing((uv_handle_t *)&sup->drain_turn)) {
        cr_worker_drain(w, why, text);
        return;
    }
    w->retire_on_exit = true;
    w->recycle_queued = false;
    w->drain_queued = true;
    w->drain_why = why;
    snprintf(w->drain_text, sizeof(w->drain_text), "%s", text ? text : "");
    if (!uv_is_active((uv_handle_t *)&sup->drain_turn))
        uv_idle_start(&sup->drain_turn, drain_turn);
}

/* A replacement died before it was ready: the old worker keeps serving, and
 * the next attempt to recycle it waits like a restart after a crash would —
 * otherwise a trigger that fires every sample would respawn in a storm. */
void cr_recycle_failed(struct cr_worker *r, uint64_t now, uint64_t uptime)
{
    struct cr_supervisor *sup = r->sup;
    struct cr_worker *old = r->replaces;
    struct cr_restart_policy p = cr_supervisor_restart_policy(sup);
    struct cr_restart_decision d =
        cr_restart_decide(&p, &old->restart, now, &(struct cr_life){.uptime_ms = uptime});
    uint64_t wait = d.delay_ms > p.backoff_initial_ms ? d.delay_ms : p.backoff_initial_ms;
    old->recycle_after = now + wait;
    old->recycle_queued = false;
    if (sup->reloading)
        sup->reload_failed++;
    cr_log_event(CR_LOG_WARNING, "replacement-failed", r->id, 0, NULL,
                 "worker %d: the replacement died before it was ready; the old worker keeps "
                 "serving; no new recycle for %llu ms", r->id, (unsigned long long)wait);
}
