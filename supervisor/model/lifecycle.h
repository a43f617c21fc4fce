/* cr_lifecycle: the worker lifecycle as an explicit state × event table,
 * s6-style. Each cell names the next state and one small action that the
 * supervisor performs (supervisor.c); an empty cell means the event is
 * ignored in that state. Every worker has exactly one deadline, so a
 * timeout is just the DEADLINE event, and its meaning comes from the state
 * it fires in (the `deadline` column of the state list).
 *
 * The table is the law: a worker's state changes only by a cell. Where the
 * supervisor has to decide something (the restart policy after a death, a
 * fork that failed), the action returns a follow-up event and the table
 * says where that leads: an action never assigns a state.
 *
 * Pure: no I/O. tests/unit/core/test_lifecycle.c checks invariants over
 * the whole table (see there), so a new cell cannot quietly break them.
 *
 * Adding a state (a frozen warm spare, say):
 *   1. add CR_WS_<NAME> before _CR_WS_MAX;
 *   2. add its row to the state list in lifecycle.c: name, whether a
 *      process exists in it, what its deadline means;
 *   3. add its row to the table: an EXIT cell (→ exited: reap) if it owns
 *      a process, and a deadline or an event that leaves it;
 *   4. add the events that enter and leave it (CR_WE_<NAME> before
 *      _CR_WE_MAX, with a name) and any new action (CR_WA_<NAME>, a name,
 *      and its function in core/supervisor.c's action list).
 * The invariant tests then say what is missing; a missing action function
 * fails unit-actions, which links the real list (cr_worker_actions,
 * core/supervisor_int.h).
 *
 * Readiness modes (--ready) are cells too. In `starting` the deadline is
 * either the start timeout (readiness is announced: notify mode, or auto
 * mode once the worker said anything) or the moment readiness is assumed
 * (exec: at once; delay:D; auto: the silence grace). The deadline's action
 * tells which and answers START_TIMEOUT or ASSUME_READY; the first message
 * of an auto worker is the SPOKE event. The crash-loop policy answers a
 * death with RESTART (counted), REPLACE (the worker had served: not
 * counted, at once) or BUDGET_SPENT.
 *
 * Beside its state, a worker has three typed sub-states the cells and
 * actions read (never a flag): its role towards its slot (enum cr_role:
 * whether its death is the slot's, and what follows it), corrald's intent
 * for it (enum cr_intent: a recycle or a drain queued), and how its
 * readiness is known (enum cr_readiness). What follows a reaped process is
 * its role's exit event (cr_role_exit_event), answered by a cell of
 * `exited`; whether a worker may be recycled now is answered by its state's
 * RECYCLE cell, its role and its intent (cr_lifecycle_recyclable).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "ring.h"

enum cr_wstate {
    CR_WS_NEW,      /* created, nothing spawned yet (within one call: start or retire) */
    CR_WS_PENDING,  /* queued for a spawn turn: spawns are paced, one per loop turn */
    CR_WS_STARTING, /* forked, exec'd, not ready yet; deadline = start timeout, or the
                       moment its readiness mode assumes it ready */
    CR_WS_READY,    /* serving; deadline = watchdog silence */
    CR_WS_BLOCKED,  /* serving but silent past the watchdog; deadline = hang kill */
    CR_WS_DRAINING, /* SIGTERM sent; deadline = stop timeout */
    CR_WS_TRACING,  /* hung past the hang timeout: its stack asked for before the kill;
                       deadline = the stack's budget (--stack-timeout) */
    CR_WS_KILLING,  /* SIGABRT sent for a hang; deadline = SIGKILL */
    CR_WS_EXITED,   /* reaped or never started; the restart policy picks what follows */
    CR_WS_BACKOFF,  /* waiting to restart; deadline = restart time */
    CR_WS_FAILED,   /* restart budget spent; deadline = slow retry */
    CR_WS_GONE,     /* retired: unlinked, freed once its timer closed (terminal) */
    CR_WS_SPARE_STARTING, /* a warm spare, forked, waiting for READY=1; deadline = start timeout */
    CR_WS_FREEZING, /* a ready spare being frozen; deadline = the next look at the freezer */
    CR_WS_SPARE,    /* a frozen warm spare: holds the socket, never runs, not capacity */
    CR_WS_DYING,    /* the kernel said it is exiting and a spare took its slot; its memory
                       is still being freed; deadline = stop timeout, then SIGKILL */
    CR_WS_EXEC_FAILED, /* the child could not become the worker program (exec, its cgroup,
                          corral-exec); it is exiting; deadline = start timeout, SIGKILL */
    _CR_WS_MAX,
};

