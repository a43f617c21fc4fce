/* Unit tests of the post-mortem record, its renderings and the ring. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "history.h"

#define MIB (1024ull * 1024)
#define HOUR_MS (3600ll * 1000)
#define T0 1700000000000ll /* 20 s into a minute */

static struct cr_postmortem pm_make(unsigned id, enum cr_death d, int64_t end_ms)
{
    struct cr_postmortem pm = {.worker_id = id, .pid = 1000 + (int)id, .generation = 2,
                               .category = d, .end_ms = end_ms, .start_ms = end_ms - 5000,
                               .uptime_ms = 5000, .exit_code = 0};
    return pm;
}

static void test_new_free(void **state)
{
    struct cr_history *h = NULL;
    assert_int_equal(cr_history_new(0, &h), 0);
    assert_int_equal(cr_history_capacity(h), CR_HISTORY_DEFAULT_CAPACITY);
    assert_int_equal(cr_history_len(h), 0);
    assert_null(cr_history_get(h, 0));
    assert_null(cr_history_free(h));
    assert_null(cr_history_free(NULL));
    assert_int_equal(cr_history_new(CR_HISTORY_MAX_CAPACITY + 1, &h), -EINVAL);
    assert_int_equal(cr_history_new(4, NULL), -EINVAL);
}

static void test_ring_drops_oldest(void **state)
{
    struct cr_history *h;
    assert_int_equal(cr_history_new(3, &h), 0);
    for (unsigned i = 1; i <= 5; i++) {
        struct cr_postmortem pm = pm_make(i, i % 2 ? CR_DEATH_CRASH : CR_DEATH_EXIT_ERROR, T0);
        assert_int_equal(cr_history_push(h, &pm), 0);
        assert_int_equal(cr_history_len(h), i < 3 ? i : 3);
    }
    /* newest first: 5, 4, 3 */
    const struct cr_postmortem *pm;
    unsigned want = 5;
    size_t n = 0;
    for (size_t i = 0; (pm = cr_history_get(h, i)); i++, n++)
        assert_int_equal(pm->worker_id, want--);
    assert_int_equal(n, 3);
    assert_null(cr_history_get(h, 3));
    /* totals survive the drop */
    assert_int_equal(cr_history_count_total(h, CR_DEATH_CRASH), 3);
    assert_int_equal(cr_history_count_total(h, CR_DEATH_EXIT_ERROR), 2);
    assert_int_equal(cr_history_count_total(h, CR_DEATH_OOM_SYSTEM), 0);
    assert_int_equal(cr_history_count_total(h, _CR_DEATH_MAX), 0);

    struct cr_postmortem bad = pm_make(9, _CR_DEATH_MAX, T0);
    assert_int_equal(cr_history_push(h, &bad), -EINVAL);
    assert_int_equal(cr_history_push(h, NULL), -EINVAL);
    assert_int_equal(cr_history_push(NULL, &bad), -EINVAL);
    cr_history_free(h);
}

static void test_last_hour(void **state)
{
    struct cr_history *h;
    assert_int_equal(cr_history_new(2, &h), 0); /* smaller than the deaths: counts must not care */
    int64_t now = T0 + 10 * HOUR_MS;
    int64_t ages_ms[] = {61 * 60000, 58 * 60000, 30 * 60000, 1000, 0};
    for (size_t i = 0; i < 5; i++) {
        struct cr_postmortem pm = pm_make(1, CR_DEATH_OOM_OWN_LIMIT, now - ages_ms[i]);
        assert_int_equal(cr_history_push(h, &pm), 0);
    }
    struct cr_postmortem other = pm_make(2, CR_DEATH_CRASH, now);
    cr_history_push(h, &other);

    assert_int_equal(cr_history_count_last_hour(h, CR_DEATH_OOM_OWN_LIMIT, now), 4);
    assert_int_equal(cr_history_count_total(h, CR_DEATH_OOM_OWN_LIMIT), 5);
    assert_int_equal(cr_history_count_last_hour(h, CR_DEATH_CRASH, now), 1);
    assert_int_equal(cr_history_count_last_hour(h, CR_DEATH_SIGNAL, now), 0);
    /* two hours later nothing is recent */
    assert_int_equal(cr_history_count_last_hour(h, CR_DEATH_OOM_OWN_LIMIT, now + 2 * HOUR_MS), 0);
    /* 45 minutes later only the two newest are within the hour */
    assert_int_equal(cr_history_count_last_hour(h, CR_DEATH_OOM_OWN_LIMIT, now + 45 * 60000), 2);
    /* a clock before the deaths counts none of the later ones */
    assert_int_equal(cr_history_count_last_hour(h, CR_DEATH_OOM_OWN_LIMIT, now - 2 * HOUR_MS), 0);

    /* the bucket of a minute is reused an hour later */
    struct cr_postmortem later = pm_make(1, CR_DEATH_OOM_OWN_LIMIT, now + HOUR_MS);
    cr_history_push(h, &later);
    assert_int_equal(cr_history_count_last_hour(h, CR_DEATH_OOM_OWN_LIMIT, now + HOUR_MS), 1);
    cr_history_free(h);
}

