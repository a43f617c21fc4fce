/* The worker's state, shared by main.c, the router and the endpoints.
 * One instance per process, owned by main(). */
#pragma once

#include <stdint.h>
#include <uv.h>

#include "datafile.h"
#include "execpool.h"
#include "heap.h"
#include "loopmon.h"
#include "notify.h"
#include "options.h"
#include "server.h"

struct cr_app {
    uv_loop_t *loop;
    struct cr_wopts opts;
    struct cr_server *srv;
    struct cr_heap heap;
    struct cr_heap_list retained;     /* /alloc?retain=1: a leak on purpose */
    struct cr_heap_list retained_ext; /* /buffer?retain=1 */
    struct cr_loopmon mon;
    struct cr_execpool exec;
    struct cr_notify notify;
    uint64_t counter;    /* /counter: module-level state */
    uint64_t pool_queue; /* our thread-pool jobs queued or running */
    uint64_t pool_jobs;  /* thread-pool jobs submitted, total */
    struct cr_datafile file; /* the /file data, made on first use */
    const char *worker_id;
    const char *generation;
    uint64_t start_ns;
    double start_unix;
    int draining;
};

/* main.c: dies like V8 at its heap limit: logs, reports X_FATAL, aborts. */
_Noreturn void cr_app_heap_fatal(struct cr_app *app, size_t want);

/* metrics.c: renders Prometheus text into a malloc'd buffer. Returns its
 * length, or -ENOMEM. */
int cr_metrics_render(struct cr_app *app, char **ret_buf);

/* report.c: the periodic report datagram, and RSS from /proc/self/statm. */
int cr_report_rss(uint64_t *ret_bytes);
int cr_report_format(struct cr_app *app, const struct cr_loop_window *w, char *buf, size_t size);
