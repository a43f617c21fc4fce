/* The kernel's exit notices while spares are kept: see exitwatch.h. */
#include "exitwatch.h"

#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "events.h"
#include "exitnotice.h"
#include "log.h"
#include "supervisor.h"
#include "view.h"

static void on_exit_notice(void *ctx, const struct cr_taskstats_exit *e)
{
    cr_supervisor_exit_notice(ctx, e);
}

void cr_exitwatch_sync(struct cr_exitwatch *x)
{
    const struct cr_config *c = cr_supervisor_config(x->sup);
    bool want = c->spares > 0 && !c->no_exit_notice && !cr_supervisor_stopping(x->sup);
    if (want && !x->en && !x->failed[0]) {
        char why[sizeof(x->failed)];
        x->en = cr_exitnotice_open(x->loop, on_exit_notice, x->sup, why, sizeof(why));
        if (x->en) {
            cr_log(CR_LOG_INFO, "exit notices: taskstats (a spare takes a dying worker's slot "
                                "before its memory is freed)");
        } else {
            snprintf(x->failed, sizeof(x->failed), "%s", why);
            cr_log(CR_LOG_NOTICE,
                   "exit notices unavailable (%s): a spare takes a dead worker's "
                   "slot once it is reaped",
                   why);
        }
    } else if (!want) {
        cr_exitnotice_close(x->en); /* NULL: a no-op */
        x->en = NULL;
    }
    const char *failed = cr_exitnotice_failed(x->en); /* NULL: none */
    if (failed)
        snprintf(x->state, sizeof(x->state), "stopped: %s", failed);
    else if (x->en)
        snprintf(x->state, sizeof(x->state), "taskstats");
    else if (want)
        snprintf(x->state, sizeof(x->state), "unavailable: %s", x->failed);
    else
        snprintf(x->state, sizeof(x->state), "off");
}

void cr_exitwatch_on_event(void *ctx, const struct cr_event *ev)
{
    struct cr_exitwatch *x = ctx;
    if (ev->type == CR_EV_CONFIG || ev->type == CR_EV_STOPPING) {
        cr_exitwatch_sync(x);
    } else if (ev->type == CR_EV_FINISHED) {
        cr_exitnotice_close(x->en);
        x->en = NULL;
    }
}

const char *cr_exitwatch_state(const void *ctx)
{
    const struct cr_exitwatch *x = ctx;
    return x->state[0] ? x->state : "off";
}
