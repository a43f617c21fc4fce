/* corrald's cgroup tree: where worker groups live (<base>/workers/<instance>,
 * locked while this corrald lives), the groups that enclose them and whose
 * limits count as "ancestor", the system's OOM counter, and the removal of
 * groups the kernel is still draining. See cgtree.h. */
#include "cgtree.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "cr_cgroup.h"
#include "instance.h"
#include "log.h"
#include "uvclose.h"

/* The system's OOM-kill counter (/proc/vmstat's oom_kill), read at every
 * spawn and every death. The file stays open; a seq_file hands out at
 * most a page per read, so it is read on from each read's end (the kernel
 * regenerates it from offset 0 on the first) until EOF. 0 when it cannot
 * be read. */
uint64_t cr_cgtree_vmstat_oom_kill(struct cr_cgtree *t)
{
    char buf[32768];
    size_t len = 0;
    if (t->vmstat_fd < 0)
        t->vmstat_fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
    if (t->vmstat_fd < 0)
        return 0;
    while (len < sizeof(buf) - 1) {
        ssize_t n = pread(t->vmstat_fd, buf + len, sizeof(buf) - 1 - len, (off_t)len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    const char *p = strstr(buf, "\noom_kill ");
    return p ? strtoull(p + strlen("\noom_kill "), NULL, 10) : 0;
}

static char *join(const char *a, const char *b)
{
    char *s = NULL;
    if (asprintf(&s, "%s/%s", strcmp(a, "/") == 0 ? "" : a, b) < 0)
        return NULL;
    return s;
}

/* Every group that encloses the workers, nearest first, the root of the
 * hierarchy only when it has a limit (the root of a cgroup namespace is a
 * container's own group): a limit on any of them (a test's group, a
 * service's MemoryMax=, a container) is an "ancestor limit" for the
 * workers. With --no-cgroups the first is corrald's own group, which the
 * workers share. */
static void setup_ancestors(struct cr_cgtree *t, const char *rel)
{
    struct cr_cgroup **v = NULL;
    size_t n = 0;
    int r = cr_cgroup_enclosing(NULL, CR_CGROUP_NONE, rel, true, &v, &n);
    if (r < 0) {
        cr_log(CR_LOG_WARNING, "cannot open the groups enclosing %s: %s", rel, strerror(-r));
        return;
    }
    t->ancestors = v;
    t->nancestors = n;
    for (size_t i = 0; i < n; i++) {
        uint64_t max = 0;
        /* Read at every spawn and every death: preads, no path walks. */
        cr_cgroup_keep_open(v[i]);
        if (cr_cgroup_get_max(v[i], &max) == 0 && max != CR_CGROUP_UNLIMITED && max)
            cr_log(CR_LOG_INFO, "enclosing limit %.1f MiB on %s%s", (double)max / 1048576.0,
                   cr_cgroup_rel(v[i]),
                   strcmp(cr_cgroup_rel(v[i]), "/") == 0 ? " (the root of a cgroup namespace)"
                                                         : "");
    }
}

/* --no-cgroups: no groups are made, but the counters of corrald's own group
 * and the groups above it are still read, so that a container's limit is
 * told from the machine running out of memory. Nothing is required: with no
 * readable memory controller the workers are still supervised. */
static void setup_shared(struct cr_cgtree *t, const struct cr_config *c)
{
    if (c->memory_max)
        cr_log(CR_LOG_NOTICE,
               "--memory-max %.1f MiB without per-worker cgroups: corrald enforces it from each "
               "worker's resident memory (SIGKILL at the limit; read every 25 ms, every 5 ms from half of it)",
               (double)c->memory_max / 1048576.0);
    enum cr_cgroup_layout layout = CR_CGROUP_NONE;
    char *own = NULL;
    if (cr_cgroup_detect(&layout, NULL) < 0 || layout == CR_CGROUP_NONE ||
        cr_cgroup_of_pid(0, &own) < 0) {
        cr_log(CR_LOG_NOTICE, "cgroups disabled (--no-cgroups) and no memory controller to "
                              "read: OOM kills can only be told from /proc/vmstat");
        return;
    }
    t->layout = layout;
    setup_ancestors(t, own);
    cr_log(CR_LOG_NOTICE,
           "cgroups disabled (--no-cgroups): no per-worker cgroups; reading the "
           "OOM counters of %zu enclosing group(s) of %s",
           t->nancestors, own);
    free(own);
}

/* The AppArmor profile confining corrald in enforce mode ("" when none):
 * docker's and containerd's default profiles deny mount, so the remount
 * that would make a container's cgroup mount writable is refused even with
 * CAP_SYS_ADMIN. */
static void apparmor_profile(char *buf, size_t size)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/self/attr/apparmor/current", "re");
    if (!f)
        f = fopen("/proc/self/attr/current", "re");
    if (!f)
        return;
    char line[256] = "";
    if (fgets(line, sizeof line, f) && strstr(line, "(enforce)")) {
        line[strcspn(line, "\n")] = '\0';
        snprintf(buf, size, "%s", line);
    }
    fclose(f);
}

/* Why a worker group could not be made, and the exact fix, in one line. */
static void log_create_failure(const char *wrel, enum cr_cgroup_layout layout, const char *mount,
                               int r)
{
    char aa[256], why[400] = "";
    apparmor_profile(aa, sizeof aa);
    if (aa[0])
        snprintf(why, sizeof why,
                 "; AppArmor profile %s confines corrald and denies the remount even with "
                 "CAP_SYS_ADMIN",
                 aa);
    if (r == -EROFS || cr_cgroup_mount_writable() == -EROFS)
        cr_log(CR_LOG_ERR,
               "cannot create cgroup %s: %s is mounted read-only (a container's default)%s; "
               "routes to writable cgroups: containerd's cgroup_writable runtime option, "
               "CRI-O's io.kubernetes.cri-o.cgroup2-mount-hierarchy-rw annotation, "
               "docker/podman run --cgroupns=private --cap-add SYS_ADMIN with "
               "'mount -o remount,%srw %s' before corrald (corral's image entrypoint does "
               "it); or start corrald with --no-cgroups, where it enforces --memory-max itself",
               wrel, mount, why, layout == CR_CGROUP_V1 ? "bind," : "", mount);
    else
        cr_log(CR_LOG_ERR,
               "cannot create cgroup %s (%s) under %s: %s; run as root, delegate the subtree "
               "(systemd Delegate=yes), or use --no-cgroups",
               wrel, cr_cgroup_layout_to_string(layout), mount, strerror(-r));
}

/* corrald's own group as /proc/self/cgroup names it must exist below the
 * mount. A v1 container that shares the host's cgroup namespace (docker's
 * default on v1) sees a path like /docker/<id> while its mount shows only
 * its own group at the root. */
static int check_visible(const char *base, const char *mount)
{
    int r = cr_cgroup_rel_visible(base);
    if (r == -ENOENT)
        cr_log(CR_LOG_ERR,
               "corrald's cgroup %s is not visible under %s: this container shares the host's "
               "cgroup namespace; fix: docker run --cgroupns=private (podman: "
               "--cgroupns=private), or start corrald with --no-cgroups",
               base, mount);
    return r;
}

int cr_cgtree_default_instance(const char *control_path, char **ret)
{
    /* The same service restarted after a crash must find its own stale
     * groups: the name comes from the absolute path of its control socket
     * (the directory resolved, so ./corral.sock names the same socket
     * from anywhere), never from anything that changes between runs. */
    char dir[PATH_MAX], *abs = NULL;
    const char *slash = strrchr(control_path, '/');
    char *d = slash ? strndup(control_path, (size_t)(slash - control_path)) : strdup(".");
    if (!d)
        return -ENOMEM;
    bool ok = realpath(*d ? d : "/", dir) != NULL;
    free(d);
    if (!ok || asprintf(&abs, "%s/%s", dir, slash ? slash + 1 : control_path) < 0)
        return ok ? -ENOMEM : -errno;
    char name[CR_INSTANCE_DEFAULT_SIZE];
    cr_instance_default_name(abs, name);
    free(abs);
    if (!(*ret = strdup(name)))
        return -ENOMEM;
    return 0;
}

/* This corrald's subtree is its own while it lives: an exclusive flock on
 * the directory itself, released by the kernel however corrald ends (a
 * SIGKILL too), so the next corrald of the same instance may reclaim what
 * is left, and a live one is never shared. The lock is on the cgroup
 * directory, not on a file beside the control socket: two corralds with
 * different control paths but the same --instance must meet here. A
 * directory removed between our open and our lock (its last owner exiting)
 * is made again. */
static int lock_instance(struct cr_cgtree *t, const char *rel, struct cr_cgroup **ret)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        struct cr_cgroup *cg = NULL;
        int r = cr_cgroup_open(rel, true, &cg);
        if (r < 0)
            return r;
        int fd = open(cr_cgroup_fs_path(cg), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
            r = -errno;
            if (fd >= 0)
                close(fd);
            cr_cgroup_free(cg);
            return r == -EWOULDBLOCK ? -EBUSY : r;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(cr_cgroup_fs_path(cg), &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev) {
            t->lock_fd = fd;
            *ret = cg;
            return 0;
        }
        close(fd);
        cr_cgroup_free(cg);
    }
    return -ESTALE;
}

