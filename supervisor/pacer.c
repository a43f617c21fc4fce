/* The spawn pacer, a part of the supervisor core (supervisor_int.h).
 *
 * A spawn costs the loop a few milliseconds (the cgroup's creation and
 * limits, the baseline readings, fork), and every worker starting at once
 * competes for the CPU with corrald: a scale to 1000 done in one go left
 * signals, the control socket and heartbeats unanswered for seconds. So
 * workers wait in `pending`; each loop turn spawns while this turn's
 * budget lasts (at least one), and no more than --spawn-parallel workers
 * are starting (forked, not yet READY=1) at once — the bounded concurrency
 * of lesson 13. A worker slow to get ready stops counting after 250 ms,
 * so one that never says READY cannot hold the queue up. */

#include <stdbool.h>
#include <stdint.h>

#include "internal.h"
#include "supervisor.h"
#include "supervisor_int.h"

#define SPAWN_TURN_MAX 8
#define SPAWN_TURN_NS (3 * 1000 * 1000)
#define SPAWN_SLOW_MS 250
#define SPAWN_RECHECK_MS 20

static unsigned spawn_parallel(const struct cr_supervisor *sup)
{
    unsigned n = sup->cfg.spawn_parallel;
    if (!n) {
        n = 2 * uv_available_parallelism();
        n = n < 4 ? 4 : n;
    }
    return n;
}

static unsigned starting_now(const struct cr_supervisor *sup)
{
    uint64_t now = cr_now_ms(sup);
    unsigned n = 0;
    for (const struct cr_worker *w = sup->workers; w; w = w->next)
        n += w->state == CR_WS_STARTING && now - w->spawned_at < SPAWN_SLOW_MS;
    return n;
}

static void on_spawn_turn(uv_idle_t *h);

static void pacer_run(struct cr_supervisor *sup)
{
    uv_timer_stop(&sup->spawn_recheck);
    if (!uv_is_closing((uv_handle_t *)&sup->spawn_pacer))
        uv_idle_start(&sup->spawn_pacer, on_spawn_turn);
}

static void on_spawn_recheck(uv_timer_t *t)
{
    pacer_run(t->data);
}

static void on_spawn_turn(uv_idle_t *h)
{
    struct cr_supervisor *sup = h->data;
    uint64_t t0 = uv_hrtime();
    unsigned spawned = 0, starting = starting_now(sup), cap = spawn_parallel(sup);
    bool more = false, capped = false;
    for (struct cr_worker *w = sup->workers, *next; w && !sup->stopping; w = next) {
        next = w->next; /* a failed spawn may unlink w, never another worker */
        if (w->state != CR_WS_PENDING)
            continue;
        capped = starting >= cap;
        if (capped || spawned >= SPAWN_TURN_MAX || uv_hrtime() - t0 >= SPAWN_TURN_NS) {
            more = true;
            break;
        }
        cr_worker_event(w, CR_WE_SPAWN_TURN);
        spawned++;
        starting += w->state == CR_WS_STARTING;
    }
    if (more && !capped)
        return; /* the next loop turn goes on */
    uv_idle_stop(h);
    if (capped && !uv_is_closing((uv_handle_t *)&sup->spawn_recheck))
        uv_timer_start(&sup->spawn_recheck, on_spawn_recheck, SPAWN_RECHECK_MS, 0);
}

/* Something may have freed a starting slot: pending workers go on now. */
void cr_pacer_kick(struct cr_supervisor *sup)
{
    if (uv_is_active((uv_handle_t *)&sup->spawn_recheck))
        pacer_run(sup);
}

enum cr_wevent cr_pacer_act_queue(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    if (!uv_is_active((uv_handle_t *)&sup->spawn_recheck))
        pacer_run(sup);
    return NOTHING;
}
