/* Unit tests of corral-worker's pure modules: loop-delay histogram, flag
 * parsing, heap accounting, the buffer pool (the HTTP parser wrapper is
 * common/, tested in tests/unit/common). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bufpool.h"
#include "heap.h"
#include "loopmon.h"
#include "options.h"

static void hist_quantiles(void **state)
{
    struct cr_hist h;
    cr_hist_reset(&h);
    assert_int_equal(cr_hist_quantile(&h, 0.5), 0);
    for (uint64_t v = 1; v <= 1000; v++)
        cr_hist_record(&h, v);
    uint64_t p50 = cr_hist_quantile(&h, 0.5), p99 = cr_hist_quantile(&h, 0.99);
    /* Log buckets: within 12.5 % above the true value. */
    assert_true(p50 >= 500 && p50 <= 563);
    assert_true(p99 >= 990 && p99 <= 1000);
    assert_int_equal(cr_hist_quantile(&h, 1.0), 1000);
    assert_int_equal(h.max, 1000);
    assert_int_equal(h.count, 1000);
    /* One long stall among many short ticks: p99 hides it, max shows it
     * (p99 hides a single stall; max shows it). */
    cr_hist_reset(&h);
    for (int i = 0; i < 199; i++)
        cr_hist_record(&h, 100);
    cr_hist_record(&h, 2000000);
    assert_true(cr_hist_quantile(&h, 0.99) <= 112);
    assert_int_equal(h.max, 2000000);
    /* Exact below 16, never above max, no overflow at the top. */
    cr_hist_reset(&h);
    cr_hist_record(&h, 7);
    assert_int_equal(cr_hist_quantile(&h, 0.5), 7);
    cr_hist_record(&h, UINT64_MAX / 2);
    assert_int_equal(cr_hist_quantile(&h, 1.0), UINT64_MAX / 2);
}

static int parse(struct cr_wopts *o, char **argv);

/* The grammar itself is tested in tests/unit/common; here, that the worker
 * uses it with its ranges, and that --help states every range. */
