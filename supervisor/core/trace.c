/* A hung worker's stack before its kill, a part of the supervisor core
 * (supervisor_int.h).
 *
 * A hang kill says how long the loop was silent; the stack says where it
 * is stuck. When the hang timeout passes, the ASK_STACK action asks the
 * worker through its page (generation/page.h) and the worker waits in
 * `tracing` under its one deadline, the --stack-timeout budget. A worker
 * answers from another thread than its stuck one: the reference worker's
 * wakes on the page's futex at once; the Node agent's and the Python
 * helper's poll the page. A timer looks at the pages of the workers being
 * traced every TRACE_POLL_MS: the STACK event when one answered, the kill
 * in any case (the stack is recorded missing when the budget ran out).
 * Nothing runs while nobody is traced. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "history.h"
#include "internal.h"
#include "log.h"
#include "page.h"
#include "supervisor.h"
#include "supervisor_int.h"

/* A page answer is a few stores away once the worker's thread woke: look
 * often, it costs one load per traced worker. */
#define TRACE_POLL_MS 5

static void on_poll(uv_timer_t *t)
{
    struct cr_supervisor *sup = t->data;
    bool waiting = false;
    char *buf = NULL;
    for (struct cr_worker *w = sup->workers, *next; w; w = next) {
        next = w->next;
        struct cr_gen_stack *st = &w->g.stack;
        if (w->state != CR_WS_TRACING || !st->asked || st->text)
            continue;
        if (!buf && !(buf = malloc(CR_WPAGE_STACK_MAX + 1))) {
            waiting = true; /* no memory now: the budget still ends it */
            break;
        }
        if (!cr_page_stack(w->g.page, st->asked, buf, CR_WPAGE_STACK_MAX + 1, st->source,
                           sizeof(st->source))) {
            waiting = true;
            continue;
        }
        st->text = strdup(buf);
        cr_log_event(CR_LOG_NOTICE, "stack", cr_worker_id(w), w->g.pid, NULL,
                     "worker %d: its stack came in %llu ms (%s, %zu bytes)", cr_worker_id(w),
                     (unsigned long long)(cr_now_ms(sup) - st->asked_at), st->source,
                     strlen(buf));
        cr_worker_event(w, CR_WE_STACK);
    }
    free(buf);
    if (!waiting)
        uv_timer_stop(t);
}

enum cr_wevent cr_trace_act_ask(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    struct cr_gen_stack *st = &w->g.stack;
    uint64_t budget = sup->cfg.stack_timeout_ms;
    if (!budget)
        return CR_WE_STACK; /* --stack-timeout 0: the kill at once, as asked */
    if (!(st->asked = cr_page_ask_stack(w->g.page))) {
        snprintf(st->missing, sizeof(st->missing), "%s",
                 w->g.page ? "the worker does not answer stack requests on its page"
                           : "the worker has no page (--no-worker-page)");
        return CR_WE_STACK;
    }
    st->asked_at = cr_now_ms(sup);
    free(st->text);
    st->text = NULL;
    st->missing[0] = '\0';
    cr_log_event(CR_LOG_NOTICE, "tracing", cr_worker_id(w), w->g.pid, NULL,
                 "worker %d hung: asking for its stack before the kill (up to %llu ms)",
                 cr_worker_id(w), (unsigned long long)budget);
    cr_worker_set_deadline(w, budget);
    if (!uv_is_active((uv_handle_t *)&sup->tracer.poll) &&
        !uv_is_closing((uv_handle_t *)&sup->tracer.poll))
        uv_timer_start(&sup->tracer.poll, on_poll, TRACE_POLL_MS, TRACE_POLL_MS);
    return NOTHING;
}

void cr_trace_note_missing(struct cr_worker *w)
{
    struct cr_gen_stack *st = &w->g.stack;
    /* The poll looks every TRACE_POLL_MS: an answer that came since its
     * last look, before the budget's deadline fired, is still taken. */
    if (st->asked && !st->text) {
        char *buf = malloc(CR_WPAGE_STACK_MAX + 1);
        if (buf && cr_page_stack(w->g.page, st->asked, buf, CR_WPAGE_STACK_MAX + 1, st->source,
                                 sizeof(st->source)))
            st->text = strdup(buf);
        free(buf);
    }
    if (st->asked && !st->text && !st->missing[0])
        snprintf(st->missing, sizeof(st->missing), "no answer within %llu ms (--stack-timeout)",
                 (unsigned long long)w->sup->cfg.stack_timeout_ms);
}

int cr_supervisor_stack(struct cr_supervisor *sup, int id, uint32_t request,
                        struct cr_stack_reply *ret)
{
    *ret = (struct cr_stack_reply){0};
    struct cr_worker *w = cr_supervisor_worker(sup, id);
    if (!w)
        return -ENOENT;
    if (request && !cr_page_ever_asked(request))
        return -EINVAL; /* whatever the worker's state: the number is wrong */
    if (!w->g.pid || !cr_wstate_sampled(w->state))
        return -ESRCH;
    if (!request) {
        ret->request = cr_page_ask_stack(w->g.page);
        ret->phase = ret->request ? CR_STACK_ASKED : CR_STACK_UNSUPPORTED;
        ret->why = w->g.page ? "the worker does not answer stack requests on its page"
                             : "the worker has no page (--no-worker-page)";
        if (ret->request)
            cr_log_event(CR_LOG_INFO, "stack", id, w->g.pid, NULL,
                         "worker %d: its stack asked for (corralctl stack)", id);
        return 0;
    }
    if (!cr_page_asked(w->g.page, request))
        return -ESTALE; /* asked of a process that is gone */
    ret->request = request;
    ret->phase = CR_STACK_PENDING;
    if (!cr_page_answered(w->g.page, request))
        return 0; /* looked at every 5 ms by a held answer: no copy */
    char *buf = malloc(CR_WPAGE_STACK_MAX + 1);
    if (!buf)
        return -ENOMEM;
    if (cr_page_stack(w->g.page, request, buf, CR_WPAGE_STACK_MAX + 1, ret->source,
                      sizeof(ret->source))) {
        ret->phase = CR_STACK_READY;
        ret->text = buf;
        return 0;
    }
    free(buf);
    return 0;
}

void cr_trace_init(struct cr_supervisor *sup)
{
    uv_timer_init(sup->loop, &sup->tracer.poll);
    sup->tracer.poll.data = sup;
}
