/* The bounded ring's indices (common/ring.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ring.h"

static void fills_then_wraps(void **state)
{
    struct cr_ring r = {0}; /* zero is an empty ring */
    int slots[4];
    assert_int_equal(r.len, 0);
    for (int v = 1; v <= 3; v++)
        slots[cr_ring_push(&r, CR_RING_CAP(slots))] = v;
    assert_int_equal(r.len, 3);
    assert_int_equal(slots[cr_ring_oldest(&r, 4, 0)], 1);
    assert_int_equal(slots[cr_ring_newest(&r, 4, 0)], 3);
    assert_int_equal(slots[cr_ring_newest(&r, 4, 2)], 1);
    /* Past the capacity the oldest goes. */
    for (int v = 4; v <= 10; v++)
        slots[cr_ring_push(&r, 4)] = v;
    assert_int_equal(r.len, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(slots[cr_ring_oldest(&r, 4, i)], 7 + (int)i);
        assert_int_equal(slots[cr_ring_newest(&r, 4, i)], 10 - (int)i);
    }
    cr_ring_clear(&r);
    assert_int_equal(r.len, 0);
    slots[cr_ring_push(&r, 4)] = 42;
    assert_int_equal(slots[cr_ring_oldest(&r, 4, 0)], 42);
    assert_int_equal(slots[cr_ring_newest(&r, 4, 0)], 42);
}

static void capacity_one(void **state)
{
    struct cr_ring r = {0};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(cr_ring_push(&r, 1), 0);
        assert_int_equal(r.len, 1);
        assert_int_equal(cr_ring_newest(&r, 1, 0), 0);
        assert_int_equal(cr_ring_oldest(&r, 1, 0), 0);
    }
}

/* Every slot is handed out once per lap, in order, at any capacity. */
static void laps(void **state)
{
    for (size_t cap = 1; cap <= 9; cap++) {
        struct cr_ring r = {0};
        for (size_t n = 0; n < 5 * cap; n++) {
            assert_int_equal(cr_ring_push(&r, cap), n % cap);
            assert_int_equal(cr_ring_newest(&r, cap, 0), n % cap);
            assert_int_equal(cr_ring_oldest(&r, cap, 0), n < cap ? 0 : (n + 1) % cap);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fills_then_wraps),
        cmocka_unit_test(capacity_one),
        cmocka_unit_test(laps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
