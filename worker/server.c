/* Connections: accept, read, parse, timeouts, shutdown and drain. Answers
 * and ordered writes live in response.c. */
#include "server_int.h"
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#define READ_BUF_SIZE (64 * 1024)
#define LINGER_MS     1000
/* A draining worker leaves an idle keep-alive connection open this long, so
 * a request already on its way is answered (with Connection: close) rather
 * than met by a close: far longer than a request's flight, far shorter than
 * the drain timeout. */
#define DRAIN_GRACE_MS 1000
/* An idle timeout that finds input waiting is not idle: look again soon. */
#define INPUT_WAIT_MS 50

static int p_begin(void *ud);
static int p_url(void *ud, const char *at, size_t len);
static int p_field(void *ud, const char *at, size_t len);
static int p_value(void *ud, const char *at, size_t len);
static int p_headers(void *ud);
static int p_chunk(void *ud, uint64_t size);
static int p_body(void *ud, const char *at, size_t len);
static int p_complete(void *ud);

static const struct cr_http_parse_cbs parse_cbs = {
    .on_begin = p_begin,
    .on_url = p_url,
    .on_header_field = p_field,
    .on_header_value = p_value,
    .on_headers_complete = p_headers,
    .on_body = p_body,
    .on_complete = p_complete,
    .on_chunk_header = p_chunk,
};

static void arm(struct cr_conn *c, enum timer_kind kind, uint64_t ms);
static void read_start(struct cr_conn *c);

/* How long an idle connection stays open: the keep-alive timeout, cut to
 * the drain grace once draining (a timeout of 0, "never", included). */
static uint64_t idle_ms(const struct cr_server *srv)
{
    uint64_t ka = srv->cfg.keepalive_timeout_ms;
    if (srv->draining && (ka == 0 || ka > DRAIN_GRACE_MS))
        return DRAIN_GRACE_MS;
    return ka;
}

int cr_server_new(uv_loop_t *loop, const struct cr_server_config *cfg, cr_server_handler handler,
                  void *ud, struct cr_server **ret_srv)
{
    struct cr_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    int r = cr_bufpool_init(&srv->reads, READ_BUF_SIZE, 16);
    if (r < 0) {
        free(srv);
        return r;
    }
    srv->loop = loop;
    srv->cfg = *cfg;
    if (srv->cfg.max_pipeline == 0)
        srv->cfg.max_pipeline = 1;
    srv->handler = handler;
    srv->ud = ud;
    snprintf(srv->pid, sizeof(srv->pid), "%d", (int)getpid());
    /* The headers every response carries, formatted once. */
    int n = snprintf(srv->ident, sizeof(srv->ident), "X-Worker-Id: %s\r\nX-Worker-Pid: %s\r\n",
                     cfg->worker_id ? cfg->worker_id : "0", srv->pid);
    srv->ident_len = n > 0 && (size_t)n < sizeof(srv->ident) ? (size_t)n : 0;
    *ret_srv = srv;
    return 0;
}

/* ---- connection lifecycle ---- */

static void conn_free(struct cr_conn *c)
{
    struct cr_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->stats.connections--;
    if (c->cur)
        cr_req_free(c->cur);
    cr_http_parse_free(c->hp);
    free(c->pending);
    free(c);
    cr_server_check_drained(srv);
}

static void close_cb(uv_handle_t *h)
{
    struct cr_conn *c = h->data;
    if (--c->open_handles == 0)
        conn_free(c);
}

void cr_conn_close(struct cr_conn *c)
{
    if (c->state == CONN_CLOSED)
        return;
    c->state = CONN_CLOSED;
    /* Answered-but-unwritten requests go now; unanswered ones become orphans
     * that their handler frees when it answers. Written ones are freed by
     * their (cancelled) write callbacks, which libuv runs before close_cb. */
    struct cr_req **pp = &c->head;
    while (*pp) {
        struct cr_req *r = *pp;
        if (r->written) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        c->depth--;
        if (r->responded) {
            cr_req_free(r);
        } else {
            r->conn = NULL;
            r->next = NULL;
        }
    }
    c->tail = NULL;
    for (struct cr_req *r = c->head; r; r = r->next)
        c->tail = r;
    uv_close((uv_handle_t *)&c->timer, close_cb);
    uv_close((uv_handle_t *)&c->tcp, close_cb);
}

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    struct cr_conn *c = req->data;
    if (c->state != CONN_LINGER)
        return;
    if (status < 0) {
        cr_conn_close(c);
        return;
    }
    /* Keep reading (and dropping) what the client still sends, so our
     * answer is not destroyed by an RST from unread input. */
    arm(c, TIMER_LINGER, LINGER_MS);
    read_start(c);
}

