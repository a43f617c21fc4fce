/* The lifecycle table, cell by cell, and the restart arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lifecycle.h"

static void expect(enum cr_wstate s, enum cr_wevent e, enum cr_wstate next, enum cr_waction a)
{
    const struct cr_transition *t = cr_lifecycle_step(s, e);
    if (!t)
        fail_msg("%s × %s has no cell", cr_wstate_to_string(s), cr_wevent_to_string(e));
    assert_int_equal(t->next, next);
    if (t->action != a)
        fail_msg("%s × %s: action %s, want %s", cr_wstate_to_string(s), cr_wevent_to_string(e),
                 cr_waction_to_string(t->action), cr_waction_to_string(a));
}

static void empty(enum cr_wstate s, enum cr_wevent e)
{
    if (cr_lifecycle_step(s, e))
        fail_msg("%s × %s should be ignored", cr_wstate_to_string(s), cr_wevent_to_string(e));
}

static void test_starting(void **state)
{
    expect(CR_WS_STARTING, CR_WE_READY, CR_WS_READY, CR_WA_BECOME_READY);
    expect(CR_WS_STARTING, CR_WE_DEADLINE, CR_WS_STARTING, CR_WA_KILL_START_TIMEOUT);
    expect(CR_WS_STARTING, CR_WE_DRAIN, CR_WS_DRAINING, CR_WA_SEND_TERM);
    expect(CR_WS_STARTING, CR_WE_EXIT, CR_WS_EXITED, CR_WA_REAP);
    /* Heartbeats before READY=1 mean nothing yet. */
    empty(CR_WS_STARTING, CR_WE_WATCHDOG);
}

static void test_ready_and_blocked(void **state)
{
    expect(CR_WS_READY, CR_WE_WATCHDOG, CR_WS_READY, CR_WA_ARM_WATCHDOG);
    expect(CR_WS_READY, CR_WE_DEADLINE, CR_WS_BLOCKED, CR_WA_FLAG_BLOCKED);
    expect(CR_WS_READY, CR_WE_DRAIN, CR_WS_DRAINING, CR_WA_SEND_TERM);
    expect(CR_WS_READY, CR_WE_EXIT, CR_WS_EXITED, CR_WA_REAP);
    empty(CR_WS_READY, CR_WE_READY); /* a second READY=1 changes nothing */

    expect(CR_WS_BLOCKED, CR_WE_WATCHDOG, CR_WS_READY, CR_WA_UNBLOCK);
    expect(CR_WS_BLOCKED, CR_WE_DEADLINE, CR_WS_KILLING, CR_WA_KILL_HANG);
    expect(CR_WS_BLOCKED, CR_WE_DRAIN, CR_WS_DRAINING, CR_WA_SEND_TERM);
    expect(CR_WS_BLOCKED, CR_WE_EXIT, CR_WS_EXITED, CR_WA_REAP);
}

static void test_draining_killing(void **state)
{
    expect(CR_WS_DRAINING, CR_WE_DEADLINE, CR_WS_DRAINING, CR_WA_KILL_STOP_TIMEOUT);
    expect(CR_WS_DRAINING, CR_WE_EXIT, CR_WS_EXITED, CR_WA_REAP);
    empty(CR_WS_DRAINING, CR_WE_DRAIN);    /* draining twice sends nothing twice */
    empty(CR_WS_DRAINING, CR_WE_WATCHDOG); /* a draining worker may stay silent */
    empty(CR_WS_DRAINING, CR_WE_READY);

    expect(CR_WS_KILLING, CR_WE_DEADLINE, CR_WS_KILLING, CR_WA_KILL_HARD);
    expect(CR_WS_KILLING, CR_WE_EXIT, CR_WS_EXITED, CR_WA_REAP);
    empty(CR_WS_KILLING, CR_WE_WATCHDOG); /* too late to come back */
    empty(CR_WS_KILLING, CR_WE_DRAIN);
}

