#include "priority.h"

#include "priority_set.h"
#include "textfile.h"

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

/* glibc before 2.41 has no wrapper (nor for sched_setattr, priority_set.c). */
static int get_attr(struct sched_attr *a)
{
    *a = (struct sched_attr){0};
    return syscall(SYS_sched_getattr, 0, a, sizeof(*a), 0) < 0 ? errno : 0;
}

int cr_priority_parse_cpu_cgroup(const char *text, bool *ret_v1, char *ret_path, size_t size)
{
    const char *v2 = NULL;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line);
        if (end == line) { /* a blank line */
            line = nl ? nl + 1 : NULL;
            continue;
        }
        const char *c1 = memchr(line, ':', (size_t)(end - line));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(end - c1 - 1)) : NULL;
        if (!c2)
            return -EINVAL;
        bool cpu = false;
        for (const char *t = c1 + 1; t < c2;) {
            size_t n = strcspn(t, ",:");
            cpu |= n == 3 && memcmp(t, "cpu", 3) == 0;
            t += n + 1;
        }
        bool unified = c2 == c1 + 1 && c1 == line + 1 && line[0] == '0';
        if (cpu || (unified && !v2)) {
            size_t n = (size_t)(end - c2 - 1);
            if (n == 0 || c2[1] != '/' || n >= size)
                return -EINVAL;
            memcpy(ret_path, c2 + 1, n);
            ret_path[n] = '\0';
            *ret_v1 = cpu;
            if (cpu)
                return 0;
            v2 = line;
        }
        line = nl ? nl + 1 : NULL;
    }
    return v2 ? 0 : -ENOENT;
}

/* Autogroups apply only to tasks the CPU controller leaves in its root
 * group. Under systemd (Delegate=yes) or in a container, corrald's own
 * cgroup decides instead: on v2 its supervisor/ leaf beside workers/, on
 * v1 the unit's group it shares with its workers (where its nice counts).
 * A cgroup namespace shows its own root as "/": the real root is told by
 * what only it lacks (cpu.weight, v2) or has (release_agent, v1). */
static bool in_root_cpu_group(void)
{
    char text[4096], path[4096], dir[8400];
    bool v1;
    int r = cr_read_text("/proc/self/cgroup", text, sizeof(text)) < 0 ? -EIO : 0;
    if (r == 0)
        r = cr_priority_parse_cpu_cgroup(text, &v1, path, sizeof(path));
    if (r == -ENOENT) /* no cpu controller anywhere: everyone is in its root group */
        return true;
    if (r < 0 || strstr(path, "/.."))
        return false; /* unknown, or outside our cgroup namespace: claim nothing */
    if (v1)
        return strcmp(path, "/") == 0 &&
               (access("/sys/fs/cgroup/cpu/release_agent", F_OK) == 0 ||
                access("/sys/fs/cgroup/cpu,cpuacct/release_agent", F_OK) == 0);
    const char *mount = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0
                            ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified";
    size_t root = strlen(mount);
    snprintf(dir, sizeof(dir), "%s%s", mount, strcmp(path, "/") == 0 ? "" : path);
    /* Only a group we can see can be judged; only the real root lacks
     * cgroup.type (a namespace's root has it). */
    char probe[8500];
    snprintf(probe, sizeof(probe), "%s/cgroup.procs", dir);
    if (access(probe, F_OK) < 0)
        return false;
    snprintf(probe, sizeof(probe), "%s/cgroup.type", mount);
    if (access(probe, F_OK) == 0)
        return false;
    for (;;) {
        size_t len = strlen(dir);
        if (len + strlen("/cpu.weight") >= sizeof(dir))
            return false;
        strcpy(dir + len, "/cpu.weight");
        bool weighted = access(dir, F_OK) == 0;
        dir[len] = '\0';
        if (weighted)
            return false;
        if (len <= root)
            return true;
        *strrchr(dir, '/') = '\0';
    }
}

