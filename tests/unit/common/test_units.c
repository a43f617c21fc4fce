/* The one size and duration grammar (common/units.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "units.h"

static void sizes(void **state)
{
    uint64_t v;
    static const struct {
        const char *in;
        uint64_t want;
    } ok[] = {
        {"0", 0},           {"4096", 4096},       {"64K", 64 << 10},
        {"64k", 64 << 10},  {"256M", 256u << 20}, {"2G", 2ull << 30},
        {"3T", 3ull << 40}, {"2KiB", 2048},       {"2KB", 2048},
        {"5B", 5},          {"1gib", 1ull << 30}, {"16777215T", 16777215ull << 40},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        v = 1;
        if (cr_units_parse_size(ok[i].in, 0, &v) != 0 || v != ok[i].want)
            fail_msg("'%s' → %llu", ok[i].in, (unsigned long long)v);
    }
    static const char *const bad[] = {"",    "M",    "-1",    " -1", " 1",    "1 ",
                                      "+1",  "1.5G", "0x10M", "1e3", "12Q",   "1MM",
                                      "1Mx", "1iB",  "K1",    "1P",  "1KiBB", NULL};
    for (size_t i = 0; bad[i]; i++) {
        v = 7;
        if (cr_units_parse_size(bad[i], 0, &v) != -EINVAL || v != 7)
            fail_msg("'%s' was not refused as -EINVAL", bad[i]);
    }
    assert_int_equal(cr_units_parse_size(NULL, 0, &v), -EINVAL);
    /* Overflow, in the digits or in the scaling, and the caller's bound. */
    assert_int_equal(cr_units_parse_size("18446744073709551616", 0, &v), -ERANGE);
    assert_int_equal(cr_units_parse_size("16777216T", 0, &v), -ERANGE);
    assert_int_equal(cr_units_parse_size("18446744073709551615", 0, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(cr_units_parse_size("1025", 1024, &v), -ERANGE);
    assert_int_equal(cr_units_parse_size("1K", 1024, &v), 0);
    assert_int_equal(cr_units_parse_size("2K", 1024, &v), -ERANGE);
}

static void durations(void **state)
{
    uint64_t v;
    static const struct {
        const char *in;
        uint64_t bare, want;
    } ok[] = {
        {"10", 1000, 10000}, {"10", 1, 10},      {"250ms", 1000, 250}, {"2s", 1, 2000},
        {"3m", 1, 180000},   {"2h", 1, 7200000}, {"5S", 1, 5000},      {"0", 1000, 0},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        v = 1;
        if (cr_units_parse_ms(ok[i].in, ok[i].bare, 0, &v) != 0 || v != ok[i].want)
            fail_msg("'%s' → %llu", ok[i].in, (unsigned long long)v);
    }
    static const char *const bad[] = {"",        "s",  "-1", " -1",  "1.5s", "0x10",
                                      "2 weeks", "2w", "1d", "1sec", "ms1",  NULL};
    for (size_t i = 0; bad[i]; i++)
        if (cr_units_parse_ms(bad[i], 1000, 0, &v) != -EINVAL)
            fail_msg("'%s' was not refused as -EINVAL", bad[i]);
    assert_int_equal(cr_units_parse_ms("18446744073709551", 1000, 0, &v), 0);
    assert_int_equal(cr_units_parse_ms("18446744073709552", 1000, 0, &v), -ERANGE);
    assert_int_equal(cr_units_parse_ms("5124095576030432h", 1, 0, &v), -ERANGE);
    assert_int_equal(cr_units_parse_ms("2s", 1, 1999, &v), -ERANGE);
}

static void numbers(void **state)
{
    uint64_t v;
    assert_int_equal(cr_units_parse_uint("42", 0, 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(cr_units_parse_uint("420", 0, 100, &v), -ERANGE);
    assert_int_equal(cr_units_parse_uint("0", 1, 100, &v), -ERANGE);
    assert_int_equal(cr_units_parse_uint("4x", 0, 0, &v), -EINVAL);
    assert_int_equal(cr_units_parse_uint(" -1", 0, 0, &v), -EINVAL);
    assert_int_equal(cr_units_parse_uint("-0", 0, 0, &v), -EINVAL);
    assert_int_equal(cr_units_parse_uint("1K", 0, 0, &v), -EINVAL);
}

static void messages(void **state)
{
    char buf[160];
    assert_string_equal(
        cr_units_error(buf, sizeof(buf), "max-body", "12X", CR_UNITS_SIZE, -EINVAL, 0, 1 << 30),
        "--max-body: '12X' is not a size (a whole number with K, M, G or T: 64M)");
    assert_string_equal(
        cr_units_error(buf, sizeof(buf), "stop-timeout", "soon", CR_UNITS_DURATION, -EINVAL, 0, 0),
        "--stop-timeout: 'soon' is not a duration (a whole number with ms, s, "
        "m or h: 500ms)");
    assert_string_equal(
        cr_units_error(buf, sizeof(buf), "workers", "x", CR_UNITS_NUMBER, -EINVAL, 0, 9),
        "--workers: 'x' is not a whole number");
    assert_string_equal(
        cr_units_error(buf, sizeof(buf), "crash-budget", "1000", CR_UNITS_NUMBER, -ERANGE, 1, 64),
        "--crash-budget: '1000' is out of range (1 to 64)");
    assert_string_equal(cr_units_error(buf, sizeof(buf), "memory-max", "2048T", CR_UNITS_SIZE,
                                       -ERANGE, 4 << 20, 1ull << 50),
                        "--memory-max: '2048T' is out of range (4M to 1024T)");
    assert_string_equal(cr_units_range(buf, sizeof(buf), CR_UNITS_DURATION, 10, 720ull * 3600000),
                        "10ms to 720h");
    /* What format writes, parse reads back. */
    static const uint64_t sizes[] = {0, 1, 1023, 1024, 1536, 3ull << 30, (1ull << 40) + 1024};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t v;
        cr_units_format_size(buf, sizeof(buf), sizes[i]);
        assert_int_equal(cr_units_parse_size(buf, 0, &v), 0);
        assert_true(v == sizes[i]);
    }
    assert_string_equal(cr_units_format_size(buf, sizeof(buf), 1536), "1536");
    assert_string_equal(cr_units_format_size(buf, sizeof(buf), 64u << 20), "64M");
    static const uint64_t ms[] = {0, 1, 999, 1000, 90000, 3600000, 3601000};
    for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++) {
        uint64_t v;
        cr_units_format_ms(buf, sizeof(buf), ms[i]);
        assert_int_equal(cr_units_parse_ms(buf, 1000, 0, &v), 0);
        assert_true(v == ms[i]);
    }
    assert_string_equal(cr_units_format_ms(buf, sizeof(buf), 90000), "90s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sizes),
        cmocka_unit_test(durations),
        cmocka_unit_test(numbers),
        cmocka_unit_test(messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
