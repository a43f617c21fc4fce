/* The Prometheus HTTP listener: accept, parse one request with the shared
 * parser wrapper (common/http_parse.h), answer, close. Bounded: request size, connections, time.
 * Besides /metrics: /livez (the loop answers) and /readyz (cr_view_ready),
 * for an orchestrator's probes. */
#include "metrics_http.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "http_parse.h"
#include "listen.h"
#include "metrics.h"
#include "view.h"

struct conn {
    struct cr_metrics_http *m;
    struct conn *next;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    uv_shutdown_t shut;
    struct cr_http_parse *parser;
    size_t seen;      /* request bytes read */
    char url[256];
    size_t url_len;
    bool url_long;
    bool answered;
    bool closing;
    int handles;
    char *out;  /* the response head */
    char *body; /* an allocated body (the metrics), written after it */
};

struct cr_metrics_http {
    const struct cr_supervisor *sup;
    uv_tcp_t server;
    struct conn *conns;
    unsigned nconns;
    bool closing;
};

static void conn_freed(uv_handle_t *h)
{
    struct conn *c = h->data;
    if (--c->handles == 0) {
        cr_http_parse_free(c->parser);
        free(c->out);
        free(c->body);
        free(c);
    }
}

static void conn_close(struct conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    for (struct conn **pp = &c->m->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    c->m->nconns--;
    uv_close((uv_handle_t *)&c->timer, conn_freed);
    uv_close((uv_handle_t *)&c->tcp, conn_freed);
}

static void on_shutdown(uv_shutdown_t *req, int status)
{
    (void)status;
    conn_close(req->data);
}

static void on_written(uv_write_t *req, int status)
{
    struct conn *c = req->data;
    if (status < 0 || c->closing ||
        uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) < 0)
        conn_close(c);
}

/* Sends one whole response and closes after it (Connection: close). The
 * body goes out as it is, after the head: copying 200 KiB of metrics into
 * one buffer with the head cost as much as the write. It must live until
 * the connection is freed (a literal, or c->body). */
static void respond(struct conn *c, int code, const char *reason, const char *type,
                    const char *body, bool head_only)
{
    size_t blen = strlen(body);
    c->answered = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    int n = asprintf(&c->out,
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     code, reason, type, blen);
    if (n < 0) {
        c->out = NULL;
        conn_close(c);
        return;
    }
    uv_buf_t b[2] = {uv_buf_init(c->out, (unsigned)n), uv_buf_init((char *)body, (unsigned)blen)};
    c->wr.data = c->shut.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, b, head_only ? 1 : 2, on_written) < 0)
        conn_close(c);
}

static int on_url(void *ud, const char *at, size_t len)
{
    struct conn *c = ud;
    if (c->url_len + len >= sizeof(c->url)) {
        c->url_long = true;
        return 0;
    }
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    c->url[c->url_len] = '\0';
    return 0;
}

static void route(struct conn *c)
{
    const char *text = "text/plain; charset=utf-8";
    const char *method = cr_http_parse_method(c->parser);
    bool head = strcmp(method, "HEAD") == 0;
    size_t plen = strcspn(c->url, "?#");
    if (c->url_long) {
        respond(c, 414, "URI Too Long", text, "URI too long\n", head);
        return;
    }
    enum { METRICS, LIVEZ, READYZ, NONE } path = NONE;
    static const char *const paths[] = {"/metrics", "/livez", "/readyz"};
    for (int i = 0; i < 3; i++)
        if (plen == strlen(paths[i]) && strncmp(c->url, paths[i], plen) == 0)
            path = i;
    if (path == NONE) {
        respond(c, 404, "Not Found", text, "corrald serves /metrics, /livez and /readyz\n", head);
        return;
    }
    if (strcmp(method, "GET") != 0 && !head) {
        respond(c, 405, "Method Not Allowed", text, "GET or HEAD\n", false);
        return;
    }
    if (path == LIVEZ) {
        /* The loop that answers this is the loop that supervises. */
        respond(c, 200, "OK", text, "alive\n", head);
        return;
    }
    if (path == READYZ) {
        struct cr_supervisor_view v;
        char why[160];
        cr_view_supervisor(c->m->sup, &v);
        bool ok = cr_view_ready(&v, NULL, why, sizeof why);
        if (asprintf(&c->body, "%s\n", why) < 0) {
            c->body = NULL;
            conn_close(c);
            return;
        }
        if (ok)
            respond(c, 200, "OK", text, c->body, head);
        else
            respond(c, 503, "Service Unavailable", text, c->body, head);
        return;
    }
    c->body = cr_metrics_text(c->m->sup);
    if (!c->body) {
        respond(c, 500, "Internal Server Error", text, "metrics rendering failed\n", head);
        return;
    }
    respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", c->body, head);
}