int cr_priority_lowest_nice(unsigned long long cur)
{
    if (cur >= 40)
        return -20;
    return cur < 1 ? 19 : 20 - (int)cur;
}

/* The lowest nice this process may take without CAP_SYS_NICE. */
static int lowest_nice(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NICE, &rl) < 0)
        return 19;
    return cr_priority_lowest_nice(rl.rlim_cur == RLIM_INFINITY ? 40 : (unsigned long long)rl.rlim_cur);
}

static int write_autogroup(int nice)
{
    char text[16];
    int len = snprintf(text, sizeof(text), "%d", nice);
    int fd = open(AUTOGROUP, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, text, (size_t)len);
    int r = w < 0 ? -errno : w != len ? -EIO : 0;
    close(fd);
    return r;
}

/* The session's autogroup, when autogroups apply to corrald and it leads
 * its session; lowest: the lowest nice RLIMIT_NICE allows. */
static enum cr_priority_autogroup raise_autogroup(unsigned levels, int lowest,
                                                  struct cr_priority *p)
{
    char text[64];
    int nice = 0;
    if (cr_read_text(AUTOGROUP_ENABLED, text, sizeof(text)) < 0 || text[0] != '1')
        return CR_PRIORITY_AUTOGROUP_OFF;
    if (!in_root_cpu_group())
        return CR_PRIORITY_AUTOGROUP_NOT_ROOT;
    if (getsid(0) != getpid())
        return CR_PRIORITY_AUTOGROUP_NOT_LEADER;
    int r = cr_read_text(AUTOGROUP, text, sizeof(text)) < 0 ? -EIO : 0;
    if (r == 0)
        r = cr_priority_parse_autogroup(text, &nice);
    int want = r == 0 ? cr_priority_raised_nice(nice, levels) : 0;
    if (r == 0)
        r = write_autogroup(want);
    /* Without CAP_SYS_NICE: as far as RLIMIT_NICE allows (any nice >= 0
     * needs nothing). */
    if (r == -EPERM) {
        int allowed = lowest < 0 ? lowest : 0;
        if (allowed < nice && allowed > want) {
            want = allowed;
            p->autogroup_limited = true;
            r = write_autogroup(want);
        }
    }
    p->autogroup_nice = want;
    p->autogroup_err = r < 0 ? -r : 0;
    return r < 0 ? CR_PRIORITY_AUTOGROUP_FAILED : CR_PRIORITY_AUTOGROUP_RAISED;
}

enum cr_priority_autogroup cr_priority_retry_autogroup(struct cr_priority *p)
{
    /* The kernel checks the permission before the rate: EAGAIN means
     * the same write will do once 100 ms have passed. */
    int r = write_autogroup(p->autogroup_nice);
    p->autogroup_err = r < 0 ? -r : 0;
    return r < 0 ? CR_PRIORITY_AUTOGROUP_FAILED : CR_PRIORITY_AUTOGROUP_RAISED;
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
    /* The slice needs no privilege: without the nice, as low a nice as
     * RLIMIT_NICE allows, or the slice alone. */
    int want = cr_priority_raised_nice(p.nice, levels), lowest = lowest_nice();
    if ((p.nice_err = cr_priority_set_self(want, CR_PRIORITY_SLICE_NS)) != 0) {
        if (lowest >= p.nice || cr_priority_set_self(lowest, CR_PRIORITY_SLICE_NS) != 0)
            p.slice_err = cr_priority_set_self(p.nice, CR_PRIORITY_SLICE_NS);
    }
    /* Read back: kernels before 6.12 take no slice for SCHED_OTHER, and
     * say so by reporting none. */
    if (get_attr(&a) == 0) {
        p.nice_now = a.sched_nice;
        p.slice_now = a.sched_runtime;
    } else {
        errno = 0;
        int n = getpriority(PRIO_PROCESS, 0);
        p.nice_now = n == -1 && errno ? p.nice : n;
    }
    p.autogroup = raise_autogroup(levels, lowest, &p);
    *ret = p;
    return 0;
}
