/* Pure parsers over the text of cgroup control files: no I/O, no globals,
 * so they are unit-tested on captured samples of real kernels. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cr_cgroup.h"

/* Values at or above this are v1's "no limit": the kernel reports
 * PAGE_COUNTER_MAX * PAGE_SIZE, i.e. INT64_MAX rounded down to a page
 * (9223372036854771712 with 4 KiB pages); 64 KiB pages round further. */
#define V1_UNLIMITED_FLOOR ((uint64_t)INT64_MAX - 65535u)

const char *cr_cgroup_layout_to_string(enum cr_cgroup_layout l)
{
    static const char *const names[_CR_CGROUP_LAYOUT_MAX] = {
        [CR_CGROUP_NONE] = "none",
        [CR_CGROUP_V1] = "v1",
        [CR_CGROUP_V2] = "v2",
    };
    if ((unsigned)l >= _CR_CGROUP_LAYOUT_MAX)
        return NULL;
    return names[l];
}

/* Parses a decimal u64 spanning [s, end); no sign, no overflow. */
static int parse_dec(const char *s, const char *end, uint64_t *ret)
{
    uint64_t v = 0;
    if (s == end)
        return -EINVAL;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

int cr_cgroup_parse_u64(const char *text, uint64_t *ret)
{
    if (!text || !ret)
        return -EINVAL;
    const char *s = text + strspn(text, " \t\n");
    const char *end = s + strcspn(s, " \t\n");
    if (*(end + strspn(end, " \t\n")) != '\0')
        return -EINVAL;
    if (end - s == 3 && memcmp(s, "max", 3) == 0) {
        *ret = CR_CGROUP_UNLIMITED;
        return 0;
    }
    /* v1 accepts "-1" as input and never prints it, but be lenient. */
    if (end - s == 2 && memcmp(s, "-1", 2) == 0) {
        *ret = CR_CGROUP_UNLIMITED;
        return 0;
    }
    uint64_t v;
    int r = parse_dec(s, end, &v);
    if (r < 0)
        return r;
    *ret = v >= V1_UNLIMITED_FLOOR ? CR_CGROUP_UNLIMITED : v;
    return 0;
}

/* Calls fn(key, key_len, value, ctx) for each "key value" line of a flat
 * keyed file (memory.stat, memory.events, memory.oom_control). Any line of
 * another form makes the whole text invalid; an empty text too. */
typedef void kv_fn(const char *key, size_t key_len, uint64_t value, void *ctx);

static int kv_each(const char *text, kv_fn *fn, void *ctx)
{
    unsigned lines = 0;
    if (!text)
        return -EINVAL;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol)
            eol = p + strlen(p);
        if (eol > p) {
            const char *sp = memchr(p, ' ', (size_t)(eol - p));
            uint64_t v;
            if (!sp || sp == p || parse_dec(sp + 1, eol, &v) < 0)
                return -EINVAL;
            fn(p, (size_t)(sp - p), v, ctx);
            lines++;
        }
        p = *eol ? eol + 1 : eol;
    }
    return lines > 0 ? 0 : -EINVAL;
}

static bool key_is(const char *key, size_t len, const char *name)
{
    return strlen(name) == len && memcmp(key, name, len) == 0;
}

struct field {
    const char *name;
    size_t offset;
};

/* Stores value into the uint64_t field of obj named by key, if any. */
static void store(const struct field *fields, void *obj, const char *key, size_t len,
                  uint64_t value)
{
    for (const struct field *f = fields; f->name; f++)
        if (key_is(key, len, f->name)) {
            *(uint64_t *)((char *)obj + f->offset) = value;
            return;
        }
}

#define F(type, name, member)                                                                      \
    {                                                                                              \
        name, offsetof(type, member)                                                               \
    }

/* v2 memory.stat is hierarchical and uses the names corral reports. Kernels
 * before 5.18 have no "kernel" line: its parts are summed below. */