/* <base>/workers is shared by every corrald under one parent; each owns
 * <base>/workers/<instance> and everything below it. */
static int open_instance(struct cr_cgtree *t, const struct cr_config *cfg, const char *wrel,
                         char **ret_irel)
{
    const char *name = cfg->instance;
    char *irel = join(wrel, name);
    if (!irel)
        return -ENOMEM;
    int r = lock_instance(t, irel, &t->workers);
    if (r == -EBUSY)
        cr_log(CR_LOG_ERR,
               "instance '%s' is in use: another live corrald owns cgroup %s; "
               "give this one another --instance (or its own --control path)",
               name, irel);
    else if (r < 0)
        cr_log(CR_LOG_ERR, "cannot take cgroup %s for instance '%s': %s", irel, name, strerror(-r));
    if (r < 0) {
        free(irel);
        return r;
    }
    *ret_irel = irel;
    return 0;
}

/* systemd-oomd, where a unit above corrald has ManagedOOMMemoryPressure=
 * kill, picks a leaf group to kill among the unit's: never corrald's own
 * (user.oomd_omit), whose death would take every worker with it; a worker's
 * group it may kill, and the death is then classified oom-userspace. A
 * file system without user xattrs (a kernel before 5.7) leaves it to
 * oomd's own choice, said once. */
