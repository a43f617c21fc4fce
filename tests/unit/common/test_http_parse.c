/* The HTTP parser wrapper (common/http_parse.c) over whichever library the
 * build found: http-parser on Debian 12, llhttp on Debian 13 (scripts/test
 * runs this in a Debian 13 root too). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http_parse.h"

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

/* corrald's metrics listener registers two callbacks and stops in the
 * head: NULL callbacks must be skipped, a non-zero return must stop. */
struct head {
    char url[64];
    int heads;
};

static int h_url(void *ud, const char *at, size_t len)
{
    struct head *h = ud;
    strncat(h->url, at, len < sizeof(h->url) - strlen(h->url) - 1 ? len : 0);
    return 0;
}

static int h_headers(void *ud)
{
    ((struct head *)ud)->heads++;
    return 1;
}

static void http_sparse_callbacks(void **state)
{
    static const struct cr_http_parse_cbs cbs = {.on_url = h_url, .on_headers_complete = h_headers};
    struct head h = {0};
    struct cr_http_parse *p = cr_http_parse_new(&cbs, &h);
    assert_non_null(p);
    const char in[] = "HEAD /metrics?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody";
    size_t used;
    assert_int_equal(cr_http_parse_feed(p, in, sizeof(in) - 1, &used), -EBADMSG);
    assert_int_equal(h.heads, 1);
    assert_string_equal(h.url, "/metrics?x=1");
    assert_string_equal(cr_http_parse_method(p), "HEAD");
    assert_true(used < sizeof(in) - 1);
    assert_null(cr_http_parse_free(p));

    /* No callbacks at all: a whole request parses. */
    static const struct cr_http_parse_cbs none = {0};
    p = cr_http_parse_new(&none, NULL);
    const char get[] = "GET / HTTP/1.1\r\nContent-Length: 2\r\n\r\nok";
    assert_int_equal(cr_http_parse_feed(p, get, sizeof(get) - 1, &used), 0);
    assert_int_equal(used, sizeof(get) - 1);
    assert_int_equal(cr_http_parse_finish(p), 0);
    cr_http_parse_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(http_wrapper),
        cmocka_unit_test(http_sparse_callbacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
