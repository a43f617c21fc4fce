/* corral-worker: the reference worker. Wires the modules together, owns
 * the process-level concerns (signals, drain, notify, the heap-limit
 * death) and is the only place that logs. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "cr_config.h"
#include "router.h"
#include "trace.h"
#include "wpage.h"

struct main_state {
    struct cr_app app;
    uv_signal_t sigterm, sigint;
    uv_timer_t report, drain;
    int signals;
};

_Noreturn void cr_app_heap_fatal(struct cr_app *app, size_t want)
{
    struct cr_heap_stats st;
    cr_heap_stats(&app->heap, &st);
    uint64_t rss = 0;
    cr_report_rss(&rss);
    fprintf(stderr, "FATAL: heap limit reached (%zu/%zu), allocation of %zu bytes failed\n",
            st.used, st.limit, want);
    char msg[256];
    snprintf(msg, sizeof(msg),
             "X_FATAL=heap-limit\nX_HEAP_USED=%zu\nX_HEAP_TOTAL=%zu\nX_HEAP_LIMIT=%zu\n"
             "X_EXTERNAL=%zu\nX_RSS=%llu",
             st.used, st.total, st.limit, st.external, (unsigned long long)rss);
    cr_notify_send(&app->notify, msg);
    abort();
}

/* Keeps ids usable in headers and label values: no CR/LF, quotes or
 * backslashes can come through from the environment. */
static const char *clean_id(const char *s, const char *def)
{
    static char bufs[2][64];
    static int which;
    if (!s || !*s)
        return def;
    char *b = bufs[which++ & 1];
    size_t i = 0;
    for (; s[i] && i < sizeof(bufs[0]) - 1; i++) {
        char c = s[i];
        bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  c == '-' || c == '_' || c == '.';
        b[i] = ok ? c : '_';
    }
    b[i] = '\0';
    return b;
}

static void burn_path(const struct cr_wopts *o, char *out, size_t size)
{
    if (o->burn) {
        snprintf(out, size, "%s", o->burn);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        snprintf(out, size, "%s/corral-burn", dirname(self));
        if (access(out, X_OK) == 0)
            return;
    }
    snprintf(out, size, "%s/corral/corral-burn", CR_LIBEXECDIR);
}

/* The supervisor (corrald, or systemd) flags a worker blocked after
 * WATCHDOG_USEC of silence; a report period near it would flap on timer
 * jitter alone. Report at least four times per watchdog period. */
static uint64_t report_period_ms(const struct cr_wopts *o)
{
    uint64_t usec = 0, ms = o->report_interval_ms;
    if (sd_watchdog_enabled(0, &usec) > 0 && usec) {
        uint64_t cap = usec / 4000 ? usec / 4000 : 1;
        if (cap < ms)
            ms = cap;
    }
    return ms;
}

static void report_cb(uv_timer_t *t)
{
    struct main_state *ms = t->data;
    struct cr_loop_window w;
    char msg[CR_NOTIFY_MAX];
    cr_loopmon_roll(&ms->app.mon, &w);
    if (cr_report_format(&ms->app, &w, msg, sizeof(msg)) >= 0)
        cr_notify_send(&ms->app.notify, msg);
}

static void drained(void *ud)
{
    struct main_state *ms = ud;
    uv_close((uv_handle_t *)&ms->sigterm, NULL);
    uv_close((uv_handle_t *)&ms->sigint, NULL);
    uv_close((uv_handle_t *)&ms->report, NULL);
    uv_close((uv_handle_t *)&ms->drain, NULL);
    cr_loopmon_stop(&ms->app.mon, NULL);
}

static void drain_timeout(uv_timer_t *t)
{
    struct main_state *ms = t->data;
    const struct cr_server_stats *ss = cr_server_stats(ms->app.srv);
    fprintf(stderr,
            "corral-worker: drain timeout: cutting %llu connection(s), %llu request(s) in flight\n",
            (unsigned long long)ss->connections, (unsigned long long)ss->inflight);
    cr_server_close_all(ms->app.srv);
    /* Pool jobs and children cannot be cancelled: leave without them. */
    exit(0);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct main_state *ms = s->data;
    if (ms->signals++) {
        drain_timeout(&ms->drain); /* a second signal: stop waiting */
        return;
    }
    ms->app.draining = 1;
    cr_notify_send(&ms->app.notify, "STOPPING=1\nSTATUS=draining");
    uv_timer_start(&ms->drain, drain_timeout, ms->app.opts.drain_timeout_ms, 0);
    cr_server_drain(ms->app.srv, drained, ms);
}

