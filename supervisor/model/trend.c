/* trend: memory trend over a ring of samples. See trend.h for the method. */
#include "trend.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

static const char *const verdict_names[_CR_TREND_VERDICT_MAX] = {
    [CR_TREND_UNKNOWN] = "unknown",
    [CR_TREND_STABLE] = "stable",
    [CR_TREND_HEAP_GROWING] = "heap-growing",
    [CR_TREND_OFFHEAP_GROWING] = "offheap-growing",
    [CR_TREND_RSS_GROWING] = "rss-growing",
    [CR_TREND_NEAR_LIMIT] = "near-limit",
    [CR_TREND_PRESSURE] = "pressure",
};

const char *cr_trend_verdict_to_string(enum cr_trend_verdict v)
{
    if ((unsigned)v >= _CR_TREND_VERDICT_MAX)
        return NULL;
    return verdict_names[v];
}

int cr_trend_verdict_from_string(const char *s)
{
    if (!s)
        return -EINVAL;
    for (int i = 0; i < _CR_TREND_VERDICT_MAX; i++)
        if (strcmp(verdict_names[i], s) == 0)
            return i;
    return -EINVAL;
}

/* ---- the samples, oldest first, and scratch space for one fit ---- */

struct view {
    const struct cr_sample *base;
    size_t n;
    uint64_t *env; /* n envelope values */
    size_t *dq;    /* n indices: the envelope's window */
};

static const struct cr_sample *at(const struct view *v, size_t i)
{
    return &v->base[i];
}

static uint64_t field(const struct cr_sample *s, size_t off)
{
    uint64_t x;
    memcpy(&x, (const char *)s + off, sizeof(x));
    return x;
}

/* ---- envelope fit: trailing min (floor) or max (ceiling), then least squares ---- */

struct fit {
    size_t n;
    double slope;  /* bytes/s */
    double mean;   /* bytes */
    double span_s; /* from the first to the last envelope point */
    double mid, last;
};

/* The trailing min (floor) or max (ceiling) over the last w ms at every
 * sample, into v->env, in one pass: a deque of indices whose values only
 * rise (floor) or fall (ceiling) from its head, so each sample enters and
 * leaves it once. Run for every worker at every sample, this replaced a
 * scan back over the window from each point. */
static void envelope(const struct view *v, size_t off, uint64_t w, bool ceiling)
{
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < v->n; i++) {
        uint64_t x = field(at(v, i), off), t = at(v, i)->t_ms;
        while (tail > head) {
            uint64_t y = field(at(v, v->dq[tail - 1]), off);
            if (ceiling ? y > x : y < x)
                break;
            tail--;
        }
        v->dq[tail++] = i;
        while (at(v, v->dq[head])->t_ms + w < t)
            head++;
        v->env[i] = field(at(v, v->dq[head]), off);
    }
}

/* Fits the envelope points with t >= from_ms (and a full window behind). */
static void envelope_fit(const struct view *v, size_t off, uint64_t w, bool ceiling,
                         uint64_t from_ms, struct fit *f)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, t0, tmid;
    uint64_t first_t;

    memset(f, 0, sizeof(*f));
    if (v->n == 0)
        return;
    envelope(v, off, w, ceiling);
    first_t = at(v, 0)->t_ms + w;
    if (from_ms > first_t)
        first_t = from_ms;
    t0 = (double)first_t;
    tmid = (t0 + (double)at(v, v->n - 1)->t_ms) / 2;
    for (size_t i = 0; i < v->n; i++) {
        const struct cr_sample *s = at(v, i);
        if (s->t_ms < first_t)
            continue;
        double x = ((double)s->t_ms - t0) / 1000.0, y = (double)v->env[i];
        if (f->n == 0 || (double)s->t_ms <= tmid)
            f->mid = y;
        f->n++;
        sx += x, sy += y, sxx += x * x, sxy += x * y;
        f->last = y;
        f->span_s = x;
    }
    if (f->n == 0)
        return;
    f->mean = sy / (double)f->n;
    double den = (double)f->n * sxx - sx * sx;
    f->slope = den > 0 ? ((double)f->n * sxy - sx * sy) / den : 0;
}

