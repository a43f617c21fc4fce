/* The supervisor core's own seams: what supervisor.c, the lifecycle table's
 * driver, shares with the files that carry the rest of the core
 * (death_path.c, recycle.c, spares.c, trace.c, pacer.c). One module with
 * supervisor.h: no other module of corrald includes this file
 * (scripts/include-graph checks it; the unit test of the action list
 * does), and none of these functions assigns a state — cr_worker_event()
 * alone does. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "events.h"
#include "lifecycle.h"

struct cr_supervisor;
struct cr_worker;

/* An action's answer when no decision follows. */
#define NOTHING _CR_WE_MAX

/* An action of the table: what it does, and the event that follows (or
 * NOTHING). Every action has one: tests/unit/core/test_actions.c links
 * this list and checks every cell's. */
typedef enum cr_wevent (*cr_action_fn)(struct cr_worker *w);
extern const cr_action_fn cr_worker_actions[_CR_WA_MAX];

/* ---- supervisor.c: the table's bookkeeping ------------------------------- */

/* A new process-less worker with id (CR_SPARE_ID: a spare), linked into the
 * table, in no slot yet; NULL: no memory. */
struct cr_worker *cr_worker_alloc(struct cr_supervisor *sup, int id);
/* Stops the worker's one deadline. */
void cr_worker_clear_deadline(struct cr_worker *w);
/* Links w into sup's list, ordered by id, after the workers of its slot. */
void cr_worker_link(struct cr_supervisor *sup, struct cr_worker *w);
/* Takes w out of its supervisor's list (it is not freed). */
void cr_worker_unlink(struct cr_worker *w);
/* w goes for good: role retiring, its slot no longer points at it (so the
 * slot may be opened again), nothing queued. */
void cr_worker_retire(struct cr_worker *w);
/* Publishes a state change under the control protocol's name for it. */
void cr_worker_publish_state(struct cr_worker *w, const char *name, const char *reason);
/* The watchdog deadline when the worker sends heartbeats, else none. */
void cr_worker_arm_watchdog(struct cr_worker *w);
/* The restart policy the configuration asks for. */
struct cr_restart_policy cr_supervisor_restart_policy(const struct cr_supervisor *sup);
/* An event about w, stamped with its id, pid, generation and last
 * transition; the caller adds the rest and publishes it. */
struct cr_event cr_worker_stamp(const struct cr_worker *w, enum cr_event_type type);
/* Why a draining worker goes: the drain's reason, unless corrald is killing
 * it already (a SIGKILL sent), then that kill's. */
enum cr_kill_reason cr_worker_drain_reason(const struct cr_worker *w, const char **ret_text);

/* ---- death_path.c: what follows a worker's end ---------------------------- */

/* The table's actions on a death (CR_WA_REAP, _DECIDE, _HAND_OVER,
 * _SPAWN_FAILED): the reap's record and the directory of node's reports
 * released; the restart policy's word on a death in a slot; a dying
 * holder's slot handed to a frozen spare on the kernel's exit notice; a
 * spawn that made no process, taken as an unplanned death. */
enum cr_wevent cr_death_path_act_reap(struct cr_worker *w);
enum cr_wevent cr_death_path_act_decide(struct cr_worker *w);
enum cr_wevent cr_death_path_act_hand_over(struct cr_worker *w);
enum cr_wevent cr_death_path_act_spawn_failed(struct cr_worker *w);

/* ---- recycle.c: rolling replacement -------------------------------------- */

/* A replacement ready: it takes its slot, and the worker it replaces is
 * drained. */
void cr_recycle_took_over(struct cr_worker *r);
/* The table's actions of a rolling replacement (CR_WA_QUEUE_RECYCLE,
 * _RESTART_IN_PLACE, _START_REPLACEMENT, _PASS_SLOT, _REPLACEMENT_FAILED). */
enum cr_wevent cr_recycle_act_queue(struct cr_worker *w);
enum cr_wevent cr_recycle_act_restart_in_place(struct cr_worker *w);
enum cr_wevent cr_recycle_act_start_replacement(struct cr_worker *w);
enum cr_wevent cr_recycle_act_pass_slot(struct cr_worker *w);
enum cr_wevent cr_recycle_act_failed(struct cr_worker *w);

/* ---- spares.c: warm spares ----------------------------------------------- */

/* A frozen spare ready to take a slot, or NULL. */
struct cr_worker *cr_spare_frozen(struct cr_supervisor *sup);
/* Hands the slot of dead (its holder) to the first frozen spare, which is
 * thawed at once; dead's role becomes handed-over. notice: on the kernel's
 * exit notice, before the reap (counted apart). The heir, or NULL when no
 * spare is frozen. */
struct cr_worker *cr_spare_promote(struct cr_worker *dead, bool notice);
/* The generation of the next spare (its group is s<N>). */
unsigned cr_spare_next_generation(struct cr_supervisor *sup);
/* The table's actions on spares (CR_WA_FREEZE, _POLL_FROZEN, _BECOME_SPARE,
 * _PROMOTE, _KILL_SPARE, _SPARE_FAILED). */
enum cr_wevent cr_spare_act_freeze(struct cr_worker *w);
enum cr_wevent cr_spare_act_poll_frozen(struct cr_worker *w);
enum cr_wevent cr_spare_act_become(struct cr_worker *w);
enum cr_wevent cr_spare_act_promote(struct cr_worker *w);
enum cr_wevent cr_spare_act_kill(struct cr_worker *w);
enum cr_wevent cr_spare_act_failed(struct cr_worker *w);

/* ---- trace.c: a hung worker's stack before its kill ----------------------- */

/* Sets up its timer (closed with the core). */
void cr_trace_init(struct cr_supervisor *sup);
/* The table's action on a hung worker (CR_WA_ASK_STACK): asks for its
 * stack under --stack-timeout; STACK at once when it cannot answer. */
enum cr_wevent cr_trace_act_ask(struct cr_worker *w);
/* At the kill: a stack asked for that never came is recorded missing. */
void cr_trace_note_missing(struct cr_worker *w);

/* ---- pacer.c: the spawn pacer -------------------------------------------- */

/* Sets up its handles (closed with the core). */
void cr_pacer_init(struct cr_supervisor *sup);
/* Something may have freed a starting slot: pending workers go on now. */
void cr_pacer_kick(struct cr_supervisor *sup);
/* The table's action on a wanted worker (CR_WA_QUEUE): it waits in
 * `pending` for its spawn turn. */
enum cr_wevent cr_pacer_act_queue(struct cr_worker *w);