static void test_no_process_states(void **state)
{
    expect(CR_WS_BACKOFF, CR_WE_DEADLINE, CR_WS_STARTING, CR_WA_SPAWN);
    expect(CR_WS_BACKOFF, CR_WE_DRAIN, CR_WS_EXITED, CR_WA_RETIRE);
    expect(CR_WS_FAILED, CR_WE_DEADLINE, CR_WS_STARTING, CR_WA_SPAWN);
    expect(CR_WS_FAILED, CR_WE_DRAIN, CR_WS_EXITED, CR_WA_RETIRE);
    for (int e = 0; e < _CR_WE_MAX; e++)
        empty(CR_WS_EXITED, (enum cr_wevent)e);
    empty(CR_WS_BACKOFF, CR_WE_EXIT);
    empty(CR_WS_FAILED, CR_WE_READY);
    assert_false(cr_wstate_has_process(CR_WS_BACKOFF));
    assert_false(cr_wstate_has_process(CR_WS_FAILED));
    assert_false(cr_wstate_has_process(CR_WS_EXITED));
    assert_true(cr_wstate_has_process(CR_WS_KILLING));
    assert_null(cr_lifecycle_step(_CR_WS_MAX, CR_WE_READY));
    assert_null(cr_lifecycle_step(CR_WS_READY, _CR_WE_MAX));
}

static void test_names(void **state)
{
    for (int s = 0; s < _CR_WS_MAX; s++)
        assert_string_not_equal(cr_wstate_to_string((enum cr_wstate)s), "?");
    for (int a = 0; a < _CR_WA_MAX; a++)
        assert_non_null(cr_waction_to_string((enum cr_waction)a));
    assert_string_equal(cr_wstate_to_string(_CR_WS_MAX), "?");
}

static const struct cr_restart_policy P = {
    .backoff_initial_ms = 100, .backoff_max_ms = 1000, .backoff_reset_ms = 30000,
    .budget = 3, .window_ms = 10000, .failed_retry_ms = 60000};

static void test_backoff_arithmetic(void **state)
{
    assert_int_equal(cr_backoff_delay(&P, 1), 0); /* a lone death: at once */
    assert_int_equal(cr_backoff_delay(&P, 2), 100);
    assert_int_equal(cr_backoff_delay(&P, 3), 200);
    assert_int_equal(cr_backoff_delay(&P, 4), 400);
    assert_int_equal(cr_backoff_delay(&P, 5), 800);
    assert_int_equal(cr_backoff_delay(&P, 6), 1000); /* capped */
    assert_int_equal(cr_backoff_delay(&P, 60), 1000); /* no overflow */
}

static void test_restart_policy(void **state)
{
    struct cr_restart_state st = {0};
    /* Planned deaths: immediate, not counted. */
    struct cr_restart_decision d = cr_restart_decide(&P, &st, 1000, 10, true);
    assert_int_equal(d.next, CR_WS_BACKOFF);
    assert_int_equal(d.delay_ms, 0);
    assert_int_equal(st.consecutive, 0);

    d = cr_restart_decide(&P, &st, 1000, 10, false);
    assert_int_equal(d.delay_ms, 0);
    d = cr_restart_decide(&P, &st, 2000, 10, false);
    assert_int_equal(d.delay_ms, 100);
    d = cr_restart_decide(&P, &st, 3000, 10, false);
    assert_int_equal(d.delay_ms, 200);
    assert_false(d.crash_loop);
    /* The 4th death within 10 s exceeds a budget of 3. */
    d = cr_restart_decide(&P, &st, 4000, 10, false);
    assert_int_equal(d.next, CR_WS_FAILED);
    assert_true(d.crash_loop);
    assert_int_equal(d.delay_ms, 60000);

    /* Much later, after a stable run: backoff starts over, window is clear. */
    d = cr_restart_decide(&P, &st, 200000, 40000, false);
    assert_int_equal(d.next, CR_WS_BACKOFF);
    assert_int_equal(d.delay_ms, 0);
}

static void test_window_ages_out(void **state)
{
    struct cr_restart_state st = {0};
    for (int i = 0; i < 3; i++)
        cr_restart_decide(&P, &st, 1000 + (uint64_t)i, 10, false);
    /* 11 s later the three old deaths are outside the 10 s window. */
    struct cr_restart_decision d = cr_restart_decide(&P, &st, 12500, 10, false);
    assert_int_equal(d.next, CR_WS_BACKOFF);
    assert_false(d.crash_loop);
    assert_int_equal(d.delay_ms, 400); /* but the backoff keeps doubling: not stable */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_starting),         cmocka_unit_test(test_ready_and_blocked),
        cmocka_unit_test(test_draining_killing), cmocka_unit_test(test_no_process_states),
        cmocka_unit_test(test_names),            cmocka_unit_test(test_backoff_arithmetic),
        cmocka_unit_test(test_restart_policy),   cmocka_unit_test(test_window_ages_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
