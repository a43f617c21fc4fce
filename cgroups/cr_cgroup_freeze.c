/* cr_freezer: stopping a whole group and resuming it where it stopped —
 * cgroup v2's cgroup.freeze in the worker's own memory group, or a group of
 * the v1 freezer hierarchy that holds the same process. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libcgroup.h>

#include "cr_cgroup_internal.h"

struct cr_freezer {
    enum cr_freezer_kind kind;
    char *rel;  /* v1: rel in the freezer hierarchy; v2: the memory group's rel */
    char *path; /* the group's directory */
};

static const char *const kind_names[_CR_FREEZER_KIND_MAX] = {
    [CR_FREEZER_NONE] = "none",
    [CR_FREEZER_V1] = "v1-freezer",
    [CR_FREEZER_V2] = "cgroup.freeze",
};

const char *cr_freezer_kind_to_string(enum cr_freezer_kind k)
{
    return (unsigned)k < _CR_FREEZER_KIND_MAX ? kind_names[k] : "?";
}

/* The v1 freezer mount, looked up once through libcgroup. */
static int v1_mount(const char **ret)
{
    static char *mnt;
    static int rc = 1;
    if (rc == 1) {
        rc = cr_cgroup_sys(NULL, NULL);
        if (rc == 0 || rc == -ENODEV) {
            char *m = NULL;
            rc = cr_cgroup_errno(cgroup_get_subsys_mount_point("freezer", &m));
            if (rc == 0 && !m)
                rc = -ENODEV;
            mnt = m;
        }
        if (rc == -ENOENT)
            rc = -ENODEV;
    }
    *ret = mnt;
    return rc;
}

int cr_freezer_detect(enum cr_freezer_kind *ret)
{
    enum cr_cgroup_layout l = CR_CGROUP_NONE;
    const char *mnt;
    int r = cr_cgroup_sys(&l, NULL);
    if (r < 0 && r != -ENODEV)
        return r;
    if (l == CR_CGROUP_V2)
        *ret = CR_FREEZER_V2;
    else
        *ret = v1_mount(&mnt) == 0 ? CR_FREEZER_V1 : CR_FREEZER_NONE;
    return 0;
}

int cr_freezer_parse_proc_cgroup(const char *text, char **ret_rel)
{
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2) {
            /* The controller list between the colons, comma-separated. */
            for (const char *p = c1 + 1; p < c2;) {
                const char *comma = memchr(p, ',', (size_t)(c2 - p));
                const char *end = comma ? comma : c2;
                if ((size_t)(end - p) == 7 && memcmp(p, "freezer", 7) == 0) {
                    char *rel = strndup(c2 + 1, len - (size_t)(c2 + 1 - line));
                    if (!rel)
                        return -ENOMEM;
                    *ret_rel = rel;
                    return 0;
                }
                p = end + 1;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

int cr_freezer_own_rel(char **ret_rel)
{
    char text[4096];
    int r = cr_cgroup_read_file("/proc/self", "cgroup", text, sizeof text);
    return r < 0 ? r : cr_freezer_parse_proc_cgroup(text, ret_rel);
}

static int v1_create(const char *rel)
{
    struct cgroup *lcg = cgroup_new_cgroup(rel);
    int r = -ENOMEM;
    if (!lcg)
        return -ENOMEM;
    /* libcgroup mkdir -p's the path in the freezer hierarchy only. */
    if (cgroup_add_controller(lcg, "freezer"))
        r = cr_cgroup_errno(cgroup_create_cgroup(lcg, 0));
    cgroup_free(&lcg);
    return r;
}

int cr_freezer_open(const struct cr_cgroup *cg, const char *rel, bool create,
                    struct cr_freezer **ret)
{
    enum cr_freezer_kind k;
    const char *mnt = NULL;
    int r = cr_freezer_detect(&k);
    if (r < 0)
        return r;
    if (k == CR_FREEZER_NONE || (k == CR_FREEZER_V2 && !cg) || (k == CR_FREEZER_V1 && !rel))
        return k == CR_FREEZER_NONE ? -ENODEV : -EINVAL;
    struct cr_freezer *f = calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->kind = k;
    if (k == CR_FREEZER_V2) {
        f->rel = strdup(cg->rel);
        f->path = strdup(cg->path);
        r = !f->rel || !f->path ? -ENOMEM
            : cr_cgroup_has_file(f->path, "cgroup.freeze") ? 0 : -EOPNOTSUPP;
    } else if (rel[0] != '/' || strstr(rel, "/..") || strstr(rel, "//")) {
        r = -EINVAL;
    } else if ((r = v1_mount(&mnt)) == 0) {
        f->rel = strdup(rel);
        if (!f->rel || asprintf(&f->path, "%s%s", mnt, strcmp(rel, "/") ? rel : "") < 0) {
            f->path = NULL;
            r = -ENOMEM;
        } else if (access(f->path, F_OK) < 0) {
            r = errno == ENOENT && create ? v1_create(rel) : -errno;
        }
    }
    if (r < 0) {
        cr_freezer_free(f);
        return r;
    }
    *ret = f;
    return 0;
}

struct cr_freezer *cr_freezer_free(struct cr_freezer *f)
{
    if (f) {
        free(f->rel);
        free(f->path);
        free(f);
    }
    return NULL;
}

enum cr_freezer_kind cr_freezer_kind(const struct cr_freezer *f)
{
    return f->kind;
}

const char *cr_freezer_rel(const struct cr_freezer *f)
{
    return f->rel;
}

int cr_freezer_attach(struct cr_freezer *f, pid_t pid)
{
    char buf[32];
    if (!f || pid <= 0)
        return -EINVAL;
    if (f->kind == CR_FREEZER_V2)
        return 0; /* the memory group is the freezer group */
    snprintf(buf, sizeof buf, "%d", (int)pid);
    return cr_cgroup_write_file(f->path, "cgroup.procs", buf);
}

int cr_freezer_set(struct cr_freezer *f, bool frozen)
{
    if (!f)
        return -EINVAL;
    if (f->kind == CR_FREEZER_V2)
        return cr_cgroup_write_file(f->path, "cgroup.freeze", frozen ? "1" : "0");
    return cr_cgroup_write_file(f->path, "freezer.state", frozen ? "FROZEN" : "THAWED");
}

int cr_freezer_parse_state(enum cr_freezer_kind k, const char *text, enum cr_freeze_state *ret)
{
    if (k == CR_FREEZER_V1) {
        static const char *const names[] = {"THAWED", "FREEZING", "FROZEN"};
        for (int i = 0; i < 3; i++)
            if (strncmp(text, names[i], strlen(names[i])) == 0 &&
                (text[strlen(names[i])] == '\n' || text[strlen(names[i])] == '\0')) {
                *ret = (enum cr_freeze_state)i;
                return 0;
            }
        return -EINVAL;
    }
    /* v2 cgroup.events: "populated N\nfrozen N\n". cgroup.freeze itself
     * says only what was asked; "frozen 1" says it is done. */
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, "frozen ", 7) == 0) {
            *ret = p[7] == '1' ? CR_FREEZE_FROZEN : CR_FREEZE_THAWED;
            return 0;
        }
    return -EINVAL;
}

