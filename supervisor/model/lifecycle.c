#include "lifecycle.h"

#include <stddef.h>
#include <stdint.h>

#define T(n, a) (&(const struct cr_transition){.next = CR_WS_##n, .action = CR_WA_##a})

/* The whole lifecycle. Reading one row tells everything a state does:
 * every state change of a worker is one of these cells. */
static const struct cr_transition *const table[_CR_WS_MAX][_CR_WE_MAX] = {
    [CR_WS_NEW] = {
        [CR_WE_START] = T(PENDING, QUEUE),
        [CR_WE_START_SPARE] = T(SPARE_STARTING, SPAWN),
        [CR_WE_DRAIN] = T(GONE, REMOVE),
    },
    [CR_WS_PENDING] = {
        [CR_WE_SPAWN_TURN] = T(STARTING, SPAWN),
        [CR_WE_DRAIN] = T(GONE, REMOVE),
    },
    [CR_WS_STARTING] = {
        [CR_WE_READY] = T(READY, BECOME_READY),
        [CR_WE_SPOKE] = T(STARTING, ANNOUNCE),
        [CR_WE_DEADLINE] = T(STARTING, STARTING_DEADLINE),
        [CR_WE_START_TIMEOUT] = T(STARTING, KILL_START_TIMEOUT),
        [CR_WE_ASSUME_READY] = T(READY, ASSUME_READY),
        [CR_WE_DRAIN] = T(DRAINING, SEND_TERM),
        [CR_WE_EXIT] = T(EXITED, REAP),
        [CR_WE_SPAWN_FAILED] = T(EXITED, SPAWN_FAILED),
        [CR_WE_EXEC_FAILED] = T(EXEC_FAILED, NOTE_EXEC_FAILED),
        [CR_WE_EXEC_OK] = T(STARTING, EXEC_OK),
        [CR_WE_RECYCLE] = T(STARTING, QUEUE_RECYCLE),
        [CR_WE_RESTART_IN_PLACE] = T(STARTING, RESTART_IN_PLACE),
    },
    [CR_WS_READY] = {
        [CR_WE_EXIT_NOTICE] = T(READY, HAND_OVER),
        [CR_WE_HANDED_OVER] = T(DYING, AWAIT_REAP),
        [CR_WE_READY] = T(READY, LATE_READY),
        [CR_WE_WATCHDOG] = T(READY, ARM_WATCHDOG),
        [CR_WE_DEADLINE] = T(BLOCKED, FLAG_BLOCKED),
        [CR_WE_DRAIN] = T(DRAINING, SEND_TERM),
        [CR_WE_EXIT] = T(EXITED, REAP),
        [CR_WE_RECYCLE] = T(READY, QUEUE_RECYCLE),
        [CR_WE_REPLACE_TURN] = T(READY, START_REPLACEMENT),
    },
    [CR_WS_BLOCKED] = {
        [CR_WE_EXIT_NOTICE] = T(BLOCKED, HAND_OVER),
        [CR_WE_HANDED_OVER] = T(DYING, AWAIT_REAP),
        [CR_WE_WATCHDOG] = T(READY, UNBLOCK),
        [CR_WE_DEADLINE] = T(TRACING, ASK_STACK),
        [CR_WE_DRAIN] = T(DRAINING, SEND_TERM),
        [CR_WE_EXIT] = T(EXITED, REAP),
        [CR_WE_RECYCLE] = T(BLOCKED, QUEUE_RECYCLE),
        [CR_WE_REPLACE_TURN] = T(BLOCKED, START_REPLACEMENT),
    },
    /* Still serving as far as anyone can tell: it may beat again. */
    [CR_WS_TRACING] = {
        [CR_WE_EXIT_NOTICE] = T(TRACING, HAND_OVER),
        [CR_WE_HANDED_OVER] = T(DYING, AWAIT_REAP),
        [CR_WE_WATCHDOG] = T(READY, UNBLOCK),
        [CR_WE_STACK] = T(KILLING, KILL_HANG),
        [CR_WE_DEADLINE] = T(KILLING, KILL_HANG),
        [CR_WE_DRAIN] = T(DRAINING, SEND_TERM),
        [CR_WE_EXIT] = T(EXITED, REAP),
        [CR_WE_RECYCLE] = T(TRACING, QUEUE_RECYCLE),
        [CR_WE_REPLACE_TURN] = T(TRACING, START_REPLACEMENT),
    },
    [CR_WS_DRAINING] = {
        [CR_WE_DEADLINE] = T(DRAINING, KILL_STOP_TIMEOUT),
        [CR_WE_EXIT] = T(EXITED, REAP),
    },
    [CR_WS_KILLING] = {
        [CR_WE_EXIT_NOTICE] = T(KILLING, HAND_OVER),
        [CR_WE_HANDED_OVER] = T(DYING, AWAIT_REAP),
        [CR_WE_DEADLINE] = T(KILLING, KILL_HARD),
        [CR_WE_EXIT] = T(EXITED, REAP),
    },
    [CR_WS_EXITED] = {
        [CR_WE_DIED] = T(EXITED, DECIDE),
        [CR_WE_REPLACED_DIED] = T(EXITED, PASS_SLOT),
        [CR_WE_REPLACEMENT_DIED] = T(EXITED, REPLACEMENT_FAILED),
        [CR_WE_SPARE_DIED] = T(EXITED, SPARE_FAILED),
        [CR_WE_RESTART] = T(BACKOFF, ARM_RESTART),
        [CR_WE_REPLACE] = T(BACKOFF, ARM_RESTART),
        [CR_WE_BUDGET_SPENT] = T(FAILED, MARK_FAILED),
        [CR_WE_RETIRE] = T(GONE, REMOVE),
    },
    [CR_WS_BACKOFF] = {
        [CR_WE_DEADLINE] = T(PENDING, QUEUE),
        [CR_WE_DRAIN] = T(GONE, REMOVE),
    },
    [CR_WS_FAILED] = {
        [CR_WE_DEADLINE] = T(PENDING, QUEUE),
        [CR_WE_DRAIN] = T(GONE, REMOVE),
    },
    [CR_WS_GONE] = {0},
    [CR_WS_SPARE_STARTING] = {
        [CR_WE_READY] = T(FREEZING, FREEZE),
        [CR_WE_SPOKE] = T(SPARE_STARTING, ANNOUNCE),
        [CR_WE_DEADLINE] = T(SPARE_STARTING, STARTING_DEADLINE),
        [CR_WE_START_TIMEOUT] = T(SPARE_STARTING, KILL_START_TIMEOUT),
        [CR_WE_ASSUME_READY] = T(FREEZING, FREEZE),
        [CR_WE_DRAIN] = T(DRAINING, SEND_TERM),
        [CR_WE_EXIT] = T(EXITED, REAP),
        [CR_WE_SPAWN_FAILED] = T(EXITED, SPAWN_FAILED),
        [CR_WE_EXEC_FAILED] = T(EXEC_FAILED, NOTE_EXEC_FAILED),
        [CR_WE_EXEC_OK] = T(SPARE_STARTING, EXEC_OK),
    },
    [CR_WS_FREEZING] = {
        [CR_WE_FROZEN] = T(SPARE, BECOME_SPARE),
        [CR_WE_DEADLINE] = T(FREEZING, POLL_FROZEN),
        [CR_WE_DRAIN] = T(DRAINING, KILL_SPARE),
        [CR_WE_EXIT] = T(EXITED, REAP),
    },
    [CR_WS_SPARE] = {
        [CR_WE_PROMOTE] = T(READY, PROMOTE),
        [CR_WE_DRAIN] = T(DRAINING, KILL_SPARE),
        [CR_WE_EXIT] = T(EXITED, REAP),
    },
    [CR_WS_DYING] = {
        [CR_WE_DEADLINE] = T(DYING, KILL_DYING),
        [CR_WE_EXIT] = T(EXITED, REAP),
    },
    /* Exiting by itself: a drain has nothing to add, the reap follows. */
    [CR_WS_EXEC_FAILED] = {
        [CR_WE_DEADLINE] = T(EXEC_FAILED, KILL_UNEXECUTED),
        [CR_WE_EXIT] = T(EXITED, REAP),
    },
};

