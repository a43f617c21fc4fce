/* What a worker's notify message changes: the sticky metrics of its last
 * report, its status text, X_FATAL, READY=1 and WATCHDOG=1 as lifecycle
 * events, and the request cap. Called for both transports (worker_io.c). */
#include "worker_notify.h"

#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "log.h"
#include "supervisor.h"

void cr_worker_notify(struct cr_worker *w, const struct cr_notify_msg *m)
{
    struct cr_supervisor *sup = w->sup;
    unsigned p = m->present;
    w->last_report_at = cr_now_ms(sup);
    if (!w->spoke) {
        /* Any message shows it speaks the protocol (auto readiness). */
        w->spoke = true;
        cr_worker_event(w, CR_WE_SPOKE);
    }
    /* Metrics fields are sticky: a message updates what it carries. */
#define TAKE(bit, f)                                                                            \
    if (p & (bit))                                                                              \
        w->last.f = m->f;
    TAKE(CR_NF_HEAP_USED, heap_used)
    TAKE(CR_NF_HEAP_TOTAL, heap_total)
    TAKE(CR_NF_HEAP_LIMIT, heap_limit)
    TAKE(CR_NF_EXTERNAL, external)
    TAKE(CR_NF_RSS, rss)
    TAKE(CR_NF_DELAY_P50, delay_p50_us)
    TAKE(CR_NF_DELAY_P99, delay_p99_us)
    TAKE(CR_NF_DELAY_MAX, delay_max_us)
    TAKE(CR_NF_INFLIGHT, inflight)
    TAKE(CR_NF_REQUESTS, requests)
    TAKE(CR_NF_POOL_QUEUE, pool_queue)
    TAKE(CR_NF_ELU, elu)
#undef TAKE
    w->last.present |= p;
    if (p & CR_NF_STATUS)
        snprintf(w->status_text, sizeof(w->status_text), "%s", m->status);
    if ((p & CR_NF_FATAL) && strcmp(m->fatal, "heap-limit") == 0) {
        w->fatal_heap_limit = true;
        cr_log_event(CR_LOG_WARNING, "fatal", w->id, w->pid, NULL,
                     "worker %d reports X_FATAL=heap-limit (heap %llu of %llu bytes)", w->id,
                     (unsigned long long)w->last.heap_used, (unsigned long long)w->last.heap_limit);
    }
    if (p & CR_NF_READY)
        cr_worker_event(w, CR_WE_READY);
    if (p & CR_NF_WATCHDOG) {
        w->heartbeats = true;
        cr_worker_event(w, CR_WE_WATCHDOG);
    }
    if ((p & CR_NF_REQUESTS) && w->max_requests && m->requests >= w->max_requests) {
        char why[96];
        snprintf(why, sizeof(why), "request cap (%llu of %llu)", (unsigned long long)m->requests,
                 (unsigned long long)w->max_requests);
        cr_worker_recycle(w, why);
    }
}
