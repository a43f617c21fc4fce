/* Decimal digits of whole numbers (common/decimal.c), checked against
 * snprintf across the powers of ten and the ends of the range, and the
 * bounds below which they stand in for "%.15g" (cJSON) and "%.17g". */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "decimal.h"

static void check(uint64_t v)
{
    char want[32], got[CR_DECIMAL_U64_SIZE + 8];
    memset(got, 'x', sizeof(got));
    snprintf(want, sizeof(want), "%" PRIu64, v);
    assert_int_equal(cr_decimal_u64(got, v), strlen(want));
    assert_string_equal(got, want);
}

static void digits(void **state)
{
    (void)state;
    check(0);
    check(UINT64_MAX); /* 20 digits: the whole buffer */
    check(UINT64_MAX - 1);
    for (uint64_t p = 1; p && p <= UINT64_MAX / 10; p *= 10) {
        check(p - 1);
        check(p);
        check(p + 1);
        check(p * 10 - 1);
    }
    check(9223372036854771712u); /* cgroup v1's "no limit" */
}

/* Every whole double below bound prints under fmt as the digits of its
 * value (above 2^53 a double holds only some whole numbers: those). */
static void g_format(const char *fmt, uint64_t bound)
{
    char d[CR_DECIMAL_U64_SIZE], g[64];
    for (uint64_t v = 0; v < bound; v = v * 10 + 9) {
        for (uint64_t u = v > 1000 ? v - 1000 : 0; u <= v; u += v > 1000 ? 250 : 1) {
            double x = (double)u;
            if (x >= (double)bound)
                break; /* rounded up to the bound */
            cr_decimal_u64(d, (uint64_t)x);
            snprintf(g, sizeof(g), fmt, x);
            assert_string_equal(g, d);
        }
    }
    cr_decimal_u64(d, bound);
    snprintf(g, sizeof(g), fmt, (double)bound);
    assert_string_not_equal(g, d); /* the bound is tight */
}

static void g_bounds(void **state)
{
    (void)state;
    g_format("%1.15g", CR_DECIMAL_G15_BELOW);
    g_format("%.17g", CR_DECIMAL_G17_BELOW);
}

/* What status relies on: cJSON prints these numbers as the digits. */
static void cjson_prints_digits(void **state)
{
    (void)state;
    const uint64_t vs[] = {0, 1, 42, 4294967296u, CR_DECIMAL_G15_BELOW - 1};
    for (size_t i = 0; i < sizeof(vs) / sizeof(vs[0]); i++) {
        char d[CR_DECIMAL_U64_SIZE];
        cr_decimal_u64(d, vs[i]);
        cJSON *n = cJSON_CreateNumber((double)vs[i]);
        char *t = cJSON_PrintUnformatted(n);
        assert_string_equal(t, d);
        cJSON_free(t);
        cJSON_Delete(n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(digits),
        cmocka_unit_test(g_bounds),
        cmocka_unit_test(cjson_prints_digits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
