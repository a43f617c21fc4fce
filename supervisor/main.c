/* corrald: configuration in, supervisor out. The wiring lives here and
 * only here: the core is started, the outputs subscribe to its events, and
 * the inputs (control socket, metrics listener, memory watch, signals,
 * worker notify messages) are opened and pointed down at it. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <uv.h>

#include "cgsetup.h"
#include "control.h"
#include "cr_config.h"
#include "exitnotice.h"
#include "internal.h"
#include "log.h"
#include "memwatch.h"
#include "metrics_http.h"
#include "operations.h"
#include "sd.h"
#include "status.h"
#include "supervisor.h"
#include "view.h"
#include "worker_io.h"
#include "worker_notify.h"

/* What main.c opened around the core, closed when the core finishes. */
struct wiring {
    struct cr_supervisor *sup;
    uv_signal_t sig_term, sig_int, sig_hup, sig_chld;
    struct cr_metrics_http *http;
    struct cr_sd *sd;
    struct cr_memwatch *mw;
    struct cr_exitnotice *en; /* while spares are kept */
    uv_timer_t autogroup_retry; /* the kernel's autogroup rate limit (priority.h) */
    unsigned autogroup_tries;
    char en_failed[128];      /* why it could not be opened (not tried again) */
};

/* A generation's descriptors report to these (worker_io.c). */
static const struct cr_io_sink io_sink = {
    .exited = cr_worker_reaped,
    .message = cr_worker_notify,
    .recycle = cr_worker_recycle,
    .exit_notice = cr_worker_exit_notice,
};

static void on_exit_notice(void *ctx, const struct cr_taskstats_exit *e)
{
    cr_io_exit_notice(ctx, e);
}

/* The kernel's exit notices are listened to while spares are kept (they
 * are what lets one take a slot before the dead worker's memory is freed)
 * and not otherwise: the kernel sends one for every exit on the machine.
 * Opened when spares are first wanted, closed when none are. */
static void exit_notice_sync(struct wiring *wi)
{
    struct cr_supervisor *sup = wi->sup;
    bool want = sup->cfg.spares > 0 && !sup->cfg.no_exit_notice && !cr_supervisor_stopping(sup);
    if (want && !wi->en && !wi->en_failed[0]) {
        char why[sizeof(wi->en_failed)];
        wi->en = cr_exitnotice_open(sup->loop, on_exit_notice, sup, why, sizeof(why));
        if (wi->en) {
            cr_log(CR_LOG_INFO, "exit notices: taskstats (a spare takes a dying worker's slot "
                                "before its memory is freed)");
        } else {
            snprintf(wi->en_failed, sizeof(wi->en_failed), "%s", why);
            cr_log(CR_LOG_NOTICE, "exit notices unavailable (%s): a spare takes a dead worker's "
                                  "slot once it is reaped", why);
        }
    } else if (!want) {
        cr_exitnotice_close(wi->en); /* NULL: a no-op */
        wi->en = NULL;
    }
    const char *failed = cr_exitnotice_failed(wi->en); /* NULL: none */
    if (failed)
        snprintf(sup->exit_notice, sizeof(sup->exit_notice), "stopped: %s", failed);
    else if (wi->en)
        snprintf(sup->exit_notice, sizeof(sup->exit_notice), "taskstats");
    else if (want)
        snprintf(sup->exit_notice, sizeof(sup->exit_notice), "unavailable: %s", wi->en_failed);
    else
        snprintf(sup->exit_notice, sizeof(sup->exit_notice), "off");
}

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
    cr_log(CR_LOG_NOTICE, "%s received", strsignal(signum));
    cr_supervisor_stop(sup);
}

static void on_sigchld(uv_signal_t *h, int signum)
{
    cr_io_reap_children(h->data);
}

/* corrald is a child subreaper: a worker's children that outlive it are
 * re-parented here, not to init, and reaped on SIGCHLD — no zombie stays
 * behind, and as a container's PID 1 corrald reaps every orphan. */
static void reaper_start(struct wiring *wi, uv_loop_t *loop)
{
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        cr_log(CR_LOG_WARNING, "cannot become a child subreaper: %s", strerror(errno));
    uv_signal_init(loop, &wi->sig_chld);
    wi->sig_chld.data = wi->sup;
    uv_signal_start(&wi->sig_chld, on_sigchld, SIGCHLD);
}