static void omit_from_oomd(const char *leaf)
{
    struct cr_cgroup *cg = NULL;
    int r = cr_cgroup_open(leaf, false, &cg);
    if (r == 0)
        r = cr_cgroup_set_xattr(cg, "user.oomd_omit", "1");
    cr_cgroup_free(cg);
    if (r < 0)
        cr_log(CR_LOG_INFO, "cannot mark %s user.oomd_omit for systemd-oomd: %s", leaf,
               strerror(-r));
}

/* cgroup v2 allows no processes in a group whose children have controllers
 * enabled: corrald moves itself into a leaf of its own group first. */
static int enter_leaf(const char *base, const char *mount)
{
    char *leaf = NULL;
    int r = cr_cgroup_delegate_setup(base, "supervisor", &leaf);
    if (r < 0 && (r == -EROFS || cr_cgroup_mount_writable() == -EROFS)) {
        log_create_failure(base, CR_CGROUP_V2, mount, -EROFS);
        return -EROFS;
    }
    if (r < 0) {
        cr_log(CR_LOG_ERR, "cgroup v2 delegation of %s failed: %s (is Delegate=yes set?)", base,
               strerror(-r));
        return r;
    }
    cr_log(CR_LOG_INFO, "moved corrald into %s", leaf);
    omit_from_oomd(leaf);
    free(leaf);
    return 0;
}

/* <base>/workers (shared by every corrald under the parent) and this
 * corrald's own <base>/workers/<instance>, locked, with the memory
 * controller enabled below both on v2. */
