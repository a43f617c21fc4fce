/* `corralctl why`'s advice per category: see why_advice.h. */
#include "why_advice.h"

#include <stdio.h>
#include <string.h>

#include "render.h"

#define MAX CTL_WHY_ADVICE_MAX

/* "the heap rose from 12M to 46M over the last 58s" when it rose by a
 * tenth or more; "" otherwise. */
static void growth(const struct ctl_why_ends *s, const char *what, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!s->known || s->last <= s->first * 1.1 || s->last_t - s->first_t < 2000)
        return;
    char a[16], b[16], d[32];
    ctl_fmt_bytes(s->first, a, sizeof(a));
    ctl_fmt_bytes(s->last, b, sizeof(b));
    ctl_fmt_ms(s->last_t - s->first_t, d, sizeof(d));
    snprintf(buf, len, "%s rose from %s to %s in its last %s", what, a, b, d);
}

/* The lines that depend on the death: what was recorded, and its figures. */

static void say_heap_limit(const struct ctl_why_facts *x, char *l1, char *l2)
{
    char g[160] = "";
    bool heap_grew = x->verdict && strcmp(x->verdict, "heap-growing") == 0;
    char since[64] = "";
    if (x->verdict_ago_ms >= 0) {
        char ago[32];
        ctl_fmt_ms(x->verdict_ago_ms, ago, sizeof(ago));
        snprintf(since, sizeof(since), " since %s before the death", ago);
    }
    growth(&x->mem[1], "The heap", g, sizeof(g));
    int n = snprintf(l1, MAX, "The runtime's heap reached its limit (%s) and it aborted (134).",
                     x->heap_limit);
    if (heap_grew)
        snprintf(l1 + n, MAX - (size_t)n, " The trend said heap-growing%s: a leak.", since);
    else if (g[0])
        snprintf(l1 + n, MAX - (size_t)n, " %s.", g);
    snprintf(l2, MAX,
             "%s, or if this working set is real raise --memory-max: the heap limit is it "
             "minus --heap-headroom.",
             x->snapshot ? "Open the heap snapshot above (Chrome DevTools, Memory) and fix "
                           "what it retains"
                         : "Fix the retention (a heap snapshot near the limit shows it)");
}

/* Where the stack is when a core was dumped, else none (what to do then). */
static const char *core_said(bool core, const char *none)
{
    return core ? "A core was dumped: open it (coredumpctl gdb) for the stack." : none;
}

static void say_abort(const struct ctl_why_facts *x, char *l1, char *l2)
{
    snprintf(l2, MAX, "%s Read the last output lines above for the assertion.",
             core_said(x->core, "No core was dumped: allow them (LimitCORE=infinity, ulimit -c) "
                                "to get the stack next time."));
}

static void say_oom_own_limit(const struct ctl_why_facts *x, char *l1, char *l2)
{
    char g[160] = "";
    /* rss-growing: no heap was ever reported, so the part cannot be told. */
    const char *part = !x->verdict ? ""
                       : strcmp(x->verdict, "offheap-growing") == 0
                           ? "; the growth was off the heap (Buffers, native memory)"
                       : strcmp(x->verdict, "rss-growing") == 0
                           ? "; with no heap reported, which part grew cannot be told"
                           : "";
    /* What grew, the most telling first: off-heap, heap, the whole. */
    growth(&x->mem[2], "external memory (Buffers)", g, sizeof(g));
    if (!g[0])
        growth(&x->mem[1], "the heap", g, sizeof(g));
    if (!g[0])
        growth(&x->mem[3], "its group's usage", g, sizeof(g));
    if (!g[0])
        growth(&x->mem[0], "its RSS", g, sizeof(g));
    snprintf(l1, MAX, "The kernel killed it at its own limit (--memory-max %s)%s%s%s.", x->limit,
             g[0] ? ": " : "", g, part);
}

static void say_memory_kill(const struct ctl_why_facts *x, char *l1, char *l2)
{
    char g[160] = "";
    growth(&x->mem[0], "its RSS", g, sizeof(g));
    snprintf(l1, MAX,
             "corrald killed it for passing --memory-max %s (no group of "
             "its own)%s%s.",
             x->limit, g[0] ? ": " : "", g);
}

static void say_watchdog_kill(const struct ctl_why_facts *x, char *l1, char *l2)
{
    snprintf(l1, MAX,
             "Its event loop stopped (no heartbeat) and corrald killed it at "
             "--hang-timeout.%s",
             x->request || x->stack ? " The request and the stack above show where it was."
                                    : " Nothing recorded where it was: the loop delay and "
                                      "the last output lines are the clues.");
}

