/* A reaped worker's post-mortem: evidence in, classification and record
 * out. The core records it and applies the restart policy. */
#include "worker_death.h"

#include <stdio.h>
#include <stdlib.h>

#include "cgsetup.h"
#include "clock.h"
#include "death.h"
#include "history.h"
#include "internal.h"
#include "worker_io.h"

static void fill(struct cr_postmortem *pm, const struct cr_worker *w)
{
    pm->worker_id = (unsigned)w->id;
    pm->pid = w->pid;
    pm->generation = w->generation;
    pm->start_ms = (int64_t)w->spawned_wall_ms;
    pm->end_ms = (int64_t)cr_wall_ms();
    pm->rss = w->rss ? w->rss : w->last.rss;
    pm->heap_used = w->last.heap_used;
    pm->heap_total = w->last.heap_total;
    pm->heap_limit = w->last.present & CR_NF_HEAP_LIMIT ? w->last.heap_limit : w->heap_limit_given;
    pm->heap_unknown = !(w->last.present & CR_NF_HEAP_USED);
    pm->loop_unknown = !(w->last.present & CR_NF_DELAY_MAX);
    pm->external = w->last.external;
    pm->loop_delay_max_us = w->last.delay_max_us;
}

struct cr_postmortem *cr_worker_postmortem(struct cr_worker *w, uint64_t now_ms)
{
    cr_io_drain_output(w);
    char tail[CR_STDERR_TAIL];
    size_t tail_len = 0;
    cr_io_tail(w, tail, &tail_len);

    struct cr_postmortem *pm = calloc(1, sizeof(*pm));
    if (!pm)
        return NULL;
    struct cr_death_evidence ev = {
        .cld_code = w->wait_code,
        .cld_status = w->wait_status,
        .exec_failed = w->exec_errno != 0,
        .exec_errno = w->exec_errno,
        .kill_reason = w->kill_reason,
        .kill_signal = w->kill_signal,
        .kill_sigmask = w->kill_sigmask,
        .kill_text = w->kill_text[0] ? w->kill_text : NULL,
        .fatal_heap_limit = w->fatal_heap_limit,
        .heap_used = w->last.heap_used,
        .heap_limit = w->last.heap_limit,
        .stderr_tail = tail,
        .stderr_len = tail_len,
        .uptime_ms = now_ms - w->spawned_at,
    };
    cr_cg_worker_evidence(w, &ev, pm);

    struct cr_death_result res;
    if (cr_death_classify(&ev, &res) < 0) {
        res = (struct cr_death_result){.category = CR_DEATH_SIGNAL, .exit_code = -1};
        snprintf(res.reason, sizeof(res.reason), "unclassifiable wait status %d/%d", w->wait_code,
                 w->wait_status);
    }
    fill(pm, w);
    pm->uptime_ms = ev.uptime_ms;
    cr_postmortem_set_death(pm, &res);
    cr_postmortem_set_stderr(pm, tail, tail_len);
    return pm;
}
