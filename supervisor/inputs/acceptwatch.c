/* The accept watch: see acceptwatch.h. */
#include "acceptwatch.h"

#include <errno.h>
#include <stdlib.h>

#include "acceptq.h"
#include "config.h"
#include "events.h"
#include "internal.h"
#include "lifecycle.h"
#include "listen.h"
#include "supervisor.h"
#include "wio.h"

struct cr_acceptwatch {
    struct cr_supervisor *sup;
    uv_timer_t timer;
    struct cr_acceptq_sock shared; /* the listener corrald owns, across samples */
    bool closed;
};

static void on_tick(uv_timer_t *t)
{
    struct cr_acceptwatch *aw = t->data;
    struct cr_supervisor *sup = aw->sup;
    uint64_t now = cr_now_ms(sup);
    uint32_t length, max;
    struct cr_acceptq_seen seen;
    struct cr_acceptq_round r = {0};
    /* The shared socket; with reuseport bound here, a socket that only
     * reserves the port (not listening): nothing to read. */
    if (cr_listen_queue(sup->listener.fd, &length, &max) > 0)
        cr_acceptq_round_add(&r, length, max, cr_acceptq_sock_observe(&aw->shared, length, now));
    if (sup->cfg.balance == CR_BALANCE_REUSEPORT)
        for (struct cr_worker *w = sup->workers; w; w = w->next)
            if (cr_wstate_accepts(w->state) &&
                cr_io_listen_queue(&w->g, now, &length, &max, &seen) > 0)
                cr_acceptq_round_add(&r, length, max, seen);
    enum cr_acceptq_change c =
        cr_acceptq_end(&sup->accept_queue, &r, now, sup->cfg.saturated_after_ms);
    if (c != CR_ACCEPTQ_SAME)
        cr_supervisor_publish(sup, &(struct cr_event){.type = c == CR_ACCEPTQ_SATURATED
                                                                  ? CR_EV_QUEUE_SATURATED
                                                                  : CR_EV_QUEUE_DRAINED,
                                                      .queue = &sup->accept_queue});
    uint64_t period = (r.length ? CR_ACCEPTWATCH_PERIOD_MS : CR_ACCEPTWATCH_IDLE_MS) *
                      (r.sockets > CR_ACCEPTWATCH_BATCH
                           ? (r.sockets + CR_ACCEPTWATCH_BATCH - 1) / CR_ACCEPTWATCH_BATCH
                           : 1);
    if (uv_timer_get_repeat(t) != period)
        uv_timer_set_repeat(t, period);
}

int cr_acceptwatch_new(struct cr_supervisor *sup, uv_loop_t *loop, struct cr_acceptwatch **ret)
{
    struct cr_acceptwatch *aw = calloc(1, sizeof(*aw));
    if (!aw)
        return -ENOMEM;
    aw->sup = sup;
    uv_timer_init(loop, &aw->timer);
    aw->timer.data = aw;
    *ret = aw;
    return 0;
}

void cr_acceptwatch_start(struct cr_acceptwatch *aw)
{
    /* The first sample on the loop's first turn: timers run before the
     * poll that reads the control socket, so no `status` sees the queue
     * unknown where it can be read. */
    uv_timer_start(&aw->timer, on_tick, 0, CR_ACCEPTWATCH_IDLE_MS);
}

void cr_acceptwatch_on_event(void *userdata, const struct cr_event *ev)
{
    struct cr_acceptwatch *aw = userdata;
    if (aw->closed || ev->type != CR_EV_FINISHED)
        return;
    aw->closed = true;
    uv_close((uv_handle_t *)&aw->timer, NULL);
}

struct cr_acceptwatch *cr_acceptwatch_free(struct cr_acceptwatch *aw)
{
    free(aw);
    return NULL;
}
