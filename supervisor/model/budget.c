/* The memory budget: see budget.h. */
#include "budget.h"

#include <errno.h>
#include <stdio.h>

#define MIB (1024.0 * 1024.0)

int cr_budget_check(const struct cr_budget_in *in, struct cr_budget *out)
{
    if (!in || !out)
        return -EINVAL;
    *out = (struct cr_budget){.fits = true};
    if (!in->limit)
        return 0;
    out->limited = true;
    out->margin = in->limit / 20 > CR_BUDGET_MIN_MARGIN ? in->limit / 20 : CR_BUDGET_MIN_MARGIN;
    unsigned procs = in->workers + in->spares + in->replacements;
    uint64_t fixed = in->self + out->margin;
    out->need = (uint64_t)procs * in->per_worker + fixed;
    uint64_t room = in->limit > fixed ? in->limit - fixed : 0;
    if (!in->per_worker) {
        /* No per-worker limit: any worker can grow to the whole limit.
         * Without memory.oom.group the kernel kills the largest process,
         * most likely that worker, and corrald replaces it; with it, the
         * whole container goes. */
        out->fits = !in->oom_group;
        out->fit_workers = 0;
        out->fit_per_worker = procs ? room / procs : room;
        return 0;
    }
    out->fits = out->need <= in->limit;
    uint64_t n = room / in->per_worker;
    unsigned extra = in->spares + in->replacements;
    out->fit_workers = n > extra ? (unsigned)(n - extra) : 0;
    out->fit_per_worker = procs ? room / procs : room;
    return 0;
}

int cr_budget_format(const struct cr_budget_in *in, const struct cr_budget *b, char *buf,
                     size_t size)
{
    if (!in || !b || !buf || !size)
        return -EINVAL;
    const char *group = in->group ? in->group : "the enclosing group";
    const char *oom = in->oom_group ? " (memory.oom.group=1: an OOM kill there kills every "
                                      "process in it, corrald included)"
                                    : "";
    int n;
    if (!b->limited)
        n = snprintf(buf, size, "memory budget: no enclosing limit");
    else if (!in->per_worker)
        n = snprintf(buf, size,
                     "memory budget: no per-worker limit (--memory-max): any worker can grow to "
                     "the %.0f MiB limit of %s%s; --memory-max %lluM fits %u worker(s)%s%s",
                     (double)in->limit / MIB, group, oom,
                     (unsigned long long)(b->fit_per_worker >> 20),
                     in->workers, in->spares ? ", the spares" : "",
                     in->replacements ? " and a reload's replacement" : "");
    else {
        char fix[128] = "";
        unsigned long long mib = (unsigned long long)(b->fit_per_worker >> 20);
        if (!b->fits && mib == 0)
            snprintf(fix, sizeof fix, "; no worker fits: corrald and the margin take it all");
        else if (!b->fits && b->fit_workers)
            snprintf(fix, sizeof fix, "; it fits with --workers %u, or --memory-max %lluM",
                     b->fit_workers, mib);
        else if (!b->fits)
            snprintf(fix, sizeof fix, "; it fits with --memory-max %lluM", mib);
        n = snprintf(buf, size,
                     "memory budget: (%u worker(s) + %u spare(s) + %u reload replacement) x %.0f "
                     "MiB%s + corrald %.0f MiB + margin %.0f MiB = %.0f MiB %s the %.0f MiB limit "
                     "of %s%s%s",
                     in->workers, in->spares, in->replacements, (double)in->per_worker / MIB,
                     in->by_corrald ? " (--memory-max and the 2 MiB a worker may pass it by "
                                      "before corrald's kill)"
                                    : "",
                     (double)in->self / MIB, (double)b->margin / MIB, (double)b->need / MIB,
                     b->fits ? "fits under" : "is over", (double)in->limit / MIB, group, oom, fix);
    }
    if (n < 0)
        return -EINVAL;
    return (size_t)n >= size ? (int)size - 1 : n;
}
