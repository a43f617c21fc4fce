/* The supervisor core: the lifecycle table's driver and its actions.
 * What follows a death (the reap's record, the restart policy's word, the
 * hand-over to a spare) is in death_path.c, rolling replacement in
 * recycle.c, the warm spares' actions in spares.c, the spawn pacer in
 * pacer.c (supervisor_int.h joins the files). A process's own machinery (its
 * spawn, descriptors, reap, cgroup) is generation/'s; what the outside
 * asks for (scale, reload, stop, start-up) is operations.c's. What happens
 * is published as events (events.h); no output is named here. */

#include "supervisor.h"

#include <assert.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgprep.h"
#include "clock.h"
#include "diag.h"
#include "internal.h"
#include "log.h"
#include "memread.h"
#include "notify_rx.h"
#include "page.h"
#include "reaper.h"
#include "supervisor_int.h"
#include "uvclose.h"
#include "wio.h"
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
    while (*pp && cr_worker_id(*pp) <= cr_worker_id(w))
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

struct cr_worker *cr_worker_of(struct cr_gen *g)
{
    return (struct cr_worker *)((char *)g - offsetof(struct cr_worker, g));
}

struct cr_worker *cr_worker_alloc(struct cr_supervisor *sup, int id)
{
    struct cr_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->sup = sup; /* state CR_WS_NEW, intent none: calloc's zero */
    w->role = id == CR_SPARE_ID ? CR_ROLE_SPARE : CR_ROLE_HOLDER;
    w->g.host = &sup->host;
    w->g.id = id;
    uv_timer_init(sup->loop, &w->deadline);
    w->deadline.data = w;
    cr_worker_link(sup, w);
    return w;
}

struct cr_worker *cr_worker_new(struct cr_supervisor *sup, int id)
{
    struct cr_slot *slot = cr_slots_open(&sup->slots, id);
    if (!slot)
        return NULL;
    struct cr_worker *w = cr_worker_alloc(sup, id);
    if (!w)
        return NULL;
    w->slot = slot;
    slot->holder = w;
    return w;
}

void cr_worker_retire(struct cr_worker *w)
{
    struct cr_slot *slot = w->slot;
    if (slot && slot->holder == w)
        slot->holder = NULL;
    if (slot && slot->replacement == w)
        slot->replacement = NULL;
    w->role = CR_ROLE_RETIRING;
    w->intent = CR_INTENT_NONE;
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
    if (w->role != CR_ROLE_RETIRING)
        cr_worker_retire(w);
    cr_mem_free(&w->g.mem);
    cr_page_release(&w->g);
    cr_diag_release(sup->host.diag, &w->g, NULL); /* its death released it already */
    cr_cg_prep_drop(&w->g);
    uv_close((uv_handle_t *)&w->deadline, worker_freed);
    cr_supervisor_maybe_finish(sup);
}

struct cr_worker *cr_supervisor_worker(struct cr_supervisor *sup, int id)
{
    struct cr_slot *slot = cr_slots_get(&sup->slots, id);
    if (slot && slot->holder)
        return slot->holder;
    /* A slot given up (a stop, a scale-down) still has its process until it
     * is reaped: an operator may have to `kill` it. */
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (cr_worker_id(w) == id && w->role == CR_ROLE_RETIRING && w->slot &&
            !w->slot->holder && cr_wstate_has_process(w->state))
            return w;
    return NULL;
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
        .type = type, .worker = cr_worker_id(w), .pid = w->g.pid,
        .generation = w->g.generation, .from = w->prev, .to = w->state,
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
    cr_reaper_signal(&w->g, sig, why, text);
}

enum cr_kill_reason cr_worker_drain_reason(const struct cr_worker *w, const char **ret_text)
{
    /* A worker corrald is killing already (hang, stop timeout, a start
     * timeout's SIGKILL still on its way) dies for that. */
    if (w->g.ledger.sigmask & (1ull << SIGKILL)) {
        *ret_text = NULL;
        return w->g.ledger.reason;
    }
    *ret_text = w->drain.text[0] ? w->drain.text : NULL;
    return w->drain.why != CR_KILL_NONE ? w->drain.why : CR_KILL_STOP;
}