const struct cr_transition *cr_lifecycle_step(enum cr_wstate s, enum cr_wevent e)
{
    if ((unsigned)s >= _CR_WS_MAX || (unsigned)e >= _CR_WE_MAX)
        return NULL;
    return table[s][e];
}

/* The states: what each is called, whether a process exists in it, and
 * what the worker's one deadline means there. */
static const struct {
    const char *name;
    bool process;
    bool terminal;
    bool unseen;
    bool spawned; /* a spawn leads here */
    bool spare;
    bool accepts; /* its process may take connections */
    const char *deadline;
} states[_CR_WS_MAX] = {
    [CR_WS_NEW] = {"new", .unseen = true},
    [CR_WS_PENDING] = {"pending"},
    [CR_WS_STARTING] = {"starting", .process = true, .spawned = true, .accepts = true,
                        .deadline = "start timeout, or readiness assumed by --ready"},
    [CR_WS_READY] = {"ready", .process = true, .accepts = true, .deadline = "watchdog silence"},
    [CR_WS_BLOCKED] = {"blocked", .process = true, .accepts = true, .deadline = "hang timeout"},
    [CR_WS_DRAINING] = {"draining", .process = true, .deadline = "stop timeout"},
    /* Still the blocked worker, its socket still its own: it may beat again
     * and go back to ready, and corrald's copy of its reuseport socket
     * cannot be taken back once dropped. */
    [CR_WS_TRACING] = {"tracing", .process = true, .accepts = true,
                       .deadline = "the stack's budget, then the kill"},
    [CR_WS_KILLING] = {"killing", .process = true, .deadline = "SIGKILL after SIGABRT"},
    [CR_WS_EXITED] = {"exited"},
    [CR_WS_BACKOFF] = {"backoff", .deadline = "restart time"},
    [CR_WS_FAILED] = {"failed", .deadline = "slow retry"},
    [CR_WS_GONE] = {"gone", .terminal = true, .unseen = true},
    [CR_WS_SPARE_STARTING] = {"spare-starting", .process = true, .spawned = true, .spare = true,
                              .deadline = "start timeout, or readiness assumed by --ready"},
    [CR_WS_FREEZING] = {"freezing", .process = true, .spare = true,
                        .deadline = "look at the freezer again"},
    [CR_WS_SPARE] = {"spare", .process = true, .spare = true},
    [CR_WS_DYING] = {"dying", .process = true, .deadline = "stop timeout, then SIGKILL"},
    [CR_WS_EXEC_FAILED] = {"exec-failed", .process = true,
                           .deadline = "start timeout: SIGKILL if it did not exit"},
};

