/* cr_slot: what outlives a worker process — a slot is what the operator
 * counts (worker 1..N): its generation counter, its restart policy state
 * (backoff, budget window), its restart and OOM counts, its last death, and
 * which process serves it now.
 *
 * A hand-over (a replacement ready, a spare promoted, an heir after an exit
 * notice) moves the slot's holder; nothing is copied. Slots live as long as
 * corrald: a slot scaled away and opened again starts afresh, but keeps its
 * generation counter, so a generation (and its cgroup's name) never repeats
 * within an id.
 *
 * Pure: memory only. The workers it points at are the core's (opaque here). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "death.h"
#include "history.h"
#include "lifecycle.h"

struct cr_worker;

struct cr_slot {
    int id;                        /* 1..N: CORRAL_WORKER_ID */
    unsigned generation;           /* the last generation handed out */
    struct cr_worker *holder;      /* serves it (role holder or replaced); NULL: vacant */
    struct cr_worker *replacement; /* starting for the holder; NULL: none */
    struct cr_restart_state restart;
    struct cr_restart_decision decision; /* the policy's last word, for the cell it leads to */
    uint64_t recycle_after;   /* loop ms: no recycle before (a replacement just failed) */
    unsigned restarts;        /* deaths the policy answered */
    unsigned oom_kills;       /* kernel OOM kills, every generation */
    enum cr_death last_death; /* _CR_DEATH_MAX: none yet */
    char last_death_reason[CR_DEATH_REASON_MAX];
};

struct cr_slots {
    struct cr_slot **v; /* by id; NULL: never opened */
    size_t n;
};

/* The slot with this id, or NULL when it was never opened. */
struct cr_slot *cr_slots_get(const struct cr_slots *s, int id);
/* The slot a new worker is to hold: made, or reopened afresh when vacant
 * (its generation counter kept). NULL: no memory, or the id is taken (not
 * vacant) or out of range (1..CR_SLOT_MAX_ID). */
struct cr_slot *cr_slots_open(struct cr_slots *s, int id);
#define CR_SLOT_MAX_ID 65536
/* The lowest id from *from on whose slot is vacant or was never opened;
 * *from moves past it (ids handed out in one pass ascend). */
int cr_slots_lowest_free(const struct cr_slots *s, int *from);
void cr_slots_done(struct cr_slots *s);

/* Nobody holds it and no replacement is starting for it. */
bool cr_slot_vacant(const struct cr_slot *slot);
/* The next generation of the slot (never 0, never repeated). */
unsigned cr_slot_next_generation(struct cr_slot *slot);
/* A death of the slot's process: its last death, and an OOM kill counted. */
void cr_slot_record_death(struct cr_slot *slot, const struct cr_postmortem *pm);
/* True for the OOM kills: the kernel's (own, ancestor or system limit) and a
 * userspace OOM killer's (systemd-oomd). */
bool cr_death_is_oom_kill(enum cr_death d);