static void conn_linger(struct cr_conn *c)
{
    c->state = CONN_LINGER;
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, shutdown_cb) < 0)
        cr_conn_close(c);
}

static bool conn_idle(const struct cr_conn *c)
{
    return !c->head && !c->cur;
}

/* Called by response.c after a write completed and its request was freed. */
void cr_conn_after_write(struct cr_conn *c)
{
    if (c->state == CONN_CLOSING && !c->head) {
        conn_linger(c);
        return;
    }
    /* A draining server does not close a connection here even when it is
     * idle: this response said keep-alive, so the client may have sent its
     * next request already. That request gets the Connection: close answer;
     * a client that sends nothing is closed after the idle grace. */
    if (c->state != CONN_OPEN)
        return;
    if (c->paused && c->depth < c->srv->cfg.max_pipeline) {
        c->paused = false;
        cr_http_parse_resume(c->hp);
        char *rest = c->pending;
        size_t n = c->pending_len;
        c->pending = NULL;
        c->pending_len = 0;
        if (n) /* zero bytes would mean EOF to the parser */
            cr_conn_feed(c, rest, n);
        free(rest);
        if (c->state == CONN_OPEN && !c->paused)
            read_start(c);
    }
    if (c->state == CONN_OPEN && conn_idle(c))
        arm(c, TIMER_IDLE, idle_ms(c->srv));
}

/* ---- timers ---- */

/* True when the client's next bytes already sit in the socket: closing now
 * would reset the connection under a request that has arrived. */
static bool input_waiting(struct cr_conn *c)
{
    uv_os_fd_t fd;
    char b;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) < 0)
        return false;
    return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

static void timer_cb(uv_timer_t *t)
{
    struct cr_conn *c = t->data;
    c->timer_due = 0;
    if (c->timer_kind == TIMER_NONE)
        return;
    uint64_t now = uv_now(c->srv->loop);
    if (now < c->deadline) { /* the deadline moved later since the timer was set */
        c->timer_due = c->deadline;
        uv_timer_start(&c->timer, timer_cb, c->deadline - now, 0);
        return;
    }
    enum timer_kind kind = c->timer_kind;
    c->timer_kind = TIMER_NONE;
    switch (kind) {
    case TIMER_HEADERS:
    case TIMER_REQUEST:
        if (c->state == CONN_OPEN && c->cur) {
            cr_conn_fail(c, 408,
                         kind == TIMER_HEADERS ? "header read timeout" : "request read timeout");
            return;
        }
        break;
    case TIMER_IDLE:
        if (c->state != CONN_OPEN || !conn_idle(c))
            break;
        if (c->reading && input_waiting(c))
            arm(c, TIMER_IDLE, INPUT_WAIT_MS); /* read in this loop turn */
        else
            cr_conn_close(c);
        break;
    case TIMER_LINGER:
        cr_conn_close(c);
        break;
    case TIMER_NONE:
        break;
    }
}

/* One deadline per connection, kept lazily: the libuv timer is moved only
 * when a deadline comes earlier than the one it is set for; set for an
 * earlier one, it fires, finds the later deadline and sets itself again.
 * A keep-alive request moves its connection through four deadlines
 * (headers, body, none, idle), each later than the last, so it costs no
 * timer-heap operation and no clock read (uv_now is the loop's time). */
static void arm(struct cr_conn *c, enum timer_kind kind, uint64_t ms)
{
    if (ms == 0)
        kind = TIMER_NONE; /* a zero timeout means none */
    c->timer_kind = kind;
    if (kind == TIMER_NONE)
        return; /* a timer still set fires and finds nothing to do */
    c->deadline = uv_now(c->srv->loop) + ms;
    if (c->timer_due && c->timer_due <= c->deadline)
        return;
    c->timer_due = c->deadline;
    uv_timer_start(&c->timer, timer_cb, ms, 0);
}

/* ---- reading ---- */

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct cr_conn *c = h->data;
    buf->base = cr_bufpool_get(&c->srv->reads);
    buf->len = buf->base ? c->srv->reads.size : 0;
}

