/* The worker protocol parser and the stream framing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>
#include <cmocka.h>

#include "notify.h"

static void test_parse_report(void **state)
{
    const char *m = "WATCHDOG=1\nX_HEAP_USED=1048576\nX_HEAP_TOTAL=2097152\nX_HEAP_LIMIT="
                    "268435456\nX_EXTERNAL=5\nX_RSS=30000000\nX_LOOP_DELAY_P50_US=10\n"
                    "X_LOOP_DELAY_P99_US=990\nX_LOOP_DELAY_MAX_US=2000000\nX_ELU=0.41\n"
                    "X_INFLIGHT=3\nX_REQUESTS=12345\nX_POOL_QUEUE=4\nX_FUTURE_KEY=whatever\n";
    struct cr_notify_msg r;
    unsigned bad;
    cr_notify_parse(m, strlen(m), &r, &bad);
    assert_int_equal(bad, 0);
    assert_true(r.present & CR_NF_WATCHDOG);
    assert_false(r.present & CR_NF_READY);
    assert_int_equal(r.heap_used, 1048576);
    assert_int_equal(r.heap_limit, 268435456);
    assert_int_equal(r.rss, 30000000);
    assert_int_equal(r.delay_max_us, 2000000);
    assert_int_equal(r.requests, 12345);
    assert_int_equal(r.pool_queue, 4);
    assert_true(r.elu > 0.40 && r.elu < 0.42);
}

static void test_parse_edge(void **state)
{
    struct cr_notify_msg r;
    unsigned bad;
    const char *m = "READY=1\nSTATUS=serving on 3\nX_FATAL=heap-limit\nX_HEAP_USED=12x\n"
                    "X_ELU=1.5\nX_RSS=99999999999999999999999\nnoequals\nREADY";
    cr_notify_parse(m, strlen(m), &r, &bad);
    assert_true(r.present & CR_NF_READY);
    assert_string_equal(r.status, "serving on 3");
    assert_string_equal(r.fatal, "heap-limit");
    assert_false(r.present & CR_NF_HEAP_USED);
    assert_false(r.present & CR_NF_ELU);
    assert_false(r.present & CR_NF_RSS);
    assert_int_equal(bad, 3);
    cr_notify_parse("READY=0\nWATCHDOG=trigger", 24, &r, NULL);
    assert_int_equal(r.present, 0);
    /* No NUL terminator needed: the length bounds the parse. */
    cr_notify_parse("READY=1garbage", 7, &r, NULL);
    assert_true(r.present & CR_NF_READY);
}

/* X_HEAP_SPACES: the agent's form, as Node 20 sends it; anything not
 * well formed is refused whole (counted bad, the field absent). */
static void test_parse_spaces(void **state)
{
    struct cr_notify_msg r;
    unsigned bad;
    const char *m =
        "WATCHDOG=1\nX_HEAP_SPACES=read_only:0/0,new:1040/1048576,old:30670000/31457280,"
        "code:360928/524288,shared:0/0,new_large_object:0/0,"
        "large_object:29233152/29523968,code_large_object:0/0,"
        "shared_large_object:0/0,shared_trusted_large_object:0/0\n"; /* Node 24 */
    cr_notify_parse(m, strlen(m), &r, &bad);
    assert_int_equal(bad, 0);
    assert_true(r.present & CR_NF_HEAP_SPACES);
    assert_int_equal(r.nspaces, 10);
    assert_string_equal(r.spaces[2].name, "old");
    assert_int_equal(r.spaces[2].used, 30670000);
    assert_int_equal(r.spaces[2].size, 31457280);
    assert_string_equal(r.spaces[8].name, "shared_large_object");
    assert_string_equal(r.spaces[9].name, "shared_trusted_large_object");
    static const char *const refused[] = {
        "X_HEAP_SPACES=",                             /* none */
        "X_HEAP_SPACES=old:1/2,",                     /* a trailing comma */
        "X_HEAP_SPACES=old:1",                        /* no size */
        "X_HEAP_SPACES=Old:1/2",                      /* not a V8 name */
        "X_HEAP_SPACES=old:1/2,:3/4",                 /* no name */
        "X_HEAP_SPACES=old:x/2",                      /* not a number */
        "X_HEAP_SPACES=a_name_of_thirty_two_bytes_long_:1/2", /* too long */
        "X_HEAP_SPACES=a:1/1,b:1/1,c:1/1,d:1/1,e:1/1,f:1/1,g:1/1,h:1/1,i:1/1,j:1/1,k:1/1,"
        "l:1/1,m:1/1,n:1/1,o:1/1,p:1/1,q:1/1", /* 17 spaces */
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        cr_notify_parse(refused[i], strlen(refused[i]), &r, &bad);
        assert_int_equal(bad, 1);
        assert_false(r.present & CR_NF_HEAP_SPACES);
        assert_int_equal(r.nspaces, 0);
    }
    const char *sixteen = "X_HEAP_SPACES=a:1/1,b:1/1,c:1/1,d:1/1,e:1/1,f:1/1,g:1/1,h:1/1,"
                          "i:1/1,j:1/1,k:1/1,l:1/1,m:1/1,n:1/1,o:1/1,a_name_of_thirty_one_bytes_long:7/8";
    cr_notify_parse(sixteen, strlen(sixteen), &r, &bad);
    assert_int_equal(bad, 0);
    assert_int_equal(r.nspaces, 16);
    assert_int_equal(r.spaces[15].size, 8);
}

static void test_stream(void **state)
{
    struct cr_notify_stream s = {0};
    char msg[CR_NOTIFY_MAX + 2];
    size_t used, len;
    const char *a = "READY=1\n\nWATCHDOG=1\nX_RSS=5\n";
    assert_int_equal(cr_notify_stream_feed(&s, a, strlen(a), &used, msg, &len), 1);
    assert_int_equal(used, 9);
    assert_int_equal(len, 9);
    assert_memory_equal(msg, "READY=1\n\n", 9);
    assert_int_equal(cr_notify_stream_feed(&s, a + used, strlen(a) - used, &used, msg, &len), 0);
    /* The rest arrives in a second read. */
    assert_int_equal(cr_notify_stream_feed(&s, "\n", 1, &used, msg, &len), 1);
    struct cr_notify_msg r;
    cr_notify_parse(msg, len, &r, NULL);
    assert_true(r.present & CR_NF_WATCHDOG);
    assert_int_equal(r.rss, 5);
}

static void test_stream_cap(void **state)
{
    struct cr_notify_stream s = {0};
    char big[CR_NOTIFY_MAX + 100], msg[CR_NOTIFY_MAX + 2];
    memset(big, 'A', sizeof(big));
    size_t used, len;
    assert_int_equal(cr_notify_stream_feed(&s, big, sizeof(big), &used, msg, &len), -EMSGSIZE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_report),
        cmocka_unit_test(test_parse_edge),
        cmocka_unit_test(test_parse_spaces),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_stream_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
