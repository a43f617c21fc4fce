/* What the outside asks of the supervisor: scale, restart, reload, kill,
 * set, stop; and the core's own start-up and shut-down. The signals that
 * ask for some of these are wired in main.c. */
#include "operations.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgsetup.h"
#include "clock.h"
#include "cr_config.h"
#include "freeze.h"
#include "history.h"
#include "internal.h"
#include "log.h"
#include "spawnproc.h"
#include "spawnvm.h"
#include "supervisor.h"
#include "view.h"
#include "worker_io.h"
#include "worker_spawn.h"

/* ---- operations ---------------------------------------------------------- */

/* The lowest slot id not held by a worker that stays, from *from on: the
 * ids a scale-up hands out are ascending, so one call per new worker
 * resumes where the last one stopped and the list stays sorted by id
 * (one pass per new worker, not one per candidate id). */
static int lowest_free_id(struct cr_supervisor *sup, int *from)
{
    int id = *from;
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        if (w->id < id || w->retire_on_exit)
            continue;
        if (w->id > id)
            break;
        id++;
    }
    *from = id + 1;
    return id;
}

int cr_supervisor_scale(struct cr_supervisor *sup, unsigned n)
{
    if (sup->stopping)
        return -ESHUTDOWN;
    if (n == 0 || n > 4096)
        return -ERANGE;
    sup->target = n;
    sup->cfg.workers = n;
    unsigned have = 0;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        if (!w->retire_on_exit && !w->replaces && w->id != CR_SPARE_ID)
            have++;
    int from = 1;
    while (have < n) {
        struct cr_worker *w = cr_worker_new(sup, lowest_free_id(sup, &from));
        if (!w)
            return -ENOMEM;
        cr_worker_start(w);
        have++;
    }
    /* Scale down: drain the highest ids first. */
    while (have > n) {
        struct cr_worker *top = NULL;
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (!w->retire_on_exit && !w->replaces && w->id != CR_SPARE_ID &&
                (!top || w->id > top->id))
                top = w;
        if (!top)
            break;
        if (top->replaced_by)
            cr_worker_drain_paced(top->replaced_by, CR_KILL_STOP, "scale down");
        cr_worker_drain_paced(top, CR_KILL_STOP, "scale down");
        have--;
    }
    cr_supervisor_table_changed(sup);
    return 0;
}

int cr_supervisor_restart(struct cr_supervisor *sup, int id, const char *why)
{
    if (sup->stopping)
        return -ESHUTDOWN;
    bool any = false;
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        if ((id && w->id != id) || w->retire_on_exit || w->replaces || w->id == CR_SPARE_ID)
            continue;
        any = true;
        if (w->state == CR_WS_BACKOFF || w->state == CR_WS_FAILED)
            cr_worker_set_deadline(w, 0); /* restart now */
        else
            cr_worker_recycle(w, why);
    }
    return any ? 0 : -ENOENT;
}

void cr_supervisor_reload(struct cr_supervisor *sup, const char *why)
{
    if (sup->stopping)
        return;
    sup->reloading = true;
    sup->reload_failed = 0;
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_RELOAD,
                                                  .phase = CR_RELOAD_STARTED, .reason = why});
    cr_log(CR_LOG_NOTICE, "reload (%s): rolling replacement of every worker", why);
    cr_supervisor_restart(sup, 0, why);
    /* Spares are replaced too, at once: they serve nothing, and a spare of
     * the old program must not be promoted after the reload. */
    for (struct cr_worker *w = sup->workers, *next; w; w = next) {
        next = w->next;
        if (w->id == CR_SPARE_ID && !w->retire_on_exit)
            cr_worker_drain(w, CR_KILL_RECYCLE, why);
    }
    cr_supervisor_pump_spares(sup);
    cr_supervisor_pump_recycles(sup);
}

int cr_supervisor_kill(struct cr_supervisor *sup, int id, int sig)
{
    struct cr_worker *w = cr_supervisor_worker(sup, id);
    if (!w)
        return -ENOENT;
    if (!w->pid || !cr_wstate_has_process(w->state))
        return -ESRCH;
    char text[64];
    snprintf(text, sizeof(text), "signal %d sent by an operator", sig);
    cr_log_event(CR_LOG_NOTICE, "kill", w->id, w->pid, NULL, "worker %d: %s", w->id, text);
    cr_worker_signal(w, sig, CR_KILL_MANUAL, text);
    return 0;
}

