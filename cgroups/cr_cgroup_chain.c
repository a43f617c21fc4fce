/* cr_cgroup: the groups that enclose a process, and what the cgroup mount
 * says about the container corrald may be running in. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cr_cgroup_internal.h"

static int open_at(const char *mount, enum cr_cgroup_layout l, const char *rel,
                   struct cr_cgroup **ret)
{
    struct stat st;
    struct cr_cgroup *cg = calloc(1, sizeof(*cg));
    if (!cg)
        return -ENOMEM;
    cr_cgroup_init(cg, l);
    cg->rel = strdup(rel);
    if (!cg->rel ||
        asprintf(&cg->path, "%s%s", mount, strcmp(rel, "/") == 0 ? "" : rel) < 0) {
        cg->path = NULL;
        cr_cgroup_free(cg);
        return -ENOMEM;
    }
    int r = stat(cg->path, &st) < 0 ? -errno : S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
    if (r < 0) {
        cr_cgroup_free(cg);
        return r;
    }
    *ret = cg;
    return 0;
}

int cr_cgroup_open_at(const char *mount, enum cr_cgroup_layout l, const char *rel,
                      struct cr_cgroup **ret)
{
    if (!mount || !rel || rel[0] != '/' || !ret ||
        (l != CR_CGROUP_V1 && l != CR_CGROUP_V2))
        return -EINVAL;
    return open_at(mount, l, rel, ret);
}

/* The root of the hierarchy counts only when it has a finite limit: the
 * host's root has none (v2: no memory.max at all; v1: unlimited), the root
 * of a cgroup namespace is a container's own group and may well have one. */
static bool root_counts(struct cr_cgroup *root)
{
    uint64_t max = 0;
    return cr_cgroup_get_max(root, &max) == 0 && max != CR_CGROUP_UNLIMITED && max > 0;
}

static int push(struct cr_cgroup ***v, size_t *n, struct cr_cgroup *cg)
{
    struct cr_cgroup **nv = realloc(*v, (*n + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    (*v)[(*n)++] = cg;
    return 0;
}

void cr_cgroup_free_list(struct cr_cgroup **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_cgroup_free(v[i]);
    free(v);
}

int cr_cgroup_enclosing(const char *mount, enum cr_cgroup_layout l, const char *rel,
                        bool include_self, struct cr_cgroup ***ret, size_t *ret_n)
{
    const char *sys_mount = NULL;
    enum cr_cgroup_layout sys_l = CR_CGROUP_NONE;
    struct cr_cgroup **v = NULL;
    size_t n = 0;
    int r = 0;
    if (!rel || rel[0] != '/' || !ret || !ret_n)
        return -EINVAL;
    if (!mount) {
        if ((r = cr_cgroup_sys(&sys_l, &sys_mount)) < 0)
            return r;
        mount = sys_mount;
        l = sys_l;
    }
    bool none = strcmp(rel, "/") == 0 && !include_self; /* nothing encloses the root */
    char *cur = none ? NULL : include_self ? strdup(rel) : cr_cgroup_parent(rel);
    if (!none && !cur)
        return -ENOMEM;
    while (cur && r == 0) {
        struct cr_cgroup *cg = NULL;
        bool root = strcmp(cur, "/") == 0;
        /* A group that is gone or unreadable is skipped, not fatal. */
        if (open_at(mount, l, cur, &cg) == 0) {
            if (!root || root_counts(cg))
                r = push(&v, &n, cg);
            else
                cg = cr_cgroup_free(cg);
            if (r < 0)
                cr_cgroup_free(cg);
        }
        /* A parent lost to a failed allocation would drop a limit silently. */
        char *p = root ? NULL : cr_cgroup_parent(cur);
        if (!root && !p && r == 0)
            r = -ENOMEM;
        free(cur);
        cur = p;
    }
    free(cur);
    if (r < 0) {
        cr_cgroup_free_list(v, n);
        return r;
    }
    *ret = v;
    *ret_n = n;
    return (int)n;
}

int cr_cgroup_mount_writable(void)
{
    const char *mount = NULL;
    struct statvfs sv;
    int r = cr_cgroup_sys(NULL, &mount);
    if (r < 0)
        return r;
    if (statvfs(mount, &sv) < 0)
        return -errno;
    return (sv.f_flag & ST_RDONLY) ? -EROFS : 0;
}

int cr_cgroup_rel_visible(const char *rel)
{
    char *path = NULL;
    struct stat st;
    int r = cr_cgroup_path_of(rel, &path);
    if (r < 0)
        return r;
    r = stat(path, &st) < 0 ? -errno : 0;
    free(path);
    return r;
}
