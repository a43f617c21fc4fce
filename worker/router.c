/* Routing, query validation and the endpoints that need no helpers. */
#include "router.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes %XX and '+' in place. Returns -EINVAL on a broken escape. */
static int unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (*r == '+') {
            *w++ = ' ';
        } else if (*r == '%') {
            int hi = hexval(r[1]), lo = hi < 0 ? -1 : hexval(r[2]);
            if (lo < 0)
                return -EINVAL;
            *w++ = (char)(hi * 16 + lo);
            r += 2;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    return 0;
}

static int query_parse(char *qs, struct cr_query *q, const char *const *allowed, char *err,
                       size_t errlen)
{
    q->n = 0;
    for (char *save = NULL, *tok = strtok_r(qs, "&", &save); tok;
         tok = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(tok, '=');
        char *val = eq ? (*eq = '\0', eq + 1) : tok + strlen(tok);
        if (unescape(tok) < 0 || unescape(val) < 0) {
            snprintf(err, errlen, "bad escape in query");
            return -EINVAL;
        }
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++)
            ok = strcmp(*a, tok) == 0;
        if (!ok) {
            snprintf(err, errlen, "unknown parameter '%.40s'", tok);
            return -EINVAL;
        }
        for (unsigned i = 0; i < q->n; i++) {
            if (strcmp(q->key[i], tok) == 0) {
                snprintf(err, errlen, "parameter '%.40s' given twice", tok);
                return -EINVAL;
            }
        }
        if (q->n == CR_QUERY_MAX) {
            snprintf(err, errlen, "too many parameters");
            return -EINVAL;
        }
        q->key[q->n] = tok;
        q->val[q->n++] = val;
    }
    return 0;
}

bool cr_query_uint(struct cr_req *req, const struct cr_query *q, const char *key, uint64_t min,
                   uint64_t max, uint64_t def, uint64_t *ret)
{
    for (unsigned i = 0; i < q->n; i++) {
        if (strcmp(q->key[i], key) != 0)
            continue;
        const char *v = q->val[i];
        char *end;
        errno = 0;
        unsigned long long n = strtoull(v, &end, 10);
        if (!*v || *v == '-' || *v == '+' || *v == ' ' || *end || errno || n < min || n > max) {
            char msg[160];
            snprintf(msg, sizeof(msg), "parameter '%s' must be an integer in %llu..%llu", key,
                     (unsigned long long)min, (unsigned long long)max);
            cr_req_error(req, 400, msg);
            return false;
        }
        *ret = n;
        return true;
    }
    *ret = def;
    return true;
}

static uint64_t now_us(void)
{
    return uv_hrtime() / 1000u;
}

/* ---- trivial endpoints ---- */

static void ep_light(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    cr_req_respond(req, 200, "text/plain", "ok\n", 3);
}

static void ep_health(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    cr_req_respondf(req, 200,
                    "{\"status\":\"%s\",\"pid\":%d,\"worker_id\":\"%s\",\"uptime_ms\":%llu}",
                    app->draining ? "draining" : "ok", (int)getpid(), app->worker_id,
                    (unsigned long long)((uv_hrtime() - app->start_ns) / 1000000u));
}

static void ep_counter(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    cr_req_respondf(req, 200, "{\"counter\":%llu,\"pid\":%d}", (unsigned long long)++app->counter,
                    (int)getpid());
}

/* Named in the worker's stack (not static, never inlined): a hang kill's
 * post-mortem says the loop was in here. */
__attribute__((noinline)) void cr_ep_heavy(struct cr_app *app, struct cr_req *req,
                                           const struct cr_query *q)
{
    uint64_t ms;
    if (!cr_query_uint(req, q, "ms", 0, 60000, 100, &ms))
        return;
    uint64_t start = uv_hrtime(), end = start + ms * 1000000u, now;
    volatile uint64_t spin = 0;
    /* Burn the loop on purpose: nothing else of this process runs now. */
    while ((now = uv_hrtime()) < end)
        for (int i = 0; i < 1000; i++)
            spin += (uint64_t)i;
    cr_req_respondf(req, 200, "{\"ms\":%llu,\"start_us\":%llu,\"end_us\":%llu}",
                    (unsigned long long)ms, (unsigned long long)(start / 1000u),
                    (unsigned long long)(now / 1000u));
}

/* The loop blocked without the CPU, as a synchronous driver call, a sync
 * read from slow storage or execSync block it: another worker serves
 * meanwhile whatever the core count, unlike /heavy. */
static void ep_sleepsync(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    (void)app;
    uint64_t ms;
    if (!cr_query_uint(req, q, "ms", 0, 60000, 100, &ms))
        return;
    uint64_t start = uv_hrtime();
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    cr_req_respondf(req, 200, "{\"ms\":%llu,\"slept_us\":%llu}", (unsigned long long)ms,
                    (unsigned long long)((uv_hrtime() - start) / 1000u));
}

struct slow_op {
    uv_timer_t timer;
    struct cr_req *req;
    uint64_t ms, start_us;
};

static void slow_closed(uv_handle_t *h)
{
    free(h->data);
}

