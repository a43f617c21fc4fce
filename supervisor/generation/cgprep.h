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
struct cr_gen;

/* Starts making the group of g's next generation, number `generation`
 * (reserved by the caller: it is never handed out again), in the
 * threadpool; a no-op when one is made or on its way, or without
 * per-worker cgroups. fd_room: the descriptors corrald's table should
 * have room for (see make). made(ctx) is called on the loop once it is
 * made (and g still wants it). */
void cr_cg_prep_start(struct cr_gen *g, unsigned generation, int fd_room,
                      void (*made)(void *ctx), void *ctx);
/* The generation reserved for g's group made ahead, if it is made; else 0
 * (the spawn then takes the next one). */
unsigned cr_cg_prep_generation(const struct cr_gen *g);
/* Whether a group is on its way for g, not made yet. */
bool cr_cg_prep_busy(const struct cr_gen *g);
/* At the spawn, once g->generation is set (from cr_cg_prep_generation
 * when a group was made): g's group becomes the made one when it is this
 * generation's (its limits brought up to date); else the made group is
 * removed and g has none yet. True when it was taken with its counters as
 * the maker read them (*ret_own0), for the death baseline. */
bool cr_cg_prep_take(struct cr_gen *g, struct cr_cgroup_events *ret_own0);
/* g goes away: its group, made or on its way, is removed once done. */
void cr_cg_prep_drop(struct cr_gen *g);
