/* The spawn pacer, a part of the supervisor core (supervisor_int.h).
 *
 * A spawn costs the loop a few milliseconds (the cgroup's creation and
 * limits, the baseline readings, fork), and every worker starting at once
 * competes for the CPU with corrald: a scale to 1000 done in one go left
 * signals, the control socket and heartbeats unanswered for seconds. So
 * workers wait in `pending`; each loop turn spawns one (whatever else is
 * ready runs between two spawns: at 1000 workers a spawn by fork was about
 * 2 ms, most of it copying corrald's page tables, and two to eight in a
 * turn held pings for 30 ms), and no more than --spawn-parallel workers are
 * starting (forked, not yet READY=1) at once — more CPU-bound starts than
 * cores only add switching — fewer while the loop's turns run long
 * (spawncap.h). A worker
 * slow to get ready stops counting after 250 ms, so one that never says
 * READY cannot hold the queue up. */

#include <stdbool.h>
#include <stdint.h>

#include "cgprep.h"
#include "internal.h"
#include "slot.h"
#include "spawncap.h"
#include "supervisor.h"
#include "supervisor_int.h"

#define SPAWN_SLOW_MS 250
#define SPAWN_RECHECK_MS 20
/* Nothing pending this long: the next spawns are a new burst, whatever
 * the last one did to the cap. */
#define SPAWN_QUIET_MS 1000

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
        n += w->state == CR_WS_STARTING && now - w->g.spawned_at < SPAWN_SLOW_MS;
    return n;
}

static void on_spawn_turn(uv_idle_t *h);

static void pacer_run(struct cr_supervisor *sup)
{
    uv_timer_stop(&sup->pacer.recheck);
    if (!uv_is_closing((uv_handle_t *)&sup->pacer.turn))
        uv_idle_start(&sup->pacer.turn, on_spawn_turn);
}

static void on_spawn_recheck(uv_timer_t *t)
{
    pacer_run(t->data);
}

/* A pending worker's group was made (cgprep.c): its turn may come now. */
static void group_made(void *ctx)
{
    struct cr_supervisor *sup = ctx;
    if (sup->phase != CR_PHASE_STOPPING)
        pacer_run(sup);
}

/* Its group made ahead, off the loop, under the generation reserved for
 * it (~6 descriptors a worker, docs/architecture.md, twice over). */
static void prepare(struct cr_supervisor *sup, struct cr_worker *w)
{
    if (!sup->cgtree.on || w->g.prep || !w->slot)
        return;
    int room = 64 + 12 * (int)(sup->target + sup->cfg.spares);
    cr_cg_prep_start(&w->g, cr_slot_next_generation(w->slot), room, group_made, sup);
}

/* The first pending worker whose group is not still being made; the
 * groups of the next --spawn-parallel pending workers are started ahead
 * (cgprep.c); a group once made kicks the pacer again. *ret_any: whether
 * any worker is pending at all. */
static struct cr_worker *next_pending(struct cr_supervisor *sup, bool *ret_any)
{
    struct cr_worker *first = NULL;
    unsigned ahead = 0, n = spawn_parallel(sup);
    for (struct cr_worker *w = sup->workers; w && ahead < n; w = w->next) {
        if (w->state != CR_WS_PENDING)
            continue;
        ahead++;
        prepare(sup, w);
        if (!first && !cr_cg_prep_busy(&w->g))
            first = w;
    }
    *ret_any = ahead > 0;
    return first;
}

static void on_spawn_turn(uv_idle_t *h)
{
    struct cr_supervisor *sup = h->data;
    /* The time since the last turn is one whole loop turn (the idle phase
     * makes the poll not block): what a ping or a signal waits for. */
    struct cr_pacer *p = &sup->pacer;
    uint64_t now = uv_hrtime();
    if (p->turn_ns)
        p->cap = cr_spawn_cap_adapt(p->cap, spawn_parallel(sup), (now - p->turn_ns) / 1000,
                                    &p->calm);
    else if (!p->cap || p->cap > spawn_parallel(sup) ||
             (p->quiet_at && cr_now_ms(sup) - p->quiet_at > SPAWN_QUIET_MS))
        p->cap = spawn_parallel(sup); /* a new burst starts from the ceiling */
    p->quiet_at = 0;
    p->turn_ns = now;
    bool pending = false, stopping = sup->phase == CR_PHASE_STOPPING;
    struct cr_worker *w = stopping ? NULL : next_pending(sup, &pending);
    bool capped = w && starting_now(sup) >= p->cap;
    if (w && !capped) {
        cr_worker_event(w, CR_WE_SPAWN_TURN);
        return; /* the next loop turn goes on (and stops when none is left) */
    }
    uv_idle_stop(h);
    p->turn_ns = 0;
    if (!w && !pending) /* not while groups are still being made */
        p->quiet_at = cr_now_ms(sup);
    if (capped && !uv_is_closing((uv_handle_t *)&p->recheck))
        uv_timer_start(&p->recheck, on_spawn_recheck, SPAWN_RECHECK_MS, 0);
}

void cr_pacer_init(struct cr_supervisor *sup)
{
    uv_idle_init(sup->loop, &sup->pacer.turn);
    uv_timer_init(sup->loop, &sup->pacer.recheck);
    sup->pacer.turn.data = sup->pacer.recheck.data = sup;
}

void cr_pacer_kick(struct cr_supervisor *sup)
{
    if (uv_is_active((uv_handle_t *)&sup->pacer.recheck))
        pacer_run(sup);
}

bool cr_supervisor_spawning(void *ctx)
{
    const struct cr_supervisor *sup = ctx;
    return uv_is_active((const uv_handle_t *)&sup->pacer.turn) ||
           uv_is_active((const uv_handle_t *)&sup->pacer.recheck);
}

enum cr_wevent cr_pacer_act_queue(struct cr_worker *w)
{
    struct cr_supervisor *sup = w->sup;
    if (!uv_is_active((uv_handle_t *)&sup->pacer.recheck))
        pacer_run(sup);
    return NOTHING;
}
