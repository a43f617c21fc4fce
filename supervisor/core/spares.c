/* Warm spares, a part of the supervisor core (supervisor_int.h): keeping
 * --spares processes started and frozen, the actions that freeze, promote
 * and kill them, and the throttle on spares that die on their own. Their
 * states change only through the lifecycle table (cr_worker_event,
 * supervisor.c). A spare has no slot until a promotion gives it one. */

#include <assert.h>
#include <signal.h>
#include <string.h>

#include "freeze.h"
#include "internal.h"
#include "log.h"
#include "supervisor.h"
#include "supervisor_int.h"

static unsigned spares_kept(const struct cr_supervisor *sup)
{
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        n += w->role == CR_ROLE_SPARE;
    return n;
}

static void spare_timer(uv_timer_t *t)
{
    cr_supervisor_pump_spares(t->data);
}

void cr_supervisor_pump_spares(struct cr_supervisor *sup)
{
    if (sup->phase == CR_PHASE_STOPPING)
        return;
    while (spares_kept(sup) > sup->cfg.spares) { /* `set spares` lowered: newest first */
        struct cr_worker *last = NULL;
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (w->role == CR_ROLE_SPARE)
                last = w;
        cr_worker_drain(last, CR_KILL_STOP, "fewer spares");
    }
    uint64_t now = cr_now_ms(sup);
    /* Counted afresh each turn: a spawn that fails removes its worker (and
     * pushes not_before on) from inside this loop. */
    while (spares_kept(sup) < sup->cfg.spares && now >= sup->spares.not_before) {
        struct cr_worker *w = cr_worker_alloc(sup, CR_SPARE_ID);
        if (!w)
            return;
        cr_worker_event(w, CR_WE_START_SPARE);
    }
    if (spares_kept(sup) < sup->cfg.spares && now < sup->spares.not_before &&
        sup->spares.timer.type != UV_UNKNOWN_HANDLE &&
        !uv_is_active((uv_handle_t *)&sup->spares.timer))
        uv_timer_start(&sup->spares.timer, spare_timer, sup->spares.not_before - now, 0);
}

/* A spare that died or could not be made or frozen, on its own: the next
 * one waits as a restart after a crash would, so a broken program does not
 * respawn in a storm. */
enum cr_wevent cr_spare_act_failed(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    uint64_t now = cr_now_ms(sup);
    struct cr_restart_policy p = cr_supervisor_restart_policy(sup);
    struct cr_restart_decision d = cr_restart_decide(
        &p, &sup->spares.restart, now, &(struct cr_life){.uptime_ms = w->death.uptime_ms});
    sup->spares.not_before = now + d.delay_ms;
    if (d.delay_ms)
        cr_log(CR_LOG_WARNING, "a spare died before it was needed; the next spare in %llu ms",
               (unsigned long long)d.delay_ms);
    w->role = CR_ROLE_RETIRING;
    return CR_WE_RETIRE;
}

struct cr_worker *cr_spare_frozen(struct cr_supervisor *sup)
{
    for (struct cr_worker *s = sup->workers; s; s = s->next)
        if (s->state == CR_WS_SPARE && s->role == CR_ROLE_SPARE)
            return s;
    return NULL;
}

/* A slot's worker is dying and the slot goes on: a frozen spare holds the
 * slot from now on and is thawed at once; the slot's counts and last death
 * stay where they are, in the slot. */
unsigned cr_spare_next_generation(struct cr_supervisor *sup)
{
    return ++sup->spares.generation;
}

struct cr_worker *cr_spare_promote(struct cr_worker *dead, bool notice)
{
    struct cr_supervisor *sup = dead->sup;
    struct cr_slot *slot = dead->slot;
    struct cr_worker *s = cr_spare_frozen(sup);
    if (!s || !slot)
        return NULL;
    assert(dead->role == CR_ROLE_HOLDER && slot->holder == dead && !s->slot);
    cr_worker_unlink(s);
    s->g.id = slot->id;
    s->slot = slot;
    s->role = CR_ROLE_HOLDER;
    slot->holder = s;
    dead->role = CR_ROLE_HANDED_OVER;
    cr_worker_link(sup, s);
    sup->spares.promotions++;
    sup->spares.early_promotions += notice;
    cr_worker_event(s, CR_WE_PROMOTE);
    return s;
}