static uint64_t threshold(const struct cr_trend_params *p, double mean)
{
    double pct = mean * p->min_rise_pct / 100.0;
    return pct > (double)p->min_rise_bytes ? (uint64_t)pct : p->min_rise_bytes;
}

static bool significant(const struct fit *f, uint64_t thr)
{
    return f->n >= 3 && f->slope > 0 && f->slope * f->span_s >= (double)thr &&
           f->last - f->mid >= (double)thr / 4;
}

static void apply_defaults(const struct cr_trend_params *in, struct cr_trend_params *p)
{
    static const struct cr_trend_params none;
    *p = in ? *in : none;
#define DEF(f, v)                                                                                  \
    if (!p->f)                                                                                     \
    p->f = (v)
    DEF(window_ms, CR_TREND_DEFAULT_WINDOW_MS);
    DEF(min_samples, CR_TREND_DEFAULT_MIN_SAMPLES);
    DEF(min_span_ms, CR_TREND_DEFAULT_MIN_SPAN_MS);
    DEF(min_rise_bytes, CR_TREND_DEFAULT_MIN_RISE);
    DEF(min_rise_pct, CR_TREND_DEFAULT_MIN_RISE_PCT);
    DEF(horizon_ms, CR_TREND_DEFAULT_HORIZON_MS);
    DEF(near_pct, CR_TREND_DEFAULT_NEAR_PCT);
    DEF(projection_window_ms, CR_TREND_DEFAULT_PROJECTION_MS);
#undef DEF
}

/* The last sample's parts, and the usage against the limit. */
static void fill_levels(const struct view *v, uint64_t limit, struct cr_trend *t)
{
    const struct cr_sample *s = at(v, v->n - 1);

    t->rss = s->rss;
    t->heap_used = s->heap_used;
    t->heap_total = s->heap_total;
    t->external = s->external;
    t->usage = s->cg_usage ? s->cg_usage : s->rss;
    t->usage_pct = limit ? (double)t->usage * 100.0 / (double)limit : 0;
    for (size_t i = 0; i < v->n && !t->heap_known; i++)
        t->heap_known = at(v, i)->heap_reported || at(v, i)->heap_used > 0;
    /* Without a heap report the split is unknown: RSS is not all off-heap. */
    t->offheap = t->heap_known && s->rss > s->heap_total ? s->rss - s->heap_total : 0;
    t->offheap_pct = !t->heap_known ? -1
                     : s->rss       ? (double)t->offheap * 100.0 / (double)s->rss
                                    : 0;
}

/* Projects the usage ceiling to the limit: sets usage_slope_bps and eta_ms. */
static void project(const struct view *v, const struct cr_trend_params *p, struct cr_trend *t)
{
    const struct cr_sample *last = at(v, v->n - 1);
    size_t off = last->cg_usage ? offsetof(struct cr_sample, cg_usage)
                                : offsetof(struct cr_sample, rss);
    uint64_t from = last->t_ms > p->projection_window_ms ? last->t_ms - p->projection_window_ms : 0;
    struct fit f;

    t->eta_ms = -1;
    if (!t->hard_limit)
        return;
    if (t->usage >= t->hard_limit) {
        t->eta_ms = 0;
        return;
    }
    envelope_fit(v, off, p->window_ms, true, from, &f);
    t->usage_slope_bps = f.slope;
    if (f.n >= 3 && f.slope > 0) {
        double room = (double)t->hard_limit - (f.last > (double)t->usage ? f.last : (double)t->usage);
        t->eta_ms = room <= 0 ? 0 : (int64_t)(room / f.slope * 1000.0);
    }
}