static void signals_start(struct wiring *wi, uv_loop_t *loop)
{
    uv_signal_t *hs[] = {&wi->sig_term, &wi->sig_int, &wi->sig_hup};
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < 3; i++) {
        uv_signal_init(loop, hs[i]);
        hs[i]->data = wi->sup;
        uv_signal_start(hs[i], on_signal, sigs[i]);
    }
}

/* The control socket's `events` stream, and the end of everything main.c
 * opened once the core has finished. */
static void on_event(void *userdata, const struct cr_event *ev)
{
    struct wiring *wi = userdata;
    struct cr_supervisor *sup = wi->sup;
    if (ev->type == CR_EV_FINISHED) {
        if (sup->control)
            cr_control_close(sup->control);
        sup->control = NULL;
        cr_metrics_http_close(wi->http);
        wi->http = NULL;
        uv_close((uv_handle_t *)&wi->sig_term, NULL);
        uv_close((uv_handle_t *)&wi->sig_int, NULL);
        uv_close((uv_handle_t *)&wi->sig_hup, NULL);
        uv_close((uv_handle_t *)&wi->sig_chld, NULL);
        cr_exitnotice_close(wi->en);
        wi->en = NULL;
        return;
    }
    if (ev->type == CR_EV_CONFIG || ev->type == CR_EV_STOPPING)
        exit_notice_sync(wi);
    cJSON *o = cr_event_json(ev);
    if (o && sup->control)
        cr_control_broadcast(sup->control, o);
    cJSON_Delete(o);
}

/* Everything before the workers: subscriptions, then the core's sockets
 * and cgroups, then the ways in from outside. */
static int open_all(struct wiring *wi, uv_loop_t *loop)
{
    struct cr_supervisor *sup = wi->sup;
    int r;
    cr_supervisor_init(sup, loop);
    sup->io_sink = &io_sink;
    if ((r = cr_sd_new(sup, loop, &wi->sd)) < 0 || (r = cr_memwatch_new(sup, loop, &wi->mw)) < 0)
        return r;
    cr_supervisor_subscribe(sup, cr_log_on_event, NULL);
    cr_supervisor_subscribe(sup, cr_sd_on_event, wi->sd);
    cr_supervisor_subscribe(sup, cr_memwatch_on_event, wi->mw);
    cr_supervisor_subscribe(sup, on_event, wi);
    /* Signal handles only once on_event is subscribed: it is what closes
     * them when the core finishes, so a failure before this point leaves
     * nothing that would keep the failure path's loop running. */
    signals_start(wi, loop);
    reaper_start(wi, loop);
    /* The control path first: a second corrald refused there (the path is
     * owned) must not bind the port or touch the cgroups of the first. */
    if ((r = cr_control_open(sup)) < 0)
        return r;
    /* The instance (its worker cgroups) is named after the control path it owns. */
    if (!sup->cfg.instance &&
        (r = cr_cg_default_instance(cr_control_path(sup->control), &sup->cfg.instance)) < 0)
        return r;
    if ((r = cr_supervisor_open(sup)) < 0)
        return r;
    /* The Prometheus listener shares the control socket's lifetime: both
     * are how the outside reads corrald, and both close at its exit. */
    if (sup->cfg.metrics_listen && (r = cr_metrics_http_open(sup, &wi->http)) < 0) {
        cr_log(CR_LOG_ERR, "--metrics-listen %s: %s", sup->cfg.metrics_listen, uv_strerror(r));
        return r;
    }
    exit_notice_sync(wi);
    return 0;
}

/* The directory of the control socket must exist: say so by the option's
 * name, not by errno text about a lock file. */
static int check_control_dir(const struct cr_config *cfg, char *err, size_t errlen)
{
    if (!cfg->control || !strchr(cfg->control, '/'))
        return 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", cfg->control);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    struct stat st;
    if (stat(dir, &st) < 0) {
        snprintf(err, errlen, "--control: directory %.400s does not exist", dir);
        return -ENOENT;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--control: %.400s is not a directory", dir);
        return -ENOTDIR;
    }
    return 0;
}