bool cr_wstate_spawned(enum cr_wstate s)
{
    return (unsigned)s < _CR_WS_MAX && states[s].spawned;
}

bool cr_wstate_spare(enum cr_wstate s)
{
    return (unsigned)s < _CR_WS_MAX && states[s].spare;
}

bool cr_wstate_sampled(enum cr_wstate s)
{
    return cr_wstate_has_process(s) && !cr_wstate_spare(s) && s != CR_WS_EXEC_FAILED;
}

bool cr_wstate_accepts(enum cr_wstate s)
{
    return (unsigned)s < _CR_WS_MAX && states[s].accepts;
}

bool cr_wstate_has_process(enum cr_wstate s)
{
    return (unsigned)s < _CR_WS_MAX && states[s].process;
}

bool cr_wstate_terminal(enum cr_wstate s)
{
    return (unsigned)s < _CR_WS_MAX && states[s].terminal;
}

bool cr_wstate_unseen(enum cr_wstate s)
{
    return (unsigned)s < _CR_WS_MAX && states[s].unseen;
}

const char *cr_wstate_deadline(enum cr_wstate s)
{
    return (unsigned)s < _CR_WS_MAX ? states[s].deadline : NULL;
}

static const char *const event_names[_CR_WE_MAX] = {
    [CR_WE_READY] = "ready",
    [CR_WE_WATCHDOG] = "watchdog",
    [CR_WE_DEADLINE] = "deadline",
    [CR_WE_DRAIN] = "drain",
    [CR_WE_EXIT] = "exit",
    [CR_WE_START] = "start",
    [CR_WE_SPAWN_TURN] = "spawn-turn",
    [CR_WE_SPAWN_FAILED] = "spawn-failed",
    [CR_WE_RESTART] = "restart",
    [CR_WE_BUDGET_SPENT] = "budget-spent",
    [CR_WE_RETIRE] = "retire",
    [CR_WE_SPOKE] = "spoke",
    [CR_WE_START_TIMEOUT] = "start-timeout",
    [CR_WE_ASSUME_READY] = "assume-ready",
    [CR_WE_REPLACE] = "replace",
    [CR_WE_START_SPARE] = "start-spare",
    [CR_WE_FROZEN] = "frozen",
    [CR_WE_PROMOTE] = "promote",
    [CR_WE_EXIT_NOTICE] = "exit-notice",
    [CR_WE_HANDED_OVER] = "handed-over",
    [CR_WE_EXEC_FAILED] = "exec-failed",
    [CR_WE_EXEC_OK] = "exec-ok",
    [CR_WE_RECYCLE] = "recycle",
    [CR_WE_RESTART_IN_PLACE] = "restart-in-place",
    [CR_WE_REPLACE_TURN] = "replace-turn",
    [CR_WE_DIED] = "died",
    [CR_WE_REPLACED_DIED] = "replaced-died",
    [CR_WE_REPLACEMENT_DIED] = "replacement-died",
    [CR_WE_SPARE_DIED] = "spare-died",
    [CR_WE_STACK] = "stack",
};

