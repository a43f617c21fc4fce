/* Freezing warm spares: see freeze.h. Where the v1 groups live: under the
 * freezer group corrald itself runs in, in one group of its own named
 * corral-<pid> that it creates at start-up and removes at exit, never under
 * anyone else's group. A corrald killed with SIGKILL leaves its group
 * behind; the next start removes every corral-<pid> whose pid is gone
 * (thawing first, so the SIGKILL their PDEATHSIG left pending lands). */
#include "freeze.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "gen.h"
#include "log.h"
#include "reaper.h"
#include "textfile.h"

void cr_freeze_setup(struct cr_freezing *fz, bool cgroups, unsigned spares)
{
    enum cr_freezer_kind k = CR_FREEZER_NONE;
    fz->kind = CR_FREEZER_NONE;
    if (!cgroups || cr_freezer_detect(&k) < 0 || k == CR_FREEZER_NONE)
        goto out;
    if (k == CR_FREEZER_V2) {
        fz->kind = k;
        goto out;
    }
    char *own = NULL, *base = NULL;
    if (cr_freezer_own_rel(&own) < 0)
        goto out;
    unsigned killed = 0, left = 0;
    if (cr_freezer_reclaim_v1(own, "corral-", &killed, &left) == 0 && (killed || left))
        cr_log(CR_LOG_NOTICE, "reclaimed freezer groups of a dead corrald under %s: %u "
                              "process(es) killed%s",
               own, killed, left ? ", some groups left" : "");
    if (!spares) {
        free(own);
        goto out; /* made only when used; `set spares` later uses SIGSTOP */
    }
    struct cr_freezer *f = NULL;
    if (asprintf(&base, "%s/corral-%d", strcmp(own, "/") ? own : "", (int)getpid()) >= 0 &&
        cr_freezer_open(NULL, base, true, &f) == 0) {
        fz->kind = k;
        fz->base = base;
        base = NULL;
    }
    cr_freezer_free(f);
    free(base);
    free(own);
out:
    if (spares)
        cr_log(CR_LOG_INFO, "spares are frozen with %s", cr_freeze_method(fz));
}

const char *cr_freeze_method(const struct cr_freezing *fz)
{
    return fz->kind == CR_FREEZER_NONE ? "SIGSTOP" : cr_freezer_kind_to_string(fz->kind);
}

int cr_freeze_prepare(struct cr_gen *g)
{
    const struct cr_freezing *fz = g->host->freezing;
    g->freezer = cr_freezer_free(g->freezer);
    if (fz->kind == CR_FREEZER_V2)
        return g->cg.cg ? cr_freezer_open(g->cg.cg, NULL, false, &g->freezer) : -ENODEV;
    if (fz->kind != CR_FREEZER_V1)
        return 0;
    char *rel = NULL;
    if (asprintf(&rel, "%s/s%u", fz->base, g->generation) < 0)
        return -ENOMEM;
    int r = cr_freezer_open(NULL, rel, true, &g->freezer);
    free(rel);
    return r;
}

/* Without a freezer: SIGSTOP/SIGCONT through the pidfd, outside the kill
 * ledger (a stop is not a kill, and the death classifier must not hear
 * of it). */
int cr_freeze_set(struct cr_gen *g, bool frozen)
{
    if (g->freezer)
        return cr_freezer_set(g->freezer, frozen);
    return cr_reaper_stop_signal(g, frozen ? SIGSTOP : SIGCONT);
}

/* SIGSTOP takes effect once the target is scheduled to take the signal:
 * /proc/<pid>/stat's state says 'T' (stopped) from then on. */
static int stopped(pid_t pid)
{
    char buf[512];
    errno = 0;
    const char *state = cr_proc_stat(pid, buf, sizeof(buf));
    if (!state)
        return errno ? -errno : -EIO;
    return *state == 'T' || *state == 't';
}

int cr_freeze_done(struct cr_gen *g)
{
    if (!g->freezer)
        return stopped(g->pid);
    enum cr_freeze_state s;
    int r = cr_freezer_state(g->freezer, &s);
    return r < 0 ? r : s == CR_FREEZE_FROZEN;
}

void cr_freeze_release(struct cr_gen *g)
{
    if (g->freezer && cr_freezer_remove(g->freezer) < 0)
        cr_log(CR_LOG_DEBUG, "worker %d: freezer group %s not removed yet", g->id,
               cr_freezer_rel(g->freezer));
    g->freezer = cr_freezer_free(g->freezer);
}

void cr_freeze_teardown(struct cr_freezing *fz)
{
    if (!fz->base)
        return;
    /* Every spare was reaped and its group removed (a task leaves its
     * group when it exits, so the rmdir after the reap succeeds). */
    struct cr_freezer *f = NULL;
    if (cr_freezer_open(NULL, fz->base, false, &f) == 0 && cr_freezer_remove(f) < 0)
        cr_log(CR_LOG_WARNING, "freezer group %s not removed", fz->base);
    cr_freezer_free(f);
    free(fz->base);
    fz->base = NULL;
}
