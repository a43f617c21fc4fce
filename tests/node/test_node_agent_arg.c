/* When corrald preloads the Node.js agent, and with which path
 * (supervisor/host/node_agent.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "node_agent.h"

static char agent_file[] = "/tmp/corral-agent-test-XXXXXX";

static int setup(void **state)
{
    int fd = mkstemp(agent_file);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int teardown(void **state)
{
    unlink(agent_file);
    return 0;
}

static char *arg_for(bool node_agent, bool node_heap, bool is_node, const char *path)
{
    struct cr_config c;
    cr_config_init(&c);
    c.node_agent = node_agent;
    c.node_heap = node_heap;
    setenv("CORRAL_NODE_AGENT", path, 1);
    char *arg = (char *)0x1;
    assert_int_equal(cr_node_agent_arg(&c, is_node, &arg), 0);
    cr_config_done(&c);
    return arg;
}

static void not_asked_or_not_node(void **state)
{
    assert_null(arg_for(false, false, true, agent_file));
    assert_null(arg_for(true, false, false, agent_file));
    assert_null(arg_for(false, true, false, agent_file));
}

static void explicit_agent(void **state)
{
    char want[128];
    snprintf(want, sizeof(want), "--require=%s", agent_file);
    char *a = arg_for(true, false, true, agent_file);
    assert_string_equal(a, want);
    free(a);
    /* Asked for explicitly, a missing agent is still passed on: node then
     * says "Cannot find module" instead of corrald staying silent. */
    a = arg_for(true, false, true, "/nonexistent/corral-node-agent.js");
    assert_string_equal(a, "--require=/nonexistent/corral-node-agent.js");
    free(a);
}

static void implied_by_node_heap(void **state)
{
    char want[128];
    snprintf(want, sizeof(want), "--require=%s", agent_file);
    char *a = arg_for(false, true, true, agent_file);
    assert_string_equal(a, want);
    free(a);
    /* Only implied: a missing agent changes nothing. */
    assert_null(arg_for(false, true, true, "/nonexistent/corral-node-agent.js"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(not_asked_or_not_node),
        cmocka_unit_test(explicit_agent),
        cmocka_unit_test(implied_by_node_heap),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
