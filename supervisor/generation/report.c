/* The worker's own reports: see report.h. */
#include "report.h"

#include <stdio.h>
#include <string.h>

void cr_report_reset(struct cr_report *r, uint64_t now)
{
    *r = (struct cr_report){.last_at = now};
}

unsigned cr_report_take(struct cr_report *r, const struct cr_notify_msg *m, uint64_t now)
{
    unsigned p = m->present, changed = 0;
    r->last_at = now;
    if (r->speech == CR_SPEECH_SILENT) {
        r->speech = CR_SPEECH_SPOKE;
        changed |= CR_REPORT_FIRST;
    }
    if ((p & CR_NF_WATCHDOG) && r->speech < CR_SPEECH_BEATS)
        r->speech = CR_SPEECH_BEATS;
        /* Metrics fields are sticky: a message updates what it carries. */
#define TAKE(bit, f)                                                                               \
    if (p & (bit))                                                                                 \
        r->last.f = m->f;
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
    if (p & CR_NF_ELU) {
        if (r->elu_at && now > r->elu_at)
            r->elu_period_ms = now - r->elu_at;
        r->elu_at = now;
    }
    if (p & CR_NF_HEAP_SPACES) {
        r->last.nspaces = m->nspaces;
        memcpy(r->last.spaces, m->spaces, m->nspaces * sizeof(m->spaces[0]));
    }
    r->last.present |= p;
    if (p & CR_NF_STATUS)
        snprintf(r->status_text, sizeof(r->status_text), "%s", m->status);
    if ((p & CR_NF_FATAL) && strcmp(m->fatal, "heap-limit") == 0 &&
        r->fatal != CR_FATAL_HEAP_LIMIT) {
        r->fatal = CR_FATAL_HEAP_LIMIT;
        changed |= CR_REPORT_FATAL_HEAP;
    }
    return changed;
}
