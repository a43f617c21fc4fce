/* Unit tests of the termination summary: its bound, its order, its lines. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "history.h"
#include "termsum.h"

#define T0 1700000000000ll

static struct cr_postmortem death(unsigned id, enum cr_death d, bool planned, int64_t end_ms)
{
    struct cr_postmortem pm = {.worker_id = id, .pid = 4000 + (int)id, .generation = 3,
                               .category = d, .end_ms = end_ms, .planned = planned};
    if (d == CR_DEATH_OOM_OWN_LIMIT) {
        pm.exit_code = -1, pm.signal = 9, pm.shell_status = 137;
    } else {
        pm.exit_code = 0, pm.shell_status = 0;
    }
    snprintf(pm.reason, sizeof pm.reason, "worker %u: %s", id,
             planned ? "drained at the stop" : "the kernel killed it at its memory.max");
    return pm;
}

static unsigned count_lines(const char *s)
{
    unsigned n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static void longest_line(const char *s, size_t *max)
{
    *max = 0;
    for (const char *p = s; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > *max)
            *max = n;
        p += n + (nl ? 1 : 0);
    }
}

static void test_args(void **state)
{
    (void)state;
    struct cr_termsum t = {.version = "1"};
    char small[100], buf[512];
    assert_int_equal(cr_termsum_render(NULL, buf, sizeof buf), -EINVAL);
    assert_int_equal(cr_termsum_render(&t, NULL, sizeof buf), -EINVAL);
    assert_int_equal(cr_termsum_render(&t, small, sizeof small), -EINVAL);
}

static void test_no_deaths(void **state)
{
    (void)state;
    unsigned by[_CR_DEATH_MAX] = {0};
    struct cr_termsum t = {.version = "0.9", .pid = 77, .phase = CR_TERMSUM_RUNNING,
                           .now_ms = T0 + 65000, .started_ms = T0, .target = 4, .ready = 3,
                           .by_category = by};
    char buf[CR_TERMSUM_MAX];
    int n = cr_termsum_render(&t, buf, sizeof buf);
    assert_int_equal(n, (int)strlen(buf));
    assert_non_null(strstr(buf, "corrald 0.9 (pid 77) running at 2023-11-14T22:14:25Z, up 1 min, "
                                "3 of 4 worker(s) ready"));
    assert_non_null(strstr(buf, "\nworker deaths: none\n"));
    assert_int_equal(count_lines(buf), 2);
}

static void test_exit_line(void **state)
{
    (void)state;
    struct cr_termsum t = {.version = "0.9", .pid = 77, .phase = CR_TERMSUM_EXITED,
                           .exit_code = 1, .why = "start-up failed: no listening socket",
                           .now_ms = T0 + 1500, .started_ms = T0};
    char buf[CR_TERMSUM_MAX];
    assert_true(cr_termsum_render(&t, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "exited 1 at "));
    assert_non_null(strstr(buf, "after 1.5 s: start-up failed: no listening socket\n"));
    t.why = NULL;
    assert_true(cr_termsum_render(&t, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, ": no reason recorded\n"));
    t.phase = CR_TERMSUM_STOPPING, t.why = "SIGTERM";
    assert_true(cr_termsum_render(&t, buf, sizeof buf) > 0);
    assert_non_null(strstr(buf, "stopping at "));
    assert_non_null(strstr(buf, "(SIGTERM)"));
}

/* 256 deaths with reasons as long as a reason gets: the message stays under
 * Kubernetes' 4096 bytes, every line under 320, the unplanned deaths come
 * before the planned ones though they are older, and the last line counts
 * what was left out. */
