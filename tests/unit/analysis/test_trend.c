/* Unit tests of the memory trend on synthetic series: each verdict, noise,
 * GC sawtooth patterns, the limit projection, and the ring. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "trend.h"

#define MIB (1024ull * 1024)
#define MAXN 400

static uint32_t rng = 12345;

/* Deterministic noise in [-amp, +amp]. */
static int64_t noise(uint64_t amp)
{
    rng = rng * 1103515245u + 12345u;
    if (!amp)
        return 0;
    return (int64_t)((rng >> 8) % (2 * amp + 1)) - (int64_t)amp;
}

static uint64_t add(uint64_t base, int64_t d)
{
    return d < 0 && (uint64_t)-d > base ? 0 : base + (uint64_t)d;
}

/* A worker retaining 8 MB every 300 ms, sampled every 250 ms: on the heap
 * (heap=true) or in Buffers (heap=false). */
static size_t steps(struct cr_sample *s, uint64_t until_ms, bool heap)
{
    size_t n = 0;
    for (uint64_t t = 0; t <= until_ms; t += 250, n++) {
        uint64_t retained = 8000000ull * (t / 300);
        uint64_t hu = 20 * MIB + (heap ? retained : 0) + (uint64_t)noise(MIB / 4) + MIB / 4;
        s[n] = (struct cr_sample){.t_ms = 100000 + t, .heap_used = hu, .heap_total = hu + 5 * MIB,
                                  .external = heap ? MIB : MIB + retained};
        s[n].rss = s[n].heap_total + 30 * MIB + (heap ? 0 : retained);
        s[n].cg_usage = s[n].rss + 2 * MIB;
    }
    return n;
}

/* 60 s at 250 ms of a GC sawtooth: the heap climbs amp above its floor over
 * one period and drops back; the floor rises by floor_bps. */
static size_t sawtooth(struct cr_sample *s, uint64_t period_ms, uint64_t amp, double floor_bps,
                       uint64_t noise_amp)
{
    size_t n = 0;
    for (uint64_t t = 0; t < 60000; t += 250, n++) {
        uint64_t floor = 30 * MIB + (uint64_t)(floor_bps * (double)t / 1000.0);
        uint64_t hu = floor + amp * (t % period_ms) / period_ms;
        hu = add(hu, noise(noise_amp));
        s[n] = (struct cr_sample){.t_ms = t, .heap_used = hu, .heap_total = floor + amp + 8 * MIB,
                                  .external = 2 * MIB};
        s[n].rss = add(s[n].heap_total + 40 * MIB, noise(noise_amp));
    }
    return n;
}

static struct cr_trend analyze(const struct cr_sample *s, size_t n, uint64_t limit)
{
    struct cr_trend t;
    assert_int_equal(cr_trend_analyze(s, n, NULL, limit, &t), 0);
    return t;
}

#define assert_verdict(t, v)                                                                       \
    do {                                                                                           \
        char line_[256];                                                                           \
        cr_trend_format(&(t), line_, sizeof(line_));                                               \
        if ((t).verdict != (v))                                                                    \
            fail_msg("want %s, got %s", cr_trend_verdict_to_string(v), line_);                    \
    } while (0)

static void test_strings(void **state)
{
    for (int v = 0; v < _CR_TREND_VERDICT_MAX; v++)
        assert_int_equal(cr_trend_verdict_from_string(cr_trend_verdict_to_string(v)), v);
    assert_null(cr_trend_verdict_to_string(_CR_TREND_VERDICT_MAX));
    assert_int_equal(cr_trend_verdict_from_string("leaking"), -EINVAL);
    assert_string_equal(cr_trend_verdict_to_string(CR_TREND_OFFHEAP_GROWING), "offheap-growing");
}

