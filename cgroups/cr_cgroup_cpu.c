/* The CPU quota over corrald's own cgroup: what a container's or a unit's
 * CPU limit allows, whichever hierarchy holds the cpu controller (a v1 cpu
 * hierarchy on a hybrid host, the unified one on v2). The parsers are pure;
 * cr_cgroup_cpu_quota() reads the files. */
#include <errno.h>
#include <libcgroup.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "cr_cgroup_internal.h"

/* quota/period rounded up: half a CPU is one worker's worth, 1.5 two. */
static int cpus_of(uint64_t quota, uint64_t period, unsigned *ret_cpus)
{
    if (period == 0)
        return -EINVAL;
    if (quota == CR_CGROUP_UNLIMITED) {
        *ret_cpus = 0;
        return 0;
    }
    uint64_t n = quota / period + (quota % period != 0);
    *ret_cpus = n > 65536 ? 65536 : (unsigned)(n ? n : 1);
    return 0;
}

int cr_cgroup_parse_cpu_max(const char *text, unsigned *ret_cpus)
{
    if (!text || !ret_cpus)
        return -EINVAL;
    /* "$MAX $PERIOD": MAX is "max" or microseconds; PERIOD may be absent
     * in what one writes, never in what the kernel prints. */
    char q[32], p[32];
    const char *s = text + strspn(text, " \t");
    size_t ql = strcspn(s, " \t\n");
    const char *t = s + ql + strspn(s + ql, " \t");
    size_t pl = strcspn(t, " \t\n");
    if (ql == 0 || ql >= sizeof(q) || pl == 0 || pl >= sizeof(p) ||
        t[pl + strspn(t + pl, " \t\n")] != '\0')
        return -EINVAL;
    memcpy(q, s, ql);
    q[ql] = '\0';
    memcpy(p, t, pl);
    p[pl] = '\0';
    uint64_t quota, period;
    int r = cr_cgroup_parse_u64(q, &quota);
    if (r == 0)
        r = cr_cgroup_parse_u64(p, &period);
    if (r < 0 || period == CR_CGROUP_UNLIMITED)
        return -EINVAL;
    return cpus_of(quota, period, ret_cpus);
}

int cr_cgroup_parse_cfs(const char *quota_text, const char *period_text, unsigned *ret_cpus)
{
    if (!quota_text || !period_text || !ret_cpus)
        return -EINVAL;
    uint64_t quota, period;
    /* cpu.cfs_quota_us prints -1 for none (parse_u64 reads it as unlimited). */
    int r = cr_cgroup_parse_u64(quota_text, &quota);
    if (r == 0)
        r = cr_cgroup_parse_u64(period_text, &period);
    if (r < 0 || period == CR_CGROUP_UNLIMITED)
        return -EINVAL;
    return cpus_of(quota, period, ret_cpus);
}

/* The CPUs one group's files allow (0 = none set, or not a group here). */
static unsigned group_cpus(const char *dir, bool v2)
{
    char a[64], b[64];
    unsigned n = 0;
    if (v2) {
        if (cr_cgroup_read_file(dir, "cpu.max", a, sizeof a) < 0 ||
            cr_cgroup_parse_cpu_max(a, &n) < 0)
            return 0;
        return n;
    }
    if (cr_cgroup_read_file(dir, "cpu.cfs_quota_us", a, sizeof a) < 0 ||
        cr_cgroup_read_file(dir, "cpu.cfs_period_us", b, sizeof b) < 0 ||
        cr_cgroup_parse_cfs(a, b, &n) < 0)
        return 0;
    return n;
}

/* corrald's own group in the hierarchy of the cpu controller. */
static int own_group(bool v2, char **ret_rel)
{
    if (!v2)
        return cr_cgroup_errno(cgroup_get_current_controller_path(getpid(), "cpu", ret_rel));
    char text[4096];
    int r = cr_cgroup_read_file("/proc/self", "cgroup", text, sizeof text);
    if (r < 0)
        return r;
    return cr_cgroup_parse_proc_cgroup(text, CR_CGROUP_V2, ret_rel);
}

int cr_cgroup_cpu_quota(unsigned *ret_cpus, char **ret_rel)
{
    char *mnt = NULL, *rel = NULL, *where = NULL;
    struct statfs fs;
    unsigned best = 0;
    *ret_cpus = 0;
    if (ret_rel)
        *ret_rel = NULL;
    int r = cr_cgroup_sys(NULL, NULL); /* libcgroup initialized, once */
    if (r < 0 && r != -ENODEV)
        return r;
    r = cr_cgroup_errno(cgroup_get_subsys_mount_point("cpu", &mnt));
    if (r < 0 || !mnt) {
        free(mnt);
        return r == -ENODEV || r == -ENOENT || !mnt ? 0 : r; /* no cpu controller: no quota */
    }
    if (statfs(mnt, &fs) < 0) {
        r = -errno;
        goto out;
    }
    bool v2 = fs.f_type == CGROUP2_SUPER_MAGIC;
    if ((r = own_group(v2, &rel)) < 0)
        goto out;
    /* From the own group up to the root of the mount: the smallest quota
     * on the way is the one that binds. A level not found under the mount
     * is skipped: a v1 container sees its own group mounted as the root
     * while /proc/self/cgroup names the host's path. */
    for (char *g = rel; g;) {
        char dir[4096];
        if (snprintf(dir, sizeof dir, "%s%s", mnt, strcmp(g, "/") == 0 ? "" : g) < (int)sizeof dir) {
            unsigned n = group_cpus(dir, v2);
            if (n && (!best || n < best)) {
                best = n;
                free(where);
                where = strdup(g);
            }
        }
        char *up = strcmp(g, "/") == 0 ? NULL : cr_cgroup_parent(g);
        if (g != rel)
            free(g);
        g = up;
    }
    *ret_cpus = best;
    if (ret_rel) {
        *ret_rel = where;
        where = NULL;
    }
    r = 0;
out:
    free(where);
    free(rel);
    free(mnt);
    return r;
}
