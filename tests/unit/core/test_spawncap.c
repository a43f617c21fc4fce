/* The adaptive cap on workers starting at once (spawncap.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "spawncap.h"

static void test_starts_at_max(void **state)
{
    (void)state;
    unsigned calm = 0;
    assert_int_equal(cr_spawn_cap_adapt(0, 4, 1000, &calm), 4);
    assert_int_equal(cr_spawn_cap_adapt(9, 4, 2500, &calm), 4);
    assert_int_equal(cr_spawn_cap_adapt(0, 0, 100, &calm), 1); /* never below one */
}

static void test_long_turn_halves_to_one(void **state)
{
    (void)state;
    unsigned calm = 5;
    unsigned cap = cr_spawn_cap_adapt(8, 8, CR_SPAWN_LAG_HIGH_US + 1, &calm);
    assert_int_equal(cap, 4);
    assert_int_equal(calm, 0);
    cap = cr_spawn_cap_adapt(cap, 8, 50000, &calm);
    assert_int_equal(cap, 2);
    cap = cr_spawn_cap_adapt(cap, 8, 50000, &calm);
    assert_int_equal(cap, 1);
    cap = cr_spawn_cap_adapt(cap, 8, 50000, &calm);
    assert_int_equal(cap, 1);
    /* At the bound itself: no change. */
    assert_int_equal(cr_spawn_cap_adapt(4, 8, CR_SPAWN_LAG_HIGH_US, &calm), 4);
}

static void test_grows_after_calm_turns(void **state)
{
    (void)state;
    unsigned calm = 0, cap = 1;
    for (int i = 0; i < CR_SPAWN_CALM_TURNS - 1; i++)
        cap = cr_spawn_cap_adapt(cap, 4, 100, &calm);
    assert_int_equal(cap, 1);
    cap = cr_spawn_cap_adapt(cap, 4, 100, &calm);
    assert_int_equal(cap, 2);
    assert_int_equal(calm, 0);
    /* A middling turn breaks the run of calm ones without shrinking. */
    for (int i = 0; i < CR_SPAWN_CALM_TURNS - 1; i++)
        cap = cr_spawn_cap_adapt(cap, 4, 100, &calm);
    cap = cr_spawn_cap_adapt(cap, 4, CR_SPAWN_LAG_LOW_US, &calm);
    assert_int_equal(cap, 2);
    assert_int_equal(calm, 0);
    /* Up to the ceiling, not past it. */
    for (int i = 0; i < 10 * CR_SPAWN_CALM_TURNS; i++)
        cap = cr_spawn_cap_adapt(cap, 4, 100, &calm);
    assert_int_equal(cap, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_starts_at_max),
        cmocka_unit_test(test_long_turn_halves_to_one),
        cmocka_unit_test(test_grows_after_calm_turns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
