/* The line corrald hands corral-exec (spawnchild.h): what is written is
 * read back unchanged, and anything else is refused whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "spawnchild.h"

static void round_trip(const struct cr_spawn_child *in)
{
    char buf[256];
    int n = cr_spawn_child_format(in, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(buf));
    struct cr_spawn_child out;
    memset(&out, 0xA5, sizeof(out));
    assert_int_equal(cr_spawn_child_parse(buf, &out), 0);
    assert_int_equal(out.ppid, in->ppid);
    assert_int_equal(out.err_fd, in->err_fd);
    assert_int_equal(out.procs_fd, in->procs_fd);
    assert_int_equal(out.listen_pid_slot, in->listen_pid_slot);
    assert_int_equal(out.has_nofile, in->has_nofile);
    if (in->has_nofile) {
        assert_true(out.nofile.rlim_cur == in->nofile.rlim_cur);
        assert_true(out.nofile.rlim_max == in->nofile.rlim_max);
    }
    assert_int_equal(out.set_ids, in->set_ids);
    if (in->set_ids) {
        assert_int_equal(out.uid, in->uid);
        assert_int_equal(out.gid, in->gid);
    }
    assert_int_equal(out.set_sched, in->set_sched);
    if (in->set_sched)
        assert_int_equal(out.nice, in->nice);
}

static void test_everything_present(void **state)
{
    (void)state;
    struct cr_spawn_child c = {
        .ppid = 4194304, .err_fd = 5, .procs_fd = 6, .listen_pid_slot = 17,
        .has_nofile = true, .nofile = {.rlim_cur = 1024, .rlim_max = RLIM_INFINITY},
        .set_ids = true, .uid = 65534, .gid = 65534,
        .set_sched = true, .nice = -20,
    };
    round_trip(&c);
    char buf[256];
    cr_spawn_child_format(&c, buf, sizeof(buf));
    char want[128];
    snprintf(want, sizeof(want), "corral3:4194304:5:6:17:1024:%llu:65534:65534:0",
             (unsigned long long)RLIM_INFINITY);
    assert_string_equal(buf, want);
}

static void test_absent_fields(void **state)
{
    (void)state;
    struct cr_spawn_child c = {.ppid = 1, .err_fd = 5, .procs_fd = -1, .listen_pid_slot = -1};
    round_trip(&c);
    char buf[64];
    cr_spawn_child_format(&c, buf, sizeof(buf));
    assert_string_equal(buf, "corral3:1:5:-:-:-:-:-:-:-");
    /* Root is a user to drop to like any other (--user 0 --group nogroup). */
    c.set_ids = true;
    c.uid = 0;
    c.gid = 65534;
    round_trip(&c);
    /* The other end of the nice range. */
    c.set_sched = true;
    c.nice = 19;
    round_trip(&c);
}

static void test_too_small_a_buffer(void **state)
{
    (void)state;
    struct cr_spawn_child c = {.ppid = 1, .err_fd = 5, .procs_fd = -1, .listen_pid_slot = -1};
    char buf[8];
    assert_int_equal(cr_spawn_child_format(&c, buf, sizeof(buf)), -ENOSPC);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *bad[] = {
        NULL,
        "",
        "corral3",
        "corral1:1:5:6:7:1:2:3:4",            /* the line before NICE */
        "corral0:1:5:6:7:1:2:3:4:20",         /* another tag */
        "corral3:1:5:6:7:1:2:3:4",            /* a field short */
        "corral3:1:5:6:7:1:2:3:4:20:5",       /* a field over */
        "corral2:1:5:6:7:1:2:3:4:20:",        /* a trailing separator */
        "corral2:0:5:6:7:1:2:3:4:20",         /* pid 0 */
        "corral2:-:5:6:7:1:2:3:4:20",         /* ppid absent */
        "corral2:1:-:6:7:1:2:3:4:20",         /* no failure pipe */
        "corral2:1:5:6:7:1:-:3:4:20",         /* half a limit */
        "corral2:1:5:6:7:1:2:-:4:20",         /* a uid without a gid */
        "corral2:1:5:6:7:1:2:3:-:20",         /* a gid without a uid */
        "corral2:1:5:6:7:1:2:3:4:40",         /* nice 20: beyond 19 */
        "corral2:2147483648:5:6:7:1:2:3:4:20", /* pid beyond pid_t */
        "corral2:1:5:6:7:1:2:4294967295:4:20", /* (uid_t)-1: "no change" to setresuid */
        "corral2:1:5:6:7:1:18446744073709551616:3:4:20", /* beyond 64 bits */
        "corral2:1:5:6:7:1:2:3:4x:20",        /* junk after a number */
        "corral2:1:+5:6:7:1:2:3:4:20",        /* a sign */
        "corral2:1: 5:6:7:1:2:3:4:20",        /* a blank */
        "corral2:1:5::7:1:2:3:4:20",          /* an empty field */
        "corral2:1:5:6:--:1:2:3:4:20",        /* two dashes */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        struct cr_spawn_child c = {.ppid = 77};
        assert_int_equal(cr_spawn_child_parse(bad[i], &c), -EINVAL);
        assert_int_equal(c.ppid, 77); /* untouched */
    }
}

/* The LISTEN_PID slot is written to only when it is the padded template. */
static void test_slot(void **state)
{
    (void)state;
    assert_true(cr_spawn_child_slot_ok(CR_SPAWN_LISTEN_PID_TEMPLATE));
    assert_false(cr_spawn_child_slot_ok("LISTEN_PID=1"));     /* too short to hold a pid */
    assert_false(cr_spawn_child_slot_ok("TMPDIR=/tmp/xxxxxxxxxxxxxxxxxxxxxxxx"));
    assert_false(cr_spawn_child_slot_ok(""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_everything_present),
        cmocka_unit_test(test_absent_fields),
        cmocka_unit_test(test_too_small_a_buffer),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_slot),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
