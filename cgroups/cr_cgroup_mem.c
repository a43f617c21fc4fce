/* cr_cgroup: memory limits and readings, v1 and v2. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cr_cgroup_internal.h"

static void fmt_limit(char *buf, size_t size, uint64_t bytes, enum cr_cgroup_layout l)
{
    if (bytes == CR_CGROUP_UNLIMITED)
        snprintf(buf, size, "%s", l == CR_CGROUP_V2 ? "max" : "-1");
    else
        snprintf(buf, size, "%" PRIu64, bytes);
}

/* Is any swap configured right now? (SwapTotal in /proc/meminfo.) */
static bool have_swap(void)
{
    char text[8192];
    uint64_t kb;
    if (cr_cgroup_read_file("/proc", "meminfo", text, sizeof text) < 0)
        return true; /* unknown: behave as if swap could be used */
    const char *p = strstr(text, "\nSwapTotal:");
    if (!p || sscanf(p + 11, "%" SCNu64, &kb) != 1)
        return true;
    return kb > 0;
}

/* v1: memory.memsw.limit_in_bytes (memory+swap) must never be below
 * memory.limit_in_bytes, or the write fails with EINVAL. So when the limit
 * goes up, memsw goes up first; when it goes down, memsw follows after.
 *
 * Without swap, memsw is left unlimited on purpose: with memsw equal to the
 * limit, the memsw counter (which also carries a little slack) hits its
 * limit first, and since Linux 6.15 only the memory counter tracks failcnt
 * ("page_counter: track failcnt only for legacy cgroups"), so both
 * memory.failcnt and memory.memsw.failcnt stay 0 through an OOM kill
 * (measured on 6.18), and the death classifier loses its "own limit was
 * hit" evidence. With no swap, memsw adds nothing to the limit anyway. */
static int set_max_v1(struct cr_cgroup *cg, uint64_t bytes)
{
    char lim[32], sw[32];
    uint64_t cur, cur_sw;
    bool memsw = cr_cgroup_has_file(cg->path, "memory.memsw.limit_in_bytes");
    uint64_t sw_target = have_swap() ? bytes : CR_CGROUP_UNLIMITED;
    int r = cr_cgroup_read_u64_file(cg->path, "memory.limit_in_bytes", &cur);
    if (r < 0)
        return r;
    fmt_limit(lim, sizeof lim, bytes, CR_CGROUP_V1);
    fmt_limit(sw, sizeof sw, sw_target, CR_CGROUP_V1);
    if (memsw && cr_cgroup_read_u64_file(cg->path, "memory.memsw.limit_in_bytes", &cur_sw) == 0 &&
        cur_sw == sw_target)
        memsw = false; /* already right: skip the write */
    if (memsw && bytes >= cur &&
        (r = cr_cgroup_set_value(cg, "memory.memsw.limit_in_bytes", sw)) < 0)
        return r;
    r = cr_cgroup_set_value(cg, "memory.limit_in_bytes", lim);
    if (r < 0)
        return r;
    if (memsw && bytes < cur)
        r = cr_cgroup_set_value(cg, "memory.memsw.limit_in_bytes", sw);
    return r;
}

int cr_cgroup_set_max(struct cr_cgroup *cg, uint64_t bytes)
{
    char buf[32];
    if (!cg)
        return -EINVAL;
    if (cg->layout == CR_CGROUP_V1)
        return set_max_v1(cg, bytes);
    fmt_limit(buf, sizeof buf, bytes, CR_CGROUP_V2);
    int r = cr_cgroup_set_value(cg, "memory.max", buf);
    if (r < 0)
        return r;
    /* No swapping around the limit: a limit means a limit. */
    if (cr_cgroup_has_file(cg->path, "memory.swap.max"))
        r = cr_cgroup_set_value(cg, "memory.swap.max", "0");
    return r;
}

int cr_cgroup_set_high(struct cr_cgroup *cg, uint64_t bytes)
{
    char buf[32];
    if (!cg)
        return -EINVAL;
    if (cg->layout != CR_CGROUP_V2)
        return -EOPNOTSUPP;
    fmt_limit(buf, sizeof buf, bytes, CR_CGROUP_V2);
    return cr_cgroup_set_value(cg, "memory.high", buf);
}

int cr_cgroup_get_max(struct cr_cgroup *cg, uint64_t *ret)
{
    if (!cg || !ret)
        return -EINVAL;
    return cr_cgroup_read_u64(cg, cg->layout == CR_CGROUP_V2 ? "memory.max" : "memory.limit_in_bytes",
                              ret);
}

int cr_cgroup_get_oom_group(struct cr_cgroup *cg, bool *ret)
{
    uint64_t v = 0;
    if (!cg || !ret)
        return -EINVAL;
    if (cg->layout != CR_CGROUP_V2)
        return -EOPNOTSUPP;
    int r = cr_cgroup_read_u64(cg, "memory.oom.group", &v);
    if (r < 0)
        return r;
    *ret = v != 0;
    return 0;
}

/* Read every sample period for every worker: the file stays open and is
 * read from offset 0, a pread instead of a path walk, an open and a close. */