enum cr_wevent {
    CR_WE_READY,        /* READY=1 received */
    CR_WE_WATCHDOG,     /* WATCHDOG=1 (or any report) received */
    CR_WE_DEADLINE,     /* the worker's deadline passed */
    CR_WE_DRAIN,        /* stop, recycle or scale-down asked for this worker */
    CR_WE_EXIT,         /* the process was reaped */
    CR_WE_START,        /* a new worker is wanted (scale-up, start-up, replacement) */
    CR_WE_SPAWN_TURN,   /* the spawn pacer gives a pending worker its turn */
    CR_WE_SPAWN_FAILED, /* fork, cgroup or descriptors failed: no process exists */
    CR_WE_RESTART,      /* the restart policy: start again after its delay */
    CR_WE_BUDGET_SPENT, /* the restart policy: more deaths than the budget allows, or a
                           death no retry can fix (exec failure) */
    CR_WE_RETIRE,       /* nothing follows: stopping, scaled down, handed over */
    CR_WE_SPOKE,        /* the first message of a worker whose readiness mode waits to see
                           whether it speaks the protocol (auto) */
    CR_WE_START_TIMEOUT,  /* the starting deadline, where readiness is announced */
    CR_WE_ASSUME_READY,   /* the starting deadline, where the mode assumes readiness */
    CR_WE_REPLACE,      /* the restart policy: the worker had served; at once, not counted */
    CR_WE_START_SPARE,  /* spawn a new warm spare now */
    CR_WE_FROZEN,       /* the freezer says the spare is frozen */
    CR_WE_PROMOTE,      /* a slot's worker died: this spare takes its slot */
    CR_WE_EXIT_NOTICE,  /* the kernel says the process is exiting (taskstats), not reaped yet */
    CR_WE_HANDED_OVER,  /* its slot went to a spare before the reap */
    CR_WE_EXEC_FAILED,  /* the exec pipe says the program never ran */
    CR_WE_EXEC_OK,      /* the exec pipe says the program runs (--ready exec: it is ready) */
    CR_WE_RECYCLE,      /* a rolling replacement is asked for (queued if the state allows) */
    CR_WE_RESTART_IN_PLACE, /* the recycle pump: a queued worker not ready yet restarts */
    CR_WE_REPLACE_TURN, /* the recycle pump: a queued serving worker's replacement starts */
    CR_WE_DIED,         /* reaped, and its slot's worker: the restart policy decides */
    CR_WE_REPLACED_DIED, /* reaped while its replacement was starting: that one takes the slot */
    CR_WE_REPLACEMENT_DIED, /* a replacement reaped (or not spawned) before it was ready */
    CR_WE_SPARE_DIED,   /* a spare reaped (or not spawned) on its own */
    CR_WE_STACK,        /* the stack asked for before a hang kill came, or none will */
    _CR_WE_MAX,
};

