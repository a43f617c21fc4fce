/* The event list: subscribers hear every event, in the order they
 * subscribed, and the list is bounded. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "events.h"

struct heard {
    int order[16];
    int n;
    enum cr_event_type last;
    uint64_t time_ms;
};

static struct heard heard;

static void sub_a(void *ud, const struct cr_event *ev)
{
    heard.order[heard.n++] = 1;
    heard.last = ev->type;
    heard.time_ms = ev->time_ms;
    assert_ptr_equal(ud, &heard);
}

static void sub_b(void *ud, const struct cr_event *ev)
{
    heard.order[heard.n++] = 2;
    assert_null(ud);
}

static void test_order(void **state)
{
    struct cr_events bus = {0};
    heard = (struct heard){0};
    assert_int_equal(cr_events_subscribe(&bus, sub_a, &heard), 0);
    assert_int_equal(cr_events_subscribe(&bus, sub_b, NULL), 0);
    struct cr_event ev = {.type = CR_EV_TABLE};
    cr_events_publish(&bus, &ev);
    ev = (struct cr_event){.type = CR_EV_FINISHED, .time_ms = 42};
    cr_events_publish(&bus, &ev);
    assert_int_equal(heard.n, 4);
    assert_int_equal(heard.order[0], 1);
    assert_int_equal(heard.order[1], 2);
    assert_int_equal(heard.order[2], 1);
    assert_int_equal(heard.order[3], 2);
    assert_int_equal(heard.last, CR_EV_FINISHED);
    assert_int_equal(heard.time_ms, 42); /* a set time is kept */
}

/* The list reads no clock (it is pure): an unstamped event reaches every
 * subscriber as it was published; the core stamps before it publishes. */
static void test_not_stamped(void **state)
{
    struct cr_events bus = {0};
    heard = (struct heard){.time_ms = 7};
    cr_events_subscribe(&bus, sub_a, &heard);
    struct cr_event ev = {.type = CR_EV_TABLE};
    cr_events_publish(&bus, &ev);
    assert_int_equal(heard.n, 1);
    assert_int_equal(heard.time_ms, 0);
}

static void test_bounded(void **state)
{
    struct cr_events bus = {0};
    for (int i = 0; i < CR_EVENTS_MAX_SUBSCRIBERS; i++)
        assert_int_equal(cr_events_subscribe(&bus, sub_b, NULL), 0);
    assert_int_equal(cr_events_subscribe(&bus, sub_b, NULL), -ENOSPC);
    assert_int_equal(cr_events_subscribe(&(struct cr_events){0}, NULL, NULL), -EINVAL);
}

static void test_names(void **state)
{
    for (int t = 0; t < _CR_EV_MAX; t++)
        assert_string_not_equal(cr_event_type_to_string((enum cr_event_type)t), "?");
    assert_string_equal(cr_event_type_to_string(_CR_EV_MAX), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_not_stamped),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
