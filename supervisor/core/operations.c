/* What the outside asks of the supervisor: scale, restart, reload, kill,
 * set, stop; and the core's own start-up and shut-down. The signals that
 * ask for some of these are wired in main.c. */
#include "operations.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "cgtree.h"
#include "cgworker.h"
#include "clock.h"
#include "cr_config.h"
#include "diag.h"
#include "freeze.h"
#include "history.h"
#include "internal.h"
#include "log.h"
#include "notify_rx.h"
#include "reaper.h"
#include "self.h"
#include "spawnproc.h"
#include "spawnway.h"
#include "supervisor.h"
#include "view.h"

/* ---- operations ---------------------------------------------------------- */

/* The workers that count towards --workers: each slot's holder. */
static bool counted(const struct cr_worker *w)
{
    return w->role == CR_ROLE_HOLDER || w->role == CR_ROLE_REPLACED;
}

unsigned cr_supervisor_auto_workers(void)
{
    struct cr_cpus c;
    cr_self_cpus(&c);
    if (c.quota && c.quota < c.affinity)
        cr_log(CR_LOG_INFO, "workers auto: %u, the CPU quota of cgroup %s (the affinity mask has %u)",
               c.n, c.quota_group, c.affinity);
    else if (c.quota)
        cr_log(CR_LOG_INFO,
               "workers auto: %u, the CPUs of the affinity mask (the CPU quota of cgroup %s "
               "allows %u)",
               c.n, c.quota_group, c.quota);
    else
        cr_log(CR_LOG_INFO, "workers auto: %u, the CPUs of the affinity mask (no cgroup CPU quota)",
               c.n);
    return c.n;
}

void cr_supervisor_check_budget(struct cr_supervisor *sup, bool startup)
{
    struct cr_budget_in in;
    struct cr_budget b;
    char line[512];
    cr_view_budget(sup, &in, &b);
    bool was_over = sup->budget_over;
    sup->budget_over = !b.fits;
    if (!b.limited || (!startup && b.fits && !was_over))
        return;
    cr_budget_format(&in, &b, line, sizeof line);
    cr_log(b.fits ? (startup ? CR_LOG_INFO : CR_LOG_NOTICE) : CR_LOG_WARNING, "%s", line);
}

int cr_supervisor_scale(struct cr_supervisor *sup, unsigned n)
{
    const struct cr_config *c = &sup->cfg;
    /* Under --workers MIN..MAX an operator's scale is a starting point
     * within the bounds; the scaler goes on from it. */
    if (c->workers_max && (n < c->workers_min || n > c->workers_max))
        return -EDOM;
    return cr_supervisor_scale_auto(sup, n);
}

int cr_supervisor_scale_auto(struct cr_supervisor *sup, unsigned n)
{
    if (sup->phase == CR_PHASE_STOPPING)
        return -ESHUTDOWN;
    if (n == 0 || n > 4096)
        return -ERANGE;
    sup->target = n;
    sup->cfg.workers = n;
    unsigned have = 0;
    for (struct cr_worker *w = sup->workers; w; w = w->next)
        have += counted(w);
    /* The lowest vacant slots first: the ids a scale-up hands out ascend,
     * so one call per new worker resumes where the last one stopped. */
    int from = 1;
    while (have < n) {
        struct cr_worker *w = cr_worker_new(sup, cr_slots_lowest_free(&sup->slots, &from));
        if (!w)
            return -ENOMEM;
        cr_worker_start(w);
        have++;
    }
    /* Scale down: drain the highest ids first. */
    while (have > n) {
        struct cr_worker *top = NULL;
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (counted(w) && (!top || cr_worker_id(w) > cr_worker_id(top)))
                top = w;
        if (!top)
            break;
        if (top->slot->replacement)
            cr_worker_drain_paced(top->slot->replacement, CR_KILL_STOP, "scale down");
        cr_worker_drain_paced(top, CR_KILL_STOP, "scale down");
        have--;
    }
    cr_supervisor_table_changed(sup);
    cr_supervisor_check_budget(sup, false);
    return 0;
}

