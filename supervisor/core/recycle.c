/* Rolling replacement, a part of the supervisor core (supervisor_int.h).
 * A recycle (memory soft limit, request cap, lifetime, reload, restart)
 * is queued where the table allows it; up to --recycle-parallel
 * replacements start at once, and each takes its slot when it is ready
 * (the old worker is drained then); one not ready yet restarts in place.
 * Also the drain of a worker that goes for good. */

#include <assert.h>
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
        n += w->role == CR_ROLE_REPLACEMENT;
    return n;
}

void cr_worker_recycle(struct cr_worker *w, const char *why)
{
    if (!cr_lifecycle_recyclable(w->state, w->role, w->intent) ||
        cr_now_ms(w->sup) < w->slot->recycle_after)
        return;
    snprintf(w->recycle_text, sizeof(w->recycle_text), "%s", why);
    cr_worker_event(w, CR_WE_RECYCLE);
}

enum cr_wevent cr_recycle_act_queue(struct cr_worker *w)
{
    w->intent = CR_INTENT_RECYCLE;
    cr_log_event(CR_LOG_NOTICE, "recycle", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d: recycle: %s", cr_worker_id(w), w->recycle_text);
    struct cr_event ev = cr_worker_stamp(w, CR_EV_WORKER_RECYCLE);
    ev.reason = w->recycle_text;
    cr_supervisor_publish(w->sup, &ev);
    cr_supervisor_pump_recycles(w->sup);
    return NOTHING;
}

/* A worker that is not ready yet serves no one corrald counts on: a
 * recycle (reload, the soft limit crossed while starting) restarts it in
 * place — a planned death, then a fresh process at once — rather than wait
 * for a readiness that may never come. */
enum cr_wevent cr_recycle_act_restart_in_place(struct cr_worker *w)
{
    w->intent = CR_INTENT_NONE;
    w->drain.why = CR_KILL_RECYCLE;
    snprintf(w->drain.text, sizeof(w->drain.text), "%s", w->recycle_text);
    return CR_WE_DRAIN;
}

/* The replacement of a serving worker starts; it takes the slot once
 * ready (cr_recycle_took_over). */
enum cr_wevent cr_recycle_act_start_replacement(struct cr_worker *old)
{
    struct cr_slot *slot = old->slot;
    /* The table took the turn only for a recyclable worker: its slot's holder. */
    assert(old->role == CR_ROLE_HOLDER && slot && slot->holder == old && !slot->replacement);
    struct cr_worker *r = cr_worker_alloc(old->sup, slot->id);
    if (!r)
        return NOTHING; /* still queued: the next pump tries again */
    old->intent = CR_INTENT_NONE;
    old->role = CR_ROLE_REPLACED;
    r->role = CR_ROLE_REPLACEMENT;
    r->slot = slot;
    slot->replacement = r;
    cr_worker_start(r);
    return NOTHING;
}

void cr_recycle_took_over(struct cr_worker *r)
{
    struct cr_slot *slot = r->slot;
    assert(slot && slot->replacement == r);
    struct cr_worker *old = slot->holder;
    slot->holder = r;
    slot->replacement = NULL;
    r->role = CR_ROLE_HOLDER;
    if (old)
        cr_worker_drain(old, CR_KILL_RECYCLE,
                        old->recycle_text[0] ? old->recycle_text : "recycled");
}

/* The slot's worker died while its replacement was starting: the
 * replacement holds the slot now (the death was recorded in it). */
enum cr_wevent cr_recycle_act_pass_slot(struct cr_worker *w)
{
    struct cr_slot *slot = w->slot;
    struct cr_worker *r = slot->replacement;
    slot->holder = r;
    slot->replacement = NULL;
    if (r)
        r->role = CR_ROLE_HOLDER;
    w->role = CR_ROLE_RETIRING;
    return CR_WE_RETIRE;
}

/* A replacement died (or could not be spawned) before it was ready: the
 * old worker keeps serving, and the next attempt to recycle it waits like
 * a restart after a crash would — otherwise a trigger that fires every
 * sample would respawn in a storm. Counted against a running reload. */
enum cr_wevent cr_recycle_act_failed(struct cr_worker *r)
{
    struct cr_supervisor *sup = r->sup;
    struct cr_slot *slot = r->slot;
    uint64_t now = cr_now_ms(sup);
    struct cr_restart_policy p = cr_supervisor_restart_policy(sup);
    struct cr_restart_decision d = cr_restart_decide(
        &p, &slot->restart, now, &(struct cr_life){.uptime_ms = r->death.uptime_ms});
    uint64_t wait = d.delay_ms > p.backoff_initial_ms ? d.delay_ms : p.backoff_initial_ms;
    slot->recycle_after = now + wait;
    slot->replacement = NULL;
    if (slot->holder && slot->holder->role == CR_ROLE_REPLACED)
        slot->holder->role = CR_ROLE_HOLDER;
    r->role = CR_ROLE_RETIRING;
    if (sup->reload.running)
        sup->reload.failed++;
    cr_log_event(CR_LOG_WARNING, "replacement-failed", slot->id, 0, NULL,
                 "worker %d: the replacement died before it was ready; the old worker keeps "
                 "serving; no new recycle for %llu ms",
                 slot->id, (unsigned long long)wait);
    return CR_WE_RETIRE;
}

void cr_supervisor_pump_recycles(struct cr_supervisor *sup)
{
    if (sup->phase == CR_PHASE_STOPPING)
        return;
    /* Not ready yet: restarted in place (the table takes it only there). */
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->intent == CR_INTENT_RECYCLE)
            cr_worker_event(w, CR_WE_RESTART_IN_PLACE);
    /* Counted once: called on every READY=1, this must stay one pass. */
    unsigned running = replacements_in_progress(sup);
    for (struct cr_worker *w = sup->workers; w && running < sup->cfg.recycle_parallel;
         w = w->next)
        if (w->intent == CR_INTENT_RECYCLE && cr_worker_event(w, CR_WE_REPLACE_TURN))
            running++;
    bool pending = false;
    for (struct cr_worker *w = sup->workers; w && !pending; w = w->next)
        pending = w->intent == CR_INTENT_RECYCLE || w->role == CR_ROLE_REPLACEMENT;
    if (pending || !sup->reload.running)
        return;
    sup->reload.running = false;
    if (sup->reload.failed)
        cr_log(CR_LOG_ERR, "reload finished: %u replacement(s) died before ready; their "
                           "old workers keep serving", sup->reload.failed);
    else
        cr_log(CR_LOG_NOTICE, "reload complete: every worker replaced");
    struct cr_event ev = {.type = CR_EV_RELOAD, .phase = CR_RELOAD_FINISHED,
                          .failed = sup->reload.failed};
    sup->reload.failed = 0;
    cr_supervisor_publish(sup, &ev);
}