struct v2_stat_ctx {
    struct cr_cgroup_stat st;
    uint64_t kernel_parts;
    bool has_kernel;
};

static void v2_stat_kv(const char *key, size_t len, uint64_t v, void *ctx)
{
    static const struct field fields[] = {
        F(struct cr_cgroup_stat, "anon", anon),
        F(struct cr_cgroup_stat, "file", file),
        F(struct cr_cgroup_stat, "kernel", kernel),
        F(struct cr_cgroup_stat, "slab", slab),
        F(struct cr_cgroup_stat, "sock", sock),
        F(struct cr_cgroup_stat, "shmem", shmem),
        {NULL, 0},
    };
    struct v2_stat_ctx *c = ctx;
    store(fields, &c->st, key, len, v);
    if (key_is(key, len, "kernel"))
        c->has_kernel = true;
    if (key_is(key, len, "kernel_stack") || key_is(key, len, "slab") ||
        key_is(key, len, "pagetables") || key_is(key, len, "percpu"))
        c->kernel_parts += v;
}

/* v1 memory.stat: the total_* lines are hierarchical (like v2) and win over
 * the group-local ones. Per Documentation/admin-guide/cgroup-v1/memory.rst,
 * "rss" is anonymous and swap cache memory and already includes transparent
 * huge pages ("rss_huge" is a subset, not an addend); "cache" is page cache
 * including tmpfs/shmem, like v2 "file". v1 has no slab, sock or kernel line:
 * cr_cgroup_read_stat fills kernel from memory.kmem.usage_in_bytes. */
struct v1_stat_ctx {
    struct cr_cgroup_stat local, total;
    bool has_total;
};

static void v1_stat_kv(const char *key, size_t len, uint64_t v, void *ctx)
{
    static const struct field fields[] = {
        F(struct cr_cgroup_stat, "rss", anon),
        F(struct cr_cgroup_stat, "cache", file),
        F(struct cr_cgroup_stat, "shmem", shmem),
        {NULL, 0},
    };
    struct v1_stat_ctx *c = ctx;
    if (len > 6 && memcmp(key, "total_", 6) == 0) {
        c->has_total = true;
        store(fields, &c->total, key + 6, len - 6, v);
    } else {
        store(fields, &c->local, key, len, v);
    }
}

int cr_cgroup_parse_stat(const char *text, enum cr_cgroup_layout l, struct cr_cgroup_stat *ret)
{
    int r;
    if (!ret)
        return -EINVAL;
    if (l == CR_CGROUP_V2) {
        struct v2_stat_ctx c = {0};
        r = kv_each(text, v2_stat_kv, &c);
        if (r < 0)
            return r;
        if (!c.has_kernel)
            c.st.kernel = c.kernel_parts;
        *ret = c.st;
        return 0;
    }
    if (l == CR_CGROUP_V1) {
        struct v1_stat_ctx c = {0};
        r = kv_each(text, v1_stat_kv, &c);
        if (r < 0)
            return r;
        *ret = c.has_total ? c.total : c.local;
        return 0;
    }
    return -EINVAL;
}

static void events_kv(const char *key, size_t len, uint64_t v, void *ctx)
{
    static const struct field fields[] = {
        F(struct cr_cgroup_events, "low", low),
        F(struct cr_cgroup_events, "high", high),
        F(struct cr_cgroup_events, "max", max),
        F(struct cr_cgroup_events, "oom", oom),
        F(struct cr_cgroup_events, "oom_kill", oom_kill),
        F(struct cr_cgroup_events, "oom_group_kill", oom_group_kill),
        {NULL, 0},
    };
    store(fields, ctx, key, len, v);
}

int cr_cgroup_parse_events(const char *text, struct cr_cgroup_events *ret)
{
    struct cr_cgroup_events ev = {0};
    if (!ret)
        return -EINVAL;
    int r = kv_each(text, events_kv, &ev);
    if (r < 0)
        return r;
    *ret = ev;
    return 0;
}