int cr_supervisor_set(struct cr_supervisor *sup, const char *key, const char *value, char *err,
                      size_t errlen)
{
    int r = cr_config_set(&sup->cfg, key, value, true, err, errlen);
    if (r < 0)
        return r;
    cr_log(CR_LOG_NOTICE, "set %s = %s", key, value);
    if (strcmp(key, "workers") == 0)
        return cr_supervisor_scale(sup, sup->cfg.workers ? sup->cfg.workers : sup->target);
    if (strncmp(key, "memory-", 7) == 0)
        cr_cg_apply_limits(sup);
    if (strcmp(key, "spares") == 0)
        cr_supervisor_pump_spares(sup);
    /* The rest (log level, sample interval) belongs to whoever subscribed. */
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_CONFIG, .key = key,
                                                  .value = value, .config = &sup->cfg});
    return 0;
}

void cr_supervisor_stop(struct cr_supervisor *sup)
{
    if (sup->stopping)
        return;
    sup->stopping = true;
    /* What the stop does: every process is drained, whatever its state
     * (a big scale-up leaves many still starting), and every queued spawn
     * is cancelled. */
    unsigned procs = 0, queued = 0;
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        procs += cr_wstate_has_process(w->state);
        queued += w->state == CR_WS_PENDING;
    }
    if (queued)
        cr_log(CR_LOG_NOTICE, "stopping: draining %u worker(s), cancelling %u queued spawn(s)",
               procs, queued);
    else
        cr_log(CR_LOG_NOTICE, "stopping: draining %u worker(s)", procs);
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_STOPPING});
    /* Drain from a snapshot: draining a process-less worker frees it. */
    struct cr_worker *w = sup->workers;
    while (w) {
        struct cr_worker *next = w->next;
        cr_worker_drain_paced(w, CR_KILL_STOP, "corrald stopping");
        w = next;
    }
    cr_supervisor_maybe_finish(sup);
}

/* ---- start-up ------------------------------------------------------------ */

static int open_listener(struct cr_supervisor *sup)
{
    int r = cr_listen_from_systemd(&sup->listener);
    if (r < 0)
        return r;
    if (r > 0) {
        cr_log(CR_LOG_INFO, "listening on %s (socket-activated, fd %d, name '%s')",
               sup->listener.addr, sup->listener.fd, sup->listener.name);
        if (sup->cfg.balance == CR_BALANCE_REUSEPORT)
            cr_log(CR_LOG_WARNING, "balance=reuseport ignored: the socket comes from systemd");
        return 0;
    }
    bool rp = sup->cfg.balance == CR_BALANCE_REUSEPORT;
    /* reuseport: corrald holds a bound, non-listening socket that reserves
     * the port (port 0 resolves here once); each worker gets its own. */
    r = cr_listen_bind(sup->cfg.listen, rp, !rp, &sup->listener);
    if (r < 0) {
        cr_log(CR_LOG_ERR, "cannot listen on %s: %s", sup->cfg.listen, strerror(-r));
        return r;
    }
    cr_log(CR_LOG_INFO, "listening on %s (%s)", sup->listener.addr,
           cr_balance_to_string(sup->cfg.balance));
    return 0;
}

void cr_supervisor_init(struct cr_supervisor *sup, uv_loop_t *loop)
{
    sup->loop = loop;
    sup->notify_fd = -1;
    sup->listener.fd = -1;
    sup->cg_lock_fd = -1;
    sup->vmstat_fd = -1;
    sup->started_at = uv_now(loop);
    sup->started_wall_ms = cr_wall_ms();
    srandom((unsigned)(getpid() ^ sup->started_wall_ms));
    uv_timer_init(loop, &sup->cg_trash_timer);
    uv_timer_init(loop, &sup->finish_timer);
    uv_timer_init(loop, &sup->spare_timer);
    uv_idle_init(loop, &sup->spawn_pacer);
    uv_idle_init(loop, &sup->reap_turn);
    uv_idle_init(loop, &sup->drain_turn);
    sup->reap_turn.data = sup->drain_turn.data = sup;
    uv_timer_init(loop, &sup->spawn_recheck);
    sup->cg_trash_timer.data = sup->finish_timer.data = sup->spare_timer.data = sup;
    sup->spawn_pacer.data = sup->spawn_recheck.data = sup;
}

/* How workers will start: through corral-exec, run once here the way
 * they will start it, or by fork when it is missing, cannot run, or is
 * linked dynamically while workers drop to another user. Logged, since
 * it decides what a start costs the loop. */
