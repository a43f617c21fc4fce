/* The slots (model/slot.c): what outlives a process. A slot reopened after
 * it was vacated starts afresh but never repeats a generation; a held slot
 * cannot be opened twice; the lowest free id skips held slots; a death is
 * recorded with its OOM kill counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "slot.h"

/* Stand-ins for the core's workers: the slots only keep the pointers. */
static struct cr_worker *const A = (struct cr_worker *)0x10, *const B = (struct cr_worker *)0x20;

static void test_open_and_reopen(void **state)
{
    struct cr_slots s = {0};
    struct cr_slot *one = cr_slots_open(&s, 1);
    assert_non_null(one);
    assert_int_equal(one->id, 1);
    assert_int_equal(one->last_death, _CR_DEATH_MAX);
    assert_true(cr_slot_vacant(one));
    assert_int_equal(cr_slot_next_generation(one), 1);
    assert_int_equal(cr_slot_next_generation(one), 2);
    one->holder = A;
    one->restarts = 3;
    one->oom_kills = 1;
    assert_null(cr_slots_open(&s, 1)); /* held */
    assert_ptr_equal(cr_slots_get(&s, 1), one);
    /* Vacated and opened again: afresh, but its generations go on. */
    one->holder = NULL;
    one->replacement = B;
    assert_false(cr_slot_vacant(one));
    assert_null(cr_slots_open(&s, 1));
    one->replacement = NULL;
    struct cr_slot *again = cr_slots_open(&s, 1);
    assert_ptr_equal(again, one);
    assert_int_equal(again->restarts, 0);
    assert_int_equal(again->oom_kills, 0);
    assert_int_equal(cr_slot_next_generation(again), 3);
    /* Out of range. */
    assert_null(cr_slots_open(&s, 0));
    assert_null(cr_slots_open(&s, -1));
    assert_null(cr_slots_open(&s, CR_SLOT_MAX_ID + 1));
    assert_null(cr_slots_get(&s, 999));
    cr_slots_done(&s);
}

static void test_lowest_free(void **state)
{
    struct cr_slots s = {0};
    for (int id = 1; id <= 4; id++)
        cr_slots_open(&s, id)->holder = A;
    cr_slots_get(&s, 2)->holder = NULL; /* vacated: free again */
    int from = 1;
    assert_int_equal(cr_slots_lowest_free(&s, &from), 2);
    assert_int_equal(cr_slots_lowest_free(&s, &from), 5); /* past the held 3 and 4 */
    assert_int_equal(cr_slots_lowest_free(&s, &from), 6);
    from = 0;
    assert_int_equal(cr_slots_lowest_free(&s, &from), 2);
    cr_slots_done(&s);
    struct cr_slots none = {0};
    from = 1;
    assert_int_equal(cr_slots_lowest_free(&none, &from), 1);
}

static void test_record_death(void **state)
{
    struct cr_slots s = {0};
    struct cr_slot *slot = cr_slots_open(&s, 7);
    struct cr_postmortem pm = {.category = CR_DEATH_OOM_OWN_LIMIT};
    strcpy(pm.reason, "killed by the kernel OOM killer");
    cr_slot_record_death(slot, &pm);
    assert_int_equal(slot->oom_kills, 1);
    assert_int_equal(slot->last_death, CR_DEATH_OOM_OWN_LIMIT);
    assert_string_equal(slot->last_death_reason, "killed by the kernel OOM killer");
    pm.category = CR_DEATH_RECYCLED;
    strcpy(pm.reason, "recycled");
    cr_slot_record_death(slot, &pm);
    assert_int_equal(slot->oom_kills, 1); /* only OOM kills count */
    assert_int_equal(slot->last_death, CR_DEATH_RECYCLED);
    assert_true(cr_death_is_oom_kill(CR_DEATH_OOM_ANCESTOR_LIMIT));
    assert_true(cr_death_is_oom_kill(CR_DEATH_OOM_SYSTEM));
    assert_false(cr_death_is_oom_kill(CR_DEATH_HEAP_LIMIT));
    cr_slots_done(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_open_and_reopen),
        cmocka_unit_test(test_lowest_free),
        cmocka_unit_test(test_record_death),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
