/* exitnotice: the taskstats socket (see exitnotice.h). */
#include "exitnotice.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "textfile.h"

#define REPLY_WAIT_MS 500
/* Room for the exits of a burst: ~400 bytes each, a restart storm of a few
 * thousand threads. SO_RCVBUFFORCE passes rmem_max as root. */
#define RCVBUF_BYTES (4 << 20)
#define MAX_READS_PER_TURN 64

struct cr_exitnotice {
    uv_poll_t poll;
    int fd;
    uint16_t family;
    uint32_t seq;
    char cpulist[256];
    cr_exitnotice_fn fn;
    void *ctx;
    bool dropped; /* the kernel dropped messages once (logged once) */
    char failed[96]; /* why the poll stopped; empty while it runs */
    unsigned char buf[16384];
};

static int send_msg(int fd, const void *msg, size_t len)
{
    struct sockaddr_nl to = {.nl_family = AF_NETLINK};
    ssize_t n;
    do
        n = sendto(fd, msg, len, 0, (const struct sockaddr *)&to, sizeof(to));
    while (n < 0 && errno == EINTR);
    return n == (ssize_t)len ? 0 : -(n < 0 ? errno : EIO);
}

/* One datagram within REPLY_WAIT_MS; its length, or -errno. */
static ssize_t recv_reply(struct cr_exitnotice *en)
{
    struct pollfd p = {.fd = en->fd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, REPLY_WAIT_MS);
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return -ETIMEDOUT;
    ssize_t n = recv(en->fd, en->buf, sizeof(en->buf), MSG_DONTWAIT);
    return n < 0 ? -errno : n;
}

/* The possible cpus, as the kernel lists them ("0-1"): a listener's mask
 * must be a subset of them. */
static void possible_cpus(char *buf, size_t len)
{
    if (cr_read_text("/sys/devices/system/cpu/possible", buf, len) > 0) {
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0])
            return;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_CONF);
    snprintf(buf, len, "0-%ld", ncpu > 1 ? ncpu - 1 : 0);
}

static int ask_family(struct cr_exitnotice *en)
{
    size_t len = cr_taskstats_getfamily_msg(en->buf, sizeof(en->buf), ++en->seq);
    int r = send_msg(en->fd, en->buf, len);
    if (r < 0)
        return r;
    ssize_t n = recv_reply(en);
    if (n < 0)
        return (int)n;
    int error;
    en->family = cr_taskstats_family_id(en->buf, (size_t)n, &error);
    return en->family ? 0 : error ? error : -ENOENT;
}

/* Registers (on) or deregisters the listener; waits for the kernel's
 * answer when registering, reading past any exit message before it. */
static int listen_cpus(struct cr_exitnotice *en, bool on)
{
    uint32_t seq = ++en->seq;
    size_t len = cr_taskstats_listen_msg(en->buf, sizeof(en->buf), en->family, seq, en->cpulist, on);
    if (!len)
        return -ENAMETOOLONG;
    int r = send_msg(en->fd, en->buf, len);
    if (r < 0 || !on)
        return r;
    for (int i = 0; i < MAX_READS_PER_TURN; i++) {
        ssize_t n = recv_reply(en);
        if (n < 0 && n != -ENOBUFS)
            return (int)n;
        int error;
        if (n > 0 && cr_taskstats_ack(en->buf, (size_t)n, seq, &error))
            return error;
    }
    return -ETIMEDOUT;
}

static void closed(uv_handle_t *h)
{
    struct cr_exitnotice *en = h->data;
    close(en->fd);
    free(en);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct cr_exitnotice *en = h->data;
    (void)events;
    if (status < 0) {
        cr_log(CR_LOG_WARNING, "exit notices stopped (%s): spares wait for the reap",
               uv_strerror(status));
        snprintf(en->failed, sizeof(en->failed), "%s", uv_strerror(status));
        uv_poll_stop(h);
        return;
    }
    for (int i = 0; i < MAX_READS_PER_TURN; i++) {
        ssize_t n = recv(en->fd, en->buf, sizeof(en->buf), MSG_DONTWAIT);
        if (n < 0) {
            if (errno == ENOBUFS) { /* the kernel dropped some: their pidfds still tell */
                if (!en->dropped)
                    cr_log(CR_LOG_NOTICE, "exit notices: the kernel dropped some (its socket "
                                          "buffer was full); those deaths are seen at the reap");
                en->dropped = true;
                continue;
            }
            if (errno == EINTR)
                continue;
            return; /* EAGAIN: all read */
        }
        cr_taskstats_scan(en->buf, (size_t)n, en->family, en->fn, en->ctx);
    }
}

struct cr_exitnotice *cr_exitnotice_open(uv_loop_t *loop, cr_exitnotice_fn fn, void *ctx,
                                         char *why, size_t whylen)
{
    struct cr_exitnotice *en = calloc(1, sizeof(*en));
    if (!en) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    en->fn = fn;
    en->ctx = ctx;
    en->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_GENERIC);
    const char *step = "socket";
    int r = en->fd < 0 ? -errno : 0;
    struct sockaddr_nl self = {.nl_family = AF_NETLINK};
    if (!r && bind(en->fd, (struct sockaddr *)&self, sizeof(self)) < 0) {
        step = "bind";
        r = -errno;
    }
    if (!r) {
        int size = RCVBUF_BYTES;
        if (setsockopt(en->fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
            (void)setsockopt(en->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
        step = "the taskstats family";
        r = ask_family(en);
    }
    if (!r) {
        possible_cpus(en->cpulist, sizeof(en->cpulist));
        step = "registering a listener";
        r = listen_cpus(en, true);
    }
    if (!r) {
        step = "polling it";
        r = uv_poll_init(loop, &en->poll, en->fd);
        if (!r) {
            en->poll.data = en;
            r = uv_poll_start(&en->poll, UV_READABLE, on_readable);
            if (r < 0) {
                snprintf(why, whylen, "%s: %s", step, uv_strerror(r));
                uv_close((uv_handle_t *)&en->poll, closed);
                return NULL;
            }
            return en;
        }
    }
    snprintf(why, whylen, "%s: %s", step, strerror(-r));
    if (en->fd >= 0)
        close(en->fd);
    free(en);
    return NULL;
}

void cr_exitnotice_close(struct cr_exitnotice *en)
{
    if (!en)
        return;
    (void)listen_cpus(en, false); /* the kernel also drops it with the socket */
    uv_close((uv_handle_t *)&en->poll, closed);
}

const char *cr_exitnotice_failed(const struct cr_exitnotice *en)
{
    return en && en->failed[0] ? en->failed : NULL;
}
