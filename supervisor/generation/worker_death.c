/* A reaped generation's post-mortem: evidence in, classification and record
 * out. The core records it and applies the restart policy. */
#include "worker_death.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgworker.h"
#include "clock.h"
#include "death.h"
#include "diag.h"
#include "gen.h"
#include "history.h"
#include "page.h"
#include "stackdump.h"
#include "wio.h"

static void fill(struct cr_postmortem *pm, const struct cr_gen *g)
{
    const struct cr_notify_msg *last = &g->report.last;
    pm->worker_id = (unsigned)g->id;
    pm->pid = g->pid;
    pm->generation = g->generation;
    pm->start_ms = (int64_t)g->spawned_wall_ms;
    pm->end_ms = (int64_t)cr_wall_ms();
    pm->rss = g->mem.rss ? g->mem.rss : last->rss;
    pm->heap_used = last->heap_used;
    pm->heap_total = last->heap_total;
    pm->heap_limit = last->present & CR_NF_HEAP_LIMIT ? last->heap_limit : g->heap_limit_given;
    pm->heap_unknown = !(last->present & CR_NF_HEAP_USED);
    pm->loop_unknown = !(last->present & CR_NF_DELAY_MAX);
    pm->external = last->external;
    pm->loop_delay_max_us = last->delay_max_us;
    if (last->present & CR_NF_HEAP_SPACES) {
        pm->heap_spaces_len = last->nspaces;
        memcpy(pm->heap_spaces, last->spaces, last->nspaces * sizeof(last->spaces[0]));
    }
}

/* The request it was serving, from its page (readable after the death:
 * corrald's mapping outlives the process), and the stack of its main
 * thread: the one it answered before a hang kill, else a dump its runtime
 * printed on its way out (Python's faulthandler at the SIGABRT). */
static void fill_traces(struct cr_postmortem *pm, const struct cr_gen *g, const char *tail,
                        size_t tail_len)
{
    cr_page_request(g->page, &pm->request);
    const struct cr_gen_stack *st = &g->stack;
    size_t off, len;
    const char *src;
    if (st->text) {
        pm->stack_len = strlen(st->text);
        if (pm->stack_len > sizeof(pm->stack) - 1)
            pm->stack_len = sizeof(pm->stack) - 1;
        memcpy(pm->stack, st->text, pm->stack_len);
        snprintf(pm->stack_source, sizeof(pm->stack_source), "%s", st->source);
    } else if (st->asked && cr_page_stack(g->page, st->asked, pm->stack, sizeof(pm->stack),
                                          pm->stack_source, sizeof(pm->stack_source))) {
        /* Asked for, and answered after the trace's last look: it died
         * before the kill (or of it) with its answer on the page. */
        pm->stack_len = strlen(pm->stack);
    } else if (cr_stackdump_find(tail, tail_len, &off, &len, &src)) {
        pm->stack_len = len < sizeof(pm->stack) - 1 ? len : sizeof(pm->stack) - 1;
        memcpy(pm->stack, tail + off, pm->stack_len);
        snprintf(pm->stack_source, sizeof(pm->stack_source), "%s", src);
    } else if (st->asked && !st->missing[0]) {
        snprintf(pm->stack_missing, sizeof(pm->stack_missing),
                 "the worker died before it answered");
    } else {
        snprintf(pm->stack_missing, sizeof(pm->stack_missing), "%s", st->missing);
    }
    pm->stack[pm->stack_len] = '\0';
}

struct cr_postmortem *cr_worker_postmortem(struct cr_gen *g, uint64_t now_ms)
{
    cr_io_drain_output(g);
    char tail[CR_STDERR_TAIL];
    size_t tail_len = 0;
    cr_io_tail(g, tail, &tail_len);

    struct cr_postmortem *pm = calloc(1, sizeof(*pm));
    if (!pm)
        return NULL;
    struct cr_death_evidence ev = {
        .cld_code = g->exit.code,
        .cld_status = g->exit.status,
        .exec_failed = g->exit.exec_errno != 0,
        .exec_errno = g->exit.exec_errno,
        .kill_reason = g->ledger.reason,
        .kill_signal = g->ledger.signal,
        .kill_sigmask = g->ledger.sigmask,
        .kill_text = g->ledger.text[0] ? g->ledger.text : NULL,
        .fatal_heap_limit = g->report.fatal == CR_FATAL_HEAP_LIMIT,
        .heap_used = g->report.last.heap_used,
        .heap_limit = g->report.last.heap_limit,
        .stderr_tail = tail,
        .stderr_len = tail_len,
        .uptime_ms = now_ms - g->spawned_at,
    };
    cr_cgworker_evidence(g, &ev, pm);

    struct cr_death_result res;
    if (cr_death_classify(&ev, &res) < 0) {
        res = (struct cr_death_result){.category = CR_DEATH_SIGNAL, .exit_code = -1};
        snprintf(res.reason, sizeof(res.reason), "unclassifiable wait status %d/%d", g->exit.code,
                 g->exit.status);
    }
    fill(pm, g);
    pm->uptime_ms = ev.uptime_ms;
    cr_postmortem_set_death(pm, &res);
    cr_postmortem_set_stderr(pm, tail, tail_len);
    fill_traces(pm, g, tail, tail_len);
    cr_diag_collect(g->host->diag, g, pm);
    /* The ring is this generation's until the next spawn resets it. */
    cr_postmortem_set_series(pm, g->mem.samples, now_ms);
    cr_postmortem_set_verdict(pm, g->mem.verdict, g->mem.verdict_at, g->mem.verdict_text, now_ms);
    return pm;
}