static const char *const action_names[_CR_WA_MAX] = {
    [CR_WA_NONE] = "none",
    [CR_WA_BECOME_READY] = "become-ready",
    [CR_WA_ARM_WATCHDOG] = "arm-watchdog",
    [CR_WA_FLAG_BLOCKED] = "flag-blocked",
    [CR_WA_UNBLOCK] = "unblock",
    [CR_WA_KILL_START_TIMEOUT] = "kill-start-timeout",
    [CR_WA_ASK_STACK] = "ask-stack",
    [CR_WA_KILL_HANG] = "kill-hang",
    [CR_WA_KILL_HARD] = "kill-hard",
    [CR_WA_SEND_TERM] = "send-term",
    [CR_WA_KILL_STOP_TIMEOUT] = "kill-stop-timeout",
    [CR_WA_REAP] = "reap",
    [CR_WA_QUEUE] = "queue",
    [CR_WA_SPAWN] = "spawn",
    [CR_WA_SPAWN_FAILED] = "spawn-failed",
    [CR_WA_ARM_RESTART] = "arm-restart",
    [CR_WA_MARK_FAILED] = "mark-failed",
    [CR_WA_REMOVE] = "remove",
    [CR_WA_STARTING_DEADLINE] = "starting-deadline",
    [CR_WA_ANNOUNCE] = "announce",
    [CR_WA_ASSUME_READY] = "assume-ready",
    [CR_WA_LATE_READY] = "late-ready",
    [CR_WA_FREEZE] = "freeze",
    [CR_WA_POLL_FROZEN] = "poll-frozen",
    [CR_WA_BECOME_SPARE] = "become-spare",
    [CR_WA_PROMOTE] = "promote",
    [CR_WA_KILL_SPARE] = "kill-spare",
    [CR_WA_HAND_OVER] = "hand-over",
    [CR_WA_AWAIT_REAP] = "await-reap",
    [CR_WA_KILL_DYING] = "kill-dying",
    [CR_WA_NOTE_EXEC_FAILED] = "note-exec-failed",
    [CR_WA_EXEC_OK] = "exec-ok",
    [CR_WA_KILL_UNEXECUTED] = "kill-unexecuted",
    [CR_WA_QUEUE_RECYCLE] = "queue-recycle",
    [CR_WA_RESTART_IN_PLACE] = "restart-in-place",
    [CR_WA_START_REPLACEMENT] = "start-replacement",
    [CR_WA_DECIDE] = "decide",
    [CR_WA_PASS_SLOT] = "pass-slot",
    [CR_WA_REPLACEMENT_FAILED] = "replacement-failed",
    [CR_WA_SPARE_FAILED] = "spare-failed",
};

/* The roles: what each is called, what its reap leads to, whether its
 * death is its slot's. */
static const struct {
    const char *name;
    enum cr_wevent exit;
    bool holds;
} roles[_CR_ROLE_MAX] = {
    [CR_ROLE_HOLDER] = {"holder", CR_WE_DIED, true},
    [CR_ROLE_REPLACED] = {"replaced", CR_WE_REPLACED_DIED, true},
    [CR_ROLE_REPLACEMENT] = {"replacement", CR_WE_REPLACEMENT_DIED, false},
    [CR_ROLE_SPARE] = {"spare", CR_WE_SPARE_DIED, false},
    [CR_ROLE_HANDED_OVER] = {"handed-over", CR_WE_RETIRE, true},
    [CR_ROLE_RETIRING] = {"retiring", CR_WE_RETIRE, false},
};

enum cr_wevent cr_role_exit_event(enum cr_role r)
{
    return (unsigned)r < _CR_ROLE_MAX ? roles[r].exit : CR_WE_RETIRE;
}

bool cr_role_holds_slot(enum cr_role r)
{
    return (unsigned)r < _CR_ROLE_MAX && roles[r].holds;
}

bool cr_lifecycle_recyclable(enum cr_wstate s, enum cr_role r, enum cr_intent i)
{
    return r == CR_ROLE_HOLDER && i == CR_INTENT_NONE && cr_lifecycle_step(s, CR_WE_RECYCLE);
}