void cr_recycle_reload_start(struct cr_supervisor *sup)
{
    sup->reload = (struct cr_reload){.running = true};
}

/* Asks a worker to go away for good (stop, scale-down, replaced). */
void cr_worker_drain(struct cr_worker *w, enum cr_kill_reason why, const char *text)
{
    cr_worker_retire(w);
    w->drain.why = why;
    if (text != w->drain.text)
        snprintf(w->drain.text, sizeof(w->drain.text), "%s", text ? text : "");
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
        while (w && w->intent != CR_INTENT_DRAIN)
            w = w->next;
        if (!w) {
            uv_idle_stop(h);
            return;
        }
        w->intent = CR_INTENT_NONE;
        cr_worker_event(w, CR_WE_DRAIN);
    }
}

void cr_worker_drain_paced(struct cr_worker *w, enum cr_kill_reason why, const char *text)
{
    struct cr_supervisor *sup = w->sup;
    if (!cr_wstate_has_process(w->state) || uv_is_closing((uv_handle_t *)&sup->drain_turn)) {
        cr_worker_drain(w, why, text);
        return;
    }
    cr_worker_retire(w);
    w->intent = CR_INTENT_DRAIN;
    w->drain.why = why;
    snprintf(w->drain.text, sizeof(w->drain.text), "%s", text ? text : "");
    if (!uv_is_active((uv_handle_t *)&sup->drain_turn))
        uv_idle_start(&sup->drain_turn, drain_turn);
}
