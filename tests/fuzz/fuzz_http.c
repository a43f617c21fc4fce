/* The reference worker's request handling, end to end on one connection:
 * the input is what a client sends on a loopback TCP connection (then it
 * half-closes), served by the real server (worker/server.c: parser
 * callbacks, header and body limits, pipelining, 100-continue, 4xx/5xx
 * answers, linger), the real router (routing, methods, query parsing and
 * validation) and the real response path (response.c). Checks: the
 * server answers or closes within a bound (no hang), what comes back is
 * HTTP/1.1 responses, and the connection is freed afterwards.
 *
 * Endpoints with effects beyond the request (CPU burns, timers, the
 * thread pool, memory growth up to the heap-limit abort, child processes,
 * the /file data) are answered by the harness instead of the router: a
 * fuzzer would otherwise spend its time in /heavy?ms=60000 or abort on
 * purpose in /alloc. Their query validation is the same code as the
 * others' (query_parse, cr_query_uint) and is reached through them. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "router.h"

#define CHECK(x) ((x) ? (void)0 : abort())
#define HANG_MS  10000

/* Only mem.c's /alloc reaches this, and the harness never routes there. */
_Noreturn void cr_app_heap_fatal(struct cr_app *app, size_t want)
{
    (void)app;
    fprintf(stderr, "fuzz-http: heap limit reached (%zu bytes wanted)\n", want);
    abort();
}

static struct cr_app app;
static uv_loop_t loop;
static struct sockaddr_in addr;

static const char *const effectful[] = {"/heavy", "/slow",   "/hash", "/hashsync", "/file",
                                        "/alloc", "/buffer", "/exec", NULL};

static void handler(struct cr_req *req, void *ud)
{
    for (const char *const *p = effectful; *p; p++)
        if (strcmp(req->path, *p) == 0) {
            cr_req_respond(req, 200, "text/plain", "not run under the fuzzer\n", 25);
            return;
        }
    cr_router_handle(req, ud);
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    CHECK(uv_loop_init(&loop) == 0);
    char *argv[] = {"corral-worker", NULL}, err[256];
    CHECK(cr_wopts_parse(&app.opts, 1, argv, 2, err, sizeof(err)) == 0);
    app.loop = &loop;
    app.worker_id = "1";
    app.generation = "1";
    app.start_ns = uv_hrtime();
    cr_datafile_init(&app.file, &loop, app.opts.file_size);
    cr_heap_init(&app.heap, app.opts.heap_limit);
    CHECK(cr_notify_init(&app.notify) == 0);
    /* Limits small enough for inputs of a few KB to cross them. */
    struct cr_server_config cfg = {
        .max_header = 2048,
        .max_body = 1024,
        .header_timeout_ms = app.opts.header_timeout_ms,
        .request_timeout_ms = app.opts.request_timeout_ms,
        .keepalive_timeout_ms = app.opts.keepalive_timeout_ms,
        .max_pipeline = 4,
        .worker_id = app.worker_id,
    };
    CHECK(cr_server_new(&loop, &cfg, handler, &app, &app.srv) == 0);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(addr);
    CHECK(bind(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0 && listen(fd, 64) == 0 &&
          getsockname(fd, (struct sockaddr *)&addr, &sl) == 0);
    CHECK(cr_server_adopt(app.srv, fd) == 0);
    CHECK(cr_loopmon_start(&app.mon, &loop, app.opts.loop_resolution_ms) == 0);
}

struct client {
    uv_poll_t poll;
    int fd;
    const uint8_t *data;
    size_t size, sent;
    bool wr_done, done;
    char head[9]; /* the first bytes received */
    size_t got;
};

static void on_client(uv_poll_t *p, int status, int events)
{
    struct client *c = p->data;
    if (!c->wr_done && (events & UV_WRITABLE)) {
        ssize_t n = c->sent < c->size ? send(c->fd, c->data + c->sent, c->size - c->sent,
                                             MSG_NOSIGNAL | MSG_DONTWAIT)
                                      : 0;
        if (n > 0)
            c->sent += (size_t)n;
        if (c->sent == c->size || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            shutdown(c->fd, SHUT_WR);
            c->wr_done = true;
            uv_poll_start(p, UV_READABLE, on_client);
        }
    }
    if (events & UV_READABLE || status < 0) {
        char buf[16384];
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            size_t k = (size_t)n < sizeof(c->head) - c->got ? (size_t)n : sizeof(c->head) - c->got;
            memcpy(c->head + c->got, buf, k);
            c->got += k;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
            c->done = true;
            uv_poll_stop(p);
        }
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void closed(uv_handle_t *h)
{
    (void)h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!app.srv)
        setup();
    struct client c = {.data = data, .size = size};
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(c.fd >= 0 && connect(c.fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    CHECK(fcntl(c.fd, F_SETFL, O_NONBLOCK) == 0);
    CHECK(uv_poll_init_socket(&loop, &c.poll, c.fd) == 0);
    c.poll.data = &c;
    uv_poll_start(&c.poll, UV_READABLE | UV_WRITABLE, on_client);
    uint64_t deadline = now_ms() + HANG_MS;
    const struct cr_server_stats *st = cr_server_stats(app.srv);
    /* Until the server has answered and closed, and freed the connection. */
    while (!c.done || st->connections) {
        if (c.done && c.fd >= 0) {
            uv_close((uv_handle_t *)&c.poll, closed);
            close(c.fd);
            c.fd = -1;
        }
        uv_run(&loop, UV_RUN_ONCE);
        if (now_ms() > deadline) {
            fprintf(stderr, "fuzz-http: no close within %d ms (sent %zu of %zu)\n", HANG_MS, c.sent,
                    c.size);
            abort();
        }
    }
    if (c.fd >= 0) {
        uv_close((uv_handle_t *)&c.poll, closed);
        close(c.fd);
    }
    uv_run(&loop, UV_RUN_NOWAIT); /* runs the poll's close callback */
    if (c.got)
        CHECK(c.got >= 5 && memcmp(c.head, "HTTP/", 5) == 0);
    if (c.got >= sizeof(c.head))
        CHECK(memcmp(c.head, "HTTP/1.1 ", 9) == 0);
    CHECK(st->inflight == 0);
    return 0;
}