static void options_sizes(void **state)
{
    struct cr_wopts o;
    assert_int_equal(parse(&o, (char *[]){"w", "--max-body", "64K", "--file-size", "2GiB",
                                          "--report-interval", "10s", "--drain-timeout", "250ms",
                                          NULL}),
                     0);
    assert_int_equal(o.max_body, 64 << 10);
    assert_int_equal(o.file_size, (uint64_t)2 << 30);
    assert_int_equal(o.report_interval_ms, 10000);
    assert_int_equal(o.drain_timeout_ms, 250);
    assert_int_equal(parse(&o, (char *[]){"w", "--keepalive-timeout", "3m", NULL}), 0);
    assert_int_equal(o.keepalive_timeout_ms, 180000);
    assert_int_equal(parse(&o, (char *[]){"w", "--max-body", "12X", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--max-body", "-1", NULL}), -EINVAL);
    /* strtoull would read " -1" as 2^64 - 1: "unlimited" by accident. */
    assert_int_equal(parse(&o, (char *[]){"w", "--exec-queue", " -1", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--max-body", "", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--max-body", "1.5M", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--max-body", "99999999999999999999G", NULL}),
                     -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--exec-concurrency", "5000", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--report-interval", "0", NULL}), -EINVAL);
}

static void options_messages(void **state)
{
    struct cr_wopts o;
    char err[200];
    char *argv[] = {"w", "--exec-concurrency", "5000", NULL};
    assert_int_equal(cr_wopts_parse(&o, 3, argv, 4, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "--exec-concurrency: '5000' is out of range (0 to 4096)");
    char *argv2[] = {"w", "--heap-limit", "12X", NULL};
    assert_int_equal(cr_wopts_parse(&o, 3, argv2, 4, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "--heap-limit: '12X' is not a size"));
    /* --help states each numeric option's range, as the table has it. */
    char range[80];
    const char *name;
    size_t i;
    for (i = 0; cr_wopts_range_text(i, &name, range, sizeof(range)) == 0; i++) {
        const char *line = strstr(cr_wopts_usage, name);
        assert_non_null(line);
        const char *next = strstr(line, "\n  --");
        const char *hit = strstr(line, range);
        if (!hit || (next && hit > next))
            fail_msg("--help does not state --%s's range %s", name, range);
    }
    assert_true(i >= 12);
}

static int parse(struct cr_wopts *o, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    char err[200];
    return cr_wopts_parse(o, argc, argv, 4, err, sizeof(err));
}

static void options_flags(void **state)
{
    struct cr_wopts o;
    unsetenv("CORRAL_HEAP_LIMIT");
    unsetenv("CORRAL_MEMORY_MAX");
    assert_int_equal(parse(&o, (char *[]){"w", NULL}), 0);
    assert_int_equal(o.heap_limit, 256u << 20);
    assert_int_equal(o.exec_concurrency, 4);
    assert_int_equal(o.exec_queue, 64);
    assert_int_equal(o.max_body, 1u << 20);
    setenv("CORRAL_MEMORY_MAX", "100M", 1);
    assert_int_equal(parse(&o, (char *[]){"w", NULL}), 0);
    assert_int_equal(o.heap_limit, 75u << 20);
    setenv("CORRAL_HEAP_LIMIT", "50M", 1);
    assert_int_equal(parse(&o, (char *[]){"w", NULL}), 0);
    assert_int_equal(o.heap_limit, 50u << 20);
    assert_int_equal(parse(&o, (char *[]){"w", "--heap-limit", "1G", "--listen", "127.0.0.1:8080",
                                          "--exec-concurrency", "0", NULL}),
                     0);
    assert_int_equal(o.heap_limit, 1u << 30);
    assert_string_equal(o.listen_host, "127.0.0.1");
    assert_int_equal(o.listen_port, 8080);
    assert_int_equal(o.exec_concurrency, 0);
    assert_int_equal(parse(&o, (char *[]){"w", "--listen", "[::1]:81", NULL}), 0);
    assert_string_equal(o.listen_host, "::1");
    assert_int_equal(parse(&o, (char *[]){"w", "--bogus", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--listen", "nohost", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--listen", "h:70000", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "--heap-limit", "0", NULL}), -EINVAL);
    assert_int_equal(parse(&o, (char *[]){"w", "extra", NULL}), -EINVAL);
    unsetenv("CORRAL_HEAP_LIMIT");
    unsetenv("CORRAL_MEMORY_MAX");
}

static void heap_accounting(void **state)
{
    struct cr_heap h;
    struct cr_heap_stats st;
    struct cr_heap_list keep = {0}, garbage = {0};
    struct cr_heap_chunk *c;
    cr_heap_init(&h, 8u << 20);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(cr_heap_alloc(&h, (1u << 20) - 4096, &c), 0);
        cr_heap_list_add(i < 2 ? &keep : &garbage, c);
    }
    cr_heap_stats(&h, &st);
    assert_int_equal(st.used, 4u << 20);
    assert_int_equal(st.total, 4u << 20);
    cr_heap_list_release(&h, &garbage);
    cr_heap_stats(&h, &st);
    assert_int_equal(st.used, 2u << 20);
    assert_true(st.total >= st.used); /* freed chunks may stay reserved */
    /* The limit is hard: nothing is allocated past it. */
    for (int i = 0; i < 6; i++) {
        assert_int_equal(cr_heap_alloc(&h, (1u << 20) - 4096, &c), 0);
        cr_heap_list_add(&keep, c);
    }
    assert_int_equal(cr_heap_alloc(&h, 1, &c), -ENOSPC);
    assert_int_equal(cr_heap_alloc(&h, SIZE_MAX - 10, &c), -ENOSPC);
    /* External memory is not heap. */
    assert_int_equal(cr_heap_alloc_external(&h, 3u << 20, &c), 0);
    cr_heap_stats(&h, &st);
    assert_int_equal(st.used, 8u << 20);
    assert_true(st.external >= 3u << 20);
    cr_heap_release(&h, c);
    cr_heap_list_release(&h, &keep);
    cr_heap_stats(&h, &st);
    assert_int_equal(st.used, 0);
    assert_int_equal(st.external, 0);
    cr_heap_done(&h);
    cr_heap_stats(&h, &st);
    assert_int_equal(st.total, 0);
}

static void bufpool_reuse(void **state)
{
    struct cr_bufpool bp;
    assert_int_equal(cr_bufpool_init(&bp, 1024, 2), 0);
    void *a = cr_bufpool_get(&bp), *b = cr_bufpool_get(&bp), *c = cr_bufpool_get(&bp);
    cr_bufpool_put(&bp, a);
    cr_bufpool_put(&bp, b);
    cr_bufpool_put(&bp, c); /* over keep: freed */
    assert_int_equal(bp.nfree, 2);
    void *d = cr_bufpool_get(&bp);
    assert_true(d == a || d == b);
    cr_bufpool_put(&bp, d);
    cr_bufpool_put(&bp, NULL);
    cr_bufpool_done(&bp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hist_quantiles), cmocka_unit_test(options_sizes),
        cmocka_unit_test(options_messages),
        cmocka_unit_test(options_flags),  cmocka_unit_test(heap_accounting),
        cmocka_unit_test(bufpool_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