static void oom_control_kv(const char *key, size_t len, uint64_t v, void *ctx)
{
    struct cr_cgroup_events *ev = ctx;
    if (key_is(key, len, "oom_kill"))
        ev->oom_kill = v;
    else if (key_is(key, len, "under_oom"))
        ev->under_oom = v != 0;
}

int cr_cgroup_parse_oom_control(const char *text, struct cr_cgroup_events *ret)
{
    struct cr_cgroup_events ev = {0};
    if (!ret)
        return -EINVAL;
    int r = kv_each(text, oom_control_kv, &ev);
    if (r < 0)
        return r;
    /* A v1 file always has oom_kill_disable; anything without it is not one. */
    if (!strstr(text, "oom_kill_disable "))
        return -EINVAL;
    *ret = ev;
    return 0;
}

/* Does the comma-separated list [s, end) contain name? */
static bool list_has(const char *s, const char *end, const char *name)
{
    size_t n = strlen(name);
    while (s < end) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        if ((size_t)(e - s) == n && memcmp(s, name, n) == 0)
            return true;
        s = e + 1;
    }
    return false;
}

/* Lines are "hierarchy-ID:controller-list:path" (cgroups(7)); the v2 line
 * is "0::path". The path may itself contain ':'. */
int cr_cgroup_parse_proc_cgroup(const char *text, enum cr_cgroup_layout l, char **ret_rel)
{
    if (!text || !ret_rel || (l != CR_CGROUP_V1 && l != CR_CGROUP_V2))
        return -EINVAL;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        if (!eol)
            eol = p + strlen(p);
        const char *c1 = memchr(p, ':', (size_t)(eol - p));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
        if (eol > p && !c2)
            return -EINVAL;
        if (c2 && c2 + 1 < eol && c2[1] == '/') {
            bool v2line = c1 - p == 1 && *p == '0' && c2 == c1 + 1;
            bool match = l == CR_CGROUP_V2 ? v2line : list_has(c1 + 1, c2, "memory");
            if (match) {
                char *rel = strndup(c2 + 1, (size_t)(eol - c2 - 1));
                if (!rel)
                    return -ENOMEM;
                *ret_rel = rel;
                return 0;
            }
        }
        p = *eol ? eol + 1 : eol;
    }
    return -ENOENT;
}

char *cr_cgroup_parent(const char *rel)
{
    if (!rel || rel[0] != '/')
        return NULL;
    const char *slash = strrchr(rel, '/');
    if (slash == rel)
        return strdup("/");
    return strndup(rel, (size_t)(slash - rel));
}

/* "some avg10=1.23 avg60=0.50 avg300=0.10 total=12345": the figures of one
 * line after its first word. */
static int pressure_line(const char *p, double *avg10, double *avg60, uint64_t *total)
{
    unsigned long long t;
    double a10, a60, a300;
    if (sscanf(p, " avg10=%lf avg60=%lf avg300=%lf total=%llu", &a10, &a60, &a300, &t) != 4 ||
        a10 < 0 || a60 < 0)
        return -EINVAL;
    *avg10 = a10;
    *avg60 = a60;
    *total = t;
    return 0;
}

int cr_cgroup_parse_pressure(const char *text, struct cr_cgroup_pressure *ret)
{
    struct cr_cgroup_pressure p = {0};
    bool some = false;
    if (!text || !ret)
        return -EINVAL;
    for (const char *l = text; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        if (strncmp(l, "some ", 5) == 0) {
            if (pressure_line(l + 4, &p.some_avg10, &p.some_avg60, &p.some_total_us) < 0)
                return -EINVAL;
            some = true;
        } else if (strncmp(l, "full ", 5) == 0 &&
                   pressure_line(l + 4, &p.full_avg10, &p.full_avg60, &p.full_total_us) < 0) {
            return -EINVAL;
        }
    }
    if (!some) /* the "some" line is always there; "full" is absent for CPU before 5.13 */
        return -EINVAL;
    *ret = p;
    return 0;
}
