/* The control socket's transport (supervisor/inputs/control.c) end to end: the
 * input is what a client writes on one connection to corrald's real
 * control socket (then it half-closes), on the same harmless supervisor as
 * fuzz_control.c. Reaches what the handler harness cannot: line framing
 * (LF, CRLF, blank lines, an unterminated last line answered at EOF, many
 * requests in one read or one request over many), `events` subscribers
 * and their EOF, and closing. Checks: the server answers and closes
 * within a bound, every line it sends is valid UTF-8 holding a JSON
 * object, there is at most one response per input line, and no client
 * is left holding a slot (no `busy` answer after thousands of clients). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "control_cmd.h"
#include "fixture_sup.h"
#include "internal.h"

#define CHECK(x) ((x) ? (void)0 : abort())
#define HANG_MS  10000
#define OUT_MAX  (8u << 20)

static struct cr_supervisor *sup;
static struct cr_control *ctl;
static struct sockaddr_un addr;
static char dir[] = "/tmp/corral-fuzz-XXXXXX";

static void cleanup(void)
{
    char p[sizeof(dir) + 16];
    cr_control_close(ctl); /* unlinks the socket and its lock */
    uv_run(sup->loop, UV_RUN_NOWAIT);
    snprintf(p, sizeof(p), "%s/c.sock", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/c.sock.lock", dir);
    unlink(p);
    rmdir(dir);
}

static void setup(void)
{
    sup = fuzz_sup_stopping();
    CHECK(mkdtemp(dir) != NULL);
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/c.sock", dir);
    sup->cfg.control = strdup(addr.sun_path);
    CHECK(cr_control_open(sup->loop, &sup->cfg, &cr_control_core_ops, fuzz_sup_core(), &ctl) == 0);
    atexit(cleanup);
}

struct client {
    uv_poll_t poll;
    int fd;
    const uint8_t *data;
    size_t size, sent;
    bool wr_done, done;
    char *out;
    size_t len;
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
        char buf[65536];
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
            CHECK(c->len + (size_t)n <= OUT_MAX);
            memcpy(c->out + c->len, buf, (size_t)n);
            c->len += (size_t)n;
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

static void check_output(const char *out, size_t len, const uint8_t *in, size_t size)
{
    size_t lines_in = 1;
    for (size_t i = 0; i < size; i++)
        lines_in += in[i] == '\n';
    size_t lines = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(out + i, '\n', len - i);
        CHECK(nl != NULL); /* every line the server sends is whole */
        size_t n = (size_t)(nl - (out + i));
        CHECK(cr_utf8_valid_prefix(out + i, n) == n);
        cJSON *o = cJSON_ParseWithLength(out + i, n);
        CHECK(cJSON_IsObject(o));
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "error");
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
        CHECK(!cJSON_IsString(code) || strcmp(code->valuestring, CR_E_BUSY) != 0);
        lines += cJSON_GetObjectItemCaseSensitive(o, "ok") != NULL; /* not events */
        cJSON_Delete(o);
        i += n + 1;
    }
    CHECK(lines <= lines_in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *out;
    if (!sup) {
        setup();
        CHECK((out = malloc(OUT_MAX)) != NULL);
    }
    struct client c = {.data = data, .size = size, .out = out};
    c.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(c.fd >= 0 && connect(c.fd, (struct sockaddr *)&addr, sizeof(addr)) == 0);
    CHECK(fcntl(c.fd, F_SETFL, O_NONBLOCK) == 0);
    CHECK(uv_poll_init_socket(sup->loop, &c.poll, c.fd) == 0);
    c.poll.data = &c;
    uv_poll_start(&c.poll, UV_READABLE | UV_WRITABLE, on_client);
    uint64_t deadline = now_ms() + HANG_MS;
    while (!c.done) {
        uv_run(sup->loop, UV_RUN_ONCE);
        if (now_ms() > deadline) {
            fprintf(stderr, "fuzz-control-socket: no close within %d ms (sent %zu of %zu)\n",
                    HANG_MS, c.sent, c.size);
            abort();
        }
    }
    uv_close((uv_handle_t *)&c.poll, closed);
    close(c.fd);
    uv_run(sup->loop, UV_RUN_NOWAIT); /* the poll's close, the server's side */
    check_output(out, c.len, data, size);
    fuzz_sup_check(sup);
    return 0;
}
