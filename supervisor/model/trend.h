/* trend: which part of a worker's memory is growing, and how soon it hits
 * the limit. Pure: a bounded ring of samples and an analysis over it.
 *
 * The method. A garbage-collected heap saws up and down; what it keeps
 * after each collection (the analog of heapUsed after GC) is its *floor*.
 * The floor at sample i is the minimum of heap_used over the trailing window
 * [t_i - window_ms, t_i]; floors are taken only once a full window of data
 * lies behind them. A least-squares line through the floors gives the floor
 * slope (bytes/s). RSS gets the same treatment (its floor ignores short
 * spikes and noise). A rise is significant when both
 *   slope * (span of the floor points) >= max(min_rise_bytes,
 *                                             min_rise_pct% of the floor's mean)
 *   and the floor still rose by >= a quarter of that over the second half,
 * so that a one-off step (a cache filled once, then flat) is not a leak.
 *
 * Verdicts, first match wins:
 *   unknown          fewer than min_samples, a span under min_span_ms, or
 *                    fewer than 3 floor points (unless already near-limit)
 *   near-limit       usage (cg_usage, else rss) >= near_pct% of hard_limit
 *   heap-growing     the heap floor rises significantly (a runtime-heap leak)
 *   offheap-growing  the RSS floor rises significantly, the heap floor does
 *                    not (Buffers, native memory, fragmentation)
 *   rss-growing      the RSS floor rises and no heap was ever reported, so
 *                    the part cannot be told
 *   near-limit       the usage ceiling (trailing max, fit over the last
 *                    projection_window_ms) projects crossing hard_limit
 *                    within horizon_ms
 *   stable           otherwise
 * A growing verdict outranks a projected (not yet reached) limit crossing
 * because it names the cause; the projection is in ret->eta_ms and
 * ret->near_limit either way.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cr_sample {
    uint64_t t_ms; /* monotonic, non-decreasing */
    uint64_t rss;
    uint64_t heap_used;
    uint64_t heap_total;
    uint64_t external;
    uint64_t cg_usage; /* 0: no cgroup reading (rss is used instead) */
    bool heap_reported; /* the worker reports a heap (even an empty one) */
};

enum cr_trend_verdict {
    CR_TREND_UNKNOWN,
    CR_TREND_STABLE,
    CR_TREND_HEAP_GROWING,
    CR_TREND_OFFHEAP_GROWING,
    CR_TREND_RSS_GROWING,
    CR_TREND_NEAR_LIMIT,
    CR_TREND_PRESSURE, /* its group's memory pressure is high (PSI; memread.c sets it) */
    _CR_TREND_VERDICT_MAX,
};

const char *cr_trend_verdict_to_string(enum cr_trend_verdict v);
int cr_trend_verdict_from_string(const char *s);

/* Any field left 0 takes its default. */
struct cr_trend_params {
    uint64_t window_ms;            /* floor window; default 1000 */
    size_t min_samples;            /* default 6 */
    uint64_t min_span_ms;          /* default 1500 */
    uint64_t min_rise_bytes;       /* default 4 MiB */
    unsigned min_rise_pct;         /* default 5 (% of the floor's mean level) */
    uint64_t horizon_ms;           /* default 60000 */
    unsigned near_pct;             /* default 90 */
    uint64_t projection_window_ms; /* default 5000 */
};

#define CR_TREND_DEFAULT_WINDOW_MS     1000
#define CR_TREND_DEFAULT_MIN_SAMPLES   6
#define CR_TREND_DEFAULT_MIN_SPAN_MS   1500
#define CR_TREND_DEFAULT_MIN_RISE      (4u * 1024 * 1024)
#define CR_TREND_DEFAULT_MIN_RISE_PCT  5
#define CR_TREND_DEFAULT_HORIZON_MS    60000
#define CR_TREND_DEFAULT_NEAR_PCT      90
#define CR_TREND_DEFAULT_PROJECTION_MS 5000

struct cr_trend {
    enum cr_trend_verdict verdict;
    enum cr_trend_verdict growth; /* unknown, stable, heap-, offheap- or rss-growing */
    bool near_limit;              /* at >= near_pct%, or projected within horizon */
    size_t samples;
    uint64_t span_ms;
    bool heap_known; /* some sample reported a heap (heap_reported, or heap_used > 0) */

    uint64_t heap_floor;         /* the latest floor */
    double heap_floor_slope_bps; /* bytes/s */
    uint64_t rss_floor;
    double rss_floor_slope_bps;
    uint64_t heap_threshold; /* the rise that would have been significant */
    uint64_t rss_threshold;

