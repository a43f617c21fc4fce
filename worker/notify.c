#include "notify.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

int cr_notify_init(struct cr_notify *n)
{
    n->kind = CR_NOTIFY_NONE;
    n->fd = -1;
    const char *s = getenv("NOTIFY_SOCKET");
    if (s && *s) {
        n->kind = CR_NOTIFY_DATAGRAM;
        return 0;
    }
    s = getenv("CORRAL_NOTIFY_FD");
    if (!s || !*s)
        return 0;
    char *end;
    errno = 0;
    long fd = strtol(s, &end, 10);
    if (errno || *end || fd < 0 || fd > INT_MAX || fcntl((int)fd, F_GETFD) < 0)
        return -EBADF;
    /* Ours alone from here: children must not inherit it, and a slow reader
     * must not block the loop. */
    if (fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0)
        return -errno;
    int fl = fcntl((int)fd, F_GETFL);
    if (fl < 0 || fcntl((int)fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return -errno;
    n->kind = CR_NOTIFY_STREAM;
    n->fd = (int)fd;
    unsetenv("CORRAL_NOTIFY_FD");
    return 0;
}

void cr_notify_done(struct cr_notify *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
    n->kind = CR_NOTIFY_NONE;
}

/* A started message must be finished, or the reader loses framing: wait
 * (bounded) for room for the rest. */
static int write_all(int fd, const char *p, size_t len)
{
    bool started = false;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w > 0) {
            p += w;
            len -= (size_t)w;
            started = true;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return -errno;
        if (!started)
            return -EAGAIN;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        if (poll(&pfd, 1, 100) <= 0)
            return -ETIMEDOUT;
    }
    return 1;
}

int cr_notify_send(struct cr_notify *n, const char *msg)
{
    size_t len = strlen(msg);
    if (len + 2 > CR_NOTIFY_MAX)
        return -EMSGSIZE;
    switch (n->kind) {
    case CR_NOTIFY_DATAGRAM:
        return sd_notify(0, msg);
    case CR_NOTIFY_STREAM: {
        char buf[CR_NOTIFY_MAX];
        memcpy(buf, msg, len);
        buf[len] = '\n';
        buf[len + 1] = '\n';
        return write_all(n->fd, buf, len + 2);
    }
    case CR_NOTIFY_NONE:
        break;
    }
    return 0;
}