int cr_supervisor_restart(struct cr_supervisor *sup, int id, const char *why)
{
    if (sup->phase == CR_PHASE_STOPPING)
        return -ESHUTDOWN;
    bool any = false;
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        if ((id && cr_worker_id(w) != id) || !counted(w))
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
    if (sup->phase == CR_PHASE_STOPPING)
        return;
    cr_recycle_reload_start(sup);
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_RELOAD,
                                                  .phase = CR_RELOAD_STARTED, .reason = why});
    cr_log(CR_LOG_NOTICE, "reload (%s): rolling replacement of every worker", why);
    cr_supervisor_restart(sup, 0, why);
    /* Spares are replaced too, at once: they serve nothing, and a spare of
     * the old program must not be promoted after the reload. */
    for (struct cr_worker *w = sup->workers, *next; w; w = next) {
        next = w->next;
        if (w->role == CR_ROLE_SPARE)
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
    if (!w->g.pid || !cr_wstate_has_process(w->state))
        return -ESRCH;
    char text[64];
    snprintf(text, sizeof(text), "signal %d sent by an operator", sig);
    cr_log_event(CR_LOG_NOTICE, "kill", id, w->g.pid, NULL, "worker %d: %s", id, text);
    cr_worker_signal(w, sig, CR_KILL_MANUAL, text);
    return 0;
}

int cr_supervisor_set(struct cr_supervisor *sup, const char *key, const char *value, char *err,
                      size_t errlen)
{
    /* A range keeps the count now asked for within its bounds: under
     * --workers auto that count is the target, not the 0 that spells auto. */
    bool workers = strcmp(key, "workers") == 0;
    unsigned was = sup->cfg.workers;
    if (workers && !was)
        sup->cfg.workers = sup->target;
    int r = cr_config_set(&sup->cfg, key, value, true, err, errlen);
    if (r < 0) {
        if (workers)
            sup->cfg.workers = was;
        return r;
    }
    cr_log(CR_LOG_NOTICE, "set %s = %s", key, value);
    if (workers) {
        /* A range keeps the count asked for within its bounds (config.c). */
        r = cr_supervisor_scale_auto(sup, sup->cfg.workers ? sup->cfg.workers
                                                           : cr_supervisor_auto_workers());
        cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_CONFIG, .key = key,
                                                      .value = value, .config = &sup->cfg});
        return r;
    }
    if (strncmp(key, "memory-", 7) == 0)
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            cr_cgworker_apply_limits(&w->g);
    if (strcmp(key, "spares") == 0)
        cr_supervisor_pump_spares(sup);
    if (strcmp(key, "memory-max") == 0 || strcmp(key, "spares") == 0)
        cr_supervisor_check_budget(sup, false);
    /* The rest (log level, sample interval) belongs to whoever subscribed. */
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_CONFIG, .key = key,
                                                  .value = value, .config = &sup->cfg});
    return 0;
}

static void on_stop_delay(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    cr_log(CR_LOG_NOTICE, "the stop delay is over");
    cr_supervisor_stop(sup, true, sup->stop_reason);
}

/* The lame duck: a load balancer that still sends (Kubernetes removes a
 * pod's endpoints while it sends SIGTERM) is served for --stop-delay, and
 * /readyz fails from now so that it stops sending. Workers keep their
 * restart policy meanwhile: they are still serving. */
static void lame_duck(struct cr_supervisor *sup)
{
    uint64_t d = sup->cfg.stop_delay_ms;
    sup->phase = CR_PHASE_LAME_DUCK;
    sup->drain_at = cr_now_ms(sup) + d;
    uv_timer_start(&sup->stop_delay, on_stop_delay, d, 0);
    cr_log(CR_LOG_NOTICE,
           "stopping in %llu.%03llu s (--stop-delay): /readyz fails from now, the workers serve "
           "until then",
           (unsigned long long)(d / 1000), (unsigned long long)(d % 1000));
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_LAME_DUCK,
                                                  .reason = sup->stop_reason});
    cr_supervisor_table_changed(sup);
}

