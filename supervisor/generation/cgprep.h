/* cgprep: a pending worker's cgroup, made off the loop.
 *
 * Making a worker's group is a mkdir(2) and a limit or two; on cgroup v1
 * the mkdir waits for the kernel's cgroup_mutex, which every starting
 * worker holds while it moves itself into its own group (that move waits
 * for an RCU grace period on v1). At `scale 1000` on this 2-core machine
 * such a mkdir took 13-20 ms, on the loop, holding signals, control
 * commands and heartbeats. So the spawn pacer has libuv's threadpool make
 * the groups of the next pending workers ahead of their turn; the turn
 * takes a made group, or makes it itself as before when none is ready
 * (a spare; a failure, which the spawn then reports).
 *
 * The maker also does the new group's other path walks (its cgroup.procs
 * and OOM descriptors, its counters' baseline): any path walk in cgroupfs
 * waits while another mkdir populates its directory. */
#pragma once

#include <stdbool.h>

struct cr_cgroup_events;
struct cr_supervisor;
struct cr_worker;

/* Starts making the group of w's next generation in the threadpool; a
 * no-op when one is made or on its way, or without per-worker cgroups.
 * made(sup) is called on the loop once it is made (and w still wants it). */
void cr_cg_prep_start(struct cr_worker *w, void (*made)(struct cr_supervisor *sup));
/* The next generation of slot id (never 0 but on failure: 0). */
unsigned cr_slot_next_generation(struct cr_supervisor *sup, int id);
/* The generation reserved for w's group made ahead, if it is made; else 0
 * (the spawn then takes the next one). */
unsigned cr_cg_prep_generation(const struct cr_worker *w);
/* Whether a group is on its way for w, not made yet. */
bool cr_cg_prep_busy(const struct cr_worker *w);
/* At the spawn, once w->generation is set (from cr_cg_prep_generation
 * when a group was made): w->cg becomes the made group when it is this
 * generation's (its limits brought up to date); else the made group is
 * removed and w->cg stays NULL. True when w->cg was taken with its
 * counters as the maker read them (*ret_own0), for the death baseline. */
bool cr_cg_prep_take(struct cr_worker *w, struct cr_cgroup_events *ret_own0);
/* w goes away: its group, made or on its way, is removed once done. */
void cr_cg_prep_drop(struct cr_worker *w);