static void say_crash(const struct ctl_why_facts *x, char *l1, char *l2)
{
    snprintf(l2, MAX, "%s",
             core_said(x->core, "No core was dumped: allow them (LimitCORE=infinity, ulimit -c) "
                                "and get the stack from the next one."));
}

static void say_exit_clean(const struct ctl_why_facts *x, char *l1, char *l2)
{
    snprintf(l1, MAX, "%s",
             x->planned ? "corrald stopped it (a stop or a scale-down). Nothing to do."
                        : "It exited 0 on its own: a server should not. Read its last "
                          "output lines above.");
}

/* A category's advice: a line's text as it is, or NULL for a line that
 * write() composes from the death (none when it writes nothing there). */
struct advice {
    const char *cat;
    const char *l1, *l2;
    void (*write)(const struct ctl_why_facts *x, char *l1, char *l2);
};

static const struct advice table[] = {
    {.cat = "heap-limit", .write = say_heap_limit},
    {.cat = "abort",
     .l1 = "It called abort() with no sign of a full heap: an assertion in the program or a "
           "native module.",
     .write = say_abort},
    {.cat = "oom-own-limit",
     .l2 = "Raise --memory-max if it needs that much, or find what grows; set --memory-soft "
           "(80%) so that corrald recycles it before the kernel kills.",
     .write = say_oom_own_limit},
    {.cat = "oom-ancestor-limit",
     .l1 = "An enclosing group ran out (the service's MemoryMax=, the container's limit), not "
           "the worker's own limit.",
     .l2 = "Make the workers fit: fewer --workers or a lower --memory-max (corralctl status "
           "shows the memory budget), or raise the enclosing limit."},
    {.cat = "oom-system",
     .l1 = "The machine ran out of memory; no cgroup limit was involved.",
     .l2 = "Set --memory-max so that a limit of corral's bites first, and look at what else "
           "runs on the host."},
    {.cat = "oom-userspace",
     .l1 = "systemd-oomd killed its group: the memory pressure of the unit it watches stayed "
           "over its limit (ManagedOOMMemoryPressure=).",
     .l2 = "Find what presses (corralctl status: each worker's memory pressure); "
           "--memory-pressure PCT recycles a worker before oomd has to kill."},
    {.cat = "memory-kill",
     .l2 = "Raise --memory-max if it needs that much, or find what grows; --memory-soft "
           "recycles it gracefully before.",
     .write = say_memory_kill},
    {.cat = "watchdog-kill",
     .l2 = "Move that work off the loop (a worker thread, a queue); raise --hang-timeout only "
           "if the wait is legitimate.",
     .write = say_watchdog_kill},
    {.cat = "stop-timeout",
     .l1 = "Its drain outlived --stop-timeout and corrald SIGKILLed it.",
     .l2 = "Long requests or a shutdown handler that never ends: make it end, or raise "
           "--stop-timeout."},
    {.cat = "start-timeout",
     .l1 = "It announced readiness but sent no READY=1 within --start-timeout.",
     .l2 = "A slow start: raise --start-timeout; a program that never says READY=1: use "
           "--ready exec or auto."},
    {.cat = "crash", .l1 = "A crash in native code (a segfault or the like).", .write = say_crash},
    {.cat = "signal",
     .l1 = "A signal from outside killed it (the reason says who when corrald knows: an "
           "operator's corralctl kill).",
     .l2 = "Find the sender: deploy scripts, systemd-oomd, an admin."},
    {.cat = "recycled",
     .l1 = "Planned: corrald replaced it (the reason says why). Nothing to do.",
     .l2 = "Recycles at the soft limit again and again mean the worker grows: see the memory "
           "above."},
    {.cat = "exec-failed",
     .l1 = "The program could not be executed at all (the reason names the error).",
     .l2 = "Fix the command line, the path or the permissions."},
    {.cat = "exit-error",
     .l1 = "It exited with an error of its own.",
     .l2 = "Read its last output lines above (the first error, not the last line); a crash "
           "loop of these is usually configuration or a missing dependency."},
    {.cat = "exit-clean", .write = say_exit_clean},
};

/* A category this corralctl does not know (a newer corrald's). */
static const struct advice unknown = {
    .l1 = "See docs/exit-classification.md for this category.",
};

void ctl_why_advice(const struct ctl_why_facts *x, char *l1, char *l2)
{
    const struct advice *a = &unknown;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(x->cat, table[i].cat) == 0) {
            a = &table[i];
            break;
        }
    l1[0] = l2[0] = '\0';
    if (a->write)
        a->write(x, l1, l2);
    if (a->l1)
        snprintf(l1, MAX, "%s", a->l1);
    if (a->l2)
        snprintf(l2, MAX, "%s", a->l2);
}

const char *ctl_why_advice_category(size_t i)
{
    return i < sizeof(table) / sizeof(table[0]) ? table[i].cat : NULL;
}
