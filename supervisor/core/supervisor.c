/* The supervisor core: the lifecycle table's driver and its actions,
 * reaping and the restart policy. Rolling replacement is in recycle.c, the
 * warm spares' actions in spares.c, the spawn pacer in pacer.c
 * (supervisor_int.h joins the files). Forking is in worker_spawn.c, what
 * the outside asks for (scale, reload, stop, start-up) in operations.c.
 * What happens is published as events (events.h); no output is named here. */

#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgsetup.h"
#include "cgprep.h"
#include "clock.h"
#include "freeze.h"
#include "history.h"
#include "internal.h"
#include "log.h"
#include "supervisor_int.h"
#include "trend.h"
#include "worker_death.h"
#include "worker_io.h"
#include "worker_spawn.h"

static void on_deadline(uv_timer_t *t)
{
    struct cr_worker *w = t->data;
    uint64_t now = cr_now_ms(w->sup);
    if (w->deadline_at > now) { /* pushed on since it was armed (act_arm_watchdog) */
        uv_timer_start(t, on_deadline, w->deadline_at - now, 0);
        return;
    }
    w->deadline_at = 0;
    cr_worker_event(w, CR_WE_DEADLINE);
}

void cr_worker_set_deadline(struct cr_worker *w, uint64_t ms)
{
    w->deadline_at = cr_now_ms(w->sup) + ms;
    uv_timer_start(&w->deadline, on_deadline, ms, 0);
}

void cr_worker_clear_deadline(struct cr_worker *w)
{
    w->deadline_at = 0;
    uv_timer_stop(&w->deadline);
}

/* Keep the list ordered by id, replacements after the worker they replace
 * (spares, id 0, first). */
void cr_worker_link(struct cr_supervisor *sup, struct cr_worker *w)
{
    struct cr_worker **pp = &sup->workers;
    while (*pp && (*pp)->id <= w->id)
        pp = &(*pp)->next;
    w->next = *pp;
    *pp = w;
}

void cr_worker_unlink(struct cr_worker *w)
{
    for (struct cr_worker **pp = &w->sup->workers; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
}

struct cr_worker *cr_worker_new(struct cr_supervisor *sup, int id)
{
    struct cr_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->sup = sup;
    w->id = id; /* state CR_WS_NEW: calloc's zero */
    uv_timer_init(sup->loop, &w->deadline);
    w->deadline.data = w;
    cr_worker_link(sup, w);
    return w;
}

static void worker_freed(uv_handle_t *h)
{
    struct cr_worker *w = h->data;
    free(w);
}

/* Unlinks and frees a worker that has no process (the REMOVE action). */
static void worker_remove(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    cr_worker_unlink(w);
    if (w->replaces)
        w->replaces->replaced_by = NULL;
    if (w->replaced_by)
        w->replaced_by->replaces = NULL;
    w->samples = cr_trend_ring_free(w->samples);
    cr_cg_prep_drop(w);
    w->closing = true;
    uv_close((uv_handle_t *)&w->deadline, worker_freed);
    cr_supervisor_maybe_finish(sup);
}

struct cr_worker *cr_supervisor_worker(struct cr_supervisor *sup, int id)
{
    /* The slot's owner: the process not on its way out (a replaced, dying
     * or just reaped one). */
    struct cr_worker *found = NULL;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (w->id == id && !w->replaces && !w->closing && w->state != CR_WS_DYING &&
            w->state != CR_WS_EXITED)
            found = w;
    return found;
}

/* ---- events ------------------------------------------------------------- */

int cr_supervisor_subscribe(struct cr_supervisor *sup, cr_event_fn fn, void *userdata)
{
    return cr_events_subscribe(&sup->events, fn, userdata);
}

void cr_supervisor_publish(struct cr_supervisor *sup, struct cr_event *ev)
{
    if (!ev->time_ms)
        ev->time_ms = cr_wall_ms();
    cr_events_publish(&sup->events, ev);
}

void cr_supervisor_table_changed(struct cr_supervisor *sup)
{
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_TABLE});
}

struct cr_event cr_worker_stamp(const struct cr_worker *w, enum cr_event_type type)
{
    return (struct cr_event){
        .type = type, .worker = w->id, .pid = w->pid, .generation = w->generation,
        .from = w->prev, .to = w->state,
    };
}

