/* priority_set: the one scheduling call a new worker makes before exec
 * (spawnchild.c), apart from priority.c's raise so that corral-exec links
 * nothing else. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Sets the calling thread's nice and slice (0: the kernel's default),
 * policy SCHED_OTHER. Async-signal-safe (between fork and exec). Returns
 * 0 or an errno. */
int cr_priority_set_self(int nice, uint64_t slice_ns);

/* The RLIMIT_NICE value at which a process can lower its nice no further
 * than nice: 20 - nice (the kernel's is_nice_reduction). */
static inline unsigned long long cr_priority_nice_rlimit(int nice)
{
    return (unsigned long long)(20 - nice);
}

/* What cr_priority_cap_nice sets: each of *cur, *max (RLIM_INFINITY as
 * ~0) lowered to cr_priority_nice_rlimit(nice), never raised. Returns
 * whether either changed. */
static inline bool cr_priority_capped_rlimit(int nice, unsigned long long *cur,
                                             unsigned long long *max)
{
    unsigned long long want = cr_priority_nice_rlimit(nice);
    bool changed = *cur > want || *max > want;
    if (*cur > want)
        *cur = want;
    if (*max > want)
        *max = want;
    return changed;
}

/* Lowers RLIMIT_NICE, soft and hard, so that the calling process cannot
 * take a nice below nice without CAP_SYS_NICE; leaves it alone when it
 * already allows no more. Lowering a limit needs no privilege.
 * Async-signal-safe. Returns 0 or an errno. */
int cr_priority_cap_nice(int nice);

/* cr_priority_cap_nice at the calling thread's own nice, whatever set it.
 * Async-signal-safe. Returns 0 or an errno. */
int cr_priority_cap_nice_here(void);