static void slow_fire(uv_timer_t *t)
{
    struct slow_op *op = t->data;
    cr_req_respondf(op->req, 200, "{\"ms\":%llu,\"start_us\":%llu,\"end_us\":%llu}",
                    (unsigned long long)op->ms, (unsigned long long)op->start_us,
                    (unsigned long long)now_us());
    uv_close((uv_handle_t *)t, slow_closed);
}

static void ep_slow(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    uint64_t ms;
    if (!cr_query_uint(req, q, "ms", 0, 600000, 100, &ms))
        return;
    struct slow_op *op = calloc(1, sizeof(*op));
    if (!op) {
        cr_req_error(req, 500, "out of memory");
        return;
    }
    op->req = req;
    op->ms = ms;
    op->start_us = now_us();
    uv_timer_init(app->loop, &op->timer);
    op->timer.data = op;
    uv_timer_start(&op->timer, slow_fire, ms, 0);
}

static void ep_metrics(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    char *buf;
    int n = cr_metrics_render(app, &buf);
    if (n < 0) {
        cr_req_error(req, 500, "out of memory");
        return;
    }
    cr_req_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", buf, (size_t)n);
    free(buf);
}

static void ep_memory(struct cr_app *app, struct cr_req *req, const struct cr_query *q)
{
    char buf[512];
    cr_ep_memory_json(app, buf, sizeof(buf));
    cr_req_respondf(req, 200, "%s", buf);
}

/* ---- dispatch ---- */

enum route_id {
    R_LIGHT,
    R_HEALTH,
    R_COUNTER,
    R_HEAVY,
    R_SLEEPSYNC,
    R_SLOW,
    R_HASH,
    R_HASHSYNC,
    R_FILE,
    R_JSON,
    R_ALLOC,
    R_BUFFER,
    R_FREE,
    R_EXEC,
    R_METRICS,
    R_MEMORY
};

struct route {
    const char *path;
    enum route_id id;
    bool post; /* POST only, else GET/HEAD only */
    const char *params[3];
};

static const struct route routes[] = {
    {"/light", R_LIGHT, false, {NULL}},
    {"/health", R_HEALTH, false, {NULL}},
    {"/counter", R_COUNTER, false, {NULL}},
    {"/heavy", R_HEAVY, false, {"ms", NULL}},
    {"/sleepsync", R_SLEEPSYNC, false, {"ms", NULL}},
    {"/slow", R_SLOW, false, {"ms", NULL}},
    {"/hash", R_HASH, false, {"iter", NULL}},
    {"/hashsync", R_HASHSYNC, false, {"iter", NULL}},
    {"/file", R_FILE, false, {"mb", NULL}},
    {"/json", R_JSON, true, {NULL}},
    {"/alloc", R_ALLOC, false, {"mb", "retain", NULL}},
    {"/buffer", R_BUFFER, false, {"mb", "retain", NULL}},
    {"/free", R_FREE, false, {NULL}},
    {"/exec", R_EXEC, false, {"ms", NULL}},
    {"/metrics", R_METRICS, false, {NULL}},
    {"/memory", R_MEMORY, false, {NULL}},
};

static void run(struct cr_app *app, struct cr_req *req, const struct route *rt, struct cr_query *q)
{
    switch (rt->id) {
    case R_LIGHT:
        ep_light(app, req, q);
        break;
    case R_HEALTH:
        ep_health(app, req, q);
        break;
    case R_COUNTER:
        ep_counter(app, req, q);
        break;
    case R_HEAVY:
        cr_ep_heavy(app, req, q);
        break;
    case R_SLEEPSYNC:
        ep_sleepsync(app, req, q);
        break;
    case R_SLOW:
        ep_slow(app, req, q);
        break;
    case R_HASH:
        cr_ep_hash(app, req, q, false);
        break;
    case R_HASHSYNC:
        cr_ep_hash(app, req, q, true);
        break;
    case R_FILE:
        cr_ep_file(app, req, q);
        break;
    case R_JSON:
        cr_ep_json(app, req);
        break;
    case R_ALLOC:
        cr_ep_alloc(app, req, q, false);
        break;
    case R_BUFFER:
        cr_ep_alloc(app, req, q, true);
        break;
    case R_FREE:
        cr_ep_free(app, req);
        break;
    case R_EXEC:
        cr_ep_exec(app, req, q);
        break;
    case R_METRICS:
        ep_metrics(app, req, q);
        break;
    case R_MEMORY:
        ep_memory(app, req, q);
        break;
    }
}

void cr_router_handle(struct cr_req *req, void *ud)
{
    struct cr_app *app = ud;
    const struct route *rt = NULL;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]) && !rt; i++)
        if (strcmp(routes[i].path, req->path) == 0)
            rt = &routes[i];
    if (!rt) {
        cr_req_error(req, 404, "no such endpoint");
        return;
    }
    bool get = strcmp(req->method, "GET") == 0 || req->head;
    if (rt->post ? strcmp(req->method, "POST") != 0 : !get) {
        cr_req_set_header(req, rt->post ? "Allow: POST" : "Allow: GET, HEAD");
        cr_req_error(req, 405, "method not allowed");
        return;
    }
    struct cr_query q;
    char err[128];
    if (query_parse(req->query, &q, rt->params, err, sizeof(err)) < 0) {
        cr_req_error(req, 400, err);
        return;
    }
    run(app, req, rt, &q);
}
