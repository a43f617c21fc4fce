#include "priority.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/sched.h>
#include <linux/sched/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AUTOGROUP "/proc/self/autogroup"
#define AUTOGROUP_ENABLED "/proc/sys/kernel/sched_autogroup_enabled"

int cr_priority_raised_nice(int base, unsigned levels)
{
    long n = (long)base - (long)(levels > 40 ? 40 : levels);
    return n < -20 ? -20 : (int)n;
}

int cr_priority_parse_autogroup(const char *text, int *ret_nice)
{
    const char *p = text ? strstr(text, " nice ") : NULL;
    if (!p || strncmp(text, "/autogroup-", strlen("/autogroup-")) != 0)
        return -EINVAL;
    p += strlen(" nice ");
    char *end;
    errno = 0;
    long n = strtol(p, &end, 10);
    if (errno || end == p || (*end != '\n' && *end != '\0') || n < -20 || n > 19)
        return -EINVAL;
    *ret_nice = (int)n;
    return 0;
}

/* glibc before 2.41 has no wrapper for these two. */
static int get_attr(struct sched_attr *a)
{
    *a = (struct sched_attr){0};
    return syscall(SYS_sched_getattr, 0, a, sizeof(*a), 0) < 0 ? errno : 0;
}

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

static int read_small(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t len = read(fd, buf, n - 1);
    int r = len < 0 ? -errno : 0;
    close(fd);
    if (r == 0)
        buf[len] = '\0';
    return r;
}

/* The session's autogroup, when autogroups are on and corrald leads its
 * session. */
static enum cr_priority_autogroup raise_autogroup(unsigned levels, struct cr_priority *p)
{
    char text[64];
    int nice;
    if (read_small(AUTOGROUP_ENABLED, text, sizeof(text)) < 0 || text[0] != '1')
        return CR_PRIORITY_AUTOGROUP_OFF;
    if (getsid(0) != getpid())
        return CR_PRIORITY_AUTOGROUP_NOT_LEADER;
    int r = read_small(AUTOGROUP, text, sizeof(text));
    if (r == 0)
        r = cr_priority_parse_autogroup(text, &nice);
    int want = r == 0 ? cr_priority_raised_nice(nice, levels) : 0;
    int len = snprintf(text, sizeof(text), "%d", want);
    int fd = r == 0 ? open(AUTOGROUP, O_WRONLY | O_CLOEXEC) : -1;
    if (r == 0 && fd < 0)
        r = -errno;
    if (r == 0 && write(fd, text, (size_t)len) != len)
        r = errno ? -errno : -EIO;
    if (fd >= 0)
        close(fd);
    if (r < 0) {
        p->autogroup_err = -r;
        return CR_PRIORITY_AUTOGROUP_FAILED;
    }
    p->autogroup_nice = want;
    return CR_PRIORITY_AUTOGROUP_RAISED;
}

int cr_priority_raise(unsigned levels, struct cr_priority *ret)
{
    struct sched_attr a;
    int err = get_attr(&a);
    if (err == ENOSYS) {
        /* Before Linux 3.14: the nice alone, and no slice to keep. */
        errno = 0;
        int n = getpriority(PRIO_PROCESS, 0);
        if (n == -1 && errno)
            return -errno;
        a = (struct sched_attr){.sched_policy = SCHED_NORMAL, .sched_nice = n};
    } else if (err) {
        return -err;
    }
    struct cr_priority p = {
        .nice = a.sched_nice,
        .slice_ns = a.sched_runtime,
        .nice_now = a.sched_nice,
        .slice_now = a.sched_runtime,
        .policy = (int)a.sched_policy,
    };
    if (levels == 0 || a.sched_policy != SCHED_NORMAL) {
        *ret = p;
        return 0;
    }
    /* The slice needs no privilege: without the nice, the slice alone. */
    int want = cr_priority_raised_nice(p.nice, levels);
    if ((p.nice_err = cr_priority_set_self(want, CR_PRIORITY_SLICE_NS)) != 0)
        cr_priority_set_self(p.nice, CR_PRIORITY_SLICE_NS);
    /* Read back: kernels before 6.12 take no slice for SCHED_OTHER, and
     * say so by reporting none. */
    if (get_attr(&a) == 0) {
        p.nice_now = a.sched_nice;
        p.slice_now = a.sched_runtime;
    } else if (!p.nice_err) {
        p.nice_now = want;
    }
    p.autogroup = raise_autogroup(levels, &p);
    p.raised = cr_priority_changed(&p) || p.autogroup == CR_PRIORITY_AUTOGROUP_RAISED;
    *ret = p;
    return 0;
}
