/* What the outside asks of the supervisor: scale, restart, reload, kill,
 * set, stop; signals; start-up and shut-down. */
#include "internal.h"

#include <cjson/cJSON.h>
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

#include "cr_config.h"
#include "history.h"
#include "log.h"
#include "trend.h"


/* ---- operations ---------------------------------------------------------- */

static int lowest_free_id(struct cr_supervisor *sup)
{
    for (int id = 1;; id++) {
        bool used = false;
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (w->id == id && !w->retire_on_exit)
                used = true;
        if (!used)
            return id;
    }
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
        if (!w->retire_on_exit && !w->replaces)
            have++;
    while (have < n) {
        struct cr_worker *w = cr_worker_new(sup, lowest_free_id(sup));
        if (!w)
            return -ENOMEM;
        cr_worker_start(w);
        have++;
    }
    /* Scale down: drain the highest ids first. */
    while (have > n) {
        struct cr_worker *top = NULL;
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (!w->retire_on_exit && !w->replaces && (!top || w->id > top->id))
                top = w;
        if (!top)
            break;
        if (top->replaced_by)
            cr_worker_drain(top->replaced_by, CR_KILL_STOP, "scale down");
        cr_worker_drain(top, CR_KILL_STOP, "scale down");
        have--;
    }
    cr_sd_update(sup);
    return 0;
}

int cr_supervisor_restart(struct cr_supervisor *sup, int id, const char *why)
{
    if (sup->stopping)
        return -ESHUTDOWN;
    bool any = false;
    for (struct cr_worker *w = sup->workers; w; w = w->next) {
        if ((id && w->id != id) || w->retire_on_exit || w->replaces)
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
    cr_sd_notify(sup, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading: replacing every "
                      "worker",
                 (unsigned long long)(uv_hrtime() / 1000));
    cr_log(CR_LOG_NOTICE, "reload (%s): rolling replacement of every worker", why);
    cr_supervisor_restart(sup, 0, why);
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
    if (strcmp(key, "log-level") == 0)
        cr_log_set_level(sup->cfg.log_level);
    if (strncmp(key, "memory-", 7) == 0)
        cr_cg_apply_limits(sup);
    if (strcmp(key, "sample-interval") == 0)
        cr_memwatch_restart_timer(sup);
    return 0;
}

static void close_cb_noop(uv_handle_t *h)
{
    (void)h;
}

static void finish_stop(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    cr_log(CR_LOG_NOTICE, "every worker is gone; exiting");
    extern void cr_control_close(struct cr_control * c);
    if (sup->control)
        cr_control_close(sup->control);
    sup->control = NULL;
    uv_handle_t *hs[] = {(uv_handle_t *)&sup->sig_term,     (uv_handle_t *)&sup->sig_int,
                         (uv_handle_t *)&sup->sig_hup,      (uv_handle_t *)&sup->sample_timer,
                         (uv_handle_t *)&sup->sd_timer,     (uv_handle_t *)&sup->notify_poll,
                         (uv_handle_t *)&sup->cg_trash_timer, (uv_handle_t *)&sup->finish_timer};
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++)
        if (hs[i]->type != UV_UNKNOWN_HANDLE && !uv_is_closing(hs[i]))
            uv_close(hs[i], close_cb_noop);
}

/* Once stopping and empty, exit from the next loop turn: a control client
 * whose `stop` emptied the table still gets its answer queued first. */
void cr_supervisor_maybe_finish(struct cr_supervisor *sup)
{
    if (!sup->stopping || sup->workers || sup->finish_timer.type == UV_UNKNOWN_HANDLE ||
        uv_is_active((uv_handle_t *)&sup->finish_timer) ||
        uv_is_closing((uv_handle_t *)&sup->finish_timer))
        return;
    uv_timer_start(&sup->finish_timer, finish_stop, 0, 0);
}

