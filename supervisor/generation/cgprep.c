/* cgprep: see cgprep.h. The threadpool's side touches nothing but its
 * struct prep: no worker, no supervisor, no log. */
#include "cgprep.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "cr_cgroup.h"
#include "internal.h"

struct cr_cg_prep {
    uv_work_t req;
    struct cr_worker *w; /* NULL once dropped: removed when done */
    void (*made)(struct cr_supervisor *sup);
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

/* Generations never repeat within a slot, even when a new worker takes the
 * id of one still draining (each has a cgroup of its own), nor when a group
 * made ahead is dropped: its name stays reserved, so removing it late can
 * never remove a newer worker's group. */
unsigned cr_slot_next_generation(struct cr_supervisor *sup, int id)
{
    if ((size_t)id >= sup->ngenerations) {
        size_t n = (size_t)id + 16;
        unsigned *g = realloc(sup->generations, n * sizeof(*g));
        if (!g)
            return 0;
        memset(g + sup->ngenerations, 0, (n - sup->ngenerations) * sizeof(*g));
        sup->generations = g;
        sup->ngenerations = n;
    }
    return ++sup->generations[id];
}

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
    if (!p->w) {
        discard(p);
        return;
    }
    if (status < 0)
        p->r = status;
    p->made(p->w->sup); /* its turn may have been waiting for it */
}

void cr_cg_prep_start(struct cr_worker *w, void (*made_cb)(struct cr_supervisor *sup))
{
    struct cr_supervisor *sup = w->sup;
    if (!sup->cgroups || w->prep || w->id == CR_SPARE_ID)
        return;
    struct cr_cg_prep *p = calloc(1, sizeof(*p));
    if (!p)
        return; /* the spawn makes it itself */
    unsigned gen = cr_slot_next_generation(sup, w->id); /* the spawn's, if it takes the group */
    if (!gen || snprintf(p->rel, sizeof(p->rel), "%s/w%d-%u", cr_cgroup_rel(sup->cg_workers), w->id,
                 gen) >= (int)sizeof(p->rel)) {
        free(p);
        return;
    }
    p->w = w;
    p->made = made_cb;
    p->generation = gen;
    /* ~6 descriptors a worker (docs/architecture.md), twice over. */
    p->fd_room = 64 + 12 * (int)(sup->target + sup->cfg.spares);
    p->max = sup->cfg.memory_max;
    p->high = sup->cfg.memory_high;
    p->req.data = p;
    if (uv_queue_work(sup->loop, &p->req, make, made) < 0) {
        free(p);
        return;
    }
    w->prep = p;
}

unsigned cr_cg_prep_generation(const struct cr_worker *w)
{
    const struct cr_cg_prep *p = w->prep;
    return p && p->done && p->r == 0 ? p->generation : 0;
}

bool cr_cg_prep_busy(const struct cr_worker *w)
{
    return w->prep && !w->prep->done;
}

bool cr_cg_prep_take(struct cr_worker *w, struct cr_cgroup_events *ret_own0)
{
    struct cr_cg_prep *p = w->prep;
    if (!p)
        return false;
    w->prep = NULL;
    if (!p->done) { /* still on its way: the spawn makes its own */
        p->w = NULL;
        return false;
    }
    const struct cr_config *c = &w->sup->cfg;
    int high = c->memory_high == p->high ? 0
               : cr_cgroup_set_high(p->cg, c->memory_high ? c->memory_high : CR_CGROUP_UNLIMITED);
    if (p->r < 0 || p->generation != w->generation ||
        (c->memory_max != p->max &&
         cr_cgroup_set_max(p->cg, c->memory_max ? c->memory_max : CR_CGROUP_UNLIMITED) < 0) ||
        (high < 0 && high != -EOPNOTSUPP)) { /* v1 has no memory.high */
        discard(p);
        return false;
    }
    w->cg = p->cg;
    w->cg_limit = c->memory_max;
    w->cg_usage = w->cg_peak = 0;
    bool read = p->own0_read;
    *ret_own0 = p->own0;
    free(p);
    return read;
}

void cr_cg_prep_drop(struct cr_worker *w)
{
    struct cr_cg_prep *p = w->prep;
    if (!p)
        return;
    w->prep = NULL;
    if (p->done)
        discard(p);
    else
        p->w = NULL;
}
