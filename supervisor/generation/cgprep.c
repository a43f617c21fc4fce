/* cgprep: see cgprep.h. The threadpool's side touches nothing but its
 * struct prep: no generation, no supervisor, no log. */
#include "cgprep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "cgtree.h"
#include "config.h"
#include "cr_cgroup.h"
#include "gen.h"

struct cr_cg_prep {
    uv_work_t req;
    struct cr_gen *g; /* NULL once dropped: removed when done */
    void (*made)(void *ctx);
    void *ctx;
    char rel[256];
    unsigned generation;
    uint64_t max, high;
    int fd_room; /* descriptors the table should hold (see make) */
    struct cr_cgroup *cg;
    struct cr_cgroup_events own0;
    bool own0_read;
    int r;
    bool done;
};

/* In the threadpool. Besides the group, room in the descriptor table:
 * once corrald has threads (this pool), the kernel grows a shared table
 * only after an RCU grace period (expand_fdtable), and the loop's open()
 * or fcntl() that needed the room waited 8-19 ms for it at `scale 1000`.
 * A dup to the table's future size here makes the pool's thread wait
 * instead. */
static void make(uv_work_t *req)
{
    struct cr_cg_prep *p = req->data;
    int fd = p->fd_room > 0 ? fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, p->fd_room) : -1;
    if (fd >= 0)
        close(fd);
    p->r = cr_cgroup_open(p->rel, true, &p->cg);
    if (p->r == 0 && p->max)
        p->r = cr_cgroup_set_max(p->cg, p->max);
    if (p->r == 0 && p->high) {
        int r = cr_cgroup_set_high(p->cg, p->high);
        p->r = r == -EOPNOTSUPP ? 0 : r;
    }
    if (p->r < 0 && p->cg) {
        cr_cgroup_remove(p->cg, 0);
        p->cg = cr_cgroup_free(p->cg);
    }
    if (p->r == 0) {
        cr_cgroup_ready_ahead(p->cg);
        p->own0_read = cr_cgroup_read_events(p->cg, true, &p->own0) == 0;
    }
}

static void discard(struct cr_cg_prep *p)
{
    if (p->cg) {
        cr_cgroup_remove(p->cg, 0);
        cr_cgroup_free(p->cg);
    }
    free(p);
}

static void made(uv_work_t *req, int status)
{
    struct cr_cg_prep *p = req->data;
    p->done = true;
    if (!p->g) {
        discard(p);
        return;
    }
    if (status < 0)
        p->r = status;
    p->made(p->ctx); /* its turn may have been waiting for it */
}

void cr_cg_prep_start(struct cr_gen *g, unsigned generation, int fd_room,
                      void (*made_cb)(void *ctx), void *ctx)
{
    const struct cr_gen_host *h = g->host;
    if (!h->cgtree->on || g->prep || g->id == CR_SPARE_ID || !generation)
        return;
    struct cr_cg_prep *p = calloc(1, sizeof(*p));
    if (!p)
        return; /* the spawn makes it itself */
    if (snprintf(p->rel, sizeof(p->rel), "%s/w%d-%u", cr_cgtree_workers_rel(h->cgtree), g->id,
                 generation) >= (int)sizeof(p->rel)) {
        free(p);
        return;
    }
    p->g = g;
    p->made = made_cb;
    p->ctx = ctx;
    p->generation = generation;
    p->fd_room = fd_room;
    p->max = h->cfg->memory_max;
    p->high = h->cfg->memory_high;
    p->req.data = p;
    if (uv_queue_work(h->loop, &p->req, make, made) < 0) {
        free(p);
        return;
    }
    g->prep = p;
}

unsigned cr_cg_prep_generation(const struct cr_gen *g)
{
    const struct cr_cg_prep *p = g->prep;
    return p && p->done && p->r == 0 ? p->generation : 0;
}

bool cr_cg_prep_busy(const struct cr_gen *g)
{
    return g->prep && !g->prep->done;
}

bool cr_cg_prep_take(struct cr_gen *g, struct cr_cgroup_events *ret_own0)
{
    struct cr_cg_prep *p = g->prep;
    if (!p)
        return false;
    g->prep = NULL;
    if (!p->done) { /* still on its way: the spawn makes its own */
        p->g = NULL;
        return false;
    }
    const struct cr_config *c = g->host->cfg;
    int high = c->memory_high == p->high ? 0
               : cr_cgroup_set_high(p->cg, c->memory_high ? c->memory_high : CR_CGROUP_UNLIMITED);
    if (p->r < 0 || p->generation != g->generation ||
        (c->memory_max != p->max &&
         cr_cgroup_set_max(p->cg, c->memory_max ? c->memory_max : CR_CGROUP_UNLIMITED) < 0) ||
        (high < 0 && high != -EOPNOTSUPP)) { /* v1 has no memory.high */
        discard(p);
        return false;
    }
    g->cg.cg = p->cg;
    g->cg.limit = c->memory_max;
    bool read = p->own0_read;
    *ret_own0 = p->own0;
    free(p);
    return read;
}

void cr_cg_prep_drop(struct cr_gen *g)
{
    struct cr_cg_prep *p = g->prep;
    if (!p)
        return;
    g->prep = NULL;
    if (p->done)
        discard(p);
    else
        p->g = NULL;
}