enum cr_waction {
    CR_WA_NONE,
    CR_WA_BECOME_READY,       /* count it ready; arm the watchdog deadline */
    CR_WA_ARM_WATCHDOG,       /* heartbeat: push the watchdog deadline on */
    CR_WA_FLAG_BLOCKED,       /* log "blocked"; arm the hang deadline */
    CR_WA_UNBLOCK,            /* log "unblocked"; arm the watchdog deadline */
    CR_WA_KILL_START_TIMEOUT, /* SIGKILL, ledger: start-timeout */
    CR_WA_ASK_STACK,          /* ask a hung worker for its stack, under --stack-timeout;
                                 → STACK at once when it cannot answer */
    CR_WA_KILL_HANG,          /* SIGABRT (for a core), ledger: hang; arm SIGKILL deadline */
    CR_WA_KILL_HARD,          /* SIGKILL after the hang's SIGABRT was ignored */
    CR_WA_SEND_TERM,          /* SIGTERM; arm the stop-timeout deadline */
    CR_WA_KILL_STOP_TIMEOUT,  /* SIGKILL, ledger: stop-timeout */
    CR_WA_REAP,               /* classify, record; → its role's exit event */
    CR_WA_QUEUE,              /* queue for the spawn pacer (one spawn per loop turn) */
    CR_WA_SPAWN,              /* fork + exec a new generation; → SPAWN_FAILED on failure */
    CR_WA_SPAWN_FAILED,       /* no process: → its role's exit event, with no life */
    CR_WA_ARM_RESTART,        /* arm the restart deadline the policy chose */
    CR_WA_MARK_FAILED,        /* log and report "failed"; arm the slow-retry deadline */
    CR_WA_REMOVE,             /* unlink and free a worker without process */
    CR_WA_STARTING_DEADLINE,  /* → START_TIMEOUT if readiness is announced, else ASSUME_READY */
    CR_WA_ANNOUNCE,           /* it speaks: wait for READY=1, under the start timeout */
    CR_WA_ASSUME_READY,       /* ready by its mode, not by READY=1 (`unannounced`) */
    CR_WA_LATE_READY,         /* READY=1 after readiness was assumed: announced after all */
    CR_WA_FREEZE,             /* freeze the ready spare; → FROZEN, or arm a look at the freezer */
    CR_WA_POLL_FROZEN,        /* look at the freezer again; → FROZEN, or SIGKILL if it never does */
    CR_WA_BECOME_SPARE,       /* log and report "spare" */
    CR_WA_PROMOTE,            /* thaw; the spare serves its new slot at once */
    CR_WA_KILL_SPARE,         /* SIGKILL, then thaw (a frozen task dies only once thawed) */
    CR_WA_HAND_OVER,          /* ask the restart policy now; a spare takes the slot → HANDED_OVER */
    CR_WA_AWAIT_REAP,         /* log the hand-over; arm the stop-timeout deadline */
    CR_WA_KILL_DYING,         /* SIGKILL: announced dead, still not reaped */
    CR_WA_NOTE_EXEC_FAILED,   /* arm the SIGKILL deadline of a child that does not exit */
    CR_WA_EXEC_OK,            /* → ASSUME_READY under --ready exec, else nothing */
    CR_WA_KILL_UNEXECUTED,    /* SIGKILL: its exec failed and it did not exit */
    CR_WA_QUEUE_RECYCLE,      /* queue a rolling replacement (intent recycle) and pump */
    CR_WA_RESTART_IN_PLACE,   /* a planned drain of a worker that never served: → DRAIN */
    CR_WA_START_REPLACEMENT,  /* start the replacement that takes the slot once ready */
    CR_WA_DECIDE,             /* the restart policy on the slot's death; → RESTART, REPLACE or
                                 BUDGET_SPENT */
    CR_WA_PASS_SLOT,          /* the starting replacement becomes the slot's worker; → RETIRE */
    CR_WA_REPLACEMENT_FAILED, /* the old worker keeps the slot, its next recycle waits; → RETIRE */
    CR_WA_SPARE_FAILED,       /* the next spare waits like a restart after a crash; → RETIRE */
    _CR_WA_MAX,
};

