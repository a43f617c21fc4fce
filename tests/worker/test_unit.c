/* Unit tests of corral-worker's pure modules: loop-delay histogram, flag
 * parsing, heap accounting, the HTTP parser wrapper, the buffer pool. */
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
#include "http_parse.h"
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
     * (lesson 4). */
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

static void options_sizes(void **state)
{
    size_t v;
    uint64_t ms;
    assert_int_equal(cr_wopts_parse_size("64K", &v), 0);
    assert_int_equal(v, 64 << 10);
    assert_int_equal(cr_wopts_parse_size("256M", &v), 0);
    assert_int_equal(v, 256u << 20);
    assert_int_equal(cr_wopts_parse_size("2GiB", &v), 0);
    assert_int_equal(v, (size_t)2 << 30);
    assert_int_equal(cr_wopts_parse_size("12X", &v), -EINVAL);
    assert_int_equal(cr_wopts_parse_size("-1", &v), -EINVAL);
    assert_int_equal(cr_wopts_parse_size("", &v), -EINVAL);
    assert_int_equal(cr_wopts_parse_size("99999999999999999999G", &v), -EINVAL);
    assert_int_equal(cr_wopts_parse_ms("10s", &ms), 0);
    assert_int_equal(ms, 10000);
    assert_int_equal(cr_wopts_parse_ms("250ms", &ms), 0);
    assert_int_equal(ms, 250);
    assert_int_equal(cr_wopts_parse_ms("3m", &ms), -EINVAL);
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

struct rec {
    int begins, completes;
    char url[256];
    char body[256];
    size_t body_len;
    int pause_after;
    struct cr_http_parse *p;
};

static int r_begin(void *ud)
{
    ((struct rec *)ud)->begins++;
    return 0;
}
static int r_url(void *ud, const char *at, size_t len)
{
    struct rec *r = ud;
    strncat(r->url, at, len < sizeof(r->url) - strlen(r->url) - 1 ? len : 0);
    return 0;
}
static int r_hv(void *ud, const char *at, size_t len)
{
    return 0;
}
static int r_headers(void *ud)
{
    return 0;
}
static int r_body(void *ud, const char *at, size_t len)
{
    struct rec *r = ud;
    memcpy(r->body + r->body_len, at, len);
    r->body_len += len;
    return 0;
}
static int r_complete(void *ud)
{
    struct rec *r = ud;
    if (++r->completes == r->pause_after)
        cr_http_parse_pause(r->p);
    return 0;
}

static const struct cr_http_parse_cbs rcbs = {r_begin,   r_url,  r_hv,      r_hv,
                                              r_headers, r_body, r_complete, NULL};

static void http_wrapper(void **state)
{
    struct rec r = {.pause_after = 1};
    r.p = cr_http_parse_new(&rcbs, &r);
    const char in[] =
        "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
        "POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    size_t used;
    assert_int_equal(cr_http_parse_feed(r.p, in, sizeof(in) - 1, &used), -EAGAIN);
    assert_int_equal(r.completes, 1);
    assert_string_equal(cr_http_parse_method(r.p), "GET");
    assert_true(cr_http_parse_keep_alive(r.p));
    cr_http_parse_resume(r.p);
    size_t used2;
    assert_int_equal(cr_http_parse_feed(r.p, in + used, sizeof(in) - 1 - used, &used2), 0);
    assert_int_equal(used + used2, sizeof(in) - 1);
    assert_int_equal(r.completes, 2);
    assert_string_equal(r.url, "/a/b");
    assert_int_equal(r.body_len, 5);
    assert_memory_equal(r.body, "abcde", 5);
    assert_true(cr_http_parse_chunked(r.p));
    cr_http_parse_free(r.p);

    struct rec bad = {0};
    bad.p = cr_http_parse_new(&rcbs, &bad);
    assert_int_equal(cr_http_parse_feed(bad.p, "\x16\x03garbage\r\n\r\n", 13, &used), -EBADMSG);
    assert_non_null(cr_http_parse_error(bad.p));
    cr_http_parse_free(bad.p);

    struct rec cut = {0};
    uint64_t cl;
    cut.p = cr_http_parse_new(&rcbs, &cut);
    const char part[] = "POST /c HTTP/1.0\r\nContent-Length: 10\r\n\r\n";
    assert_int_equal(cr_http_parse_feed(cut.p, part, sizeof(part) - 1, &used), 0);
    assert_int_equal(cr_http_parse_content_length(cut.p, &cl), 0);
    assert_int_equal(cl, 10);
    assert_int_equal(cr_http_parse_feed(cut.p, "abc", 3, &used), 0);
    assert_false(cr_http_parse_keep_alive(cut.p));
    assert_int_equal(cr_http_parse_version(cut.p), 10);
    assert_int_equal(cr_http_parse_finish(cut.p), -EBADMSG);
    cr_http_parse_free(cut.p);
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
        cmocka_unit_test(options_flags),  cmocka_unit_test(heap_accounting),
        cmocka_unit_test(http_wrapper),   cmocka_unit_test(bufpool_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