static int make_workers(struct cr_cgtree *t, const struct cr_config *cfg,
                        enum cr_cgroup_layout layout, const char *mount, char **ret_wrel)
{
    char *shared = join(t->base, "workers"), *wrel = NULL;
    struct cr_cgroup *probe = NULL;
    int r = shared ? cr_cgroup_open(shared, true, &probe) : -ENOMEM;
    cr_cgroup_free(probe);
    if (r < 0) {
        log_create_failure(shared ? shared : "workers", layout, mount, r);
        free(shared);
        return r;
    }
    if (layout == CR_CGROUP_V2 && ((r = cr_cgroup_enable_subtree(t->base)) < 0 ||
                                   (r = cr_cgroup_enable_subtree(shared)) < 0)) {
        cr_log(CR_LOG_ERR, "cannot enable the memory controller below %s: %s", shared,
               strerror(-r));
        free(shared);
        return r;
    }
    r = open_instance(t, cfg, shared, &wrel);
    free(shared);
    if (r < 0)
        return r;
    if (layout == CR_CGROUP_V2 && (r = cr_cgroup_enable_subtree(wrel)) < 0) {
        cr_log(CR_LOG_ERR, "cannot enable the memory controller below %s: %s", wrel, strerror(-r));
        free(wrel);
        return r;
    }
    *ret_wrel = wrel;
    return 0;
}

int cr_cgtree_setup(struct cr_cgtree *t, uv_loop_t *loop, const struct cr_config *cfg)
{
    const struct cr_config *c = cfg;
    *t = (struct cr_cgtree){.lock_fd = -1, .vmstat_fd = -1};
    uv_timer_init(loop, &t->trash_timer);
    t->trash_timer.data = t;
    if (c->no_cgroups) {
        setup_shared(t, c);
        return 0;
    }
    enum cr_cgroup_layout layout;
    char *mount = NULL;
    int r = cr_cgroup_detect(&layout, &mount);
    if (r < 0 || layout == CR_CGROUP_NONE) {
        cr_log(CR_LOG_ERR,
               "no cgroup memory controller found (%s); fix: mount the memory "
               "controller (in a container: do not mask /sys/fs/cgroup), or start "
               "corrald with --no-cgroups to supervise without per-worker limits",
               r < 0 ? strerror(-r) : "none mounted");
        free(mount);
        return r < 0 ? r : -ENOTSUP;
    }
    t->layout = layout;

    char *base = NULL;
    if (c->cgroup_parent) {
        base = strdup(c->cgroup_parent);
        struct cr_cgroup *probe = NULL;
        /* A parent corrald makes is a parent corrald removes. */
        t->base_created = cr_cgroup_open(c->cgroup_parent, false, &probe) < 0;
        cr_cgroup_free(probe);
    } else if ((r = cr_cgroup_of_pid(0, &base)) < 0) {
        cr_log(CR_LOG_ERR, "cannot find corrald's own cgroup: %s", strerror(-r));
        free(mount);
        return r;
    }
    if (!c->cgroup_parent && (r = check_visible(base, mount)) < 0)
        goto fail;
    if (layout == CR_CGROUP_V2 && !c->cgroup_parent && (r = enter_leaf(base, mount)) < 0)
        goto fail;
    t->base = base;
    base = NULL;
    char *wrel = NULL;
    if ((r = make_workers(t, cfg, layout, mount, &wrel)) < 0)
        goto fail;
    unsigned removed = 0, left = 0, killed = 0;
    /* A corrald killed with SIGKILL could not stop what its workers
     * started (PDEATHSIG reaches the workers only): their groups are the
     * list of what is left. Kill it before reclaiming the groups. */
    if (cr_cgroup_kill_stale(wrel, "w", 1000, &killed) == 0 && killed)
        cr_log(CR_LOG_WARNING, "killed %u process(es) left in stale worker cgroups under %s",
               killed, wrel);
    if (cr_cgroup_kill_stale(wrel, "s", 1000, &killed) == 0 && killed)
        cr_log(CR_LOG_WARNING, "killed %u spare(s) left in stale cgroups under %s", killed, wrel);
    if (cr_cgroup_reclaim_stale(wrel, "s", &removed, &left) == 0 && (removed || left))
        cr_log(CR_LOG_NOTICE, "reclaimed %u stale spare cgroup(s) under %s", removed, wrel);
    if (cr_cgroup_reclaim_stale(wrel, "w", &removed, &left) == 0 && (removed || left))
        cr_log(CR_LOG_NOTICE, "reclaimed %u stale worker cgroup(s) under %s%s", removed, wrel,
               left ? " (some still hold processes and were left)" : "");
    cr_log(CR_LOG_INFO, "instance %s: worker cgroups under %s (%s at %s)", cfg->instance, wrel,
           cr_cgroup_layout_to_string(layout), mount);
    setup_ancestors(t, wrel);
    free(wrel);
    free(mount);
    t->on = true;
    return 0;
fail:
    free(base);
    free(mount);
    return r < 0 ? r : -EIO;
}