static void test_set_death_and_stderr(void **state)
{
    struct cr_postmortem pm = {0};
    struct cr_death_result r = {.category = CR_DEATH_HEAP_LIMIT, .signal = SIGABRT,
                                .exit_code = -1, .shell_status = 134, .core_dumped = true,
                                .inferred = true};
    snprintf(r.reason, sizeof(r.reason), "aborted at the runtime's heap limit");
    cr_postmortem_set_death(&pm, &r);
    assert_int_equal(pm.category, CR_DEATH_HEAP_LIMIT);
    assert_int_equal(pm.signal, SIGABRT);
    assert_int_equal(pm.exit_code, -1);
    assert_int_equal(pm.shell_status, 134);
    assert_true(pm.core_dumped);
    assert_true(pm.inferred);
    assert_string_equal(pm.reason, r.reason);

    static char big[CR_DEATH_STDERR_MAX + 100];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (char)('a' + i % 26);
    cr_postmortem_set_stderr(&pm, big, sizeof(big));
    assert_int_equal(pm.stderr_len, CR_DEATH_STDERR_MAX);
    assert_memory_equal(pm.stderr_tail, big + 100, CR_DEATH_STDERR_MAX);
    cr_postmortem_set_stderr(&pm, "x\n", 2);
    assert_int_equal(pm.stderr_len, 2);
    cr_postmortem_set_stderr(&pm, NULL, 50);
    assert_int_equal(pm.stderr_len, 0);
}

static struct cr_postmortem full_pm(void)
{
    struct cr_postmortem pm = pm_make(3, CR_DEATH_OOM_OWN_LIMIT, T0);
    pm.signal = SIGKILL;
    pm.exit_code = -1;
    pm.shell_status = 137;
    snprintf(pm.reason, sizeof(pm.reason), "killed by the kernel \"OOM\" killer\nline2");
    pm.rss = 63 * MIB;
    pm.cg_usage = 64 * MIB;
    pm.cg_peak = 64 * MIB;
    pm.cg_limit = 64 * MIB;
    pm.memstat_read = true;
    pm.oom_scope = CR_PM_OOM_ALL;
    pm.memstat.anon = 60 * MIB;
    pm.memstat.file = 1 * MIB;
    pm.oom_own = (struct cr_oom_delta){.max = 3, .oom = 1, .oom_kill = 1};
    pm.oom_system = 1;
    pm.heap_used = 10 * MIB;
    pm.heap_limit = UINT64_MAX;
    pm.external = 40 * MIB;
    pm.loop_delay_max_us = 2019000;
    /* valid UTF-8 (é), an invalid byte, a NUL, then the last line */
    static const char tail[] = "first\ncaf\xc3\xa9 \xff\x00x\nlast line here\n\n";
    cr_postmortem_set_stderr(&pm, tail, sizeof(tail) - 1);
    return pm;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, k);
    assert_non_null(it);
    assert_true(cJSON_IsNumber(it));
    return it->valuedouble;
}