static void test_unknown(void **state)
{
    static struct cr_sample s[MAXN];
    struct cr_trend t = analyze(NULL, 0, 0);
    assert_verdict(t, CR_TREND_UNKNOWN);
    assert_int_equal(t.eta_ms, -1);

    size_t n = steps(s, 3000, true);
    t = analyze(s, 3, 512 * MIB); /* 3 samples */
    assert_verdict(t, CR_TREND_UNKNOWN);
    assert_int_equal(t.samples, 3);

    /* plenty of samples, too short a span */
    for (size_t i = 0; i < 20; i++)
        s[i] = (struct cr_sample){.t_ms = i * 50, .rss = 100 * MIB + i * 8 * MIB, .heap_used = MIB};
    t = analyze(s, 20, 0);
    assert_verdict(t, CR_TREND_UNKNOWN);
    assert_int_equal(t.span_ms, 950);
    (void)n;
}

static void test_invalid(void **state)
{
    struct cr_sample s[2] = {{.t_ms = 10}, {.t_ms = 5}};
    struct cr_trend t = {.verdict = CR_TREND_STABLE};
    assert_int_equal(cr_trend_analyze(s, 2, NULL, 0, &t), -EINVAL);
    assert_int_equal(t.verdict, CR_TREND_STABLE);
    assert_int_equal(cr_trend_analyze(s, 1, NULL, 0, NULL), -EINVAL);
    assert_int_equal(cr_trend_analyze(NULL, 1, NULL, 0, &t), -EINVAL);
}

static void test_heap_steps_within_3s(void **state)
{
    static struct cr_sample s[MAXN];
    /* at 2 s already, and at 3 s */
    for (uint64_t until = 2000; until <= 3000; until += 500) {
        size_t n = steps(s, until, true);
        struct cr_trend t = analyze(s, n, 512 * MIB);
        assert_verdict(t, CR_TREND_HEAP_GROWING);
        assert_true(t.heap_known);
        assert_true(t.heap_floor_slope_bps > 18e6 && t.heap_floor_slope_bps < 36e6);
    }
    /* a tighter limit: still named by its cause, with the projection set */
    size_t n = steps(s, 3000, true);
    struct cr_trend t = analyze(s, n, 256 * MIB);
    assert_verdict(t, CR_TREND_HEAP_GROWING);
    assert_true(t.near_limit);
    assert_true(t.eta_ms > 0 && t.eta_ms < 15000);
    assert_true(t.usage_slope_bps > 10e6);
}

static void test_buffer_steps_offheap(void **state)
{
    static struct cr_sample s[MAXN];
    for (uint64_t until = 2000; until <= 3000; until += 1000) {
        size_t n = steps(s, until, false);
        struct cr_trend t = analyze(s, n, 1024 * MIB);
        assert_verdict(t, CR_TREND_OFFHEAP_GROWING);
        assert_true(t.rss_floor_slope_bps > 18e6);
        assert_true(t.heap_floor_slope_bps < 1e6);
        assert_true(t.offheap > 50 * MIB);
        assert_true(t.offheap_pct > 50);
    }
}

static void test_rss_growing_without_heap_reports(void **state)
{
    static struct cr_sample s[MAXN];
    size_t n = steps(s, 3000, false);
    for (size_t i = 0; i < n; i++)
        s[i].heap_used = s[i].heap_total = 0;
    struct cr_trend t = analyze(s, n, 0);
    assert_verdict(t, CR_TREND_RSS_GROWING);
    assert_false(t.heap_known);
    char line[256];
    assert_true(cr_trend_format(&t, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, "heap=not-reported"));
    /* The split is unknown, not 100% off-heap; the verdict says why. */
    assert_non_null(strstr(line, "offheap=unknown"));
    assert_null(strstr(line, "100%"));
    assert_non_null(strstr(line, "note=\"heap not reported\""));
    assert_true(t.offheap_pct < 0);
    assert_int_equal(t.offheap, 0);
}

/* A worker that reports its heap, and reports it empty (the reference
 * worker before any /alloc): RSS growth beside it is off-heap. */
static void test_empty_reported_heap_is_offheap(void **state)
{
    static struct cr_sample s[MAXN];
    size_t n = steps(s, 3000, false);
    for (size_t i = 0; i < n; i++) {
        s[i].heap_used = s[i].heap_total = 0;
        s[i].heap_reported = true;
    }
    struct cr_trend t = analyze(s, n, 0);
    assert_true(t.heap_known);
    assert_verdict(t, CR_TREND_OFFHEAP_GROWING);
}

