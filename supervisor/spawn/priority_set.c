/* cr_priority_set_self (priority.h) apart from the rest of the module:
 * corral-exec and the forked child need only this, not the /proc and
 * cgroup probing of a raise. */
#include "priority_set.h"

#include <errno.h>
#include <linux/sched.h>
#include <linux/sched/types.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int cr_priority_set_self(int nice, uint64_t slice_ns)
{
    struct sched_attr a = {
        .size = sizeof(a),
        .sched_policy = SCHED_NORMAL,
        .sched_nice = nice,
        .sched_runtime = slice_ns,
    };
    if (syscall(SYS_sched_setattr, 0, &a, 0) == 0)
        return 0;
    /* Before Linux 3.14 there is only the nice. */
    if (errno != ENOSYS)
        return errno;
    return setpriority(PRIO_PROCESS, 0, nice) < 0 ? errno : 0;
}

int cr_priority_cap_nice(int nice)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NICE, &rl) < 0)
        return errno;
    unsigned long long cur = rl.rlim_cur, max = rl.rlim_max;
    if (!cr_priority_capped_rlimit(nice, &cur, &max))
        return 0;
    rl.rlim_cur = (rlim_t)cur;
    rl.rlim_max = (rlim_t)max;
    return setrlimit(RLIMIT_NICE, &rl) < 0 ? errno : 0;
}

int cr_priority_cap_nice_here(void)
{
    /* The raw call returns 20 - nice (1 to 40), no errno ambiguity. */
    long raw = syscall(SYS_getpriority, PRIO_PROCESS, 0);
    if (raw < 0)
        return errno;
    return cr_priority_cap_nice(20 - (int)raw);
}
