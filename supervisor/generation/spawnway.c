/* How corrald starts worker processes: see spawnway.h. */
#include "spawnway.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "cr_config.h"
#include "log.h"
#include "spawnproc.h"
#include "spawnvm.h"

/* The worker program when no command is configured: $CORRAL_WORKER, the
 * build tree's worker, or the installed one. Caller frees. */
static char *default_path(void)
{
    /* In a build tree the worker sits in ../worker/ next to supervisor/. */
    return cr_spawn_find_file("CORRAL_WORKER", "../worker/corral-worker", X_OK,
                              CR_LIBEXECDIR "/corral/corral-worker");
}

/* A user or group given by name or number. */
static int id_of(const char *s, bool group, unsigned *ret, unsigned *ret_primary_gid)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*s && !*end && !errno && v < (unsigned long)UINT32_MAX) {
        struct passwd *pw = group ? NULL : getpwuid((uid_t)v);
        *ret = (unsigned)v;
        *ret_primary_gid = pw ? pw->pw_gid : (unsigned)v;
        return 0;
    }
    if (group) {
        struct group *gr = getgrnam(s);
        if (!gr)
            return -ENOENT;
        *ret = gr->gr_gid;
        return 0;
    }
    struct passwd *pw = getpwnam(s);
    if (!pw)
        return -ENOENT;
    *ret = pw->pw_uid;
    *ret_primary_gid = pw->pw_gid;
    return 0;
}

/* Resolves --user/--group into the ids workers drop to. */
static int resolve_ids(struct cr_spawner *sp, const struct cr_config *c)
{
    unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid(), primary = gid, unused;
    if (!c->user && !c->group)
        return 0;
    if (c->user && id_of(c->user, false, &uid, &primary) < 0) {
        cr_log(CR_LOG_ERR, "--user: no such user '%s'", c->user);
        return -EINVAL;
    }
    gid = c->user ? primary : gid;
    if (c->group && id_of(c->group, true, &gid, &unused) < 0) {
        cr_log(CR_LOG_ERR, "--group: no such group '%s'", c->group);
        return -EINVAL;
    }
    if (geteuid() != 0 && uid == geteuid() && gid == getegid()) {
        /* corrald runs as that user already (the unprivileged unit on
         * cgroup v2): the workers are its own, nothing to switch, and a
         * process without CAP_SETGID could not clear its groups anyway. */
        cr_log(CR_LOG_INFO, "workers run as corrald's own uid %u gid %u", uid, gid);
        return 0;
    }
    if (geteuid() != 0) {
        cr_log(CR_LOG_ERR,
               "--user/--group: corrald runs as uid %u and cannot switch workers to "
               "uid %u gid %u; run corrald as root or drop the option",
               (unsigned)geteuid(), uid, gid);
        return -EPERM;
    }
    sp->set_ids = true;
    sp->uid = (uid_t)uid;
    sp->gid = (gid_t)gid;
    cr_log(CR_LOG_INFO, "workers run as uid %u gid %u, without supplementary groups", uid, gid);
    return 0;
}

/* How workers will start: through corral-exec, run once here the way
 * they will start it, or by fork when it is missing, cannot run, or is
 * linked dynamically while workers drop to another user. Logged, since
 * it decides what a start costs the loop. */
static int spawn_way(struct cr_spawner *sp)
{
    const char *how = getenv("CORRAL_SPAWN");
    if (how && strcmp(how, "fork") != 0 && strcmp(how, "vfork") != 0)
        cr_log(CR_LOG_WARNING, "CORRAL_SPAWN=%s: not fork or vfork; ignored", how);
    sp->helper = cr_spawn_helper_find();
    /* CORRAL_SPAWN=vfork: posix_spawn even where a CLONE_VM child that
     * corrald does not wait for is available (the tests of that path). */
    int r;
    if ((!how || strcmp(how, "vfork") != 0) && (r = cr_spawn_vm_new(&sp->vm)) < 0)
        return r;
    if (!sp->helper) {
        cr_log(CR_LOG_WARNING,
               "workers start by fork: corral-exec is not installed "
               "(or CORRAL_SPAWN=fork), so each start copies corrald's page tables");
        return 0;
    }
    int st = 0;
    int p = cr_spawn_helper_probe(sp->helper, sp->vm, &st);
    char status[64];
    snprintf(status, sizeof(status),
             WIFSIGNALED(st) ? "it was killed by signal %d" : "it exited with status %d",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    if (p < 0 && !cr_spawn_helper_unusable(-p)) {
        /* Short of processes, memory or descriptors at this moment: not
         * a reason to give corral-exec up for the whole run. */
        cr_log(CR_LOG_WARNING, "could not try %s (%s); using it all the same", sp->helper,
               strerror(-p));
        p = 0;
    }
    const char *why = p < 0    ? strerror(-p)
                      : p == 2 ? status
                      : p == 1 && sp->set_ids
                          ? "it is linked dynamically, and its loader would act on LD_* "
                            "variables meant for the workers while it still runs as root"
                          : NULL;
    if (why) {
        cr_log(CR_LOG_WARNING, "workers start by fork: cannot use %s (%s)", sp->helper, why);
        free(sp->helper);
        sp->helper = NULL;
        return 0;
    }
    cr_log(CR_LOG_INFO, "workers start through %s, %s", sp->helper,
           cr_spawn_vm_usable(sp->vm) ? "from a CLONE_VM child corrald does not wait for"
                                      : "by posix_spawn");
    return 0;
}

int cr_spawner_open(struct cr_spawner *sp, const struct cr_config *cfg)
{
    int r;
    if (!(sp->worker_path = default_path()))
        return -ENOMEM;
    if ((r = resolve_ids(sp, cfg)) < 0)
        return r;
    return spawn_way(sp);
}

void cr_spawner_helper_failed(struct cr_spawner *sp, int err)
{
    if (!sp->helper || !cr_spawn_helper_unusable(err))
        return;
    cr_log(CR_LOG_WARNING, "cannot run %s (%s): workers start by fork from now on", sp->helper,
           strerror(err));
    free(sp->helper);
    sp->helper = NULL;
}

const char *cr_spawner_worker_path(const struct cr_spawner *sp)
{
    return sp->worker_path;
}

void cr_spawner_done(struct cr_spawner *sp)
{
    free(sp->worker_path);
    free(sp->helper);
    sp->worker_path = sp->helper = NULL;
    sp->vm = cr_spawn_vm_free(sp->vm);
}
