/* The death path of the supervisor core: what follows a worker's end. The
 * reap's record (the post-mortem into the history, the counts, the slot's
 * last death, the `worker-died` event), the restart policy's word on it,
 * and the hand-over of a dying holder's slot to a frozen spare, at the
 * reap or earlier, on the kernel's exit notice. These are actions of the
 * lifecycle table (CR_WA_REAP, _DECIDE, _HAND_OVER, _SPAWN_FAILED), wired
 * in supervisor.c's action list; like every action they answer with an
 * event and assign no state. One module with supervisor.c
 * (supervisor_int.h). */

#include <assert.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "cgworker.h"
#include "diag.h"
#include "freeze.h"
#include "history.h"
#include "internal.h"
#include "supervisor.h"
#include "supervisor_int.h"
#include "wio.h"
#include "worker_death.h"

/* The restart policy's word on a death in w's slot, kept in the slot for
 * the cell it leads to; counted among the slot's restarts. */
static void decide(struct cr_worker *w, uint64_t now, const struct cr_life *life,
                   bool exec_failed)
{
    struct cr_slot *slot = w->slot;
    struct cr_restart_policy p = cr_supervisor_restart_policy(w->sup);
    /* Nothing will change by retrying fast when the program is not there. */
    slot->decision = exec_failed ? cr_restart_fail(&p, &slot->restart, false)
                                 : cr_restart_decide(&p, &slot->restart, now, life);
    slot->restarts++;
}

/* What the policy knows of w's life, ended at now. */
static struct cr_life life_of(const struct cr_worker *w, uint64_t now, uint64_t uptime_ms,
                              bool planned)
{
    return (struct cr_life){
        .uptime_ms = uptime_ms,
        .ready = w->ready_at != 0,
        .served_ms = w->ready_at ? now - w->ready_at : 0,
        .planned = planned,
    };
}

/* The policy's answers that start the slot again (and so may promote). */
static bool restarts(enum cr_wevent e)
{
    return e == CR_WE_RESTART || e == CR_WE_REPLACE;
}

/* A slot's worker is dying: when the slot goes on and a spare is frozen,
 * the spare takes it now, so that it serves while the kernel frees the
 * dead one's memory (an exit notice) or while corrald reads its
 * post-mortem (a reap). The policy is asked as at any death ("planned"
 * from the kill ledger, as the post-mortem's own answer does); a crash
 * loop keeps its spare frozen. Without an heir the policy's word is taken
 * back: the reap asks it once, as for any death. Returns the heir or NULL. */
static struct cr_worker *hand_over(struct cr_worker *w, uint64_t now, bool notice)
{
    struct cr_supervisor *sup = w->sup;
    struct cr_slot *slot = w->slot;
    /* A program not known to have run gains nothing from a spare: its exec
     * failed (the reap has read the pipe), or it is not told yet. */
    if (w->role != CR_ROLE_HOLDER || !slot || sup->phase == CR_PHASE_STOPPING ||
        !cr_io_execd(&w->g) || !cr_spare_frozen(sup))
        return NULL;
    struct cr_restart_state restart = slot->restart;
    unsigned count = slot->restarts;
    enum cr_kill_reason why = w->g.ledger.reason;
    struct cr_life life = life_of(w, now, now - w->g.spawned_at,
                                  why == CR_KILL_STOP || why == CR_KILL_RECYCLE);
    decide(w, now, &life, false);
    struct cr_worker *heir = restarts(slot->decision.event) ? cr_spare_promote(w, notice) : NULL;
    if (!heir) {
        slot->restart = restart;
        slot->restarts = count;
    }
    return heir;
}

/* Classifies the death and records it: history, counters, the slot's last
 * death (when the death is the slot's), the event. Returns the post-mortem
 * (the caller frees it). */
static struct cr_postmortem *record_death(struct cr_worker *w, uint64_t now)
{
    struct cr_supervisor *sup = w->sup;
    assert(w->g.pid);
    struct cr_postmortem *pm = cr_worker_postmortem(&w->g, now);
    if (!pm)
        abort(); /* a supervisor without memory for 5 KiB cannot go on honestly */
    cr_history_push(sup->deaths.history, pm);
    sup->deaths.by_category[pm->category]++;
    if (w->slot && cr_role_holds_slot(w->role))
        cr_slot_record_death(w->slot, pm);
    w->death = (struct cr_death_brief){
        .category = pm->category, .planned = pm->planned, .uptime_ms = (uint64_t)pm->uptime_ms};
    struct cr_event died = cr_worker_stamp(w, CR_EV_WORKER_DIED);
    died.reason = pm->reason;
    died.postmortem = pm;
    cr_supervisor_publish(sup, &died);
    return pm;
}

/* Classifies and records the death; what follows is its role's exit event
 * (lifecycle.c), answered by a cell of `exited`. */
enum cr_wevent cr_death_path_act_reap(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    uint64_t now = cr_now_ms(sup);
    cr_worker_clear_deadline(w);
    hand_over(w, now, false);
    struct cr_postmortem *pm = record_death(w, now);
    /* Kept if the post-mortem found evidence there: it has just read it. */
    cr_diag_release(sup->host.diag, &w->g, pm);
    free(pm);
    cr_freeze_release(&w->g);
    cr_cgworker_release(&w->g);
    w->g.pid = 0;
    w->intent = CR_INTENT_NONE; /* a recycle or a drain asked of this process died with it */
    cr_pacer_kick(sup);
    return cr_role_exit_event(w->role);
}

/* The slot's worker died: the restart policy decides what follows. */
enum cr_wevent cr_death_path_act_decide(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    if (sup->phase == CR_PHASE_STOPPING) /* every worker retires on a stop */
        return CR_WE_RETIRE;
    uint64_t now = cr_now_ms(sup);
    if (w->death.category == _CR_DEATH_MAX) { /* a spawn that made no process */
        struct cr_restart_policy p = cr_supervisor_restart_policy(sup);
        w->slot->decision = cr_restart_decide(&p, &w->slot->restart, now, &(struct cr_life){0});
        return w->slot->decision.event;
    }
    struct cr_life life = life_of(w, now, w->death.uptime_ms, w->death.planned);
    decide(w, now, &life, w->death.category == CR_DEATH_EXEC_FAILED);
    return w->slot->decision.event;
}

/* The kernel's exit notice (exitnotice.c) of a serving worker: it is
 * dying but not yet reaped — its memory is still being freed, which takes
 * 3 ms for a small Node process and 100 ms for 1 GiB. With a frozen spare
 * the slot is handed over now instead of after the teardown; without one
 * (or in a crash loop) nothing changes: the reap decides as always. */
enum cr_wevent cr_death_path_act_hand_over(struct cr_worker *w)
{
    uint64_t now = cr_now_ms(w->sup);
    if (!hand_over(w, now, true))
        return NOTHING;
    w->handed_over_at = now;
    return CR_WE_HANDED_OVER;
}

/* Fork, the cgroup or the descriptors failed: an unplanned death without
 * a process, answered by its role's exit event like a reap (a failed
 * replacement leaves the old worker serving; a failed spare throttles the
 * next; a slot's worker goes to the restart policy). */
enum cr_wevent cr_death_path_act_spawn_failed(struct cr_worker *w)
{
    w->death = (struct cr_death_brief){.category = _CR_DEATH_MAX};
    return cr_role_exit_event(w->role);
}
