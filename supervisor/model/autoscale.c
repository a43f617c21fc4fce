/* The worker count's decision, a tick at a time (autoscale.h). */
#include "autoscale.h"

#include <math.h>
#include <stdio.h>

static const char *const why_names[_CR_SCALE_WHY_MAX] = {
    [CR_SCALE_HOLD] = "hold",
    [CR_SCALE_UP] = "up",
    [CR_SCALE_DOWN] = "down",
    [CR_SCALE_TO_MIN] = "to-min",
    [CR_SCALE_TO_MAX] = "to-max",
    [CR_SCALE_SATURATED] = "cpu-saturated",
    [CR_SCALE_AT_MAX] = "at-max",
    [CR_SCALE_AT_BUDGET] = "at-budget",
    [CR_SCALE_SETTLING] = "settling",
};

struct cr_scale_sample cr_scale_sample_unknown(void)
{
    return (struct cr_scale_sample){
        .busy = -1, .cpu_each = -1, .demand_each = -1, .idle_cores = -1, .cpu_pressure = -1};
}

const char *cr_scale_why_to_string(enum cr_scale_why w)
{
    return (unsigned)w < _CR_SCALE_WHY_MAX ? why_names[w] : NULL;
}

/* "14 connections waited up to 180 ms, workers 98 % busy, 0.3 cores used
 * each, 1.4 cores idle": what was measured, unknowns left out. */
static void measured(const struct cr_scale_sample *s, char *buf, size_t size)
{
    int n = 0;
    if (s->queue_waited_ms)
        n = snprintf(buf, size, "%u connection%s waited up to %llu ms", s->queue_len,
                     s->queue_len == 1 ? "" : "s", (unsigned long long)s->queue_waited_ms);
    else
        n = snprintf(buf, size, "no connection waiting");
    if (n >= 0 && (size_t)n < size && s->busy >= 0)
        n += snprintf(buf + n, size - (size_t)n, ", workers %.0f %% busy", s->busy * 100);
    if (n >= 0 && (size_t)n < size && s->cpu_each >= 0)
        n += snprintf(buf + n, size - (size_t)n, ", %.1f cores used each", s->cpu_each);
    /* A starved loop wants more than it gets: say so. */
    if (n >= 0 && (size_t)n < size && s->demand_each >= 0 && s->demand_each > s->cpu_each + 0.1)
        n += snprintf(buf + n, size - (size_t)n, " (%.1f wanted)", s->demand_each);
    if (n >= 0 && (size_t)n < size && s->idle_cores >= 0)
        n += snprintf(buf + n, size - (size_t)n, ", %.1f cores idle", s->idle_cores);
    if (n >= 0 && (size_t)n < size && s->cpu_pressure >= 0)
        snprintf(buf + n, size - (size_t)n, ", CPU pressure %.0f %%", s->cpu_pressure);
}

static void say(struct cr_scale_decision *d, const struct cr_scale_sample *s, const char *why)
{
    char m[200];
    measured(s, m, sizeof(m));
    if (d->to != d->from)
        snprintf(d->text, sizeof(d->text), "scale %u\u2192%u: %s%s%s", d->from, d->to, m,
                 why ? "; " : "", why ? why : "");
    else
        snprintf(d->text, sizeof(d->text), "hold %u: %s%s%s", d->from, m, why ? "; " : "",
                 why ? why : "");
}

/* Workers the measured load needs at CR_SCALE_BUSY_TARGET, at least 1. */
static unsigned needed(const struct cr_scale_sample *s)
{
    double busy = s->busy >= 0 ? s->busy : 0;
    double n = ceil((double)s->serving * busy / CR_SCALE_BUSY_TARGET - 1e-9);
    return n < 1 ? 1 : (unsigned)n;
}

void cr_autoscale_decide(const struct cr_scale_limits *l, const struct cr_scale_sample *s,
                         struct cr_scale_state *st, struct cr_scale_decision *d)
{
    unsigned now = s->serving + s->starting;
    *d = (struct cr_scale_decision){.from = now, .to = now, .why = CR_SCALE_HOLD};
    bool waiting = s->queue_waited_ms >= l->up_wait_ms && s->queue_len > 0;
    /* A loop whose use is not reported is taken as busy once connections
     * wait: the queue alone then says the workers do not keep up. */
    bool busy = s->busy < 0 || s->busy >= CR_SCALE_BUSY_HIGH;
    /* Without a loop's own figure, the CPU it uses stands for it: a loop
     * blocked without the CPU then looks idle, and only the queue (empty
     * for the whole cool-down) keeps its workers. */
    double use = s->busy >= 0 ? s->busy : s->cpu_each;
    bool low = !s->queue_waited_ms && use >= 0 && use < CR_SCALE_BUSY_LOW;
    if (!low)
        st->low_since = 0;
    else if (!st->low_since)
        st->low_since = s->now_ms;

    if (now < l->min || now > l->max) { /* the bounds changed under it */
        d->to = now < l->min ? l->min : l->max;
        d->why = now < l->min ? CR_SCALE_TO_MIN : CR_SCALE_TO_MAX;
        st->changed_at = s->now_ms;
        say(d, s, now < l->min ? "below MIN" : "above MAX");
        return;
    }
    if (s->starting || (st->changed_at && s->now_ms - st->changed_at < l->settle_ms)) {
        d->why = CR_SCALE_SETTLING;
        say(d, s, s->starting ? "a worker is starting" : "the last change is settling");
        return;
    }
    if (waiting && busy) {
        double want = s->demand_each >= 0 ? s->demand_each : s->cpu_each;
        bool on_cpu = want >= CR_SCALE_CPU_BOUND;
        /* Below the cores, a core kept busy is other work's: the new
         * worker gets its share of it (autoscale.h). */
        bool no_core = s->idle_cores >= 0 && s->idle_cores < CR_SCALE_IDLE_MIN &&
                       (!l->cores || now >= l->cores);
        if (now >= l->max) {
            d->why = CR_SCALE_AT_MAX;
            say(d, s, "at MAX");
        } else if (l->budget_max && now + 1 > l->budget_max) {
            d->why = CR_SCALE_AT_BUDGET;
            char why[80];
            snprintf(why, sizeof(why), "the memory budget fits %u worker%s", l->budget_max,
                     l->budget_max == 1 ? "" : "s");
            say(d, s, why);
        } else if (on_cpu && no_core) {
            d->why = CR_SCALE_SATURATED;
            say(d, s, "the CPU is saturated: another worker would only share it");
        } else {
            d->to = now + 1;
            d->why = CR_SCALE_UP;
            st->changed_at = s->now_ms;
            st->low_since = 0;
            say(d, s, on_cpu ? NULL : "the loops wait without the CPU");
        }
        return;
    }
    if (st->low_since && s->now_ms - st->low_since >= l->cooldown_ms && now > l->min) {
        unsigned to = needed(s);
        to = to < l->min ? l->min : to;
        if (to < now) {
            d->to = to;
            d->why = CR_SCALE_DOWN;
            st->changed_at = s->now_ms;
            st->low_since = s->now_ms;
            char why[80];
            snprintf(why, sizeof(why), "low use for %llu ms",
                     (unsigned long long)l->cooldown_ms);
            say(d, s, why);
            return;
        }
    }
    say(d, s, NULL);
}