/* A state change, told under the control protocol's name for it. */
void cr_worker_publish_state(struct cr_worker *w, const char *name, const char *reason)
{
    struct cr_event ev = cr_worker_stamp(w, CR_EV_WORKER_STATE);
    ev.name = name;
    ev.reason = reason;
    cr_supervisor_publish(w->sup, &ev);
}

void cr_worker_signal(struct cr_worker *w, int sig, enum cr_kill_reason why, const char *text)
{
    if (!w->pid || !w->io)
        return;
    w->kill_reason = why;
    w->kill_signal = sig;
    if (sig > 0 && sig < 64)
        w->kill_sigmask |= 1ull << sig;
    if (text)
        snprintf(w->kill_text, sizeof(w->kill_text), "%s", text);
    /* Through the pidfd: the signal can only reach this process, never a
     * newer one that reused its pid. */
    int pidfd = cr_io_pidfd(w);
    int r = pidfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0)
                       : kill(w->pid, sig); /* no pidfd: still unreaped, so still ours */
    if (r < 0 && errno != ESRCH)
        cr_log_event(CR_LOG_WARNING, "signal-failed", w->id, w->pid, NULL,
                     "worker %d: sending signal %d failed: %s", w->id, sig, strerror(errno));
}

/* ---- the lifecycle table's actions ------------------------------------- */

void cr_worker_arm_watchdog(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    if (c->watchdog_ms && w->heartbeats)
        cr_worker_set_deadline(w, c->watchdog_ms);
    else
        cr_worker_clear_deadline(w);
}

static enum cr_wevent act_none(struct cr_worker *w)
{
    return NOTHING;
}

static void become_ready(struct cr_worker *w, const char *how)
{
    struct cr_supervisor *sup = w->sup;
    cr_pacer_kick(sup);
    w->ready_at = cr_now_ms(sup);
    cr_log_event(CR_LOG_INFO, "ready", w->id, w->pid, NULL, "worker %d ready: pid %d after %llu ms%s",
                 w->id, (int)w->pid, (unsigned long long)(w->ready_at - w->spawned_at), how);
    cr_worker_publish_state(w, "ready", NULL);
    cr_worker_arm_watchdog(w);
    if (w->replaces) {
        struct cr_worker *old = w->replaces;
        w->replaces = NULL;
        old->replaced_by = NULL;
        cr_worker_drain(old, CR_KILL_RECYCLE, old->recycle_text[0] ? old->recycle_text : "recycled");
    }
    cr_supervisor_table_changed(sup);
    cr_supervisor_pump_recycles(sup);
}

static enum cr_wevent act_become_ready(struct cr_worker *w)
{
    become_ready(w, "");
    return NOTHING;
}

/* Readiness the worker's mode assumes: exec, delay, or auto's silence. */
static enum cr_wevent act_assume_ready(struct cr_worker *w)
{
    char mode[48], how[96];
    cr_ready_to_string(w->ready_mode, w->sup->cfg.ready_delay_ms, mode, sizeof(mode));
    w->unannounced = true;
    snprintf(how, sizeof(how), " (unannounced: --ready %s%s)", mode,
             w->ready_mode == CR_READY_AUTO ? ", silent" : "");
    become_ready(w, how);
    return NOTHING;
}

