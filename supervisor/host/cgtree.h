/* cr_cgtree: corrald's cgroup tree — where worker groups live
 * (<base>/workers/<instance>, locked while this corrald lives; on v2 corrald
 * itself moves into <base>/supervisor), the groups enclosing them whose
 * limits count as "ancestor" limits, the system's OOM-kill counter, and the
 * removal of groups the kernel still holds. Below the generations: each
 * generation's own group is cgworker.h's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cr_cgroup.h"
#include "death.h"

struct cr_config;

struct cr_cgtree {
    bool on;                      /* per-worker groups are made (not --no-cgroups) */
    enum cr_cgroup_layout layout; /* NONE: no memory controller to read */
    char *base;                   /* rel path: workers live in <base>/workers/<instance> */
    bool base_created;            /* --cgroup-parent did not exist: removed at exit */
    struct cr_cgroup *workers;    /* <base>/workers/<instance>: this corrald's own */
    int lock_fd;                  /* flock on its directory, held until exit */
    struct cr_cgroup **ancestors; /* enclosing groups, nearest first */
    size_t nancestors;
    struct cr_cgroup **trash; /* groups to remove once the kernel lets us */
    size_t ntrash;
    uv_timer_t trash_timer;
    int vmstat_fd; /* /proc/vmstat, kept open for its OOM-kill counter */
};

/* Finds (or with --cgroup-parent makes) the base, moves corrald into its
 * leaf on v2, makes and locks <base>/workers/<instance> (cfg->instance must
 * be set), reclaims what a dead corrald of the same instance left, and
 * opens the enclosing groups. With --no-cgroups only the enclosing groups'
 * counters are opened. -errno (logged, with the fix): -EBUSY when another
 * live corrald holds the instance. */
int cr_cgtree_setup(struct cr_cgtree *t, uv_loop_t *loop, const struct cr_config *cfg);
/* Closes its timer (the end of the loop). */
void cr_cgtree_stop(struct cr_cgtree *t);
/* Removes this corrald's subtree (and a base it made) and frees it all. */
void cr_cgtree_done(struct cr_cgtree *t);

/* The default instance name of the control socket at control_path, its
 * directory resolved (cr_instance_default_name). *ret is malloc'd. */
int cr_cgtree_default_instance(const char *control_path, char **ret);
/* The relative path of <base>/workers/<instance>, or NULL. */
const char *cr_cgtree_workers_rel(const struct cr_cgtree *t);
/* <base>/workers/<instance>/<name>, malloc'd; NULL without memory. */
char *cr_cgtree_worker_rel(const struct cr_cgtree *t, const char *name);
/* --no-cgroups with readable counters: corrald's own group, which the
 * workers share; else NULL. */
struct cr_cgroup *cr_cgtree_shared(const struct cr_cgtree *t);
/* The memory a worker may use: the tightest of the per-worker limit and
 * the tightest enclosing limit shared among `workers`; 0 when no limit
 * applies. */
uint64_t cr_cgtree_memory_share(const struct cr_cgtree *t, const struct cr_config *c,
                                unsigned workers);
/* The heap limit handed to workers: their memory share minus the
 * headroom; 0 when no limit applies. */
uint64_t cr_cgtree_heap_limit(const struct cr_cgtree *t, const struct cr_config *c,
                              unsigned workers);

/* The tightest enclosing limit (0: none), the group that holds it
 * (*ret_group: its relative path, valid while t lives; NULL without a
 * limit) and whether that group or one between it and the workers has
 * memory.oom.group=1 (v2). Fresh reads. */
uint64_t cr_cgtree_enclosing_limit(const struct cr_cgtree *t, const char **ret_group,
                                   bool *ret_oom_group);

/* The system's OOM-kill counter (/proc/vmstat's oom_kill); 0 when unread. */
uint64_t cr_cgtree_vmstat_oom_kill(struct cr_cgtree *t);
/* The sum of the enclosing groups' own-level OOM counters. */
struct cr_oom_delta cr_cgtree_ancestors_now(struct cr_cgtree *t);
/* The enclosing group nearest the workers whose limit is set and was
 * reached (its limit counters moved, or its peak sits at the limit). */
struct cr_cgroup *cr_cgtree_limited_ancestor(struct cr_cgtree *t, uint64_t *ret_limit);
/* A group's counters as a delta, and a - b (never below 0). */
struct cr_oom_delta cr_cgtree_delta(const struct cr_cgroup_events *e);
struct cr_oom_delta cr_cgtree_delta_sub(struct cr_oom_delta a, struct cr_oom_delta b);
/* Removes cg now, or from a timer once the kernel lets go of it; takes cg. */
void cr_cgtree_trash(struct cr_cgtree *t, struct cr_cgroup *cg);