static void growth(const struct view *v, const struct cr_trend_params *p, struct cr_trend *t)
{
    struct fit heap, rss;

    /* Without a heap report every heap_used is 0: the fit would be all
     * zeros, so skip it. */
    if (t->heap_known)
        envelope_fit(v, offsetof(struct cr_sample, heap_used), p->window_ms, false, 0, &heap);
    else
        memset(&heap, 0, sizeof(heap));
    envelope_fit(v, offsetof(struct cr_sample, rss), p->window_ms, false, 0, &rss);
    t->heap_floor = (uint64_t)heap.last;
    t->heap_floor_slope_bps = heap.slope;
    t->rss_floor = (uint64_t)rss.last;
    t->rss_floor_slope_bps = rss.slope;
    t->heap_threshold = threshold(p, heap.mean);
    t->rss_threshold = threshold(p, rss.mean);

    if (t->samples < p->min_samples || t->span_ms < p->min_span_ms || rss.n < 3)
        t->growth = CR_TREND_UNKNOWN;
    else if (t->heap_known && significant(&heap, t->heap_threshold))
        t->growth = CR_TREND_HEAP_GROWING;
    else if (significant(&rss, t->rss_threshold))
        t->growth = t->heap_known ? CR_TREND_OFFHEAP_GROWING : CR_TREND_RSS_GROWING;
    else
        t->growth = CR_TREND_STABLE;
}

static int analyze(const struct view *v, const struct cr_trend_params *in, uint64_t limit,
                   struct cr_trend *ret)
{
    struct cr_trend_params p;
    struct cr_trend t = {.verdict = CR_TREND_UNKNOWN, .growth = CR_TREND_UNKNOWN, .eta_ms = -1};

    apply_defaults(in, &p);
    t.hard_limit = limit == UINT64_MAX ? 0 : limit;
    t.samples = v->n;
    if (v->n == 0) {
        *ret = t;
        return 0;
    }
    t.span_ms = at(v, v->n - 1)->t_ms - at(v, 0)->t_ms;
    fill_levels(v, t.hard_limit, &t);
    growth(v, &p, &t);
    project(v, &p, &t);

    bool at_limit = t.hard_limit && t.usage_pct >= p.near_pct;
    bool projected = t.eta_ms >= 0 && (uint64_t)t.eta_ms <= p.horizon_ms;
    t.near_limit = at_limit || (projected && t.growth != CR_TREND_UNKNOWN);
    if (at_limit)
        t.verdict = CR_TREND_NEAR_LIMIT;
    else if (t.growth != CR_TREND_STABLE)
        t.verdict = t.growth;
    else
        t.verdict = projected ? CR_TREND_NEAR_LIMIT : CR_TREND_STABLE;
    *ret = t;
    return 0;
}

/* The envelope's scratch space: on the stack for the default capacity,
 * else one allocation for this call. */
static int analyze_with_scratch(const struct cr_sample *s, size_t n,
                                const struct cr_trend_params *p, uint64_t hard_limit,
                                struct cr_trend *ret)
{
    uint64_t env[CR_TREND_DEFAULT_CAPACITY];
    size_t dq[CR_TREND_DEFAULT_CAPACITY];
    struct view v = {.base = s, .n = n, .env = env, .dq = dq};
    if (n > CR_TREND_DEFAULT_CAPACITY) {
        v.env = malloc(n * sizeof(*v.env));
        v.dq = malloc(n * sizeof(*v.dq));
    }
    int r = v.env && v.dq ? analyze(&v, p, hard_limit, ret) : -ENOMEM;
    if (v.env != env) {
        free(v.env);
        free(v.dq);
    }
    return r;
}

int cr_trend_analyze(const struct cr_sample *s, size_t n, const struct cr_trend_params *p,
                     uint64_t hard_limit, struct cr_trend *ret)
{
    if ((!s && n) || !ret)
        return -EINVAL;
    for (size_t i = 1; i < n; i++)
        if (s[i].t_ms < s[i - 1].t_ms)
            return -EINVAL;
    return analyze_with_scratch(s, n, p, hard_limit, ret);
}

uint64_t cr_trend_sample_period(uint64_t base_ms, enum cr_trend_verdict v, uint64_t usage,
                                uint64_t limit, bool flat)
{
    bool calm = flat && v == CR_TREND_STABLE && (limit == 0 || usage < limit / 2);
    return calm ? base_ms * CR_TREND_RELAXED : base_ms;
}

/* ---- formatting ---- */

struct out {
    char *buf;
    size_t size, len;
    bool truncated;
};

static void outf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void outf(struct out *o, const char *fmt, ...)
{
    if (o->truncated)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(o->buf + o->len, o->size - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->size - o->len) {
        o->truncated = true;
        o->len = o->size - 1;
        return;
    }
    o->len += (size_t)n;
}

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

