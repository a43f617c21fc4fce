/* The supervisor core's own seams: what supervisor.c, the lifecycle table's
 * driver, shares with the files that carry the rest of the core (recycle.c,
 * spares.c, pacer.c). One module with supervisor.h: nothing else includes
 * this file (scripts/include-graph checks it), and none of these functions
 * assigns a state — cr_worker_event() alone does. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "events.h"
#include "lifecycle.h"

struct cr_supervisor;
struct cr_worker;

/* An action's answer when no decision follows. */
#define NOTHING _CR_WE_MAX

/* ---- supervisor.c: the table's bookkeeping ------------------------------- */

/* Stops the worker's one deadline. */
void cr_worker_clear_deadline(struct cr_worker *w);
/* Links w into sup's list, ordered by id, after the workers of its slot. */
void cr_worker_link(struct cr_supervisor *sup, struct cr_worker *w);
/* Takes w out of its supervisor's list (it is not freed). */
void cr_worker_unlink(struct cr_worker *w);
/* Publishes a state change under the control protocol's name for it. */
void cr_worker_publish_state(struct cr_worker *w, const char *name, const char *reason);
/* The watchdog deadline when the worker sends heartbeats, else none. */
void cr_worker_arm_watchdog(struct cr_worker *w);
/* The restart policy the configuration asks for. */
struct cr_restart_policy cr_supervisor_restart_policy(const struct cr_supervisor *sup);
/* An event about w, stamped with its id, pid, generation and last
 * transition; the caller adds the rest and publishes it. */
struct cr_event cr_worker_stamp(const struct cr_worker *w, enum cr_event_type type);

/* ---- recycle.c: rolling replacement -------------------------------------- */

/* A replacement died (or could not be spawned) before it was ready: the old
 * worker keeps serving and is not recycled again before the restart policy's
 * delay; counted against a running reload. */
void cr_recycle_failed(struct cr_worker *r, uint64_t now, uint64_t uptime);

/* ---- spares.c: warm spares ----------------------------------------------- */

/* Hands the slot of a dead worker that will be restarted to the first
 * frozen spare, which is thawed at once. False when no spare is frozen. */
bool cr_spare_promote(struct cr_worker *dead);
/* A spare died, or could not be made or frozen, on its own: delays the
 * next one by the restart policy. */
void cr_spare_failed(struct cr_supervisor *sup, uint64_t uptime);
/* The table's actions on spares (CR_WA_FREEZE, _POLL_FROZEN, _BECOME_SPARE,
 * _PROMOTE, _KILL_SPARE). */
enum cr_wevent cr_spare_act_freeze(struct cr_worker *w);
enum cr_wevent cr_spare_act_poll_frozen(struct cr_worker *w);
enum cr_wevent cr_spare_act_become(struct cr_worker *w);
enum cr_wevent cr_spare_act_promote(struct cr_worker *w);
enum cr_wevent cr_spare_act_kill(struct cr_worker *w);

/* ---- pacer.c: the spawn pacer -------------------------------------------- */

/* Something may have freed a starting slot: pending workers go on now. */
void cr_pacer_kick(struct cr_supervisor *sup);
/* The table's action on a wanted worker (CR_WA_QUEUE): it waits in
 * `pending` for its spawn turn. */
enum cr_wevent cr_pacer_act_queue(struct cr_worker *w);
