/* The worker's own /metrics in the Prometheus text format 0.0.4. */
#include "app.h"
#include "cr_config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "prom.h"

static void memory(struct cr_prom *o, struct cr_app *app)
{
    struct cr_heap_stats st;
    uint64_t rss = 0;
    cr_heap_stats(&app->heap, &st);
    cr_report_rss(&rss);
    cr_prom_gauge(o, "corral_worker_heap_used_bytes", "Live bytes in the managed heap.",
                  (double)st.used);
    cr_prom_gauge(o, "corral_worker_heap_total_bytes", "Bytes reserved by the managed heap.",
                  (double)st.total);
    cr_prom_gauge(o, "corral_worker_heap_limit_bytes",
                  "Managed heap limit; past it the worker aborts.", (double)st.limit);
    cr_prom_gauge(o, "corral_worker_external_bytes",
                  "Off-heap buffer bytes (counted in RSS, not heap).", (double)st.external);
    cr_prom_gauge(o, "corral_worker_resident_memory_bytes",
                  "Resident set size from /proc/self/statm.", (double)rss);
}

static void loop(struct cr_prom *o, struct cr_app *app)
{
    const struct cr_loop_window *w = &app->mon.last;
    cr_prom_family(o, "corral_worker_event_loop_delay_seconds", "summary",
                   "Event-loop timer lateness over the last report window.");
    static const char *const qs[] = {"0.5", "0.9", "0.99"};
    const uint64_t vs[] = {w->p50_us, w->p90_us, w->p99_us};
    for (int i = 0; i < 3; i++)
        cr_prom_printf(o, "corral_worker_event_loop_delay_seconds{quantile=\"%s\"} %.6f\n", qs[i],
                       (double)vs[i] / 1e6);
    cr_prom_printf(o, "corral_worker_event_loop_delay_seconds_sum %.6f\n", (double)w->sum_us / 1e6);
    cr_prom_printf(o, "corral_worker_event_loop_delay_seconds_count %llu\n",
                   (unsigned long long)w->samples);
    cr_prom_gauge(o, "corral_worker_event_loop_delay_max_seconds",
                  "Longest event-loop timer lateness in the last report window.",
                  (double)w->max_us / 1e6);
    cr_prom_gauge(o, "corral_worker_event_loop_utilization_ratio",
                  "Event-loop utilization (0..1) over the last report window.", w->elu);
}

static void http(struct cr_prom *o, struct cr_app *app)
{
    const struct cr_server_stats *ss = cr_server_stats(app->srv);
    cr_prom_counter(o, "corral_worker_http_requests_total", "Requests parsed and dispatched.",
                    (double)ss->requests);
    cr_prom_family(o, "corral_worker_http_responses_total", "counter",
                   "Responses, by status code.");
    for (int s = 100; s < 600; s++)
        if (ss->by_status[s])
            cr_prom_printf(o, "corral_worker_http_responses_total{code=\"%d\"} %llu\n", s,
                           (unsigned long long)ss->by_status[s]);
    cr_prom_gauge(o, "corral_worker_http_inflight_requests",
                  "Requests dispatched, not yet answered.", (double)ss->inflight);
    cr_prom_gauge(o, "corral_worker_http_connections", "Open client connections.",
                  (double)ss->connections);
    cr_prom_counter(o, "corral_worker_http_connections_accepted_total", "Connections accepted.",
                    (double)ss->accepted);
}

int cr_metrics_render(struct cr_app *app, char **ret_buf)
{
    struct cr_prom o = CR_PROM_INIT;
    cr_prom_family(&o, "corral_worker_info", "gauge", "Worker identity; always 1.");
    cr_prom_printf(
        &o, "corral_worker_info{worker_id=\"%s\",generation=\"%s\",version=\"%s\",pid=\"%d\"} 1\n",
        app->worker_id, app->generation, CR_VERSION, (int)getpid());
    cr_prom_gauge(&o, "corral_worker_start_time_seconds",
                  "Start time, seconds since the Unix epoch.", app->start_unix);
    memory(&o, app);
    loop(&o, app);
    http(&o, app);
    cr_prom_gauge(&o, "corral_worker_threadpool_queue_jobs",
                  "Jobs this worker submitted to the libuv pool, queued or running.",
                  (double)app->pool_queue);
    cr_prom_counter(&o, "corral_worker_threadpool_jobs_total", "Jobs submitted to the libuv pool.",
                    (double)app->pool_jobs);
    cr_prom_gauge(&o, "corral_worker_exec_running_processes", "/exec children running.",
                  app->exec.running);
    cr_prom_gauge(&o, "corral_worker_exec_queued_requests", "/exec requests waiting for a slot.",
                  app->exec.queued);
    cr_prom_counter(&o, "corral_worker_exec_started_total", "/exec children started.",
                    (double)app->exec.started);
    cr_prom_counter(&o, "corral_worker_exec_rejected_total",
                    "/exec requests refused with 503 (queue full).", (double)app->exec.rejected);
    cr_prom_counter(&o, "corral_worker_state_hits_total",
                    "Hits of /counter: module-level state of this process.", (double)app->counter);
    size_t len;
    int r = cr_prom_take(&o, ret_buf, &len);
    return r < 0 ? r : (int)len;
}
