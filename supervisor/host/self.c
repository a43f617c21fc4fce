/* What corrald does to its own process at start-up: its open-files limit
 * raised, and its priority above its workers (priority.h), each logged
 * once. See self.h. */
#include "self.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "log.h"
#include "uvclose.h"

/* corrald holds about six descriptors per worker (pidfd, output, notify
 * stream, OOM watch, the memory readings) and uses epoll, never select():
 * systemd's default soft limit of 1024 would stop it near 170 workers.
 * Raise the soft limit to the hard one, as systemd advises for such
 * programs; every worker gets the original back before exec (generation/worker_spawn.c),
 * since a program of its own may still use select(). */
void cr_self_raise_nofile(struct cr_self *s)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    s->nofile = rl;
    s->nofile_saved = true;
    if (rl.rlim_cur == rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        cr_log(CR_LOG_WARNING, "cannot raise the open-files limit to %llu: %s",
               (unsigned long long)rl.rlim_max, strerror(errno));
}

uint64_t cr_self_rss(void)
{
    unsigned long long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "re");
    int n = f ? fscanf(f, "%llu %llu", &size, &rss) : 0;
    if (f)
        fclose(f);
    if (n != 2)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    return (uint64_t)rss * (uint64_t)(page > 0 ? page : 4096);
}

void cr_self_cpus(struct cr_cpus *ret)
{
    *ret = (struct cr_cpus){.affinity = uv_available_parallelism()};
    char *rel = NULL;
    if (cr_cgroup_cpu_quota(&ret->quota, &rel) == 0 && rel)
        snprintf(ret->quota_group, sizeof ret->quota_group, "%s", rel);
    free(rel);
    ret->n = ret->quota && ret->quota < ret->affinity ? ret->quota : ret->affinity;
    if (ret->n == 0)
        ret->n = 1;
}

/* What became of the autogroup, for the log line. */
static void autogroup_note(const struct cr_priority *p, char *buf, size_t size)
{
    buf[0] = '\0';
    if (p->autogroup == CR_PRIORITY_AUTOGROUP_RAISED)
        snprintf(buf, size, "; its session's autogroup at nice %d%s", p->autogroup_nice,
                 p->autogroup_limited ? ", as low as RLIMIT_NICE allows" : "");
    else if (p->autogroup == CR_PRIORITY_AUTOGROUP_NOT_LEADER)
        snprintf(buf, size, "; autogroup left alone (the session is not corrald's own)");
    else if (p->autogroup == CR_PRIORITY_AUTOGROUP_NOT_ROOT)
        snprintf(buf, size, "; autogroups do not apply (corrald's CPU cgroup decides)");
    else if (p->autogroup == CR_PRIORITY_AUTOGROUP_FAILED && p->autogroup_err == EAGAIN)
        snprintf(buf, size, "; autogroup: the kernel's rate limit, tried again from a timer");
    else if (p->autogroup == CR_PRIORITY_AUTOGROUP_FAILED)
        snprintf(buf, size, "; autogroup not raised: %s", strerror(p->autogroup_err));
}

/* Without CAP_SYS_ADMIN the kernel takes one autogroup change per 100 ms,
 * machine-wide: corralds starting together try again, three times, from
 * a timer that never holds the loop. */
static void on_autogroup_retry(uv_timer_t *t)
{
    struct cr_self *s = t->data;
    struct cr_priority *p = &s->priority;
    p->autogroup = cr_priority_retry_autogroup(p);
    bool again = p->autogroup == CR_PRIORITY_AUTOGROUP_FAILED && p->autogroup_err == EAGAIN;
    if (again && ++s->autogroup_tries < 3)
        return;
    uv_close((uv_handle_t *)t, NULL);
    char ag[112];
    if (again)
        snprintf(ag, sizeof(ag), "; autogroup not raised: %s", strerror(EAGAIN));
    else
        autogroup_note(p, ag, sizeof(ag));
    cr_log(CR_LOG_INFO, "corrald's autogroup, tried again%s", ag);
}

/* corrald answers while its workers start: it runs above them
 * (priority.h), and says how far, once. */
void cr_self_raise_priority(struct cr_self *s, uv_loop_t *loop, unsigned levels)
{
    struct cr_priority *p = &s->priority;
    int r = cr_priority_raise(levels, p);
    if (r < 0) {
        cr_log(CR_LOG_WARNING, "cannot read corrald's scheduling attributes: %s", strerror(-r));
        return;
    }
    s->priority_read = true;
    if (levels == 0)
        return;
    if (p->policy != SCHED_OTHER) {
        cr_log(CR_LOG_INFO,
               "corrald was started with scheduling policy %d, not SCHED_OTHER: "
               "its priority and its workers' are left as they are",
               p->policy);
        return;
    }
    char ag[112];
    autogroup_note(p, ag, sizeof(ag));
    char slice[96];
    if (p->slice_now != p->slice_ns)
        snprintf(slice, sizeof(slice), "a %.1f ms slice", (double)p->slice_now / 1e6);
    else if (p->slice_err)
        snprintf(slice, sizeof(slice), "the kernel's slice (sched_setattr: %s)",
                 strerror(p->slice_err));
    else
        snprintf(slice, sizeof(slice), "the kernel's slice (no custom slice before Linux 6.12)");
    if (!cr_priority_raised(p))
        cr_log(CR_LOG_INFO, "corrald's priority is left as it was started: %s, nice %d%s%s", slice,
               p->nice, p->nice_err ? " (a lower one needs CAP_SYS_NICE or LimitNICE=)" : "", ag);
    else if (p->nice_err && p->nice_now == p->nice)
        cr_log(CR_LOG_NOTICE,
               "corrald cannot run at a lower nice than its workers (%s; needs "
               "CAP_SYS_NICE or LimitNICE=): nice %d as they, %s%s",
               strerror(p->nice_err), p->nice_now, slice, ag);
    else
        cr_log(CR_LOG_INFO, "corrald runs above its workers: nice %d (workers %d%s), %s%s",
               p->nice_now, p->nice, p->nice_err ? "; as low as RLIMIT_NICE allows" : "", slice,
               ag);
    if (p->autogroup == CR_PRIORITY_AUTOGROUP_FAILED && p->autogroup_err == EAGAIN &&
        uv_timer_init(loop, &s->autogroup_retry) == 0) {
        s->autogroup_retry.data = s;
        uv_timer_start(&s->autogroup_retry, on_autogroup_retry, 110, 110);
        uv_unref((uv_handle_t *)&s->autogroup_retry);
    }
}

const struct rlimit *cr_self_nofile(const struct cr_self *s)
{
    return s->nofile_saved ? &s->nofile : NULL;
}

const struct cr_priority *cr_self_priority(const struct cr_self *s)
{
    return s->priority_read ? &s->priority : NULL;
}

void cr_self_stop(struct cr_self *s)
{
    cr_uv_close((uv_handle_t *)&s->autogroup_retry);
}
