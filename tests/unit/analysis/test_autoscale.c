/* The worker count's decision (model/autoscale.c), fed recorded signal
 * sequences: every rule, and no flapping at a boundary. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "autoscale.h"

static const struct cr_scale_limits L = {
    .min = 1, .max = 4, .budget_max = 0, .up_wait_ms = 50, .cooldown_ms = 5000, .settle_ms = 500};

/* A sample: serving, queue length and wait, busy, CPU each, idle cores. */
static struct cr_scale_sample at(uint64_t t, unsigned serving, unsigned q, uint64_t waited,
                                 double busy, double cpu, double idle)
{
    return (struct cr_scale_sample){.now_ms = t, .serving = serving, .queue_len = q,
                                    .queue_waited_ms = waited, .busy = busy, .cpu_each = cpu,
                                    .idle_cores = idle, .demand_each = -1, .cpu_pressure = -1};
}

/* Feeds a sequence, applying every change at once (the new workers serve
 * at the next tick); returns the last decision. */
static struct cr_scale_decision run(const struct cr_scale_limits *l, struct cr_scale_state *st,
                                    struct cr_scale_sample *seq, size_t n, unsigned *changes)
{
    struct cr_scale_decision d = {0};
    unsigned serving = seq[0].serving;
    for (size_t i = 0; i < n; i++) {
        seq[i].serving = serving;
        cr_autoscale_decide(l, &seq[i], st, &d);
        if (d.to != d.from) {
            serving = d.to;
            if (changes)
                (*changes)++;
        }
    }
    return d;
}

static void test_blocked_without_cpu_goes_past_cores(void **state)
{
    (void)state;
    /* /sleepsync: loops 100 % busy, no CPU used, the cores idle. */
    struct cr_scale_state st = {0};
    struct cr_scale_decision d;
    struct cr_scale_sample s = at(1000, 1, 8, 120, 1.0, 0.02, 1.9);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_UP);
    assert_int_equal(d.to, 2);
    assert_non_null(strstr(d.text, "scale 1\u21922: 8 connections waited up to 120 ms, "
                                   "workers 100 % busy, 0.0 cores used each, 1.9 cores idle"));
    assert_non_null(strstr(d.text, "without the CPU"));
    /* Settling: nothing for 500 ms, nor while one starts. */
    s = at(1200, 2, 8, 320, 1.0, 0.02, 1.9);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_SETTLING);
    s = at(1600, 1, 8, 700, 1.0, 0.02, 1.9);
    s.starting = 1;
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_SETTLING);
    assert_int_equal(d.to, d.from);
    /* Then on, one a step, past the two cores, up to MAX. */
    struct cr_scale_sample seq[12];
    for (int i = 0; i < 12; i++)
        seq[i] = at(2000 + 600 * (uint64_t)i, 2, 8, 200, 1.0, 0.02, 1.9);
    unsigned changes = 0;
    d = run(&L, &st, seq, 12, &changes);
    assert_int_equal(changes, 2);
    assert_int_equal(d.why, CR_SCALE_AT_MAX);
    assert_int_equal(d.to, 4);
}

static void test_cpu_bound_stops_at_the_cores(void **state)
{
    (void)state;
    /* /heavy on 2 cores: one worker uses one core, one core idle: up;
     * two use both: saturated, held for good. */
    struct cr_scale_state st = {0};
    struct cr_scale_decision d;
    struct cr_scale_sample s = at(1000, 1, 6, 400, 1.0, 0.98, 1.0);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_UP);
    struct cr_scale_sample seq[20];
    for (int i = 0; i < 20; i++)
        seq[i] = at(2000 + 500 * (uint64_t)i, 2, 6, 400, 1.0, 0.97, 0.05);
    unsigned changes = 0;
    d = run(&L, &st, seq, 20, &changes);
    assert_int_equal(changes, 0);
    assert_int_equal(d.why, CR_SCALE_SATURATED);
    assert_int_equal(d.to, 2);
    assert_non_null(strstr(d.text, "the CPU is saturated"));
}

static void test_starved_cpu_bound_is_still_cpu_bound(void **state)
{
    (void)state;
    /* Three /heavy workers sharing what other tenants leave of two cores:
     * each uses a third of a core, yet waits for a CPU the rest of the
     * time: saturated, held. */
    struct cr_scale_state st = {0};
    struct cr_scale_decision d;
    struct cr_scale_sample s = at(1000, 3, 6, 400, 1.0, 0.33, 0.0);
    s.demand_each = 0.98;
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_SATURATED);
    /* A loop blocked without the CPU wants none, even on a busy host. */
    s = at(2000, 3, 6, 400, 1.0, 0.01, 0.0);
    s.demand_each = 0.02;
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_UP);
}