static void test_bound_and_order(void **state)
{
    (void)state;
    struct cr_history *h;
    assert_int_equal(cr_history_new(256, &h), 0);
    unsigned by[_CR_DEATH_MAX] = {0};
    for (unsigned i = 1; i <= 256; i++) {
        bool planned = i > 8; /* 8 OOM kills first, then 248 drained at stops */
        struct cr_postmortem pm =
            death(i, planned ? CR_DEATH_EXIT_CLEAN : CR_DEATH_OOM_OWN_LIMIT, planned, T0 + i);
        memset(pm.reason, 'x', sizeof pm.reason - 1);
        pm.reason[sizeof pm.reason - 1] = '\0';
        memcpy(pm.reason, planned ? "PLANNED" : "UNPLANNED", planned ? 7 : 9);
        assert_int_equal(cr_history_push(h, &pm), 0);
        by[pm.category]++;
    }
    struct cr_termsum t = {.version = "0.9", .pid = 1, .phase = CR_TERMSUM_EXITED,
                           .exit_code = 0, .why = "stopped (SIGTERM), every worker drained",
                           .now_ms = T0 + 9000, .started_ms = T0, .by_category = by,
                           .history = h};
    char buf[2 * CR_TERMSUM_MAX];
    memset(buf, '#', sizeof buf);
    int n = cr_termsum_render(&t, buf, sizeof buf);
    assert_true(n > 0);
    assert_true(n < CR_TERMSUM_MAX);
    assert_int_equal((size_t)n, strlen(buf));
    size_t longest;
    longest_line(buf, &longest);
    assert_true(longest <= 320);
    assert_non_null(strstr(buf, "worker deaths: 256 (exit-clean 248, oom-own-limit 8)"));

    /* The first death line is the newest unplanned one: worker 8, 137. */
    const char *first = strstr(buf, " worker 8 pid 4008 gen 3 oom-own-limit (137, signal 9): UNPLANNED");
    assert_non_null(first);
    const char *planned = strstr(buf, "PLANNED xx");
    if (planned) /* planned deaths only after every unplanned one shown */
        assert_true(planned > strstr(buf, " worker 1 pid 4001 "));
    assert_non_null(strstr(buf, " earlier death(s) not shown"));
    /* The cut line says so, and the count of shown lines adds up. */
    assert_non_null(strstr(buf, "..."));
    unsigned death_lines = count_lines(buf) - 3; /* first line, counts, closing count */
    char want[96];
    snprintf(want, sizeof want, "... and %u earlier death(s) not shown", 256 - death_lines);
    assert_non_null(strstr(buf, want));

    /* A small buffer bounds it too. */
    char small[600];
    n = cr_termsum_render(&t, small, sizeof small);
    assert_true(n > 0 && (size_t)n < sizeof small);
    assert_non_null(strstr(small, "not shown"));
    cr_history_free(h);
}

static void test_newline_in_reason(void **state)
{
    (void)state;
    struct cr_history *h;
    assert_int_equal(cr_history_new(4, &h), 0);
    unsigned by[_CR_DEATH_MAX] = {0};
    struct cr_postmortem pm = death(2, CR_DEATH_CRASH, false, T0);
    pm.exit_code = -1, pm.signal = 11, pm.shell_status = 139, pm.core_dumped = true;
    snprintf(pm.reason, sizeof pm.reason, "segfault\nsecond line");
    cr_history_push(h, &pm);
    by[CR_DEATH_CRASH] = 1;
    struct cr_termsum t = {.version = "0.9", .pid = 1, .by_category = by, .history = h,
                           .now_ms = T0, .started_ms = T0, .target = 1};
    char buf[CR_TERMSUM_MAX];
    cr_termsum_render(&t, buf, sizeof buf);
    assert_non_null(strstr(buf, "crash (139, signal 11, core): segfault second line\n"));
    assert_null(strstr(buf, "not shown"));
    assert_int_equal(count_lines(buf), 3);
    cr_history_free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_no_deaths),
        cmocka_unit_test(test_exit_line),
        cmocka_unit_test(test_bound_and_order),
        cmocka_unit_test(test_newline_in_reason),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
