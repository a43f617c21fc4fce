/* cr_self: what corrald does to its own process at start-up — raises its
 * open-files soft limit (it holds about six descriptors per worker), and
 * runs above its workers (priority.h), retrying the autogroup from a timer
 * when the kernel's rate limit refuses it — and what every worker gets back
 * before exec (the limit and the nice corrald was started with). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <uv.h>

#include "priority.h"

struct cr_self {
    struct rlimit nofile; /* as started */
    bool nofile_saved;
    struct cr_priority priority; /* as started and as raised */
    bool priority_read;
    uv_timer_t autogroup_retry;
    unsigned autogroup_tries;
};

/* The CPUs corrald's workers may use, for --workers auto: the affinity
 * mask's count, or the cgroup CPU quota over corrald when that is smaller
 * (a pod limited to 2 CPUs on a 64-core node gets 2). */
struct cr_cpus {
    unsigned n;        /* the smaller of the two, >= 1 */
    unsigned affinity; /* uv_available_parallelism() */
    unsigned quota;    /* whole CPUs, rounded up; 0 = no quota */
    char quota_group[256]; /* the group that sets it ("" = none) */
};

/* corrald's own resident memory in bytes (/proc/self/statm), 0 unread. */
uint64_t cr_self_rss(void);

/* Raises the open-files soft limit to the hard one (logged when refused). */
void cr_self_raise_nofile(struct cr_self *s);
/* Runs `levels` nice levels above the workers, with a short slice, and
 * says how far in one log line. After the cgroup set-up (on v2 corrald is
 * in its own leaf, which decides whether autogroups apply) and before the
 * first worker or thread-pool thread. */
void cr_self_raise_priority(struct cr_self *s, uv_loop_t *loop, unsigned levels);
/* What workers get back before exec; NULL: leave theirs. */
const struct rlimit *cr_self_nofile(const struct cr_self *s);
const struct cr_priority *cr_self_priority(const struct cr_self *s);
/* Reads both figures now (the quota can change at run time). */
void cr_self_cpus(struct cr_cpus *ret);
/* Closes the retry timer (the end of the loop). */
void cr_self_stop(struct cr_self *s);
