/* The control dispatcher's operations bound to the real supervisor: each
 * one calls the core's public functions (supervisor.h, operations.h,
 * view.h) and the outputs' (status.h, metrics.h), nothing else. ctx is a
 * struct cr_control_core (control.h). */
#include <errno.h>
#include <stdlib.h>

#include "control.h"
#include "history.h"
#include "metrics.h"
#include "operations.h"
#include "status.h"
#include "supervisor.h"
#include "view.h"

static struct cr_supervisor *sup_of(void *ctx)
{
    return ((struct cr_control_core *)ctx)->sup;
}

static cJSON *op_status(void *ctx)
{
    const struct cr_control_core *cc = ctx;
    struct cr_status_extra x = {.exit_notice = cc->exit_notice(cc->exit_notice_ctx),
                                .metrics_addr = cc->metrics_addr[0] ? cc->metrics_addr : NULL,
                                .on_death = cc->on_death,
                                .scale = cc->scale};
    return cr_status_json(cc->sup, &x);
}

static cJSON *op_workers(void *ctx)
{
    return cr_workers_json(sup_of(ctx));
}

static int op_worker(void *ctx, int id, cJSON **ret)
{
    struct cr_worker *w = cr_supervisor_worker(sup_of(ctx), id);
    if (!w)
        return -ENOENT;
    *ret = cr_worker_json(w);
    return 0;
}

static size_t op_history_len(void *ctx)
{
    return cr_history_len(cr_supervisor_history(sup_of(ctx)));
}

static const struct cr_postmortem *op_history(void *ctx, size_t i)
{
    return cr_history_get(cr_supervisor_history(sup_of(ctx)), i);
}

static int op_scale(void *ctx, unsigned n)
{
    return cr_supervisor_scale(sup_of(ctx), n);
}

static int op_restart(void *ctx, int id)
{
    return cr_supervisor_restart(sup_of(ctx), id, "restart requested");
}

static int op_reload(void *ctx)
{
    struct cr_supervisor *sup = sup_of(ctx);
    if (cr_supervisor_stopping(sup))
        return -ESHUTDOWN;
    cr_supervisor_reload(sup, "control socket");
    return 0;
}

static int op_kill(void *ctx, int id, int sig)
{
    return cr_supervisor_kill(sup_of(ctx), id, sig);
}

static int op_set(void *ctx, const char *key, const char *value, char *err, size_t errlen)
{
    return cr_supervisor_set(sup_of(ctx), key, value, err, errlen);
}

static char *op_metrics(void *ctx)
{
    return cr_metrics_text(sup_of(ctx));
}

static int op_stack(void *ctx, int id, uint32_t request, cJSON **ret)
{
    struct cr_stack_reply r;
    int e = cr_supervisor_stack(sup_of(ctx), id, request, &r);
    if (e < 0)
        return e;
    static const char *const states[] = {[CR_STACK_UNSUPPORTED] = "unsupported",
                                         [CR_STACK_ASKED] = "asked",
                                         [CR_STACK_PENDING] = "pending",
                                         [CR_STACK_READY] = "ready"};
    cJSON *o = cJSON_CreateObject();
    bool ok = o && cJSON_AddStringToObject(o, "state", states[r.phase]);
    if (ok && r.phase != CR_STACK_UNSUPPORTED)
        ok = cJSON_AddNumberToObject(o, "request", r.request) != NULL;
    if (ok && r.phase == CR_STACK_UNSUPPORTED)
        ok = cJSON_AddStringToObject(o, "why", r.why) != NULL;
    if (ok && r.phase == CR_STACK_READY)
        ok = cJSON_AddStringToObject(o, "source", r.source) &&
             cJSON_AddStringToObject(o, "text", r.text);
    free(r.text);
    if (!ok) {
        cJSON_Delete(o);
        o = NULL;
    }
    *ret = o;
    return 0;
}

static void op_stop(void *ctx)
{
    cr_supervisor_stop(sup_of(ctx), false, "the control command stop"); /* as SIGTERM: --stop-delay first */
}

const struct cr_ctl_ops cr_control_core_ops = {
    .status = op_status,
    .workers = op_workers,
    .worker = op_worker,
    .history_len = op_history_len,
    .history = op_history,
    .scale = op_scale,
    .restart = op_restart,
    .reload = op_reload,
    .kill = op_kill,
    .set = op_set,
    .metrics = op_metrics,
    .stop = op_stop,
    .stack = op_stack,
};