static void test_sawtooth_rising_floor(void **state)
{
    static struct cr_sample s[MAXN];
    /* GC every second frees 20 MB, but 300 KB/s stays: a leak */
    size_t n = sawtooth(s, 1000, 20 * MIB, 300e3, MIB / 2);
    struct cr_trend t = analyze(s, n, 0);
    assert_verdict(t, CR_TREND_HEAP_GROWING);
    assert_true(t.heap_floor_slope_bps > 200e3 && t.heap_floor_slope_bps < 400e3);
}

static void test_sawtooth_flat_floor(void **state)
{
    static struct cr_sample s[MAXN];
    static const uint64_t periods[] = {750, 1000, 1700, 3000};
    for (size_t i = 0; i < 4; i++) {
        size_t n = sawtooth(s, periods[i], 20 * MIB, 0, MIB);
        struct cr_trend t = analyze(s, n, 512 * MIB);
        assert_verdict(t, CR_TREND_STABLE);
        assert_false(t.near_limit);
    }
}

static void test_noise_is_stable(void **state)
{
    static struct cr_sample s[MAXN];
    for (size_t i = 0; i < 240; i++) {
        uint64_t hu = add(60 * MIB, noise(3 * MIB));
        s[i] = (struct cr_sample){.t_ms = i * 250, .heap_used = hu, .heap_total = 80 * MIB,
                                  .rss = add(150 * MIB, noise(3 * MIB))};
    }
    struct cr_trend t = analyze(s, 240, 256 * MIB);
    assert_verdict(t, CR_TREND_STABLE);
}

static void test_one_step_then_flat(void **state)
{
    static struct cr_sample s[MAXN];
    /* a cache filled once at 10 s, then flat for 50 s: not a leak */
    for (size_t i = 0; i < 240; i++) {
        uint64_t t = i * 250;
        uint64_t hu = 40 * MIB + (t >= 10000 ? 30 * MIB : 0) + (uint64_t)noise(MIB / 2) + MIB;
        s[i] = (struct cr_sample){.t_ms = t, .heap_used = hu, .heap_total = hu + 10 * MIB};
        s[i].rss = s[i].heap_total + 40 * MIB;
    }
    struct cr_trend t = analyze(s, 240, 0);
    assert_verdict(t, CR_TREND_STABLE);
}

static void test_near_limit_reached(void **state)
{
    struct cr_sample s[2] = {
        {.t_ms = 0, .rss = 240 * MIB, .cg_usage = 243 * MIB},
        {.t_ms = 250, .rss = 240 * MIB, .cg_usage = 245 * MIB},
    };
    struct cr_trend t = analyze(s, 2, 256 * MIB); /* 95.7%, only two samples */
    assert_verdict(t, CR_TREND_NEAR_LIMIT);
    assert_true(t.near_limit);
    assert_int_equal(t.usage, 245 * MIB);
    assert_true(t.usage_pct > 95 && t.usage_pct < 96);

    t = analyze(s, 2, UINT64_MAX); /* no limit */
    assert_verdict(t, CR_TREND_UNKNOWN);
    assert_false(t.near_limit);

    s[1].cg_usage = 0; /* no cgroup reading: rss is the usage */
    t = analyze(s, 2, 250 * MIB);
    assert_int_equal(t.usage, 240 * MIB);
    assert_verdict(t, CR_TREND_NEAR_LIMIT);
}