    /* The last sample's parts: off-heap = rss - heap_total (0 if negative). */
    uint64_t rss;
    uint64_t heap_used;
    uint64_t heap_total;
    uint64_t external;
    uint64_t offheap;   /* 0 when the heap is not known */
    double offheap_pct; /* offheap / rss * 100; -1: unknown (no heap report) */

    uint64_t usage;      /* cg_usage if nonzero, else rss */
    uint64_t hard_limit; /* 0: none */
    double usage_pct;    /* of hard_limit; 0 without one */
    double usage_slope_bps;
    int64_t eta_ms; /* until usage crosses hard_limit; -1: not projected */
};

/* Analyzes n samples in time order. p may be NULL (all defaults);
 * hard_limit 0 or UINT64_MAX: none. Returns 0, or -EINVAL on NULL
 * arguments or samples out of time order (ret untouched). n may be 0
 * (verdict unknown). */
int cr_trend_analyze(const struct cr_sample *s, size_t n, const struct cr_trend_params *p,
                     uint64_t hard_limit, struct cr_trend *ret);

/* The numbers behind the verdict, one line (no newline), e.g.
 * "verdict=heap-growing samples=12 span_ms=2750 heap_floor=56.0MiB
 *  heap_slope=+25.6MiB/s rss_floor=… rss_slope=… offheap=…(12%) external=…
 *  usage=…/256.0MiB(41%) eta_s=6.2". Returns the length, -ENOBUFS when
 * truncated (buf still NUL-terminated), -EINVAL on NULL or size 0. 256 bytes
 * is always enough. */
int cr_trend_format(const struct cr_trend *t, char *buf, size_t size);

/* How often a worker's memory is worth sampling: every base_ms unless it
 * is calm — its verdict stable, its usage under half of limit (its lowest
 * limit, soft or hard; 0 = none), and flat (its last samples within
 * CR_TREND_FLAT_BYTES of one another) — then every CR_TREND_RELAXED x
 * base_ms. Sampling 256 idle workers every 250 ms (two reads and a trend
 * fit each) was most of corrald's idle CPU. Only a flat worker may be
 * sampled sparsely: the envelope (a trailing min over 1 s) needs dense
 * samples to see through a GC sawtooth. A worker that starts to move or
 * nears a limit is back to the base period at its next sample. */
#define CR_TREND_RELAXED   8
#define CR_TREND_FLAT_BYTES (1024u * 1024)
uint64_t cr_trend_sample_period(uint64_t base_ms, enum cr_trend_verdict v, uint64_t usage,
                                uint64_t limit, bool flat);

/* ---- the ring ---- */

#define CR_TREND_DEFAULT_CAPACITY 240
#define CR_TREND_MAX_CAPACITY     (1u << 20)

struct cr_trend_ring;

/* capacity 0 → CR_TREND_DEFAULT_CAPACITY; -EINVAL above the max, -ENOMEM. */
int cr_trend_ring_new(size_t capacity, struct cr_trend_ring **ret);
struct cr_trend_ring *cr_trend_ring_free(struct cr_trend_ring *r); /* NULL-safe; NULL */
/* Copies *s in, dropping the oldest when full. -EINVAL when s->t_ms is
 * before the newest sample's. */
int cr_trend_ring_push(struct cr_trend_ring *r, const struct cr_sample *s);
void cr_trend_ring_clear(struct cr_trend_ring *r);
size_t cr_trend_ring_len(const struct cr_trend_ring *r);
size_t cr_trend_ring_capacity(const struct cr_trend_ring *r);
/* The ring keeps sizes to the KiB (rounded up) and times to the ms; see
 * trend.c. Copies the i-th oldest sample (0 = oldest) into *ret: 0,
 * -ENOENT past the end, -EINVAL on NULL. */
int cr_trend_ring_get(const struct cr_trend_ring *r, size_t i, struct cr_sample *ret);
/* cr_trend_analyze over the ring's samples. -ENOMEM only for a ring larger
 * than the default capacity. */
int cr_trend_analyze_ring(const struct cr_trend_ring *r, const struct cr_trend_params *p,
                          uint64_t hard_limit, struct cr_trend *ret);
/* Whether the ring's last n samples (all of them if fewer; false when
 * empty) lie within CR_TREND_FLAT_BYTES in RSS, heap used and cgroup usage. */
bool cr_trend_ring_flat(const struct cr_trend_ring *r, size_t n);
