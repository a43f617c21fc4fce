/* corrald: configuration in, supervisor out. The wiring lives here and
 * only here: the core is started, the outputs subscribe to its events, and
 * the inputs (control socket, metrics listener, memory watch, accept
 * watch, exit notices, signals, worker notify messages) are opened and pointed down at
 * it. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <uv.h>

#include "acceptwatch.h"
#include "cgtree.h"
#include "config.h"
#include "config_file.h"
#include "control.h"
#include "cr_config.h"
#include "environ.h"
#include "exitwatch.h"
#include "gen.h"
#include "internal.h"
#include "log.h"
#include "memwatch.h"
#include "metrics_http.h"
#include "ondeath.h"
#include "operations.h"
#include "scaler.h"
#include "sd.h"
#include "self.h"
#include "status.h"
#include "termlog.h"
#include "supervisor.h"
#include "view.h"
#include "worker_notify.h"

/* What main.c opened around the core, closed when the core finishes. */
struct wiring {
    struct cr_supervisor *sup;
    uv_signal_t sig_term, sig_int, sig_hup, sig_chld;
    struct cr_control *control;
    struct cr_control_core control_core;
    struct cr_metrics_http *http;
    struct cr_sd *sd;
    struct cr_memwatch *mw;
    struct cr_acceptwatch *aw;
    struct cr_scaler *scaler;
    struct cr_termlog *termlog;
    struct cr_ondeath *ondeath;
    struct cr_exitwatch exits;
};

/* A generation's descriptors report to the core and the notify input. */
static void on_exited(struct cr_gen *g)
{
    cr_worker_reaped(cr_worker_of(g));
}

static void on_exec_ok(struct cr_gen *g)
{
    cr_worker_event(cr_worker_of(g), CR_WE_EXEC_OK);
}

static void on_exec_failed(struct cr_gen *g)
{
    cr_worker_event(cr_worker_of(g), CR_WE_EXEC_FAILED);
}

static void on_message(struct cr_gen *g, const struct cr_notify_msg *m)
{
    cr_worker_notify(cr_worker_of(g), m);
}

static void on_recycle(struct cr_gen *g, const char *why)
{
    cr_worker_recycle(cr_worker_of(g), why);
}

static void on_exit_notice(struct cr_gen *g)
{
    cr_worker_exit_notice(cr_worker_of(g));
}

static const struct cr_gen_sink sink = {
    .exited = on_exited,
    .exec_ok = on_exec_ok,
    .exec_failed = on_exec_failed,
    .message = on_message,
    .recycle = on_recycle,
    .exit_notice = on_exit_notice,
};

static void on_signal(uv_signal_t *h, int signum)
{
    struct cr_supervisor *sup = h->data;
    if (signum == SIGHUP) {
        cr_supervisor_reload(sup, "SIGHUP");
        return;
    }
    if (cr_supervisor_stopping(sup)) {
        cr_log(CR_LOG_NOTICE, "%s again: still draining", strsignal(signum));
        return;
    }
    if (cr_supervisor_lame_duck(sup))
        cr_log(CR_LOG_NOTICE, "%s again: draining now, before the stop delay is over",
               strsignal(signum));
    else
        cr_log(CR_LOG_NOTICE, "%s received", strsignal(signum));
    cr_supervisor_stop(sup, false, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

static void on_sigchld(uv_signal_t *h, int signum)
{
    cr_supervisor_reap(h->data);
}

/* The --on-death runs are libuv's children: the reaper's orphan scan must
 * leave their zombies to libuv (reaper.h). */
static int ondeath_started(void *ctx, int pid)
{
    struct cr_supervisor *sup = ctx;
    return cr_reaper_foreign_add(&sup->reaper, pid);
}

static void ondeath_reaped(void *ctx, int pid)
{
    struct cr_supervisor *sup = ctx;
    cr_reaper_foreign_del(&sup->reaper, pid);
}

static const struct cr_priority *ondeath_priority(void *ctx)
{
    struct cr_supervisor *sup = ctx;
    return cr_self_priority(&sup->self);
}

/* The signals corrald acts on, which only the main thread may take. */
static void stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
    sigaddset(set, SIGCHLD);
}

/* libuv starts its thread pool at the first queued work (a worker's group
 * made ahead, cgprep.c), and a thread takes any signal it does not block:
 * once the signal watchers are closed at the end, a SIGTERM delivered to a
 * pool thread would still kill corrald. The pool is started here, with
 * those signals blocked (threads inherit their creator's mask), and never
 * takes one. */
static void pool_work(uv_work_t *req)
{
    (void)req;
}

static void pool_start_masked(uv_loop_t *loop)
{
    static uv_work_t start;
    sigset_t set, was;
    stop_signals(&set);
    pthread_sigmask(SIG_BLOCK, &set, &was);
    int r = uv_queue_work(loop, &start, pool_work, NULL);
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    if (r < 0)
        cr_log(CR_LOG_WARNING, "cannot start libuv's thread pool: %s", uv_strerror(r));
}

/* corrald is a child subreaper: a worker's children that outlive it are
 * re-parented here, not to init, and reaped on SIGCHLD — no zombie stays
 * behind, and as a container's PID 1 corrald reaps every orphan. */
static void signals_start(struct wiring *wi, uv_loop_t *loop)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        cr_log(CR_LOG_WARNING, "cannot become a child subreaper: %s", strerror(errno));
    uv_signal_t *hs[] = {&wi->sig_term, &wi->sig_int, &wi->sig_hup, &wi->sig_chld};
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGCHLD};
    for (size_t i = 0; i < 4; i++) {
        uv_signal_init(loop, hs[i]);
        hs[i]->data = wi->sup;
        uv_signal_start(hs[i], sigs[i] == SIGCHLD ? on_sigchld : on_signal, sigs[i]);
    }
}