static void test_near_limit_projected(void **state)
{
    static struct cr_sample s[MAXN];
    /* heap and rss flat, the cgroup's usage climbs 2 MiB/s towards 256 MiB */
    for (size_t i = 0; i < 40; i++) {
        uint64_t t = i * 250;
        s[i] = (struct cr_sample){.t_ms = t, .heap_used = 30 * MIB, .heap_total = 40 * MIB,
                                  .rss = 100 * MIB, .cg_usage = 180 * MIB + 2 * MIB * t / 1000};
    }
    struct cr_trend t = analyze(s, 40, 256 * MIB);
    assert_verdict(t, CR_TREND_NEAR_LIMIT);
    assert_int_equal(t.growth, CR_TREND_STABLE);
    assert_true(t.eta_ms > 25000 && t.eta_ms < 32000);

    struct cr_trend_params p = {.horizon_ms = 10000};
    assert_int_equal(cr_trend_analyze(s, 40, &p, 256 * MIB, &t), 0);
    assert_verdict(t, CR_TREND_STABLE);
    assert_false(t.near_limit);
    assert_true(t.eta_ms > 25000);

    t = analyze(s, 40, 1024 * MIB); /* far away */
    assert_verdict(t, CR_TREND_STABLE);
}

static void test_ring(void **state)
{
    struct cr_trend_ring *r;
    assert_int_equal(cr_trend_ring_new(0, &r), 0);
    assert_int_equal(cr_trend_ring_capacity(r), CR_TREND_DEFAULT_CAPACITY);
    cr_trend_ring_free(r);
    assert_int_equal(cr_trend_ring_new(CR_TREND_MAX_CAPACITY + 1, &r), -EINVAL);
    assert_null(cr_trend_ring_free(NULL));

    assert_int_equal(cr_trend_ring_new(5, &r), 0);
    for (uint64_t i = 0; i < 8; i++) {
        struct cr_sample s = {.t_ms = 1000 + i * 10, .rss = i * 4096,
                              .heap_reported = i % 2};
        assert_int_equal(cr_trend_ring_push(r, &s), 0);
    }
    assert_int_equal(cr_trend_ring_len(r), 5);
    struct cr_sample got;
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(cr_trend_ring_get(r, i, &got), 0);
        assert_int_equal(got.rss, (3 + i) * 4096);
        assert_int_equal(got.t_ms, 1000 + (3 + i) * 10);
        assert_int_equal(got.heap_reported, (3 + i) % 2);
    }
    assert_int_equal(cr_trend_ring_get(r, 5, &got), -ENOENT);
    struct cr_sample old = {.t_ms = 5};
    assert_int_equal(cr_trend_ring_push(r, &old), -EINVAL);
    cr_trend_ring_clear(r);
    assert_int_equal(cr_trend_ring_len(r), 0);
    cr_trend_ring_free(r);
}

/* The ring keeps 24 bytes a sample: sizes to the KiB, rounded up, and
 * saturated at 4 TiB; times to the ms over any span (a month of pushes). */