static int on_headers_complete(void *ud)
{
    /* The head is all a scrape needs; a body is neither expected nor read:
     * stopping here ends parsing, and on_read sees the answer. */
    route(ud);
    return 1;
}

static const struct cr_http_parse_cbs parse_cbs = {
    .on_url = on_url,
    .on_headers_complete = on_headers_complete,
};

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    static char slab[4096];
    (void)h;
    (void)hint;
    *buf = uv_buf_init(slab, sizeof(slab));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct conn *c = s->data;
    if (c->closing || c->answered)
        return;
    if (n < 0) {
        conn_close(c);
        return;
    }
    c->seen += (size_t)n;
    size_t used;
    int r = cr_http_parse_feed(c->parser, b->base, (size_t)n, &used);
    if (c->answered || c->closing)
        return;
    const char *text = "text/plain; charset=utf-8";
    if (r < 0 || used != (size_t)n)
        respond(c, 400, "Bad Request", text, "bad request\n", false);
    else if (c->seen > CR_METRICS_HTTP_MAX_REQUEST)
        respond(c, 431, "Request Header Fields Too Large", text, "request too large\n", false);
}

static void on_timeout(uv_timer_t *t)
{
    conn_close(t->data);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct cr_metrics_http *m = server->data;
    if (status < 0 || m->closing)
        return;
    struct conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->m = m;
    uv_tcp_init(server->loop, &c->tcp);
    uv_timer_init(server->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    c->next = m->conns;
    m->conns = c;
    m->nconns++;
    c->parser = cr_http_parse_new(&parse_cbs, c);
    if (!c->parser || uv_accept(server, (uv_stream_t *)&c->tcp) < 0 ||
        m->nconns > CR_METRICS_HTTP_MAX_CLIENTS) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, CR_METRICS_HTTP_TIMEOUT_MS, 0);
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, on_read) < 0)
        conn_close(c);
}

static int parse_addr(const char *hostport, struct sockaddr_storage *ss)
{
    char host[64], port[16];
    int r = cr_listen_split(hostport, host, sizeof(host), port, sizeof(port));
    if (r < 0)
        return r;
    char *end;
    unsigned long p = strtoul(port, &end, 10);
    if (!*port || *end || p > 65535)
        return -EINVAL;
    if (uv_ip4_addr(host, (int)p, (struct sockaddr_in *)ss) == 0)
        return 0;
    return uv_ip6_addr(host, (int)p, (struct sockaddr_in6 *)ss);
}

static void server_closed(uv_handle_t *h)
{
    free(h->data);
}

int cr_metrics_http_open(uv_loop_t *loop, const char *listen, const struct cr_supervisor *sup,
                         struct cr_metrics_http **ret)
{
    struct sockaddr_storage ss;
    int r = parse_addr(listen, &ss);
    if (r < 0)
        return r;
    struct cr_metrics_http *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    m->sup = sup;
    uv_tcp_init(loop, &m->server);
    m->server.data = m;
    /* libuv sets SO_REUSEADDR and CLOEXEC on the socket it makes. */
    r = uv_tcp_bind(&m->server, (const struct sockaddr *)&ss, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&m->server, 32, on_connection);
    if (r < 0) {
        uv_close((uv_handle_t *)&m->server, server_closed);
        return r;
    }
    *ret = m;
    return 0;
}

void cr_metrics_http_addr(const struct cr_metrics_http *m, char *buf, size_t len)
{
    uv_os_fd_t fd = -1;
    if (uv_fileno((const uv_handle_t *)&m->server, &fd) < 0)
        fd = -1;
    cr_listen_describe(fd, buf, len);
}

void cr_metrics_http_close(struct cr_metrics_http *m)
{
    if (!m || m->closing)
        return;
    m->closing = true;
    while (m->conns)
        conn_close(m->conns);
    uv_close((uv_handle_t *)&m->server, server_closed);
}
