/* cr_cg: how corrald uses cgroups — where groups live, limits, OOM counter
 * deltas, deferred removal. Below the core; the cgroups/ library does the
 * file work. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

struct cr_supervisor;
struct cr_worker;
struct cr_cgroup_events;
struct cr_death_evidence;
struct cr_postmortem;

/* Makes and locks <base>/workers/<instance> (sup->cfg.instance must be
 * set): -EBUSY when another live corrald holds it (logged). */
int cr_cg_setup(struct cr_supervisor *sup);
/* The default instance name of the control socket at control_path, its
 * directory resolved (cr_instance_default_name). *ret is malloc'd. */
int cr_cg_default_instance(const char *control_path, char **ret);
int cr_cg_worker_create(struct cr_worker *w); /* creates the group, sets limits */
/* The worker group's cgroup.procs open for writing (CLOEXEC): the child
 * moves itself in before exec. -1 without a group, -errno on failure. */
int cr_cg_worker_procs_fd(struct cr_worker *w);
void cr_cg_worker_baseline(struct cr_worker *w, const struct cr_cgroup_events *own_now);
void cr_cg_worker_evidence(struct cr_worker *w, struct cr_death_evidence *ev,
                           struct cr_postmortem *pm);
void cr_cg_worker_release(struct cr_worker *w); /* remove now or queue for removal */
void cr_cg_apply_limits(struct cr_supervisor *sup); /* after `set memory-max …` */
void cr_cg_done(struct cr_supervisor *sup);
/* The heap limit handed to workers: the tightest of the per-worker limit and
 * the tightest enclosing limit shared among the workers, minus the headroom;
 * 0 when no limit applies. */
uint64_t cr_cg_heap_limit(const struct cr_supervisor *sup);