struct cr_transition {
    enum cr_wstate next;
    enum cr_waction action;
};

/* The cell for (state, event), or NULL when the event means nothing there. */
const struct cr_transition *cr_lifecycle_step(enum cr_wstate s, enum cr_wevent e);

/* A worker's role towards its slot. The slot (model/slot.h) owns what
 * outlives a process; the role says whether this process's death is the
 * slot's (recorded in its last death and counters) and which exit event
 * follows its reap. */
enum cr_role {
    CR_ROLE_HOLDER,      /* the slot's worker: serves it, restarts in it */
    CR_ROLE_REPLACED,    /* the slot's worker while its replacement starts */
    CR_ROLE_REPLACEMENT, /* starting for the slot's worker; takes the slot once ready */
    CR_ROLE_SPARE,       /* a warm spare: no slot until a promotion gives it one */
    CR_ROLE_HANDED_OVER, /* dying: its slot went to an heir before the reap; the death is
                            still the slot's */
    CR_ROLE_RETIRING,    /* goes for good (stop, scale-down, replaced): its death is not
                            the slot's */
    _CR_ROLE_MAX,
};

/* What corrald means to do to a worker next. */
enum cr_intent {
    CR_INTENT_NONE,
    CR_INTENT_RECYCLE, /* a rolling replacement is queued (the recycle pump starts it) */
    CR_INTENT_DRAIN,   /* retiring; its SIGTERM waits for the drain pacer */
    _CR_INTENT_MAX,
};

/* How a worker's readiness is known (--ready; docs/worker-protocol.md). */
enum cr_readiness {
    CR_READINESS_BY_MODE,   /* its mode assumes it at the starting deadline (exec, delay, or
                               auto while it has not spoken) */
    CR_READINESS_ANNOUNCED, /* by READY=1, under the start timeout (notify, or auto once it
                               spoke, or READY=1 after readiness was assumed) */
    CR_READINESS_ASSUMED,   /* ready by its mode without READY=1 (shown "unannounced") */
    _CR_READINESS_MAX,
};

/* The event that follows the reap of a process in role r (or a spawn that
 * made none): DIED for the slot's worker, REPLACED_DIED, REPLACEMENT_DIED,
 * SPARE_DIED, or RETIRE for a worker whose death decides nothing. */
enum cr_wevent cr_role_exit_event(enum cr_role r);
/* True when a worker in role r records its death in its slot. */
bool cr_role_holds_slot(enum cr_role r);
/* True when a recycle asked of a worker in (s, r, i) is taken: its state
 * has a RECYCLE cell, it is the slot's worker and nothing is queued. */
bool cr_lifecycle_recyclable(enum cr_wstate s, enum cr_role r, enum cr_intent i);

/* True while a process exists for the worker. */
bool cr_wstate_has_process(enum cr_wstate s);
/* True for the states a spawn may lead to (a worker or a spare starting). */
bool cr_wstate_spawned(enum cr_wstate s);
/* True for the states of a warm spare (not capacity, not sampled). */
bool cr_wstate_spare(enum cr_wstate s);
/* True for the states whose process the memory watch samples: it runs the
 * worker program (not a spare, not a process whose exec failed). */
bool cr_wstate_sampled(enum cr_wstate s);
/* True for the states whose process may accept connections: starting
 * (a program may accept before READY=1), ready, blocked and tracing (busy,
 * its queue waits for it; it may beat again). Not a spare (frozen, refused with reuseport), nor a
 * process corrald has told to go (draining, killing, dying) or whose exec
 * failed. With --balance reuseport corrald holds a copy of the worker's
 * own listening socket in these states only (generation/wio.h). */
bool cr_wstate_accepts(enum cr_wstate s);
/* True for the state nothing leaves (a retired worker). */
bool cr_wstate_terminal(enum cr_wstate s);
/* True for states no one outside the table can observe a worker in: a
 * worker passes through them inside one call (not listed in metrics). */
