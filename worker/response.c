/* Answers: formatting, in-order writes of pipelined responses, orphans. */
#include "server_int.h"

#include <stdarg.h>
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

/* The Date header changes once a second; format it only then. */
static const char *http_date(void)
{
    static char buf[64];
    static time_t last = -1;
    time_t now = time(NULL);
    if (now != last) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(buf, sizeof(buf), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        last = now;
    }
    return buf;
}

void cr_req_free(struct cr_req *req)
{
    if (!req)
        return;
    if (req->on_free)
        req->on_free(req->on_free_arg);
    free(req->wbuf.base);
    free(req->url);
    free(req->body);
    free(req);
}

static void write_cb(uv_write_t *wr, int status)
{
    struct cr_req *req = wr->data;
    struct cr_conn *c = req->conn;
    /* Writes complete in order, so req is the head. */
    c->head = req->next;
    if (!c->head)
        c->tail = NULL;
    c->depth--;
    cr_req_free(req);
    if (c->state == CONN_CLOSED)
        return;
    if (status < 0) {
        cr_conn_close(c);
        return;
    }
    cr_conn_after_write(c);
}

void cr_conn_flush(struct cr_conn *c)
{
    for (struct cr_req *r = c->head; r; r = r->next) {
        if (r->written)
            continue;
        if (!r->responded)
            return;
        r->written = true;
        r->wr.data = r;
        if (uv_write(&r->wr, (uv_stream_t *)&c->tcp, &r->wbuf, 1, write_cb) < 0) {
            r->written = false;
            cr_conn_close(c);
            return;
        }
    }
}

/* Formats head and body into one buffer: one write, one syscall. */
static int format(struct cr_req *req, int status, const char *ctype, const char *body, size_t len)
{
    struct cr_server *srv = req->srv;
    char head[512];
    int n =
        snprintf(head, sizeof(head),
                 "HTTP/1.1 %d %s\r\nDate: %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                 "X-Worker-Id: %s\r\nX-Worker-Pid: %s\r\nConnection: %s\r\n%s%s\r\n",
                 status, reason(status), http_date(), ctype, len, srv->cfg.worker_id, srv->pid,
                 req->keep_alive ? "keep-alive" : "close", req->extra, req->extra[0] ? "\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof(head))
        return -1;
    size_t blen = req->head ? 0 : len;
    char *buf = malloc((size_t)n + blen);
    if (!buf)
        return -1;
    memcpy(buf, head, (size_t)n);
    if (blen)
        memcpy(buf + n, body, blen);
    req->wbuf = uv_buf_init(buf, (unsigned)((size_t)n + blen));
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
    if (!r) {
        r = calloc(1, sizeof(*r));
        if (!r) {
            cr_conn_close(c);
            return;
        }
        r->srv = c->srv;
        r->conn = c;
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
    uv_timer_stop(&c->timer);
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    cr_req_error(r, status, msg);
}