struct cr_oom_delta cr_cgtree_delta(const struct cr_cgroup_events *e)
{
    return (struct cr_oom_delta){.max = e->max, .oom = e->oom, .oom_kill = e->oom_kill};
}

struct cr_oom_delta cr_cgtree_delta_sub(struct cr_oom_delta a, struct cr_oom_delta b)
{
    return (struct cr_oom_delta){
        .max = a.max >= b.max ? a.max - b.max : 0,
        .oom = a.oom >= b.oom ? a.oom - b.oom : 0,
        .oom_kill = a.oom_kill >= b.oom_kill ? a.oom_kill - b.oom_kill : 0,
    };
}

/* Sum of the ancestors' own-level counters. */
struct cr_oom_delta cr_cgtree_ancestors_now(struct cr_cgtree *t)
{
    struct cr_oom_delta sum = {0};
    for (size_t i = 0; i < t->nancestors; i++) {
        struct cr_cgroup_events e = {0};
        if (cr_cgroup_read_events(t->ancestors[i], true, &e) == 0) {
            sum.max += e.max;
            sum.oom += e.oom;
            sum.oom_kill += e.oom_kill;
        }
    }
    return sum;
}

/* --no-cgroups with readable counters: the workers share corrald's own
 * group, the first of the enclosing groups. */
struct cr_cgroup *cr_cgtree_shared(const struct cr_cgtree *t)
{
    return !t->on && t->nancestors ? t->ancestors[0] : NULL;
}

/* The ancestor nearest the worker whose limit is set and was reached: its
 * limit counters moved, or its peak sits at the limit (on v1 with a memsw
 * limit, failcnt does not move on an OOM kill). */
struct cr_cgroup *cr_cgtree_limited_ancestor(struct cr_cgtree *t, uint64_t *ret_limit)
{
    for (size_t i = 0; i < t->nancestors; i++) {
        uint64_t max = 0, peak = 0;
        struct cr_cgroup_events e = {0};
        struct cr_cgroup *a = t->ancestors[i];
        if (cr_cgroup_get_max(a, &max) < 0 || max == CR_CGROUP_UNLIMITED || max == 0)
            continue;
        bool hit = cr_cgroup_read_events(a, true, &e) == 0 && (e.max || e.oom);
        if (!hit && cr_cgroup_read_peak(a, &peak) == 0)
            hit = peak + (max / 100 > (256u << 10) ? max / 100 : (256u << 10)) >= max;
        if (hit) {
            *ret_limit = max;
            return a;
        }
    }
    return NULL;
}

uint64_t cr_cgtree_enclosing_limit(const struct cr_cgtree *t, const char **ret_group,
                                   bool *ret_oom_group)
{
    uint64_t best = 0;
    size_t at = 0;
    for (size_t i = 0; i < t->nancestors; i++) {
        uint64_t max = 0;
        if (cr_cgroup_get_max(t->ancestors[i], &max) == 0 && max && max != CR_CGROUP_UNLIMITED &&
            (!best || max < best))
            best = max, at = i;
    }
    /* The kernel kills as a group at the topmost group with oom.group
     * set between the victim and the group whose limit was hit. */
    bool group = false;
    for (size_t i = 0; ret_oom_group && best && i <= at; i++) {
        bool g = false;
        if (cr_cgroup_get_oom_group(t->ancestors[i], &g) == 0 && g)
            group = true;
    }
    if (ret_group)
        *ret_group = best ? cr_cgroup_rel(t->ancestors[at]) : NULL;
    if (ret_oom_group)
        *ret_oom_group = group;
    return best;
}

