/* Unit tests of the memory budget: the sum, the margin, what would fit. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "budget.h"

#define MIB (1024ull * 1024)
#define GIB (1024 * MIB)

static void test_args(void **state)
{
    (void)state;
    struct cr_budget_in in = {0};
    struct cr_budget b;
    char buf[64];
    assert_int_equal(cr_budget_check(NULL, &b), -EINVAL);
    assert_int_equal(cr_budget_check(&in, NULL), -EINVAL);
    assert_int_equal(cr_budget_format(&in, &b, NULL, 10), -EINVAL);
    assert_int_equal(cr_budget_format(&in, &b, buf, 0), -EINVAL);
}

static void test_no_limit(void **state)
{
    (void)state;
    struct cr_budget_in in = {.per_worker = 256 * MIB, .workers = 64, .replacements = 1};
    struct cr_budget b;
    char buf[256];
    assert_int_equal(cr_budget_check(&in, &b), 0);
    assert_false(b.limited);
    assert_true(b.fits);
    assert_true(cr_budget_format(&in, &b, buf, sizeof buf) > 0);
    assert_string_equal(buf, "memory budget: no enclosing limit");
}

static void test_over(void **state)
{
    (void)state;
    /* 4 x 256M + a reload's replacement + 10M corrald + 5 % of 1G margin
     * (51.2M) = 1341.2M > 1G. */
    struct cr_budget_in in = {.per_worker = 256 * MIB, .workers = 4, .replacements = 1,
                              .self = 10 * MIB, .limit = GIB, .group = "/kubepods/pod1/c1",
                              .oom_group = true};
    struct cr_budget b;
    char buf[512];
    assert_int_equal(cr_budget_check(&in, &b), 0);
    assert_true(b.limited);
    assert_false(b.fits);
    assert_int_equal(b.margin, GIB / 20);
    assert_int_equal(b.need, 5 * 256 * MIB + 10 * MIB + GIB / 20);
    uint64_t room = GIB - 10 * MIB - GIB / 20;
    assert_int_equal(b.fit_workers, room / (256 * MIB) - 1); /* 3 fit, one is the replacement */
    assert_int_equal(b.fit_per_worker, room / 5);
    int n = cr_budget_format(&in, &b, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    assert_non_null(strstr(buf, "(4 worker(s) + 0 spare(s) + 1 reload replacement) x 256 MiB + "
                                "corrald 10 MiB + margin 51 MiB = 1341 MiB is over the 1024 MiB "
                                "limit of /kubepods/pod1/c1"));
    assert_non_null(strstr(buf, "memory.oom.group=1"));
    assert_non_null(strstr(buf, "; it fits with --workers 2, or --memory-max 192M"));
    /* Truncated, still terminated. */
    char small[40];
    assert_int_equal(cr_budget_format(&in, &b, small, sizeof small), (int)sizeof small - 1);
    assert_int_equal(strlen(small), sizeof small - 1);
}

static void test_fits_and_spares(void **state)
{
    (void)state;
    struct cr_budget_in in = {.per_worker = 256 * MIB, .workers = 2, .spares = 1,
                              .replacements = 1, .self = 8 * MIB, .limit = 2 * GIB};
    struct cr_budget b;
    char buf[512];
    cr_budget_check(&in, &b);
    assert_true(b.fits);
    assert_int_equal(b.need, 4 * 256 * MIB + 8 * MIB + 2 * GIB / 20);
    cr_budget_format(&in, &b, buf, sizeof buf);
    assert_non_null(strstr(buf, "(2 worker(s) + 1 spare(s) + 1 reload replacement) x 256 MiB + "
                                "corrald 8 MiB + margin 102 MiB = 1134 MiB fits under the 2048 MiB "
                                "limit of the enclosing group"));
    assert_null(strstr(buf, "it fits with"));
    assert_null(strstr(buf, "oom.group"));
}