/* The control socket's `events` stream, and the end of everything main.c
 * opened once the core has finished. */
static void on_event(void *userdata, const struct cr_event *ev)
{
    struct wiring *wi = userdata;
    if (ev->type == CR_EV_FINISHED) {
        cr_control_close(wi->control);
        wi->control = NULL;
        cr_metrics_http_close(wi->http);
        wi->http = NULL;
        /* Closing the last watcher of a signal gives it back its default
         * action: a second SIGTERM during the teardown that follows (an
         * impatient operator, a script that signals twice) would turn a
         * clean exit into "killed by SIGTERM". Nothing is left to stop:
         * they are ignored from here, and blocked across the hand-over
         * (SIG_IGN discards one that came meanwhile). */
        sigset_t stop, was;
        stop_signals(&stop);
        pthread_sigmask(SIG_BLOCK, &stop, &was);
        uv_close((uv_handle_t *)&wi->sig_term, NULL);
        uv_close((uv_handle_t *)&wi->sig_int, NULL);
        uv_close((uv_handle_t *)&wi->sig_hup, NULL);
        uv_close((uv_handle_t *)&wi->sig_chld, NULL);
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        pthread_sigmask(SIG_SETMASK, &was, NULL);
        return;
    }
    cJSON *o = cr_event_json(ev);
    if (o && wi->control)
        cr_control_broadcast(wi->control, o);
    cJSON_Delete(o);
}

/* Everything before the workers: subscriptions, then the core's sockets
 * and cgroups, then the ways in from outside. */
static int open_all(struct wiring *wi, uv_loop_t *loop)
{
    struct cr_supervisor *sup = wi->sup;
    int r;
    cr_supervisor_init(sup, loop, &sink);
    wi->exits = (struct cr_exitwatch){.sup = sup, .loop = loop};
    if ((r = cr_sd_new(sup, loop, &wi->sd)) < 0 || (r = cr_memwatch_new(sup, loop, &wi->mw)) < 0 ||
        (r = cr_acceptwatch_new(sup, loop, &wi->aw)) < 0 ||
        (r = cr_scaler_new(sup, loop, &wi->scaler)) < 0)
        return r;
    cr_supervisor_subscribe(sup, cr_log_on_event, NULL);
    cr_supervisor_subscribe(sup, cr_sd_on_event, wi->sd);
    cr_supervisor_subscribe(sup, cr_memwatch_on_event, wi->mw);
    cr_supervisor_subscribe(sup, cr_acceptwatch_on_event, wi->aw);
    cr_supervisor_subscribe(sup, cr_scaler_on_event, wi->scaler);
    cr_supervisor_subscribe(sup, cr_exitwatch_on_event, &wi->exits);
    cr_termlog_open(sup, &wi->termlog);
    if (wi->termlog)
        cr_supervisor_subscribe(sup, cr_termlog_on_event, wi->termlog);
    const struct cr_ondeath_host odh = {.started = ondeath_started,
                                        .reaped = ondeath_reaped,
                                        .priority = ondeath_priority,
                                        .ctx = sup};
    if ((r = cr_ondeath_new(sup, loop, &odh, &wi->ondeath)) < 0)
        return r;
    cr_supervisor_subscribe(sup, cr_ondeath_on_event, wi->ondeath);
    cr_supervisor_subscribe(sup, on_event, wi);
    /* Signal handles only once on_event is subscribed: it is what closes
     * them when the core finishes, so a failure before this point leaves
     * nothing that would keep the failure path's loop running. */
    signals_start(wi, loop);
    /* The control path first: a second corrald refused there (the path is
     * owned) must not bind the port or touch the cgroups of the first. */
    wi->control_core = (struct cr_control_core){.sup = sup,
                                                .exit_notice = cr_exitwatch_state,
                                                .exit_notice_ctx = &wi->exits,
                                                .on_death = wi->ondeath,
                                                .scale = cr_scaler_status(wi->scaler)};
    if ((r = cr_control_open(loop, &sup->cfg, &cr_control_core_ops, &wi->control_core,
                             &wi->control)) < 0)
        return r;
    /* The instance (its worker cgroups) is named after the control path it owns. */
    if (!sup->cfg.instance &&
        (r = cr_cgtree_default_instance(cr_control_path(wi->control), &sup->cfg.instance)) < 0)
        return r;
    if ((r = cr_supervisor_open(sup)) < 0)
        return r;
    /* The Prometheus listener shares the control socket's lifetime: both
     * are how the outside reads corrald, and both close at its exit. */
    if (sup->cfg.metrics_listen &&
        (r = cr_metrics_http_open(loop, sup->cfg.metrics_listen, sup, &wi->http)) < 0) {
        cr_log(CR_LOG_ERR, "--metrics-listen %s: %s", sup->cfg.metrics_listen, uv_strerror(r));
        return r;
    }
    if (wi->http) {
        cr_metrics_http_addr(wi->http, wi->control_core.metrics_addr,
                             sizeof wi->control_core.metrics_addr);
        cr_log(CR_LOG_INFO, "metrics, /livez and /readyz on http://%s",
               wi->control_core.metrics_addr);
    }
    cr_exitwatch_sync(&wi->exits);
    return 0;
}