void cr_conn_feed(struct cr_conn *c, const char *data, size_t len)
{
    size_t used = 0;
    int r = cr_http_parse_feed(c->hp, data, len, &used);
    if (r == -EAGAIN) {
        /* Pipeline full: keep the rest until a write frees a slot. */
        if (used < len) {
            c->pending = malloc(len - used);
            if (!c->pending) {
                cr_conn_close(c);
                return;
            }
            memcpy(c->pending, data + used, len - used);
            c->pending_len = len - used;
        }
        if (c->reading) {
            uv_read_stop((uv_stream_t *)&c->tcp);
            c->reading = false;
        }
    } else if (r < 0 && c->state == CONN_OPEN) {
        cr_conn_fail(c, 400, cr_http_parse_error(c->hp));
    }
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct cr_conn *c = s->data;
    if (n > 0 && c->state == CONN_OPEN)
        cr_conn_feed(c, buf->base, (size_t)n);
    cr_bufpool_put(&c->srv->reads, buf->base);
    if (n >= 0 || c->state == CONN_CLOSED)
        return;
    if (n == UV_EOF && c->state == CONN_OPEN) {
        /* Half-close: answer what was asked, then close. A cut-off request
         * cannot be answered. */
        if (c->cur) {
            cr_conn_close(c);
            return;
        }
        c->state = CONN_CLOSING;
        uv_read_stop(s);
        c->reading = false;
        if (!c->head)
            cr_conn_close(c);
        return;
    }
    if (n == UV_EOF && c->state == CONN_CLOSING) {
        uv_read_stop(s);
        c->reading = false;
        return;
    }
    cr_conn_close(c);
}