int cr_trend_format(const struct cr_trend *t, char *buf, size_t size)
{
    struct out o = {.buf = buf, .size = size};
    const char *v;

    if (!t || !buf || size == 0)
        return -EINVAL;
    buf[0] = '\0';
    v = cr_trend_verdict_to_string(t->verdict);
    outf(&o, "verdict=%s samples=%zu span_ms=%" PRIu64, v ? v : "?", t->samples, t->span_ms);
    if (t->heap_known)
        outf(&o, " heap_floor=%.1fMiB heap_slope=%+.2fMiB/s", MIB(t->heap_floor),
             MIB(t->heap_floor_slope_bps));
    else
        outf(&o, " heap=not-reported");
    outf(&o, " rss_floor=%.1fMiB rss_slope=%+.2fMiB/s", MIB(t->rss_floor),
         MIB(t->rss_floor_slope_bps));
    if (t->heap_known)
        outf(&o, " offheap=%.1fMiB(%.0f%%) external=%.1fMiB", MIB(t->offheap), t->offheap_pct,
             MIB(t->external));
    else
        outf(&o, " offheap=unknown");
    if (t->hard_limit)
        outf(&o, " usage=%.1f/%.1fMiB(%.0f%%)", MIB(t->usage), MIB(t->hard_limit), t->usage_pct);
    else
        outf(&o, " usage=%.1fMiB", MIB(t->usage));
    if (t->eta_ms >= 0)
        outf(&o, " eta_s=%.1f", (double)t->eta_ms / 1000.0);
    if (t->verdict == CR_TREND_RSS_GROWING)
        outf(&o, " note=\"heap not reported\"");
    return o.truncated ? -ENOBUFS : (int)o.len;
}

/* ---- the ring ----------------------------------------------------------
 * A worker keeps 240 samples (a minute at 250 ms), and corrald keeps one
 * ring per worker: at 256 workers the rings were 3.4 MiB of corrald's
 * 15 MiB. So the ring packs a sample into 24 bytes instead of 56: times
 * in ms after the ring's base, sizes in KiB (what statm and the cgroup
 * count is pages anyway; a heap report loses less than a KiB, far below
 * any threshold here). Sizes above 4 TiB saturate. */

#define HEAP_REPORTED (1u << 31) /* in t: the rest is ms after base_ms */
#define REBASE_MS     (1u << 30) /* keeps t below HEAP_REPORTED */

struct packed {
    uint32_t t, rss, heap_used, heap_total, external, cg_usage;
};

struct cr_trend_ring {
    size_t capacity;
    uint64_t base_ms;
    struct cr_ring idx; /* which of s[] are in use */
    struct packed s[];
};

static uint32_t kib(uint64_t bytes)
{
    uint64_t k = (bytes + 1023) / 1024;
    return k > UINT32_MAX ? UINT32_MAX : (uint32_t)k;
}

static void unpack(const struct cr_trend_ring *r, const struct packed *p, struct cr_sample *s)
{
    *s = (struct cr_sample){
        .t_ms = r->base_ms + (p->t & ~HEAP_REPORTED),
        .rss = (uint64_t)p->rss * 1024,
        .heap_used = (uint64_t)p->heap_used * 1024,
        .heap_total = (uint64_t)p->heap_total * 1024,
        .external = (uint64_t)p->external * 1024,
        .cg_usage = (uint64_t)p->cg_usage * 1024,
        .heap_reported = (p->t & HEAP_REPORTED) != 0,
    };
}

int cr_trend_ring_new(size_t capacity, struct cr_trend_ring **ret)
{
    struct cr_trend_ring *r;

    if (!ret)
        return -EINVAL;
    if (capacity == 0)
        capacity = CR_TREND_DEFAULT_CAPACITY;
    if (capacity > CR_TREND_MAX_CAPACITY)
        return -EINVAL;
    r = calloc(1, sizeof(*r) + capacity * sizeof(r->s[0]));
    if (!r)
        return -ENOMEM;
    r->capacity = capacity;
    *ret = r;
    return 0;
}

struct cr_trend_ring *cr_trend_ring_free(struct cr_trend_ring *r)
{
    free(r);
    return NULL;
}

/* Keeps t - base_ms below REBASE_MS for a sample at t: drops the samples
 * that lie REBASE_MS or more before it (older than 12 days: no window
 * reaches them), then moves the base up to the oldest one left. */
