/* Warm spares, a part of the supervisor core (supervisor_int.h): keeping
 * --spares processes started and frozen, the actions that freeze, promote and
 * kill them, and the throttle on spares that die on their own. Their states
 * change only through the lifecycle table (cr_worker_event, supervisor.c). */

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
        n += w->id == CR_SPARE_ID && !w->retire_on_exit;
    return n;
}

static void spare_timer(uv_timer_t *t)
{
    cr_supervisor_pump_spares(t->data);
}

void cr_supervisor_pump_spares(struct cr_supervisor *sup)
{
    if (sup->stopping)
        return;
    while (spares_kept(sup) > sup->cfg.spares) { /* `set spares` lowered: newest first */
        struct cr_worker *last = NULL;
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (w->id == CR_SPARE_ID && !w->retire_on_exit)
                last = w;
        cr_worker_drain(last, CR_KILL_STOP, "fewer spares");
    }
    uint64_t now = cr_now_ms(sup);
    /* Counted afresh each turn: a spawn that fails removes its worker (and
     * pushes spare_not_before on) from inside this loop. */
    while (spares_kept(sup) < sup->cfg.spares && now >= sup->spare_not_before) {
        struct cr_worker *w = cr_worker_new(sup, CR_SPARE_ID);
        if (!w)
            return;
        cr_worker_event(w, CR_WE_START_SPARE);
    }
    if (spares_kept(sup) < sup->cfg.spares && now < sup->spare_not_before &&
        sup->spare_timer.type != UV_UNKNOWN_HANDLE &&
        !uv_is_active((uv_handle_t *)&sup->spare_timer))
        uv_timer_start(&sup->spare_timer, spare_timer, sup->spare_not_before - now, 0);
}

/* A spare that died or could not be made or frozen, on its own: the next
 * one waits as a restart after a crash would, so a broken program does not
 * respawn in a storm. */
void cr_spare_failed(struct cr_supervisor *sup, uint64_t uptime)
{
    uint64_t now = cr_now_ms(sup);
    struct cr_restart_policy p = cr_supervisor_restart_policy(sup);
    struct cr_restart_decision d =
        cr_restart_decide(&p, &sup->spare_restart, now, &(struct cr_life){.uptime_ms = uptime});
    sup->spare_not_before = now + d.delay_ms;
    if (d.delay_ms)
        cr_log(CR_LOG_WARNING, "a spare died before it was needed; the next spare in %llu ms",
               (unsigned long long)d.delay_ms);
}

/* A slot's worker died and will be restarted: a frozen spare takes the slot
 * (its id, its restart record and counters) and is thawed at once; the dead
 * worker retires. False when no spare is frozen. */
bool cr_spare_promote(struct cr_worker *dead)
{
    struct cr_worker *s = dead->sup->workers;
    while (s && !(s->state == CR_WS_SPARE && !s->retire_on_exit))
        s = s->next;
    if (!s)
        return false;
    cr_worker_unlink(s);
    s->id = dead->id;
    cr_worker_link(dead->sup, s);
    s->restart = dead->restart;
    s->restarts = dead->restarts;
    s->oom_kills = dead->oom_kills;
    memcpy(s->last_death, dead->last_death, sizeof(s->last_death));
    memcpy(s->last_death_reason, dead->last_death_reason, sizeof(s->last_death_reason));
    dead->sup->promotions++;
    cr_worker_event(s, CR_WE_PROMOTE);
    return true;
}

#define FREEZE_TIMEOUT_MS 2000
#define SPARE_AFTER_PROMOTION_MS 500

/* SIGKILL for a spare that cannot be frozen or thawed, outside the kill
 * ledger's stop reasons: it died on corrald's word, and is replaced. */
static void kill_spare_now(struct cr_worker *w, const char *why)
{
    cr_log_event(CR_LOG_ERR, "spare-failed", w->id, w->pid, NULL, "worker %d (pid %d): %s: SIGKILL",
                 w->id, (int)w->pid, why);
    cr_worker_signal(w, SIGKILL, CR_KILL_START_TIMEOUT, why);
    cr_freeze_set(w, false);
}

enum cr_wevent cr_spare_act_poll_frozen(struct cr_worker *w)
{
    int r = cr_freeze_done(w);
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
    int r = cr_freeze_set(w, true);
    if (r < 0) {
        kill_spare_now(w, "cannot freeze it");
        return NOTHING;
    }
    return cr_spare_act_poll_frozen(w);
}

enum cr_wevent cr_spare_act_become(struct cr_worker *w)
{
    cr_worker_clear_deadline(w);
    cr_log_event(CR_LOG_INFO, "spare", w->id, w->pid, NULL,
                 "spare s%u ready and frozen (%s): pid %d after %llu ms", w->generation,
                 cr_freeze_method(w->sup), (int)w->pid,
                 (unsigned long long)(cr_now_ms(w->sup) - w->spawned_at));
    cr_worker_publish_state(w, "spare", NULL);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

enum cr_wevent cr_spare_act_promote(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    int r = cr_freeze_set(w, false);
    if (r < 0) {
        /* Frozen for good: its death restarts the slot the ordinary way. */
        kill_spare_now(w, "cannot thaw it");
        return NOTHING;
    }
    w->ready_at = cr_now_ms(sup);
    cr_log_event(CR_LOG_NOTICE, "promoted", w->id, w->pid, NULL,
                 "worker %d: spare s%u (pid %d) thawed and serving", w->id, w->generation,
                 (int)w->pid);
    cr_worker_publish_state(w, "ready", "promoted spare");
    cr_worker_arm_watchdog(w);
    cr_supervisor_table_changed(sup);
    /* The next spare starts in the background, a moment later: a runtime's
     * start-up (Node: ~1 s of CPU) would otherwise compete for the cores
     * with the heir's first requests. */
    if (sup->spare_not_before < w->ready_at + SPARE_AFTER_PROMOTION_MS)
        sup->spare_not_before = w->ready_at + SPARE_AFTER_PROMOTION_MS;
    cr_supervisor_pump_spares(sup);
    return NOTHING;
}

/* A frozen task cannot run a SIGTERM handler: a spare holds no request, so
 * it is killed outright and thawed so that the kill lands (v1). */
enum cr_wevent cr_spare_act_kill(struct cr_worker *w)
{
    enum cr_kill_reason why = w->kill_reason != CR_KILL_NONE ? w->kill_reason : CR_KILL_STOP;
    cr_worker_publish_state(w, "draining", cr_kill_reason_to_string(why));
    cr_worker_signal(w, SIGKILL, why, NULL);
    cr_freeze_set(w, false);
    cr_worker_set_deadline(w, w->sup->cfg.stop_timeout_ms);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}
