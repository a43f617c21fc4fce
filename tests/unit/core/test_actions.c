/* Every action the lifecycle table can name has a function: the real action
 * list of the core (core/supervisor.c), linked here. A missing entry would
 * be a NULL call at run time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "lifecycle.h"
#include "supervisor_int.h"

static void test_every_action_has_a_function(void **state)
{
    for (int a = 0; a < _CR_WA_MAX; a++)
        if (!cr_worker_actions[a])
            fail_msg("action %s has no function", cr_waction_to_string((enum cr_waction)a));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_action_has_a_function),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
