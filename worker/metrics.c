/* The worker's own /metrics in the Prometheus text format 0.0.4. */
#include "app.h"
#include "cr_config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct out {
    char *buf;
    size_t len, cap;
    bool oom;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    for (int tries = 0; tries < 2 && !o->oom; tries++) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->oom = true;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap * 2 + (size_t)n;
        char *b = realloc(o->buf, cap);
        if (!b) {
            o->oom = true;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
}

static void family(struct out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(struct out *o, const char *name, const char *help, double v)
{
    family(o, name, "gauge", help);
    put(o, "%s %.17g\n", name, v);
}

static void counter(struct out *o, const char *name, const char *help, double v)
{
    family(o, name, "counter", help);
    put(o, "%s %.17g\n", name, v);
}

static void memory(struct out *o, struct cr_app *app)
{
    struct cr_heap_stats st;
    uint64_t rss = 0;
    cr_heap_stats(&app->heap, &st);
    cr_report_rss(&rss);
    gauge(o, "corral_worker_heap_used_bytes", "Live bytes in the managed heap.", (double)st.used);
    gauge(o, "corral_worker_heap_total_bytes", "Bytes reserved by the managed heap.",
          (double)st.total);
    gauge(o, "corral_worker_heap_limit_bytes", "Managed heap limit; past it the worker aborts.",
          (double)st.limit);
    gauge(o, "corral_worker_external_bytes", "Off-heap buffer bytes (counted in RSS, not heap).",
          (double)st.external);
    gauge(o, "corral_worker_resident_memory_bytes", "Resident set size from /proc/self/statm.",
          (double)rss);
}

static void loop(struct out *o, struct cr_app *app)
{
    const struct cr_loop_window *w = &app->mon.last;
    family(o, "corral_worker_event_loop_delay_seconds", "summary",
           "Event-loop timer lateness over the last report window.");
    static const char *const qs[] = {"0.5", "0.9", "0.99"};
    const uint64_t vs[] = {w->p50_us, w->p90_us, w->p99_us};
    for (int i = 0; i < 3; i++)
        put(o, "corral_worker_event_loop_delay_seconds{quantile=\"%s\"} %.6f\n", qs[i],
            (double)vs[i] / 1e6);
    put(o, "corral_worker_event_loop_delay_seconds_sum %.6f\n", (double)w->sum_us / 1e6);
    put(o, "corral_worker_event_loop_delay_seconds_count %llu\n", (unsigned long long)w->samples);
    gauge(o, "corral_worker_event_loop_delay_max_seconds",
          "Longest event-loop timer lateness in the last report window.", (double)w->max_us / 1e6);
    gauge(o, "corral_worker_event_loop_utilization_ratio",
          "Event-loop utilization (0..1) over the last report window.", w->elu);
}

static void http(struct out *o, struct cr_app *app)
{
    const struct cr_server_stats *ss = cr_server_stats(app->srv);
    counter(o, "corral_worker_http_requests_total", "Requests parsed and dispatched.",
            (double)ss->requests);
    family(o, "corral_worker_http_responses_total", "counter", "Responses, by status code.");
    for (int s = 100; s < 600; s++)
        if (ss->by_status[s])
            put(o, "corral_worker_http_responses_total{code=\"%d\"} %llu\n", s,
                (unsigned long long)ss->by_status[s]);
    gauge(o, "corral_worker_http_inflight_requests", "Requests dispatched, not yet answered.",
          (double)ss->inflight);
    gauge(o, "corral_worker_http_connections", "Open client connections.", (double)ss->connections);
    counter(o, "corral_worker_http_connections_accepted_total", "Connections accepted.",
            (double)ss->accepted);
}

int cr_metrics_render(struct cr_app *app, char **ret_buf)
{
    struct out o = {.cap = 4096};
    o.buf = malloc(o.cap);
    if (!o.buf)
        return -ENOMEM;
    family(&o, "corral_worker_info", "gauge", "Worker identity; always 1.");
    put(&o, "corral_worker_info{worker_id=\"%s\",generation=\"%s\",version=\"%s\",pid=\"%d\"} 1\n",
        app->worker_id, app->generation, CR_VERSION, (int)getpid());
    gauge(&o, "corral_worker_start_time_seconds", "Start time, seconds since the Unix epoch.",
          app->start_unix);
    memory(&o, app);
    loop(&o, app);
    http(&o, app);
    gauge(&o, "corral_worker_threadpool_queue_jobs",
          "Jobs this worker submitted to the libuv pool, queued or running.",
          (double)app->pool_queue);
    counter(&o, "corral_worker_threadpool_jobs_total", "Jobs submitted to the libuv pool.",
            (double)app->pool_jobs);
    gauge(&o, "corral_worker_exec_running_processes", "/exec children running.", app->exec.running);
    gauge(&o, "corral_worker_exec_queued_requests", "/exec requests waiting for a slot.",
          app->exec.queued);
    counter(&o, "corral_worker_exec_started_total", "/exec children started.",
            (double)app->exec.started);
    counter(&o, "corral_worker_exec_rejected_total",
            "/exec requests refused with 503 (queue full).", (double)app->exec.rejected);
    counter(&o, "corral_worker_state_hits_total",
            "Hits of /counter: module-level state of this process.", (double)app->counter);
    if (o.oom) {
        free(o.buf);
        return -ENOMEM;
    }
    *ret_buf = o.buf;
    return (int)o.len;
}