int main(int argc, char **argv)
{
    static struct cr_supervisor sup;
    char err[512] = "";
    char action = 0;

    cr_config_init(&sup.cfg);
    const char *file = cr_config_find_file(argc, argv);
    int r = file ? cr_config_file_load(&sup.cfg, file, err, sizeof(err)) : 0;
    if (r >= 0)
        r = cr_config_parse_args(&sup.cfg, argc, argv, &action, err, sizeof(err));
    if (r == 1) {
        if (action == 'h')
            cr_config_usage(stdout, "corrald");
        else
            printf("corrald %s\n", CR_VERSION);
        cr_config_done(&sup.cfg);
        return 0;
    }
    if (r >= 0)
        r = cr_config_finish(&sup.cfg, err, sizeof(err));
    if (r >= 0)
        r = cr_config_file_check_control(&sup.cfg, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "corrald: %s\nTry 'corrald --help'.\n", err[0] ? err : strerror(-r));
        cr_termlog_usage(&sup.cfg, err[0] ? err : strerror(-r));
        cr_config_done(&sup.cfg);
        return CR_EXIT_USAGE;
    }

    cr_log_init(sup.cfg.log_level);
    /* A worker's closed pipe must be an error return, not our death. */
    signal(SIGPIPE, SIG_IGN);
    cr_environ_apply(&sup.cfg);
    cr_self_raise_nofile(&sup.self);

    uv_loop_t *loop = uv_default_loop();
    static struct wiring wi = {.sup = &sup};
    r = open_all(&wi, loop);
    /* After the cgroup set-up (on v2 corrald has moved into its leaf and
     * enabled the cpu controller, which decides whether autogroups apply)
     * and before the first worker or thread-pool thread exists. */
    if (r >= 0)
        cr_self_raise_priority(&sup.self, loop, sup.cfg.priority_boost);
    pool_start_masked(loop); /* after the raise: its threads inherit it */
    if (r >= 0)
        r = cr_supervisor_spawn_all(&sup);
    if (r >= 0) {
        cr_memwatch_start(wi.mw);
        cr_acceptwatch_start(wi.aw);
        cr_scaler_start(wi.scaler);
    }
    if (r < 0) {
        char why[160];
        if (r != -ECANCELED) /* -ECANCELED: the cause was logged where it was found */
            cr_log(CR_LOG_ERR, "start-up failed: %s", strerror(-r));
        snprintf(why, sizeof why, "start-up failed%s%s", r == -ECANCELED ? " (see the log)" : ": ",
                 r == -ECANCELED ? "" : strerror(-r));
        /* Kill whatever was started before the failure; nothing may outlive us. */
        cr_supervisor_stop(&sup, true, "start-up failed");
        uv_run(loop, UV_RUN_DEFAULT);
        cr_termlog_exit(wi.termlog, CR_EXIT_STARTUP, why);
        cr_supervisor_done(&sup);
        return CR_EXIT_STARTUP;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    int code = sup.exit_code;
    char why[160];
    snprintf(why, sizeof why, "stopped (%s), no worker left", sup.stop_reason);
    cr_termlog_exit(wi.termlog, code, why);
    cr_supervisor_done(&sup);
    wi.sd = cr_sd_free(wi.sd);
    wi.mw = cr_memwatch_free(wi.mw);
    wi.ondeath = cr_ondeath_free(wi.ondeath);
    wi.aw = cr_acceptwatch_free(wi.aw);
    wi.scaler = cr_scaler_free(wi.scaler);
    uv_loop_close(loop);
    cr_log(CR_LOG_INFO, "corrald exits %d", code);
    return code;
}
