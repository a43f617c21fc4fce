/* budget: do the workers' memory limits fit under the limit that encloses
 * them all? A container's (a pod's) limit is a single cgroup's memory.max:
 * when the per-worker limits add up to more than it, the kernel's OOM
 * killer acts at the container's level before any worker reaches its own
 * limit — and with memory.oom.group=1 (the kubelet sets it on every
 * container since Kubernetes 1.28, on cgroup v2) it kills every process in
 * the container, corrald included.
 *
 * What must fit: every worker and warm spare at its --memory-max, one more
 * for the replacement a rolling reload starts beside the worker it
 * replaces, corrald's own resident memory, and a margin for what the
 * container's group is charged that no worker's limit counts (page cache
 * of other processes, kernel memory, the slack before reclaim): 5 % of
 * the limit, at least 16 MiB.
 *
 * Pure: numbers in, numbers and a sentence out.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cr_budget_in {
    uint64_t per_worker;   /* --memory-max, the most one worker may hold; 0: none */
    bool by_corrald;       /* corrald enforces it (no per-worker groups): per_worker holds
                              CR_BUDGET_ENFORCED_SLACK more, what a worker passes it by */
    unsigned workers;      /* the target */
    unsigned spares;       /* warm spares */
    unsigned replacements; /* started beside the workers they replace (a reload: 1) */
    uint64_t self;         /* corrald's own resident memory */
    uint64_t limit;        /* the tightest enclosing limit; 0: none */
    const char *group;     /* the group that holds it (NULL: not known) */
    bool oom_group;        /* that group (or one between) has memory.oom.group=1 */
};

struct cr_budget {
    bool limited;            /* there is an enclosing limit to compare with */
    bool fits;               /* true without a limit */
    uint64_t margin;         /* 5 % of the limit, >= 16 MiB */
    uint64_t need;           /* what the limits add up to, corrald and the margin included */
    unsigned fit_workers;    /* workers that fit at per_worker (spares kept) */
    uint64_t fit_per_worker; /* the per-worker limit that fits this many workers */
};

#define CR_BUDGET_MIN_MARGIN (16ull << 20)
/* corrald reads an unconfined worker's RSS every 5 ms near its limit and
 * kills it at the limit: measured (bench/memkill, docs/memory.md), none got
 * 2 MiB past it, whatever the growth rate. */
#define CR_BUDGET_ENFORCED_SLACK (2ull << 20)

/* Fills *out from *in. -EINVAL for a NULL argument. */
int cr_budget_check(const struct cr_budget_in *in, struct cr_budget *out);

/* One line, for the log and the status: the sum and how it compares, and
 * when it does not fit, the two ways out (fewer workers, a lower limit).
 * Returns the length (truncated to size - 1), or -EINVAL. */
int cr_budget_format(const struct cr_budget_in *in, const struct cr_budget *b, char *buf,
                     size_t size);
