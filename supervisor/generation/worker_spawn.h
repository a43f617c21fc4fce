/* cr_worker_spawn: one generation's environment, argv, cgroup and
 * descriptors, then cr_spawn(). Below the core: it starts a process and
 * hands its descriptors to the reaper and wio.c; what the state becomes is
 * the core's call. */
#pragma once

struct cr_gen;

/* Forks and execs generation `generation` of g (its readings, reports,
 * ledger and exit start afresh). workers: how many share an enclosing
 * limit, for the heap limit. 0 when a process exists (even if its exec
 * failed: the exec pipe says so later); -errno when nothing runs. */
int cr_worker_spawn(struct cr_gen *g, unsigned generation, unsigned workers);