static void test_json(void **state)
{
    struct cr_postmortem pm = full_pm();
    cJSON *o = cr_postmortem_to_json(&pm);
    assert_non_null(o);
    char *text = cJSON_PrintUnformatted(o);
    assert_non_null(text);
    cJSON_Delete(o);

    /* it must parse back as a whole */
    const char *end = NULL;
    cJSON *p = cJSON_ParseWithOpts(text, &end, true);
    assert_non_null(p);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(p, "category")->valuestring,
                        "oom-own-limit");
    assert_int_equal(num(p, "worker_id"), 3);
    assert_int_equal(num(p, "pid"), 1003);
    assert_int_equal(num(p, "uptime_ms"), 5000);
    assert_int_equal(num(p, "end_ms"), T0);
    assert_int_equal(num(p, "rss_bytes"), 63 * MIB);
    assert_int_equal(num(p, "cg_limit_bytes"), 64 * MIB);
    assert_int_equal(num(p, "shell_status"), 137);
    assert_int_equal(num(p, "signal"), SIGKILL);
    assert_int_equal(num(p, "loop_delay_max_us"), 2019000);
    assert_int_equal(num(p, "external_bytes"), 40 * MIB);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p, "exit_code")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p, "heap_limit_bytes")));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(p, "signal_name")->valuestring, "KILL");
    assert_true(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(p, "via_shell")));
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(p, "memory_stat");
    assert_int_equal(num(ms, "anon_bytes"), 60 * MIB);
    assert_int_equal(num(ms, "shmem_bytes"), 0);
    const cJSON *own = cJSON_GetObjectItemCaseSensitive(p, "oom_own");
    assert_int_equal(num(own, "oom_kill"), 1);
    assert_int_equal(num(own, "max"), 3);
    assert_int_equal(num(p, "oom_system_kills"), 1);
    const char *tail = cJSON_GetObjectItemCaseSensitive(p, "stderr_tail")->valuestring;
    assert_string_equal(tail, "first\ncaf\xc3\xa9 ??x\nlast line here\n\n");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(p, "reason")->valuestring, pm.reason);
    cJSON_Delete(p);
    cJSON_free(text);

    /* an exit: exit_code set, signal null */
    pm = pm_make(1, CR_DEATH_EXIT_ERROR, T0);
    pm.exit_code = 3;
    o = cr_postmortem_to_json(&pm);
    assert_int_equal(num(o, "exit_code"), 3);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "signal")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "cg_limit_bytes")));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "stderr_tail")->valuestring, "");
    cJSON_Delete(o);
    assert_null(cr_postmortem_to_json(NULL));
}

static void test_logfmt(void **state)
{
    struct cr_postmortem pm = full_pm();
    char line[2048];
    int n = cr_postmortem_format_logfmt(&pm, line, sizeof(line));
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(line));
    assert_null(strchr(line, '\n'));
    assert_non_null(strstr(line, "worker=3 pid=1003 generation=2 category=oom-own-limit"));
    assert_non_null(strstr(line, " signal=SIGKILL"));
    assert_non_null(strstr(line, " shell_status=137"));
    assert_non_null(strstr(line, " rss_bytes=66060288"));
    assert_non_null(strstr(line, " cg_limit_bytes=67108864"));
    assert_non_null(strstr(line, " oom_kill_own=1"));
    assert_non_null(strstr(line, " reason=\"killed by the kernel \\\"OOM\\\" killer\\nline2\""));
    assert_non_null(strstr(line, " stderr_last=\"last line here\""));

    /* the worst case fits in 2048 */
    memset(pm.reason, '"', sizeof(pm.reason) - 1);
    pm.reason[sizeof(pm.reason) - 1] = '\0';
    memset(pm.stderr_tail, '"', sizeof(pm.stderr_tail));
    pm.stderr_len = sizeof(pm.stderr_tail);
    pm.generation = UINT64_MAX;
    pm.rss = pm.cg_usage = pm.cg_peak = pm.heap_used = pm.external = UINT64_MAX;
    pm.cg_limit = UINT64_MAX - 1;
    pm.worker_id = UINT32_MAX;
    pm.pid = -2147483647 - 1;
    n = cr_postmortem_format_logfmt(&pm, line, sizeof(line));
    assert_true(n > 0);
    assert_non_null(strstr(line, "stderr_last=\"\\\"\\\"")); /* quotes escaped, 200 kept */

    char small[40];
    assert_int_equal(cr_postmortem_format_logfmt(&pm, small, sizeof(small)), -ENOBUFS);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_int_equal(cr_postmortem_format_logfmt(&pm, small, 0), -EINVAL);
    assert_int_equal(cr_postmortem_format_logfmt(NULL, small, sizeof(small)), -EINVAL);
}

