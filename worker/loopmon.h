/* Event-loop instrumentation in the manner of Node's perf_hooks:
 * monitorEventLoopDelay (a timer that records how late it fires, in a
 * log-scale histogram) and eventLoopUtilization (from libuv's idle time).
 *
 * Lateness is what is recorded: 0 on an idle loop, ~N ms after an N ms
 * block (Node records the whole interval, resolution included). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* 8 sub-buckets per power of two: values are exact below 16 us and within
 * 12.5 % above. Covers up to 2^40 us. */
#define CR_HIST_SUB     8
#define CR_HIST_BUCKETS (41 * CR_HIST_SUB)

struct cr_hist {
    uint64_t count;
    uint64_t sum;
    uint64_t max;
    uint64_t min;
    uint64_t buckets[CR_HIST_BUCKETS];
};

void cr_hist_reset(struct cr_hist *h);
void cr_hist_record(struct cr_hist *h, uint64_t v);
/* The value below which a fraction q (0..1) of the records lie: the upper
 * bound of the bucket holding it, never above max. 0 when empty. */
uint64_t cr_hist_quantile(const struct cr_hist *h, double q);

struct cr_loop_window {
    uint64_t p50_us, p90_us, p99_us, max_us, sum_us, samples;
    double elu; /* 0..1 over the window */
};

struct cr_loopmon {
    uv_loop_t *loop;
    uv_timer_t timer;
    uint64_t resolution_ms;
    uint64_t last_ns;
    struct cr_hist hist;
    uint64_t win_start_ns;
    uint64_t win_idle_ns;
    struct cr_loop_window last; /* the last finished window */
};

/* The loop must have been configured with UV_METRICS_IDLE_TIME before it
 * first ran. Returns 0 or a libuv error. */
int cr_loopmon_start(struct cr_loopmon *m, uv_loop_t *loop, uint64_t resolution_ms);
/* Ends the current window into m->last (and *ret if not NULL), starts a
 * new one: the histogram is reset each report, as Node users do. */
void cr_loopmon_roll(struct cr_loopmon *m, struct cr_loop_window *ret);
void cr_loopmon_stop(struct cr_loopmon *m, uv_close_cb cb);
