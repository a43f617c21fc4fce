/* A generation's cgroup: made at its spawn (or ahead, cgprep.c), its OOM
 * counters read as deltas across its life, its evidence at death, its
 * removal. See cgworker.h. */
#include "cgworker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <uv.h>

#include "cgtree.h"
#include "config.h"
#include "cr_cgroup.h"
#include "gen.h"
#include "history.h"
#include "log.h"

int cr_cgworker_create(struct cr_gen *g)
{
    struct cr_cgtree *t = g->host->cgtree;
    const struct cr_config *c = g->host->cfg;
    char name[48];
    /* Per generation: during a rolling replacement the old and the new
     * process of one slot live side by side, each under its own limit. */
    if (g->id == CR_SPARE_ID) /* a spare's own group, kept when it is promoted */
        snprintf(name, sizeof(name), "s%u", g->generation);
    else
        snprintf(name, sizeof(name), "w%d-%u", g->id, g->generation);
    char *rel = cr_cgtree_worker_rel(t, name);
    if (!rel)
        return -ENOMEM;
    struct cr_cgroup *cg;
    int r = cr_cgroup_open(rel, true, &cg);
    if (r < 0) {
        cr_log(CR_LOG_ERR, "worker %d: cannot create cgroup %s: %s", g->id, rel, strerror(-r));
        free(rel);
        return r;
    }
    free(rel);
    if (c->memory_max && (r = cr_cgroup_set_max(cg, c->memory_max)) < 0) {
        cr_log(CR_LOG_ERR, "worker %d: cannot set memory limit on %s: %s", g->id, cr_cgroup_rel(cg),
               strerror(-r));
        cr_cgroup_remove(cg, 0);
        cr_cgroup_free(cg);
        return r;
    }
    if (c->memory_high && (r = cr_cgroup_set_high(cg, c->memory_high)) < 0 && r != -EOPNOTSUPP)
        cr_log(CR_LOG_WARNING, "worker %d: cannot set memory.high: %s", g->id, strerror(-r));
    g->cg.cg = cg;
    g->cg.limit = c->memory_max;
    return 0;
}

int cr_cgworker_procs_fd(struct cr_gen *g)
{
    if (!g->cg.cg)
        return -1;
    int fd = cr_cgroup_procs_fd(g->cg.cg);
    if (fd < 0)
        cr_log(CR_LOG_ERR, "worker %d: cannot open %s/cgroup.procs: %s", g->id,
               cr_cgroup_fs_path(g->cg.cg), strerror(-fd));
    return fd;
}

/* Per-ancestor baselines would be exact; the sum is enough to tell "an
 * enclosing limit was hit during this life", and the group that moved is
 * found again at death by comparing with the limit readings. own_now: the
 * worker's own counters read already (by the group's maker, off the loop:
 * no task has been in it since), or NULL to read them here. */