static int serve(struct cr_app *app)
{
    int n = sd_listen_fds(1);
    if (n < 0)
        return n;
    if (n > 1) {
        fprintf(stderr, "corral-worker: expected 1 listening socket, got %d\n", n);
        return -EINVAL;
    }
    if (n == 1)
        return cr_server_adopt(app->srv, SD_LISTEN_FDS_START);
    if (app->opts.listen_port < 0) {
        fprintf(stderr, "corral-worker: no socket passed (LISTEN_FDS) and no --listen given\n");
        return -EINVAL;
    }
    return cr_server_listen(app->srv, app->opts.listen_host, app->opts.listen_port, 511);
}

static int setup(struct main_state *ms)
{
    struct cr_app *app = &ms->app;
    char burn[PATH_MAX];
    int r;
    cr_heap_init(&app->heap, app->opts.heap_limit);
    if ((r = cr_notify_init(&app->notify)) < 0)
        fprintf(stderr, "corral-worker: CORRAL_NOTIFY_FD: %s; not reporting\n", strerror(-r));
    if ((r = cr_trace_open()) < 0)
        fprintf(stderr, "corral-worker: %s: %s; not saying what it serves\n", CR_WPAGE_ENV,
                strerror(-r));
    cr_datafile_init(&app->file, app->loop, app->opts.file_size);
    burn_path(&app->opts, burn, sizeof(burn));
    if ((r = cr_execpool_init(&app->exec, app->loop, burn, app->opts.exec_concurrency,
                              app->opts.exec_queue)) < 0)
        return r;
    struct cr_server_config cfg = {
        .max_header = app->opts.max_header,
        .max_body = app->opts.max_body,
        .header_timeout_ms = app->opts.header_timeout_ms,
        .request_timeout_ms = app->opts.request_timeout_ms,
        .keepalive_timeout_ms = app->opts.keepalive_timeout_ms,
        .max_pipeline = 16,
        .worker_id = app->worker_id,
    };
    if ((r = cr_server_new(app->loop, &cfg, cr_router_handle, app, &app->srv)) < 0)
        return r;
    if ((r = serve(app)) < 0) {
        fprintf(stderr, "corral-worker: cannot listen: %s\n", uv_strerror(r));
        return r;
    }
    if ((r = cr_loopmon_start(&app->mon, app->loop, app->opts.loop_resolution_ms)) < 0)
        return r;
    uv_signal_init(app->loop, &ms->sigterm);
    uv_signal_init(app->loop, &ms->sigint);
    uv_timer_init(app->loop, &ms->report);
    uv_timer_init(app->loop, &ms->drain);
    ms->sigterm.data = ms->sigint.data = ms->report.data = ms->drain.data = ms;
    uv_signal_start(&ms->sigterm, on_signal, SIGTERM);
    uv_signal_start(&ms->sigint, on_signal, SIGINT);
    /* The first report goes out on the loop's first turn, right after
     * READY=1: from then on the supervisor's watchdog knows this worker
     * heartbeats, so a hang in its very first request is caught too. */
    uv_timer_start(&ms->report, report_cb, 0, report_period_ms(&app->opts));
    return 0;
}

static void teardown(struct main_state *ms)
{
    struct cr_app *app = &ms->app;
    cr_execpool_done(&app->exec);
    cr_heap_list_release(&app->heap, &app->retained);
    cr_heap_list_release(&app->heap, &app->retained_ext);
    cr_heap_done(&app->heap);
    cr_server_free(app->srv);
    cr_notify_done(&app->notify);
    cr_datafile_done(&app->file);
    uv_loop_close(app->loop);
}

int main(int argc, char **argv)
{
    static struct main_state ms;
    struct cr_app *app = &ms.app;
    char err[256];
    if (cr_wopts_parse(&app->opts, argc, argv, uv_available_parallelism(), err, sizeof(err)) < 0) {
        fprintf(stderr, "corral-worker: %s\n%s", err, cr_wopts_usage);
        return 2;
    }
    if (app->opts.help) {
        fputs(cr_wopts_usage, stdout);
        return 0;
    }
    if (app->opts.version) {
        printf("corral-worker %s\n", CR_VERSION);
        return 0;
    }
    signal(SIGPIPE, SIG_IGN);
    app->loop = uv_default_loop();
    /* Must precede the first uv_run, or idle time is not measured. */
    uv_loop_configure(app->loop, UV_METRICS_IDLE_TIME);
    app->worker_id = clean_id(getenv("CORRAL_WORKER_ID"), "0");
    app->generation = clean_id(getenv("CORRAL_GENERATION"), "0");
    app->start_ns = uv_hrtime();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    app->start_unix = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    if (setup(&ms) < 0)
        return 1;
    char ready[128];
    snprintf(ready, sizeof(ready), "READY=1\nSTATUS=serving (heap limit %zu MiB)",
             app->opts.heap_limit >> 20);
    cr_notify_send(&app->notify, ready);
    uv_run(app->loop, UV_RUN_DEFAULT);
    teardown(&ms);
    return 0;
}