static int load_file(struct cr_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "--config %s: %s", path, strerror(errno));
        return -errno;
    }
    char *text = NULL;
    size_t cap = 0, len = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            if (cap > (1u << 20)) { /* a config file has no business being this big */
                snprintf(err, errlen, "--config %s: larger than 1 MiB", path);
                free(text);
                fclose(f);
                return -EFBIG;
            }
            cap = cap ? cap * 2 : 8192;
            char *n = realloc(text, cap);
            if (!n) {
                free(text);
                fclose(f);
                return -ENOMEM;
            }
            text = n;
        }
        size_t got = fread(text + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    fclose(f);
    text[len] = '\0';
    int r = cr_config_parse_json(cfg, text, err, errlen);
    free(text);
    return r;
}

/* corrald holds about six descriptors per worker (pidfd, output, notify
 * stream, OOM watch, the memory readings) and uses epoll, never select():
 * systemd's default soft limit of 1024 would stop it near 170 workers.
 * Raise the soft limit to the hard one, as systemd advises for such
 * programs; every worker gets the original back before exec (spawn.c),
 * since a program of its own may still use select(). */
static void raise_nofile(struct cr_supervisor *sup)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    sup->nofile = rl;
    sup->nofile_saved = true;
    if (rl.rlim_cur == rl.rlim_max)
        return;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        cr_log(CR_LOG_WARNING, "cannot raise the open-files limit to %llu: %s",
               (unsigned long long)rl.rlim_max, strerror(errno));
}

/* What became of the autogroup, for the log line. */
static void autogroup_note(const struct cr_priority *p, char *buf, size_t size)
{
    buf[0] = '\0';
    if (p->autogroup == CR_PRIORITY_AUTOGROUP_RAISED)
        snprintf(buf, size, "; its session's autogroup at nice %d%s", p->autogroup_nice,
                 p->autogroup_limited ? ", as low as RLIMIT_NICE allows" : "");
    else if (p->autogroup == CR_PRIORITY_AUTOGROUP_NOT_LEADER)
        snprintf(buf, size, "; autogroup left alone (the session is not corrald's own)");
    else if (p->autogroup == CR_PRIORITY_AUTOGROUP_NOT_ROOT)
        snprintf(buf, size, "; autogroups do not apply (corrald's CPU cgroup decides)");
    else if (p->autogroup == CR_PRIORITY_AUTOGROUP_FAILED && p->autogroup_err == EAGAIN)
        snprintf(buf, size, "; autogroup: the kernel's rate limit, tried again from a timer");
    else if (p->autogroup == CR_PRIORITY_AUTOGROUP_FAILED)
        snprintf(buf, size, "; autogroup not raised: %s", strerror(p->autogroup_err));
}

/* Without CAP_SYS_ADMIN the kernel takes one autogroup change per 100 ms,
 * machine-wide: corralds starting together try again, three times, from
 * a timer that never holds the loop. */
static void on_autogroup_retry(uv_timer_t *t)
{
    struct wiring *wi = t->data;
    struct cr_priority *p = &wi->sup->priority;
    p->autogroup = cr_priority_retry_autogroup(p);
    bool again = p->autogroup == CR_PRIORITY_AUTOGROUP_FAILED && p->autogroup_err == EAGAIN;
    if (again && ++wi->autogroup_tries < 3)
        return;
    uv_close((uv_handle_t *)t, NULL);
    char ag[112];
    if (again)
        snprintf(ag, sizeof(ag), "; autogroup not raised: %s", strerror(EAGAIN));
    else
        autogroup_note(p, ag, sizeof(ag));
    cr_log(CR_LOG_INFO, "corrald's autogroup, tried again%s", ag);
}

/* corrald answers while its workers start: it runs above them
 * (priority.h), and says how far, once. */