static void test_small_limit_margin(void **state)
{
    (void)state;
    /* Under 320M the margin is its floor, 16M. */
    struct cr_budget_in in = {.per_worker = 64 * MIB, .workers = 1, .replacements = 1,
                              .self = 4 * MIB, .limit = 200 * MIB};
    struct cr_budget b;
    cr_budget_check(&in, &b);
    assert_int_equal(b.margin, CR_BUDGET_MIN_MARGIN);
    assert_true(b.fits); /* 2 x 64 + 4 + 16 = 148 */
    in.limit = 148 * MIB; /* exactly: fits */
    cr_budget_check(&in, &b);
    assert_true(b.fits);
    in.limit = 148 * MIB - 1;
    cr_budget_check(&in, &b);
    assert_false(b.fits);
    in.limit = 200 * MIB;
    in.workers = 3;      /* 4 x 64 + 20 = 276 */
    cr_budget_check(&in, &b);
    assert_false(b.fits);
    assert_int_equal(b.fit_workers, 1); /* (200 - 20) / 64 = 2, one is the replacement */
    /* Below corrald and the margin nothing fits, and the line says so. */
    in.limit = 18 * MIB;
    char buf[512];
    cr_budget_check(&in, &b);
    assert_false(b.fits);
    assert_int_equal(b.fit_workers, 0);
    assert_int_equal(b.fit_per_worker, 0);
    cr_budget_format(&in, &b, buf, sizeof buf);
    assert_non_null(strstr(buf, "no worker fits: corrald and the margin take it all"));
}

static void test_no_per_worker_limit(void **state)
{
    (void)state;
    struct cr_budget_in in = {.workers = 4, .replacements = 1, .self = 10 * MIB, .limit = GIB,
                              .group = "/c"};
    struct cr_budget b;
    char buf[512];
    cr_budget_check(&in, &b);
    assert_true(b.fits); /* the kernel kills the biggest, corrald replaces it */
    cr_budget_format(&in, &b, buf, sizeof buf);
    assert_non_null(strstr(buf, "no per-worker limit (--memory-max): any worker can grow to the "
                                "1024 MiB limit of /c"));
    in.oom_group = true; /* the whole container goes */
    cr_budget_check(&in, &b);
    assert_false(b.fits);
    cr_budget_format(&in, &b, buf, sizeof buf);
    assert_non_null(strstr(buf, "--memory-max 192M fits 4 worker(s) and a reload's replacement"));
}

/* Without per-worker groups corrald enforces --memory-max itself: each
 * worker counts its limit and the slack it may pass it by. */
static void test_enforced_by_corrald(void **state)
{
    (void)state;
    struct cr_budget_in in = {.workers = 3, .replacements = 1, .self = 10 * MIB, .limit = 512 * MIB,
                              .group = "/pod", .oom_group = true, .by_corrald = true,
                              .per_worker = 96 * MIB + CR_BUDGET_ENFORCED_SLACK};
    struct cr_budget b;
    char buf[512];
    cr_budget_check(&in, &b); /* 4 x 98 + 10 + 25.6 = 427.6 MiB */
    assert_true(b.fits);
    in.workers = 4; /* 5 x 98 + 35.6 = 525.6 MiB: over, and under oom.group it matters */
    cr_budget_check(&in, &b);
    assert_false(b.fits);
    assert_int_equal(b.fit_workers, 3);
    cr_budget_format(&in, &b, buf, sizeof buf);
    assert_non_null(strstr(buf, "x 98 MiB (--memory-max and the 2 MiB a worker may pass it by "
                                "before corrald's kill)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_no_limit),
        cmocka_unit_test(test_over),
        cmocka_unit_test(test_fits_and_spares),
        cmocka_unit_test(test_small_limit_margin),
        cmocka_unit_test(test_no_per_worker_limit),
        cmocka_unit_test(test_enforced_by_corrald),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