static const char *const intent_names[_CR_INTENT_MAX] = {
    [CR_INTENT_NONE] = "none",
    [CR_INTENT_RECYCLE] = "recycle",
    [CR_INTENT_DRAIN] = "drain",
};

static const char *const readiness_names[_CR_READINESS_MAX] = {
    [CR_READINESS_BY_MODE] = "by-mode",
    [CR_READINESS_ANNOUNCED] = "announced",
    [CR_READINESS_ASSUMED] = "assumed",
};

const char *cr_role_to_string(enum cr_role r)
{
    return (unsigned)r < _CR_ROLE_MAX ? roles[r].name : "?";
}

const char *cr_intent_to_string(enum cr_intent i)
{
    return (unsigned)i < _CR_INTENT_MAX ? intent_names[i] : "?";
}

const char *cr_readiness_to_string(enum cr_readiness r)
{
    return (unsigned)r < _CR_READINESS_MAX ? readiness_names[r] : "?";
}

const char *cr_wstate_to_string(enum cr_wstate s)
{
    return (unsigned)s < _CR_WS_MAX && states[s].name ? states[s].name : "?";
}

const char *cr_wevent_to_string(enum cr_wevent e)
{
    return (unsigned)e < _CR_WE_MAX && event_names[e] ? event_names[e] : "?";
}

const char *cr_waction_to_string(enum cr_waction a)
{
    return (unsigned)a < _CR_WA_MAX && action_names[a] ? action_names[a] : "?";
}

uint64_t cr_backoff_delay(const struct cr_restart_policy *p, unsigned n)
{
    /* A lone death costs no capacity time: the first restart is at once.
     * Only a worker that dies again before it ran stably backs off. */
    if (n <= 1)
        return 0;
    uint64_t d = p->backoff_initial_ms;
    for (unsigned i = 2; i < n && d < p->backoff_max_ms; i++)
        d *= 2;
    return d < p->backoff_max_ms ? d : p->backoff_max_ms;
}

/* Deaths older than the window fall out of the ring. */
static unsigned deaths_in_window(struct cr_restart_state *st, uint64_t now_ms, uint64_t window)
{
    unsigned n = 0;
    for (size_t i = 0; i < st->ring.len; i++) {
        uint64_t t = st->deaths[cr_ring_newest(&st->ring, CR_RING_CAP(st->deaths), i)];
        if (now_ms - t <= window)
            n++;
    }
    return n;
}

uint64_t cr_failed_retry_delay(const struct cr_restart_policy *p, unsigned n)
{
    uint64_t cap = p->failed_retry_ms;
    uint64_t d = CR_FAILED_RETRY_INITIAL_MS < cap ? CR_FAILED_RETRY_INITIAL_MS : cap;
    for (unsigned i = 1; i < n && d < cap; i++)
        d *= 2;
    return d < cap ? d : cap;
}

struct cr_restart_decision cr_restart_fail(const struct cr_restart_policy *p,
                                           struct cr_restart_state *st, bool crash_loop)
{
    if (st->failed_streak < UINT32_MAX)
        st->failed_streak++;
    return (struct cr_restart_decision){.event = CR_WE_BUDGET_SPENT,
                                        .delay_ms = cr_failed_retry_delay(p, st->failed_streak),
                                        .crash_loop = crash_loop};
}

struct cr_restart_decision cr_restart_decide(const struct cr_restart_policy *p,
                                             struct cr_restart_state *st, uint64_t now_ms,
                                             const struct cr_life *life)
{
    if (life->planned)
        return (struct cr_restart_decision){.event = CR_WE_RESTART, .delay_ms = 0};
    if (life->ready && life->served_ms >= p->min_uptime_ms) {
        /* It served: whatever killed it (OOM, an outside signal, a hang
         * kill) is not a crash loop. Replace it at once; start over. */
        st->consecutive = 0;
        st->failed_streak = 0;
        return (struct cr_restart_decision){.event = CR_WE_REPLACE, .delay_ms = 0};
    }

    if (life->uptime_ms >= p->backoff_reset_ms)
        st->consecutive = 0;
    st->consecutive++;
    st->deaths[cr_ring_push(&st->ring, CR_RING_CAP(st->deaths))] = now_ms;

    unsigned budget = p->budget < CR_RESTART_MAX_BUDGET ? p->budget : CR_RESTART_MAX_BUDGET;
    if (deaths_in_window(st, now_ms, p->window_ms) > budget)
        return cr_restart_fail(p, st, true);
    return (struct cr_restart_decision){.event = CR_WE_RESTART,
                                        .delay_ms = cr_backoff_delay(p, st->consecutive)};
}