int cr_freezer_state(struct cr_freezer *f, enum cr_freeze_state *ret)
{
    char text[256];
    if (!f)
        return -EINVAL;
    int r = cr_cgroup_read_file(f->path, f->kind == CR_FREEZER_V2 ? "cgroup.events" : "freezer.state",
                                text, sizeof text);
    if (r < 0)
        return r;
    r = cr_freezer_parse_state(f->kind, text, ret);
    if (r == 0 && f->kind == CR_FREEZER_V2 && *ret == CR_FREEZE_THAWED) {
        /* Asked to freeze but not there yet reads as freezing. */
        if (cr_cgroup_read_file(f->path, "cgroup.freeze", text, sizeof text) == 0 && text[0] == '1')
            *ret = CR_FREEZE_FREEZING;
    }
    return r;
}

int cr_freezer_remove(struct cr_freezer *f)
{
    if (!f)
        return -EINVAL;
    if (f->kind == CR_FREEZER_V2)
        return 0; /* the memory group's owner removes it */
    if (rmdir(f->path) < 0 && errno != ENOENT)
        return errno == ENOTEMPTY ? -EBUSY : -errno;
    return 0;
}

/* Thaws, kills and removes one stale v1 group: frozen tasks do not die
 * of a pending SIGKILL until thawed. Blocks up to 1 s. */
static int reclaim_one(const char *dir, unsigned *killed)
{
    char text[8192];
    cr_cgroup_write_file(dir, "freezer.state", "THAWED");
    if (cr_cgroup_read_file(dir, "cgroup.procs", text, sizeof text) == 0)
        for (char *p = text; *p;) {
            char *end;
            long pid = strtol(p, &end, 10);
            if (end == p)
                break;
            if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
                (*killed)++;
            p = *end ? end + 1 : end;
        }
    /* The killed tasks leave the group as they exit: up to 1 s (start-up
     * only), in 5 ms steps. */
    for (int i = 0; i < 200; i++) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY && errno != ENOTEMPTY)
            break;
        nanosleep(&(struct timespec){.tv_nsec = 5 * 1000 * 1000}, NULL);
    }
    return -errno;
}

int cr_freezer_reclaim_v1(const char *parent_rel, const char *prefix, unsigned *ret_killed,
                          unsigned *ret_left)
{
    const char *mnt;
    char *path = NULL;
    unsigned killed = 0, left = 0;
    int r = v1_mount(&mnt);
    if (r < 0)
        return r;
    if (asprintf(&path, "%s%s", mnt, strcmp(parent_rel, "/") ? parent_rel : "") < 0)
        return -ENOMEM;
    DIR *d = opendir(path);
    if (!d) {
        r = -errno;
        free(path);
        return r;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_type == DT_DIR && strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            /* "<prefix><pid>": only a group whose owner is gone is stale. */
            char *end;
            long owner = strtol(e->d_name + strlen(prefix), &end, 10);
            if (*end || owner <= 0 || kill((pid_t)owner, 0) == 0 || errno != ESRCH)
                continue;
            char *sub = NULL;
            if (asprintf(&sub, "%s/%s", path, e->d_name) < 0)
                continue;
            /* One level of children (the spares), then the group itself. */
            DIR *sd = opendir(sub);
            struct dirent *se;
            while (sd && (se = readdir(sd)))
                if (se->d_type == DT_DIR && se->d_name[0] != '.') {
                    char *leaf = NULL;
                    if (asprintf(&leaf, "%s/%s", sub, se->d_name) >= 0 &&
                        reclaim_one(leaf, &killed) < 0)
                        left++;
                    free(leaf);
                }
            if (sd)
                closedir(sd);
            if (reclaim_one(sub, &killed) < 0)
                left++;
            free(sub);
        }
    closedir(d);
    free(path);
    if (ret_killed)
        *ret_killed = killed;
    if (ret_left)
        *ret_left = left;
    return 0;
}