uint64_t cr_cgtree_memory_share(const struct cr_cgtree *t, const struct cr_config *c,
                                unsigned workers)
{
    uint64_t enc = cr_cgtree_enclosing_limit(t, NULL, NULL);
    uint64_t share = enc / (workers ? workers : 1);
    return c->memory_max && (!share || c->memory_max < share) ? c->memory_max : share;
}

uint64_t cr_cgtree_heap_limit(const struct cr_cgtree *t, const struct cr_config *c,
                              unsigned workers)
{
    uint64_t lim = cr_cgtree_memory_share(t, c, workers);
    return lim - lim / 100 * c->heap_headroom_pct;
}

static void on_trash_timer(uv_timer_t *timer)
{
    struct cr_cgtree *t = timer->data;
    size_t keep = 0;
    for (size_t i = 0; i < t->ntrash; i++) {
        struct cr_cgroup *cg = t->trash[i];
        /* Kill again first: on v1 a process forked after the release's
         * kill would keep the group busy for good. */
        (void)cr_cgroup_kill(cg, SIGKILL, NULL);
        if (cr_cgroup_remove(cg, 0) == 0)
            cr_cgroup_free(cg);
        else
            t->trash[keep++] = cg;
    }
    t->ntrash = keep;
    if (!keep)
        uv_timer_stop(timer);
}

void cr_cgtree_trash(struct cr_cgtree *t, struct cr_cgroup *cg)
{
    if (cr_cgroup_remove(cg, 0) == 0) {
        cr_cgroup_free(cg);
        return;
    }
    /* The kernel may hold an emptied group for a moment: retry from a
     * timer, never by blocking the loop. */
    struct cr_cgroup **n = realloc(t->trash, (t->ntrash + 1) * sizeof(*n));
    if (!n) {
        cr_cgroup_free(cg);
        return;
    }
    t->trash = n;
    t->trash[t->ntrash++] = cg;
    if (!uv_is_active((uv_handle_t *)&t->trash_timer))
        uv_timer_start(&t->trash_timer, on_trash_timer, 50, 100);
}

const char *cr_cgtree_workers_rel(const struct cr_cgtree *t)
{
    return t->workers ? cr_cgroup_rel(t->workers) : NULL;
}

char *cr_cgtree_worker_rel(const struct cr_cgtree *t, const char *name)
{
    return t->workers ? join(cr_cgroup_rel(t->workers), name) : NULL;
}

void cr_cgtree_stop(struct cr_cgtree *t)
{
    cr_uv_close((uv_handle_t *)&t->trash_timer);
}

void cr_cgtree_done(struct cr_cgtree *t)
{
    if (t->vmstat_fd >= 0)
        close(t->vmstat_fd);
    t->vmstat_fd = -1;
    for (size_t i = 0; i < t->ntrash; i++) {
        cr_cgroup_remove(t->trash[i], 1000);
        cr_cgroup_free(t->trash[i]);
    }
    free(t->trash);
    t->trash = NULL;
    t->ntrash = 0;
    for (size_t i = 0; i < t->nancestors; i++)
        cr_cgroup_free(t->ancestors[i]);
    free(t->ancestors);
    t->ancestors = NULL;
    t->nancestors = 0;
    if (t->workers) {
        cr_cgroup_remove(t->workers, 1000);
        /* The shared <base>/workers goes with the last instance under it:
         * rmdir refuses while another instance's subtree is there. */
        char *shared = join(t->base, "workers");
        struct cr_cgroup *cg = NULL;
        if (shared && cr_cgroup_open(shared, false, &cg) == 0)
            cr_cgroup_remove(cg, 0);
        cr_cgroup_free(cg);
        free(shared);
        /* The lock goes last: the subtree is ours until it is gone. */
        if (t->lock_fd >= 0)
            close(t->lock_fd);
        t->lock_fd = -1;
    }
    t->workers = cr_cgroup_free(t->workers);
    if (t->base_created) {
        struct cr_cgroup *base = NULL;
        if (cr_cgroup_open(t->base, false, &base) == 0)
            cr_cgroup_remove(base, 1000);
        cr_cgroup_free(base);
    }
    free(t->base);
    t->base = NULL;
}
