/* cr_supervisor: the core of corrald — the worker table and the lifecycle
 * table's actions, reaping, the restart policy and rolling replacement.
 *
 * Dependencies point one way. The core publishes events (events.h) and
 * knows nothing of systemd, the control socket, metrics or the journal;
 * the inputs (worker notify messages, memory samples, control commands,
 * signals) call down into it through this header and operations.h. The
 * struct layouts are in internal.h, which the outputs never include: they
 * read through view.h.
 *
 * One struct cr_supervisor per corrald; workers hang off it (no globals).
 * Single-threaded: everything runs on the supervisor's libuv loop.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "death.h"
#include "events.h"
#include "lifecycle.h"

struct cr_supervisor;
struct cr_worker;
struct cr_gen;
struct cr_taskstats_exit;

/* ---- the lifecycle ------------------------------------------------------- */

/* A lifecycle event for one worker: looks up the table and runs the action
 * (and the events actions answer). True when a cell took the event. */
bool cr_worker_event(struct cr_worker *w, enum cr_wevent e);
/* The worker a generation belongs to. */
struct cr_worker *cr_worker_of(struct cr_gen *g);

/* What a generation's descriptors deliver (the sink main.c installs): the
 * process was reaped (EXIT), the kernel says it is exiting (EXIT_NOTICE);
 * the exec pipe's word is cr_worker_event(EXEC_OK or EXEC_FAILED). */
void cr_worker_reaped(struct cr_worker *w);
void cr_worker_exit_notice(struct cr_worker *w);
/* The kernel's word that a process exited (taskstats): the worker whose
 * process it was, if any, hears it. */
void cr_supervisor_exit_notice(struct cr_supervisor *sup, const struct cr_taskstats_exit *e);
/* SIGCHLD: reap what exited (corrald is a child subreaper). */
void cr_supervisor_reap(struct cr_supervisor *sup);

/* Queues a rolling replacement of w (memory soft limit, request cap,
 * lifetime, reload, restart) when the table allows it now
 * (cr_lifecycle_recyclable, and not before its slot's recycle_after). */
void cr_worker_recycle(struct cr_worker *w, const char *why);

/* Asks a worker to go away for good (stop, scale-down, replaced): it
 * retires now (its death is no longer its slot's). */
void cr_worker_drain(struct cr_worker *w, enum cr_kill_reason why, const char *text);
/* The same for many at once (a stop, a scale-down): w retires now, and its
 * SIGTERM is sent from a later loop turn, at most 4 a turn. A worker
 * without a process goes at once. */
void cr_worker_drain_paced(struct cr_worker *w, enum cr_kill_reason why, const char *text);

/* The stack of a worker's main thread on demand (`corralctl stack`), by
 * its page's exchange: request 0 asks anew (state ASKED, with the
 * request's number, or UNSUPPORTED with why), n looks for the answer to n
 * (PENDING, or READY with the text, which the caller frees). A held
 * answer (inputs/control.c) calls it again every 5 ms: PENDING copies
 * nothing. -ENOENT, -ESRCH; -EINVAL: n was never asked; -ESTALE: n was
 * asked of an earlier process of this worker. */
enum cr_stack_state { CR_STACK_UNSUPPORTED, CR_STACK_ASKED, CR_STACK_PENDING, CR_STACK_READY };
struct cr_stack_reply {
    enum cr_stack_state phase;
    uint32_t request;
    const char *why; /* UNSUPPORTED */
    char source[40]; /* READY */
    char *text;      /* READY */
};
int cr_supervisor_stack(struct cr_supervisor *sup, int id, uint32_t request,
                        struct cr_stack_reply *ret);

/* Sends sig through the worker's pidfd and notes it in the death ledger. */
void cr_worker_signal(struct cr_worker *w, int sig, enum cr_kill_reason why, const char *text);

/* ---- for operations.c: the table's bookkeeping ---------------------------- */

/* A new process-less worker holding slot id (opened, or reopened afresh),
 * linked into the table; NULL: no memory, or the slot is held. */
struct cr_worker *cr_worker_new(struct cr_supervisor *sup, int id);
/* The one deadline of a worker, `ms` from now. A zero delay still goes
 * through the loop, so an action never recurses into the table. */
void cr_worker_set_deadline(struct cr_worker *w, uint64_t ms);
/* The START event: queues the first generation of a new worker. */
void cr_worker_start(struct cr_worker *w);
/* A reload begins: its replacements are counted until none is pending. */
void cr_recycle_reload_start(struct cr_supervisor *sup);
/* Starts queued replacements up to --recycle-parallel; ends a reload. */
void cr_supervisor_pump_recycles(struct cr_supervisor *sup);
/* Starts warm spares up to --spares (throttled after spares died on their
 * own), or drains the newest past it; nothing while stopping. */
void cr_supervisor_pump_spares(struct cr_supervisor *sup);
/* Spawns are under way (pending, or capped): the notify socket reads every
 * message at once meanwhile. sup is a struct cr_supervisor. */
bool cr_supervisor_spawning(void *sup);
/* The handles of the core's own files (the finish timer, the drain and
 * spawn pacers, the spare timer), on sup->loop; closed when it finishes. */
void cr_supervisor_init_handles(struct cr_supervisor *sup);
/* Once stopping and empty, closes the core and publishes CR_EV_FINISHED
 * from the next loop turn. */
void cr_supervisor_maybe_finish(struct cr_supervisor *sup);

/* ---- events --------------------------------------------------------------- */

/* Adds a subscriber to everything the core publishes (main.c, at start-up). */
int cr_supervisor_subscribe(struct cr_supervisor *sup, cr_event_fn fn, void *userdata);
/* Stamps ev with the wall clock (when unset) and publishes it. */
void cr_supervisor_publish(struct cr_supervisor *sup, struct cr_event *ev);
/* Publishes CR_EV_TABLE: readiness or the counts may have changed. */
void cr_supervisor_table_changed(struct cr_supervisor *sup);

/* ---- lookup ------------------------------------------------------------- */

/* The worker serving slot id (its holder, not a replacement starting for
 * it), or NULL. */
struct cr_worker *cr_supervisor_worker(struct cr_supervisor *sup, int id);
