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
#include <sys/syscall.h>
#include <unistd.h>

#include "cr_cgroup.h"
#include "internal.h"
#include "log.h"
#include "textfile.h"
#include "worker_io.h"

void cr_freeze_setup(struct cr_supervisor *sup)
{
    enum cr_freezer_kind k = CR_FREEZER_NONE;
    sup->freezer_kind = CR_FREEZER_NONE;
    if (!sup->cgroups || cr_freezer_detect(&k) < 0 || k == CR_FREEZER_NONE)
        goto out;
    if (k == CR_FREEZER_V2) {
        sup->freezer_kind = k;
        goto out;
    }
    char *own = NULL, *base = NULL;
    if (cr_freezer_own_rel(&own) < 0)
        goto out;
    unsigned killed = 0, left = 0;
    if (cr_freezer_reclaim_v1(own, "corral-", &killed, &left) == 0 && (killed || left))
        cr_log(CR_LOG_NOTICE, "reclaimed freezer groups of a dead corrald under %s: %u "
                              "process(es) killed%s", own, killed, left ? ", some groups left" : "");
    if (!sup->cfg.spares) {
        free(own);
        goto out; /* made only when used; `set spares` later uses SIGSTOP */
    }
    struct cr_freezer *f = NULL;
    if (asprintf(&base, "%s/corral-%d", strcmp(own, "/") ? own : "", (int)getpid()) >= 0 &&
        cr_freezer_open(NULL, base, true, &f) == 0) {
        sup->freezer_kind = k;
        sup->freezer_base = base;
        base = NULL;
    }
    cr_freezer_free(f);
    free(base);
    free(own);
out:
    if (sup->cfg.spares)
        cr_log(CR_LOG_INFO, "spares are frozen with %s", cr_freeze_method(sup));
}

const char *cr_freeze_method(const struct cr_supervisor *sup)
{
    return sup->freezer_kind == CR_FREEZER_NONE
               ? "SIGSTOP"
               : cr_freezer_kind_to_string((enum cr_freezer_kind)sup->freezer_kind);
}

int cr_freeze_prepare(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    w->freezer = cr_freezer_free(w->freezer);
    if (sup->freezer_kind == CR_FREEZER_V2)
        return w->cg ? cr_freezer_open(w->cg, NULL, false, &w->freezer) : -ENODEV;
    if (sup->freezer_kind != CR_FREEZER_V1)
        return 0;
    char *rel = NULL;
    if (asprintf(&rel, "%s/s%u", sup->freezer_base, w->generation) < 0)
        return -ENOMEM;
    int r = cr_freezer_open(NULL, rel, true, &w->freezer);
    free(rel);
    return r;
}

/* SIGSTOP/SIGCONT through the pidfd, outside the kill ledger: a stop is
 * not a kill, and the death classifier must not hear of it. */
static int stop_signal(struct cr_worker *w, int sig)
{
    int pidfd = cr_io_pidfd(w);
    if (!w->pid)
        return -ESRCH;
    int r = pidfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0)
                       : kill(w->pid, sig);
    return r < 0 ? -errno : 0;
}

int cr_freeze_set(struct cr_worker *w, bool frozen)
{
    if (w->freezer)
        return cr_freezer_set(w->freezer, frozen);
    return stop_signal(w, frozen ? SIGSTOP : SIGCONT);
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

int cr_freeze_done(struct cr_worker *w)
{
    if (!w->freezer)
        return stopped(w->pid);
    enum cr_freeze_state s;
    int r = cr_freezer_state(w->freezer, &s);
    return r < 0 ? r : s == CR_FREEZE_FROZEN;
}

void cr_freeze_release(struct cr_worker *w)
{
    if (w->freezer && cr_freezer_remove(w->freezer) < 0)
        cr_log(CR_LOG_DEBUG, "worker %d: freezer group %s not removed yet", w->id,
               cr_freezer_rel(w->freezer));
    w->freezer = cr_freezer_free(w->freezer);
}

void cr_freeze_teardown(struct cr_supervisor *sup)
{
    if (!sup->freezer_base)
        return;
    /* Every spare was reaped and its group removed (a task leaves its
     * group when it exits, so the rmdir after the reap succeeds). */
    struct cr_freezer *f = NULL;
    if (cr_freezer_open(NULL, sup->freezer_base, false, &f) == 0 && cr_freezer_remove(f) < 0)
        cr_log(CR_LOG_WARNING, "freezer group %s not removed", sup->freezer_base);
    cr_freezer_free(f);
    free(sup->freezer_base);
    sup->freezer_base = NULL;
}