void cr_supervisor_stop(struct cr_supervisor *sup, bool at_once, const char *why)
{
    if (sup->phase == CR_PHASE_STOPPING)
        return;
    if (sup->phase == CR_PHASE_RUNNING)
        snprintf(sup->stop_reason, sizeof sup->stop_reason, "%s", why ? why : "asked to stop");
    if (sup->phase == CR_PHASE_RUNNING && !at_once && sup->cfg.stop_delay_ms) {
        lame_duck(sup);
        return;
    }
    uv_timer_stop(&sup->stop_delay);
    sup->phase = CR_PHASE_STOPPING;
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
    cr_supervisor_publish(sup, &(struct cr_event){.type = CR_EV_STOPPING,
                                                  .reason = sup->stop_reason});
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

void cr_supervisor_init(struct cr_supervisor *sup, uv_loop_t *loop, const struct cr_gen_sink *sink)
{
    sup->loop = loop;
    sup->listener.fd = -1;
    sup->notify.fd = -1;
    sup->cgtree.lock_fd = sup->cgtree.vmstat_fd = -1;
    sup->started_at = uv_now(loop);
    sup->started_wall_ms = cr_wall_ms();
    srandom((unsigned)(getpid() ^ sup->started_wall_ms));
    cr_supervisor_init_handles(sup);
    cr_reaper_init(&sup->reaper, loop, sink);
    sup->spawner.nofile = cr_self_nofile(&sup->self);
    sup->host = (struct cr_gen_host){
        .loop = loop, .cfg = &sup->cfg, .listener = &sup->listener, .cgtree = &sup->cgtree,
        .spawner = &sup->spawner, .reaper = &sup->reaper, .notify = &sup->notify,
        .freezing = &sup->freezing, .sink = sink,
    };
}

int cr_supervisor_open(struct cr_supervisor *sup)
{
    int r;
    if ((r = cr_history_new(sup->cfg.history, &sup->deaths.history)) < 0)
        return r;
    if ((r = open_listener(sup)) < 0)
        return r;
    if ((r = cr_spawner_open(&sup->spawner, &sup->cfg)) < 0)
        return r;
    if ((r = cr_cgtree_setup(&sup->cgtree, sup->loop, &sup->cfg)) < 0)
        return r;
    struct cr_notify_rx_opts o = {
        .by_cgroup = sup->cgtree.on, .chown = sup->spawner.set_ids, .uid = sup->spawner.uid,
        .gid = sup->spawner.gid, .busy = cr_supervisor_spawning, .busy_ctx = sup,
    };
    if ((r = cr_notify_rx_open(&sup->notify, sup->loop, &sup->reaper, sup->host.sink, &o)) < 0) {
        cr_log(CR_LOG_ERR, "cannot open the worker notify socket: %s", strerror(-r));
        return r;
    }
    cr_freeze_setup(&sup->freezing, sup->cgtree.on, sup->cfg.spares);
    if ((r = cr_diag_new(&sup->host.diag, &sup->cfg, sup->cfg.instance, sup->spawner.set_ids,
                         sup->spawner.uid, sup->spawner.gid)) < 0)
        return r;
    return 0;
}

int cr_supervisor_spawn_all(struct cr_supervisor *sup)
{
    /* After the priority raise (main.c): what workers get back. */
    sup->spawner.priority = cr_self_priority(&sup->self);
    sup->target = sup->cfg.workers ? sup->cfg.workers : cr_supervisor_auto_workers();
    const char *prog = sup->cfg.argc ? sup->cfg.argv[0] : cr_spawner_worker_path(&sup->spawner);
    cr_log(CR_LOG_NOTICE, "corrald %s starting %u worker(s): %s", CR_VERSION, sup->target, prog);
    cr_supervisor_check_budget(sup, true);
    /* A program that cannot be executed at all will not appear by
     * retrying: refuse to run. Checked here, before any fork: spawns are
     * paced and their exec result arrives later (generation/wio.c). */
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
    cr_freeze_teardown(&sup->freezing);
    sup->host.diag = cr_diag_free(sup->host.diag);
    cr_cgtree_done(&sup->cgtree);
    cr_notify_rx_close(&sup->notify);
    cr_listen_close(&sup->listener);
    sup->deaths.history = cr_history_free(sup->deaths.history);
    cr_spawner_done(&sup->spawner);
    cr_slots_done(&sup->slots);
    cr_config_done(&sup->cfg);
}
