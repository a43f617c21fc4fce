/* corrald's use of the cgroups library: where worker groups live, their
 * limits, the OOM counters read as deltas across each worker's life, and
 * the removal of groups the kernel is still draining. */
#include "cgsetup.h"
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "history.h"
#include "log.h"

uint64_t cr_vmstat_oom_kill(void)
{
    FILE *f = fopen("/proc/vmstat", "re");
    if (!f)
        return 0;
    char key[64];
    unsigned long long v, found = 0;
    while (fscanf(f, "%63s %llu", key, &v) == 2)
        if (strcmp(key, "oom_kill") == 0) {
            found = v;
            break;
        }
    fclose(f);
    return found;
}

static char *join(const char *a, const char *b)
{
    char *s = NULL;
    if (asprintf(&s, "%s/%s", strcmp(a, "/") == 0 ? "" : a, b) < 0)
        return NULL;
    return s;
}

static int setup_ancestors(struct cr_supervisor *sup)
{
    /* Every enclosing group up to, not including, the root: a limit on any
     * of them (a test's group, a service's MemoryMax=, a container) is an
     * "ancestor limit" for the workers. */
    char *rel = strdup(cr_cgroup_rel(sup->cg_workers));
    while (rel && strcmp(rel, "/") != 0) {
        struct cr_cgroup *cg;
        if (cr_cgroup_open(rel, false, &cg) == 0) {
            struct cr_cgroup **n =
                realloc(sup->cg_ancestors, (sup->cg_nancestors + 1) * sizeof(*n));
            if (!n) {
                cr_cgroup_free(cg);
                break;
            }
            sup->cg_ancestors = n;
            sup->cg_ancestors[sup->cg_nancestors++] = cg;
        }
        char *p = cr_cgroup_parent(rel);
        free(rel);
        rel = p;
    }
    free(rel);
    return 0;
}

int cr_cg_setup(struct cr_supervisor *sup)
{
    const struct cr_config *c = &sup->cfg;
    if (c->no_cgroups) {
        cr_log(CR_LOG_NOTICE, "cgroups disabled (--no-cgroups): no per-worker memory limits");
        return 0;
    }
    enum cr_cgroup_layout layout;
    char *mount = NULL;
    int r = cr_cgroup_detect(&layout, &mount);
    if (r < 0 || layout == CR_CGROUP_NONE) {
        cr_log(CR_LOG_ERR, "no cgroup memory controller found (%s); run with --no-cgroups to "
                           "supervise without memory limits",
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
    if (layout == CR_CGROUP_V2 && !c->cgroup_parent) {
        /* cgroup v2 allows no processes in a group whose children have
         * controllers enabled: corrald moves itself into a leaf first. */
        char *leaf = NULL;
        r = cr_cgroup_delegate_setup(base, "supervisor", &leaf);
        if (r < 0) {
            cr_log(CR_LOG_ERR, "cgroup v2 delegation of %s failed: %s (is Delegate=yes set?)",
                   base, strerror(-r));
            goto fail;
        }
        cr_log(CR_LOG_INFO, "moved corrald into %s", leaf);
        free(leaf);
    }
    sup->cg_base = base;
    base = NULL;
    char *wrel = join(sup->cg_base, "workers");
    r = wrel ? cr_cgroup_open(wrel, true, &sup->cg_workers) : -ENOMEM;
    if (r < 0) {
        cr_log(CR_LOG_ERR, "cannot create cgroup %s (%s) under %s: %s; run as root, delegate "
                           "the subtree, or use --no-cgroups",
               wrel ? wrel : "workers", cr_cgroup_layout_to_string(layout), mount,
               strerror(-r));
        free(wrel);
        goto fail;
    }
    if (layout == CR_CGROUP_V2) {
        if ((r = cr_cgroup_enable_subtree(sup->cg_base)) < 0 ||
            (r = cr_cgroup_enable_subtree(wrel)) < 0) {
            cr_log(CR_LOG_ERR, "cannot enable the memory controller below %s: %s", wrel,
                   strerror(-r));
            free(wrel);
            goto fail;
        }
    }
    unsigned removed = 0, left = 0;
    if (cr_cgroup_reclaim_stale(wrel, "w", &removed, &left) == 0 && (removed || left))
        cr_log(CR_LOG_NOTICE, "reclaimed %u stale worker cgroup(s) under %s%s", removed, wrel,
               left ? " (some still hold processes and were left)" : "");
    cr_log(CR_LOG_INFO, "worker cgroups under %s (%s at %s)", wrel,
           cr_cgroup_layout_to_string(layout), mount);
    free(wrel);
    free(mount);
    setup_ancestors(sup);
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

int cr_cg_attach_cb(void *userdata, pid_t pid)
{
    struct cr_worker *w = userdata;
    return w->cg ? cr_cgroup_attach(w->cg, pid) : 0;
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

/* Per-ancestor baselines would be exact; the sum is enough to tell "an
 * enclosing limit was hit during this life", and the group that moved is
 * found again at death by comparing with the limit readings. */
void cr_cg_worker_baseline(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    w->vmstat_oom0 = cr_vmstat_oom_kill();
    w->own0 = (struct cr_oom_delta){0};
    w->anc0 = (struct cr_oom_delta){0};
    if (!w->cg)
        return;
    struct cr_cgroup_events e = {0};
    if (cr_cgroup_read_events(w->cg, true, &e) == 0)
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

void cr_cg_worker_evidence(struct cr_worker *w, struct cr_death_evidence *ev,
                           struct cr_postmortem *pm)
{
    struct cr_supervisor *sup = w->sup;
    uint64_t sys = cr_vmstat_oom_kill();
    ev->system_oom_kill = sys >= w->vmstat_oom0 ? sys - w->vmstat_oom0 : 0;
    pm->oom_system = ev->system_oom_kill;
    pm->cg_usage = w->cg_usage;
    pm->cg_limit = w->cg_limit;
    if (!w->cg) {
        ev->cg = CR_DEATH_CG_NONE;
        return;
    }
    ev->cg = sup->cg_layout == CR_CGROUP_V2 ? CR_DEATH_CG_V2 : CR_DEATH_CG_V1;
    struct cr_cgroup_events e = {0};
    if (cr_cgroup_read_events(w->cg, true, &e) == 0)
        ev->own = sub(to_delta(&e), w->own0);
    ev->ancestor = sub(ancestors_now(sup), w->anc0);
    ev->own_path = cr_cgroup_rel(w->cg);
    ev->own_limit = w->cg_limit;
    if (ev->ancestor.max || ev->ancestor.oom || ev->ancestor.oom_kill || ev->own.oom_kill) {
        uint64_t lim = 0;
        struct cr_cgroup *a = limited_ancestor(sup, &lim);
        if (a) {
            ev->ancestor_path = cr_cgroup_rel(a);
            ev->ancestor_limit = lim;
            uint64_t apeak = 0;
            if (cr_cgroup_read_peak(a, &apeak) == 0)
                ev->ancestor_peak = apeak;
        }
    }
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

static void on_trash_timer(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    size_t keep = 0;
    for (size_t i = 0; i < sup->cg_ntrash; i++) {
        struct cr_cgroup *cg = sup->cg_trash[i];
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
    if (sup->cg_workers)
        cr_cgroup_remove(sup->cg_workers, 1000);
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