bool cr_wstate_unseen(enum cr_wstate s);
/* What the worker's one deadline means in state s, or NULL when it has none. */
const char *cr_wstate_deadline(enum cr_wstate s);

const char *cr_wstate_to_string(enum cr_wstate s);
const char *cr_wevent_to_string(enum cr_wevent e);
const char *cr_waction_to_string(enum cr_waction a);
const char *cr_role_to_string(enum cr_role r);
const char *cr_intent_to_string(enum cr_intent i);
const char *cr_readiness_to_string(enum cr_readiness r);

/* Restart policy — pure arithmetic over a worker's death record. */
struct cr_restart_policy {
    uint64_t backoff_initial_ms;
    uint64_t backoff_max_ms;
    uint64_t backoff_reset_ms; /* uptime that counts as stable */
    unsigned budget;           /* more than `budget` unplanned deaths ... */
    uint64_t window_ms;        /* ... within this window → failed */
    uint64_t failed_retry_ms;  /* the cap of a failed worker's retry backoff */
    uint64_t min_uptime_ms;    /* a death this long after ready is not counted */
};

#define CR_RESTART_MAX_BUDGET 64
/* A failed worker is retried after this, doubling to failed_retry_ms. */
#define CR_FAILED_RETRY_INITIAL_MS 2000

struct cr_restart_state {
    unsigned consecutive;                       /* unplanned deaths since the last stable run */
    unsigned failed_streak;                     /* budget-spent decisions since it last served */
    uint64_t deaths[CR_RESTART_MAX_BUDGET + 1]; /* times of recent unplanned deaths ... */
    struct cr_ring ring;                        /* ... and which of them are in use */
};

struct cr_restart_decision {
    enum cr_wevent event; /* CR_WE_RESTART, CR_WE_REPLACE or CR_WE_BUDGET_SPENT */
    uint64_t delay_ms;    /* time until the next start */
    bool crash_loop;      /* the budget was just exceeded */
};

/* The delay before the n-th (1-based) consecutive restart: 0 for the first
 * (a lone death restarts at once), then initial · 2^(n-2), capped. */
uint64_t cr_backoff_delay(const struct cr_restart_policy *p, unsigned n);

/* What the policy knows of one life. */
struct cr_life {
    uint64_t uptime_ms; /* spawn to death */
    bool ready;         /* it became ready (announced or assumed) */
    uint64_t served_ms; /* ready to death */
    bool planned;       /* corrald retired it on purpose (recycle, stop) */
};

/* Records a death at now_ms and decides what follows:
 *  - planned: RESTART at once, not counted;
 *  - unplanned after serving at least min_uptime_ms: REPLACE at once, not
 *    counted, and the backoff and the failed streak start over (an OOM or
 *    an outside kill of a worker that served is bad luck, not a loop);
 *  - otherwise (before ready, or soon after): counted; a stable run
 *    (uptime >= backoff_reset_ms) resets the backoff first; more than
 *    `budget` counted deaths in the window is BUDGET_SPENT, with the
 *    failed retry delay (cr_failed_retry_delay), else RESTART after the
 *    backoff. */
struct cr_restart_decision cr_restart_decide(const struct cr_restart_policy *p,
                                             struct cr_restart_state *st, uint64_t now_ms,
                                             const struct cr_life *life);

/* The BUDGET_SPENT decision for a death no fast retry can fix (an exec
 * failure), or the budget spent: the n-th failure in a row waits
 * CR_FAILED_RETRY_INITIAL_MS · 2^(n-1), capped at failed_retry_ms. */
struct cr_restart_decision cr_restart_fail(const struct cr_restart_policy *p,
                                           struct cr_restart_state *st, bool crash_loop);
uint64_t cr_failed_retry_delay(const struct cr_restart_policy *p, unsigned n);