/* A worker that never reported its heap, died before any sample, and ran
 * without a group of its own: every figure nobody measured is null in the
 * JSON and absent from the logfmt line, never 0. */
static void test_unknown_stays_unknown(void **state)
{
    struct cr_postmortem pm = pm_make(4, CR_DEATH_CRASH, T0);
    pm.signal = SIGSEGV;
    pm.exit_code = -1;
    pm.heap_unknown = pm.loop_unknown = true;
    char line[2048];
    assert_true(cr_postmortem_format_logfmt(&pm, line, sizeof(line)) > 0);
    static const char *const absent[] = {"heap_used_bytes", "heap_limit_bytes", "external_bytes",
                                         "rss_bytes",       "cg_usage_bytes",   "cg_peak_bytes",
                                         "cg_limit_bytes",  "oom_kill_own",     "oom_kill_ancestor"};
    for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
        if (strstr(line, absent[i]))
            fail_msg("%s in %s", absent[i], line);
    assert_non_null(strstr(line, " oom_kill_system=0"));
    assert_null(strstr(line, "_bytes=")); /* not one byte figure was known */

    cJSON *o = cr_postmortem_to_json(&pm);
    assert_non_null(o);
    static const char *const nulls[] = {"heap_used_bytes", "heap_total_bytes", "heap_limit_bytes",
                                        "external_bytes",  "loop_delay_max_us", "rss_bytes",
                                        "cg_usage_bytes",  "cg_peak_bytes",     "cg_limit_bytes",
                                        "memory_stat",     "oom_own",           "oom_ancestor"};
    for (size_t i = 0; i < sizeof(nulls) / sizeof(nulls[0]); i++)
        if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, nulls[i])))
            fail_msg("%s is not null", nulls[i]);
    cJSON_Delete(o);

    /* A heap reported as 0 is a known 0; so is an own group's OOM count. */
    pm.heap_unknown = false;
    pm.heap_used = 0;
    pm.rss = 5 * MIB;
    pm.oom_scope = CR_PM_OOM_ALL;
    assert_true(cr_postmortem_format_logfmt(&pm, line, sizeof(line)) > 0);
    assert_non_null(strstr(line, " heap_used_bytes=0 "));
    assert_non_null(strstr(line, " rss_bytes=5242880 "));
    assert_non_null(strstr(line, " oom_kill_own=0 oom_kill_ancestor=0 "));
    assert_null(strstr(line, "heap_limit_bytes"));

    /* A group shared with corrald: its kill count is the worker's, the
     * limit counters are not. */
    pm.oom_scope = CR_PM_OOM_KILLS;
    pm.oom_own = (struct cr_oom_delta){.oom_kill = 1};
    o = cr_postmortem_to_json(&pm);
    const cJSON *own = cJSON_GetObjectItemCaseSensitive(o, "oom_own");
    assert_int_equal(num(own, "oom_kill"), 1);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(own, "max")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(own, "oom")));
    assert_int_equal(num(cJSON_GetObjectItemCaseSensitive(o, "oom_ancestor"), "oom_kill"), 0);
    assert_int_equal(num(o, "heap_used_bytes"), 0);
    cJSON_Delete(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_free),
        cmocka_unit_test(test_ring_drops_oldest),
        cmocka_unit_test(test_last_hour),
        cmocka_unit_test(test_set_death_and_stderr),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_logfmt),
        cmocka_unit_test(test_unknown_stays_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
