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
    /* never asked: both null; no heap spaces reported, no reports directory */
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p, "request")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p, "stack")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p, "heap_spaces")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(p, "reports")));
    cJSON_Delete(p);
    cJSON_free(text);

    /* a node worker's heap spaces, in its order, and its reports: a
     * fatal-error report, a snapshot whole, then one the death cut */
    pm.heap_spaces_len = 2;
    pm.heap_spaces[0] = (struct cr_heap_space){.name = "new", .used = 1040, .size = 1048576};
    pm.heap_spaces[1] = (struct cr_heap_space){.name = "old", .used = 33 * MIB, .size = 34 * MIB};
    pm.reports.known = true;
    snprintf(pm.reports.fatal_error_report, sizeof(pm.reports.fatal_error_report),
             "/d/i/w3-2/report.json");
    snprintf(pm.reports.heap_snapshot, sizeof(pm.reports.heap_snapshot),
             "/d/i/w3-2/Heap.1.heapsnapshot");
    pm.reports.snapshot_whole = true;
    o = cr_postmortem_to_json(&pm);
    const cJSON *hs = cJSON_GetObjectItemCaseSensitive(o, "heap_spaces");
    assert_string_equal(hs->child->string, "new");
    assert_int_equal(num(cJSON_GetObjectItemCaseSensitive(hs, "old"), "used_bytes"), 33 * MIB);
    assert_int_equal(num(cJSON_GetObjectItemCaseSensitive(hs, "old"), "size_bytes"), 34 * MIB);
    const cJSON *rep = cJSON_GetObjectItemCaseSensitive(o, "reports");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(rep, "fatal_error_report")->valuestring,
                        "/d/i/w3-2/report.json");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(rep, "heap_snapshot")->valuestring,
                        "/d/i/w3-2/Heap.1.heapsnapshot");
    assert_null(cJSON_GetObjectItemCaseSensitive(rep, "heap_snapshot_incomplete"));
    cJSON_Delete(o);
    pm.reports.snapshot_whole = false;
    pm.reports.fatal_error_report[0] = '\0';
    o = cr_postmortem_to_json(&pm);
    rep = cJSON_GetObjectItemCaseSensitive(o, "reports");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rep, "fatal_error_report")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rep, "heap_snapshot")));
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(rep, "heap_snapshot_incomplete")->valuestring,
        "/d/i/w3-2/Heap.1.heapsnapshot");
    cJSON_Delete(o);
    pm.heap_spaces_len = 0;
    pm.reports = (struct cr_postmortem_reports){0};

    /* a request being served, and a stack */
    pm.request = (struct cr_request_seen){.known = true, .serving = true, .age_ms = 5234,
                                          .inflight = 2, .method = "GET",
                                          .target = "/heavy?ms=60000"};
    memcpy(pm.stack_source, "corral-worker", 14);
    pm.stack_len = (size_t)snprintf(pm.stack, sizeof(pm.stack), "#0 burn\n#1 main\xff");
    o = cr_postmortem_to_json(&pm);
    const cJSON *rq = cJSON_GetObjectItemCaseSensitive(o, "request");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(rq, "method")->valuestring, "GET");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(rq, "path")->valuestring,
                        "/heavy?ms=60000");
    assert_int_equal(num(rq, "age_ms"), 5234);
    assert_int_equal(num(rq, "inflight"), 2);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "stack");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(st, "source")->valuestring,
                        "corral-worker");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(st, "text")->valuestring,
                        "#0 burn\n#1 main?");
    cJSON_Delete(o);

    /* known to serve nothing; a stack asked for that never came */
    pm.request = (struct cr_request_seen){.known = true};
    pm.stack_len = 0;
    snprintf(pm.stack_missing, sizeof(pm.stack_missing), "no answer within 1000 ms");
    o = cr_postmortem_to_json(&pm);
    rq = cJSON_GetObjectItemCaseSensitive(o, "request");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(rq, "path")));
    assert_int_equal(num(rq, "inflight"), 0);
    st = cJSON_GetObjectItemCaseSensitive(o, "stack");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(st, "missing")->valuestring,
                        "no answer within 1000 ms");
    assert_null(cJSON_GetObjectItemCaseSensitive(st, "text"));
    cJSON_Delete(o);
    pm.stack_missing[0] = '\0';

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
    char line[3072];
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

    assert_null(strstr(line, "request="));
    pm.request = (struct cr_request_seen){.known = true, .serving = true, .age_ms = 5234,
                                          .inflight = 1, .method = "GET", .target = "/a?b=\"c\""};
    memcpy(pm.stack_source, "corral-worker", 14);
    pm.stack_len = 3;
    n = cr_postmortem_format_logfmt(&pm, line, sizeof(line));
    assert_true(n > 0);
    assert_non_null(strstr(line, " request=\"GET /a?b=\\\"c\\\"\" request_age_ms=5234"));
    assert_non_null(strstr(line, " stack_source=\"corral-worker\""));

    /* the worst case fits in 3072 */
    memset(pm.request.method, '"', sizeof(pm.request.method) - 1);
    memset(pm.request.target, '"', sizeof(pm.request.target) - 1);
    pm.request.age_ms = UINT64_MAX;
    memset(pm.stack_source, 'x', sizeof(pm.stack_source) - 1);
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
    assert_non_null(strstr(line, " request_age_ms=18446744073709551615"));

    char small[40];
    assert_int_equal(cr_postmortem_format_logfmt(&pm, small, sizeof(small)), -ENOBUFS);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    assert_int_equal(cr_postmortem_format_logfmt(&pm, small, 0), -EINVAL);
    assert_int_equal(cr_postmortem_format_logfmt(NULL, small, sizeof(small)), -EINVAL);
}