static void read_start(struct cr_conn *c)
{
    if (!c->reading && uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
        c->reading = true;
}

/* ---- parser callbacks ---- */

static int p_begin(void *ud)
{
    struct cr_conn *c = ud;
    c->cur = cr_req_new(c);
    if (!c->cur)
        return -1;
    c->hdr_bytes = 0;
    c->field_len = 0;
    c->expect_continue = false;
    arm(c, TIMER_HEADERS, c->srv->cfg.header_timeout_ms);
    return 0;
}

static bool header_room(struct cr_conn *c, size_t len)
{
    c->hdr_bytes += len;
    if (c->hdr_bytes <= c->srv->cfg.max_header)
        return true;
    cr_conn_fail(c, 431, "request header fields too large");
    return false;
}

static int p_url(void *ud, const char *at, size_t len)
{
    struct cr_conn *c = ud;
    struct cr_req *r = c->cur;
    if (!header_room(c, len))
        return -1;
    size_t need = r->url_len + len + 1;
    char *u = r->url;
    if (need <= sizeof(r->url_small)) {
        u = r->url_small;
    } else if (u == r->url_small || !u) {
        if (!(u = malloc(need)))
            return -1;
        memcpy(u, r->url_small, r->url_len);
    } else if (!(u = realloc(u, need))) {
        return -1;
    }
    memcpy(u + r->url_len, at, len);
    r->url = u;
    r->url_len += len;
    u[r->url_len] = '\0';
    return 0;
}

static int p_field(void *ud, const char *at, size_t len)
{
    struct cr_conn *c = ud;
    if (!header_room(c, len + 4)) /* ": " and CRLF count too */
        return -1;
    /* A name may arrive in pieces; after a value, a new name starts. */
    if (c->field_len == SIZE_MAX)
        c->field_len = 0;
    for (size_t i = 0; i < len && c->field_len < sizeof(c->field) - 1; i++)
        c->field[c->field_len++] = (char)(at[i] | 0x20);
    c->field[c->field_len] = '\0';
    return 0;
}

static int p_value(void *ud, const char *at, size_t len)
{
    struct cr_conn *c = ud;
    if (!header_room(c, len))
        return -1;
    if (c->field_len != SIZE_MAX && strcmp(c->field, "expect") == 0 && len >= 12 &&
        strncasecmp(at, "100-continue", 12) == 0)
        c->expect_continue = true;
    c->field_len = SIZE_MAX;
    return 0;
}

static void split_url(struct cr_req *r)
{
    if (!r->url) {
        memcpy(r->url_small, "/", 2);
        r->url = r->url_small;
        r->url_len = 1;
    }
    char *q = r->url ? strchr(r->url, '?') : NULL;
    r->path = r->url;
    if (q) {
        *q = '\0';
        r->query = q + 1;
    } else {
        r->query = r->url ? r->url + r->url_len : NULL;
    }
}

static int p_headers(void *ud)
{
    struct cr_conn *c = ud;
    struct cr_req *r = c->cur;
    split_url(r);
    if (!r->path)
        return -1;
    r->method = cr_http_parse_method(c->hp);
    r->head = strcmp(r->method, "HEAD") == 0;
    if (cr_http_parse_version(c->hp) / 10 != 1) {
        cr_conn_fail(c, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
        return -1;
    }
    if (cr_http_parse_is_upgrade(c->hp)) {
        cr_conn_fail(c, 501, "protocol upgrades are not supported");
        return -1;
    }
    uint64_t cl;
    if (cr_http_parse_content_length(c->hp, &cl) == 0 && cl > c->srv->cfg.max_body) {
        cr_conn_fail(c, 413, "request body too large");
        return -1;
    }
    if (c->expect_continue && !c->head) {
        /* Only when nothing is queued ahead, or the interim answer would
         * overtake an earlier response. Clients send the body anyway later. */
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        uv_buf_t b = uv_buf_init((char *)cont, sizeof(cont) - 1);
        uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
    }
    arm(c, TIMER_REQUEST, c->srv->cfg.request_timeout_ms);
    return 0;
}

/* A declared chunk that cannot fit is refused now: waiting for its bytes
 * would only end in the request timeout. */
static int p_chunk(void *ud, uint64_t size)
{
    struct cr_conn *c = ud;
    if (c->cur && size > c->srv->cfg.max_body - c->cur->body_len) {
        cr_conn_fail(c, 413, "request body too large");
        return -1;
    }
    return 0;
}

static int p_body(void *ud, const char *at, size_t len)
{
    struct cr_conn *c = ud;
    struct cr_req *r = c->cur;
    if (r->body_len + len > c->srv->cfg.max_body) {
        cr_conn_fail(c, 413, "request body too large");
        return -1;
    }
    if (r->body_len + len + 1 > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 4096;
        while (cap < r->body_len + len + 1)
            cap *= 2;
        if (cap > c->srv->cfg.max_body + 1)
            cap = c->srv->cfg.max_body + 1;
        char *b = realloc(r->body, cap);
        if (!b)
            return -1;
        r->body = b;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, at, len);
    r->body_len += len;
    r->body[r->body_len] = '\0';
    return 0;
}

/* The request goes to the handler: it is the one being served now, as far
 * as the worker page tells (a handler that blocks the loop blocks in it). */
static void dispatched(struct cr_server *srv, struct cr_req *r)
{
    r->started_ns = uv_hrtime();
    r->live = true;
    r->live_next = NULL;
    r->live_prev = srv->live_tail;
    if (srv->live_tail)
        srv->live_tail->live_next = r;
    else
        srv->live_head = r;
    srv->live_tail = r;
    cr_trace_request((uint32_t)srv->stats.inflight, srv->stats.requests, r->started_ns, r->method,
                     r->path ? r->path : "", r->query ? r->query : "");
}

void cr_server_request_done(struct cr_server *srv, struct cr_req *r)
{
    if (!r->live)
        return;
    r->live = false;
    bool newest = srv->live_tail == r;
    if (r->live_prev)
        r->live_prev->live_next = r->live_next;
    else
        srv->live_head = r->live_next;
    if (r->live_next)
        r->live_next->live_prev = r->live_prev;
    else
        srv->live_tail = r->live_prev;
    r->live_prev = r->live_next = NULL;
    if (!newest)
        return; /* the page names a newer one, still being served */
    const struct cr_req *t = srv->live_tail;
    if (t)
        cr_trace_request((uint32_t)srv->stats.inflight, srv->stats.requests, t->started_ns,
                         t->method, t->path ? t->path : "", t->query ? t->query : "");
    else
        cr_trace_idle((uint32_t)srv->stats.inflight, srv->stats.requests);
}

static int p_complete(void *ud)
{
    struct cr_conn *c = ud;
    struct cr_req *r = c->cur;
    c->cur = NULL;
    r->keep_alive = cr_http_parse_keep_alive(c->hp);
    if (c->tail)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    c->depth++;
    arm(c, TIMER_NONE, 0);
    c->srv->stats.requests++;
    c->srv->stats.inflight++;
    dispatched(c->srv, r);
    if (!r->keep_alive) {
        /* Connection: close: nothing after this request is read. */
        c->state = CONN_CLOSING;
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    c->srv->handler(r, c->srv->ud);
    if (c->state != CONN_OPEN)
        return -1; /* stops the parser; not reported as an error */
    if (c->depth >= c->srv->cfg.max_pipeline) {
        c->paused = true;
        cr_http_parse_pause(c->hp);
    }
    return 0;
}

/* ---- listening ---- */

static void accept_one(struct cr_server *srv)
{
    uv_stream_t *l = (uv_stream_t *)&srv->listener;
    srv->accept_pending = false;
    struct cr_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->srv = srv;
    c->hp = cr_http_parse_new(&parse_cbs, c);
    uv_tcp_init(srv->loop, &c->tcp);
    uv_timer_init(srv->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->stats.connections++;
    if (!c->hp || uv_accept(l, (uv_stream_t *)&c->tcp) < 0) {
        cr_conn_close(c);
        return;
    }
    srv->stats.accepted++;
    uv_tcp_nodelay(&c->tcp, 1);
    read_start(c);
    arm(c, TIMER_IDLE, srv->cfg.keepalive_timeout_ms);
}

static void on_accept_check(uv_check_t *h)
{
    struct cr_server *srv = h->data;
    uv_check_stop(h);
    if (srv->accept_pending)
        accept_one(srv);
}

/* libuv hands over one kernel-accepted connection and stops watching the
 * listener until uv_accept() takes it. Taking it only at the end of this
 * loop turn means a worker accepts one connection per turn: it never
 * grabs a batch of connections and then runs one long request while the
 * rest wait behind it — the other workers, idle in epoll, take them. */
static void on_connection(uv_stream_t *l, int status)
{
    struct cr_server *srv = l->data;
    if (status < 0 || srv->draining)
        return;
    srv->accept_pending = true;
    uv_check_start(&srv->accept_check, on_accept_check);
}

static int start_listening(struct cr_server *srv, int backlog)
{
    srv->listener.data = srv;
    uv_check_init(srv->loop, &srv->accept_check);
    srv->accept_check.data = srv;
    srv->check_open = true;
    int r = uv_listen((uv_stream_t *)&srv->listener, backlog, on_connection);
    if (r == 0)
        srv->listening = true;
    return r;
}

int cr_server_adopt(struct cr_server *srv, int fd)
{
    int r = uv_tcp_init(srv->loop, &srv->listener);
    if (r < 0)
        return r;
    srv->listener_open = true;
    r = uv_tcp_open(&srv->listener, fd);
    if (r < 0)
        return r;
    /* Already listening: uv_listen only registers for accept; the backlog
     * given here does not shrink the inherited one much. */
    return start_listening(srv, SOMAXCONN);
}

int cr_server_listen(struct cr_server *srv, const char *host, int port, int backlog)
{
    struct sockaddr_storage ss;
    int r = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    if (r < 0)
        r = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss);
    if (r < 0)
        return r;
    r = uv_tcp_init(srv->loop, &srv->listener);
    if (r < 0)
        return r;
    srv->listener_open = true;
    r = uv_tcp_bind(&srv->listener, (struct sockaddr *)&ss, 0);
    if (r < 0)
        return r;
    return start_listening(srv, backlog);
}

/* ---- drain ---- */

static void listener_closed(uv_handle_t *h)
{
    struct cr_server *srv = h->data;
    srv->listener_open = false;
    cr_server_check_drained(srv);
}

static void check_closed(uv_handle_t *h)
{
    struct cr_server *srv = h->data;
    srv->check_open = false;
    cr_server_check_drained(srv);
}

void cr_server_check_drained(struct cr_server *srv)
{
    if (!srv->draining || srv->listener_open || srv->check_open || srv->conns ||
        srv->stats.inflight)
        return;
    void (*done)(void *) = srv->drained;
    srv->drained = NULL;
    if (done)
        done(srv->drained_ud);
}

void cr_server_drain(struct cr_server *srv, void (*done)(void *ud), void *ud)
{
    if (srv->draining)
        return;
    srv->draining = true;
    srv->drained = done;
    srv->drained_ud = ud;
    /* A connection the kernel already handed us is served, not reset. */
    if (srv->accept_pending)
        accept_one(srv);
    if (srv->check_open)
        uv_close((uv_handle_t *)&srv->accept_check, check_closed);
    if (srv->listener_open) {
        srv->listener.data = srv;
        uv_close((uv_handle_t *)&srv->listener, listener_closed);
    }
    /* An idle connection, fresh or kept alive, may have a request on the
     * wire (or already in the socket, unread while the loop was busy):
     * closing it now would answer that request with a reset. Each gets the
     * grace; a request arriving within it is answered with Connection:
     * close, at a request boundary. In-flight requests and half-read ones
     * (bounded by their own timers) end the same way when answered. */
    for (struct cr_conn *c = srv->conns; c; c = c->next)
        if (c->state == CONN_OPEN && conn_idle(c))
            arm(c, TIMER_IDLE, idle_ms(srv));
    cr_server_check_drained(srv);
}

void cr_server_close_all(struct cr_server *srv)
{
    for (struct cr_conn *c = srv->conns; c; c = c->next)
        cr_conn_close(c);
}

void cr_server_free(struct cr_server *srv)
{
    if (!srv)
        return;
    cr_bufpool_done(&srv->reads);
    cr_req_spares_free(srv);
    free(srv);
}

const struct cr_server_stats *cr_server_stats(const struct cr_server *srv)
{
    return &srv->stats;
}