int cr_cgroup_read_usage(struct cr_cgroup *cg, uint64_t *ret_usage)
{
    char buf[64];
    if (!cg || !ret_usage)
        return -EINVAL;
    int r = cr_cgroup_read_kept(
        cg, cg->layout == CR_CGROUP_V2 ? "memory.current" : "memory.usage_in_bytes", buf, sizeof buf);
    return r < 0 ? r : cr_cgroup_parse_u64(buf, ret_usage);
}

int cr_cgroup_peek_usage(const struct cr_cgroup *cg, uint64_t *ret_usage)
{
    char buf[64];
    if (!cg || !ret_usage)
        return -EINVAL;
    const char *name = cg->layout == CR_CGROUP_V2 ? "memory.current" : "memory.usage_in_bytes";
    int r = cr_cgroup_peek_kept(cg, name, buf, sizeof buf);
    return r < 0 ? r : cr_cgroup_parse_u64(buf, ret_usage);
}

int cr_cgroup_read_peak(struct cr_cgroup *cg, uint64_t *ret_peak)
{
    if (!cg || !ret_peak)
        return -EINVAL;
    /* memory.peak exists since Linux 5.19; ENOENT before. */
    return cr_cgroup_read_u64(
        cg, cg->layout == CR_CGROUP_V2 ? "memory.peak" : "memory.max_usage_in_bytes", ret_peak);
}

int cr_cgroup_read_stat(struct cr_cgroup *cg, struct cr_cgroup_stat *ret)
{
    char text[8192];
    struct cr_cgroup_stat st;
    uint64_t kmem;
    if (!cg || !ret)
        return -EINVAL;
    int r = cr_cgroup_read(cg, "memory.stat", text, sizeof text);
    if (r < 0)
        return r;
    r = cr_cgroup_parse_stat(text, cg->layout, &st);
    if (r < 0)
        return r;
    /* v1 memory.stat has no kernel line; kmem usage is its counterpart
     * (absent on kernels built without kmem accounting: stays 0). */
    if (cg->layout == CR_CGROUP_V1 &&
        cr_cgroup_read_u64(cg, "memory.kmem.usage_in_bytes", &kmem) == 0)
        st.kernel = kmem;
    *ret = st;
    return 0;
}

static int read_events_v1(struct cr_cgroup *cg, struct cr_cgroup_events *ret)
{
    char text[512];
    struct cr_cgroup_events ev;
    uint64_t failcnt, memsw_failcnt = 0;
    int r = cr_cgroup_read(cg, "memory.oom_control", text, sizeof text);
    if (r < 0)
        return r;
    r = cr_cgroup_parse_oom_control(text, &ev);
    if (r < 0)
        return r;
    r = cr_cgroup_read_u64(cg, "memory.failcnt", &failcnt);
    if (r < 0)
        return r;
    /* Older kernels count a memsw-limit hit only in memsw.failcnt. */
    (void)cr_cgroup_read_u64(cg, "memory.memsw.failcnt", &memsw_failcnt);
    ev.max = failcnt + memsw_failcnt;
    *ret = ev;
    return 0;
}

int cr_cgroup_read_events(struct cr_cgroup *cg, bool local, struct cr_cgroup_events *ret)
{
    char text[512];
    if (!cg || !ret)
        return -EINVAL;
    if (cg->layout == CR_CGROUP_V1)
        return read_events_v1(cg, ret);
    /* memory.events.local exists since Linux 5.2. */
    int r = cr_cgroup_read(cg, local ? "memory.events.local" : "memory.events", text, sizeof text);
    return r < 0 ? r : cr_cgroup_parse_events(text, ret);
}

int cr_cgroup_read_pressure(struct cr_cgroup *cg, struct cr_cgroup_pressure *ret)
{
    char text[512];
    if (!cg || !ret)
        return -EINVAL;
    if (cg->layout != CR_CGROUP_V2)
        return -EOPNOTSUPP;
    int r = cr_cgroup_read(cg, "memory.pressure", text, sizeof text);
    /* Without PSI the file is absent, or reading it fails EOPNOTSUPP. */
    return r < 0 ? (r == -EOPNOTSUPP ? -ENOENT : r) : cr_cgroup_parse_pressure(text, ret);
}

int cr_cgroup_get_xattr_u64(const struct cr_cgroup *cg, const char *name, uint64_t *ret)
{
    char buf[32];
    if (!cg || !name || !ret)
        return -EINVAL;
    ssize_t n = getxattr(cr_cgroup_fs_path(cg), name, buf, sizeof(buf) - 1);
    if (n < 0)
        return errno == ENOTSUP ? -EOPNOTSUPP : -errno;
    buf[n] = '\0';
    return cr_cgroup_parse_u64(buf, ret);
}

int cr_cgroup_set_xattr(const struct cr_cgroup *cg, const char *name, const char *value)
{
    if (!cg || !name || !value)
        return -EINVAL;
    if (setxattr(cr_cgroup_fs_path(cg), name, value, strlen(value), 0) < 0)
        return errno == ENOTSUP ? -EOPNOTSUPP : -errno;
    return 0;
}