#define FREEZE_TIMEOUT_MS 2000
#define SPARE_AFTER_PROMOTION_MS 500

/* SIGKILL for a spare that cannot be frozen or thawed, outside the kill
 * ledger's stop reasons: it died on corrald's word, and is replaced. */
static void kill_spare_now(struct cr_worker *w, const char *why)
{
    cr_log_event(CR_LOG_ERR, "spare-failed", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d (pid %d): %s: SIGKILL", cr_worker_id(w), (int)w->g.pid, why);
    cr_worker_signal(w, SIGKILL, CR_KILL_START_TIMEOUT, why);
    cr_freeze_set(&w->g, false);
}

enum cr_wevent cr_spare_act_poll_frozen(struct cr_worker *w)
{
    int r = cr_freeze_done(&w->g);
    if (r == 1)
        return CR_WE_FROZEN;
    if (r < 0 || cr_now_ms(w->sup) - w->ready_at > FREEZE_TIMEOUT_MS)
        kill_spare_now(w, r < 0 ? "cannot read its freezer state" : "not frozen in time");
    else
        cr_worker_set_deadline(w, 1);
    return NOTHING;
}

enum cr_wevent cr_spare_act_freeze(struct cr_worker *w)
{
    w->ready_at = cr_now_ms(w->sup);
    int r = cr_freeze_set(&w->g, true);
    if (r < 0) {
        kill_spare_now(w, "cannot freeze it");
        return NOTHING;
    }
    return cr_spare_act_poll_frozen(w);
}

enum cr_wevent cr_spare_act_become(struct cr_worker *w)
{
    cr_worker_clear_deadline(w);
    cr_log_event(CR_LOG_INFO, "spare", cr_worker_id(w), w->g.pid, NULL,
                 "spare s%u ready and frozen (%s): pid %d after %llu ms", w->g.generation,
                 cr_freeze_method(&w->sup->freezing), (int)w->g.pid,
                 (unsigned long long)(cr_now_ms(w->sup) - w->g.spawned_at));
    cr_worker_publish_state(w, "spare", NULL);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

enum cr_wevent cr_spare_act_promote(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    int r = cr_freeze_set(&w->g, false);
    if (r < 0) {
        /* Frozen for good: its death restarts the slot the ordinary way. */
        kill_spare_now(w, "cannot thaw it");
        return NOTHING;
    }
    w->ready_at = cr_now_ms(sup);
    cr_log_event(CR_LOG_NOTICE, "promoted", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d: spare s%u (pid %d) thawed and serving", cr_worker_id(w),
                 w->g.generation, (int)w->g.pid);
    cr_worker_publish_state(w, "ready", "promoted spare");
    cr_worker_arm_watchdog(w);
    cr_supervisor_table_changed(sup);
    /* The next spare starts in the background, a moment later: a runtime's
     * start-up (Node: ~1 s of CPU) would otherwise compete for the cores
     * with the heir's first requests. */
    if (sup->spares.not_before < w->ready_at + SPARE_AFTER_PROMOTION_MS)
        sup->spares.not_before = w->ready_at + SPARE_AFTER_PROMOTION_MS;
    cr_supervisor_pump_spares(sup);
    return NOTHING;
}

/* A frozen task cannot run a SIGTERM handler: a spare holds no request, so
 * it is killed outright and thawed so that the kill lands (v1). Whatever
 * asked (a stop, a reload, fewer spares), the ledger says stop: a spare
 * served nothing that a recycle would replace. */
enum cr_wevent cr_spare_act_kill(struct cr_worker *w)
{
    const char *text;
    enum cr_kill_reason why = cr_worker_drain_reason(w, &text);
    if (!(w->g.ledger.sigmask & (1ull << SIGKILL)))
        why = CR_KILL_STOP;
    cr_worker_publish_state(w, "draining", cr_kill_reason_to_string(why));
    cr_worker_signal(w, SIGKILL, why, NULL);
    cr_freeze_set(&w->g, false);
    cr_worker_set_deadline(w, w->sup->cfg.stop_timeout_ms);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}