static int spawn_way(struct cr_supervisor *sup)
{
    const char *how = getenv("CORRAL_SPAWN");
    if (how && strcmp(how, "fork") != 0 && strcmp(how, "vfork") != 0)
        cr_log(CR_LOG_WARNING, "CORRAL_SPAWN=%s: not fork or vfork; ignored", how);
    sup->spawn_helper = cr_spawn_helper_find();
    /* CORRAL_SPAWN=vfork: posix_spawn even where a CLONE_VM child that
     * corrald does not wait for is available (the tests of that path). */
    int r;
    if ((!how || strcmp(how, "vfork") != 0) && (r = cr_spawn_vm_new(&sup->spawn_vm)) < 0)
        return r;
    if (!sup->spawn_helper) {
        cr_log(CR_LOG_WARNING, "workers start by fork: corral-exec is not installed "
               "(or CORRAL_SPAWN=fork), so each start copies corrald's page tables");
        return 0;
    }
    int st = 0;
    int p = cr_spawn_helper_probe(sup->spawn_helper, sup->spawn_vm, &st);
    char status[64];
    snprintf(status, sizeof(status), WIFSIGNALED(st) ? "it was killed by signal %d"
                                                     : "it exited with status %d",
             WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    if (p < 0 && !cr_spawn_helper_unusable(-p)) {
        /* Short of processes, memory or descriptors at this moment: not
         * a reason to give corral-exec up for the whole run. */
        cr_log(CR_LOG_WARNING, "could not try %s (%s); using it all the same",
               sup->spawn_helper, strerror(-p));
        p = 0;
    }
    const char *why = p < 0    ? strerror(-p)
                      : p == 2 ? status
                      : p == 1 && sup->set_ids
                          ? "it is linked dynamically, and its loader would act on LD_* "
                            "variables meant for the workers while it still runs as root"
                          : NULL;
    if (why) {
        cr_log(CR_LOG_WARNING, "workers start by fork: cannot use %s (%s)", sup->spawn_helper,
               why);
        free(sup->spawn_helper);
        sup->spawn_helper = NULL;
        return 0;
    }
    cr_log(CR_LOG_INFO, "workers start through %s, %s", sup->spawn_helper,
           cr_spawn_vm_usable(sup->spawn_vm) ? "from a CLONE_VM child corrald does not wait for"
                                             : "by posix_spawn");
    return 0;
}

int cr_supervisor_open(struct cr_supervisor *sup)
{
    int r;
    if ((r = cr_history_new(sup->cfg.history, &sup->history)) < 0)
        return r;
    sup->worker_path = cr_worker_default_path();
    if (!sup->worker_path)
        return -ENOMEM;
    if ((r = open_listener(sup)) < 0)
        return r;
    if ((r = cr_worker_ids_resolve(sup)) < 0)
        return r;
    if ((r = spawn_way(sup)) < 0)
        return r;
    if ((r = cr_io_notify_open(sup)) < 0) {
        cr_log(CR_LOG_ERR, "cannot open the worker notify socket: %s", strerror(-r));
        return r;
    }
    if ((r = cr_cg_setup(sup)) < 0)
        return r;
    cr_freeze_setup(sup);
    return 0;
}

int cr_supervisor_spawn_all(struct cr_supervisor *sup)
{
    sup->target = sup->cfg.workers ? sup->cfg.workers : uv_available_parallelism();
    cr_log(CR_LOG_NOTICE, "corrald %s starting %u worker(s): %s", CR_VERSION, sup->target,
           sup->cfg.argc ? sup->cfg.argv[0] : sup->worker_path);
    /* A program that cannot be executed at all will not appear by
     * retrying: refuse to run. Checked here, before any fork: spawns are
     * paced and their exec result arrives later (worker_io.c). */
    const char *prog = sup->cfg.argc ? sup->cfg.argv[0] : sup->worker_path;
    char *path = NULL;
    int r = cr_spawn_resolve(prog, &path);
    if (r == 0 && access(path, X_OK) < 0 && (errno == ENOENT || errno == EACCES))
        r = -errno;
    free(path);
    if (r == -ENOENT || r == -EACCES) {
        cr_log(CR_LOG_ERR, "cannot execute %s: %s", prog, strerror(-r));
        return -ECANCELED;
    }
    for (unsigned i = 1; i <= sup->target; i++) {
        struct cr_worker *w = cr_worker_new(sup, (int)i);
        if (!w)
            return -ENOMEM;
        cr_worker_start(w);
    }
    cr_supervisor_pump_spares(sup); /* after the workers: capacity first */
    cr_supervisor_table_changed(sup);
    return 0;
}

void cr_supervisor_done(struct cr_supervisor *sup)
{
    cr_freeze_teardown(sup);
    cr_cg_done(sup);
    cr_io_notify_close(sup);
    cr_listen_close(&sup->listener);
    sup->history = cr_history_free(sup->history);
    free(sup->worker_path);
    free(sup->spawn_helper);
    sup->spawn_vm = cr_spawn_vm_free(sup->spawn_vm);
    free(sup->generations);
    cr_config_done(&sup->cfg);
}