void cr_cgworker_baseline(struct cr_gen *g, const struct cr_cgroup_events *own_now)
{
    struct cr_cgtree *t = g->host->cgtree;
    struct cr_cgroup *own = g->cg.cg ? g->cg.cg : cr_cgtree_shared(t);
    g->cg.vmstat_oom0 = cr_cgtree_vmstat_oom_kill(t);
    g->cg.own0 = (struct cr_oom_delta){0};
    g->cg.anc0 = (struct cr_oom_delta){0};
    if (!own)
        return;
    struct cr_cgroup_events e = {0};
    if (own_now && own == g->cg.cg)
        g->cg.own0 = cr_cgtree_delta(own_now);
    else if (cr_cgroup_read_events(own, true, &e) == 0)
        g->cg.own0 = cr_cgtree_delta(&e);
    g->cg.anc0 = cr_cgtree_ancestors_now(t);
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

static void enclosing_evidence(struct cr_cgtree *t, struct cr_death_evidence *ev)
{
    if (!(ev->ancestor.max || ev->ancestor.oom || ev->ancestor.oom_kill || ev->own.oom_kill))
        return;
    uint64_t lim = 0, apeak = 0;
    struct cr_cgroup *a = cr_cgtree_limited_ancestor(t, &lim);
    if (!a)
        return;
    ev->ancestor_path = cr_cgroup_rel(a);
    ev->ancestor_limit = lim;
    if (cr_cgroup_read_peak(a, &apeak) == 0)
        ev->ancestor_peak = apeak;
}

void cr_cgworker_evidence(struct cr_gen *g, struct cr_death_evidence *ev, struct cr_postmortem *pm)
{
    struct cr_cgtree *t = g->host->cgtree;
    struct cr_cgroup *shared = g->cg.cg ? NULL : cr_cgtree_shared(t);
    /* Only a SIGKILL can be the kernel's OOM kill: the other deaths (a
     * drain's exit-clean among them) skip the read of /proc/vmstat, which
     * the kernel regenerates whole on each read. */
    uint64_t sys = died_of_sigkill(ev) ? cr_cgtree_vmstat_oom_kill(t) : 0;
    ev->system_oom_kill = sys >= g->cg.vmstat_oom0 ? sys - g->cg.vmstat_oom0 : 0;
    pm->oom_system = ev->system_oom_kill;
    pm->cg_usage = g->mem.cg_usage;
    pm->cg_limit = g->cg.limit;
    if (!g->cg.cg && !shared) {
        ev->cg = CR_DEATH_CG_NONE;
        return;
    }
    ev->cg = t->layout == CR_CGROUP_V2 ? CR_DEATH_CG_V2 : CR_DEATH_CG_V1;
    struct cr_cgroup_events e = {0};
    if (cr_cgroup_read_events(g->cg.cg ? g->cg.cg : shared, true, &e) == 0)
        ev->own = cr_cgtree_delta_sub(cr_cgtree_delta(&e), g->cg.own0);
    ev->ancestor = cr_cgtree_delta_sub(cr_cgtree_ancestors_now(t), g->cg.anc0);
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
        enclosing_evidence(t, ev);
        pm->oom_scope = CR_PM_OOM_KILLS;
        pm->oom_own = ev->own;
        pm->oom_ancestor = ev->ancestor;
        return;
    }
    ev->own_path = cr_cgroup_rel(g->cg.cg);
    ev->own_limit = g->cg.limit;
    /* systemd-oomd kills a whole leaf group and counts it there; a
     * generation's group is new, so any count is this worker's. */
    uint64_t oomd = 0;
    if (died_of_sigkill(ev) && t->layout == CR_CGROUP_V2 &&
        cr_cgroup_get_xattr_u64(g->cg.cg, "user.oomd_kill", &oomd) == 0 && oomd) {
        ev->oomd_kill = oomd;
        ev->oomd_path = ev->own_path;
    }
    enclosing_evidence(t, ev);
    pm->oom_scope = CR_PM_OOM_ALL;
    pm->oom_own = ev->own;
    pm->oom_ancestor = ev->ancestor;
    uint64_t peak = 0;
    if (cr_cgroup_read_peak(g->cg.cg, &peak) == 0) {
        pm->cg_peak = peak;
        ev->own_peak = peak;
    }
    struct cr_cgroup_stat st = {0};
    if ((pm->memstat_read = cr_cgroup_read_stat(g->cg.cg, &st) == 0))
        pm->memstat =
            (struct cr_postmortem_memstat){st.anon, st.file, st.kernel, st.slab, st.sock, st.shmem};
}

void cr_cgworker_release(struct cr_gen *g)
{
    struct cr_cgtree *t = g->host->cgtree;
    struct cr_cgroup *cg = g->cg.cg;
    g->cg.cg = NULL;
    if (!cg)
        return;
    /* Nothing a worker started outlives it: its children (PDEATHSIG
     * reaches only the worker itself) would keep the listening socket. */
    unsigned killed = 0;
    if (cr_cgroup_kill(cg, SIGKILL, &killed) == 0 && killed)
        cr_log_event(CR_LOG_NOTICE, "leftovers-killed", g->id, 0, NULL,
                     "worker %d: killed %u process(es) left in its cgroup", g->id, killed);
    cr_cgtree_trash(t, cg);
}

void cr_cgworker_apply_limits(struct cr_gen *g)
{
    const struct cr_config *c = g->host->cfg;
    if (!g->cg.cg)
        return;
    int r = cr_cgroup_set_max(g->cg.cg, c->memory_max ? c->memory_max : CR_CGROUP_UNLIMITED);
    if (r < 0)
        cr_log(CR_LOG_WARNING, "worker %d: cannot apply memory-max: %s", g->id, strerror(-r));
    else
        g->cg.limit = c->memory_max;
    if (g->host->cgtree->layout == CR_CGROUP_V2)
        cr_cgroup_set_high(g->cg.cg, c->memory_high ? c->memory_high : CR_CGROUP_UNLIMITED);
}
