/* What a worker's notify message changes: its report (generation/report.c
 * keeps the sticky fields), READY=1 and WATCHDOG=1 as lifecycle events, the
 * first message as SPOKE (auto readiness), X_FATAL, and the request cap.
 * Called for both transports (the datagram socket and the stream). */
#include "worker_notify.h"

#include <stdio.h>

#include "internal.h"
#include "log.h"
#include "report.h"
#include "supervisor.h"

void cr_worker_notify(struct cr_worker *w, const struct cr_notify_msg *m)
{
    struct cr_gen *g = &w->g;
    unsigned changed = cr_report_take(&g->report, m, cr_now_ms(w->sup));
    if (changed & CR_REPORT_FIRST) /* it speaks the protocol (auto readiness) */
        cr_worker_event(w, CR_WE_SPOKE);
    if (changed & CR_REPORT_FATAL_HEAP)
        cr_log_event(CR_LOG_WARNING, "fatal", cr_worker_id(w), g->pid, NULL,
                     "worker %d reports X_FATAL=heap-limit (heap %llu of %llu bytes)",
                     cr_worker_id(w), (unsigned long long)g->report.last.heap_used,
                     (unsigned long long)g->report.last.heap_limit);
    if (m->present & CR_NF_READY)
        cr_worker_event(w, CR_WE_READY);
    if (m->present & CR_NF_WATCHDOG)
        cr_worker_event(w, CR_WE_WATCHDOG);
    if ((m->present & CR_NF_REQUESTS) && g->max_requests && m->requests >= g->max_requests) {
        char why[96];
        snprintf(why, sizeof(why), "request cap (%llu of %llu)", (unsigned long long)m->requests,
                 (unsigned long long)g->max_requests);
        cr_worker_recycle(w, why);
    }
}
