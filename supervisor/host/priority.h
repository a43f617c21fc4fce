/* priority: corrald's own CPU priority over its workers.
 *
 * During `scale 1000` the starting workers hold every core, and the kernel
 * shares the cores out fairly: corrald, which did work for each of them,
 * is the one the scheduler judges over-served, and a ping waited up to
 * 16.6 ms for a core while corrald was runnable (docs/reliability.md,
 * "Loop latency"). corrald therefore runs above its workers:
 *
 *   - a short scheduler slice (EEVDF, Linux 6.12+: sched_attr's
 *     sched_runtime for SCHED_OTHER): a waking corrald preempts a worker
 *     whose slice is longer. No privilege needed; older kernels ignore it;
 *   - a nice value N levels below the one it was started with (needs
 *     CAP_SYS_NICE, or as far as RLIMIT_NICE allows), which weighs it over
 *     workers that share its CPU cgroup (on cgroup v1, under systemd or in
 *     a container; with --no-cgroups);
 *   - the same for its session's autogroup when autogroups apply to it
 *     (corrald in the CPU controller's root group, as when started from a
 *     shell or an init without cgroups): there every worker, its own
 *     session, is a group of its own, and only the group's nice weighs
 *     against them. Only when corrald leads its session: raising another
 *     session's autogroup would raise a shell and everything in it.
 *
 * Wherever corrald makes its own supervisor/ leaf on v2 (the default,
 * without --cgroup-parent: under systemd, in a container) neither nice
 * nor autogroup decides: its
 * supervisor/ leaf and workers/ are siblings with the cpu controller on
 * when it is available (cgsetup.c), so corrald alone weighs as much as
 * all its workers.
 *
 * Only a corrald started SCHED_OTHER is changed: another policy was chosen
 * by the operator. Every worker gets the original nice back before exec,
 * and the kernel's default slice (spawnchild.h); its own session's
 * autogroup starts at 0 as it always did. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* corrald's slice while raised: about one loop turn of spawning. */
#define CR_PRIORITY_SLICE_NS 300000u

/* What became of corrald's session's autogroup. */
enum cr_priority_autogroup {
    CR_PRIORITY_AUTOGROUP_OFF,        /* autogroups are off, or corrald was not raised */
    CR_PRIORITY_AUTOGROUP_RAISED,
    CR_PRIORITY_AUTOGROUP_NOT_ROOT,   /* on, but corrald's CPU cgroup is not the root */
    CR_PRIORITY_AUTOGROUP_NOT_LEADER, /* on, but the session is not corrald's own */
    CR_PRIORITY_AUTOGROUP_FAILED,     /* see autogroup_err */
};

struct cr_priority {
    int nice;             /* the nice it was started with: its workers' */
    uint64_t slice_ns;    /* the slice it was started with (0: not reported, before 6.12) */
    int nice_now;         /* its nice now */
    uint64_t slice_now;   /* its slice now */
    int nice_err;         /* why the nice could not be lowered all the way (errno), or 0 */
    int slice_err;        /* why no slice could be set (errno), or 0 */
    enum cr_priority_autogroup autogroup;
    int autogroup_err;    /* errno, when FAILED */
    int autogroup_nice;   /* the autogroup's nice now when RAISED; the one tried when FAILED */
    bool autogroup_limited; /* RAISED, but only as far as RLIMIT_NICE allows */
    int policy;           /* the policy it was started with */
};

/* Whether a worker must be given back the nice corrald was started with
 * and the kernel's default slice. */
static inline bool cr_priority_changed(const struct cr_priority *p)
{
    return p->nice_now != p->nice || p->slice_now != p->slice_ns;
}

/* Whether anything was raised: corrald's own attributes or its autogroup. */
static inline bool cr_priority_raised(const struct cr_priority *p)
{
    return cr_priority_changed(p) || p->autogroup == CR_PRIORITY_AUTOGROUP_RAISED;
}

/* The nice `levels` below base, no lower than -20. Pure. */
int cr_priority_raised_nice(int base, unsigned levels);

/* The lowest nice RLIMIT_NICE's soft limit cur lets a process without
 * CAP_SYS_NICE take: 20 - cur, and 19 (no lower) for 0 and 1. Pure. */
int cr_priority_lowest_nice(unsigned long long cur);

/* Parses /proc/<pid>/cgroup for the group whose CPU controller schedules
 * the process: the v1 line naming "cpu" among its controllers, else the
 * v2 line ("0::"). Copies its path into ret_path (size bytes) and says
 * which in *ret_v1. Returns 0, -ENOENT (no such line) or -EINVAL. Pure. */
int cr_priority_parse_cpu_cgroup(const char *text, bool *ret_v1, char *ret_path, size_t size);

/* Parses /proc/<pid>/autogroup ("/autogroup-<id> nice <n>\n"). Returns 0
 * with *ret_nice set, or -EINVAL. Pure. */
int cr_priority_parse_autogroup(const char *text, int *ret_nice);

/* Raises the calling thread (and, see above, its autogroup) by `levels`
 * nice levels and gives it CR_PRIORITY_SLICE_NS; levels 0 changes
 * nothing. *ret says what was started with and what was done; a nice or
 * autogroup that could not be changed is reported there, not as a
 * failure. Returns 0, or -errno when the attributes cannot be read
 * (nothing changed). Never logs. */
int cr_priority_raise(unsigned levels, struct cr_priority *ret);

/* Writes the autogroup nice cr_priority_raise tried again, for a retry:
 * without CAP_SYS_ADMIN the kernel takes one autogroup change per 100 ms,
 * machine-wide, and says EAGAIN (FAILED, autogroup_err) to corralds
 * starting together. Sets autogroup_err; returns the outcome (the caller
 * stores it in p->autogroup). Never sleeps, never logs. */
enum cr_priority_autogroup cr_priority_retry_autogroup(struct cr_priority *p);
