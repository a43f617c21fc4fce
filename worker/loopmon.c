#include "loopmon.h"

#include <string.h>

void cr_hist_reset(struct cr_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

/* Bucket of v: values below 2*SUB map to themselves; above, the top bit
 * picks the octave and the next three bits the sub-bucket. */
static unsigned bucket_of(uint64_t v)
{
    if (v < 2 * CR_HIST_SUB)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned sub = (unsigned)(v >> (msb - 3)) & (CR_HIST_SUB - 1);
    unsigned b = (msb - 2) * CR_HIST_SUB + sub;
    return b < CR_HIST_BUCKETS ? b : CR_HIST_BUCKETS - 1;
}

static uint64_t bucket_upper(unsigned b)
{
    if (b < 2 * CR_HIST_SUB)
        return b;
    unsigned msb = b / CR_HIST_SUB + 2;
    uint64_t sub = b % CR_HIST_SUB;
    uint64_t lo = (CR_HIST_SUB + sub) << (msb - 3);
    return lo + (1ull << (msb - 3)) - 1;
}

void cr_hist_record(struct cr_hist *h, uint64_t v)
{
    h->buckets[bucket_of(v)]++;
    h->count++;
    h->sum += v;
    if (v > h->max)
        h->max = v;
    if (v < h->min)
        h->min = v;
}

uint64_t cr_hist_quantile(const struct cr_hist *h, double q)
{
    if (!h->count)
        return 0;
    if (q <= 0)
        return h->min;
    if (q >= 1)
        return h->max;
    uint64_t rank = (uint64_t)(q * (double)h->count + 0.999999);
    if (rank > h->count)
        rank = h->count;
    uint64_t seen = 0;
    for (unsigned b = 0; b < CR_HIST_BUCKETS; b++) {
        seen += h->buckets[b];
        if (seen >= rank) {
            /* The last bucket also holds everything too big for the table. */
            uint64_t up = b == CR_HIST_BUCKETS - 1 ? h->max : bucket_upper(b);
            return up < h->max ? up : h->max;
        }
    }
    return h->max;
}

static void tick(uv_timer_t *t)
{
    struct cr_loopmon *m = t->data;
    uint64_t now = uv_hrtime();
    uint64_t expect = m->last_ns + m->resolution_ms * 1000000u;
    cr_hist_record(&m->hist, now > expect ? (now - expect) / 1000u : 0);
    m->last_ns = now;
}

int cr_loopmon_start(struct cr_loopmon *m, uv_loop_t *loop, uint64_t resolution_ms)
{
    memset(m, 0, sizeof(*m));
    m->loop = loop;
    m->resolution_ms = resolution_ms ? resolution_ms : 1;
    cr_hist_reset(&m->hist);
    m->win_start_ns = m->last_ns = uv_hrtime();
    m->win_idle_ns = uv_metrics_idle_time(loop);
    int r = uv_timer_init(loop, &m->timer);
    if (r < 0)
        return r;
    m->timer.data = m;
    /* Unref'd: the monitor alone must not keep a draining worker alive. */
    uv_unref((uv_handle_t *)&m->timer);
    return uv_timer_start(&m->timer, tick, m->resolution_ms, m->resolution_ms);
}

void cr_loopmon_roll(struct cr_loopmon *m, struct cr_loop_window *ret)
{
    uint64_t now = uv_hrtime();
    uint64_t idle = uv_metrics_idle_time(m->loop);
    uint64_t span = now - m->win_start_ns;
    uint64_t idle_span = idle - m->win_idle_ns;
    struct cr_loop_window w = {
        .p50_us = cr_hist_quantile(&m->hist, 0.50),
        .p90_us = cr_hist_quantile(&m->hist, 0.90),
        .p99_us = cr_hist_quantile(&m->hist, 0.99),
        .max_us = m->hist.max,
        .sum_us = m->hist.sum,
        .samples = m->hist.count,
        .elu = span && idle_span < span ? 1.0 - (double)idle_span / (double)span : 0.0,
    };
    /* A blocked loop shows no late tick until it frees; count the stall
     * still in progress so a report taken right after it is not blind. */
    uint64_t pending = now > m->last_ns ? (now - m->last_ns) / 1000u : 0;
    uint64_t res_us = m->resolution_ms * 1000u;
    if (pending > res_us && pending - res_us > w.max_us)
        w.max_us = pending - res_us;
    m->last = w;
    if (ret)
        *ret = w;
    cr_hist_reset(&m->hist);
    m->win_start_ns = now;
    m->win_idle_ns = idle;
}

void cr_loopmon_stop(struct cr_loopmon *m, uv_close_cb cb)
{
    uv_close((uv_handle_t *)&m->timer, cb);
}