/* READY=1 after readiness was assumed: it does speak the protocol. */
static enum cr_wevent act_late_ready(struct cr_worker *w)
{
    if (!w->unannounced)
        return NOTHING; /* a second READY=1 changes nothing */
    w->unannounced = false;
    w->announced = true;
    cr_log_event(CR_LOG_INFO, "announced", w->id, w->pid, NULL,
                 "worker %d sent READY=1 %llu ms after readiness was assumed", w->id,
                 (unsigned long long)(cr_now_ms(w->sup) - w->ready_at));
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

/* The start timeout, counted from the spawn. */
static void arm_start_timeout(struct cr_worker *w)
{
    uint64_t alive = cr_now_ms(w->sup) - w->spawned_at, t = w->sup->cfg.start_timeout_ms;
    cr_worker_set_deadline(w, t > alive ? t - alive : 0);
}

/* The first message of an auto worker: it speaks the protocol, so its
 * readiness is announced and the start timeout applies. */
static enum cr_wevent act_announce(struct cr_worker *w)
{
    if (w->ready_mode != CR_READY_AUTO || w->announced)
        return NOTHING;
    w->announced = true;
    arm_start_timeout(w);
    return NOTHING;
}

/* The starting deadline: a start timeout where readiness is announced
 * (or exec failed: it is dying anyway), else the moment the mode assumes it. */
static enum cr_wevent act_starting_deadline(struct cr_worker *w)
{
    return w->announced || w->exec_errno ? CR_WE_START_TIMEOUT : CR_WE_ASSUME_READY;
}

/* A heartbeat of a ready worker: its watchdog deadline moves on. Only the
 * due time is moved; the timer keeps its earlier one and, when it fires,
 * waits again for what is left (on_deadline): 256 workers beating once a
 * second were 256 timer-heap updates a second, 7 % of idle corrald. */
static enum cr_wevent act_arm_watchdog(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    /* Only later: a watchdog lowered by `set` must re-arm the timer. */
    if (c->watchdog_ms && w->heartbeats && w->deadline_at &&
        uv_is_active((uv_handle_t *)&w->deadline) &&
        c->watchdog_ms >= uv_timer_get_due_in(&w->deadline))
        w->deadline_at = cr_now_ms(w->sup) + c->watchdog_ms;
    else
        cr_worker_arm_watchdog(w);
    return NOTHING;
}

static enum cr_wevent act_flag_blocked(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    uint64_t silent = cr_now_ms(w->sup) - w->last_report_at;
    cr_log_event(CR_LOG_WARNING, "blocked", w->id, w->pid, NULL,
                 "worker %d blocked: no heartbeat for %llu ms (watchdog %llu ms)", w->id,
                 (unsigned long long)silent, (unsigned long long)c->watchdog_ms);
    cr_worker_publish_state(w, "blocked", NULL);
    if (c->hang_timeout_ms)
        cr_worker_set_deadline(w, c->hang_timeout_ms > silent ? c->hang_timeout_ms - silent : 0);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_unblock(struct cr_worker *w)
{
    cr_log_event(CR_LOG_NOTICE, "unblocked", w->id, w->pid, NULL,
                 "worker %d unblocked: heartbeat again", w->id);
    cr_worker_publish_state(w, "unblocked", NULL);
    cr_worker_arm_watchdog(w);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_kill_start_timeout(struct cr_worker *w)
{
    cr_log_event(CR_LOG_ERR, "start-timeout", w->id, w->pid, NULL,
                 "worker %d not ready after %llu ms: SIGKILL", w->id,
                 (unsigned long long)w->sup->cfg.start_timeout_ms);
    cr_worker_signal(w, SIGKILL, CR_KILL_START_TIMEOUT, "no READY=1 in time");
    return NOTHING;
}

#define HANG_ABORT_GRACE_MS 2000

static enum cr_wevent act_kill_hang(struct cr_worker *w)
{
    char text[128];
    snprintf(text, sizeof(text), "no heartbeat for %llu ms (hang timeout %llu ms)",
             (unsigned long long)(cr_now_ms(w->sup) - w->last_report_at),
             (unsigned long long)w->sup->cfg.hang_timeout_ms);
    cr_log_event(CR_LOG_ERR, "hang-kill", w->id, w->pid, NULL,
                 "worker %d hung: %s; sending SIGABRT for a core, SIGKILL in %d ms", w->id, text,
                 HANG_ABORT_GRACE_MS);
    cr_worker_signal(w, SIGABRT, CR_KILL_HANG, text);
    cr_worker_set_deadline(w, HANG_ABORT_GRACE_MS);
    return NOTHING;
}

static enum cr_wevent act_kill_hard(struct cr_worker *w)
{
    cr_log_event(CR_LOG_ERR, "hang-kill", w->id, w->pid, NULL,
                 "worker %d survived SIGABRT: SIGKILL", w->id);
    cr_worker_signal(w, SIGKILL, CR_KILL_HANG, NULL);
    return NOTHING;
}

static enum cr_wevent act_send_term(struct cr_worker *w)
{
    enum cr_kill_reason why = w->kill_reason != CR_KILL_NONE ? w->kill_reason : CR_KILL_STOP;
    cr_log_event(CR_LOG_INFO, "draining", w->id, w->pid, NULL,
                 "worker %d draining (%s%s%s): SIGTERM, SIGKILL after %llu ms", w->id,
                 cr_kill_reason_to_string(why), w->kill_text[0] ? ": " : "", w->kill_text,
                 (unsigned long long)w->sup->cfg.stop_timeout_ms);
    cr_worker_publish_state(w, "draining", cr_kill_reason_to_string(why));
    cr_worker_signal(w, SIGTERM, why, NULL);
    cr_worker_set_deadline(w, w->sup->cfg.stop_timeout_ms);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_kill_stop_timeout(struct cr_worker *w)
{
    cr_log_event(CR_LOG_WARNING, "stop-timeout", w->id, w->pid, NULL,
                 "worker %d still draining after %llu ms: SIGKILL", w->id,
                 (unsigned long long)w->sup->cfg.stop_timeout_ms);
    cr_worker_signal(w, SIGKILL, CR_KILL_STOP_TIMEOUT, NULL);
    return NOTHING;
}

struct cr_restart_policy cr_supervisor_restart_policy(const struct cr_supervisor *sup)
{
    const struct cr_config *c = &sup->cfg;
    return (struct cr_restart_policy){
        .backoff_initial_ms = c->backoff_initial_ms,
        .backoff_max_ms = c->backoff_max_ms,
        .backoff_reset_ms = c->backoff_reset_ms,
        .budget = c->crash_budget,
        .window_ms = c->crash_window_ms,
        .failed_retry_ms = c->failed_retry_ms,
        .min_uptime_ms = c->min_uptime_ms,
    };
}

/* The restart policy's word on a death of a slot's worker. */
static void decide(struct cr_worker *w, uint64_t now, const struct cr_life *life,
                   bool exec_failed)
{
    struct cr_restart_policy p = cr_supervisor_restart_policy(w->sup);
    /* Nothing will change by retrying fast when the program is not there. */
    w->decision = exec_failed ? cr_restart_fail(&p, &w->restart, false)
                              : cr_restart_decide(&p, &w->restart, now, life);
    w->restarts++;
}

/* The policy's answers that start the slot again (and so may promote). */
static bool restarts(enum cr_wevent e)
{
    return e == CR_WE_RESTART || e == CR_WE_REPLACE;
}

/* Before the post-mortem (which reads cgroup and /proc files): a slot that
 * goes on, with a frozen spare, is handed to the spare at once, so that it
 * serves while corrald classifies. "Planned" comes from the kill ledger, as
 * the post-mortem's own answer does; a crash loop keeps its spare frozen.
 * Returns the heir, or NULL (decided tells whether the policy was asked). */
static struct cr_worker *promote_early(struct cr_worker *w, uint64_t now, bool *decided)
{
    struct cr_worker *s = w->sup->workers;
    while (s && !(s->state == CR_WS_SPARE && !s->retire_on_exit))
        s = s->next;
    *decided = false;
    if (!s || w->id == CR_SPARE_ID || w->retire_on_exit || w->sup->stopping || w->replaced_by ||
        w->replaces || w->exec_errno)
        return NULL;
    struct cr_life life = {
        .uptime_ms = now - w->spawned_at,
        .ready = w->ready_at != 0,
        .served_ms = w->ready_at ? now - w->ready_at : 0,
        .planned = w->kill_reason == CR_KILL_STOP || w->kill_reason == CR_KILL_RECYCLE,
    };
    decide(w, now, &life, false);
    *decided = true;
    return restarts(w->decision.event) && cr_spare_promote(w) ? cr_supervisor_worker(w->sup, w->id)
                                                            : NULL;
}

/* Classifies the death and records it: history, counters, the event. */
static struct cr_postmortem *record_death(struct cr_worker *w, uint64_t now)
{
    struct cr_supervisor *sup = w->sup;
    struct cr_postmortem *pm = cr_worker_postmortem(w, now);
    if (!pm)
        abort(); /* a supervisor without memory for 5 KiB cannot go on honestly */
    cr_history_push(sup->history, pm);
    sup->deaths_by_category[pm->category]++;
    if (pm->category == CR_DEATH_OOM_OWN_LIMIT || pm->category == CR_DEATH_OOM_ANCESTOR_LIMIT ||
        pm->category == CR_DEATH_OOM_SYSTEM)
        w->oom_kills++;
    snprintf(w->last_death, sizeof(w->last_death), "%s", cr_death_to_string(pm->category));
    snprintf(w->last_death_reason, sizeof(w->last_death_reason), "%s", pm->reason);
    struct cr_event died = cr_worker_stamp(w, CR_EV_WORKER_DIED);
    died.reason = pm->reason;
    died.postmortem = pm;
    cr_supervisor_publish(sup, &died);
    return pm;
}

/* Classifies and records the death, then decides what follows it. */
static enum cr_wevent act_reap(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    uint64_t now = cr_now_ms(sup);
    cr_worker_clear_deadline(w);
    /* Dying: its slot went to a spare on the exit notice, the policy asked. */
    bool dying = w->prev == CR_WS_DYING, decided = dying;
    w->notice_at = 0;
    struct cr_worker *heir = dying ? cr_supervisor_worker(sup, w->id)
                                   : promote_early(w, now, &decided);
    struct cr_postmortem *pm = record_death(w, now);
    bool exec_failed = pm->category == CR_DEATH_EXEC_FAILED;
    struct cr_life life = {
        .uptime_ms = (uint64_t)pm->uptime_ms,
        .ready = w->ready_at != 0,
        .served_ms = w->ready_at ? now - w->ready_at : 0,
        .planned = pm->planned,
    };
    free(pm);

    cr_freeze_release(w);
    cr_cg_worker_release(w);
    w->pid = 0;
    w->recycle_queued = false; /* a recycle asked of this process died with it */
    cr_pacer_kick(sup);

    /* What follows the death. */
    if (heir || dying) { /* a spare took the slot before the post-mortem */
        if (!heir)
            return CR_WE_RETIRE; /* the heir is gone too: its own death restarts the slot */
        heir->oom_kills = w->oom_kills;
        memcpy(heir->last_death, w->last_death, sizeof(heir->last_death));
        memcpy(heir->last_death_reason, w->last_death_reason, sizeof(heir->last_death_reason));
        return CR_WE_RETIRE;
    }
    if (w->id == CR_SPARE_ID) {
        if (!w->retire_on_exit && !sup->stopping)
            cr_spare_failed(sup, life.uptime_ms);
        return CR_WE_RETIRE;
    }
    if (w->retire_on_exit || sup->stopping)
        return CR_WE_RETIRE;
    if (w->replaced_by) {
        /* Died while its replacement was starting: the replacement owns the slot now. */
        w->replaced_by->replaces = NULL;
        w->replaced_by->oom_kills = w->oom_kills;
        w->replaced_by->restarts = w->restarts;
        w->replaced_by = NULL;
        return CR_WE_RETIRE;
    }
    if (w->replaces) {
        cr_recycle_failed(w, now, life.uptime_ms);
        return CR_WE_RETIRE;
    }
    if (!decided)
        decide(w, now, &life, exec_failed);
    /* A frozen spare takes the slot now; the dead worker retires. */
    if (restarts(w->decision.event) && cr_spare_promote(w))
        return CR_WE_RETIRE;
    return w->decision.event;
}

/* The kernel's exit notice (exitnotice.c) of a serving worker: it is
 * dying but not yet reaped — its memory is still being freed, which takes
 * 3 ms for a small Node process and 100 ms for 1 GiB. The restart policy
 * is asked now, as at the reap, and a frozen spare takes the slot now
 * instead of after the teardown. Without a spare (or in a crash loop)
 * nothing changes: the reap decides as always. */
static enum cr_wevent act_hand_over(struct cr_worker *w)
{
    uint64_t now = cr_now_ms(w->sup);
    /* Without an heir nothing is gained now: the policy's word is taken
     * back, and the reap asks it once, as for any death. */
    struct cr_restart_state restart = w->restart;
    unsigned restarts = w->restarts;
    bool decided;
    struct cr_worker *heir = promote_early(w, now, &decided);
    if (!heir) {
        w->restart = restart;
        w->restarts = restarts;
        return NOTHING;
    }
    w->notice_at = now;
    w->sup->early_promotions++;
    return CR_WE_HANDED_OVER;
}

static enum cr_wevent act_await_reap(struct cr_worker *w)
{
    /* Not capacity any more: scale, restart, reload and recycles pass it
     * by; its heir holds the slot. */
    w->retire_on_exit = true;
    w->recycle_queued = false;
    cr_log_event(CR_LOG_INFO, "exit-notice", w->id, w->pid, NULL,
                 "worker %d (pid %d) is exiting (kernel exit notice): its heir serves the slot "
                 "while the kernel frees its memory",
                 w->id, (int)w->pid);
    cr_worker_publish_state(w, "dying", "exit notice");
    cr_worker_set_deadline(w, w->sup->cfg.stop_timeout_ms);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

/* Announced dead by the kernel but not reaped after the stop timeout: the
 * notice was of its main thread alone (the process goes on), or the exit
 * is stuck. Its slot has an heir already; it must not serve on. */
static enum cr_wevent act_kill_dying(struct cr_worker *w)
{
    char text[128];
    snprintf(text, sizeof(text), "still not reaped %llu ms after its exit notice",
             (unsigned long long)(cr_now_ms(w->sup) - w->notice_at));
    cr_log_event(CR_LOG_WARNING, "stop-timeout", w->id, w->pid, NULL, "worker %d (pid %d) %s: SIGKILL",
                 w->id, (int)w->pid, text);
    cr_worker_signal(w, SIGKILL, CR_KILL_STOP_TIMEOUT, text);
    cr_worker_set_deadline(w, w->sup->cfg.stop_timeout_ms);
    return NOTHING;
}

/* Forks and execs the next generation; a failure is an event of its own. */
static enum cr_wevent act_spawn(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    w->ready_mode = c->ready;
    w->spoke = w->unannounced = false;
    w->announced = c->ready == CR_READY_NOTIFY;
    w->heap_limit_given = 0;
    int r = cr_worker_spawn(w);
    if (r < 0) {
        cr_log_event(CR_LOG_ERR, "spawn-failed", w->id, 0, NULL, "worker %d: spawn failed: %s",
                     w->id, strerror(-r));
        return CR_WE_SPAWN_FAILED;
    }
    /* The starting deadline: see act_starting_deadline. exec's zero still
     * goes through the loop, after this spawn's own events. */
    static const uint64_t auto_grace = CR_READY_AUTO_GRACE_MS;
    cr_worker_set_deadline(w, w->announced || w->exec_errno ? c->start_timeout_ms
                              : c->ready == CR_READY_EXEC  ? 0
                              : c->ready == CR_READY_DELAY ? c->ready_delay_ms
                                                           : auto_grace);
    cr_worker_publish_state(w, "spawned", NULL);
    return NOTHING;
}

/* Fork or the cgroup failed: an unplanned death without a process, so the
 * restart policy throttles it. A failed replacement leaves the old worker
 * serving. */
static enum cr_wevent act_spawn_failed(struct cr_worker *w)
{
    if (w->replaces) {
        /* As a replacement that died: count it against the reload and hold
         * off the next recycle, or a memory trigger would fork every sample. */
        cr_recycle_failed(w, cr_now_ms(w->sup), 0);
        return CR_WE_RETIRE;
    }
    if (w->id == CR_SPARE_ID) {
        cr_spare_failed(w->sup, 0);
        return CR_WE_RETIRE;
    }
    struct cr_restart_policy p = cr_supervisor_restart_policy(w->sup);
    w->decision = cr_restart_decide(&p, &w->restart, cr_now_ms(w->sup), &(struct cr_life){0});
    return w->decision.event;
}

static enum cr_wevent act_arm_restart(struct cr_worker *w)
{
    if (w->decision.delay_ms)
        cr_log_event(CR_LOG_INFO, "backoff", w->id, 0, NULL, "worker %d restarts in %llu ms",
                     w->id, (unsigned long long)w->decision.delay_ms);
    cr_worker_set_deadline(w, w->decision.delay_ms);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_mark_failed(struct cr_worker *w)
{
    const struct cr_restart_decision *d = &w->decision;
    cr_log_event(CR_LOG_ERR, "failed", w->id, 0, NULL, "worker %d FAILED: %s; retrying in %llu ms",
                 w->id, d->crash_loop ? "crash loop (death budget exceeded)" : "cannot be started",
                 (unsigned long long)d->delay_ms);
    cr_worker_publish_state(w, "failed", d->crash_loop ? "crash-loop" : "exec-failed");
    cr_worker_set_deadline(w, d->delay_ms);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_remove(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    cr_worker_clear_deadline(w);
    worker_remove(w);
    cr_supervisor_table_changed(sup);
    cr_supervisor_pump_recycles(sup);
    cr_supervisor_pump_spares(sup);
    return NOTHING;
}

typedef enum cr_wevent (*action_fn)(struct cr_worker *w);

/* What each action of the table does; every action has a function. */
static const action_fn actions[_CR_WA_MAX] = {
    [CR_WA_NONE] = act_none,
    [CR_WA_BECOME_READY] = act_become_ready,
    [CR_WA_ARM_WATCHDOG] = act_arm_watchdog,
    [CR_WA_FLAG_BLOCKED] = act_flag_blocked,
    [CR_WA_UNBLOCK] = act_unblock,
    [CR_WA_KILL_START_TIMEOUT] = act_kill_start_timeout,
    [CR_WA_KILL_HANG] = act_kill_hang,
    [CR_WA_KILL_HARD] = act_kill_hard,
    [CR_WA_SEND_TERM] = act_send_term,
    [CR_WA_KILL_STOP_TIMEOUT] = act_kill_stop_timeout,
    [CR_WA_REAP] = act_reap,
    [CR_WA_QUEUE] = cr_pacer_act_queue,
    [CR_WA_SPAWN] = act_spawn,
    [CR_WA_SPAWN_FAILED] = act_spawn_failed,
    [CR_WA_ARM_RESTART] = act_arm_restart,
    [CR_WA_MARK_FAILED] = act_mark_failed,
    [CR_WA_REMOVE] = act_remove,
    [CR_WA_FREEZE] = cr_spare_act_freeze,
    [CR_WA_POLL_FROZEN] = cr_spare_act_poll_frozen,
    [CR_WA_BECOME_SPARE] = cr_spare_act_become,
    [CR_WA_PROMOTE] = cr_spare_act_promote,
    [CR_WA_KILL_SPARE] = cr_spare_act_kill,
    [CR_WA_STARTING_DEADLINE] = act_starting_deadline,
    [CR_WA_ANNOUNCE] = act_announce,
    [CR_WA_ASSUME_READY] = act_assume_ready,
    [CR_WA_LATE_READY] = act_late_ready,
    [CR_WA_HAND_OVER] = act_hand_over,
    [CR_WA_AWAIT_REAP] = act_await_reap,
    [CR_WA_KILL_DYING] = act_kill_dying,
};

/* The only place a worker's state changes. An action may answer with a
 * follow-up event (the restart policy's decision, a failed fork); the
 * table says where that leads, so no action ever assigns a state. */
void cr_worker_event(struct cr_worker *w, enum cr_wevent e)
{
    while (e != NOTHING) {
        const struct cr_transition *t = cr_lifecycle_step(w->state, e);
        if (!t)
            return;
        w->prev = w->state;
        w->state = t->next;
        e = actions[t->action](w);
    }
}

void cr_worker_reaped(struct cr_worker *w)
{
    cr_worker_event(w, CR_WE_EXIT);
}

void cr_worker_exit_notice(struct cr_worker *w)
{
    cr_worker_event(w, CR_WE_EXIT_NOTICE);
}

void cr_worker_start(struct cr_worker *w)
{
    cr_worker_event(w, CR_WE_START);
}

/* ---- the end ------------------------------------------------------------ */

static void close_cb_noop(uv_handle_t *h)
{
    (void)h;
}

static void finish_stop(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    cr_log(CR_LOG_NOTICE, "every worker is gone; exiting");
    /* The outputs and the other inputs close theirs. */
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_FINISHED});
    uv_handle_t *hs[] = {(uv_handle_t *)&sup->notify_poll, (uv_handle_t *)&sup->notify_batch,
                         (uv_handle_t *)&sup->cg_trash_timer,
                         (uv_handle_t *)&sup->finish_timer, (uv_handle_t *)&sup->spare_timer,
                         (uv_handle_t *)&sup->spawn_pacer, (uv_handle_t *)&sup->spawn_recheck,
                         (uv_handle_t *)&sup->reap_turn, (uv_handle_t *)&sup->drain_turn};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        if (hs[i]->type != UV_UNKNOWN_HANDLE && !uv_is_closing(hs[i]))
            uv_close(hs[i], close_cb_noop);
}

/* Once stopping and empty, exit from the next loop turn: a control client
 * whose `stop` emptied the table still gets its answer queued first. */
void cr_supervisor_maybe_finish(struct cr_supervisor *sup)
{
    if (!sup->stopping || sup->workers || sup->finish_timer.type == UV_UNKNOWN_HANDLE ||
        uv_is_active((uv_handle_t *)&sup->finish_timer) ||
        uv_is_closing((uv_handle_t *)&sup->finish_timer))
        return;
    uv_timer_start(&sup->finish_timer, finish_stop, 0, 0);
}