/* ---- the lifecycle table's actions ------------------------------------- */

void cr_worker_arm_watchdog(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    if (c->watchdog_ms && w->g.report.speech == CR_SPEECH_BEATS)
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
    cr_log_event(CR_LOG_INFO, "ready", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d ready: pid %d after %llu ms%s", cr_worker_id(w), (int)w->g.pid,
                 (unsigned long long)(w->ready_at - w->g.spawned_at), how);
    cr_worker_publish_state(w, "ready", NULL);
    cr_worker_arm_watchdog(w);
    if (w->role == CR_ROLE_REPLACEMENT)
        cr_recycle_took_over(w);
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
    w->readiness = CR_READINESS_ASSUMED;
    snprintf(how, sizeof(how), " (unannounced: --ready %s%s)", mode,
             w->ready_mode == CR_READY_AUTO ? ", silent" : "");
    become_ready(w, how);
    return NOTHING;
}

/* READY=1 after readiness was assumed: it does speak the protocol. */
static enum cr_wevent act_late_ready(struct cr_worker *w)
{
    if (w->readiness != CR_READINESS_ASSUMED)
        return NOTHING; /* a second READY=1 changes nothing */
    w->readiness = CR_READINESS_ANNOUNCED;
    cr_log_event(CR_LOG_INFO, "announced", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d sent READY=1 %llu ms after readiness was assumed", cr_worker_id(w),
                 (unsigned long long)(cr_now_ms(w->sup) - w->ready_at));
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

/* The start timeout, counted from the spawn. */
static void arm_start_timeout(struct cr_worker *w)
{
    uint64_t alive = cr_now_ms(w->sup) - w->g.spawned_at, t = w->sup->cfg.start_timeout_ms;
    cr_worker_set_deadline(w, t > alive ? t - alive : 0);
}

/* The first message of an auto worker: it speaks the protocol, so its
 * readiness is announced and the start timeout applies. */
static enum cr_wevent act_announce(struct cr_worker *w)
{
    if (w->ready_mode != CR_READY_AUTO || w->readiness != CR_READINESS_BY_MODE)
        return NOTHING;
    w->readiness = CR_READINESS_ANNOUNCED;
    arm_start_timeout(w);
    return NOTHING;
}

/* The starting deadline: a start timeout where readiness is announced or
 * waits for the exec (--ready exec: its exec was never confirmed), else
 * the moment the mode assumes it. */
static enum cr_wevent act_starting_deadline(struct cr_worker *w)
{
    return w->readiness == CR_READINESS_ANNOUNCED || w->ready_mode == CR_READY_EXEC
               ? CR_WE_START_TIMEOUT
               : CR_WE_ASSUME_READY;
}

/* The exec pipe's EOF: the program runs. Under --ready exec that is its
 * readiness (systemd's Type=exec); a spare is frozen only then. */
static enum cr_wevent act_exec_ok(struct cr_worker *w)
{
    return w->ready_mode == CR_READY_EXEC ? CR_WE_ASSUME_READY : NOTHING;
}

/* The program never ran: the child is exiting on its own; the start
 * timeout's SIGKILL is there for one that hangs on its way out. */
static enum cr_wevent act_note_exec_failed(struct cr_worker *w)
{
    arm_start_timeout(w);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_kill_unexecuted(struct cr_worker *w)
{
    cr_log_event(CR_LOG_ERR, "start-timeout", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d did not exit after its exec failed: SIGKILL", cr_worker_id(w));
    cr_worker_signal(w, SIGKILL, CR_KILL_START_TIMEOUT, "exec failed and it did not exit");
    return NOTHING;
}

/* A heartbeat of a ready worker: its watchdog deadline moves on. Only the
 * due time is moved; the timer keeps its earlier one and, when it fires,
 * waits again for what is left (on_deadline): 256 workers beating once a
 * second were 256 timer-heap updates a second, 7 % of idle corrald. */
static enum cr_wevent act_arm_watchdog(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    /* Only later: a watchdog lowered by `set` must re-arm the timer. */
    if (c->watchdog_ms && w->g.report.speech == CR_SPEECH_BEATS && w->deadline_at &&
        uv_is_active((uv_handle_t *)&w->deadline) &&
        c->watchdog_ms >= uv_timer_get_due_in(&w->deadline))
        w->deadline_at = cr_now_ms(w->sup) + c->watchdog_ms;
    else
        cr_worker_arm_watchdog(w);
    return NOTHING;
}

/* " in GET /x (5.2 s)" from the worker's page, "" when it says nothing. */
static void request_text(const struct cr_worker *w, char *buf, size_t size)
{
    struct cr_request_seen r;
    cr_page_request(w->g.page, &r);
    cr_request_seen_text(&r, buf, size);
}

static enum cr_wevent act_flag_blocked(struct cr_worker *w)
{
    const struct cr_config *c = &w->sup->cfg;
    uint64_t silent = cr_now_ms(w->sup) - w->g.report.last_at;
    char rq[CR_WPAGE_TARGET_MAX + 64];
    request_text(w, rq, sizeof(rq));
    cr_log_event(CR_LOG_WARNING, "blocked", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d blocked: no heartbeat for %llu ms (watchdog %llu ms)%s",
                 cr_worker_id(w), (unsigned long long)silent,
                 (unsigned long long)c->watchdog_ms, rq);
    /* The event says where, without the leading " in ". */
    cr_worker_publish_state(w, "blocked", strncmp(rq, " in ", 4) == 0 ? rq + 4 : NULL);
    if (c->hang_timeout_ms)
        cr_worker_set_deadline(w, c->hang_timeout_ms > silent ? c->hang_timeout_ms - silent : 0);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_unblock(struct cr_worker *w)
{
    cr_log_event(CR_LOG_NOTICE, "unblocked", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d unblocked: heartbeat again", cr_worker_id(w));
    cr_worker_publish_state(w, "unblocked", NULL);
    cr_worker_arm_watchdog(w);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_kill_start_timeout(struct cr_worker *w)
{
    cr_log_event(CR_LOG_ERR, "start-timeout", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d not ready after %llu ms: SIGKILL", cr_worker_id(w),
                 (unsigned long long)w->sup->cfg.start_timeout_ms);
    cr_worker_signal(w, SIGKILL, CR_KILL_START_TIMEOUT, "no READY=1 in time");
    return NOTHING;
}

#define HANG_ABORT_GRACE_MS 2000

static enum cr_wevent act_kill_hang(struct cr_worker *w)
{
    char text[sizeof(w->g.ledger.text)], rq[CR_WPAGE_TARGET_MAX + 64];
    cr_trace_note_missing(w);
    request_text(w, rq, sizeof(rq));
    snprintf(text, sizeof(text), "no heartbeat for %llu ms (hang timeout %llu ms)%.200s",
             (unsigned long long)(cr_now_ms(w->sup) - w->g.report.last_at),
             (unsigned long long)w->sup->cfg.hang_timeout_ms, rq);
    cr_log_event(CR_LOG_ERR, "hang-kill", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d hung: %s; sending SIGABRT for a core, SIGKILL in %d ms",
                 cr_worker_id(w), text, HANG_ABORT_GRACE_MS);
    cr_worker_signal(w, SIGABRT, CR_KILL_HANG, text);
    cr_worker_set_deadline(w, HANG_ABORT_GRACE_MS);
    return NOTHING;
}

static enum cr_wevent act_kill_hard(struct cr_worker *w)
{
    cr_log_event(CR_LOG_ERR, "hang-kill", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d survived SIGABRT: SIGKILL", cr_worker_id(w));
    cr_worker_signal(w, SIGKILL, CR_KILL_HANG, NULL);
    return NOTHING;
}

static enum cr_wevent act_send_term(struct cr_worker *w)
{
    const char *text;
    enum cr_kill_reason why = cr_worker_drain_reason(w, &text);
    cr_log_event(CR_LOG_INFO, "draining", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d draining (%s%s%s): SIGTERM, SIGKILL after %llu ms", cr_worker_id(w),
                 cr_kill_reason_to_string(why), text ? ": " : "", text ? text : "",
                 (unsigned long long)w->sup->cfg.stop_timeout_ms);
    cr_worker_publish_state(w, "draining", cr_kill_reason_to_string(why));
    cr_worker_signal(w, SIGTERM, why, text);
    cr_worker_set_deadline(w, w->sup->cfg.stop_timeout_ms);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_kill_stop_timeout(struct cr_worker *w)
{
    cr_log_event(CR_LOG_WARNING, "stop-timeout", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d still draining after %llu ms: SIGKILL", cr_worker_id(w),
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

static enum cr_wevent act_await_reap(struct cr_worker *w)
{
    /* Not capacity any more: scale, restart, reload and recycles pass it
     * by; its heir holds the slot. */
    w->intent = CR_INTENT_NONE;
    cr_log_event(CR_LOG_INFO, "exit-notice", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d (pid %d) is exiting (kernel exit notice): its heir serves the slot "
                 "while the kernel frees its memory",
                 cr_worker_id(w), (int)w->g.pid);
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
             (unsigned long long)(cr_now_ms(w->sup) - w->handed_over_at));
    cr_log_event(CR_LOG_WARNING, "stop-timeout", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d (pid %d) %s: SIGKILL", cr_worker_id(w), (int)w->g.pid, text);
    cr_worker_signal(w, SIGKILL, CR_KILL_STOP_TIMEOUT, text);
    cr_worker_set_deadline(w, w->sup->cfg.stop_timeout_ms);
    return NOTHING;
}

/* The generation a spawn gets: a spare's from the spares' counter; a
 * slot's the one reserved for its group made ahead, else the slot's next. */
static unsigned next_generation(struct cr_worker *w)
{
    if (!w->slot)
        return cr_spare_next_generation(w->sup);
    unsigned made = cr_cg_prep_generation(&w->g);
    return made ? made : cr_slot_next_generation(w->slot);
}

/* Forks and execs the next generation; a failure is an event of its own. */
static enum cr_wevent act_spawn(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    const struct cr_config *c = &sup->cfg;
    w->ready_mode = c->ready;
    w->readiness = c->ready == CR_READY_NOTIFY ? CR_READINESS_ANNOUNCED : CR_READINESS_BY_MODE;
    w->ready_at = 0;
    int r = cr_worker_spawn(&w->g, next_generation(w), sup->target);
    if (r < 0) {
        cr_log_event(CR_LOG_ERR, "spawn-failed", cr_worker_id(w), 0, NULL,
                     "worker %d: spawn failed: %s", cr_worker_id(w), strerror(-r));
        return CR_WE_SPAWN_FAILED;
    }
    cr_log_event(CR_LOG_INFO, "spawned", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d spawned: pid %d, generation %u%s", cr_worker_id(w), (int)w->g.pid,
                 w->g.generation, w->role == CR_ROLE_REPLACEMENT ? " (replacement)" : "");
    /* The starting deadline: see act_starting_deadline. Under --ready exec
     * the exec pipe's EOF makes the worker ready (act_exec_ok). */
    static const uint64_t auto_grace = CR_READY_AUTO_GRACE_MS;
    cr_worker_set_deadline(w, w->readiness == CR_READINESS_ANNOUNCED || c->ready == CR_READY_EXEC
                                  ? c->start_timeout_ms
                              : c->ready == CR_READY_DELAY ? c->ready_delay_ms
                                                           : auto_grace);
    cr_worker_publish_state(w, "spawned", NULL);
    return NOTHING;
}

static enum cr_wevent act_arm_restart(struct cr_worker *w)
{
    uint64_t delay = w->slot->decision.delay_ms;
    if (delay)
        cr_log_event(CR_LOG_INFO, "backoff", cr_worker_id(w), 0, NULL,
                     "worker %d restarts in %llu ms", cr_worker_id(w), (unsigned long long)delay);
    cr_worker_set_deadline(w, delay);
    cr_supervisor_table_changed(w->sup);
    return NOTHING;
}

static enum cr_wevent act_mark_failed(struct cr_worker *w)
{
    const struct cr_restart_decision *d = &w->slot->decision;
    cr_log_event(CR_LOG_ERR, "failed", cr_worker_id(w), 0, NULL,
                 "worker %d FAILED: %s; retrying in %llu ms", cr_worker_id(w),
                 d->crash_loop ? "crash loop (death budget exceeded)" : "cannot be started",
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

/* What each action of the table does; tests/unit/core/test_actions.c
 * checks that every action has a function. */
const cr_action_fn cr_worker_actions[_CR_WA_MAX] = {
    [CR_WA_NONE] = act_none,
    [CR_WA_BECOME_READY] = act_become_ready,
    [CR_WA_ARM_WATCHDOG] = act_arm_watchdog,
    [CR_WA_FLAG_BLOCKED] = act_flag_blocked,
    [CR_WA_UNBLOCK] = act_unblock,
    [CR_WA_KILL_START_TIMEOUT] = act_kill_start_timeout,
    [CR_WA_ASK_STACK] = cr_trace_act_ask,
    [CR_WA_KILL_HANG] = act_kill_hang,
    [CR_WA_KILL_HARD] = act_kill_hard,
    [CR_WA_SEND_TERM] = act_send_term,
    [CR_WA_KILL_STOP_TIMEOUT] = act_kill_stop_timeout,
    [CR_WA_REAP] = cr_death_path_act_reap,
    [CR_WA_QUEUE] = cr_pacer_act_queue,
    [CR_WA_SPAWN] = act_spawn,
    [CR_WA_SPAWN_FAILED] = cr_death_path_act_spawn_failed,
    [CR_WA_ARM_RESTART] = act_arm_restart,
    [CR_WA_MARK_FAILED] = act_mark_failed,
    [CR_WA_REMOVE] = act_remove,
    [CR_WA_STARTING_DEADLINE] = act_starting_deadline,
    [CR_WA_ANNOUNCE] = act_announce,
    [CR_WA_ASSUME_READY] = act_assume_ready,
    [CR_WA_LATE_READY] = act_late_ready,
    [CR_WA_FREEZE] = cr_spare_act_freeze,
    [CR_WA_POLL_FROZEN] = cr_spare_act_poll_frozen,
    [CR_WA_BECOME_SPARE] = cr_spare_act_become,
    [CR_WA_PROMOTE] = cr_spare_act_promote,
    [CR_WA_KILL_SPARE] = cr_spare_act_kill,
    [CR_WA_HAND_OVER] = cr_death_path_act_hand_over,
    [CR_WA_AWAIT_REAP] = act_await_reap,
    [CR_WA_KILL_DYING] = act_kill_dying,
    [CR_WA_NOTE_EXEC_FAILED] = act_note_exec_failed,
    [CR_WA_EXEC_OK] = act_exec_ok,
    [CR_WA_KILL_UNEXECUTED] = act_kill_unexecuted,
    [CR_WA_QUEUE_RECYCLE] = cr_recycle_act_queue,
    [CR_WA_RESTART_IN_PLACE] = cr_recycle_act_restart_in_place,
    [CR_WA_START_REPLACEMENT] = cr_recycle_act_start_replacement,
    [CR_WA_DECIDE] = cr_death_path_act_decide,
    [CR_WA_PASS_SLOT] = cr_recycle_act_pass_slot,
    [CR_WA_REPLACEMENT_FAILED] = cr_recycle_act_failed,
    [CR_WA_SPARE_FAILED] = cr_spare_act_failed,
};

/* What the hand-overs rely on, after every event (asserts only): a worker's
 * role and its slot's pointers agree. */
static void check_roles(const struct cr_worker *w)
{
#ifndef NDEBUG
    const struct cr_slot *slot = w->slot;
    switch (w->role) {
    case CR_ROLE_HOLDER:
    case CR_ROLE_REPLACED:
        assert(slot && slot->holder == w);
        assert((w->role == CR_ROLE_REPLACED) == (slot->replacement != NULL));
        break;
    case CR_ROLE_REPLACEMENT:
        assert(slot && slot->replacement == w && slot->holder != w);
        break;
    case CR_ROLE_SPARE:
        assert(!slot && cr_worker_id(w) == CR_SPARE_ID);
        break;
    case CR_ROLE_HANDED_OVER:
    case CR_ROLE_RETIRING:
        assert(!slot || (slot->holder != w && slot->replacement != w));
        break;
    default:
        assert(!"a role out of range");
    }
#else
    (void)w;
#endif
}

/* The only place a worker's state changes. An action may answer with a
 * follow-up event (the restart policy's decision, a failed fork); the
 * table says where that leads, so no action ever assigns a state. */
bool cr_worker_event(struct cr_worker *w, enum cr_wevent e)
{
    bool taken = false;
    while (e != NOTHING) {
        const struct cr_transition *t = cr_lifecycle_step(w->state, e);
        if (!t)
            break;
        taken = true;
        assert(cr_worker_actions[t->action]);
        w->prev = w->state;
        w->state = t->next;
        e = cr_worker_actions[t->action](w);
    }
    if (taken && w->state != CR_WS_GONE)
        check_roles(w);
    /* A worker told to go (SIGTERM, SIGKILL), dying or reaped takes no
     * more connections: corrald's copy of its reuseport socket must not
     * keep the socket in the group, where the kernel would go on hashing
     * connections onto it (wio.h). */
    if (taken && !cr_wstate_accepts(w->state))
        cr_io_drop_listener(&w->g);
    return taken;
}

void cr_worker_reaped(struct cr_worker *w)
{
    cr_worker_event(w, CR_WE_EXIT);
}

void cr_worker_exit_notice(struct cr_worker *w)
{
    cr_worker_event(w, CR_WE_EXIT_NOTICE);
}

void cr_supervisor_exit_notice(struct cr_supervisor *sup, const struct cr_taskstats_exit *e)
{
    cr_reaper_exit_notice(&sup->reaper, e);
}

void cr_supervisor_reap(struct cr_supervisor *sup)
{
    cr_reaper_scan(&sup->reaper);
}

void cr_worker_start(struct cr_worker *w)
{
    cr_worker_event(w, CR_WE_START);
}

/* ---- the end ------------------------------------------------------------ */

static void finish_stop(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    cr_log(CR_LOG_NOTICE, "every worker is gone; exiting");
    /* The outputs and the other inputs close theirs. */
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_FINISHED});
    cr_notify_rx_stop(&sup->notify);
    cr_reaper_close(&sup->reaper);
    cr_cgtree_stop(&sup->cgtree);
    cr_self_stop(&sup->self);
    uv_handle_t *hs[] = {(uv_handle_t *)&sup->finish_timer, (uv_handle_t *)&sup->spares.timer,
                         (uv_handle_t *)&sup->pacer.turn, (uv_handle_t *)&sup->pacer.recheck,
                         (uv_handle_t *)&sup->drain_turn, (uv_handle_t *)&sup->stop_delay,
                         (uv_handle_t *)&sup->tracer.poll};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        cr_uv_close(hs[i]);
}

void cr_supervisor_init_handles(struct cr_supervisor *sup)
{
    uv_timer_init(sup->loop, &sup->finish_timer);
    uv_timer_init(sup->loop, &sup->spares.timer);
    uv_idle_init(sup->loop, &sup->drain_turn);
    uv_timer_init(sup->loop, &sup->stop_delay);
    sup->finish_timer.data = sup->spares.timer.data = sup->drain_turn.data = sup;
    sup->stop_delay.data = sup;
    cr_pacer_init(sup);
    cr_trace_init(sup);
}

/* Once stopping and empty, exit from the next loop turn: a control client
 * whose `stop` emptied the table still gets its answer queued first. */
void cr_supervisor_maybe_finish(struct cr_supervisor *sup)
{
    if (sup->phase != CR_PHASE_STOPPING || sup->workers ||
        sup->finish_timer.type == UV_UNKNOWN_HANDLE ||
        uv_is_active((uv_handle_t *)&sup->finish_timer) ||
        uv_is_closing((uv_handle_t *)&sup->finish_timer))
        return;
    uv_timer_start(&sup->finish_timer, finish_stop, 0, 0);
}
