/* Answers: formatting, in-order writes of pipelined responses, orphans. */
#include "server_int.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

/* The whole Date header line changes once a second; format it only then
 * (time() is a vDSO read of the kernel's coarse clock, no system call). */
static const char *http_date(size_t *ret_len)
{
    static char buf[64];
    static size_t len;
    static time_t last = -1;
    time_t now = time(NULL);
    if (now != last) {
        struct tm tm;
        gmtime_r(&now, &tm);
        len = strftime(buf, sizeof(buf), "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        last = now;
    }
    *ret_len = len;
    return buf;
}

/* Requests are recycled through a short per-server list: a keep-alive
 * request then costs no allocation at all when its URL and its response
 * fit the inline buffers. */
#define SPARE_MAX 64

struct cr_req *cr_req_new(struct cr_conn *c)
{
    struct cr_server *srv = c->srv;
    struct cr_req *r = srv->spare;
    if (r) {
        srv->spare = r->spare_next;
        srv->nspare--;
        memset(r, 0, offsetof(struct cr_req, url_small));
    } else if (!(r = calloc(1, sizeof(*r)))) {
        return NULL;
    }
    r->srv = srv;
    r->conn = c;
    return r;
}

void cr_req_free(struct cr_req *req)
{
    if (!req)
        return;
    cr_server_request_done(req->srv, req); /* one never answered: not served any more */
    if (req->on_free)
        req->on_free(req->on_free_arg);
    if (req->wbuf.base != req->out_small)
        free(req->wbuf.base);
    if (req->url != req->url_small)
        free(req->url);
    free(req->body);
    struct cr_server *srv = req->srv;
    if (srv->nspare < SPARE_MAX) {
        req->spare_next = srv->spare;
        srv->spare = req;
        srv->nspare++;
        return;
    }
    free(req);
}

void cr_req_spares_free(struct cr_server *srv)
{
    while (srv->spare) {
        struct cr_req *r = srv->spare;
        srv->spare = r->spare_next;
        free(r);
    }
    srv->nspare = 0;
}

/* Writes complete in order, so a written request is the head. */
static void pop_written(struct cr_conn *c, struct cr_req *req)
{
    c->head = req->next;
    if (!c->head)
        c->tail = NULL;
    c->depth--;
    cr_req_free(req);
}

static void write_cb(uv_write_t *wr, int status)
{
    struct cr_req *req = wr->data;
    struct cr_conn *c = req->conn;
    c->writes--;
    pop_written(c, req);
    if (c->state == CONN_CLOSED)
        return;
    if (status < 0) {
        cr_conn_close(c);
        return;
    }
    cr_conn_after_write(c);
}

/* Writes the answered requests at the head of the queue, in order. With
 * nothing of this connection in flight, an answer is first tried straight
 * on the socket (uv_try_write): a small response leaves in one write(2) and
 * is done here, with no write request, no callback and no epoll_ctl (a
 * completed uv_write re-registers the socket with epoll, one extra system
 * call per response). Whatever the socket does not take goes to uv_write. */
void cr_conn_flush(struct cr_conn *c)
{
    bool done = false;
    struct cr_req *r = c->head;
    while (r && c->state != CONN_CLOSED) {
        if (r->written) { /* in flight */
            r = r->next;
            continue;
        }
        if (!r->responded)
            break;
        size_t skip = 0;
        if (c->writes == 0) {
            int n = uv_try_write((uv_stream_t *)&c->tcp, &r->wbuf, 1);
            if (n >= 0 && (size_t)n == r->wbuf.len) {
                struct cr_req *next = r->next;
                pop_written(c, r);
                done = true;
                r = next;
                continue;
            }
            if (n < 0 && n != UV_EAGAIN) {
                cr_conn_close(c);
                return;
            }
            skip = n > 0 ? (size_t)n : 0;
        }
        uv_buf_t rest = uv_buf_init(r->wbuf.base + skip, (unsigned)(r->wbuf.len - skip));
        r->wr.data = r;
        if (uv_write(&r->wr, (uv_stream_t *)&c->tcp, &rest, 1, write_cb) < 0) {
            cr_conn_close(c);
            return;
        }
        r->written = true;
        c->writes++;
        r = r->next;
    }
    if (done && c->state != CONN_CLOSED)
        cr_conn_after_write(c);
}

/* A bounded appender: the head is built from pieces with memcpy, not
 * printf, since it is formatted once per response. */
struct out {
    char *p, *end;
    bool full;
};

static void put(struct out *o, const char *s, size_t n)
{
    if ((size_t)(o->end - o->p) < n) {
        o->full = true;
        return;
    }
    memcpy(o->p, s, n);
    o->p += n;
}

#define PUT_LIT(o, lit) put(o, lit, sizeof(lit) - 1)

static void put_uint(struct out *o, uint64_t v)
{
    char d[24];
    size_t i = sizeof(d);
    do
        d[--i] = (char)('0' + v % 10);
    while (v /= 10);
    put(o, d + i, sizeof(d) - i);
}

static void put_str(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Formats head and body into one buffer (inline when it fits): one write,
 * one system call. */
static int format(struct cr_req *req, int status, const char *ctype, const char *body, size_t len)
{
    struct cr_server *srv = req->srv;
    char head[512];
    struct out o = {head, head + sizeof(head), false};
    size_t dlen;
    const char *date = http_date(&dlen);
    PUT_LIT(&o, "HTTP/1.1 ");
    put_uint(&o, (uint64_t)(status >= 100 && status <= 999 ? status : 500));
    PUT_LIT(&o, " ");
    put_str(&o, reason(status));
    PUT_LIT(&o, "\r\n");
    put(&o, date, dlen);
    PUT_LIT(&o, "Content-Type: ");
    put_str(&o, ctype);
    PUT_LIT(&o, "\r\nContent-Length: ");
    put_uint(&o, len);
    PUT_LIT(&o, "\r\n");
    put(&o, srv->ident, srv->ident_len);
    if (req->keep_alive)
        PUT_LIT(&o, "Connection: keep-alive\r\n");
    else
        PUT_LIT(&o, "Connection: close\r\n");
    if (req->extra[0]) {
        put_str(&o, req->extra);
        PUT_LIT(&o, "\r\n");
    }
    PUT_LIT(&o, "\r\n");
    if (o.full)
        return -1;
    size_t n = (size_t)(o.p - head);
    size_t blen = req->head ? 0 : len;
    char *buf = n + blen <= sizeof(req->out_small) ? req->out_small : malloc(n + blen);
    if (!buf)
        return -1;
    memcpy(buf, head, n);
    if (blen)
        memcpy(buf + n, body, blen);
    req->wbuf = uv_buf_init(buf, (unsigned)(n + blen));
    return 0;
}

void cr_req_respond(struct cr_req *req, int status, const char *ctype, const char *body, size_t len)
{
    struct cr_server *srv = req->srv;
    struct cr_conn *c = req->conn;
    if (req->responded)
        return;
    req->responded = true;
    req->status = status;
    srv->stats.inflight--;
    cr_server_request_done(srv, req);
    if (status > 0 && status < 600)
        srv->stats.by_status[status]++;
    if (!c) {
        cr_req_free(req);
        cr_server_check_drained(srv);
        return;
    }
    /* While draining, the last queued answer closes the connection. */
    if (srv->draining && !req->next && !c->cur)
        req->keep_alive = false;
    if (format(req, status, ctype, body, len) < 0) {
        cr_conn_close(c);
        return;
    }
    if (!req->keep_alive && c->state == CONN_OPEN) {
        c->state = CONN_CLOSING;
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    cr_conn_flush(c);
}

void cr_req_respondf(struct cr_req *req, int status, const char *fmt, ...)
{
    char small[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        cr_req_respond(req, 500, "text/plain", "format error\n", 13);
        return;
    }
    if ((size_t)n < sizeof(small) - 1) {
        small[n++] = '\n';
        cr_req_respond(req, status, "application/json", small, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 2);
    if (!big) {
        cr_req_respond(req, 500, "text/plain", "out of memory\n", 14);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    big[n++] = '\n';
    cr_req_respond(req, status, "application/json", big, (size_t)n);
    free(big);
}

void cr_req_error(struct cr_req *req, int status, const char *msg)
{
    /* msg comes from us or the parser, never from the client: no escaping
     * beyond quotes is needed, but keep them out anyway. */
    char clean[200];
    size_t i = 0;
    for (; msg[i] && i < sizeof(clean) - 1; i++)
        clean[i] =
            (msg[i] == '"' || msg[i] == '\\' || (unsigned char)msg[i] < 0x20) ? '\'' : msg[i];
    clean[i] = '\0';
    cr_req_respondf(req, status, "{\"error\":\"%s\",\"status\":%d}", clean, status);
}

void cr_req_set_header(struct cr_req *req, const char *line)
{
    snprintf(req->extra, sizeof(req->extra), "%s", line);
}

void cr_req_on_free(struct cr_req *req, void (*fn)(void *), void *arg)
{
    req->on_free = fn;
    req->on_free_arg = arg;
}

void cr_conn_fail(struct cr_conn *c, int status, const char *msg)
{
    struct cr_req *r = c->cur;
    c->cur = NULL;
    if (!r && !(r = cr_req_new(c))) {
        cr_conn_close(c);
        return;
    }
    r->method = r->method ? r->method : "GET";
    r->keep_alive = false;
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->depth++;
    c->srv->stats.inflight++; /* balanced by cr_req_respond */
    c->state = CONN_CLOSING;
    c->timer_kind = TIMER_NONE;
    c->timer_due = 0;
    uv_timer_stop(&c->timer);
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    cr_req_error(r, status, msg);
}
