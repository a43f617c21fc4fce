/* corrald's memory readings of one generation: see memread.h. */
#include "memread.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "report.h"
#include "textfile.h"

void cr_mem_reset(struct cr_mem *m)
{
    struct cr_trend_ring *ring = m->samples;
    *m = (struct cr_mem){.samples = ring, .round = m->round};
    if (ring)
        cr_trend_ring_clear(ring);
}

void cr_mem_free(struct cr_mem *m)
{
    m->samples = cr_trend_ring_free(m->samples);
}

bool cr_mem_visit(struct cr_mem *m, unsigned round)
{
    if (m->round == round)
        return false;
    m->round = round;
    return true;
}

uint64_t cr_mem_read_resident(int fd, bool pss)
{
    static uint64_t page_size;
    char buf[2048]; /* smaps_rollup is about 20 short lines */
    unsigned long long a, b;
    if (!page_size)
        page_size = (uint64_t)sysconf(_SC_PAGESIZE);
    if (fd < 0 || cr_pread_text(fd, buf, sizeof(buf)) < 0)
        return 0;
    if (!pss)
        return sscanf(buf, "%llu %llu", &a, &b) == 2 ? b * page_size : 0;
    const char *line = strstr(buf, "\nPss:");
    return line && sscanf(line + 1, "Pss: %llu kB", &a) == 1 ? (uint64_t)a * 1024 : 0;
}

int cr_mem_take(struct cr_mem *m, const struct cr_mem_reading *in, const struct cr_report *rep)
{
    static const struct cr_trend_params tp = {
        .window_ms = CR_TREND_DEFAULT_WINDOW_MS,
        .min_samples = CR_TREND_DEFAULT_MIN_SAMPLES,
        .min_span_ms = CR_TREND_DEFAULT_MIN_SPAN_MS,
        .min_rise_bytes = CR_TREND_DEFAULT_MIN_RISE,
        .min_rise_pct = CR_TREND_DEFAULT_MIN_RISE_PCT,
        .horizon_ms = CR_TREND_DEFAULT_HORIZON_MS,
        .near_pct = CR_TREND_DEFAULT_NEAR_PCT,
        .projection_window_ms = CR_TREND_DEFAULT_PROJECTION_MS,
    };
    if (!m->samples && cr_trend_ring_new(in->ring, &m->samples) < 0)
        return -ENOMEM;
    m->rss = in->rss;
    m->rss_at = in->now;
    if (in->cg)
        m->cg_usage = in->cg_usage;
    if (in->cg && in->cg_read)
        m->cg_usage_at = in->now;
    m->sampled_at = in->now;
    struct cr_sample s = {
        .t_ms = in->now,
        .rss = m->rss,
        .heap_used = rep->last.heap_used,
        .heap_total = rep->last.heap_total,
        .external = rep->last.external,
        .cg_usage = in->cg ? m->cg_usage : 0,
        /* A worker reporting X_HEAP_USED=0 has a heap known to be empty:
         * RSS growth beside it is off-heap, not "cannot tell". */
        .heap_reported = (rep->last.present & CR_NF_HEAP_USED) != 0,
    };
    cr_trend_ring_push(m->samples, &s);
    if (in->psi)
        m->pressure = (struct cr_mem_pressure){.known = true, .some10 = in->some10,
                                               .some60 = in->some60, .full10 = in->full10,
                                               .full60 = in->full60, .at = in->now};
    struct cr_trend t;
    if (cr_trend_analyze_ring(m->samples, &tp, in->cg_limit, &t) < 0)
        return 0;
    /* Pressure says more than a trend, but less than a limit about to be
     * met: near-limit stays. */
    bool pressed = in->psi && in->some10 >= CR_MEM_PRESSURE_VERDICT_PCT &&
                   t.verdict != CR_TREND_NEAR_LIMIT;
    enum cr_trend_verdict v = pressed ? CR_TREND_PRESSURE : t.verdict;
    if (v == m->verdict)
        return 0;
    m->verdict = v;
    m->verdict_at = in->now;
    if (pressed) {
        char rest[sizeof(m->verdict_text)];
        cr_trend_format(&t, rest, sizeof(rest));
        snprintf(m->verdict_text, sizeof(m->verdict_text),
                 "verdict=pressure memory.pressure some avg10=%.1f%% full avg10=%.1f%% (%.150s)",
                 in->some10, in->full10, rest);
    } else {
        cr_trend_format(&t, m->verdict_text, sizeof(m->verdict_text));
    }
    return 1;
}

unsigned cr_mem_over_pressure(struct cr_mem *m, unsigned pct)
{
    if (!pct || !m->pressure.known || m->pressure.some10 < (double)pct) {
        m->pressure_over = 0;
        return 0;
    }
    return ++m->pressure_over;
}

void cr_mem_note_resident(struct cr_mem *m, uint64_t rss, uint64_t now)
{
    m->rss = rss;
    m->rss_at = now;
}

unsigned cr_mem_over_soft(struct cr_mem *m, uint64_t usage, uint64_t soft, uint64_t now)
{
    if (!soft || usage <= soft) {
        m->soft_over = 0;
        m->soft_crossed_at = 0;
        return 0;
    }
    if (!m->soft_over)
        m->soft_crossed_at = now;
    return ++m->soft_over;
}