static void test_ring_packing(void **state)
{
    struct cr_trend_ring *r;
    struct cr_sample got;
    assert_int_equal(cr_trend_ring_new(4, &r), 0);
    struct cr_sample a = {.t_ms = 7, .rss = 1, .heap_used = 1025, .heap_total = 3 * 1024,
                          .external = 0, .cg_usage = UINT64_MAX / 2, .heap_reported = true};
    assert_int_equal(cr_trend_ring_push(r, &a), 0);
    assert_int_equal(cr_trend_ring_get(r, 0, &got), 0);
    assert_int_equal(got.t_ms, 7);
    assert_int_equal(got.rss, 1024);
    assert_int_equal(got.heap_used, 2048);
    assert_int_equal(got.heap_total, 3 * 1024);
    assert_int_equal(got.external, 0);
    assert_int_equal(got.cg_usage, (uint64_t)UINT32_MAX * 1024);
    assert_true(got.heap_reported);
    /* 30 days of one sample an hour: past the 2^30 ms offsets, rebased. */
    uint64_t t = 7;
    for (int i = 0; i < 30 * 24; i++) {
        struct cr_sample s = {.t_ms = t += 3600 * 1000, .rss = (uint64_t)i * 1024};
        assert_int_equal(cr_trend_ring_push(r, &s), 0);
    }
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(cr_trend_ring_get(r, i, &got), 0);
        assert_int_equal(got.t_ms, t - (3 - i) * 3600 * 1000);
        assert_int_equal(got.rss, (30 * 24 - 4 + i) * 1024);
    }
    /* Samples 4 days apart: a full ring spans 12 days, about the offsets'
     * reach; only what lies beyond it is dropped, never the whole ring. */
    struct cr_trend_ring *slow;
    assert_int_equal(cr_trend_ring_new(4, &slow), 0);
    for (uint64_t i = 0; i < 12; i++) {
        struct cr_sample s = {.t_ms = 1 + i * 4 * 24 * 3600 * 1000ull, .rss = (i + 1) * 1024};
        assert_int_equal(cr_trend_ring_push(slow, &s), 0);
        assert_true(cr_trend_ring_len(slow) >= (i < 3 ? i + 1 : 3));
        size_t n = cr_trend_ring_len(slow);
        assert_int_equal(cr_trend_ring_get(slow, n - 1, &got), 0);
        assert_int_equal(got.t_ms, s.t_ms);
        assert_int_equal(got.rss, s.rss);
        assert_int_equal(cr_trend_ring_get(slow, 0, &got), 0);
        assert_int_equal(got.t_ms, s.t_ms - (n - 1) * 4 * 24 * 3600 * 1000ull);
    }
    cr_trend_ring_free(slow);
    /* A gap longer than the offsets can hold leaves only the new sample. */
    struct cr_sample far = {.t_ms = t + 40ull * 24 * 3600 * 1000, .rss = 4096};
    assert_int_equal(cr_trend_ring_push(r, &far), 0);
    assert_int_equal(cr_trend_ring_len(r), 1);
    assert_int_equal(cr_trend_ring_get(r, 0, &got), 0);
    assert_int_equal(got.t_ms, far.t_ms);
    cr_trend_ring_free(r);
}

/* Only a flat, stable worker well under its limits is sampled less often. */
static void test_sample_period(void **state)
{
    const uint64_t base = 250, relaxed = 250 * CR_TREND_RELAXED;
    assert_int_equal(cr_trend_sample_period(base, CR_TREND_STABLE, 10 * MIB, 0, true), relaxed);
    assert_int_equal(cr_trend_sample_period(base, CR_TREND_STABLE, 10 * MIB, 0, false), base);
    assert_int_equal(cr_trend_sample_period(base, CR_TREND_STABLE, 49 * MIB, 100 * MIB, true),
                     relaxed);
    assert_int_equal(cr_trend_sample_period(base, CR_TREND_STABLE, 50 * MIB, 100 * MIB, true), base);
    assert_int_equal(cr_trend_sample_period(base, CR_TREND_STABLE, 99 * MIB, 100 * MIB, true), base);
    for (int v = 0; v < _CR_TREND_VERDICT_MAX; v++)
        if (v != CR_TREND_STABLE)
            assert_int_equal(cr_trend_sample_period(base, v, 1, 0, true), base);
}

/* Flat: the last samples within 1 MiB in RSS, heap and group usage. A GC
 * sawtooth is not flat, so it is never sampled sparsely (the envelope
 * needs dense samples to find its floor). */
static void test_ring_flat(void **state)
{
    struct cr_trend_ring *r;
    assert_int_equal(cr_trend_ring_new(16, &r), 0);
    assert_false(cr_trend_ring_flat(r, 5)); /* nothing known yet */
    for (uint64_t i = 0; i < 8; i++) {
        struct cr_sample s = {.t_ms = i * 250, .rss = 40 * MIB + i * 64 * 1024,
                              .heap_used = 10 * MIB, .cg_usage = 30 * MIB};
        assert_int_equal(cr_trend_ring_push(r, &s), 0);
    }
    assert_true(cr_trend_ring_flat(r, 5));
    /* a sawtooth in the heap: 10 -> 26 MiB and back */
    struct cr_sample up = {.t_ms = 2000, .rss = 41 * MIB, .heap_used = 26 * MIB,
                           .cg_usage = 30 * MIB};
    assert_int_equal(cr_trend_ring_push(r, &up), 0);
    assert_false(cr_trend_ring_flat(r, 5));
    for (uint64_t i = 0; i < 5; i++) {
        struct cr_sample s = {.t_ms = 2250 + i * 250, .rss = 41 * MIB, .heap_used = 10 * MIB,
                              .cg_usage = 30 * MIB + MIB * (i == 4)};
        assert_int_equal(cr_trend_ring_push(r, &s), 0);
    }
    /* the spike left the last five, but the group grew by 1 MiB */
    assert_false(cr_trend_ring_flat(r, 5));
    assert_true(cr_trend_ring_flat(r, 1));
    cr_trend_ring_free(r);
}

