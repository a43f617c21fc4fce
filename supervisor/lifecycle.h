/* cr_lifecycle: the worker lifecycle as an explicit state × event table,
 * s6-style. Each cell names the next state and one small action that the
 * supervisor performs; an empty cell means the event is ignored in that
 * state. Every worker has exactly one deadline, so a timeout is just the
 * DEADLINE event, and its meaning comes from the state it fires in.
 *
 * Pure: no I/O. The supervisor owns the actions (supervisor.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "ring.h"

enum cr_wstate {
    CR_WS_STARTING, /* forked, exec'd, waiting for READY=1; deadline = start timeout */
    CR_WS_READY,    /* serving; deadline = watchdog silence */
    CR_WS_BLOCKED,  /* serving but silent past the watchdog; deadline = hang kill */
    CR_WS_DRAINING, /* SIGTERM sent; deadline = stop timeout */
    CR_WS_KILLING,  /* SIGABRT sent for a hang; deadline = SIGKILL */
    CR_WS_EXITED,   /* reaped; the restart policy picks what follows */
    CR_WS_BACKOFF,  /* waiting to restart; deadline = restart time */
    CR_WS_FAILED,   /* crash loop; deadline = slow retry */
    _CR_WS_MAX,
};

enum cr_wevent {
    CR_WE_READY,    /* READY=1 received */
    CR_WE_WATCHDOG, /* WATCHDOG=1 (or any report) received */
    CR_WE_DEADLINE, /* the worker's deadline passed */
    CR_WE_DRAIN,    /* stop, recycle or scale-down asked for this worker */
    CR_WE_EXIT,     /* the process was reaped */
    _CR_WE_MAX,
};

enum cr_waction {
    CR_WA_NONE,
    CR_WA_BECOME_READY,       /* count it ready; arm the watchdog deadline */
    CR_WA_ARM_WATCHDOG,       /* heartbeat: push the watchdog deadline on */
    CR_WA_FLAG_BLOCKED,       /* log "blocked"; arm the hang deadline */
    CR_WA_UNBLOCK,            /* log "unblocked"; arm the watchdog deadline */
    CR_WA_KILL_START_TIMEOUT, /* SIGKILL, ledger: start-timeout */
    CR_WA_KILL_HANG,          /* SIGABRT (for a core), ledger: hang; arm SIGKILL deadline */
    CR_WA_KILL_HARD,          /* SIGKILL after the hang's SIGABRT was ignored */
    CR_WA_SEND_TERM,          /* SIGTERM; arm the stop-timeout deadline */
    CR_WA_KILL_STOP_TIMEOUT,  /* SIGKILL, ledger: stop-timeout */
    CR_WA_REAP,               /* classify, record, apply the restart policy */
    CR_WA_SPAWN,              /* fork + exec a new generation */
    CR_WA_RETIRE,             /* drop a worker that has no process (backoff/failed) */
    _CR_WA_MAX,
};

struct cr_transition {
    enum cr_wstate next;
    enum cr_waction action;
};

/* The cell for (state, event), or NULL when the event means nothing there. */
const struct cr_transition *cr_lifecycle_step(enum cr_wstate s, enum cr_wevent e);

/* True while a process exists for the worker. */
bool cr_wstate_has_process(enum cr_wstate s);

const char *cr_wstate_to_string(enum cr_wstate s);
const char *cr_wevent_to_string(enum cr_wevent e);
const char *cr_waction_to_string(enum cr_waction a);

/* Restart policy — pure arithmetic over a worker's death record. */
struct cr_restart_policy {
    uint64_t backoff_initial_ms;
    uint64_t backoff_max_ms;
    uint64_t backoff_reset_ms; /* uptime that counts as stable */
    unsigned budget;           /* more than `budget` unplanned deaths ... */
    uint64_t window_ms;        /* ... within this window → failed */
    uint64_t failed_retry_ms;
};

#define CR_RESTART_MAX_BUDGET 64

struct cr_restart_state {
    unsigned consecutive;                       /* unplanned deaths since the last stable run */
    uint64_t deaths[CR_RESTART_MAX_BUDGET + 1]; /* times of recent unplanned deaths ... */
    struct cr_ring ring;                        /* ... and which of them are in use */
};

struct cr_restart_decision {
    enum cr_wstate next;  /* CR_WS_BACKOFF or CR_WS_FAILED */
    uint64_t delay_ms;    /* time until the next start */
    bool crash_loop;      /* the budget was just exceeded */
};

/* The delay before the n-th (1-based) consecutive restart: 0 for the first
 * (a lone death restarts at once), then initial · 2^(n-2), capped. */
uint64_t cr_backoff_delay(const struct cr_restart_policy *p, unsigned n);

/* Records a death at now_ms after uptime_ms of life and decides what
 * follows. Planned deaths (recycles, stops) restart at once and never count
 * against the budget; a stable run (uptime ≥ backoff_reset_ms) resets the
 * backoff before this death is counted. */
struct cr_restart_decision cr_restart_decide(const struct cr_restart_policy *p,
                                             struct cr_restart_state *st, uint64_t now_ms,
                                             uint64_t uptime_ms, bool planned);
