/* corrald's use of the cgroups library: where worker groups live, their
 * limits, the OOM counters read as deltas across each worker's life, and
 * the removal of groups the kernel is still draining. */
#include "cgsetup.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "history.h"
#include "instance.h"
#include "log.h"

/* The system's OOM-kill counter (/proc/vmstat's oom_kill), read at every
 * spawn and every death. The file stays open; a seq_file hands out at
 * most a page per read, so it is read on from each read's end (the kernel
 * regenerates it from offset 0 on the first) until EOF. 0 when it cannot
 * be read. */
static uint64_t vmstat_oom_kill(struct cr_supervisor *sup)
{
    char buf[32768];
    size_t len = 0;
    if (sup->vmstat_fd < 0)
        sup->vmstat_fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC);
    if (sup->vmstat_fd < 0)
        return 0;
    while (len < sizeof(buf) - 1) {
        ssize_t n = pread(sup->vmstat_fd, buf + len, sizeof(buf) - 1 - len, (off_t)len);
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
static void setup_ancestors(struct cr_supervisor *sup, const char *rel)
{
    struct cr_cgroup **v = NULL;
    size_t n = 0;
    int r = cr_cgroup_enclosing(NULL, CR_CGROUP_NONE, rel, true, &v, &n);
    if (r < 0) {
        cr_log(CR_LOG_WARNING, "cannot open the groups enclosing %s: %s", rel, strerror(-r));
        return;
    }
    sup->cg_ancestors = v;
    sup->cg_nancestors = n;
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
static void setup_shared(struct cr_supervisor *sup)
{
    enum cr_cgroup_layout layout = CR_CGROUP_NONE;
    char *own = NULL;
    if (cr_cgroup_detect(&layout, NULL) < 0 || layout == CR_CGROUP_NONE ||
        cr_cgroup_of_pid(0, &own) < 0) {
        cr_log(CR_LOG_NOTICE, "cgroups disabled (--no-cgroups) and no memory controller to "
                              "read: OOM kills can only be told from /proc/vmstat");
        return;
    }
    sup->cg_layout = layout;
    setup_ancestors(sup, own);
    cr_log(CR_LOG_NOTICE, "cgroups disabled (--no-cgroups): no per-worker limits; reading the "
                          "OOM counters of %zu enclosing group(s) of %s",
           sup->cg_nancestors, own);
    free(own);
}

/* Why a worker group could not be made, and the exact fix, in one line. */
static void log_create_failure(const char *wrel, enum cr_cgroup_layout layout, const char *mount,
                               int r)
{
    if (r == -EROFS || cr_cgroup_mount_writable() == -EROFS)
        cr_log(CR_LOG_ERR,
               "cannot create cgroup %s: %s is mounted read-only (a container's default); "
               "fix: docker/podman run --cgroupns=private --cap-add SYS_ADMIN, with "
               "'mount -o remount,%srw %s' before corrald (corral's image entrypoint does "
               "it), or start corrald with --no-cgroups",
               wrel, mount, layout == CR_CGROUP_V1 ? "bind," : "", mount);
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

/* Which container engine, if any, from the marks engines leave: docker's
 * /.dockerenv, podman's /run/.containerenv, the container= variable
 * (podman, systemd-nspawn, LXC). NULL: none found. */
static const char *container_engine(void)
{
    const char *env = getenv("container");
    if (access("/.dockerenv", F_OK) == 0)
        return "docker";
    if (access("/run/.containerenv", F_OK) == 0)
        return "podman";
    return env && *env ? env : NULL;
}

/* The engines' default grace between SIGTERM and SIGKILL is 10 s (docker
 * stop, podman stop, Kubernetes terminationGracePeriodSeconds 30 s): as
 * PID 1 the default drain must end before that, or every stop ends in the
 * engine's SIGKILL with requests still in flight. */
#define CR_PID1_STOP_TIMEOUT_MS 8000
#define CR_DEFAULT_STOP_TIMEOUT_MS 10000

static void log_environment(struct cr_supervisor *sup)
{
    const char *engine = container_engine();
    bool pid1 = getpid() == 1;
    if (!pid1 && !engine)
        return;
    cr_log(CR_LOG_NOTICE, "corrald runs %s%s%s", pid1 ? "as PID 1" : "",
           pid1 && engine ? " " : "", engine ? "in a container" : "");
    if (engine)
        cr_log(CR_LOG_INFO, "container engine: %s", engine);
    if (pid1 && sup->cfg.stop_timeout_ms == CR_DEFAULT_STOP_TIMEOUT_MS) {
        sup->cfg.stop_timeout_ms = CR_PID1_STOP_TIMEOUT_MS;
        cr_log(CR_LOG_NOTICE, "as PID 1 the default stop timeout is %u s, inside the engines' "
                              "10 s grace; raise both together (--stop-timeout and docker/podman "
                              "stop -t, or terminationGracePeriodSeconds)",
               CR_PID1_STOP_TIMEOUT_MS / 1000);
    }
}

int cr_cg_default_instance(const char *control_path, char **ret)
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
static int lock_instance(struct cr_supervisor *sup, const char *rel, struct cr_cgroup **ret)
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
            sup->cg_lock_fd = fd;
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
static int open_instance(struct cr_supervisor *sup, const char *wrel, char **ret_irel)
{
    const char *name = sup->cfg.instance;
    char *irel = join(wrel, name);
    if (!irel)
        return -ENOMEM;
    int r = lock_instance(sup, irel, &sup->cg_workers);
    if (r == -EBUSY)
        cr_log(CR_LOG_ERR, "instance '%s' is in use: another live corrald owns cgroup %s; "
                           "give this one another --instance (or its own --control path)",
               name, irel);
    else if (r < 0)
        cr_log(CR_LOG_ERR, "cannot take cgroup %s for instance '%s': %s", irel, name,
               strerror(-r));
    if (r < 0) {
        free(irel);
        return r;
    }
    *ret_irel = irel;
    return 0;
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
    free(leaf);
    return 0;
}

/* <base>/workers (shared by every corrald under the parent) and this
 * corrald's own <base>/workers/<instance>, locked, with the memory
 * controller enabled below both on v2. */
static int make_workers(struct cr_supervisor *sup, enum cr_cgroup_layout layout,
                        const char *mount, char **ret_wrel)
{
    char *shared = join(sup->cg_base, "workers"), *wrel = NULL;
    struct cr_cgroup *probe = NULL;
    int r = shared ? cr_cgroup_open(shared, true, &probe) : -ENOMEM;
    cr_cgroup_free(probe);
    if (r < 0) {
        log_create_failure(shared ? shared : "workers", layout, mount, r);
        free(shared);
        return r;
    }
    if (layout == CR_CGROUP_V2 && ((r = cr_cgroup_enable_subtree(sup->cg_base)) < 0 ||
                                   (r = cr_cgroup_enable_subtree(shared)) < 0)) {
        cr_log(CR_LOG_ERR, "cannot enable the memory controller below %s: %s", shared,
               strerror(-r));
        free(shared);
        return r;
    }
    r = open_instance(sup, shared, &wrel);
    free(shared);
    if (r < 0)
        return r;
    if (layout == CR_CGROUP_V2 && (r = cr_cgroup_enable_subtree(wrel)) < 0) {
        cr_log(CR_LOG_ERR, "cannot enable the memory controller below %s: %s", wrel,
               strerror(-r));
        free(wrel);
        return r;
    }
    *ret_wrel = wrel;
    return 0;
}

int cr_cg_setup(struct cr_supervisor *sup)
{
    const struct cr_config *c = &sup->cfg;
    log_environment(sup);
    if (c->no_cgroups) {
        setup_shared(sup);
        return 0;
    }
    enum cr_cgroup_layout layout;
    char *mount = NULL;
    int r = cr_cgroup_detect(&layout, &mount);
    if (r < 0 || layout == CR_CGROUP_NONE) {
        cr_log(CR_LOG_ERR, "no cgroup memory controller found (%s); fix: mount the memory "
                           "controller (in a container: do not mask /sys/fs/cgroup), or start "
                           "corrald with --no-cgroups to supervise without per-worker limits",
               r < 0 ? strerror(-r) : "none mounted");
        free(mount);
        return r < 0 ? r : -ENOTSUP;
    }
    sup->cg_layout = layout;

    char *base = NULL;
    if (c->cgroup_parent) {
        base = strdup(c->cgroup_parent);
        struct cr_cgroup *probe = NULL;
        /* A parent corrald makes is a parent corrald removes. */
        sup->cg_base_created = cr_cgroup_open(c->cgroup_parent, false, &probe) < 0;
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
    sup->cg_base = base;
    base = NULL;
    char *wrel = NULL;
    if ((r = make_workers(sup, layout, mount, &wrel)) < 0)
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
    cr_log(CR_LOG_INFO, "instance %s: worker cgroups under %s (%s at %s)", sup->cfg.instance,
           wrel, cr_cgroup_layout_to_string(layout), mount);
    setup_ancestors(sup, wrel);
    free(wrel);
    free(mount);
    sup->cgroups = true;
    return 0;
fail:
    free(base);
    free(mount);
    return r < 0 ? r : -EIO;
}

int cr_cg_worker_create(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    const struct cr_config *c = &sup->cfg;
    char name[48];
    /* Per generation: during a rolling replacement the old and the new
     * process of one slot live side by side, each under its own limit. */
    if (w->id == CR_SPARE_ID) /* a spare's own group, kept when it is promoted */
        snprintf(name, sizeof(name), "s%u", w->generation);
    else
        snprintf(name, sizeof(name), "w%d-%u", w->id, w->generation);
    char *rel = join(cr_cgroup_rel(sup->cg_workers), name);
    if (!rel)
        return -ENOMEM;
    struct cr_cgroup *cg;
    int r = cr_cgroup_open(rel, true, &cg);
    if (r < 0) {
        cr_log(CR_LOG_ERR, "worker %d: cannot create cgroup %s: %s", w->id, rel, strerror(-r));
        free(rel);
        return r;
    }
    free(rel);
    if (c->memory_max && (r = cr_cgroup_set_max(cg, c->memory_max)) < 0) {
        cr_log(CR_LOG_ERR, "worker %d: cannot set memory limit on %s: %s", w->id,
               cr_cgroup_rel(cg), strerror(-r));
        cr_cgroup_remove(cg, 0);
        cr_cgroup_free(cg);
        return r;
    }
    if (c->memory_high && (r = cr_cgroup_set_high(cg, c->memory_high)) < 0 && r != -EOPNOTSUPP)
        cr_log(CR_LOG_WARNING, "worker %d: cannot set memory.high: %s", w->id, strerror(-r));
    w->cg = cg;
    w->cg_limit = c->memory_max;
    w->cg_usage = w->cg_peak = 0;
    return 0;
}

int cr_cg_worker_procs_fd(struct cr_worker *w)
{
    if (!w->cg)
        return -1;
    int fd = cr_cgroup_procs_fd(w->cg);
    if (fd < 0)
        cr_log(CR_LOG_ERR, "worker %d: cannot open %s/cgroup.procs: %s", w->id,
               cr_cgroup_fs_path(w->cg), strerror(-fd));
    return fd;
}

static struct cr_oom_delta to_delta(const struct cr_cgroup_events *e)
{
    return (struct cr_oom_delta){.max = e->max, .oom = e->oom, .oom_kill = e->oom_kill};
}

static struct cr_oom_delta sub(struct cr_oom_delta a, struct cr_oom_delta b)
{
    return (struct cr_oom_delta){
        .max = a.max >= b.max ? a.max - b.max : 0,
        .oom = a.oom >= b.oom ? a.oom - b.oom : 0,
        .oom_kill = a.oom_kill >= b.oom_kill ? a.oom_kill - b.oom_kill : 0,
    };
}

/* Sum of the ancestors' own-level counters. */
static struct cr_oom_delta ancestors_now(struct cr_supervisor *sup)
{
    struct cr_oom_delta sum = {0};
    for (size_t i = 0; i < sup->cg_nancestors; i++) {
        struct cr_cgroup_events e = {0};
        if (cr_cgroup_read_events(sup->cg_ancestors[i], true, &e) == 0) {
            sum.max += e.max;
            sum.oom += e.oom;
            sum.oom_kill += e.oom_kill;
        }
    }
    return sum;
}

/* --no-cgroups with readable counters: the workers share corrald's own
 * group, the first of the enclosing groups. */
static struct cr_cgroup *shared_group(const struct cr_supervisor *sup)
{
    return sup->cfg.no_cgroups && sup->cg_nancestors ? sup->cg_ancestors[0] : NULL;
}

/* Per-ancestor baselines would be exact; the sum is enough to tell "an
 * enclosing limit was hit during this life", and the group that moved is
 * found again at death by comparing with the limit readings. own_now: the
 * worker's own counters read already (by the group's maker, off the loop:
 * no task has been in it since), or NULL to read them here. */
void cr_cg_worker_baseline(struct cr_worker *w, const struct cr_cgroup_events *own_now)
{
    struct cr_supervisor *sup = w->sup;
    struct cr_cgroup *own = w->cg ? w->cg : shared_group(sup);
    w->vmstat_oom0 = vmstat_oom_kill(w->sup);
    w->own0 = (struct cr_oom_delta){0};
    w->anc0 = (struct cr_oom_delta){0};
    if (!own)
        return;
    struct cr_cgroup_events e = {0};
    if (own_now && own == w->cg)
        w->own0 = to_delta(own_now);
    else if (cr_cgroup_read_events(own, true, &e) == 0)
        w->own0 = to_delta(&e);
    w->anc0 = ancestors_now(sup);
}

/* The ancestor nearest the worker whose limit is set and was reached: its
 * limit counters moved, or its peak sits at the limit (on v1 with a memsw
 * limit, failcnt does not move on an OOM kill). */
static struct cr_cgroup *limited_ancestor(struct cr_supervisor *sup, uint64_t *ret_limit)
{
    for (size_t i = 0; i < sup->cg_nancestors; i++) {
        uint64_t max = 0, peak = 0;
        struct cr_cgroup_events e = {0};
        struct cr_cgroup *a = sup->cg_ancestors[i];
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

/* Did the worker die of SIGKILL, directly or as a shell's 137? Only then
 * is the system-wide OOM counter evidence: it moves with every OOM kill on
 * the machine (another container's too). */
static bool died_of_sigkill(const struct cr_death_evidence *ev)
{
    if (ev->cld_code == CLD_EXITED)
        return ev->cld_status == 128 + SIGKILL;
    return ev->cld_status == SIGKILL;
}

static void enclosing_evidence(struct cr_supervisor *sup, struct cr_death_evidence *ev)
{
    if (!(ev->ancestor.max || ev->ancestor.oom || ev->ancestor.oom_kill || ev->own.oom_kill))
        return;
    uint64_t lim = 0, apeak = 0;
    struct cr_cgroup *a = limited_ancestor(sup, &lim);
    if (!a)
        return;
    ev->ancestor_path = cr_cgroup_rel(a);
    ev->ancestor_limit = lim;
    if (cr_cgroup_read_peak(a, &apeak) == 0)
        ev->ancestor_peak = apeak;
}

void cr_cg_worker_evidence(struct cr_worker *w, struct cr_death_evidence *ev,
                           struct cr_postmortem *pm)
{
    struct cr_supervisor *sup = w->sup;
    struct cr_cgroup *shared = w->cg ? NULL : shared_group(sup);
    /* Only a SIGKILL can be the kernel's OOM kill: the other deaths (a
     * drain's exit-clean among them) skip the read of /proc/vmstat, which
     * the kernel regenerates whole on each read. */
    uint64_t sys = died_of_sigkill(ev) ? vmstat_oom_kill(sup) : 0;
    ev->system_oom_kill = sys >= w->vmstat_oom0 ? sys - w->vmstat_oom0 : 0;
    pm->oom_system = ev->system_oom_kill;
    pm->cg_usage = w->cg_usage;
    pm->cg_limit = w->cg_limit;
    if (!w->cg && !shared) {
        ev->cg = CR_DEATH_CG_NONE;
        return;
    }
    ev->cg = sup->cg_layout == CR_CGROUP_V2 ? CR_DEATH_CG_V2 : CR_DEATH_CG_V1;
    struct cr_cgroup_events e = {0};
    if (cr_cgroup_read_events(w->cg ? w->cg : shared, true, &e) == 0)
        ev->own = sub(to_delta(&e), w->own0);
    ev->ancestor = sub(ancestors_now(sup), w->anc0);
    if (!ev->own.oom_kill) {
        /* The kernel counts every OOM kill, the global killer's too, in
         * the victim's own group: with none there, the system counter moved
         * for someone else (another container, another service). */
        ev->system_oom_kill = 0;
        pm->oom_system = 0;
    }
    if (shared) {
        /* The shared group's limit is the container's, not the worker's:
         * only its kill count speaks for the worker; its limit counters
         * are already summed in the ancestors'. */
        ev->own = (struct cr_oom_delta){.oom_kill = ev->own.oom_kill};
        ev->own_shared = true;
        ev->own_path = cr_cgroup_rel(shared);
        enclosing_evidence(sup, ev);
        pm->oom_own = ev->own;
        pm->oom_ancestor = ev->ancestor;
        return;
    }
    ev->own_path = cr_cgroup_rel(w->cg);
    ev->own_limit = w->cg_limit;
    enclosing_evidence(sup, ev);
    pm->oom_own = ev->own;
    pm->oom_ancestor = ev->ancestor;
    uint64_t peak = 0;
    if (cr_cgroup_read_peak(w->cg, &peak) == 0) {
        pm->cg_peak = peak;
        ev->own_peak = peak;
    }
    struct cr_cgroup_stat st = {0};
    if (cr_cgroup_read_stat(w->cg, &st) == 0)
        pm->memstat = (struct cr_postmortem_memstat){st.anon, st.file, st.kernel,
                                                     st.slab, st.sock, st.shmem};
}

/* The tightest enclosing limit, 0 when none. */
static uint64_t enclosing_limit(const struct cr_supervisor *sup)
{
    uint64_t best = 0;
    for (size_t i = 0; i < sup->cg_nancestors; i++) {
        uint64_t max = 0;
        if (cr_cgroup_get_max(sup->cg_ancestors[i], &max) == 0 && max &&
            max != CR_CGROUP_UNLIMITED && (!best || max < best))
            best = max;
    }
    return best;
}

uint64_t cr_cg_heap_limit(const struct cr_supervisor *sup)
{
    const struct cr_config *c = &sup->cfg;
    uint64_t enc = enclosing_limit(sup);
    uint64_t share = enc / (sup->target ? sup->target : 1);
    uint64_t lim = c->memory_max && (!share || c->memory_max < share) ? c->memory_max : share;
    return lim - lim / 100 * c->heap_headroom_pct;
}

static void on_trash_timer(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    size_t keep = 0;
    for (size_t i = 0; i < sup->cg_ntrash; i++) {
        struct cr_cgroup *cg = sup->cg_trash[i];
        /* Kill again first: on v1 a process forked after the release's
         * kill would keep the group busy for good. */
        (void)cr_cgroup_kill(cg, SIGKILL, NULL);
        if (cr_cgroup_remove(cg, 0) == 0)
            cr_cgroup_free(cg);
        else
            sup->cg_trash[keep++] = cg;
    }
    sup->cg_ntrash = keep;
    if (!keep)
        uv_timer_stop(t);
}

void cr_cg_worker_release(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    struct cr_cgroup *cg = w->cg;
    w->cg = NULL;
    if (!cg)
        return;
    /* Nothing a worker started outlives it: its children (PDEATHSIG
     * reaches only the worker itself) would keep the listening socket. */
    unsigned killed = 0;
    if (cr_cgroup_kill(cg, SIGKILL, &killed) == 0 && killed)
        cr_log_event(CR_LOG_NOTICE, "leftovers-killed", w->id, 0, NULL,
                     "worker %d: killed %u process(es) left in its cgroup", w->id, killed);
    if (cr_cgroup_remove(cg, 0) == 0) {
        cr_cgroup_free(cg);
        return;
    }
    /* The kernel may hold an emptied group for a moment: retry from a
     * timer, never by blocking the loop. */
    struct cr_cgroup **n = realloc(sup->cg_trash, (sup->cg_ntrash + 1) * sizeof(*n));
    if (!n) {
        cr_cgroup_free(cg);
        return;
    }
    sup->cg_trash = n;
    sup->cg_trash[sup->cg_ntrash++] = cg;
    if (!uv_is_active((uv_handle_t *)&sup->cg_trash_timer))
        uv_timer_start(&sup->cg_trash_timer, on_trash_timer, 50, 100);
}

void cr_cg_apply_limits(struct cr_supervisor *sup)
{
    const struct cr_config *c = &sup->cfg;
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        if (!w->cg)
            continue;
        int r = cr_cgroup_set_max(w->cg, c->memory_max ? c->memory_max : CR_CGROUP_UNLIMITED);
        if (r < 0)
            cr_log(CR_LOG_WARNING, "worker %d: cannot apply memory-max: %s", w->id, strerror(-r));
        else
            w->cg_limit = c->memory_max;
        if (sup->cg_layout == CR_CGROUP_V2)
            cr_cgroup_set_high(w->cg, c->memory_high ? c->memory_high : CR_CGROUP_UNLIMITED);
    }
}

void cr_cg_done(struct cr_supervisor *sup)
{
    if (sup->vmstat_fd >= 0)
        close(sup->vmstat_fd);
    sup->vmstat_fd = -1;
    for (size_t i = 0; i < sup->cg_ntrash; i++) {
        cr_cgroup_remove(sup->cg_trash[i], 1000);
        cr_cgroup_free(sup->cg_trash[i]);
    }
    free(sup->cg_trash);
    sup->cg_trash = NULL;
    sup->cg_ntrash = 0;
    for (size_t i = 0; i < sup->cg_nancestors; i++)
        cr_cgroup_free(sup->cg_ancestors[i]);
    free(sup->cg_ancestors);
    sup->cg_ancestors = NULL;
    sup->cg_nancestors = 0;
    if (sup->cg_workers) {
        cr_cgroup_remove(sup->cg_workers, 1000);
        /* The shared <base>/workers goes with the last instance under it:
         * rmdir refuses while another instance's subtree is there. */
        char *shared = join(sup->cg_base, "workers");
        struct cr_cgroup *cg = NULL;
        if (shared && cr_cgroup_open(shared, false, &cg) == 0)
            cr_cgroup_remove(cg, 0);
        cr_cgroup_free(cg);
        free(shared);
        /* The lock goes last: the subtree is ours until it is gone. */
        if (sup->cg_lock_fd >= 0)
            close(sup->cg_lock_fd);
        sup->cg_lock_fd = -1;
    }
    sup->cg_workers = cr_cgroup_free(sup->cg_workers);
    if (sup->cg_base_created) {
        struct cr_cgroup *base = NULL;
        if (cr_cgroup_open(sup->cg_base, false, &base) == 0)
            cr_cgroup_remove(base, 1000);
        cr_cgroup_free(base);
    }
    free(sup->cg_base);
    sup->cg_base = NULL;
}