void cr_supervisor_stop(struct cr_supervisor *sup)
{
    if (sup->stopping)
        return;
    sup->stopping = true;
    cr_log(CR_LOG_NOTICE, "stopping: draining %u worker(s)", cr_supervisor_count_ready(sup));
    /* Draining may take up to the stop timeout: tell systemd so it waits. */
    cr_sd_notify(sup, "STOPPING=1\nSTATUS=stopping: draining workers\nEXTEND_TIMEOUT_USEC=%llu",
                 (unsigned long long)(sup->cfg.stop_timeout_ms + 5000) * 1000);
    /* Drain from a snapshot: draining a process-less worker frees it. */
    struct cr_worker *w = sup->workers;
    while (w) {
        struct cr_worker *next = w->next;
        cr_worker_drain(w, CR_KILL_STOP, "corrald stopping");
        w = next;
    }
    cr_supervisor_maybe_finish(sup);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct cr_supervisor *sup = h->data;
    if (signum == SIGHUP) {
        cr_supervisor_reload(sup, "SIGHUP");
        return;
    }
    if (sup->stopping) {
        cr_log(CR_LOG_NOTICE, "%s again: still draining", strsignal(signum));
        return;
    }
    cr_log(CR_LOG_NOTICE, "%s received", strsignal(signum));
    cr_supervisor_stop(sup);
}

/* ---- start-up ------------------------------------------------------------ */

static char *default_worker_path(void)
{
    const char *env = getenv("CORRAL_WORKER");
    if (env && *env)
        return strdup(env);
    /* In a build tree the worker sits in ../worker/ next to supervisor/. */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            char *cand = NULL;
            if (asprintf(&cand, "%s/../worker/corral-worker", self) >= 0 &&
                access(cand, X_OK) == 0)
                return cand;
            free(cand);
        }
    }
    return strdup(CR_LIBEXECDIR "/corral/corral-worker");
}

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

int cr_supervisor_start(struct cr_supervisor *sup, uv_loop_t *loop)
{
    int r;
    sup->loop = loop;
    sup->notify_fd = -1;
    sup->listener.fd = -1;
    sup->started_at = uv_now(loop);
    sup->started_wall_ms = cr_wall_ms();
    srandom((unsigned)(getpid() ^ sup->started_wall_ms));

    uv_signal_init(loop, &sup->sig_term);
    uv_signal_init(loop, &sup->sig_int);
    uv_signal_init(loop, &sup->sig_hup);
    sup->sig_term.data = sup->sig_int.data = sup->sig_hup.data = sup;
    uv_signal_start(&sup->sig_term, on_signal, SIGTERM);
    uv_signal_start(&sup->sig_int, on_signal, SIGINT);
    uv_signal_start(&sup->sig_hup, on_signal, SIGHUP);
    uv_timer_init(loop, &sup->sample_timer);
    uv_timer_init(loop, &sup->sd_timer);
    uv_timer_init(loop, &sup->cg_trash_timer);
    uv_timer_init(loop, &sup->finish_timer);
    sup->sample_timer.data = sup->sd_timer.data = sup->cg_trash_timer.data = sup;
    sup->finish_timer.data = sup;

    if ((r = cr_history_new(sup->cfg.history, &sup->history)) < 0)
        return r;
    sup->worker_path = default_worker_path();
    if (!sup->worker_path)
        return -ENOMEM;
    cr_sd_init(sup);
    if ((r = open_listener(sup)) < 0)
        return r;
    if ((r = cr_notify_open(sup->notify_addr, sizeof(sup->notify_addr), &sup->notify_fd)) < 0) {
        cr_log(CR_LOG_ERR, "cannot open the worker notify socket: %s", strerror(-r));
        return r;
    }
    if ((r = cr_io_notify_start(sup)) < 0)
        return r;
    if ((r = cr_cg_setup(sup)) < 0)
        return r;
    extern int cr_control_open(struct cr_supervisor * sup);
    if ((r = cr_control_open(sup)) < 0)
        return r;

    sup->target = sup->cfg.workers ? sup->cfg.workers : uv_available_parallelism();
    cr_log(CR_LOG_NOTICE, "corrald %s starting %u worker(s): %s", CR_VERSION, sup->target,
           sup->cfg.argc ? sup->cfg.argv[0] : sup->worker_path);
    for (unsigned i = 1; i <= sup->target; i++) {
        struct cr_worker *w = cr_worker_new(sup, (int)i);
        if (!w)
            return -ENOMEM;
        cr_worker_start(w);
    }
    cr_memwatch_start(sup);
    cr_sd_update(sup);
    return 0;
}

void cr_supervisor_done(struct cr_supervisor *sup)
{
    cr_cg_done(sup);
    if (sup->notify_fd >= 0)
        close(sup->notify_fd);
    cr_listen_close(&sup->listener);
    sup->history = cr_history_free(sup->history);
    free(sup->worker_path);
    free(sup->generations);
    cr_config_done(&sup->cfg);
}