static void raise_priority(struct wiring *wi, uv_loop_t *loop)
{
    struct cr_supervisor *sup = wi->sup;
    struct cr_priority *p = &sup->priority;
    int r = cr_priority_raise(sup->cfg.priority_boost, p);
    if (r < 0) {
        cr_log(CR_LOG_WARNING, "cannot read corrald's scheduling attributes: %s", strerror(-r));
        return;
    }
    if (sup->cfg.priority_boost == 0)
        return;
    if (p->policy != SCHED_OTHER) {
        cr_log(CR_LOG_INFO, "corrald was started with scheduling policy %d, not SCHED_OTHER: "
                            "its priority and its workers' are left as they are", p->policy);
        return;
    }
    char ag[112];
    autogroup_note(p, ag, sizeof(ag));
    char slice[96];
    if (p->slice_now != p->slice_ns)
        snprintf(slice, sizeof(slice), "a %.1f ms slice", (double)p->slice_now / 1e6);
    else if (p->slice_err)
        snprintf(slice, sizeof(slice), "the kernel's slice (sched_setattr: %s)",
                 strerror(p->slice_err));
    else
        snprintf(slice, sizeof(slice), "the kernel's slice (no custom slice before Linux 6.12)");
    if (!cr_priority_raised(p))
        cr_log(CR_LOG_INFO, "corrald's priority is left as it was started: %s, nice %d%s%s",
               slice, p->nice,
               p->nice_err ? " (a lower one needs CAP_SYS_NICE or LimitNICE=)" : "", ag);
    else if (p->nice_err && p->nice_now == p->nice)
        cr_log(CR_LOG_NOTICE, "corrald cannot run at a lower nice than its workers (%s; needs "
                              "CAP_SYS_NICE or LimitNICE=): nice %d as they, %s%s",
               strerror(p->nice_err), p->nice_now, slice, ag);
    else
        cr_log(CR_LOG_INFO, "corrald runs above its workers: nice %d (workers %d%s), %s%s",
               p->nice_now, p->nice, p->nice_err ? "; as low as RLIMIT_NICE allows" : "",
               slice, ag);
    if (p->autogroup == CR_PRIORITY_AUTOGROUP_FAILED && p->autogroup_err == EAGAIN &&
        uv_timer_init(loop, &wi->autogroup_retry) == 0) {
        wi->autogroup_retry.data = wi;
        uv_timer_start(&wi->autogroup_retry, on_autogroup_retry, 110, 110);
        uv_unref((uv_handle_t *)&wi->autogroup_retry);
    }
}

int main(int argc, char **argv)
{
    static struct cr_supervisor sup;
    char err[512] = "";
    char action = 0;

    cr_config_init(&sup.cfg);
    const char *file = cr_config_find_file(argc, argv);
    int r = file ? load_file(&sup.cfg, file, err, sizeof(err)) : 0;
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
        r = check_control_dir(&sup.cfg, err, sizeof(err));
    if (r < 0) {
        fprintf(stderr, "corrald: %s\nTry 'corrald --help'.\n", err[0] ? err : strerror(-r));
        cr_config_done(&sup.cfg);
        return 2;
    }

    cr_log_init(sup.cfg.log_level);
    /* A worker's closed pipe must be an error return, not our death. */
    signal(SIGPIPE, SIG_IGN);
    raise_nofile(&sup);

    uv_loop_t *loop = uv_default_loop();
    static struct wiring wi = {.sup = &sup};
    r = open_all(&wi, loop);
    /* After the cgroup set-up (on v2 corrald has moved into its leaf and
     * enabled the cpu controller, which decides whether autogroups apply)
     * and before the first worker or thread-pool thread exists. */
    if (r >= 0)
        raise_priority(&wi, loop);
    if (r >= 0)
        r = cr_supervisor_spawn_all(&sup);
    if (r >= 0)
        cr_memwatch_start(wi.mw);
    if (r < 0) {
        if (r != -ECANCELED) /* -ECANCELED: the cause was logged where it was found */
            cr_log(CR_LOG_ERR, "start-up failed: %s", strerror(-r));
        /* Kill whatever was started before the failure; nothing may outlive us. */
        cr_supervisor_stop(&sup);
        uv_run(loop, UV_RUN_DEFAULT);
        cr_supervisor_done(&sup);
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    int code = sup.exit_code;
    cr_supervisor_done(&sup);
    wi.sd = cr_sd_free(wi.sd);
    wi.mw = cr_memwatch_free(wi.mw);
    uv_loop_close(loop);
    cr_log(CR_LOG_INFO, "corrald exits %d", code);
    return code;
}