static void test_cpu_bound_gets_the_cores_on_a_busy_host(void **state)
{
    (void)state;
    /* 2 cores, other tenants keep them busy: one /hashsync worker uses 0.7
     * of a core and waits for the rest, no core idle. Below the cores it
     * still gets a second worker (the kernel gives it its share); at the
     * cores it is held. */
    struct cr_scale_limits l = L;
    l.cores = 2;
    struct cr_scale_state st = {0};
    struct cr_scale_decision d;
    struct cr_scale_sample s = at(1000, 1, 27, 377, 1.0, 0.7, 0.0);
    s.demand_each = 0.9;
    cr_autoscale_decide(&l, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_UP);
    assert_int_equal(d.to, 2);
    assert_non_null(strstr(d.text, "0.7 cores used each (0.9 wanted), 0.0 cores idle"));
    assert_null(strstr(d.text, "without the CPU"));
    s = at(2000, 2, 11, 1300, 1.0, 0.6, 0.0);
    s.demand_each = 0.95;
    cr_autoscale_decide(&l, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_SATURATED);
    assert_int_equal(d.to, 2);
    /* Held for good while it lasts: never up and down. */
    struct cr_scale_sample seq[40];
    for (int i = 0; i < 40; i++) {
        seq[i] = at(2500 + 500 * (uint64_t)i, 2, 10, 1800, 1.0, 0.6, (i % 3) * 0.2);
        seq[i].demand_each = 0.95;
    }
    unsigned changes = 0;
    d = run(&l, &st, seq, 40, &changes);
    assert_int_equal(changes, 0);
    /* Past the cores with a core idle (the loops leave one unused): one
     * more, as before. */
    memset(&st, 0, sizeof(st));
    s = at(30000, 2, 6, 400, 1.0, 0.6, 0.8);
    s.demand_each = 0.7;
    cr_autoscale_decide(&l, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_UP);
    assert_int_equal(d.to, 3);
    /* Cores unknown: no core idle holds, whatever N. */
    memset(&st, 0, sizeof(st));
    s = at(40000, 1, 27, 377, 1.0, 0.7, 0.0);
    s.demand_each = 0.9;
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_SATURATED);
    assert_int_equal(d.to, 1);
}

static void test_queue_empty_or_idle_loops_do_not_scale_up(void **state)
{
    (void)state;
    struct cr_scale_state st = {0};
    struct cr_scale_decision d;
    /* Busy loops, nobody waiting (keep-alive clients keep up). */
    struct cr_scale_sample s = at(1000, 2, 0, 0, 0.95, 0.9, 0.1);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.to, 2);
    /* A short wait (under up_wait_ms) is not a reason. */
    s = at(1500, 2, 3, 20, 0.95, 0.4, 1.0);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.to, 2);
    /* Waiting, but the loops are not busy (a slow accept elsewhere). */
    s = at(2000, 2, 3, 300, 0.5, 0.2, 1.0);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_HOLD);
    /* Unknown loop use: the queue alone speaks. */
    s = at(2500, 2, 3, 300, -1, 0.01, 1.5);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_UP);
}

static void test_budget_caps(void **state)
{
    (void)state;
    struct cr_scale_limits l = L;
    l.budget_max = 2;
    struct cr_scale_state st = {0};
    struct cr_scale_sample seq[10];
    for (int i = 0; i < 10; i++)
        seq[i] = at(1000 + 600 * (uint64_t)i, 1, 8, 300, 1.0, 0.01, 1.9);
    unsigned changes = 0;
    struct cr_scale_decision d = run(&l, &st, seq, 10, &changes);
    assert_int_equal(changes, 1);
    assert_int_equal(d.why, CR_SCALE_AT_BUDGET);
    assert_int_equal(d.to, 2);
    assert_non_null(strstr(d.text, "the memory budget fits 2 workers"));
}

