/* The Prometheus text builder (common/prom.c). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prom.h"

static void text(void **state)
{
    struct cr_prom p = CR_PROM_INIT;
    char *t;
    size_t len;
    cr_prom_gauge(&p, "a_bytes", "An a.", 1536);
    cr_prom_counter(&p, "b_total", "A b.", 0.25);
    cr_prom_family(&p, "c", "gauge", "A c.");
    cr_prom_sample(&p, "c", "worker=\"1\"", 3);
    cr_prom_sample(&p, "c", "", 4);
    cr_prom_printf(&p, "c{worker=\"%d\"} %.6f\n", 2, 0.5);
    assert_int_equal(cr_prom_take(&p, &t, &len), 0);
    const char want[] = "# HELP a_bytes An a.\n# TYPE a_bytes gauge\na_bytes 1536\n"
                        "# HELP b_total A b.\n# TYPE b_total counter\nb_total 0.25\n"
                        "# HELP c A c.\n# TYPE c gauge\nc{worker=\"1\"} 3\nc 4\n"
                        "c{worker=\"2\"} 0.500000\n";
    assert_string_equal(t, want);
    assert_int_equal(len, strlen(want));
    free(t);
    /* take resets: the builder can be used again. */
    assert_null(p.buf);
    assert_int_equal(cr_prom_take(&p, &t, NULL), 0);
    assert_string_equal(t, "");
    free(t);
}

static void grows_and_caps(void **state)
{
    struct cr_prom p = CR_PROM_INIT;
    char *t;
    size_t len;
    for (int i = 0; i < 10000; i++)
        cr_prom_sample(&p, "x_total", "worker=\"12345\"", i);
    assert_false(p.failed);
    assert_int_equal(cr_prom_take(&p, &t, &len), 0);
    assert_non_null(strstr(t, "x_total{worker=\"12345\"} 9999\n"));
    assert_true(len > 10000 * 20);
    free(t);

    /* Past the hard cap the builder fails and stays failed. */
    p = (struct cr_prom){.max = 64u << 10};
    char line[1000];
    memset(line, 'a', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\0';
    for (unsigned i = 0; i < 100 && !p.failed; i++)
        cr_prom_printf(&p, "%s", line);
    assert_true(p.failed);
    /* Everything that fitted was kept, nothing past the cap. */
    assert_true(p.len < 64u << 10);
    assert_true(p.len > (64u << 10) - sizeof(line));
    assert_true(p.cap <= 64u << 10);
    cr_prom_printf(&p, "more\n");
    t = NULL;
    assert_int_equal(cr_prom_take(&p, &t, &len), -ENOMEM);
    assert_null(t);
    assert_null(p.buf);
    /* The default cap is CR_PROM_MAX. */
    p = (struct cr_prom)CR_PROM_INIT;
    cr_prom_printf(&p, "%*s", (int)CR_PROM_MAX, "");
    assert_true(p.failed);
    assert_int_equal(cr_prom_take(&p, &t, &len), -ENOMEM);
}

/* One sample through the builder, against printf's rendering of it. */
static void same_as_printf(double v)
{
    struct cr_prom p = CR_PROM_INIT;
    char want[128], *t;
    cr_prom_sample(&p, "x", "worker=\"7\"", v);
    cr_prom_sample(&p, "y", NULL, v);
    assert_int_equal(cr_prom_take(&p, &t, NULL), 0);
    snprintf(want, sizeof(want), "x{worker=\"7\"} %.17g\ny %.17g\n", v, v);
    assert_string_equal(t, want);
    free(t);
}

/* Whole numbers skip printf; every value must still read as "%.17g". */
static void samples_as_g17(void **state)
{
    (void)state;
    const double odd[] = {0.0, -0.0, 0.25, -1, -12345, 1e-300, 1e300, NAN, INFINITY,
                          -INFINITY, 4503599627370495.5, 1e17, 1e17 - 16, 1e17 + 16,
                          18446744073709551616.0, 9223372036854775808.0};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
        same_as_printf(odd[i]);
    for (double p10 = 1; p10 < 1e19; p10 *= 10)
        for (int d = -2; d <= 2; d++)
            same_as_printf(p10 + d);
    uint64_t x = 88172645463325252u; /* xorshift: whole numbers of every size */
    for (int i = 0; i < 2000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        same_as_printf((double)(x >> (i % 64)));
    }
}

static void us_as_printf(uint64_t us)
{
    struct cr_prom p = CR_PROM_INIT;
    char want[128], *t;
    cr_prom_sample_us(&p, "d_seconds", "worker=\"1\"", us);
    cr_prom_sample_us(&p, "e_seconds", "", us);
    assert_int_equal(cr_prom_take(&p, &t, NULL), 0);
    double s = (double)us / 1e6;
    snprintf(want, sizeof(want), "d_seconds{worker=\"1\"} %.6f\ne_seconds %.6f\n", s, s);
    assert_string_equal(t, want);
    free(t);
}

/* Microseconds as seconds: digit for digit what "%.6f" of us / 1e6 prints. */
static void micros_as_f6(void **state)
{
    (void)state;
    const uint64_t b = CR_PROM_US_EXACT_BELOW;
    const uint64_t fixed[] = {0, 1, 9, 10, 999999, 1000000, 1000001, 1500, 123456789,
                              b - 1, b - 999999, b, b + 1, UINT64_MAX};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        us_as_printf(fixed[i]);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        us_as_printf((x >> (i % 64)) % b);
    }
}

/* printf lines write in one pass while they fit and are redone once the
 * buffer has grown: a line one short of, just, or one past filling what is
 * left is kept whole. */
static void printf_across_growth(void **state)
{
    (void)state;
    static char fill[8192];
    memset(fill, 'f', sizeof(fill));
    for (int delta = -2; delta <= 2; delta++) {
        struct cr_prom p = CR_PROM_INIT;
        char *t;
        size_t len;
        cr_prom_printf(&p, "a");
        int n = (int)(p.cap - p.len) + delta;
        cr_prom_printf(&p, "%.*s", n, fill);
        cr_prom_printf(&p, "z");
        assert_int_equal(cr_prom_take(&p, &t, &len), 0);
        assert_int_equal(len, (size_t)n + 2);
        assert_int_equal(t[0], 'a');
        assert_memory_equal(t + 1, fill, (size_t)n);
        assert_string_equal(t + 1 + n, "z");
        free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(text),
        cmocka_unit_test(grows_and_caps),
        cmocka_unit_test(samples_as_g17),
        cmocka_unit_test(micros_as_f6),
        cmocka_unit_test(printf_across_growth),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