static void rebase(struct cr_trend_ring *r, uint64_t t)
{
    struct cr_sample oldest;
    while (r->idx.len && cr_trend_ring_get(r, 0, &oldest) == 0 && t - oldest.t_ms >= REBASE_MS)
        r->idx.len--; /* the oldest lies len slots behind the head */
    if (r->idx.len == 0) {
        r->base_ms = t;
        return;
    }
    uint32_t d = (uint32_t)(oldest.t_ms - r->base_ms);
    for (size_t i = 0; i < r->idx.len; i++)
        r->s[cr_ring_oldest(&r->idx, r->capacity, i)].t -= d;
    r->base_ms += d;
}

int cr_trend_ring_push(struct cr_trend_ring *r, const struct cr_sample *s)
{
    struct cr_sample last;

    if (!r || !s)
        return -EINVAL;
    if (r->idx.len == 0)
        r->base_ms = s->t_ms;
    else if (cr_trend_ring_get(r, r->idx.len - 1, &last) == 0 && s->t_ms < last.t_ms)
        return -EINVAL;
    if (s->t_ms - r->base_ms >= REBASE_MS)
        rebase(r, s->t_ms);
    r->s[cr_ring_push(&r->idx, r->capacity)] = (struct packed){
        .t = (uint32_t)(s->t_ms - r->base_ms) | (s->heap_reported ? HEAP_REPORTED : 0),
        .rss = kib(s->rss),
        .heap_used = kib(s->heap_used),
        .heap_total = kib(s->heap_total),
        .external = kib(s->external),
        .cg_usage = kib(s->cg_usage),
    };
    return 0;
}

void cr_trend_ring_clear(struct cr_trend_ring *r)
{
    if (r)
        cr_ring_clear(&r->idx);
}

size_t cr_trend_ring_len(const struct cr_trend_ring *r)
{
    return r ? r->idx.len : 0;
}

size_t cr_trend_ring_capacity(const struct cr_trend_ring *r)
{
    return r ? r->capacity : 0;
}

int cr_trend_ring_get(const struct cr_trend_ring *r, size_t i, struct cr_sample *ret)
{
    if (!r || !ret)
        return -EINVAL;
    if (i >= r->idx.len)
        return -ENOENT;
    unpack(r, &r->s[cr_ring_oldest(&r->idx, r->capacity, i)], ret);
    return 0;
}

bool cr_trend_ring_flat(const struct cr_trend_ring *r, size_t n)
{
    uint64_t lo[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX}, hi[3] = {0, 0, 0};
    size_t len = cr_trend_ring_len(r);
    struct cr_sample s;
    for (size_t i = len > n ? len - n : 0; i < len; i++) {
        if (cr_trend_ring_get(r, i, &s) < 0)
            return false;
        const uint64_t v[3] = {s.rss, s.heap_used, s.cg_usage};
        for (int k = 0; k < 3; k++) {
            lo[k] = v[k] < lo[k] ? v[k] : lo[k];
            hi[k] = v[k] > hi[k] ? v[k] : hi[k];
        }
    }
    for (int k = 0; k < 3; k++)
        if (hi[k] > lo[k] && hi[k] - lo[k] >= CR_TREND_FLAT_BYTES)
            return false;
    return len > 0;
}

/* The samples unpacked in order: on the stack for the default capacity,
 * else in one allocation for this call. */
int cr_trend_analyze_ring(const struct cr_trend_ring *r, const struct cr_trend_params *p,
                          uint64_t hard_limit, struct cr_trend *ret)
{
    struct cr_sample stack[CR_TREND_DEFAULT_CAPACITY], *s = stack;

    if (!r || !ret)
        return -EINVAL;
    size_t n = r->idx.len;
    if (n == 0)
        return analyze_with_scratch(NULL, 0, p, hard_limit, ret);
    if (n > CR_TREND_DEFAULT_CAPACITY && !(s = malloc(n * sizeof(*s))))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        unpack(r, &r->s[cr_ring_oldest(&r->idx, r->capacity, i)], &s[i]);
    int rc = analyze_with_scratch(s, n, p, hard_limit, ret);
    if (s != stack)
        free(s);
    return rc;
}