/* A worker sampled every 250 ms for 90 s (loop ms from 1,000,000): RSS
 * grows 1 MiB a second, a heap is reported from the 70th second on (the
 * reading of the middle of each second peaks 5 MiB above the others: the
 * point keeps the peak), no cgroup for the first 40 s. The death is 100 ms
 * after the last sample. */
static void test_series(void **state)
{
    struct cr_trend_ring *r;
    assert_int_equal(cr_trend_ring_new(0, &r), 0); /* 240 samples: the last 60 s */
    const uint64_t t0 = 1000000;
    for (uint64_t t = 0; t < 90000; t += 250) {
        bool peak = t % 1000 == 500;
        struct cr_sample s = {
            .t_ms = t0 + t,
            .rss = 10 * MIB + t / 1000 * MIB + (peak ? 5 * MIB : 0),
            .cg_usage = t >= 40000 ? 20 * MIB + t / 1000 * MIB : 0,
            .heap_reported = t >= 70000,
            .heap_used = t >= 70000 ? 8 * MIB : 0,
            .external = t >= 70000 ? 3 * MIB + 1 : 0, /* kept to the KiB, rounded up */
        };
        assert_int_equal(cr_trend_ring_push(r, &s), 0);
    }
    const uint64_t death = t0 + 89750 + 100;
    struct cr_postmortem pm = pm_make(1, CR_DEATH_OOM_OWN_LIMIT, T0);
    cr_postmortem_set_series(&pm, r, death);
    /* The ring holds the last 60 s (240 samples from 30.0 s): the oldest,
     * at 59.85 s before the death, is the first point's. */
    assert_int_equal(pm.series_len, 60);
    assert_int_equal(pm.series[0].t_ms, -59850 + 750); /* its second's newest: 30.75 s */
    assert_int_equal(pm.series[59].t_ms, -100);
    for (size_t i = 1; i < pm.series_len; i++)
        assert_true(pm.series[i].t_ms > pm.series[i - 1].t_ms);
    /* Each second's peak: 10 MiB + its second's MiB + the 5 MiB spike. */
    assert_int_equal(pm.series[0].rss_kib, (10 + 30 + 5) * 1024);
    assert_int_equal(pm.series[59].rss_kib, (10 + 89 + 5) * 1024);
    /* No heap before the 70th second: null there, never 0. */
    const struct cr_postmortem_point *p40 = &pm.series[10]; /* samples 40.0 .. 40.75 s */
    assert_int_equal(p40->t_ms, -(int32_t)(death - (t0 + 40750)));
    assert_int_equal(p40->heap_used_kib, CR_POSTMORTEM_UNKNOWN);
    assert_int_equal(p40->external_kib, CR_POSTMORTEM_UNKNOWN);
    assert_int_equal(p40->cg_usage_kib, (20 + 40) * 1024);
    assert_int_equal(pm.series[9].cg_usage_kib, CR_POSTMORTEM_UNKNOWN); /* 39 s: none */
    assert_int_equal(pm.series[40].heap_used_kib, 8 * 1024);
    assert_int_equal(pm.series[40].external_kib, 3 * 1024 + 1);
    assert_int_equal(pm.series[39].heap_used_kib, CR_POSTMORTEM_UNKNOWN);

    /* Its JSON: bytes, null for the unknown, oldest first. */
    cJSON *o = cr_postmortem_to_json(&pm);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "memory_series");
    assert_int_equal(cJSON_GetArraySize(a), 60);
    const cJSON *first = cJSON_GetArrayItem(a, 0), *last = cJSON_GetArrayItem(a, 59);
    assert_int_equal(num(first, "t_ms"), -59100);
    assert_int_equal(num(first, "rss_bytes"), 45 * MIB);
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(first, "heap_used_bytes")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(first, "external_bytes")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(first, "cg_usage_bytes")));
    assert_int_equal(num(last, "heap_used_bytes"), 8 * MIB);
    assert_int_equal(num(last, "external_bytes"), 3 * MIB + 1024);
    assert_int_equal(num(last, "cg_usage_bytes"), (20 + 89) * MIB);
    assert_int_equal(cJSON_GetArraySize(last), 5);
    cJSON_Delete(o);

    /* A calm worker, sampled every 2 s: one point per sample. */
    cr_trend_ring_clear(r);
    for (uint64_t t = 0; t < 120000; t += 2000) {
        struct cr_sample s = {.t_ms = t0 + t, .rss = 7 * MIB};
        assert_int_equal(cr_trend_ring_push(r, &s), 0);
    }
    cr_postmortem_set_series(&pm, r, t0 + 118000);
    assert_int_equal(pm.series_len, 30);
    assert_int_equal(pm.series[0].t_ms, -58000);
    assert_int_equal(pm.series[29].t_ms, 0);

    /* Samples older than the minute are left out; none at all: no points. */
    cr_postmortem_set_series(&pm, r, t0 + 118000 + 61000);
    assert_int_equal(pm.series_len, 0);
    cr_postmortem_set_series(&pm, NULL, death);
    assert_int_equal(pm.series_len, 0);
    o = cr_postmortem_to_json(&pm);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(o, "memory_series")), 0);
    cJSON_Delete(o);
    cr_trend_ring_free(r);
}

