/* cr_cgworker: a generation's own cgroup — made at its spawn under the
 * tree's <base>/workers/<instance> (w<ID>-<GEN>, a spare's s<GEN>), its
 * limits, the OOM counters read as deltas across its life, its evidence at
 * death, its removal (what is left in it is killed first). */
#pragma once

struct cr_gen;
struct cr_cgroup_events;
struct cr_death_evidence;
struct cr_postmortem;

/* Creates g's group and sets its limits. -errno (logged). */
int cr_cgworker_create(struct cr_gen *g);
/* The group's cgroup.procs open for writing (CLOEXEC): the child moves
 * itself in before exec. -1 without a group, -errno on failure (logged). */
int cr_cgworker_procs_fd(struct cr_gen *g);
/* The counters at spawn, its own group's (own_now: read already by the
 * group's maker, or NULL to read here) and the enclosing groups'. */
void cr_cgworker_baseline(struct cr_gen *g, const struct cr_cgroup_events *own_now);
/* The cgroup evidence of g's death, into ev and pm. */
void cr_cgworker_evidence(struct cr_gen *g, struct cr_death_evidence *ev, struct cr_postmortem *pm);
/* Kills what is left in the group and removes it (now, or from the tree's
 * timer once the kernel lets go of it). */
void cr_cgworker_release(struct cr_gen *g);
/* After `set memory-max …`: the limits on g's group brought up to date. */
void cr_cgworker_apply_limits(struct cr_gen *g);