static void test_down_after_the_cooldown(void **state)
{
    (void)state;
    struct cr_scale_state st = {0};
    struct cr_scale_decision d;
    /* A burst took it to 4, then idle: nothing for the cool-down, then
     * straight to MIN, in one step. */
    st.changed_at = 1000;
    struct cr_scale_sample s;
    for (uint64_t t = 2000; t < 6900; t += 500) {
        s = at(t, 4, 0, 0, 0.02, 0.01, 1.9);
        cr_autoscale_decide(&L, &s, &st, &d);
        assert_int_equal(d.to, 4);
    }
    s = at(7000, 4, 0, 0, 0.02, 0.01, 1.9);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_DOWN);
    assert_int_equal(d.to, 1);
    assert_non_null(strstr(d.text, "scale 4\u21921: no connection waiting, workers 2 % busy"));
    /* Partly used: down to what the load needs at 60 %. */
    memset(&st, 0, sizeof(st));
    for (uint64_t t = 0; t <= 5000; t += 500) {
        s = at(10000 + t, 4, 0, 0, 0.25, 0.2, 1.0);
        cr_autoscale_decide(&L, &s, &st, &d);
    }
    assert_int_equal(d.why, CR_SCALE_DOWN);
    assert_int_equal(d.to, 2); /* 4 x 0.25 / 0.6 = 1.67 -> 2 */
    /* A wait in between restarts the cool-down. */
    memset(&st, 0, sizeof(st));
    s = at(20000, 3, 0, 0, 0.1, 0.1, 1.0);
    cr_autoscale_decide(&L, &s, &st, &d);
    s = at(23000, 3, 2, 10, 0.1, 0.1, 1.0); /* a blip: not low */
    cr_autoscale_decide(&L, &s, &st, &d);
    s = at(25500, 3, 0, 0, 0.1, 0.1, 1.0);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.to, 3);
    s = at(30500, 3, 0, 0, 0.1, 0.1, 1.0);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_DOWN);
    /* Never below MIN; without loop figures the CPU stands in. */
    struct cr_scale_limits l = L;
    l.min = 2;
    memset(&st, 0, sizeof(st));
    for (uint64_t t = 0; t <= 5000; t += 500) {
        s = at(40000 + t, 4, 0, 0, -1, 0.01, 1.9);
        cr_autoscale_decide(&l, &s, &st, &d);
    }
    assert_int_equal(d.why, CR_SCALE_DOWN);
    assert_int_equal(d.to, 2);
}

static void test_no_flapping_at_a_boundary(void **state)
{
    (void)state;
    /* A steady load between the thresholds, with the queue now and then
     * briefly non-empty: N holds for a minute. */
    struct cr_scale_state st = {0};
    struct cr_scale_sample seq[240];
    for (int i = 0; i < 240; i++)
        seq[i] = at(1000 + 250 * (uint64_t)i, 2, i % 7 == 0 ? 1 : 0, i % 7 == 0 ? 30 : 0,
                    0.55 + (i % 5) * 0.04, 0.5, 0.9);
    unsigned changes = 0;
    struct cr_scale_decision d = run(&L, &st, seq, 240, &changes);
    assert_int_equal(changes, 0);
    assert_int_equal(d.to, 2);
    /* Saturated CPU-bound load with the queue always waiting: held at the
     * cores, never up and down. */
    memset(&st, 0, sizeof(st));
    for (int i = 0; i < 240; i++)
        seq[i] = at(1000 + 250 * (uint64_t)i, 2, 5, 500, 1.0, 0.95, (i % 3) * 0.2);
    changes = 0;
    d = run(&L, &st, seq, 240, &changes);
    assert_int_equal(changes, 0);
}

static void test_bounds_changed(void **state)
{
    (void)state;
    struct cr_scale_state st = {0};
    struct cr_scale_decision d;
    struct cr_scale_limits l = L;
    l.min = 3;
    struct cr_scale_sample s = at(1000, 1, 0, 0, 0.1, 0.1, 1.0);
    cr_autoscale_decide(&l, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_TO_MIN);
    assert_int_equal(d.to, 3);
    l = L;
    l.max = 2;
    s = at(3000, 4, 0, 0, 0.9, 0.1, 1.0);
    cr_autoscale_decide(&l, &s, &st, &d);
    assert_int_equal(d.why, CR_SCALE_TO_MAX);
    assert_int_equal(d.to, 2);
    /* A manual scale inside the bounds is where the next step starts. */
    memset(&st, 0, sizeof(st));
    s = at(5000, 3, 8, 300, 1.0, 0.0, 1.8);
    cr_autoscale_decide(&L, &s, &st, &d);
    assert_int_equal(d.from, 3);
    assert_int_equal(d.to, 4);
    assert_string_equal(cr_scale_why_to_string(CR_SCALE_SATURATED), "cpu-saturated");
    assert_null(cr_scale_why_to_string(_CR_SCALE_WHY_MAX));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_without_cpu_goes_past_cores),
        cmocka_unit_test(test_cpu_bound_stops_at_the_cores),
        cmocka_unit_test(test_starved_cpu_bound_is_still_cpu_bound),
        cmocka_unit_test(test_cpu_bound_gets_the_cores_on_a_busy_host),
        cmocka_unit_test(test_queue_empty_or_idle_loops_do_not_scale_up),
        cmocka_unit_test(test_budget_caps),
        cmocka_unit_test(test_down_after_the_cooldown),
        cmocka_unit_test(test_no_flapping_at_a_boundary),
        cmocka_unit_test(test_bounds_changed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