static void test_ring_analysis_matches_array(void **state)
{
    static struct cr_sample s[MAXN];
    struct cr_trend_ring *r;
    struct cr_trend a, b;
    size_t n = steps(s, 5000, true); /* 21 samples into a ring of 12: wrapped */

    assert_int_equal(cr_trend_ring_new(12, &r), 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(cr_trend_ring_push(r, &s[i]), 0);
    assert_int_equal(cr_trend_analyze_ring(r, NULL, 512 * MIB, &a), 0);
    /* The ring keeps sizes to the KiB, rounded up: the same samples so
     * rounded must give the same analysis. */
    struct cr_sample k[12];
    for (size_t i = 0; i < 12; i++) {
        k[i] = s[n - 12 + i];
        uint64_t *f[] = {&k[i].rss, &k[i].heap_used, &k[i].heap_total, &k[i].external,
                         &k[i].cg_usage};
        for (size_t j = 0; j < 5; j++)
            *f[j] = (*f[j] + 1023) / 1024 * 1024;
    }
    assert_int_equal(cr_trend_analyze(k, 12, NULL, 512 * MIB, &b), 0);
    assert_int_equal(a.verdict, b.verdict);
    assert_int_equal(a.verdict, CR_TREND_HEAP_GROWING);
    assert_true(a.heap_floor_slope_bps == b.heap_floor_slope_bps);
    assert_int_equal(a.eta_ms, b.eta_ms);
    assert_int_equal(a.span_ms, 2750);
    assert_int_equal(cr_trend_analyze_ring(NULL, NULL, 0, &a), -EINVAL);
    cr_trend_ring_free(r);
}

static void test_format(void **state)
{
    static struct cr_sample s[MAXN];
    size_t n = steps(s, 3000, true);
    struct cr_trend t = analyze(s, n, 256 * MIB);
    char line[256];
    int len = cr_trend_format(&t, line, sizeof(line));
    assert_true(len > 0);
    assert_int_equal((size_t)len, strlen(line));
    assert_non_null(strstr(line, "verdict=heap-growing samples=13 span_ms=3000"));
    assert_non_null(strstr(line, "heap_slope=+"));
    assert_non_null(strstr(line, "MiB/s"));
    assert_non_null(strstr(line, "/256.0MiB("));
    assert_non_null(strstr(line, "eta_s="));

    char small[16];
    assert_int_equal(cr_trend_format(&t, small, sizeof(small)), -ENOBUFS);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_int_equal(cr_trend_format(NULL, small, sizeof(small)), -EINVAL);
    assert_int_equal(cr_trend_format(&t, small, 0), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_heap_steps_within_3s),
        cmocka_unit_test(test_buffer_steps_offheap),
        cmocka_unit_test(test_rss_growing_without_heap_reports),
        cmocka_unit_test(test_empty_reported_heap_is_offheap),
        cmocka_unit_test(test_sawtooth_rising_floor),
        cmocka_unit_test(test_sawtooth_flat_floor),
        cmocka_unit_test(test_noise_is_stable),
        cmocka_unit_test(test_one_step_then_flat),
        cmocka_unit_test(test_near_limit_reached),
        cmocka_unit_test(test_near_limit_projected),
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_ring_packing),
        cmocka_unit_test(test_sample_period),
        cmocka_unit_test(test_ring_flat),
        cmocka_unit_test(test_ring_analysis_matches_array),
        cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
