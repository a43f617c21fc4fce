/* The data of the supervisor core: the worker table and the supervisor
 * that owns it. The core's files (supervisor.c with death_path.c,
 * recycle.c, spares.c, trace.c and pacer.c, operations.c, view.c), the inputs that keep
 * per-worker readings (memwatch.c, worker_notify.c), the accept watch
 * (acceptwatch.c), the scaler (scaler.c) and main.c's wiring see inside; the outputs
 * read through view.h. scripts/include-graph holds that list.
 *
 * Types only: no functions live here (the include graph treats this file
 * as part of whoever includes it). Each part is written by one file, named
 * beside it; a worker's state only by cr_worker_event() (supervisor.c).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "acceptq.h"
#include "cgtree.h"
#include "config.h"
#include "death.h"
#include "events.h"
#include "freeze.h"
#include "gen.h"
#include "history.h"
#include "lifecycle.h"
#include "listen.h"
#include "notify_rx.h"
#include "reaper.h"
#include "self.h"
#include "slot.h"
#include "spawnway.h"

/* Why a retiring worker goes, for its SIGTERM (recycle.c). */
struct cr_drain {
    enum cr_kill_reason why;
    char text[192];
};

/* What the last death's post-mortem said, for the restart policy
 * (death_path.c). */
struct cr_death_brief {
    enum cr_death category;
    bool planned; /* corrald retired it on purpose (recycle, stop) */
    uint64_t uptime_ms;
};

struct cr_worker {
    struct cr_supervisor *sup;
    struct cr_worker *next;

    /* The lifecycle (supervisor.c): the state, the typed sub-states the
     * table reads (lifecycle.h), the one deadline. */
    enum cr_wstate state;
    enum cr_wstate prev; /* the state before the last transition (for events) */
    enum cr_role role;
    enum cr_intent intent;
    enum cr_readiness readiness;
    enum cr_ready_mode ready_mode; /* fixed for a generation at its spawn */
    uv_timer_t deadline;
    uint64_t deadline_at; /* loop ms, 0 = none */

    /* The slot it serves, or served on its way out; NULL for a spare not
     * promoted. The slot points back while it holds it (slot.h). */
    struct cr_slot *slot;

    uint64_t ready_at;       /* loop ms; 0 = not ready this generation */
    uint64_t handed_over_at; /* loop ms of the exit notice that gave its slot to an heir */
    struct cr_drain drain;   /* recycle.c */
    char recycle_text[192];  /* why the queued recycle was asked for (recycle.c) */
    struct cr_death_brief death;

    /* The process: everything of one generation (generation/gen.h). */
    struct cr_gen g;
};

/* The spawn pacer (pacer.c). */
struct cr_pacer {
    uv_idle_t turn;     /* runs while workers are pending: one spawn per loop turn */
    uv_timer_t recheck; /* pending, but --spawn-parallel workers are starting */
    unsigned cap;       /* starting at once, adapted to the loop's turns (spawncap.h) */
    unsigned calm;      /* short turns in a row */
    uint64_t turn_ns;   /* uv_hrtime of the last turn; 0 when it was stopped */
    uint64_t quiet_at;  /* loop ms when the last pending worker was spawned; 0 = busy */
};

/* Warm spares (spares.c): workers with no slot in the spare states. */
struct cr_spares {
    unsigned generation;             /* the last spare generation handed out (s<N>) */
    struct cr_restart_state restart; /* spares that died on their own, throttled */
    uint64_t not_before;             /* loop ms: no new spare before (a spare just died) */
    uv_timer_t timer;                /* starts the next spare once not_before passed */
    unsigned promotions;
    unsigned early_promotions; /* of them, on the kernel's exit notice (before the reap) */
};

/* Hung workers asked for their stacks (trace.c). */
struct cr_tracer {
    uv_timer_t poll; /* runs while a worker in `tracing` has not answered */
};

/* The deaths on record (death_path.c). */
struct cr_deaths {
    struct cr_history *history;
    unsigned by_category[_CR_DEATH_MAX];
};

/* Where corrald is in its life (operations.c). */
enum cr_phase {
    CR_PHASE_RUNNING,
    CR_PHASE_LAME_DUCK, /* stopping after --stop-delay: serving as when running, /readyz failing */
    CR_PHASE_STOPPING, /* every worker draining; corrald exits once the table is empty */
};

/* A reload: every worker queued for a rolling replacement (recycle.c). */
struct cr_reload {
    bool running;
    unsigned failed; /* replacements of the running reload that died before ready */
};

struct cr_supervisor {
    uv_loop_t *loop;
    struct cr_config cfg;
    uint64_t started_at; /* loop ms */
    uint64_t started_wall_ms;
    enum cr_phase phase;
    uv_timer_t stop_delay; /* the end of the lame duck (operations.c) */
    uint64_t drain_at;     /* loop ms when the lame duck's drain starts */
    char stop_reason[96];  /* what asked for the stop ("SIGTERM", "corralctl stop") */
    struct cr_reload reload;
    int exit_code;

    struct cr_worker *workers; /* by slot id, spares first, a replacement after its holder */
    struct cr_slots slots;
    unsigned target; /* the workers asked for (operations.c) */
    bool budget_over; /* the last memory budget check did not fit (operations.c) */

    struct cr_pacer pacer;
    uv_idle_t drain_turn; /* runs while retiring workers wait for their paced SIGTERM (recycle.c) */
    struct cr_spares spares;
    struct cr_tracer tracer;
    struct cr_deaths deaths;
    uv_timer_t finish_timer; /* exits the loop once stopping and empty */
    struct cr_events events; /* who hears about what happens (subscribed in main.c) */
    /* The accept queue's figures (inputs/acceptwatch.c; model/acceptq.h),
     * read by the views (cr_supervisor_accept_queue). */
    struct cr_acceptq_figures accept_queue;

    /* What the generations share, and the host facilities behind it. */
    struct cr_gen_host host;
    struct cr_listener listener;
    struct cr_cgtree cgtree;
    struct cr_spawner spawner;
    struct cr_reaper reaper;
    struct cr_notify_rx notify;
    struct cr_freezing freezing;
    struct cr_self self; /* corrald's own priority and limits (host/self.c) */
};

/* Loop milliseconds: the clock of deadlines and uptimes. */
static inline uint64_t cr_now_ms(const struct cr_supervisor *sup)
{
    return uv_now(sup->loop);
}

/* The slot id a worker serves (CR_SPARE_ID for a spare). */
static inline int cr_worker_id(const struct cr_worker *w)
{
    return w->g.id;
}