/* The trend's verdict at the death: the time it was reached, relative. */
static void test_verdict(void **state)
{
    struct cr_postmortem pm = pm_make(1, CR_DEATH_HEAP_LIMIT, T0);
    cr_postmortem_set_verdict(&pm, CR_TREND_HEAP_GROWING, 5000, "verdict=heap-growing x=1", 14000);
    assert_int_equal(pm.verdict, CR_TREND_HEAP_GROWING);
    assert_int_equal(pm.verdict_since_ms, -9000);
    cJSON *o = cr_postmortem_to_json(&pm);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "memory_verdict")->valuestring,
                        "heap-growing");
    assert_int_equal(num(o, "memory_verdict_since_ms"), -9000);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(o, "memory_verdict_detail")->valuestring,
        "verdict=heap-growing x=1");
    cJSON_Delete(o);
    /* Never reached (no sample changed it): unknown, since null. */
    cr_postmortem_set_verdict(&pm, CR_TREND_UNKNOWN, 0, NULL, 14000);
    o = cr_postmortem_to_json(&pm);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(o, "memory_verdict")->valuestring,
                        "unknown");
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "memory_verdict_since_ms")));
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(o, "memory_verdict_detail")->valuestring, "");
    cJSON_Delete(o);
    /* A sample stamped after the death counts as at it. */
    cr_postmortem_set_verdict(&pm, CR_TREND_NEAR_LIMIT, 15000, "", 14000);
    assert_int_equal(pm.verdict_since_ms, 0);
}

/* What the history costs: the record's size is fixed (history.h says it),
 * and a full ring is one allocation of capacity records. */
static void test_record_size(void **state)
{
    size_t rec = sizeof(struct cr_postmortem);
    printf("sizeof(struct cr_postmortem) = %zu bytes; %d records = %.2f MiB\n", rec,
           CR_HISTORY_DEFAULT_CAPACITY, (double)rec * CR_HISTORY_DEFAULT_CAPACITY / MIB);
    /* The stack, the stderr tail, the request, the reason, the series,
     * the report paths, the heap spaces, the verdict and the figures
     * (history.h states the figure). */
    assert_true(rec <= 16576);
    assert_true(sizeof(((struct cr_postmortem *)0)->series) <= 1200);
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
        cmocka_unit_test(test_series),
        cmocka_unit_test(test_verdict),
        cmocka_unit_test(test_record_size),
        cmocka_unit_test(test_unknown_stays_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
